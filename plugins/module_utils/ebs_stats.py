# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What an EBS volume knows of itself: its detailed performance statistics, NVMe log page 0xD0.

On Nitro instances every EBS volume (every volume type) answers an NVMe Get Log Page for the vendor log
0xD0 with counters that live for the attachment: operations, bytes and time per direction, and the
microseconds during which the volume's IOPS or throughput limit, or the instance's EBS IOPS or throughput
limit, was exceeded; a queue length (a gauge); and a read and a write latency histogram. Two samples give
what the seed had to assemble from a monitoring product: how long, in a window, the volume sat at its cap.

The layout, described here from two independent readers that agree (read 2026-12-05; nothing copied):

- linux-nvme/nvme-cli at commit e117ee68059fe1f44e2486dd03fd62aa3f96a9dc, ``plugins/amzn/amzn-nvme.c``
  (``nvme amzn stats``; the structs ``amzn_latency_log_page_base`` and ``amzn_latency_histogram``; the file
  last changed in 3898cdcd948315583f0afa4b4e8d9495e5c7acb1). It reads 4096 bytes (the base page) from nsid 1
  for an EBS volume; the larger page with per-size histograms is for instance store only.
- amazonlinux/amazon-ec2-utils at commit d84cf6dc9a16c60b6357c675de59c1ee7cab8592, ``ebsnvme`` (``ebsnvme
  stats``; the ctypes structures ``nvme_admin_command``, ``nvme_get_amzn_stats_logpage``,
  ``ebs_nvme_histogram``; added in 4e459693862922d72381df5ac18b0f4a69d8a8fe).

The page (little-endian, 4096 bytes):

- 0x000 u32 magic: 0x3C23B510 for EBS (0xEC2C0D7E is the instance-store page, another layout);
  0x004 u32 version (nvme-cli; reserved in ebsnvme).
- 0x008 eleven u64, in order: total_read_ops, total_write_ops, total_read_bytes, total_write_bytes,
  total_read_time, total_write_time (microseconds), ebs_volume_performance_exceeded_iops,
  ebs_volume_performance_exceeded_tp, ec2_instance_performance_exceeded_iops,
  ec2_instance_performance_exceeded_tp (microseconds; ebsnvme spells the last two
  ``ec2_instance_ebs_performance_exceeded_*``), volume_queue_length (a gauge). Reserved to 0x200 (416 bytes).
- 0x200 the read and 0x808 the write latency histogram (1544 bytes each): u64 number of bins, then 64 bins
  of {u64 lower, u64 upper, u32 count, u32 reserved}, bounds in microseconds. Both readers show only the
  first number-of-bins bins (nvme-cli also stops at 64); a page claiming more is refused here.

The command: admin opcode 0x02 (Get Log Page), nsid 1, data_len 4096, cdw10 = NUMDL << 16 | 0xD0 with NUMDL
= 4096 / 4 - 1 = 1023 (the NVMe field is 0-based; libnvme's nvme_init_get_log computes it so; ebsnvme
writes 1024, one dword more than its 4096-byte buffer, which the device answers all the same). It goes
through ``ioctl(fd, NVME_IOCTL_ADMIN_CMD = 0xC0484E41)`` (``_IOWR('N', 0x41, struct nvme_admin_cmd)``, a
72-byte struct: u8 opcode, u8 flags, u16 rsvd1, u32 nsid, u32 cdw2, u32 cdw3, u64 metadata, u64 addr,
u32 metadata_len, u32 data_len, u32 cdw10..cdw15, u32 timeout_ms, u32 result). A positive return is the
NVMe status of the command. Get Log Page only reads: nothing is ever written to the device. It needs root
(CAP_SYS_ADMIN).

The NVMe serial of an EBS volume is its volume id without the dash (``vol0123...`` for ``vol-0123...``, as
AWS documents for NVMe EBS volumes and ebsnvme's ``id`` prints it).

Plain functions over a root path; the ioctl and the device node go through an injectable :class:`Nvme`, so
that the tests assert the request's bytes. Everything the device answers is parsed as hostile: a page that is
short, all zeros, of another magic or with an impossible histogram is one line (:class:`NoStats`), never a
failure. Python 2.7, 3.6 and later.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import array
import errno
import os
import re
import stat
import struct

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, files

EBS_MODEL = 'Amazon Elastic Block Store'
LOG_PAGE_ID = 0xD0
PAGE_BYTES = 4096
NUMDL = PAGE_BYTES // 4 - 1
NSID = 1
OPCODE_GET_LOG_PAGE = 0x02
NVME_IOCTL_ADMIN_CMD = 0xC0484E41
# struct nvme_admin_cmd (linux/nvme_ioctl.h), 72 bytes in the host's byte order (the page itself is little-endian).
COMMAND = struct.Struct('=BBHIIIQQIIIIIIIIII')
MAGIC_EBS = 0x3C23B510
MAGIC_INSTANCE_STORE = 0xEC2C0D7E
HEADER = struct.Struct('<II')
COUNTERS = ('total_read_ops', 'total_write_ops', 'total_read_bytes', 'total_write_bytes', 'total_read_time',
            'total_write_time', 'ebs_volume_performance_exceeded_iops', 'ebs_volume_performance_exceeded_tp',
            'ec2_instance_performance_exceeded_iops', 'ec2_instance_performance_exceeded_tp')
GAUGES = ('volume_queue_length',)
VALUES = struct.Struct('<%dQ' % (len(COUNTERS) + len(GAUGES)))
VALUES_AT = 0x008
HISTOGRAMS = (('read_io_latency_histogram', 0x200), ('write_io_latency_histogram', 0x808))
MAX_BINS = 64
BIN = struct.Struct('<QQII')
NUM_BINS = struct.Struct('<Q')
# The four "performance exceeded" counters: (key, who, which cap), in the order the report gives them.
CAPS = (('ebs_volume_performance_exceeded_tp', 'volume', 'throughput'),
        ('ebs_volume_performance_exceeded_iops', 'volume', 'IOPS'),
        ('ec2_instance_performance_exceeded_tp', 'instance', 'EBS throughput'),
        ('ec2_instance_performance_exceeded_iops', 'instance', 'EBS IOPS'))
# Seconds per minute at a cap below which a window is not "bound" (rounding of a few microseconds).
CAP_NOTICE_S = 0.1
# A cap counter may run ahead of the window by the time between reading the page and reading the clock, never by
# more: past this (a fraction of the window, and seconds), the page is refused as damaged, not capped at the window.
CAP_SLACK = 0.05
CAP_SLACK_S = 1.0
# The line of a device without statistics starts so.
NO_STATS = 'no EBS statistics: '


class NoStats(Exception):
    """The device has no EBS statistics to give; the message is the one line that says why."""


# ---------------------------------------------------------------------------------------------
# The request

def command(addr, length=PAGE_BYTES):
    """The 72 bytes of the Get Log Page command for log 0xD0 into ``length`` bytes at address ``addr``."""
    cdw10 = (NUMDL << 16) | LOG_PAGE_ID
    return COMMAND.pack(OPCODE_GET_LOG_PAGE, 0, 0, NSID, 0, 0, 0, addr, 0, length,
                        cdw10, 0, 0, 0, 0, 0, 0, 0)


class Nvme(object):
    """The device node and the ioctl, as the reader uses them (replaced in the tests). ``admin`` returns the
    ioctl's return value (0, or a positive NVMe status) and raises OSError/IOError with the errno."""

    def open(self, path):
        return os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0)
                       | getattr(os, 'O_NONBLOCK', 0))

    def fstat(self, fd):
        return os.fstat(fd)

    def admin(self, fd, request, cmd, data):
        """``ioctl(fd, request, cmd)``; ``cmd`` (an array of 72 bytes) holds the address of ``data``."""
        import fcntl
        return fcntl.ioctl(fd, request, cmd, True)

    def close(self, fd):
        os.close(fd)


def read_page(path, majmin=None, nvme=None):
    """The raw 4096 bytes of log page 0xD0 of the device node ``path``; NoStats with the reason otherwise.
    ``majmin`` (sysfs's ``259:2``): the node must be that block device, else it is not opened further."""
    import ctypes
    nvme = nvme or Nvme()
    try:
        fd = nvme.open(path)
    except (IOError, OSError) as e:
        raise NoStats(_os_reason(e, 'cannot open %s' % path))
    try:
        st = nvme.fstat(fd)
        if not stat.S_ISBLK(st.st_mode):
            raise NoStats('%s is not a block device' % path)
        if majmin and '%d:%d' % (os.major(st.st_rdev), os.minor(st.st_rdev)) != majmin:
            raise NoStats('%s is device %d:%d, not %s as sysfs says' % (path, os.major(st.st_rdev),
                                                                        os.minor(st.st_rdev), majmin))
        data = ctypes.create_string_buffer(PAGE_BYTES)
        cmd = array.array('B', command(ctypes.addressof(data)))
        try:
            status = nvme.admin(fd, NVME_IOCTL_ADMIN_CMD, cmd, data)
        except (IOError, OSError) as e:
            raise NoStats(_os_reason(e, 'the NVMe admin command failed'))
        if status:
            raise NoStats('the device refused log page 0xD0 (NVMe status %s)' % status)
        return data.raw[:PAGE_BYTES]
    finally:
        nvme.close(fd)


def _os_reason(e, what):
    if e.errno in (errno.EACCES, errno.EPERM):
        return 'no permission (log page 0xD0 needs root: CAP_SYS_ADMIN)'
    return '%s (%s)' % (what, os.strerror(e.errno) if e.errno else e)


# ---------------------------------------------------------------------------------------------
# The page

def parse_page(page):
    """The counters and histograms of a 0xD0 page (bytes), as a dict: ``version``, each of COUNTERS and
    GAUGES (ints; times in microseconds) and each histogram as a list of [lower_us, upper_us, count].
    NoStats with one line for a page that is not an EBS volume's page, or is damaged."""
    if not isinstance(page, bytes):
        raise NoStats('the device answered no page')
    if len(page) < PAGE_BYTES:
        raise NoStats('the page is short (%d of %d bytes)' % (len(page), PAGE_BYTES))
    page = page[:PAGE_BYTES]
    if page.count(b'\0') == PAGE_BYTES:
        raise NoStats('the page is all zeros')
    magic, version = HEADER.unpack_from(page, 0)
    if magic == MAGIC_INSTANCE_STORE:
        raise NoStats("not an EBS volume's page (the instance-store magic 0x%08X)" % magic)
    if magic != MAGIC_EBS:
        raise NoStats("not an EBS volume's page (magic 0x%08X, not 0x%08X)" % (magic, MAGIC_EBS))
    result = dict(zip(COUNTERS + GAUGES, VALUES.unpack_from(page, VALUES_AT)))
    result['version'] = version
    for key, offset in HISTOGRAMS:
        count = NUM_BINS.unpack_from(page, offset)[0]
        if count > MAX_BINS:
            raise NoStats('the %s claims %d bins (at most %d)' % (key.replace('_', ' '), count, MAX_BINS))
        bins = []
        for i in range(count):
            lower, upper, n, _reserved = BIN.unpack_from(page, offset + NUM_BINS.size + i * BIN.size)
            if lower > upper:
                raise NoStats('the %s has a bin whose lower bound %d is above its upper bound %d (the page is damaged)'
                              % (key.replace('_', ' '), lower, upper))
            bins.append([lower, upper, n])
        result[key] = bins
    return result


def volume_id(serial):
    """``vol-0123...`` from the NVMe serial ``vol0123...`` (or ``vol-0123...``); None for anything else."""
    m = re.match(r'^vol-?([0-9a-f]{8,32})$', (serial or '').strip())
    return 'vol-%s' % m.group(1) if m else None


def sample(root, name, nvme=None):
    """One device's statistics: {'device', 'volume_id', 'stats'} or {'device', 'volume_id', 'reason'} (the one
    line, starting "no EBS statistics: "). Read once per run where ``root`` is the run's host.Host (its
    ``once``); :func:`read_sample` reads every time (two samples of a window)."""
    once = getattr(root, 'once', None)
    if once is None:
        return read_sample(root, name, nvme)
    return once(('ebs_stats', name), lambda: read_sample(root, name, nvme))


def read_sample(root, name, nvme=None):
    """One device's statistics, read now (see :func:`sample`)."""
    model = (blockdev.nvme_attr(root, name, 'model') or '').strip()
    result = {'device': name, 'volume_id': None}
    if model != EBS_MODEL:
        result['reason'] = NO_STATS + 'not an EBS volume' + (' (model %s)' % model[:64] if model else '')
        return result
    result['volume_id'] = volume_id(blockdev.nvme_attr(root, name, 'serial'))
    try:
        page = read_page(files.root_path(root, '/dev/%s' % name), blockdev.majmin(root, name), nvme)
        result['stats'] = parse_page(page)
    except NoStats as e:
        result['reason'] = NO_STATS + str(e)
    return result


def nvme_disks(root, names):
    """The NVMe namespaces among ``names`` and beneath them (an LVM volume over nvme1n1), once each, in order."""
    out = []
    for name in names:
        for disk in [name] + blockdev.underlying_disks(root, name):
            disk = blockdev.whole_disk(root, disk)
            if blockdev.device_type(root, disk) == 'nvme' and disk not in out:
                out.append(disk)
    return out


def samples(root, names, nvme=None):
    """{device: sample} for the NVMe namespaces among and beneath ``names``, once per run (:func:`sample`)."""
    return dict((disk, sample(root, disk, nvme)) for disk in nvme_disks(root, names))


def read_samples(root, names, nvme=None):
    """{device: sample} for the NVMe namespaces among and beneath ``names``, read now (a window's ends)."""
    return dict((disk, read_sample(root, disk, nvme)) for disk in nvme_disks(root, names))


# ---------------------------------------------------------------------------------------------
# Two samples: rates

def _seconds_text(value):
    return '%d' % round(value) if value >= 10 else ('%.1f' % value).rstrip('0').rstrip('.')


def _delta_histogram(before, after):
    """The bins' count deltas, or None when the two pages' bins differ in their bounds."""
    if len(before) != len(after):
        return None
    out = []
    for b, a in zip(before, after):
        if b[0] != a[0] or b[1] != a[1] or a[2] < b[2]:
            return None
        out.append((a[0], a[1], a[2] - b[2]))
    return out


def percentile_upper(bins, pct):
    """The upper bound (microseconds) of the bin that holds the ``pct`` percentile of ``bins`` [(lower, upper,
    count)], or None without counts."""
    total = sum(n for _l, _u, n in bins)
    if not total:
        return None
    need, seen = total * pct / 100.0, 0
    for _lower, upper, n in bins:
        seen += n
        if seen >= need:
            return upper
    return bins[-1][1]


def rates(before, after, seconds):
    """What happened between two parsed pages ``before`` and ``after`` taken ``seconds`` apart: a dict with
    ``window_s``; per minute of window, the seconds at each cap (``volume_tp_s_per_min``,
    ``volume_iops_s_per_min``, ``instance_tp_s_per_min``, ``instance_iops_s_per_min``); ``read_mib_s``,
    ``read_iops``; ``read_latency_mean_us`` and ``read_latency_p99_us`` (the upper bound of the histogram bin
    that holds the 99th percentile of the window's reads; None without reads); and ``bound``, one line saying
    which cap bound, if any. NoStats when the counters went back (the volume was detached and attached again)
    or the window is empty."""
    if not seconds or seconds <= 0:
        raise NoStats('the window is empty')
    delta = {}
    for key in COUNTERS:
        delta[key] = after[key] - before[key]
        if delta[key] < 0:
            raise NoStats('the counters went back between the two samples (the volume was attached again?)')
    per_min = 60.0 / seconds
    out = {'window_s': round(seconds, 3)}
    at_cap = []
    for key, who, cap in CAPS:
        cap_s = delta[key] / 1e6
        if cap_s > seconds * (1 + CAP_SLACK) + CAP_SLACK_S:
            raise NoStats('the %s %s cap counter grew by %s s in a window of %s s, faster than the clock: the page is '
                          'damaged' % (who, cap, _seconds_text(cap_s), _seconds_text(seconds)))
        field = '%s_%s_s_per_min' % (who, 'tp' if 'throughput' in cap else 'iops')
        out[field] = round(min(cap_s, seconds) * per_min, 1)
        at_cap.append((min(cap_s, seconds), who, cap))
    ops = delta['total_read_ops']
    out['read_mib_s'] = round(delta['total_read_bytes'] / 1048576.0 / seconds, 1)
    out['read_iops'] = round(ops / float(seconds), 1)
    out['read_latency_mean_us'] = round(delta['total_read_time'] / float(ops), 1) if ops else None
    bins = _delta_histogram(before['read_io_latency_histogram'], after['read_io_latency_histogram'])
    out['read_latency_p99_us'] = percentile_upper(bins, 99) if bins else None
    out['bound'] = bound_line(at_cap, seconds)
    return out


def bound_line(at_cap, seconds):
    """The seed's words for [(seconds at cap, who, cap)] in a window of ``seconds``: "the volume sat at its
    throughput cap for 41 of 60 seconds", the others that were reached after it; or that none bound."""
    hit = sorted([c for c in at_cap if c[0] * 60.0 / seconds >= CAP_NOTICE_S], key=lambda c: -c[0])
    if not hit:
        return 'no cap bound: neither the volume nor the instance reached its IOPS or throughput cap'
    first = hit[0]
    line = 'the %s sat at its %s cap for %s of %s seconds' % (
        first[1], first[2], _seconds_text(first[0]), _seconds_text(seconds))
    for s, who, cap in hit[1:]:
        line += '; the %s at its %s cap for %s' % (who, cap, _seconds_text(s))
    return line


def window(before, after, seconds):
    """The report of one device over a window, from two samples (:func:`sample`): {'device', 'volume_id',
    'rates'} or {'device', 'volume_id', 'reason'}."""
    out = {'device': after.get('device') or before.get('device'), 'volume_id': after.get('volume_id')}
    reason = after.get('reason') or before.get('reason')
    if reason:
        out['reason'] = reason
        return out
    try:
        out['rates'] = rates(before['stats'], after['stats'], seconds)
    except NoStats as e:
        out['reason'] = NO_STATS + str(e)
    return out


def cap_hits(window):
    """Whether the volume and the instance hit a cap in a window (:func:`window`) that has rates: {'volume_id',
    'volume_at_cap', 'instance_at_cap', 'bound'}; None without rates (no page, a reason)."""
    rates = (window or {}).get('rates')
    if not rates:
        return None
    return {'volume_id': window.get('volume_id'),
            'volume_at_cap': max(rates['volume_tp_s_per_min'], rates['volume_iops_s_per_min']) >= CAP_NOTICE_S,
            'instance_at_cap': max(rates['instance_tp_s_per_min'], rates['instance_iops_s_per_min']) >= CAP_NOTICE_S,
            'bound': rates['bound']}
