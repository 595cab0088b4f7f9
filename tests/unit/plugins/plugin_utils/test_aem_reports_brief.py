# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's two summaries in the play's output (plugin_utils/aem_reports.py: ``summary_before_lines``, the filter
aemops.os_tuning.summary_before in before.yml; ``result_brief_lines``, aemops.os_tuning.result_brief in report.yml).

They replaced the templates summary_before.j2 and result_brief.j2 and read as they did (checked against the
templates rendered by ansible-core 2.16, 2.19 and 2.21's template lookup over ``SUMMARY_CASES`` and ``RESULT_CASES``
before the templates went): the same lines in the same order, a value as Ansible's Jinja wrote it (None as nothing
alone, as "None" joined to words or formatted).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.aemops.os_tuning.plugins.filter.aem_tuning import FilterModule
from ansible_collections.aemops.os_tuning.plugins.plugin_utils import aem_reports

REPO = '/srv/aem/crx-quickstart/repository'
VOLUME = '/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0b'
UNEXPLAINED = 'not explained (another udev rule, lvm2, rc.local or by hand)'

# tuning_facts' facts before any change, as far as the summary reads them.
FACTS = {
    'os': {'id': 'rhel', 'version_id': '8.10'},
    'tuned': {'version': '2.22.1', 'active_profiles': ['virtual-guest', 'aemops-os-tuning']},
    'thp': {'runtime': {'enabled': {'value': 'always', 'offered': ['always', 'madvise', 'never']}}},
    'paths': {REPO: {'device': 'dm-0'}},
    'block_devices': {'dm-0': {'type': 'lvm', 'read_ahead_kb': 4096, 'set_by': 'udev rule 60-persistent-storage.rules'},
                      'nvme1n1': {'type': 'disk', 'read_ahead_kb': 128}},
    'conflicts': [],
}
# The lookup aemops.os_tuning.aem_tuning 'steps' at before.yml's summary, as far as the summary reads them.
STEPS = {
    'before': FACTS, 'targets': [REPO], 'device_names': {VOLUME: 'nvme1n1'},
    'choice': {'kb': 32, 'source': 'default', 'why': '32 KiB: the default for a 4 KiB page'},
    'settings': {'host': 'aem1', 'state': 'present', 'thp': 'never', 'sweep_duration': 5},
}


def steps(**changes):
    out = copy.deepcopy(STEPS)
    out.update(changes)
    return out


def facts(**changes):
    out = copy.deepcopy(FACTS)
    out.update(changes)
    return out


SWEEP = {'kb': None, 'sweep': True, 'knobs': {'values': [32, 128, 512]}, 'source': 'sweep',
         'why': 'auto: no sweep result recorded on the host'}
SUMMARY_CASES = {
    'value': STEPS,
    'auto_no_devices': steps(choice={'kb': None, 'source': 'default', 'why': 'auto'}, device_names={}),
    'absent': steps(settings=dict(STEPS['settings'], state='absent'), choice={'kb': None}),
    'sweep': steps(choice=SWEEP, settings=dict(STEPS['settings'], sweep_duration='6')),
    'sweep_no_target': steps(choice=dict(SWEEP, knobs={'values': [64]}), targets=[], device_names={}),
    'recorded': steps(choice={'kb': 128, 'source': 'recorded', 'why': '128 KiB: recorded by the sweep at 2026-11-30T08:00:00Z'}),
    'conflicts': steps(before=facts(conflicts=[
        {'source': 'udev rule', 'file': '/etc/udev/rules.d/99-ra.rules', 'line': 3, 'text': 'ATTR{bdi/read_ahead_kb}="4096"'},
        {'source': 'rc.local', 'file': '/etc/rc.d/rc.local', 'line': 12, 'text': 'blockdev --setra 8192 /dev/nvme1n1'}])),
    'unknown_device': steps(device_names={VOLUME: 'nvme9n1'}, before=facts(
        block_devices={'dm-0': {'type': 'lvm', 'read_ahead_kb': 4096, 'set_by': None}})),
    'bare_host': steps(before=facts(os={'id': None, 'version_id': None}, tuned={'version': None, 'active_profiles': []},
                                    thp={'runtime': None, 'error': 'unreadable'})),
    'nones': steps(device_names={}, choice={'kb': 64, 'source': 'recorded', 'why': None},
                   settings=dict(STEPS['settings'], thp=None),
                   before=facts(block_devices={'dm-0': {'type': None, 'read_ahead_kb': None, 'set_by': ''}},
                                thp={'runtime': {'enabled': {'value': None}}},
                                conflicts=[{'source': 'rc.local', 'file': '/etc/rc.d/rc.local', 'line': None, 'text': None}])),
}

READING = {'paths': {REPO: 'dm-0'}, 'read_ahead_kb': {'dm-0': 4096, 'nvme1n1': 4096}, 'thp': {'enabled': 'always'}}
# aem_tuning_result (schema 3), as far as the brief reads it.
RESULT = {
    'schema_version': 3, 'host': 'aem1', 'state': 'present', 'mode': 'apply', 'check_mode': False,
    'targets': [REPO], 'devices': {VOLUME: 'nvme1n1'}, 'compliant': True, 'lost': None,
    'misses': [], 'misses_count': 0, 'changes': [], 'failed_before_change': False, 'error': '',
    'reboot_required': False, 'reboot': {'done': False, 'boot_id_before': None, 'boot_id_after': None, 'after': None},
    'aem': None, 'tuned_verify': 'passed',
    'readings': {'first': None, 'before': READING,
                 'after': {'paths': {REPO: 'dm-0'}, 'read_ahead_kb': {'dm-0': 32, 'nvme1n1': 32}, 'thp': {'enabled': 'never'}}},
    'report': '/r/aem1/report.md',
}
CHANGES = [{'kind': 'read_ahead', 'devices': ['dm-0', 'nvme1n1']}, {'kind': 'thp'}]
REBOOTED = {'done': True, 'boot_id_before': 'b-1', 'boot_id_after': 'b-2', 'after': '2026-12-02T10:02:05Z'}
AEM = {'unit': 'aem', 'stopped': '2026-12-02T10:01:00Z', 'started': '2026-12-02T10:02:06Z',
       'answered': '2026-12-02T10:03:06Z', 'status': 200, 'ok': True}
MISSES = [{'kind': 'read_ahead', 'subject': 'dm-0', 'message': 'read-ahead 4096 KiB, wanted 32'},
          {'kind': 'reader_restart', 'subject': 'java (pid 812, aem)', 'message': 'maps files at 4096 KiB', 'unit': 'aem',
           'deferred': True},
          {'kind': 'thp', 'subject': 'THP', 'message': 'enabled always, wanted never', 'deferred': False}]


def result(**changes):
    out = copy.deepcopy(RESULT)
    out.update(changes)
    return out


RESULT_CASES = {
    'compliant': RESULT,
    'changed': result(changes=CHANGES, reboot=REBOOTED, reboot_required=True, aem=AEM),
    'check_mode': result(check_mode=True, compliant=False, changes=CHANGES, reboot_required=True, misses=MISSES[:1],
                         misses_count=1, report=''),
    'not_compliant_more': result(compliant=False, misses=MISSES, misses_count=5),
    'schema_2': result(schema_version=2, compliant=False, misses=['dm-0: read-ahead 4096 KiB, wanted 32'], report=None),
    'failed_before_change': result(failed_before_change=True, compliant=False, targets=[], devices={},
                                   error='aem_tuning_read_ahead_kb 30 is not a multiple of the page size (4 KiB)',
                                   readings={'first': None, 'before': None, 'after': None}),
    'failed_after_changes': result(compliant=False, changes=CHANGES, aem=dict(AEM, ok=False, answered=None, status=None),
                                   error='Wait for AEM: AEM did not come back'),
    'failed_nothing_changed': result(compliant=False, error='Install tuned: no package tuned available\n  (dnf: exit 1)  '),
    'lost_at_reboot': result(compliant=False, changes=CHANGES, error='Reboot: timed out',
                             lost={'step': 'reboot', 'at': '2026-12-02T10:21:00Z', 'since': '2026-12-02T10:01:00Z'},
                             readings={'first': None, 'before': READING, 'after': None}),
    'lost_at_reboot_no_clock': result(compliant=False, error='Reboot: timed out',
                                      lost={'step': 'reboot', 'at': '2026-12-02T10:21:00Z', 'since': None}),
    'lost_in_verify': result(compliant=False, error='Reapply read-ahead: unreachable', devices={VOLUME: 'nvme2n1'},
                             targets=[REPO, '/srv/other'],
                             lost={'step': 'verify', 'at': '2026-12-02T10:05:00Z', 'since': None},
                             readings={'first': None, 'before': dict(READING, thp={}), 'after': {'thp': None}}),
    'lost_unclocked': result(compliant=False, error=None, lost={'step': 'reboot', 'at': None, 'since': None}),
    'lost_in_verify_unclocked': result(compliant=False, error='unreachable', lost={'step': 'verify', 'at': None}),
    'nones': result(compliant=False, state=None, changes=CHANGES, targets=[REPO, '/srv/two'], devices={},
                    reboot={'done': True, 'boot_id_before': None, 'boot_id_after': 'b-2', 'after': None},
                    aem=dict(AEM, stopped=None, status=None), tuned_verify=None, report='',
                    misses=[{'subject': None, 'message': 'read-ahead unknown'}, None], misses_count=2,
                    readings={'first': None, 'before': {'paths': {'/srv/two': 'dm-0'}, 'read_ahead_kb': {'dm-0': None},
                                                        'thp': {'enabled': None}},
                              'after': {'paths': {REPO: None}, 'thp': {'enabled': 'never'}}}),
}


def lines_of(name):
    return aem_reports.summary_before_lines(SUMMARY_CASES[name])


def brief_of(name):
    return aem_reports.result_brief_lines(RESULT_CASES[name])


# -- before.yml's summary ------------------------------------------------------------------------------------------


def test_the_summary_names_the_host_its_tuned_and_thp_then_a_row_per_target_and_device():
    assert lines_of('value') == [
        'aem1: rhel 8.10, tuned 2.22.1 (virtual-guest aemops-os-tuning), THP always -> never',
        'target                                     device     layer   now KiB -> KiB    set by',
        '/srv/aem/crx-quickstart/repository         dm-0       lvm        4096 -> 32     udev rule 60-persistent-storage.rules',
        '/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0b nvme1n1    disk        128 -> 32     ' + UNEXPLAINED,
        '',
    ]


def test_the_summary_says_auto_until_a_sweep_chooses_and_baseline_for_a_backout():
    assert [line.split()[5] for line in lines_of('auto_no_devices')[2:-1]] == ['auto']
    assert [line.split()[5] for line in lines_of('absent')[2:-1]] == ['baseline', 'baseline']


def test_the_summary_of_a_sweep_names_its_values_device_and_time():
    assert lines_of('sweep')[-2] == (
        'read-ahead auto: next, the sweep measures 32, 128, 512 KiB on the live device of %s (about 36 s, the original '
        'restored), then the role applies the value it recommends: auto: no sweep result recorded on the host' % REPO)
    # 1 value x 2 phases x 5 s; no target: '?'
    assert 'measures 64 KiB on the live device of ? (about 10 s,' in lines_of('sweep_no_target')[-2]
    assert lines_of('sweep_no_target')[1:] == [lines_of('value')[1], lines_of('sweep_no_target')[-2], '']


def test_the_summary_of_a_recorded_sweep_result_says_why():
    assert lines_of('recorded')[-2] == 'read-ahead 128 KiB: recorded by the sweep at 2026-11-30T08:00:00Z'
    assert len(lines_of('recorded')) == len(lines_of('value')) + 1


def test_the_summary_lists_the_conflicting_rules_and_lines_last():
    assert lines_of('conflicts')[-3:] == [
        'conflict: udev rule /etc/udev/rules.d/99-ra.rules:3: ATTR{bdi/read_ahead_kb}="4096"',
        'conflict: rc.local /etc/rc.d/rc.local:12: blockdev --setra 8192 /dev/nvme1n1',
        '',
    ]


def test_the_summary_marks_a_device_it_has_no_facts_of_and_a_value_nothing_explains():
    rows = lines_of('unknown_device')[2:4]
    assert rows[0].endswith('4096 -> 32     ' + UNEXPLAINED)
    assert rows[1] == '%-42s %-10s %-6s %8s -> %-6s %s' % (VOLUME, 'nvme9n1', '?', '?', 32, UNEXPLAINED)


def test_the_summary_of_a_host_without_tuned_or_thp_readings():
    assert lines_of('bare_host')[0] == 'aem1:  , tuned not installed (no profile), THP n/a -> never'


def test_the_summary_writes_none_as_jinja_did_nothing_alone_and_none_when_formatted():
    assert lines_of('nones') == [
        'aem1: rhel 8.10, tuned 2.22.1 (virtual-guest aemops-os-tuning), THP  -> ',
        lines_of('value')[1],
        '%-42s %-10s %-6s %8s -> %-6s %s' % (REPO, 'dm-0', 'None', 'None', 64, UNEXPLAINED),
        'read-ahead ',
        'conflict: rc.local /etc/rc.d/rc.local:: ',
        '',
    ]


# -- report.yml's brief of the result ------------------------------------------------------------------------------


def test_a_compliant_run_that_changed_nothing():
    assert brief_of('compliant') == [
        'aem1: compliant (present, apply mode), nothing changed',
        '  %s (dm-0): 4096 -> 32 KiB' % REPO,
        '  %s (nvme1n1): 4096 -> 32 KiB' % VOLUME,
        '  THP always -> never; tuned-adm verify: passed',
        '  report: /r/aem1/report.md',
    ]


def test_a_run_with_changes_a_reboot_and_aem_answering():
    assert brief_of('changed') == [
        'aem1: compliant (present, apply mode), 2 change(s)',
        '  %s (dm-0): 4096 -> 32 KiB' % REPO,
        '  %s (nvme1n1): 4096 -> 32 KiB' % VOLUME,
        '  THP always -> never; tuned-adm verify: passed',
        '  rebooted: boot b-1 -> b-2, boot finished 2026-12-02T10:02:05Z',
        '  AEM aem: stopped 2026-12-02T10:01:00Z, started 2026-12-02T10:02:06Z, answered 200 at 2026-12-02T10:03:06Z',
        '  report: /r/aem1/report.md',
    ]


def test_check_mode_says_what_it_would_make_and_a_reboot_required():
    brief = brief_of('check_mode')
    assert brief[0] == 'aem1: not compliant (present, apply mode, check mode), 2 change(s) it would make'
    assert brief[-2:] == ['  reboot required (the kernel command line changed)', '  miss: dm-0: read-ahead 4096 KiB, wanted 32']


def test_the_misses_with_the_deferred_and_how_many_more():
    assert brief_of('not_compliant_more')[0] == 'aem1: not compliant (present, apply mode), nothing changed'
    assert brief_of('not_compliant_more')[-5:] == [
        '  miss: dm-0: read-ahead 4096 KiB, wanted 32',
        '  miss: java (pid 812, aem): maps files at 4096 KiB (deferred to a later play)',
        '  miss: THP: enabled always, wanted never',
        '  and 2 more misses (the report lists them all)',
        '  report: /r/aem1/report.md',
    ]


def test_a_schema_2_result_its_misses_as_strings():
    assert brief_of('schema_2')[-1] == '  miss: dm-0: read-ahead 4096 KiB, wanted 32'
    assert 'more misses' not in '\n'.join(brief_of('schema_2'))


def test_a_refusal_before_any_change():
    assert brief_of('failed_before_change') == [
        'aem1: stopped before any change: aem_tuning_read_ahead_kb 30 is not a multiple of the page size (4 KiB)',
        '  report: /r/aem1/report.md']


def test_a_failure_after_changes_and_aem_not_answering():
    brief = brief_of('failed_after_changes')
    assert brief[0] == 'aem1: FAILED after 2 change(s): Wait for AEM: AEM did not come back'
    assert brief[-2] == '  AEM aem: stopped 2026-12-02T10:01:00Z, started 2026-12-02T10:02:06Z, did not answer 200'


def test_a_failure_having_changed_nothing_its_message_over_lines_and_trimmed():
    brief = brief_of('failed_nothing_changed')
    assert brief[:2] == ['aem1: FAILED having changed nothing: Install tuned: no package tuned available', '  (dnf: exit 1)  ']
    assert brief_of('failed_nothing_changed')[-1] == '  report: /r/aem1/report.md'
    # Trimmed as a whole: the last line's trailing blanks go.
    assert aem_reports.result_brief_lines(result(error='failed \n', report=''))[-1] == '  THP always -> never; tuned-adm verify: passed'
    assert aem_reports.result_brief_lines(result(error='failed  ', report='', targets=[], devices={},
                                                 readings={})) == ['aem1: FAILED having changed nothing: failed']


def test_a_host_lost_at_the_reboot_has_no_reading_after_it():
    assert brief_of('lost_at_reboot') == [
        'aem1: LOST: did not come back after the reboot at 2026-12-02T10:01:00Z: Reboot: timed out',
        '  %s (dm-0): 4096 -> ? KiB' % REPO,
        '  %s (nvme1n1): 4096 -> ? KiB' % VOLUME,
        '  report: /r/aem1/report.md',
    ]
    assert brief_of('lost_at_reboot_no_clock')[0] == (
        'aem1: LOST: did not come back after the reboot at 2026-12-02T10:21:00Z: Reboot: timed out')


def test_a_host_lost_in_verify_and_readings_that_are_missing():
    assert brief_of('lost_in_verify') == [
        'aem1: LOST: stopped answering at 2026-12-02T10:05:00Z: Reapply read-ahead: unreachable',
        '  %s (dm-0): 4096 -> ? KiB' % REPO,
        '  /srv/other (?): ? -> ? KiB',
        '  %s (nvme2n1): ? -> ? KiB' % VOLUME,
        '  THP ? -> ?; tuned-adm verify: passed',
        '  report: /r/aem1/report.md',
    ]


def test_none_as_jinja_wrote_it_nothing_alone_and_none_when_joined_to_words():
    assert brief_of('lost_unclocked')[0] == 'aem1: LOST: did not come back after the reboot at None: '
    assert brief_of('lost_in_verify_unclocked')[0] == 'aem1: LOST: stopped answering at None: unreachable'
    assert brief_of('nones') == [
        'aem1: not compliant (, apply mode), 2 change(s)',
        '  %s (): ? -> ? KiB' % REPO,
        '  /srv/two (dm-0):  -> ? KiB',
        '  THP  -> never; tuned-adm verify: ',
        '  rebooted: boot  -> b-2, boot finished ',
        '  AEM aem: stopped , started 2026-12-02T10:02:06Z, answered None at 2026-12-02T10:03:06Z',
        '  miss: None: read-ahead unknown',
        '  miss:',  # the last line, trimmed
    ]


# -- the filters ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize('name, function, cases', [
    ('summary_before', aem_reports.summary_before_lines, SUMMARY_CASES),
    ('result_brief', aem_reports.result_brief_lines, RESULT_CASES),
])
def test_the_filters_are_the_functions_and_change_nothing_they_are_given(name, function, cases):
    assert FilterModule().filters()[name] is function
    for case in cases.values():
        given = copy.deepcopy(case)
        assert all(isinstance(line, str) or isinstance(line, type(u'')) for line in function(case))
        assert case == given
