#!/usr/bin/env bash
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# make bench-caps (and the second part of make bench, after bench/run.sh): the plateau under
# EBS-like caps, on the test VM booted with AEMOPS_VM_NVME_CAPS=$BENCH_CAPS (default gp3:
# QEMU throttles each NVMe drive to 3,000 IOPS and 125 MiB/s, I/Os counted in 256 KiB units).
#
#   1. ext4 made on NVMe disk A, mounted at /srv/nvme-probe.
#   2. Before: the preset as booted, tuned running (the NVMe must be at 4096 KiB). The Oak-like
#      load of aemops.os_tuning.read_ahead_sweep (BENCH_CAPS_READERS threads of random 8-16 KiB
#      reads through one mmap for BENCH_CAPS_DURATION s, then a cold sequential read) at the
#      current value only (sweep=[4096]: nothing is changed), with the device's MiB/s sampled
#      every BENCH_CAPS_INTERVAL s (timeline_interval). BENCH_CAPS_RUNS rounds.
#   3. The aem_tuning role (bench/playbooks/role.yml: read-ahead 32 KiB on the NVMe by-id links).
#   4. After: the NVMe must be at 32 KiB; the same load, BENCH_CAPS_RUNS rounds.
#   5. The trade-off: read_ahead_sweep over its default values (4096 1024 256 128 64 32 16 8) with
#      the volume type of the caps (gp3), BENCH_CAPS_SWEEP_DURATION s per phase; its
#      recommended_kb and why are recorded.
#   6. The sequential readers (issue 41): an Oak-like segment store of BENCH_CAPS_SEQ_STORE_MB MiB
#      (256 MiB tar files) on ext4 on NVMe disk B and one file of BENCH_CAPS_SEQ_FILE_MB MiB on disk
#      A (bench/seq_guest.py setup); then, at the caps of the boot (gp3) and at
#      BENCH_CAPS_SEQ_PROVISIONED (default seed: 3,000 IOPS and 250 MiB/s, set on both drives through
#      QEMU's QMP block_set_io_throttle, the same throttle as at boot), for read-ahead 32, 128, 512
#      and 4096 KiB: `tar -cf /dev/zero store` and `cp file /dev/null`, cold (page cache
#      dropped), /proc/diskstats sampled every BENCH_CAPS_INTERVAL s (bench/seq_guest.py run);
#      BENCH_CAPS_SEQ_ROUNDS rounds, the order of the values rotated between rounds.
#   7. bench/results.json gets the key "caps" (the other sections are kept), bench/RESULTS.md is
#      rendered again and the charts drawn into bench/charts/ (bench/report.py caps-collect,
#      render, charts). Raw module outputs go to bench/raw/caps/ (not committed).
#
# The VM is always stopped (trap). Environment: BENCH_CAPS (gp3; or io2, seed, iops=N,mibps=M),
# BENCH_CAPS_RUNS (3), BENCH_CAPS_DURATION (20), BENCH_CAPS_READERS (8), BENCH_CAPS_SIZE_MB (512),
# BENCH_CAPS_INTERVAL (0.5), BENCH_CAPS_SWEEP_DURATION (5), AEMOPS_VM_SMP (2), BENCH_CAPS_SEQ_PROVISIONED (seed; or
# iops=N,mibps=M), BENCH_CAPS_SEQ_ROUNDS (2), BENCH_CAPS_SEQ_STORE_MB (896: the emulated NVMe disk
# has 1 GiB), BENCH_CAPS_SEQ_FILE_MB (512), AEMOPS_VM_RUN (default: a new directory under $TMPDIR).
# Render again without a VM: .venv/bin/python bench/report.py render bench/results.json bench/RESULTS.md
#                      and:  .venv/bin/python bench/report.py charts bench/results.json bench/charts
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

caps=${BENCH_CAPS:-gp3}
runs=${BENCH_CAPS_RUNS:-3}
duration=${BENCH_CAPS_DURATION:-20}
readers=${BENCH_CAPS_READERS:-8}
size_mb=${BENCH_CAPS_SIZE_MB:-512}
interval=${BENCH_CAPS_INTERVAL:-0.5}
sweep_duration=${BENCH_CAPS_SWEEP_DURATION:-5}
sweep_values=4096,1024,256,128,64,32,16,8
seq_provisioned=${BENCH_CAPS_SEQ_PROVISIONED:-seed}
seq_rounds=${BENCH_CAPS_SEQ_ROUNDS:-2}
seq_store_mb=${BENCH_CAPS_SEQ_STORE_MB:-896}
seq_file_mb=${BENCH_CAPS_SEQ_FILE_MB:-512}
seq_values=32,128,512,4096
before_kb=4096
after_kb=32
# shellcheck source-path=SCRIPTDIR source=../tests/vm/vm.env
. tests/vm/vm.env
nvme_link=/dev/disk/by-id/nvme-${VM_NVME_MODEL}_${VM_NVME_A}
nvme_mnt=/srv/nvme-probe
nvme_b_link=/dev/disk/by-id/nvme-${VM_NVME_MODEL}_${VM_NVME_B}
seq_mnt=/srv/nvme-seq
seq_store=$seq_mnt/crx-quickstart/repository/segmentstore
seq_file=$nvme_mnt/datastore/blob-large.bin

# cap_numbers SPEC: "IOPS MIBPS" of a caps spec (tests/vm/lib.sh's vm_nvme_caps has the same table).
cap_numbers() {
  case $1 in
  gp3) echo 3000 125 ;;
  io2) echo 16000 1000 ;;
  seed) echo 3000 250 ;;
  iops=*,mibps=*) n=${1#iops=} && echo "${n%%,*} ${1#*,mibps=}" ;;
  *) return 1 ;;
  esac
}
case $caps in
gp3) volume="volume_type=gp3" ;;
io2) volume="volume_type=io2 iops=16000 throughput_mibps=1000" ;;
seed) volume="volume_type=custom iops=3000 throughput_mibps=250" ;;
iops=*,mibps=*) n=${caps#iops=} && volume="volume_type=custom iops=${n%%,*} throughput_mibps=${caps#*,mibps=}" ;;
*) echo "bench-caps: BENCH_CAPS must be gp3, io2, seed or iops=N,mibps=M (got '$caps')" >&2; exit 2 ;;
esac
cap_numbers "$seq_provisioned" >/dev/null || { echo "bench-caps: BENCH_CAPS_SEQ_PROVISIONED must be gp3, io2, seed or iops=N,mibps=M (got '$seq_provisioned')" >&2; exit 2; }
for n in "$runs" "$duration" "$readers" "$size_mb" "$sweep_duration" "$seq_rounds" "$seq_store_mb" "$seq_file_mb"; do
  case $n in '' | *[!0-9]* | 0) echo "bench-caps: BENCH_CAPS_RUNS, _DURATION, _READERS, _SIZE_MB, _SWEEP_DURATION, _SEQ_ROUNDS, _SEQ_STORE_MB and _SEQ_FILE_MB must be positive integers" >&2; exit 2 ;; esac
done

export AEMOPS_VM_RUN=${AEMOPS_VM_RUN:-$(mktemp -d "${TMPDIR:-/tmp}/aemops-bench-caps-vm.XXXXXX")}
export AEMOPS_VM_NVME_CAPS=$caps
# Two vCPUs, as when the plateau was first measured (2026-12-01; vm.sh has given a TCG guest one by
# default since): the guest's CPU runs the readers' page faults and the sequential jobs.
export AEMOPS_VM_SMP=${AEMOPS_VM_SMP:-2}
export ANSIBLE_COLLECTIONS_PATH=$top/.collections
export ANSIBLE_PIPELINING=true ANSIBLE_NOCOLOR=1
# What a module run costs on a real host: no bytecode cache in the guest (tests/vm/zipcache.py).
export AEMOPS_VM_PYCACHE=0
export PATH=$top/.venv/bin:$PATH
vm=$top/tests/vm/vm.sh
py=$top/.venv/bin/python
report=$top/bench/report.py
raw=$top/bench/raw/caps
inventory=$AEMOPS_VM_RUN/inventory.ini

trap '"$vm" down --purge' EXIT

log() { printf '[bench-caps %s] %s\n' "$(date +%T)" "$*"; }
guest() { "$vm" ssh "$@"; }
hostload() { cut -d' ' -f1 /proc/loadavg; }
phase_start=$(date +%s)
# phase NAME: the seconds since the previous phase ended, logged and kept in $raw/phases.txt.
phase() {
  local t
  t=$(date +%s)
  echo "$1 $((t - phase_start))" >>"$raw/phases.txt"
  log "phase $1: $((t - phase_start)) s"
  phase_start=$t
}

[ -x "$py" ] || { echo "bench-caps: $py missing: run make venv first" >&2; exit 1; }
rm -rf "$raw"
mkdir -p "$raw/sweeps" "$raw/reports" "$raw/seq"
start=$(date +%s)
date -u +%Y-%m-%dT%H:%M:%SZ >"$raw/started"

log "booting the VM with AEMOPS_VM_NVME_CAPS=$caps in $AEMOPS_VM_RUN"
"$vm" up
"$vm" inventory >/dev/null
"$vm" facts >"$raw/facts-preset.txt"
phase boot

log "making ext4 on the NVMe disk $nvme_link, mounted at $nvme_mnt"
guest bash -s -- "$nvme_link" "$nvme_mnt" <bench/probe-fs.sh
guest bash -s -- "$nvme_link" >"$raw/env-guest.txt" <<'EOF'
set -euo pipefail
nvme=$(basename "$(readlink -f "$1")")
echo "nvme_dev=$nvme"
echo "nvme_size_mib=$(($(cat "/sys/block/$nvme/size") / 2048))"
echo "kernel=$(uname -r)"
echo "os=$(. /etc/os-release && echo "$PRETTY_NAME")"
echo "cpus=$(nproc)"
echo "mem_mib=$(($(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))"
echo "tuned=$(dpkg-query -W -f='${Version}' tuned)"
echo "tuned_profile=$(tuned-adm active | sed 's/^.*: //')"
echo "tuned_active=$(systemctl is-active tuned || true)"
echo "preset_read_ahead_kb=$(cat "/sys/block/$nvme/queue/read_ahead_kb")"
EOF
{
  echo "accel=$(cat "$AEMOPS_VM_RUN/accel")"
  echo "qemu=$(qemu-system-x86_64 --version | awk 'NR==1{print $4}')"
  echo "host_kernel=$(uname -r)"
  echo "host_cpus=$(nproc)"
  echo "host_cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "ansible=$(ansible --version | sed -n '1s/^ansible \[core \(.*\)\]$/\1/p')"
  echo "git_commit=$(git rev-parse HEAD)"
  echo "git_dirty=$(git status --porcelain --untracked-files=no | awk '{print $2}' | paste -sd' ' -)"
  echo "git_dirty_code=$(git status --porcelain --untracked-files=no -- plugins roles bench/caps.sh | awk '{print $2}' | paste -sd' ' -)"
  echo "nvme_caps=$caps"
  echo "volume=$volume"
  echo "runs=$runs"
  echo "duration=$duration"
  echo "readers=$readers"
  echo "size_mb=$size_mb"
  echo "interval=$interval"
  echo "sweep_duration=$sweep_duration"
  echo "sweep_values=$sweep_values"
  echo "seq_caps=$caps $seq_provisioned"
  echo "seq_rounds=$seq_rounds"
  echo "seq_values=$seq_values"
  echo "seq_store_mb=$seq_store_mb"
  echo "seq_file_mb=$seq_file_mb"
} >"$raw/env-host.txt"
nvme_dev=$(sed -n 's/^nvme_dev=//p' "$raw/env-guest.txt")
phase mkfs

# ra_is KB: fail unless the NVMe's read_ahead_kb is KB.
ra_is() {
  local now
  now=$(guest "cat /sys/block/$nvme_dev/queue/read_ahead_kb")
  if [ "$now" != "$1" ]; then
    echo "bench-caps: $nvme_dev is at read_ahead_kb=$now, expected $1" >&2
    exit 1
  fi
}

# sweep PHASE ROUND VALUES DURATION [EXTRA]: one read_ahead_sweep through Ansible, recorded as
# $raw/sweeps/PHASE-ROUND.json; ROUND's seed is the same for before and after.
sweep() {
  local name=$1 round=$2 values=$3 secs=$4 extra=${5:-} out load rc=0
  out=$raw/sweeps/$name-$round
  load=$(hostload)
  ansible -i "$inventory" aemvm -m aemops.os_tuning.read_ahead_sweep \
    -a "path=$nvme_mnt sweep=$values readers=$readers duration=$secs size_mb=$size_mb seed=$((4241 + round)) timeout=600 $volume $extra" \
    >"$out.out" 2>"$out.err" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "bench-caps: read_ahead_sweep $name round $round failed (rc $rc): $(tail -c 1500 "$out.out")" >&2
    exit 1
  fi
  "$py" "$report" caps-record --phase "$name" --round "$round" --load "$load" --load-after "$(hostload)" \
    --out "$out.json" <"$out.out"
  log "$name round $round: $("$py" "$report" brief "$out.json")"
}

log "before: the preset, tuned running ($(sed -n 's/^tuned_profile=//p' "$raw/env-guest.txt")), $nvme_dev at $before_kb KiB"
for round in $(seq 1 "$runs"); do
  ra_is "$before_kb"
  sweep before "$round" "$before_kb" "$duration" "timeline_interval=$interval"
done
phase before

log "the aem_tuning role (bench/playbooks/role.yml)"
rc=0
BENCH_REPORT_DIR=$raw/reports ansible-playbook -i "$inventory" bench/playbooks/role.yml >"$raw/role.log" 2>&1 || rc=$?
if [ "$rc" != 0 ]; then
  tail -40 "$raw/role.log" >&2
  echo "bench-caps: bench/playbooks/role.yml failed (rc $rc); log in $raw/role.log" >&2
  exit 1
fi
log "role: $(sed -n '/^PLAY RECAP/,$p' "$raw/role.log" | grep ' : ok=' | tr -s ' ')"
guest "tuned-adm active; systemctl is-active tuned" >"$raw/tuned-after-role.txt"
phase role

log "after: the role's $after_kb KiB on $nvme_dev"
for round in $(seq 1 "$runs"); do
  ra_is "$after_kb"
  sweep after "$round" "$after_kb" "$duration" "timeline_interval=$interval"
done
phase after

log "the trade-off: read_ahead_sweep over $sweep_values, $sweep_duration s per phase"
sweep sweep 1 "$sweep_values" "$sweep_duration"
ra_is "$after_kb"
phase sweep

# throttle SPEC: both NVMe drives' QEMU throttle set to SPEC's caps (I/Os counted in 256 KiB units,
# as at boot: tests/vm/lib.sh), through the run's QMP socket; query-block's figures are recorded.
throttle() {
  local iops mibps
  read -r iops mibps < <(cap_numbers "$1")
  python3 - "$AEMOPS_VM_RUN/qmp.sock" "$iops" $((mibps * 1048576)) >"$raw/seq/throttle-$1.json" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
def qmp(cmd, **args):
    f.write(json.dumps({"execute": cmd, "arguments": args}) + "\n")
    f.flush()
    reply = {}
    while "return" not in reply and "error" not in reply:
        reply = json.loads(f.readline())
    if "error" in reply:
        sys.exit("qmp %s: %s" % (cmd, reply["error"]["desc"]))
    return reply["return"]
qmp("qmp_capabilities")
iops, bps = int(sys.argv[2]), int(sys.argv[3])
for drive in ("nvme-a", "nvme-b"):
    qmp("block_set_io_throttle", device=drive, bps=bps, bps_rd=0, bps_wr=0, iops=iops, iops_rd=0, iops_wr=0,
        iops_size=262144)
got = dict((b["device"], dict((k, b["inserted"].get(k)) for k in ("iops", "bps", "iops_size")))
           for b in qmp("query-block") if b["device"] in ("nvme-a", "nvme-b"))
if len(got) != 2 or any(v != {"iops": iops, "bps": bps, "iops_size": 262144} for v in got.values()):
    sys.exit("throttle not as set: %r" % got)
print(json.dumps(got))
EOF
}

log "sequential readers: a $seq_store_mb MiB segment store on disk B, a $seq_file_mb MiB file on disk A"
guest bash -s -- "$nvme_b_link" "$seq_mnt" <bench/probe-fs.sh
guest "python3 - setup $seq_store $seq_store_mb $seq_file $seq_file_mb" <bench/seq_guest.py >"$raw/seq/setup.json"
nvme_b_dev=$(guest "basename \$(readlink -f $nvme_b_link)")
log "setup: $(cat "$raw/seq/setup.json") (store on $nvme_b_dev)"
phase seq-setup
for spec in $caps $seq_provisioned; do
  throttle "$spec"
  log "caps $spec: $(cat "$raw/seq/throttle-$spec.json")"
  for round in $(seq 1 "$seq_rounds"); do
    values=$(echo "$seq_values" | tr ',' '\n')
    for _ in $(seq 2 "$round"); do values=$(tail -n +2 <<<"$values"; head -1 <<<"$values"); done # rotated by round - 1
    for kb in $values; do
      for job in tar cp; do
        if [ "$job" = tar ]; then dev=$nvme_b_dev src=$seq_store; else dev=$nvme_dev src=$seq_file; fi
        out=$raw/seq/$spec-$job-$kb-$round
        load=$(hostload)
        guest "python3 - run $job $dev $kb $interval $src" <bench/seq_guest.py >"$out.out"
        "$py" "$report" seq-record --caps "$spec" --round "$round" --load "$load" --load-after "$(hostload)" \
          --out "$out.json" <"$out.out"
        log "seq $spec round $round: $("$py" "$report" brief "$out.json")"
      done
    done
  done
  phase "seq-$spec"
done
ra_is "$after_kb"

"$vm" facts >"$raw/facts-end.txt"
"$vm" down --purge
end=$(date +%s)
echo $((end - start)) >"$raw/duration_s"
"$py" "$report" caps-collect "$raw" bench/results.json
"$py" "$report" render bench/results.json bench/RESULTS.md
"$py" "$report" charts bench/results.json bench/charts
log "phases (s): $(paste -sd' ' "$raw/phases.txt")"
log "done in $(((end - start) / 60)) min $(((end - start) % 60)) s: bench/RESULTS.md, bench/results.json, bench/charts/ (raw outputs in $raw)"
