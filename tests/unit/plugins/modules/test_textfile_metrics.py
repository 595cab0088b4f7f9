# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""textfile_metrics on the facts tuning_facts gathers on the fake Nitro host, as the aem_tuning role calls it.

The host is that of test_tuning_facts_intent.py: the repository on dm-0 (an LV over nvme1n1), read-ahead 4096 KiB
everywhere, tuned virtual-guest running, THP always. The text is read back with test_metrics.parse; the rules
themselves (escaping, the owned-file checks) are tested in module_utils/test_metrics.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.aemops.os_tuning.plugins.module_utils import files, metrics
from ansible_collections.aemops.os_tuning.plugins.modules import textfile_metrics, tuning_facts
from ansible_collections.aemops.os_tuning.tests.unit.plugins.module_utils.test_metrics import parse, value
from ansible_collections.aemops.os_tuning.tests.unit.plugins.modules.test_tuning_facts import REPO, el8_env
from ansible_collections.aemops.os_tuning.tests.unit.plugins.modules.test_tuning_facts_intent import intent
from ansible_collections.aemops.os_tuning.tests.unit.utils import run_module
from fakehost import tree_checksum

DIR = '/var/lib/node_exporter/textfile_collector'
TARGET = DIR + '/aemops_os_tuning.prom'


@pytest.fixture
def env(tmpdir, monkeypatch, module_exit):
    environment = el8_env(tmpdir, monkeypatch)
    monkeypatch.setattr(textfile_metrics, 'ROOT', environment.root)
    os.makedirs(files.root_path(environment.root, DIR), 0o755)
    return environment


@pytest.fixture
def os_tuning(env):
    """The facts after a run of the role: tuning_facts with the role's intent, the misses included."""
    result = run_module(tuning_facts.main, {'intent': intent(), 'fail_on_invalid': False})
    return result['ansible_facts']['os_tuning']


def args(facts, **kw):
    result = {'directory': DIR, 'facts': facts, 'read_ahead_kb': 32, 'run_mode': 'audit', 'run_state': 'present'}
    result.update(kw)
    return result


def test_the_facts_of_a_host_that_is_not_tuned_yet_become_metrics(env, os_tuning):
    result = run_module(textfile_metrics.main, args(os_tuning))
    assert result['changed'] is True and result['written'] is True and result['path'] == TARGET
    with open(files.root_path(env.root, TARGET)) as f:
        content = f.read()
    assert content == result['content']
    families = parse(content)
    assert value(families, 'aemops_os_tuning_compliant') == 0
    assert value(families, 'aemops_os_tuning_misses') == len(os_tuning['compliance']['misses']) > 0
    assert value(families, 'aemops_os_tuning_misses_by_kind', kind='read_ahead') >= 1
    assert value(families, 'aemops_os_tuning_read_ahead_bytes', device='dm-0') == 4096 * 1024
    assert value(families, 'aemops_os_tuning_read_ahead_wanted_bytes', device='dm-0') == 32 * 1024
    assert value(families, 'aemops_os_tuning_target_info', device='dm-0', target=REPO) == 1
    assert value(families, 'aemops_os_tuning_thp_info', enabled='always', defrag='madvise') == 1
    assert value(families, 'aemops_os_tuning_run_info', mode='audit', state='present') == 1
    sources = families['aemops_os_tuning_read_ahead_source_info']['samples']
    assert set(lab['device'] for lab, _v in sources) == set(
        n for n, d in os_tuning['block_devices'].items() if d.get('read_ahead_kb') is not None)
    assert result['metrics'][0] == metrics.TIMESTAMP
    st = os.lstat(files.root_path(env.root, TARGET))
    assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_uid == 0


def test_a_second_run_on_the_same_state_rewrites_the_timestamp_and_is_not_changed(env, os_tuning, monkeypatch):
    run_module(textfile_metrics.main, args(os_tuning))
    first = os.lstat(files.root_path(env.root, TARGET))
    monkeypatch.setattr(textfile_metrics.time, 'time', lambda: 2000000000.5)
    result = run_module(textfile_metrics.main, args(os_tuning))
    assert result['changed'] is False and result['written'] is True
    assert '%s 2000000000.5\n' % metrics.TIMESTAMP in result['content']
    assert os.lstat(files.root_path(env.root, TARGET)).st_ino != first.st_ino  # replaced, atomically


def test_drift_by_hand_is_changed(env, os_tuning):
    run_module(textfile_metrics.main, args(os_tuning))
    os_tuning['block_devices']['dm-0']['read_ahead_kb'] = 32
    result = run_module(textfile_metrics.main, args(os_tuning))
    assert result['changed'] is True
    assert value(parse(result['content']), 'aemops_os_tuning_read_ahead_bytes', device='dm-0') == 32 * 1024


def test_check_mode_writes_nothing_and_diff_shows_the_file(env, os_tuning):
    before = tree_checksum(env.root)
    a = args(os_tuning)
    a.update({'_ansible_check_mode': True, '_ansible_diff': True})
    result = run_module(textfile_metrics.main, a)
    assert result['changed'] is True and result['written'] is False
    assert tree_checksum(env.root) == before
    assert result['diff']['before_header'] == TARGET + ' (absent)'
    assert result['diff']['after'] == result['content']


def test_an_unsafe_directory_fails_having_changed_nothing(env, os_tuning):
    os.chmod(files.root_path(env.root, DIR), 0o777)
    before = tree_checksum(env.root)
    result = run_module(textfile_metrics.main, args(os_tuning), failed=True)
    assert result['msg'].startswith('nothing was changed: the textfile directory %s is writable by group or '
                                    'others (mode 0777)' % DIR)
    assert result['changed'] is False
    assert tree_checksum(env.root) == before


def test_a_backout_and_an_error_are_reported(env, os_tuning):
    result = run_module(textfile_metrics.main, args(os_tuning, run_state='absent', run_mode='apply',
                                                    error='Apply read-ahead: permission denied'))
    families = parse(result['content'])
    assert 'aemops_os_tuning_read_ahead_wanted_bytes' not in families
    assert value(families, 'aemops_os_tuning_run_failed') == 1
    assert value(families, 'aemops_os_tuning_run_info', mode='apply', state='absent') == 1


def test_an_unknown_run_mode_is_refused_by_the_argument_spec(env, os_tuning):
    result = run_module(textfile_metrics.main, args(os_tuning, run_mode='sometimes'), failed=True)
    assert 'run_mode' in result['msg']
    assert not os.path.exists(files.root_path(env.root, TARGET))


def test_a_refusal_naming_a_non_ascii_path_is_reported(env, os_tuning):
    directory = u'/var/lib/m\u00e9triques'
    os.makedirs(files.root_path(env.root, directory), 0o777)
    os.chmod(files.root_path(env.root, directory), 0o777)
    result = run_module(textfile_metrics.main, args(os_tuning, directory=directory), failed=True)
    assert to_native(u'm\u00e9triques') in to_native(result['msg'])  # a native str on Python 2 and 3
    assert 'writable by group or others' in result['msg']


def test_aem_service_gives_aems_measured_bytes_per_fault(env, os_tuning):
    """The reader entries as tuning_facts gives them with the measurement: AEM's unit named without .service."""
    os_tuning['readers'] = dict(os_tuning.get('readers') or {}, stale=[], needs_restart=[
        {'unit': 'aem.service', 'pid': 2211, 'comm': 'java', 'basis': 'measured',
         'measured': {'kib_per_fault': 4090.5, 'faults': 64, 'seconds': 5.0, 'read_kib': 261792, 'rchar_kib': 512}},
    ], fine=[
        {'unit': 'aem.service', 'pid': 2212, 'comm': 'java', 'basis': 'inferred', 'measured': None},
        {'unit': 'sshd.service', 'pid': 900, 'comm': 'sshd', 'basis': 'measured',
         'measured': {'kib_per_fault': 9000.0, 'faults': 2, 'seconds': 5.0, 'read_kib': 18000, 'rchar_kib': 1}},
    ])
    result = run_module(textfile_metrics.main, args(os_tuning, aem_service='aem'))
    families = parse(result['content'])
    assert value(families, metrics.AEM_BYTES_PER_FAULT) == 4090.5 * 1024
    assert metrics.AEM_BYTES_PER_FAULT in result['metrics']
    result = run_module(textfile_metrics.main, args(os_tuning))
    assert metrics.AEM_BYTES_PER_FAULT not in parse(result['content'])
