#!/usr/bin/env bash
# Offline Debian release upgrade of a powered-off test VM's root disk, run on
# the host: the stand-in for Leapp's offline upgrade (Leapp, too, upgrades
# with the host's services stopped, and the next boot is the first boot of the
# new release). See tests/vm/README.md, "Upgrades".
#
#   upgrade.sh cache IMAGE FROM TO
#       Build (or reuse) the package cache of every step from IMAGE's release
#       to TO and print the directory of the step FROM -> TO. The only command
#       that uses the network, once per cache key.
#   upgrade.sh apply DISKDIR IMAGE FROM TO
#       Upgrade DISKDIR's root disk (a powered-off VM's, from vm.sh) one
#       release, FROM -> TO, installing only from the cache of that step.
#
# One release at a time, in the order of VM_UPGRADE_PATH (vm.env), following
# the Debian release notes (bookworm, chapter 4; trixie, chapter 4):
#   1. sources.list: the old codename replaced by the new one (sed, as the notes do)
#   2. apt-get update            (cache: the package lists it fetched, kept with the step)
#   3. apt-get upgrade --without-new-pkgs   (the "minimal system upgrade")
#   4. apt-get full-upgrade
# with dpkg's --force-unsafe-io (no fsync per unpacked file: the disk is a throwaway copy,
# synced once when the step ends, and a crash mid-step fails the run anyway),
# with --force-confdef --force-confold and UCF_FORCE_CONFFOLD, so that changed
# configuration files (tuned-main.conf, /etc/default/grub, sshd_config) are
# kept and unchanged ones are replaced, and with a policy-rc.d that stops
# maintainer scripts from starting services in the chroot.
#
# Cache: ${AEMOPS_VM_APT_CACHE:-~/.cache/aemops-os-tuning/apt}/<from>-<to>-<key>/
# with lists/ (the step's /var/lib/apt/lists), archives/ (every .deb the step
# installed), sources.list and READY. <key> is a sha256 over the image's hash,
# this script, lib.sh, vm.env, the mirrors, the step and the previous step's
# key, so a second run downloads nothing; the cached lists pin the package
# versions until an input changes. Built by upgrading a throwaway copy of the
# image's root disk with the network (apt-get then keeps what it downloaded).
#
# Why a chroot on a loop device and not qemu-nbd: the CI host's kernel has no
# nbd module and no partition-table support, so the root file system (grub
# variant: partition 1 at VM_GRUB_PART_OFFSET) is loop-mounted at its offset.
# For the same reason GRUB's boot code cannot be reinstalled from here: the
# chroot is marked as a container (/run/systemd/container), so the new
# grub-pc's postinst skips grub-install (as it does in containers), and
# `vm.sh upgrade` runs grub-install in the guest after its first boot. The
# new kernel's postinst hook and the last step here run update-grub, so GRUB
# boots the new kernel with /etc/default/grub's command line.
set -euo pipefail
# shellcheck source=lib.sh source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
exec 3>&1 1>&2 # only the printed cache directory goes to stdout

APT_CACHE=${AEMOPS_VM_APT_CACHE:-$HOME/.cache/aemops-os-tuning/apt}
IFS=, read -r -a PATH_SUITES <<<"$VM_UPGRADE_PATH"

usage() {
	echo "usage: $0 cache IMAGE FROM TO | apply DISKDIR IMAGE FROM TO" >&2
	exit 2
}

image_release() { sed -n 's/^release=//p' "$1/build-info" | grep . || echo bookworm; }

next_suite() { # the release after $1 on VM_UPGRADE_PATH
	local i
	for i in "${!PATH_SUITES[@]}"; do
		if [ "${PATH_SUITES[$i]}" = "$1" ] && [ $((i + 1)) -lt ${#PATH_SUITES[@]} ]; then
			echo "${PATH_SUITES[$((i + 1))]}"
			return 0
		fi
	done
	return 1
}

check_step() { # from to
	local next
	next=$(next_suite "$1") || die "no upgrade from '$1' (upgrade path: $VM_UPGRADE_PATH)"
	[ "$next" = "$2" ] || die "upgrade $1 -> $2: one release at a time, as the Debian release notes say; from $1 the next is $next"
}

mirrors() { # what the guest's sources.list points at (build-info)
	sed -n 's/^mirror=//p' "$1/build-info"
}

step_key() { # image from to: key of the step, chained through the previous steps
	local image=$1 from=$2 to=$3 prev=none r
	r=$(image_release "$image")
	while [ "$r" != "$from" ]; do
		prev=$(step_key "$image" "$r" "$(next_suite "$r")")
		r=$(next_suite "$r")
	done
	{
		echo "image $(basename "$image") $from $to prev $prev mirror $(mirrors "$image")"
		(cd "$VM_DIR" && sha256sum upgrade.sh lib.sh vm.env)
	} | sha256sum | cut -c1-16
}

step_dir() { echo "$APT_CACHE/$2-$3-$(step_key "$1" "$2" "$3")"; }

# --- the chroot -------------------------------------------------------------
#
# It lives in a private mount namespace (unshare --mount): /dev there is a
# tmpfs of its own with the usual nodes and the root file system's loop
# device named vda1, its name in the guest, and the root is mounted from that
# node. So grub-probe (update-grub) finds / on /dev/vda1 (grub's 10_linux
# skips a root on /dev/loopN: "loop-mounted from files"), nothing in the
# chroot sees the host's disks, and nothing of it is visible on the host.

MNT=''
cleanup_chroot() { # inside the namespace
	local pid
	[ -n "$MNT" ] || return 0
	rm -f "$MNT/usr/sbin/policy-rc.d"
	# Anything a maintainer script left running inside (nothing should be:
	# policy-rc.d blocks service starts) would keep the mounts busy.
	for pid in /proc/[0-9]*; do
		pid=${pid#/proc/}
		[ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$MNT" ] || continue
		log "killing $pid left running in the chroot: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
		kill -9 "$pid" 2>/dev/null || true
	done
	findmnt -R -n -l -o TARGET "$MNT" 2>/dev/null | tac | while read -r m; do umount "$m" || umount -l "$m"; done
	rmdir "$MNT" 2>/dev/null || true
	MNT=''
}

mount_chroot() { # loop-device (inside the namespace)
	local loop=$1 majmin n
	majmin="$((0x$(stat -c %t "$loop"))) $((0x$(stat -c %T "$loop")))"
	MNT=$(mktemp -d "${TMPDIR:-/tmp}/aemops-upgrade-XXXXXX")
	trap cleanup_chroot EXIT
	mount -t tmpfs -o mode=0755,size=8m aemops-dev /dev
	for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
		IFS=: read -r n maj min <<<"$n"
		mknod -m 0666 "/dev/$n" c "$maj" "$min"
	done
	# shellcheck disable=SC2086 # two numbers
	mknod -m 0660 /dev/vda1 b $majmin
	mkdir /dev/pts /dev/shm
	mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
	ln -s pts/ptmx /dev/ptmx
	mount /dev/vda1 "$MNT"
	[ -x "$MNT/usr/bin/apt-get" ] || die "partition 1 (offset $VM_GRUB_PART_OFFSET) is not a Debian root file system"
	mount --rbind /dev "$MNT/dev"
	mount -t proc proc "$MNT/proc"
	mount -t sysfs sysfs "$MNT/sys"
	mount -t tmpfs -o mode=0755 aemops-run "$MNT/run"
	mkdir -p "$MNT/run/systemd" "$MNT/run/lock"
	echo aemops-offline-upgrade >"$MNT/run/systemd/container" # see the header
	printf '#!/bin/sh\n# aemops offline upgrade: no service starts in the chroot\nexit 101\n' >"$MNT/usr/sbin/policy-rc.d"
	chmod 0755 "$MNT/usr/sbin/policy-rc.d"
}

# Run upgrade steps (from:to:dir:mode ...) in a chroot of RAW's partition 1.
with_chroot() { # raw step...
	local raw=$1 loop rc=0
	shift
	loop=$(losetup -f --show -o "$VM_GRUB_PART_OFFSET" "$raw")
	unshare --mount --propagation private -- "$0" _chroot "$loop" "$@" || rc=$?
	losetup -d "$loop" || rc=$?
	return $rc
}

cmd__chroot() { # loop step... (inside the namespace)
	local loop=$1 st f t d m
	shift
	mount_chroot "$loop"
	for st in "$@"; do
		IFS=: read -r f t d m <<<"$st"
		upgrade_step "$f" "$t" "$d" "$m"
	done
	cleanup_chroot
	trap - EXIT
	sync
}

in_chroot() {
	chroot "$MNT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
		DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true UCF_FORCE_CONFFOLD=1 \
		APT_LISTCHANGES_FRONTEND=none ${http_proxy:+http_proxy=$http_proxy} "$@"
}

# One release step inside the mounted chroot. online: apt-get update and
# download into the step's archives (in DIR.part, renamed to DIR when the step
# succeeded); offline: the cached lists and archives only.
upgrade_step() { # from to stepdir online|offline
	local from=$1 to=$2 final=$3 mode=$4 dir=$3 apt kernel n t0
	if [ "$mode" = online ]; then
		dir=$final.part
		rm -rf "$dir"
	fi
	t0=$(date +%s)
	log "$mode upgrade $from -> $to ($dir)"
	grep -qw "$from" "$MNT/etc/apt/sources.list" || die "the guest's sources.list does not name $from: $(cat "$MNT/etc/apt/sources.list")"
	sed -i "s/\\b$from\\b/$to/g" "$MNT/etc/apt/sources.list"
	mkdir -p "$MNT/var/cache/aemops-upgrade" "$dir/archives" "$dir/lists"
	mount --bind "$dir/archives" "$MNT/var/cache/aemops-upgrade"
	apt=(apt-get -y -q -o Dir::Cache::Archives=/var/cache/aemops-upgrade/
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold
		-o Dpkg::Use-Pty=false -o APT::Keep-Downloaded-Packages=true
		-o Dpkg::Options::=--force-unsafe-io)
	if [ "$mode" = online ]; then
		local resolv_saved=0
		if [ -e "$MNT/etc/resolv.conf" ] || [ -L "$MNT/etc/resolv.conf" ]; then
			mv "$MNT/etc/resolv.conf" "$MNT/etc/resolv.conf.aemops-save"
			resolv_saved=1
		fi
		cp /etc/resolv.conf "$MNT/etc/resolv.conf"
		in_chroot apt-get -q -o Acquire::Check-Valid-Until=false update
		in_chroot "${apt[@]}" upgrade --without-new-pkgs
		in_chroot "${apt[@]}" full-upgrade
		rm -f "$MNT/etc/resolv.conf"
		[ "$resolv_saved" = 0 ] || mv "$MNT/etc/resolv.conf.aemops-save" "$MNT/etc/resolv.conf"
		find "$MNT/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -exec cp -t "$dir/lists" {} +
		cp "$MNT/etc/apt/sources.list" "$dir/sources.list"
	else
		[ -e "$dir/READY" ] || die "no package cache for $from -> $to in $dir ($0 cache first)"
		cmp -s "$MNT/etc/apt/sources.list" "$dir/sources.list" ||
			die "the guest's sources.list differs from the one the cache was built with ($dir/sources.list)"
		# What `apt-get update` fetched when the cache was built.
		find "$MNT/var/lib/apt/lists" -maxdepth 1 -type f ! -name lock -delete
		cp -t "$MNT/var/lib/apt/lists" "$dir"/lists/*
		in_chroot "${apt[@]}" --no-download upgrade --without-new-pkgs
		in_chroot "${apt[@]}" --no-download full-upgrade
	fi
	umount "$MNT/var/cache/aemops-upgrade"
	rmdir "$MNT/var/cache/aemops-upgrade"
	# As the new grub-pc's postinst would on a running system.
	in_chroot update-grub
	kernel=$(find "$MNT/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' | sort -V | tail -1)
	n=$(grep -E '^[[:space:]]*linux[[:space:]]' "$MNT/boot/grub/grub.cfg" | grep -cF "/boot/$kernel " || true)
	[ "$n" -gt 0 ] || die "grub.cfg does not boot the new kernel $kernel"
	[ "$(sed -n 's/^VERSION_CODENAME=//p' "$MNT/etc/os-release")" = "$to" ] ||
		die "after the upgrade, /etc/os-release is not $to: $(grep PRETTY "$MNT/etc/os-release")"
	log "$to: $(grep PRETTY_NAME "$MNT/etc/os-release"), $kernel in grub.cfg ($n entries), tuned $(in_chroot dpkg-query -W -f="\${Version}" tuned) in $(($(date +%s) - t0)) s"
	if [ "$mode" = online ]; then
		printf 'step=%s-%s\nbuilt=%s\ndebs=%s\nbytes=%s\n' "$from" "$to" "$(date -u +%FT%TZ)" \
			"$(find "$dir/archives" -name '*.deb' | wc -l)" "$(du -sb "$dir/archives" | cut -f1)" >"$dir/info"
		rm -rf "$dir/archives/partial" "$dir/archives/lock"
		touch "$dir/READY"
		rm -rf "$final"
		mv "$dir" "$final"
	fi
}

raw_copy() { # qcow2 raw: a sparse raw copy
	qemu-img convert -O raw "$1" "$2"
}

# --- commands -----------------------------------------------------------------

cmd_cache() { # image from to
	local image=$1 from=$2 to=$3 r dirs=() all=1 d tmp steps f t sd
	check_step "$from" "$to"
	[ -e "$image/grub/READY" ] || die "$image has no grub variant (build-image.sh --grub)"
	r=$(image_release "$image")
	while :; do # every step from the image's release to TO
		d=$(step_dir "$image" "$r" "$(next_suite "$r")")
		dirs+=("$r:$(next_suite "$r"):$d")
		[ -e "$d/READY" ] || all=0
		[ "$(next_suite "$r")" = "$to" ] && break
		r=$(next_suite "$r") || die "$from is not on the path from $(image_release "$image") ($VM_UPGRADE_PATH)"
	done
	if [ "$all" = 0 ]; then
		mkdir -p "$APT_CACHE"
		exec 8>"$APT_CACHE/.lock"
		flock 8
		rm -rf "$APT_CACHE"/.build-* "$APT_CACHE"/*.part # leftovers of interrupted builds (we hold the lock)
		all=1 # another run may have built them while we waited
		for d in "${dirs[@]}"; do [ -e "${d##*:}/READY" ] || all=0; done
	fi
	if [ "$all" = 0 ]; then
		tmp=$(mktemp -d "$APT_CACHE/.build-XXXXXX")
		log "building the package cache: a throwaway copy of $image/grub/root.qcow2, upgraded with the network"
		raw_copy "$image/grub/root.qcow2" "$tmp/root.raw"
		steps=()
		for d in "${dirs[@]}"; do
			IFS=: read -r f t sd <<<"$d"
			if [ -e "$sd/READY" ]; then steps+=("$f:$t:$sd:offline"); else steps+=("$f:$t:$sd:online"); fi
		done
		# Each step's cache is complete (READY) as soon as that step succeeded.
		with_chroot "$tmp/root.raw" "${steps[@]}"
		rm -rf "$tmp"
		# Caches of other inputs that nobody used for 3 days.
		find "$APT_CACHE" -mindepth 2 -maxdepth 2 -name READY -mtime +2 -printf '%h\n' |
			while read -r old; do log "pruning unused package cache $old"; rm -rf "$old"; done
	fi
	d=$(step_dir "$image" "$from" "$to")
	touch "$d/READY" # last use
	echo "$d" >&3
}

cmd_apply() { # diskdir image from to
	local disks=$1 image=$2 from=$3 to=$4 dir t0
	t0=$(date +%s)
	check_step "$from" "$to"
	dir=$(step_dir "$image" "$from" "$to")
	[ -e "$dir/READY" ] || die "no package cache for $from -> $to: run $0 cache $image $from $to"
	if [ ! -e "$disks/root.raw" ]; then
		# Once per run: the overlay becomes a raw disk the host can loop-mount
		# (lib.sh's vm_qemu_args then attaches root.raw instead).
		[ -e "$disks/root.qcow2" ] || die "no root disk in $disks"
		raw_copy "$disks/root.qcow2" "$disks/root.raw.part"
		mv "$disks/root.raw.part" "$disks/root.raw"
		rm "$disks/root.qcow2"
	fi
	with_chroot "$disks/root.raw" "$from:$to:$dir:offline"
	log "offline upgrade $from -> $to of $disks/root.raw took $(($(date +%s) - t0)) s"
}

[ "$(id -u)" = 0 ] || die "run as root (loop devices, mount, chroot)"
cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
cache) [ $# = 3 ] || usage; cmd_cache "$@" ;;
_chroot) cmd__chroot "$@" ;; # internal: with_chroot runs it in a private mount namespace
apply) [ $# = 4 ] || usage; cmd_apply "$@" ;;
*) usage ;;
esac
