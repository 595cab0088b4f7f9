# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The processes that read a tuned device, and refreshing the read-ahead of the files they hold open.

Why (kernel source, torvalds/linux):

- ``open(2)`` copies the device's read-ahead into the new ``struct file``:
  ``do_dentry_open`` (fs/open.c) calls ``file_ra_state_init`` (mm/readahead.c), which sets
  ``file->f_ra.ra_pages = inode_to_bdi(mapping->host)->ra_pages``; v3.10 to v6.18 alike.
- A page fault in a mapping reads around the fault with that copy: ``do_sync_mmap_readahead``
  (mm/filemap.c) uses ``vmf->vma->vm_file->f_ra``. A mapping holds its own reference to the
  ``struct file``, so closing the descriptor after ``mmap`` keeps the old copy alive.
- So ``read_ahead_kb`` (and ``blockdev --setra``, tuned, udev) changes only what files opened
  *later* get. ``posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL)`` sets ``file->f_ra.ra_pages``
  back to the device's current value (``generic_fadvise``, mm/fadvise.c, v4.19 to v6.18; the
  same lines sit in ``SYSCALL_DEFINE4(fadvise64_64)`` before v4.19, so RHEL 7's 3.10 and
  RHEL 8's 4.18 behave the same). It also clears ``FMODE_RANDOM`` (a ``POSIX_FADV_RANDOM``
  hint) on that open file: nothing else about the file changes.
- Any descriptor of the same open file will do. ``pidfd_getfd(2)`` (kernel/pid.c, Linux 5.6,
  syscall 438; ``pidfd_open(2)`` is 434, Linux 5.3; one number on every architecture but
  alpha since the 5.1 unified table) gives this process a duplicate of another process's
  descriptor (``fget_task``, the same ``struct file``). It requires
  ``ptrace_may_access(task, PTRACE_MODE_ATTACH_REALCREDS)``: root with CAP_SYS_PTRACE passes,
  Yama ``ptrace_scope=3`` refuses everyone (EPERM), an LSM (SELinux) may refuse (EACCES).
  RHEL 8's 4.18 and RHEL 7's 3.10 have neither call: ENOSYS, probed once a run
  (:func:`refresh_support`), and every stale reader then needs a restart.
- A mapping whose descriptor was closed cannot be reached: opening
  ``/proc/PID/map_files/...`` creates a *new* ``struct file``. Such a process must restart.

The reader code is five modules, one job each, every function over ``root``, the host's root path (``/`` on a
host, a fake tree in the unit tests; a ``host.Host`` is one):

- module_utils/readers_scan.py, the scan: one pass over ``/proc`` with a deadline, in a daemon thread of a child
  process (:func:`readers_scan.scan_apart`: a read that never returns cannot keep the module from exiting), matching
  open descriptors (their device from ``fdinfo``'s ``mnt_id`` and the ``mountinfo``; ``stat`` only on the tuned
  devices) and mappings (the device field of ``/proc/PID/maps``) by device number, never by following a path into
  another filesystem;
- module_utils/readers_verdict.py, the verdict: :func:`readers_verdict.assess` (with
  :func:`readers_verdict.settled_since`, the boot rule), :func:`readers_verdict.plan_refresh`: which readers may
  have an old window and which of them this run refreshes or names as needing a restart;
- module_utils/readers_refresh.py, the refresh: ``pidfd_open`` + ``pidfd_getfd`` + ``posix_fadvise(NORMAL)`` +
  ``close`` through an injectable ``Syscalls``, and the reasons a reader needs a restart
  (:data:`readers_refresh.WHY`);
- module_utils/readers_record.py, the record of what was left stale (``/run/aemops-os-tuning/readers.json``),
  which makes a second run change nothing;
- this module, the run: :func:`survey` composes the others into a :class:`Survey` (nothing changed yet), then
  :func:`reader_report`, :func:`report_and_record` (after a real run), :func:`diff_entry`, :func:`audit_report`
  and :func:`warnings_for` say what the modules report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    aem, files, readers_measure, readers_record, readers_refresh, readers_scan, readers_verdict, runstate)

# How many file names one reader lists in a result (the counts are always whole).
MAX_LISTED_FILES = 5


class Survey(object):
    """What :func:`survey` found and decided, before anything is changed: ``devices`` ({'major:minor': {name,
    kernel, kb, seq}}), ``found`` (the scan: :func:`readers_scan.scan`), ``record`` and ``record_problem`` (the
    record as read, and why it was ignored), ``boot_id``, ``valid`` (the devices whose record holds), ``settled``
    (the boot rule's devices), ``assessed`` (the readers with their stale files), ``links`` and ``notes`` (target
    paths given through links, anonymous devices), ``cannot`` (None, or why this kernel cannot refresh), ``plan``
    ({'refresh': [(entry, items)], 'restart': [(entry, items, why)], 'descriptor_only': [(entry, items, why)]}),
    ``only`` and ``enabled`` (refresh_only, refresh_readers), ``window`` (the seconds each mapping reader was
    measured over: readers_measure; 0: not measured), ``aem_other`` (AEM's processes that map nothing on the
    devices, measured for information: :func:`measure_with_aem`)."""

    __slots__ = ('devices', 'found', 'record', 'record_problem', 'boot_id', 'valid', 'settled', 'assessed', 'links',
                 'notes', 'cannot', 'plan', 'only', 'enabled', 'window', 'aem_other')

    def __init__(self, **fields):
        unknown = sorted(set(fields) - set(self.__slots__))
        missing = sorted(set(self.__slots__) - set(fields))
        if unknown or missing:
            raise TypeError('Survey: unknown %s, missing %s' % (unknown, missing))
        for name in self.__slots__:
            setattr(self, name, fields[name])


def survey(root, kb_by_name, scope_by_name, changed=(), only=(), enabled=True, procfs=None, persisted=None,
           config_paths=(), syscalls=None, deadline=readers_scan.SCAN_DEADLINE, window=0, sleep=None, aem_unit=None):
    """Scan, read the record, assess and plan for the governing devices ``kb_by_name`` ({name: KiB now}): a
    :class:`Survey`.

    ``scope_by_name``: {name: None (whole device) or [path prefixes]}; ``changed``: the names whose
    read-ahead this run changes; ``persisted`` and ``config_paths``: the boot rule's evidence
    (:func:`readers_verdict.settled_since`); ``procfs``: the /proc to read (a ``readers_scan.ProcFs`` of ``root``
    unless given); ``window``: the seconds over which every reader that maps a file on the devices is measured, all
    at once (readers_measure.measure; 0: not measured, the inference alone decides); ``aem_unit``: AEM's unit,
    whose processes that map nothing on the devices are measured in the same window (:func:`measure_with_aem`).
    Nothing is changed here.
    """
    numbers, kernel, notes = readers_scan.device_numbers(root, sorted(kb_by_name))
    devices = dict((n, {'name': name, 'kernel': kernel.get(n), 'kb': kb_by_name[name],
                        'seq': readers_scan.disk_sequence(root, name)}) for n, name in numbers.items())
    scope, links = readers_verdict.real_scope(root, scope_by_name)
    scope = dict((n, scope.get(name)) for n, name in numbers.items())
    window = readers_measure.window_seconds(window)
    found = readers_scan.scan_apart(procfs or readers_scan.ProcFs(root), numbers, deadline,
                                    min(kb_by_name.values() or [0]) * 1024)
    record, problem = readers_record.read_record(root)
    boot_id = readers_record.read_boot_id(root)
    valid = readers_verdict.valid_devices(record, devices, boot_id, set(changed))
    settled = {} if problem else readers_verdict.settled_since(root, devices, record, boot_id, set(changed),
                                                               persisted, config_paths, found['boot'])
    assessed = readers_verdict.assess(found, devices, record, boot_id, changed, settled)
    outcomes, aem_other = measure_with_aem(root, assessed, devices, window, sleep, scope, aem_unit,
                                           [e['pid'] for e in found['readers']])
    assessed = readers_verdict.judge_measured(assessed, devices, outcomes, scope)
    # Probed on every scan (two calls that can only fail), so that kernel_refresh is what this kernel can do, not a
    # guess where nothing needed a refresh.
    cannot = readers_refresh.refresh_support(syscalls)
    return Survey(devices=devices, found=found, record=record, record_problem=problem, boot_id=boot_id, valid=valid,
                  settled=settled, assessed=assessed, links=links, notes=notes, cannot=cannot,
                  plan=readers_verdict.plan_refresh(assessed, scope, only, enabled, cannot), only=list(only),
                  enabled=enabled, window=window, aem_other=aem_other)


def measure(root, assessed, devices, window, sleep=None, scope=None):
    """{pid: readers_measure outcome} of the readers that map a file on ``devices`` (within ``scope``: the files
    this run was asked about), over one window of ``window`` seconds for all of them ({} when off or none maps).
    It reads their /proc/PID/io and stat, which can wait on a process in ``execve`` under a tracer: in a child
    process, bounded as the scan is (readers_scan.apart); a measurement that does not answer leaves every reader
    ``unreadable``, judged by the inference."""
    return measure_with_aem(root, assessed, devices, window, sleep, scope)[0]


def measure_with_aem(root, assessed, devices, window, sleep=None, scope=None, aem_unit=None, skip=()):
    """(:func:`measure`'s outcomes, AEM's other processes): with ``aem_unit``, the processes of AEM's unit that map
    nothing here (not in ``skip``, the pids the scan found) are found (readers_scan.unit_processes) and measured in
    the same window, each a dict with pid, comm, unit, start_ticks and its outcome's ``measured`` or
    ``unmeasured``: for information (a process that maps nothing on the targets cannot be stale on them; a large
    window there says AEM reads elsewhere, where the targets may be wrong)."""
    mapping = [e for e in assessed if readers_verdict.maps_on(e, devices, scope)]
    if not window or not (mapping or aem_unit):
        return {}, []
    starts = dict((e['pid'], e['start_ticks']) for e in mapping)

    def work():
        others = readers_scan.unit_processes(readers_scan.ProcFs(root), aem_unit, set(skip) | set(starts))
        pids = sorted(starts) + [o['pid'] for o in others]
        if not pids:
            return {}, []
        starts.update((o['pid'], o['start_ticks']) for o in others)
        return readers_measure.measure(root, pids, window, starts=starts, sleep=sleep), others
    try:
        outcomes, others = readers_scan.apart(work, 2 * window,
                                              'the measurement of the readers')
    except readers_scan.ReadersError as e:
        return dict((pid, readers_measure.unmeasured('unreadable', str(e))) for pid in starts), []
    for other in others:
        other.update(outcomes.pop(other['pid'], None) or readers_measure.unmeasured('gone'))
    return outcomes, others


def reported_reader(entry, items=None):
    """A reader as the modules report it: pid, comm, unit, start, its counts, and with ``items`` the files (at most
    MAX_LISTED_FILES names), their ``count`` and how many of them it maps (``mapped``); for a reader that maps a
    file, how it was judged (``basis``: 'measured' or 'inferred') and its ``measured`` figures (KiB per major fault
    over the window) or why there are none (``unmeasured``: idle, gone, unreadable, off)."""
    start = entry.get('start')
    out = {'pid': entry['pid'], 'comm': entry['comm'], 'unit': entry.get('unit'),
           'start': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(start)) if start else None,
           'fds': sum(len(f['fds']) for f in entry['files']),
           'mappings': sum(1 for f in entry['files'] if f['mapped']),
           'mapped_without_fd': sum(1 for f in entry['files'] if f['mapped'] and not f['fds'])}
    if items is not None:
        paths = sorted(set(i['path'] for i in items))
        out['files'] = paths[:MAX_LISTED_FILES]
        out['count'] = len(items)
        out['mapped'] = sum(1 for i in items if i.get('mapped', True))
    if 'basis' in entry:
        out['basis'] = entry['basis']
        out['measured'] = entry.get('measured')
        if entry.get('measured') is None:
            out['unmeasured'] = entry.get('unmeasured')
    return out


def _restart_entry(surveyed, entry, items, why, reason=None):
    reason = (reason or readers_refresh.WHY[why]).replace('%(count)d', str(len(items)))
    if why == 'not_named':
        reason = '%s (%s)' % (reason, ', '.join(surveyed.only))
    return dict(reported_reader(entry, items), why=why, reason=reason)


def _merge_restarts(out):
    """One entry per process: its reasons joined, its ``why`` a list."""
    merged = {}
    for r in out:
        key = (r['pid'], r['start'])
        if key not in merged:
            merged[key] = dict(r, why=[r['why']], files=list(r['files']))
            continue
        m = merged[key]
        m['why'].append(r['why'])
        m['reason'] = '%s; %s' % (m['reason'], r['reason'])
        m['count'] += r['count']
        m['files'] = sorted(set(m['files'] + r['files']))[:MAX_LISTED_FILES]
    return [merged[k] for k in sorted(merged)]


def reader_report(surveyed, refreshed=None):
    """What the module reports of the :class:`Survey` ``surveyed``; ``refreshed``: the result of
    :func:`readers_refresh.refresh`, or None in check mode, when ``refreshed`` lists what a real run would refresh.

    Every stale reader is either refreshed or in ``needs_restart`` with its reasons (``why``: codes of
    :data:`readers_refresh.WHY`); the role decides which of them is AEM."""
    found = surveyed.found
    out = {'refreshed': [], 'needs_restart': [], 'unreadable': found['unreadable'], 'unscanned': found['unscanned'],
           'scan': found['cost'], 'record': readers_record.RECORD_PATH, 'record_problem': surveyed.record_problem,
           'refresh': surveyed.enabled, 'kernel_refresh': surveyed.cannot is None,
           'boot_rule': sorted(surveyed.devices[n]['name'] for n in surveyed.settled),
           'links': surveyed.links, 'notes': surveyed.notes}
    restarts = [_restart_entry(surveyed, e, items, why) for e, items, why in surveyed.plan['restart']]
    plain = list(surveyed.plan['descriptor_only'])
    if refreshed is None:
        out['refreshed'] = [reported_reader(e, items) for e, items in surveyed.plan['refresh']]
    else:
        for r in refreshed:
            if r['refreshed']:
                out['refreshed'].append(reported_reader(r['entry'], r['refreshed']))
            mapped = [i for i in r['failed'] if i.get('mapped', True)]
            if mapped:
                restarts.append(_restart_entry(surveyed, r['entry'], mapped, r['why'],
                                               r['reason'] if len(mapped) == len(r['failed']) else None))
            if len(mapped) < len(r['failed']):
                plain.append((r['entry'], [i for i in r['failed'] if not i.get('mapped', True)], r['why']))
    out['needs_restart'] = _merge_restarts(restarts)
    out['descriptor_only'] = [dict(reported_reader(e, items), why=[why], reason=DESCRIPTOR_ONLY % len(items))
                              for e, items, why in plain]
    out['fine'] = fine_readers(surveyed)
    out['window'] = surveyed.window
    if surveyed.aem_other:
        out['aem_other'] = [dict((k, v) for k, v in p.items() if k != 'start_ticks') for p in surveyed.aem_other]
    return out


# A reader whose stale files are only open through descriptors: reported, never a miss or a restart (issue 39).
DESCRIPTOR_ONLY = ('reads its %d file(s) through descriptors only, never mapped: a read() of a small random record '
                   'is read as it is, so the earlier window costs nothing until it restarts')


def fine_readers(surveyed):
    """The readers that map a file on the devices and hold no stale one: how each was judged fine (``basis``) and
    what it measured."""
    out = []
    for entry in surveyed.assessed:
        if 'basis' in entry and not entry['stale_fds'] and not entry['stale_maps']:
            items = [f for f in entry['files'] if f['mapped'] and f['dev'] in surveyed.devices]
            out.append(reported_reader(entry, items))
    return out


def measure_after(root, report, surveyed, sleep=None):
    """After the refresh: each refreshed process that maps a file on the devices, measured again over the same
    window, so that the refresh proves itself in the process (``measured_after``, or ``unmeasured_after``)."""
    mapping = [r for r in report['refreshed'] if r.get('basis')]
    if not mapping or not surveyed.window:
        return
    pids = set(r['pid'] for r in mapping)
    outcomes = measure(root, [e for e in surveyed.assessed if e['pid'] in pids], surveyed.devices, surveyed.window,
                       sleep)
    for r in mapping:
        outcome = outcomes.get(r['pid']) or {}
        if outcome.get('measured'):
            r['measured_after'] = outcome['measured']
        else:
            r['unmeasured_after'] = outcome.get('unmeasured', 'off')


def still_stale(surveyed, refreshed=None):
    """{'major:minor': set of (pid, start, fd, inode)}: what is still stale after ``refreshed`` (the result of
    :func:`readers_refresh.refresh`, None for nothing refreshed); a mapping without a descriptor has fd
    MAPPING_ONLY."""
    gone = set()
    for r in refreshed or ():
        for item in r['refreshed'] + r['vanished']:
            gone.add((r['entry']['pid'], r['entry']['start_ticks'], item['fd'], item['ino']))
    still = {}
    for entry in surveyed.assessed:
        for item in entry['stale_fds']:
            key = (entry['pid'], entry['start_ticks'], item['fd'], item['ino'])
            if key not in gone:
                still.setdefault(item['dev'], set()).add(key)
        for item in entry['stale_maps']:
            still.setdefault(item['dev'], set()).add((entry['pid'], entry['start_ticks'], readers_record.MAPPING_ONLY,
                                                      item['ino']))
    return still


def report_and_record(root, surveyed, refreshed, write=None):
    """After a real run: (the report, [warnings]), with the record rewritten when it differs. A record that cannot
    be written, or whose file is not one this collection wrote (a link, a FIFO, another user's file, one writable by
    group or others: it is left as it is), is a warning that names it (the next run then refreshes again), never a
    failure: the report is never lost."""
    report = reader_report(surveyed, refreshed)
    found = surveyed.found
    record = readers_record.new_record(surveyed.record, surveyed.devices, surveyed.valid, surveyed.boot_id,
                                       found['time'], still_stale(surveyed, refreshed),
                                       found['unreadable'] + found['unscanned'])
    if record == surveyed.record:
        return report, []
    own = set(surveyed.devices)
    try:
        readers_record.update_record(root, lambda current: readers_record.merged(record, current, own), write=write)
    except (IOError, OSError) as e:
        return report, ['cannot write %s (%s): the next run will refresh the same readers again'
                        % (readers_record.RECORD_PATH, files.describe_os_error(e))]
    except runstate.FileError as e:
        return report, ['readers: the record was not written, the next run will refresh the same readers again: %s'
                        % e]
    return report, []


def diff_entry(surveyed, report):
    """The diff-mode entry: each stale reader before, and what the run did (or would do) about it; None for none."""
    before, after = [], []
    for entry, items in surveyed.plan['refresh']:
        for item in items:
            before.append('%s fd %d %s: read-ahead window from an earlier value'
                          % (aem.label(entry), item['fd'], item['path']))
    for entry, items, _why in surveyed.plan['restart']:
        for item in items:
            before.append('%s %s %s: read-ahead window from an earlier value'
                          % (aem.label(entry), 'fd %d' % item['fd'] if 'fd' in item else 'mapping', item['path']))
    for r in report['refreshed']:
        after.append('%s: %d open file(s) refreshed to the device\'s read-ahead' % (aem.label(r), r['count']))
    for r in report['needs_restart']:
        after.append('%s: needs a restart: %s' % (aem.label(r), r['reason']))
    if not before and not after:
        return None
    return files.diff_entry('open files on %s (read-ahead of running readers)'
                            % ', '.join(sorted(set(d['name'] for d in surveyed.devices.values()))),
                            ''.join(x + '\n' for x in before), ''.join(x + '\n' for x in after))


def audit_report(surveyed):
    """For tuning_facts: the readers of the targets that do not read at the device's value. ``stale``: an apply
    run refreshes them in place; ``needs_restart``: only a restart helps, with the reasons; ``descriptor_only``:
    stale files only open through descriptors (reported, never a miss); ``fine``: the mapping readers judged at the
    device's window."""
    report = reader_report(surveyed)
    refreshable = report.pop('refreshed')
    stale = [dict(r, reason=_stale_reason(r)) for r in refreshable if r['mapped']]
    report['descriptor_only'] += [dict(r, why=[], reason=DESCRIPTOR_ONLY % r['count']) for r in refreshable
                                  if not r['mapped']]
    return dict(report, stale=stale)


def _stale_reason(r):
    if r.get('basis') == 'measured':
        return ('maps %d file(s) opened at an earlier read-ahead: measured %s KiB per major fault'
                % (r['mapped'], r['measured']['kib_per_fault']))
    return 'holds %d file(s) opened at an earlier read-ahead' % r['count']


def targets_of(devices, paths, after_kb=None):
    """From the read_ahead plan's devices: ({name: KiB after the run}, {name: scope}, [names this run changes],
    {name: KiB its udev rule persists}).

    A device named by a device target is refreshed whole; one reached only through path targets,
    for the files under those paths.
    """
    kb, scope, changed, persisted = {}, {}, [], {}
    for entry in devices:
        name = entry['name']
        kb[name] = (after_kb or {}).get(name, entry['planned_kb'])
        if entry['planned_kb'] != entry['before_kb']:
            changed.append(name)
        if entry.get('rule'):
            persisted[name] = entry['planned_kb']
        prefixes = [t for t in entry['targets'] if t in paths]
        scope[name] = None if len(prefixes) < len(entry['targets']) else sorted(prefixes)
    return kb, scope, changed, persisted


def warnings_for(report):
    """One line per reader the run could not bring to the device's value, and per thing it did not see."""
    out = []
    for r in report['needs_restart']:
        out.append('%s needs a restart for the new read-ahead to apply: it %s.' % (aem.label(r), r['reason']))
    for u in report['unreadable']:
        out.append('readers: %s; its open files were not checked.' % u['reason'])
    if report['unscanned']:
        out.append('readers: %d process(es) were not scanned (%s): pid %s.'
                   % (len(report['unscanned']), report['unscanned'][0]['reason'],
                      ', '.join(str(u['pid']) for u in report['unscanned'][:MAX_LISTED_FILES])))
    for given, real in sorted(report['links'].items()):
        out.append('readers: %s is a link to %s; open files are matched under %s, as the kernel reports them.'
                   % (given, real, real))
    for note in report['notes']:
        out.append('readers: %s.' % note)
    if report['record_problem']:
        out.append('readers: %s' % report['record_problem'])
    return out
