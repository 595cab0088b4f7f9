# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The aem_tuning role's result and decisions (plugins/plugin_utils/role_result.py), from the steps' records.

The facts are tuning_facts' own output on the fake host shaped like the project's VM (two NVMe disks, a virtio disk
and the LV: tests/unit/plugins/modules/test_result_size.py); the other steps' records are what their modules and
ansible.builtin's return when registered (reboot: ``rebooted``, ``elapsed``; a script: ``stdout``; a skipped task:
``skipped``). The cases: an audit of the untuned host, an apply run that rebooted with AEM stopped and started, a
host lost at the reboot, a refusal before any change, and a kernel without pidfd_getfd (AEM needs a restart, left to
a later play or not).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible_collections.aemops.os_tuning.plugins.filter import aem_tuning as filters
from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result

# The filters as the role calls them (aemops.os_tuning.<name>).
FILTERS = filters.FilterModule().filters()
SKIPPED = {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}
UNIT = 'aem.service'
SETTINGS = {'host': 'aemvm', 'play': 'Converge', 'state': 'present', 'mode': 'apply', 'check_mode': False,
            'probe': False, 'reboot': 'auto', 'aem_service': 'aem', 'aem_url': 'http://127.0.0.1:4502/',
            'restart_later': False, 'error_log': '', 'reports': True, 'report_dir': '/srv/reports',
            'snapshot_path': '/etc/ansible/facts.d/aem_tuning_before.fact',
            'sweep_record_path': '/etc/ansible/facts.d/aem_tuning_sweep.fact'}
CLOCK_BEFORE = {'changed': False, 'rc': 0, 'stdout': json.dumps({
    'boot_id': 'f3a1c2d4', 'iso': '2026-12-05T10:01:02Z', 'booted': '2026-12-05T09:00:00Z', 'epoch': 1796464862})}
CLOCK_AFTER = {'changed': False, 'rc': 0, 'stdout': json.dumps({
    'boot_id': '7c0d9e8f', 'iso': '2026-12-05T10:02:30Z', 'booted': '2026-12-05T10:01:48Z', 'epoch': 1796464950})}
WAIT = {'changed': False, 'rc': 0, 'stdout': json.dumps({
    'ok': True, 'status': 200, 'started': '2026-12-05T10:02:31Z', 'answered': '2026-12-05T10:03:40Z', 'waited': 69.2,
    'message': 'AEM answered 200'}) + '\n'}


def registered(facts):
    return {'changed': False, 'ansible_facts': {'os_tuning': facts}}


def reader(pid, comm, unit, why='no_pidfd_getfd'):
    return {'pid': pid, 'comm': comm, 'unit': unit, 'start': '2026-12-05T09:00:10Z', 'fds': 3, 'mappings': 2,
            'mapped_without_fd': 0, 'files': ['/opt/aem/crx-quickstart/repository/segmentstore/data00000a.tar'],
            'count': 2, 'why': why,
            'reason': 'the kernel has no pidfd_getfd (Linux 5.6): it cannot refresh 2 files of the running process in place'}


def restart_miss(r):
    return {'subject': 'pid %d (%s, %s)' % (r['pid'], r['comm'], r['unit']), 'kind': 'reader_restart',
            'message': '%s: restart it in your next window' % r['reason'], 'unit': r['unit']}


def base_facts(misses=(), readers=None):
    """tuning_facts' os_tuning, trimmed to what the result reads, for the cases built here by hand."""
    now = {'read_ahead_kb': {'dm-0': 32}, 'paths': {'/opt/aem/crx-quickstart/repository': 'dm-0'},
           'thp': {'enabled': 'never', 'defrag': 'never', 'running_cmdline': None},
           'tuned': {'version': '2.20.0', 'active_profiles': ['aem-os-tuning'], 'conflicts': 0},
           'devices': {'dm-0': 'lvm'}, 'os': {'id': 'rhel', 'version_id': '8.10', 'boot_method': 'bios'}}
    return {'clock': {'iso': '2026-12-05T10:00:00Z', 'epoch': 1796464800}, 'snapshot': None, 'errors': [],
            'plan': {'targets': ['/opt/aem/crx-quickstart/repository'], 'devices': {},
                     'read_ahead': {'kb': 32, 'source': 'given', 'auto': False, 'may_sweep': False},
                     'read_ahead_default': None, 'sweep_timeout': 900},
            'reading': {'now': now, 'snapshot': None},
            'compliance': {'misses': list(misses), 'tuned_verify': {'summary': 'passed'}},
            'readers': readers or {'stale': [], 'needs_restart': [], 'unscanned': [], 'kernel_refresh': True}}


# The role's variables behind SETTINGS (the lookup aemops.os_tuning.aem_tuning reads them by these names).
VARIABLES = {'inventory_hostname': 'aemvm', 'ansible_play_name': 'Converge', 'ansible_check_mode': False,
             '__aem_tuning_snapshot_path': SETTINGS['snapshot_path'],
             '__aem_tuning_sweep_fact_path': SETTINGS['sweep_record_path']}
VARIABLES.update(('aem_tuning_' + k, v) for k, v in SETTINGS.items() if k in role_result.PUBLIC)


def reader_of(variables):
    """What the lookup gives role_result.gather_steps: the variables' values by name, or the default."""
    def read(names, default=None):
        return [variables.get(name, default) for name in names]
    return read


def steps_for(facts_before, **steps):
    """The steps' records as the lookup gathers them (role_result.gather_steps) after before.yml's start: every step
    empty or skipped unless given (by step name), and the settings the variables give."""
    variables = dict(VARIABLES)
    run = role_result.run_start(registered(facts_before), SETTINGS)
    variables.update({'__aem_tuning_facts_before': registered(facts_before), '__aem_tuning_facts_after': SKIPPED,
                      '__aem_tuning_run': run, '__aem_tuning_errors': run['errors'], '__aem_tuning_lost': {},
                      '__aem_tuning_do_reboot': False, '__aem_tuning_aem_restarted': False,
                      '__aem_tuning_aem_record': {}, '__aem_tuning_reread': False,
                      '__aem_tuning_probe_before': {}, '__aem_tuning_probe_after': {}})
    for name in ('snapshot_write', 'snapshot_remove', 'sweep', 'sweep_unrecord', 'tuned_install', 'tuned_service',
                 'read_ahead', 'thp', 'aem_stop', 'aem_stop_restart', 'clock_before', 'reboot_done', 'boot_state',
                 'clock_after', 'clock_restart', 'aem_wait', 'log_scan'):
        variables['__aem_tuning_' + name] = SKIPPED
    variables.update(('__aem_tuning_' + name, value) for name, value in steps.items())
    out = role_result.gather_steps(reader_of(variables))
    assert dict((k, out['settings'][k]) for k in SETTINGS) == SETTINGS
    return out


def apply_with_reboot():
    """An apply run on the untuned host: read-ahead set, THP never with a kernel command line change, so auto
    reboots, with AEM stopped before and started after."""
    before = base_facts(misses=[{'subject': 'THP', 'kind': 'thp', 'message': 'transparent_hugepage/enabled is always'}])
    before['reading']['now']['read_ahead_kb'] = {'dm-0': 4096}
    after = base_facts()
    after['clock']['iso'] = '2026-12-05T10:04:31Z'
    steps = steps_for(
        before, facts_after=registered(after), reread=True, do_reboot=True,
        snapshot_write={'changed': True, 'snapshot': {'taken': '2026-12-05T10:00:00Z'}},
        read_ahead={'changed': True, 'devices': [{'name': 'dm-0', 'before': 4096, 'after': 32}],
                    'readers': {'refreshed': [], 'needs_restart': [], 'unreadable': [], 'kernel_refresh': True}},
        thp={'changed': True, 'reboot_required': True, 'persist': ['tuned', 'cmdline'],
             'runtime': {'enabled': {'before': 'always', 'after': 'never', 'offered': ['always', 'madvise', 'never']}},
             'cmdline': {'method': 'grubby', 'managed': True, 'running': 'always', 'args': 'transparent_hugepage=never'}},
        aem_stop={'changed': True}, clock_before=CLOCK_BEFORE, reboot_done={'changed': True, 'rebooted': True, 'elapsed': 71},
        clock_after=CLOCK_AFTER, aem_wait=WAIT)
    steps['aem_record'] = role_result.aem_record(steps, SETTINGS)
    return steps


def test_an_audit_of_the_untuned_host_keeps_its_misses_as_data_and_reads_nothing_again():
    misses = [{'subject': '/opt/aem/crx-quickstart/repository (dm-0)', 'kind': 'read_ahead',
               'message': 'dm-0 reads 4096 KiB, not 32: run the role in apply mode'},
              {'subject': '/opt/aem/crx-quickstart/repository (dm-0)', 'kind': 'persistence',
               'message': 'no udev rule persists the read-ahead of dm-0'}]
    steps = steps_for(base_facts(misses=misses), read_ahead=SKIPPED, thp=SKIPPED)
    settings = dict(SETTINGS, mode='audit')
    assert role_result.must_reread(steps, settings) is False
    r = role_result.result(steps, settings)
    assert r['schema_version'] == 3 and r['compliant'] is False and r['changes'] == []
    assert r['misses'] == [dict(m) for m in misses]
    assert r['misses_count'] == r['misses_failing_count'] == r['misses_before_count'] == 2
    assert r['verified'] == '2026-12-05T10:00:00Z' and r['tuned_verify'] == 'passed'
    assert r['reboot'] == {'requested': 'auto', 'required': False, 'done': False, 'boot_id_before': None,
                           'before': None, 'boot_id_after': None, 'booted': None, 'after': None, 'elapsed_s': None}
    assert r['readings']['after'] is not None and 'os' not in r['readings']['after']
    assert r['report'] == '/srv/reports/aemvm/report.md'
    ok, text = role_result.verdict(r, role_result.failing_misses(steps, settings))
    assert not ok and text == '; '.join('%s: %s' % (m['subject'], m['message']) for m in misses)


def test_an_apply_run_that_rebooted_lists_its_changes_in_order_with_the_reboot_and_aem():
    steps = apply_with_reboot()
    assert role_result.must_reread(steps, SETTINGS) is True
    r = role_result.result(steps, SETTINGS)
    assert [(c['kind'], c.get('action')) for c in r['changes']] == [
        ('snapshot', 'written'), ('read_ahead', None), ('thp', None), ('aem', 'stopped'), ('reboot', None),
        ('aem', 'started')]
    thp = r['changes'][2]
    assert thp['runtime'] == {'enabled': {'before': 'always', 'after': 'never'}}  # 'offered' left out
    assert thp['cmdline'] == {'method': 'grubby', 'managed': True, 'running': 'always'}
    assert r['changes'][1]['devices'] == ['dm-0'] and r['changes'][3]['unit'] == 'aem'
    assert r['reboot'] == {'requested': 'auto', 'required': True, 'done': True, 'boot_id_before': 'f3a1c2d4',
                           'before': '2026-12-05T10:01:02Z', 'boot_id_after': '7c0d9e8f',
                           'booted': '2026-12-05T10:01:48Z', 'after': '2026-12-05T10:02:30Z', 'elapsed_s': 71}
    assert r['aem'] == {'unit': 'aem', 'why': 'reboot', 'stopped': '2026-12-05T10:01:02Z',
                        'started': '2026-12-05T10:02:31Z', 'answered': '2026-12-05T10:03:40Z', 'status': 200,
                        'waited_s': 69.2, 'ok': True, 'url': 'http://127.0.0.1:4502/', 'message': 'AEM answered 200'}
    assert r['compliant'] is True and r['compliant_before'] is False and r['misses_before_count'] == 1
    assert r['verified'] == '2026-12-05T10:04:31Z'
    assert r['readings']['before']['read_ahead_kb'] == {'dm-0': 4096}
    assert r['readings']['after']['read_ahead_kb'] == {'dm-0': 32}
    assert role_result.verdict(r, role_result.failing_misses(steps, SETTINGS)) == (True, 'compliant')


def test_a_host_lost_at_the_reboot_keeps_its_record_and_reads_nothing_after():
    steps = apply_with_reboot()
    failed = {'failed': True, 'rebooted': True, 'msg': 'Timed out waiting for last boot time check (timeout=1200)'}
    task = {'name': 'Reboot and wait for the host to come back, at most seconds 1200', 'action': 'ansible.builtin.reboot'}
    failure = FILTERS['change_failure'](failed, task, steps, '2026-12-05T10:21:03Z')
    lost = failure['lost']
    assert lost == {'step': 'reboot', 'task': task['name'], 'at': '2026-12-05T10:21:03Z',
                    'since': '2026-12-05T10:01:02Z', 'message': failed['msg']}
    steps.update(lost=lost, error=role_result.first_error(failure['errors']), errors=failure['errors'],
                 facts_after=SKIPPED, clock_after=SKIPPED, aem_wait=SKIPPED, aem_record={}, reboot_done=failed)
    assert role_result.must_reread(steps, SETTINGS) is False and role_result.facts_after(steps, SETTINGS) == {}
    r = role_result.result(steps, SETTINGS)
    assert r['lost'] == lost and r['compliant'] is False and r['verified'] is None
    assert r['error'] == '%s: %s' % (task['name'], failed['msg'])
    assert r['errors'] == [{'phase': 'change', 'task': task['name'], 'message': failed['msg'], 'at': '2026-12-05T10:21:03Z'}]
    assert r['readings']['after'] is None and r['reboot']['done'] is False and r['aem'] is None
    assert role_result.report_note(r) == ' (the report says what was changed: /srv/reports/aemvm/report.md)'


def test_an_unreachable_host_after_the_change_is_lost_at_verify_and_keeps_the_first_error():
    steps = apply_with_reboot()
    steps['facts_after'] = {'unreachable': True, 'msg': 'Failed to connect to the host via ssh'}
    gone = FILTERS['lost_in_verify'](steps, '2026-12-05T10:05:00Z')
    assert gone['lost']['step'] == 'verify' and gone['lost']['since'] is None
    assert gone['errors'] == [{'phase': 'verify', 'task': 'Read the host again after the change',
                               'message': 'Failed to connect to the host via ssh', 'at': '2026-12-05T10:05:00Z'}]
    assert role_result.first_error(gone['errors']) == 'Read the host again after the change: Failed to connect to the host via ssh'
    steps['errors'] = [{'phase': 'change', 'task': 'an earlier step', 'message': 'failed'}]
    gone = FILTERS['lost_in_verify'](steps)
    assert role_result.first_error(gone['errors']) == 'an earlier step: failed' and len(gone['errors']) == 2
    assert gone['lost']['at'] == gone['errors'][1]['at'] and gone['lost']['at'].endswith('Z')  # the controller's time
    steps['lost'] = gone['lost']
    assert FILTERS['lost_in_verify'](steps, 'now') == {}  # noted once


def test_a_refusal_before_any_change_fails_early_with_the_modules_message():
    refused = {'failed': True, 'msg': 'aem_tuning_read_ahead_kb: 3 is not a multiple of the page size (4 KiB)',
               'ansible_facts': {'os_tuning': {'clock': {'iso': '2026-12-05T10:00:00Z', 'epoch': 1}}}}
    start = FILTERS['run_start']({'facts_before': refused, 'settings': dict(SETTINGS, probe=True)})
    assert start['failed_early'] is True and start['error'] == refused['msg'] and start['targets'] == []
    assert start['errors'] == [{'phase': 'check', 'task': 'Gather tuning facts, check the wanted values against the host',
                                'message': refused['msg']}]
    assert start['probing'] is False and start['started'] == '2026-12-05T10:00:00Z'
    assert start['take_snapshot'] is False and start['args']['sweep']['path'] is None
    steps = steps_for(base_facts(), run=start, errors=start['errors'])
    steps['facts_before'] = refused
    assert steps['failed_early'] is True and steps['error'] == start['error'] and steps['choice'] == {}
    r = role_result.result(steps, SETTINGS)
    assert r['failed_before_change'] is True and r['compliant'] is False and r['read_ahead_kb'] is None
    assert role_result.report_note(r) == ' (report: /srv/reports/aemvm/report.md)'


def test_without_pidfd_getfd_aem_needs_a_restart_which_a_later_play_may_take():
    readers = {'stale': [], 'needs_restart': [reader(4242, 'java', UNIT), reader(777, 'rsyslogd', 'rsyslog.service')],
               'unscanned': [], 'kernel_refresh': False}
    misses = [restart_miss(r) for r in readers['needs_restart']]
    after = base_facts(misses=misses, readers=readers)
    steps = steps_for(base_facts(), facts_after=registered(after), reread=True,
                      read_ahead={'changed': True, 'devices': [{'name': 'dm-0'}],
                                  'readers': {'refreshed': [], 'needs_restart': readers['needs_restart'],
                                              'unreadable': [], 'kernel_refresh': False}})
    assert role_result.aem_needs_restart(steps['read_ahead'], 'aem') is True
    assert role_result.aem_needs_restart(steps['read_ahead'], 'aem-author') is False
    r = role_result.result(steps, SETTINGS)
    assert r['readers']['aem_needs_restart'] is True and r['readers']['kernel_refresh'] is False
    assert [m.get('deferred', False) for m in r['misses']] == [False, False] and r['misses_failing_count'] == 2
    later = dict(SETTINGS, restart_later=True)
    r = role_result.result(steps, later)
    assert [m.get('deferred', False) for m in r['misses']] == [True, False] and r['misses_failing_count'] == 1
    ok, text = role_result.verdict(r, role_result.failing_misses(steps, later))
    assert not ok and text.startswith('pid 777 (rsyslogd, rsyslog.service): ')
    steps['facts_after'] = registered(base_facts(misses=misses[:1], readers=readers))
    r = role_result.result(steps, later)
    ok, text = role_result.verdict(r, role_result.failing_misses(steps, later))
    assert ok and r['compliant'] is False and r['misses_failing_count'] == 0
    assert text == "compliant but for AEM's restart, left to a later play (aem_tuning_restart_later): pid 4242 (java, aem.service)"
    # A backout defers nothing.
    assert role_result.failing_misses(steps, dict(later, state='absent')) == ['%s: %s' % (misses[0]['subject'], misses[0]['message'])]


def test_the_result_keeps_the_first_3_misses_and_counts_them_all():
    misses = [{'subject': 'dev%d' % i, 'kind': 'read_ahead', 'message': 'reads 4096 KiB'} for i in range(14)]
    r = role_result.result(steps_for(base_facts(misses=misses)), SETTINGS)
    assert len(r['misses']) == 3 and r['misses_count'] == r['misses_failing_count'] == 14


def test_check_mode_writes_no_report_and_the_audit_reads_no_refresh():
    steps = apply_with_reboot()
    r = role_result.result(steps, dict(SETTINGS, check_mode=True, mode='audit'))
    assert r['report'] == '' and r['check_mode'] is True and r['readers']['refreshed'] == []


def test_values_templated_as_text_by_an_older_ansible_core_still_decide():
    # Before ansible-core 2.19 a boolean templated inside a mapping may arrive as text.
    steps = apply_with_reboot()
    steps.update(reread='True', do_reboot='True', aem_restarted='False', failed_early='False')
    r = role_result.result(steps, dict(SETTINGS, check_mode='False', reports='True', restart_later='False'))
    assert r['verified'] == '2026-12-05T10:04:31Z' and r['check_mode'] is False and r['aem']['why'] == 'reboot'
    assert r['report'] and r['readers']['aem_restarted'] is False and r['failed_before_change'] is False


def test_the_intent_after_the_change_carries_the_applied_value_and_the_persisted_thp():
    steps = apply_with_reboot()
    steps['choice'] = {'kb': 64, 'auto': True}
    steps['settings'] = dict(SETTINGS, read_ahead_kb='auto', thp='never')
    intent = FILTERS['intent_after'](steps)
    assert intent == dict(role_result.intent(steps['settings']), read_ahead_kb=64, thp_persist_effective=['tuned', 'cmdline'])
    assert intent['thp'] == 'never' and intent['sweep_record'] == SETTINGS['sweep_record_path']
    steps['choice'] = {'kb': None}
    assert FILTERS['intent_after'](steps, dict(SETTINGS, read_ahead_kb=None))['read_ahead_kb'] is None


def test_the_reboot_decision():
    def decide(requested, thp):
        return FILTERS['reboot_decision']({'thp': thp, 'settings': dict(SETTINGS, reboot=requested)})
    assert decide('auto', {'reboot_required': True}) is True
    assert decide('auto', {'reboot_required': False}) is False
    assert decide(True, {}) is True and decide('false', {'reboot_required': True}) is False


def test_a_failed_step_keeps_the_first_error_and_records_its_own():
    earlier = [{'phase': 'change', 'task': 'earlier', 'message': 'failed'}]
    out = FILTERS['with_failure'](earlier, {'stderr': 'boom'}, None, 'verify')
    assert out[0] == earlier[0] and role_result.first_error(out) == 'earlier: failed'
    assert sorted(out[1]) == ['at', 'message', 'phase', 'task'] and out[1]['task'] == 'a task' and out[1]['message'] == 'boom'
    # The metrics' record has no time, as before; a refusal of the check is its message alone.
    out = FILTERS['with_failure']([], {}, 'Write the metrics for node_exporter', 'metrics', False)
    assert out == [{'phase': 'metrics', 'task': 'Write the metrics for node_exporter', 'message': 'failed'}]
    assert role_result.first_error(out) == 'Write the metrics for node_exporter: failed'
    assert role_result.first_error([{'phase': 'check', 'task': 'Gather tuning facts', 'message': 'refused'}]) == 'refused'
    assert role_result.first_error([]) == ''


def test_aem_record_after_the_opt_in_restart_takes_the_restart_clock_and_a_silent_script_says_so():
    steps = apply_with_reboot()
    steps.update(do_reboot=False, clock_restart=CLOCK_AFTER, aem_wait={'rc': 1, 'stdout': '', 'stderr': 'Traceback'})
    rec = FILTERS['aem_record'](steps, SETTINGS)
    assert rec['why'].startswith('maps files at the earlier read-ahead') and rec['stopped'] == '2026-12-05T10:02:30Z'
    assert rec['ok'] is False and rec['message'] == 'Traceback'


def test_verified_gives_the_facts_the_result_and_the_verdict_in_one_call():
    steps = apply_with_reboot()
    out = FILTERS['verified'](copy.deepcopy(steps), SETTINGS)
    assert sorted(out) == ['backout_msg', 'error_msg', 'facts', 'fail_msg', 'ok', 'report_note', 'result', 'success_msg', 'text']
    assert out['success_msg'] == 'aemvm: compliant' and out['fail_msg'] == 'aemvm is not compliant (apply mode): compliant'
    assert out['error_msg'] == 'aemvm: ' + ' (the report says what was changed: /srv/reports/aemvm/report.md)'
    assert out == FILTERS['verified'](copy.deepcopy(steps))  # the settings the steps carry
    assert out['facts'] == role_result.facts_after(steps, SETTINGS) and out['result']['compliant'] is True


def test_a_reread_decision_templated_as_false_text_keeps_the_facts_from_before():
    steps = apply_with_reboot()
    steps['reread'] = 'False'
    assert role_result.facts_after(steps, SETTINGS) == steps['before']


def test_aem_still_stale_after_an_apply_run_needs_a_restart_whatever_stopped_the_refresh():
    # Yama (EPERM), an LSM (EACCES) or refresh_readers: false: read_ahead could not refresh AEM, and the facts after
    # it still call it stale (an apply run would refresh it). migrate-aem.yml's restart batches read aem_needs_restart.
    java = dict(reader(4242, 'java', UNIT, why='eperm'), reason='holds 2 file(s) opened at an earlier read-ahead')
    readers = {'stale': [java], 'needs_restart': [], 'unscanned': [], 'kernel_refresh': True}
    after = base_facts(readers=readers)
    steps = steps_for(base_facts(), facts_after=registered(after), reread=True,
                      read_ahead={'changed': True, 'devices': [{'name': 'dm-0'}],
                                  'readers': {'refreshed': [], 'needs_restart': [java], 'kernel_refresh': True}})
    assert role_result.result(steps, SETTINGS)['readers']['aem_needs_restart'] is True
    # An audit only reports it: an apply run may still refresh it in place.
    assert role_result.result(steps, dict(SETTINGS, mode='audit'))['readers']['aem_needs_restart'] is False
    assert role_result.result(steps, dict(SETTINGS, check_mode=True))['readers']['aem_needs_restart'] is False
    # Another unit's reader is not AEM.
    assert role_result.result(steps, dict(SETTINGS, aem_service='httpd'))['readers']['aem_needs_restart'] is False


def test_a_scripts_json_is_its_last_json_line_whatever_came_before_it_on_the_terminal():
    steps = apply_with_reboot()
    steps['aem_wait'] = {'rc': 0, 'stdout': '/usr/lib64/python3.6/site-packages/x.py:1: Warning: y\r\n' + WAIT['stdout'].replace('\n', '\r\n'),
                         'stderr': 'Shared connection to 127.0.0.1 closed.\r\n'}
    rec = FILTERS['aem_record'](steps, SETTINGS)
    assert rec['ok'] is True and rec['started'] == '2026-12-05T10:02:31Z' and rec['message'] == 'AEM answered 200'


# -- what the role's tasks pass: the steps gathered by name, the run's start and its modules' arguments -------------

def test_the_steps_gathered_complete_the_choice_with_the_sweep_and_the_first_reading_with_this_runs_snapshot():
    sweep = {'changed': True, 'measured': True, 'recommended_kb': 128, 'evidence': {'best_kb': 128, 'results': []}}
    auto = base_facts()
    auto['plan']['read_ahead'] = {'kb': None, 'source': 'sweep', 'auto': True, 'sweep': True,
                                  'knobs': {'values': [128, 32]}}
    steps = steps_for(auto, sweep=sweep, snapshot_write={'changed': True, 'snapshot': {'taken': '2026-12-05T10:00:09Z'}})
    assert steps['choice'] == dict(auto['plan']['read_ahead'], kb=128, evidence=sweep['evidence'])
    assert steps['snapshot_taken'] == '2026-12-05T10:00:09Z'
    assert steps['reading_first'] == auto['reading']['now'] and steps['error'] == '' and steps['probes'] == {}
    # Without them: the check's choice, and the first reading as the check read it.
    steps = steps_for(auto)
    assert steps['choice'] == auto['plan']['read_ahead'] and steps['snapshot_taken'] == ''
    # io_probe's measurements by step, where it ran (a skipped task is none).
    steps = steps_for(auto, probe_before={'read_amplification': 1.5}, probe_after=SKIPPED)
    assert steps['probes'] == {'before': {'read_amplification': 1.5}}


def test_the_check_decides_the_snapshot_the_probe_the_log_scan_and_the_modules_arguments():
    facts = base_facts()
    facts['os'] = {'python': '/usr/libexec/platform-python'}
    facts['plan']['devices'] = {'/dev/nvme1n1': 'nvme1n1', 'extra': None}
    facts['plan']['read_ahead']['knobs'] = {'values': [256, 32]}
    settings = dict(SETTINGS, probe=True, probe_size_mb=256, probe_reads=2000, error_log='/opt/aem/logs/error log',
                    sweep_readers=4, sweep_duration=5, sweep_size_mb=1024, sweep_tolerance_pct=5.0, volume_type='gp3',
                    volume_size_gb=0, volume_iops='3000', volume_throughput_mibps=0.0, thp='never', thp_defrag='never',
                    khugepaged_defrag=False, thp_persist=[], aem_timeout='900', aem_url="http://h:4502/it's")
    run = role_result.run_start(registered(facts), settings)
    assert run['apply'] is True and run['take_snapshot'] is True and run['probing'] is True and run['scan_log'] is True
    assert run['python'] == '/usr/libexec/platform-python'
    args = run['args']
    # A volume's size, IOPS or MiB/s of 0 is left out (the module refuses 0); text is read as Jinja's int filter does.
    assert args['sweep'] == {'path': '/opt/aem/crx-quickstart/repository', 'sweep': [256, 32], 'readers': 4,
                             'duration': 5, 'size_mb': 1024, 'tolerance_pct': 5.0, 'volume_type': 'gp3',
                             'iops': '3000', 'timeout': 900, 'record': SETTINGS['sweep_record_path']}
    assert args['thp'] == {'enabled': 'never', 'defrag': 'never', 'khugepaged_defrag': False, 'state': 'present'}
    assert role_result.run_start(registered(facts), dict(settings, thp_persist=['tuned']))['args']['thp']['persist'] == ['tuned']
    assert args['probe'] == {'path': '/opt/aem/crx-quickstart/repository', 'size_mb': 256, 'reads': 2000,
                             'ebs_devices': ['nvme1n1']}
    # The scripts' command lines, quoted as Jinja's quote filter does.
    assert args['wait_aem'] == "aem 'http://h:4502/it'\"'\"'s' 900"
    assert args['scan_log'] == "'/opt/aem/logs/error log' 1796464800"
    # An audit takes no snapshot; a host with one already, neither; nor a backout, nor a refusal.
    assert role_result.run_start(registered(facts), dict(settings, mode='audit'))['take_snapshot'] is False
    assert role_result.run_start(registered(facts), dict(settings, state='absent'))['take_snapshot'] is False
    assert role_result.run_start(registered(dict(facts, snapshot={'taken': 'T'})), settings)['take_snapshot'] is False
    refused = role_result.run_start({'failed': True, 'msg': 'no'}, settings)
    assert refused['take_snapshot'] is False and refused['probing'] is False and refused['args']['sweep']['path'] is None
    assert role_result.run_start(registered(facts), dict(settings, error_log=''))['scan_log'] is False


def test_the_intent_is_what_the_role_was_given_with_its_types():
    settings = dict(SETTINGS, read_ahead_kb=None, sweep_values=[64, 32], sweep_readers=4, sweep_duration=5,
                    sweep_size_mb=1024, sweep_tolerance_pct=5.0, volume_type='gp3', volume_size_gb=0, volume_iops=0,
                    volume_throughput_mibps=0, sweep_force=False, paths=[], repository_candidates=['/opt/aem/r'],
                    devices=['/dev/nvme1n1'], underlying=True, thp='never', thp_defrag='madvise', thp_persist=['tuned'])
    assert FILTERS['intent']({'settings': settings}) == {
        'state': 'present', 'mode': 'apply', 'read_ahead_kb': None,
        'sweep': {'values': [64, 32], 'readers': 4, 'duration': 5, 'size_mb': 1024, 'tolerance_pct': 5.0,
                  'volume_type': 'gp3', 'volume_size_gb': 0, 'iops': 0, 'throughput_mibps': 0},
        'sweep_force': False, 'sweep_record': SETTINGS['sweep_record_path'], 'paths': [],
        'candidates': ['/opt/aem/r'], 'devices': ['/dev/nvme1n1'], 'underlying': True, 'thp': 'never',
        'thp_defrag': 'madvise', 'thp_persist': ['tuned'], 'aem_service': 'aem'}


def test_a_failed_change_records_its_error_and_the_lost_host_at_one_time():
    steps = apply_with_reboot()
    task = {'name': 'Set Transparent Huge Pages', 'action': 'aemops.os_tuning.thp'}
    out = FILTERS['change_failure']({'failed': True, 'msg': 'grubby failed'}, task, steps)
    assert out['lost'] == {} and out['errors'] == [{'phase': 'change', 'task': task['name'], 'message': 'grubby failed',
                                                    'at': out['errors'][0]['at']}]
    assert role_result.first_error(out['errors']) == 'Set Transparent Huge Pages: grubby failed'
    gone = FILTERS['change_failure']({'unreachable': True, 'msg': 'ssh: timeout'}, task, steps)
    assert gone['lost']['at'] == gone['errors'][0]['at'] and gone['lost']['step'] == 'reboot'


def test_aem_is_restarted_without_a_reboot_only_when_asked_needed_and_not_left_to_a_later_play():
    steps = apply_with_reboot()
    steps.update(do_reboot=False, read_ahead={'changed': True, 'readers': {'needs_restart': [reader(4242, 'java', UNIT)]}})
    asked = dict(SETTINGS, restart_stale_aem=True)
    assert FILTERS['aem_restart'](steps, asked) is True
    assert FILTERS['aem_restart'](dict(steps, settings=asked)) is True  # the settings the steps carry
    assert FILTERS['aem_restart'](steps, SETTINGS) is False  # not asked
    assert FILTERS['aem_restart'](steps, dict(asked, restart_later=True)) is False
    assert FILTERS['aem_restart'](steps, dict(asked, check_mode=True)) is False
    assert FILTERS['aem_restart'](dict(steps, do_reboot=True), asked) is False  # the reboot restarts it
    assert FILTERS['aem_restart'](steps, dict(asked, aem_service='httpd')) is False  # not AEM's process


def test_the_metrics_take_the_facts_the_run_ends_with_its_read_ahead_and_its_first_error():
    steps = apply_with_reboot()
    steps['errors'] = [{'phase': 'verify', 'task': 'Read the host again after the change', 'message': 'boom'}]
    steps['error'] = role_result.first_error(steps['errors'])
    args = FILTERS['metrics_args'](steps, dict(SETTINGS, metrics_dir='/var/lib/node_exporter'))
    assert args == {'directory': '/var/lib/node_exporter', 'facts': role_result.facts_after(steps, SETTINGS),
                    'read_ahead_kb': 32, 'error': 'Read the host again after the change: boom', 'run_mode': 'apply',
                    'run_state': 'present', 'aem_service': 'aem'}
