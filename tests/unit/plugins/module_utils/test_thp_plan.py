# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/thp_plan.py: the thp module's snapshot, plan and apply.

The host is a FakeHost tree without a boot loader (no os-release: the command line is not
managed) and without tuned, so no command runs; ``run`` fails the test if one does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import bootloader, files, thp, thp_plan, tuned
from fakehost import FakeHost, tree_checksum


def no_command(argv, *args, **kwargs):
    raise AssertionError('no command should run here: %r' % (argv,))


def no_tool(name):
    return None


def params(**kw):
    p = {'enabled': 'never', 'defrag': 'never', 'khugepaged_defrag': None, 'persist': None, 'state': 'present'}
    p.update(kw)
    return p


@pytest.fixture
def host(tmpdir, monkeypatch):
    fake = FakeHost(tmpdir)
    monkeypatch.setattr(thp, 'open', fake.thp_open(), raising=False)
    fake.add_thp('el8', enabled='always', defrag='madvise')
    return fake


def count_calls(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, wrapper)
    return calls


def write_host(path, text):
    files.atomic_write(path, text, 0o644)


def test_plan_reads_each_source_once(host, monkeypatch):
    detect = count_calls(monkeypatch, bootloader, 'detect')
    read_state = count_calls(monkeypatch, thp, 'read_state')
    running = count_calls(monkeypatch, bootloader, 'running')
    snap = thp_plan.ThpHost(host.root, no_command, no_tool)
    plan = thp_plan.plan(snap, params(persist=['cmdline']))
    # The command line is planned (method none), and reboot_required needs the facts again:
    # one detect serves both.
    assert len(detect) == 1
    assert len(read_state) == 1
    assert len(running) == 1
    assert plan['cmdline']['method'] == 'none'
    assert plan['warnings'] == ['the kernel command line is not managed here: %s' % plan['cmdline']['reason']]
    assert plan['reboot_required'] is False


def test_absent_reads_the_child_profile_once(host, monkeypatch):
    host.write(tuned.child_profile_path('/'), '[main]\nsummary=x\n')
    child_state = count_calls(monkeypatch, tuned, 'child_state')
    snap = thp_plan.ThpHost(host.root, no_command, no_tool)
    try:
        thp_plan.plan(snap, params(state='absent', persist=[]))
    except thp_plan.PlanError:
        pass  # what the damaged child says does not matter here, only how often it was read
    assert len(child_state) == 1


def test_plan_changes_nothing_and_apply_does_not_change_the_plan(host):
    before = tree_checksum(host.root)
    snap = thp_plan.ThpHost(host.root, no_command, no_tool)
    plan = thp_plan.plan(snap, params(persist=[]))
    assert tree_checksum(host.root) == before
    assert plan['changed'] is True
    assert plan['runtime_changes'] == ['enabled', 'defrag']
    offered = ['always', 'madvise', 'never']
    assert plan['runtime']['enabled'] == {'before': 'always', 'after': 'never', 'offered': offered}
    assert plan['new_baseline_text'] is not None and plan['baseline_changed'] is True
    frozen = copy.deepcopy(plan)
    result = thp_plan.apply(plan, no_command, write_host)
    assert plan == frozen
    assert result == {'changed': True, 'tuned_actions': []}
    assert host.thp('enabled') == 'never'
    assert host.thp('defrag') == 'never'
    assert host.exists(thp.BASELINE_FILE)
    # The baseline records the values found before the change.
    record = files.parse_baselines(host.read(thp.BASELINE_FILE))[0][0]
    assert (record['enabled'], record['defrag']) == ('always', 'madvise')


def test_second_plan_changes_nothing(host):
    first = thp_plan.plan(thp_plan.ThpHost(host.root, no_command, no_tool), params(persist=[]))
    thp_plan.apply(first, no_command, write_host)
    second = thp_plan.plan(thp_plan.ThpHost(host.root, no_command, no_tool), params(persist=[]))
    assert second['changed'] is False
    assert second['runtime_changes'] == []


def test_plan_error_carries_the_warnings_found_before(host):
    snap = thp_plan.ThpHost(host.root, no_command, no_tool)
    with pytest.raises(thp_plan.PlanError) as info:
        thp_plan.plan(snap, params(persist=['tuned', 'grub']))
    assert 'persist has unknown entries grub' in str(info.value)
    assert info.value.warnings == []
    with pytest.raises(thp_plan.PlanError) as info:
        thp_plan.plan(snap, params(persist=['tuned'], defrag='bogus'))
    assert 'defrag=bogus is not offered' in str(info.value)
    assert len(info.value.warnings) == 1 and info.value.warnings[0].startswith('persist includes tuned, but tuned '
                                                                               'is not installed')


def test_apply_reports_a_value_that_does_not_stick(host):
    plan = thp_plan.plan(thp_plan.ThpHost(host.root, no_command, no_tool), params(persist=[]))
    host.thp_stuck['enabled'] = 'always'
    with pytest.raises(thp_plan.ApplyError):
        thp_plan.apply(plan, no_command, write_host)
