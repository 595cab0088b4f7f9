#!/usr/bin/env bash
# Build (or reuse) the cached Debian test VM image: bookworm (the default) or
# bullseye (AEMOPS_VM_RELEASE=bullseye or --release bullseye; the start of the
# upgrade scenario, always with its grub variant).
#
# Usage: tests/vm/build-image.sh [--force] [--grub] [--release bookworm|bullseye]
#
# Output: $AEMOPS_VM_CACHE/<hash>/ (default ~/.cache/aemops-os-tuning/vm),
# printed on stdout. <hash> covers the release, this script, lib.sh, vm.env, guest/ and the copied
# pyenv Pythons, so an unchanged tree reuses the image. The build happens in
# a temporary directory next to it and is renamed into place when complete.
#
# Steps: mmdebstrap root fs (guest/packages.txt, guest/customize.sh) -> ext4
# -> qcow2; blank data disks; one provisioning boot that lays out LVM/XFS and
# ext4 on the data disks (guest/rootfs/usr/local/sbin/aemops-provision) and
# powers off.
#
# --grub also builds (or reuses) the grub variant in <image>/grub/: a copy of
# the root file system on partition 1 of an MBR disk, booted once directly
# with root=/dev/vda1 to run grub-install + update-grub in the guest
# (guest/rootfs/usr/local/sbin/aemops-grub-setup). It shares the other disks
# with the image. Printed is always the image directory.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
exec 3>&1 1>&2 # only the image directory goes to stdout

force=0 grub=0
while [ $# -gt 0 ]; do
	case $1 in
	--force) force=1 ;;
	--grub) grub=1 ;;
	--release) VM_RELEASE=${2:-}; shift ;;
	*) echo "usage: $0 [--force] [--grub] [--release bookworm|bullseye]" >&2; exit 2 ;;
	esac
	shift
done
# Per release: the package list, and how tuned starts. bookworm pins
# throughput-performance ("RHEL 8 on Nitro"); bullseye leaves the choice to
# tuned (virtual-guest on a QEMU guest, as on EC2) and boots through GRUB, so
# that an upgraded kernel is the one that boots.
case $VM_RELEASE in
bookworm) packages_file=$VM_DIR/guest/packages.txt TUNED_PRESET=throughput-performance ;;
bullseye) packages_file=$VM_DIR/guest/packages-bullseye.txt TUNED_PRESET=auto grub=1 ;;
*) die "release '$VM_RELEASE': this harness builds bookworm or bullseye images (trixie is reached by upgrade.sh)" ;;
esac

for t in mmdebstrap qemu-system-x86_64 qemu-img mkfs.ext4 flock; do
	command -v "$t" >/dev/null || die "$t not found (apt-get install qemu-system-x86 qemu-utils mmdebstrap)"
done
[ "$(id -u)" = 0 ] || die "run as root (mmdebstrap --mode=root, ext4 image with root-owned files)"
for v in $VM_PYTHONS; do
	[ -x "$VM_PYENV_ROOT/versions/$v/bin/python${v%.*}" ] ||
		die "pyenv Python $v not found under $VM_PYENV_ROOT (set AEMOPS_VM_PYTHONS='' to build without)"
done

# An MBR with one bootable Linux partition (what `sfdisk --label dos` writes
# for 'start=START, size=SECTORS, type=83, bootable'), without needing fdisk
# on the build host.
write_mbr() { # raw-image start-sector sectors
	python3 - "$@" <<'EOF'
import os, struct, sys
path, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
entry = struct.pack("<B3sB3sII", 0x80, b"\xfe\xff\xff", 0x83, b"\xfe\xff\xff", start, count)
with open(path, "r+b") as f:
    f.seek(440)
    f.write(os.urandom(4) + b"\0\0" + entry + b"\0" * 48 + b"\x55\xaa")
EOF
}

# The grub variant of a finished image: <image>/grub/root.qcow2.
build_grub() {
	local img=$1 tmp t0 size d args accel
	if [ -e "$img/grub/READY" ] && [ "$force" = 0 ]; then return 0; fi
	rm -rf "$img"/.grub-* # leftovers of interrupted builds (we hold the lock)
	tmp=$(mktemp -d "$img/.grub-XXXXXX")
	# shellcheck disable=SC2064 # expand now: $tmp is local
	trap "rm -rf '$tmp'" EXIT
	t0=$(date +%s)
	log "building the grub variant $img/grub"
	# MBR, partition 1 from 1 MiB (GRUB's core.img goes in the gap before it)
	# holding the image's ext4 root unchanged (same UUID, so fstab still fits).
	size=$(qemu-img info --output=json "$img/root.qcow2" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["virtual-size"])')
	mkdir "$tmp/disks"
	qemu-img create -q -f raw "$tmp/root.raw" $((size + 1048576))
	write_mbr "$tmp/root.raw" 2048 $((size / 512))
	qemu-img convert -n -f qcow2 "$img/root.qcow2" --target-image-opts \
		"driver=raw,offset=1048576,size=$size,file.driver=file,file.filename=$tmp/root.raw"
	qemu-img convert -O qcow2 "$tmp/root.raw" "$tmp/disks/root.qcow2"
	rm "$tmp/root.raw"
	# The setup boot mounts the data disks: give it throwaway overlays, the
	# image's disks are backing files of running VMs.
	for d in lvm data nvme-a nvme-b; do
		qemu-img create -q -f qcow2 -b "$img/$d.qcow2" -F qcow2 "$tmp/disks/$d.qcow2"
	done
	accel=$(vm_accel "$img/vmlinuz")
	log "grub setup boot ($accel): grub-install, update-grub, poweroff"
	mapfile -t args < <(vm_qemu_args "$tmp/disks" "$img" "$accel" ab "$tmp/setup.log" \
		"root=/dev/vda1 rw console=ttyS0 aemops.grub-setup=poweroff systemd.wants=aemops-grub-setup.service")
	timeout 900 qemu-system-x86_64 "${args[@]}" -no-reboot \
		-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0,addr=0x03 ||
		{ tail -40 "$tmp/setup.log" >&2; die "grub setup boot failed or timed out"; }
	grep -q AEMOPS-GRUB-OK "$tmp/setup.log" ||
		{ tail -40 "$tmp/setup.log" >&2; die "grub setup did not finish (log above)"; }
	mv "$tmp/disks/root.qcow2" "$tmp/root.qcow2"
	rm -rf "$tmp/disks"
	printf 'seconds_grub=%s\n' $(($(date +%s) - t0)) >"$tmp/build-info"
	touch "$tmp/READY"
	rm -rf "$img/grub"
	mv "$tmp" "$img/grub"
	trap - EXIT
	log "grub variant ready in $(($(date +%s) - t0)) s: $img/grub"
}

final=$(vm_image_dir)
mkdir -p "$VM_CACHE"
exec 9>"$VM_CACHE/.lock"
flock 9 # one build at a time; a waiting second run then finds the image
if [ -e "$final/READY" ] && [ "$force" = 0 ]; then
	touch "$final/READY" # last use, for pruning below
	[ "$grub" = 0 ] || build_grub "$final"
	echo "$final" >&3
	exit 0
fi
rm -rf "$VM_CACHE"/.build-* # leftovers of interrupted builds (we hold the lock)

# Reuse the Debian mirror apt already uses on this host.
apt_uri() { # suffix (debian | debian-security)
	grep -hsoE "(URIs:[[:space:]]*|^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)[a-z]+://[^[:space:]]*/$1/?([[:space:]]|$)" \
		/etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list |
		grep -oE "[a-z]+://[^[:space:]]*" | head -1 || true
}
mirror=${AEMOPS_VM_MIRROR:-$(apt_uri debian)}
security=${AEMOPS_VM_SECURITY_MIRROR:-$(apt_uri debian-security)}
[ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list*; set AEMOPS_VM_MIRROR"
sources=("deb $mirror $VM_RELEASE main" "deb $mirror $VM_RELEASE-updates main")
[ -n "$security" ] && sources+=("deb $security $VM_RELEASE-security main")

tmp=$(mktemp -d "$VM_CACHE/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)
log "building $final (mirror $mirror)"

packages=$(grep -v '^[[:space:]]*\(#\|$\)' "$packages_file" | paste -sd,)
ROOT_UUID=$(cat /proc/sys/kernel/random/uuid)
PYENV_SRC=$VM_PYENV_ROOT
PYTHONS=$VM_PYTHONS
export ROOT_UUID PYENV_SRC PYTHONS TUNED_PRESET VM_APPEND_TCG
# bullseye: merged /usr, as the Debian installer sets it up for bullseye (trixie
# requires it; bookworm's own packages already merge it).
# Only the symlinks (the debootstrap way): the hook dir's essential step wants
# an usr-is-merged package, which bullseye does not have.
hooks=()
[ "$VM_RELEASE" = bookworm ] || hooks=(--setup-hook=/usr/share/mmdebstrap/hooks/merged-usr/setup00.sh)
mmdebstrap --mode=root --variant=apt --format=directory --quiet "${hooks[@]}" \
	--include="$packages" \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--customize-hook="$VM_DIR/guest/customize.sh \"\$1\"" \
	"$VM_RELEASE" "$tmp/rootfs" "${sources[@]}"
t1=$(date +%s)

# THP "always" in the preset is the kernel's default, like RHEL 8's kernel.
grep -qx CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS=y "$tmp"/rootfs/boot/config-* ||
	die "the guest kernel's THP default is not 'always' ($(grep '^CONFIG_TRANSPARENT_HUGEPAGE_' "$tmp"/rootfs/boot/config-* | paste -sd' ')); the preset needs another way to set it"
cp "$tmp"/rootfs/boot/vmlinuz-* "$tmp/vmlinuz"
cp "$tmp"/rootfs/boot/initrd.img-* "$tmp/initrd.img"
kernel=$(basename "$tmp"/rootfs/boot/vmlinuz-*)
mkfs.ext4 -q -L aemroot -U "$ROOT_UUID" -d "$tmp/rootfs" "$tmp/root.raw" 4G
qemu-img convert -O qcow2 "$tmp/root.raw" "$tmp/root.qcow2"
rm -rf "$tmp/rootfs" "$tmp/root.raw"
qemu-img create -q -f qcow2 "$tmp/lvm.qcow2" 2G
qemu-img create -q -f qcow2 "$tmp/data.qcow2" 1G
qemu-img create -q -f qcow2 "$tmp/nvme-a.qcow2" 1G
qemu-img create -q -f qcow2 "$tmp/nvme-b.qcow2" 1G
t2=$(date +%s)

accel=$(vm_accel "$tmp/vmlinuz")
log "provisioning boot ($accel): data disk layout, Python checks, poweroff"
mapfile -t args < <(vm_qemu_args "$tmp" "$tmp" "$accel" ab "$tmp/provision.log" "$VM_APPEND aemops.provision=poweroff")
timeout 900 qemu-system-x86_64 "${args[@]}" -no-reboot \
	-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0,addr=0x03 ||
	{ tail -40 "$tmp/provision.log" >&2; die "provisioning boot failed or timed out"; }
grep -q AEMOPS-PROVISION-OK "$tmp/provision.log" ||
	{ tail -40 "$tmp/provision.log" >&2; die "provisioning did not finish (log above)"; }
grep -a 'bin/python.* \(ok\|unusable\): ' "$tmp/provision.log" >&2 || true
# The interpreters the scenarios use on this release must work here. bullseye
# has no libssl3/libffi8, so the copied pyenv builds only run after the upgrade
# to bookworm (the upgrade scenario checks that); Debian's python2.7 runs now.
case $VM_RELEASE in
bookworm) need=$(for v in $VM_PYTHONS; do echo "/root/.pyenv/versions/$v/bin/python${v%.*}"; done) ;;
bullseye) need=/usr/bin/python2.7 ;;
esac
for py in $need; do
	grep -aq "aemops-provision: $py ok: " "$tmp/provision.log" ||
		{ grep -a 'aemops-provision' "$tmp/provision.log" | tail -20 >&2; die "$py does not run in the $VM_RELEASE guest (log above)"; }
done
t3=$(date +%s)

cat >"$tmp/build-info" <<EOF
hash=$(basename "$final")
built=$(date -u +%FT%TZ)
release=$VM_RELEASE
kernel=$kernel
mirror=$mirror
pythons=$VM_PYTHONS
accel=$accel
seconds_mmdebstrap=$((t1 - t0))
seconds_disks=$((t2 - t1))
seconds_provision=$((t3 - t2))
seconds_total=$((t3 - t0))
EOF
touch "$tmp/READY"
rm -rf "$final" # only reached with --force or after a failed old build
mv "$tmp" "$final"
trap - EXIT
# Prune images of other inputs that nobody used for 3 days (~1 GB each).
find "$VM_CACHE" -mindepth 2 -maxdepth 2 -name READY -mtime +2 -printf '%h\n' |
	while read -r old; do log "pruning unused image $old"; rm -rf "$old"; done
log "image ready in $((t3 - t0)) s: $final"
[ "$grub" = 0 ] || build_grub "$final"
echo "$final" >&3
