# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Measuring the read-ahead window a running reader faults with, from outside the process (issue 39).

What a process read from storage per major page fault is the window its mapped files fault with
(``do_sync_mmap_readahead`` in mm/filemap.c reads ``ra_pages`` around a fault, from the file's own
copy taken at open). Both counters are in ``/proc`` for any process, on every kernel the collection
supports, with no ``pidfd_getfd``, ptrace attach or eBPF (see docs/design.md, "Measuring a running
reader", for the rule and the figures measured on a real kernel).

Kernel sources (torvalds/linux; the formats are the same at v3.10, RHEL 7, and v4.18, RHEL 8):

- ``/proc/PID/io``: fs/proc/base.c ``do_io_accounting()``, called with ``whole`` = 1 by
  ``proc_tgid_io_accounting()`` (``proc_tid_io_accounting()`` is the per-thread file under
  ``task/``): the thread group's counters (the dead threads' in ``signal->ioac`` plus each live
  thread's), printed as seven ``name: %llu`` lines, ``rchar`` ``wchar`` ``syscr`` ``syscw``
  ``read_bytes`` ``write_bytes`` ``cancelled_write_bytes``. v3.10 ``sprintf``s them into a page
  after ``ptrace_may_access(task, PTRACE_MODE_READ)``; v4.18 ``seq_printf``s the same text after
  ``PTRACE_MODE_READ_FSCREDS``. Either takes the task's ``cred_guard_mutex`` (killable). Needs
  ``CONFIG_TASK_IO_ACCOUNTING`` (RHEL enables it); without it the file does not exist.
  ``read_bytes`` is counted when a read bio is submitted (``task_io_account_read()``), ``rchar``
  and ``syscr`` by the read-like system calls (cache hits and sockets included).
- ``/proc/PID/stat``: fs/proc/array.c ``do_task_stat()`` with ``whole`` = 1 (``proc_tgid_stat()``)
  sums ``maj_flt`` over the live threads and adds ``signal->maj_flt`` (the dead ones): field 12
  (proc(5)). ``starttime`` is field 22, in clock ticks since boot. The command (field 2) is
  printed between ``(`` and ``)`` as it is: it may hold spaces and parentheses, so the fields
  are split after the *last* ``)``. 52 fields on both kernels.

Plain functions over a root path (``/`` on a host, a fake tree in the unit tests):

- :func:`parse_io`, :func:`parse_stat`, :func:`read_sample`: one process's counters, every text
  read back as hostile (size cap, regular file, each field present once, decimal, below 2**64);
- :func:`measure`: sample every given process, sleep ONE window for all of them, sample again,
  pair the samples by (pid, start time), and give each pid its measurement or why there is none;
- :func:`conclusive`, :func:`fault_kib`, :func:`thresholds`, :func:`verdict` (:func:`judge` on one entry of
  :func:`measure`'s result): the decision table.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat
import time

DEFAULT_SECONDS = 3
MAX_SECONDS = 30
MAX_PIDS = 4096           # processes measured in one window; more are refused, not sampled
READ_CAP = 4096           # bytes of /proc/PID/io (about 150) or stat (about 350) read at most
MAX_COUNTER = 2 ** 64     # the kernel prints u64 counters
MAX_DIGITS = 20

# The rule (docs/design.md, "Measuring a running reader"; figures measured on a real kernel).
MIN_FAULTS = 20           # fewer major faults in the window: 'idle', no measurement
READ_AMPLIFICATION = 4    # read() fetches at most 4x what it returns (a stream's first reads, measured)
RCHAR_SHARE = 1.0 / READ_AMPLIFICATION  # above it, read() alone may account for all of read_bytes
PAGE_FLOOR_KIB = 64       # a fault reads one page at least (64 KiB pages on ppc64le and aarch64)
FINE_FACTOR = 2           # at most 2x the device's window: measured at the window
STALE_FACTOR = 4          # above 4x the device's window: measured stale

REASONS = ('idle', 'gone', 'unreadable', 'off')
IO_FIELDS = ('rchar', 'syscr', 'read_bytes')


def _counter(text):
    """A kernel ``%llu``/``%lu``/``%d`` field as an int; ValueError when it is not one."""
    if not text or len(text) > MAX_DIGITS or not text.isdigit():
        raise ValueError('not a counter: %r' % (text[:MAX_DIGITS + 1],))
    value = int(text)
    if value >= MAX_COUNTER:
        raise ValueError('counter out of range: %s' % text)
    return value


def parse_io(text):
    """``{'rchar', 'syscr', 'read_bytes'}`` (ints) from the text of /proc/PID/io; ValueError when malformed.

    Each of the three must appear exactly once, as ``name: decimal``; other lines (``wchar``...) are
    checked for their form only.
    """
    if not isinstance(text, str) or len(text) > READ_CAP:
        raise ValueError('io: not a text of at most %d bytes' % READ_CAP)
    out = {}
    for line in text.splitlines():
        if not line:
            continue
        name, sep, value = line.partition(': ')
        if not sep or not name or not name.replace('_', '').isalpha():
            raise ValueError('io: not a "name: value" line: %r' % line[:80])
        if name in IO_FIELDS:
            if name in out:
                raise ValueError('io: %s twice' % name)
            out[name] = _counter(value.strip())
    missing = [n for n in IO_FIELDS if n not in out]
    if missing:
        raise ValueError('io: no %s' % ', '.join(missing))
    return out


def parse_stat(text):
    """``{'majflt', 'starttime'}`` (ints) from the text of /proc/PID/stat; ValueError when malformed.

    ``PID (comm) S ...``: the command between the first ``(`` and the *last* ``)``; the fields after
    it start at field 3 (state), so field 12 (``majflt``) is the 10th and field 22 (``starttime``)
    the 20th.
    """
    if not isinstance(text, str) or len(text) > READ_CAP:
        raise ValueError('stat: not a text of at most %d bytes' % READ_CAP)
    left, right = text.find(' ('), text.rfind(')')
    if left < 1 or right < left:
        raise ValueError('stat: no "PID (command)"')
    _counter(text[:left])
    fields = text[right + 1:].split()
    if len(fields) < 20:
        raise ValueError('stat: %d fields after the command, 20 needed' % len(fields))
    return {'majflt': _counter(fields[9]), 'starttime': _counter(fields[19])}


def _read_capped(path):
    """The text of a /proc file (at most READ_CAP bytes), or None when the process is gone.

    IOError/OSError when it cannot be read (EACCES: a ptrace access check or an LSM refused), and
    ValueError when it is not a regular file or longer than the cap.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (IOError, OSError) as e:
        if e.errno in (errno.ENOENT, errno.ESRCH):
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError('%s: not a regular file' % path)
        data = b''
        while len(data) <= READ_CAP:
            chunk = os.read(fd, READ_CAP + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except (IOError, OSError) as e:
        if e.errno == errno.ESRCH:
            return None
        raise
    finally:
        os.close(fd)
    if len(data) > READ_CAP:
        raise ValueError('%s: longer than %d bytes' % (path, READ_CAP))
    text = data.decode('utf-8', 'replace')
    return text if str is not bytes else text.encode('utf-8')


def read_sample(root, pid):
    """One sample of process ``pid``: ``('ok', {'starttime', 'majflt', 'read_bytes', 'rchar', 'syscr'})``,
    ``('gone', None)`` or ``('unreadable', why)``.

    ``stat`` is read before and after ``io``: a start time that changed in between is a pid reused
    while it was read (``gone``).
    """
    base = os.path.join(root, 'proc', str(int(pid)))
    try:
        first = _read_capped(os.path.join(base, 'stat'))
        io_text = None if first is None else _read_capped(os.path.join(base, 'io'))
        last = None if io_text is None else _read_capped(os.path.join(base, 'stat'))
        if last is None:
            return 'gone', None
        before, sample = parse_stat(first), parse_stat(last)
        sample.update(parse_io(io_text))
    except (IOError, OSError) as e:
        return 'unreadable', '%s (%s)' % (os.strerror(e.errno) if e.errno else str(e), 'io or stat')
    except ValueError as e:
        return 'unreadable', str(e)
    if before['starttime'] != sample['starttime']:
        return 'gone', None
    return 'ok', sample


def window_problem(value):
    """Why ``value`` is not a measuring window (a module's ``measure_readers``), with the fix; None when it is."""
    try:
        window_seconds(value)
    except ValueError as e:
        return '%s: give 0 to turn the measurement off, or the seconds to measure (%d at most)' % (e, MAX_SECONDS)
    return None


def window_seconds(value):
    """The measuring window in seconds (a float from 0 to MAX_SECONDS; 0 turns measuring off).

    ValueError for anything else (a bool, a negative or larger number, a text that is no number).
    """
    if isinstance(value, bool):
        raise ValueError('the measuring window is a number of seconds, not %r' % (value,))
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError('the measuring window is a number of seconds, not %r' % (value,))
    if not 0 <= seconds <= MAX_SECONDS:  # NaN fails both
        raise ValueError('the measuring window is 0 (off) to %d seconds, not %r' % (MAX_SECONDS, value))
    return seconds


def _clock():
    return getattr(time, 'monotonic', time.time)()


def _pass(root, pids):
    return dict((pid, read_sample(root, pid)) for pid in pids)


def _pids(pids):
    """The distinct pids to measure (ints), at most MAX_PIDS, and the refused rest."""
    seen, out, refused = set(), [], []
    for pid in pids:
        pid = int(pid)
        if pid in seen:
            continue
        seen.add(pid)
        (out if len(out) < MAX_PIDS else refused).append(pid)
    return out, refused


def unmeasured(reason, detail=None):
    """Why a process has no measurement: ``{'unmeasured': reason}`` (one of REASONS), with a ``detail``."""
    out = {'unmeasured': reason}
    if detail:
        out['detail'] = detail
    return out


def measured(first, second, seconds):
    """The measurement from two samples of one process (same start time): a ``{'measured': {...}}`` or an
    ``unmeasured``: 'unreadable' when a counter went backwards; 'idle' under MIN_FAULTS major faults, with
    the same figures but ``kib_per_fault`` (a descriptor-only reader shows ``read_kib`` beside ``rchar_kib``)."""
    delta = dict((k, second[k] - first[k]) for k in ('majflt', 'read_bytes', 'rchar', 'syscr'))
    if min(delta.values()) < 0:
        return unmeasured('unreadable', 'a counter went backwards: %s' % ', '.join(
            sorted(k for k, v in delta.items() if v < 0)))
    faults = delta['majflt']
    figures = {'faults': faults, 'seconds': round(seconds, 2),
               'read_kib': int(round(delta['read_bytes'] / 1024.0)), 'rchar_kib': int(round(delta['rchar'] / 1024.0))}
    if faults < MIN_FAULTS:
        out = unmeasured('idle', '%d major faults in %.1f s (%d needed)' % (faults, seconds, MIN_FAULTS))
        out.update(figures)
        return out
    figures['kib_per_fault'] = round(delta['read_bytes'] / 1024.0 / faults, 1)
    return {'measured': figures}


def measure(root, pids, seconds=DEFAULT_SECONDS, starts=None, sleep=None, clock=None):
    """Measure every process of ``pids`` over one window: ``{pid: {'measured': {...}} | unmeasured(...)}``.

    ``measured``: ``{'kib_per_fault', 'faults', 'seconds', 'read_kib', 'rchar_kib'}``. ``unmeasured``:
    ``'off'`` (``seconds`` is 0), ``'idle'``, ``'gone'`` (exited, or the pid now names another
    process: its start time differs from the first sample's, or from ``starts[pid]``, the clock ticks
    the scan saw), ``'unreadable'`` (a refusal, a malformed text, over MAX_PIDS). ``sleep`` and
    ``clock`` are injectable (tests); the window is slept once for all the processes.
    """
    seconds = window_seconds(seconds)
    sleep = sleep or time.sleep
    clock = clock or _clock
    starts = starts or {}
    pids, refused = _pids(pids)
    out = dict((pid, unmeasured('unreadable', 'over the cap of %d processes a window' % MAX_PIDS)) for pid in refused)
    if not seconds:
        out.update((pid, unmeasured('off')) for pid in pids)
        return out
    first = _pass(root, pids)
    began = clock()
    sleep(seconds)
    ended = clock()
    second = _pass(root, [pid for pid in pids if first[pid][0] == 'ok'])
    for pid in pids:
        out[pid] = _pair(first[pid], second.get(pid), starts.get(pid), max(ended - began, 0.0))
    return out


def _pair(first, second, start, seconds):
    """One process's outcome from its two samples, each ``(state, sample or why)``."""
    if first[0] != 'ok':
        return unmeasured(first[0], first[1])
    if start is not None and first[1]['starttime'] != start:
        return unmeasured('gone', 'the pid names another process than the one scanned')
    if second[0] != 'ok':
        return unmeasured(second[0], second[1])
    if second[1]['starttime'] != first[1]['starttime']:
        return unmeasured('gone', 'the process ended during the window; the pid names another one')
    return measured(first[1], second[1], seconds)


def conclusive(measurement):
    """Whether ``measurement`` (a ``measured`` mapping) says the window the process faults with.

    Enough major faults (MIN_FAULTS), and what the read-like system calls returned (``rchar``) small
    beside what was read from storage: ``read_bytes`` also counts ``read()`` misses, with their own
    read-ahead (up to READ_AMPLIFICATION times what they return), and other devices. At most
    RCHAR_SHARE of ``read_bytes``: above it the system calls alone may account for all of it. How much
    is left for the faults is :func:`fault_kib`, which :func:`verdict` uses for 'stale'.
    """
    if not _figures(measurement):
        return False
    m = measurement
    return m['faults'] >= MIN_FAULTS and m['rchar_kib'] <= RCHAR_SHARE * m['read_kib']


def _figures(measurement):
    """Whether ``measurement`` is a mapping whose figures are all numbers (not bools), ``faults`` above 0."""
    try:
        values = [measurement[k] for k in ('kib_per_fault', 'faults', 'read_kib', 'rchar_kib')]
    except (KeyError, TypeError, IndexError):
        return False
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return numeric and measurement['faults'] > 0


def fault_kib(measurement):
    """KiB read per major fault once the most the ``read()`` calls could have caused is taken off:
    ``(read_kib - READ_AMPLIFICATION * rchar_kib) / faults``, 0 at least (the evidence for 'stale')."""
    m = measurement
    if not _figures(m):
        return 0.0
    return max(m['read_kib'] - READ_AMPLIFICATION * m['rchar_kib'], 0) / float(m['faults'])


def thresholds(device_kb):
    """``(fine_kib, stale_kib)``: at most ``fine_kib`` per fault is at the device's window (with margin),
    above ``stale_kib`` is stale. The window counts for PAGE_FLOOR_KIB at least (one page per fault)."""
    window = max(int(device_kb or 0), PAGE_FLOOR_KIB)
    return FINE_FACTOR * window, STALE_FACTOR * window


def verdict(inferred_stale, measurement, reason, device_kb):
    """``(stale, basis)``, ``basis`` 'measured' or 'inferred': the measurement where it is conclusive.

    - measured above the device's window with margin and conclusive: stale, whatever the inference
      (``inferred_stale``: the record and the boot rule). Above means :func:`fault_kib`, the ratio
      with the most the ``read()`` calls could have read taken off, over ``stale_kib``;
    - measured small is weaker evidence (``MMAP_LOTSAMISS`` pauses read-around, ``MADV_RANDOM`` turns
      it off): a reader the inference calls stale stays stale ('inferred'); one it does not that
      measures at the window (at most ``fine_kib``, with enough faults: ``read_bytes`` bounds the
      faults' reads, so ``rchar`` does not matter here) is fine, 'measured';
    - anything else (``reason``: no measurement; inconclusive; between the two thresholds): the
      inference decides, 'inferred'.
    """
    fine_kib, stale_kib = thresholds(device_kb)
    m = measurement if not reason and _figures(measurement) else None
    if m and conclusive(m) and fault_kib(m) > stale_kib:
        return True, 'measured'
    if inferred_stale:
        return True, 'inferred'
    if m and m['faults'] >= MIN_FAULTS and m['kib_per_fault'] <= fine_kib:
        return False, 'measured'
    return False, 'inferred'


def judge(outcome, inferred_stale, device_kb):
    """:func:`verdict` on one process's entry of :func:`measure`'s result (None, when it was not measured,
    counts as ``off``)."""
    outcome = outcome if isinstance(outcome, dict) else unmeasured('off')
    return verdict(inferred_stale, outcome.get('measured'), outcome.get('unmeasured'), device_kb)
