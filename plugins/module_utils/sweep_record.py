# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The sweep record: what a read-ahead sweep measured and chose, kept on the host for later runs.

``read_ahead_sweep`` (option ``record``) writes it, the ``aem_tuning`` role passes
``/etc/ansible/facts.d/aem_tuning_sweep.fact`` (a local fact), and a later run's ``tuning_facts``
reads it back (``compliance.recorded_sweep``): it holds when its ``knobs`` are this run's sweep
settings, its ``path`` this run's first repository path and its ``stable_id`` (or ``device``) that
of the device governing that path now.

- :func:`evidence`: the record, a dict (:data:`KEYS`), from the sweep's result and the module's options;
- :func:`check_target`: before anything is measured, whether the record can be written safely: a
  message naming the path, the problem and the fix, or None;
- :func:`write`: the record as JSON (indent 2, sorted keys, a newline), written atomically, 0644 root.

Plain functions over a ``root`` path. It does not import ``compliance`` or ``sweep`` (``compliance``
imports it). Python 2.7, 3.6 and newer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat
import time

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, files, runstate

SOURCE = 'sweep'
FILE_MODE = 0o644
TIME_FORMAT = '%Y-%m-%dT%H:%M:%SZ'  # tuning_facts' clock.iso

# The sweep settings recorded (the role's aem_tuning_sweep_* and aem_tuning_volume_* without the prefix), which a
# later run compares with its own (compliance._resolved_knobs).
KNOB_KEYS = ('values', 'readers', 'duration', 'size_mb', 'tolerance_pct', 'volume_type', 'volume_size_gb', 'iops',
             'throughput_mibps')
# Knobs where 0 (or nothing) stands for the volume type's default: recorded as null.
_DEFAULTED_KNOBS = ('volume_size_gb', 'iops', 'throughput_mibps')
# Every key of the record.
KEYS = ('source', 'taken', 'path', 'device', 'stable_id', 'original_kb', 'restored_kb', 'recommended_kb', 'why',
        'caps', 'table', 'sweep', 'readers', 'duration', 'tolerance_pct', 'best_kb', 'within_kb',
        'excluded_noisy_kb', 'knobs', 'results')


class RecordError(files.FileError):
    """The record cannot be written safely; the message names the path, the problem and the fix."""


def now_iso(now=None):
    """The time (``now``, seconds since the epoch; the current time when None) as the record's ``taken``."""
    return time.strftime(TIME_FORMAT, time.gmtime(now))


def stable_id(root, device):
    """The device's stable identity, the value tuning_facts reports as ``block_devices[device].stable_id``
    (blockdev.describe), or None when it has none or cannot be read (tuning_facts then lists no such device)."""
    try:
        return blockdev.stable_id(root, device)
    except (IOError, OSError, ValueError, blockdev.BlockDeviceError):
        return None


def knobs(values, params):
    """The sweep settings of a run: ``values`` (the values measured) and the module's options ``params``."""
    result = {'values': list(values)}
    for key in KNOB_KEYS[1:]:
        result[key] = params.get(key)
    for key in _DEFAULTED_KNOBS:
        if not result[key] or isinstance(result[key], bool):
            result[key] = None
    return result


def evidence(result, params, stable_id, taken):
    """The record of a sweep that recommended a value.

    ``result``: the sweep's result (read_ahead_sweep's, whose ``directory`` is the path measured, or
    ``sweep.run``'s, whose ``path`` is); ``params``: the module's options (``readers``, ``duration``,
    ``size_mb``, ``tolerance_pct``, ``volume_type``, ``volume_size_gb``, ``iops``, ``throughput_mibps``);
    ``stable_id``: :func:`stable_id` of ``result['device']``; ``taken``: when (:func:`now_iso`).
    """
    path = result.get('directory') if result.get('directory') is not None else result.get('path')
    return {
        'source': SOURCE,
        'taken': taken,
        'path': path,
        'device': result.get('device'),
        'stable_id': stable_id,
        'original_kb': result.get('original_kb'),
        'restored_kb': result.get('restored_kb'),
        'recommended_kb': result.get('recommended_kb'),
        'why': result.get('why'),
        'caps': result.get('caps'),
        'table': result.get('table'),
        'sweep': result.get('sweep'),
        'readers': params.get('readers'),
        'duration': params.get('duration'),
        'tolerance_pct': params.get('tolerance_pct'),
        'best_kb': result.get('best_kb'),
        'within_kb': result.get('within_kb'),
        'excluded_noisy_kb': result.get('excluded_noisy_kb'),
        'knobs': knobs(result.get('sweep') or [], params),
        'results': result.get('results'),
    }


text = runstate.json_text  # the record as the file holds it


def _not_written(path):
    return 'the sweep record %s cannot be written' % path


def _dir_fix(directory):
    return ('Make it a real directory owned by root and not writable by others (install -d -o root -g root -m 0755 '
            '%s), or give record another path.' % directory)


def _unsafe_dir(head, directory, found):
    """The refusal for ``found`` (runstate.UnsafeDirError): the record's directory, or one above it."""
    where = ('its directory %s' % directory if found.display == directory
             else '%s, above its directory %s,' % (found.display, directory))
    if found.kind == 'link':
        why, fix = ', which is never followed: another user could point it elsewhere.', _dir_fix(found.display)
    elif found.kind == 'type':
        why, fix = '.', _dir_fix(found.display)
    elif found.kind == 'shared':
        why, fix = ': another user could replace the record.', ('Give record a path outside it: a directory all '
                                                                'users share is never made private.')
    elif found.kind == 'owner':
        why, fix = ': that user could replace the record.', 'chown root:root %s, or give record another path.' % found.display
    else:
        why, fix = ': another user could replace the record.', 'chmod go-w %s, or give record another path.' % found.display
    return '%s: %s %s%s %s' % (head, where, found.problem, why, fix)


def check_target(root, path, check_only=False):
    """Why the record cannot be written at ``path`` (a target path under ``root``), or None.

    Checked before the sweep touches anything. The directory must exist, and it and every directory above it
    must be a real directory (not a symbolic link), owned by root (or this run's user when it is not root) and
    not writable by group or others (runstate.check_above); whatever is at ``path`` must be absent or a regular
    file with one link, owned by root (or this run's user), not immutable or append-only, and a file must be
    creatable in the directory (tried for real unless ``check_only``: check mode). Nothing is opened that could
    block, and nothing is changed.
    """
    try:
        files.check_path_form(path, 'the sweep record\'s')
    except files.FileError as e:
        return '%s. Give record an absolute path, for example /etc/ansible/facts.d/aem_tuning_sweep.fact.' % e
    directory = os.path.dirname(path)
    head = _not_written(path)
    try:
        missing = runstate.check_above(root, path)
    except runstate.UnsafeDirError as e:
        return _unsafe_dir(head, directory, e)
    except OSError as e:
        return '%s: a directory above it cannot be checked: %s.' % (head, files.describe_os_error(e))
    if missing:
        return '%s: its directory %s does not exist. %s' % (head, directory, _dir_fix(directory))
    full = files.root_path(root, path)
    try:
        files.check_owned_target(full, path, check_only=check_only)  # a link, not a regular file, immutable, ...
    except files.FileError as e:
        return '%s: %s' % (head, e.args[0] if e.args else e)
    try:
        st = os.lstat(full)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        return '%s: %s cannot be checked: %s.' % (head, path, files.describe_os_error(e))
    left = 'It is left as it is: remove it (after checking who wrote it), or give record another path.'
    if st.st_uid not in runstate.owners():
        return '%s: %s is owned by %s, not root: another user\'s file is not replaced. %s' % (
            head, path, runstate.owner_text(st.st_uid), left)
    if st.st_nlink != 1:
        return ('%s: %s has %d hard links (another name of the same file elsewhere): it is not replaced. %s'
                % (head, path, st.st_nlink, left))
    return None


def _differs(full, content):
    """Whether the file at ``full`` does not hold ``content`` (bytes) with the record's mode and owner."""
    data, damage = runstate.read_checked(full, full, max_bytes=max(len(content), 1) + 1)
    if damage or data != content:
        return True
    st = os.lstat(full)
    return stat.S_IMODE(st.st_mode) != FILE_MODE or (runstate.euid() == 0 and (st.st_uid, st.st_gid) != (0, 0))


def write(root, path, record, check_mode=False, module=None):
    """Write ``record`` to ``path`` (a target path under ``root``) atomically, 0644, owned by root; returns
    whether it changed (False when the file holds the same content with that mode and owner already).

    :func:`check_target` is checked again first: RecordError, nothing written. Check mode writes nothing and
    returns whether it would change. ``module``: an AnsibleModule, whose atomic_move also gives the file its
    SELinux context.
    """
    problem = check_target(root, path, check_only=check_mode)
    if problem:
        raise RecordError(problem)
    full = files.root_path(root, path)
    content = text(record).encode('utf-8')
    if not _differs(full, content):
        return False
    if not check_mode:
        files.atomic_write(full, content, FILE_MODE, module, owner=(0, 0))
    return True
