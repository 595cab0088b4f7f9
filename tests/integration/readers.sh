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
for tool in losetup mkfs.ext4 mount umount mkfifo; do
	command -v "$tool" >/dev/null || { say "$tool not found"; exit 2; }
done
[ -e "$work" ] && { say "$work exists already: pick another READERS_TAG"; exit 2; }
mkdir -p "$work/mnt" "$work/collections" || exit 2

it_collections_path "$root" "$work"
module=ansible_collections.aemops.os_tuning.plugins.modules.read_ahead
record=/run/aemops-os-tuning/readers.json

forget_device() { # drop this test's device from the record (another test may reuse the loop number)
	[ -n "$dev" ] && [ -f "$record" ] || return 0
	"$json_python" - "$record" "$(cat "/sys/block/$dev/dev" 2>/dev/null)" <<'EOF'
import json, os, sys
path, number = sys.argv[1], sys.argv[2]
data = json.load(open(path))
if number in data.get('devices', {}):
    del data['devices'][number]
    with open(path + '.tmp', 'w') as f:
        json.dump(data, f)
    os.chmod(path + '.tmp', 0o600)
    os.rename(path + '.tmp', path)
EOF
}

cleanup() {
	trap - EXIT INT TERM
	local p
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	forget_device
	if mountpoint -q "$work/mnt"; then umount "$work/mnt" || umount --lazy "$work/mnt"; fi
	[ -n "$dev" ] && losetup --detach "/dev/$dev" 2>/dev/null
	rm -rf "${work:?}"
	local left
	left=$({ losetup --list --noheadings --raw --output NAME,BACK-FILE; findmnt --raw --noheadings --output TARGET; } |
		grep -F -- "$tag")
	if [ -n "$left" ] || [ -e "$work" ]; then
		say "LEFT BEHIND (tag $tag): $left"
		failed=$((failed + 1))
	fi
	echo "read_ahead readers: $passed passed, $failed failed"
	[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
	exit $?
}
trap cleanup EXIT
trap 'say interrupted; failed=$((failed + 1)); exit 130' INT TERM

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

run_module() { # output file, then JSON options
	printf '{"ANSIBLE_MODULE_ARGS": {"paths": ["%s"], "read_ahead_kb": 32, "persist": false%s}}\n' \
		"$work/mnt" "$2" >"$work/args.json"
	PYTHONPATH=$ANSIBLE_COLLECTIONS_PATH "$python" -m "$module" "$work/args.json" >"$1" 2>"$1.err"
}
field() { # file expression
	"$json_python" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"r": r}))' "$1" "$2" 2>/dev/null
}
pids_in() { # file key: the pids in readers[key], sorted, space-separated
	field "$1" "' '.join(str(p) for p in sorted(x['pid'] for x in r['readers']['$2']))"
}

start_standin keep keep || exit 1
start_standin close close || exit 1
keep_pid=${pid_of[keep]}
close_pid=${pid_of[close]}

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
if [ "$(cat "$ra_file")" = 32 ] && [ "$(pids_in "$work/off.json" not_refreshed)" = "$keep_pid" ] &&
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

# --- the refresh --------------------------------------------------------------------
run_module "$work/refresh.json" ''
keep_after=$(measure keep 5)
close_after=$(measure close 6)
if [ "$(field "$work/refresh.json" 'r["changed"]')" = True ] &&
	[ "$(pids_in "$work/refresh.json" refreshed)" = "$keep_pid" ] &&
	[ "$(pids_in "$work/refresh.json" needs_restart)" = "$close_pid" ] &&
	! above "$keep_after" "$limit" && above "$close_after" 100; then
	ok "read_ahead: changed with sysfs already 32; keep refreshed without a restart: ${keep_off}x -> ${keep_after}x (floor ${floor}x); close named as needing a restart, still ${close_after}x"
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
