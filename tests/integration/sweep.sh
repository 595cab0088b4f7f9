#!/usr/bin/env bash
# Real-kernel test of aemops.os_tuning.read_ahead_sweep on a loop device.
#
# Usage: tests/integration/sweep.sh        (as root, on a host or VM with a writable /sys)
#
# Attaches a loop device over a backing file, puts ext4 on it, mounts it, sets its
# read_ahead_kb to an odd original value (196 KiB, in no sweep), and runs the module on it
# (the module file run directly by Python, as AnsiballZ runs it: one process, whose pid
# is the one the module records in its state file):
#
#   success          the sweep completes, recommends a swept value, and 196 is back
#   timeout          timeout = values x duration, always too short: fails, 196 is back
#   forced failure   another writer changes read_ahead_kb mid-sweep: fails naming it, 196 back
#   SIGTERM          the run is interrupted: fails, 196 is back; meanwhile a second sweep of the
#                    same device is refused (the lock)
#   SIGKILL          the run is killed mid-sweep: the device is left at a swept value with the
#                    state file; then (a) recover=true restores 196, and (b) after a second kill
#                    the next normal sweep restores 196 first and reports it in "recovered"
#
# Every check reads /sys itself, not what the module returns. Everything created carries
# the run's tag and is removed on exit; exit status 0 when every case passed and nothing
# was left behind.
#
# Environment:
#   PYTHON=path             Python that runs the module (default .venv/bin/python, else python3)
#   EXTRA_PYTHONPATH=dirs   added to its PYTHONPATH, e.g. a directory holding an "ansible" link to
#                           ansible-core 2.16's package, for a Python 2.7 or 3.6 without ansible
#   ANSIBLE_COLLECTIONS_PATH where aemops.os_tuning is found (default .collections, else a
#                           temporary link to this checkout)
#   SWEEP_TAG=tag           tag for what the run creates (default random)
#   READ_AHEAD_TMP_BASE=dir parent of the work directory (default /tmp)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh source-path=SCRIPTDIR
. "$here/common.sh"

say() { printf '[sweep %s] %s\n' "$(date +%T)" "$*" >&2; }

tag=${SWEEP_TAG:-aemops-sweep-it-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}
tmp_base=${READ_AHEAD_TMP_BASE:-/tmp}
work=$tmp_base/$tag
original=196
passed=0
failed=0
dev=
bg=

python=$(it_python "$root")

[ "$(id -u)" = 0 ] || { say "run as root: the test attaches a loop device and writes /sys"; exit 2; }
for tool in losetup mkfs.ext4 mount umount; do
	command -v "$tool" >/dev/null || { say "$tool not found"; exit 2; }
done
[ -e "$work" ] && { say "$work exists already: pick another SWEEP_TAG"; exit 2; }
mkdir -p "$work/mnt" "$work/collections" || exit 2

it_collections_path "$root" "$work"
module=ansible_collections.aemops.os_tuning.plugins.modules.read_ahead_sweep
pypath=$ANSIBLE_COLLECTIONS_PATH${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH}
json_python=$(command -v python3 || echo "$python")   # reads the results, whatever Python runs the module

cleanup() {
	trap - EXIT INT TERM
	if [ -n "$bg" ] && kill -0 "$bg" 2>/dev/null; then
		kill -KILL "$bg" 2>/dev/null
		wait "$bg" 2>/dev/null
	fi
	[ -n "$dev" ] && rm -f /run/aemops-os-tuning/read-ahead-sweep-"$dev"-*.json
	it_release_loop "$dev" "$work" "$tag" || failed=$((failed + 1))
	echo "read_ahead_sweep: $passed passed, $failed failed"
	[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
	exit $?
}
trap cleanup EXIT
trap 'say interrupted; failed=$((failed + 1)); exit 130' INT TERM

# --- the loop device ----------------------------------------------------------
truncate -s 320M "$work/disk-$tag.img" || exit 1
dev=$(losetup --find --show "$work/disk-$tag.img") || exit 1
dev=${dev#/dev/}
mkfs.ext4 -q -L sweep-it "/dev/$dev" || exit 1
mount "/dev/$dev" "$work/mnt" || exit 1
ra_file=/sys/block/$dev/queue/read_ahead_kb
state=/run/aemops-os-tuning/read-ahead-sweep-$dev-$("$json_python" -c 'import hashlib, sys; print(hashlib.sha1(sys.argv[1].encode()).hexdigest()[:16])' "ATTR{loop/backing_file}=$work/disk-$tag.img")
state=$state.json  # named by the device's stable identity (sweep.state_paths)
echo "$original" >"$ra_file" || exit 1
say "loop device $dev on $work/mnt, read_ahead_kb=$(cat "$ra_file") (original), python $python"

ok() { say "PASS $*"; passed=$((passed + 1)); }
bad() { say "FAIL $*"; failed=$((failed + 1)); }
ra_now() { cat "$ra_file"; }

# args JSON (module options) -> file
args() {
	printf '{"ANSIBLE_MODULE_ARGS": {"path": "%s", "size_mb": 64, "volume_type": "custom", "iops": 3000, "throughput_mibps": 125%s}}\n' \
		"$work/mnt" "$1" >"$work/args.json"
}
run_module() { # output file; runs in the foreground
	PYTHONPATH=$pypath "$python" -m "$module" "$work/args.json" >"$1" 2>"$1.err"
}
start_module() { # output file; runs in the background, pid in $bg
	PYTHONPATH=$pypath "$python" -m "$module" "$work/args.json" >"$1" 2>"$1.err" &
	bg=$!
}
field() { # file expression: print a field of the module's JSON result
	"$json_python" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"r": r}))' "$1" "$2" 2>/dev/null
}
wait_swept() { # until the running sweep has changed the device (or 60 s)
	local _
	for _ in $(seq 600); do
		[ "$(ra_now)" != "$original" ] && [ -e "$state" ] && return 0
		kill -0 "$bg" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
clean_fs() { # nothing in the file system but lost+found
	local f
	for f in "$work/mnt"/* "$work/mnt"/.[!.]*; do
		[ -e "$f" ] || continue
		[ "$(basename "$f")" = lost+found ] || return 1
	done
	return 0
}
check_restored() { # case name
	if [ "$(ra_now)" = "$original" ] && [ ! -e "$state" ] && clean_fs; then
		ok "$1: read_ahead_kb=$original restored, no state file, no scratch file"
	else
		bad "$1: read_ahead_kb=$(ra_now), state file $( [ -e "$state" ] && echo present || echo absent), files: $(ls -A "$work/mnt")"
	fi
}

# --- success ------------------------------------------------------------------
args ', "sweep": [512, 64, 16], "duration": 1'
if run_module "$work/success.json" && [ "$(field "$work/success.json" 'r["recommended_kb"] in (512, 64, 16)')" = True ]; then
	ok "success: recommended $(field "$work/success.json" 'r["recommended_kb"]') KiB: $(field "$work/success.json" 'r["why"]')"
	field "$work/success.json" '"\n".join(r["table"])' >&2
	if [ "$(field "$work/success.json" 'r["original_kb"]')" = "$original" ]; then
		ok "success: original_kb=$original recorded"
	else
		bad "success: original_kb=$(field "$work/success.json" 'r["original_kb"]')"
	fi
else
	bad "success: $(head -c 2000 "$work/success.json" "$work/success.json.err")"
fi
check_restored success

# --- timeout ------------------------------------------------------------------
args ', "sweep": [64, 16], "duration": 1, "timeout": 2'
if ! run_module "$work/timeout.json" && [ "$(field "$work/timeout.json" 'r["timed_out"]')" = True ]; then
	ok "timeout: failed with timed_out: $(field "$work/timeout.json" 'r["msg"]')"
else
	bad "timeout: $(head -c 2000 "$work/timeout.json" "$work/timeout.json.err")"
fi
check_restored timeout

# --- forced failure: someone else writes read_ahead_kb mid-sweep ----------------
args ', "sweep": [512, 64, 16], "duration": 2'
start_module "$work/meddle.json"
if wait_swept; then
	echo 4096 >"$ra_file"
	wait "$bg"
	rc=$?
	bg=
	if [ "$rc" != 0 ] && field "$work/meddle.json" 'r["msg"]' | grep -q 'while the sweep measured it'; then
		ok "forced failure: $(field "$work/meddle.json" 'r["msg"]')"
	else
		bad "forced failure: rc=$rc $(head -c 2000 "$work/meddle.json" "$work/meddle.json.err")"
	fi
else
	bad "forced failure: the sweep never changed the device: $(head -c 2000 "$work/meddle.json.err")"
	wait "$bg"; bg=
fi
check_restored "forced failure"

# --- SIGTERM, and the lock refusing a second sweep meanwhile --------------------
args ', "sweep": [512, 64, 16], "duration": 2'
start_module "$work/term.json"
if wait_swept; then
	first=$bg
	if ! run_module "$work/second.json" && field "$work/second.json" 'r["msg"]' | grep -q 'another read-ahead sweep or read_ahead run holds'; then
		ok "lock: a second sweep of $dev is refused while one runs"
	else
		bad "lock: $(head -c 2000 "$work/second.json" "$work/second.json.err")"
	fi
	bg=$first
	kill -TERM "$bg"
	wait "$bg"
	rc=$?
	bg=
	if [ "$rc" != 0 ] && field "$work/term.json" 'r["msg"]' | grep -q 'interrupted'; then
		ok "SIGTERM: $(field "$work/term.json" 'r["msg"]')"
	else
		bad "SIGTERM: rc=$rc $(head -c 2000 "$work/term.json" "$work/term.json.err")"
	fi
else
	bad "SIGTERM: the sweep never changed the device"
	wait "$bg"; bg=
fi
check_restored SIGTERM

# --- SIGKILL, then recover=true; SIGKILL, then the next sweep -------------------
kill_mid_sweep() { # case name; leaves the device half-done
	args ', "sweep": [512, 64, 16], "duration": 2'
	start_module "$work/kill.json"
	if ! wait_swept; then
		bad "$1: the sweep never changed the device"
		wait "$bg"; bg=
		return 1
	fi
	local recorded
	recorded=$("$json_python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$state")
	[ "$recorded" = "$bg" ] || say "note: the state file names pid $recorded, the module runs as $bg"
	kill -KILL "$bg"
	wait "$bg" 2>/dev/null
	bg=
	local left
	left=$(ra_now)
	if [ "$left" != "$original" ] && [ -e "$state" ] &&
		[ "$("$json_python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["original_kb"])' "$state")" = "$original" ]; then
		ok "$1: killed mid-sweep, left at $left KiB with the state file recording $original"
	else
		bad "$1: after SIGKILL read_ahead_kb=$left, state file $( [ -e "$state" ] && cat "$state" || echo absent)"
		return 1
	fi
}

if kill_mid_sweep "SIGKILL (a)"; then
	args ', "recover": true'
	if run_module "$work/recover.json" && [ "$(field "$work/recover.json" 'r["changed"]')" = True ]; then
		ok "recover=true: $(field "$work/recover.json" 'r["msg"]')"
	else
		bad "recover=true: $(head -c 2000 "$work/recover.json" "$work/recover.json.err")"
	fi
	check_restored "SIGKILL then recover=true"
	if run_module "$work/recover2.json" && [ "$(field "$work/recover2.json" 'r["changed"]')" = False ]; then
		ok "recover=true again: changes nothing"
	else
		bad "recover=true again: $(head -c 2000 "$work/recover2.json")"
	fi
fi

if kill_mid_sweep "SIGKILL (b)"; then
	args ', "sweep": [64], "duration": 1'
	if run_module "$work/next.json" &&
		[ "$(field "$work/next.json" 'r["recovered"]["action"], r["recovered"]["original_kb"], r["original_kb"], r["changed"]')" = "('restore', $original, $original, True)" ]; then
		ok "SIGKILL then the next sweep: restored first ($(field "$work/next.json" 'r["recovered"]["reason"]'))"
	else
		bad "SIGKILL then the next sweep: $(head -c 2000 "$work/next.json" "$work/next.json.err")"
	fi
	check_restored "SIGKILL then the next sweep"
fi

# --- read_ahead during a sweep: serialised by the device's read-ahead lock (issue 24) ------
ra_module=ansible_collections.aemops.os_tuning.plugins.modules.read_ahead
args ', "sweep": [512, 64, 16], "duration": 2'
start_module "$work/during.json"
if wait_swept; then
	sweeping=$bg
	printf '{"ANSIBLE_MODULE_ARGS": {"devices": ["%s"], "read_ahead_kb": 32, "persist": false, "rules_file": "%s"}}\n' \
		"$dev" "$work/90-during.rules" >"$work/ra-args.json"
	PYTHONPATH=$pypath "$python" -m "$ra_module" "$work/ra-args.json" >"$work/ra.json" 2>"$work/ra.json.err"
	rc=$?
	sweep_alive=no
	kill -0 "$sweeping" 2>/dev/null && sweep_alive=yes
	wait "$sweeping"
	bg=
	if [ "$rc" = 0 ] && [ "$sweep_alive" = no ] && [ "$(ra_now)" = 32 ] &&
		[ "$(field "$work/ra.json" 'r["devices"][0]["before_kb"], r["devices"][0]["after_kb"], r["changed"]')" = "($original, 32, True)" ]; then
		ok "read_ahead during a sweep: waited for it, planned from the restored $original KiB, device holds 32"
	else
		bad "read_ahead during a sweep: rc=$rc sweep still running=$sweep_alive ra=$(ra_now) $(head -c 2000 "$work/ra.json" "$work/ra.json.err")"
	fi
else
	bad "read_ahead during a sweep: the sweep never changed the device"
	wait "$bg"; bg=
fi
echo "$original" >"$ra_file"

# --- a killed sweep's state is never applied to another device with the same name (issue 24) ----
if kill_mid_sweep "SIGKILL (c)"; then
	old_state=$state
	umount "$work/mnt" || umount --lazy "$work/mnt"
	losetup --detach "/dev/$dev"
	truncate -s 320M "$work/other-$tag.img"
	if losetup "/dev/$dev" "$work/other-$tag.img"; then
		mkfs.ext4 -q -L sweep-it2 "/dev/$dev" && mount "/dev/$dev" "$work/mnt"
		echo 128 >"$ra_file"
		args ', "recover": true'
		run_module "$work/reuse.json"
		if [ "$(ra_now)" = 128 ] && [ "$(field "$work/reuse.json" 'r["changed"]')" = False ] && [ -e "$old_state" ]; then
			ok "another device as $dev: the old state ($old_state) is not applied; read_ahead_kb stays 128"
		else
			bad "another device as $dev: ra=$(ra_now) $(head -c 2000 "$work/reuse.json" "$work/reuse.json.err")"
		fi
		rm -f "$old_state"
		echo "$original" >"$ra_file"
	else
		bad "another device as $dev: cannot attach a new backing file to /dev/$dev"
	fi
fi
