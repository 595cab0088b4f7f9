# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The readers' record: what the last real run of read_ahead left stale, per device, on this boot
(``/run/aemops-os-tuning/readers.json``), which makes a second run change nothing. Read and written only here
(:func:`read_record`, :func:`update_record` under the record's lock, :func:`new_record`, :func:`mark_changed`), through
module_utils/runstate.py, the one reader and writer of the collection's runtime state. /run is a tmpfs: a reboot
(which reopens every file) forgets it. ``root`` is the host's root path.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import re
import time

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, readers_scan, runstate

RECORD_NAME = 'readers.json'
RECORD_PATH = runstate.RUN_DIR + '/' + RECORD_NAME
RECORD_FORMAT = 1
RECORD_MAX_BYTES = 4 * 1024 * 1024
BOOT_ID = '/proc/sys/kernel/random/boot_id'
# In the record's stale lists: fd -1 is a mapping without a descriptor, -2 a process whose /proc could not be read.
MAPPING_ONLY = -1
UNSCANNED = -2
# In the record's stale lists: a start time of -1 matches any start (a process the scan did not reach).
ANY_START = -1
# A record's ``kb`` for a device whose value changed outside a refresh (read_ahead_sweep): never valid.
CHANGED_KB = -1


def record_path(root):
    return files.root_path(root, RECORD_PATH)


def read_boot_id(root):
    try:
        return (readers_scan.proc_text(files.root_path(root, BOOT_ID)) or '').strip()
    except (IOError, OSError):
        return ''


def _valid_record(data):
    """The record if it has the expected shape, else None. Never trusts what it does not check."""
    int_types = (int, type(2 ** 64))
    str_types = (str, type(u''))
    if not isinstance(data, dict) or data.get('format') != RECORD_FORMAT:
        return None
    if not isinstance(data.get('boot_id'), str_types) or not isinstance(data.get('devices'), dict):
        return None
    devices = {}
    for number, rec in data['devices'].items():
        if not isinstance(number, str_types) or not re.match(r'^[0-9]+:[0-9]+\Z', number):
            return None
        if not isinstance(rec, dict) or not isinstance(rec.get('name'), str_types):
            return None
        if not isinstance(rec.get('kb'), int_types) or isinstance(rec.get('kb'), bool):
            return None
        if not isinstance(rec.get('since'), (float,) + int_types) or not isinstance(rec.get('stale'), list):
            return None
        stale = []
        for item in rec['stale']:
            if (not isinstance(item, list) or len(item) != 4
                    or not all(isinstance(v, int_types) and not isinstance(v, bool) for v in item)):
                return None
            stale.append(item)
        seq = rec.get('seq')
        if seq is not None and (not isinstance(seq, int_types) or isinstance(seq, bool)):
            return None
        devices[str(number)] = {'name': str(rec['name']), 'kb': rec['kb'], 'seq': seq, 'since': rec['since'],
                                'stale': stale}
    return {'format': RECORD_FORMAT, 'boot_id': str(data['boot_id']), 'devices': devices}


def read_record(root):
    """(record or None, problem or None). A record that is missing is (None, None); one that is not
    a regular file of this run's user with one link, in a checked directory, too big, or not the
    expected JSON is reported and ignored, never obeyed (every reader is then treated as possibly
    stale). Read through runstate, the one reader of the collection's runtime state."""
    try:
        runstate.run_dir(root, create=False)
    except (IOError, OSError) as e:
        if getattr(e, 'errno', None) == errno.ENOENT:
            return None, None
        return None, '%s cannot be read (%s); ignored' % (RECORD_PATH, files.describe_os_error(e))
    except runstate.FileError as e:
        return None, '%s; ignored' % e
    data, damage = runstate.read_json(record_path(root), RECORD_PATH, dict, max_bytes=RECORD_MAX_BYTES, owned=True)
    if damage:
        return None, '%s; ignored' % damage
    if data is None:
        return None, None
    record = _valid_record(data)
    if record is None:
        return None, '%s does not have the expected content; ignored' % RECORD_PATH
    return record, None


# Every writer of the record holds this lock from its read to its write (:func:`update_record`): read_ahead, the sweep
# and AEM's start guard, so that none loses another's entries. Held only for the read and the write, and never while
# taking another lock of the collection.
RECORD_LOCK = 'readers-record.lock'
RECORD_LOCK_TIMEOUT = 10


def update_record(root, change, write=None):
    """Read the record, ``change(record or None)`` -> the record to keep, written where it differs; under the record's
    lock (:data:`RECORD_LOCK`). Returns what was kept. Raises IOError/OSError, or runstate.FileError (the lock held
    past :data:`RECORD_LOCK_TIMEOUT` seconds, naming its holder; a file there that this collection did not write)."""
    with runstate.locked(root, RECORD_LOCK, RECORD_PATH, timeout=RECORD_LOCK_TIMEOUT):
        record, _problem = read_record(root)
        kept = change(record)
        if kept != record:
            (write or write_record)(root, kept)
        return kept


def this_boot(record, boot_id):
    """A copy of the record to change (its devices a new mapping) if it is of this boot, else an empty one of this
    boot."""
    if record and record.get('boot_id') == boot_id:
        return dict(record, devices=dict(record['devices']))
    return {'format': RECORD_FORMAT, 'boot_id': boot_id, 'devices': {}}


def merged(mine, current, own):
    """``mine`` (a run's record, computed from the record it read first) with the entries that another writer left
    meanwhile (``current``, read again under the lock) for the devices the run did not judge (``own``: its
    'major:minor' numbers)."""
    if not current or current.get('boot_id') != mine.get('boot_id'):
        return mine
    out = dict(mine, devices=dict(mine['devices']))
    out['devices'].update((n, rec) for n, rec in current['devices'].items() if n not in own)
    return out


def write_record(root, record):
    """Replace the record atomically (0600, in the checked 0700 runtime-state directory). IOError/OSError, or
    runstate.FileError (UnsafeStateError) when the file there now is not one this collection wrote: a link, a FIFO,
    another user's file, one writable by group or others; it is then left as it is."""
    runstate.write_state(root, RECORD_NAME, json.dumps(record, sort_keys=True) + '\n')


def new_record(old, devices, valid, boot_id, now, still_stale, unreadable):
    """The record after this run. ``still_stale``: {number: set of (pid, start, fd, ino)}.

    A device keeps its ``since`` while its record stayed valid; otherwise ``since`` is now.
    Processes whose /proc could not be read, or that the scan did not reach (``start_ticks`` unknown:
    any start), are listed as UNSCANNED on every device.
    """
    out = {'format': RECORD_FORMAT, 'boot_id': boot_id or '', 'devices': {}}
    if old and old.get('boot_id') == boot_id:
        for number, rec in old['devices'].items():
            if number not in devices:
                out['devices'][number] = rec  # another run's device: left as it was
    extra = [[u['pid'], ANY_START if u.get('start_ticks') is None else u['start_ticks'], UNSCANNED, 0]
             for u in unreadable]
    for number, dev in sorted(devices.items()):
        since = old['devices'][number]['since'] if number in valid else now
        stale = sorted(list(k) for k in still_stale.get(number, ()))
        out['devices'][number] = {'name': dev['name'], 'kb': dev['kb'], 'seq': dev.get('seq'), 'since': since,
                                  'stale': stale + [e for e in extra if e not in stale]}
    return out


def mark_changed(root, names_by_number, now=None):
    """Note in the record that the read-ahead of these devices ({'major:minor': name}) changed outside a
    refresh (read_ahead_sweep sets candidates on the live device): a file opened meanwhile may hold any
    window, so every open file there counts as stale until a run refreshes it. Raises IOError/OSError
    or runstate.FileError when the record cannot be written."""
    boot_id = read_boot_id(root)

    def change(record):
        record = this_boot(record, boot_id)
        for number, name in sorted(names_by_number.items()):
            record['devices'][number] = {'name': name, 'kb': CHANGED_KB, 'seq': None,
                                         'since': now if now is not None else time.time(), 'stale': []}
        return record
    update_record(root, change)
