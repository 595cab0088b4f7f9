#!/usr/bin/env bash
# mmdebstrap customize hook: runs on the host with the guest root as $1,
# after all packages are installed. Environment from build-image.sh:
#   ROOT_UUID  UUID of the ext4 root file system
#   PYENV_SRC  host pyenv root;  PYTHONS  versions to copy ("2.7.18 3.6.15")
#   TUNED_PRESET  throughput-performance (bookworm) or auto (bullseye: tuned picks)
#   VM_APPEND_TCG  the emulation's kernel arguments (lib.sh), for the grub boots' drop-in
set -euo pipefail
root=$1
here=$(cd "$(dirname "$0")" && pwd)

cp -a "$here/rootfs/." "$root/"

echo aemvm >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\taemvm\n' >"$root/etc/hosts"
# /srv/aem and /srv/data are appended by aemops-provision (by UUID).
echo "UUID=$ROOT_UUID / ext4 defaults,errors=remount-ro 0 1" >"$root/etc/fstab"
mkdir -p "$root/var/log/journal"

# "RHEL 8 on Nitro" preset: tuned with throughput-performance pinned, so
# its [disk] readahead=>4096 applies at every boot. THP=always is the
# kernel's default (CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS=y, checked by
# build-image.sh), not a command-line argument.
# bullseye (TUNED_PRESET=auto): nothing is pinned; tuned finds no active
# profile at its first start (the provisioning boot), takes the one it
# recommends (virtual-guest on a QEMU guest, as on EC2: virt-what) and records
# it with profile_mode auto.
mkdir -p "$root/etc/tuned"
case ${TUNED_PRESET:-throughput-performance} in
auto) rm -f "$root/etc/tuned/active_profile" "$root/etc/tuned/profile_mode" ;;
*)
	echo "$TUNED_PRESET" >"$root/etc/tuned/active_profile"
	echo manual >"$root/etc/tuned/profile_mode"
	;;
esac

# GRUB settings for the grub image (build-image.sh --grub, which installs the
# boot sector and runs update-grub). Debian's own GRUB_CMDLINE_LINUX="" is
# left as shipped; no menu delay; the serial console as in the direct boot.
grub=$root/etc/default/grub
sed -i -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
	-e 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"/' \
	-e 's/^#\?GRUB_TERMINAL=.*/GRUB_TERMINAL=serial\nGRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"/' "$grub"
for want in 'GRUB_TIMEOUT=0' 'GRUB_CMDLINE_LINUX=""' 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"' \
	'GRUB_TERMINAL=serial'; do
	grep -qx "$want" "$grub" || { echo "customize: $grub lacks $want" >&2; cat "$grub" >&2; exit 1; }
done
# The emulation's arguments for the grub boots (lib.sh, VM_APPEND_TCG), in a drop-in that
# grub-mkconfig sources after /etc/default/grub (Debian's grub-mkconfig reads grub.d/*.cfg; run 4
# of docs/testing.md saw them on every GRUB boot, bullseye to trixie), so that the file
# the collection edits keeps Debian's text. No package owns it: release upgrades keep it.
mkdir -p "$root/etc/default/grub.d"
# shellcheck disable=SC2016 # $GRUB_CMDLINE_LINUX_DEFAULT is grub-mkconfig's to expand
printf '# aemops test image: kernel arguments for emulation (tests/vm/lib.sh, VM_APPEND_TCG)\nGRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT %s"\n' \
	"${VM_APPEND_TCG:?}" >"$root/etc/default/grub.d/50-aemops-emulation.cfg"
[ ! -e "$root/boot/grub/grub.cfg" ] || { echo "customize: grub.cfg must not exist in the default image" >&2; exit 1; }

chroot "$root" systemctl enable -q systemd-networkd ssh tuned \
	aemops-ssh-key.service aemops-provision.service
# Keep background noise (and TCG CPU time) down.
chroot "$root" systemctl mask -q apt-daily.timer apt-daily-upgrade.timer \
	man-db.timer e2scrub_all.timer fstrim.timer e2scrub_reap.service

# Target Pythons for RHEL 7 (2.7) and RHEL 8 (3.6) style module runs. The
# pyenv builds have an absolute RUNPATH, so they keep their host path.
for v in $PYTHONS; do
	src=$PYENV_SRC/versions/$v
	dst=$root/root/.pyenv/versions/$v
	[ -x "$src/bin/python${v%.*}" ] || { echo "customize: missing $src" >&2; exit 1; }
	mkdir -p "$dst"
	tar -C "$src" -cf - \
		--exclude='lib/python*/test' --exclude='lib/python*/*/test' \
		--exclude='lib/python*/*/tests' --exclude='lib/python*/idlelib' \
		--exclude='lib/python*/tkinter' --exclude='lib/python*/lib-tk' \
		--exclude='lib/python*/ensurepip' \
		--exclude='lib/python*/site-packages/*.pth' --exclude='*.a' \
		--exclude=include --exclude=share . | tar -C "$dst" -xf -
done
