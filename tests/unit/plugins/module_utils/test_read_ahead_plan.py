# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/read_ahead_plan.py and blockdev.HostSnapshot.

The host is fakehost.nitro_host: root on nvme0n1p1, the AEM repository on an LV (dm-0) over
nvme1n1, without tuned. ``lvs`` answers "auto"; no other command may run while planning.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, files, read_ahead_plan, udev_rules
from fakehost import nitro_host, tree_checksum

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
    return read_ahead_plan.plan(read_ahead_plan.Snapshot(host.root, tools.run, tools.which), p, False, kb, warnings)


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
    snap = blockdev.HostSnapshot(host.root)
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
    assert entry['rule'] == udev_rules.render_rule(LV_MATCH, 32)
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
