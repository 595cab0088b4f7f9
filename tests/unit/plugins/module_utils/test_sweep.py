# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/sweep.py: the read-ahead sweep and its recommendation.

The sweep runs on a fake tree (fakehost.py's nitro_host: the repository on LV dm-0) whose
``queue/read_ahead_kb`` is a plain file, with a simulated volume (:class:`Volume`) under
EBS-like caps: each random read costs ``max(1 / IOPS, window / MiB/s)`` of fake time, where
the window is the larger of the read-ahead and the record. So the figures, the restore on
each path and the recommendation are exact. The scratch file, the lock and the state file
are real files in the test's temporary directory; the real kernel is exercised by
tests/integration/sweep.sh on a loop device.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import json
import os
import signal
import threading

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, probe, runstate, sweep
from fakehost import FakeNvme, ebs_page, nitro_host, tree_checksum

MIB = 1024 * 1024
KIB = 1024
REPO = '/opt/aem/crx-quickstart/repository/segmentstore'
DM0 = '/sys/devices/virtual/block/dm-0'
BOOT = '0b5d1c43-6f4e-4d4e-9d8a-6d1b0f1e2a3b'
GP3 = {'type': 'gp3', 'iops': 3000, 'mib_s': 125.0, 'basis': 'gp3 baseline'}
VALUES = [256, 128, 64, 32, 16, 8]


def stat_line(ios=0, sectors=0):
    return '%d 0 %d 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n' % (ios, sectors)


@pytest.fixture
def host(tmpdir):
    """nitro_host with dm-0 at 4096 KiB (tuned's throughput-performance), stat files and a boot id."""
    h = nitro_host(tmpdir)
    h.write(DM0 + '/stat', stat_line(100, 8000))
    h.write(h._devdir('nvme0n1') + '/stat', stat_line())
    h.write(h._devdir('nvme0n1p1') + '/stat', stat_line())
    h.write(sweep.BOOT_ID, BOOT + '\n')
    return h


def ra(host):
    return int(host.read(DM0 + '/queue/read_ahead_kb'))


class Volume(object):
    """A gp3-like volume and a clock. Random reads: one I/O of the read-ahead window each, taking
    ``max(1/iops, window/throughput)``; sequential reads run at ``min(throughput, read-ahead x iops)``.

    ``resident`` reports the pages the random reads brought in since it was last asked, then
    forgets them (the next call is the eviction check, which expects none). ``fail_at``
    raises EIO in the first random read at that read-ahead.
    """

    def __init__(self, host, iops=3000, mib_s=125.0, fail_at=None, jitter=None):
        self.host = host
        self.iops = iops
        self.bps = mib_s * MIB
        self.now = 1000.0
        self.ios = 100
        self.sectors = 8000
        self.cached = 0
        self.fail_at = fail_at
        self.jitter = jitter or {}
        self.mappings = 0
        self.closed = 0
        self.timelines = []
        self.stopped = 0
        self.tp_capped_s = 0.0  # the time of reads bound by throughput: what the volume counts at its cap

    def ra_bytes(self):
        return ra(self.host) * KIB

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def stat(self):
        return {'read_ios': self.ios, 'read_sectors': self.sectors, 'read_ticks': 0, 'in_flight': 0}

    def resident(self, fd, size):
        pages, self.cached = self.cached, 0
        return pages

    def mapping(self, fd, size):
        vol = self
        vol.mappings += 1

        class Mapping(object):
            concurrent = True

            def reader(self):
                def read(offset, length):
                    if vol.fail_at is not None and ra(vol.host) == vol.fail_at:
                        raise OSError(errno.EIO, os.strerror(errno.EIO))
                    window = max(vol.ra_bytes(), length)
                    vol.now += max(1.0 / vol.iops, window / vol.bps) * vol.jitter.get(ra(vol.host), 1.0)
                    if window / vol.bps > 1.0 / vol.iops:
                        vol.tp_capped_s += window / vol.bps
                    vol.ios += 1
                    vol.sectors += window // 512
                    vol.cached += window // probe.PAGE_BYTES
                    for timeline in vol.timelines:
                        timeline.tick()
                    return length
                return read

            def close(self):
                vol.closed += 1
        return Mapping()

    def seq_reader(self, fd):
        def read(offset, length):
            rate = min(self.bps, self.ra_bytes() * self.iops) or self.bps
            self.now += length / float(rate)
            self.sectors += length // 512
            return length
        return read

    def sampler(self, timeline):
        """sampler_thread's contract, deterministic: the timeline ticks after each simulated read."""
        self.timelines.append(timeline)

        def stop():
            self.timelines.remove(timeline)
            self.stopped += 1
        return stop

    def hooks(self, **extra):
        hooks = {'clock': self.clock, 'sleep': self.sleep, 'stat': self.stat, 'resident': self.resident,
                 'mapping': self.mapping, 'runner': serial_runner, 'seq_reader': self.seq_reader,
                 'data': lambda n: b'\xa5' * n, 'noise_rate': 0.0, 'sampler': self.sampler}
        hooks.update(extra)
        return hooks


def serial_runner(make_reader, shares, clock, deadline):
    """The readers one after another (thread_runner's contract, deterministic)."""
    lat, asked = [], []
    for share in shares:
        read = make_reader()
        lat.append([])
        asked.append(0)
        for offset, length in share:
            start = clock()
            if start >= deadline:
                break
            read(offset, length)
            lat[-1].append(clock() - start)
            asked[-1] += length
    return lat, asked, None


def make_plan(host, values=tuple(VALUES), duration=1, size_mb=4, timeout=60, caps=None, readers=4, **kwargs):
    return sweep.plan(host.root, REPO, values=values, readers=readers, duration=duration, size_mb=size_mb,
                      timeout=timeout, caps=caps or GP3, **kwargs)


def state_file(host, device='dm-0'):
    return sweep.state_paths(host.root, device)[1]


def scratch_files(host):
    return [n for n in os.listdir(host.path(REPO)) if n.startswith(probe.SCRATCH_PREFIX)]


# ---------------------------------------------------------------------------------------------
# Volume caps (AWS, Amazon EBS User Guide, "Amazon EBS volume types")

@pytest.mark.parametrize('args, iops, mib_s', [
    (('gp3',), 3000, 125.0),
    (('gp3', None, 6000, 500), 6000, 500.0),
    (('gp2', 100), 3000, 128.0),        # baseline 300, bursts to 3000 below 1000 GiB; 128 MiB/s up to 170 GiB
    (('gp2', 20), 3000, 128.0),         # baseline 100 (the minimum), burst 3000
    (('gp2', 500), 3000, 250.0),        # baseline 1500, burst 3000; 250 MiB/s from 334 GiB
    (('gp2', 2000), 6000, 250.0),       # baseline 6000, above the burst
    (('gp2', 8000), 16000, 250.0),      # 24000 capped at 16000
    (('io1', None, 20000), 20000, 1000.0),
    (('io2', None, 64000, 2000), 64000, 2000.0),
    (('io2', None, 16000), 16000, 4000.0),
    (('gp3', None, 80000, 2000), 80000, 2000.0),     # the ModifyVolume maximums
    (('io2', None, 256000, 4000), 256000, 4000.0),   # io2 Block Express
    (('st1',), 500, 500.0),                          # the type's maximum
    (('st1', 1024), 500, 250.0),                     # 250 MiB/s per TiB burst
    (('st1', 4096), 500, 500.0),                     # 1,000 capped at 500
    (('sc1', 2048), 250, 160.0),                     # 80 MiB/s per TiB
    (('custom', None, 1000, 250), 1000, 250.0),
    (('custom', None, 900000, 9000), 900000, 9000.0),  # custom takes what the device has
])
def test_volume_caps(args, iops, mib_s):
    caps = sweep.volume_caps(*args)
    assert (caps['iops'], caps['mib_s'], caps['type']) == (iops, mib_s, args[0])


@pytest.mark.parametrize('args, words', [
    (('gp2',), 'give volume_size_gb'),
    (('io1',), 'give its iops'),
    (('io2',), 'give its iops'),
    (('custom', None, 1000), 'needs both iops and throughput_mibps'),
    (('standard',), 'volume_type=standard: use one of gp2, gp3, io1, io2, st1, sc1 or custom'),
    (('gp3', None, -5), 'iops=-5'),
    (('gp3', None, 80001), 'iops=80001 is outside what an EBS gp3 volume can have (3,000 to 80,000 IOPS)'),
    (('gp3', None, 2999), 'iops=2999 is outside what an EBS gp3 volume can have (3,000 to 80,000 IOPS)'),
    (('gp3', None, None, 2001), '(125 to 2,000 MiB/s): give a value in that range, or volume_type=custom for an '
                                'emulated or other device'),
    (('io1', None, 64001), 'io1 volume can have (100 to 64,000 IOPS)'),
    (('io2', None, 256001), 'io2 volume can have (100 to 256,000 IOPS)'),
    (('io2', None, 1000, 4001), 'io2 volume can have (at most 4,000 MiB/s)'),
    (('gp2', 100, 16001), 'gp2 volume can have (100 to 16,000 IOPS)'),
    (('st1', None, 501), 'st1 volume can have (at most 500 IOPS)'),
    (('sc1', None, None, 251), 'sc1 volume can have (at most 250 MiB/s)'),
])
def test_volume_caps_errors(args, words):
    with pytest.raises(sweep.SweepError) as exc:
        sweep.volume_caps(*args)
    assert words in str(exc.value)


# ---------------------------------------------------------------------------------------------
# The recommendation (pure)

def res(kb, rate, noisy=False, seq=None, iops=None, mib_s=None, reads=100):
    return {'read_ahead_kb': kb, 'reads_per_s': rate, 'noisy': noisy, 'seq_mib_s': seq, 'device_iops': iops,
            'device_mib_s': mib_s, 'reads': reads}


def test_recommend_the_plateau_under_gp3():
    results = [res(4096, 31.0, seq=124.0, iops=31, mib_s=124.0), res(1024, 120.0, seq=124.5),
               res(256, 480.0, seq=124.0), res(128, 950.0, seq=123.0), res(64, 1900.0, seq=120.0),
               res(32, 2950.0, seq=92.0, iops=2950, mib_s=92.2), res(16, 2990.0, seq=46.0), res(8, 3000.0, seq=23.0)]
    rec = sweep.recommend(results, GP3)
    assert rec['recommended_kb'] == 32                  # 2950 >= 3000 x 0.95 = 2850; 64 KiB's 1900 is not
    assert rec['best_kb'] == 8 and rec['best_reads_per_s'] == 3000.0
    assert rec['threshold_reads_per_s'] == 2850.0
    assert rec['within_kb'] == [32, 16, 8]
    why = rec['why']
    assert why.startswith('32 KiB: the largest read-ahead whose random reads/s (2950.0) stay within 5% of the best '
                          '(3000.0 at 8 KiB, threshold 2850.0)')
    assert 'sequential 92.0 MiB/s (23.0 at 8 KiB)' in why
    assert 'against the gp3 caps 3000 IOPS, 125 MiB/s (IOPS-bound)' in why


def test_recommend_ties_go_to_the_larger_value():
    rec = sweep.recommend([res(16, 3000.0), res(64, 3000.0), res(32, 3000.0)], GP3)
    assert rec['recommended_kb'] == 64 and rec['within_kb'] == [64, 32, 16]
    assert rec['why'].startswith('64 KiB: the best random reads/s (3000.0)')


def test_recommend_exactly_at_the_threshold_and_just_below():
    assert sweep.recommend([res(8, 1000.0), res(128, 950.0)])['recommended_kb'] == 128
    assert sweep.recommend([res(8, 1000.0), res(128, 949.9)])['recommended_kb'] == 8


def test_recommend_jitter_within_tolerance_keeps_the_larger_value():
    # a noisy-looking series: 64 KiB measured a little above 32 KiB, 128 within 5% of it
    rec = sweep.recommend([res(256, 2100.0), res(128, 2860.0), res(64, 3010.0), res(32, 2990.0), res(8, 2950.0)])
    assert rec['best_kb'] == 64 and rec['recommended_kb'] == 128      # 2860 >= 3010 x 0.95 = 2859.5


def test_recommend_leaves_noisy_values_out():
    results = [res(256, 3100.0, noisy=True), res(64, 2000.0), res(32, 2900.0), res(8, 3000.0)]
    rec = sweep.recommend(results, GP3)
    assert rec['recommended_kb'] == 32 and rec['best_kb'] == 8
    assert rec['excluded_noisy_kb'] == [256]
    assert 'left out as noisy: 256 KiB' in rec['why']


def test_recommend_all_noisy_is_approximate():
    rec = sweep.recommend([res(64, 1000.0, noisy=True), res(8, 1020.0, noisy=True)])
    assert rec['recommended_kb'] == 64 and rec['excluded_noisy_kb'] == []
    assert 'approximate' in rec['why']


def test_recommend_ignores_values_without_reads_and_honours_the_tolerance():
    results = [res(4096, None, reads=0), res(64, 950.0), res(8, 1000.0)]
    assert sweep.recommend(results)['recommended_kb'] == 64
    assert sweep.recommend(results, tolerance_pct=0)['recommended_kb'] == 8
    assert sweep.recommend(results, tolerance_pct=10)['recommended_kb'] == 64
    assert sweep.recommend([res(32, 10.0)])['recommended_kb'] == 32


@pytest.mark.parametrize('results, tolerance, words', [
    ([], 5, 'nothing to recommend'),
    ([res(32, None, reads=0)], 5, 'nothing to recommend'),
    ([res(32, 10.0)], 100, 'tolerance_pct=100'),
    ([res(32, 10.0)], -1, 'tolerance_pct=-1'),
])
def test_recommend_errors(results, tolerance, words):
    with pytest.raises(sweep.SweepError) as exc:
        sweep.recommend(results, None, tolerance)
    assert words in str(exc.value)


def test_bound():
    assert sweep.bound({'device_mib_s': 120.0, 'device_iops': 30}, GP3) == 'throughput'
    assert sweep.bound({'device_mib_s': 40.0, 'device_iops': 2800}, GP3) == 'iops'
    assert sweep.bound({'device_mib_s': 40.0, 'device_iops': 1000}, GP3) == 'none'
    assert sweep.bound({'device_mib_s': 400.0, 'device_iops': 1000}, None) == 'none'


# ---------------------------------------------------------------------------------------------
# The plan

def test_plan_on_lv(host):
    the_plan = make_plan(host)
    assert the_plan['device'] == 'dm-0' and the_plan['stat_device'] == 'dm-0'
    assert the_plan['original_kb'] == 4096 and the_plan['sweep'] == VALUES
    # 25% of 4 MiB over max(value, 16 KiB)
    assert the_plan['read_budgets'] == [4, 8, 16, 32, 64, 64]
    assert the_plan['state_file'] == state_file(host)
    assert the_plan['lock_file'].endswith('/run/aemops-os-tuning/read-ahead-253-0.lock')  # the read_ahead module's too
    assert os.path.basename(the_plan['state_file']).startswith('read-ahead-sweep-dm-0-')


def test_plan_on_partition_sweeps_the_whole_disk(host):
    host.mkdir('/srv/aem')
    the_plan = sweep.plan(host.root, '/srv/aem', values=[64, 32], size_mb=4)
    assert (the_plan['device'], the_plan['stat_device'], the_plan['original_kb']) == ('nvme0n1', 'nvme0n1p1', 4096)
    assert '/run/aemops-os-tuning/read-ahead-sweep-nvme0n1-' in the_plan['state_file']


@pytest.mark.parametrize('kwargs, words', [
    ({'values': []}, 'sweep is empty'),
    ({'values': [64, 30]}, 'sweep value 30'),
    ({'values': [64, -4]}, 'sweep value -4'),
    ({'values': [131072]}, 'sweep value 131072'),
    ({'values': [64, 32, 64]}, 'sweep lists 64 more than once'),
    ({'values': list(range(4, 4 * 40, 4))}, 'give at most 32'),
    ({'readers': 0}, 'readers=0'),
    ({'readers': 65}, 'readers=65'),
    ({'duration': 0}, 'duration=0'),
    ({'sequential_block_kb': 6}, 'sequential_block_kb=6'),
    ({'timeout': 5}, 'timeout=5 s is shorter than the random phases alone (6 values x duration=1 s'),
    ({'values': [4096], 'size_mb': 8}, 'Raise size_mb to at least 16'),
    ({'tolerance_pct': 150}, 'tolerance_pct=150'),
    ({'timeline_interval': 0.05}, 'timeline_interval=0.05: give 0 (no timeline) or 0.1 to duration=1'),
    ({'timeline_interval': 1.5}, 'timeline_interval=1.5'),
    ({'timeline_interval': -1}, 'timeline_interval=-1'),
])
def test_plan_rejects_bad_arguments(host, kwargs, words):
    before = tree_checksum(host.root)
    with pytest.raises(probe.ProbeError) as exc:
        make_plan(host, **kwargs)
    assert words in str(exc.value)
    assert tree_checksum(host.root) == before


def test_on_a_64k_page_host_values_below_a_page_are_refused_naming_it(host, monkeypatch):
    host.use_page_kb(monkeypatch, 64)
    with pytest.raises(probe.ProbeError) as exc:
        make_plan(host, values=[256, 64, 32])
    assert 'sweep value 32: read_ahead_kb values must be multiples of the 64 KiB page size' in str(exc.value)
    assert make_plan(host, values=[256, 128, 64])


@pytest.mark.parametrize('page_kb, values', [
    (4, [4096, 1024, 256, 128, 64, 32, 16, 8]),   # x86_64: DEFAULT_SWEEP as it is
    (16, [4096, 1024, 256, 128, 64, 32, 16]),     # 16 KiB pages: 8 becomes one page, already listed
    (64, [4096, 1024, 256, 128, 64]),             # RHEL 9 aarch64 kernel-64k, RHEL 8 on aarch64
])
def test_the_default_values_are_page_multiples_on_every_kernel(host, monkeypatch, page_kb, values):
    """read_ahead_kb: auto with the default values on a 64 KiB page host: no value below one page is measured, so
    the page rule (validate) no longer refuses the sweep's own defaults (issue 22)."""
    host.use_page_kb(monkeypatch, page_kb)
    assert sweep.default_sweep() == values
    the_plan = sweep.plan(host.root, REPO, duration=1, size_mb=16, timeout=60, caps=GP3)
    assert the_plan['sweep'] == values
    with pytest.raises(probe.ProbeError) as exc:
        make_plan(host, values=[])
    assert 'for example %s' % values in str(exc.value)


def test_plan_refuses_a_read_only_sys(host, monkeypatch):
    def refuse(root, name):
        raise blockdev.BlockDeviceError('cannot set read-ahead inside a container: /sys is mounted read-only')

    monkeypatch.setattr(sweep.blockdev, 'check_writable', refuse)
    with pytest.raises(sweep.SweepError) as exc:
        make_plan(host)
    assert 'inside a container' in str(exc.value)


def test_record_plan_and_deal():
    records = sweep.record_plan(7, 4 * MIB, 64)
    assert records == sweep.record_plan(7, 4 * MIB, 64)
    assert len(set(o for o, n in records)) == 64
    assert all(o % (16 * KIB) == 0 and o + n <= 4 * MIB for o, n in records)
    assert set(n for o, n in records) == set([8 * KIB, 12 * KIB, 16 * KIB])
    shares = sweep.deal(records, 4)
    assert [len(s) for s in shares] == [16, 16, 16, 16]
    assert shares[1][0] == records[1] and shares[0][1] == records[4]


# ---------------------------------------------------------------------------------------------
# State file and lock

def test_write_state_is_atomic_and_private(host):
    path = state_file(host)
    sweep.write_state(host.root, path, {'device': 'dm-0', 'original_kb': 4096})
    assert sweep.read_state(path) == {'device': 'dm-0', 'original_kb': 4096}
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]    # no temporary file left


def test_read_state_corrupt_names_the_fix(host):
    sweep.write_state(host.root, state_file(host), {})
    with open(state_file(host), 'w') as f:
        f.write('{"device": "dm-0"')
    with pytest.raises(sweep.SweepError) as exc:
        sweep.read_state(state_file(host))
    assert 'damaged: ' in str(exc.value) and 'not valid JSON' in str(exc.value) and 'by hand' in str(exc.value)


def test_lock_refuses_a_second_sweep(host):
    lock_path = sweep.state_paths(host.root, 'dm-0')[0]
    with sweep.device_lock(host.root, 'dm-0'):
        assert not sweep.lock_is_free(lock_path)
        fd = os.open(lock_path, os.O_RDONLY)  # a second open file description: another run, for flock
        try:
            with pytest.raises(sweep.SweepBusy) as exc:
                runstate._acquire(host.root, lock_path, "dm-0's read-ahead", 0, 0.01, True, sweep.SweepBusy)
        finally:
            os.close(fd)
        assert "waiting for the lock on dm-0's read-ahead" in str(exc.value)
        assert 'held by pid %d (' % os.getpid() in str(exc.value)
    assert sweep.lock_is_free(lock_path)


# ---------------------------------------------------------------------------------------------
# The run: success

def test_run_success_measures_each_value_and_restores(host):
    the_plan = make_plan(host)
    vol = Volume(host, jitter={32: 1.02, 16: 1.01})       # 32 and 16 KiB a little slower than 8
    seen = []

    def on_value(value):
        state = json.loads(open(state_file(host)).read())
        seen.append((value, ra(host), state['original_kb'], state['boot_id'], sweep.lock_is_free(the_plan['lock_file'])))

    result = sweep.run(the_plan, vol.hooks(on_value=on_value))
    # each value set in turn, with the original recorded before, under the lock
    assert seen == [(v, v, 4096, BOOT, False) for v in VALUES]
    assert ra(host) == 4096 and result['restored'] is True and result['restored_kb'] == 4096
    assert not os.path.exists(state_file(host)) and sweep.lock_is_free(the_plan['lock_file'])
    assert scratch_files(host) == [] and vol.mappings == vol.closed
    assert result['changed'] is False and result['recovered'] is None and result['measured'] is True
    by_kb = dict((r['read_ahead_kb'], r) for r in result['results'])
    assert [r['read_ahead_kb'] for r in result['results']] == VALUES
    # 256 KiB: 2 ms per read (throughput-bound); 32 KiB and below: 1/3000 s (IOPS-bound)
    assert by_kb[256]['reads_per_s'] == pytest.approx(500, abs=0.5)
    assert by_kb[256]['bound'] == 'throughput' and by_kb[256]['device_mib_s'] == pytest.approx(125.0, abs=0.2)
    assert by_kb[32]['reads_per_s'] == pytest.approx(2941.2, abs=1) and by_kb[32]['bound'] == 'iops'
    assert by_kb[8]['reads_per_s'] == pytest.approx(3000, abs=1)
    assert by_kb[256]['read_amplification'] > by_kb[32]['read_amplification'] > by_kb[8]['read_amplification']
    assert by_kb[256]['read_amplification'] == pytest.approx(256 / 12.0, rel=0.05)    # 8-16 KiB records
    assert by_kb[8]['page_cache_amplification'] == by_kb[8]['read_amplification']
    assert by_kb[32]['rounds'] > 1 and by_kb[32]['elapsed_s'] == pytest.approx(1.0, abs=0.01)
    # sequential: min(125 MiB/s, read-ahead x 3000 IOPS)
    assert by_kb[256]['seq_mib_s'] == pytest.approx(125.0, abs=0.1)
    assert by_kb[32]['seq_mib_s'] == pytest.approx(93.75, abs=0.1)
    assert by_kb[8]['seq_mib_s'] == pytest.approx(23.44, abs=0.1)
    assert result['recommended_kb'] == 32
    assert result['why'].startswith('32 KiB: the largest read-ahead whose random reads/s')
    assert 'IOPS-bound' in result['why'] and 'sequential 93.8 MiB/s (23.4 at 8 KiB)' in result['why']
    assert 'within 5% of the best (3000.0 at 8 KiB, threshold 2850.0)' in result['why']
    assert len(result['table']) == 6 and result['table'][3].startswith('   32 KiB: ')
    assert result['warnings'] == []
    assert all('timeline' not in r for r in result['results']) and vol.stopped == 0   # off by default
    # the readers' record knows the device was disturbed: files opened during the sweep count as stale (issue 35)
    from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_record
    if os.geteuid() == 0:
        record = readers_record.read_record(host.root)[0]
        assert [(n, d['name'], d['kb']) for n, d in record['devices'].items()] == [
            (host.read('/sys/class/block/%s/dev' % the_plan['device']).strip(), the_plan['device'], readers_record.CHANGED_KB)]


def test_run_records_whether_the_volume_hit_a_cap_at_each_value_from_its_own_page(host):
    """nvme1n1 beneath dm-0 is an EBS volume: its log page (built from the layout) counts the time of the
    throughput-bound reads. 256 KiB sits at the throughput cap, 8 KiB never does."""
    vol = Volume(host)
    pages = []

    def ebs():
        page = ebs_page({'total_read_ops': vol.ios, 'total_read_bytes': vol.sectors * 512,
                         'ebs_volume_performance_exceeded_tp': int(vol.tp_capped_s * 1e6)})
        nvme = FakeNvme({host.path('/dev/nvme1n1'): ('259:2', page)})
        pages.append(nvme)
        return probe.ebs_samples(host.root, ['dm-0'], nvme)

    result = sweep.run(make_plan(host, values=[256, 8]), vol.hooks(ebs=ebs))
    assert len(pages) == 4  # before and after each value's random phase
    by_kb = dict((r['read_ahead_kb'], r) for r in result['results'])
    hit = by_kb[256]['ebs']['nvme1n1']
    assert hit['volume_id'] == 'vol-0123456789abcdef0'
    assert hit['volume_at_cap'] is True and hit['instance_at_cap'] is False
    assert hit['bound'].startswith('the volume sat at its throughput cap for 1 of 1 seconds')
    assert by_kb[8]['ebs']['nvme1n1']['volume_at_cap'] is False
    assert by_kb[8]['ebs']['nvme1n1']['bound'].startswith('no cap bound')
    assert result['table'][0].endswith('; nvme1n1: the volume sat at its throughput cap for 1 of 1 seconds')


def test_run_without_an_ebs_page_records_nothing_of_it(host):
    result = sweep.run(make_plan(host, values=[256, 8]), Volume(host).hooks())  # the real reader: no device node
    assert all('ebs' not in r for r in result['results'])


def test_run_timeline_shows_the_plateau_and_its_end(host):
    """256 KiB runs flat at the 125 MiB/s cap in every interval; 8 KiB far below it (IOPS-bound)."""
    vol = Volume(host)
    result = sweep.run(make_plan(host, values=[256, 8], duration=2, timeline_interval=0.5), vol.hooks())
    assert ra(host) == 4096 and vol.stopped == 2 and vol.timelines == []
    at256, at8 = result['results']
    for r in (at256, at8):
        times = [t for t, rate in r['timeline']]
        assert r['timeline_interval_s'] == 0.5
        assert len(times) == 4 and times == sorted(times)
        spans = [b - a for a, b in zip([0.0] + times, times)]
        assert all(span >= 0.5 - 1e-9 for span in spans[:-1]) and spans[-1] >= 0.25   # the last: finish()
        assert times[-1] == pytest.approx(2.0, abs=0.01)
    assert all(rate == pytest.approx(125.0, rel=0.01) for t, rate in at256['timeline'])
    # 8-16 KiB records at 3000 IOPS: 23.4 to 46.9 MiB/s, about 35 on average
    assert all(23.0 < rate < 47.0 for t, rate in at8['timeline'])
    mean8 = sum(rate for t, rate in at8['timeline']) / len(at8['timeline'])
    assert mean8 == pytest.approx(at8['device_mib_s'], rel=0.05)


def test_run_reports_the_read_error_not_the_samplers(host):
    """A read error while the timeline samples: the sweep names the read's error, and restores."""
    the_plan = make_plan(host, timeline_interval=0.5)
    vol = Volume(host, fail_at=64)

    def failing_sampler(timeline):
        stop = vol.sampler(timeline)

        def stop_and_fail():                                              # fails with the reads, at 64 KiB
            stop()
            if ra(host) == 64:
                raise probe.ProbeError('sda has no I/O counters')
        return stop_and_fail

    with pytest.raises(sweep.SweepError) as exc:
        sweep.run(the_plan, vol.hooks(sampler=failing_sampler))
    assert 'Input/output error' in str(exc.value) and 'I/O counters' not in str(exc.value)
    assert vol.stopped == 3 and vol.timelines == []
    assert_restored(host, the_plan, exc.value)


def test_timeline_samples_when_due_at_the_intervals_rate():
    now = [10.0]
    sectors = [1000]
    timeline = sweep.Timeline(lambda: {'read_sectors': sectors[0]}, lambda: now[0], 1.0, {'read_sectors': 1000}, 10.0)
    now[0], sectors[0] = 10.9, 1000 + 2048 * 50
    assert timeline.tick() is False and timeline.points == []           # not due yet
    now[0] = 11.25                                                        # late: the interval is 1.25 s long
    assert timeline.tick() is True and timeline.points == [[1.25, 40.0]]
    now[0], sectors[0] = 11.75, sectors[0] + 2048 * 10                    # half an interval: finish keeps it
    timeline.finish()
    assert timeline.points == [[1.25, 40.0], [1.75, 20.0]]
    now[0] = 12.2                                                         # under half an interval: dropped
    timeline.finish()
    assert len(timeline.points) == 2
    now[0], sectors[0] = 14.0, 5
    with pytest.raises(probe.ProbeError) as exc:
        timeline.tick()
    assert 'went backwards' in str(exc.value)


def test_sampler_thread_samples_in_real_time_and_reports_its_error():
    clock = probe._default_clock()
    t0 = clock()
    rate = 100.0                                                          # MiB/s, as sectors over real time

    def stat():
        return {'read_sectors': int((clock() - t0) * rate * 2048)}

    timeline = sweep.Timeline(stat, clock, 0.05, {'read_sectors': 0}, t0)
    before = threading.active_count()
    stop = sweep.sampler_thread(timeline)
    while clock() - t0 < 0.4:
        pass
    stop()
    assert threading.active_count() == before
    assert len(timeline.points) >= 4
    assert all(r == pytest.approx(rate, rel=0.1) for t, r in timeline.points)

    def broken():
        raise probe.ProbeError('sda has no I/O counters')

    stop = sweep.sampler_thread(sweep.Timeline(broken, clock, 0.1, {'read_sectors': 0}, clock()))
    time_limit = clock() + 0.5
    while clock() < time_limit:
        pass
    with pytest.raises(probe.ProbeError) as exc:
        stop()
    assert 'no I/O counters' in str(exc.value)


def test_run_with_threads(host):
    """The real thread_runner with the simulated volume: every figure is still consistent."""
    vol = Volume(host)
    lock = threading.Lock()
    real_mapping = vol.mapping

    def locked_mapping(fd, size):
        m = real_mapping(fd, size)
        inner = m.reader

        def reader():
            read = inner()

            def locked(offset, length):
                with lock:
                    return read(offset, length)
            return locked
        m.reader = reader
        return m

    result = sweep.run(make_plan(host, values=[64, 8]), vol.hooks(runner=sweep.thread_runner,
                                                                  mapping=locked_mapping))
    assert ra(host) == 4096 and [r['read_ahead_kb'] for r in result['results']] == [64, 8]
    assert all(r['reads'] > 0 for r in result['results'])


# ---------------------------------------------------------------------------------------------
# The run: every other way out restores

def assert_restored(host, the_plan, exc):
    assert ra(host) == 4096
    assert exc.restored is True
    assert not os.path.exists(state_file(host))
    assert sweep.lock_is_free(the_plan['lock_file'])
    assert scratch_files(host) == []


def test_run_failure_mid_sweep_restores(host):
    the_plan = make_plan(host)
    vol = Volume(host, fail_at=32)
    with pytest.raises(sweep.SweepError) as exc:
        sweep.run(the_plan, vol.hooks())
    assert 'the sweep failed after 3 of 6 values' in str(exc.value) and 'Input/output error' in str(exc.value)
    assert 'dm-0 was restored to read_ahead_kb=4096' in str(exc.value)
    assert [r['read_ahead_kb'] for r in exc.value.results] == [256, 128, 64]
    assert_restored(host, the_plan, exc.value)


def test_run_timeout_restores_and_keeps_the_values_measured(host):
    # 6 values x 1 s of random reads, plus the sequential phases: the time runs out in the last value
    the_plan = make_plan(host, timeout=6)
    with pytest.raises(sweep.SweepError) as exc:
        sweep.run(the_plan, Volume(host).hooks())
    assert exc.value.timed_out is True
    assert 'reached timeout=6 s while measuring 8 KiB, after 5 of 6 values' in str(exc.value)
    assert 'restored to read_ahead_kb=4096' in str(exc.value)
    assert [r['read_ahead_kb'] for r in exc.value.results] == [256, 128, 64, 32, 16]
    assert_restored(host, the_plan, exc.value)


@pytest.mark.parametrize('error, words', [
    (sweep.SweepInterrupted('signal 15'), 'interrupted (signal 15) after 1 of 6 values'),
    (KeyboardInterrupt(), 'interrupted (KeyboardInterrupt) after 1 of 6 values'),
])
def test_run_interrupted_restores(host, error, words):
    the_plan = make_plan(host)

    def on_value(value):
        if value == 128:
            raise error

    with pytest.raises(sweep.SweepError) as exc:
        sweep.run(the_plan, Volume(host).hooks(on_value=on_value))
    assert words in str(exc.value)
    assert_restored(host, the_plan, exc.value)


def test_run_detects_a_change_by_someone_else(host):
    the_plan = make_plan(host)
    vol = Volume(host)
    real_seq = vol.seq_reader

    def meddling_seq_reader(fd):
        if ra(host) == 64:
            host.write(DM0 + '/queue/read_ahead_kb', '4096\n')    # a udev change event, tuned, an operator
        return real_seq(fd)

    with pytest.raises(sweep.SweepError) as exc:
        sweep.run(the_plan, vol.hooks(seq_reader=meddling_seq_reader))
    assert 'changed from 64 to 4096 while the sweep measured it' in str(exc.value)
    assert_restored(host, the_plan, exc.value)


def test_run_a_failed_restore_keeps_the_state_file(host, monkeypatch):
    the_plan = make_plan(host, values=[64, 32])
    real_write = blockdev.write_read_ahead_kb

    def write(root, name, kb):
        if kb == 4096:
            raise blockdev.BlockDeviceError('writing 4096 to .../read_ahead_kb failed: [Errno 5] EIO')
        return real_write(root, name, kb)

    monkeypatch.setattr(sweep.blockdev, 'write_read_ahead_kb', write)
    with pytest.raises(sweep.SweepError) as exc:
        sweep.run(the_plan, Volume(host).hooks())
    assert exc.value.restored is False
    assert 'restoring dm-0 to read_ahead_kb=4096 failed' in str(exc.value)
    assert 'still records the original value' in str(exc.value) and 'recover: true' in str(exc.value)
    assert sweep.read_state(state_file(host))['original_kb'] == 4096
    assert sweep.lock_is_free(the_plan['lock_file'])
    monkeypatch.setattr(sweep.blockdev, 'write_read_ahead_kb', real_write)
    assert sweep.recover_only(host.root, REPO)['changed'] is True
    assert ra(host) == 4096 and not os.path.exists(state_file(host))


def test_run_refused_while_another_sweep_holds_the_device(host):
    the_plan = make_plan(host)
    sweep.write_state(host.root, state_file(host), {'device': 'dm-0', 'original_kb': 128, 'boot_id': BOOT})
    host.write(DM0 + '/queue/read_ahead_kb', '64\n')        # the other sweep is at 64 KiB
    runstate.run_dir(host.root)
    other = os.open(the_plan['lock_file'], os.O_RDWR | os.O_CREAT, 0o600)  # another run's open file description holds the flock
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        before = open(state_file(host)).read()
        with pytest.raises(sweep.SweepBusy) as exc:
            sweep.run(the_plan, Volume(host).hooks())
        assert 'held by pid %d' % os.getpid() in str(exc.value)
        assert ra(host) == 64 and open(state_file(host)).read() == before
    finally:
        os.close(other)


# ---------------------------------------------------------------------------------------------
# A run that was killed: the leftover state file

def killed_run(host, original=4096, left_at=16, boot=BOOT, majmin='253:0', identity=None, **extra):
    """What a SIGKILLed sweep leaves: its state file, the device at the value it was measuring, no lock."""
    state = {'device': 'dm-0', 'majmin': majmin, 'original_kb': original, 'pid': 999999,
             'identity': identity or sweep.device_identity(host.root, 'dm-0'),
             'started': '2026-01-01T00:00:00Z', 'boot_id': boot, 'path': REPO}
    state.update(extra)
    sweep.write_state(host.root, state_file(host), state)
    host.write(DM0 + '/queue/read_ahead_kb', '%d\n' % left_at)


def test_next_run_restores_a_killed_runs_original_first(host):
    killed_run(host)
    the_plan = make_plan(host, values=[64, 32])
    assert the_plan['original_kb'] == 16               # what the plan sees is the killed run's value
    result = sweep.run(the_plan, Volume(host).hooks())
    rec = result['recovered']
    assert (rec['action'], rec['found_kb'], rec['original_kb'], rec['changed']) == ('restore', 16, 4096, True)
    assert result['original_kb'] == 4096 and ra(host) == 4096 and result['changed'] is True
    assert not os.path.exists(state_file(host))
    assert any('restored dm-0 from 16 KiB to 4096 KiB first' in w for w in result['warnings'])


def test_recover_only_restores_and_is_idempotent(host):
    killed_run(host)
    result = sweep.recover_only(host.root, REPO)
    assert result['changed'] is True and result['read_ahead_kb'] == 4096 and ra(host) == 4096
    assert result['msg'].startswith('restored dm-0 from the state file')
    assert not os.path.exists(state_file(host))
    again = sweep.recover_only(host.root, REPO)
    assert again['changed'] is False and 'nothing to recover' in again['msg']


def test_recover_when_the_value_is_already_back(host):
    killed_run(host, left_at=4096)
    result = sweep.recover_only(host.root, REPO)
    assert result['changed'] is False and result['recovered']['action'] == 'restore'
    assert not os.path.exists(state_file(host))


@pytest.mark.parametrize('kwargs, words', [
    ({'boot': 'another-boot'}, 'from an earlier boot'),
])
def test_stale_state_is_discarded_without_writing(host, kwargs, words):
    killed_run(host, **kwargs)
    result = sweep.recover_only(host.root, REPO)
    assert result['changed'] is False and result['recovered']['action'] == 'discard'
    assert words in result['recovered']['reason']
    assert ra(host) == 16 and not os.path.exists(state_file(host))


REFUSED_STATES = [
    # (id, killed_run kwargs, words): reported and left alone, never applied
    ('bool', {'original': True}, 'original_kb is true, not a whole number of KiB'),
    ('huge', {'original': 1048576}, 'original_kb=1048576 is not a multiple of the 4 KiB page size from 0 to 65536'),
    ('negative', {'original': -4}, 'original_kb=-4'),
    ('not-a-page', {'original': 30}, 'original_kb=30'),
    ('float', {'original': 128.0}, 'original_kb is 128.0, not a whole number'),
    ('string', {'original': '128'}, 'original_kb is "128"'),
    ('other-device', {'identity': 'ATTR{loop/backing_file}=/var/tmp/old.img'},
     'it records the device "ATTR{loop/backing_file}=/var/tmp/old.img", and dm-0 is'),
    ('no-identity', {'identity': 'x', 'original': 4096}, 'it records the device "x"'),
]


@pytest.mark.parametrize('kwargs, words', [r[1:] for r in REFUSED_STATES], ids=[r[0] for r in REFUSED_STATES])
def test_invalid_or_foreign_state_is_reported_and_left_alone(host, kwargs, words):
    killed_run(host, **kwargs)
    before = tree_checksum(host.root)
    with pytest.raises(sweep.SweepError) as exc:
        sweep.recover_only(host.root, REPO)
    assert words in str(exc.value) and 'left alone' in str(exc.value)
    with pytest.raises(sweep.SweepError) as exc:
        sweep.run(make_plan(host, values=[64, 32]), Volume(host).hooks())
    assert 'the sweep did not start, nothing was changed' in str(exc.value) and words in str(exc.value)
    assert tree_checksum(host.root) == before and ra(host) == 16


@pytest.mark.parametrize('plant, words', [
    (os.mkfifo, 'is a FIFO (named pipe), not a regular file'),
    (lambda path: os.symlink('/etc/passwd', path), 'is a symbolic link'),
    (lambda path: open(path, 'w').write('[' * 100000), 'nested too deeply'),
    (lambda path: open(path, 'w').write('[1]'), 'holds a JSON array, not object'),
])
def test_hostile_state_file_is_refused_without_a_traceback(host, plant, words):
    runstate.run_dir(host.root)
    plant(state_file(host))
    with pytest.raises(sweep.SweepError) as exc:
        sweep.recover_only(host.root, REPO)
    assert words in str(exc.value) and 'left alone' in str(exc.value)
    assert os.path.lexists(state_file(host)) and ra(host) == 4096


def test_another_device_with_the_same_name_never_finds_the_state(host):
    killed_run(host)
    old = state_file(host)
    host.udev('253:0', {'DM_UUID': 'LVM-another-volume', 'DM_NAME': 'vg_new-lv_new'})
    assert state_file(host) != old
    result = sweep.recover_only(host.root, REPO)
    assert result['changed'] is False and 'nothing to recover' in result['msg']
    assert os.path.exists(old) and ra(host) == 16


def test_check_mode_result_writes_nothing(host):
    killed_run(host)
    before = tree_checksum(host.root)
    result = sweep.check_mode_result(make_plan(host))
    assert tree_checksum(host.root) == before
    assert result['measured'] is False and result['results'] == [] and result['changed'] is True
    assert 'would set dm-0 (read_ahead_kb=16 now) to each of 256, 128, 64, 32, 16, 8 KiB' in result['msg']
    assert 'First it would restore the state file' in result['msg']
    assert result['recovered']['original_kb'] == 4096


# ---------------------------------------------------------------------------------------------
# Signals, threads and the shared mapping (real, not timed)

def test_terminate_as_exception_raises_and_restores_the_handler():
    old = signal.getsignal(signal.SIGTERM)
    with pytest.raises(sweep.SweepInterrupted) as exc:
        with sweep.terminate_as_exception():
            os.kill(os.getpid(), signal.SIGTERM)
            for step in range(1000):      # the handler runs between bytecodes
                assert step < 1000
    assert 'signal %d' % signal.SIGTERM in str(exc.value)
    assert signal.getsignal(signal.SIGTERM) == old


def test_a_signal_during_the_reads_is_raised_once_the_readers_are_joined():
    """Raising in the main thread's Thread.join could leave a reader running over an unmapped mapping."""
    calls = []

    def make_reader():
        def read(offset, length):
            if not calls:
                os.kill(os.getpid(), signal.SIGTERM)
            calls.append(offset)
            return length
        return read

    shares = [[(i * 16 * KIB, 8 * KIB)] * 2000 for i in range(4)]
    before = threading.active_count()
    with pytest.raises(sweep.SweepInterrupted) as exc:
        with sweep.terminate_as_exception():
            sweep.thread_runner(make_reader, shares, probe._default_clock(), float('inf'))
    assert 'signal %d' % signal.SIGTERM in str(exc.value)
    assert threading.active_count() == before
    done = len(calls)
    assert done == len(calls)            # nothing reads any more
    assert sweep._SIGNALS == {'critical': 0, 'pending': None, 'stops': []}


def test_thread_runner_reads_every_share():
    shares = [[(i * 16 * KIB, 8 * KIB)] * 5 for i in range(3)]
    lat, asked, error = sweep.thread_runner(lambda: (lambda offset, length: length), shares,
                                            probe._default_clock(), float('inf'))
    assert error is None and [len(x) for x in lat] == [5, 5, 5] and asked == [40 * KIB] * 3
    lat, asked, error = sweep.thread_runner(lambda: (lambda offset, length: length), shares, lambda: 10.0, 5.0)
    assert [len(x) for x in lat] == [0, 0, 0]


def test_thread_runner_reports_a_readers_error():
    def make_reader():
        def read(offset, length):
            raise OSError(errno.EIO, 'EIO')
        return read

    error = sweep.thread_runner(make_reader, [[(0, 8 * KIB)]] * 2, probe._default_clock(), float('inf'))[2]
    assert isinstance(error, OSError) and error.errno == errno.EIO


@pytest.mark.parametrize('libc', [True, False])
def test_shared_mapping_reads_a_real_file(tmpdir, monkeypatch, libc):
    if not libc:
        monkeypatch.setattr(sweep.probe, '_libc', lambda: None)
    path = str(tmpdir.join('f'))
    with open(path, 'wb') as f:
        f.write(b'\x01' * (64 * KIB))
    fd = os.open(path, os.O_RDONLY)
    try:
        mapping = sweep.SharedMapping(fd, 64 * KIB)
        assert mapping.concurrent is libc
        read = mapping.reader()
        assert read(48 * KIB, 16 * KIB) == 16 * KIB
        if libc:
            with pytest.raises(sweep.SweepError):
                read(56 * KIB, 16 * KIB)
        mapping.close()
        mapping.close()
    finally:
        os.close(fd)
