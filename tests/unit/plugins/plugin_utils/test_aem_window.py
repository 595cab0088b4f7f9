# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The maintenance window's plan and verdicts (plugins/plugin_utils/aem_window.py), through the filters
playbooks/aem-window.yml calls.

The facts are tuning_facts' ``ansible_facts.os_tuning`` trimmed to what the plan reads (the targets, each path's
device, each device's running read-ahead and the value its rule persists, the page size); the other records are what
read_ahead and ansible.builtin.command return when registered. Bad input must name the thing and the fix, and leave
the plan doing nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.aemops.os_tuning.plugins.filter import aem_window as filters
from ansible_collections.aemops.os_tuning.plugins.module_utils import compliance
from ansible_collections.aemops.os_tuning.plugins.plugin_utils import aem_window

FILTERS = filters.FilterModule().filters()
REPO = '/srv/aem/crx-quickstart/repository'
JOB = {'kb': None, 'command': ['tar', '-cf', '/backup/aem.tar', REPO], 'timeout': 3600, 'run_tags': ['all'],
       'skip_tags': [], 'restart_handled': False, 'aem_service': 'aem', 'check_mode': False}


def facts(live=32, persisted=32, page_kb=4, targets=(REPO,)):
    return {'plan': {'targets': list(targets), 'page_kb': page_kb, 'errors': []},
            'paths': dict((t, {'device': 'dm-0', 'read_ahead_kb': live, 'mount': '/srv/aem'}) for t in targets),
            'block_devices': {'dm-0': {'type': 'lvm', 'read_ahead_kb': live, 'rule': persisted}}}


def settings(**changes):
    out = dict(JOB)
    out.update(changes)
    return out


def plan(the_facts=None, **changes):
    return FILTERS['aem_window_plan'](the_facts or facts(), settings(**changes))


def reader(pid, unit, before=None, after=None, **extra):
    out = {'pid': pid, 'comm': 'java' if unit == 'aem.service' else 'tar', 'unit': unit, 'start': '2026-12-06T07:00:00Z',
           'fds': 1, 'mappings': 1, 'mapped_without_fd': 0, 'count': 1, 'files': [REPO + '/segmentstore/data00001a.tar']}
    if before is not None:
        out.update(basis='measured', measured={'kib_per_fault': before, 'faults': 40, 'seconds': 3.0})
    if after is not None:
        out['measured_after'] = {'kib_per_fault': after, 'faults': 41, 'seconds': 3.0}
    out.update(extra)
    return out


def read_ahead(before, after, refreshed=(), needs_restart=(), kernel_refresh=True):
    """read_ahead's registered result for dm-0, as one item of a loop."""
    return {'changed': before != after or bool(refreshed), 'item': {'kb': after, 'devices': ['dm-0']},
            'devices': [{'name': 'dm-0', 'type': 'lvm', 'before_kb': before, 'after_kb': after, 'rule': None}],
            'readers': {'refreshed': list(refreshed), 'needs_restart': list(needs_restart), 'descriptor_only': [],
                        'kernel_refresh': kernel_refresh, 'window': 3}}


def loop(*items):
    return {'changed': any(i['changed'] for i in items), 'results': list(items), 'msg': 'All items completed'}


NO_PIDFD = reader(4242, 'aem.service', 512.0, None, why=['no_pidfd_getfd'],
                  reason='the kernel has no pidfd_getfd (Linux 5.6): it cannot refresh 1 file of the running process')


# -- the plan --------------------------------------------------------------------------------------------------------

def test_a_job_opens_at_512_runs_under_timeout_and_closes_to_the_persisted_value():
    p = plan()
    assert p['errors'] == [] and p['mode'] == 'job' and p['kb'] == aem_window.DEFAULT_KB == 512
    assert p['recover'] == [] and p['left_open'] == []
    assert p['open'] == ['dm-0']
    assert p['close'] == [{'kb': 32, 'devices': ['dm-0']}]
    assert p['job']['argv'] == ['timeout', '--kill-after=30', '3600', 'tar', '-cf', '/backup/aem.tar', REPO]
    assert p['job']['async_s'] == 3600 + 30 + 60 and p['job']['poll_s'] == 10
    assert any('refresh_readers: false' in line for line in p['says'])


def test_one_line_runs_under_sh_and_text_digits_are_numbers():
    p = plan(command='tar -cf - /srv/aem | gzip >/backup/aem.tgz', timeout='60', kb='1024')
    assert p['errors'] == [] and p['kb'] == 1024
    assert p['job']['argv'][3:] == ['/bin/sh', '-c', 'tar -cf - /srv/aem | gzip >/backup/aem.tgz']
    assert p['job']['poll_s'] == 2


def test_the_tags_choose_open_or_close():
    p = plan(run_tags=['open'], command=None, timeout=None)
    assert p['errors'] == [] and p['mode'] == 'open' and p['open'] == ['dm-0'] and p['close'] == [] and p['job'] is None
    assert any('--tags close' in line for line in p['says'])
    p = plan(facts(live=512), run_tags=['close'], command=None, timeout=None, kb='not looked at')
    assert p['errors'] == [] and p['mode'] == 'close' and p['open'] == [] and p['recover'] == []
    assert p['close'] == [{'kb': 32, 'devices': ['dm-0']}]
    assert any('dm-0 512 KiB now' in line for line in p['says'])


def test_a_window_left_open_is_closed_first_and_said():
    p = plan(facts(live=512), run_tags=['open'], command=None, timeout=None)
    assert p['left_open'] == ['dm-0'] and p['recover'] == [{'kb': 32, 'devices': ['dm-0']}]
    assert p['says'][0].startswith('a window is open (a killed run left it') and 'dm-0 512 KiB now' in p['says'][0]
    p = plan(facts(live=4096))  # drift (tuned raised it) is closed the same way
    assert p['recover'] == [{'kb': 32, 'devices': ['dm-0']}] and p['open'] == ['dm-0']


def test_check_mode_does_not_run_the_job():
    p = plan(check_mode=True)
    assert p['errors'] == [] and p['job'] is None and 'job: not run in check mode.' in p['says']


def test_two_paths_on_one_device_are_one_device():
    p = plan(facts(targets=(REPO, '/srv/aem/crx-quickstart/repository/datastore')))
    assert [d['name'] for d in p['devices']] == ['dm-0'] and len(p['devices'][0]['paths']) == 2


BAD = [
    ({'kb': 30}, 'aem_window_kb=30 is not a multiple of the page size (4 KiB)', 'Use a multiple of 4'),
    ({'kb': 32}, 'aem_window_kb=32 is not above the persisted read-ahead of dm-0 (32 KiB)', 'Give more than 32 KiB'),
    ({'kb': 16}, 'not above the persisted read-ahead', 'Give more than 32 KiB'),
    ({'kb': compliance.MAX_READ_AHEAD_KB + 4}, 'aem_window_kb=65540 is out of range', 'give at most 65536 KiB'),
    ({'kb': True}, 'aem_window_kb must be a whole number of KiB', 'for example 512'),
    ({'kb': 512.0}, 'aem_window_kb must be a whole number of KiB', 'not 512.0'),
    ({'kb': '٥١٢'}, 'aem_window_kb must be a whole number of KiB', 'for example 512'),
    ({'command': None}, 'aem_window_command is not set', 'run --tags open before a job'),
    ({'command': ['tar', '']}, 'aem_window_command must be a list of non-empty strings', 'run by /bin/sh -c'),
    ({'command': {'cmd': 'tar'}}, 'aem_window_command must be a list', 'or one string'),
    ({'timeout': None}, 'aem_window_timeout must be a whole number of seconds from 1 to 604800', 'not None'),
    ({'timeout': 0}, 'aem_window_timeout must be', 'the job is stopped then'),
    ({'timeout': '1h'}, 'aem_window_timeout must be', "not '1h'"),
    ({'run_tags': ['open'], 'timeout': None}, 'aem_window_command is run only without --tags', 'Drop -e aem_window_command'),
    ({'run_tags': ['open', 'close']}, '--tags close,open: run with no --tags', 'one of them'),
    ({'run_tags': ['job']}, '--tags job: run with no --tags', 'with --tags close (put it back)'),
    ({'skip_tags': ['close']}, '--skip-tags close', 'drop --skip-tags'),
]


@pytest.mark.parametrize('changes,names,fix', BAD)
def test_bad_input_names_the_thing_and_the_fix_and_changes_nothing(changes, names, fix):
    p = plan(**changes)
    text = ' '.join(p['errors'])
    assert names in text and fix in text, text
    assert p['recover'] == [] and p['open'] == [] and p['close'] == [] and p['job'] is None
    assert p['says'] == ['nothing was changed: %s' % text]


def test_a_64k_page_kernel_refuses_a_window_off_its_pages():
    p = plan(facts(persisted=64, live=64, page_kb=64), kb=544)
    assert 'not a multiple of the page size (64 KiB)' in p['errors'][0] and 'would store 512' in p['errors'][0]


def test_a_host_the_role_never_tuned_has_no_persisted_value_to_close_to():
    p = plan(facts(persisted=None))
    assert 'dm-0 (%s) has no persisted read-ahead' % REPO in p['errors'][0]
    assert 'apply the aem_tuning role first' in p['errors'][0] and p['close'] == []


def test_no_repository_found_names_the_variable():
    p = plan(facts(targets=()))
    assert p['errors'] == ['no AEM repository found: set aem_tuning_paths (the crx-quickstart/repository directory) '
                           'for the host; the window raises the read-ahead of its device only.']
    gone = facts()
    gone['paths'][REPO] = {'error': 'No such file or directory'}
    assert 'correct aem_tuning_paths' in plan(gone)['errors'][0]


def test_the_plan_does_not_change_the_facts():
    given = facts(live=512)
    kept = copy.deepcopy(given)
    plan(given)
    assert given == kept


# -- closing and the record ------------------------------------------------------------------------------------------

def test_close_names_the_refreshed_reader_with_its_measurement():
    p = plan()
    close = loop(read_ahead(512, 32, refreshed=[reader(4242, 'aem.service', 487.3, 31.9)]))
    out = FILTERS['aem_window_closed'](close, p)
    assert out['ran'] and not out['failed'] and out['needs_restart'] == []
    assert out['refreshed'] == [{'pid': 4242, 'comm': 'java', 'unit': 'aem.service', 'aem': True,
                                 'measured_kib': 487.3, 'measured_after_kib': 31.9}]
    assert out['msg'] == ('the window closed: dm-0 512 -> 32 KiB (persisted). Refreshed in place: pid 4242 (java, '
                          'aem.service): 487.3 -> 31.9 KiB per major fault, measured.')


def test_a_kernel_without_pidfd_getfd_fails_the_close_naming_aem_unless_a_restart_is_handled():
    close = loop(read_ahead(512, 32, needs_restart=[NO_PIDFD], kernel_refresh=False))
    out = FILTERS['aem_window_closed'](close, plan())
    assert out['failed'] and out['kernel_refresh'] is False
    assert 'NOT REFRESHED, A RESTART IS NEEDED: pid 4242 (java, aem.service) (AEM)' in out['msg']
    assert 'This kernel has no pidfd_getfd' in out['msg']
    assert 'Restart them now (systemctl restart aem), or run with -e aem_window_restart_handled=true' in out['msg']
    handled = FILTERS['aem_window_closed'](close, plan(restart_handled=True))
    assert not handled['failed'] and 'A restart is handled elsewhere' in handled['msg']


def test_a_skipped_or_absent_close_did_not_run():
    p = plan()
    assert not FILTERS['aem_window_closed']({}, p)['ran']
    skipped = {'results': [], 'skipped': True, 'msg': 'No items in the list', 'changed': False}
    out = FILTERS['aem_window_closed'](skipped, p, 'recover')
    assert not out['ran'] and not out['failed'] and out['msg'] == ''


def test_the_record_of_a_job_run_that_recovered_a_window_first():
    p = plan(facts(live=512))
    recover = FILTERS['aem_window_closed'](loop(read_ahead(512, 32, refreshed=[reader(99, None, 470.0, 30.0)])), p,
                                           'recover')
    job = {'changed': True, 'rc': 0, 'stdout_lines': ['512'], 'stderr_lines': [], 'delta': '0:00:01.2',
           'start': 's', 'end': 'e', 'finished': 1}
    out = FILTERS['aem_window_result']({'recover': recover, 'open': read_ahead(32, 512), 'job': job,
                                        'failure': None, 'close': loop(read_ahead(512, 32))}, p)
    assert not out['failed']
    assert out['recovered']['refreshed'][0]['measured_after_kib'] == 30.0
    assert out['opened'] == {'devices': [{'name': 'dm-0', 'before_kb': 32, 'after_kb': 512}]}
    assert out['job']['rc'] == 0 and out['job']['stdout_tail'] == ['512']
    assert out['closed']['devices'] == [{'name': 'dm-0', 'before_kb': 512, 'after_kb': 32}]
    assert out['msg'].startswith('the window a killed run left open was closed first: dm-0 512 -> 32 KiB (persisted). '
                                 'Refreshed in place: pid 99 (tar): 470.0 -> 30.0 KiB per major fault, measured. '
                                 'the window opened: dm-0 32 -> 512 KiB.')


@pytest.mark.parametrize('rc,words', [(124, 'stopped at its timeout (3600 s'), (2, 'failed with exit status 2')])
def test_a_failed_or_timed_out_job_still_closes_and_fails_the_run(rc, words):
    p = plan()
    job = {'changed': True, 'rc': rc, 'failed': True, 'stdout_lines': [], 'stderr_lines': ['boom'], 'msg': 'non-zero'}
    out = FILTERS['aem_window_result']({'recover': {}, 'open': read_ahead(32, 512), 'job': job,
                                        'failure': {'task': 'Run the job, stopped at its timeout', 'msg': 'non-zero'},
                                        'close': loop(read_ahead(512, 32))}, p)
    assert out['failed'] and words in out['msg'] and out['job']['timed_out'] == (rc == 124)
    assert out['closed']['devices'][0]['after_kb'] == 32
    assert 'failed inside the window' not in out['msg']  # the job's own words, once


def test_open_alone_says_the_window_stays_open():
    p = plan(run_tags=['open'], command=None, timeout=None)
    out = FILTERS['aem_window_result']({'recover': {}, 'open': read_ahead(32, 512), 'job': {}, 'failure': None,
                                        'close': {}}, p)
    assert not out['failed'] and out['closed'] is None and out['job'] is None
    assert out['msg'] == 'the window opened: dm-0 32 -> 512 KiB. The window stays open: close it with --tags close after the job.'


def test_an_open_that_failed_is_named_and_fails_the_run():
    p = plan()
    out = FILTERS['aem_window_result']({'recover': {}, 'open': {}, 'job': {'skipped': True}, 'close': loop(
        read_ahead(32, 32)), 'failure': {'task': 'Open', 'msg': 'sysfs refused'}}, p)
    assert out['failed'] and 'failed inside the window: Open: sysfs refused' in out['msg']
