#!/usr/bin/env bash
# Build (or reuse) the cached Debian bookworm test VM image.
#
# Usage: tests/vm/build-image.sh [--force]
#
# Output: $AEMOPS_VM_CACHE/<hash>/ (default ~/.cache/aemops-os-tuning/vm),
# printed on stdout. <hash> covers this script, lib.sh, guest/ and the copied
# pyenv Pythons, so an unchanged tree reuses the image. The build happens in
# a temporary directory next to it and is renamed into place when complete.
#
# Steps: mmdebstrap root fs (guest/packages.txt, guest/customize.sh) -> ext4
# -> qcow2; blank data disks; one provisioning boot that lays out LVM/XFS and
# ext4 on the data disks (guest/rootfs/usr/local/sbin/aemops-provision) and
# powers off.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
exec 3>&1 1>&2 # only the image directory goes to stdout

case ${1:-} in
'') force=0 ;;
--force) force=1 ;;
*) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

for t in mmdebstrap qemu-system-x86_64 qemu-img mkfs.ext4 flock; do
	command -v "$t" >/dev/null || die "$t not found (apt-get install qemu-system-x86 qemu-utils mmdebstrap)"
done
[ "$(id -u)" = 0 ] || die "run as root (mmdebstrap --mode=root, ext4 image with root-owned files)"
for v in $VM_PYTHONS; do
	[ -x "$VM_PYENV_ROOT/versions/$v/bin/python${v%.*}" ] ||
		die "pyenv Python $v not found under $VM_PYENV_ROOT (set AEMOPS_VM_PYTHONS='' to build without)"
done

final=$(vm_image_dir)
mkdir -p "$VM_CACHE"
exec 9>"$VM_CACHE/.lock"
flock 9 # one build at a time; a waiting second run then finds the image
if [ -e "$final/READY" ] && [ "$force" = 0 ]; then
	touch "$final/READY" # last use, for pruning below
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
sources=("deb $mirror bookworm main" "deb $mirror bookworm-updates main")
[ -n "$security" ] && sources+=("deb $security bookworm-security main")

tmp=$(mktemp -d "$VM_CACHE/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)
log "building $final (mirror $mirror)"

packages=$(grep -v '^[[:space:]]*\(#\|$\)' "$VM_DIR/guest/packages.txt" | paste -sd,)
ROOT_UUID=$(cat /proc/sys/kernel/random/uuid)
PYENV_SRC=$VM_PYENV_ROOT
PYTHONS=$VM_PYTHONS
export ROOT_UUID PYENV_SRC PYTHONS
mmdebstrap --mode=root --variant=apt --format=directory --quiet \
	--include="$packages" \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--customize-hook="$VM_DIR/guest/customize.sh \"\$1\"" \
	bookworm "$tmp/rootfs" "${sources[@]}"
t1=$(date +%s)

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
mapfile -t args < <(vm_qemu_args "$tmp" "$tmp" "$accel" ab "$tmp/provision.log" aemops.provision=poweroff)
timeout 900 qemu-system-x86_64 "${args[@]}" -no-reboot \
	-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0,addr=0x03 ||
	{ tail -40 "$tmp/provision.log" >&2; die "provisioning boot failed or timed out"; }
grep -q AEMOPS-PROVISION-OK "$tmp/provision.log" ||
	{ tail -40 "$tmp/provision.log" >&2; die "provisioning did not finish (log above)"; }
grep -a 'bin/python.* ok: ' "$tmp/provision.log" >&2 || true
t3=$(date +%s)

cat >"$tmp/build-info" <<EOF
hash=$(basename "$final")
built=$(date -u +%FT%TZ)
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
echo "$final" >&3
