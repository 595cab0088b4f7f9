# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Print where a phase's log says it failed: python3 scripts/failure-excerpt.py LOG [MAX_LINES].

.ci/run calls it for each failed phase after its summary, because what CI shows of a run is
its end, and a failing molecule scenario is followed by thousands of lines (its destroy, the
later scenarios, `make run`). It prints the lines around the last failure markers it finds
(Ansible's fatal/failed task results that were not ignored, pytest's failures, Python
tracebacks, make's errors), the newest last, at most MAX_LINES (default 120) in all, without
colour codes. Run on the controller's system Python 3; no dependencies.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import sys

ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
# Strongest first: the first kind found anywhere in the log is the one shown.
MARKERS = [
    # An Ansible task result; molecule boxes its output in '│ ', a nested run's is quoted
    re.compile(r'^[\s\u2502]*"?(fatal|failed): \['),
    re.compile(r'^(FAILED|ERROR) \S|^E {3}|^_{5,} .* _{5,}$'),   # pytest
    re.compile(r'^Traceback \(most recent call last\)'),
    re.compile(r'\b(FAILED|ERROR|CRITICAL)\b|^make(\[\d+\])?: \*\*\*'),
]
BEFORE, AFTER = 25, 35


def ignored(lines, i):
    """An Ansible failure with ignore_errors prints '...ignoring' right after its result."""
    return any('...ignoring' in line for line in lines[i + 1:i + 4])


def markers(lines):
    for pattern in MARKERS:
        found = [i for i, line in enumerate(lines) if pattern.search(line) and not ignored(lines, i)]
        if found:
            return found
    return []


def excerpt(lines, max_lines):
    found = markers(lines)
    if not found:
        return lines[-max_lines:]
    # Windows around the markers, newest first, merged where they overlap, until the budget is spent.
    windows = []
    for i in reversed(found):
        lo, hi = max(0, i - BEFORE), min(len(lines), i + AFTER + 1)
        if windows and hi >= windows[0][0]:
            windows[0] = (min(lo, windows[0][0]), windows[0][1])
        else:
            windows.insert(0, (lo, hi))
        if sum(b - a for a, b in windows) >= max_lines:
            break
    out, budget = [], max_lines
    for lo, hi in reversed(windows):                           # the newest window first
        take = lines[max(lo, hi - budget):hi]
        out = take + (['    [...]'] if out else []) + out
        budget -= len(take)
        if budget <= 0:
            break
    return out


def main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write('usage: python3 scripts/failure-excerpt.py LOG [MAX_LINES]\n')
        return 2
    max_lines = int(argv[2]) if len(argv) == 3 else 120
    with open(argv[1], 'rb') as f:
        lines = [ANSI.sub('', raw.decode('utf-8', 'replace').rstrip('\r\n')) for raw in f]
    for line in excerpt(lines, max_lines):
        print('  | ' + line)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
