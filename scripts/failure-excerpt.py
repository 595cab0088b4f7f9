# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Print where a phase's log says it failed: python3 scripts/failure-excerpt.py [--brief] LOG [MAX_LINES].

.ci/run calls it for each failed phase after its summary, because what CI shows of a run is
its end, and a failing molecule scenario is followed by thousands of lines (its destroy, the
later scenarios, `make run`). It prints the lines around the last failure markers it finds
(Ansible's fatal/failed task results that were not ignored, pytest's failures, Python
tracebacks, make's errors), the newest last, at most MAX_LINES (default 120) in all, without
colour codes. Run on the controller's system Python 3; no dependencies.

--brief prints the cause in a few lines instead: the task (and the scenario step) that failed
last, and its message, shortened; ansible-test's ERROR lines (the test and its issues). .ci/run prints it after the phase table, as the very last
lines of the run, because CI shows only the last couple of dozen lines of a run: the long
excerpt above the table is cut off there (the upgrade failure of stop 25 was lost that way).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import sys

ANSI = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')
# Strongest first: the first kind found anywhere in the log is the one shown.
# An Ansible task result; molecule boxes its output in '│ ', a nested run's is quoted
FATAL = re.compile(r'^[\s\u2502]*"?(fatal|failed): \[')
MARKERS = [
    FATAL,
    re.compile(r'^(FAILED|ERROR) \S|^E {3}|^_{5,} .* _{5,}$'),   # pytest
    re.compile(r'^ERROR: \S'),                                    # ansible-test
    re.compile(r'^Traceback \(most recent call last\)'),
    re.compile(r'\b(FAILED|ERROR|CRITICAL)\b|^make(\[\d+\])?: \*\*\*'),
]
BEFORE, AFTER = 25, 35
# A name that molecule's box wraps has no ']' on its line: the rest is on the next line.
TASK = re.compile(r'^[\s\u2502"]*(TASK|RUNNING HANDLER) \[(?P<name>[^\]]*)(?P<end>\])?')
PLAY = re.compile(r'^[\s\u2502"]*PLAY \[(?P<name>[^\]]*)(?P<end>\])?')
BRIEF_WIDTH = 300
# The harness's own failure line (tests/vm/lib.sh die: '[vm 12:34:56] error: ...').
HARNESS_ERROR = re.compile(r'^\[vm [0-9:]+\] error: ')


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


def shorten(text, width=BRIEF_WIDTH):
    text = ' '.join(text.replace('\\n', ' ').split())
    return text if len(text) <= width else text[:width - 5] + ' [..]'


def unquote(line):
    """A line of a nested run's output, as a debug task prints it (a JSON string in a list)."""
    text = line.strip(' \u2502').rstrip(',')
    if text.startswith('"') and text.endswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return line.strip(' \u2502')


def unboxed(line):
    """A line without molecule's box ('  \u2502 ') and its indentation."""
    return line.lstrip(' ').lstrip('\u2502').strip()


KEY = re.compile(r'^"[A-Za-z_]+": ')


def block_message(lines, i):
    """The msg of a result printed over several lines (``FAILED! => {`` then one key a line, which molecule's
    box wraps at its width), or None."""
    for j in range(i + 1, min(len(lines), i + 400)):
        text = unboxed(lines[j])
        if text.startswith('}'):
            return None
        if text.startswith('"msg": '):
            parts = [text[len('"msg": '):]]
            for k in range(j + 1, min(len(lines), j + 400)):
                more = unboxed(lines[k])
                if KEY.match(more) or more.startswith('}'):
                    break
                parts.append(more)
            joined = ' '.join(parts).rstrip(',')
            return joined[1:-1] if len(joined) > 1 and joined[0] == joined[-1] == '"' else joined
    return None


def message(lines, i):
    """The msg of an Ansible result line (on the line, or in the lines after it), else the line itself."""
    text = unquote(lines[i])
    found = re.search(r'"msg": "((?:[^"\\]|\\.)*)"', text)
    if found:
        return found.group(1)
    if text.rstrip().endswith('{'):
        return block_message(lines, i) or text
    if '"msg": "' in text:
        # One line of JSON that molecule's box wrapped over the next lines.
        joined = ' '.join([text] + [unboxed(line) for line in lines[i + 1:i + 40]])
        found = re.search(r'"msg": "((?:[^"\\]|\\.)*)"', joined)
        if found:
            return found.group(1)
    return text


def printed(lines):
    """The lines a debug task printed as its msg list (``ok: [...] => {"msg": [...]}``), whole again
    where molecule's box wrapped them; else each quoted line as it stands."""
    joined = ' '.join(unboxed(line) for line in lines)
    found = re.search(r'"msg": (\[.*\])\s*\}', joined)
    if found:
        try:
            items = json.loads(found.group(1))
        except ValueError:
            items = None
        if isinstance(items, list):
            return [item for item in items if isinstance(item, str) and item.strip()]
    return [line for line in (unquote(line) for line in lines if not top_level(line)) if line.strip()]


def top_level(line):
    return not line.lstrip(' \u2502').startswith('"')


def enclosing(lines, i, pattern, outer=False):
    """The index and name of the nearest line above i that pattern matches (outer: not quoted)."""
    for j in range(i, -1, -1):
        found = pattern.search(lines[j])
        if found and (top_level(lines[j]) or not outer):
            name = found.group('name')
            if not found.group('end') and j + 1 < len(lines):
                name = '%s %s' % (name.rstrip(), unboxed(lines[j + 1]).split(']')[0].strip())
            return j, name
    return -1, None


def brief(lines):
    """At most 5 short lines: which task failed last, in which play, and what it said."""
    found = markers(lines)
    if not found:
        return ['no failure marker in the log; its last line: ' + shorten(lines[-1] if lines else '(empty)')]
    i = found[-1]
    if lines[i].startswith('Traceback'):
        # The exception is the first line after the traceback that is not indented.
        end = next((j for j in range(i + 1, len(lines)) if lines[j][:1] not in ('', ' ')), i)
        return ['line %d: %s' % (end + 1, shorten(lines[end]))]
    if lines[i].startswith('ERROR: '):
        # ansible-test: 'Found N <test> issue(s)', then one line per issue, then the tests that failed.
        shown = [j for j in found if lines[j].startswith('ERROR: ')]
        out = ['line %d: %s' % (j + 1, shorten(lines[j])) for j in shown[:4]]
        if len(shown) > 4:
            out.append('(%d more ERROR lines)' % (len(shown) - 4))
        return out
    if not FATAL.search(lines[i]):
        failed = [j for j in found if lines[j].startswith('FAILED ')]
        return ['line %d: %s' % (j + 1, shorten(lines[j])) for j in (failed[-3:] or [i])]
    task_at, task = enclosing(lines, i, TASK, outer=True)
    out = ['task: %s' % task]
    play = enclosing(lines, i, PLAY, outer=True)[1]
    if play:
        out.append('play: %s' % play)
    out.append('said: ' + shorten(message(lines, i)))
    # A scenario step (molecule/upgrade/tasks/step.yml) fails after a task that printed the
    # nested run's whole output: the last failure quoted in that output is the cause.
    shown_at = enclosing(lines, task_at - 1, TASK, outer=True)[0]
    nested = [j for j in found if shown_at < j < task_at and not top_level(lines[j])]
    if nested:
        j = nested[-1]
        out.append('nested task: %s' % enclosing(lines, j, TASK)[1])
        out.append('nested said: ' + shorten(message(lines, j)))
    elif shown_at >= 0 and 'output above' in message(lines, i):
        # Not an Ansible run (tests/vm/vm.sh, upgrade.sh): the end of what it printed.
        said = printed(lines[shown_at + 1:task_at])
        # vm.sh and upgrade.sh die with '[vm HH:MM:SS] error: ...' and may print a log's tail
        # after it: that line is the cause, not the tail.
        errors = [line for line in said[:-2] if HARNESS_ERROR.search(line)]
        if errors:
            out.append('its last error: ' + shorten(errors[-1]))
        if said:
            out.append('its output ends: ' + shorten(' / '.join(said[-2:])))
    return out


def main(argv):
    args = argv[1:]
    short = args[:1] == ['--brief']
    if short:
        args = args[1:]
    if len(args) not in (1, 2):
        sys.stderr.write('usage: python3 scripts/failure-excerpt.py [--brief] LOG [MAX_LINES]\n')
        return 2
    max_lines = int(args[1]) if len(args) == 2 else 120
    with open(args[0], 'rb') as f:
        lines = [ANSI.sub('', raw.decode('utf-8', 'replace').rstrip('\r\n')) for raw in f]
    for line in (brief(lines) if short else excerpt(lines, max_lines)):
        print('  | ' + line)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
