#!/usr/bin/env bash
# Wait until tuned has applied its static tuning after a restart or profile switch.
# $1: byte offset into tuned.log before the action; $2: timeout in seconds.
set -euo pipefail
log=/var/log/tuned/tuned.log offset=${1:-0} timeout=${2:-180} start=$SECONDS
until tail -c "+$((offset + 1))" "$log" | grep -q 'static tuning from profile .* applied'; do
	if ((SECONDS - start > timeout)); then
		echo "tuned did not apply its profile within ${timeout}s" >&2
		tail -c "+$((offset + 1))" "$log" >&2
		exit 1
	fi
	sleep 2
done
tuned-adm active
