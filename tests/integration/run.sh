#!/usr/bin/env bash
# Run the real-kernel integration test of aemops.os_tuning.read_ahead.
#
# Usage: tests/integration/run.sh [ansible-playbook options...]
#   e.g. tests/integration/run.sh -v -e read_ahead_run_lvm=false
#
# By default it runs on this machine (localhost, connection local), which must
# be a host or VM where it is root with a writable /sys: it attaches loop
# devices, mounts filesystems and, in one case, writes the module's default
# /etc/udev/rules.d file (skipped when that file exists already). The dm and
# LVM parts run only where device-mapper works.
#
# Environment:
#   INVENTORY=path|host,   run on these hosts instead (e.g. the test VM over SSH)
#   LIMIT=pattern          passed to --limit
#   BECOME=1               use become (sudo) for a non-root remote user
#   PYTHON_INTERPRETER=    target Python for the default localhost inventory
#                          (default /usr/bin/python3 when it exists, else auto)
#   ANSIBLE_BIN_DIR=dir    where ansible-playbook is (default .venv/bin when it
#                          exists, else PATH)
#   ANSIBLE_COLLECTIONS_PATH  where aemops.os_tuning is found (default
#                          .collections when `make venv` made it, else a
#                          temporary link to this checkout)
#   READ_AHEAD_TAG=tag     tag for everything the run creates (default random)
#   READ_AHEAD_TMP_BASE=dir  parent of the per-run work directory on the target
#                          (default /tmp): backing files, mount points, rules files
#   LOG_DIR=dir            where to keep the log (default a temporary directory)
#
# Exit status: 0 when the test passed and nothing was left behind.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=common.sh source-path=SCRIPTDIR
. "$here/common.sh"

say() { printf '[integration %s] %s\n' "$(date +%T)" "$*" >&2; }

# --- tools -------------------------------------------------------------------
if [ -n "${ANSIBLE_BIN_DIR:-}" ]; then
	bindir=$ANSIBLE_BIN_DIR
elif [ -x "$root/.venv/bin/ansible-playbook" ]; then
	bindir=$root/.venv/bin
elif command -v ansible-playbook >/dev/null; then
	bindir=$(dirname "$(command -v ansible-playbook)")
else
	say "ansible-playbook not found: run 'make venv' or set ANSIBLE_BIN_DIR"
	exit 2
fi
playbook_bin=$bindir/ansible-playbook
[ -x "$playbook_bin" ] || { say "$playbook_bin is not executable"; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/aemops-ra-run.XXXXXX")
log_dir=${LOG_DIR:-$work}
mkdir -p "$log_dir"

it_collections_path "$root" "$work"
export ANSIBLE_COLLECTIONS_PATH
export ANSIBLE_ROLES_PATH=$here/targets
export ANSIBLE_RETRY_FILES_ENABLED=false
export ANSIBLE_HOST_KEY_CHECKING=${ANSIBLE_HOST_KEY_CHECKING:-false}

# --- inventory ---------------------------------------------------------------
local_run=0
if [ -n "${INVENTORY:-}" ]; then
	inventory=$INVENTORY
else
	local_run=1
	interp=${PYTHON_INTERPRETER:-}
	if [ -z "$interp" ] && [ -x /usr/bin/python3 ]; then interp=/usr/bin/python3; fi
	inventory=$work/inventory.ini
	{
		echo '[all]'
		printf 'localhost ansible_connection=local'
		[ -n "$interp" ] && printf ' ansible_python_interpreter=%s' "$interp"
		echo
	} >"$inventory"
fi

tag=${READ_AHEAD_TAG:-aemops-ra-it-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')}
tmp_base=${READ_AHEAD_TMP_BASE:-/tmp}
common=(-i "$inventory" -e "read_ahead_tag=$tag" -e "read_ahead_tmp_base=$tmp_base")
[ -n "${LIMIT:-}" ] && common+=(--limit "$LIMIT")
[ "${BECOME:-0}" = 1 ] && common+=(--become)

log=$log_dir/read_ahead-$tag.log
status=1
finished=0

# Last-resort cleanup of this machine, for a local run whose cleanup playbook
# could not run: by the tag in mount points, dm names and backing file names.
local_cleanup() {
	local m d l
	findmnt --raw --noheadings --output TARGET 2>/dev/null | grep -F -- "$tag" | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount --lazy "$m"; done
	command -v vgs >/dev/null && vgs --noheadings -o vg_name 2>/dev/null | tr -d ' ' | grep -F -- "$tag" |
		while read -r d; do vgremove --force --yes "$d"; done
	dmsetup ls 2>/dev/null | awk '{print $1}' | grep -F -e "$tag" -e "${tag//-/--}" |
		while read -r d; do dmsetup remove --retry "$d"; done
	losetup --list --noheadings --raw --output NAME,BACK-FILE 2>/dev/null | grep -F -- "$tag" |
		while read -r l _; do losetup --detach "$l"; done
	if ! findmnt --raw --noheadings --output TARGET | grep -qF -- "$tag"; then
		chattr -R -i -a "${tmp_base:?}/$tag" 2>/dev/null
		rm -rf "${tmp_base:?}/$tag"
	fi
}

leftovers() {
	{
		losetup --list --noheadings --raw --output NAME,BACK-FILE 2>/dev/null
		findmnt --raw --noheadings --output TARGET 2>/dev/null
		dmsetup ls 2>/dev/null
		[ -e "$tmp_base/$tag" ] && echo "$tmp_base/$tag"
	} | grep -F -e "$tag" -e "${tag//-/--}"
}

on_exit() {
	trap - EXIT INT TERM
	if [ "$finished" != 1 ] || [ "$status" != 0 ]; then
		say "running the cleanup playbook for tag $tag"
		"$playbook_bin" "${common[@]}" "$here/cleanup.yml" >>"$log" 2>&1 ||
			say "cleanup playbook failed (see $log)"
		if [ "$local_run" = 1 ] && leftovers >/dev/null; then
			say "removing leftovers by hand:"
			leftovers >&2
			local_cleanup >>"$log" 2>&1
		fi
	fi
	if [ "$local_run" = 1 ] && leftovers >/dev/null; then
		say "LEFT BEHIND (tag $tag):"
		leftovers >&2
		status=1
	fi
	rm -rf "$work/collections" "$work/inventory.ini"
	[ "$log_dir" = "$work" ] || rmdir "$work" 2>/dev/null
	exit "$status"
}
trap on_exit EXIT
trap 'say interrupted; status=130; exit 130' INT TERM

# --- run ---------------------------------------------------------------------
say "ansible-playbook: $playbook_bin ($("$playbook_bin" --version 2>/dev/null | sed -n 1p))"
say "collections: $ANSIBLE_COLLECTIONS_PATH"
say "inventory: ${INVENTORY:-localhost (local)}   tag: $tag"
say "log: $log"
start=$(date +%s)
cd "$root" || exit 2
"$playbook_bin" "${common[@]}" "$here/read_ahead.yml" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
[ "$local_run" = 1 ] && { "$here/sweep.sh" || status=1; }  # read_ahead_sweep on its own loop device (local only)
[ "$local_run" = 1 ] && { "$here/hostile.sh" || status=1; }  # planted runtime state, in a private mount namespace
[ "$local_run" = 1 ] && { "$here/readers.sh" || status=1; }  # refreshing readers that were already running (local only)
[ "$local_run" = 1 ] && { "$here/measure.sh" || status=1; }  # measuring running readers from outside (local only)
finished=1
elapsed=$(($(date +%s) - start))

echo
echo "==== read_ahead integration summary ===="
grep -o 'RA| .*' "$log" | sed -e 's/^RA| //' -e 's/",\{0,1\}$//' -e 's/\\"/"/g'
sed -n '/^PLAY RECAP/,/^$/p' "$log" | grep -v '^PLAY RECAP' | sed '/^$/d'
if [ "$status" = 0 ]; then
	echo "read_ahead: 1 passed, 0 failed (${elapsed}s)"
else
	# The failures that stopped the run (not the expected, ignored ones).
	awk '/^(fatal|failed): /{buf=$0; if ($0 ~ /[{]$/) {while ((getline l) > 0) {buf = buf "\n" l; if (l ~ /^[}]/) break}}
		if ((getline n) > 0 && n ~ /^[.][.][.]ignoring/) next; print buf; next}' "$log" | cut -c1-3000
	echo "read_ahead: 0 passed, 1 failed (${elapsed}s, ansible-playbook exit $status, log $log)"
fi
