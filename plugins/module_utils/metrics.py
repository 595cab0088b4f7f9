# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Drift as a metric: the host's tuning state as a Prometheus textfile-collector file.

node_exporter has no read-ahead metric (prometheus/node_exporter#460 points such data at its
textfile collector, ``--collector.textfile.directory``). This file turns what ``tuning_facts``
returns (``ansible_facts.os_tuning``: devices, THP, compliance, readers) into the Prometheus text
exposition format (version 0.0.4) and writes it, atomically, as ``<directory>/<name>``.

Three parts, plain functions over a root path (``/`` on a host, a fake tree in the unit tests):

- :func:`samples` and :func:`render`: the metric families, in a fixed order, samples sorted by
  their labels, label values escaped (``\\``, ``"``, newline), so that the same state renders the
  same bytes. Only :data:`TIMESTAMP` and the EBS volume's own counters change from run to run.
- :func:`check_directory`, :func:`read_existing`: the owned-file rules for a directory the operator
  names and a file this collection owns in it. The directory must be a real directory (not a
  symbolic link), owned by root (or this run's user) and not writable by group or others, and so
  must every directory above it (a sticky one such as /tmp excepted): otherwise another user could
  swap the file or the temporary file under a root process. The file must be absent, or a regular
  file with one link, owned by root (or this run's user), not writable by group or others, and
  written by this collection (its managed header). Anything else is refused with
  :class:`MetricsError`, naming the path and the fix, and is never opened (a FIFO), followed (a
  link) or replaced.
- :func:`publish`: under the file's lock, compare and write (files.atomic_write: a temporary file
  in the directory, renamed over the target, mode 0644, owner root).

Names follow the Prometheus conventions that ``promtool check metrics`` lints (client_golang's promlint): base
units (read-ahead in ``_bytes``, not ``_kb``, which promtool reports as an abbreviated unit; KiB x 1024), HELP
on every family, ``_info`` families of value 1, ``_timestamp_seconds`` on a gauge, no type in a name.

``changed``: a run is changed when a value other than :data:`TIMESTAMP` or an EBS counter differs (or the file is
new, or its mode or owner differ). A run that finds the same state still rewrites the file, so the
timestamp (and node_exporter's ``node_textfile_mtime_seconds``) always tells when the host was
last looked at, but reports ``changed: false``: a scheduled audit of a compliant host stays green,
and a role run stays idempotent.

Python 2.7, 3.6 and newer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import math
import os
import re
import stat

from ansible_collections.aemops.os_tuning.plugins.module_utils import aem, files, runstate

PREFIX = 'aemops_os_tuning'
DEFAULT_NAME = 'aemops_os_tuning.prom'
TIMESTAMP = PREFIX + '_last_run_timestamp_seconds'
AEM_BYTES_PER_FAULT = PREFIX + '_aem_read_bytes_per_fault'
FILE_MODE = 0o644
MAX_BYTES = 1024 * 1024
HEADER = files.managed_header('textfile_metrics module', 'Read-ahead and THP drift for node_exporter\'s textfile '
                              'collector (--collector.textfile.directory).')

# The EBS volume's own counters (tuning_facts' ``ebs``, NVMe log page 0xD0; module_utils/ebs_stats.py), as Prometheus
# counters since the volume was attached, labelled by device and volume_id, written only where the page was read:
# (the page's key, the family's name after PREFIX_ebs_, the divisor to the base unit (microseconds: 10 ** 6), help).
_SINCE = ' since the volume was attached (its NVMe log page 0xD0).'
EBS_COUNTERS = (
    ('ebs_volume_performance_exceeded_iops', 'volume_iops_exceeded_seconds_total',
     10 ** 6, 'Seconds the EBS volume was at its IOPS cap' + _SINCE),
    ('ebs_volume_performance_exceeded_tp', 'volume_throughput_exceeded_seconds_total',
     10 ** 6, 'Seconds the EBS volume was at its throughput cap' + _SINCE),
    ('ec2_instance_performance_exceeded_iops', 'instance_iops_exceeded_seconds_total',
     10 ** 6, 'Seconds the EC2 instance was at its EBS IOPS cap, seen from this volume' + _SINCE),
    ('ec2_instance_performance_exceeded_tp', 'instance_throughput_exceeded_seconds_total',
     10 ** 6, 'Seconds the EC2 instance was at its EBS throughput cap, seen from this volume' + _SINCE),
    ('total_read_ops', 'read_ops_total', 1, 'Read operations of the EBS volume' + _SINCE),
    ('total_write_ops', 'write_ops_total', 1, 'Write operations of the EBS volume' + _SINCE),
    ('total_read_bytes', 'read_bytes_total', 1, 'Bytes read from the EBS volume' + _SINCE),
    ('total_write_bytes', 'written_bytes_total', 1, 'Bytes written to the EBS volume' + _SINCE),
    ('total_read_time', 'read_seconds_total', 10 ** 6, 'Seconds spent on reads of the EBS volume' + _SINCE),
    ('total_write_time', 'write_seconds_total', 10 ** 6, 'Seconds spent on writes of the EBS volume' + _SINCE),
)

# (name, help) in the order they are written. Every family but the EBS counters is a gauge; an _info family has the
# value 1 and carries its information in labels (the Prometheus convention where the text format has no info type).
FAMILIES = (
    (TIMESTAMP, 'Time of the last run of aemops.os_tuning on this host (Unix time, the host\'s clock).'),
    (PREFIX + '_run_info', 'The last run: the role\'s mode (apply or audit) and state (present or absent).'),
    (PREFIX + '_compliant', '1 when the last run found the host as wanted (no misses, no error), else 0.'),
    (PREFIX + '_misses', 'Number of things the last run found not as wanted (tuning_facts compliance misses).'),
    (PREFIX + '_misses_by_kind', 'Misses of the last run by kind (read_ahead, persistence, thp, tuned_profile, '
                                 'reader, ...); kinds with no miss are left out.'),
    (PREFIX + '_run_failed', '1 when a step of the last run failed (the role\'s first error), else 0.'),
    (PREFIX + '_fact_errors', 'Number of things tuning_facts could not read on the last run.'),
    (PREFIX + '_read_ahead_bytes', 'Read-ahead of the block device in bytes, as the kernel has it now '
                                   '(/sys/block/<device>/queue/read_ahead_kb x 1024).'),
    (PREFIX + '_read_ahead_wanted_bytes', 'Read-ahead in bytes the collection wants for a device it tunes '
                                          '(aem_tuning_read_ahead_kb x 1024).'),
    (PREFIX + '_read_ahead_source_info', 'What explains the device\'s read-ahead: source_kind is tuned, udev_rule, '
                                         'kernel or unknown; source says which (tuning_facts set_by).'),
    (PREFIX + '_target_info', 'A device the collection tunes, and the target that names it (a repository path, a '
                              'device given, or beneath another device).'),
    (PREFIX + '_thp_info', 'Transparent Huge Pages as the kernel has them now (enabled and defrag).'),
    (PREFIX + '_stale_readers', 'Processes that still read a tuned device with an earlier read-ahead: fix is '
                                'refresh (open files, refreshed by an apply run) or restart (mapped files).'),
    (AEM_BYTES_PER_FAULT, 'Bytes read from the disk per major page fault, the largest over the processes of AEM\'s '
                          'unit whose faults the last run measured (kib_per_fault x 1024); absent when none was.'),
) + tuple((PREFIX + '_ebs_' + name, help_text) for _key, name, _scale, help_text in EBS_COUNTERS)
NAMES = tuple(name for name, _help in FAMILIES)
# The families that are counters (the rest are gauges): the EBS volume's own, since it was attached.
COUNTERS = frozenset(PREFIX + '_ebs_' + name for _key, name, _scale, _help in EBS_COUNTERS)

_LABEL_NAME = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*$')
_FILE_NAME = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]*\.prom\Z')
_NOFOLLOW = getattr(os, 'O_NOFOLLOW', 0)
_CLOEXEC = getattr(os, 'O_CLOEXEC', 0)
_TEXT = type(u'')
_INTEGERS = (int, type(2 ** 64))  # int and Python 2's long


class MetricsError(files.FileError):
    """The metrics file cannot be written safely; the message names the path and the fix. Nothing was changed."""


# ---------------------------------------------------------------------------------------------
# Text

def text(value):
    """``value`` as text (unicode on Python 2) that encodes to UTF-8: bytes are decoded (bad bytes become U+FFFD);
    lone surrogates (an undecodable file name on Python 3) become "?"."""
    if isinstance(value, bytes):
        return value.decode('utf-8', 'replace')
    if not isinstance(value, _TEXT):
        value = _TEXT(value)
    try:
        value.encode('utf-8')
        return value
    except UnicodeEncodeError:
        return value.encode('utf-8', 'replace').decode('utf-8')


def escape_label(value):
    """A label value for the text format: backslash, double quote and line feed escaped (nothing else is)."""
    return text(value).replace(u'\\', u'\\\\').replace(u'"', u'\\"').replace(u'\n', u'\\n')


def escape_help(value):
    """A HELP text: backslash and line feed escaped."""
    return text(value).replace(u'\\', u'\\\\').replace(u'\n', u'\\n')


def number(value):
    """A sample value: an int as digits, a bool as 1 or 0, a float in the shortest exact form."""
    if isinstance(value, bool):
        return u'1' if value else u'0'
    if isinstance(value, float):
        if math.isnan(value):
            return u'NaN'
        if value in (float('inf'), float('-inf')):
            return u'+Inf' if value > 0 else u'-Inf'
        if value.is_integer() and abs(value) < 2 ** 53:
            return _TEXT(int(value))
        return _TEXT(repr(value))
    return _TEXT(int(value))


# ---------------------------------------------------------------------------------------------
# From the facts to samples

def source_kind(set_by):
    """tuned, udev_rule, kernel or unknown, from tuning_facts' ``set_by`` text (kernel_readahead.set_by)."""
    if not set_by:
        return 'unknown'
    if set_by.startswith('tuned '):
        return 'tuned'
    if set_by == 'aemops udev rule':
        return 'udev_rule'
    if set_by.startswith(('kernel default', 'rotational default')):
        return 'kernel'
    return 'unknown'


def _targets(facts):
    """[(device, target)] for the devices the run tunes: the governing device of each repository path, each
    device given (by its spec), and the disks beneath them (``beneath <device>``), in the plan's terms."""
    plan = facts.get('plan') or {}
    paths = facts.get('paths') or {}
    pairs = []
    for path in plan.get('targets') or []:
        device = (paths.get(path) or {}).get('device')
        if device:
            pairs.append((device, path))
    for spec, name in sorted((plan.get('devices') or {}).items()):
        if name:
            pairs.append((name, spec))
    for name, disks in sorted((plan.get('underlying') or {}).items()):
        for disk in disks or []:
            pairs.append((disk, 'beneath %s' % name))
    return pairs


def _int(value):
    """An int from an int or a string of ASCII digits (ansible-core before 2.19 templates numbers as text); else
    None (auto, null, a backout)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, _INTEGERS):
        return int(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, (bytes, _TEXT)) and re.match(r'^[0-9]+$', text(value).strip()):
        return int(text(value).strip())
    return None


def samples(facts, now, read_ahead_kb=None, error='', mode=None, state=None, aem_service=''):
    """{family name: [(labels as ((name, value), ...), value)]} for ``facts`` (tuning_facts' ``os_tuning``).

    ``read_ahead_kb``: the read-ahead the run wants for its target devices (a number; None, ``auto`` or a
    backout: no wanted value). ``error``: the run's first error (the role's), which makes the host not compliant.
    ``mode``, ``state``: the role's, for ``_run_info``. ``now``: Unix time of the run. ``aem_service``: AEM's
    systemd unit (with or without .service; aem.is_aem), whose measured readers give :data:`AEM_BYTES_PER_FAULT`.
    """
    facts = facts or {}
    out = dict((name, []) for name in NAMES)

    def add(name, value, **labels):
        out[name].append((tuple(sorted(labels.items())), value))

    add(TIMESTAMP, round(float(now), 3))
    if mode or state:
        add(PREFIX + '_run_info', 1, mode=mode or '', state=state or '')
    compliance = facts.get('compliance') or {}
    found = compliance.get('misses')
    if isinstance(found, list):
        add(PREFIX + '_compliant', not found and not error)
        add(PREFIX + '_misses', len(found))
        kinds = {}
        for m in found:
            kind = (m.get('kind') if isinstance(m, dict) else None) or 'other'
            kinds[kind] = kinds.get(kind, 0) + 1
        for kind, count in kinds.items():
            add(PREFIX + '_misses_by_kind', count, kind=kind)
    add(PREFIX + '_run_failed', bool(error))
    add(PREFIX + '_fact_errors', len(facts.get('errors') or []))
    for name, info in (facts.get('block_devices') or {}).items():
        kb = (info or {}).get('read_ahead_kb')
        if kb is None:
            continue
        add(PREFIX + '_read_ahead_bytes', kb * 1024, device=name)
        set_by = info.get('set_by')
        add(PREFIX + '_read_ahead_source_info', 1, device=name, source_kind=source_kind(set_by), source=set_by or '')
    pairs = _targets(facts)
    wanted = _int(read_ahead_kb) if (state or 'present') == 'present' else None
    for device in sorted(set(d for d, _t in pairs)):
        if wanted is not None:
            add(PREFIX + '_read_ahead_wanted_bytes', wanted * 1024, device=device)
    for device, target in sorted(set(pairs)):
        add(PREFIX + '_target_info', 1, device=device, target=target)
    runtime = (facts.get('thp') or {}).get('runtime') or {}
    enabled, defrag = [(runtime.get(a) or {}).get('value') for a in ('enabled', 'defrag')]
    if enabled is not None or defrag is not None:
        add(PREFIX + '_thp_info', 1, enabled=enabled or '', defrag=defrag or '')
    readers = facts.get('readers')
    if isinstance(readers, dict):
        add(PREFIX + '_stale_readers', len(readers.get('stale') or []), fix='refresh')
        add(PREFIX + '_stale_readers', len(readers.get('needs_restart') or []), fix='restart')
        kib = aem_kib_per_fault(readers, aem_service)
        if kib is not None:
            add(AEM_BYTES_PER_FAULT, kib * 1024)
    _ebs_samples(facts.get('ebs'), add)
    return out


def _kib_per_fault(entry):
    """A reader entry's measured KiB per major fault: a finite number >= 0 from ``measured`` (a mapping) with at
    least one fault; else None (not measured, inferred, or a value of another type)."""
    measured = entry.get('measured') if isinstance(entry, dict) else None
    if not isinstance(measured, dict):
        return None
    kib, faults = measured.get('kib_per_fault'), measured.get('faults')
    if isinstance(kib, bool) or not isinstance(kib, _INTEGERS + (float,)):
        return None
    if isinstance(faults, bool) or not isinstance(faults, _INTEGERS) or faults < 1:
        return None
    kib = float(kib)
    if math.isnan(kib) or math.isinf(kib) or kib < 0:
        return None
    return kib


def aem_kib_per_fault(readers, unit):
    """The largest measured KiB per major fault over the reader entries (``stale``, ``needs_restart``, ``fine``)
    of AEM's ``unit``, or None: no unit given, no entry of that unit, or none measured."""
    found = []
    for key in ('stale', 'needs_restart', 'fine'):
        entries = readers.get(key)
        for entry in (entries if isinstance(entries, list) else [])[:10000]:
            if isinstance(entry, dict) and aem.is_aem(entry, unit):
                kib = _kib_per_fault(entry)
                if kib is not None:
                    found.append(kib)
    return max(found) if found else None


def _ebs_samples(ebs, add):
    """The EBS volumes' own counters (tuning_facts' ``ebs``), where the page was read."""
    for device, found in sorted((ebs if isinstance(ebs, dict) else {}).items()):
        stats = (found or {}).get('stats') if isinstance(found, dict) else None
        if not isinstance(stats, dict):
            continue  # no page read: the reason is in the facts and the report, not a series
        for key, name, scale, _help in EBS_COUNTERS:
            value = _int(stats.get(key))
            if value is not None:
                add(PREFIX + '_ebs_' + name, value / float(scale) if scale != 1 else value, device=device,
                    volume_id=found.get('volume_id') or '')


def _sort_key(sample):
    return tuple((text(k), text(v)) for k, v in sample[0])


def render(families):
    """The text exposition format of ``families`` (from :func:`samples`): the managed header, then for each
    family with samples its HELP and TYPE lines and its samples sorted by label values. Text, ending in a
    newline."""
    lines = [text(line) for line in HEADER]
    helps = dict(FAMILIES)
    for name in NAMES:
        found = families.get(name) or []
        if not found:
            continue
        lines.append(u'# HELP %s %s' % (name, escape_help(helps[name])))
        lines.append(u'# TYPE %s %s' % (name, 'counter' if name in COUNTERS else 'gauge'))
        for labels, value in sorted(found, key=_sort_key):
            for key, _v in labels:
                if not _LABEL_NAME.match(key) or key.startswith('__'):
                    raise ValueError('invalid label name %r' % key)
            body = u','.join(u'%s="%s"' % (text(k), escape_label(v)) for k, v in labels)
            lines.append(u'%s%s %s' % (name, u'{%s}' % body if body else u'', number(value)))
    return u'\n'.join(lines) + u'\n'


def without_timestamp(content):
    """``content`` without the sample lines of :data:`TIMESTAMP` and of the counters (:data:`COUNTERS`, which move
    by themselves between runs): what decides ``changed``."""
    if content is None:
        return None
    moving = (TIMESTAMP + u' ',) + tuple(text(name) + u'{' for name in sorted(COUNTERS))
    return u'\n'.join(line for line in text(content).split(u'\n') if not line.startswith(moving))


# ---------------------------------------------------------------------------------------------
# The owned-file rules for the directory and the file

def check_name(name):
    """Why ``name`` cannot be the file's name, or None: a plain name ending in .prom (node_exporter reads only
    those), not hidden (the temporary files are), no slash."""
    if not isinstance(name, (bytes, _TEXT)) or not _FILE_NAME.match(text(name)) or len(name) > 200:
        return ('name "%s" is not a file name node_exporter reads: give a plain name (letters, digits, "_", "-", '
                '".") ending in .prom, for example %s.' % (name, DEFAULT_NAME))
    return None


def _dir_problem(st, sticky_ok):
    """What makes a directory's stat ``st`` unsafe to write in as root, or None (runstate.dir_problem)."""
    found = runstate.dir_problem(st, sticky_ok=sticky_ok)
    return found[1] if found else None


def _parents(path):
    """'/', '/a', '/a/b' for '/a/b/c' (the directories above ``path``, outermost first)."""
    out, current = [], os.path.dirname(path)
    while True:
        out.insert(0, current)
        if current in ('/', ''):
            return out
        current = os.path.dirname(current)


def _fix(display):
    return ('node_exporter only reads the directory: make it root\'s and not writable by others (chown root:root '
            '%s; chmod 0755 %s), or name another one.' % (display, display))


def check_directory(full, display=None):
    """Raise MetricsError unless the directory ``full`` (a host path; ``display`` is the target path) exists and
    no user other than root (or this run's user) can change what a name in it points to.

    The directory itself: a real directory (never a symbolic link), owned by root or this run's user, not
    writable by group or others. Every directory above it, as written and as resolved: owned by root or this
    run's user, not writable by group or others unless sticky (like /tmp, where only an entry's owner may
    rename it); a symbolic link on the way must be root's. Nothing is created or changed.
    """
    display = display or full
    try:
        files.check_path_form(display, 'textfile directory')
    except files.FileError as e:
        raise MetricsError(e.args[0] if e.args else str(e))  # the text as it is (str() fails on non-ASCII on Python 2)
    try:
        st = os.lstat(full)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise MetricsError('the textfile directory %s does not exist. Give the directory node_exporter reads '
                               '(its --collector.textfile.directory); this module does not create it.' % display)
        raise MetricsError('cannot check the textfile directory %s: %s.' % (display, files.describe_os_error(e)))
    if stat.S_ISLNK(st.st_mode):
        raise MetricsError('the textfile directory %s is a symbolic link (to %s): refused, it is never followed. '
                           'Give the real directory.' % (display, runstate.link_target(full)))
    problem = _dir_problem(st, sticky_ok=False)
    if problem:
        raise MetricsError('the textfile directory %s %s: another user could replace the metrics file. %s'
                           % (display, problem, _fix(display)))
    seen = set()
    for chain in (_parents(full), _parents(os.path.realpath(full))):
        for parent in chain:
            if parent in seen:
                continue
            seen.add(parent)
            try:
                lst = os.lstat(parent)
                pst = os.stat(parent)
            except OSError as e:
                raise MetricsError('cannot check %s, above the textfile directory %s: %s.'
                                   % (parent, display, files.describe_os_error(e)))
            if stat.S_ISLNK(lst.st_mode) and lst.st_uid not in runstate.owners():
                raise MetricsError('%s, above the textfile directory %s, is a symbolic link owned by %s: that user '
                                   'could point it elsewhere. Give a path whose links are root\'s.'
                                   % (parent, display, runstate.owner_text(lst.st_uid)))
            problem = _dir_problem(pst, sticky_ok=True)
            if problem:
                raise MetricsError('%s, above the textfile directory %s, %s: another user could replace the '
                                   'directory. Give a directory whose parents are root\'s and not writable by '
                                   'others.' % (parent, display, problem))
    return st


def read_existing(full, display=None):
    """(text, stat) of the metrics file, or (None, None) when it is absent. MetricsError (nothing opened that
    could block, nothing followed) when it is not a file this collection wrote and may replace: a symbolic link,
    not a regular file, another user's, hard-linked, writable by group or others, larger than MAX_BYTES, not
    UTF-8, or without the managed header (another tool's file: reported, never overwritten). An empty file is
    taken as absent."""
    display = display or full
    try:
        st = os.lstat(full)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None, None
        raise MetricsError('cannot check %s: %s.' % (display, files.describe_os_error(e)))
    refuse = 'It is left as it is. Remove it (or choose another name) and run again.'
    if stat.S_ISLNK(st.st_mode):
        raise MetricsError('%s is a symbolic link (to %s): refused, never followed or replaced. %s'
                           % (display, runstate.link_target(full), refuse))
    kind = runstate.file_kind(st.st_mode)
    if kind is not None:
        raise MetricsError('%s is %s, not a regular file: it is not opened. %s' % (display, kind, refuse))
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError as e:
        raise MetricsError('cannot read %s: %s.' % (display, files.describe_os_error(e)))
    try:
        st = os.fstat(fd)
        kind = runstate.file_kind(st.st_mode)
        if kind is not None:
            raise MetricsError('%s is %s, not a regular file. %s' % (display, kind, refuse))
        if st.st_uid not in runstate.owners():
            raise MetricsError('%s is owned by %s, not root: another user\'s file is not replaced. %s'
                               % (display, runstate.owner_text(st.st_uid), refuse))
        if st.st_nlink != 1:
            raise MetricsError('%s has %d hard links (another name of the same file elsewhere): it is not '
                               'replaced. %s' % (display, st.st_nlink, refuse))
        if st.st_mode & 0o022:
            raise MetricsError('%s is writable by group or others (mode %04o): another user could have written it. '
                               '%s' % (display, stat.S_IMODE(st.st_mode), refuse))
        data = runstate.read_capped(fd, display, MAX_BYTES)
    except MetricsError:
        raise
    except files.FileError as e:
        raise MetricsError('%s %s' % (e, refuse))
    except OSError as e:
        raise MetricsError('cannot read %s: %s.' % (display, files.describe_os_error(e)))
    finally:
        os.close(fd)
    if not data:
        return None, st
    try:
        content = data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise MetricsError('%s is not UTF-8 text (byte %d): not written by aemops.os_tuning. %s'
                           % (display, e.start, refuse))
    if not content.startswith(u'# %s ' % files.MANAGED_MARK):
        raise MetricsError('%s was not written by aemops.os_tuning (no "%s" header): another tool\'s file is '
                           'not overwritten. %s' % (display, files.MANAGED_MARK, refuse))
    return content, st


def _attributes_differ(st):
    """Whether an existing file's mode or owner is not what the collection writes."""
    if st is None:
        return False
    owner_differs = runstate.euid() == 0 and (st.st_uid, st.st_gid) != (0, 0)
    return stat.S_IMODE(st.st_mode) != FILE_MODE or owner_differs


def publish(root, directory, name, content, check_mode=False, module=None):
    """Write ``content`` to ``<directory>/<name>`` (target paths under ``root``) by the owned-file rules.

    Returns {'path', 'changed', 'written', 'before'}: ``changed`` when the file is new, or a value other than the
    timestamp differs, or its mode or owner differ; ``written`` when it was (re)written (never in check mode;
    always when the content differs, the timestamp alone included). Raises MetricsError, having changed nothing.
    """
    problem = check_name(name)
    if problem:
        raise MetricsError(problem)
    full_dir = files.root_path(root, directory)
    check_directory(full_dir, directory)
    display = '%s/%s' % (directory.rstrip('/'), name)
    full = os.path.join(full_dir, name)
    content = text(content)
    try:
        with files.locked_all([display], root, required=False if check_mode else None):
            before, st = read_existing(full, display)
            changed = (before is None or without_timestamp(before) != without_timestamp(content)
                       or _attributes_differ(st))
            write = before != content or _attributes_differ(st)
            if write and not check_mode:
                files.check_owned_target(full, display)  # immutable or append-only, a file system we cannot write
                files.atomic_write(full, content.encode('utf-8'), FILE_MODE, module)
    except MetricsError:
        raise
    except files.FileError as e:
        raise MetricsError(e.args[0] if e.args else str(e))  # the text as it is (str() fails on non-ASCII on Python 2)
    except (IOError, OSError) as e:
        raise MetricsError('cannot write %s: %s.' % (display, files.describe_os_error(e)))
    return {'path': display, 'changed': changed, 'written': bool(write and not check_mode), 'before': before}
