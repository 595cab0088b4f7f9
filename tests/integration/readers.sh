#!/usr/bin/env bash
# Real-kernel test of read_ahead's refresh of the readers that were already running.
#
# Usage: tests/integration/readers.sh     (as root, on a host or VM with a writable /sys)
#
# A loop device with ext4, read_ahead_kb 4096. Two stand-ins (tests/integration/readers_standin.py)
# map a 320 MiB file each while it is 4096: "keep" keeps its descriptor (Oak's FileAccess.Mapped),
# "close" closes it after mmap (Lucene's MMapDirectory). Each measures its own amplification
# (device bytes read, /sys/block/<dev>/stat, per byte of 32 random 8 KiB records it faults), after
# the page cache is dropped. Then:
#
#   check mode           names keep (would refresh) and close (needs a restart); sysfs stays 4096
#   refresh_readers=false  sets 32; keep still reads at ~4096 (check mode and this run touched no process)
#   floor                a third stand-in opened after the change: the kernel's floor at 32 KiB
#   read_ahead           sysfs already 32, but keep is stale: changed, keep refreshed and within 10%
#                        of the floor without a restart; close named as needing a restart, still high
#   second run           changed=false, nothing refreshed
#   restart close        reads at the floor; the next run names nobody
#
# Before the stand-ins (issue 34): a FUSE mount whose server stops answering getattr
# (tests/integration/hang_fuse.py, the stand-in for NFS, EFS or s3fs with its server gone), with a
# file held open by an unprivileged user's process. read_ahead and tuning_facts on the loop device
# each finish within 10 s, never name that process, and no getattr reaches the mount (the server
# logs every one). Between the checks (issue 35): read_ahead under a seccomp filter that makes
# pidfd_open and pidfd_getfd fail with ENOSYS (tests/integration/no_pidfd.py, a RHEL 7 or 8 kernel)
# names keep as needing a restart, and the refresh itself takes the target through a symbolic link.
#
# Every figure is printed. Everything created carries the run's tag and is removed on exit.
#
# Environment: PYTHON (runs the module; default .venv/bin/python), ANSIBLE_COLLECTIONS_PATH,
# READERS_TAG, READ_AHEAD_TMP_BASE (as in sweep.sh).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh source-path=SCRIPTDIR
. "$here/common.sh"

say() { printf '[readers %s] %s\n' "$(date +%T)" "$*" >&2; }

tag=${READERS_TAG:-aemops-readers-it-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}
tmp_base=${READ_AHEAD_TMP_BASE:-/tmp}
work=$tmp_base/$tag
passed=0
failed=0
dev=
pids=()
standin=$here/readers_standin.py
records=32

python=$(it_python "$root")
json_python=$(command -v python3 || echo "$python")

[ "$(id -u)" = 0 ] || { say "run as root: the test attaches a loop device and writes /sys"; exit 2; }
for tool in losetup mkfs.ext4 mount umount mkfifo setpriv timeout; do
	command -v "$tool" >/dev/null || { say "$tool not found"; exit 2; }
done
[ -e "$work" ] && { say "$work exists already: pick another READERS_TAG"; exit 2; }
mkdir -p "$work/mnt" "$work/collections" || exit 2

it_collections_path "$root" "$work"
module=ansible_collections.aemops.os_tuning.plugins.modules.read_ahead

cleanup() {
	trap - EXIT INT TERM
	local p
	fuse_down
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	it_forget_device "$dev" "$json_python"
	it_release_loop "$dev" "$work" "$tag" || failed=$((failed + 1))
	echo "read_ahead readers: $passed passed, $failed failed"
	[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
	exit $?
}
trap cleanup EXIT
trap 'say interrupted; failed=$((failed + 1)); exit 130' INT TERM

fuse_down() { # abort the hung FUSE connection (a stat waiting on it then fails), then unmount
	local mm
	mm=$(awk -v m="$work/fuse" '$5 == m {print $3}' /proc/self/mountinfo)
	[ -n "$mm" ] || return 0
	echo 1 >"/sys/fs/fuse/connections/${mm#*:}/abort" 2>/dev/null
	umount -l "$work/fuse" 2>/dev/null
}

ok() { say "PASS $*"; passed=$((passed + 1)); }
bad() { say "FAIL $*"; failed=$((failed + 1)); }

# --- the loop device and the files ---------------------------------------------
truncate -s 1100M "$work/disk-$tag.img" || exit 1
dev=$(losetup --find --show "$work/disk-$tag.img") || exit 1
dev=${dev#/dev/}
mkfs.ext4 -q -L readers-it "/dev/$dev" || exit 1
mount "/dev/$dev" "$work/mnt" || exit 1
for f in keep close fresh; do
	# written, not sparse: reads of unwritten extents never reach the device
	dd if=/dev/zero of="$work/mnt/$f.tar" bs=1M count=320 status=none || exit 1
done
sync
ra_file=/sys/block/$dev/queue/read_ahead_kb
echo 4096 >"$ra_file" || exit 1
say "loop device $dev on $work/mnt, read_ahead_kb=$(cat "$ra_file"), module run by $python"

# --- stand-ins ----------------------------------------------------------------
declare -A pid_of
start_standin() { # name mode
	mkfifo "$work/$1.fifo" || return 1
	: >"$work/$1.out"
	"$json_python" "$standin" "$2" "$work/mnt/$1.tar" "$dev" "$work/$1.fifo" "$work/$1.out" 2>"$work/$1.err" &
	pid_of[$1]=$!
	pids+=("$!")
	local _
	for _ in $(seq 100); do
		grep -q '"ready"' "$work/$1.out" && return 0
		sleep 0.1
	done
	say "stand-in $1 did not start: $(cat "$work/$1.err")"
	return 1
}
stop_standin() { # name
	echo quit >"$work/$1.fifo"
	wait "${pid_of[$1]}" 2>/dev/null
	rm -f "$work/$1.fifo"
}
measure() { # name seed: prints the amplification of one measurement (a new seed each: other records)
	local lines _ seed=$2
	lines=$(wc -l <"$work/$1.out")
	sync
	echo 3 >/proc/sys/vm/drop_caches
	echo "measure $seed $records" >"$work/$1.fifo"
	for _ in $(seq 600); do
		[ "$(wc -l <"$work/$1.out")" -gt "$lines" ] && break
		sleep 0.1
	done
	tail -n 1 "$work/$1.out" | "$json_python" -c 'import json, sys; print(json.load(sys.stdin)["amplification"])'
}
above() { "$json_python" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$1" "$2"; }

run_module() { # output file, then JSON options; TARGET (default the mount) and WRAP (a launcher) may be set
	printf '{"ANSIBLE_MODULE_ARGS": {"paths": ["%s"], "read_ahead_kb": 32, "persist": false%s}}\n' \
		"${TARGET:-$work/mnt}" "$2" >"$work/args.json"
	PYTHONPATH=$ANSIBLE_COLLECTIONS_PATH ${WRAP:-} "$python" -m "$module" "$work/args.json" >"$1" 2>"$1.err"
}
field() { # file expression
	"$json_python" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"r": r}))' "$1" "$2" 2>/dev/null
}
pids_in() { # file key: the pids in readers[key], sorted, space-separated
	field "$1" "' '.join(str(p) for p in sorted(x['pid'] for x in r['readers']['$2']))"
}

# --- a network filesystem whose server is gone is never touched (issue 34) -----------------
hung_mount() {
	local fuse_python user_pid t0 took asked
	fuse_python=$(it_python "$root")
	if ! "$fuse_python" -c 'import fuse' 2>/dev/null || [ ! -e /dev/fuse ]; then
		bad "hung mount: fusepy (requirements/dev.in) and libfuse2 (requirements/system-packages.txt) are needed"
		return
	fi
	mkdir -p "$work/fuse" "$work/fusectl" && chmod 755 "$work" "$work/fusectl"
	"$fuse_python" "$here/hang_fuse.py" "$work/fuse" "$work/fusectl" 2>"$work/fuse.err" &
	pids+=("$!")
	for _ in $(seq 50); do mountpoint -q "$work/fuse" && break; sleep 0.1; done
	# shellcheck disable=SC2016 # $1 is the inner shell's
	setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c 'exec 3<"$1"; exec sleep 600' sh \
		"$work/fuse/big.bin" &
	user_pid=$!
	pids+=("$user_pid")
	sleep 0.5
	touch "$work/fusectl/hang"  # from here on, getattr is never answered
	t0=$(date +%s.%N)
	printf '{"ANSIBLE_MODULE_ARGS": {"devices": ["/dev/%s"], "read_ahead_kb": 4096, "persist": false}}\n' "$dev" \
		>"$work/hung-ra.args"
	printf '{"ANSIBLE_MODULE_ARGS": {"intent": {"state": "present", "read_ahead_kb": 4096, "paths": ["%s"], "candidates": [], "devices": [], "underlying": false, "thp": "never", "thp_defrag": "never", "thp_persist": []}}}\n' \
		"$work/mnt" >"$work/hung-facts.args"
	timeout -k 2 10 env PYTHONPATH="$ANSIBLE_COLLECTIONS_PATH" "$python" -m "$module" "$work/hung-ra.args" \
		>"$work/hung-ra.json" 2>"$work/hung-ra.err"
	local rc_ra=$?
	timeout -k 2 10 env PYTHONPATH="$ANSIBLE_COLLECTIONS_PATH" "$python" -m ansible_collections.aemops.os_tuning.plugins.modules.tuning_facts \
		"$work/hung-facts.args" >"$work/hung-facts.json" 2>"$work/hung-facts.err"
	local rc_facts=$?
	took=$("$json_python" -c 'import sys, time; print(round(time.time() - float(sys.argv[1]), 1))' "$t0")
	asked=$(wc -l <"$work/fusectl/getattr.log" 2>/dev/null || echo 0)
	if [ "$rc_ra" = 0 ] && [ "$rc_facts" = 0 ] && [ "$asked" = 0 ] &&
		! grep -q "\"pid\": $user_pid\b" "$work/hung-ra.json" "$work/hung-facts.json" &&
		[ -n "$(field "$work/hung-ra.json" 'r["readers"]["scan"]["processes"]')" ]; then
		ok "hung mount: read_ahead and tuning_facts on /dev/$dev finished in ${took}s with a user's file open on a FUSE mount whose getattr never answers; ${asked} getattr reached it; pid $user_pid not named (scan: $(field "$work/hung-ra.json" 'r["readers"]["scan"]'))"
	else
		bad "hung mount: read_ahead rc $rc_ra, tuning_facts rc $rc_facts (124 or 137: killed after 10 s), ${asked} getattr reached the mount: $(head -c 1500 "$work/hung-ra.json" "$work/hung-ra.err" "$work/hung-facts.err")"
	fi
	kill -KILL "$user_pid" 2>/dev/null
	fuse_down
}
hung_mount
echo 4096 >"$ra_file" || exit 1

start_standin keep keep || exit 1
start_standin close close || exit 1
keep_pid=${pid_of[keep]}
close_pid=${pid_of[close]}
both_pids=$(printf '%s\n' "$keep_pid" "$close_pid" | sort -n | xargs)

keep_before=$(measure keep 1)
close_before=$(measure close 2)
if above "$keep_before" 100 && above "$close_before" 100; then
	ok "before: at 4096 KiB keep reads ${keep_before}x, close ${close_before}x"
else
	bad "before: keep ${keep_before}x, close ${close_before}x: expected both above 100x at 4096 KiB"
fi

# --- check mode -----------------------------------------------------------------
run_module "$work/check.json" ', "_ansible_check_mode": true'
if [ "$(field "$work/check.json" 'r["changed"]')" = True ] && [ "$(cat "$ra_file")" = 4096 ] &&
	[ "$(pids_in "$work/check.json" refreshed)" = "$keep_pid" ] &&
	[ "$(pids_in "$work/check.json" needs_restart)" = "$close_pid" ]; then
	ok "check mode: would refresh pid $keep_pid, names pid $close_pid as needing a restart, sysfs still 4096"
else
	bad "check mode: $(head -c 2000 "$work/check.json" "$work/check.json.err")"
fi

# --- the value set, refresh off: today's behaviour --------------------------------
run_module "$work/off.json" ', "refresh_readers": false'
keep_off=$(measure keep 3)
if [ "$(cat "$ra_file")" = 32 ] && [ "$(pids_in "$work/off.json" needs_restart)" = "$both_pids" ] &&
	above "$keep_off" 100; then
	ok "refresh_readers=false: read_ahead_kb 32, keep still reads ${keep_off}x (no process touched, nor in check mode)"
else
	bad "refresh_readers=false: read_ahead_kb $(cat "$ra_file"), keep ${keep_off}x: $(head -c 2000 "$work/off.json" "$work/off.json.err")"
fi

# --- the floor: a reader opened at 32 KiB -----------------------------------------
start_standin fresh keep || exit 1
floor=$(measure fresh 4)
limit=$("$json_python" -c 'import sys; print(round(float(sys.argv[1]) * 1.1, 2))' "$floor")
say "floor at 32 KiB (a reader opened after the change): ${floor}x; 10% above: ${limit}x"

# --- a kernel without pidfd_getfd (RHEL 7 and 8), simulated by seccomp (issue 35) ---------
WRAP="$json_python $here/no_pidfd.py" run_module "$work/nopidfd.json" ''
keep_nopidfd=$(measure keep 8)
if [ "$(field "$work/nopidfd.json" 'r["readers"]["kernel_refresh"]')" = False ] &&
	[ "$(pids_in "$work/nopidfd.json" needs_restart)" = "$both_pids" ] &&
	[ -z "$(pids_in "$work/nopidfd.json" refreshed)" ] &&
	[ "$(field "$work/nopidfd.json" '[x["why"] for x in r["readers"]["needs_restart"] if x["pid"] == '"$keep_pid"'][0]')" = "['no_pidfd_getfd']" ] &&
	above "$keep_nopidfd" 100; then
	ok "no pidfd_getfd (seccomp): keep (pid $keep_pid) named as needing a restart (no_pidfd_getfd), still ${keep_nopidfd}x; nothing refreshed"
else
	bad "no pidfd_getfd: keep ${keep_nopidfd}x: $(head -c 2000 "$work/nopidfd.json" "$work/nopidfd.json.err")"
fi

# --- the refresh, with the target given through a symbolic link (issue 35) ------------------
ln -s "$work/mnt" "$work/link"
TARGET=$work/link run_module "$work/refresh.json" ''
keep_after=$(measure keep 5)
close_after=$(measure close 6)
if [ "$(field "$work/refresh.json" 'r["changed"]')" = True ] &&
	[ "$(pids_in "$work/refresh.json" refreshed)" = "$keep_pid" ] &&
	[ "$(pids_in "$work/refresh.json" needs_restart)" = "$close_pid" ] &&
	! above "$keep_after" "$limit" && above "$close_after" 100; then
	ok "read_ahead through the link $work/link: changed with sysfs already 32; keep refreshed without a restart: ${keep_off}x -> ${keep_after}x (floor ${floor}x); close named as needing a restart, still ${close_after}x; links: $(field "$work/refresh.json" 'r["readers"]["links"]')"
else
	bad "read_ahead: keep ${keep_after}x (limit ${limit}x), close ${close_after}x: $(head -c 3000 "$work/refresh.json" "$work/refresh.json.err")"
fi

# --- second run ---------------------------------------------------------------------
run_module "$work/second.json" ''
if [ "$(field "$work/second.json" 'r["changed"]')" = False ] && [ -z "$(pids_in "$work/second.json" refreshed)" ] &&
	[ "$(pids_in "$work/second.json" needs_restart)" = "$close_pid" ]; then
	ok "second run: changed=false, nothing refreshed, pid $close_pid still named"
else
	bad "second run: $(head -c 2000 "$work/second.json" "$work/second.json.err")"
fi

# --- restarting the closing reader ------------------------------------------------------
stop_standin close
start_standin close close || exit 1
close_restarted=$(measure close 7)
run_module "$work/restarted.json" ''
if ! above "$close_restarted" "$limit" && [ "$(field "$work/restarted.json" 'r["changed"]')" = False ] &&
	[ -z "$(pids_in "$work/restarted.json" needs_restart)" ]; then
	ok "restart: close reads ${close_restarted}x after a restart; the next run names nobody, changed=false"
else
	bad "restart: close ${close_restarted}x (limit ${limit}x): $(head -c 2000 "$work/restarted.json" "$work/restarted.json.err")"
fi

echo
echo "==== readers that were already running (amplification, ${records} random 8 KiB records, ext4 on $dev) ===="
printf '%-44s %10s %10s\n' case keep close
printf '%-44s %10s %10s\n' "before (4096 KiB)" "${keep_before}x" "${close_before}x"
printf '%-44s %10s %10s\n' "after the role without refresh (32 KiB)" "${keep_off}x" "-"
printf '%-44s %10s %10s\n' "after the refresh" "${keep_after}x" "${close_after}x"
printf '%-44s %10s %10s\n' "after a restart" "-" "${close_restarted}x"
printf '%-44s %10s\n' "floor (opened at 32 KiB)" "${floor}x"
printf 'READERS-JSON {"kernel": "%s", "fs": "ext4", "records": %s, "keep_before": %s, "keep_without_refresh": %s, "keep_after_refresh": %s, "close_before": %s, "close_after_refresh": %s, "close_after_restart": %s, "floor": %s}\n' \
	"$(uname -r)" "$records" "$keep_before" "$keep_off" "$keep_after" "$close_before" "$close_after" "$close_restarted" "$floor"
stop_standin keep
stop_standin fresh
