# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""module_utils/ebs_stats.py: the 0xD0 page of an EBS volume, the request that reads it, and two samples' rates.

The pages are built byte by byte from the documented layout (fakehost.ebs_page, struct.pack at the offsets
nvme-cli and ebsnvme give), never by the parser under test; the device is fakehost.FakeNvme on a FakeHost.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import struct

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import ebs_stats, host
from fakehost import INSTANCE_STORE_MAGIC, FakeHost, FakeNvme, ebs_page, nitro_host

GOLDEN = {
    'total_read_ops': 1234567, 'total_write_ops': 7654321, 'total_read_bytes': 0x123456789A,
    'total_write_bytes': 0x0FEDCBA987, 'total_read_time': 987654321, 'total_write_time': 123456789,
    'ebs_volume_performance_exceeded_iops': 11, 'ebs_volume_performance_exceeded_tp': 41000000,
    'ec2_instance_performance_exceeded_iops': 3000000, 'ec2_instance_performance_exceeded_tp': 2 ** 64 - 1,
    'volume_queue_length': 7,
}
READ_BINS = [(0, 128, 10), (128, 256, 2 ** 32 - 1), (256, 512, 3)]
WRITE_BINS = [(0, 64, 1), (64, 128, 2)]


def golden():
    return ebs_page(GOLDEN, READ_BINS, WRITE_BINS, version=1)


# ---------------------------------------------------------------------------------------------
# The page

def test_the_golden_page_gives_every_counter_and_both_histograms():
    stats = ebs_stats.parse_page(golden())
    for key, value in GOLDEN.items():
        assert stats[key] == value, key
    assert stats['version'] == 1
    assert stats['read_io_latency_histogram'] == [list(b) for b in READ_BINS]
    assert stats['write_io_latency_histogram'] == [list(b) for b in WRITE_BINS]


def test_the_offsets_are_the_documented_ones():
    page = bytearray(golden())
    assert struct.unpack_from('<I', page, 0)[0] == 0x3C23B510
    assert struct.unpack_from('<Q', page, 0x008)[0] == GOLDEN['total_read_ops']
    assert struct.unpack_from('<Q', page, 0x040)[0] == GOLDEN['ebs_volume_performance_exceeded_tp']
    assert struct.unpack_from('<Q', page, 0x058)[0] == GOLDEN['volume_queue_length']
    assert struct.unpack_from('<Q', page, 0x200)[0] == 3
    assert struct.unpack_from('<QQII', page, 0x208 + 24)[:3] == READ_BINS[1]
    assert struct.unpack_from('<Q', page, 0x808)[0] == 2
    # a histogram is 8 + 64 * 24 bytes: the read one ends where the write one starts
    assert 0x200 + 8 + 64 * 24 == 0x808


@pytest.mark.parametrize('page, line', [
    (ebs_page(GOLDEN, magic=INSTANCE_STORE_MAGIC), "not an EBS volume's page (the instance-store magic 0xEC2C0D7E)"),
    (ebs_page(GOLDEN, magic=0x12345678), "not an EBS volume's page (magic 0x12345678, not 0x3C23B510)"),
    (b'\0' * 4096, 'the page is all zeros'),
    (ebs_page(GOLDEN)[:4000], 'the page is short (4000 of 4096 bytes)'),
    (b'', 'the page is short (0 of 4096 bytes)'),
    (ebs_page(GOLDEN, READ_BINS, read_num_bins=65), 'the read io latency histogram claims 65 bins (at most 64)'),
    (ebs_page(GOLDEN, READ_BINS, read_num_bins=2 ** 64 - 1),
     'the read io latency histogram claims 18446744073709551615 bins (at most 64)'),
    (None, 'the device answered no page'),
])
def test_a_page_that_is_not_an_ebs_volumes_is_one_line(page, line):
    with pytest.raises(ebs_stats.NoStats) as e:
        ebs_stats.parse_page(page)
    assert str(e.value) == line


def test_64_bins_are_read_and_trailing_bytes_ignored():
    bins = [(i, i + 1, i) for i in range(64)]
    stats = ebs_stats.parse_page(ebs_page(GOLDEN, bins) + b'\xff' * 100)
    assert stats['read_io_latency_histogram'][-1] == [63, 64, 63]


@pytest.mark.parametrize('serial, volume', [
    ('vol0123456789abcdef0', 'vol-0123456789abcdef0'),
    ('vol-0123456789abcdef0 ', 'vol-0123456789abcdef0'),
    ('vol01234567', 'vol-01234567'),
    ('AWS1234', None), ('vol', None), ('vol0123456789ABCDEF0', None), ('', None), (None, None),
])
def test_the_volume_id_is_the_serial_with_its_dash(serial, volume):
    assert ebs_stats.volume_id(serial) == volume


# ---------------------------------------------------------------------------------------------
# The request

def test_the_request_is_get_log_page_0xd0_of_4096_bytes_from_nsid_1(tmpdir):
    h = nitro_host(tmpdir)
    nvme = FakeNvme({h.path('/dev/nvme1n1'): ('259:2', golden())})
    found = ebs_stats.read_sample(h.root, 'nvme1n1', nvme)
    assert found['volume_id'] == 'vol-0123456789abcdef0' and found['stats']['total_read_ops'] == 1234567
    [(request, cmd, addr)] = nvme.ioctls
    # _IOWR('N', 0x41, struct nvme_admin_cmd): direction 3, size 72, type 'N', number 0x41
    assert request == 0xC0484E41 == (3 << 30) | (72 << 16) | (ord('N') << 8) | 0x41
    assert len(cmd) == 72
    fields = struct.unpack('<BBHIIIQQIIIIIIIIII', cmd)
    opcode, flags, _rsvd, nsid, _cdw2, _cdw3, metadata, data_addr, metadata_len, data_len, cdw10 = fields[:11]
    assert opcode == 0x02 and flags == 0 and nsid == 1
    assert data_addr == addr and data_len == 4096 and metadata == 0 and metadata_len == 0
    assert cdw10 & 0xFF == 0xD0 and cdw10 >> 16 == 1023
    assert fields[11:] == (0,) * 7
    assert nvme.closed == [200]


@pytest.mark.parametrize('answer, line', [
    (('status', 0x4002), 'no EBS statistics: the device refused log page 0xD0 (NVMe status 16386)'),
    (('errno', errno.EACCES), 'no EBS statistics: no permission (log page 0xD0 needs root: CAP_SYS_ADMIN)'),
    (('errno', errno.EPERM), 'no EBS statistics: no permission (log page 0xD0 needs root: CAP_SYS_ADMIN)'),
    (('errno', errno.ENOTTY), 'no EBS statistics: the NVMe admin command failed (%s)' % __import__('os').strerror(
        errno.ENOTTY)),
    (b'\0' * 4096, 'no EBS statistics: the page is all zeros'),
])
def test_what_the_device_answers_is_one_line_and_never_a_failure(tmpdir, answer, line):
    h = nitro_host(tmpdir)
    nvme = FakeNvme({h.path('/dev/nvme1n1'): ('259:2', answer)})
    found = ebs_stats.read_sample(h.root, 'nvme1n1', nvme)
    assert found == {'device': 'nvme1n1', 'volume_id': 'vol-0123456789abcdef0', 'reason': line}
    assert nvme.closed == [200]


def test_another_model_is_not_an_ebs_volume_and_is_never_opened(tmpdir):
    h = FakeHost(tmpdir)
    h.add_nvme('nvme0n1', '259:0', 'QM00001', model='QEMU NVMe Ctrl')
    nvme = FakeNvme({h.path('/dev/nvme0n1'): ('259:0', golden())})
    found = ebs_stats.read_sample(h.root, 'nvme0n1', nvme)
    assert found['reason'] == 'no EBS statistics: not an EBS volume (model QEMU NVMe Ctrl)'
    assert nvme.ioctls == [] and nvme.fds == {}


@pytest.mark.parametrize('node, open_errno, line', [
    ('259:9', None, 'is device 259:9, not 259:2 as sysfs says'),
    (None, None, 'is not a block device'),
    ('259:2', errno.EACCES, 'no permission (log page 0xD0 needs root: CAP_SYS_ADMIN)'),
    ('259:2', errno.ENOENT, 'cannot open'),
])
def test_a_node_that_is_not_the_device_sysfs_names_is_not_asked(tmpdir, node, open_errno, line):
    h = nitro_host(tmpdir)
    nvme = FakeNvme({h.path('/dev/nvme1n1'): (node, golden())}, open_errno=open_errno)
    found = ebs_stats.read_sample(h.root, 'nvme1n1', nvme)
    assert line in found['reason'] and 'stats' not in found
    assert nvme.ioctls == []


def test_the_host_model_reads_each_device_once_and_finds_the_disk_beneath_lvm(tmpdir):
    h = nitro_host(tmpdir)
    nvme = FakeNvme({h.path('/dev/nvme1n1'): ('259:2', golden()), h.path('/dev/nvme0n1'): ('259:0', golden())})
    run = host.Host(h.root, read_only=True)
    assert ebs_stats.nvme_disks(run, ['dm-0', 'nvme0n1p1', 'nvme1n1']) == ['nvme1n1', 'nvme0n1']
    first = ebs_stats.samples(run, ['dm-0'], nvme)
    again = ebs_stats.samples(run, ['dm-0', 'nvme1n1'], nvme)
    assert list(first) == ['nvme1n1'] and first == again
    assert len(nvme.ioctls) == 1


# ---------------------------------------------------------------------------------------------
# Two samples

def window_pages():
    """A minute in which the volume read 250 MiB/s, 15,000 reads at 1.5 ms, and sat at its throughput cap for
    41 s while the instance was at its EBS IOPS cap for 3 s."""
    before = dict(GOLDEN, total_read_ops=1000, total_read_bytes=10 ** 9, total_read_time=10 ** 6,
                  ebs_volume_performance_exceeded_tp=5 * 10 ** 6, ebs_volume_performance_exceeded_iops=0,
                  ec2_instance_performance_exceeded_iops=0, ec2_instance_performance_exceeded_tp=0)
    after = dict(before, total_read_ops=16000, total_read_bytes=10 ** 9 + 250 * 1048576 * 60,
                 total_read_time=10 ** 6 + 15000 * 1500, ebs_volume_performance_exceeded_tp=46 * 10 ** 6,
                 ec2_instance_performance_exceeded_iops=3 * 10 ** 6)
    bins_before = [(0, 100, 50), (100, 200, 60), (200, 400, 70), (400, 800, 80)]
    bins_after = [(0, 100, 50), (100, 200, 60 + 14800), (200, 400, 70 + 100), (400, 800, 80 + 100)]
    return (ebs_stats.parse_page(ebs_page(before, bins_before)), ebs_stats.parse_page(ebs_page(after, bins_after)))


def test_two_samples_give_the_rates_and_the_cap_that_bound():
    before, after = window_pages()
    rates = ebs_stats.rates(before, after, 60)
    assert rates == {
        'window_s': 60, 'volume_tp_s_per_min': 41.0, 'volume_iops_s_per_min': 0.0,
        'instance_tp_s_per_min': 0.0, 'instance_iops_s_per_min': 3.0,
        'read_mib_s': 250.0, 'read_iops': 250.0, 'read_latency_mean_us': 1500.0, 'read_latency_p99_us': 400,
        'bound': 'the volume sat at its throughput cap for 41 of 60 seconds; the instance at its EBS IOPS cap for 3',
    }


def test_a_shorter_window_is_given_per_minute_and_in_its_own_seconds():
    before, after = window_pages()
    rates = ebs_stats.rates(before, after, 120)
    assert rates['volume_tp_s_per_min'] == 20.5 and rates['read_mib_s'] == 125.0
    assert rates['bound'].startswith('the volume sat at its throughput cap for 41 of 120 seconds')


def test_a_window_without_cap_time_says_no_cap_bound():
    before, _after = window_pages()
    rates = ebs_stats.rates(before, before, 30)
    assert rates['bound'] == 'no cap bound: neither the volume nor the instance reached its IOPS or throughput cap'
    assert rates['read_latency_mean_us'] is None and rates['read_latency_p99_us'] is None


def test_counters_that_went_back_are_one_line():
    before, after = window_pages()
    with pytest.raises(ebs_stats.NoStats) as e:
        ebs_stats.rates(after, before, 60)
    assert 'went back' in str(e.value)
    found = ebs_stats.window({'device': 'nvme1n1', 'stats': after}, {'device': 'nvme1n1', 'stats': before,
                                                                     'volume_id': 'vol-1'}, 60)
    assert found['reason'].startswith('no EBS statistics: the counters went back')


def test_a_window_of_a_device_without_statistics_keeps_its_reason():
    found = ebs_stats.window({'device': 'nvme0n1', 'volume_id': None, 'reason': 'no EBS statistics: not an EBS volume'},
                             {'device': 'nvme0n1', 'volume_id': None, 'reason': 'no EBS statistics: not an EBS volume'},
                             12.5)
    assert found == {'device': 'nvme0n1', 'volume_id': None, 'reason': 'no EBS statistics: not an EBS volume'}


def test_histograms_of_other_bounds_give_no_p99():
    before, after = window_pages()
    after = dict(after, read_io_latency_histogram=[[0, 50, 1]])
    assert ebs_stats.rates(before, after, 60)['read_latency_p99_us'] is None


def test_the_p99_is_the_upper_bound_of_the_bin_that_reaches_99_percent():
    assert ebs_stats.percentile_upper([(0, 100, 99), (100, 200, 1)], 99) == 100
    assert ebs_stats.percentile_upper([(0, 100, 98), (100, 200, 2)], 99) == 200
    assert ebs_stats.percentile_upper([(0, 100, 0)], 99) is None


def test_a_cap_counter_that_grows_faster_than_the_clock_refuses_the_window():
    # The right magic and garbage counters: 10 minutes at a cap in a window of 60 s. Refused, not "at its cap for 60
    # of 60 seconds".
    before, after = window_pages()
    after = dict(after, ebs_volume_performance_exceeded_tp=before['ebs_volume_performance_exceeded_tp'] + 600 * 10 ** 6)
    with pytest.raises(ebs_stats.NoStats) as e:
        ebs_stats.rates(before, after, 60)
    assert str(e.value) == ('the volume throughput cap counter grew by 600 s in a window of 60 s, faster than the '
                            'clock: the page is damaged')
    # A counter a little ahead of the window (the page read after the clock) is the window.
    after = dict(after, ebs_volume_performance_exceeded_tp=before['ebs_volume_performance_exceeded_tp'] + 60500000)
    assert ebs_stats.rates(before, after, 60)['volume_tp_s_per_min'] == 60.0


def test_a_bin_whose_lower_bound_is_above_its_upper_is_a_damaged_page():
    with pytest.raises(ebs_stats.NoStats) as e:
        ebs_stats.parse_page(ebs_page(GOLDEN, [(0, 128, 1), (512, 256, 2)]))
    assert str(e.value) == ('the read io latency histogram has a bin whose lower bound 512 is above its upper bound '
                            '256 (the page is damaged)')
