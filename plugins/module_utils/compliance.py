# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the collection expects of a host, checked against its facts: the one home of the rules.

The limits and names (MAX_READ_AHEAD_KB, CHILD_PROFILE, THP_PERSIST, SWEEP_*), the read-ahead rule
(``read_ahead_fault``: whole KiB, in range, whole pages), the page size (``page_kb_of``) and the sweep's
timeout rules (``sweep_phases_s``, ``sweep_timeout``, ``sweep_timeout_error``) are defined here once;
the planners, the sweep, the udev rules file and the modules import them. The EBS volume types and their
limits are ``ebs``'s.

Three pure functions over the facts that ``tuning_facts`` gathers (``ansible_facts.os_tuning``)
and an *intent* (what the role, or a caller, wants):

- ``validate(facts, intent, resolved)``: every value the modules would refuse, found before
  anything on the host is touched, each error naming the thing and the fix;
- ``misses(facts, intent, resolved, verify)``: what is not as it should be, one entry per thing;
- ``parse_verify(rc, out, err, log_text)``: ``tuned-adm verify`` and the lines tuned logged for
  it, reduced to one result that names the devices and options tuned found different.

The intent keys are those of the role's public variables without the ``aem_tuning_`` prefix:
``state``, ``read_ahead_kb``, ``paths``, ``candidates``, ``devices``, ``underlying``, ``thp``,
``thp_defrag``, ``thp_persist``; ``read_ahead_kb`` may be ``'auto'`` (chosen by a read-ahead sweep later in
the run), and then ``sweep`` holds the sweep's knobs (see ``sweep_errors``), or None (``default_read_ahead``: 32,
or the page size where it is larger). ``resolved`` is what the caller resolved on the host with
``blockdev`` (see tuning_facts): ``{'targets': [paths], 'devices': {spec: name or None},
'underlying': {name: [disks]}, 'page_kb': N}``.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils import aem, ebs, runstate


# Python 2's long and unicode without naming them (int and str on Python 3).
INTEGER_TYPES = (int, type(2 ** 64))
STRING_TYPES = (str, type(u''))

# The name of the collection's tuned child profile (module_utils/tuned.py writes it).
CHILD_PROFILE = 'aemops-os-tuning'
# The largest read-ahead the collection sets, records or accepts, in KiB (read_ahead_fault).
MAX_READ_AHEAD_KB = 65536
# The role's read-ahead when none is given, raised to the page size where a page is larger (default_read_ahead).
DEFAULT_READ_AHEAD_KB = 32
# Where the thp module may persist THP (its persist option, the role's aem_tuning_thp_persist).
THP_PERSIST = ('tuned', 'cmdline')
AUTO = 'auto'
# The limits of a read-ahead sweep: module_utils/sweep.py (the read_ahead_sweep module) checks its arguments against
# them, and sweep_errors the role's knobs, before its first change.
SWEEP_MAX_VALUES = 32
SWEEP_MAX_READERS = 64
# A probe's or a sweep's random reads pull at most this share of the scratch file (reads x read-ahead window,
# probe.sparse_cap; scratch_min_mb), so that read-ahead, not the file's size, bounds what they measure.
SPARSE_FRACTION = 0.25
# The read_ahead_sweep module's timeout when none is given; the role also keeps a sweep's phases (values x 2 x
# duration, sweep_phases_s) within it, so that its live device is not exposed longer than a default sweep may run.
SWEEP_TIMEOUT = 900

# tuned/consts.py: STR_VERIFY_PROFILE_DEVICE_VALUE_FAIL and STR_VERIFY_PROFILE_VALUE_FAIL.
# v2.7.0 and later (every release RHEL 7 to 10 ships, 2.11 included) quote:
#   "verify: failed: device %s: '%s' = '%s', expected '%s'";
# v2.5.0 and v2.6.0 logged them unquoted ("... device %s: %s = %s, expected %s"); the pattern takes both.
# tuned/daemon/daemon.py (verify_profile) logs "verifying profile(s): %s" before each verify.
_VERIFY_START = 'verifying profile(s):'
_VERIFY_FAIL = re.compile(r"verify: failed: (?:device (?P<device>\S+): )?'?(?P<option>[^'=]+?)'? = "
                          r"'?(?P<current>.*?)'?, expected '?(?P<expected>.*?)'?\s*$")
_VERIFY_FAIL_OTHER = re.compile(r"verify: failed: (?P<what>.+?)\s*$")


def page_kb_of(sysconf=None):
    """The page size in KiB of the running kernel (4 on x86_64, 64 on RHEL 9's aarch64 ``kernel-64k`` and RHEL 8
    on aarch64). The one page-size function of the collection (read_ahead_plan, sweep and tuning_facts call it);
    ``sysconf`` is injectable, and tests replace the function (tests/unit/fakehost.py, ``use_page_kb``)."""
    try:
        size = (sysconf or os.sysconf)('SC_PAGE_SIZE')
    except (AttributeError, ValueError, OSError):
        return 4
    return max(1, size // 1024)


def default_read_ahead(page_kb):
    """The read-ahead the role applies when none is given: ``{'kb': N, 'why': text}``. It is the larger of
    DEFAULT_READ_AHEAD_KB and the page size, because the kernel keeps read-ahead in whole pages (on a 64 KiB page
    kernel, 32 would be stored as 0)."""
    if page_kb > DEFAULT_READ_AHEAD_KB:
        return {'kb': page_kb, 'why': '%d KiB: the page size of this kernel (the default %d KiB is less than one '
                                      'page)' % (page_kb, DEFAULT_READ_AHEAD_KB)}
    return {'kb': DEFAULT_READ_AHEAD_KB, 'why': '%d KiB: the default' % DEFAULT_READ_AHEAD_KB}


def page_sweep_values(values, page_kb):
    """Default read_ahead_kb values to measure, for a kernel with ``page_kb`` KiB pages: a value below one page
    becomes one page (once), the order is kept. On x86_64 (4 KiB pages) the values are unchanged; on a 64 KiB page
    kernel 32, 16 and 8 would each be refused as not a page multiple (the kernel stores whole pages)."""
    out = []
    for value in values:
        value = max(value, page_kb)
        if value not in out:
            out.append(value)
    return out


def with_default(intent, page_kb):
    """(intent, chosen): the intent with the default read-ahead in place of none given (``read_ahead_kb`` None),
    and ``default_read_ahead``'s answer; (intent, None) when a value or ``auto`` was given."""
    if intent.get('read_ahead_kb') is not None:
        return intent, None
    chosen = default_read_ahead(page_kb)
    return dict(intent, read_ahead_kb=chosen['kb']), chosen


def read_ahead_fault(kb, page_kb=1):
    """What is wrong with ``kb`` as a read-ahead in KiB, or None: ``'type'`` (not a whole number: a boolean, a
    float, text), ``'range'`` (not from 0 to MAX_READ_AHEAD_KB) or ``'page'`` (not a multiple of ``page_kb``: the
    kernel keeps read-ahead in pages and would store less). The one read-ahead rule of the collection: the modules'
    arguments, the role's intent, the sweep's values and state file and the udev rules file's rules and baselines
    are all checked with it, each caller naming the fault in its own words."""
    if not _is_int(kb):
        return 'type'
    if kb < 0 or kb > MAX_READ_AHEAD_KB:
        return 'range'
    if kb % page_kb:
        return 'page'
    return None


def read_ahead_error(kb, page_kb):
    """Why ``kb`` cannot be set as read-ahead, or None: the message of read_ahead_fault for the read_ahead module
    (read_ahead_plan.validate), the role's intent (validate) and a recorded sweep (recorded_sweep)."""
    fault = read_ahead_fault(kb, page_kb)
    if fault == 'type':
        return 'read_ahead_kb must be a whole number of KiB (for example 32), not %r.' % (kb,)
    if fault == 'range':
        return ('read_ahead_kb=%d is out of range: give KiB between 0 and %d (32 is the usual value for AEM '
                'TarMK). Note blockdev --setra takes 512-byte sectors, not KiB.' % (kb, MAX_READ_AHEAD_KB))
    if fault == 'page':
        return ('read_ahead_kb=%d is not a multiple of the page size (%d KiB): the kernel keeps read-ahead in pages '
                'and would store %d. Use a multiple of %d.' % (kb, page_kb, kb - kb % page_kb, page_kb))
    return None


_ASCII_DIGITS = re.compile(r'^[0-9]+$')


def normalise_intent(intent):
    """The intent with ``read_ahead_kb`` and the sweep's values typed. tuning_facts declares every other key's type
    (its INTENT_SPEC); these two are raw, because each may be a number or a word: ``read_ahead_kb`` a number of KiB
    (``'32'`` as text of ASCII digits is one; a boolean never is), ``auto``, or none (the default); the sweep's
    ``values`` a list, or none for the page-size default. The volume's 0 means the volume type's default."""
    result = dict(intent)
    kb = result.get('read_ahead_kb')
    if isinstance(kb, STRING_TYPES) and _ASCII_DIGITS.match(kb):
        result['read_ahead_kb'] = int(kb)
    elif isinstance(kb, STRING_TYPES) and kb.strip().lower() == AUTO:
        result['read_ahead_kb'] = AUTO
    elif isinstance(kb, STRING_TYPES) and kb.strip().lower() in ('', 'none'):
        result['read_ahead_kb'] = None  # not given: default_read_ahead
    if isinstance(result.get('sweep'), dict):
        result['sweep'] = _normalise_sweep(result['sweep'])
    return result


def is_auto(intent):
    """Whether the intent leaves read-ahead to a sweep (``read_ahead_kb: auto``)."""
    return intent.get('read_ahead_kb') == AUTO


def _number(value, kind):
    """``value`` as ``kind`` (int or float) when it is text of ASCII digits (and one dot for float); else as is."""
    if isinstance(value, STRING_TYPES):
        text = value.strip()
        if _ASCII_DIGITS.match(text):
            return kind(text)
        if kind is float and re.match(r'^[0-9]*\.[0-9]+$', text):
            return float(text)
    return value


def _normalise_sweep(knobs):
    result = dict(knobs)
    if result.get('values') == '':
        result['values'] = None  # not given (ansible-core before 2.19 may render none as ''): the page-aware default
    if isinstance(result.get('values'), (list, tuple)):
        result['values'] = [_number(v, int) for v in result['values']]
    for key in ('readers', 'duration', 'size_mb', 'volume_size_gb', 'iops'):
        result[key] = _number(result.get(key), int)
    for key in ('throughput_mibps', 'tolerance_pct'):
        result[key] = _number(result.get(key), float)
    for key in ('volume_size_gb', 'iops', 'throughput_mibps'):
        if result.get(key) in (0, 0.0, '', None) and not isinstance(result.get(key), bool):
            result[key] = None  # 0 or empty: the volume type's default
    return result


def _is_int(value):
    return isinstance(value, INTEGER_TYPES) and not isinstance(value, bool)


def _is_number(value):
    return (_is_int(value) or isinstance(value, float)) and not isinstance(value, bool)


def sweep_errors(knobs, resolved):
    """Why a sweep with ``knobs`` (the role's aem_tuning_sweep_* and aem_tuning_volume_* values, without the
    prefix) could not run, found before any change: a list of strings naming the variable and the fix."""
    if not isinstance(knobs, dict):
        return ['aem_tuning_read_ahead_kb=auto needs the sweep\'s settings (the role passes them): give a number '
                'instead.']
    errors = []
    page = resolved.get('page_kb', 4)
    if not resolved.get('targets'):
        errors.append('aem_tuning_read_ahead_kb=auto measures on the AEM repository\'s filesystem, and no repository '
                      'path is a target here: set aem_tuning_paths, or give aem_tuning_read_ahead_kb a number.')
    values = knobs.get('values')
    if values is None:
        values = resolved.get('sweep_values')  # not given: the default for this kernel's page size (tuning_facts)
    if not isinstance(values, (list, tuple)) or not values:
        errors.append('aem_tuning_sweep_values must be a non-empty list of read_ahead_kb values, for example '
                      '%s (or not set: the default for this page size).'
                      % (resolved.get('sweep_values') or [4096, 1024, 256, 128, 64, 32, 16, 8]))
        values = []
    elif len(values) > SWEEP_MAX_VALUES:
        errors.append('aem_tuning_sweep_values has %d values: give at most %d, each costs 2 x '
                      'aem_tuning_sweep_duration seconds on the live device.' % (len(values), SWEEP_MAX_VALUES))
    bad = [v for v in values if read_ahead_fault(v, page)]
    if bad:
        errors.append('aem_tuning_sweep_values: %s: each value must be a whole number of KiB, a multiple of the %d '
                      'KiB page size from 0 to %d.' % (', '.join(repr(v) for v in bad), page, MAX_READ_AHEAD_KB))
    good = [v for v in values if v not in bad]
    dupes = sorted(set(v for v in good if good.count(v) > 1))
    if dupes:
        errors.append('aem_tuning_sweep_values lists %s more than once: give each value once.'
                      % ', '.join(str(v) for v in dupes))
    readers, duration, size_mb = knobs.get('readers'), knobs.get('duration'), knobs.get('size_mb')
    if not _is_int(readers) or readers < 1 or readers > SWEEP_MAX_READERS:
        errors.append('aem_tuning_sweep_readers=%r: give 1 to %d concurrent readers.' % (readers, SWEEP_MAX_READERS))
    if not _is_int(duration) or duration < 1:
        errors.append('aem_tuning_sweep_duration=%r: give whole seconds, at least 1.' % (duration,))
    elif good and sweep_phases_s(len(values), duration) > SWEEP_TIMEOUT:
        errors.append('aem_tuning_sweep_values x 2 phases x aem_tuning_sweep_duration = %d s on the live device, more '
                      'than the %d s the role allows a sweep (the read_ahead_sweep module\'s default timeout): give '
                      'fewer values or a shorter duration.' % (sweep_phases_s(len(values), duration), SWEEP_TIMEOUT))
    # one read of the largest window within SPARSE_FRACTION of the file (probe.sparse_cap)
    largest_mb = scratch_min_mb(max(good) * 1024) if good else 1
    if not _is_int(size_mb) or size_mb < max(1, largest_mb):
        errors.append('aem_tuning_sweep_size_mb=%r: give MiB of scratch file, at least %d for the largest value of '
                      'aem_tuning_sweep_values (one read at it within %d%% of the file).'
                      % (size_mb, max(1, largest_mb), int(SPARSE_FRACTION * 100)))
    tolerance = knobs.get('tolerance_pct')
    if not _is_number(tolerance) or tolerance < 0 or tolerance >= 100:
        errors.append('aem_tuning_sweep_tolerance_pct=%r: give a percentage from 0 to below 100.' % (tolerance,))
    errors.extend(_volume_errors(knobs))
    return errors


def scratch_min_mb(window_bytes, reads=1, fraction=SPARSE_FRACTION):
    """MiB of scratch file for ``reads`` reads that may each pull ``window_bytes`` (the read-ahead window, or the
    record where it is larger) within ``fraction`` of the file, rounded up."""
    return -(-int(reads * window_bytes / fraction) // (1024 * 1024))


def sweep_phases_s(count, duration):
    """Seconds a sweep of ``count`` values measures on the live device: a random and a sequential phase of at most
    ``duration`` seconds each per value."""
    return count * 2 * duration


def sweep_timeout(knobs):
    """The timeout the role gives the read_ahead_sweep module for ``knobs`` (the intent's ``sweep``, normalised):
    the phases, the scratch file written at 10 MiB/s or faster, and 10 minutes for the rest (evicting, settling).
    None without a list of values and whole numbers of duration and size_mb; tuning_facts returns it only when
    sweep_errors finds none. It always passes sweep_timeout_error."""
    knobs = knobs if isinstance(knobs, dict) else {}
    values, duration, size_mb = knobs.get('values'), knobs.get('duration'), knobs.get('size_mb')
    if not isinstance(values, (list, tuple)) or not _is_int(duration) or not _is_int(size_mb):
        return None
    return sweep_phases_s(len(values), duration) + size_mb // 10 + 600


def sweep_timeout_error(timeout, count, duration):
    """Why a sweep of ``count`` values of ``duration`` seconds cannot run in ``timeout`` seconds, or None: the
    timeout must cover the random phases at least (the sequential ones stop early when time is short)."""
    if timeout < count * duration:
        return ('timeout=%d s is shorter than the random phases alone (%d values x duration=%d s = %d s): raise '
                'timeout, lower duration or give fewer values.' % (timeout, count, duration, count * duration))
    return None


def _volume_errors(knobs):
    volume_type = knobs.get('volume_type')
    if volume_type not in ebs.CHOICES:
        return ['aem_tuning_volume_type=%r: use one of %s.' % (volume_type, ', '.join(ebs.CHOICES))]
    errors = []
    given = {}
    for key, var, check in (('volume_size_gb', 'aem_tuning_volume_size_gb', _is_int),
                            ('iops', 'aem_tuning_volume_iops', _is_int),
                            ('throughput_mibps', 'aem_tuning_volume_throughput_mibps', _is_number)):
        value = knobs.get(key)
        if value is None:
            continue
        if not check(value) or value < 0:
            errors.append('%s=%r: give a positive number, or 0 for the volume type\'s default.' % (var, value))
        else:
            given[key] = value
    errors.extend(ebs.range_errors(volume_type, given.get('iops'), given.get('throughput_mibps'),
                                   ('aem_tuning_volume_iops', 'aem_tuning_volume_throughput_mibps',
                                    'aem_tuning_volume_type')))
    lacking = ebs.missing(volume_type, given.get('volume_size_gb'), given.get('iops'), given.get('throughput_mibps'))
    if lacking == 'caps':
        errors.append('aem_tuning_volume_type=custom needs aem_tuning_volume_iops and '
                      'aem_tuning_volume_throughput_mibps (the caps of the volume).')
    elif lacking == 'iops':
        errors.append('aem_tuning_volume_type=%s is provisioned: give aem_tuning_volume_iops.' % volume_type)
    elif lacking == 'size':
        errors.append('aem_tuning_volume_type=gp2 derives its caps from the size: give aem_tuning_volume_size_gb.')
    return errors


def _resolved_knobs(knobs, resolved):
    """Sweep knobs with values not given (None) as the page-size default they stand for (``resolved['sweep_values']``),
    so that a record of the default list and one of the values left out compare equal."""
    if not isinstance(knobs, dict):
        return knobs
    result = _normalise_sweep(knobs)
    if result.get('values') is None:
        result['values'] = resolved.get('sweep_values')
    return result


def recorded_sweep(facts, intent, resolved, text):
    """Whether the sweep result an earlier apply run recorded on the host (``text``, the JSON read_ahead_sweep wrote to
    ``intent['sweep_record']``: sweep_record.evidence, or None when there is no such file) holds for this run.

    It holds when it chose a valid value, was measured with this run's sweep settings (``intent['sweep']``), on
    the first repository path of this run, and on the device that governs it now (the same stable identity: a
    renamed NVMe namespace is the same device, another volume mounted there is not). Returns ``{'usable': bool,
    'why': why not (or ''), 'record': the parsed record or None}``.
    """
    path = intent.get('sweep_record')

    def no(why, record=None):
        return {'usable': False, 'why': why, 'record': record}
    if text is None:
        return no('no apply run recorded one in %s' % path)
    record, damage = runstate.parse_json(text, path, dict)
    if damage:
        return no(damage)
    kb = record.get('recommended_kb')
    if read_ahead_error(kb, resolved.get('page_kb', 4)):
        return no('%s records no valid recommended_kb (%s)' % (path, json.dumps(kb)), record)
    knobs = record.get('knobs')
    if not isinstance(knobs, dict) or _resolved_knobs(knobs, resolved) != _resolved_knobs(intent.get('sweep'), resolved):
        return no('the sweep recorded in %s was measured with other aem_tuning_sweep_* or aem_tuning_volume_* '
                  'settings than this run\'s' % path, record)
    targets = resolved.get('targets') or []
    if not targets or record.get('path') != targets[0]:
        return no('the sweep recorded in %s measured %s, and this run\'s repository path is %s'
                  % (path, record.get('path'), targets[0] if targets else 'none'), record)
    device = (facts.get('paths', {}).get(targets[0]) or {}).get('device')
    stable_id = (facts.get('block_devices', {}).get(device) or {}).get('stable_id')
    if record.get('stable_id') != stable_id or (stable_id is None and record.get('device') != device):
        return no('the sweep recorded in %s measured %s (%s), and %s is now on %s (%s): another device'
                  % (path, record.get('device'), _id_text(record.get('stable_id')), targets[0], device,
                     _id_text(stable_id)), record)
    return {'usable': True, 'why': '', 'record': record}


def _id_text(ident):
    if isinstance(ident, dict) and ident.get('key'):
        return '%s=%s' % (ident.get('key'), ident.get('value'))
    return 'no stable identity'


def with_recorded(intent, recorded):
    """The intent to validate and check with: the recorded sweep's value in place of ``auto`` when it holds."""
    if not is_auto(intent) or not recorded['usable']:
        return intent
    return dict(intent, read_ahead_kb=recorded['record']['recommended_kb'])


def recorded_sweep_messages(intent, recorded):
    """(errors, warnings) of ``auto`` where this run may not sweep (audit mode, check mode): an error when there
    is no recorded result that holds, a warning naming the recorded value it uses instead."""
    if intent.get('may_sweep') or recorded is None:
        return [], []
    if not recorded['usable']:
        return ['aem_tuning_read_ahead_kb=auto needs a sweep of the live device, which this run does not do (audit '
                'mode and check mode never sweep: the sweep changes the device\'s read-ahead), and %s. Give '
                'aem_tuning_read_ahead_kb a number (for example 32), or run the role in apply mode without --check '
                'first.' % recorded['why']], []
    record = recorded['record']
    return [], ['aem_tuning_read_ahead_kb=auto: this run does not sweep the live device (audit mode and check mode '
                'never do); it checks against %s KiB, recorded by the sweep of %s (%s) at %s. %s'
                % (record['recommended_kb'], record.get('device', '?'), record.get('path', '?'),
                   record.get('taken', '?'), record.get('why', ''))]


def may_sweep(intent, check_mode):
    """Whether this run may sweep the live device: an apply run (``intent['mode']``) of state present, outside
    check mode. Audit mode and check mode never do: a sweep changes the device's read-ahead while it measures."""
    return intent.get('mode') == 'apply' and intent.get('state', 'present') == 'present' and not check_mode


def read_ahead_choice(intent, default, recorded, knobs=None):
    """The read-ahead this run applies and verifies, decided once, before any change: a dict with ``kb`` (None while
    a sweep of this run is to choose it, and with state absent), ``source`` (``given``, ``default``, ``recorded``,
    ``sweep`` or None), ``why``, ``auto``, ``may_sweep``, ``sweep`` (whether this run sweeps), ``knobs`` (what the
    sweep measures, with the values resolved, or None) and ``evidence`` (the recorded sweep it uses, or None).

    ``intent`` is the normalised intent as given (``read_ahead_kb`` still ``auto``), with ``may_sweep`` set;
    ``default`` is with_default's answer (None where a value or auto was given); ``recorded`` is recorded_sweep's
    (None where there is no record to read). An apply run sweeps where no recorded result holds, or where one
    holds and ``sweep_force`` asks to measure again."""
    auto = is_auto(intent)
    choice = {'kb': None, 'source': None, 'why': '', 'auto': auto, 'may_sweep': bool(intent.get('may_sweep')),
              'sweep': False, 'knobs': None, 'evidence': None}
    if intent.get('state', 'present') != 'present':
        return dict(choice, why='state absent: each device goes back to the read-ahead recorded before the first run')
    if default is not None:
        return dict(choice, kb=default['kb'], source='default', why=default['why'])
    if not auto:
        kb = intent.get('read_ahead_kb')
        return dict(choice, kb=kb, source='given', why='%s KiB: aem_tuning_read_ahead_kb' % (kb,))
    usable = bool(recorded and recorded['usable'])
    if choice['may_sweep'] and (intent.get('sweep_force') or not usable):
        why = ('aem_tuning_sweep_force: true measures again' if usable else
               'no recorded result holds: %s' % recorded['why'] if recorded else 'no sweep result is recorded')
        return dict(choice, source='sweep', sweep=True, knobs=knobs,
                    why='auto: this run sweeps the live device and applies the value it recommends (%s)' % why)
    if usable:
        record = recorded['record']
        force = ' (aem_tuning_sweep_force: true measures again)' if choice['may_sweep'] else ''
        why = ('auto: %s KiB, recorded by the sweep of %s at %s; it holds (the same settings, path and device), so no '
               'sweep%s' % (record['recommended_kb'], record.get('device', '?'), record.get('taken', '?'), force))
        return dict(choice, kb=record['recommended_kb'], source='recorded', evidence=dict(record, source='recorded'),
                    why=why)
    return dict(choice, why='auto: no recorded result holds (%s), and this run may not sweep'
                            % (recorded['why'] if recorded else 'none is recorded'))


def choose_targets(paths, candidates, path_facts):
    """The repository paths to tune: the given ones that exist; the first candidate found only when none was given.

    Returns (targets, errors, warnings). A mistyped explicit path must not tune another filesystem.
    """
    found = [p for p in path_facts if 'error' not in path_facts[p]]
    if paths:
        targets = [p for p in paths if p in found]
        missing = [p for p in paths if p not in found]
        warnings = ['%s: %s; skipped' % (p, path_facts.get(p, {}).get('error', 'not resolved')) for p in missing]
        if not targets:
            return [], ['none of the given aem_tuning_paths exists or resolves to a block device: %s. Correct '
                        'aem_tuning_paths (the crx-quickstart/repository directory), or set aem_tuning_devices.'
                        % '; '.join('%s (%s)' % (p, path_facts.get(p, {}).get('error', 'not resolved'))
                                    for p in missing)], []
        return targets, [], warnings
    return [p for p in candidates if p in found][:1], [], []


def validate(facts, intent, resolved):
    """Every error a run with ``intent`` would hit in a module, found before any change. A list of strings."""
    errors = []
    present = intent.get('state', 'present') == 'present'
    os_facts = facts.get('os') or {}
    if os_facts.get('family') == 'unknown':
        errors.append('%s %s is not supported: the collection supports RHEL, CentOS, Rocky, AlmaLinux and Oracle '
                      'Linux 7, 8, 9 and 10 (and Debian, for its test harness).'
                      % (os_facts.get('id') or 'this OS', os_facts.get('version_id') or ''))
    if intent.get('thp_persist'):
        unknown = [p for p in intent['thp_persist'] if p not in THP_PERSIST]
        if unknown:
            errors.append('aem_tuning_thp_persist has unknown entries %s: use tuned and/or cmdline.'
                          % ', '.join(unknown))
    for spec, name in sorted(resolved.get('devices', {}).items()):
        if name is None:
            errors.append('aem_tuning_devices: %s is not a block device on this host (%s): correct or remove it.'
                          % (spec, resolved.get('device_errors', {}).get(spec, 'not found')))
    if not present:
        return errors
    # The sweep's knobs are checked whenever they are given (the role gives them with auto, also where it uses a
    # recorded value and does not sweep), so that a bad one is refused in audit and check mode too.
    if is_auto(intent) or intent.get('sweep') is not None:
        errors.extend(sweep_errors(intent.get('sweep'), resolved))
    if not is_auto(intent):
        error = read_ahead_error(intent.get('read_ahead_kb'), resolved.get('page_kb', 4))
        if error:
            errors.append(error.replace('read_ahead_kb', 'aem_tuning_read_ahead_kb', 1)
                          + (' Or give auto, to measure and choose it.' if 'whole number' in error else ''))
    if not resolved.get('targets') and not resolved.get('devices') and not intent.get('paths'):
        errors.append('no AEM repository found: none of the common install paths exists. Set aem_tuning_paths to '
                      'the crx-quickstart/repository directory, or aem_tuning_devices.')
    for name in _target_devices(facts, resolved):
        info = facts.get('block_devices', {}).get(name)
        if info is not None and not info.get('stable_id'):
            errors.append('%s (%s) has no stable identity (serial, WWN, DM UUID) to persist its read-ahead by: '
                          'tune the device above or below it instead.' % (name, info.get('type')))
    runtime = (facts.get('thp') or {}).get('runtime') or {}
    for attr, value in (('enabled', intent.get('thp')), ('defrag', intent.get('thp_defrag'))):
        entry = runtime.get(attr)
        if value and entry and entry.get('offered') and value not in entry['offered']:
            errors.append('aem_tuning_thp%s=%s is not offered by this kernel, which offers: %s.'
                          % ('' if attr == 'enabled' else '_defrag', value, ', '.join(entry['offered'])))
    return errors


def _target_devices(facts, resolved):
    """Governing devices of the path targets and the device targets (and those beneath, when asked), in order."""
    names = []
    for path in resolved.get('targets', []):
        device = facts.get('paths', {}).get(path, {}).get('device')
        if device:
            names.append(device)
    names.extend(n for n in resolved.get('devices', {}).values() if n)
    for name in list(names):
        names.extend(resolved.get('underlying', {}).get(name, []))
    seen = set()
    return [n for n in names if not (n in seen or seen.add(n))]


def reading(facts, resolved):
    """What aem_tuning_result keeps of one reading of the host (docs/result.md, ``readings``), a few hundred bytes where
    the facts are tens of KB: the read-ahead of each device of the run (the targets' governing devices, the device
    targets, those beneath them) and, under ``devices``, its type (the role keeps the types of the reading before the
    change only); each target path's device; THP; tuned's profiles; the OS. What set each value is in the full facts
    (the report's before.json). ``facts`` may be an earlier
    reading (the first run's snapshot): the devices are those of this run's plan."""
    facts = facts or {}
    names = _target_devices(facts, resolved)
    for path in resolved.get('targets', []):
        # The snapshot's own device for the path, where the kernel names it differently now.
        device = facts.get('paths', {}).get(path, {}).get('device')
        if device and device not in names:
            names.append(device)
    kb, devices = {}, {}
    for name in names:
        info = facts.get('block_devices', {}).get(name) or {}
        kb[name] = info.get('read_ahead_kb')
        devices[name] = info.get('type')
    paths = dict((path, (facts.get('paths', {}).get(path) or {}).get('device')) for path in resolved.get('targets', []))
    runtime = (facts.get('thp') or {}).get('runtime') or {}
    os_facts = facts.get('os') or {}
    tuned_facts = facts.get('tuned') or {}
    return {
        'read_ahead_kb': kb,
        'devices': devices,
        'paths': paths,
        'thp': {'enabled': (runtime.get('enabled') or {}).get('value'), 'defrag': (runtime.get('defrag') or {}).get('value'),
                'running_cmdline': (facts.get('thp') or {}).get('running_cmdline')},
        'tuned': {'version': tuned_facts.get('version'), 'active_profiles': tuned_facts.get('active_profiles') or [],
                  'conflicts': len(tuned_facts.get('conflicts') or [])},
        'os': dict((key, os_facts.get(key)) for key in ('id', 'version_id', 'boot_method')),
    }


def reader_scope(facts, resolved):
    """{governing device: None (a device target: every file on it) or [target paths]}: whose running
    readers count (module_utils/readers.py, readers_verdict.in_scope). Devices beneath (``underlying``) hold no files of their own."""
    scope = {}
    for path in resolved.get('targets', []):
        device = facts.get('paths', {}).get(path, {}).get('device')
        if device and scope.get(device, []) is not None:
            scope.setdefault(device, []).append(path)
    for name in resolved.get('devices', {}).values():
        if name:
            scope[name] = None
    return scope


def _reader_misses(facts):
    """Readers of the targets that do not read at the device's value: set, but not in effect for them. The advice
    fits the host: an apply run refreshes in place only where the kernel can (``kernel_refresh``)."""
    result = []
    readers = facts.get('readers') or {}
    for r in readers.get('stale') or []:
        result.append(miss(aem.label(r), 'reader', '%s, so it still reads with the earlier, larger window: run '
                           'the role in apply mode (read_ahead refreshes it in place) or restart it' % r.get('reason'),
                           unit=r.get('unit')))
    for r in readers.get('needs_restart') or []:
        result.append(miss(aem.label(r), 'reader_restart', '%s%s: restart it in your next window '
                           '(aem_tuning_restart_stale_aem: true restarts AEM\'s unit)' % (r.get('reason'), _measured(r)),
                           unit=r.get('unit')))
    return result


def _measured(r):
    """How a stale reader was found, where its own counters said so (readers_measure)."""
    m = r.get('measured') or {}
    if r.get('basis') != 'measured' or 'kib_per_fault' not in m:
        return ''
    return ' (measured: %s KiB read per major fault over %s s)' % (m['kib_per_fault'], m.get('seconds'))


def _device_labels(facts, resolved):
    """{device: the targets that name it} for the report: a path, a /dev link, or the kernel name."""
    labels = {}
    for path in resolved.get('targets', []):
        device = facts.get('paths', {}).get(path, {}).get('device')
        if device:
            labels.setdefault(device, []).append(path)
    for spec, name in sorted(resolved.get('devices', {}).items()):
        if name:
            labels.setdefault(name, []).append(spec)
    for name in list(labels):
        for disk in resolved.get('underlying', {}).get(name, []):
            labels.setdefault(disk, []).append('beneath %s' % name)
    return labels


def miss(subject, kind, message, unit=None):
    """A miss: what is not as it should be (``subject``), of which ``kind``, and what to do (``message``); a running
    reader's miss also names its process's systemd ``unit`` (the role's result decides from it whether it is AEM's)."""
    out = {'subject': subject, 'kind': kind, 'message': message}
    if unit:
        out['unit'] = unit
    return out


def _present_misses(facts, intent, resolved, verify):
    result = []
    kb = intent['read_ahead_kb']
    for path in resolved.get('targets', []):
        p = facts.get('paths', {}).get(path, {})
        if 'error' in p:
            result.append(miss(path, 'path', p['error']))
    labels = _device_labels(facts, resolved)
    tuned_ra = (facts.get('tuned') or {}).get('read_ahead') or {}
    for name in _target_devices(facts, resolved):
        info = facts.get('block_devices', {}).get(name, {})
        subject = '%s (%s)' % (', '.join(labels.get(name, [name])), name)
        if kb == AUTO:
            pass  # chosen by the sweep later in the run: checked against its result after the change
        elif info.get('read_ahead_kb') != kb:
            result.append(miss(subject, 'read_ahead', '%s reads %s KiB, not %d: run the role in apply mode'
                               % (name, info.get('read_ahead_kb', '?'), kb)))
        hit = tuned_ra.get(name)
        if hit and kb != AUTO and hit.get('kb') != kb:
            result.append(miss(subject, 'tuned_read_ahead', 'tuned %s [%s] readahead=%s still applies to %s: the '
                               'tuned child profile %s is not in effect'
                               % (hit.get('profile'), hit.get('instance'), hit.get('setting'), name, CHILD_PROFILE)))
        if info and info.get('rule') is None:
            result.append(miss(subject, 'persistence', 'no udev rule persists the read-ahead of %s' % name))
    runtime = (facts.get('thp') or {}).get('runtime') or {}
    enabled = (runtime.get('enabled') or {}).get('value')
    if enabled is not None and intent.get('thp') and enabled != intent['thp']:
        result.append(miss('THP', 'thp', 'transparent_hugepage/enabled is %s, not %s' % (enabled, intent['thp'])))
    tuned = facts.get('tuned') or {}
    active = tuned.get('active_profiles') or []
    if active and CHILD_PROFILE not in active:
        result.append(miss('tuned', 'tuned_profile', 'tuned runs %s, not the collection\'s child profile %s'
                           % (' '.join(active), CHILD_PROFILE)))
    elif active and active[-1] != CHILD_PROFILE:
        result.append(miss('tuned', 'tuned_profile', 'tuned loads %s after the collection\'s child profile %s, '
                           'so its settings merge over ours: run the role in apply mode to put ours last'
                           % (' '.join(active[active.index(CHILD_PROFILE) + 1:]), CHILD_PROFILE)))
    for c in tuned.get('conflicts') or []:
        if c.get('winner') != CHILD_PROFILE:
            result.append(miss('tuned profile %s' % c.get('profile'), 'tuned_conflict',
                               '[%s] %s=%s wins over ours (%s)%s: change or remove it there, or stop '
                               'loading it after %s' % (c.get('section'), c.get('option'), c.get('value'),
                                                        c.get('ours'), ' where %s' % c['condition']
                                                        if c.get('condition') else '', CHILD_PROFILE)))
    # What the thp module reported it persists; before it ran, what was asked (empty: its default, which
    # always includes the command line).
    persist = intent.get('thp_persist_effective') or intent.get('thp_persist') or None
    os_facts = facts.get('os') or {}
    if os_facts.get('boot_method', 'none') != 'none' and intent.get('thp') and 'cmdline' in (persist or ['cmdline']):
        for source, value in sorted(((facts.get('thp') or {}).get('configured_cmdline') or {}).items()):
            if value != intent['thp']:
                result.append(miss('kernel command line', 'cmdline', '%s has transparent_hugepage=%s, not %s'
                                   % (source, value, intent['thp'])))
    result.extend(_reader_misses(facts))
    if verify and verify.get('rc') not in (None, 0):
        result.append(miss('tuned-adm verify', 'tuned_verify', verify['summary']))
    for c in facts.get('conflicts') or []:
        result.append(miss('%s %s line %s' % (c.get('source'), c.get('file'), c.get('line')), 'conflict',
                           'sets read-ahead: %s' % c.get('text')))
    return result


def _absent_misses(facts):
    result = []
    managed = facts.get('managed_files') or {}
    for key, what in (('read_ahead_rules', 'the read-ahead udev rules file'),
                      ('tuned_child_profile', 'the tuned child profile'),
                      ('thp_baseline', 'the THP baseline')):
        entry = managed.get(key)
        if entry is not None:
            result.append(miss(entry.get('path') or what, 'backout', '%s is still there' % what))
    active = (facts.get('tuned') or {}).get('active_profiles') or []
    if CHILD_PROFILE in active:
        result.append(miss('tuned', 'backout', 'tuned still runs %s' % CHILD_PROFILE))
    return result


def misses(facts, intent, resolved, verify=None):
    """What is not as ``intent`` wants it, one entry (subject, kind, message) per thing."""
    if intent.get('state', 'present') == 'present':
        return _present_misses(facts, intent, resolved, verify)
    return _absent_misses(facts)


def parse_verify(rc, out, err, log_text):
    """``tuned-adm verify`` as one result: rc, passed, the failures tuned logged for this verify, a summary.

    tuned-adm prints only that verification failed; the daemon logs one line per failed
    setting after "verifying profile(s): ...". Only the last such block is read.
    """
    failures = []
    if log_text and rc != 0:
        lines = log_text.splitlines()
        start = max([i for i, line in enumerate(lines) if _VERIFY_START in line] or [-1])
        for line in lines[start + 1:]:
            if _VERIFY_START in line:
                break
            m = _VERIFY_FAIL.search(line)
            if m:
                failures.append(dict((k, (v or '').strip() or None) for k, v in m.groupdict().items()))
                continue
            m = _VERIFY_FAIL_OTHER.search(line)
            if m:
                failures.append({'device': None, 'option': m.group('what'), 'current': None, 'expected': None})
    passed = rc == 0
    if passed:
        summary = 'passed'
    elif failures:
        summary = 'tuned finds %s (see /var/log/tuned/tuned.log; systemctl restart tuned re-applies the profile)' % (
            '; '.join('%s%s is %s, expected %s' % ('device %s: ' % f['device'] if f['device'] else '', f['option'],
                                                   f['current'], f['expected']) if f['current'] is not None
                      else f['option'] for f in failures))
    else:
        first = ((out or '') + '\n' + (err or '')).strip().splitlines()
        summary = 'rc %s: %s (see /var/log/tuned/tuned.log)' % (rc, first[0] if first else 'no output')
    return {'rc': rc, 'passed': passed, 'failures': failures, 'summary': summary}
