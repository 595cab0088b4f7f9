# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tuning_facts with ``intent``, ``snapshot`` and ``verify``: what the aem_tuning role calls it with.

The fake host and tools are those of test_tuning_facts.py (fakehost.FakeTools answers
``tuned-adm verify`` too), plus the lines tuned logs for it. The rules themselves are tested in module_utils/test_compliance.py;
here: a refused value fails with nothing written, the module writes nothing in any mode (the snapshot is only read:
test_tuning_snapshot.py tests the module that keeps it), the intent is typed, the read-ahead the run applies is decided
once (plan.read_ahead), and the misses come back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import ebs_stats
from ansible_collections.aemops.os_tuning.plugins.modules import tuning_facts
from ansible_collections.aemops.os_tuning.tests.unit.plugins.modules.test_tuning_facts import (
    LV_UUID, NVME1_SERIAL, REPO, el8_env)
from ansible_collections.aemops.os_tuning.tests.unit.utils import run_module
from fakehost import FakeNvme, FakeSyscalls, HostReads, ebs_page, tree_checksum

SNAPSHOT = '/etc/ansible/facts.d/aem_tuning_before.fact'
NVME1_LINK = '/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_%s' % NVME1_SERIAL
# tuned v2.20.0 tuned/consts.py STR_VERIFY_PROFILE_DEVICE_VALUE_FAIL, after daemon.py's marker line.
TUNED_LOG = ("2026-12-01 11:00:00,000 INFO     tuned.daemon.daemon: verifying profile(s): virtual-guest\n"
             "2026-12-01 11:00:00,002 ERROR    tuned.plugins.base: verify: failed: device dm-0: 'readahead' = "
             "'4096', expected '32'\n")


@pytest.fixture
def env(tmpdir, monkeypatch, module_exit):
    environment = el8_env(tmpdir, monkeypatch)
    environment.host.symlink(NVME1_LINK, '../../nvme1n1')
    return environment


def intent(**kw):
    result = {'state': 'present', 'read_ahead_kb': 32, 'paths': [REPO], 'candidates': [], 'devices': [],
              'underlying': False, 'thp': 'never', 'thp_defrag': 'never', 'thp_persist': []}
    result.update(kw)
    return result


def run(args, failed=False):
    result = run_module(tuning_facts.main, args, failed=failed)
    return result, result.get('ansible_facts', {}).get('os_tuning')


@pytest.mark.parametrize('bad, text', [
    ({'read_ahead_kb': 30}, 'not a multiple of the page size'),
    ({'paths': ['/nonexistent']}, 'none of the given aem_tuning_paths exists'),
    ({'devices': ['/dev/disk/by-id/nvme-typo']}, 'aem_tuning_devices: /dev/disk/by-id/nvme-typo is not a block'),
    ({'thp': 'sometimes'}, 'aem_tuning_thp=sometimes is not offered'),
])
def test_a_refused_value_fails_with_nothing_written(env, bad, text):
    before = tree_checksum(env.root)
    result, _facts = run({'intent': intent(mode='apply', **bad), 'snapshot': {}}, failed=True)
    assert text in result['msg'] and result['msg'].startswith('nothing was changed: ')
    assert result['changed'] is False
    assert tree_checksum(env.root) == before


@pytest.mark.parametrize('page_kb, kb, why', [
    (4, 32, '32 KiB: the default'),
    (64, 64, '64 KiB: the page size of this kernel (the default 32 KiB is less than one page)'),
])
def test_no_read_ahead_given_is_32_or_the_page_size_with_the_reason(env, monkeypatch, page_kb, kb, why):
    # The role's default (aem_tuning_read_ahead_kb not set) on x86_64 and on RHEL 9 aarch64 kernel-64k.
    env.host.use_page_kb(monkeypatch, page_kb)
    _result, facts = run({'intent': intent(read_ahead_kb=None), 'fail_on_invalid': False})
    assert facts['plan']['page_kb'] == page_kb
    assert facts['plan']['read_ahead_default'] == {'kb': kb, 'why': why}
    assert facts['plan']['errors'] == []
    assert 'dm-0 reads 4096 KiB, not %d: run the role in apply mode' % kb in [
        m['message'] for m in facts['compliance']['misses']]


def test_an_explicit_32_on_a_64k_page_host_is_refused_naming_the_page_size(env, monkeypatch):
    env.host.use_page_kb(monkeypatch, 64)
    result, _facts = run({'intent': intent(read_ahead_kb=32)}, failed=True)
    assert 'aem_tuning_read_ahead_kb=32 is not a multiple of the page size (64 KiB)' in result['msg']


@pytest.mark.parametrize('args', [
    {'intent': intent(mode='apply'), 'snapshot': {}},
    {'intent': intent(mode='apply', state='absent'), 'snapshot': {}},
    {'intent': intent(mode='apply', read_ahead_kb='auto', sweep={
        'values': [32], 'readers': 1, 'duration': 1, 'size_mb': 64, 'tolerance_pct': 5.0, 'volume_type': 'gp3'})},
])
def test_the_facts_module_writes_nothing_in_any_mode(env, args):
    # Before, an apply run wrote the snapshot (/etc/ansible/facts.d) and a backout removed it: now tuning_snapshot does.
    before = tree_checksum(env.root)
    result, _facts = run(args)
    assert result['changed'] is False
    assert tree_checksum(env.root) == before
    assert not env.host.exists(SNAPSHOT)


def test_the_snapshot_option_only_reads(env):
    result, _facts = run({'snapshot': {'state': 'present'}}, failed=True)
    assert 'state' in result['msg'] and 'Unsupported parameters' in result['msg']
    env.host.write(SNAPSHOT, json.dumps({'taken': '2026-12-01T10:00:00Z', 'created_dirs': [], 'os_tuning': {'a': 1}}))
    _result, facts = run({'snapshot': {}})
    assert facts['snapshot'] == {'taken': '2026-12-01T10:00:00Z', 'created_dirs': [], 'os_tuning': {'a': 1}}


def test_a_damaged_snapshot_is_reported_not_trusted(env):
    env.host.write(SNAPSHOT, '{not json')
    _result, facts = run({'snapshot': {}})
    assert facts['snapshot']['error'].startswith('damaged: %s: not valid JSON' % SNAPSHOT)


@pytest.mark.parametrize('plant, why', [
    (os.mkfifo, 'is a FIFO (named pipe), not a regular file'),
    (lambda path: open(path, 'w').write('[' * 100000 + ']' * 100000), 'nested too deeply'),
    (lambda path: open(path, 'w').write('[1]'), 'holds a JSON array, not object'),
])
def test_a_hostile_snapshot_is_reported_and_kept(env, plant, why):
    env.host.mkdir(os.path.dirname(SNAPSHOT))
    plant(env.host.path(SNAPSHOT))
    result, facts = run({'snapshot': {}})
    assert facts['snapshot']['error'].startswith('damaged: %s: %s' % (SNAPSHOT, why))
    assert result['changed'] is False


@pytest.mark.parametrize('plant, why', [
    (os.mkfifo, 'is a FIFO (named pipe), not a regular file'),
    (lambda path: open(path, 'w').write('{"a":' * 100000), 'nested too deeply'),
])
def test_a_hostile_sweep_record_is_a_reason_not_a_traceback(env, plant, why):
    env.host.mkdir(os.path.dirname(SWEEP_FACT))
    plant(env.host.path(SWEEP_FACT))
    result = run({'intent': auto()}, failed=True)[0]  # audit mode: refused, naming the damage; nothing changed
    assert 'damaged: %s: %s' % (SWEEP_FACT, why) in result['msg'] and result['changed'] is False


def test_misses_name_a_drifted_device_target_and_verify_is_one_miss(env):
    env.tools.verify_rc = 1
    env.host.write('/var/log/tuned/tuned.log', TUNED_LOG)
    result, facts = run({'intent': intent(devices=[NVME1_LINK]), 'verify': True})
    assert result['changed'] is False
    assert facts['plan']['devices'] == {NVME1_LINK: 'nvme1n1'}
    misses = facts['compliance']['misses']
    subjects = [(m['subject'], m['kind']) for m in misses]
    assert ('%s (nvme1n1)' % NVME1_LINK, 'read_ahead') in subjects
    assert ('%s (dm-0)' % REPO, 'read_ahead') in subjects
    assert [m for m in misses if m['kind'] == 'tuned_verify'] == [{
        'subject': 'tuned-adm verify', 'kind': 'tuned_verify',
        'message': 'tuned finds device dm-0: readahead is 4096, expected 32 (see /var/log/tuned/tuned.log; '
                   'systemctl restart tuned re-applies the profile)'}]
    assert facts['compliance']['compliant'] is False
    assert env.tools.ran('tuned-adm') == [['/usr/sbin/tuned-adm', '--version'], ['/usr/sbin/tuned-adm', 'verify']]


def test_without_fail_on_invalid_errors_are_misses(env):
    result, facts = run({'intent': intent(paths=['/nonexistent']), 'fail_on_invalid': False})
    assert [m['kind'] for m in facts['compliance']['misses']][:1] == ['invalid']


def test_the_host_clock_is_returned(env):
    _result, facts = run({})
    assert facts['clock']['epoch'] > 0 and facts['clock']['iso'].endswith('Z')


KERNEL_SETTINGS = '/etc/tuned/kernel_settings/tuned.conf'


def test_kernel_settings_after_ours_is_a_conflict_it_wins_and_ours_not_last(env):
    """The kernel_settings role (1.5.0 tasks/main.yml) appended after ours: its THP madvise wins."""
    env.with_child_profile(thp_enabled='never')
    env.host.write(KERNEL_SETTINGS, '[main]\nsummary = kernel settings\n[vm]\ntransparent_hugepages = madvise\n')
    env.host.write('/etc/tuned/active_profile', 'virtual-guest aemops-os-tuning kernel_settings\n')
    _result, facts = run({'intent': intent(), 'verify': False})
    assert [(c['option'], c['winner']) for c in facts['tuned']['conflicts'] if c['profile'] == 'kernel_settings'] == [
        ('transparent_hugepages', 'kernel_settings')]
    kinds = [(m['subject'], m['kind']) for m in facts['compliance']['misses']]
    assert ('tuned', 'tuned_profile') in kinds
    assert ('tuned profile kernel_settings', 'tuned_conflict') in kinds


def test_kernel_settings_before_ours_is_a_conflict_ours_wins(env):
    env.with_child_profile(thp_enabled='never')
    env.host.write(KERNEL_SETTINGS, '[main]\nsummary = kernel settings\n[vm]\ntransparent_hugepages = madvise\n')
    env.host.write('/etc/tuned/active_profile', 'virtual-guest kernel_settings aemops-os-tuning\n')
    _result, facts = run({'intent': intent(), 'verify': False})
    # Every conflict, with the stock parent's [vm] and [disk] too, is won by ours.
    assert set(c['winner'] for c in facts['tuned']['conflicts']) == set(['aemops-os-tuning'])
    assert 'kernel_settings' in [c['profile'] for c in facts['tuned']['conflicts']]
    assert [m['kind'] for m in facts['compliance']['misses'] if m['kind'].startswith('tuned')] == []


SWEEP_FACT = '/etc/ansible/facts.d/aem_tuning_sweep.fact'
KNOBS = {'values': [256, 64, 32], 'readers': 4, 'duration': 3, 'size_mb': 256, 'tolerance_pct': 5.0,
         'volume_type': 'gp3', 'volume_size_gb': 0, 'iops': 0, 'throughput_mibps': 0}


def auto(mode='audit', **kw):
    kw.setdefault('sweep', dict(KNOBS))
    return intent(read_ahead_kb='auto', sweep_record=SWEEP_FACT, mode=mode, **kw)


def write_record(env, **kw):
    data = {'recommended_kb': 4096, 'knobs': KNOBS, 'path': REPO, 'device': 'dm-0', 'taken': '2026-12-01T10:00:00Z',
            'stable_id': {'key': 'ENV{DM_UUID}', 'value': LV_UUID, 'serial': None}, 'why': 'measured'}
    data.update(kw)
    env.host.write(SWEEP_FACT, json.dumps(data))


def test_auto_in_audit_mode_checks_against_the_recorded_value_and_warns(env):
    # The fake LV is at 4096 KiB: checked against a recorded 4096 it is compliant, against a recorded 64 not.
    write_record(env)
    _result, facts = run({'intent': auto()})
    assert facts['plan']['recorded_sweep']['usable'] is True
    assert facts['plan']['recorded_sweep']['record']['recommended_kb'] == 4096
    assert not [m for m in facts['compliance']['misses'] if m['kind'] == 'read_ahead']
    assert [w for w in env.warnings if 'checks against 4096 KiB, recorded by the sweep of dm-0' in w]
    write_record(env, recommended_kb=64)
    _result, facts = run({'intent': auto()})
    assert [m for m in facts['compliance']['misses']
            if m['kind'] == 'read_ahead' and 'dm-0 reads 4096 KiB, not 64' in m['message']]


def test_auto_in_audit_mode_fails_before_any_change_when_the_record_is_of_another_device(env):
    write_record(env, stable_id={'key': 'ENV{DM_UUID}', 'value': 'LVM-another'})
    before = tree_checksum(env.root)
    result, _facts = run({'intent': auto(), 'snapshot': {}}, failed=True)
    assert 'aem_tuning_read_ahead_kb=auto needs a sweep of the live device' in result['msg']
    assert 'another device' in result['msg'] and result['changed'] is False
    assert tree_checksum(env.root) == before


def test_auto_in_apply_mode_without_a_record_is_left_to_the_sweep(env):
    _result, facts = run({'intent': auto(mode='apply')})
    assert facts['plan']['recorded_sweep'] == {
        'usable': False, 'why': 'no apply run recorded one in %s' % SWEEP_FACT, 'record': None}
    assert not [m for m in facts['compliance']['misses'] if m['kind'] == 'read_ahead']
    assert not [w for w in env.warnings if 'sweep' in w]


@pytest.mark.parametrize('page_kb, values', [(4, [4096, 1024, 256, 128, 64, 32, 16, 8]), (64, [4096, 1024, 256, 128, 64])])
def test_auto_with_the_default_values_runs_on_a_64k_page_host(env, monkeypatch, page_kb, values):
    """The role's aem_tuning_sweep_values not set (null): the sweep's defaults for the host's page size, checked
    before any change, and reported for the role (plan.sweep_values); 8, 16 and 32 would be refused on 64 KiB pages."""
    env.host.use_page_kb(monkeypatch, page_kb)
    knobs = dict(KNOBS, values=None, duration=5, size_mb=1024)
    _result, facts = run({'intent': intent(read_ahead_kb='auto', sweep=knobs, sweep_record=SWEEP_FACT, mode='apply')})
    assert facts['plan']['errors'] == []
    assert facts['plan']['sweep_values'] == values
    result, _facts = run({'intent': intent(read_ahead_kb='auto', sweep=dict(knobs, values=[4096, 32]),
                                           sweep_record=SWEEP_FACT, mode='apply')}, failed=page_kb == 64)
    if page_kb == 64:
        assert 'aem_tuning_sweep_values: 32: each value must be a whole number of KiB, a multiple of the 64' in result['msg']


@pytest.mark.parametrize('recorded', [None, [4096, 1024, 256, 128, 64, 32, 16, 8]])
def test_a_record_of_the_default_values_holds_whether_they_were_given_or_not(env, recorded):
    # A record written before aem_tuning_sweep_values defaulted to null holds the list itself; one written since, null.
    knobs = dict(KNOBS, values=None)
    write_record(env, knobs=dict(knobs, values=recorded))
    _result, facts = run({'intent': intent(read_ahead_kb='auto', sweep=knobs, sweep_record=SWEEP_FACT)})
    assert facts['plan']['recorded_sweep']['usable'] is True
    write_record(env, knobs=dict(knobs, values=[4096, 64]))
    _result, facts = run({'intent': intent(read_ahead_kb='auto', sweep=knobs, sweep_record=SWEEP_FACT)}, failed=True)


def test_the_plan_holds_the_timeout_the_role_gives_the_sweep(env):
    # 3 values x 2 phases x 3 s, the 256 MiB scratch file at 10 MiB/s (25 s), and 600 s for the rest
    _result, facts = run({'intent': auto(mode='apply')})
    assert facts['plan']['sweep_timeout'] == 643
    _result, facts = run({'intent': intent(read_ahead_kb=32)})
    assert facts['plan']['sweep_timeout'] is None


@pytest.mark.parametrize('page_kb, timeout', [(4, 673), (64, 655)])
def test_the_timeout_of_the_default_values_counts_the_page_size_defaults(env, monkeypatch, page_kb, timeout):
    # aem_tuning_sweep_values null: 8 values on 4 KiB pages, 5 on 64 KiB pages, x 2 phases x 3 s, + 25 s + 600 s
    env.host.use_page_kb(monkeypatch, page_kb)
    _result, facts = run({'intent': intent(read_ahead_kb='auto', sweep=dict(KNOBS, values=None), sweep_record=SWEEP_FACT,
                                           mode='apply')})
    assert facts['plan']['sweep_timeout'] == timeout


def test_a_backout_with_auto_ignores_the_record(env):
    # A record that does not hold must not stop a backout, nor a warning say it is used.
    write_record(env, stable_id={'key': 'ENV{DM_UUID}', 'value': 'LVM-another'})
    _result, facts = run({'intent': auto(state='absent')})
    assert 'recorded_sweep' not in facts['plan']
    assert not [w for w in env.warnings if 'sweep' in w]


def choice_of(args, failed=False):
    _result, facts = run(args, failed=failed)
    ra = facts['plan']['read_ahead']
    return dict((k, ra[k]) for k in ('kb', 'source', 'auto', 'may_sweep', 'sweep'))


def test_the_read_ahead_the_run_applies_is_decided_once_given_or_default(env):
    assert choice_of({'intent': intent(read_ahead_kb=64)}) == {
        'kb': 64, 'source': 'given', 'auto': False, 'may_sweep': False, 'sweep': False}
    assert choice_of({'intent': intent(read_ahead_kb=None, mode='apply')}) == {
        'kb': 32, 'source': 'default', 'auto': False, 'may_sweep': True, 'sweep': False}
    assert choice_of({'intent': intent(state='absent', mode='apply')}) == {
        'kb': None, 'source': None, 'auto': False, 'may_sweep': False, 'sweep': False}


def test_auto_sweeps_only_in_an_apply_run_outside_check_mode_without_a_record_that_holds(env):
    assert choice_of({'intent': auto(mode='apply')}) == {
        'kb': None, 'source': 'sweep', 'auto': True, 'may_sweep': True, 'sweep': True}
    _result, facts = run({'intent': auto(mode='apply')})
    assert facts['plan']['read_ahead']['knobs'] == {
        'values': [256, 64, 32], 'readers': 4, 'duration': 3, 'size_mb': 256, 'tolerance_pct': 5.0,
        'volume_type': 'gp3', 'volume_size_gb': None, 'iops': None, 'throughput_mibps': None}
    # Check mode and audit mode never sweep: without a record that holds they are refused, naming why.
    result, facts = run({'intent': auto(mode='apply'), '_ansible_check_mode': True}, failed=True)
    assert 'which this run does not do' in result['msg']
    assert facts['plan']['read_ahead']['sweep'] is False and facts['plan']['read_ahead']['may_sweep'] is False
    write_record(env)
    assert choice_of({'intent': auto(mode='apply')}) == {
        'kb': 4096, 'source': 'recorded', 'auto': True, 'may_sweep': True, 'sweep': False}
    assert choice_of({'intent': auto(mode='audit')}) == {
        'kb': 4096, 'source': 'recorded', 'auto': True, 'may_sweep': False, 'sweep': False}
    _result, facts = run({'intent': auto()})
    assert facts['plan']['read_ahead']['evidence']['source'] == 'recorded'
    assert facts['plan']['read_ahead']['evidence']['recommended_kb'] == 4096
    # aem_tuning_sweep_force measures again in an apply run, and changes nothing in audit mode.
    assert choice_of({'intent': auto(mode='apply', sweep_force=True)})['source'] == 'sweep'
    assert choice_of({'intent': auto(mode='audit', sweep_force=True)})['source'] == 'recorded'


def test_the_intent_is_typed(env):
    # What ansible-core before 2.19 may hand over as text is typed by the declared spec, or refused naming the key.
    assert choice_of({'intent': intent(read_ahead_kb='64', underlying='no')}) == {
        'kb': 64, 'source': 'given', 'auto': False, 'may_sweep': False, 'sweep': False}
    _result, facts = run({'intent': auto(mode='apply', sweep=dict(KNOBS, readers='4', duration='3'))})
    assert facts['plan']['errors'] == [] and facts['plan']['read_ahead']['knobs']['readers'] == 4
    result, _facts = run({'intent': auto(sweep=dict(KNOBS, readers='four'))}, failed=True)
    assert "'readers'" in result['msg'] and 'intent -> sweep' in result['msg']
    result, _facts = run({'intent': intent(mode='sometimes')}, failed=True)
    assert 'mode' in result['msg'] and 'apply, audit' in result['msg']


def test_the_sweep_settings_matter_only_with_auto(env):
    # The role passes them on every run: a setting only a sweep uses does not refuse a run that sets a number.
    _result, facts = run({'intent': intent(read_ahead_kb=32, sweep=dict(KNOBS, readers=0))})
    assert facts['plan']['errors'] == []
    result, _facts = run({'intent': auto(mode='apply', sweep=dict(KNOBS, readers=0))}, failed=True)
    assert 'aem_tuning_sweep_readers=0: give 1 to 64 concurrent readers.' in result['msg']


@pytest.mark.parametrize('pidfd', [True, False])
def test_running_readers_of_the_repository_are_misses_naming_pid_and_unit(env, monkeypatch, pidfd):
    """Set, but not in effect: Oak holds its tar files from before, a Lucene reader mapped and closed its file. On a
    kernel without pidfd_getfd (RHEL 7 and 8) the advice is a restart, never "apply refreshes it"."""
    from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_refresh, readers_scan
    import errno
    seg = REPO + '/segmentstore'
    # Oak maps its tar file and keeps the descriptor (FileAccess.Mapped); tar reads its file through a descriptor.
    env.host.add_process(4242, 'java', 5000, fds={10: (seg + '/data00000a.tar', '253:0', 131)},
                         maps=['7f2-7f3 r--s 00000000 fd:00 131 %s/data00000a.tar' % seg])
    env.host.add_process(4300, 'java', 5100, maps=['7f0-7f1 r--s 00000000 fd:00 200 %s/index/_0.cfs' % REPO])
    env.host.add_process(7000, 'tar', 8000, unit='backup.service', fds={3: ('/opt/aem/backup/x.tar', '253:0', 300)})
    monkeypatch.setattr(readers_scan, 'ProcFs', lambda root: env.host.proc_procfs())
    monkeypatch.setattr(readers_refresh, 'Syscalls', lambda: FakeSyscalls(env.host, {} if pidfd else {'pidfd_getfd': errno.ENOSYS}))
    result, facts = run({'intent': intent()})
    assert facts['readers']['kernel_refresh'] is pidfd
    assert [(r['pid'], r['unit']) for r in facts['readers']['stale']] == ([(4242, 'aem.service')] if pidfd else [])
    assert [(r['pid'], r['unit'], r['why']) for r in facts['readers']['needs_restart']] == (
        [(4300, 'aem.service', ['mapping_without_fd'])] if pidfd else
        [(4242, 'aem.service', ['no_pidfd_getfd']), (4300, 'aem.service', ['mapping_without_fd'])])
    misses = [(m['subject'], m['kind'], m['message']) for m in facts['compliance']['misses'] if m['kind'].startswith('reader')]
    restart = ("maps 1 file(s) whose descriptor it closed (as Lucene's MMapDirectory does): no descriptor to refresh: "
               "restart it in your next window (aem_tuning_restart_stale_aem: true restarts AEM's unit)")
    if pidfd:
        assert misses == [
            ('pid 4242 (java, aem.service)', 'reader', 'holds 1 file(s) opened at an earlier read-ahead, so it still '
             'reads with the earlier, larger window: run the role in apply mode (read_ahead refreshes it in place) or '
             'restart it'),
            ('pid 4300 (java, aem.service)', 'reader_restart', restart)]
    else:
        assert misses == [
            ('pid 4242 (java, aem.service)', 'reader_restart', 'this kernel has no pidfd_getfd(2) (Linux 5.6 and '
             'later; RHEL 7 and RHEL 8 kernels lack it), so its 1 open file(s) cannot be refreshed in place: restart it '
             "in your next window (aem_tuning_restart_stale_aem: true restarts AEM's unit)"),
            ('pid 4300 (java, aem.service)', 'reader_restart', restart)]
        assert not any('apply mode' in m[2] for m in misses)
    assert result['changed'] is False


@pytest.mark.parametrize('args', [
    {'intent': intent(mode='apply'), 'verify': True, 'snapshot': {}},
    {'intent': intent(state='absent'), 'verify': True, 'paths': [REPO]},
    {'paths': [REPO, '/opt/aem']},
])
def test_one_run_reads_each_host_source_once(env, monkeypatch, args):
    # The facts module changes nothing, so one state of the host serves the whole run (host.Host,
    # read_only): mountinfo, the udev database, each device's dev, dm/name, dm/uuid and read_ahead_kb, tuned's files
    # and the kernel's release, each opened once. Before: mountinfo 5 times, dm-0's dev 6, tuned's active_profile 4.
    reads = HostReads(env.root, monkeypatch)
    run(args)
    assert reads.more_than_once() == {}
    assert reads.counts['/proc/self/mountinfo'] == 1
    assert reads.counts['/etc/tuned/active_profile'] == 1


# ---------------------------------------------------------------------------------------------
# EBS's own statistics (log page 0xD0, module_utils/ebs_stats.py)

def test_the_targeted_ebs_volume_reports_its_counters_read_once(env, monkeypatch):
    """The repository is on dm-0 over nvme1n1: the volume beneath it is read, once, and the root disk is not."""
    page = ebs_page({'total_read_ops': 42, 'ebs_volume_performance_exceeded_tp': 41000000}, [(0, 128, 5)])
    nvme = FakeNvme({env.host.path('/dev/nvme1n1'): ('259:2', page), env.host.path('/dev/nvme0n1'): ('259:0', page)})
    monkeypatch.setattr(ebs_stats, 'Nvme', lambda: nvme)
    _result, facts = run({'intent': intent()})
    assert sorted(facts['ebs']) == ['nvme1n1']
    found = facts['ebs']['nvme1n1']
    assert found['volume_id'] == 'vol-0123456789abcdef0' and 'reason' not in found
    assert found['stats']['total_read_ops'] == 42
    assert found['stats']['ebs_volume_performance_exceeded_tp'] == 41000000
    assert found['stats']['read_io_latency_histogram'] == [[0, 128, 5]]
    assert len(nvme.ioctls) == 1


def test_without_an_intent_every_nvme_namespace_is_reported_or_says_why_not(env, monkeypatch):
    nvme = FakeNvme({env.host.path('/dev/nvme1n1'): ('259:2', ('status', 0x4002))})
    monkeypatch.setattr(ebs_stats, 'Nvme', lambda: nvme)
    _result, facts = run({})
    assert facts['ebs']['nvme1n1']['reason'] == 'no EBS statistics: the device refused log page 0xD0 (NVMe status 16386)'
    assert facts['ebs']['nvme0n1']['reason'].startswith('no EBS statistics: cannot open ')
    assert facts['errors'] == []


def test_a_measuring_window_out_of_bounds_is_refused(env):
    result, _facts = run({'intent': intent(), 'measure_readers': 31}, failed=True)
    expected = ('nothing was changed: measure_readers: the measuring window is 0 (off) to 30 seconds, not 31: give 0 '
                'to turn the measurement off')
    assert result['msg'].startswith(expected)


def test_aems_start_guard_is_reported_and_a_missing_one_is_a_miss(env):
    from ansible_collections.aemops.os_tuning.plugins.module_utils import boot_guard
    env.tools.install('systemctl')
    _result, facts = run({'intent': intent(aem_service='aem.service')})
    guard = facts['start_guard']
    assert guard['state'] == 'missing' and guard['systemd'] == 252 and guard['unit'] == 'aem.service'
    assert [m for m in facts['compliance']['misses'] if m['kind'] == 'start_guard'][0]['unit'] == 'aem.service'
    boot_guard.apply(env.root, boot_guard.plan(env.root, 'aem.service', True, 252),
                     lambda p, t: open(p, 'w').write(t), lambda c, **kw: None, None)
    _result, facts = run({'intent': intent(aem_service='aem.service')})
    assert facts['start_guard']['state'] == 'ok'
    assert not [m for m in facts['compliance']['misses'] if m['kind'] == 'start_guard']
    env.tools.SYSTEMD_VERSION = 219
    os.unlink(os.path.join(env.root, boot_guard.dropin_path('aem.service').lstrip('/')))
    _result, facts = run({'intent': intent(aem_service='aem.service')})
    assert facts['start_guard']['state'] == 'unsupported'
    assert not [m for m in facts['compliance']['misses'] if m['kind'] == 'start_guard']
