#!/usr/bin/env bash
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# make bench, first part: measure on the test VM ("RHEL 8 on Nitro" preset, tests/vm/); the second
# part, bench/caps.sh (also make bench-caps), measures the plateau under EBS-like caps
#
#   1. Effect: read amplification and p50/p99 latency of random 8 KiB mmap reads (the
#      aemops.os_tuning.io_probe module, run with `ansible -m`) on an NVMe data disk (ext4
#      made here) and on the AEM repository's LV (XFS on dm-0), at read-ahead 4096 KiB (the
#      preset, tuned throughput-performance), 128 KiB (the kernel default, RHEL 7) and 32 KiB
#      (the role's value). tuned is stopped for this phase and read-ahead is written to sysfs
#      before each probe; the probe reads the value back and the run fails on a mismatch.
#      BENCH_RUNS rounds, the order of the read-ahead values rotated each round; one seed per
#      round, the same for every device and value.
#   2. Cost: wall time and executions on the target of the aem_tuning role
#      (bench/playbooks/role.yml) against a hand-written ansible.builtin playbook doing the same
#      (bench/playbooks/manual.yml): a first run of each that applies (between them, one probe per
#      device at the value the role left, with tuned running), then BENCH_RUNS rounds of repeat
#      runs (no change expected), alternating role, manual, role, manual... so that the host's
#      load affects both alike. Before each repeat run (untimed) the guest is given back that
#      playbook's own state: its tuned profile active, the other's udev rule and tuned profile
#      moved aside (they would compete). Counted per run: task results on the target (callback
#      bench/callback_plugins/aemops_bench_count.py), module processes in the guest (the
#      inventory's interpreter is a logging shim for /usr/bin/python3) and tuned-adm processes
#      with their arguments (a logging shim bind-mounted over /usr/sbin/tuned-adm). The shims
#      live in /usr/local/lib/aemops-bench and are removed after the cost runs.
#   3. bench/results.json (everything measured, committed) and bench/RESULTS.md (tables and
#      notes, rendered from the JSON by bench/report.py). Raw outputs and logs go to bench/raw/
#      (not committed).
#
# The VM is always stopped (trap). Environment: BENCH_RUNS (3), BENCH_SIZE_MB (256),
# BENCH_READS (2000), AEMOPS_VM_RUN (default: a new directory under $TMPDIR).
# Render again from the JSON without a VM: .venv/bin/python bench/report.py render bench/results.json bench/RESULTS.md
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

runs=${BENCH_RUNS:-3}
size_mb=${BENCH_SIZE_MB:-256}
reads=${BENCH_READS:-2000}
record_kb=8
read_aheads=(4096 128 32)
# shellcheck source-path=SCRIPTDIR source=../tests/vm/vm.env
. tests/vm/vm.env
nvme_link=/dev/disk/by-id/nvme-${VM_NVME_MODEL}_${VM_NVME_A}
nvme_mnt=/srv/nvme-probe
lv_path=$VM_AEM_REPOSITORY

export AEMOPS_VM_RUN=${AEMOPS_VM_RUN:-$(mktemp -d "${TMPDIR:-/tmp}/aemops-bench-vm.XXXXXX")}
export ANSIBLE_COLLECTIONS_PATH=$top/.collections
export ANSIBLE_PIPELINING=true ANSIBLE_NOCOLOR=1
# What a module run costs on a real host: no bytecode cache in the guest (tests/vm/zipcache.py).
export AEMOPS_VM_PYCACHE=0
export PATH=$top/.venv/bin:$PATH
vm=$top/tests/vm/vm.sh
py=$top/.venv/bin/python
report=$top/bench/report.py
raw=$top/bench/raw
inventory=$AEMOPS_VM_RUN/inventory.ini

trap '"$vm" down --purge' EXIT

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*"; }
guest() { "$vm" ssh "$@"; }
hostload() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }

[ -x "$py" ] || { echo "bench: $py missing: run make venv first" >&2; exit 1; }
case $runs in '' | *[!0-9]* | 0) echo "bench: BENCH_RUNS must be a positive integer" >&2; exit 2 ;; esac
rm -rf "$raw"
mkdir -p "$raw/probes" "$raw/cost" "$raw/reports"
start=$(date +%s)
date -u +%Y-%m-%dT%H:%M:%SZ >"$raw/started"

log "booting the VM in $AEMOPS_VM_RUN"
"$vm" up
"$vm" inventory >/dev/null
"$vm" facts | tee "$raw/facts-preset.txt"

log "making ext4 on the NVMe disk $nvme_link, mounted at $nvme_mnt"
guest bash -s -- "$nvme_link" "$nvme_mnt" <bench/probe-fs.sh

# Device names (the governing devices) and the environment, as KEY=VALUE lines.
guest bash -s -- "$nvme_link" "$nvme_mnt" "$lv_path" >"$raw/env-guest.txt" <<'EOF'
set -euo pipefail
nvme=$(basename "$(readlink -f "$1")")
lv=$(basename "$(readlink -f /dev/mapper/vg_aem-lv_repo)")
echo "nvme_dev=$nvme"
echo "lv_dev=$lv"
echo "nvme_model=$(cat "/sys/block/$nvme/device/model" | xargs)"
echo "nvme_serial=$(cat "/sys/block/$nvme/device/serial" | xargs)"
echo "nvme_size_mib=$(($(cat "/sys/block/$nvme/size") / 2048))"
echo "nvme_fs=$(findmnt -n -o FSTYPE "$2")"
echo "lv_name=vg_aem/lv_repo"
echo "lv_slaves=$(ls "/sys/block/$lv/slaves" | paste -sd, -)"
echo "lv_size_mib=$(($(cat "/sys/block/$lv/size") / 2048))"
echo "lv_fs=$(findmnt -n -o FSTYPE --target "$3")"
echo "kernel=$(uname -r)"
echo "os=$(. /etc/os-release && echo "$PRETTY_NAME")"
echo "cpus=$(nproc)"
echo "cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "mem_mib=$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))"
echo "tuned=$(dpkg-query -W -f='${Version}' tuned)"
echo "tuned_profile=$(tuned-adm active | sed 's/^.*: //')"
echo "preset_read_ahead_kb=$nvme:$(cat "/sys/block/$nvme/queue/read_ahead_kb") $lv:$(cat "/sys/block/$lv/queue/read_ahead_kb")"
echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
EOF
{
  echo "accel=$(cat "$AEMOPS_VM_RUN/accel")"
  echo "qemu=$(qemu-system-x86_64 --version | awk 'NR==1{print $4}')"
  echo "disk_cache=$(grep -o 'cache=[a-z]*' tests/vm/lib.sh | head -1)"
  echo "overlay_fs=$(df -T "$AEMOPS_VM_RUN" | awk 'NR==2{print $2}')"
  echo "host_kernel=$(uname -r)"
  echo "host_cpus=$(nproc)"
  echo "host_cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "host_mem_mib=$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))"
  echo "ansible=$(ansible --version | sed -n '1s/^ansible \[core \(.*\)\]$/\1/p')"
  echo "git_commit=$(git rev-parse HEAD)"
  echo "git_dirty=$(git status --porcelain --untracked-files=no | awk '{print $2}' | paste -sd' ' -)"
  echo "git_dirty_code=$(git status --porcelain --untracked-files=no -- plugins roles | awk '{print $2}' | paste -sd' ' -)"
  echo "nvme_caps=${AEMOPS_VM_NVME_CAPS:-none}"
  echo "runs=$runs"
  echo "size_mb=$size_mb"
  echo "reads=$reads"
  echo "record_kb=$record_kb"
  echo "read_aheads=${read_aheads[*]}"
} >"$raw/env-host.txt"
nvme_dev=$(sed -n 's/^nvme_dev=//p' "$raw/env-guest.txt")
lv_dev=$(sed -n 's/^lv_dev=//p' "$raw/env-guest.txt")

# probe LABEL PATH RA_KB ROUND SEED: one io_probe through Ansible; RA_KB is what the probe must find.
probe() {
  local label=$1 path=$2 ra=$3 round=$4 seed=$5 out load rc=0 try
  out=$raw/probes/$label-ra$ra-$round
  for try in 1 2; do
    load=$(hostload)
    rc=0
    ansible -i "$inventory" aemvm -m aemops.os_tuning.io_probe \
      -a "path=$path size_mb=$size_mb reads=$reads record_kb=$record_kb method=mmap seed=$seed timeout=120" \
      >"$out.out" 2>"$out.err" || rc=$?
    if [ "$rc" = 0 ]; then break; fi
    log "probe $label ra=$ra round $round failed (rc $rc, try $try): $(tail -c 600 "$out.out")"
    [ "$try" = 2 ] && return 1
    sleep 5
  done
  "$py" "$report" probe-record --label "$label" --read-ahead "$ra" --round "$round" --seed "$seed" \
    --load "$load" --out "$out.json" <"$out.out"
}

log "effect: tuned stopped (it would set read-ahead back); read-ahead written to sysfs before each probe"
guest 'systemctl stop tuned && systemctl is-active tuned || true' >"$raw/tuned-stopped.txt"
for round in $(seq 1 "$runs"); do
  seed=$((4241 + round))
  rot=$(((round - 1) % ${#read_aheads[@]}))
  order=("${read_aheads[@]:rot}" "${read_aheads[@]:0:rot}")
  for ra in "${order[@]}"; do
    guest "echo $ra > /sys/block/$nvme_dev/queue/read_ahead_kb && echo $ra > /sys/block/$lv_dev/queue/read_ahead_kb"
    probe nvme "$nvme_mnt" "$ra" "$round" "$seed"
    probe lv "$lv_path" "$ra" "$round" "$seed"
    log "round $round/$runs, read-ahead $ra KiB: $("$py" "$report" brief "$raw/probes/nvme-ra$ra-$round.json" "$raw/probes/lv-ra$ra-$round.json")"
  done
done

log "starting tuned again: the preset (4096 KiB) must come back before the role runs"
guest systemctl start tuned
"$vm" wait
guest "cat /sys/block/$nvme_dev/queue/read_ahead_kb /sys/block/$lv_dev/queue/read_ahead_kb" >"$raw/ra-before-role.txt"
if [ "$(sort -u "$raw/ra-before-role.txt")" != 4096 ]; then
  echo "bench: tuned did not restore 4096 KiB: $(paste -sd' ' "$raw/ra-before-role.txt")" >&2
  exit 1
fi

shim=/usr/local/lib/aemops-bench
count_inventory=$AEMOPS_VM_RUN/inventory-count.ini
stash=/root/aemops-bench-stash
log "cost: counting shims in the guest ($shim): python3 as the inventory's interpreter, tuned-adm bind-mounted"
guest bash -s -- "$shim" <<'EOF'
set -euo pipefail
shim=$1
install -d -m 0755 "$shim"
cp /usr/sbin/tuned-adm "$shim/tuned-adm.real"
printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>%s/tuned-adm.log\nexec %s/tuned-adm.real "$@"\n' "$shim" "$shim" >"$shim/tuned-adm"
printf '#!/bin/sh\necho python >>%s/python.log\nexec /usr/bin/python3 "$@"\n' "$shim" >"$shim/python3"
chmod 0755 "$shim/tuned-adm" "$shim/python3"
: >"$shim/tuned-adm.log"
: >"$shim/python.log"
mount --bind "$shim/tuned-adm" /usr/sbin/tuned-adm
tuned-adm --version >/dev/null
grep -qx -- --version "$shim/tuned-adm.log"
"$shim/python3" -c 'pass'
grep -qx python "$shim/python.log"
: >"$shim/tuned-adm.log"
: >"$shim/python.log"
EOF
sed "s#ansible_python_interpreter=/usr/bin/python3#ansible_python_interpreter=$shim/python3#" "$inventory" >"$count_inventory"
grep -q "ansible_python_interpreter=$shim/python3" "$count_inventory" ||
  { echo "bench: cannot set the counting interpreter in $count_inventory" >&2; exit 1; }

# world KIND: before a repeat run of KIND (untimed), leave in the guest only KIND's own state: its
# tuned profile active (tuned settled), the other playbook's udev rule and tuned profile moved to
# $stash (the role reports the manual's udev rule as a competing rule); then empty the logs.
world() {
  guest bash -s -- "$1" "$shim" "$stash" <<'EOF'
set -euo pipefail
kind=$1 shim=$2 stash=$3
mkdir -p "$stash/manual"
if [ "$kind" = role ]; then
  want=$(cat "$stash/role.profile")
else
  want=aem-manual
  [ ! -e "$stash/manual/99-aem-read-ahead.rules" ] || mv "$stash/manual/99-aem-read-ahead.rules" /etc/udev/rules.d/
  [ ! -e "$stash/manual/aem-manual" ] || mv "$stash/manual/aem-manual" /etc/tuned/
fi
if [ "$(cat /etc/tuned/active_profile)" != "$want" ]; then
  tuned-adm profile $want # unquoted: active_profile may name several profiles
  sleep 3
  for _ in $(seq 60); do # the last of the two lines must be "static tuning ... applied" (as vm.sh wait)
    last=$(grep -E "starting tuning|static tuning from profile" /var/log/tuned/tuned.log | tail -1)
    case $last in *"static tuning"*) break ;; esac
    sleep 2
  done
fi
if [ "$kind" = role ]; then
  [ ! -e /etc/udev/rules.d/99-aem-read-ahead.rules ] || mv /etc/udev/rules.d/99-aem-read-ahead.rules "$stash/manual/"
  [ ! -e /etc/tuned/aem-manual ] || mv /etc/tuned/aem-manual "$stash/manual/"
fi
: >"$shim/tuned-adm.log"
: >"$shim/python.log"
EOF
}

# play KIND ROUND: one ansible-playbook run of bench/playbooks/KIND.yml, timed; ROUND 0 is the first run.
play() {
  local kind=$1 round=$2 out=$raw/cost/$1-$2 load t0 t1 rc=0
  rm -f "$out.tasks.jsonl"
  load=$(hostload)
  t0=$(now)
  BENCH_REPORT_DIR=$raw/reports BENCH_COUNT_OUT=$out.tasks.jsonl \
    ANSIBLE_CALLBACK_PLUGINS=$top/bench/callback_plugins ANSIBLE_CALLBACKS_ENABLED=aemops_bench_count \
    ansible-playbook -i "$count_inventory" "bench/playbooks/$kind.yml" >"$out.log" 2>&1 || rc=$?
  t1=$(now)
  guest "sed 's/^/python /' $shim/python.log; sed 's/^/tuned-adm /' $shim/tuned-adm.log; : >$shim/python.log; : >$shim/tuned-adm.log" \
    >"$out.guest.txt"
  "$py" "$report" cost-record --kind "$kind" --round "$round" --start "$t0" --end "$t1" --rc "$rc" \
    --load "$load" --tasks "$out.tasks.jsonl" --guest "$out.guest.txt" --out "$out.json" <"$out.log"
  log "$kind run $round: $("$py" "$report" brief "$out.json")"
  if [ "$rc" != 0 ]; then
    tail -40 "$out.log" >&2
    echo "bench: bench/playbooks/$kind.yml failed (rc $rc); log in $out.log" >&2
    return 1
  fi
}

log "cost: the role, first run (applies)"
play role 0
guest "mkdir -p $stash && cat /etc/tuned/active_profile | tee $stash/role.profile" >"$raw/role-profile.txt"
log "cross-check: one probe per device at the value the role left, tuned running"
probe nvme "$nvme_mnt" 32 role 4242
probe lv "$lv_path" 32 role 4242
log "cost: the manual playbook, first run (applies)"
play manual 0
log "cost: $runs rounds of repeat runs, alternating role and manual"
for round in $(seq 1 "$runs"); do
  for kind in role manual; do
    world "$kind"
    play "$kind" "$round"
  done
done
log "removing the counting shims"
guest bash -s -- "$shim" >"$raw/shims-removed.txt" <<'EOF'
set -euo pipefail
umount /usr/sbin/tuned-adm
rm -rf "$1"
head -1 /usr/sbin/tuned-adm
EOF
"$vm" facts >"$raw/facts-end.txt"

"$vm" down --purge
end=$(date +%s)
echo $((end - start)) >"$raw/duration_s"
"$py" "$report" collect "$raw" bench/results.json
"$py" "$report" render bench/results.json bench/RESULTS.md
log "done in $(((end - start) / 60)) min $(((end - start) % 60)) s: bench/RESULTS.md, bench/results.json (raw outputs in bench/raw/)"
