# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Module-level tests for io_probe, through main().

Argument errors, check mode and the error messages run on a fake host (``ROOT`` points at a
fakehost.py tree). One run measures for real on the host's own filesystem (``ROOT`` is ``/``)
in a temporary directory: the CI host runs the tests as root on a real kernel.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

import pytest

from ansible.module_utils import basic
from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, probe
from ansible_collections.aemops.os_tuning.plugins.modules import io_probe
from ansible_collections.aemops.os_tuning.tests.unit.utils import run_module
from fakehost import nitro_host

MIB = 1024 * 1024
KIB = 1024
REPO = '/opt/aem/crx-quickstart/repository/segmentstore'
DM0 = '/sys/devices/virtual/block/dm-0'


def stat_line(ios=0, sectors=0):
    return '%d 0 %d 0 0 0 0 0 0 0 0\n' % (ios, sectors)


@pytest.fixture
def host(tmpdir, monkeypatch):
    h = nitro_host(tmpdir)
    h.write(DM0 + '/stat', stat_line(100, 8000))
    h.write(h._devdir('nvme0n1') + '/nvme0n1p1/stat', stat_line())
    monkeypatch.setattr(io_probe, 'ROOT', h.root)
    return h


@pytest.fixture
def warnings(monkeypatch):
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, msg: seen.append(msg))
    return seen


def scratch_files(directory):
    return [n for n in os.listdir(directory) if n.startswith(probe.SCRATCH_PREFIX)]


def test_check_mode_measures_nothing(host, monkeypatch, warnings):
    def forbidden(*args, **kwargs):
        raise AssertionError('check mode must not create or measure anything')

    for name in ('run', 'create_scratch', 'idle_rate', 'random_reads', 'fadvise_dontneed'):
        monkeypatch.setattr(probe, name, forbidden)
    listing = sorted(os.listdir(host.path(REPO)))
    result = run_module(io_probe.main, {'path': REPO, '_ansible_check_mode': True})
    assert result['changed'] is False and result['measured'] is False
    assert result['directory'] == REPO and 'path' not in result
    assert result['device'] == 'dm-0' and result['read_ahead_kb'] == 4096
    assert result['size_mb'] == 256 and result['record_kb'] == 8 and result['method'] == 'mmap'
    assert result['reads_requested'] == 2000
    assert result['reads_planned'] == 16 and result['reads_capped'] is True
    assert 'size_mb=32000' in result['reads_capped_reason']
    assert 'would write a 256 MiB scratch file' in result['msg'] and 'check mode measured nothing' in result['msg']
    assert 'device_read_bytes' not in result and 'summary' not in result and 'warnings' not in result
    assert any('reads lowered from 2000 to 16' in w for w in warnings)
    assert sorted(os.listdir(host.path(REPO))) == listing


def test_check_mode_still_refuses_short_space(host, monkeypatch):
    class StatVfs(object):
        f_frsize = 4096
        f_bavail = 10 * MIB // 4096

    monkeypatch.setattr(probe.os, 'statvfs', lambda path: StatVfs())
    result = run_module(io_probe.main, {'path': REPO, '_ansible_check_mode': True}, failed=True)
    assert result['changed'] is False
    assert 'not enough free space in %s' % REPO in result['msg']
    assert '10.0 MiB are free' in result['msg']


@pytest.mark.parametrize('args, words', [
    ({'path': '/opt/aem/nowhere'}, 'path /opt/aem/nowhere does not exist'),
    ({'path': '/tmp'}, 'no device read-ahead to measure'),
    ({'path': REPO, 'record_kb': 10}, 'record_kb=10 is not a positive multiple of 4'),
    ({'path': REPO, 'record_kb': 2048, 'size_mb': 1}, 'record_kb=2048 is larger than the 1 MiB scratch file'),
    ({'path': REPO, 'reads': 0}, 'reads=0'),
    ({'path': REPO, 'timeout': 0}, 'timeout=0'),
    ({'path': REPO, 'size_mb': 0}, 'size_mb=0'),
    ({'path': REPO, 'size_mb': 8}, 'Raise size_mb to at least 16'),     # 4096 KiB read-ahead
])
def test_errors(host, args, words):
    result = run_module(io_probe.main, args, failed=True)
    assert words in result['msg']
    assert result['changed'] is False


def test_path_is_a_file(host):
    host.write(REPO + '/data00000a.tar', 'x')
    result = run_module(io_probe.main, {'path': REPO + '/data00000a.tar'}, failed=True)
    assert 'is not a directory' in result['msg']


def test_bad_method_is_refused_by_the_argument_spec(host):
    result = run_module(io_probe.main, {'path': REPO, 'method': 'read'}, failed=True)
    assert 'method' in result['msg'] and 'mmap' in result['msg']


def test_io_error_during_the_run_fails_cleanly(host, monkeypatch):
    real_fsync = os.fsync

    def broken_fsync(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(probe.os, 'fsync', broken_fsync)
    host.write(DM0 + '/queue/read_ahead_kb', '32\n')
    result = run_module(io_probe.main, {'path': REPO, 'size_mb': 2, 'reads': 5}, failed=True)
    monkeypatch.setattr(probe.os, 'fsync', real_fsync)
    assert 'the I/O probe in %s failed' % REPO in result['msg'] and 'Input/output error' in result['msg']
    assert 'scratch file was removed' in result['msg']
    assert scratch_files(host.path(REPO)) == []


def test_run_through_main_with_a_simulated_device(host, monkeypatch, warnings):
    """main() passes the options through and returns changed=false with the measurement."""
    host.write(DM0 + '/queue/read_ahead_kb', '32\n')
    seen = {}
    real_run = probe.run

    def fake_run(the_plan):
        seen.update(the_plan)
        counters = {'read_ios': 0, 'read_sectors': 0, 'read_ticks': 0, 'in_flight': 0}

        def reader(fd, mapping):
            def read(offset, length):
                counters['read_ios'] += 1
                counters['read_sectors'] += 64      # 32 KiB per read
                return b'x' * length
            return read
        return real_run(the_plan, sleep=lambda s: None, reader=reader, stat_reader=lambda: dict(counters),
                        resident=lambda fd, size: counters['read_ios'] * 8)

    monkeypatch.setattr(probe, 'run', fake_run)
    result = run_module(io_probe.main, {'path': REPO, 'size_mb': 2, 'reads': 20, 'record_kb': 16,
                                        'method': 'pread', 'seed': 7, 'timeout': 30, 'ebs_devices': ['nvme0n1']})
    # the volume beneath the repository and the device given, sampled over the reads (no device node here)
    assert sorted(result['ebs']) == ['nvme0n1', 'nvme1n1']
    assert result['ebs']['nvme1n1']['reason'].startswith('no EBS statistics: cannot open ')
    assert (seen['size_mb'], seen['reads_planned'], seen['record_kb'], seen['method'], seen['seed'],
            seen['timeout']) == (2, 16, 16, 'pread', 7, 30)        # 512 KiB / 32 KiB = 16
    assert result['changed'] is False and result['measured'] is True
    assert result['reads'] == 16 and result['reads_capped'] is True
    assert result['read_amplification'] == 2.0 and result['bytes_per_read'] == 32 * KIB
    assert result['page_cache_amplification'] == 2.0
    assert 'warnings' not in result
    assert any('reads lowered from 20 to 16' in w for w in warnings)
    assert scratch_files(host.path(REPO)) == []


def test_real_run_on_the_host(tmpdir, monkeypatch, warnings):
    """The module end to end, with ROOT=/, on the real kernel: structure and sane bounds."""
    directory = str(tmpdir)
    try:
        name = blockdev.device_for_path('/', directory)[0]
    except blockdev.BlockDeviceError as e:
        pytest.skip('the temporary directory has no block device: %s' % e)
    monkeypatch.setattr(io_probe, 'ROOT', '/')
    ra_kb = blockdev.read_ahead_kb('/', blockdev.whole_disk('/', name)) or 0
    size_mb = max(8, -(-4 * max(ra_kb * KIB, 8 * KIB) * 4 // MIB))   # room for 4 sparse reads
    if size_mb > 1024:
        pytest.skip('read_ahead_kb=%d would need a %d MiB scratch file' % (ra_kb, size_mb))
    result = run_module(io_probe.main, {'path': directory, 'size_mb': size_mb, 'reads': 50, 'timeout': 60})
    print(result['summary'])
    assert result['changed'] is False and result['measured'] is True
    assert result['directory'] == directory and 'path' not in result
    assert result['stat_device'] == name and result['read_ahead_kb'] == ra_kb
    assert 1 <= result['reads'] <= 50 and result['timed_out'] is False
    assert result['read_amplification'] >= 0 and result['device_read_ios'] >= 0
    assert result['latency']['p50_ms'] <= result['latency']['p99_ms']
    assert result['scratch_removed'] is True and scratch_files(directory) == []
    assert not os.path.exists(result['scratch_file'])
