# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Module-level tests for read_ahead_sweep, through main(), on a fake host.

The measurement itself is simulated (test_sweep.py's Volume, a gp3-like volume with a fake
clock); what is tested here is the argument handling, check mode, the results and errors
main() returns, and the recovery call. The real kernel: tests/integration/sweep.sh.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os
import stat

import pytest

from ansible.module_utils import basic
from ansible_collections.aemops.os_tuning.plugins.module_utils import runstate, sweep, sweep_record
from ansible_collections.aemops.os_tuning.plugins.modules import read_ahead_sweep
from ansible_collections.aemops.os_tuning.tests.unit.plugins.module_utils.test_sweep import (
    BOOT, DM0, REPO, Volume, killed_run, ra, stat_line, state_file)
# The planted targets, one per refusal, are module_utils/test_sweep_record.py's.
from ansible_collections.aemops.os_tuning.tests.unit.plugins.module_utils.test_sweep_record import (
    _dir_symlinked, _file_alien, _file_fifo, _file_hardlinked, _file_symlink, _group_writable)
from ansible_collections.aemops.os_tuning.tests.unit.utils import run_module
from fakehost import nitro_host, tree_checksum

SMALL = {'path': REPO, 'sweep': [256, 64, 32, 8], 'duration': 1, 'size_mb': 4}


@pytest.fixture
def host(tmpdir, monkeypatch):
    h = nitro_host(tmpdir)
    h.write(DM0 + '/stat', stat_line(100, 8000))
    h.write(h._devdir('nvme0n1') + '/stat', stat_line())
    h.write(h._devdir('nvme0n1p1') + '/stat', stat_line())
    h.write(sweep.BOOT_ID, BOOT + '\n')
    monkeypatch.setattr(read_ahead_sweep, 'ROOT', h.root)
    return h


@pytest.fixture
def simulated(host, monkeypatch):
    """sweep.run with the simulated gp3 volume; returns what it saw."""
    seen = {}
    real_run = sweep.run

    def fake_run(the_plan, hooks=None):
        seen['plan'] = the_plan
        vol = Volume(host, fail_at=seen.get('fail_at'))
        return real_run(the_plan, vol.hooks())

    monkeypatch.setattr(sweep, 'run', fake_run)
    return seen


@pytest.fixture
def warnings(monkeypatch):
    seen = []
    monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda self, msg: seen.append(msg))
    return seen


def test_check_mode_changes_nothing(host, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError('check mode must not run the sweep')

    monkeypatch.setattr(sweep, 'run', forbidden)
    before = tree_checksum(host.root)
    result = run_module(read_ahead_sweep.main, dict(SMALL, _ansible_check_mode=True))
    assert tree_checksum(host.root) == before
    assert result['changed'] is False and result['measured'] is False and result['results'] == []
    assert result['device'] == 'dm-0' and result['original_kb'] == 4096 and result['directory'] == REPO
    assert result['caps'] == {'type': 'gp3', 'iops': 3000, 'mib_s': 125.0, 'basis': 'gp3 baseline'}
    assert 'would set dm-0 (read_ahead_kb=4096 now) to each of 256, 64, 32, 8 KiB' in result['msg']
    assert 'recommended_kb' not in result


def test_without_sweep_the_values_are_those_of_the_page_size(host, monkeypatch):
    host.use_page_kb(monkeypatch, 64)
    args = dict(SMALL, size_mb=16, _ansible_check_mode=True)
    del args['sweep']
    result = run_module(read_ahead_sweep.main, args)
    assert result['sweep'] == [4096, 1024, 256, 128, 64]
    assert 'to each of 4096, 1024, 256, 128, 64 KiB' in result['msg']


def test_check_mode_predicts_a_recovery(host):
    killed_run(host)
    before = tree_checksum(host.root)
    result = run_module(read_ahead_sweep.main, dict(SMALL, _ansible_check_mode=True))
    assert tree_checksum(host.root) == before
    assert result['changed'] is True and result['recovered']['action'] == 'restore'
    check = run_module(read_ahead_sweep.main, {'path': REPO, 'recover': True, '_ansible_check_mode': True})
    assert check['changed'] is True and 'would restore the state file' in check['msg']
    assert tree_checksum(host.root) == before and ra(host) == 16


def test_sweep_through_main(host, simulated, warnings):
    result = run_module(read_ahead_sweep.main, dict(SMALL, readers=2, seed=7, volume_type='gp2', volume_size_gb=100))
    the_plan = simulated['plan']
    assert (the_plan['readers'], the_plan['seed'], the_plan['sweep']) == (2, 7, [256, 64, 32, 8])
    assert result['caps']['type'] == 'gp2' and result['caps']['iops'] == 3000 and result['caps']['mib_s'] == 128.0
    assert result['changed'] is False and result['measured'] is True
    assert result['restored'] is True and ra(host) == 4096
    assert result['recommended_kb'] == 32 and 'gp2 caps 3000 IOPS, 128 MiB/s' in result['why']
    assert [r['read_ahead_kb'] for r in result['results']] == [256, 64, 32, 8]
    assert len(result['table']) == 4
    assert 'path' not in result and 'warnings' not in result and warnings == []


def test_timeline_through_main(host, simulated):
    result = run_module(read_ahead_sweep.main, dict(SMALL, sweep=[4096], size_mb=16, timeline_interval=0.25))
    assert simulated['plan']['timeline_interval'] == 0.25
    timeline = result['results'][0]['timeline']
    assert len(timeline) == 4 and all(rate == pytest.approx(125.0, rel=0.01) for t, rate in timeline)
    assert ra(host) == 4096
    plain = run_module(read_ahead_sweep.main, dict(SMALL, sweep=[8]))
    assert 'timeline' not in plain['results'][0]


def test_failure_returns_the_values_measured_and_restores(host, simulated):
    simulated['fail_at'] = 32
    result = run_module(read_ahead_sweep.main, SMALL, failed=True)
    assert 'the sweep failed after 2 of 4 values' in result['msg']
    assert result['restored'] is True and result['timed_out'] is False and ra(host) == 4096
    assert [r['read_ahead_kb'] for r in result['results']] == [256, 64]
    assert not os.path.exists(state_file(host))


def test_a_killed_run_is_recovered_by_the_next_one(host, simulated, warnings):
    killed_run(host)
    result = run_module(read_ahead_sweep.main, SMALL)
    assert result['changed'] is True and result['original_kb'] == 4096 and ra(host) == 4096
    assert result['recovered']['found_kb'] == 16
    assert any('restored dm-0 from 16 KiB to 4096 KiB first' in w for w in warnings)


def test_recover_call(host):
    killed_run(host)
    result = run_module(read_ahead_sweep.main, {'path': REPO, 'recover': True})
    assert result['changed'] is True and result['read_ahead_kb'] == 4096 and ra(host) == 4096
    again = run_module(read_ahead_sweep.main, {'path': REPO, 'recover': True})
    assert again['changed'] is False and 'nothing to recover' in again['msg']


@pytest.mark.parametrize('args, words', [
    ({'sweep': [64, 30]}, 'sweep value 30'),
    ({'volume_type': 'gp2'}, 'give volume_size_gb'),
    ({'volume_type': 'io2'}, 'give its iops'),
    # EC2 ModifyVolume limits (plugins/module_utils/ebs.py): gp3 3,000-80,000 IOPS, 125-2,000 MiB/s
    ({'volume_type': 'gp3', 'iops': 80001},
     'iops=80001 is outside what an EBS gp3 volume can have (3,000 to 80,000 IOPS): give a value in that range, '
     'or volume_type=custom'),
    ({'volume_type': 'gp3', 'throughput_mibps': 2001.0}, 'gp3 volume can have (125 to 2,000 MiB/s)'),
    ({'volume_type': 'io2', 'iops': 256001}, 'io2 volume can have (100 to 256,000 IOPS)'),
    ({'volume_type': 'sc1', 'throughput_mibps': 300.0}, 'sc1 volume can have (at most 250 MiB/s)'),
    ({'timeout': 2}, 'timeout=2 s is shorter'),
    ({'timeline_interval': 2.0}, 'timeline_interval=2.0'),
    ({'path': '/tmp'}, 'no device read-ahead to measure'),
    ({'path': '/opt/aem/nowhere'}, 'does not exist'),
])
def test_errors(host, args, words):
    before = tree_checksum(host.root)
    result = run_module(read_ahead_sweep.main, dict(SMALL, **args), failed=True)
    assert words in result['msg'] and result['changed'] is False
    assert tree_checksum(host.root) == before


def test_the_current_gp3_and_io2_maximums_are_accepted(host, simulated):
    result = run_module(read_ahead_sweep.main, dict(SMALL, volume_type='gp3', iops=80000, throughput_mibps=2000.0))
    assert (result['caps']['iops'], result['caps']['mib_s']) == (80000, 2000.0)
    result = run_module(read_ahead_sweep.main, dict(SMALL, volume_type='io2', iops=256000))
    assert (result['caps']['iops'], result['caps']['mib_s']) == (256000, 4000.0)


def test_busy_device_is_refused(host, simulated):
    the_plan = sweep.plan(host.root, REPO, values=[64], size_mb=4)
    runstate.run_dir(host.root)
    fd = os.open(the_plan['lock_file'], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another run holds dm-0's read-ahead lock
    try:
        result = run_module(read_ahead_sweep.main, SMALL, failed=True)
    finally:
        os.close(fd)
    assert 'another read-ahead sweep or read_ahead run holds dm-0' in result['msg'] and ra(host) == 4096
    assert 'held by pid %d (' % os.getpid() in result['msg']


# ---------------------------------------------------------------------------------------------
# record: the result kept for later runs (the role's local fact)

FACT = '/etc/ansible/facts.d/aem_tuning_sweep.fact'
FACTS_D = '/etc/ansible/facts.d'
TAKEN = '2026-12-01T10:00:00Z'
RECORDED = dict(SMALL, record=FACT)


@pytest.fixture
def facts_d(host, monkeypatch):
    """/etc/ansible/facts.d as Ansible's setup makes it (0755 root), and a fixed clock for the record's time."""
    for directory in ('/etc', '/etc/ansible', FACTS_D):
        os.chmod(host.mkdir(directory), 0o755)
    monkeypatch.setattr(sweep_record, 'now_iso', lambda now=None: TAKEN)
    return host.path(FACTS_D)


@pytest.fixture
def no_measuring(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError('the sweep must not measure')

    monkeypatch.setattr(sweep, 'run', forbidden)


def test_the_record_is_written_with_the_sweeps_result(host, simulated, facts_d):
    result = run_module(read_ahead_sweep.main, RECORDED)
    assert result['changed'] is True and result['record'] == {'path': FACT, 'changed': True}
    with open(host.path(FACT)) as f:
        text = f.read()
    record = json.loads(text)
    assert text.endswith('}\n') and text.startswith('{\n  "best_kb": ')  # indent 2, sorted keys
    assert stat.S_IMODE(os.lstat(host.path(FACT)).st_mode) == 0o644
    assert record == result['evidence']
    assert sorted(record) == ['best_kb', 'caps', 'device', 'duration', 'excluded_noisy_kb', 'knobs', 'original_kb',
                              'path', 'readers', 'recommended_kb', 'restored_kb', 'results', 'source', 'stable_id', 'sweep',
                              'table', 'taken', 'tolerance_pct', 'why', 'within_kb']
    assert record['source'] == 'sweep' and record['taken'] == TAKEN
    assert record['path'] == REPO and record['device'] == 'dm-0'
    assert record['stable_id'] == {'key': 'ENV{DM_UUID}', 'value': 'LVM-' + 'x' * 64, 'serial': None}
    assert (record['original_kb'], record['restored_kb'], record['recommended_kb'], record['best_kb']) == (
        4096, 4096, 32, 32)
    assert record['within_kb'] == [32, 8] and record['excluded_noisy_kb'] == []
    assert record['why'].startswith('32 KiB: ') and 'gp3 caps 3000 IOPS, 125 MiB/s' in record['why']
    assert record['caps'] == {'type': 'gp3', 'iops': 3000, 'mib_s': 125.0, 'basis': 'gp3 baseline'}
    assert record['sweep'] == [256, 64, 32, 8]
    assert (record['readers'], record['duration'], record['tolerance_pct']) == (4, 1, 5.0)
    assert record['knobs'] == {'values': [256, 64, 32, 8], 'readers': 4, 'duration': 1, 'size_mb': 4,
                               'tolerance_pct': 5.0, 'volume_type': 'gp3', 'volume_size_gb': None, 'iops': None,
                               'throughput_mibps': None}
    assert len(record['table']) == 4 and record['table'][0].startswith('  256 KiB: ')
    assert [r['read_ahead_kb'] for r in record['results']] == [256, 64, 32, 8]
    assert record['results'][2]['reads_per_s'] == result['results'][2]['reads_per_s']
    assert ra(host) == 4096


def test_the_record_keeps_given_caps_and_defaulted_ones_as_null(host, simulated, facts_d):
    result = run_module(read_ahead_sweep.main, dict(RECORDED, volume_type='gp2', volume_size_gb=100,
                                                    readers=2))
    with open(host.path(FACT)) as f:
        record = json.load(f)
    assert record['knobs'] == {'values': [256, 64, 32, 8], 'readers': 2, 'duration': 1, 'size_mb': 4,
                               'tolerance_pct': 5.0, 'volume_type': 'gp2', 'volume_size_gb': 100, 'iops': None,
                               'throughput_mibps': None}
    assert record['readers'] == 2 and result['caps']['type'] == 'gp2'


def test_a_rerun_with_the_same_record_changes_nothing(host, simulated, facts_d):
    first = run_module(read_ahead_sweep.main, RECORDED)
    inode = os.lstat(host.path(FACT)).st_ino
    again = run_module(read_ahead_sweep.main, RECORDED)
    assert again['changed'] is False and again['record'] == {'path': FACT, 'changed': False}
    assert again['evidence'] == first['evidence'] and os.lstat(host.path(FACT)).st_ino == inode


def test_a_recovery_with_the_same_record_is_still_a_change(host, simulated, facts_d, warnings):
    run_module(read_ahead_sweep.main, RECORDED)
    killed_run(host)
    result = run_module(read_ahead_sweep.main, RECORDED)
    assert result['record']['changed'] is False and result['changed'] is True
    assert result['recovered']['found_kb'] == 16 and ra(host) == 4096


def test_check_mode_writes_no_record(host, no_measuring, facts_d):
    before = tree_checksum(host.root)
    result = run_module(read_ahead_sweep.main, dict(RECORDED, _ansible_check_mode=True))
    assert tree_checksum(host.root) == before and os.listdir(facts_d) == []
    assert result['record'] == {'path': FACT, 'changed': True} and result['changed'] is True
    assert 'evidence' not in result
    assert result['msg'].endswith('It would record the result in %s (a new file).' % FACT)


def test_without_record_nothing_is_recorded(host, simulated, facts_d):
    result = run_module(read_ahead_sweep.main, SMALL)
    assert 'record' not in result and 'evidence' not in result and result['changed'] is False
    assert os.listdir(facts_d) == []
    check = run_module(read_ahead_sweep.main, dict(SMALL, _ansible_check_mode=True))
    assert 'record' not in check and 'would record' not in check['msg'] and check['changed'] is False


def test_recover_ignores_record(host, facts_d):
    killed_run(host)
    result = run_module(read_ahead_sweep.main, {'path': REPO, 'recover': True, 'record': FACT})
    assert result['changed'] is True and 'record' not in result and os.listdir(facts_d) == []


REFUSED = [
    (_group_writable, 'its directory %s is writable by group or others (mode 0775)' % FACTS_D),
    (_dir_symlinked, 'its directory %s is a symbolic link (to ' % FACTS_D),
    (_file_symlink, '%s is a symbolic link (to ' % FACT),
    (_file_fifo, '%s is a FIFO (named pipe), not a regular file' % FACT),
    (_file_hardlinked, '%s has 2 hard links' % FACT),
    (_file_alien, '%s is owned by uid 4242, not root' % FACT),
]


@pytest.mark.parametrize('plant, words', REFUSED, ids=[p.__name__.lstrip('_') for p, w in REFUSED])
@pytest.mark.parametrize('check', [False, True], ids=['run', 'check'])
def test_an_unsafe_record_target_fails_before_measuring(host, facts_d, no_measuring, plant, words, check):
    plant(host)
    before = tree_checksum(host.root)
    result = run_module(read_ahead_sweep.main, dict(RECORDED, _ansible_check_mode=check), failed=True)
    assert result['changed'] is False and result['results'] == []
    assert result['msg'].startswith('the sweep record %s cannot be written: ' % FACT)
    assert words in result['msg'] and result['msg'].endswith('The sweep did not start; nothing was changed.')
    assert tree_checksum(host.root) == before and ra(host) == 4096


def test_a_target_made_unsafe_during_the_sweep_is_not_written(host, facts_d, monkeypatch):
    real_run = sweep.run

    def run_then_plant(the_plan, hooks=None):
        result = real_run(the_plan, Volume(host).hooks())
        _file_symlink(host)  # planted while the sweep measured
        return result

    monkeypatch.setattr(sweep, 'run', run_then_plant)
    result = run_module(read_ahead_sweep.main, RECORDED, failed=True)
    assert result['msg'].startswith('the sweep recommends 32 KiB (dm-0 was restored to 4096 KiB), but the record '
                                    'was not written: the sweep record %s cannot be written: %s is a symbolic link'
                                    % (FACT, FACT))
    assert result['recommended_kb'] == 32 and result['restored'] is True and len(result['results']) == 4
    assert os.path.islink(host.path(FACT)) and host.read('/srv/victim') == 'keep\n' and ra(host) == 4096
