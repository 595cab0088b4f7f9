# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's reports, rendered on the controller from aem_tuning_result alone (plugin_utils/aem_reports.py, which the
action aemops.os_tuning.aem_reports calls), and the payload the action builds from the play's host variables.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

from ansible_collections.aemops.os_tuning.plugins.plugin_utils import aem_reports


def reading(kb, thp, profiles):
    """One of the result's readings (tuning_facts' reading.now: compliance.reading)."""
    return {
        'os': {'id': 'rhel', 'version_id': '8.10', 'boot_method': 'grubby'},
        'tuned': {'version': '2.22.1', 'active_profiles': profiles, 'conflicts': 0},
        'paths': {'/srv/aem': 'dm-0'},
        'read_ahead_kb': {'dm-0': kb, 'nvme1n1': kb},
        'devices': {'dm-0': 'lvm', 'nvme1n1': 'nvme'},
        'thp': {'enabled': thp, 'defrag': thp, 'running_cmdline': None},
    }


def full_facts(kb):
    """The full facts of the payload (before.json, after.json), as far as these tests read them."""
    return {'block_devices': {'dm-0': {'type': 'lvm', 'read_ahead_kb': kb, 'set_by': 'tuned throughput-performance [disk]'}},
            'tuned': {'conflicts': []}}


BASE = {
    'schema_version': 2, 'host': 'aem1', 'play': 'Post', 'state': 'present', 'mode': 'apply', 'check_mode': False,
    'started': '2026-12-02T10:00:00Z', 'verified': '2026-12-02T10:03:10Z',
    'targets': ['/srv/aem'], 'devices': {'/dev/disk/by-id/nvme-Amazon_vol0b': 'nvme1n1'}, 'read_ahead_kb': 32,
    'compliant': True, 'lost': None, 'compliant_before': False, 'misses_before_count': 1,
    'misses': [], 'changes': [], 'failed_before_change': False, 'error': '', 'errors': [], 'fact_errors': [],
    'reboot_required': False,
    'reboot': {'requested': 'false', 'required': False, 'done': False, 'boot_id_before': None, 'before': None,
               'boot_id_after': None, 'booted': None, 'after': None, 'elapsed_s': None},
    'aem': None,
    'readers': {'refreshed': [], 'stale': [], 'needs_restart': [], 'unreadable': [],
                'aem_unit': 'aem', 'aem_refreshed': False, 'aem_needs_restart': False, 'aem_restarted': False},
    'error_log': None, 'probe': None, 'auto': False, 'may_sweep': False, 'read_ahead_sweep': {}, 'sweep_failure': None,
    'read_ahead_default': {'kb': 32, 'why': '32 KiB: the default'},
    'tuned_verify': 'passed', 'snapshot_taken': '2026-11-01T09:00:00Z',
    'readings': {'first': reading(4096, 'always', ['virtual-guest']), 'before': reading(4096, 'always', ['virtual-guest']),
                 'after': reading(32, 'never', ['virtual-guest', 'aemops-os-tuning'])},
    'report': '/r/aem1/report.md',
}

APPLIED_WITH_REBOOT = dict(
    BASE,
    changes=[
        {'kind': 'read_ahead', 'devices': ['dm-0', 'nvme1n1']},
        {'kind': 'thp', 'runtime': {'enabled': {'before': 'always', 'after': 'never'}}, 'persist': ['tuned', 'cmdline'],
         'cmdline': None},
        {'kind': 'aem', 'unit': 'aem', 'action': 'stopped'},
        {'kind': 'reboot'},
        {'kind': 'aem', 'unit': 'aem', 'action': 'started'},
    ],
    reboot_required=True,
    reboot={'requested': 'auto', 'required': True, 'done': True, 'boot_id_before': 'b-1',
            'before': '2026-12-02T10:01:00Z', 'boot_id_after': 'b-2', 'booted': '2026-12-02T10:01:40Z',
            'after': '2026-12-02T10:02:05Z', 'elapsed_s': 58},
    aem={'unit': 'aem', 'why': 'reboot', 'stopped': '2026-12-02T10:01:00Z', 'started': '2026-12-02T10:02:06Z',
         'answered': '2026-12-02T10:03:06Z', 'status': 200, 'waited_s': 60.2, 'ok': True,
         'url': 'http://127.0.0.1:4502/libs/granite/core/content/login.html', 'message': 'AEM answered 200'},
    error_log={'path': '/opt/aem/crx-quickstart/logs/error.log', 'since_run': {'commit_blocked': 0, 'checkpoint_failed': 0},
               'total': {'commit_blocked': 17, 'checkpoint_failed': 3}, 'error': None},
)


def run(tmpdir, payload):
    """render(DIR, payload) as the action calls it, on a copy of the payload as plain JSON data (what the action's
    ``plain`` makes of the host variables). Returns (0, what it returned as JSON, '')."""
    written = aem_reports.render(str(tmpdir), json.loads(json.dumps(payload)))
    return 0, json.dumps(written), ''


def read(path):
    with open(str(path)) as f:
        return f.read()


def test_a_reboot_is_reported_with_its_boot_ids_and_times_and_aem_with_its_200(tmpdir):
    rc, out, _err = run(tmpdir, {'results': {'aem1': APPLIED_WITH_REBOOT},
                                 'facts': {'aem1': [full_facts(4096), full_facts(32), None]}})
    assert rc == 0
    text = read(tmpdir.join('aem1', 'report.md'))
    assert 'Reboot required: False' not in text
    assert ('Rebooted (aem_tuning_reboot: auto): boot b-1, before the reboot at 2026-12-02T10:01:00Z, came back as '
            'boot b-2, booted at 2026-12-02T10:01:40Z, boot finished at 2026-12-02T10:02:05Z') in text
    assert ('AEM (aem, reboot): stopped at 2026-12-02T10:01:00Z, started at 2026-12-02T10:02:06Z, answered 200 at '
            '2026-12-02T10:03:06Z') in text
    # error.log counts as a table, not a Python dict
    assert '| This commit is blocked by a commit | 0 | 17 |' in text
    assert '| Failed to create checkpoint | 0 | 3 |' in text
    assert "{'commit_blocked'" not in text
    assert '| /srv/aem | dm-0 | lvm | 4096 | 4096 | 32 | 32 | tuned throughput-performance [disk] |' in text
    assert '| /dev/disk/by-id/nvme-Amazon_vol0b | nvme1n1 | nvme | 4096 | 4096 | 32 | 32 | - |' in text
    assert '| nvme0n1' not in text
    assert '| enabled | always | always | never |' in text
    assert '- set read-ahead: dm-0 4096 -> 32 KiB, nvme1n1 4096 -> 32 KiB' in text
    assert '- set THP: enabled always -> never' in text
    assert '- rebooted (boot b-1 -> b-2)' in text
    assert text.rstrip().endswith('Compliant.')
    written = json.loads(out)['written']
    assert sorted(os.path.relpath(p, str(tmpdir)) for p in written) == [
        'aem1/after.json', 'aem1/before.json', 'aem1/report.md', 'summary.json', 'summary.md']
    assert json.loads(read(tmpdir.join('aem1', 'after.json')))['block_devices']['dm-0']['read_ahead_kb'] == 32


def test_a_refusal_before_any_change_shows_its_message_first(tmpdir):
    refused = dict(BASE, failed_before_change=True, compliant=False, targets=[], devices={}, changes=[],
                   error='nothing was changed: aem_tuning_read_ahead_kb 30 is not a multiple of the page size (4 KiB)',
                   readings={'first': None, 'before': None, 'after': None})
    rc, _out, _err = run(tmpdir, {'results': {'aem1': refused}})
    assert rc == 0
    lines = read(tmpdir.join('aem1', 'report.md')).splitlines()
    assert lines[0] == '# aem1: read-ahead and THP (present, apply mode)'
    assert lines[2] == ('**The run stopped before any change: nothing was changed: aem_tuning_read_ahead_kb 30 is not a '
                        'multiple of the page size (4 KiB)**')
    assert len('\n'.join(lines)) < 1000
    assert 'after its first change' not in '\n'.join(lines)
    summary = read(tmpdir.join('summary.md'))
    assert '| aem1 | present | apply |' in summary and 'FAILED: nothing was changed' in summary


def test_a_failure_on_a_compliant_host_that_changed_nothing_says_so(tmpdir):
    failed = dict(BASE, compliant=False, compliant_before=True, misses_before_count=0, changes=[],
                  error='Wait for AEM: AEM did not come back: aem.service is failed')
    run(tmpdir, {'results': {'aem1': failed}})
    text = read(tmpdir.join('aem1', 'report.md'))
    assert ('**The run failed; it had changed nothing on the host: Wait for AEM: AEM did not come back: aem.service is '
            'failed.** Its tuning was compliant when the run started.') in text
    assert 'after its first change' not in text and 'after it changed' not in text


def test_a_failure_after_changes_names_them_before_the_message(tmpdir):
    failed = dict(APPLIED_WITH_REBOOT, compliant=False, compliant_before=True,
                  error='Wait for AEM: AEM did not come back: aem-dies.service is failed',
                  changes=APPLIED_WITH_REBOOT['changes'][2:],
                  aem=dict(APPLIED_WITH_REBOOT['aem'], ok=False, answered=None, status=None,
                           message='AEM did not come back: aem-dies.service is failed'))
    run(tmpdir, {'results': {'aem1': failed}})
    text = read(tmpdir.join('aem1', 'report.md'))
    assert ('**The run failed after it changed the host (stopped AEM (aem); rebooted (boot b-1 -> b-2); started AEM '
            '(aem)): Wait for AEM: AEM did not come back: aem-dies.service is failed.** Its tuning was compliant when '
            'the run started.') in text
    assert 'did not answer 200: AEM did not come back' in text
    assert 'Compliant.' not in text


def test_check_mode_words_what_would_change(tmpdir):
    checked = dict(APPLIED_WITH_REBOOT, check_mode=True, changes=APPLIED_WITH_REBOOT['changes'][:2])
    run(tmpdir, {'results': {'aem1': checked}})
    text = read(tmpdir.join('aem1', 'report.md'))
    assert '## What this run would change (check mode)' in text
    assert '- would have set read-ahead: dm-0 4096 -> 32 KiB' in text
    # ansible.builtin.reboot says rebooted in check mode, without a reboot
    assert 'Reboot: the run would reboot (aem_tuning_reboot: auto; check mode does not).' in text
    assert 'Rebooted' not in text


def test_the_summary_covers_every_host_and_leaves_out_an_earlier_play(tmpdir):
    other = dict(BASE, host='aem2', play='Pre', misses=['THP: enabled is always, not never'], compliant=False)
    payload = {'results': {'aem1': APPLIED_WITH_REBOOT, 'aem2': other, 'aem3': None}, 'write': ['aem1'], 'play': 'Post'}
    run(tmpdir, payload)
    summary = read(tmpdir.join('summary.md'))
    assert ('| aem1 | present | apply | dm-0 4096 -> 32; nvme1n1 4096 -> 32 | always -> never | virtual-guest '
            'aemops-os-tuning | compliant | 0 refreshed, 0 need a restart | rebooted | 2026-12-02T10:03:10Z |') in summary
    # aem2's result is from another play (migrate-aem.yml's pre, seen from post): not this play's result
    assert '| aem2 | | | | | | no result (the role did not reach its result on this host) | | | |' in summary
    assert '| aem3 | | | | | | no result' in summary
    data = json.loads(read(tmpdir.join('summary.json')))
    assert data['schema_version'] == 1 and sorted(data['hosts']) == ['aem1', 'aem2', 'aem3']
    assert data['hosts']['aem1']['compliant'] is True and data['hosts']['aem1']['rebooted'] is True
    assert data['hosts']['aem2'] is None
    assert sorted(os.listdir(str(tmpdir))) == ['aem1', 'summary.json', 'summary.md']
    # Without a play, every result counts (playbooks/summary.yml, from the fact cache)
    run(tmpdir, {'results': {'aem2': other}, 'write': []})
    assert '| aem2 | present | apply |' in read(tmpdir.join('summary.md'))


def test_the_sweep_chart_is_drawn_or_its_absence_explained(tmpdir):
    sweep = {'source': 'sweep', 'device': 'nvme1n1', 'path': '/srv/aem', 'recommended_kb': 64, 'best_kb': 32,
             'original_kb': 4096, 'restored_kb': 4096, 'why': 'the fewest device bytes within 5%', 'readers': 4,
             'duration': 5, 'tolerance_pct': 5.0, 'sweep': [256, 64, 32], 'within_kb': [32, 64],
             'caps': {'type': 'gp3', 'iops': 3000, 'mib_s': 125.0, 'basis': 'gp3 baseline'},
             'results': [{'read_ahead_kb': 256, 'reads_per_s': 900.0, 'seq_mib_s': 120.0, 'read_amplification': 20.1},
                         {'read_ahead_kb': 64, 'reads_per_s': 2890.0, 'seq_mib_s': 118.0, 'read_amplification': 5.1},
                         {'read_ahead_kb': 32, 'reads_per_s': 2950.4, 'seq_mib_s': 80.0, 'read_amplification': 2.7}]}
    # The result carries the sweep without its rows; the payload's facts bring them (tasks/report.yml).
    result = dict(BASE, auto=True, may_sweep=True, read_ahead_kb=64,
                  read_ahead_sweep=dict((k, v) for k, v in sweep.items() if k != 'results'))
    rc, out, _err = run(tmpdir, {'results': {'aem1': result}, 'facts': {'aem1': [{}, {}, sweep]}})
    assert rc == 0
    text = read(tmpdir.join('aem1', 'report.md'))
    assert '## Read-ahead: auto' in text
    assert '**64 KiB**, chosen by the sweep of nvme1n1 (/srv/aem) in this run' in text
    assert '| 64 | 2890.0 | 5.1x | ? | ? | ? | ? | 118.0 | ? | chosen |' in text
    assert json.loads(read(tmpdir.join('aem1', 'after.json')))['read_ahead_sweep']['recommended_kb'] == 64
    try:
        import matplotlib  # noqa: F401  pylint: disable=unused-import
    except ImportError:
        assert 'Chart: matplotlib is not importable on the controller' in text
        assert not tmpdir.join('aem1', 'sweep.png').exists()
    else:
        assert '![read-ahead sweep of aem1](sweep.png)' in text
        assert tmpdir.join('aem1', 'sweep.png').size() > 1000
        assert json.loads(out)['charts']['aem1'].endswith('sweep.png')


def test_the_reports_depend_on_nothing_but_the_payload(tmpdir):
    """A stale file from an earlier run is replaced, not read."""
    tmpdir.join('aem1').ensure(dir=True)
    tmpdir.join('aem1', 'report.md').write('stale')
    tmpdir.join('summary.md').write('stale')
    run(tmpdir, {'results': {'aem1': copy.deepcopy(BASE)}})
    assert 'stale' not in read(tmpdir.join('aem1', 'report.md'))
    assert 'stale' not in read(tmpdir.join('summary.md'))
    assert [p.basename for p in tmpdir.join('aem1').listdir() if p.basename.startswith('.')] == []


def aem_reader(why, reason):
    return {'pid': 4242, 'comm': 'java', 'unit': 'aem.service', 'start': '2026-12-02T06:00:00Z', 'count': 3,
            'why': why, 'reason': reason}


def test_the_readers_say_why_a_restart_is_needed_and_whether_aem_is_among_them(tmpdir):
    """Issue 35: on a kernel without pidfd_getfd AEM needs a restart, and the report says so, never 'not among them'."""
    no_pidfd = dict(BASE, compliant=False, readers=dict(
        BASE['readers'], aem_needs_restart=True, kernel_refresh=False,
        needs_restart=[aem_reader(['no_pidfd_getfd'], 'this kernel has no pidfd_getfd(2)')]))
    stale = dict(BASE, compliant=False, readers=dict(
        BASE['readers'], stale=[aem_reader(None, 'holds 3 file(s) opened at an earlier read-ahead')]))
    rc, _out, _err = run(tmpdir, {'results': {'aem1': no_pidfd, 'aem2': dict(stale, host='aem2')}})
    assert rc == 0
    text = read(tmpdir.join('aem1', 'report.md'))
    assert '| 4242 | java | aem.service | 2026-12-02T06:00:00Z | 3 | - | needs a restart (no_pidfd_getfd): ' in text
    assert 'This kernel has no pidfd_getfd(2) (RHEL 7 and RHEL 8 kernels lack it)' in text
    assert "AEM's unit aem: needs a restart (set aem_tuning_restart_stale_aem: true" in text
    text = read(tmpdir.join('aem2', 'report.md'))
    assert "AEM's unit aem: still stale: an apply run refreshes it in place." in text
    assert 'not among them' not in text


def test_aems_row_gives_its_own_kib_per_major_fault_before_and_after_the_refresh(tmpdir):
    """Issue 39: the refresh proves itself in the process: measured before, and again after read_ahead."""
    refreshed = dict(aem_reader(None, None), basis='measured', why=None,
                     measured={'kib_per_fault': 3893.4, 'faults': 57, 'seconds': 3.0, 'read_kib': 221924, 'rchar_kib': 0},
                     measured_after={'kib_per_fault': 32.1, 'faults': 61, 'seconds': 3.0, 'read_kib': 1958, 'rchar_kib': 0})
    idle = dict(aem_reader(['no_pidfd_getfd'], 'this kernel has no pidfd_getfd(2)'), basis='inferred', measured=None)
    r1 = dict(BASE, readers=dict(BASE['readers'], refreshed=[refreshed], aem_refreshed=True))
    r2 = dict(BASE, compliant=False, readers=dict(BASE['readers'], needs_restart=[idle], aem_needs_restart=True))
    rc, _out, _err = run(tmpdir, {'results': {'aem1': r1, 'aem2': dict(r2, host='aem2')}})
    assert rc == 0
    assert '| 3 | 3893.4 -> 32.1 | refreshed in place |' in read(tmpdir.join('aem1', 'report.md'))
    assert '| 3 | not measured | needs a restart (no_pidfd_getfd)' in read(tmpdir.join('aem2', 'report.md'))


# ---------------------------------------------------------------------------------------------
# EBS's own statistics (result.ebs), from pages built by the layout through module_utils/ebs_stats.py

def _ebs_window(device, first, second, seconds):
    from ansible_collections.aemops.os_tuning.plugins.module_utils import ebs_stats
    from fakehost import ebs_page
    pages = [{'device': device, 'volume_id': 'vol-0123456789abcdef0', 'stats': ebs_stats.parse_page(ebs_page(*p))}
             for p in (first, second)]
    return ebs_stats.window(pages[0], pages[1], seconds)


def ebs_result():
    """Before the change (4096 KiB read-ahead) the volume read 250 MiB/s and sat at its throughput cap for 41 of
    60 seconds; after (32 KiB), 20 MiB/s and no cap."""
    bins = [(0, 1000, 0), (1000, 2000, 0), (2000, 8000, 0)]
    before = _ebs_window('nvme1n1', ({'total_read_ops': 0}, bins),
                         ({'total_read_ops': 3000, 'total_read_bytes': 250 * 1048576 * 60, 'total_read_time': 3000 * 6000,
                           'ebs_volume_performance_exceeded_tp': 41 * 10 ** 6},
                          [(0, 1000, 0), (1000, 2000, 100), (2000, 8000, 2900)]), 60)
    after = _ebs_window('nvme1n1', ({'total_read_ops': 3000}, bins),
                        ({'total_read_ops': 6000, 'total_read_bytes': 20 * 1048576 * 30, 'total_read_time': 3000 * 800},
                         [(0, 1000, 2990), (1000, 2000, 10), (2000, 8000, 0)]), 30)
    qemu = {'device': 'nvme0n1', 'volume_id': None, 'reason': 'no EBS statistics: not an EBS volume (model QEMU NVMe Ctrl)'}
    return dict(BASE, probe={'before': {'read_amplification': 128.0}, 'after': {'read_amplification': 1.0}},
                ebs=[{'device': 'nvme1n1', 'before': before, 'after': after},
                     {'device': 'nvme0n1', 'before': qemu, 'after': qemu}])


def test_the_report_gives_each_ebs_volumes_caps_before_and_after_from_its_own_pages(tmpdir):
    rc, _out, err = run(tmpdir, {'results': {'aem1': ebs_result()}})
    assert rc == 0, err
    text = read(tmpdir.join('aem1', 'report.md'))
    assert ("| EBS volume nvme1n1 (vol-0123456789abcdef0), its own statistics over io_probe's reads | before | after |"
            in text)
    assert "| at the volume's throughput cap, s per minute | 41.0 | 0.0 |" in text
    assert "| at the instance's EBS IOPS cap, s per minute | 0.0 | 0.0 |" in text
    assert '| read MiB/s | 250.0 | 20.0 |' in text
    assert '| read IOPS | 50.0 | 100.0 |' in text
    assert "| read latency mean / p99 (histogram bin's upper bound), ms | 6.0 / 8.0 | 0.8 / 1.0 |" in text
    assert 'Before: the volume sat at its throughput cap for 41 of 60 seconds.' in text
    assert 'After: no cap bound: neither the volume nor the instance reached its IOPS or throughput cap.' in text
    assert 'EBS volume nvme0n1: no EBS statistics: not an EBS volume (model QEMU NVMe Ctrl).' in text


def test_the_report_says_why_there_are_no_ebs_statistics_and_nothing_without_a_probe(tmpdir):
    rc, _out, _err = run(tmpdir, {'results': {'aem1': dict(ebs_result(), ebs=[]), 'aem2': dict(BASE, ebs=[]),
                                              'aem3': dict(ebs_result(), ebs=[{'device': 'x', 'before': None}, 7])}})
    assert rc == 0
    assert ('no EBS statistics: no NVMe device beneath the probed path or among the devices tuned'
            in read(tmpdir.join('aem1', 'report.md')))
    assert 'EBS' not in read(tmpdir.join('aem2', 'report.md'))
    assert 'EBS volume x: no EBS statistics.' in read(tmpdir.join('aem3', 'report.md'))


LOST = dict(
    APPLIED_WITH_REBOOT, compliant=False, compliant_before=True,
    changes=APPLIED_WITH_REBOOT['changes'][:3] + [{'kind': 'reboot'}],
    error='Reboot and wait for the host to come back, at most seconds 600: Timed out waiting for last boot time check',
    lost={'step': 'reboot', 'task': 'Reboot and wait for the host to come back, at most seconds 600',
          'at': '2026-12-02T10:11:02Z', 'since': '2026-12-02T10:01:00Z',
          'message': 'Timed out waiting for last boot time check (timeout=600)'},
    reboot=dict(APPLIED_WITH_REBOOT['reboot'], done=False, boot_id_after=None, booted=None, after=None),
    aem=None, verified=None, readings=dict(BASE['readings'], after=None))


def test_a_host_lost_at_the_reboot_has_its_report_its_summary_line_and_its_own_count(tmpdir):
    payload = {'results': {'aem1': LOST, 'aem2': BASE, 'aem3': dict(BASE, misses=['THP: always'], compliant=False),
                           'aem4': dict(BASE, error='Apply: failed', compliant=False), 'aem5': None},
               'facts': {'aem1': [full_facts(4096), {}, None]}}
    rc, _out, _err = run(tmpdir, payload)
    assert rc == 0
    text = read(tmpdir.join('aem1', 'report.md'))
    assert text.splitlines()[2].startswith(
        '**The host did not come back after the reboot at 2026-12-02T10:01:00Z: Reboot and wait for the host')
    assert 'The run had changed: set read-ahead: dm-0 4096 -> 32 KiB' in text
    assert '| /srv/aem | dm-0 | lvm | 4096 | 4096 | ? | 32 |' in text
    assert 'Compliant.' not in text
    assert json.loads(read(tmpdir.join('aem1', 'after.json'))) == {}
    summary = read(tmpdir.join('summary.md'))
    assert '5 hosts: 1 compliant, 1 not compliant, 1 failed, 1 lost, 1 no result.' in summary
    assert ('- aem1 did not come back after the reboot at 2026-12-02T10:01:00Z: Timed out waiting for last boot time '
            'check (timeout=600)') in summary
    assert '| LOST: did not come back after the reboot at 2026-12-02T10:01:00Z:' in summary
    assert '| issued, not back |' in summary
    data = json.loads(read(tmpdir.join('summary.json')))
    assert data['counts'] == {'compliant': 1, 'not compliant': 1, 'failed': 1, 'lost': 1, 'no result': 1}
    assert data['hosts']['aem1']['verdict'] == 'lost' and data['hosts']['aem1']['lost']['step'] == 'reboot'


def test_without_facts_the_report_is_written_from_the_result_alone(tmpdir):
    """playbooks/summary.yml: the fact cache has the results, not the full facts."""
    rc, out, _err = run(tmpdir, {'results': {'aem1': APPLIED_WITH_REBOOT}, 'write': ['aem1']})
    assert rc == 0
    assert sorted(os.path.relpath(p, str(tmpdir)) for p in json.loads(out)['written']) == [
        'aem1/report.md', 'summary.json', 'summary.md']
    assert '| /srv/aem | dm-0 | lvm | 4096 | 4096 | 32 | 32 |' in read(tmpdir.join('aem1', 'report.md'))


def test_the_result_lists_the_first_misses_and_the_report_every_one(tmpdir):
    many = ['dev%d: reads 4096 KiB, not 32' % i for i in range(14)]
    r = dict(BASE, compliant=False, misses=many[:6], misses_count=14)
    facts_after = dict(full_facts(4096), compliance={'misses': [{'subject': 'dev%d' % i, 'message': 'reads 4096 KiB, not 32'}
                                                                for i in range(14)]})
    # With the run's full facts (tasks/report.yml): every miss.
    run(tmpdir.join('a'), {'results': {'aem1': r}, 'facts': {'aem1': [full_facts(4096), facts_after, None]}})
    text = read(tmpdir.join('a', 'aem1', 'report.md'))
    assert '- dev13: reads 4096 KiB, not 32' in text and 'more (not kept' not in text
    summary = json.loads(read(tmpdir.join('a', 'summary.json')))['hosts']['aem1']
    assert summary['outcome'] == '14 misses' and summary['misses_count'] == 14 and summary['verdict'] == 'not compliant'
    # From the result alone (the fact cache's summary): the first 6, and how many more.
    run(tmpdir.join('b'), {'results': {'aem1': r}})
    text = read(tmpdir.join('b', 'aem1', 'report.md'))
    assert '- dev5: reads 4096 KiB, not 32' in text and '- dev6:' not in text
    assert '- and 8 more (not kept in the result; the report written with the run lists them all)' in text


# ---------------------------------------------------------------------------------------------
# Misses as data (schema 3) and as text (schema 2, an older run's result in the fact cache)

def miss(subject, message, kind='read_ahead', unit=None, deferred=False):
    return {'kind': kind, 'subject': subject, 'message': message, 'unit': unit, 'deferred': deferred}


V3_MISSES = [miss('THP', 'enabled is always, not never', kind='thp'),
             miss('pid 4242 (java, aem.service)', 'holds 3 file(s) opened at 4096 KiB', kind='reader', unit='aem.service',
                  deferred=True)]
V2_MISSES = ['THP: enabled is always, not never', 'pid 4242 (java, aem.service): holds 3 file(s) opened at 4096 KiB']


def test_a_miss_reads_the_same_whether_data_or_text(tmpdir):
    """Schema 3 keeps each miss as a mapping; the report and the summary word it as schema 2's string did."""
    v3 = dict(BASE, schema_version=3, compliant=False, misses=V3_MISSES, misses_count=2, misses_failing_count=1)
    v2 = dict(BASE, compliant=False, misses=V2_MISSES, misses_count=2)
    run(tmpdir.join('v3'), {'results': {'aem1': v3}})
    run(tmpdir.join('v2'), {'results': {'aem1': v2}})
    text = read(tmpdir.join('v3', 'aem1', 'report.md'))
    assert text == read(tmpdir.join('v2', 'aem1', 'report.md'))
    assert ('Not compliant:\n- THP: enabled is always, not never\n'
            '- pid 4242 (java, aem.service): holds 3 file(s) opened at 4096 KiB\n') in text
    assert "{'kind'" not in text and '"kind"' not in text
    assert read(tmpdir.join('v3', 'summary.md')) == read(tmpdir.join('v2', 'summary.md'))
    assert json.loads(read(tmpdir.join('v3', 'summary.json')))['hosts']['aem1']['misses'] == V2_MISSES


def test_the_summary_from_a_cache_of_v2_and_v3_results_words_both(tmpdir):
    """The fact cache may hold an older run's schema 2 result next to a schema 3 one."""
    hostvars = {'aem1': {'ansible_facts': {'aem_tuning_result': dict(BASE, compliant=False, misses=V2_MISSES[:1])}},
                'aem2': {'ansible_facts': {'aem_tuning_result': dict(BASE, host='aem2', schema_version=3, compliant=False,
                                                                     misses=V3_MISSES, misses_count=2,
                                                                     misses_failing_count=1)}}}
    payload = aem_reports.cache_payload(hostvars, ['aem1', 'aem2'], True)
    rc, _out, _err = run(tmpdir, payload)
    assert rc == 0
    hosts = json.loads(read(tmpdir.join('summary.json')))['hosts']
    assert hosts['aem1']['misses'] == ['THP: enabled is always, not never'] and hosts['aem1']['outcome'] == '1 miss'
    assert hosts['aem2']['misses'] == V2_MISSES and hosts['aem2']['outcome'] == '2 misses'
    assert '- THP: enabled is always, not never' in read(tmpdir.join('aem1', 'report.md'))
    assert '- pid 4242 (java, aem.service): holds 3 file(s)' in read(tmpdir.join('aem2', 'report.md'))


def test_aem_is_its_unit_with_or_without_service_and_other_readers_are_named_one_way(tmpdir):
    """module_utils/aem.py's rule: the managed unit named with its .service suffix still finds AEM's stale reader."""
    readers = dict(BASE['readers'], aem_unit='aem.service',
                   stale=[aem_reader(None, 'holds 3 file(s) opened at an earlier read-ahead')],
                   refreshed=[dict(aem_reader(None, None), pid=7, comm='cat', unit=None),
                              dict(aem_reader(None, None), pid=8, comm='java', unit='aem')])
    run(tmpdir, {'results': {'aem1': dict(BASE, readers=readers)}})
    text = read(tmpdir.join('aem1', 'report.md'))
    assert "AEM's unit aem.service: still stale: an apply run refreshes it in place." in text
    assert text.count('pid 7 (cat)') == 1 and 'pid 8' not in text


# ---------------------------------------------------------------------------------------------
# The payload the action builds from the play's host variables (plugins/action/aem_reports.py)

class Lazy(object):
    """A mapping that is not a dict, like ansible-core's host variables and lazily templated containers."""

    def __init__(self, data):
        self._data = data

    def get(self, key, default=None):
        return self._data.get(key, default)

    def items(self):
        return self._data.items()


class Tagged(type(u'')):
    """A string subclass, like ansible-core's unsafe or tagged strings."""


def test_the_play_payload_has_every_hosts_result_and_facts_and_writes_the_batch():
    evidence = {'results': [{'read_ahead_kb': 64}]}
    hostvars = Lazy({
        'aem1': Lazy({'aem_tuning_result': Lazy({'host': Tagged(u'aem1'), 'misses': (Tagged(u'a: b'),)}),
                      '__aem_tuning_before': {'os': {'id': 'rhel'}}, '__aem_tuning_after': {'os': {'id': 'rhel'}},
                      '__aem_tuning_choice': {'evidence': evidence}}),
        'aem2': Lazy({'__aem_tuning_choice': None}),
    })
    payload = aem_reports.play_payload(hostvars, ['aem1', 'aem2', 'aem3'], ['aem1'], 'Post')
    assert payload == {
        'results': {'aem1': {'host': 'aem1', 'misses': ['a: b']}, 'aem2': None, 'aem3': None},
        'facts': {'aem1': [{'os': {'id': 'rhel'}}, {'os': {'id': 'rhel'}}, evidence], 'aem2': [{}, {}, None],
                  'aem3': [{}, {}, None]},
        'write': ['aem1'], 'play': 'Post', 'chart': True}
    # plain JSON data, whatever the controller's container types
    assert isinstance(payload['results']['aem1'], dict) and not isinstance(payload['results']['aem1']['host'], Tagged)
    assert json.loads(json.dumps(payload)) == payload


def test_the_cache_payload_has_the_cached_results_and_writes_host_reports_on_request():
    hostvars = {'aem1': {'ansible_facts': {'aem_tuning_result': {'host': 'aem1'}}}, 'aem2': {'ansible_facts': {}},
                'aem3': {}}
    payload = aem_reports.cache_payload(hostvars, ['aem1', 'aem2', 'aem3'], False)
    assert payload == {'results': {'aem1': {'host': 'aem1'}, 'aem2': None, 'aem3': None}, 'write': [], 'chart': False,
                       'title': 'from the fact cache'}
    assert aem_reports.cache_payload(hostvars, ['aem1'], True)['write'] == ['aem1']


def test_a_reader_as_the_result_keeps_it_reads_the_same_in_the_report(tmpdir):
    """The result keeps a reader's codes and figures, not its words (plugin_utils/role_result.reader_brief): the
    report words the codes and gives the figures."""
    from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result
    facts_reader = dict(aem_reader(['no_pidfd_getfd'], 'this kernel has no pidfd_getfd(2)'), basis='measured',
                        measured={'kib_per_fault': 3745.7, 'faults': 57, 'seconds': 3.0, 'read_kib': 1, 'rchar_kib': 0})
    brief = role_result.reader_brief(facts_reader)
    assert 'reason' not in brief and brief['kib_per_fault'] == 3745.7 and brief['basis'] == 'measured'
    r = dict(BASE, compliant=False, readers=dict(BASE['readers'], needs_restart=[brief], aem_needs_restart=True))
    rc, _out, _err = run(tmpdir, {'results': {'aem1': r}})
    assert rc == 0
    assert ('| 3 | 3745.7 | needs a restart (no_pidfd_getfd): this kernel has no pidfd_getfd(2) (Linux 5.6 and later; '
            'RHEL 7 and RHEL 8 kernels lack it), so its 3 open file(s) cannot be refreshed in place |') in read(
                tmpdir.join('aem1', 'report.md'))


def test_the_report_says_whether_aems_start_guard_is_in_place(tmpdir):
    guard = {'unit': 'aem.service', 'path': '/etc/systemd/system/aem.service.d/90-aemops-read-ahead.conf',
             'state': 'missing', 'problem': '/etc/systemd/system/aem.service.d/90-aemops-read-ahead.conf is not '
             'installed', 'systemd': 252}
    for state, words in (('ok', 'Start guard of aem.service: in place: AEM opens its files at the persisted '
                                'read-ahead after every boot.'),
                         ('missing', 'Start guard of aem.service: missing (/etc/systemd/system/aem.service.d/'
                                     '90-aemops-read-ahead.conf is not installed).'),
                         ('unsupported', 'Start guard of aem.service: not installed (systemd 252 has no "+" prefix).')):
        facts_after = dict(full_facts(32), start_guard=dict(guard, state=state))
        run(tmpdir.join(state), {'results': {'aem1': BASE}, 'facts': {'aem1': [full_facts(4096), facts_after, None]}})
        assert words in read(tmpdir.join(state, 'aem1', 'report.md')), state
    run(tmpdir.join('none'), {'results': {'aem1': BASE}, 'facts': {'aem1': [full_facts(4096), full_facts(32), None]}})
    assert 'Start guard' not in read(tmpdir.join('none', 'aem1', 'report.md'))
