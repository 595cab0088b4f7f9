# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The read-ahead udev rules file: rendering, parsing, and finding other rules that compete.

The collection owns exactly one rules file. It holds one rule per device, matched by the
device's stable id (never its kernel name), plus baseline records: the read-ahead each
device had before our first change, so ``state: absent`` can restore it.

The file is numbered 90 so that it runs after the rules that set the properties it matches
(``60-persistent-storage`` for ``ID_SERIAL``, the dm and md rules for ``DM_UUID`` and
``MD_UUID``) and after other rules that set read-ahead.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils.files import (
    baseline_line, is_managed, managed_header, parse_baselines, read_text, root_path,
)

RULES_FILE = '/etc/udev/rules.d/90-aemops-read-ahead.rules'
RULES_DIRS = ('/etc/udev/rules.d', '/run/udev/rules.d', '/usr/lib/udev/rules.d', '/lib/udev/rules.d')
RC_LOCAL_FILES = ('/etc/rc.local', '/etc/rc.d/rc.local')

_PREFIX = 'ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", '
_RULE_RE = re.compile(r'^' + re.escape(_PREFIX) + r'(?P<match>\S+=="[^"]*"), '
                      r'ATTR\{queue/read_ahead_kb\}="(?P<kb>\d+)"$')
_UNSAFE_VALUE = re.compile(r'["\\\n\r]')


class RulesFileError(Exception):
    """The owned rules file cannot be parsed; the message names the line and the fix."""


def match_clause(stable_id):
    """``KEY=="value"`` for a stable id dict from blockdev.stable_id, or None if it cannot be quoted."""
    if not stable_id or _UNSAFE_VALUE.search(stable_id['value']):
        return None
    return '%s=="%s"' % (stable_id['key'], stable_id['value'])


def render_rule(match, kb):
    return '%s%s, ATTR{queue/read_ahead_kb}="%d"' % (_PREFIX, match, kb)


def parse(text, path=RULES_FILE):
    """Return ({match: kb}, {match: baseline record}) from our rules file's text.

    Raises RulesFileError for lines we did not write, so hand edits are never lost silently.
    """
    rules = {}
    baselines = {}
    if text is None:
        return rules, baselines
    records, errors = parse_baselines(text)
    if errors:
        raise RulesFileError('%s has damaged baseline records (%s). Restore the file from backup or '
                             'delete it (the recorded original values will be lost).' % (path, '; '.join(errors)))
    for record in records:
        if 'match' in record:
            baselines[record['match']] = record
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith('#'):
            continue
        m = _RULE_RE.match(stripped)
        if not m:
            raise RulesFileError('%s line %d was not written by aemops.os_tuning: %r. This file is managed; '
                                 'move custom rules to a file of your own and remove the line.'
                                 % (path, number, stripped))
        rules[m.group('match')] = int(m.group('kb'))
    return rules, baselines


def render(rules, baselines):
    """The file text for ``rules`` ({match: kb}) and ``baselines`` ({match: record}); None if empty."""
    if not rules and not baselines:
        return None
    lines = managed_header('read_ahead module',
                           'Read-ahead (KiB) per block device, matched by a stable id. The baseline '
                           'lines keep the values from before the first change, for state=absent.')
    for match in sorted(baselines):
        lines.append(baseline_line(baselines[match]))
    for match in sorted(rules):
        lines.append(render_rule(match, rules[match]))
    return '\n'.join(lines) + '\n'


def competing_rules(root, own_path=RULES_FILE):
    """Other udev rules files that set read-ahead: a list of {file, line, text}."""
    found = []
    shadowed = set()
    for directory in RULES_DIRS:
        full_dir = root_path(root, directory)
        try:
            names = sorted(os.listdir(full_dir))
        except OSError:
            continue
        for name in names:
            if not name.endswith('.rules') or name in shadowed:
                continue
            shadowed.add(name)  # a file in /etc masks the same name in /usr/lib and /lib
            path = os.path.join(directory, name)
            if path == own_path:
                continue
            text = read_text(os.path.join(full_dir, name)) or ''
            if is_managed(text):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if line.lstrip().startswith('#'):
                    continue
                if 'read_ahead_kb' in line or re.search(r'blockdev\s+--setra', line):
                    found.append({'file': path, 'line': number, 'text': line.strip()})
    return found


def rc_local_setra(root):
    """``blockdev --setra`` or read_ahead_kb writes in rc.local: a list of {file, line, text}."""
    found = []
    for path in RC_LOCAL_FILES:
        full = root_path(root, path)
        if os.path.islink(full):
            continue  # /etc/rc.local -> rc.d/rc.local on RHEL; read the real file once
        for number, line in enumerate((read_text(full) or '').splitlines(), 1):
            if line.lstrip().startswith('#'):
                continue
            if re.search(r'blockdev\s+.*--setra', line) or 'read_ahead_kb' in line:
                found.append({'file': path, 'line': number, 'text': line.strip()})
    return found
