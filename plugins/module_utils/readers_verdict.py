# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The reader verdict: which of the readers a scan found may hold an old read-ahead window (:func:`valid_devices`,
:func:`settled_since`, :func:`assess`), and which of them this run refreshes or names as needing a restart
(:func:`in_scope`, :func:`plan_refresh`). Nothing here reads /proc or changes anything; ``root`` is the host's root
path (for the udev database and the rules file's time).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    blockdev, files, readers_measure, readers_record, readers_scan)


# -- which readers are stale ----------------------------------------------------------------------

def _reader_keys(entry):
    """(key, kind) of each possibly-stale thing a reader holds: (pid, start, fd, ino) per descriptor,
    (pid, start, readers_record.MAPPING_ONLY, ino) per file mapped with no descriptor."""
    out = []
    for f in entry['files']:
        if f['fds']:
            out.extend(((entry['pid'], entry['start_ticks'], fd, f['ino']), f) for fd in f['fds'])
        else:
            out.append(((entry['pid'], entry['start_ticks'], readers_record.MAPPING_ONLY, f['ino']), f))
    return out


def valid_devices(record, devices, boot_id, changed):
    """The devices whose recorded state still holds: recorded on this boot at the value sysfs reads now, for
    the same device (its ``diskseq``, Linux 5.15 and later, tells a loop or dm device attached again under the
    same number), and not changed by this run. ``devices``: {'major:minor': {'name', 'kb', 'seq'}};
    ``changed``: names."""
    out = set()
    if not record or record.get('boot_id') != boot_id:
        return out
    for number, dev in devices.items():
        rec = record['devices'].get(number)
        if (rec and rec['kb'] == dev['kb'] and rec['name'] == dev['name'] and rec.get('seq') == dev.get('seq')
                and dev['name'] not in changed):
            out.add(number)
    return out


def settled_since(root, devices, record, boot_id, changed, persisted, config_paths, booted):
    """The boot rule: {'major:minor': seconds after boot} for the devices that have read their current
    value since udev initialised them on this boot, so that every file a process opened after that
    time got it.

    It holds for a device that no record of this boot names (no run of the collection changed it on
    this boot: a run records every device it tunes), that this run does not change, whose value in
    sysfs is the one the collection persists for it (``persisted``: {name: KiB of its udev rule}), and
    whose udev database has an initialisation time. Without any record of this boot, the persisted
    configuration (``config_paths``: the rules file) must also be older than the boot, so that the
    boot applied it: a record lost or deleted after a run changed the value is then never taken for a
    boot. ``booted``: the boot's time (epoch seconds, /proc/stat's btime). Limits: a value changed by
    hand and set back on this boot is not seen; a process that started before the device was
    initialised counts as stale.
    """
    if record is not None and record.get('boot_id') == boot_id:
        named = set(record['devices'])
    else:
        named = set()
        for path in config_paths:
            try:
                mtime = os.lstat(files.root_path(root, path)).st_mtime
            except (IOError, OSError):
                return {}
            if not booted or mtime >= booted:
                return {}
    out = {}
    for number, dev in devices.items():
        if number in named or dev['name'] in changed or (persisted or {}).get(dev['name']) != dev['kb']:
            continue
        since = blockdev.udev_initialized(root, dev.get('kernel') or dev['name'])
        if since is not None:
            out[number] = since
    return out


def assess(found, devices, record, boot_id, changed=(), settled=None):
    """Mark what may hold an old read-ahead window; returns the readers with ``stale`` lists.

    The rule. A device's record (written by the last real run, on this boot) says: at time
    ``since`` its read-ahead was ``kb``, and these (pid, start time, fd, inode) were still
    stale, every other matching file in every process was fresh (refreshed then, or opened at
    ``kb``). When sysfs still reads ``kb`` and this run does not change it, a file is stale only
    when the record lists it: anything opened since, in any process, got ``kb`` at ``open``.
    Without such a record, the boot rule (:func:`settled_since`) makes fresh the files of the
    processes that started after the device was initialised with its persisted value; otherwise
    (first run, a value changed by hand or by this run) every file open on the device may be stale.
    The start time in the key keeps a reused pid from inheriting a record. Limits: a value changed by
    hand and changed back between two runs is not seen; a file both mapped through a closed
    descriptor and open again through a new one looks refreshable (the new descriptor is refreshed,
    the old mapping is not).
    """
    valid = valid_devices(record, devices, boot_id, set(changed))
    settled = settled or {}
    ticks = float(readers_scan.clock_ticks())
    listed = set()
    unscanned = set()
    for number in valid:
        for item in record['devices'][number]['stale']:
            key = tuple(item)
            if key[2] == readers_record.UNSCANNED:
                unscanned.add((number, key[0], key[1]))
            else:
                listed.add((number,) + key)
    out = []
    for entry in found['readers']:
        stale_fds, stale_maps, fresh = [], [], 0
        for key, f in _reader_keys(entry):
            number = f['dev']
            if number not in devices:
                continue
            if number in valid:
                is_stale = ((number,) + key in listed or (number, key[0], key[1]) in unscanned
                            or (number, key[0], readers_record.ANY_START) in unscanned)
            else:
                is_stale = number not in settled or entry['start_ticks'] / ticks <= settled[number]
            if not is_stale:
                fresh += 1
            elif key[2] == readers_record.MAPPING_ONLY:
                stale_maps.append({'dev': number, 'ino': key[3], 'path': f['path']})
            else:
                stale_fds.append(_fd_item(number, key, f))
        out.append(dict(entry, stale_fds=stale_fds, stale_maps=stale_maps, fresh=fresh))
    return out


def _fd_item(number, key, f):
    return {'dev': number, 'ino': key[3], 'fd': key[2], 'path': f['paths'].get(key[2], f['path']), 'mapped': f['mapped']}


def maps_on(entry, devices, scope=None):
    """Whether the reader maps a file on one of ``devices`` (and within ``scope``, :func:`in_scope`, when given):
    only a mapping faults with the whole window around the fault (``do_sync_mmap_readahead``, mm/filemap.c); a
    ``read()`` or ``pread()`` of a small random record is read as it is (``page_cache_sync_ra``, mm/readahead.c:
    "standalone, small random read"), so a reader that only holds descriptors does not suffer an earlier, larger
    window."""
    return bool(_mapped(entry, devices, scope))


def _mapped(entry, devices, scope=None):
    return [f for f in entry['files'] if f['mapped'] and f['dev'] in devices
            and (scope is None or in_scope(entry, f, scope))]


def judge_measured(assessed, devices, outcomes, scope=None):
    """The measurement decides where it is conclusive (readers_measure.judge): each reader that maps a file on the
    devices (within ``scope``, the files this run was asked about, when given) gets ``basis`` ('measured' or
    'inferred') and its ``measured`` figures or ``unmeasured`` reason, from ``outcomes`` ({pid:
    readers_measure.measure's outcome}). A reader the inference calls fresh that measures above
    the window is stale: every file it maps on the devices becomes stale (a mapped descriptor, refreshable; a mapping
    without one, a restart). A reader the inference calls stale stays stale, whatever it measures."""
    out = []
    for entry in assessed:
        mapped = _mapped(entry, devices, scope)
        if not mapped:
            out.append(entry)
            continue
        outcome = outcomes.get(entry['pid'])
        inferred = bool(entry['stale_maps'] or [i for i in entry['stale_fds'] if i['mapped']])
        kb = max(devices[f['dev']]['kb'] for f in mapped)
        stale, basis = readers_measure.judge(outcome, inferred, kb)
        entry = dict(entry, basis=basis, measured=(outcome or {}).get('measured'),
                     unmeasured=(outcome or {}).get('unmeasured', 'off'))
        if stale and not inferred:
            entry.update(_all_mapped_stale(entry, devices))
        out.append(entry)
    return out


def _all_mapped_stale(entry, devices):
    held = set((i['dev'], i['ino'], i.get('fd')) for i in entry['stale_fds'] + entry['stale_maps'])
    fds, maps = list(entry['stale_fds']), list(entry['stale_maps'])
    for key, f in _reader_keys(entry):
        if not f['mapped'] or f['dev'] not in devices or (f['dev'], key[3], key[2]) in held:
            continue
        if key[2] == readers_record.MAPPING_ONLY:
            maps.append({'dev': f['dev'], 'ino': key[3], 'path': f['path']})
        else:
            fds.append(_fd_item(f['dev'], key, f))
    return {'stale_fds': fds, 'stale_maps': maps}


# -- what this run refreshes ----------------------------------------------------------------------

def _under(path, prefixes):
    return any(path == p or path.startswith(p.rstrip('/') + '/') for p in prefixes)


def in_scope(entry, item, scope):
    """Whether a stale file is one this run was asked about. ``scope``: {'major:minor': None (the
    whole device, a device target) or [path prefixes] (path targets, resolved as the kernel reports
    them: :func:`real_scope`)}. Paths are compared as the process sees them; for a process in another
    mount namespace (a container) the device decides."""
    prefixes = scope.get(item['dev'])
    if prefixes is None:
        return True
    if entry.get('other_namespace'):
        return True
    return _under(item['path'], prefixes)


def real_scope(root, scope_by_name):
    """(scope with every path prefix resolved through symbolic links, as the kernel reports an open
    file's path, {given path: resolved path} for those that were links)."""
    out, links = {}, {}
    for name, prefixes in scope_by_name.items():
        if prefixes is None:
            out[name] = None
            continue
        out[name] = []
        for prefix in prefixes:
            try:
                real = blockdev.real_target_path(root, prefix)
            except blockdev.BlockDeviceError:
                real = prefix
            if real != prefix.rstrip('/') and real != prefix:
                links[prefix] = real
            out[name].append(real)
    return out, links


def matches_only(entry, only):
    """Whether refresh_only names the process: its command, its unit, or its unit without ``.service``."""
    if not only:
        return True
    unit = entry.get('unit') or ''
    names = set([entry.get('comm') or '', unit])
    if unit.endswith('.service'):
        names.add(unit[:-len('.service')])
    return any(name in names for name in only)


def plan_refresh(assessed, scope, only=(), enabled=True, cannot=None):
    """{'refresh': [(entry, [stale fd items])], 'restart': [(entry, [items], why)], 'descriptor_only': [(entry,
    [items], why)]}: the stale readers in scope. What cannot be refreshed in place needs a restart, ``why`` says
    why (:data:`WHY`): a mapping without a descriptor; ``cannot`` (the kernel has no pidfd_getfd:
    :func:`refresh_support`); refreshing off; a process that refresh_only does not name. A file only open through
    a descriptor, never mapped, is refreshed where the run can (harmless), and otherwise only reported
    (``descriptor_only``): its reads are not read around (:func:`maps_on`), so it needs no restart."""
    out = {'refresh': [], 'restart': [], 'descriptor_only': []}
    for entry in assessed:
        fds = [i for i in entry['stale_fds'] if in_scope(entry, i, scope)]
        maps = [i for i in entry['stale_maps'] if in_scope(entry, i, scope)]
        if maps:
            out['restart'].append((entry, maps, 'mapping_without_fd'))
        if not fds:
            continue
        why = cannot or ('refresh_off' if not enabled else None) or (None if matches_only(entry, only) else 'not_named')
        if why is None:
            out['refresh'].append((entry, fds))
            continue
        mapped = [i for i in fds if i.get('mapped', True)]
        if mapped:
            out['restart'].append((entry, mapped, why))
        if len(mapped) < len(fds):
            out['descriptor_only'].append((entry, [i for i in fds if not i.get('mapped', True)], why))
    return out
