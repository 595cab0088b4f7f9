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

import json
import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils import compliance
from ansible_collections.aemops.os_tuning.plugins.module_utils.files import (
    baseline_line, is_managed, managed_header, parse_baselines, read_text, root_path,
)

RULES_FILE = '/etc/udev/rules.d/90-aemops-read-ahead.rules'
RULES_DIRS = ('/etc/udev/rules.d', '/run/udev/rules.d', '/usr/lib/udev/rules.d', '/lib/udev/rules.d')
RC_LOCAL_FILES = ('/etc/rc.local', '/etc/rc.d/rc.local')

_PREFIX = 'ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", '
_RULE_RE = re.compile(r'^' + re.escape(_PREFIX) + r'(?P<match>\S+=="[^"]*"), '
                      r'ATTR\{queue/read_ahead_kb\}="(?P<kb>\d+)"$')

# How udev reads a match value, by version (systemd upstream, the releases RHEL ships):
# - v219 (RHEL 7) and v239 (RHEL 8), src/udev/udev-rules.c: get_key() takes everything up to
#   the next '"' with no escape at all; match_key() treats a value holding '*', '?' or '['
#   as an fnmatch() glob and splits it at every '|' into alternatives; match_attr() copies a
#   sysfs value into char vbuf[UTIL_NAME_SIZE] (512) to strip its trailing whitespace.
# - v252 (RHEL 9) src/shared/udev-util.c udev_rule_parse_value(), and v257 (where it moved to
#   src/udev/udev-rules.c and gained the "i" prefix): only '\"' is unescaped, every other
#   backslash stays; '|' still separates alternatives (there is no escape for it), and
#   token_match_attr() strscpy()s the attribute into vbuf[UDEV_NAME_SIZE] (512) before it
#   compares.
# So a value is written only when udev compares it literally on every release: no glob or
# alternative character, no quote or backslash, no control character, at most 511 bytes
# (longer sysfs values are cut to 511 before the comparison and never match), and no
# leading or trailing whitespace (udev strips it from the sysfs value, so "a.img " and
# "a.img" would be one identity).
UDEV_VALUE_MAX_BYTES = 511
# lvchange --readahead takes 512-byte sectors: the largest read-ahead (compliance.MAX_READ_AHEAD_KB) in sectors.
MAX_LVM_READ_AHEAD_SECTORS = 2 * compliance.MAX_READ_AHEAD_KB
_CONTROL = re.compile(u'[\x00-\x1f\x7f]')


def value_problem(value):
    """Why udev cannot match ``value`` literally on every release, or None when it can."""
    if value is None or value == '':
        return 'it is empty'
    if not isinstance(value, str):
        try:
            value = value.decode('utf-8') if isinstance(value, bytes) else value
        except UnicodeDecodeError:
            return 'it is not valid UTF-8'
    text = value if not isinstance(value, bytes) else value.decode('utf-8', 'replace')
    if u'\ufffd' in text:
        return 'it is not valid UTF-8'
    if _CONTROL.search(text):
        return 'it contains a control character (newline, tab, ...)'
    if '"' in text or '\\' in text:
        return 'it contains a double quote or a backslash, which a udev rule cannot quote'
    for char, what in (('*', 'a glob'), ('?', 'a glob'), ('[', 'a glob'), ('|', 'the alternative separator')):
        if char in text:
            return 'it contains %r, which udev reads as %s in a match, so the rule could hit other devices' % (char, what)
    if text.endswith(' (deleted)'):
        return 'it ends in " (deleted)": the file behind it was deleted'
    if text != text.strip():
        return 'it has leading or trailing whitespace, which udev strips, so it could name another device too'
    if len(text.encode('utf-8')) > UDEV_VALUE_MAX_BYTES:
        return 'it is %d bytes long, and udev compares at most %d' % (len(text.encode('utf-8')), UDEV_VALUE_MAX_BYTES)
    return None


class RulesFileError(Exception):
    """The owned rules file cannot be parsed; the message names the line and the fix."""


def match_clause(stable_id):
    """``KEY=="value"`` for a stable id dict from blockdev.stable_id, or None if it cannot be quoted."""
    if not stable_id or value_problem(stable_id['value']) is not None:
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
            problem = baseline_problem(record)
            if problem:
                raise RulesFileError('%s has a baseline record that cannot be restored: %s (%s). Fix the record or '
                                     'remove it (its device then keeps its running value at state=absent).'
                                     % (path, problem, baseline_line(record)))
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
        kb = int(m.group('kb'))
        if compliance.read_ahead_fault(kb):
            raise RulesFileError('%s line %d sets read_ahead_kb=%d, above %d: not written by aemops.os_tuning. '
                                 'Remove the line.' % (path, number, kb, compliance.MAX_READ_AHEAD_KB))
        rules[m.group('match')] = kb
    return rules, baselines


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def baseline_problem(record):
    """Why a read-ahead baseline record cannot be restored (type, range), or None."""
    if not isinstance(record.get('match'), str) and not _is_text(record.get('match')):
        return 'match is not a string'
    if record.get('device') is not None and not (isinstance(record['device'], str) or _is_text(record['device'])):
        return 'device is not a string'
    kb = record.get('read_ahead_kb')
    if compliance.read_ahead_fault(kb):
        return 'read_ahead_kb is %s, not an integer from 0 to %d' % (_show(kb), compliance.MAX_READ_AHEAD_KB)
    lvm = record.get('lvm_read_ahead')
    if lvm is not None and lvm != 'auto' and (not _is_int(lvm) or lvm < 0 or lvm > MAX_LVM_READ_AHEAD_SECTORS):
        return 'lvm_read_ahead is %s, not auto or sectors from 0 to %d' % (_show(lvm), MAX_LVM_READ_AHEAD_SECTORS)
    return None


def _show(value):
    """A value as JSON (the way it is written in the file), the same on Python 2 and 3."""
    return json.dumps(value)


def _is_text(value):
    """str on Python 3; str or unicode on Python 2."""
    return isinstance(value, (str, type(u'')))


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


def file_conflicts(root, own_path=RULES_FILE, errors=None):
    """Other udev rules and rc.local lines that set read-ahead: competing_rules and rc_local_setra, each entry with
    its ``source`` (``udev rule`` or ``rc.local``). With ``errors`` (a list), a source that cannot be read is named
    there and the other is still read; without, the error is raised. read_ahead and tuning_facts both call it."""
    found = []
    for source, label, read in (('udev rule', 'udev rules', lambda: competing_rules(root, own_path)),
                                ('rc.local', 'rc.local', lambda: rc_local_setra(root))):
        try:
            found.extend(dict(c, source=source) for c in read())
        except (IOError, OSError) as e:
            if errors is None:
                raise
            errors.append('%s: %s' % (label, e))
    return found
