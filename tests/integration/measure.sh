#!/usr/bin/env bash
# Real-kernel test of measuring a running reader from outside (plugins/module_utils/readers_measure.py,
# issue 39): read_bytes of /proc/PID/io over the major faults of /proc/PID/stat, one window.
#
# Usage: tests/integration/measure.sh     (as root, on a host or VM with a writable /sys)
#
# A loop device with ext4 and a 1 GiB file (written, not sparse). Each case starts one stand-in
# (tests/integration/measure_standin.py), drops the page cache (the faults are then major) and
# measures it with readers_measure.measure() over one window of MEASURE_SECONDS (default 3), run
# by Python in this script; the verdict is readers_measure.verdict() with no stale inference and the
# device's value at the time:
#
#   stale       mapped while read_ahead_kb was 4096, then `echo 32 > read_ahead_kb` by hand:
#               >= 1024 KiB per fault, conclusive, stale ('measured')
#   fresh       mapped at 32: <= 64 KiB per fault, fine ('measured'), never stale
#   pread       random 8 KiB pread() at 4096, no mapping: read_bytes about rchar (at most 1.5x),
#               not a mapping reader (too few faults), not stale
#   read        sequential 64 KiB read() at 4096, no mapping: not stale
#   idle        mapped at 4096 and never touched: unmeasured, 'idle'
#   threads     mapped at 4096 by a process whose 4 threads fault while its main thread waits:
#               the process's faults are its threads' (and so stale, measured), and the sum over
#               /proc/PID/task/*/stat matches
#   mixed       a mapping that also streams another file with read() (opened at 4096): mapped at 32
#               (256 KiB reads), its ratio is over the stale threshold through read() alone:
#               inconclusive, not stale; mapped at 4096 (64 KiB reads): stale, measured
#   together    stale, fresh and idle measured in ONE window at once: the same three outcomes
#   gone        a pid that exits during the window, and one whose start time is not the scanned one
#
# Never a timing assertion: the window only bounds how long the counters are watched. Every
# figure is printed (MEASURE-JSON lines and a table). Everything created carries the run's tag
# and is removed on exit.
#
# Environment: PYTHON (default .venv/bin/python), ANSIBLE_COLLECTIONS_PATH, MEASURE_TAG,
# MEASURE_SECONDS, READ_AHEAD_TMP_BASE (as in sweep.sh).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh source-path=SCRIPTDIR
. "$here/common.sh"

say() { printf '[measure %s] %s\n' "$(date +%T)" "$*" >&2; }

tag=${MEASURE_TAG:-aemops-measure-it-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}
tmp_base=${READ_AHEAD_TMP_BASE:-/tmp}
work=$tmp_base/$tag
window=${MEASURE_SECONDS:-3}
passed=0
failed=0
dev=
pids=()
standin=$here/measure_standin.py

python=$(it_python "$root")
json_python=$(command -v python3 || echo "$python")

[ "$(id -u)" = 0 ] || { say "run as root: the test attaches a loop device and writes /sys"; exit 2; }
for tool in losetup mkfs.ext4 mount umount; do
	command -v "$tool" >/dev/null || { say "$tool not found"; exit 2; }
done
[ -e "$work" ] && { say "$work exists already: pick another MEASURE_TAG"; exit 2; }
mkdir -p "$work/mnt" "$work/collections" || exit 2
it_collections_path "$root" "$work"

cleanup() {
	trap - EXIT INT TERM
	local p
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	it_forget_device "$dev" "$json_python"
	it_release_loop "$dev" "$work" "$tag" || failed=$((failed + 1))
	echo "read_ahead measure: $passed passed, $failed failed"
	[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
	exit $?
}
trap cleanup EXIT
trap 'say interrupted; failed=$((failed + 1)); exit 130' INT TERM

ok() { say "PASS $*"; passed=$((passed + 1)); }
bad() { say "FAIL $*"; failed=$((failed + 1)); }

# --- the loop device and the files ---------------------------------------------
truncate -s 1500M "$work/disk-$tag.img" || exit 1
dev=$(losetup --find --show "$work/disk-$tag.img") || exit 1
dev=${dev#/dev/}
mkfs.ext4 -q -L measure-it "/dev/$dev" || exit 1
mount "/dev/$dev" "$work/mnt" || exit 1
# written, not sparse: reads of unwritten extents never reach the device
dd if=/dev/zero of="$work/mnt/big.bin" bs=1M count=1024 status=none || exit 1
dd if=/dev/zero of="$work/mnt/small.bin" bs=1M count=256 status=none || exit 1
sync
ra_file=/sys/block/$dev/queue/read_ahead_kb
say "loop device $dev on $work/mnt, module run by $python, window ${window}s"

# --- stand-ins and the measurement ----------------------------------------------
declare -A pid_of
start_standin() { # name kind file [threads | other]: started with the device at its current value
	rm -f "$work/$1.ready"
	"$json_python" "$standin" "$2" "$work/mnt/$3" "$work/$1.ready" "${@:4}" 2>"$work/$1.err" &
	pid_of[$1]=$!
	pids+=("$!")
	local _
	for _ in $(seq 100); do
		[ -s "$work/$1.ready" ] && return 0
		sleep 0.1
	done
	say "stand-in $1 did not start: $(cat "$work/$1.err")"
	return 1
}
stop_standin() { kill -KILL "${pid_of[$1]}" 2>/dev/null; wait "${pid_of[$1]}" 2>/dev/null; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# measure OUT KB PID...: readers_measure.measure() over one window for all the pids, then per pid
# conclusive() and verdict(no stale inference, ..., KB); one JSON document in OUT.
measure() {
	local out=$1 kb=$2
	shift 2
	PYTHONPATH=$ANSIBLE_COLLECTIONS_PATH "$python" - "$window" "$kb" "$@" >"$out" 2>"$out.err" <<'EOF'
import json, sys
from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_measure as rm
seconds, kb, pids = float(sys.argv[1]), int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
result = rm.measure('/', pids, seconds)
out = {}
for pid, r in result.items():
    m = r.get('measured')
    stale, basis = rm.verdict(False, m, r.get('unmeasured'), kb)
    out[str(pid)] = dict(r, conclusive=rm.conclusive(m), stale=stale, basis=basis)
out['thresholds'] = rm.thresholds(kb)
print(json.dumps(out, sort_keys=True))
EOF
}
field() { # file expression (r: the document)
	"$json_python" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"r": r}))' "$1" "$2" 2>/dev/null
}
check() { # file expression: true when the expression holds
	[ "$(field "$1" "bool($2)")" = True ]
}
show() { # name file pid: a MEASURE-JSON line, and the pid's outcome for the table
	local r
	r=$("$json_python" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])).get(sys.argv[2]), sort_keys=True))' "$2" "$3")
	printf 'MEASURE-JSON {"case": "%s", "kernel": "%s", "result": %s}\n' "$1" "$(uname -r)" "$r"
	figures+=("$1|$r")
}
figures=()
one_case() { # name kind kb_at_open kb_at_measure [threads]: start, set the value, drop the caches, measure
	echo "$3" >"$ra_file" || return 1
	start_standin "$1" "$2" big.bin "${@:5}" || return 1
	echo "$4" >"$ra_file" || return 1
	drop_caches
	measure "$work/$1.json" "$4" "${pid_of[$1]}"
	show "$1" "$work/$1.json" "${pid_of[$1]}"
}

# --- stale: opened at 4096, the value back at 32 by hand ----------------------------------------
one_case stale mmap 4096 32
p=${pid_of[stale]}
if check "$work/stale.json" "r['$p']['measured']['kib_per_fault'] >= 1024 and r['$p']['conclusive'] and r['$p']['stale'] and r['$p']['basis'] == 'measured'"; then
	ok "stale: mapped at 4096, read_ahead_kb now $(cat "$ra_file"): $(field "$work/stale.json" "r['$p']['measured']") -> stale, measured"
else
	bad "stale: $(cat "$work/stale.json" "$work/stale.json.err")"
fi
stop_standin stale

# --- fresh: opened at 32 ------------------------------------------------------------------------
one_case fresh mmap 32 32
p=${pid_of[fresh]}
if check "$work/fresh.json" "r['$p']['measured']['kib_per_fault'] <= 64 and r['$p']['conclusive'] and not r['$p']['stale'] and r['$p']['basis'] == 'measured'"; then
	ok "fresh: mapped at 32: $(field "$work/fresh.json" "r['$p']['measured']") -> fine, measured"
else
	bad "fresh: $(cat "$work/fresh.json" "$work/fresh.json.err")"
fi
stop_standin fresh

# --- pread: a descriptor-only random reader at 4096 --------------------------------------------
one_case pread pread 4096 4096
p=${pid_of[pread]}
if check "$work/pread.json" "not r['$p']['stale'] and r['$p'].get('unmeasured') == 'idle' and r['$p']['read_kib'] <= 1.5 * r['$p']['rchar_kib'] and r['$p']['rchar_kib'] > 0"; then
	ok "pread: random 8 KiB pread() at 4096: $(field "$work/pread.json" "r['$p']") -> not a mapping reader, not stale"
else
	bad "pread: $(cat "$work/pread.json" "$work/pread.json.err")"
fi
stop_standin pread

# --- read: a sequential reader at 4096 ----------------------------------------------------------
one_case read read 4096 32
p=${pid_of[read]}
if check "$work/read.json" "not r['$p']['stale'] and not r['$p']['conclusive']"; then
	ok "read: sequential 64 KiB read() opened at 4096, device now 32: $(field "$work/read.json" "r['$p']") -> not stale"
else
	bad "read: $(cat "$work/read.json" "$work/read.json.err")"
fi
stop_standin read

# --- idle: mapped, never touched ----------------------------------------------------------------
one_case idle idle 4096 32
p=${pid_of[idle]}
if check "$work/idle.json" "r['$p'] .get('unmeasured') == 'idle' and not r['$p']['stale'] and r['$p']['basis'] == 'inferred'"; then
	ok "idle: mapped at 4096, untouched: $(field "$work/idle.json" "r['$p']") -> unmeasured (idle), inferred"
else
	bad "idle: $(cat "$work/idle.json" "$work/idle.json.err")"
fi
stop_standin idle

# --- mixed: a mapping plus a read() stream of another file, opened at 4096 ------------------------
mixed_case() { # name kb_of_the_mapping chunk: the stream is opened at 4096, the device then back at 32
	echo "$2" >"$ra_file" || return 1
	start_standin "$1" mixed big.bin "$work/mnt/small.bin" "$3" || return 1
	echo 4096 >"$ra_file" && touch "$work/$1.ready.go" && sleep 0.5
	echo 32 >"$ra_file" || return 1
	drop_caches
	measure "$work/$1.json" 32 "${pid_of[$1]}"
	show "$1" "$work/$1.json" "${pid_of[$1]}"
}
mixed_case mixed_fresh 32 262144
p=${pid_of[mixed_fresh]}
if check "$work/mixed_fresh.json" "r['$p']['measured']['kib_per_fault'] > r['thresholds'][1] and not r['$p']['conclusive'] and not r['$p']['stale']"; then
	ok "mixed, mapping at 32: $(field "$work/mixed_fresh.json" "r['$p']['measured']"): over the stale threshold $(field "$work/mixed_fresh.json" "r['thresholds'][1]") KiB only through read(): inconclusive, not stale"
else
	bad "mixed, mapping at 32: $(cat "$work/mixed_fresh.json" "$work/mixed_fresh.json.err")"
fi
stop_standin mixed_fresh
mixed_case mixed_stale 4096 65536
p=${pid_of[mixed_stale]}
if check "$work/mixed_stale.json" "r['$p']['conclusive'] and r['$p']['stale'] and r['$p']['basis'] == 'measured'"; then
	ok "mixed, mapping at 4096: $(field "$work/mixed_stale.json" "r['$p']['measured']"): stale, measured, through the read() stream"
else
	bad "mixed, mapping at 4096: $(cat "$work/mixed_stale.json" "$work/mixed_stale.json.err")"
fi
stop_standin mixed_stale

# --- threads: the faults of all the threads count ---------------------------------------------
one_case threads threads 4096 32 4
p=${pid_of[threads]}
PYTHONPATH=$ANSIBLE_COLLECTIONS_PATH "$python" - "$p" >"$work/tasks.json" 2>"$work/tasks.err" <<'EOF'
import json, os, sys
from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_measure as rm
pid = sys.argv[1]
def majflt(path):
    return rm.parse_stat(open(path).read())['majflt']
before = majflt('/proc/%s/stat' % pid)
tasks = dict((t, majflt('/proc/%s/task/%s/stat' % (pid, t))) for t in os.listdir('/proc/%s/task' % pid))
after = majflt('/proc/%s/stat' % pid)
print(json.dumps({'process_before': before, 'process_after': after, 'threads': tasks, 'main': tasks.get(pid)}))
EOF
if check "$work/threads.json" "r['$p']['stale'] and r['$p']['basis'] == 'measured'" &&
	check "$work/tasks.json" "r['process_before'] <= sum(r['threads'].values()) <= r['process_after'] and len([v for v in r['threads'].values() if v > 0]) >= 3 and r['main'] * 2 < r['process_before']"; then
	ok "threads: 4 threads fault, the main thread waits: $(field "$work/threads.json" "r['$p']['measured']"), stale, measured; /proc/$p/stat's majflt is the sum over its threads: $(cat "$work/tasks.json")"
else
	bad "threads: $(cat "$work/threads.json" "$work/threads.json.err" "$work/tasks.json" "$work/tasks.err")"
fi
stop_standin threads

# --- together: one window for three readers ------------------------------------------------------
echo 4096 >"$ra_file" && start_standin t_stale mmap big.bin && start_standin t_idle idle small.bin &&
	echo 32 >"$ra_file" && start_standin t_fresh mmap small.bin
drop_caches
measure "$work/together.json" 32 "${pid_of[t_stale]}" "${pid_of[t_fresh]}" "${pid_of[t_idle]}"
a=${pid_of[t_stale]} b=${pid_of[t_fresh]} c=${pid_of[t_idle]}
for n in t_stale t_fresh t_idle; do show "$n" "$work/together.json" "${pid_of[$n]}"; done
if check "$work/together.json" "r['$a']['stale'] and r['$a']['basis'] == 'measured' and not r['$b']['stale'] and r['$b']['basis'] == 'measured' and r['$c'].get('unmeasured') == 'idle' and len(set(r[p].get('measured', r[p]).get('seconds') for p in ('$a', '$b', '$c'))) == 1"; then
	ok "together, one window: stale $(field "$work/together.json" "r['$a']['measured']['kib_per_fault']") KiB per fault, fresh $(field "$work/together.json" "r['$b']['measured']['kib_per_fault']"), idle unmeasured"
else
	bad "together: $(cat "$work/together.json" "$work/together.json.err")"
fi
for n in t_stale t_fresh t_idle; do stop_standin "$n"; done

# --- gone: an exit during the window, and a pid that is not the process scanned -------------------
sleep 1 &
short=$!
pids+=("$short")
PYTHONPATH=$ANSIBLE_COLLECTIONS_PATH "$python" - "$short" "$$" "$window" >"$work/gone.json" 2>"$work/gone.err" <<'EOF'
import json, sys
from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_measure as rm
short, mine, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
start = rm.read_sample('/', mine)[1]['starttime']
out = rm.measure('/', [short, mine], seconds, starts={mine: start + 1})
print(json.dumps(dict((str(k), v) for k, v in out.items())))
EOF
if check "$work/gone.json" "r['$short']['unmeasured'] == 'gone' and r['$$']['unmeasured'] == 'gone'"; then
	ok "gone: a process that exits during the window, and a pid whose start time is not the scanned one: $(cat "$work/gone.json")"
else
	bad "gone: $(cat "$work/gone.json" "$work/gone.json.err")"
fi

# --- the modules: the measurement decides where the record would not (issue 39) ------------------------------
# read_ahead runs once with nothing reading: its record of this boot then says every file on the device is fresh
# at 32. The value goes to 4096, a reader maps its file, and the value comes back to 32 by hand (another route than
# read_ahead: tuned, udev, a boot-time unit). tuning_facts must name that reader stale, measured; read_ahead must
# refresh it and measure it again at the window; a reader that opened at 32 is never named.
module_args() { # file module-args-json
	printf '{"ANSIBLE_MODULE_ARGS": %s}\n' "$2" >"$1.args"
	PYTHONPATH=$ANSIBLE_COLLECTIONS_PATH "$python" -m "ansible_collections.aemops.os_tuning.plugins.modules.$3" \
		"$1.args" >"$1" 2>"$1.err"
}
ra_args='{"paths": ["'"$work/mnt"'"], "read_ahead_kb": 32, "persist": false, "measure_readers": '"$window"'}'
facts_args='{"intent": {"state": "present", "read_ahead_kb": 32, "paths": ["'"$work/mnt"'"], "candidates": [], "devices": [], "underlying": false, "thp": "never", "thp_defrag": "never", "thp_persist": []}, "measure_readers": '"$window"'}'
echo 32 >"$ra_file"
module_args "$work/m-record.json" "$ra_args" read_ahead
echo 4096 >"$ra_file" && start_standin m_stale mmap big.bin && echo 32 >"$ra_file" && start_standin m_fresh mmap small.bin
drop_caches
module_args "$work/m-facts.json" "$facts_args" tuning_facts
a=${pid_of[m_stale]} b=${pid_of[m_fresh]}
reader() { echo "[x for x in r$2 if x['pid'] == $3]"; }
if check "$work/m-facts.json" "$(reader x "['ansible_facts']['os_tuning']['readers']['stale']" "$a")[0]['measured']['kib_per_fault'] >= 1024 and $(reader x "['ansible_facts']['os_tuning']['readers']['stale']" "$a")[0]['basis'] == 'measured' and not $(reader x "['ansible_facts']['os_tuning']['readers']['stale']" "$b") and $(reader x "['ansible_facts']['os_tuning']['readers']['fine']" "$b")[0]['basis'] == 'measured' and any(m['kind'] == 'reader' and 'pid $a ' in m['subject'] for m in r['ansible_facts']['os_tuning']['compliance']['misses'])"; then
	ok "tuning_facts: the reader opened at 4096 with the record of this boot calling it fresh is stale, measured at $(field "$work/m-facts.json" "$(reader x "['ansible_facts']['os_tuning']['readers']['stale']" "$a")[0]['measured']['kib_per_fault']") KiB per fault, and a miss; the one opened at 32 is fine, measured at $(field "$work/m-facts.json" "$(reader x "['ansible_facts']['os_tuning']['readers']['fine']" "$b")[0]['measured']['kib_per_fault']")"
else
	bad "tuning_facts: $(head -c 3000 "$work/m-facts.json" "$work/m-facts.json.err")"
fi
drop_caches
module_args "$work/m-apply.json" "$ra_args" read_ahead
if check "$work/m-apply.json" "r['changed'] and [x['pid'] for x in r['readers']['refreshed']] == [$a] and r['readers']['refreshed'][0]['measured']['kib_per_fault'] >= 1024 and r['readers']['refreshed'][0]['measured_after']['kib_per_fault'] <= 64 and not r['readers']['needs_restart']"; then
	ok "read_ahead: refreshed pid $a without a restart, $(field "$work/m-apply.json" "r['readers']['refreshed'][0]['measured']['kib_per_fault']") -> $(field "$work/m-apply.json" "r['readers']['refreshed'][0]['measured_after']['kib_per_fault']") KiB per major fault, measured in the process"
else
	bad "read_ahead: $(head -c 3000 "$work/m-apply.json" "$work/m-apply.json.err")"
fi
stop_standin m_stale
stop_standin m_fresh

echo
echo "==== readers measured from outside (/proc/PID/io read_bytes per /proc/PID/stat majflt, ${window}s window, ext4 on $dev, $(uname -r)) ===="
printf '%-10s %s\n' case result
for f in "${figures[@]}"; do printf '%-10s %s\n' "${f%%|*}" "${f#*|}"; done
