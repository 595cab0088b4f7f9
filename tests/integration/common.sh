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
