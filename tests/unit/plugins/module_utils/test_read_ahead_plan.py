# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/read_ahead_plan.py and the host model (host.Host) it plans from.

The host is fakehost.nitro_host: root on nvme0n1p1, the AEM repository on an LV (dm-0) over
nvme1n1, without tuned. ``lvs`` answers "auto"; no other command may run while planning.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, files, host as host_model, read_ahead_plan, udev_rules
from fakehost import HostReads, nitro_host, tree_checksum

REPO = '/opt/aem/crx-quickstart/repository'
LV_MATCH = 'ENV{DM_UUID}=="LVM-%s"' % ('x' * 64)


class Tools(object):
    def __init__(self):
        self.calls = []

    def run(self, argv, check_rc=False, **kwargs):
        self.calls.append(list(argv))
        if argv[0].endswith('/lvs'):
            return 0, '  auto\n', ''
        if argv[0].endswith('/lvchange'):
            return 0, '', ''
        raise AssertionError('unexpected command %r' % (argv,))

    def which(self, name):
        return {'lvs': '/usr/sbin/lvs', 'lvchange': '/usr/sbin/lvchange'}.get(name)


def params(**kw):
    p = {'devices': [], 'paths': [REPO], 'read_ahead_kb': 32, 'persist': True, 'state': 'present',
         'underlying': False, 'ignore_missing': False, 'tuned_override': True, 'rules_file': udev_rules.RULES_FILE}
    p.update(kw)
    return p


@pytest.fixture
def host(tmpdir):
    fake = nitro_host(tmpdir)
    fake.mkdir('/etc/udev/rules.d')
    return fake


def count_reads(monkeypatch):
    """Count the reads of the udev database and of mountinfo (blockdev's read_text)."""
    counts = {'udev': 0, 'mountinfo': 0}
    real = blockdev.read_text

    def read_text(path):
        if '/run/udev/data/' in path:
            counts['udev'] += 1
        if path.endswith('/proc/self/mountinfo'):
            counts['mountinfo'] += 1
        return real(path)
    monkeypatch.setattr(blockdev, 'read_text', read_text)
    return counts


def make_plan(host, tools, **kw):
    p = params(**kw)
    kb, warnings = read_ahead_plan.validate(p)
    return read_ahead_plan.plan(read_ahead_plan.ReadAheadHost(host.root, tools.run, tools.which), p, False, kb, warnings)


def test_a_run_on_an_lv_reads_the_udev_database_and_mountinfo_once(host, monkeypatch):
    counts = count_reads(monkeypatch)
    plan = make_plan(host, Tools())
    # The udev entries of the three whole disks the tuned scan may look at would be at most
    # one each; without tuned only dm-0 is looked at, once.
    assert counts == {'udev': 1, 'mountinfo': 1}
    assert [e['name'] for e in plan['devices']] == ['dm-0']


def test_without_a_snapshot_blockdev_reads_every_time(host, monkeypatch):
    counts = count_reads(monkeypatch)
    blockdev.udev_db(host.root, 'dm-0')
    blockdev.udev_db(host.root, 'dm-0')
    assert counts['udev'] == 2
    snap = host_model.Host(host.root)
    first = blockdev.udev_db(snap, 'dm-0')
    first[0]['DM_UUID'] = 'changed by a caller'
    assert blockdev.udev_db(snap, 'dm-0')[0]['DM_UUID'] == 'LVM-' + 'x' * 64
    assert counts['udev'] == 3
    assert snap == host.root


def test_plan_changes_nothing_and_runs_only_lvs(host):
    tools = Tools()
    before = tree_checksum(host.root)
    plan = make_plan(host, tools)
    assert tree_checksum(host.root) == before
    assert [c[0] for c in tools.calls] == ['/usr/sbin/lvs']
    entry = plan['devices'][0]
    assert (entry['before_kb'], entry['planned_kb'], entry['lvm_target']) == (4096, 32, 64)
    assert entry['rule'] == ('ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", '
                             'ENV{DM_UUID}=="LVM-%s", ATTR{queue/read_ahead_kb}="32"' % ('x' * 64))
    assert plan['changed'] is True and plan['file_changed'] is True


def test_apply_leaves_the_plan_as_it_was_and_reads_back(host, monkeypatch):
    tools = Tools()
    plan = make_plan(host, tools)
    frozen = copy.deepcopy(plan)
    warnings = []
    result = read_ahead_plan.apply(plan, tools.run, tools.which,
                                   lambda path, text: files.atomic_write(path, text, 0o644), warnings.append)
    assert plan == frozen
    assert result == {'changed': True, 'after_kb': {'dm-0': 32}, 'tuned_actions': []}
    assert host.read_ahead('dm-0') == 32
    assert tools.calls[-1] == ['/usr/sbin/lvchange', '--readahead', '64', 'vg_aem/lv_repo']
    assert warnings == ['udevadm not found: %s takes effect at the next boot.' % udev_rules.RULES_FILE]
    devices = read_ahead_plan.device_results(plan, result['after_kb'])
    assert devices[0]['after_kb'] == 32
    assert devices[0]['lvm'] == {'vg': 'vg_aem', 'lv': 'lv_repo', 'before': 'auto', 'after': 64}
    assert 'planned_kb' not in devices[0] and 'lvm_target' not in devices[0]


class AgentTools(Tools):
    """udevd runs and udevadm is installed: replaying the change events lets another agent (a competing udev rule,
    tuned on a profile switch) set dm-0 back to 4096 KiB, once, or (``persistent``) on every write too."""

    def __init__(self, host, persistent=False):
        Tools.__init__(self)
        self.host = host
        self.persistent = persistent
        self.triggered = False
        host.write('/run/udev/control', '')

    def set_back(self):
        self.host.write(self.host._devdir('dm-0') + '/queue/read_ahead_kb', '4096\n')

    def run(self, argv, check_rc=False, **kwargs):
        if argv[0] == '/usr/bin/udevadm':
            self.calls.append(list(argv))
            if argv[1] == 'trigger':
                self.triggered = True
                self.set_back()
            return 0, '', ''
        return Tools.run(self, argv, check_rc, **kwargs)

    def which(self, name):
        return '/usr/bin/udevadm' if name == 'udevadm' else Tools.which(self, name)


def write_file(path, text):
    files.atomic_write(path, text, 0o644)


def test_apply_reads_back_and_writes_again_what_another_agent_set_back(host):
    tools = AgentTools(host)
    plan = make_plan(host, tools)
    result = read_ahead_plan.apply(plan, tools.run, tools.which, write_file, [].append)
    assert [c[1] for c in tools.calls if c[0] == '/usr/bin/udevadm'] == ['control', 'trigger', 'settle']
    assert result == {'changed': True, 'after_kb': {'dm-0': 32}, 'tuned_actions': []}
    assert host.read_ahead('dm-0') == 32


def test_apply_fails_when_the_value_does_not_stay(host, monkeypatch):
    tools = AgentTools(host)
    plan = make_plan(host, tools)
    real = blockdev.write_read_ahead_kb

    def write_read_ahead_kb(root, name, kb):
        back = real(root, name, kb)
        if tools.triggered:  # the agent sets it back on every write from now on
            tools.set_back()
            return 4096
        return back
    monkeypatch.setattr(blockdev, 'write_read_ahead_kb', write_read_ahead_kb)
    with pytest.raises(read_ahead_plan.ApplyError) as info:
        read_ahead_plan.apply(plan, tools.run, tools.which, write_file, [].append)
    assert str(info.value) == ('dm-0 still reads 4096 KiB after writing 32: something else sets it (conflicts: '
                               '[]).')
    assert info.value.extra == {'changed': True}


def test_device_results_in_check_mode_are_the_planned_values(host):
    plan = make_plan(host, Tools())
    devices = read_ahead_plan.device_results(plan)
    assert devices[0]['after_kb'] == 32
    assert devices[0]['lvm']['after'] == 64
    assert plan['devices'][0]['lvm'] == {'vg': 'vg_aem', 'lv': 'lv_repo', 'before': 'auto'}


def test_plan_error_keeps_the_warnings_and_changed_false(host):
    with pytest.raises(read_ahead_plan.PlanError) as info:
        make_plan(host, Tools(), paths=[REPO, '/nonexistent'], rules_file='/etc/udev/rules.d/90-x.conf')
    assert info.value.extra == {'changed': False}
    assert info.value.warnings[0].startswith('rules_file /etc/udev/rules.d/90-x.conf does not end in .rules')


@pytest.mark.parametrize('value, expected', [(32, 32), ('32', 32), (u'32', 32), (None, None)])
def test_strict_kb_takes(value, expected):
    assert read_ahead_plan.strict_kb(value) == expected


@pytest.mark.parametrize('value', [True, False, '3.5', u'\u0663\u0662', 'x', 1000.0, 32.0, 32.5, ''])
def test_strict_kb_refuses(value):
    with pytest.raises(ValueError):
        read_ahead_plan.strict_kb(value)


def test_the_snapshot_reads_each_of_its_sources_once(host, monkeypatch):
    # With tuned's profile active the plan asks several times, in resolving, planning the udev rules and the
    # tuned child, and checking conflicts, for the rules file, the child profile and profile_mode
    # (tuned.child_state), lvs, mountinfo and the LV's udev entry: the host model (host.Host) reads each once.
    # tuned's state files (active_profile, the pid) are still read again by the tuned functions behind it, so they
    # are not counted here (test_read_ahead.py counts a whole run). The rules file is read once and opened once
    # more, for its inode flags (files.check_owned_target: immutable or append-only) before the write.
    host.add_tuned()
    host.write(udev_rules.RULES_FILE, udev_rules.render({'ATTRS{serial}=="vol0rootrootrootroot"': 32}, {}))
    tools = Tools()
    reads = HostReads(host.root, monkeypatch)
    plan = make_plan(host, tools)
    assert plan['tuned_plan']['after'] is not None
    assert dict((p, reads.counts.get(p)) for p in (
        udev_rules.RULES_FILE, '/etc/tuned/aemops-os-tuning/tuned.conf', '/etc/tuned/profile_mode',
        '/proc/self/mountinfo', '/run/udev/data/b253:0')) == {
        '/etc/udev/rules.d/90-aemops-read-ahead.rules': 2, '/etc/tuned/aemops-os-tuning/tuned.conf': 1,
        '/etc/tuned/profile_mode': 1, '/proc/self/mountinfo': 1, '/run/udev/data/b253:0': 1}
    assert tools.calls == [['/usr/sbin/lvs', '--noheadings', '--nosuffix', '--units', 's', '-o', 'lv_read_ahead',
                            'vg_aem/lv_repo']]
