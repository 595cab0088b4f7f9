#!/usr/bin/env bash
# Self-test of the VM harness: build/reuse the image, boot the "RHEL 8 on
# Nitro" preset, check what the collection's VM tests rely on, reboot in the
# guest, power-cycle with the NVMe disks swapped, check again, stop the VM.
#
# Usage: tests/vm/smoke.sh [--quick]   (--quick: skip both reboots)
# Runs `ansible -m ping` with each target Python too when ansible is on PATH.
set -euo pipefail
vm="$(cd "$(dirname "$0")" && pwd)/vm.sh"
export AEMOPS_VM_RUN=${AEMOPS_VM_RUN:-/tmp/aemops-vm-smoke}
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

preset() { # serial of nvme0n1, serial of nvme1n1
	check "tuned profile" "Current active profile: throughput-performance" "tuned-adm active"
	check "THP" "[always] madvise never" "cat /sys/kernel/mm/transparent_hugepage/enabled"
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

a=vol0aaaaaaaaaaaaaaaa b=vol0bbbbbbbbbbbbbbbb
t0=$(date +%s)
"$vm" up
preset $a $b
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
if [ "${1:-}" != --quick ]; then
	"$vm" reboot
	preset $a $b
	"$vm" reboot --swap-nvme
	preset $b $a
fi
echo "smoke: took $(($(date +%s) - t0)) s"
echo "smoke: $pass passed, $fail failed"
[ "$fail" = 0 ]
