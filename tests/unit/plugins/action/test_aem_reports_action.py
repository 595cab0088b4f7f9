# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action aemops.os_tuning.aem_reports: the reports from the play's host variables, and a task result that carries
none of them (the job events keep it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

pytest.importorskip('ansible.plugins.action')

from ansible.errors import AnsibleActionFail  # noqa: E402

from ansible_collections.aemops.os_tuning.plugins.action.aem_reports import ActionModule  # noqa: E402

try:
    from unittest import mock
except ImportError:  # Python 2.7
    import mock


def action(args, check_mode=False):
    task = mock.MagicMock(args=args, async_val=0, check_mode=check_mode, action='aemops.os_tuning.aem_reports')
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    return ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())


RESULT = {'schema_version': 3, 'host': 'aem1', 'play': 'Post', 'state': 'present', 'mode': 'audit', 'compliant': False,
          'misses_before_count': 1, 'misses': [{'kind': 'thp', 'subject': 'THP', 'message': 'enabled is always',
                                                'unit': None, 'deferred': False}], 'misses_count': 1,
          'misses_failing_count': 1, 'readings': {'before': {'os': {'id': 'rhel'}}}}


def task_vars():
    return {'hostvars': {'aem1': {'aem_tuning_result': RESULT, '__aem_tuning_before': {'block_devices': {}},
                                  '__aem_tuning_after': {}, 'ansible_facts': {'aem_tuning_result': RESULT}},
                         'aem2': {}},
            'ansible_play_hosts_all': ['aem1', 'aem2'], 'ansible_play_batch': ['aem1', 'aem2'], 'ansible_play_name': 'Post'}


def test_the_play_reports_are_written_and_the_result_carries_none_of_them(tmp_path):
    result = action({'directory': str(tmp_path)}).run(task_vars=task_vars())
    assert not result.get('failed') and result['changed'] is False
    assert sorted(os.path.relpath(p, str(tmp_path)) for p in result['written']) == [
        'aem1/after.json', 'aem1/before.json', 'aem1/report.md', 'summary.json', 'summary.md']
    assert result['hosts'] == 2 and result['with_result'] == 1
    assert result['msg'] == '%s/summary.md and summary.json: 1 of 2 hosts with a result' % tmp_path
    assert 'misses_before_count' not in json.dumps(result) and 'THP' not in json.dumps(result)
    with open(str(tmp_path / 'aem1' / 'report.md')) as f:
        assert '- THP: enabled is always' in f.read()


def test_the_summary_from_the_cache_writes_only_the_summary(tmp_path):
    result = action({'directory': str(tmp_path), 'source': 'cache'}).run(task_vars=task_vars())
    assert sorted(os.listdir(str(tmp_path))) == ['summary.json', 'summary.md']
    assert result['msg'].endswith(': 1 of 2 hosts with a cached result')


def test_check_mode_writes_nothing(tmp_path):
    result = action({'directory': str(tmp_path / 'r')}, check_mode=True).run(task_vars=task_vars())
    assert result['skipped'] is True and result['msg'] == 'check mode writes no report'
    assert not (tmp_path / 'r').exists()


def test_a_directory_that_cannot_be_written_fails_the_task(tmp_path):
    (tmp_path / 'file').write_text(u'not a directory')
    result = action({'directory': str(tmp_path / 'file')}).run(task_vars=task_vars())
    assert result['failed'] is True and 'the reports could not be written in' in result['msg']


def test_arguments_are_checked(tmp_path):
    with pytest.raises(AnsibleActionFail):
        action({'directory': str(tmp_path), 'source': 'elsewhere'}).run(task_vars=task_vars())
