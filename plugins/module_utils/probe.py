# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The I/O probe: what read-ahead does to Oak TarMK's random small reads, in numbers.

Oak's segment store reads 8-16 KiB records at random offsets of large memory-mapped tar
files. Each page fault on such a mapping makes the kernel read around the faulting page by
up to the device's ``read_ahead_kb``, so with 4096 KiB of read-ahead an 8 KiB record costs
the disk up to 4 MiB. The probe reproduces that on a scratch file and counts what the
governing block device actually read (``/sys/block/<dev>/stat``).

Sequence (:func:`run`): create a scratch file (unlinked at once and used through its open
descriptor, so nothing is left behind even when the process is killed), fill it with random
data (not sparse, not compressible), fsync it, drop its pages from the page cache with
``posix_fadvise(POSIX_FADV_DONTNEED)`` (only this file's pages: the global page cache is never
dropped) and check with ``mincore(2)`` that they are gone, measure the device's idle read
rate, read ``reads`` records of ``record_kb`` at random record-aligned offsets through mmap
or pread, wait for the device's in-flight I/O to finish, read the device counters again,
measure the idle read rate once more, and close (and so free) the file.

Everything here is a plain function over a ``root`` path (``/`` on a real host) with the
clock, the sleep, the record reader and the stat reader injectable, so that the arithmetic,
the bookkeeping and the cleanup can be unit-tested on a fake tree. Runs on Python 2.7, 3.6
and newer: ``os.posix_fadvise`` and ``os.pread`` are used where they exist (Python 3.3+),
libc's ``posix_fadvise`` through ctypes and ``lseek`` + ``read`` otherwise.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import binascii
import ctypes
import ctypes.util
import errno
import mmap
import os
import platform
import random
import time

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, compliance, ebs_stats
from ansible_collections.aemops.os_tuning.plugins.module_utils.files import read_text, remove_file, root_path

KIB = 1024
MIB = 1024 * 1024
# /sys/block/<dev>/stat counts 512-byte sectors, whatever the device's logical block size.
SECTOR_BYTES = 512
PAGE_BYTES = mmap.PAGESIZE
METHODS = ('mmap', 'pread')

SCRATCH_PREFIX = '.aemops-io-probe-'
DEFAULT_SEED = 4242
DEFAULT_SIZE_MB = 256
DEFAULT_RECORD_KB = 8
DEFAULT_READS = 2000
DEFAULT_TIMEOUT = 120
RECORD_ALIGN_KB = 4
WRITE_CHUNK = MIB

# The reads may pull at most compliance.SPARSE_FRACTION of the file (reads x read-ahead window), so
# that read-ahead, not the file size, bounds what the device reads.
# Free space needed: the file size plus this margin.
SPACE_MARGIN = 0.10
# Background reads above this fraction of what the probe measured make the result noisy.
NOISE_FRACTION = 0.10
# Idle window before (and after) the probe to measure the device's background read rate.
NOISE_WINDOW_S = 1.0
# How long to wait after the last read for the device's in-flight I/O (read-ahead still
# being completed) to finish before the counters are read: I/O is counted on completion.
SETTLE_LIMIT_S = 1.0
SETTLE_STEP_S = 0.01

# Field names of /sys/block/<dev>/stat (kernel Documentation/block/stat.rst). Kernels
# before 4.18 (RHEL 7) have the first 11, 4.18 adds the discard fields, 5.5 the flush ones.
# Sectors are 512 bytes, ticks are milliseconds.
STAT_FIELDS = (
    'read_ios', 'read_merges', 'read_sectors', 'read_ticks',
    'write_ios', 'write_merges', 'write_sectors', 'write_ticks',
    'in_flight', 'io_ticks', 'time_in_queue',
    'discard_ios', 'discard_merges', 'discard_sectors', 'discard_ticks',
    'flush_ios', 'flush_ticks',
)
MIN_STAT_FIELDS = 11


class ProbeError(Exception):
    """The probe cannot run or was stopped. The message names the thing and the fix."""


def _default_clock():
    """The best clock this Python has: perf_counter (3.3+), else time.time (2.7)."""
    return getattr(time, 'perf_counter', None) or getattr(time, 'monotonic', None) or time.time


# ---------------------------------------------------------------------------------------------
# Device counters

def parse_stat(text, source='stat'):
    """A dict of the /sys/block/<dev>/stat counters in ``text`` (see STAT_FIELDS)."""
    fields = (text or '').split()
    if len(fields) < MIN_STAT_FIELDS or not all(f.isdigit() for f in fields):
        raise ProbeError('cannot parse the block device counters in %s: %r (expected at least %d numbers, '
                         'see the kernel\'s Documentation/block/stat.rst).' % (source, text, MIN_STAT_FIELDS))
    return dict(zip(STAT_FIELDS, [int(f) for f in fields]))


def stat_path(root, name):
    """The ``stat`` file of device ``name`` (partitions have their own, inside their disk's directory)."""
    return os.path.join(blockdev.device_dir(root, name), 'stat')


def read_stat(root, name):
    path = stat_path(root, name)
    text = read_text(path)
    if text is None:
        raise ProbeError('%s has no I/O counters (%s is missing), so the probe cannot measure it.' % (name, path))
    return parse_stat(text, path)


def read_delta(before, after):
    """Reads between two parsed stats: ``ios``, ``sectors``, ``bytes`` and ``ticks_ms``."""
    delta = {}
    for key, field in (('ios', 'read_ios'), ('sectors', 'read_sectors'), ('ticks_ms', 'read_ticks')):
        delta[key] = after[field] - before[field]
        if delta[key] < 0:
            raise ProbeError('the device\'s %s counter went backwards (%d -> %d): the counters were reset or '
                             'wrapped during the probe. Run it again.' % (field, before[field], after[field]))
    delta['bytes'] = delta['sectors'] * SECTOR_BYTES
    return delta


# ---------------------------------------------------------------------------------------------
# Arithmetic

def percentile(values, pct):
    """The ``pct`` percentile (0-100) of ``values``, linearly interpolated between the closest ranks.

    That is the common definition (numpy's default): the sorted values at rank
    ``(n - 1) * pct / 100``, interpolated. None for no values.
    """
    if not values:
        return None
    if pct < 0 or pct > 100:
        raise ValueError('percentile must be between 0 and 100, not %r' % (pct,))
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary(seconds):
    """Mean, p50, p99 and max of per-read latencies given in seconds, in milliseconds (3 decimals)."""
    if not seconds:
        return {'mean_ms': None, 'p50_ms': None, 'p99_ms': None, 'max_ms': None}
    ms = [s * 1000.0 for s in seconds]
    return {
        'mean_ms': round(sum(ms) / len(ms), 3),
        'p50_ms': round(percentile(ms, 50), 3),
        'p99_ms': round(percentile(ms, 99), 3),
        'max_ms': round(max(ms), 3),
    }


def amplification(device_bytes, reads, record_bytes):
    """Device bytes read per byte the probe asked for: ``device_bytes / (reads * record_bytes)``.

    1.0 means the disk read exactly the records; 512 means every 8 KiB record cost 4 MiB.
    None when no read was done.
    """
    if not reads or not record_bytes:
        return None
    return device_bytes / float(reads * record_bytes)


def bytes_per_read(device_bytes, reads):
    """Device bytes per probe read (over all reads: page-cache hits cannot be told apart), or None."""
    if not reads:
        return None
    return device_bytes / float(reads)


def window_bytes(read_ahead_kb, record_bytes):
    """What one read can make the device read at most: the read-ahead window or the record."""
    return max((read_ahead_kb or 0) * KIB, record_bytes)


def sparse_cap(reads, size_bytes, record_bytes, read_ahead_kb, fraction=compliance.SPARSE_FRACTION):
    """Lower ``reads`` so that ``reads * max(read-ahead, record)`` stays within ``fraction`` of the file.

    Returns a dict: ``reads`` (the number to do), ``requested``, ``max_reads``, ``capped`` and
    ``reason`` (None unless capped). Without the cap a large read-ahead sweeps the whole file,
    later reads hit pages an earlier read-ahead brought in, and the file size rather than
    read-ahead bounds the amplification. Raises ProbeError when not even one read fits.
    """
    window = window_bytes(read_ahead_kb, record_bytes)
    max_reads = int(size_bytes * fraction) // window
    # the size (MiB) that would let all requested reads fit
    needed_mb = compliance.scratch_min_mb(window, reads, fraction)
    if max_reads < 1:
        raise ProbeError('the scratch file is too small for read_ahead_kb=%s: one read may pull %d KiB, more than '
                         '%d%% of the %d MiB file. Raise size_mb to at least %d.'
                         % (read_ahead_kb, window // KIB, int(fraction * 100), size_bytes // MIB,
                            compliance.scratch_min_mb(window, 1, fraction)))
    if reads <= max_reads:
        return {'reads': reads, 'requested': reads, 'max_reads': max_reads, 'capped': False, 'reason': None}
    reason = ('at read_ahead_kb=%s each read may pull %d KiB, so %d reads could pull %d MiB, more than %d%% of the '
              '%d MiB file: the reads would sweep the file and its size, not read-ahead, would bound the '
              'amplification. Lowered to %d reads; set size_mb=%d to run all %d.'
              % (read_ahead_kb, window // KIB, reads, reads * window // MIB, int(fraction * 100),
                 size_bytes // MIB, max_reads, needed_mb, reads))
    return {'reads': max_reads, 'requested': reads, 'max_reads': max_reads, 'capped': True, 'reason': reason}


def random_offsets(seed, size_bytes, record_bytes, count):
    """``count`` distinct record-aligned byte offsets, reproducible for ``seed`` on every Python.

    Uses ``random.Random(seed).random()`` only, whose sequence is the same on Python 2.7 and 3
    (``randrange``/``sample`` are not).
    """
    records = size_bytes // record_bytes
    if count > records:
        raise ProbeError('%d reads of %d KiB do not fit in a %d MiB file.'
                         % (count, record_bytes // KIB, size_bytes // MIB))
    rng = random.Random(seed)
    seen = set()
    result = []
    while len(result) < count:
        index = int(rng.random() * records)
        if index in seen:
            continue
        seen.add(index)
        result.append(index * record_bytes)
    return result


def space_needed(size_bytes):
    """Free bytes needed for a scratch file of ``size_bytes``: its size plus SPACE_MARGIN."""
    return int(size_bytes * (1 + SPACE_MARGIN))


def check_space(directory, size_bytes, statvfs=None, shown=None):
    """Return the free bytes for unprivileged users at ``directory``; ProbeError when short."""
    st = (statvfs or os.statvfs)(directory)
    free = st.f_bavail * st.f_frsize
    needed = space_needed(size_bytes)
    if free < needed:
        raise ProbeError('not enough free space in %s: the probe needs %.1f MiB (size_mb=%d plus %d%% margin), '
                         '%.1f MiB are free. Lower size_mb or free some space; nothing was written.'
                         % (shown or directory, needed / float(MIB), size_bytes // MIB, int(SPACE_MARGIN * 100),
                            free / float(MIB)))
    return free


# ---------------------------------------------------------------------------------------------
# The scratch file

def scratch_name(pid=None, token=None):
    """A unique scratch file name: ``.aemops-io-probe-<pid>-<8 hex digits>``."""
    if token is None:
        token = binascii.hexlify(os.urandom(4)).decode('ascii')
    return '%s%d-%s' % (SCRATCH_PREFIX, os.getpid() if pid is None else pid, token)


def stale_scratch(directory):
    """Names of scratch files in ``directory`` (left by a run killed between create and unlink)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(n for n in names if n.startswith(SCRATCH_PREFIX))


def create_scratch(path):
    """Create ``path`` exclusively (mode 0600) and return its descriptor, opened read-write."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0)
    try:
        return os.open(path, flags, 0o600)
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise ProbeError('cannot create the scratch file %s: %s. The probe needs a writable directory '
                             '(become: true, or a directory the user can write).' % (path, os.strerror(e.errno)))
        raise ProbeError('cannot create the scratch file %s: %s.' % (path, e))


def fill_scratch(fd, size_bytes, clock, deadline, data=None, timeout=None):
    """Write ``size_bytes`` of random data to ``fd`` in WRITE_CHUNK pieces and fsync it.

    Random data, not zeros and not a hole: holes are not read from the disk, and zeros could
    be compressed or deduplicated below the filesystem. Raises ProbeError when ``deadline``
    passes first.
    """
    data = data or os.urandom
    written = 0
    while written < size_bytes:
        if clock() >= deadline:
            raise ProbeError('writing the %d MiB scratch file took longer than timeout=%s s (%d MiB written). Lower '
                             'size_mb or raise timeout; the file was removed.'
                             % (size_bytes // MIB, timeout, written // MIB))
        chunk = data(min(WRITE_CHUNK, size_bytes - written))
        try:
            while chunk:
                n = os.write(fd, chunk)
                chunk = chunk[n:]
                written += n
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise ProbeError('the filesystem ran out of space (or quota) after %d MiB of the %d MiB scratch '
                                 'file: %s. Lower size_mb; the file was removed.'
                                 % (written // MIB, size_bytes // MIB, os.strerror(e.errno)))
            raise
    os.fsync(fd)
    return written


def close_scratch(fd, path, mapping=None):
    """Close the mapping and the descriptor and remove ``path`` if it is still there; True if it was."""
    try:
        if mapping is not None:
            mapping.close()
    finally:
        try:
            if fd is not None:
                os.close(fd)
        finally:
            removed = remove_file(path)
    return removed


# ---------------------------------------------------------------------------------------------
# Page cache: eviction (posix_fadvise) and residency (mincore), through libc where Python lacks them

_LIBC = []
_ODD_BYTES = bytes(bytearray(range(1, 256, 2)))


def _libc():
    """libc through ctypes, or None."""
    if not _LIBC:
        try:
            found = ctypes.CDLL('libc.so.6', use_errno=True)  # glibc; find_library runs ldconfig, so only then
        except OSError:
            try:
                found = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
            except (OSError, TypeError):
                found = None
        _LIBC.append(found)
    return _LIBC[0]


def fadv_dontneed():
    """POSIX_FADV_DONTNEED: 4 on Linux, 6 on s390x (glibc's fcntl.h)."""
    value = getattr(os, 'POSIX_FADV_DONTNEED', None)
    if value is not None:
        return value
    return 6 if platform.machine() == 's390x' else 4


def fadvise_dontneed(fd, offset, length):
    """Drop the clean pages of this file range from the page cache; return how it was called."""
    native = getattr(os, 'posix_fadvise', None)  # Python 3.3+
    if native is not None:
        native(fd, offset, length, fadv_dontneed())
        return 'os.posix_fadvise'
    libc = _libc()
    func = getattr(libc, 'posix_fadvise64', None) or getattr(libc, 'posix_fadvise', None)
    if func is None:
        raise ProbeError('cannot evict the scratch file from the page cache: posix_fadvise is not available '
                         '(neither os.posix_fadvise nor libc through ctypes).')
    off_t = ctypes.c_longlong if func is getattr(libc, 'posix_fadvise64', None) else ctypes.c_long
    func.argtypes = [ctypes.c_int, off_t, off_t, ctypes.c_int]
    func.restype = ctypes.c_int
    rc = func(fd, offset, length, fadv_dontneed())  # returns the error number, does not set errno
    if rc:
        raise ProbeError('posix_fadvise(POSIX_FADV_DONTNEED) on the scratch file failed: %s.' % os.strerror(rc))
    return 'libc posix_fadvise'


def resident_pages(fd, size_bytes):
    """How many pages of the file behind ``fd`` are in the page cache (``mincore(2)``), or None.

    Python has no mincore, so libc's mmap, mincore and munmap are called through ctypes on a
    private read-only mapping that is never touched (touching would fault pages in). None when
    that is not possible here.
    """
    libc = _libc()
    if libc is None or size_bytes <= 0:
        return None
    try:
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        libc.mincore.restype = ctypes.c_int
    except AttributeError:
        return None
    addr, unmap = libc_map(libc, fd, size_bytes, mmap.MAP_PRIVATE)
    if addr is None:
        return None
    try:
        pages = (size_bytes + PAGE_BYTES - 1) // PAGE_BYTES
        vec = (ctypes.c_ubyte * pages)()
        if libc.mincore(addr, size_bytes, vec) != 0:
            return None
        flags = ctypes.string_at(vec, pages)
        return len(flags) - len(flags.translate(None, _ODD_BYTES))  # bit 0: resident; the others are undefined
    finally:
        unmap()


def libc_map(libc, fd, size_bytes, flags):
    """Map ``fd`` read-only with libc's mmap (mmap64 where there is one): (address, unmap) or (None, None).

    Python's mmap gives no address to hand to mincore or memmove, hence ctypes.
    """
    try:
        if hasattr(libc, 'mmap64'):
            do_mmap, off_t = libc.mmap64, ctypes.c_longlong
        else:
            do_mmap, off_t = libc.mmap, ctypes.c_long
        do_mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, off_t]
        do_mmap.restype = ctypes.c_void_p
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.munmap.restype = ctypes.c_int
    except AttributeError:
        return None, None
    addr = do_mmap(None, size_bytes, mmap.PROT_READ, flags, fd, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        return None, None
    return addr, lambda: libc.munmap(addr, size_bytes)


def evict(fd, size_bytes, sleep, resident=None):
    """Evict the file's pages and check; returns a dict ``method``, ``resident_pages``, ``verified``."""
    resident = resident or resident_pages
    method = fadvise_dontneed(fd, 0, size_bytes)
    left = resident(fd, size_bytes)
    if left:
        # Pages still on a per-CPU LRU list are not invalidated; a second call usually gets them.
        sleep(0.05)
        fadvise_dontneed(fd, 0, size_bytes)
        left = resident(fd, size_bytes)
    return {'method': method, 'resident_pages': left, 'verified': left is not None}


# ---------------------------------------------------------------------------------------------
# Reading

def pread_reader(fd):
    """A ``read(offset, length)`` on ``fd``: os.pread, or on Python 2.7 lseek + read.

    The fallback moves the descriptor's file offset and is two system calls instead of one, so
    it is not safe for descriptors shared between threads (this one is not shared). The kernel
    sees the same reads: both update the file's read-ahead state alike.
    """
    pread = getattr(os, 'pread', None)
    if pread is not None:
        return lambda offset, length: pread(fd, length, offset)

    def read_at(offset, length):
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, length)
    return read_at


def mmap_reader(mapping):
    """A ``read(offset, length)`` that copies the slice out of a mapping (faulting in each page of it)."""
    return lambda offset, length: mapping[offset:offset + length]


def random_reads(read, offsets, record_bytes, clock, deadline):
    """Read ``record_bytes`` at each offset until done or ``deadline``; (latencies in s, timed_out)."""
    latencies = []
    for offset in offsets:
        start = clock()
        if start >= deadline:
            return latencies, True
        data = read(offset, record_bytes)
        latencies.append(clock() - start)
        if len(data) != record_bytes:
            raise ProbeError('short read at offset %d: %d of %d bytes.' % (offset, len(data), record_bytes))
    return latencies, False


def settle(stat_reader, clock, sleep, limit=SETTLE_LIMIT_S, step=SETTLE_STEP_S):
    """Wait (at most ``limit`` s) until the device has no I/O in flight; return (stat, waited s).

    Read-ahead beyond the faulting page may still be in flight when the last read returns, and
    the counters count I/O on completion.
    """
    start = clock()
    stat = stat_reader()
    while stat.get('in_flight') and clock() - start < limit:
        sleep(step)
        stat = stat_reader()
    return stat, clock() - start


def idle_rate(stat_reader, clock, sleep, window, first=None):
    """Bytes/s the device read while the probe did nothing; returns (rate, last stat)."""
    first = first or stat_reader()
    start = clock()
    if window > 0:
        sleep(window)
    last = stat_reader()
    elapsed = clock() - start
    if elapsed <= 0:
        return 0.0, last
    return read_delta(first, last)['bytes'] / elapsed, last


def assess_noise(device_bytes, noise_rate, seconds, cache_bytes=None, fraction=NOISE_FRACTION):
    """Whether other I/O may make up a relevant part of ``device_bytes``; returns a dict.

    When the page-cache footprint of the scratch file after the reads is known (``cache_bytes``,
    from mincore), what the device read beyond it was read for someone else (the file is
    unlinked and private, so only the probe brings its pages in): that decides. Without it,
    the idle rate measured around the probe times the probe's duration is the estimate.
    ``noisy`` when the deciding figure exceeds ``fraction`` of the measured bytes.
    """
    estimate = int(noise_rate * seconds)
    limit = fraction * device_bytes
    if cache_bytes is not None:
        unaccounted = max(0, device_bytes - cache_bytes)
        noisy = unaccounted > 0 and unaccounted > limit
        detail = ('the device read %d bytes more than the scratch file gained in the page cache (%d bytes), %s of '
                  'the %d bytes measured' % (unaccounted, cache_bytes, _share(unaccounted, device_bytes),
                                             device_bytes))
    else:
        unaccounted = None
        noisy = estimate > 0 and estimate > limit
        detail = ('the device read %.0f bytes/s while idle around the probe, about %d bytes over its %.2f s, %s of '
                  'the %d bytes measured' % (noise_rate, estimate, seconds, _share(estimate, device_bytes),
                                             device_bytes))
    reason = None
    if noisy:
        reason = (detail + '. Other readers shared the device, so the device figures are approximate (upper '
                  'bounds): run the probe when the host is idle (AEM stopped) for exact numbers.')
    return {'noisy': noisy, 'estimate_bytes': estimate, 'unaccounted_bytes': unaccounted, 'reason': reason}


def _share(part, whole):
    return '%.0f%%' % (100.0 * part / whole) if whole else 'all'


# ---------------------------------------------------------------------------------------------
# Plan and run

def validate(path, size_mb, record_kb, reads, method, timeout):
    """Check the arguments; raise ProbeError naming the option and the fix."""
    if not path or not path.startswith('/'):
        raise ProbeError('path %r is not an absolute path: give the directory to probe, for example '
                         '/opt/aem/crx-quickstart/repository/segmentstore.' % (path,))
    if size_mb < 1:
        raise ProbeError('size_mb=%d is too small: give the scratch file size in MiB, at least 1 (default %d).'
                         % (size_mb, DEFAULT_SIZE_MB))
    if record_kb < RECORD_ALIGN_KB or record_kb % RECORD_ALIGN_KB:
        raise ProbeError('record_kb=%d is not a positive multiple of %d: Oak reads 8-16 KiB records; give 8 or 16.'
                         % (record_kb, RECORD_ALIGN_KB))
    if record_kb * KIB > size_mb * MIB:
        raise ProbeError('record_kb=%d is larger than the %d MiB scratch file: raise size_mb or lower record_kb.'
                         % (record_kb, size_mb))
    if reads < 1:
        raise ProbeError('reads=%d: give at least 1 read (default %d).' % (reads, DEFAULT_READS))
    if timeout < 1:
        raise ProbeError('timeout=%d: give at least 1 second (default %d).' % (timeout, DEFAULT_TIMEOUT))
    if method not in METHODS:
        raise ProbeError('method=%s: use one of %s.' % (method, ', '.join(METHODS)))


def _not_block_backed(path, error):
    text = str(error).partition(' Point paths=')[0]
    return ('%s There is no device read-ahead to measure: point path at a directory on the filesystem that holds '
            'the data (the segment store), on a block device.' % text)


def plan(root, path, size_mb=DEFAULT_SIZE_MB, record_kb=DEFAULT_RECORD_KB, reads=DEFAULT_READS, method='mmap',
         timeout=DEFAULT_TIMEOUT, seed=DEFAULT_SEED, statvfs=None, cap_read_ahead_kb=None):
    """Check everything that can be checked without writing and return the plan (a dict).

    The reads are capped for the device's current read-ahead, or for ``cap_read_ahead_kb``
    when given (the read-ahead sweep caps its reads for each value it sets).

    Raises ProbeError for a missing path, a path that is not a directory, not writable, on a
    read-only mount or on a filesystem without a block device, for short free space and bad
    arguments. Also used as the check-mode result.
    """
    validate(path, size_mb, record_kb, reads, method, timeout)
    directory = root_path(root, path)
    if not os.path.exists(directory):
        raise ProbeError('path %s does not exist: give an existing directory on the filesystem to probe, for '
                         'example the AEM segment store.' % path)
    if not os.path.isdir(directory):
        raise ProbeError('path %s is not a directory: give the directory in which the probe may create (and '
                         'remove) its scratch file, for example the one that holds the file.' % path)
    try:
        name, mount = blockdev.device_for_path(root, path)
    except blockdev.NotBlockBackedError as e:
        raise ProbeError(_not_block_backed(path, e))
    except blockdev.BlockDeviceError as e:
        raise ProbeError(str(e))
    if 'ro' in mount['options'].split(','):
        raise ProbeError('path %s is on a read-only mount (%s): the probe writes a %d MiB scratch file there. '
                         'Give a directory on a writable mount of the same device.'
                         % (path, mount['mountpoint'], size_mb))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ProbeError('path %s is not writable: the probe creates a %d MiB scratch file there and removes it. '
                         'Use become: true, or a directory the user can write.' % (path, size_mb))
    governing = blockdev.whole_disk(root, name)
    ra_kb = blockdev.read_ahead_kb(root, governing)
    read_stat(root, name)  # the counters must be readable before anything is written
    size_bytes = size_mb * MIB
    record_bytes = record_kb * KIB
    cap = sparse_cap(reads, size_bytes, record_bytes, ra_kb if cap_read_ahead_kb is None else cap_read_ahead_kb)
    free = check_space(directory, size_bytes, statvfs, shown=path)
    return {
        'root': root,
        'path': path,
        'directory': directory,
        'device': governing,
        'stat_device': name,
        'mount_point': mount['mountpoint'],
        'fstype': mount['fstype'],
        'read_ahead_kb': ra_kb,
        'method': method,
        'size_mb': size_mb,
        'record_kb': record_kb,
        'seed': seed,
        'timeout': timeout,
        'reads_requested': reads,
        'reads_planned': cap['reads'],
        'reads_capped': cap['capped'],
        'reads_capped_reason': cap['reason'],
        'free_mb': free // MIB,
        'stale_scratch_files': stale_scratch(directory),
    }


def _public(the_plan):
    result = dict(the_plan)
    for key in ('root', 'directory'):
        result.pop(key, None)
    return result


def _warnings(the_plan):
    warnings = []
    if the_plan['stale_scratch_files']:
        warnings.append('%s holds scratch files of an earlier probe that was killed (%s); remove them if no probe '
                        'is running.' % (the_plan['path'], ', '.join(the_plan['stale_scratch_files'])))
    if the_plan['reads_capped']:
        warnings.append('reads lowered from %d to %d: %s' % (the_plan['reads_requested'], the_plan['reads_planned'],
                                                             the_plan['reads_capped_reason']))
    return warnings


def check_mode_result(the_plan):
    """The check-mode result: what the probe would do; nothing measured."""
    result = _public(the_plan)
    result['measured'] = False
    result['msg'] = ('would write a %d MiB scratch file in %s (on %s, read_ahead_kb=%s), evict it from the page cache, '
                     'read %d random %d KiB records by %s, measure %s, and remove the file; check mode measured '
                     'nothing.' % (the_plan['size_mb'], the_plan['path'], the_plan['device'],
                                   the_plan['read_ahead_kb'], the_plan['reads_planned'], the_plan['record_kb'],
                                   the_plan['method'], the_plan['stat_device']))
    result['warnings'] = _warnings(the_plan)
    return result


def ebs_samples(root, devices, nvme=None):
    """The EBS statistics of the NVMe volumes among and beneath ``devices`` (kernel names or /dev paths), read now
    ({device: sample}, ebs_stats). A device that cannot be resolved, or whose sysfs cannot be read, is one line
    under its name, never a failure."""
    out = {}
    for spec in devices:
        try:
            names = ebs_stats.nvme_disks(root, [blockdev.resolve_device(root, spec)])
            out.update(ebs_stats.read_samples(root, [n for n in names if n not in out], nvme))
        except (IOError, OSError, blockdev.BlockDeviceError) as e:
            out[spec] = {'device': spec, 'volume_id': None,
                         'reason': ebs_stats.NO_STATS + 'cannot read what is beneath %s (%s)' % (spec, e)}
    return out


def ebs_windows(before, after, seconds):
    """{device: ebs_stats.window} for the devices sampled at both ends of a window of ``seconds``."""
    return dict((name, ebs_stats.window(before[name], after[name], seconds)) for name in after if name in before)


def run(the_plan, clock=None, sleep=None, reader=None, stat_reader=None, data=None, resident=None,
        noise_window=NOISE_WINDOW_S, pid=None, ebs_reader=None):
    """Run the probe of ``the_plan`` (from :func:`plan`) and return the result dict.

    Injectable for tests: ``clock`` (seconds), ``sleep``, ``reader`` (a function of the open
    descriptor and the mapping or None that returns ``read(offset, length)``), ``stat_reader``
    (returns a parsed stat of the measured device), ``data`` (bytes for the file), ``resident``
    (pages of the file in the page cache, or None), ``ebs_reader`` (returns {device: sample} of the
    EBS volumes beneath the device, :func:`ebs_samples`). The scratch file is unlinked right after
    it is created and its descriptor closed in every case, so nothing stays behind.

    The EBS volumes' own statistics are sampled at the start and the end of the reads (``ebs``: per
    volume, the rates of the window, or why there are none).
    """
    clock = clock or _default_clock()
    sleep = sleep or time.sleep
    resident = resident or resident_pages
    root, device = the_plan['root'], the_plan['stat_device']
    stat_reader = stat_reader or (lambda: read_stat(root, device))
    ebs_reader = ebs_reader or (lambda: ebs_samples(root, [the_plan['device']] + list(the_plan.get('ebs_devices') or [])))
    size_bytes = the_plan['size_mb'] * MIB
    record_bytes = the_plan['record_kb'] * KIB
    timeout = the_plan['timeout']
    path = os.path.join(the_plan['directory'], scratch_name(pid))
    offsets = random_offsets(the_plan['seed'], size_bytes, record_bytes, the_plan['reads_planned'])

    fd = mapping = None
    result = _public(the_plan)
    result['scratch_file'] = os.path.join(the_plan['path'], os.path.basename(path))
    try:
        start = clock()
        fd = create_scratch(path)
        os.unlink(path)  # from here on only the descriptor holds the file: the kernel frees it on close or exit
        fill_scratch(fd, size_bytes, clock, start + timeout, data, timeout)
        eviction = evict(fd, size_bytes, sleep, resident)
        if the_plan['method'] == 'mmap':
            mapping = mmap.mmap(fd, size_bytes, access=mmap.ACCESS_READ)
        read = (reader or _default_reader)(fd, mapping)

        rate_before, before = idle_rate(stat_reader, clock, sleep, noise_window)
        ebs_before, ebs_t0 = ebs_reader(), clock()
        t0 = clock()
        latencies, timed_out = random_reads(read, offsets, record_bytes, clock, t0 + timeout)
        elapsed = clock() - t0
        after, settled = settle(stat_reader, clock, sleep)
        ebs_after = ebs_reader()
        ebs = ebs_windows(ebs_before, ebs_after, clock() - ebs_t0)
        cached_pages = resident(fd, size_bytes)
        rate_after = idle_rate(stat_reader, clock, sleep, noise_window, first=after)[0]
    finally:
        close_scratch(fd, path, mapping)
    result['scratch_removed'] = not os.path.exists(path)
    result['ebs'] = ebs
    return _report(result, eviction, latencies, timed_out, elapsed, settled, read_delta(before, after),
                   cached_pages, rate_before, rate_after)


def _default_reader(fd, mapping):
    return mmap_reader(mapping) if mapping is not None else pread_reader(fd)


def _report(result, eviction, latencies, timed_out, elapsed, settled, delta, cached_pages, rate_before, rate_after):
    reads = len(latencies)
    record_bytes = result['record_kb'] * KIB
    device_bytes = delta['bytes']
    cache_bytes = cached_pages * PAGE_BYTES if cached_pages is not None else None
    noise_rate = max(rate_before, rate_after)
    noise = assess_noise(device_bytes, noise_rate, elapsed + settled, cache_bytes)
    amp = amplification(device_bytes, reads, record_bytes)
    per_read = bytes_per_read(device_bytes, reads)
    result.update({
        'measured': True,
        'reads': reads,
        'timed_out': timed_out,
        'elapsed_s': round(elapsed, 3),
        'eviction': eviction,
        'device_read_ios': delta['ios'],
        'device_read_bytes': device_bytes,
        'device_read_mb': round(device_bytes / float(MIB), 3),
        'device_read_ticks_ms': delta['ticks_ms'],
        'device_bytes_per_io': round(device_bytes / float(delta['ios']), 1) if delta['ios'] else None,
        'read_amplification': round(amp, 3) if amp is not None else None,
        'bytes_per_read': round(per_read, 1) if per_read is not None else None,
        'latency': latency_summary(latencies),
        'page_cache_bytes': cache_bytes,
        'page_cache_amplification': (round(amplification(cache_bytes, reads, record_bytes), 3)
                                     if cache_bytes is not None and reads else None),
        'noise_bytes_per_s': round(noise_rate, 1),
        'noise': {'before_bytes_per_s': round(rate_before, 1), 'after_bytes_per_s': round(rate_after, 1),
                  'estimate_bytes': noise['estimate_bytes'], 'unaccounted_bytes': noise['unaccounted_bytes']},
        'noisy': noise['noisy'],
        'noise_reason': noise['reason'],
    })
    warnings = _warnings(result)
    if timed_out:
        warnings.append('the probe reached timeout=%d s after %d of %d reads; the figures cover the reads done.'
                        % (result['timeout'], reads, result['reads_planned']))
    if eviction['resident_pages']:
        warnings.append('%d pages of the scratch file stayed in the page cache after POSIX_FADV_DONTNEED, so some '
                        'reads were cache hits and the device figures are low.' % eviction['resident_pages'])
    if noise['noisy']:
        warnings.append('noisy measurement: %s' % noise['reason'])
    result['warnings'] = warnings
    result['summary'] = summary(result)
    return result


def human_bytes(n):
    """``512 B``, ``32.0 KiB``, ``24.0 MiB``, ``1.5 GiB``."""
    n = float(n)
    for unit in ('B', 'KiB', 'MiB'):
        if abs(n) < KIB:
            return '%d B' % n if unit == 'B' else '%.1f %s' % (n, unit)
        n /= KIB
    return '%.1f GiB' % n


def summary(result):
    """One line for humans: what was read, what the device read, the amplification and the latency."""
    lat = result['latency']
    text = ('%d random %d KiB reads by %s from a %d MiB file on %s (read_ahead_kb=%s): the device read %s in %d I/Os'
            % (result['reads'], result['record_kb'], result['method'], result['size_mb'], result['device'],
               result['read_ahead_kb'], human_bytes(result['device_read_bytes']), result['device_read_ios']))
    if result['reads']:
        text += (', %.1fx the %s asked for (%s per read); latency mean %.3f ms, p50 %.3f ms, p99 %.3f ms'
                 % (result['read_amplification'], human_bytes(result['reads'] * result['record_kb'] * KIB),
                    human_bytes(result['bytes_per_read']), lat['mean_ms'], lat['p50_ms'], lat['p99_ms']))
    text += '.'
    if result['timed_out']:
        text += ' Stopped at timeout=%d s.' % result['timeout']
    if result['noisy']:
        text = 'APPROXIMATE (noisy, other I/O on the device): ' + text
    return text
