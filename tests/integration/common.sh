# shellcheck shell=bash
# Shared by the integration scripts (run.sh, sweep.sh, readers.sh, measure.sh, hostile.sh): sourced, not
# executed.

# The Python that runs the modules: $PYTHON, else the checkout's .venv, else python3.
it_python() { # ROOT (the checkout)
	if [ -n "${PYTHON:-}" ]; then
		echo "$PYTHON"
	elif [ -x "$1/.venv/bin/python" ]; then
		echo "$1/.venv/bin/python"
	else
		echo python3
	fi
}

# When ANSIBLE_COLLECTIONS_PATH is unset: the checkout's .collections link (make venv), else a
# link to the checkout made under WORK/collections (removed with WORK). Sets the variable;
# the caller exports it where it needs to.
it_collections_path() { # ROOT WORK
	[ -z "${ANSIBLE_COLLECTIONS_PATH:-}" ] || return 0
	if [ -d "$1/.collections/ansible_collections/aemops/os_tuning/plugins" ]; then
		ANSIBLE_COLLECTIONS_PATH=$1/.collections
	else
		mkdir -p "$2/collections/ansible_collections/aemops"
		ln -s "$1" "$2/collections/ansible_collections/aemops/os_tuning"
		ANSIBLE_COLLECTIONS_PATH=$2/collections
	fi
}

it_forget_device() { # DEV JSON_PYTHON: drop a test's device from the readers' record (another test may reuse the loop number)
	local record=/run/aemops-os-tuning/readers.json
	[ -n "$1" ] && [ -f "$record" ] || return 0
	"$2" - "$record" "$(cat "/sys/block/$1/dev" 2>/dev/null)" <<'EOF'
import json, os, sys
path, number = sys.argv[1], sys.argv[2]
data = json.load(open(path))
if number in data.get('devices', {}):
    del data['devices'][number]
    with open(path + '.tmp', 'w') as f:
        json.dump(data, f)
    os.chmod(path + '.tmp', 0o600)
    os.rename(path + '.tmp', path)
EOF
}

# The end of a loop-device test: unmount WORK/mnt, detach DEV, remove WORK; false (with what is left, said on stderr)
# when a loop device or mount of the run's TAG, or WORK itself, is still there.
it_release_loop() { # DEV WORK TAG
	if mountpoint -q "$2/mnt"; then umount "$2/mnt" || umount --lazy "$2/mnt"; fi
	[ -n "$1" ] && losetup --detach "/dev/$1" 2>/dev/null
	rm -rf "${2:?}"
	local left
	left=$({ losetup --list --noheadings --raw --output NAME,BACK-FILE; findmnt --raw --noheadings --output TARGET; } |
		grep -F -- "$3")
	if [ -n "$left" ] || [ -e "$2" ]; then
		echo "LEFT BEHIND (tag $3): $left" >&2
		return 1
	fi
}
