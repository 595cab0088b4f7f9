# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/probe.py.

The arithmetic and the bookkeeping run on fake trees (fakehost.py) with a simulated device
(:class:`Sim`: clock, sleep, record reader, stat reader and page-cache residency in one),
so figures are exact. The page-cache helpers (posix_fadvise, mincore, pread with its Python
2.7 fallback) and one end-to-end run per method use the host's real kernel on a temporary
directory: the CI host runs the tests as root with a writable, block-backed tmp.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import shutil
import tempfile

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, probe
from fakehost import FakeNvme, ebs_page, nitro_host

MIB = 1024 * 1024
KIB = 1024
REPO = '/opt/aem/crx-quickstart/repository/segmentstore'
DM0 = '/sys/devices/virtual/block/dm-0'

# Kernel 5.5+ (17 fields), 4.18 (15: RHEL 8) and 3.10 (11: RHEL 7) formats of /sys/block/<dev>/stat.
STAT_17 = ('  344039    25648 10070618   162905   465275   765294 49435592   435215        0   106896   650635   '
           '615582       81 37479152    49388    91817     3126\n')
STAT_15 = '  1000 2 80000 350 20 0 160 4 0 360 354 0 0 0 0\n'
STAT_11 = '    9931      215   503674     5461     2620     1606    71352     3030        1     4564     8486\n'


# ---------------------------------------------------------------------------------------------
# Fixtures and the simulated device

def stat_line(ios=0, sectors=0, ticks=0, in_flight=0):
    return '%d 0 %d %d 0 0 0 0 %d 0 0 0 0 0 0 0 0\n' % (ios, sectors, ticks, in_flight)


@pytest.fixture
def host(tmpdir):
    """nitro_host (the repository on LV dm-0, read-ahead lowered to 32 KiB) with stat files."""
    h = nitro_host(tmpdir)
    h.write(DM0 + '/queue/read_ahead_kb', '32\n')
    h.write(DM0 + '/stat', stat_line(100, 8000, 50))
    h.write(h._devdir('nvme0n1') + '/stat', stat_line())
    h.write(h._devdir('nvme0n1p1') + '/stat', stat_line())
    return h


class Sim(object):
    """A device and a clock: reads cost ``read_s`` and make the device read ``per_read`` bytes.

    ``noise_rate`` bytes/s are read by someone else whenever the (fake) time passes in sleep;
    ``other_per_read`` bytes by someone else during each read. ``resident`` reports the
    page-cache footprint of the reads (0 until then), as mincore would.
    """

    def __init__(self, per_read=32 * KIB, read_s=0.001, noise_rate=0, other_per_read=0, in_flight_polls=0,
                 fail_after=None):
        self.now = 1000.0
        self.sectors = 0
        self.ios = 0
        self.ticks = 0
        self.per_read = per_read
        self.read_s = read_s
        self.noise_rate = noise_rate
        self.other_per_read = other_per_read
        self.in_flight_polls = in_flight_polls
        self.fail_after = fail_after
        self.reads = 0
        self.sleeps = []
        self.fds = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
        self.sectors += int(self.noise_rate * seconds) // 512

    def stat(self):
        in_flight = 0
        if self.in_flight_polls:
            self.in_flight_polls -= 1
            in_flight = 1
            if not self.in_flight_polls:   # the last read-ahead completes now
                self.sectors += 8
                self.ios += 1
        return {'read_ios': self.ios, 'read_sectors': self.sectors, 'read_ticks': self.ticks, 'in_flight': in_flight}

    def reader(self, fd, mapping):
        self.fds.append(fd)

        def read(offset, length):
            if self.fail_after is not None and self.reads >= self.fail_after:
                raise RuntimeError('simulated failure in read %d' % (self.reads + 1))
            self.reads += 1
            self.now += self.read_s
            self.ios += 1
            self.ticks += 1
            self.sectors += (self.per_read + self.other_per_read) // 512
            return b'x' * length
        return read

    def resident(self, fd, size):
        return self.reads * self.per_read // probe.PAGE_BYTES

    def run(self, the_plan, **kwargs):
        return probe.run(the_plan, clock=self.clock, sleep=self.sleep, reader=self.reader, stat_reader=self.stat,
                         resident=self.resident, data=lambda n: b'\xa5' * n, **kwargs)


def scratch_files(directory):
    return [n for n in os.listdir(str(directory)) if n.startswith(probe.SCRATCH_PREFIX)]


def open_fds():
    return set(os.listdir('/proc/self/fd'))


# ---------------------------------------------------------------------------------------------
# /sys/block/<dev>/stat

def test_parse_stat_kernel_5_5_has_17_fields():
    stat = probe.parse_stat(STAT_17)
    assert stat['read_ios'] == 344039
    assert stat['read_merges'] == 25648
    assert stat['read_sectors'] == 10070618
    assert stat['read_ticks'] == 162905
    assert stat['write_sectors'] == 49435592
    assert stat['in_flight'] == 0
    assert stat['flush_ticks'] == 3126
    assert len(stat) == 17


def test_parse_stat_rhel8_and_rhel7_formats():
    rhel8 = probe.parse_stat(STAT_15)
    assert (rhel8['read_ios'], rhel8['read_sectors'], rhel8['read_ticks']) == (1000, 80000, 350)
    assert 'flush_ios' not in rhel8 and rhel8['discard_ticks'] == 0
    rhel7 = probe.parse_stat(STAT_11)
    assert (rhel7['read_ios'], rhel7['read_sectors'], rhel7['read_ticks'], rhel7['in_flight']) == (9931, 503674, 5461, 1)
    assert 'discard_ios' not in rhel7 and len(rhel7) == 11


@pytest.mark.parametrize('text', ['', '1 2 3 4', 'a b c d e f g h i j k', None, '1 2 3 4 5 6 7 8 9 10 -1'])
def test_parse_stat_rejects_garbage(text):
    with pytest.raises(probe.ProbeError) as exc:
        probe.parse_stat(text, '/sys/block/vda/stat')
    assert '/sys/block/vda/stat' in str(exc.value) and 'stat.rst' in str(exc.value)


def test_read_stat_of_dm_device_and_partition(host):
    assert probe.read_stat(host.root, 'dm-0')['read_sectors'] == 8000
    # a partition has its own counters inside its disk's directory
    assert probe.stat_path(host.root, 'nvme0n1p1') == host.path(host._devdir('nvme0n1') + '/nvme0n1p1/stat')
    host.write(host._devdir('nvme0n1p1') + '/stat', stat_line(7, 56))
    assert probe.read_stat(host.root, 'nvme0n1p1')['read_ios'] == 7


def test_read_stat_missing(host):
    os.unlink(host.path(DM0 + '/stat'))
    with pytest.raises(probe.ProbeError) as exc:
        probe.read_stat(host.root, 'dm-0')
    assert 'dm-0 has no I/O counters' in str(exc.value)


def test_read_delta_bytes_are_sectors_times_512():
    before = probe.parse_stat(stat_line(100, 8000, 50))
    after = probe.parse_stat(stat_line(131, 8000 + 131072, 380))
    assert probe.read_delta(before, after) == {'ios': 31, 'sectors': 131072, 'bytes': 64 * MIB, 'ticks_ms': 330}


def test_read_delta_counter_reset_is_an_error():
    with pytest.raises(probe.ProbeError) as exc:
        probe.read_delta(probe.parse_stat(stat_line(100, 8000)), probe.parse_stat(stat_line(5, 40)))
    assert 'went backwards' in str(exc.value) and 'Run it again' in str(exc.value)


# ---------------------------------------------------------------------------------------------
# Percentiles and latency

def test_percentile_interpolates_between_closest_ranks():
    values = list(range(1, 101))       # 1..100
    assert probe.percentile(values, 50) == pytest.approx(50.5)
    assert probe.percentile(values, 99) == pytest.approx(99.01)
    assert probe.percentile(values, 0) == 1
    assert probe.percentile(values, 100) == 100
    assert probe.percentile([10.0, 20.0], 50) == pytest.approx(15.0)
    assert probe.percentile([3, 1, 2], 50) == 2          # input order does not matter
    assert probe.percentile([7.5], 99) == 7.5
    assert probe.percentile([], 50) is None


def test_percentile_out_of_range():
    with pytest.raises(ValueError):
        probe.percentile([1, 2], 101)


def test_latency_summary_in_milliseconds():
    seconds = [0.001] * 98 + [0.010, 0.100]
    lat = probe.latency_summary(seconds)
    assert lat['p50_ms'] == pytest.approx(1.0)
    assert lat['p99_ms'] == pytest.approx(10.9)     # rank 98.01: 10 ms + 0.01 * (100 - 10) ms
    assert lat['max_ms'] == pytest.approx(100.0)
    assert lat['mean_ms'] == pytest.approx((98 * 1.0 + 10 + 100) / 100)
    assert probe.latency_summary([]) == {'mean_ms': None, 'p50_ms': None, 'p99_ms': None, 'max_ms': None}


# ---------------------------------------------------------------------------------------------
# Amplification and bytes per read

def test_amplification_and_bytes_per_read():
    # 16 reads of 8 KiB at 4096 KiB read-ahead: every fault pulls 4 MiB
    assert probe.amplification(64 * MIB, 16, 8 * KIB) == 512.0
    assert probe.bytes_per_read(64 * MIB, 16) == 4 * MIB
    # exactly the records: 1.0
    assert probe.amplification(2000 * 8 * KIB, 2000, 8 * KIB) == 1.0
    # half the reads were page-cache hits of an earlier read-ahead: still over all reads
    assert probe.bytes_per_read(8 * 32 * KIB, 16) == 16 * KIB
    assert probe.amplification(0, 10, 8 * KIB) == 0.0
    assert probe.amplification(MIB, 0, 8 * KIB) is None
    assert probe.bytes_per_read(MIB, 0) is None


# ---------------------------------------------------------------------------------------------
# The sparse cap: reads x max(read-ahead, record) <= 25% of the file

@pytest.mark.parametrize('ra_kb, size_mb, record_kb, reads, expected, capped', [
    (4096, 256, 8, 2000, 16, True),      # 64 MiB / 4 MiB
    (32, 256, 8, 2000, 2000, False),     # 64 MiB / 32 KiB = 2048 >= 2000
    (32, 256, 8, 2048, 2048, False),     # exactly at the cap
    (32, 256, 8, 2049, 2048, True),
    (128, 256, 8, 2000, 512, True),      # 64 MiB / 128 KiB
    (8192, 128, 8, 2000, 4, True),       # 32 MiB / 8 MiB
    (0, 256, 8, 2000, 2000, False),      # no read-ahead: the record is the window, 8192 fit
    (4, 256, 16, 5000, 4096, True),      # the record (16 KiB) is larger than read-ahead
    (None, 1, 8, 10, 10, False),         # unknown read-ahead: the record is the window
])
def test_sparse_cap(ra_kb, size_mb, record_kb, reads, expected, capped):
    cap = probe.sparse_cap(reads, size_mb * MIB, record_kb * KIB, ra_kb)
    assert cap['reads'] == expected
    assert cap['requested'] == reads
    assert cap['capped'] is capped
    assert (cap['reason'] is not None) is capped


def test_sparse_cap_reason_names_read_ahead_and_the_size_that_fits():
    cap = probe.sparse_cap(2000, 256 * MIB, 8 * KIB, 4096)
    assert cap['max_reads'] == 16
    assert 'read_ahead_kb=4096' in cap['reason']
    assert '8000 MiB' in cap['reason']                 # 2000 x 4 MiB
    assert 'Lowered to 16 reads' in cap['reason']
    assert 'size_mb=32000' in cap['reason']            # 2000 x 4 MiB / 25%


def test_sparse_cap_file_too_small_for_one_read():
    with pytest.raises(probe.ProbeError) as exc:
        probe.sparse_cap(50, 8 * MIB, 8 * KIB, 8192)
    assert 'read_ahead_kb=8192' in str(exc.value)
    assert 'Raise size_mb to at least 32' in str(exc.value)


# ---------------------------------------------------------------------------------------------
# Offsets, free space, scratch names

def test_random_offsets_reproducible_aligned_distinct():
    first = probe.random_offsets(4242, MIB, 8 * KIB, 5)
    # the same on Python 2.7 and 3 (Random.random() only)
    assert first == [901120, 434176, 24576, 401408, 335872]
    assert probe.random_offsets(4242, MIB, 8 * KIB, 5) == first
    assert probe.random_offsets(1, MIB, 8 * KIB, 5) != first
    many = probe.random_offsets(7, 64 * MIB, 16 * KIB, 1000)
    assert len(set(many)) == 1000
    assert all(o % (16 * KIB) == 0 and 0 <= o <= 64 * MIB - 16 * KIB for o in many)
    # every record of the file, each once
    assert sorted(probe.random_offsets(3, 64 * KIB, 8 * KIB, 8)) == [i * 8 * KIB for i in range(8)]
    with pytest.raises(probe.ProbeError):
        probe.random_offsets(3, 64 * KIB, 8 * KIB, 9)


class StatVfs(object):
    def __init__(self, free_bytes, frsize=4096):
        self.f_frsize = frsize
        self.f_bavail = free_bytes // frsize


def test_check_space_needs_size_plus_ten_percent():
    assert probe.space_needed(256 * MIB) == int(256 * MIB * 1.1)
    needed = probe.space_needed(256 * MIB)
    assert probe.check_space('/x', 256 * MIB, lambda path: StatVfs(needed, frsize=1)) == needed
    with pytest.raises(probe.ProbeError):
        probe.check_space('/x', 256 * MIB, lambda path: StatVfs(needed - 1, frsize=1))
    with pytest.raises(probe.ProbeError) as exc:
        probe.check_space('/x', 256 * MIB, lambda path: StatVfs(270 * MIB), shown='/srv/aem')
    msg = str(exc.value)
    assert 'not enough free space in /srv/aem' in msg
    assert '281.6 MiB' in msg and '270.0 MiB are free' in msg and 'Lower size_mb' in msg


def test_scratch_name_and_stale_files(tmpdir):
    assert probe.scratch_name(4711, 'deadbeef') == '.aemops-io-probe-4711-deadbeef'
    name = probe.scratch_name()
    assert name.startswith('.aemops-io-probe-%d-' % os.getpid()) and len(name.split('-')[-1]) == 8
    assert probe.scratch_name() != name
    tmpdir.join('.aemops-io-probe-1-00000000').write('x')
    tmpdir.join('segment.tar').write('x')
    assert probe.stale_scratch(str(tmpdir)) == ['.aemops-io-probe-1-00000000']
    assert probe.stale_scratch(str(tmpdir.join('missing'))) == []


# ---------------------------------------------------------------------------------------------
# plan(): everything checked before anything is written

def test_plan_on_lv(host):
    the_plan = probe.plan(host.root, REPO)
    assert the_plan['device'] == 'dm-0' and the_plan['stat_device'] == 'dm-0'
    assert the_plan['read_ahead_kb'] == 32
    assert the_plan['mount_point'] == '/opt/aem' and the_plan['fstype'] == 'xfs'
    assert (the_plan['reads_requested'], the_plan['reads_planned'], the_plan['reads_capped']) == (2000, 2000, False)
    assert the_plan['size_mb'] == 256 and the_plan['record_kb'] == 8 and the_plan['method'] == 'mmap'
    assert the_plan['seed'] == probe.DEFAULT_SEED and the_plan['timeout'] == 120
    assert the_plan['stale_scratch_files'] == []
    assert scratch_files(host.path(REPO)) == []


def test_plan_caps_for_another_read_ahead_when_asked(host):
    """The read-ahead sweep caps its reads per value it sets, not for the device's current value."""
    host.write(DM0 + '/queue/read_ahead_kb', '4096\n')
    assert probe.plan(host.root, REPO)['reads_planned'] == 16
    the_plan = probe.plan(host.root, REPO, cap_read_ahead_kb=0)
    assert the_plan['read_ahead_kb'] == 4096 and the_plan['reads_planned'] == 2000
    with pytest.raises(probe.ProbeError):
        probe.plan(host.root, REPO, size_mb=8)       # 4 MiB at 4096 KiB is more than 25% of 8 MiB
    assert probe.plan(host.root, REPO, size_mb=8, cap_read_ahead_kb=32)['reads_planned'] == 64


def test_plan_on_partition_counts_the_partition_and_reads_ahead_by_the_disk(host):
    host.mkdir('/var/aem')
    the_plan = probe.plan(host.root, '/var/aem', size_mb=256)
    assert the_plan['device'] == 'nvme0n1' and the_plan['stat_device'] == 'nvme0n1p1'
    assert the_plan['read_ahead_kb'] == 4096
    assert the_plan['reads_planned'] == 16 and the_plan['reads_capped'] is True
    assert 'size_mb=32000' in the_plan['reads_capped_reason']


@pytest.mark.parametrize('kwargs, words', [
    ({'size_mb': 0}, ['size_mb=0', 'at least 1']),
    ({'record_kb': 6}, ['record_kb=6', 'multiple of 4']),
    ({'record_kb': 0}, ['record_kb=0', 'multiple of 4']),
    ({'record_kb': 2048, 'size_mb': 1}, ['record_kb=2048 is larger than the 1 MiB']),
    ({'reads': 0}, ['reads=0', 'at least 1']),
    ({'timeout': 0}, ['timeout=0', 'at least 1 second']),
    ({'method': 'read'}, ['method=read', 'mmap, pread']),
])
def test_plan_rejects_bad_arguments(host, kwargs, words):
    with pytest.raises(probe.ProbeError) as exc:
        probe.plan(host.root, REPO, **kwargs)
    for word in words:
        assert word in str(exc.value)


def test_plan_path_errors(host):
    cases = [
        ('opt/aem', 'not an absolute path'),
        ('/opt/aem/missing', 'path /opt/aem/missing does not exist'),
    ]
    host.write('/opt/aem/data.tar', 'x')
    cases.append(('/opt/aem/data.tar', 'path /opt/aem/data.tar is not a directory'))
    for path, words in cases:
        with pytest.raises(probe.ProbeError) as exc:
            probe.plan(host.root, path)
        assert words in str(exc.value)


def test_plan_tmpfs_has_no_block_device(host):
    with pytest.raises(probe.ProbeError) as exc:
        probe.plan(host.root, '/tmp')
    msg = str(exc.value)
    assert '/tmp is on tmpfs' in msg and 'no block device' in msg
    assert 'no device read-ahead to measure' in msg and 'ignore_missing' not in msg


def test_plan_read_only_mount(host):
    host.add_disk('vdb', '252:16')
    host.mount('252:16', '/mnt/ro', 'xfs', '/dev/vdb', options='ro,relatime')
    with pytest.raises(probe.ProbeError) as exc:
        probe.plan(host.root, '/mnt/ro')
    assert 'read-only mount (/mnt/ro)' in str(exc.value)


def test_plan_not_writable(host, monkeypatch):
    real_access = os.access
    directory = host.path(REPO)
    monkeypatch.setattr(probe.os, 'access', lambda p, mode: False if p == directory else real_access(p, mode))
    with pytest.raises(probe.ProbeError) as exc:
        probe.plan(host.root, REPO)
    assert 'is not writable' in str(exc.value) and 'become: true' in str(exc.value)


def test_plan_refuses_short_free_space(host, monkeypatch):
    monkeypatch.setattr(probe.os, 'statvfs', lambda path: StatVfs(100 * MIB))
    with pytest.raises(probe.ProbeError) as exc:
        probe.plan(host.root, REPO, size_mb=256)
    assert 'not enough free space in %s' % REPO in str(exc.value)
    assert scratch_files(host.path(REPO)) == []


def test_plan_reports_stale_scratch_files(host):
    host.write(REPO + '/.aemops-io-probe-99-0badf00d', '')
    the_plan = probe.plan(host.root, REPO)
    assert the_plan['stale_scratch_files'] == ['.aemops-io-probe-99-0badf00d']
    warnings = probe.check_mode_result(the_plan)['warnings']
    assert any('.aemops-io-probe-99-0badf00d' in w for w in warnings)


def test_check_mode_result(host):
    result = probe.check_mode_result(probe.plan(host.root, '/opt/aem', size_mb=64, reads=5000))
    assert result['measured'] is False
    assert result['reads_planned'] == 512 and result['reads_capped'] is True   # 16 MiB / 32 KiB
    assert 'would write a 64 MiB scratch file in /opt/aem (on dm-0, read_ahead_kb=32)' in result['msg']
    assert 'read 512 random 8 KiB records by mmap' in result['msg']
    assert 'root' not in result and 'directory' not in result
    assert any('reads lowered from 5000 to 512' in w for w in result['warnings'])


# ---------------------------------------------------------------------------------------------
# run() on the simulated device

def test_run_figures(host):
    sim = Sim(per_read=32 * KIB)
    before = open_fds()
    result = sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10))
    assert open_fds() == before
    assert result['measured'] is True and result['scratch_removed'] is True
    assert scratch_files(host.path(REPO)) == []
    assert result['scratch_file'].startswith(REPO + '/.aemops-io-probe-%d-' % os.getpid())
    assert result['reads'] == 10 and result['timed_out'] is False
    assert result['device_read_ios'] == 10
    assert result['device_read_bytes'] == 320 * KIB
    assert result['device_read_mb'] == pytest.approx(0.3125, abs=0.001)   # rounded to 3 decimals
    assert result['device_read_ticks_ms'] == 10
    assert result['device_bytes_per_io'] == 32 * KIB
    assert result['read_amplification'] == 4.0
    assert result['bytes_per_read'] == 32 * KIB
    assert result['page_cache_bytes'] == 320 * KIB and result['page_cache_amplification'] == 4.0
    assert result['latency'] == {'mean_ms': 1.0, 'p50_ms': 1.0, 'p99_ms': 1.0, 'max_ms': 1.0}
    assert result['elapsed_s'] == pytest.approx(0.01)
    assert result['noisy'] is False and result['noise_reason'] is None and result['noise_bytes_per_s'] == 0
    assert result['eviction']['resident_pages'] == 0 and result['eviction']['verified'] is True
    assert result['warnings'] == []
    assert result['summary'] == ('10 random 8 KiB reads by mmap from a 4 MiB file on dm-0 (read_ahead_kb=32): the '
                                 'device read 320.0 KiB in 10 I/Os, 4.0x the 80.0 KiB asked for (32.0 KiB per read); '
                                 'latency mean 1.000 ms, p50 1.000 ms, p99 1.000 ms.')
    # the idle windows: one second before and one after
    assert sim.sleeps.count(probe.NOISE_WINDOW_S) == 2


def test_run_waits_for_in_flight_read_ahead(host):
    # busy during the two baseline reads and the first three polls after the reads
    sim = Sim(per_read=32 * KIB, in_flight_polls=5)
    result = sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10), noise_window=0)
    assert result['device_read_ios'] == 11               # the late completion is counted
    assert result['device_read_bytes'] == 320 * KIB + 4 * KIB
    assert sim.sleeps.count(probe.SETTLE_STEP_S) == 3


def test_run_timeout_stops_and_reports_reads_done(host):
    sim = Sim(read_s=0.4)
    result = sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10, timeout=1))
    assert result['timed_out'] is True
    assert result['reads'] == 3 and result['reads_planned'] == 10     # at 0, 0.4, 0.8 s; stopped at 1.2 s
    assert result['read_amplification'] == 4.0
    assert 'Stopped at timeout=1 s.' in result['summary']
    assert any('reached timeout=1 s after 3 of 10 reads' in w for w in result['warnings'])
    assert scratch_files(host.path(REPO)) == [] and result['scratch_removed'] is True


def test_run_timeout_checked_before_each_read(host):
    # a read that alone outlasts the timeout: it completes, and no other read starts
    sim = Sim(read_s=5)
    result = sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10, timeout=1), noise_window=0)
    assert result['reads'] == 1 and result['timed_out'] is True
    assert result['latency']['max_ms'] == pytest.approx(5000.0)


def test_run_failure_mid_reads_removes_the_file(host):
    sim = Sim(fail_after=3)
    before = open_fds()
    with pytest.raises(RuntimeError) as exc:
        sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10))
    assert 'simulated failure in read 4' in str(exc.value)
    assert scratch_files(host.path(REPO)) == []
    assert open_fds() == before          # the descriptor (and so the unlinked file) is closed
    assert sim.reads == 3


def test_run_write_timeout_removes_the_file(host):
    ticks = []

    def clock():
        ticks.append(1)
        return 1000.0 + 0.6 * len(ticks)    # every chunk takes 0.6 s

    before = open_fds()
    with pytest.raises(probe.ProbeError) as exc:
        probe.run(probe.plan(host.root, REPO, size_mb=8, reads=10, timeout=1), clock=clock, sleep=lambda s: None,
                  data=lambda n: b'\x00' * n)
    assert 'took longer than timeout=1 s' in str(exc.value) and 'removed' in str(exc.value)
    assert scratch_files(host.path(REPO)) == [] and open_fds() == before


def test_run_out_of_space_while_writing(host, monkeypatch):
    real_write = os.write
    written = []

    def full_disk(fd, data):
        if written:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(probe.os, 'write', full_disk)
    sim = Sim()
    with pytest.raises(probe.ProbeError) as exc:
        sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10))
    assert 'ran out of space' in str(exc.value) and 'after 1 MiB of the 4 MiB' in str(exc.value)
    assert scratch_files(host.path(REPO)) == []


def test_run_keyboard_interrupt_removes_the_file(host):
    def interrupted(fd, mapping):
        assert scratch_files(host.path(REPO)) == []    # unlinked before the first read already

        def read(offset, length):
            raise KeyboardInterrupt()
        return read

    sim = Sim()
    with pytest.raises(KeyboardInterrupt):
        probe.run(probe.plan(host.root, REPO, size_mb=4, reads=10), clock=sim.clock, sleep=sim.sleep,
                  reader=interrupted, stat_reader=sim.stat, resident=sim.resident)
    assert scratch_files(host.path(REPO)) == []


def test_run_noisy_by_idle_rate_without_mincore(host):
    sim = Sim(per_read=32 * KIB, noise_rate=10 * MIB)   # 10 MiB/s in the idle windows
    result = probe.run(probe.plan(host.root, REPO, size_mb=4, reads=10), clock=sim.clock, sleep=sim.sleep,
                       reader=sim.reader, stat_reader=sim.stat, resident=lambda fd, size: None)
    assert result['noise_bytes_per_s'] == pytest.approx(10 * MIB, rel=0.01)
    assert result['noise']['estimate_bytes'] == pytest.approx(0.01 * 10 * MIB, rel=0.01)   # over the 10 ms
    assert result['noise']['unaccounted_bytes'] is None
    assert result['noisy'] is True
    assert 'while idle around the probe' in result['noise_reason']
    assert 'approximate' in result['noise_reason']
    assert result['summary'].startswith('APPROXIMATE (noisy, other I/O on the device): ')
    assert any(w.startswith('noisy measurement: ') for w in result['warnings'])


def test_run_busy_idle_windows_but_clean_reads(host):
    # the page cache shows that every byte the device read during the reads was the probe's
    sim = Sim(per_read=32 * KIB, noise_rate=10 * MIB)
    result = sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10))
    assert result['noise_bytes_per_s'] == pytest.approx(10 * MIB, rel=0.01)
    assert result['noise']['estimate_bytes'] > 32 * KIB
    assert result['noise']['unaccounted_bytes'] == 0
    assert result['noisy'] is False and result['noise_reason'] is None


def test_run_noisy_by_unaccounted_bytes(host):
    # quiet before and after, but someone else read 16 KiB during each of our reads
    sim = Sim(per_read=32 * KIB, other_per_read=16 * KIB)
    result = sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10))
    assert result['noise_bytes_per_s'] == 0
    assert result['noise']['unaccounted_bytes'] == 160 * KIB
    assert result['noisy'] is True
    assert 'more than the scratch file gained in the page cache' in result['noise_reason']
    assert '33% of the 491520 bytes measured' in result['noise_reason']


def test_the_ebs_volume_beneath_the_lv_is_sampled_at_both_ends_of_the_reads(host):
    """The volume's own counters, read before the first read and after the device settled: the rates of the
    window (ebs_stats.window), with the window measured by the probe's clock."""
    sim = Sim(per_read=4 * MIB)
    pages = [ebs_page({'total_read_ops': 100, 'total_read_bytes': 0, 'ebs_volume_performance_exceeded_tp': 0}),
             ebs_page({'total_read_ops': 110, 'total_read_bytes': 40 * MIB,
                       'ebs_volume_performance_exceeded_tp': 5000})]
    nvme_calls = []

    def nvme():
        page = pages[len(nvme_calls)]
        fake = FakeNvme({host.path('/dev/nvme1n1'): ('259:2', page)})
        nvme_calls.append(fake)
        return fake

    def reader():
        return probe.ebs_samples(host.root, ['dm-0'], nvme())

    result = sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10), ebs_reader=reader)
    assert len(nvme_calls) == 2
    found = result['ebs']['nvme1n1']
    assert found['volume_id'] == 'vol-0123456789abcdef0'
    assert found['rates']['window_s'] == pytest.approx(0.01, abs=0.005)  # the ten reads of 1 ms, and settling
    assert found['rates']['read_iops'] == pytest.approx(10 / found['rates']['window_s'], rel=0.01)
    assert found['rates']['bound'].startswith('the volume sat at its throughput cap for ')


def test_a_device_without_ebs_statistics_gives_its_reason_and_the_probe_its_figures(host):
    sim = Sim(per_read=32 * KIB)
    result = sim.run(probe.plan(host.root, REPO, size_mb=4, reads=10))  # the real ebs reader: no device node here
    assert result['ebs']['nvme1n1']['reason'].startswith('no EBS statistics: cannot open ')
    assert result['read_amplification'] is not None
    assert probe.ebs_samples(host.root, ['nosuch'])['nosuch']['reason'].startswith(
        'no EBS statistics: cannot read what is beneath nosuch (no such block device: nosuch')
    assert sorted(probe.ebs_samples(host.root, ['/dev/mapper/vg_aem-lv_repo', 'nvme1n1', 'nvme0n1p1'])) == [
        'nvme0n1', 'nvme1n1']


def test_run_small_background_is_not_noisy(host):
    sim = Sim(per_read=4 * MIB, noise_rate=100 * KIB)  # 1 KiB over 10 ms against 40 MiB
    result = probe.run(probe.plan(host.root, REPO, size_mb=4, reads=10), clock=sim.clock, sleep=sim.sleep,
                       reader=sim.reader, stat_reader=sim.stat, resident=lambda fd, size: None)
    assert result['noisy'] is False and result['noise_bytes_per_s'] > 0


def test_run_reports_incomplete_eviction(host):
    sim = Sim()
    calls = []

    def resident(fd, size):
        calls.append(1)
        return 5 if len(calls) <= 2 else sim.resident(fd, size)

    result = probe.run(probe.plan(host.root, REPO, size_mb=4, reads=10), clock=sim.clock, sleep=sim.sleep,
                       reader=sim.reader, stat_reader=sim.stat, resident=resident)
    assert result['eviction']['resident_pages'] == 5
    assert any('5 pages of the scratch file stayed in the page cache' in w for w in result['warnings'])


def test_run_without_mincore(host):
    sim = Sim()
    result = probe.run(probe.plan(host.root, REPO, size_mb=4, reads=10), clock=sim.clock, sleep=sim.sleep,
                       reader=sim.reader, stat_reader=sim.stat, resident=lambda fd, size: None)
    assert result['eviction']['verified'] is False and result['eviction']['resident_pages'] is None
    assert result['page_cache_bytes'] is None and result['page_cache_amplification'] is None
    assert result['noise']['unaccounted_bytes'] is None and result['noisy'] is False


def test_assess_noise():
    quiet = probe.assess_noise(4 * MIB, 0.0, 1.0, 4 * MIB)
    assert quiet == {'noisy': False, 'estimate_bytes': 0, 'unaccounted_bytes': 0, 'reason': None}
    # the page cache decides when known: a busy idle rate alone does not make it noisy ...
    busy_idle = probe.assess_noise(4 * MIB, MIB, 1.0, 4 * MIB)
    assert busy_idle['noisy'] is False and busy_idle['estimate_bytes'] == MIB
    # ... but bytes the file did not gain do, even with a quiet idle rate
    foreign = probe.assess_noise(4 * MIB, 0.0, 1.0, 3 * MIB)
    assert foreign['noisy'] is True and foreign['unaccounted_bytes'] == MIB and '25%' in foreign['reason']
    # below 10%: not noisy
    assert probe.assess_noise(4 * MIB, 0.0, 1.0, 4 * MIB - 100 * KIB)['noisy'] is False
    loud = probe.assess_noise(4 * MIB, MIB, 1.0)
    assert loud['noisy'] is True and '25%' in loud['reason']
    nothing_measured = probe.assess_noise(0, 1000.0, 1.0)
    assert nothing_measured['noisy'] is True and 'all of the 0 bytes' in nothing_measured['reason']


def test_human_bytes():
    assert probe.human_bytes(512) == '512 B'
    assert probe.human_bytes(32 * KIB) == '32.0 KiB'
    assert probe.human_bytes(24 * MIB) == '24.0 MiB'
    assert probe.human_bytes(1536 * MIB) == '1.5 GiB'


# ---------------------------------------------------------------------------------------------
# The real kernel: posix_fadvise, mincore and pread, with and without the Python 3 calls

def _block_backed(directory):
    try:
        name = blockdev.device_for_path('/', directory)[0]
    except blockdev.BlockDeviceError:
        return False
    return os.path.exists(probe.stat_path('/', name))


@pytest.fixture
def real_dir(tmpdir):
    """A writable directory on a block device: pytest's tmpdir, else one under /var/tmp, or skip."""
    directory, made = str(tmpdir), None
    if not _block_backed(directory):
        if not (os.path.isdir('/var/tmp') and _block_backed('/var/tmp')):
            pytest.skip('no block-backed writable temporary directory (tmp is on tmpfs?)')
        directory = made = tempfile.mkdtemp(prefix='aemops-io-probe-test-', dir='/var/tmp')
    try:
        yield directory
        assert scratch_files(directory) == []
    finally:
        if made:
            shutil.rmtree(made)


def written_file(directory, size):
    path = os.path.join(directory, 'data')
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.unlink(path)
    probe.fill_scratch(fd, size, lambda: 0, 1, timeout=1)
    return fd


def test_fadvise_and_mincore_on_a_real_file(real_dir):
    fd = written_file(real_dir, 4 * MIB)
    try:
        pages = probe.resident_pages(fd, 4 * MIB)
        if pages is None:
            pytest.skip('mincore through ctypes is not available here')
        assert pages == 4 * MIB // probe.PAGE_BYTES      # just written: all cached
        eviction = probe.evict(fd, 4 * MIB, lambda s: None)
        assert eviction['verified'] is True and eviction['resident_pages'] == 0
        expected = 'os.posix_fadvise' if hasattr(os, 'posix_fadvise') else 'libc posix_fadvise'
        assert eviction['method'] == expected
        assert probe.pread_reader(fd)(MIB, 8 * KIB) is not None
        assert 1 <= probe.resident_pages(fd, 4 * MIB) <= 4 * MIB // probe.PAGE_BYTES
    finally:
        os.close(fd)


def test_ctypes_fadvise_fallback(real_dir, monkeypatch):
    """The Python 2.7 path, also on Python 3: libc's posix_fadvise through ctypes."""
    monkeypatch.delattr(probe.os, 'posix_fadvise', raising=False)
    monkeypatch.delattr(probe.os, 'POSIX_FADV_DONTNEED', raising=False)
    fd = written_file(real_dir, MIB)
    try:
        assert probe.fadvise_dontneed(fd, 0, MIB) == 'libc posix_fadvise'
        if probe.resident_pages(fd, MIB) is not None:
            assert probe.resident_pages(fd, MIB) == 0
        with pytest.raises(probe.ProbeError) as exc:
            probe.fadvise_dontneed(fd, 0, -1)          # EINVAL, reported by return value
        assert 'POSIX_FADV_DONTNEED' in str(exc.value)
    finally:
        os.close(fd)


def test_fadv_dontneed_value(monkeypatch):
    monkeypatch.delattr(probe.os, 'POSIX_FADV_DONTNEED', raising=False)
    monkeypatch.setattr(probe.platform, 'machine', lambda: 'x86_64')
    assert probe.fadv_dontneed() == 4
    monkeypatch.setattr(probe.platform, 'machine', lambda: 's390x')
    assert probe.fadv_dontneed() == 6


def test_pread_fallback_lseek_read(real_dir, monkeypatch):
    """The Python 2.7 path, also on Python 3: lseek + read where os.pread is missing."""
    path = os.path.join(real_dir, 'data')
    with open(path, 'wb') as f:
        f.write(b''.join(bytes(bytearray([i]) * 4096) for i in range(16)))
    fd = os.open(path, os.O_RDONLY)
    try:
        native = probe.pread_reader(fd)
        monkeypatch.delattr(probe.os, 'pread', raising=False)
        fallback = probe.pread_reader(fd)
        assert fallback(5 * 4096, 8192) == bytes(bytearray([5]) * 4096 + bytearray([6]) * 4096)
        assert fallback(0, 4096) == bytes(bytearray([0]) * 4096)
        assert native(15 * 4096, 4096) == fallback(15 * 4096, 4096)
        assert fallback(16 * 4096, 4096) == b''
    finally:
        os.close(fd)
        os.unlink(path)


def e2e_size_mb(directory, min_reads=4):
    """A file size that lets ``min_reads`` sparse reads run at this host's read-ahead."""
    name = blockdev.device_for_path('/', directory)[0]
    ra_kb = blockdev.read_ahead_kb('/', blockdev.whole_disk('/', name)) or 0
    window = max(ra_kb * KIB, 8 * KIB)
    size_mb = max(8, -(-min_reads * window * 4 // MIB))
    if size_mb > 1024:
        pytest.skip('read_ahead_kb=%d would need a %d MiB scratch file' % (ra_kb, size_mb))
    return size_mb


@pytest.mark.parametrize('method', ['mmap', 'pread'])
def test_end_to_end_on_the_host(real_dir, method):
    size_mb = e2e_size_mb(real_dir)
    the_plan = probe.plan('/', real_dir, size_mb=size_mb, reads=50, method=method, timeout=60)
    assert 1 <= the_plan['reads_planned'] <= 50
    before = open_fds()
    result = probe.run(the_plan, noise_window=0.2)
    assert open_fds() == before
    print(result['summary'])
    assert scratch_files(real_dir) == [] and result['scratch_removed'] is True
    assert result['measured'] is True and result['timed_out'] is False
    assert result['reads'] == the_plan['reads_planned']
    assert result['device'] == the_plan['device'] and result['read_ahead_kb'] == the_plan['read_ahead_kb']
    assert result['device_read_bytes'] >= 0 and result['device_read_ios'] >= 0
    assert result['read_amplification'] >= 0 and result['bytes_per_read'] >= 0
    assert abs(result['device_read_bytes'] / float(MIB) - result['device_read_mb']) < 0.001
    lat = result['latency']
    assert 0 <= lat['p50_ms'] <= lat['p99_ms'] <= lat['max_ms'] < 60000
    assert lat['mean_ms'] <= lat['max_ms']
    assert result['noise_bytes_per_s'] >= 0 and isinstance(result['noisy'], bool)
    expected = 'os.posix_fadvise' if hasattr(os, 'posix_fadvise') else 'libc posix_fadvise'
    assert result['eviction']['method'] == expected
    if result['page_cache_bytes'] is not None:
        # the reads brought at least the records they touched into the page cache
        assert result['page_cache_bytes'] >= result['reads'] * 8 * KIB
        if method == 'mmap' and not result['noisy'] and result['read_ahead_kb'] >= 64:
            # read-around: an mmap fault pulls far more than the record
            assert result['page_cache_amplification'] > 2
