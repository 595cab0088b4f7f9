#!/usr/bin/env bash
# Run the aemops.os_tuning test VM. See tests/vm/README.md.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
# ssh sets O_NONBLOCK on the standard input it is given and can leave it so when it is killed
# (timeout, keepalive). An inherited /dev/null is one open file description shared with every
# process of the run, and each later ansible-* would refuse to start ("Ansible requires blocking
# IO ... <stdin>"): take a /dev/null of our own. A pipe or a file (vm.sh ssh 'python3 -' <x) stays.
if [ -c /dev/stdin ] && [ ! -t 0 ]; then exec </dev/null; fi

RUN=${AEMOPS_VM_RUN:-/tmp/aemops-vm}
WAIT_TIMEOUT=${AEMOPS_VM_WAIT_TIMEOUT:-600}

# The io_opt disk (up --ioopt-disk, or AEMOPS_VM_IOOPT_DISK=1): one more virtio-blk disk, blank,
# whose device reports an optimal I/O size (QEMU's opt_io_size property, in bytes; the device
# passes it to the guest in logical blocks, in the virtio-blk config's topology), so that the
# guest kernel's own rule gives it a read-ahead above 128 KiB: max(2 x io_opt, 128 KiB) from
# Linux 5.10, 8192 KiB on bookworm's 6.1 for 4 MiB. Its constants are here and not in vm.env:
# vm.env is an input of the image's cache key, and this disk is no part of the image (a qcow2
# of its own in the run dir, made at up). up writes them to $RUN/ioopt-disk (KEY=value lines,
# which the default scenario reads); start_qemu attaches the disk whenever that file exists,
# so every reboot of the run keeps it.
VM_IOOPT_SERIAL=aemioopt0
VM_IOOPT_OPT_IO_SIZE=4194304
VM_IOOPT_SLOT=0x07
VM_IOOPT_DISK_SIZE=1G


usage() {
	cat <<EOF
usage: $0 COMMAND [ARGS]

  build [--force] [--grub] build or reuse the cached image (--grub: and its grub
                           variant), print its directory
  up [--grub] [--swap-nvme] [--no-wait] [--release bookworm|bullseye] [--ioopt-disk]
                           start a fresh VM (overlays on the cached image; builds
                           it first if needed) and wait until it is ready;
                           --grub boots SeaBIOS + GRUB from the root disk instead
                           of qemu's direct kernel boot; --release bullseye: the
                           bullseye image (tuned 2.15, virtual-guest), always GRUB;
                           --ioopt-disk: one more virtio disk (serial $VM_IOOPT_SERIAL)
                           reporting io_opt $VM_IOOPT_OPT_IO_SIZE bytes, kept for reboots
  wait [SECONDS]           ssh answers, systemctl is-system-running --wait,
                           tuned has applied its profile
  ssh [CMD...]             run CMD in the guest as root (a shell without CMD)
  reboot [--swap-nvme]     reboot from inside the guest (qemu exits at the reset
                           and is started again) and wait; --swap-nvme powers off
                           instead, swaps the two NVMe controllers' PCI slots and
                           starts qemu again (nvme0n1<->nvme1n1)
  stop                     power the guest off (systemctl poweroff), wait for qemu to exit
  start [--swap-nvme]      start qemu again with the run's disks and wait
  upgrade SUITE            stop; upgrade the root disk offline to SUITE from the
                           cached packages (upgrade.sh apply); start; reinstall GRUB's
                           boot code in the guest; wait (grub boot only)
  down [--purge]           kill qemu (pid file); --purge also deletes the run dir
  status                   qemu pid, port, accel, NVMe order, guest boot id
  inventory                write and print \$RUN/inventory.ini and \$RUN/ssh_config
  facts                    read-ahead, tuned, THP and disk serials in the guest
  collect [--host-only] DIR
                           keep what tells why a run failed in DIR: the serial log of
                           every boot, qemu's stderr, the status and, when the guest
                           answers, its journal of every boot, tuned.log, the failed
                           units and the block devices' read-ahead (the destroy steps
                           call it before down --purge; --host-only, for a scenario
                           that passed: the serial log, qemu's stderr and the status)

environment:
  AEMOPS_VM_RUN=$RUN   run state: key, port, pid, serial.log, overlays
  AEMOPS_VM_CACHE=$VM_CACHE
  AEMOPS_VM_ACCEL=auto|kvm|tcg   AEMOPS_VM_MEM=$VM_MEM   AEMOPS_VM_SMP=$VM_SMP
  AEMOPS_VM_SWAP_NVME=1 (same as up --swap-nvme)   AEMOPS_VM_WAIT_TIMEOUT=$WAIT_TIMEOUT
  AEMOPS_VM_BOOT=kernel|grub (up: same as --grub when grub; default kernel)
  AEMOPS_VM_RELEASE=bookworm|bullseye (up: same as --release)
  AEMOPS_VM_WARM_REBOOT=1 (reboot: keep the qemu process, reset in place)
  AEMOPS_VM_NVME_CAPS=none|gp3|io2|seed|iops=N,mibps=M (up: EBS-like caps on
                           both NVMe drives, QEMU throttling; kept for reboots)
  AEMOPS_VM_IOOPT_DISK=1 (up: same as --ioopt-disk)
  AEMOPS_VM_PYCACHE=0 (up, upgrade: no bytecode cache for module payloads in the
                           guest; default 1, see tests/vm/zipcache.py)

Callers should always stop the VM:  trap '$0 down' EXIT
EOF
}

pid_alive() { # true if the pid file names a running qemu of ours
	local pid
	pid=$(cat "$RUN/qemu.pid" 2>/dev/null) || return 1
	grep -qa aemops-vm "/proc/$pid/cmdline" 2>/dev/null
}

purge_run() { # never rm -rf a directory that vm.sh did not create
	[ -e "$RUN" ] || return 0
	[ -e "$RUN/.aemops-vm" ] || [ -z "$(ls -A "$RUN")" ] ||
		die "$RUN exists and is not a vm.sh run dir; refusing to delete it"
	rm -rf "$RUN"
}

vssh() { ssh -F "$RUN/ssh_config" aemvm "$@"; }

# What the console said about a boot that does not come up, from the serial log's last boot
# (after its last "Linux version"), without colours, at most 6 lines: emergency or rescue mode
# and why (a device that timed out, a failed dependency), a panic, initramfs's shell.
# BOOT_STOPPED: the lines that say the boot will not reach sshd (cmd_wait gives up on them).
BOOT_STOPPED='emergency mode|rescue mode|Kernel panic|dropping to a shell'
BOOT_TROUBLE="$BOOT_STOPPED|Timed out waiting for device|Dependency failed for|ALERT!|Give root password"
boot_trouble() { # SERIAL_LOG
	[ -r "$1" ] || return 0
	awk -v pat="$BOOT_TROUBLE" '
		/Linux version / { n = 0 }
		$0 ~ pat { gsub(/\033(\[[0-9;:]*[A-Za-z]|[A-Za-z])/, ""); gsub(/\r/, ""); sub(/^ +/, ""); seen[n++] = $0 }
		END { for (i = 0; i < n && i < 6; i++) print seen[i] }' "$1"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_client_config() {
	local port
	port=$(cat "$RUN/port")
	cat >"$RUN/ssh_config" <<EOF
Host aemvm
  HostName 127.0.0.1
  Port $port
  User root
  IdentityFile $RUN/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
  ConnectTimeout 10
  ServerAliveInterval 10
  ServerAliveCountMax 6
EOF
	cat >"$RUN/inventory.ini" <<EOF
# Generated by tests/vm/vm.sh. Other target Pythons in the guest:
#   -e ansible_python_interpreter=$(py_path 2.7.18)
#   -e ansible_python_interpreter=$(py_path 3.6.15)
[aemops_vm]
aemvm ansible_host=127.0.0.1 ansible_port=$port ansible_user=root ansible_ssh_private_key_file=$RUN/id_ed25519 ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o ServerAliveInterval=10 -o ServerAliveCountMax=6'
EOF
}

py_path() { echo "/root/.pyenv/versions/$1/bin/python${1%.*}"; }

run_boot() { # kernel or grub; run dirs from before the grub variant have no boot file
	cat "$RUN/boot" 2>/dev/null || echo kernel
}

# One vCPU under TCG unless AEMOPS_VM_SMP says otherwise. Two guests side by side (make test's
# two workers) on the 2-core machine, measured together on the bookworm image (2026-12-03): boot
# 95 and 96 s with one vCPU each against 125 and 127 s with two, six `ansible -m ping` 32 against
# 39 s, two `setup` 15.2 against 16.3 s; one guest of each kind at once, twice: boot 98 and 113 s
# against 129 and 133 s. Under MTTCG a second vCPU is a second host thread competing for the same
# two cores, and every cross-CPU TLB flush stops both vCPUs. The guest's own work is one process
# at a time (sshd, a module's python, tuned). No test reads the CPU count.
tcg_smp() {
	if [ -n "${AEMOPS_VM_SMP:-}" ] || [ "$1" = kvm ]; then echo "$VM_SMP"; else echo 1; fi
}

# A guest that reboots itself (the role's ansible.builtin.reboot, systemctl reboot) gets a fresh
# qemu, as `reboot` gives it: qemu runs with -action reboot=shutdown, so it exits at the guest's
# reset, and the watcher that start_qemu leaves beside it (vm.sh _watch) starts the next one on
# the same run state. A fresh qemu boots faster under TCG than a reset in place (see cmd_reboot):
# in run 4 (ee35c9a) the role's in-place reboots took 180-226 s where the harness's fresh ones in
# the same scenarios took 102-139 s. The watcher restarts only a reset: not a poweroff, a kill or
# a crash (the console since the last start must end in the kernel's "reboot: Restarting
# system"), and not while vm.sh stops the guest itself ($RUN/hold, set by guest_stop and down).
guest_reset_last() { # serial.log: did the last boot end in the kernel's restart?
	awk '/^=== qemu start/ { r = 0 } /reboot: Restarting system/ { r = 1 } END { exit !r }' "$1" 2>/dev/null
}

watcher_alive() {
	local w
	w=$(cat "$RUN/watch.pid" 2>/dev/null) || return 1
	grep -qa _watch "/proc/$w/cmdline" 2>/dev/null
}

cmd__watch() { # internal: started by start_qemu, one per qemu process
	local pid
	echo $$ >"$RUN/watch.pid"
	pid=$(cat "$RUN/qemu.pid" 2>/dev/null) || exit 0
	while grep -qa aemops-vm "/proc/$pid/cmdline" 2>/dev/null; do sleep 1; done
	[ ! -e "$RUN/hold" ] || exit 0
	guest_reset_last "$RUN/serial.log" || exit 0
	log "qemu $pid exited at the guest's own reboot: starting a fresh one"
	start_qemu
}

start_qemu() { # starts qemu in the background using $RUN state
	local image accel order boot kdir args try port
	image=$(cat "$RUN/image") accel=$(cat "$RUN/accel") order=$(cat "$RUN/nvme-order")
	boot=$(run_boot)
	VM_SMP=$(tcg_smp "$accel")
	rm -f "$RUN/hold"
	kdir=$image # direct kernel boot; empty: SeaBIOS + GRUB from the root disk
	[ "$boot" = grub ] && kdir=
	for try in 1 2 3; do
		port=$(cat "$RUN/port" 2>/dev/null || true)
		[ -n "$port" ] || { port=$(free_port); echo "$port" >"$RUN/port"; }
		mapfile -t args < <(AEMOPS_VM_NVME_CAPS=$(cat "$RUN/nvme-caps" 2>/dev/null || echo none) \
			vm_qemu_args "$RUN/disks" "$kdir" "$accel" "$order" "$RUN/serial.log"
			ioopt_qemu_args)
		echo "=== qemu start $(date +%T) boot=$boot accel=$accel nvme-order=$order port=$port" >>"$RUN/serial.log"
		if qemu-system-x86_64 "${args[@]}" \
			-netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22" \
			-device virtio-net-pci,netdev=n0,addr=0x03 \
			-fw_cfg "name=opt/aemops/authorized_keys,file=$RUN/id_ed25519.pub" \
			-qmp "unix:$RUN/qmp.sock,server=on,wait=off" -action reboot=shutdown \
			-daemonize -pidfile "$RUN/qemu.pid" 2>"$RUN/qemu.err"; then
			write_client_config
			setsid "$0" _watch </dev/null >>"$RUN/watch.log" 2>&1 &
			log "qemu pid $(cat "$RUN/qemu.pid"), ssh 127.0.0.1:$port, $accel, $boot boot, NVMe order $order"
			return 0
		fi
		cat "$RUN/qemu.err" >&2
		rm -f "$RUN/port" # port taken meanwhile? pick another one
		[ "$try" = 3 ] || log "qemu failed to start, retrying"
	done
	die "qemu failed to start"
}

# The io_opt disk's -drive and -device, when the run has one ($RUN/ioopt-disk, written by up).
ioopt_qemu_args() {
	[ -f "$RUN/ioopt-disk" ] || return 0
	local serial bytes
	serial=$(sed -n 's/^serial=//p' "$RUN/ioopt-disk")
	bytes=$(sed -n 's/^opt_io_size=//p' "$RUN/ioopt-disk")
	printf '%s\n' \
		-drive "file=$RUN/disks/ioopt.qcow2,if=none,id=ioopt,format=qcow2,cache=unsafe,discard=unmap" \
		-device "virtio-blk-pci,drive=ioopt,serial=$serial,addr=$VM_IOOPT_SLOT,opt_io_size=$bytes"
}

# The zipimport bytecode cache (tests/vm/zipcache.py, which says what it does and does not
# change), put into the first site-packages directory of the guest's /usr/bin/python3 after `up`
# and after an upgrade (a new Python has a new directory): /usr/local/lib/python3.X/dist-packages
# on Debian. Not sysconfig's purelib: bullseye's Python 3.9 names /usr/lib/python3.9/site-packages,
# which is not on its sys.path (the install's own import check below found it).
# AEMOPS_VM_PYCACHE=0 leaves the guest as booted; bench/ runs with it off, since it measures what
# a module run costs on a real host.
guest_zipcache() {
	case ${AEMOPS_VM_PYCACHE:-1} in
	0) return 0 ;;
	1) ;;
	*) die "AEMOPS_VM_PYCACHE must be 0 or 1 (got '$AEMOPS_VM_PYCACHE')" ;;
	esac
	# shellcheck disable=SC2016 # expanded in the guest
	vssh 'set -e
		d=$(python3 -c "import site; print(site.getsitepackages()[0])")
		install -d -m 0755 "$d"
		install -d -m 0700 -o root -g root /var/cache/aemops-zipimport
		cat >"$d/aemops_zipcache.py.new"
		mv -f "$d/aemops_zipcache.py.new" "$d/aemops_zipcache.py"
		echo "import aemops_zipcache" >"$d/aemops-zipcache.pth"
		python3 -c "import zipimport, aemops_zipcache as z; assert zipimport._compile_source is z.compile_cached or z._COMPILE is None"
		echo "$d"' <"$VM_DIR/zipcache.py" >"$RUN/zipcache" ||
		die "installing the zipimport cache in the guest failed (AEMOPS_VM_PYCACHE=0 runs without it)"
	log "zipimport cache on in the guest ($(cat "$RUN/zipcache"))"
}

cmd_build() { "$VM_DIR/build-image.sh" "$@"; }

cmd_up() {
	local swap=${AEMOPS_VM_SWAP_NVME:-0} boot=${AEMOPS_VM_BOOT:-kernel} wait=1 image d base
	local ioopt=${AEMOPS_VM_IOOPT_DISK:-0}
	while [ $# -gt 0 ]; do
		case $1 in
		--swap-nvme) swap=1 ;;
		--ioopt-disk) ioopt=1 ;;
		--grub) boot=grub ;;
		--no-wait) wait=0 ;;
		--release) VM_RELEASE=${2:-}; shift ;;
		*) usage >&2; exit 2 ;;
		esac
		shift
	done
	export AEMOPS_VM_RELEASE=$VM_RELEASE # build-image.sh
	# Only the grub variant boots the kernel an upgrade installs.
	[ "$VM_RELEASE" = "$VM_DEFAULT_RELEASE" ] || boot=grub
	case $boot in
	kernel | grub) ;;
	*) die "AEMOPS_VM_BOOT must be kernel or grub" ;;
	esac
	case $ioopt in
	0 | 1) ;;
	*) die "AEMOPS_VM_IOOPT_DISK must be 0 or 1 (got '$ioopt')" ;;
	esac
	pid_alive && die "a VM is already running for $RUN ($0 down first)"
	if [ "$boot" = grub ]; then
		image=$("$VM_DIR/build-image.sh" --grub)
	else
		image=$("$VM_DIR/build-image.sh")
	fi
	purge_run
	mkdir -p "$RUN/disks"
	chmod 700 "$RUN"
	touch "$RUN/.aemops-vm"
	echo "$image" >"$RUN/image"
	echo "$boot" >"$RUN/boot"
	echo "$VM_RELEASE" >"$RUN/release" # upgrade changes it
	vm_accel "$image/vmlinuz" >"$RUN/accel"
	if [ "$swap" = 1 ]; then echo ba; else echo ab; fi >"$RUN/nvme-order"
	vm_nvme_caps "${AEMOPS_VM_NVME_CAPS:-none}" >/dev/null # dies on a bad value
	echo "${AEMOPS_VM_NVME_CAPS:-none}" >"$RUN/nvme-caps"  # kept for reboots
	for d in root lvm data nvme-a nvme-b; do
		base=$image/$d.qcow2
		[ "$boot:$d" = grub:root ] && base=$image/grub/root.qcow2 # partitioned, with GRUB
		qemu-img create -q -f qcow2 -b "$base" -F qcow2 "$RUN/disks/$d.qcow2"
	done
	if [ "$ioopt" = 1 ]; then # blank, not on the image: see VM_IOOPT_* above
		qemu-img create -q -f qcow2 "$RUN/disks/ioopt.qcow2" "$VM_IOOPT_DISK_SIZE"
		printf 'serial=%s\nopt_io_size=%s\n' "$VM_IOOPT_SERIAL" "$VM_IOOPT_OPT_IO_SIZE" >"$RUN/ioopt-disk"
	fi
	ssh-keygen -q -t ed25519 -N '' -C aemops-vm -f "$RUN/id_ed25519"
	date +%s >"$RUN/up-time"
	start_qemu
	[ "$wait" = 0 ] || { cmd_wait "$WAIT_TIMEOUT"; guest_zipcache; }
}

cmd_wait() {
	local timeout=${1:-$WAIT_TIMEOUT} start state failed trouble
	start=$(date +%s)
	[ -f "$RUN/qemu.pid" ] || die "no VM in $RUN ($0 up)"
	# 1. sshd really answers (the forwarded port accepts connections earlier).
	local last=''
	until last=$(vssh true 2>&1); do
		pid_alive || watcher_alive || { tail -30 "$RUN/serial.log" >&2; die "waiting for ssh: qemu is not running (serial log above)"; }
		# A guest in emergency mode never starts sshd: say so now, not after the timeout.
		if trouble=$(boot_trouble "$RUN/serial.log") && grep -qE "$BOOT_STOPPED" <<<"$trouble"; then
			die "waiting for ssh: the guest's console says it will not come up: $(paste -sd'|' <<<"$trouble") ($RUN/serial.log)"
		fi
		if [ $(($(date +%s) - start)) -ge "$timeout" ]; then
			tail -30 "$RUN/serial.log" >&2
			die "waiting for ssh: no answer after ${timeout}s; ssh said last: ${last:-nothing}; the serial log's end is above ($RUN/serial.log)"
		fi
		sleep 2
	done
	# 2. boot finished; accept degraded but name the failed units.
	state=$(vssh "timeout $timeout systemctl is-system-running --wait" || true)
	case $state in
	running) ;;
	degraded)
		failed=$(vssh "systemctl --failed --no-legend --plain | cut -d' ' -f1 | paste -sd' '")
		log "guest is degraded, failed units: $failed" ;;
	*) die "waiting for systemctl is-system-running --wait (${timeout}s): the guest says '${state:-no answer}'; running jobs: $(vssh 'systemctl list-jobs --no-legend --plain | head -5' 2>&1 | paste -sd';')" ;;
	esac
	# 3. tuned started after boot and applied its static tuning (tuned logs
	#    'static tuning from profile ... applied' after each 'starting tuning').
	until vssh 'systemctl -q is-active tuned && tac /var/log/tuned/tuned.log |
		grep -m1 -E "starting tuning|static tuning from profile" | grep -q "static tuning"' 2>/dev/null; do
		[ $(($(date +%s) - start)) -lt "$timeout" ] ||
			die "waiting for tuned's 'static tuning from profile ... applied' after its last 'starting tuning': not seen after ${timeout}s; tuned is $(vssh systemctl is-active tuned 2>&1 || true); tuned.log ends: $(vssh 'tail -5 /var/log/tuned/tuned.log' 2>&1 | paste -sd'|')"
		sleep 2
	done
	log "guest ready ($state, tuned: $(vssh tuned-adm active | sed 's/.*: //')) after $(($(date +%s) - start)) s"
}

cmd_ssh() {
	if [ $# -eq 0 ]; then exec ssh -F "$RUN/ssh_config" -t aemvm; fi
	exec ssh -F "$RUN/ssh_config" aemvm "$@"
}

# Send one QMP command (JSON) to qemu; fail on an error reply.
qmp() {
	python3 - "$RUN/qmp.sock" "$1" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()  # greeting
for cmd in ('{"execute": "qmp_capabilities"}', sys.argv[2]):
    f.write(cmd + "\n")
    f.flush()
    reply = {}
    while "return" not in reply and "error" not in reply:  # skip events
        reply = json.loads(f.readline())
    if "error" in reply:
        sys.exit("qmp: %s" % reply["error"]["desc"])
EOF
}

guest_stop() { # reboot|poweroff: run it in the guest, wait for qemu to exit
	local start
	start=$(date +%s)
	touch "$RUN/hold" # the caller starts the next qemu itself, if any
	vssh systemctl "$1" || true
	while pid_alive; do # direct kernel boot: ACPI poweroff ends qemu
		[ $(($(date +%s) - start)) -lt 180 ] || { log "systemctl $1: qemu still running after 180 s, killing it; serial log ends: $(tail -3 "$RUN/serial.log" | paste -sd'|')"; cmd_down --keep; }
		sleep 1
	done
}

warm_reboot() { # guest reset inside the same qemu process (for comparison; the watcher stays idle)
	local boot_id start
	start=$(date +%s)
	qmp '{"execute": "set-action", "arguments": {"reboot": "reset"}}'
	boot_id=$(vssh cat /proc/sys/kernel/random/boot_id)
	vssh systemctl reboot || true
	until [ "$(vssh cat /proc/sys/kernel/random/boot_id 2>/dev/null || true)" != "$boot_id" ] &&
		vssh true 2>/dev/null; do
		pid_alive || die "waiting for a new boot id after the warm reboot: qemu exited"
		[ $(($(date +%s) - start)) -lt "$WAIT_TIMEOUT" ] ||
			die "waiting for a new boot id after the warm reboot: still $boot_id or no ssh after ${WAIT_TIMEOUT}s (see $RUN/serial.log)"
		sleep 2
	done
	qmp '{"execute": "set-action", "arguments": {"reboot": "shutdown"}}'
}

cmd_reboot() {
	local start order
	pid_alive || die "no VM running in $RUN"
	start=$(date +%s)
	case ${1:-} in
	'')
		if [ "${AEMOPS_VM_WARM_REBOOT:-0}" = 1 ]; then
			warm_reboot
		else
			# The guest reboots itself (systemctl reboot); qemu exits at the
			# reset (-action reboot=shutdown) and is started again: a fresh
			# qemu boots the guest much faster under TCG than a reset in place
			# (46 s vs 57 s idle, 68 s vs 112-134 s on a loaded host).
			guest_stop reboot
			start_qemu
		fi
		;;
	--swap-nvme)
		guest_stop poweroff
		order=$(cat "$RUN/nvme-order")
		if [ "$order" = ab ]; then echo ba; else echo ab; fi >"$RUN/nvme-order"
		start_qemu
		;;
	*) usage >&2; exit 2 ;;
	esac
	cmd_wait "$WAIT_TIMEOUT"
	log "reboot${1:+ $1} took $(($(date +%s) - start)) s"
}

cmd_stop() {
	pid_alive || die "no VM running in $RUN"
	guest_stop poweroff
	log "guest powered off"
}

cmd_start() {
	local order
	pid_alive && die "the VM in $RUN is running"
	[ -f "$RUN/image" ] || die "no VM in $RUN ($0 up)"
	case ${1:-} in
	'') ;;
	--swap-nvme)
		order=$(cat "$RUN/nvme-order")
		if [ "$order" = ab ]; then echo ba; else echo ab; fi >"$RUN/nvme-order"
		;;
	*) usage >&2; exit 2 ;;
	esac
	start_qemu
	cmd_wait "$WAIT_TIMEOUT"
}

# The guest's release as the run dir knows it (run dirs of older versions: the default).
run_release() { cat "$RUN/release" 2>/dev/null || echo "$VM_DEFAULT_RELEASE"; }

cmd_upgrade() {
	local to=${1:-} from start t1 t2
	[ -n "$to" ] || { usage >&2; exit 2; }
	[ "$(run_boot)" = grub ] || die "upgrade needs a GRUB-booted VM (up --grub or --release bullseye): a direct kernel boot would boot the old kernel"
	from=$(run_release)
	start=$(date +%s)
	# Validate (and build the package cache, downloading once) before powering off.
	"$VM_DIR/upgrade.sh" cache "$(cat "$RUN/image")" "$from" "$to" >/dev/null
	pid_alive && cmd_stop
	t1=$(date +%s)
	"$VM_DIR/upgrade.sh" apply "$RUN/disks" "$(cat "$RUN/image")" "$from" "$to"
	echo "$to" >"$RUN/release"
	t2=$(date +%s)
	start_qemu
	cmd_wait "$WAIT_TIMEOUT"
	# What the new grub-pc's postinst does on a running system (the offline
	# upgrade skipped it: the host kernel cannot map the root disk's partition
	# table, so GRUB's boot code cannot be reinstalled from the host).
	# shellcheck disable=SC2016 # expanded in the guest
	vssh 'grub-install --target=i386-pc "$(debconf-show grub-pc | sed -n "s/^\* grub-pc\/install_devices: //p")"' >&2 ||
		die "grub-install in the upgraded guest failed"
	guest_zipcache
	log "upgrade $from -> $to took $(($(date +%s) - start)) s (poweroff $((t1 - start)), offline upgrade $((t2 - t1)), boot and grub-install $(($(date +%s) - t2)))"
}

cmd_down() {
	local pid _
	if pid_alive; then
		touch "$RUN/hold"
		pid=$(cat "$RUN/qemu.pid")
		kill "$pid"
		for _ in $(seq 50); do pid_alive || break; sleep 0.2; done
		pid_alive && kill -9 "$pid"
		log "stopped qemu $pid"
	fi
	rm -f "$RUN/qemu.pid"
	case ${1:---keep} in
	--keep) ;;
	--purge) purge_run ;;
	*) usage >&2; exit 2 ;;
	esac
}

cmd_status() {
	if ! pid_alive; then echo "stopped ($RUN)"; return 3; fi
	echo "running: pid $(cat "$RUN/qemu.pid"), ssh 127.0.0.1:$(cat "$RUN/port"), accel $(cat "$RUN/accel"), boot $(run_boot), release $(run_release), nvme-order $(cat "$RUN/nvme-order")"
	echo "image: $(cat "$RUN/image")"
	[ ! -f "$RUN/ioopt-disk" ] || echo "io_opt disk: $(paste -sd' ' "$RUN/ioopt-disk")"
	echo "guest boot id: $(vssh cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo '(no ssh)')"
}

cmd_inventory() {
	[ -f "$RUN/port" ] || die "no VM in $RUN ($0 up)"
	write_client_config
	echo "# $RUN/inventory.ini"; cat "$RUN/inventory.ini"
	echo "# $RUN/ssh_config";    cat "$RUN/ssh_config"
}

cmd_facts() {
	vssh bash -s <<'EOF'
printf '%-8s %-6s %-14s %s\n' DEVICE RA_KB MAJ:MIN "ID_SERIAL / dm name"
for d in /sys/block/*; do
	n=${d##*/}
	case $n in loop* | ram* | sr*) continue ;; esac
	id=$(udevadm info --query=property --name="$n" | sed -n 's/^ID_SERIAL=//p')
	[ -r "$d/dm/name" ] && id="dm: $(cat "$d/dm/name")"
	printf '%-8s %-6s %-14s %s\n' "$n" "$(cat "$d/queue/read_ahead_kb")" "$(cat "$d/dev")" "$id"
done
echo "lvs: $(lvs --noheadings -o lv_full_name,lv_read_ahead,lv_kernel_read_ahead vg_aem | xargs)"
echo "tuned-adm: $(tuned-adm active)"
echo "tuned: $(dpkg-query -W -f='${Version}' tuned)"
echo "thp enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
echo "thp defrag:  $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
echo "cmdline: $(cat /proc/cmdline)"
findmnt -n -o TARGET,SOURCE,FSTYPE /srv/aem; findmnt -n -o TARGET,SOURCE,FSTYPE /srv/data
EOF
}

cmd_collect() { # [--host-only] DIR: never fails the caller, whatever state the VM is in
	local host_only='' dir
	[ "${1:-}" = --host-only ] && { host_only=1; shift; }
	dir=${1:?usage: $0 collect [--host-only] DIR}
	mkdir -p "$dir"
	[ -d "$RUN" ] || { echo "no run dir $RUN" >"$dir/status.txt"; return 0; }
	cp "$RUN/serial.log" "$dir/serial.log" 2>/dev/null || true
	cp "$RUN/qemu.err" "$dir/qemu.err" 2>/dev/null || true
	cmd_status >"$dir/status.txt" 2>&1 || true
	if [ -n "$host_only" ]; then
		# A scenario that passed: the guest's journal costs tens of seconds of emulated CPU to
		# read and tells nothing a failure needs; the serial log has every boot's console.
		echo "host side only (--host-only): the serial log, qemu's stderr and this status" >>"$dir/status.txt"
	elif pid_alive && timeout 20 ssh -F "$RUN/ssh_config" -o ConnectTimeout=5 aemvm true 2>/dev/null; then
		vssh 'journalctl --no-pager -o short-monotonic --list-boots; journalctl --no-pager -o short-monotonic' \
			>"$dir/journal.txt" 2>&1 || true
		vssh 'cat /var/log/tuned/tuned.log' >"$dir/tuned.log" 2>&1 || true
		{ vssh 'systemctl --failed --no-pager; tuned-adm active; cat /proc/cmdline' || true
		  cmd_facts || true; } >"$dir/guest-state.txt" 2>&1
	else
		echo "the guest did not answer: only the serial log and qemu's stderr" >>"$dir/status.txt"
	fi
	# Last, so that the end of status.txt (which the CI excerpt shows) names why a boot stopped.
	boot_trouble "$RUN/serial.log" | sed 's/^/serial log, last boot: /' >>"$dir/status.txt" || true
	log "kept the VM's logs in $dir"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
build | up | wait | ssh | reboot | stop | start | upgrade | down | status | inventory | facts | collect | _watch) "cmd_$cmd" "$@" ;;
-h | --help | help) usage ;;
*) usage >&2; exit 2 ;;
esac
