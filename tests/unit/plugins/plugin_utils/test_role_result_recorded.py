# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's result from step records recorded on the VM (tests/unit/fixtures/role_steps).

Each fixture is one run of the aem_tuning role in molecule's controllers scenario (the newest controller, full) or
in its default scenario (ansible-core 2.16, the oldest; the names core216_*): every
variable the lookup aemops.os_tuning.aem_tuning read for it (what each step registered, the run's start, the
settings) and the verdict the role built from them there (scripts/record-role-steps.py says how to record them
again, and each fixture's ``recorded`` where and when it was). Here the lookup's gathering and the filter
aemops.os_tuning.verified run again on those records: the result must be the one the VM run published, it must
follow docs/result.md (every key, each of its type), and each case must say what it is about.

A result builder that changes what it builds fails here: record the fixtures again (and say what changed in the
changelog), or mend the builder. A variable of the role added since (aem_tuning_*) is read as its default; a step's
record added since fails here too, naming it: record again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import io
import json
import os
import re

import pytest

from ansible_collections.aemops.os_tuning.plugins.filter import aem_tuning as filters
from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result

yaml = pytest.importorskip('yaml')

HERE = os.path.dirname(os.path.realpath(__file__))
TOP = os.path.join(HERE, os.pardir, os.pardir, os.pardir, os.pardir)
FIXTURES = os.path.join(TOP, 'tests', 'unit', 'fixtures', 'role_steps')
CASES = ('refused', 'lost_at_reboot', 'audit_no_pidfd_getfd', 'apply_no_pidfd_getfd_restart', 'apply_reboot_with_aem',
         'first_apply', 'apply_refresh_and_restart_needed', 'audit_drift', 'audit_compliant',
         # molecule default, ansible-core 2.16: its templating of the records, io_probe, a backout
         'core216_check_mode', 'core216_backout', 'core216_first_apply_probe', 'core216_second_apply')
FILTERS = filters.FilterModule().filters()
VERIFIED = FILTERS['verified']
# Text as JSON gives it back (unicode on Python 2).
STRINGS = (str, type(u''))


def fixture(case):
    with io.open(os.path.join(FIXTURES, case + '.json'), encoding='utf-8') as f:
        return json.load(f)


def defaults():
    with io.open(os.path.join(TOP, 'roles', 'aem_tuning', 'defaults', 'main.yml'), encoding='utf-8') as f:
        return yaml.safe_load(f)


def steps_of(recorded):
    """The steps as the lookup gathers them, from the recorded variables (as ansible.builtin.vars reads them: a name
    that is not there is undefined, but for the role's public variables added since, read as their defaults)."""
    variables, role_defaults = recorded['variables'], defaults()

    def read(names, default=None):
        out = []
        for name in names:
            if name in variables:
                out.append(variables[name])
            elif name in role_defaults:
                out.append(role_defaults[name])
            elif default is not None:
                out.append(default)
            else:
                raise KeyError('%s was not recorded in %s: record the fixtures again '
                               '(scripts/record-role-steps.py)' % (name, recorded['recorded']['case']))
        return out
    return role_result.gather_steps(read)


def rebuilt(case):
    """The verdict the filter builds from the case's records, as JSON carries it, without the facts (a fixture
    keeps none: they are the facts after, which the variables have)."""
    out = json.loads(json.dumps(VERIFIED(steps_of(fixture(case)))))
    out.pop('facts')
    return out


def result(case):
    return rebuilt(case)['result']


def test_every_case_is_recorded_and_nothing_else():
    assert sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(FIXTURES, '*.json'))) == sorted(CASES)


@pytest.mark.parametrize('case', CASES)
def test_the_builder_gives_the_result_the_vm_run_published(case):
    recorded = fixture(case)
    assert recorded['recorded']['case'] == case and recorded['recorded']['commit']
    assert rebuilt(case) == recorded['verified']


def documented_keys():
    """docs/result.md's table: each key with the types its row gives (one for all the row's keys, or one each)."""
    with io.open(os.path.join(TOP, 'docs', 'result.md'), encoding='utf-8') as f:
        rows = [line.split('|')[1:3] for line in f if re.match(r'^\| `\w+`', line)]
    keys = {}
    for names, types in rows:
        names = re.findall(r'`(\w+)`', names)
        types = [t.strip() for t in re.split(r',\s*(?![^()]*\))', types.strip())]
        for i, name in enumerate(names):
            keys[name] = types[i] if len(types) == len(names) else types[0]
    return keys


def of_type(value, kind):
    """Whether ``value`` is of a type docs/result.md names: int, str, bool, dict, list, 'list of T', 'T or null'."""
    if kind.endswith(' or null'):
        return value is None or of_type(value, kind[:-len(' or null')])
    if kind.startswith('list of '):
        return isinstance(value, list) and all(of_type(v, kind[len('list of '):]) for v in value)
    simple = {'int': lambda v: isinstance(v, int) and not isinstance(v, bool),
              'str': lambda v: isinstance(v, STRINGS), 'bool': lambda v: isinstance(v, bool),
              'dict': lambda v: isinstance(v, dict), 'list': lambda v: isinstance(v, list)}
    return simple[kind](value)


def test_the_documented_table_is_read_whole():
    keys = documented_keys()
    assert keys['schema_version'] == 'int' and keys['check_mode'] == 'bool' and keys['misses_count'] == 'int'
    assert keys['lost'] == 'dict or null' and keys['misses'] == 'list of dict' and keys['started'] == 'str'
    assert keys['verified'] == 'str or null' and keys['changes'] == 'list of dict'


@pytest.mark.parametrize('case', CASES)
def test_the_result_is_docs_result_md_every_key_of_its_type(case):
    r, keys = result(case), documented_keys()
    assert sorted(r) == sorted(keys)
    assert [k for k in sorted(keys) if not of_type(r[k], keys[k])] == []
    assert r['schema_version'] == role_result.SCHEMA


def test_the_type_check_can_fail():
    assert not of_type(True, 'int') and not of_type(None, 'dict') and not of_type([1], 'list of dict')
    assert of_type(None, 'int or null') and of_type([], 'list of dict')


def test_apply_with_a_reboot_records_each_change_the_boots_and_aem():
    r = result('apply_reboot_with_aem')
    kinds = [c['kind'] for c in r['changes']]
    assert 'reboot' in kinds and kinds.index('aem') < kinds.index('reboot'), kinds
    assert r['reboot']['done'] and r['reboot']['boot_id_before'] != r['reboot']['boot_id_after']
    assert r['aem']['ok'] and r['aem']['status'] == 200 and r['aem']['why']
    assert r['compliant'] and r['error'] == '' and r['lost'] is None


def test_the_first_apply_keeps_the_snapshot_then_sets_read_ahead_and_thp():
    r = result('first_apply')
    assert [c['kind'] for c in r['changes']][:1] == ['snapshot'] and r['snapshot_taken']
    assert {'read_ahead', 'thp'} <= set(c['kind'] for c in r['changes'])
    before, after = r['readings']['before'], r['readings']['after']
    assert r['compliant'] and after['thp']['enabled'] == 'never' and before['read_ahead_kb'] != after['read_ahead_kb']
    assert set(after['read_ahead_kb'][d] for d in after['paths'].values()) == {r['read_ahead_kb']}


def test_an_audit_changes_nothing_and_reads_the_host_once():
    for case in ('audit_compliant', 'audit_drift', 'audit_no_pidfd_getfd'):
        r = result(case)
        assert r['mode'] == 'audit' and r['changes'] == [] and r['reboot']['done'] is False, case


def test_an_audit_of_the_tuned_host_is_compliant():
    out = rebuilt('audit_compliant')
    assert out['ok'] and out['text'] == 'compliant' and out['result']['misses_count'] == 0


def test_an_audit_after_drift_names_the_device_and_fails():
    out = rebuilt('audit_drift')
    misses = [m for m in out['result']['misses'] if m['kind'] == 'read_ahead']
    assert not out['ok'] and misses and out['result']['misses_failing_count'] >= 1
    assert all(m['subject'] in out['fail_msg'] for m in misses)


def test_a_refused_run_changed_nothing_and_names_why():
    out = rebuilt('refused')
    r = out['result']
    assert r['failed_before_change'] and r['changes'] == [] and r['errors'][0]['phase'] == 'check'
    assert r['error'] and out['error_msg'].startswith(r['host'] + ': ' + r['error'])


def test_a_host_lost_at_the_reboot_still_has_a_result():
    r = result('lost_at_reboot')
    assert r['lost']['step'] == 'reboot' and r['lost']['since'] and not r['compliant']
    assert r['errors'][-1]['phase'] == 'change' and r['errors'][-1]['at'] == r['lost']['at']
    assert r['readings']['after'] is None and r['reboot']['done'] is False


def test_no_pidfd_getfd_audit_names_aem_for_a_restart_never_a_refresh():
    out = rebuilt('audit_no_pidfd_getfd')
    readers = out['result']['readers']
    assert readers['kernel_refresh'] is False and readers['aem_needs_restart']
    restart = [m for m in out['result']['misses'] if m['kind'] == 'reader_restart']
    assert restart and all(m['unit'] == readers['aem_unit'] and not m.get('deferred') for m in restart)
    assert not out['ok'] and 'restart it in your next window' in out['fail_msg']


def test_no_pidfd_getfd_apply_restarts_aem_and_is_compliant():
    r = result('apply_no_pidfd_getfd_restart')
    assert r['readers']['kernel_refresh'] is False and r['readers']['aem_restarted']
    assert r['aem']['ok'] and r['compliant'] and not r['readers']['needs_restart']


def test_apply_refreshes_one_reader_in_place_and_names_the_other_for_a_restart():
    r = result('apply_refresh_and_restart_needed')
    refreshed, restart = r['readers']['refreshed'], r['readers']['needs_restart']
    assert refreshed and restart and not set(p['pid'] for p in refreshed) & set(p['pid'] for p in restart)
    assert not r['compliant'] and r['misses_failing_count'] >= 1


@pytest.mark.parametrize('case, first', [
    ('refused', 'aemvm: stopped before any change: '),
    ('lost_at_reboot', 'aemvm: LOST: did not come back after the reboot at '),
    ('audit_compliant', 'aemvm: compliant (present, audit mode), nothing changed'),
    ('audit_drift', 'aemvm: not compliant (present, audit mode), nothing changed'),
    ('first_apply', 'aemvm: compliant (present, apply mode), '),
])
def test_the_play_output_words_the_recorded_results(case, first):
    # The role's two summaries (plugins/plugin_utils/aem_reports.py) over what the VM runs read and built.
    lines = FILTERS['result_brief'](result(case))
    assert lines[0].startswith(first), lines
    if case == 'first_apply':
        assert '  /srv/aem/crx-quickstart/repository (dm-0): 4096 -> 32 KiB' in lines
        assert any('THP always -> never' in x for x in lines)
    summary = FILTERS['summary_before'](steps_of(fixture(case)))
    assert summary[0].startswith('aemvm: debian ') and summary[-1] == '', summary
    targets = steps_of(fixture(case))['targets'] or []
    assert all(any(row.startswith(t) for row in summary) for t in targets), (targets, summary)


def test_check_mode_says_what_it_would_change_and_writes_no_report():
    out = rebuilt('core216_check_mode')
    r = out['result']
    assert r['check_mode'] and r['changes'] and r['report'] == '' and r['snapshot_taken'] == ''
    assert FILTERS['result_brief'](r)[0].endswith('%d change(s) it would make' % len(r['changes']))


def test_the_first_apply_measures_small_reads_before_and_after():
    r = result('core216_first_apply_probe')
    before, after = r['probe']['before'], r['probe']['after']
    assert before['read_ahead_kb'] > after['read_ahead_kb'] == r['read_ahead_kb']
    assert before['read_amplification'] > after['read_amplification']
    assert r['ebs'] and all(e['after']['reason'].startswith('no EBS statistics') for e in r['ebs'])


def test_the_second_apply_changes_nothing_and_keeps_the_first_runs_snapshot():
    r, first = result('core216_second_apply'), result('core216_first_apply_probe')
    assert r['changes'] == [] and r['compliant'] and r['snapshot_taken'] == first['snapshot_taken'] != ''


def test_a_backout_restores_the_first_runs_values():
    r = result('core216_backout')
    assert r['state'] == 'absent' and r['read_ahead_kb'] is None and r['compliant']
    kinds = [c['kind'] for c in r['changes']]
    assert 'snapshot' in kinds and [c['action'] for c in r['changes'] if c['kind'] == 'snapshot'] == ['removed']
