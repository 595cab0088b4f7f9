# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The read-ahead sweep: measure each candidate ``read_ahead_kb`` on the host and recommend one.

For each candidate value the sweep sets the governing device's ``read_ahead_kb`` (the device
:mod:`probe` finds: ``dm-N`` for an LV, the whole disk for a partition), then measures on a
scratch file of the host's own filesystem:

* random reads like Oak TarMK's: ``readers`` threads reading random 8-16 KiB records through
  one shared ``mmap`` of the file for ``duration`` seconds (reads/s, latency p50/p99, the
  device's bytes, I/Os and MiB/s, the read amplification);
* sequential reads of the cold file with small ``read(2)`` calls for at most ``duration``
  seconds (MiB/s), as a backup, a tar compaction or an index rebuild read.

The file's pages are evicted with ``posix_fadvise(POSIX_FADV_DONTNEED)`` before each phase;
the global page cache is never dropped.

The device's original value is recorded first, in a state file written atomically in the
runtime-state home (:mod:`runstate`, ``/run/aemops-os-tuning``: a tmpfs, so a reboot, which resets
read-ahead anyway, also clears it) and named by the device's stable identity, before the first
change, under the device's read-ahead lock (the read_ahead module's too). It is restored in a ``finally``
on success, on failure, on timeout and on SIGTERM/SIGINT (see :func:`terminate_as_exception`),
and the state file is removed only once the restore is read back. A run killed with SIGKILL
leaves the state file and releases the lock (the kernel drops a dead process's locks): the
next sweep, or a ``recover`` call, finds the file with the lock free and writes the original
back first (:func:`recover`).

:func:`recommend` is a pure function over the results and the volume's caps
(:func:`volume_caps`): the largest read-ahead whose random reads/s stay within
``tolerance`` (5%) of the best.

Plain functions over a ``root`` path, with the clock, the sleep, the random-read runner,
the stat reader and the page-cache residency injectable for tests. Python 2.7, 3.6 and
newer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import ctypes
import hashlib
import json
import mmap
import os
import random
import signal
import socket
import threading
import time

from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    blockdev, compliance, ebs, ebs_stats, probe, readers_record, readers_scan, runstate)
from ansible_collections.aemops.os_tuning.plugins.module_utils.files import read_text, remove_file, root_path

KIB = 1024
MIB = 1024 * 1024

DEFAULT_SWEEP = (4096, 1024, 256, 128, 64, 32, 16, 8)
DEFAULT_READERS = 4
DEFAULT_DURATION = 5
DEFAULT_SIZE_MB = 1024
DEFAULT_SEQUENTIAL_BLOCK_KB = 8
DEFAULT_TOLERANCE_PCT = 5.0
# Off by default; when on, the random phase samples the device's MiB/s every this many seconds.
DEFAULT_TIMELINE_INTERVAL = 0.0
MIN_TIMELINE_INTERVAL = 0.1
RECORD_MIN_KB = 8
RECORD_MAX_KB = 16
# The limits of the values, the readers and the timeout are the rulebook's (module_utils/compliance.py: SWEEP_*,
# MAX_READ_AHEAD_KB, read_ahead_fault, sweep_timeout_error), which the role checks its knobs against too.

STATE_DIR = runstate.RUN_DIR
STATE_PREFIX = 'read-ahead-sweep-'
BOOT_ID = '/proc/sys/kernel/random/boot_id'

# A random phase is throughput- or IOPS-bound when the device ran at this share of the cap.
BOUND_SHARE = 0.9


class SweepError(probe.ProbeError):
    """The sweep cannot run or failed. ``results`` holds what was measured, ``restored`` whether
    the original read-ahead is back."""

    def __init__(self, msg, results=None, restored=None, timed_out=False):
        super(SweepError, self).__init__(msg)
        self.results = results or []
        self.restored = restored
        self.timed_out = timed_out


class SweepBusy(SweepError):
    """Another sweep holds the device's lock."""


class SweepInterrupted(Exception):
    """Raised by the SIGTERM/SIGHUP handler so that ``finally`` restores the device."""


# ---------------------------------------------------------------------------------------------
# Volume caps and the recommendation (pure)

def volume_caps(volume_type=ebs.DEFAULT_TYPE, size_gib=None, iops=None, mib_s=None):
    """The IOPS and MiB/s caps of an EBS volume; a dict ``type``, ``iops``, ``mib_s``, ``basis``.

    The limits are ``ebs.VOLUME_TYPES``'s; a given ``iops``/``mib_s`` outside the type's range is refused.
    gp3: 3,000 IOPS and 125 MiB/s unless provisioned higher (up to 80,000 and 2,000).
    gp2: 3 IOPS per GiB (at least 100, at most 16,000), bursting to 3,000 below 1,000 GiB
    while credits last; 128 MiB/s up to 170 GiB, 250 MiB/s above. io1 and io2: the provisioned
    IOPS (required), and the given MiB/s or the type's maximum (1,000 for io1, 4,000 for io2
    Block Express). st1 and sc1: the type's maximum IOPS (500, 250 at up to 1 MiB per I/O), and the
    burst MiB/s of the size (250 or 80 per TiB) up to the type's maximum (500, 250). ``iops``/``mib_s``
    given explicitly override any type. ``custom`` needs both.
    """
    _check_volume(volume_type, size_gib, iops, mib_s)
    if volume_type == ebs.CUSTOM:
        return {'type': 'custom', 'iops': int(iops), 'mib_s': float(mib_s), 'basis': 'given'}
    cap_iops, cap_mib, basis = _type_caps(volume_type, ebs.VOLUME_TYPES.get(volume_type, {}), size_gib, iops, mib_s)
    return {'type': volume_type, 'iops': int(cap_iops), 'mib_s': float(cap_mib), 'basis': '; '.join(basis)}


def _check_volume(volume_type, size_gib, iops, mib_s):
    """Raise SweepError for a type, a value or a missing value that volume_caps cannot derive caps from."""
    if volume_type not in ebs.CHOICES:
        raise SweepError('volume_type=%s: use one of %s or %s (with iops and throughput_mibps).'
                         % (volume_type, ', '.join(ebs.TYPE_NAMES), ebs.CUSTOM))
    for name, value in (('iops', iops), ('throughput_mibps', mib_s), ('volume_size_gb', size_gib)):
        if value is not None and value <= 0:
            raise SweepError('%s=%s: give a positive number, or leave it out.' % (name, value))
    errors = ebs.range_errors(volume_type, iops, mib_s)
    if errors:
        raise SweepError(' '.join(errors))
    lacking = ebs.missing(volume_type, size_gib, iops, mib_s)
    if lacking == 'caps':
        raise SweepError('volume_type=custom needs both iops and throughput_mibps (the caps of the volume).')
    if lacking == 'size':
        raise SweepError('volume_type=gp2 derives its caps from the size: give volume_size_gb (or both iops '
                         'and throughput_mibps).')
    if lacking == 'iops':
        raise SweepError('volume_type=%s is provisioned: give its iops (and throughput_mibps).' % volume_type)


def _type_caps(volume_type, spec, size_gib, iops, mib_s):
    """(IOPS, MiB/s, [basis]) of a checked EBS type (not custom) from its ``spec``; a given value wins."""
    basis = []
    if volume_type == 'gp3':
        cap_iops = iops if iops is not None else spec['default_iops']
        cap_mib = mib_s if mib_s is not None else spec['default_mib_s']
        basis.append('gp3 %s' % ('provisioned' if (iops or mib_s) else 'baseline'))
    elif volume_type == 'gp2':
        if size_gib is not None:
            baseline = min(max(spec['iops'][0], spec['iops_per_gib'] * size_gib), spec['iops'][1])
            burst = spec['burst_iops'] if size_gib < spec['burst_below_gib'] else baseline
            derived_iops = max(baseline, burst)
            derived_mib = spec['small_mib_s'] if size_gib <= spec['small_max_gib'] else spec['large_mib_s']
            basis.append('gp2 %d GiB: baseline %d IOPS, burst %d' % (size_gib, baseline, derived_iops))
        cap_iops = iops if iops is not None else derived_iops
        cap_mib = mib_s if mib_s is not None else derived_mib
    elif volume_type in ('st1', 'sc1'):
        cap_iops = iops if iops is not None else spec['iops'][1]
        if mib_s is not None:
            cap_mib = mib_s
        elif size_gib is not None:
            cap_mib = min(spec['mib_s'][1], spec['burst_mib_s_per_tib'] * size_gib / 1024.0)
            basis.append('%s %d GiB: burst %g MiB/s' % (volume_type, size_gib, cap_mib))
        else:
            cap_mib = spec['mib_s'][1]
            basis.append('%s: the type\'s maximum' % volume_type)
    else:
        cap_iops = iops
        cap_mib = mib_s if mib_s is not None else spec['mib_s'][1]
        basis.append('%s provisioned%s' % (volume_type, '' if mib_s is not None else ', the type\'s maximum MiB/s'))
    return cap_iops, cap_mib, basis


def bound(result, caps, share=BOUND_SHARE):
    """What limited a random phase: ``iops``, ``throughput`` (at ``share`` of a cap) or ``none``."""
    if caps and result.get('device_mib_s') is not None and result['device_mib_s'] >= share * caps['mib_s']:
        return 'throughput'
    if caps and result.get('device_iops') is not None and result['device_iops'] >= share * caps['iops']:
        return 'iops'
    return 'none'


def recommend(results, caps=None, tolerance_pct=DEFAULT_TOLERANCE_PCT):
    """The largest read-ahead whose random reads/s stay within ``tolerance_pct`` of the best.

    ``results``: dicts with ``read_ahead_kb``, ``reads_per_s`` and optionally ``noisy``,
    ``seq_mib_s``, ``device_iops``, ``device_mib_s``, ``read_amplification``, ``latency``.
    Results without reads are ignored; noisy ones (other I/O on the device) are left out as
    long as one clean result remains. Ties go to the larger value: that is the rule. Returns a
    dict ``recommended_kb``, ``why`` (one line naming the numbers), ``best_kb``,
    ``best_reads_per_s``, ``threshold_reads_per_s``, ``within_kb`` and ``excluded_noisy_kb``.
    """
    if tolerance_pct < 0 or tolerance_pct >= 100:
        raise SweepError('tolerance_pct=%s: give a percentage from 0 to below 100 (default %s).'
                         % (tolerance_pct, DEFAULT_TOLERANCE_PCT))
    usable = [r for r in results if r.get('reads') and r.get('reads_per_s')]
    if not usable:
        raise SweepError('no read-ahead value completed any random read, so there is nothing to recommend from.')
    clean = [r for r in usable if not r.get('noisy')]
    pool = clean or usable
    excluded = sorted((r['read_ahead_kb'] for r in usable if r not in pool), reverse=True)
    best = max(pool, key=lambda r: (r['reads_per_s'], r['read_ahead_kb']))
    threshold = best['reads_per_s'] * (1 - tolerance_pct / 100.0)
    within = [r for r in pool if r['reads_per_s'] >= threshold * (1 - 1e-12)]
    chosen = max(within, key=lambda r: r['read_ahead_kb'])
    return {
        'recommended_kb': chosen['read_ahead_kb'],
        'why': _why(chosen, best, threshold, tolerance_pct, pool, caps, excluded, not clean),
        'best_kb': best['read_ahead_kb'],
        'best_reads_per_s': best['reads_per_s'],
        'threshold_reads_per_s': round(threshold, 1),
        'within_kb': sorted((r['read_ahead_kb'] for r in within), reverse=True),
        'excluded_noisy_kb': excluded,
    }


def _num(value, fmt='%.1f'):
    return 'n/a' if value is None else fmt % value


def _why(chosen, best, threshold, tolerance_pct, pool, caps, excluded, all_noisy):
    if chosen is best:
        text = '%d KiB: the best random reads/s (%s)' % (chosen['read_ahead_kb'], _num(chosen['reads_per_s']))
    else:
        text = ('%d KiB: the largest read-ahead whose random reads/s (%s) stay within %s%% of the best (%s at %d '
                'KiB, threshold %s)' % (chosen['read_ahead_kb'], _num(chosen['reads_per_s']),
                                        ('%g' % tolerance_pct), _num(best['reads_per_s']), best['read_ahead_kb'],
                                        _num(threshold)))
    smallest = min(pool, key=lambda r: r['read_ahead_kb'])
    if chosen.get('seq_mib_s') is not None:
        text += '; sequential %s MiB/s' % _num(chosen['seq_mib_s'])
        if smallest is not chosen and smallest.get('seq_mib_s') is not None:
            text += ' (%s at %d KiB)' % (_num(smallest['seq_mib_s']), smallest['read_ahead_kb'])
    if chosen.get('read_amplification') is not None:
        text += '; amplification %sx' % _num(chosen['read_amplification'])
    if caps:
        text += ('; device %s IOPS, %s MiB/s against the %s caps %d IOPS, %s MiB/s (%s)'
                 % (_num(chosen.get('device_iops'), '%.0f'), _num(chosen.get('device_mib_s')), caps['type'],
                    caps['iops'], _num(caps['mib_s'], '%g'),
                    {'iops': 'IOPS-bound', 'throughput': 'throughput-bound',
                     'none': 'below both caps'}[bound(chosen, caps)]))
    if excluded:
        text += '; left out as noisy: %s KiB' % ', '.join(str(v) for v in excluded)
    if all_noisy:
        text += '; every value was noisy (other I/O on the device), so this is approximate'
    return text + '.'


# ---------------------------------------------------------------------------------------------
# The plan

def default_sweep(page_kb=None):
    """The values measured when none are given: DEFAULT_SWEEP for this kernel's page size (``page_kb``, else
    compliance.page_kb_of()): on a 64 KiB page kernel, 4096, 1024, 256, 128 and 64."""
    return compliance.page_sweep_values(DEFAULT_SWEEP, page_kb or compliance.page_kb_of())


def validate(values, readers, duration, sequential_block_kb, timeout, timeline_interval=DEFAULT_TIMELINE_INTERVAL):
    """Check the sweep's own arguments; raise SweepError naming the option and the fix."""
    if not values:
        raise SweepError('sweep is empty: give the read_ahead_kb values to measure, for example %s.'
                         % default_sweep())
    if len(values) > compliance.SWEEP_MAX_VALUES:
        raise SweepError('sweep has %d values: give at most %d, each one costs 2 x duration seconds.'
                         % (len(values), compliance.SWEEP_MAX_VALUES))
    step = compliance.page_kb_of()
    for value in values:
        if compliance.read_ahead_fault(value, step):
            raise SweepError('sweep value %s: read_ahead_kb values must be multiples of the %d KiB page size from 0 '
                             'to %d (the kernel rounds other values down, so the measurement would not be of the '
                             'value asked for).' % (value, step, compliance.MAX_READ_AHEAD_KB))
    dupes = sorted(set(v for v in values if values.count(v) > 1))
    if dupes:
        raise SweepError('sweep lists %s more than once: give each value once.' % ', '.join(str(v) for v in dupes))
    if readers < 1 or readers > compliance.SWEEP_MAX_READERS:
        raise SweepError('readers=%d: give 1 to %d concurrent readers (default %d).'
                         % (readers, compliance.SWEEP_MAX_READERS, DEFAULT_READERS))
    if duration < 1:
        raise SweepError('duration=%d: give at least 1 second per phase (default %d).' % (duration, DEFAULT_DURATION))
    if sequential_block_kb < 4 or sequential_block_kb % 4:
        raise SweepError('sequential_block_kb=%d: give a positive multiple of 4 (default %d).'
                         % (sequential_block_kb, DEFAULT_SEQUENTIAL_BLOCK_KB))
    error = compliance.sweep_timeout_error(timeout, len(values), duration)
    if error:
        raise SweepError(error)
    if timeline_interval != 0 and not MIN_TIMELINE_INTERVAL <= timeline_interval <= duration:
        raise SweepError('timeline_interval=%s: give 0 (no timeline) or %s to duration=%d seconds.'
                         % (timeline_interval, MIN_TIMELINE_INTERVAL, duration))


def device_identity(root, device):
    """The device's stable identity as one string: the identity its udev rule would match (NVMe serial,
    ``DM_UUID``, a loop device's backing file, ...), or its name and major:minor when it has none."""
    sid = blockdev.stable_id(root, device)
    if sid is not None:
        return '%s=%s' % (sid['key'], sid['value'])
    return 'name=%s majmin=%s' % (device, blockdev.majmin(root, device))


def state_paths(root, device):
    """(lock file, state file) of ``device`` in the runtime-state home (runstate.RUN_DIR).

    The lock is the device's read-ahead lock (runstate.device_lock_name: by major:minor), the one
    the read_ahead module takes too. The state file is named by the device's stable identity
    (:func:`device_identity`), so another device that gets the same name later never finds it.
    """
    ident = device_identity(root, device)
    digest = hashlib.sha1(ident.encode('utf-8')).hexdigest()[:16]
    return (runstate.lock_path(root, runstate.device_lock_name(blockdev.majmin(root, device))),
            runstate.lock_path(root, '%s%s-%s.json' % (STATE_PREFIX, device, digest)))


def boot_id(root):
    text = read_text(root_path(root, BOOT_ID))
    return text.strip() if text else None


def state_problems(state, device, identity, page=None):
    """What is wrong with a parsed state record for ``device`` (``identity``): a list, empty when it can be used.

    ``original_kb`` must be an integer (not a boolean), a multiple of the page size and within
    0..MAX_READ_AHEAD_KB (compliance.read_ahead_fault); ``identity`` must be this device's.
    """
    if not isinstance(state, dict):
        return ['it holds no JSON object']
    problems = []
    page = page or compliance.page_kb_of()
    kb = state.get('original_kb')
    fault = compliance.read_ahead_fault(kb, page)
    if fault == 'type':
        problems.append('original_kb is %s, not a whole number of KiB' % json.dumps(kb))
    elif fault:
        problems.append('original_kb=%d is not a multiple of the %d KiB page size from 0 to %d'
                        % (kb, page, compliance.MAX_READ_AHEAD_KB))
    if state.get('identity') != identity:
        problems.append('it records the device %s, and %s is %s now' % (json.dumps(state.get('identity')), device,
                                                                        identity))
    return problems


def read_state(path):
    """The parsed state file at ``path`` (a dict), or None; SweepError when it is damaged or not a file
    this collection wrote (never applied then)."""
    state, damage = runstate.read_json(path, _display(path), dict, owned=True)
    if damage:
        raise SweepError('the sweep state file %s (%s) was not used and is left alone. Set the device\'s '
                         'read_ahead_kb by hand (the read_ahead module) if needed, then remove the file.'
                         % (_display(path), damage))
    return state


def _display(path):
    return '%s/%s' % (runstate.RUN_DIR, os.path.basename(path))


def write_state(root, path, state):
    """Write ``state`` as JSON to the state file ``path`` atomically (checked directory, temp file, fsync,
    rename); a link or another user's file at that name is refused, never replaced."""
    runstate.write_state(root, os.path.basename(path), json.dumps(state, sort_keys=True) + '\n')


def device_lock(root, device, timeout=0):
    """Hold ``device``'s read-ahead lock (runstate.locked); SweepBusy when another run holds it."""
    def busy(message):
        return SweepBusy('another read-ahead sweep or read_ahead run holds %s: %s A sweep restores the device\'s '
                         'read_ahead_kb when it ends.' % (device, message))
    return runstate.locked(root, runstate.device_lock_name(blockdev.majmin(root, device)),
                           '%s\'s read-ahead' % device, timeout=timeout, busy=busy)


def lock_is_free(lock_path):
    """Whether nobody holds the lock (checked without keeping it; for check mode and plans)."""
    return runstate.lock_is_free(lock_path)


def leftover(root, device, state_path):
    """What a leftover state file asks for: None, or a dict ``state``, ``action`` (restore, discard or
    refuse) and ``reason``. ``refuse``: the file is damaged, not ours, or records another device or a value
    the module would not set; it is reported and left alone, never applied."""
    try:
        state = read_state(state_path)
    except (SweepError, runstate.FileError) as e:
        return {'state': None, 'action': 'refuse', 'reason': str(e)}
    if state is None:
        return None
    current = boot_id(root)
    if state.get('boot_id') and current and state['boot_id'] != current:
        return {'state': state, 'action': 'discard',
                'reason': 'it is from an earlier boot (%s), and a reboot resets read-ahead' % state['boot_id']}
    problems = state_problems(state, device, device_identity(root, device))
    if problems:
        return {'state': state, 'action': 'refuse',
                'reason': 'the sweep state file %s was not used and is left alone: %s. Set %s\'s read_ahead_kb by '
                          'hand (the read_ahead module) if needed, then remove the file.'
                          % (_display(state_path), '; '.join(problems), device)}
    return {'state': state, 'action': 'restore',
            'reason': 'a sweep (pid %s, started %s) ended without restoring %s to %s KiB'
                      % (state.get('pid'), state.get('started'), device, state['original_kb'])}


def recover(root, device, state_path, check_mode=False):
    """Restore ``device`` from a leftover state file (the caller holds the lock); a dict or None.

    The dict has ``device``, ``action`` (``restore``/``discard``/``refuse``), ``reason``,
    ``original_kb``, ``found_kb`` (the value the killed run left) and ``changed``. The state file
    is removed only after the original is read back; a refused one is left alone.
    """
    found = leftover(root, device, state_path)
    if found is None:
        return None
    state = found['state']
    current = blockdev.read_ahead_kb(root, device)
    original = state.get('original_kb') if found['action'] != 'refuse' else None
    result = {'device': device, 'action': found['action'], 'reason': found['reason'],
              'original_kb': original, 'found_kb': current, 'state_file': state_path, 'changed': False}
    if found['action'] == 'refuse':
        return result
    if check_mode:
        result['changed'] = found['action'] == 'restore' and current != original
        return result
    if found['action'] == 'restore':
        if current != original:
            restore(root, device, original)
            result['changed'] = True
    runstate.remove_state(state_path, _display(state_path))
    return result


def restore(root, device, original_kb):
    """Write ``original_kb`` back and read it back; SweepError if it does not stick."""
    try:
        back = blockdev.write_read_ahead_kb(root, device, original_kb)
    except blockdev.BlockDeviceError as e:
        raise SweepError('restoring %s to read_ahead_kb=%d failed: %s' % (device, original_kb, e))
    if back != original_kb:
        raise SweepError('restoring %s to read_ahead_kb=%d read back %s.' % (device, original_kb, back))
    return back


def plan(root, path, values=None, readers=DEFAULT_READERS, duration=DEFAULT_DURATION,
         size_mb=DEFAULT_SIZE_MB, sequential_block_kb=DEFAULT_SEQUENTIAL_BLOCK_KB, timeout=compliance.SWEEP_TIMEOUT,
         seed=probe.DEFAULT_SEED, caps=None, tolerance_pct=DEFAULT_TOLERANCE_PCT, statvfs=None, check_writable=True,
         timeline_interval=DEFAULT_TIMELINE_INTERVAL):
    """Check everything that can be checked before the first write and return the plan (a dict).

    ``values`` None: :func:`default_sweep`."""
    values = [int(v) for v in (default_sweep() if values is None else values)]
    timeline_interval = float(timeline_interval or 0)
    validate(values, readers, duration, sequential_block_kb, timeout, timeline_interval)
    recommend([{'read_ahead_kb': 0, 'reads': 1, 'reads_per_s': 1.0}], None, tolerance_pct)  # checks the tolerance
    largest = max(values)
    base = probe.plan(root, path, size_mb=size_mb, record_kb=RECORD_MAX_KB, reads=1, method='mmap',
                      timeout=max(timeout, 1), seed=seed, statvfs=statvfs, cap_read_ahead_kb=0)
    device = base['device']
    if base['read_ahead_kb'] is None:
        raise SweepError('%s has no readable queue/read_ahead_kb, so there is nothing to sweep.' % device)
    if check_writable:
        try:
            blockdev.check_writable(root, device)
        except blockdev.BlockDeviceError as e:
            raise SweepError(str(e))
    size_bytes = size_mb * MIB
    budgets = []
    for value in values:
        budgets.append(probe.sparse_cap(10 ** 9, size_bytes, RECORD_MAX_KB * KIB, value)['max_reads'])
    lock_path, state_path = state_paths(root, device)
    return {
        'root': root,
        'path': path,
        'directory': base['directory'],
        'device': device,
        'stat_device': base['stat_device'],
        'mount_point': base['mount_point'],
        'fstype': base['fstype'],
        'original_kb': base['read_ahead_kb'],
        'sweep': values,
        'largest_kb': largest,
        'read_budgets': budgets,
        'readers': readers,
        'duration': duration,
        'size_mb': size_mb,
        'sequential_block_kb': sequential_block_kb,
        'timeout': timeout,
        'seed': seed,
        'caps': caps,
        'tolerance_pct': tolerance_pct,
        'timeline_interval': timeline_interval,
        'free_mb': base['free_mb'],
        'lock_file': lock_path,
        'state_file': state_path,
        'stale_scratch_files': base['stale_scratch_files'],
    }


def public(the_plan):
    result = dict(the_plan)
    for key in ('root', 'directory', 'read_budgets'):
        result.pop(key, None)
    return result


def check_mode_result(the_plan):
    """What a sweep would do; nothing is written, not even the lock or state file."""
    result = public(the_plan)
    found = recover(the_plan['root'], the_plan['device'], the_plan['state_file'], check_mode=True)
    result['recovered'] = found
    result['measured'] = False
    result['results'] = []
    result['changed'] = bool(found and found['changed'])
    busy = not lock_is_free(the_plan['lock_file'])
    result['msg'] = ('would set %s (read_ahead_kb=%s now) to each of %s KiB in turn, measure %d readers of random '
                     '%d-%d KiB mmap reads and a cold sequential read for up to %d s each on a %d MiB scratch file in '
                     '%s, and restore %s KiB; check mode changed nothing.'
                     % (the_plan['device'], the_plan['original_kb'], ', '.join(str(v) for v in the_plan['sweep']),
                        the_plan['readers'], RECORD_MIN_KB, RECORD_MAX_KB, the_plan['duration'],
                        the_plan['size_mb'], the_plan['path'], the_plan['original_kb']))
    if found:
        result['msg'] += (' First it would %s the state file %s left by an earlier run (%s).'
                          % (found['action'], the_plan['state_file'], found['reason']))
    if busy:
        result['msg'] += ' Another sweep holds %s now, so a real run would be refused.' % the_plan['device']
    return result


# ---------------------------------------------------------------------------------------------
# Measuring one value

def record_plan(seed, size_bytes, count):
    """``count`` distinct (offset, length): RECORD_MAX_KB-aligned offsets, lengths 8, 12 or 16 KiB."""
    offsets = probe.random_offsets(seed, size_bytes, RECORD_MAX_KB * KIB, count)
    rng = random.Random(seed + 1)
    sizes = [(RECORD_MIN_KB + 4 * int(rng.random() * ((RECORD_MAX_KB - RECORD_MIN_KB) // 4 + 1))) * KIB
             for offset in offsets]
    return list(zip(offsets, sizes))


def deal(records, readers):
    """Split the records among ``readers`` round-robin (each reader's share in order)."""
    return [records[i::readers] for i in range(readers)]


class SharedMapping(object):
    """A read-only shared mapping of the file, read with ``ctypes.memmove``.

    ``memmove`` through ctypes releases the GIL, so the reader threads fault pages in
    concurrently, as Oak's threads do on its mapped tar files. The mapping is made by libc's
    ``mmap`` (Python's mmap object has no address to hand to ctypes); where that is not
    available, Python's mmap is used and the reads are serialised by the GIL
    (``concurrent`` false).
    """

    def __init__(self, fd, size_bytes):
        self.size = size_bytes
        self.py_map = None
        libc = probe._libc()
        self.addr, self._unmap = probe.libc_map(libc, fd, size_bytes, mmap.MAP_SHARED) if libc else (None, None)
        if self.addr is None:
            self.py_map = mmap.mmap(fd, size_bytes, access=mmap.ACCESS_READ)
        self.concurrent = self.addr is not None

    def reader(self):
        """A ``read(offset, length)`` for one thread (its own buffer); returns the bytes copied."""
        if self.py_map is not None:
            mapping = self.py_map
            return lambda offset, length: len(mapping[offset:offset + length])
        buf = ctypes.create_string_buffer(RECORD_MAX_KB * KIB)
        base = self.addr

        def read(offset, length):
            if offset < 0 or offset + length > self.size:
                raise SweepError('read outside the mapping: %d+%d > %d' % (offset, length, self.size))
            ctypes.memmove(buf, base + offset, length)
            return length
        return read

    def close(self):
        if self.addr is not None:
            self._unmap()
            self.addr = None
        if self.py_map is not None:
            self.py_map.close()
            self.py_map = None


# While reader threads run, a signal must not raise in the main thread: CPython's Thread.join
# interrupted by an exception may mark a still running thread as stopped (the bpo-45274 fix
# releases the thread's state lock when it is held), and the mapping would then be unmapped
# under a thread that still reads it. So the handler of terminate_as_exception() only records
# the signal and stops the readers there, and thread_runner raises once they are joined.
_SIGNALS = {'critical': 0, 'pending': None, 'stops': []}


def _interrupt(signum, frame):
    if _SIGNALS['critical']:
        _SIGNALS['pending'] = signum
        for stop in _SIGNALS['stops']:
            stop.set()
        return
    raise SweepInterrupted('signal %d' % signum)


def thread_runner(make_reader, shares, clock, deadline):
    """Run one thread per share; each reads its records until done or ``deadline``.

    Returns (latencies per reader in s, bytes asked per reader, error or None). The threads
    are always joined before returning, so the mapping may be closed afterwards; a signal
    that arrived meanwhile (see terminate_as_exception) is raised as SweepInterrupted then.
    """
    stop = threading.Event()
    lat = [[] for share in shares]
    asked = [0] * len(shares)
    errors = []

    def work(index, records):
        try:
            read = make_reader()
            for offset, length in records:
                if stop.is_set():
                    return
                start = clock()
                if start >= deadline:
                    return
                got = read(offset, length)
                lat[index].append(clock() - start)
                asked[index] += length
                if got != length:
                    raise SweepError('short read at offset %d: %d of %d bytes.' % (offset, got, length))
        except Exception as e:  # reported by the main thread
            errors.append(e)
            stop.set()

    threads = [threading.Thread(target=work, args=(i, s)) for i, s in enumerate(shares)]
    _SIGNALS['critical'] += 1
    _SIGNALS['stops'].append(stop)
    try:
        for t in threads:
            t.daemon = True
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.05)
    finally:
        stop.set()
        for t in threads:
            while t.is_alive():
                t.join(0.05)
        _SIGNALS['stops'].remove(stop)
        _SIGNALS['critical'] -= 1
    pending = _SIGNALS['pending']
    if pending is not None and not _SIGNALS['critical']:
        _SIGNALS['pending'] = None
        raise SweepInterrupted('signal %s' % pending)
    return lat, asked, (errors[0] if errors else None)


def reopen(fd, flags=os.O_RDONLY):
    """A new open file description of the same (unlinked) file, so each phase starts with fresh read-ahead
    state; the same descriptor duplicated where /proc is missing."""
    try:
        return os.open('/proc/self/fd/%d' % fd, flags | getattr(os, 'O_CLOEXEC', 0))
    except OSError:
        return os.dup(fd)


def random_phase(hooks, fd, size_bytes, make_records, readers, duration, deadline, timeline_interval=0):
    """The Oak-like load for one value, for ``duration`` seconds; a dict of figures.

    The reads go in rounds: ``make_records(n)`` gives round n's records (sparse: at most 25% of
    the file at this read-ahead). When a round is done before the time is up, the mapping is
    closed (mapped pages cannot be evicted), the file evicted and the next round starts cold,
    so the load runs for the whole duration without reading pages an earlier round brought in.

    With ``timeline_interval`` > 0 a :class:`Timeline` samples the device's MiB/s meanwhile
    (started by ``hooks['sampler']``, default :func:`sampler_thread`); the figures then have
    ``timeline``.
    """
    clock = hooks['clock']
    phase_fd = reopen(fd)
    timeline = None
    stop_sampler = None
    try:
        probe.evict(phase_fd, size_bytes, hooks['sleep'], hooks['resident'])
        before = hooks['stat']()
        t0 = clock()
        end = min(t0 + duration, deadline)
        if timeline_interval:
            timeline = Timeline(hooks['stat'], clock, timeline_interval, before, t0)
            stop_sampler = (hooks.get('sampler') or sampler_thread)(timeline)
        lat, asked_bytes, cached, rounds, concurrent = _read_rounds(hooks, phase_fd, size_bytes, make_records,
                                                                    readers, end)
        if stop_sampler is not None:
            stop_sampler()
            stop_sampler = None
            timeline.finish()
        elapsed = clock() - t0
        after, settled = probe.settle(hooks['stat'], clock, hooks['sleep'])
    finally:
        if stop_sampler is not None:
            # Only when an error is in flight (the way out above clears it): the sampler's own
            # error, if it has one, must not replace the error that ended the phase.
            try:
                stop_sampler()
            except Exception:  # noqa: BLE001 - the error in flight is the one to report
                pass
        os.close(phase_fd)
    figures = _random_figures(hooks, lat, rounds, asked_bytes, cached, concurrent, (before, after),
                              (elapsed, settled))
    if timeline is not None:
        figures['timeline'] = timeline.points
        figures['timeline_interval_s'] = timeline_interval
    return figures


def _read_rounds(hooks, phase_fd, size_bytes, make_records, readers, end):
    """random_phase's rounds until ``end``, each from a cold file: (latencies, bytes asked, pages left cached or
    None where unknown, rounds, whether the readers ran concurrently)."""
    clock = hooks['clock']
    lat, asked_bytes, cached, rounds, concurrent = [], 0, 0, 0, True
    while clock() < end:
        records = make_records(rounds)
        mapping = hooks['mapping'](phase_fd, size_bytes)
        try:
            concurrent = concurrent and getattr(mapping, 'concurrent', True)
            per_reader, asked, error = hooks['runner'](mapping.reader, deal(records, readers), clock, end)
        finally:
            mapping.close()
        if error is not None:
            raise error
        rounds += 1
        lat.extend(x for per in per_reader for x in per)
        asked_bytes += sum(asked)
        resident = hooks['resident'](phase_fd, size_bytes)
        cached = None if resident is None or cached is None else cached + resident
        if sum(len(per) for per in per_reader) < len(records):
            break  # the time ran out within the round
        probe.evict(phase_fd, size_bytes, hooks['sleep'], hooks['resident'])
    return lat, asked_bytes, cached, rounds, concurrent


class Timeline(object):
    """The device's read MiB/s over one random phase, from its ``read_sectors`` counter.

    ``points`` is a list of ``[seconds since the phase started, MiB/s]``, one per interval: the
    time is the interval's end, the rate the sectors read in it over its real length (a late
    sample gives a longer interval, not a wrong rate). :meth:`tick` samples when an interval is
    due and is safe to call from several threads; :meth:`finish` adds the last, shorter
    interval when it is at least half an interval long. The counters count I/O on completion,
    as for the phase's totals.
    """

    def __init__(self, stat, clock, interval, before, t0):
        self.stat = stat
        self.clock = clock
        self.interval = float(interval)
        self.t0 = t0
        self.last_t = t0
        self.last_sectors = before['read_sectors']
        self.points = []
        self._lock = threading.Lock()

    def next_due(self):
        return self.last_t + self.interval

    def tick(self):
        """Sample if an interval has passed since the last sample; True if it sampled."""
        if self.clock() < self.next_due() or not self._lock.acquire(False):
            return False
        try:
            now = self.clock()
            if now < self.next_due():
                return False
            self._sample(now)
            return True
        finally:
            self._lock.release()

    def finish(self):
        with self._lock:
            now = self.clock()
            if now - self.last_t >= self.interval / 2.0:
                self._sample(now)

    def _sample(self, now):
        sectors = self.stat()['read_sectors']
        span = now - self.last_t
        if sectors < self.last_sectors:
            raise probe.ProbeError('the device\'s read_sectors counter went backwards (%d -> %d) during the '
                                   'timeline: the counters were reset or wrapped. Run it again.'
                                   % (self.last_sectors, sectors))
        self.points.append([round(now - self.t0, 3),
                            round((sectors - self.last_sectors) * probe.SECTOR_BYTES / float(MIB) / span, 2)])
        self.last_t, self.last_sectors = now, sectors


def sampler_thread(timeline, wait_floor=0.01):
    """Tick ``timeline`` from a daemon thread until the returned function is called (it joins the thread)."""
    stop = threading.Event()
    errors = []

    def work():
        try:
            while not stop.wait(max(wait_floor, timeline.next_due() - timeline.clock())):
                timeline.tick()
        except Exception as e:  # raised by the main thread once the phase ends
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.daemon = True
    thread.start()

    def stop_it():
        stop.set()
        while thread.is_alive():
            thread.join(0.05)
        if errors:
            raise errors[0]
    return stop_it


def _random_figures(hooks, lat, rounds, asked_bytes, cached, concurrent, stats, times):
    """The figures of :func:`random_phase` from what it measured."""
    before, after = stats
    elapsed, settled = times
    reads = len(lat)
    delta = probe.read_delta(before, after)
    cache_bytes = cached * probe.PAGE_BYTES if cached is not None else None
    noise = probe.assess_noise(delta['bytes'], hooks.get('noise_rate') or 0.0, elapsed + settled, cache_bytes)
    seconds = elapsed if elapsed > 0 else None
    return {
        'reads': reads,
        'reads_per_s': round(reads / seconds, 1) if seconds else None,
        'rounds': rounds,
        'elapsed_s': round(elapsed, 3),
        'asked_bytes': asked_bytes,
        'device_read_bytes': delta['bytes'],
        'device_read_ios': delta['ios'],
        'device_mib_s': round(delta['bytes'] / float(MIB) / seconds, 2) if seconds else None,
        'device_iops': round(delta['ios'] / seconds, 1) if seconds else None,
        'read_amplification': round(delta['bytes'] / float(asked_bytes), 3) if asked_bytes else None,
        'page_cache_amplification': (round(cache_bytes / float(asked_bytes), 3)
                                     if cache_bytes is not None and asked_bytes else None),
        'latency': probe.latency_summary(lat),
        'concurrent': concurrent,
        'noisy': noise['noisy'],
        'noise_reason': noise['reason'],
    }


def sequential_phase(hooks, fd, size_bytes, block_bytes, duration, deadline):
    """Read the cold file from the start in ``block_bytes`` reads for at most ``duration``; a dict."""
    clock = hooks['clock']
    phase_fd = reopen(fd)
    try:
        probe.evict(phase_fd, size_bytes, hooks['sleep'], hooks['resident'])
        read = hooks['seq_reader'](phase_fd)
        before = hooks['stat']()
        t0 = clock()
        end = min(t0 + duration, deadline)
        done = 0
        while done < size_bytes and clock() < end:
            got = read(done, min(block_bytes, size_bytes - done))
            if not got:
                break
            done += got
        elapsed = clock() - t0
        after = probe.settle(hooks['stat'], clock, hooks['sleep'])[0]
    finally:
        os.close(phase_fd)
    delta = probe.read_delta(before, after)
    return {
        'seq_bytes': done,
        'seq_elapsed_s': round(elapsed, 3),
        'seq_mib_s': round(done / float(MIB) / elapsed, 2) if elapsed > 0 else None,
        'seq_device_read_bytes': delta['bytes'],
        'seq_whole_file': done >= size_bytes,
    }


def _seq_reader(fd):
    read = probe.pread_reader(fd)
    return lambda offset, length: len(read(offset, length))


def default_hooks(the_plan):
    root, stat_device = the_plan['root'], the_plan['stat_device']
    return {
        'clock': probe._default_clock(),
        'sleep': time.sleep,
        'stat': lambda: probe.read_stat(root, stat_device),
        'resident': probe.resident_pages,
        'mapping': SharedMapping,
        'runner': thread_runner,
        'seq_reader': _seq_reader,
        'data': None,
        'on_value': None,
        'ebs': lambda: probe.ebs_samples(root, [the_plan['device']]),
    }


# ---------------------------------------------------------------------------------------------
# The run

def _mark_readers(the_plan):
    """Before the first candidate: the readers' record notes that the device's read-ahead changes outside a refresh,
    so every file opened while a candidate is live counts as stale until a run refreshes it. A record that cannot be
    written stops the sweep before any change."""
    root, device = the_plan['root'], the_plan['device']
    try:
        readers_record.mark_changed(root, readers_scan.device_numbers(root, [device])[0])
    except (IOError, OSError, runstate.FileError) as e:
        runstate.remove_state(the_plan['state_file'], _display(the_plan['state_file']))
        raise SweepError('the sweep did not start, nothing was changed: cannot mark %s in %s (%s).'
                         % (device, readers_record.RECORD_PATH, getattr(e, 'strerror', None) or e))


def run(the_plan, hooks=None, pid=None):
    """Run the sweep of ``the_plan`` and return the result dict; restores the device on every path.

    ``hooks`` override :func:`default_hooks` for tests (``clock``, ``sleep``, ``stat``,
    ``resident``, ``mapping``, ``runner``, ``seq_reader``, ``data``, ``on_value`` called with
    each value after it is set). Raises SweepError (with ``results`` and ``restored``) on
    failure and timeout, SweepBusy when another sweep holds the device.
    """
    merged = default_hooks(the_plan)
    merged.update(hooks or {})
    hooks = merged
    root, device = the_plan['root'], the_plan['device']
    clock = hooks['clock']
    start = clock()
    deadline = start + the_plan['timeout']
    lock = device_lock(root, device)
    lock.__enter__()
    results = []
    try:
        recovered = recover(root, device, the_plan['state_file'])
        if recovered and recovered['action'] == 'refuse':
            raise SweepError('the sweep did not start, nothing was changed: %s' % recovered['reason'])
        original = blockdev.read_ahead_kb(root, device)
        state = {'device': device, 'majmin': blockdev.majmin(root, device), 'original_kb': original,
                 'identity': device_identity(root, device), 'pid': os.getpid() if pid is None else pid,
                 'started': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
                 'boot_id': boot_id(root), 'host': socket.gethostname(), 'path': the_plan['path']}
        write_state(root, the_plan['state_file'], state)  # recorded before the first change
        _mark_readers(the_plan)
        error = None
        restored = False
        try:
            results = _measure(the_plan, hooks, deadline, results)
        except BaseException as e:
            error = e
            raise
        finally:
            restore_error = None
            try:
                restore(root, device, original)
                restored = True
                runstate.remove_state(the_plan['state_file'], _display(the_plan['state_file']))
            except SweepError as e:
                restore_error = e
            _raise_after_restore(error, restore_error, results, restored, the_plan, original)
    finally:
        lock.__exit__(None, None, None)
    result = public(the_plan)
    result.update({'measured': True, 'results': results, 'recovered': recovered, 'original_kb': original,
                   'restored': True, 'restored_kb': blockdev.read_ahead_kb(root, device),
                   'elapsed_s': round(clock() - start, 3), 'changed': bool(recovered and recovered['changed'])})
    try:
        result.update(recommend(results, the_plan['caps'], the_plan['tolerance_pct']))
    except SweepError as e:  # the device is back already; keep what was measured
        raise SweepError(str(e), results=results, restored=True)
    result['warnings'] = _warnings(result)
    result['table'] = table(results)
    return result


def _raise_after_restore(error, restore_error, results, restored, the_plan, original):
    """Called in the sweep's ``finally``: turn the outcome into one SweepError, or return."""
    if restore_error is not None:
        raise SweepError('%s The state file %s still records the original value; the next sweep (or recover: true) '
                         'restores it, or set read_ahead_kb=%d on %s by hand.%s'
                         % (restore_error, the_plan['state_file'], original, the_plan['device'],
                            (' The sweep itself had failed: %s' % error) if error is not None else ''),
                         results=results, restored=False)
    if error is None:
        return
    if isinstance(error, SweepError):
        error.results = error.results or results
        error.restored = restored
        error.args = ('%s %s was restored to read_ahead_kb=%d.' % (error, the_plan['device'], original),)
        return
    if isinstance(error, probe.ProbeError):
        raise SweepError('%s %s was restored to read_ahead_kb=%d.' % (error, the_plan['device'], original),
                         results=results, restored=restored, timed_out='timeout' in str(error))
    if isinstance(error, (SweepInterrupted, KeyboardInterrupt)):
        raise SweepError('the sweep was interrupted (%s) after %d of %d values; %s was restored to read_ahead_kb=%d.'
                         % (str(error) or type(error).__name__, len(results), len(the_plan['sweep']),
                            the_plan['device'], original), results=results, restored=restored)
    if isinstance(error, (IOError, OSError, blockdev.BlockDeviceError)):
        raise SweepError('the sweep failed after %d of %d values: %s. %s was restored to read_ahead_kb=%d and the '
                         'scratch file removed.' % (len(results), len(the_plan['sweep']), error, the_plan['device'],
                                                    original), results=results, restored=restored)


def _measure(the_plan, hooks, deadline, results):
    root, device = the_plan['root'], the_plan['device']
    size_bytes = the_plan['size_mb'] * MIB
    clock = hooks['clock']
    path = os.path.join(the_plan['directory'], probe.scratch_name())
    fd = None
    try:
        fd = probe.create_scratch(path)
        os.unlink(path)
        probe.fill_scratch(fd, size_bytes, clock, deadline, hooks['data'], the_plan['timeout'])
        if hooks.get('noise_rate') is None:  # the device's background read rate, once, before the first change
            hooks['noise_rate'] = probe.idle_rate(hooks['stat'], clock, hooks['sleep'], probe.NOISE_WINDOW_S)[0]
        for index, value in enumerate(the_plan['sweep']):
            if clock() >= deadline:
                raise SweepError('the sweep reached timeout=%d s after %d of %d values (%s KiB measured).'
                                 % (the_plan['timeout'], len(results), len(the_plan['sweep']),
                                    ', '.join(str(r['read_ahead_kb']) for r in results) or 'none'),
                                 results=results, timed_out=True)
            back = blockdev.write_read_ahead_kb(root, device, value)
            if back != value:
                raise SweepError('setting %s to read_ahead_kb=%d read back %s.' % (device, value, back),
                                 results=results)
            if hooks.get('on_value'):
                hooks['on_value'](value)
            entry = {'read_ahead_kb': value}
            ebs_before, ebs_t0 = hooks['ebs'](), clock()
            entry.update(random_phase(hooks, fd, size_bytes, _records_for(the_plan, index, size_bytes),
                                      the_plan['readers'], the_plan['duration'], deadline,
                                      the_plan.get('timeline_interval') or 0))
            ebs_caps = ebs_hits(probe.ebs_windows(ebs_before, hooks['ebs'](), clock() - ebs_t0))
            if ebs_caps:
                entry['ebs'] = ebs_caps
            entry.update(sequential_phase(hooks, fd, size_bytes, the_plan['sequential_block_kb'] * KIB,
                                          the_plan['duration'], deadline))
            entry['bound'] = bound(entry, the_plan['caps'])
            if clock() >= deadline:  # the phases were cut short: this value's figures are not comparable
                raise SweepError('the sweep reached timeout=%d s while measuring %d KiB, after %d of %d values.'
                                 % (the_plan['timeout'], value, len(results), len(the_plan['sweep'])),
                                 results=results, timed_out=True)
            now = blockdev.read_ahead_kb(root, device)
            if now != value:
                raise SweepError('%s\'s read_ahead_kb changed from %d to %s while the sweep measured it: something else '
                                 '(udev, tuned, an operator) writes it. Stop that, then run the sweep again.'
                                 % (device, value, now), results=results)
            results.append(entry)
    finally:
        if fd is not None:
            os.close(fd)
        remove_file(path)
    return results


def ebs_hits(windows):
    """{device: ebs_stats.cap_hits} for the EBS volumes whose page was read at both ends of a value's random phase
    (the Oak-like load): whether the volume or the instance hit a cap meanwhile."""
    found = dict((name, ebs_stats.cap_hits(w)) for name, w in windows.items())
    return dict((name, hit) for name, hit in found.items() if hit)


def _records_for(the_plan, index, size_bytes):
    """Round n of value number ``index``: seed + index + 1000 n, the value's sparse budget of records."""
    budget = the_plan['read_budgets'][index]
    return lambda n: record_plan(the_plan['seed'] + index + 1000 * n, size_bytes, budget)


def _warnings(result):
    warnings = []
    if result.get('recovered') and result['recovered']['action'] == 'restore':
        rec = result['recovered']
        warnings.append('restored %s from %s KiB to %s KiB first: %s.'
                        % (rec['device'], rec['found_kb'], rec['original_kb'], rec['reason']))
    if result.get('stale_scratch_files'):
        warnings.append('%s holds scratch files of an earlier probe that was killed (%s); remove them if no probe '
                        'is running.' % (result['path'], ', '.join(result['stale_scratch_files'])))
    noisy = [r['read_ahead_kb'] for r in result['results'] if r.get('noisy')]
    if noisy:
        warnings.append('noisy measurement at %s KiB (other I/O on the device): run the sweep with AEM stopped for '
                        'exact figures.' % ', '.join(str(v) for v in noisy))
    if any(not r.get('concurrent', True) for r in result['results']):
        warnings.append('libc mmap was not available: the readers were serialised by the Python GIL, so reads/s '
                        'are those of one reader.')
    return warnings


def table(results):
    """One line per value: the trade-off in numbers."""
    lines = []
    for r in results:
        lat = r.get('latency') or {}
        lines.append('%5d KiB: %s reads/s, amplification %sx, device %s MiB/s %s IOPS, p50 %s ms, p99 %s ms, '
                     'sequential %s MiB/s%s'
                     % (r['read_ahead_kb'], _num(r.get('reads_per_s')), _num(r.get('read_amplification')),
                        _num(r.get('device_mib_s')), _num(r.get('device_iops'), '%.0f'),
                        _num(lat.get('p50_ms'), '%.3f'), _num(lat.get('p99_ms'), '%.3f'),
                        _num(r.get('seq_mib_s')), ' (noisy)' if r.get('noisy') else '')
                     + ''.join('; %s: %s' % (name, hit['bound']) for name, hit in sorted((r.get('ebs') or {}).items())))
    return lines


@contextlib.contextmanager
def terminate_as_exception(signals=(signal.SIGTERM, signal.SIGHUP, signal.SIGINT)):
    """Within the block, SIGTERM, SIGHUP and SIGINT raise SweepInterrupted, so ``finally`` restores the device.

    While reader threads run the signal is held until they are joined (see thread_runner).
    """
    saved = []
    for signum in signals:
        try:
            saved.append((signum, signal.signal(signum, _interrupt)))
        except (ValueError, OSError, RuntimeError):  # not the main thread
            pass
    try:
        yield
    finally:
        for signum, old in saved:
            signal.signal(signum, old)


def recover_only(root, path):
    """The documented recovery call: restore the device of ``path`` from a leftover state file."""
    try:
        name = blockdev.device_for_path(root, path)[0]
    except blockdev.BlockDeviceError as e:
        raise SweepError(str(e))
    device = blockdev.whole_disk(root, name)
    state_path = state_paths(root, device)[1]
    if not os.path.lexists(state_path):
        return {'device': device, 'recovered': None, 'changed': False, 'state_file': state_path,
                'msg': 'no leftover sweep state for %s (%s): nothing to recover.' % (device, state_path)}
    with device_lock(root, device):
        found = recover(root, device, state_path)
    if found['action'] == 'refuse':
        raise SweepError(found['reason'])
    if found['changed']:
        did = 'restored'
    elif found['action'] == 'restore':
        did = 'nothing to restore on'
    else:
        did = 'discarded the stale state of'
    msg = '%s %s from the state file %s: %s.' % (did, device, state_path, found['reason'])
    return {'device': device, 'recovered': found, 'changed': found['changed'], 'state_file': state_path,
            'msg': msg, 'read_ahead_kb': blockdev.read_ahead_kb(root, device)}
