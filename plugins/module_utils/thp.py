# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Transparent Huge Pages in sysfs: read the offered and active values, write and read back.

``enabled`` and ``defrag`` list what the running kernel offers with the active value in
brackets (``always madvise [never]``); RHEL 7's 3.10 kernel has no ``defer`` values for
defrag. ``khugepaged/defrag`` is ``0``/``1`` (``yes``/``no`` on kernels before 2011).
RHEL 6 era kernels use ``/sys/kernel/mm/redhat_transparent_hugepage``. Every function takes
``root`` so that tests can run on a fake tree.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils.files import host_text, read_text, root_path

THP_DIRS = ('/sys/kernel/mm/transparent_hugepage', '/sys/kernel/mm/redhat_transparent_hugepage')
ATTRS = ('enabled', 'defrag', 'khugepaged/defrag')
BASELINE_FILE = '/etc/aemops-os-tuning/thp-baseline.conf'
CMDLINE_VALUES = ('always', 'madvise', 'never')


class ThpError(Exception):
    """THP cannot be read or set; the message names the file and the fix."""


def thp_dir(root):
    """The THP sysfs directory of the running kernel (target path), or None without THP."""
    for directory in THP_DIRS:
        if os.path.isdir(root_path(root, directory)):
            return directory
    return None


def parse_choice(text):
    """(active value, offered values) from ``always madvise [never]``; plain ``0`` gives ('0', [])."""
    text = (text or '').strip()
    m = re.search(r'\[([^\]]+)\]', text)
    if not m:
        return text, []
    return m.group(1), [w.strip('[]') for w in text.split()]


def read_state(root):
    """{'dir': ..., attr: {'value', 'offered', 'path'}} for each attribute that exists."""
    directory = thp_dir(root)
    if directory is None:
        raise ThpError('this kernel has no Transparent Huge Pages in sysfs (%s): nothing to set.'
                       % ' or '.join(THP_DIRS))
    state = {'dir': directory}
    for attr in ATTRS:
        path = os.path.join(directory, attr)
        text = host_text(root, path)
        if text is None:
            continue
        value, offered = parse_choice(text)
        state[attr] = {'value': value, 'offered': offered, 'path': path}
    return state


def khugepaged_value(state, enabled):
    """The string to write to khugepaged/defrag for a boolean, in the kernel's own style."""
    current = state['khugepaged/defrag']
    if current['offered'] or current['value'] in ('yes', 'no'):
        return 'yes' if enabled else 'no'
    return '1' if enabled else '0'


def check_offered(state, attr, value):
    entry = state.get(attr)
    if entry is None:
        raise ThpError('%s does not exist on this kernel; it cannot be set.' % os.path.join(state['dir'], attr))
    if entry['offered'] and value not in entry['offered']:
        raise ThpError('%s=%s is not offered by this kernel; %s offers: %s.'
                       % (attr.replace('/', '_'), value, entry['path'], ', '.join(entry['offered'])))


def write(root, state, attr, value):
    """Write ``value`` to a THP attribute and return the value read back."""
    path = root_path(root, state[attr]['path'])
    try:
        with open(path, 'w') as f:
            f.write(value)
    except (IOError, OSError) as e:
        if e.errno == errno.EROFS:
            raise ThpError('cannot set THP inside a container: %s is on a read-only /sys. Run this on the '
                           'host (or a VM).' % state[attr]['path'])
        if e.errno in (errno.EACCES, errno.EPERM):
            raise ThpError('permission denied writing %s: changing THP needs root. Use become: true.'
                           % state[attr]['path'])
        if e.errno == errno.EINVAL:
            raise ThpError('the kernel rejected %s for %s (Invalid argument).' % (value, state[attr]['path']))
        raise ThpError('writing %s to %s failed: %s' % (value, state[attr]['path'], e))
    return parse_choice(read_text(path))[0]


def check_writable(root, state, attr):
    path = root_path(root, state[attr]['path'])
    if os.access(path, os.W_OK):
        return
    if hasattr(os, 'geteuid') and os.geteuid() != 0:
        raise ThpError('permission denied writing %s: changing THP needs root. Use become: true.'
                       % state[attr]['path'])
    raise ThpError('cannot set THP inside a container: %s is not writable (read-only /sys). Run this on the '
                   'host (or a VM).' % state[attr]['path'])


def tuned_sections(enabled, defrag, khugepaged, tuned_version, state):
    """The child-profile sections that make tuned set THP like this (owned by the thp module).

    tuned sets ``transparent_hugepage.defrag`` from 2.11 on; older tuned gets a ``[sysfs]``
    line instead. khugepaged's defrag has no tuned option, so it is a ``[sysfs]`` line too.
    """
    vm = [('transparent_hugepages', enabled)]
    sysfs = []
    if defrag is not None:
        if tuned_version is None or tuple(tuned_version[:2]) >= (2, 11):
            vm.append(('transparent_hugepage.defrag', defrag))
        else:
            sysfs.append((os.path.join(state['dir'], 'defrag'), defrag))
    if khugepaged is not None:
        sysfs.append((os.path.join(state['dir'], 'khugepaged/defrag'), khugepaged))
    sections = [('thp', 'vm', vm)]
    if sysfs:
        sections.append(('thp', 'sysfs', sysfs))
    return sections


def baseline_problems(record, state=None):
    """Why a recorded THP baseline cannot be restored as it is (type and value of each key); [] when it can.

    A hand-edited baseline is checked before anything is restored from it: each runtime value
    is a string the kernel offers (``state`` from read_state, when given), ``cmdline`` is null
    or one of always/madvise/never, ``cmdline_managed`` is a boolean.
    """
    if not isinstance(record, dict):
        return ['the record is not a JSON object']
    problems = []
    for attr in ATTRS:
        if attr not in record or record[attr] is None:
            continue
        value = record[attr]
        if not _is_text(value) or not re.match(r'^[a-z0-9+]{1,32}$', value):
            problems.append('%s is %s, not a THP value' % (attr, json.dumps(value)))
            continue
        entry = (state or {}).get(attr)
        if entry is not None:
            offered = entry['offered'] or (['yes', 'no'] if entry['value'] in ('yes', 'no') else ['0', '1'])
            if value not in offered:
                problems.append('%s is %s, which this kernel does not offer (%s)' % (attr, json.dumps(value), ', '.join(offered)))
    if record.get('cmdline') is not None and record['cmdline'] not in CMDLINE_VALUES:
        problems.append('cmdline is %s, not null or one of %s' % (json.dumps(record['cmdline']), ', '.join(CMDLINE_VALUES)))
    if 'cmdline_managed' in record and not isinstance(record['cmdline_managed'], bool):
        problems.append('cmdline_managed is %s, not true or false' % json.dumps(record['cmdline_managed']))
    return problems


def _is_text(value):
    """str on Python 3; str or unicode on Python 2."""
    return isinstance(value, (str, type(u'')))
