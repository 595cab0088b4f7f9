#!/usr/bin/env bash
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Runs in the bench VM (bench/run.sh and bench/caps.sh feed it to `vm.sh ssh bash -s`):
#   probe-fs.sh DEVICE_LINK MOUNT_POINT
# makes ext4 on the device and mounts it, for the probes on an NVMe disk.
set -euo pipefail
dev=$(readlink -f "$1")
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 -L nvmeprobe "$dev"
mkdir -p "$2"
mount -o noatime "$dev" "$2"
udevadm settle
