#!/usr/bin/env bash
# Self-test of the VM harness: build/reuse the image, boot the "RHEL 8 on
# Nitro" preset, check what the collection's VM tests rely on, reboot in the
# guest, power-cycle with the NVMe disks swapped, check again, stop the VM.
#
# Usage: tests/vm/smoke.sh [--quick] [--grub]
#   --quick  skip both reboots
#   --grub   boot the grub variant (vm.sh up --grub); before the reboots, add
#            transparent_hugepage=never to GRUB_CMDLINE_LINUX in the guest's
#            /etc/default/grub and run update-grub, so the reboots must come
#            up with it on the kernel command line and THP [never]
# Runs `ansible -m ping` with each target Python too when ansible is on PATH.
set -euo pipefail
vm="$(cd "$(dirname "$0")" && pwd)/vm.sh"
# shellcheck source-path=SCRIPTDIR source=vm.env
. "$(dirname "$vm")/vm.env"  # the NVMe serials
quick=0 boot=kernel
for a in "$@"; do
	case $a in
	--quick) quick=1 ;;
	--grub) boot=grub ;;
	*) echo "usage: $0 [--quick] [--grub]" >&2; exit 2 ;;
	esac
done
export AEMOPS_VM_RUN=${AEMOPS_VM_RUN:-/tmp/aemops-vm-smoke-$boot}
trap '"$vm" down' EXIT
pass=0 fail=0

check() { # description expected guest-command
	local got
	got=$("$vm" ssh "$3" 2>&1) || true
	if [ "$got" = "$2" ]; then
		pass=$((pass + 1)); echo "ok   $1"
	else
		fail=$((fail + 1)); echo "FAIL $1: expected '$2', got '$got'"
	fi
}

preset() { # serial of nvme0n1, serial of nvme1n1, THP mode, transparent_hugepage= on the cmdline (none: absent)
	local thp
	case $3 in
	always) thp="[always] madvise never" ;;
	never) thp="always madvise [never]" ;;
	esac
	check "tuned profile" "Current active profile: throughput-performance" "tuned-adm active"
	check "THP enabled" "$thp" "cat /sys/kernel/mm/transparent_hugepage/enabled"
	check "THP defrag (kernel default)" "always defer defer+madvise [madvise] never" \
		"cat /sys/kernel/mm/transparent_hugepage/defrag"
	# shellcheck disable=SC2016 # expanded in the guest
	check "transparent_hugepage= on /proc/cmdline" "$4" \
		'v=$(grep -o "transparent_hugepage=[^ ]*" /proc/cmdline | cut -d= -f2 | paste -sd,); echo "${v:-none}"'
	if [ "$boot" = grub ]; then
		check "boot path" "grub /dev/vda1 grub.cfg" "$boot_check"
	else
		check "boot path" "kernel /dev/vda no-grub.cfg" "$boot_check"
	fi
	# shellcheck disable=SC2016 # expanded in the guest
	check "read-ahead nvme0n1 nvme1n1 vdb vdc lv_repo" "4096 4096 4096 4096 4096" \
		'lv=$(basename "$(readlink -f /dev/vg_aem/lv_repo)")
		cat /sys/block/{nvme0n1,nvme1n1,vdb,vdc,$lv}/queue/read_ahead_kb | xargs'
	check "NVMe serials nvme0n1 nvme1n1" "$1 $2" \
		"for n in nvme0n1 nvme1n1; do udevadm info -q property -n \$n | sed -n 's/^ID_SERIAL_SHORT=//p'; done | xargs"
	check "mounts" "xfs ext4 repository" \
		"echo \$(findmnt -no FSTYPE /srv/aem) \$(findmnt -no FSTYPE /srv/data) \$(ls /srv/aem/crx-quickstart)"
	check "target Pythons" "2.7.18 3.6.15" \
		"for p in /root/.pyenv/versions/2.7.18/bin/python2.7 /root/.pyenv/versions/3.6.15/bin/python3.6; do
			\$p -c 'import platform, ssl, ctypes; print(platform.python_version())'; done | xargs"
}
# How the guest booted: BOOT_IMAGE= is set by GRUB only; the root device; and
# whether there is a grub.cfg for update-grub (the collection's thp module
# manages the command line only where there is).
# shellcheck disable=SC2016 # expanded in the guest
boot_check='case $(cat /proc/cmdline) in BOOT_IMAGE=*) b=grub ;; *) b=kernel ;; esac
	[ -e /boot/grub/grub.cfg ] && c=grub.cfg || c=no-grub.cfg
	echo $b $(findmnt -no SOURCE /) $c'

a=$VM_NVME_A b=$VM_NVME_B
t0=$(date +%s)
if [ "$boot" = grub ]; then "$vm" up --grub; else "$vm" up; fi
preset "$a" "$b" always none
if command -v ansible >/dev/null; then
	"$vm" inventory >/dev/null
	for py in /usr/bin/python3 /root/.pyenv/versions/2.7.18/bin/python2.7 /root/.pyenv/versions/3.6.15/bin/python3.6; do
		if ANSIBLE_HOST_KEY_CHECKING=False ansible -i "$AEMOPS_VM_RUN/inventory.ini" all -m ping \
			-e "ansible_python_interpreter=$py" -o >/dev/null; then
			pass=$((pass + 1)); echo "ok   ansible ping ($py)"
		else
			fail=$((fail + 1)); echo "FAIL ansible ping ($py)"
		fi
	done
fi
if [ "$quick" = 0 ]; then
	after=always arg=none
	if [ "$boot" = grub ]; then
		after=never arg=never
		check "update-grub with transparent_hugepage=never in GRUB_CMDLINE_LINUX" 3 \
			'sed -i "s/^GRUB_CMDLINE_LINUX=\"\"$/GRUB_CMDLINE_LINUX=\"transparent_hugepage=never\"/" /etc/default/grub &&
			update-grub 2>/dev/null && grep -cE "^\s*linux\s.* transparent_hugepage=never( |$)" /boot/grub/grub.cfg'
	fi
	"$vm" reboot
	preset "$a" "$b" $after $arg
	"$vm" reboot --swap-nvme
	preset "$b" "$a" $after $arg
fi
echo "smoke: took $(($(date +%s) - t0)) s"
echo "smoke: $pass passed, $fail failed"
[ "$fail" = 0 ]
