# shellcheck shell=bash
# Shared by build-image.sh and vm.sh (sourced, not executed).
# Part of the image cache hash because it defines the disk layout the
# first-boot provisioning sees.

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# VM_NVME_A, VM_NVME_B, VM_VG, ... : the constants the harness and the scenarios share.
# shellcheck source=vm.env source-path=SCRIPTDIR
. "$VM_DIR/vm.env"
# The Debian release of the image: bookworm (the default "RHEL 8 on Nitro" preset) or
# bullseye (the start of the upgrade scenario: tuned 2.15 picks its own profile; GRUB boot only).
VM_RELEASE=${AEMOPS_VM_RELEASE:-$VM_DEFAULT_RELEASE}
VM_CACHE=${AEMOPS_VM_CACHE:-$HOME/.cache/aemops-os-tuning/vm}
VM_MEM=${AEMOPS_VM_MEM:-2048}
VM_SMP=${AEMOPS_VM_SMP:-2}
VM_PYTHONS=${AEMOPS_VM_PYTHONS-2.7.18 3.6.15}
VM_PYENV_ROOT=${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}
# Kernel command line of the direct kernel boot (the default). It has no
# transparent_hugepage=: THP "always" comes from the kernel's own default
# (bookworm, like RHEL 8, is built with CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS=y;
# build-image.sh checks it), because tuned ignores its [vm] THP setting when
# the argument is on the command line. The grub boot takes its command line
# from the guest's /boot/grub/grub.cfg instead (root=UUID=... on vda1).
VM_APPEND="root=/dev/vda rw console=ttyS0"
# Under TCG, every direct kernel boot (vm_qemu_args: vm.sh's, and the image build's provisioning
# and grub setup boots) adds these, and the grub boots get them from a drop-in the image carries
# (/etc/default/grub.d/50-aemops-emulation.cfg, guest/customize.sh), to spend less of the emulated
# CPU on what no scenario tests. Measured with the bookworm image on the 2-core machine, alone
# (docs/testing.md, "Where the time goes"): boot to tuned 41.7 -> 32.5 s, ten python3 starts
# 5.5 -> 3.6 s. With two vCPUs the guest marks the TSC unstable and falls back to the HPET, whose
# every read is emulated MMIO with no vDSO path (clock_gettime becomes a syscall and a trap into
# QEMU); tsc=reliable keeps the TSC, which TCG derives from one host clock for every vCPU.
# mitigations=off drops retpolines and buffer clears that only cost time in an emulated CPU.
# Neither touches read-ahead, THP, tuned, udev or the block layer. The drop-in leaves
# /etc/default/grub as Debian ships it (GRUB_CMDLINE_LINUX, which the collection edits, and the
# console in GRUB_CMDLINE_LINUX_DEFAULT, which molecule/cmdline asserts unchanged). A grub boot
# cannot tell TCG from KVM, so under KVM it has them too: harmless for a test VM on a host whose
# TSC is stable.
VM_APPEND_TCG="tsc=reliable clocksource=tsc mitigations=off"

log() { printf '[vm %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# sha256 of everything that goes into the image: the release, scripts, guest
# files, package lists and the identity of the copied target Pythons.
vm_image_hash() {
	local v py
	{
		echo "release $VM_RELEASE"
		(cd "$VM_DIR" && find build-image.sh lib.sh vm.env guest -type f -print0 |
			LC_ALL=C sort -z | xargs -0 sha256sum)
		for v in $VM_PYTHONS; do
			py=$VM_PYENV_ROOT/versions/$v
			echo "python $v"
			sha256sum "$py"/bin/python"${v%.*}" "$py"/lib/libpython"${v%.*}"*.so.1.0 2>/dev/null ||
				echo "missing $py"
		done
	} | sha256sum | cut -c1-16
}

vm_image_dir() { echo "$VM_CACHE/$(vm_image_hash)"; }

# KVM or TCG. AEMOPS_VM_ACCEL=kvm|tcg forces it. Otherwise probe once per
# host kernel + qemu version: boot the guest kernel without a root fs under
# KVM; it must reach its "VFS: Unable to mount root" panic within 20 s.
vm_accel() {
	local kernel=$1 stamp out
	case ${AEMOPS_VM_ACCEL:-auto} in
	kvm | tcg) echo "$AEMOPS_VM_ACCEL"; return ;;
	auto) ;;
	*) die "AEMOPS_VM_ACCEL must be kvm, tcg or auto" ;;
	esac
	if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then echo tcg; return; fi
	stamp="$VM_CACHE/accel-$(uname -r)-qemu$(qemu-system-x86_64 --version | awk 'NR==1{print $4}')"
	if ! [ -s "$stamp" ]; then
		mkdir -p "$VM_CACHE"
		out=$(mktemp)
		log "probing KVM (up to 20 s, result cached in $stamp)"
		timeout 20 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nodefaults \
			-display none -no-reboot -kernel "$kernel" \
			-append "console=ttyS0 panic=-1" -serial "file:$out" >/dev/null 2>&1 || true
		if grep -q 'Kernel panic' "$out"; then echo kvm >"$stamp"; else echo tcg >"$stamp"; fi
		rm -f "$out"
	fi
	cat "$stamp"
}

# EBS-like caps on the two NVMe drives: QEMU block throttling (-drive
# throttling.*) from AEMOPS_VM_NVME_CAPS, printed as the drive suboptions.
#   none (default): unthrottled, as before
#   gp3:  3000 IOPS, 125 MiB/s  (EBS gp3 baseline)
#   io2:  16000 IOPS, 1000 MiB/s (io2 on a non-Block-Express instance: the
#         per-volume throughput maximum; 16000 IOPS provisioned)
#   seed: 3000 IOPS, 250 MiB/s  (gp2's throughput maximum: the seed's plateau)
#   iops=N,mibps=M: explicit
# Each cap applies per drive. iops-size=256 KiB counts a larger request as
# several I/Os, as EBS does for SSD volumes. gp3 and io2 have no burst
# credits, so no throttling.*-max is set.
vm_nvme_caps() {
	local spec=${1:-none} iops mibps
	case $spec in
	none) return 0 ;;
	gp3) iops=3000 mibps=125 ;;
	io2) iops=16000 mibps=1000 ;;
	seed) iops=3000 mibps=250 ;;
	iops=*,mibps=*) iops=${spec#iops=} iops=${iops%%,*} mibps=${spec#*,mibps=} ;;
	*) iops= ;;
	esac
	case $iops:$mibps in
	[1-9]*:[1-9]*) case $iops$mibps in *[!0-9]*) iops= ;; esac ;;
	*) iops= ;;
	esac
	[ -n "$iops" ] || die "AEMOPS_VM_NVME_CAPS must be none, gp3, io2, seed or iops=N,mibps=M (got '$spec')"
	printf ',throttling.iops-total=%s,throttling.bps-total=%s,throttling.iops-size=262144' \
		"$iops" $((mibps * 1048576))
}

# Print the qemu command line, one argument per line.
#   vm_qemu_args DISKDIR KERNELDIR ACCEL NVME_ORDER(ab|ba) SERIAL_LOG [APPEND]
# DISKDIR holds root/lvm/data/nvme-a/nvme-b .qcow2 (or .raw: a root disk that
# upgrade.sh converted so that it can be loop-mounted on the host). KERNELDIR holds vmlinuz
# and initrd.img for direct kernel boot with APPEND (default $VM_APPEND; under TCG
# VM_APPEND_TCG added);
# an empty KERNELDIR boots through the firmware (SeaBIOS) and the boot loader
# on the root disk instead. The NVMe controllers sit at fixed PCI slots 0x10
# and 0x11; "ba" puts disk b in the first slot, so the guest names it nvme0n1.
vm_qemu_args() {
	local disks=$1 kdir=$2 accel=$3 order=$4 serial=$5 append=${6:-$VM_APPEND}
	local d slot_a=0x10 slot_b=0x11 rootboot="" caps dcaps
	[ "$order" = ba ] && { slot_a=0x11; slot_b=0x10; }
	caps=$(vm_nvme_caps "${AEMOPS_VM_NVME_CAPS:-none}") || return 1
	printf '%s\n' -nodefaults -display none -name aemops-vm \
		-m "$VM_MEM" -smp "$VM_SMP" -rtc base=utc
	if [ -n "$kdir" ]; then
		[ "$accel" = kvm ] || append="$append $VM_APPEND_TCG"
		printf '%s\n' -kernel "$kdir/vmlinuz" -initrd "$kdir/initrd.img" -append "$append"
	else
		rootboot=,bootindex=0 # SeaBIOS: the root disk first, nothing else
	fi
	printf '%s\n' -chardev "file,id=ser0,path=$serial,append=on" -serial chardev:ser0
	if [ "$accel" = kvm ]; then
		printf '%s\n' -accel kvm -cpu host
	else
		printf '%s\n' -accel tcg,thread=multi
	fi
	for d in root lvm data nvme-a nvme-b; do
		dcaps=
		[ "${d#nvme-}" = "$d" ] || dcaps=$caps
		if [ -e "$disks/$d.raw" ]; then
			printf '%s\n' -drive "file=$disks/$d.raw,if=none,id=$d,format=raw,cache=unsafe,discard=unmap$dcaps"
		else
			printf '%s\n' -drive "file=$disks/$d.qcow2,if=none,id=$d,format=qcow2,cache=unsafe,discard=unmap$dcaps"
		fi
	done
	printf '%s\n' \
		-device "virtio-blk-pci,drive=root,serial=$VM_VIRTIO_ROOT,addr=0x04$rootboot" \
		-device "virtio-blk-pci,drive=lvm,serial=$VM_VIRTIO_LVM,addr=0x05" \
		-device "virtio-blk-pci,drive=data,serial=$VM_VIRTIO_DATA,addr=0x06" \
		-device "nvme,drive=nvme-a,serial=$VM_NVME_A,addr=$slot_a" \
		-device "nvme,drive=nvme-b,serial=$VM_NVME_B,addr=$slot_b"
}
