# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests for scripts/record-role-steps.py, which turns the role's records from a VM run into the result builder's
fixtures (tests/unit/fixtures/role_steps). The records here are the fixtures themselves, written back as a VM run
writes them (with the verdict's facts, which a fixture leaves out)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import importlib.util
import json
import os

import pytest

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
FIXTURES = os.path.join(TOP, 'tests', 'unit', 'fixtures', 'role_steps')
WHERE = {'commit': 'abc', 'date': '2026-12-06', 'scenario': 'molecule controllers'}


def _load():
    spec = importlib.util.spec_from_file_location('aemops_record_role_steps',
                                                  os.path.join(TOP, 'scripts', 'record-role-steps.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


record_steps = _load()


def as_recorded(tmpdir, skip=()):
    """Each fixture of the controllers scenario as the role writes its record (in time order by name), in a
    directory."""
    paths = []
    for n, path in enumerate(sorted(glob.glob(os.path.join(FIXTURES, '*.json')))):
        with open(path) as f:
            fixture = json.load(f)
        if fixture['recorded']['case'] in skip or record_steps.scenario_of(fixture) != 'controllers':
            continue
        record = {'variables': fixture['variables'], 'verified': dict(fixture['verified'], facts={}),
                  'controller': fixture['recorded']['controller']}
        out = tmpdir.join('aemvm-2026120%dT000000Z-%08x.json' % (n, n))
        out.write(json.dumps(record))
        paths.append(str(out))
    return paths


def test_every_fixture_is_the_case_it_is_named_for():
    # The cases' tests read each fixture for what its name says: the script's rules must agree.
    for path in glob.glob(os.path.join(FIXTURES, '*.json')):
        with open(path) as f:
            fixture = json.load(f)
        cases = record_steps.SCENARIOS[record_steps.scenario_of(fixture)][1]
        assert record_steps.case_of(fixture, cases) == fixture['recorded']['case'] == os.path.basename(path)[:-5]


def test_the_records_give_the_fixtures_back_without_the_verdicts_facts(tmpdir):
    out = record_steps.fixtures(as_recorded(tmpdir), WHERE, record_steps.CONTROLLERS)
    assert sorted(out) == sorted(c[0] for c in record_steps.CONTROLLERS)
    refused = out['refused']
    assert 'facts' not in refused['verified'] and refused['recorded']['commit'] == 'abc'
    assert refused['recorded']['controller'] == '2.21.5' and refused['recorded']['source'].startswith('aemvm-')


def test_a_run_without_every_case_writes_nothing_and_says_which(tmpdir, capsys, monkeypatch):
    records = tmpdir.mkdir('records')
    as_recorded(records, skip=('lost_at_reboot',))
    monkeypatch.setattr(record_steps, 'provenance', lambda scenario: WHERE)
    target = tmpdir.join('fixtures')
    assert record_steps.main(['record-role-steps.py', 'controllers', str(records), str(target)]) == 1
    assert 'lost_at_reboot' in capsys.readouterr().err and not target.check()


@pytest.mark.parametrize('content', ['[]', '{"variables": {}}', '{"variables": [], "verified": {"result": {}}}'])
def test_a_file_that_is_not_a_record_of_the_role_is_refused_naming_it(tmpdir, content):
    path = tmpdir.join('x.json')
    path.write(content)
    with pytest.raises(ValueError, match='x.json: not a record of the role'):
        record_steps.load(str(path))


def test_an_oversized_file_is_refused_unread(tmpdir, monkeypatch):
    monkeypatch.setattr(record_steps, 'MAX_BYTES', 10)
    path = tmpdir.join('x.json')
    path.write('{"variables": {}, "verified": {"result": {}}}')
    with pytest.raises(ValueError, match='over 10 bytes'):
        record_steps.load(str(path))
