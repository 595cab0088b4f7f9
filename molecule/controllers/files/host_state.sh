#!/bin/sh
# Everything a refused run must leave alone, as one checksum per line: the files under
# /etc/udev, /etc/tuned, /etc/ansible and /etc/aemops-os-tuning (content, mode, owner), the
# read-ahead of every block device, THP and tuned's active profile.
set -eu
for d in /etc/udev /etc/tuned /etc/ansible /etc/aemops-os-tuning; do
	[ -e "$d" ] || { echo "$d absent"; continue; }
	find "$d" -xdev \( -type f -o -type l -o -type d \) -printf '%p %m %u %y %l\n' | LC_ALL=C sort
	find "$d" -xdev -type f -exec sha256sum {} + | LC_ALL=C sort -k2
done
for f in /sys/block/*/queue/read_ahead_kb; do echo "$f $(cat "$f")"; done
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag
cat /etc/tuned/active_profile
