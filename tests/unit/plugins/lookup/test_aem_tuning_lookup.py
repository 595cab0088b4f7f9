# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lookup aemops.os_tuning.aem_tuning: the role's variables by the names role_result.py gives them, each read
as ansible.builtin.vars reads it. Here the builtin lookup is a stand-in that reads the variables as given; the real
one (templating each value) runs under ansible-playbook in tests/runner (audit on localhost, ansible-core 2.16 and
2.21), and in every molecule scenario."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

import pytest

yaml = pytest.importorskip('yaml')
pytest.importorskip('ansible.plugins.lookup')

from ansible.errors import AnsibleError  # noqa: E402

from ansible_collections.aemops.os_tuning.plugins.lookup import aem_tuning  # noqa: E402
from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result  # noqa: E402

ROLE = os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, os.pardir, os.pardir, os.pardir, 'roles',
                    'aem_tuning')


class Undefined(Exception):
    pass


class BuiltinVars(object):
    """ansible.builtin.vars as the lookup calls it: the values of the names, or the default, or undefined."""

    def run(self, terms, variables, default=None):
        missing = [t for t in terms if t not in variables and default is None]
        if missing:
            raise Undefined('No variable named %r was found.' % missing[0])
        return [variables.get(t, default) for t in terms]


class Loader(object):
    def get(self, name, loader=None, templar=None):
        assert name == 'ansible.builtin.vars'
        return BuiltinVars()


@pytest.fixture(autouse=True)
def builtin_vars(monkeypatch):
    monkeypatch.setattr(aem_tuning, 'lookup_loader', Loader())


def role_file(*parts):
    with open(os.path.join(ROLE, *parts)) as f:
        return yaml.safe_load(f)


def role_variables(**extra):
    """The role's defaults and vars, the magic variables the settings read, and before.yml's empty records."""
    variables = dict(role_file('defaults', 'main.yml'), **role_file('vars', 'main.yml'))
    variables.update({'inventory_hostname': 'aem1', 'ansible_play_name': 'Tune', 'ansible_check_mode': False,
                      'aem_tuning_report_dir': '/srv/aem-tuning-reports'})
    variables.update(('__aem_tuning_' + name, {}) for name in role_result.STEPS)
    variables.update(extra)
    return variables


def lookup(variables):
    return aem_tuning.LookupModule()


def test_the_settings_are_the_roles_variables_templated_with_their_types():
    variables = role_variables()
    settings, = lookup(variables).run(['settings'], variables=variables)
    assert settings['report_dir'] == '/srv/aem-tuning-reports'
    assert settings['host'] == 'aem1' and settings['play'] == 'Tune' and settings['check_mode'] is False
    assert settings['read_ahead_kb'] is None and settings['sweep_duration'] == 5 and settings['reports'] is True
    assert settings['snapshot_path'] == '/etc/ansible/facts.d/aem_tuning_before.fact'
    # Every public variable the decisions read is one of the role's (a misspelt name would read as undefined).
    assert all('aem_tuning_' + name in variables for name in role_result.PUBLIC)


def test_the_intent_from_the_roles_defaults_is_the_one_before_yml_built_in_jinja():
    variables = role_variables()
    steps, = lookup(variables).run(['steps'], variables=variables)
    d = role_file('defaults', 'main.yml')
    # before.yml's expression before 0.3.0, key by key.
    assert role_result.intent(steps['settings']) == {
        'state': d['aem_tuning_state'], 'mode': d['aem_tuning_mode'], 'read_ahead_kb': d['aem_tuning_read_ahead_kb'],
        'sweep': {'values': d['aem_tuning_sweep_values'], 'readers': d['aem_tuning_sweep_readers'],
                  'duration': d['aem_tuning_sweep_duration'], 'size_mb': d['aem_tuning_sweep_size_mb'],
                  'tolerance_pct': d['aem_tuning_sweep_tolerance_pct'], 'volume_type': d['aem_tuning_volume_type'],
                  'volume_size_gb': d['aem_tuning_volume_size_gb'], 'iops': d['aem_tuning_volume_iops'],
                  'throughput_mibps': d['aem_tuning_volume_throughput_mibps']},
        'sweep_force': d['aem_tuning_sweep_force'], 'sweep_record': '/etc/ansible/facts.d/aem_tuning_sweep.fact',
        'paths': d['aem_tuning_paths'], 'candidates': d['aem_tuning_repository_candidates'],
        'devices': d['aem_tuning_devices'], 'underlying': d['aem_tuning_underlying'], 'thp': d['aem_tuning_thp'],
        'thp_defrag': d['aem_tuning_thp_defrag'], 'thp_persist': d['aem_tuning_thp_persist'],
        'aem_service': d['aem_tuning_aem_service']}


def test_the_steps_are_the_records_by_step_name_with_the_settings():
    variables = role_variables(__aem_tuning_read_ahead={'changed': True, 'devices': [{'name': 'nvme1n1'}]},
                               __aem_tuning_errors=[{'phase': 'change', 'task': 'Set THP', 'message': 'boom'}],
                               __aem_tuning_run={'targets': ['/opt/aem'], 'choice': {'kb': 32}})
    steps, = lookup(variables).run(['steps'], variables=variables)
    assert steps['read_ahead'] == variables['__aem_tuning_read_ahead'] and steps['targets'] == ['/opt/aem']
    assert steps['error'] == 'Set THP: boom' and steps['choice'] == {'kb': 32} and 'run' not in steps
    assert steps['settings']['mode'] == 'apply'


def test_a_step_record_that_was_never_set_fails_as_an_undefined_variable_would():
    variables = role_variables()
    del variables['__aem_tuning_reboot_done']
    with pytest.raises(Undefined, match='__aem_tuning_reboot_done'):
        lookup(variables).run(['steps'], variables=variables)
    # A play with no name: the settings' play is empty.
    del variables['ansible_play_name']
    assert lookup(variables).run(['settings'], variables=variables)[0]['play'] == ''


def test_an_unknown_term_is_refused():
    variables = role_variables()
    with pytest.raises(AnsibleError, match='not one of record, settings, steps'):
        lookup(variables).run(['intent'], variables=variables)


def test_the_record_is_every_variable_the_steps_read_and_the_verdict_as_json_with_its_file():
    # verify.yml writes it on the controller where a scenario asks (tests/unit/fixtures/role_steps).
    variables = role_variables(__aem_tuning_run={'targets': ['/opt/aem'], 'started': '2026-12-05T10:00:00Z'},
                               __aem_tuning_verified={'ok': True, 'result': {'compliant': True}},
                               __aem_tuning_record_dir='/tmp/records', ansible_version={'full': '2.21.0'})
    record, = lookup(variables).run(['record'], variables=variables)
    data = json.loads(record['json'])
    assert data['verified'] == {'ok': True, 'result': {'compliant': True}} and data['controller'] == '2.21.0'
    assert role_result.gather_steps(lambda names, default=None: [data['variables'][n] for n in names]) == \
        lookup(variables).run(['steps'], variables=variables)[0]
    assert re.match(r'^/tmp/records/aem1-20261205T100000Z-[0-9a-f]{8}[.]json$', record['path']), record['path']
    # Another run's record is another file.
    variables['__aem_tuning_read_ahead'] = {'changed': True}
    assert lookup(variables).run(['record'], variables=variables)[0]['path'] != record['path']
