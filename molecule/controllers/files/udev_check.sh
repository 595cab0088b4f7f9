#!/bin/sh
# udev itself applies the rules file the collection wrote: `udevadm test` on each target shows
# its rule writing read_ahead_kb 32; `udevadm verify` too where systemd has it (253 and later).
# Usage: udev_check.sh DEVICE_LINK...   (the targets' stable links, from tests/vm/vm.env)
set -eu
[ $# -gt 0 ] || { echo "usage: udev_check.sh DEVICE_LINK..." >&2; exit 2; }
rules=/etc/udev/rules.d/90-aemops-read-ahead.rules
for link in "$@"; do
  dev=$(basename "$(readlink -f "$link")")
  out=$(udevadm test --action=add "/sys/class/block/$dev" 2>&1)
  if printf '%s\n' "$out" | grep -Eq "^$dev: $rules:[0-9]+ ATTR '[^']*/queue/read_ahead_kb' writing '32'$"; then
    echo "$link ($dev): udevadm test applies $rules, read_ahead_kb 32"
  else
    echo "$link ($dev): udevadm test does not apply $rules with read_ahead_kb 32:" >&2
    printf '%s\n' "$out" | grep -E 'aemops|read_ahead|rror' >&2 || true
    exit 1
  fi
done
if udevadm verify --help >/dev/null 2>&1; then
  udevadm verify "$rules" && echo "udevadm verify: $rules passes"
else
  echo "udevadm verify: not in systemd $(udevadm --version) (253 and later)"
fi
