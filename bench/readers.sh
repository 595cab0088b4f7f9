#!/usr/bin/env bash
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The bench row "a reader that was already running" (issue 19), on this machine's kernel (as root):
# tests/integration/readers.sh BENCH_READERS_RUNS times (default 3; a loop device, ext4, 32 random
# 8 KiB records through mmap per measurement), then bench/READERS.md with the medians of:
#   before           the reader mapped its file at 4096 KiB
#   without refresh  read_ahead set 32 KiB with refresh_readers=false (what every tool did before)
#   after refresh    read_ahead refreshed the open file in place (no restart)
# for a reader that keeps its descriptor (Oak) and one that closed it after mmap (Lucene), with the
# floor (a reader that opened its file at 32 KiB). Raw logs go to bench/raw/ (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_READERS_RUNS:-3}
mkdir -p bench/raw
commit=$(git rev-parse HEAD)
dirty=
if git status --porcelain --untracked-files=no | grep -q .; then dirty=", uncommitted changes"; fi
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
: >bench/raw/readers.jsonl
for i in $(seq "$runs"); do
	log=bench/raw/readers-$i.log
	tests/integration/readers.sh >"$log" 2>&1 || { echo "bench/readers.sh: run $i failed, see $log" >&2; exit 1; }
	grep -o 'READERS-JSON .*' "$log" | sed 's/^READERS-JSON //' >>bench/raw/readers.jsonl
done
python3 - "$commit" "$dirty" "$started" "$runs" <<'PY'
import json, statistics, sys
commit, dirty, started, runs = sys.argv[1:5]
rows = [json.loads(line) for line in open('bench/raw/readers.jsonl')]
def med(key):
    values = sorted(r[key] for r in rows)
    return '%.2fx (%.2f-%.2f)' % (statistics.median(values), values[0], values[-1])
out = ['# bench/readers.sh: a reader that was already running', '',
       'Measured %s by `bench/readers.sh` (%s runs of `tests/integration/readers.sh`) on commit `%s`%s, '
       'kernel %s, %s on a loop device, %d random 8 KiB records through mmap per measurement, the page cache '
       'dropped before each. Amplification: device bytes read (`/sys/block/<dev>/stat`) per byte of the '
       'records faulted; median (min-max).' % (started, runs, commit, dirty, rows[0]['kernel'], rows[0]['fs'],
                                              rows[0]['records']), '',
       '| case | reader that keeps its descriptor (Oak) | reader that closed it after mmap (Lucene) |',
       '|---|---:|---:|',
       '| before: mapped at 4096 KiB | %s | %s |' % (med('keep_before'), med('close_before')),
       '| after read_ahead 32 KiB without refresh (refresh_readers=false; every tool before) | %s | - |'
       % med('keep_without_refresh'),
       '| after read_ahead 32 KiB with the refresh (no restart) | %s | %s (named: needs a restart) |'
       % (med('keep_after_refresh'), med('close_after_refresh')),
       '| after a restart | - | %s |' % med('close_after_restart'),
       '| floor: a reader that opened its file at 32 KiB | %s | |' % med('floor'), '']
open('bench/READERS.md', 'w').write('\n'.join(out))
print('\n'.join(out))
PY
