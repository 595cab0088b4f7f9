#!/usr/bin/env bash
# Real-kernel test: what another user (or a damaged host) plants in the collection's runtime state
# never makes root change anything outside the collection's own files (issue 24).
#
# Usage: tests/integration/hostile.sh      (as root, on a host or VM with a writable /sys)
#
# Every case runs in a private mount namespace (unshare -m) with a fresh tmpfs over /run, so the
# host's /run is untouched. The attacker's steps run as an unprivileged user (nobody, through
# setpriv); root then runs the modules (the module files run by Python directly, as AnsiballZ
# does) on a loop device. A case passes when the module fails (or succeeds) with the expected
# message and no traceback, and nothing outside the collection's own files changed: the victim
# files' checksums and the device's read_ahead_kb are as before.
#
#   lock directory created first by another user (0777, theirs), with a symlink planted in it
#   lock directory that is a symbolic link to a victim directory
#   lock file that is a hard link to a victim file, or a FIFO
#   another user trying to create (and so hold) a lock
#   sweep state with original_kb true / 1048576 / nested 100,000 levels / a FIFO
#   snapshot and sweep record that are FIFOs or nested 100,000 levels (tuning_facts)
#
# The symlink and hard-link cases run with fs.protected_symlinks and fs.protected_hardlinks on and
# off. Those sysctls are not namespaced (they are global in fs.*): they are set for the case and
# restored in a trap, whatever happens.
#
# Environment: PYTHON, EXTRA_PYTHONPATH, ANSIBLE_COLLECTIONS_PATH, READ_AHEAD_TMP_BASE as for sweep.sh;
#   HOSTILE_USER (default nobody).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh source-path=SCRIPTDIR
. "$here/common.sh"

say() { printf '[hostile %s] %s\n' "$(date +%T)" "$*" >&2; }

tag=${HOSTILE_TAG:-aemops-hostile-it-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}
tmp_base=${READ_AHEAD_TMP_BASE:-/tmp}
work=$tmp_base/$tag
user=${HOSTILE_USER:-nobody}
passed=0
failed=0
dev=
saved_symlinks=
saved_hardlinks=

python=$(it_python "$root")
json_python=$(command -v python3 || echo "$python")

[ "$(id -u)" = 0 ] || { say "run as root: the test attaches a loop device and mounts a tmpfs in a namespace"; exit 2; }
for tool in losetup unshare setpriv mount sha256sum; do
	command -v "$tool" >/dev/null || { say "$tool not found"; exit 2; }
done
id "$user" >/dev/null 2>&1 || { say "user $user does not exist: set HOSTILE_USER"; exit 2; }
if ! unshare -m --propagation private true 2>/dev/null; then
	say "SKIP: unshare -m does not work here (no CAP_SYS_ADMIN?)"
	exit 0
fi
[ -e "$work" ] && { say "$work exists already"; exit 2; }
mkdir -p "$work/collections" || exit 2
chmod 0755 "$work"

it_collections_path "$root" "$work"
pypath=$ANSIBLE_COLLECTIONS_PATH${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH}
mods=ansible_collections.aemops.os_tuning.plugins.modules

cleanup() {
	trap - EXIT INT TERM
	[ -n "$saved_symlinks" ] && sysctl -q -w "fs.protected_symlinks=$saved_symlinks"
	[ -n "$saved_hardlinks" ] && sysctl -q -w "fs.protected_hardlinks=$saved_hardlinks"
	[ -n "$dev" ] && losetup --detach "/dev/$dev" 2>/dev/null
	rm -rf "${work:?}"
	local left
	left=$(losetup --list --noheadings --raw --output NAME,BACK-FILE | grep -F -- "$tag")
	if [ -n "$left" ] || [ -e "$work" ]; then
		say "LEFT BEHIND (tag $tag): $left"
		failed=$((failed + 1))
	fi
	echo "hostile state: $passed passed, $failed failed"
	[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
	exit $?
}
trap cleanup EXIT
trap 'say interrupted; failed=$((failed + 1)); exit 130' INT TERM
saved_symlinks=$(sysctl -n fs.protected_symlinks)
saved_hardlinks=$(sysctl -n fs.protected_hardlinks)

# --- the loop device and the victims -------------------------------------------------------
truncate -s 64M "$work/disk-$tag.img" || exit 1
dev=$(losetup --find --show "$work/disk-$tag.img") || exit 1
dev=${dev#/dev/}
ra_file=/sys/block/$dev/queue/read_ahead_kb
echo 196 >"$ra_file" || exit 1
mkdir -p "$work/victims"
cp /etc/passwd "$work/victims/passwd"
echo 'keep me' >"$work/victims/notes"
victims() { echo "$(sha256sum "$work"/victims/* | sha256sum | cut -c1-16) ra=$(cat "$ra_file")"; }
WANT_RA=196  # what the device must hold after a case: unchanged, unless the case expects the module to work
before=$(victims)
say "loop device $dev (read_ahead_kb=196), victims in $work/victims, attacker $user"

ok() { say "PASS $*"; passed=$((passed + 1)); }
bad() { say "FAIL $*"; failed=$((failed + 1)); }

# run_case NAME EXPECTED-MESSAGE-FRAGMENT MODULE ARGS-JSON ATTACK-SCRIPT
# In a fresh namespace: tmpfs over /run, the attack as $user (and, for what an attacker cannot do
# through the kernel's checks any more, as root: prefixed "root:"), then the module as root.
run_case() {
	local name=$1 want=$2 module=$3 modargs=$4 attack=$5 after=${6:-:} out=$work/$RANDOM.json
	printf '{"ANSIBLE_MODULE_ARGS": %s}\n' "$modargs" >"$work/args.json"
	unshare -m --propagation private /bin/sh -s "$user" "$work" "$out" "$python" "$pypath" "$mods.$module" \
		>"$work/case.log" 2>&1 <<EOS
set -u
mount -t tmpfs -o mode=0755 aemops-hostile-run /run || exit 90
as_user() { setpriv --reuid="\$1" --regid="\$(id -g "\$1")" --clear-groups /bin/sh -c "\$2"; }
$attack
PYTHONPATH=\$5 \$4 -m \$6 \$2/args.json >\$3 2>\$3.err
echo "module rc \$?"
$after
EOS
	local msg
	msg=$("$json_python" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("msg", ""))' "$out" 2>/dev/null)
	local now
	now=$(victims)
	if [ "$now" = "${before% ra=*} ra=$WANT_RA" ] && ! grep -q Traceback "$out" "$out.err" 2>/dev/null &&
		[[ "$msg" == *"$want"* ]] && grep -q '^module rc' "$work/case.log" && ! grep -q ATTACKER "$work/case.log"; then
		ok "$name: $msg"
	else
		bad "$name: victims ${before} -> ${now}; msg: $msg; $(head -c 1500 "$out.err" 2>/dev/null) $(cat "$work/case.log")"
		cp /etc/passwd "$work/victims/passwd"; echo 'keep me' >"$work/victims/notes"
	fi
	echo 196 >"$ra_file"
	rm -f "$out" "$out.err"
}

RA_ARGS="{\"devices\": [\"$dev\"], \"read_ahead_kb\": 32, \"persist\": false, \"rules_file\": \"$work/90-hostile.rules\"}"
RUN=/run/aemops-os-tuning
LOCK=$RUN/etc%2Ftuned%2Faemops-os-tuning%2Ftuned.conf.lock
[ -d /usr/lib/tuned/profiles ] && LOCK=$RUN/etc%2Ftuned%2Fprofiles%2Faemops-os-tuning%2Ftuned.conf.lock

for protect in 1 0; do
	sysctl -q -w "fs.protected_symlinks=$protect" "fs.protected_hardlinks=$protect"
	s="(protected_symlinks=protected_hardlinks=$protect)"
	# The attacker gets there first (possible where that directory is world-writable, as /run/lock is).
	run_case "lock directory owned by $user, a symlink planted in it $s" "/run/aemops-os-tuning is owned by $user" \
		read_ahead "$RA_ARGS" "mkdir -m 0777 $RUN; chown $user $RUN
as_user $user 'ln -s $work/victims/passwd \"$LOCK\"; ln -s $work/victims/notes $RUN/x.lock'"
	run_case "lock directory is a symlink to a victim directory $s" "/run/aemops-os-tuning is a symbolic link" \
		read_ahead "$RA_ARGS" "ln -s $work/victims $RUN"
	# A hard link cannot cross file systems: the victim is a copy of /etc/passwd on the namespace's /run.
	run_case "lock file hard-linked to a victim $s" "has 2 hard links" \
		read_ahead "$RA_ARGS" "mkdir -m 0700 $RUN; cp /etc/passwd /run/victim; ln /run/victim \"$LOCK\"" \
		"cmp -s /run/victim /etc/passwd || echo ATTACKER-CHANGED-THE-VICTIM"
done
sysctl -q -w "fs.protected_symlinks=$saved_symlinks" "fs.protected_hardlinks=$saved_hardlinks"

run_case "lock file planted as a FIFO" "is a FIFO (named pipe), not a regular file" \
	read_ahead "$RA_ARGS" "mkdir -m 0700 $RUN; mkfifo \"$LOCK\""

# Another user cannot create a lock in root's 0700 directory, so cannot hold one (no 120 s wait).
WANT_RA=32  # the module does its work
run_case "another user cannot create (so cannot hold) a lock" "" \
	read_ahead "$RA_ARGS" "mkdir -m 0700 $RUN
if as_user $user 'touch $RUN/x.lock' 2>/dev/null; then echo ATTACKER-GOT-A-LOCK >&2; exit 91; fi"
WANT_RA=196
echo 196 >"$ra_file"

# The sweep's state: values and files that must never be applied.
statename() { # the state file's name for this loop device (sweep.state_paths)
	"$json_python" -c 'import hashlib, sys; print("read-ahead-sweep-%s-%s.json" % (sys.argv[1], hashlib.sha1(sys.argv[2].encode()).hexdigest()[:16]))' \
		"$dev" "ATTR{loop/backing_file}=$work/disk-$tag.img"
}
STATE=$RUN/$(statename)
SW_ARGS="{\"path\": \"/\", \"recover\": true}"
mnt=$work/mnt
mkdir -p "$mnt"
if command -v mkfs.ext4 >/dev/null && mkfs.ext4 -q "/dev/$dev" && mount "/dev/$dev" "$mnt"; then
	SW_ARGS="{\"path\": \"$mnt\", \"recover\": true}"
	ident="ATTR{loop/backing_file}=$work/disk-$tag.img"
	for value in true 1048576 30; do
		run_case "sweep state with original_kb: $value" "left alone" read_ahead_sweep "$SW_ARGS" \
			"mkdir -m 0700 $RUN; printf '{\"device\": \"$dev\", \"original_kb\": $value, \"identity\": \"$ident\"}' >$STATE"
	done
	run_case "sweep state nested 100,000 levels" "nested too deeply" read_ahead_sweep "$SW_ARGS" \
		"mkdir -m 0700 $RUN; $json_python -c 'import sys; sys.stdout.write(\"[\" * 100000)' >$STATE"
	run_case "sweep state planted as a FIFO" "is a FIFO (named pipe)" read_ahead_sweep "$SW_ARGS" \
		"mkdir -m 0700 $RUN; mkfifo $STATE"
	# The sweep's record: a symlink planted at its path refuses the sweep before it touches the device. The record
	# goes under the case's own /run (a root-owned 0755 tmpfs), so that every directory above it passes and the
	# refusal is the link's; under /tmp (1777) it would be refused for /tmp alone.
	run_case "sweep record over a symlink to a victim" "facts/sweep.fact is a symbolic link" read_ahead_sweep \
		"{\"path\": \"$mnt\", \"sweep\": [32], \"duration\": 1, \"size_mb\": 8, \"record\": \"/run/facts/sweep.fact\"}" \
		"mkdir -m 0755 /run/facts; ln -s $work/victims/passwd /run/facts/sweep.fact"
	run_case "sweep record under a world-writable directory" "/tmp, above its directory" read_ahead_sweep \
		"{\"path\": \"$mnt\", \"sweep\": [32], \"duration\": 1, \"size_mb\": 8, \"record\": \"$work/facts/sweep.fact\"}" \
		"mkdir -p $work/facts"
	run_case "sweep state of another device" "it records the device" read_ahead_sweep "$SW_ARGS" \
		"mkdir -m 0700 $RUN; printf '{\"device\": \"$dev\", \"original_kb\": 4096, \"identity\": \"ATTR{loop/backing_file}=/old.img\"}' >$STATE"
	umount "$mnt"
else
	bad "cannot put ext4 on /dev/$dev for the sweep-state cases"
fi

# JSON read back by tuning_facts: the snapshot and the sweep record.
mkdir -p "$work/facts"
run_case "snapshot planted as a FIFO" "" tuning_facts \
	"{\"paths\": [], \"snapshot\": {\"path\": \"$work/facts/fifo.fact\"}}" "mkfifo $work/facts/fifo.fact"
"$json_python" -c 'import sys; sys.stdout.write("{\"a\":" * 100000)' >"$work/facts/deep.fact"
run_case "snapshot nested 100,000 levels" "" tuning_facts \
	"{\"paths\": [], \"snapshot\": {\"path\": \"$work/facts/deep.fact\"}}" ":"
run_case "tuning_facts paths: ['']" "paths[0] is an empty string" tuning_facts "{\"paths\": [\"\"]}" ":"
# The snapshot's writer: a symlink planted where the snapshot goes is never written through (or replaced).
run_case "tuning_snapshot over a symlink to a victim" "" tuning_snapshot \
	"{\"path\": \"$work/facts/link.fact\", \"facts\": {\"block_devices\": {}}}" "ln -s $work/victims/notes $work/facts/link.fact"
