# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Module-level tests for read_ahead, through main(), on a fake host.

``ROOT`` points at a fake tree (see fakehost.py). ``run_command`` and ``get_bin_path`` go to
fakehost.FakeTools (through utils.Env), which acts on that tree: ``lvs`` reports the LVM
read-ahead the fake VG metadata holds, ``lvchange`` updates it and the LV's read_ahead_kb as
LVM does, ``tuned-adm profile`` switches the active profile. So a second run sees what the
first one did, and idempotence is real.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, files, runstate, tuned, udev_rules
from ansible_collections.aemops.os_tuning.plugins.modules import read_ahead
from ansible_collections.aemops.os_tuning.tests.unit.utils import Env
from fakehost import STOCK_PROFILES, HostReads, deny_run_dir, nitro_host, nitro_tools, tree_checksum

RULES = udev_rules.RULES_FILE
LV_UUID = 'LVM-' + 'x' * 64
LV_MATCH = 'ENV{DM_UUID}=="%s"' % LV_UUID
# The rule read_ahead writes for the LV at 32 KiB, written out.
LV_RULE_32 = ('ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", ENV{DM_UUID}=="LVM-%s", '
              'ATTR{queue/read_ahead_kb}="32"' % ('x' * 64))
NVME1_MATCH = 'ATTRS{serial}=="vol0123456789abcdef0"'
NVME0_MATCH = 'ATTRS{serial}=="vol0rootrootrootroot"'
REPO = '/opt/aem/crx-quickstart/repository'


# ---------------------------------------------------------------------------------------------
# The fake host and its tools (fakehost.nitro_host, nitro_tools)

class ReadAheadEnv(Env):
    """The Env of read_ahead: the rules file and the devices' read-ahead."""

    def rules(self):
        """({match: kb}, {match: baseline}) of the owned rules file, or None when absent."""
        text = files.read_text(files.root_path(self.root, RULES))
        return None if text is None else udev_rules.parse(text)

    def ra(self, name):
        return self.host.read_ahead(name)

    def with_tuned(self, active='virtual-guest', running=False):
        self.host.add_tuned(active, running=running)
        return self


@pytest.fixture
def env(tmpdir, monkeypatch, module_exit):
    host = nitro_host(tmpdir.join('root'))
    host.mkdir('/etc/udev/rules.d')  # every host with udev has it; the module does not create it
    return ReadAheadEnv(read_ahead, host, nitro_tools(host, str(tmpdir.join('bin')))).attach(monkeypatch)


def only_device(result):
    assert len(result['devices']) == 1
    return result['devices'][0]


# ---------------------------------------------------------------------------------------------
# Check and diff mode

def test_check_mode_changes_nothing_and_reports_plan(env):
    env.with_tuned(running=True)
    before = tree_checksum(env.root)
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32}, check=True)
    assert tree_checksum(env.root) == before
    assert result['changed'] is True
    dev = only_device(result)
    assert dev['name'] == 'dm-0'
    assert dev['before_kb'] == 4096
    assert dev['after_kb'] == 32
    assert dev['lvm'] == {'vg': 'vg_aem', 'lv': 'lv_repo', 'before': 'auto', 'after': 64}
    assert env.tools.ran('lvchange') == []
    assert env.tools.ran('udevadm') == []
    assert env.tools.ran('tuned-adm', 'profile') == []


def test_diff_shows_the_new_rules_file(env):
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32}, check=True, diff=True)
    diff = result['diff'][0]
    assert diff['before_header'] == '%s (absent)' % RULES
    assert diff['before'] == ''
    assert diff['after_header'] == RULES
    assert LV_RULE_32 + '\n' in diff['after']
    assert udev_rules.parse(diff['after'])[1][LV_MATCH]['read_ahead_kb'] == 4096


def test_no_diff_without_diff_mode(env):
    assert 'diff' not in env.run({'devices': ['dm-0'], 'read_ahead_kb': 32}, check=True)


# ---------------------------------------------------------------------------------------------
# Setting

def test_set_on_path_tunes_the_lv_and_persists(env):
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert result['changed'] is True
    assert result['rules_file'] == RULES
    dev = only_device(result)
    assert dev['name'] == 'dm-0'
    assert dev['path'] == '/dev/mapper/vg_aem-lv_repo'
    assert dev['type'] == 'lvm'
    assert dev['targets'] == [REPO]
    assert dev['mount_points'] == ['/opt/aem']
    assert dev['stable_id'] == {'key': 'ENV{DM_UUID}', 'value': LV_UUID, 'serial': None}
    assert (dev['before_kb'], dev['after_kb']) == (4096, 32)
    assert dev['rule'] == LV_RULE_32
    # Real effects: sysfs, the rules file with its baseline, and the LVM metadata.
    assert env.ra('dm-0') == 32
    assert env.ra('nvme1n1') == 4096
    rules, baselines = env.rules()
    assert rules == {LV_MATCH: 32}
    assert baselines[LV_MATCH] == {'match': LV_MATCH, 'device': 'dm-0', 'read_ahead_kb': 4096,
                                   'lvm_read_ahead': 'auto'}
    assert env.tools.lvm['vg_aem/lv_repo']['read_ahead'] == 64
    assert env.tools.ran('lvchange') == [['/usr/sbin/lvchange', '--readahead', '64', 'vg_aem/lv_repo']]
    assert dev['lvm'] == {'vg': 'vg_aem', 'lv': 'lv_repo', 'before': 'auto', 'after': 64}
    # No udevd in this fake host (/run/udev/control is absent): udevadm would fail, so it is not run.
    assert not env.tools.ran('udevadm')


def test_a_64k_page_host_is_tuned_to_64_and_refuses_32_naming_the_page_size(env, monkeypatch):
    # RHEL 9 aarch64 kernel-64k: the kernel keeps read-ahead in 64 KiB pages.
    env.host.use_page_kb(monkeypatch, 64)
    before = tree_checksum(env.root)
    result = env.fail({'paths': [REPO], 'read_ahead_kb': 32})
    assert ('read_ahead_kb=32 is not a multiple of the page size (64 KiB): the kernel keeps read-ahead in pages and '
            'would store 0. Use a multiple of 64.') in result['msg']
    assert tree_checksum(env.root) == before
    result = env.run({'paths': [REPO], 'read_ahead_kb': 64})
    assert (only_device(result)['after_kb'], env.ra('dm-0')) == (64, 64)
    assert env.rules()[0] == {LV_MATCH: 64}


# The fake lvchange, as lvm2 v2_03_14 behaves (tools/lvchange.c, lib/activate/dev_manager.c,
# lib/metadata/metadata.c lv_calculate_readahead, libdm/libdm-common.c _set_dev_node_read_ahead).

def test_fake_lvchange_auto_takes_the_first_pvs_read_ahead_as_a_minimum(env):
    lvchange = env.tools.path('lvchange')
    assert env.tools.run([lvchange, '--readahead', '64', 'vg_aem/lv_repo'])[0] == 0
    assert env.ra('dm-0') == 32
    # linear LV over nvme1n1 (4096 KiB): auto gives the PV's read-ahead, raised to, never lowered to
    assert env.tools.run([lvchange, '--readahead', 'auto', 'vg_aem/lv_repo'])[0] == 0
    assert env.ra('dm-0') == 4096
    env.host.write(env.host._devdir('dm-0') + '/queue/read_ahead_kb', '8192\n')
    env.tools.run([lvchange, '--readahead', '64', 'vg_aem/lv_repo'])
    env.host.write(env.host._devdir('dm-0') + '/queue/read_ahead_kb', '8192\n')
    assert env.tools.run([lvchange, '--readahead', 'auto', 'vg_aem/lv_repo'])[0] == 0
    assert env.ra('dm-0') == 8192                           # a larger current value is kept (a minimum)
    # lvm2 refuses the value the LV already has
    assert env.tools.run([lvchange, '--readahead', 'auto', 'vg_aem/lv_repo']) == (
        5, '', '  Read ahead is already auto for vg_aem/lv_repo.\n')


def test_fake_lvchange_auto_on_a_striped_lv_is_twice_the_stripe(env):
    env.tools.add_lv('vg_aem/lv_repo', 'dm-0', read_ahead=64, stripe_kb=1024)
    env.host.write(env.host._devdir('dm-0') + '/queue/read_ahead_kb', '32\n')
    assert env.tools.run([env.tools.path('lvchange'), '--readahead', 'auto', 'vg_aem/lv_repo'])[0] == 0
    assert env.ra('dm-0') == 2048


def test_an_active_profile_with_a_function_include_is_named_not_evaluated(env):
    # Before, the include was skipped in silence and the profile's parents never seen.
    env.host.add_tuned('openshift', running=True, profiles=dict(
        STOCK_PROFILES, openshift='[main]\ninclude=${f:virt_check:virtual-guest:throughput-performance}\n'))
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert any(w.startswith('tuned profile openshift (/usr/lib/tuned/openshift/tuned.conf) includes '
                            '${f:virt_check:virtual-guest:throughput-performance}, which tuned evaluates on the host')
               for w in env.warnings), env.warnings


def test_rules_file_mode_and_header(env):
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    full = env.host.path(RULES)
    assert os.stat(full).st_mode & 0o777 == 0o644
    assert files.is_managed(env.host.read(RULES))


def test_set_by_partition_path_tunes_the_whole_disk(env):
    env.host.mkdir('/etc')
    dev = only_device(env.run({'paths': ['/etc'], 'read_ahead_kb': 64}))
    assert dev['name'] == 'nvme0n1'
    assert dev['type'] == 'nvme'
    assert env.ra('nvme0n1') == 64
    assert env.rules()[0] == {NVME0_MATCH: 64}


def test_set_by_partition_device_tunes_the_whole_disk(env):
    dev = only_device(env.run({'devices': ['/dev/nvme0n1p1'], 'read_ahead_kb': 64}))
    assert dev['name'] == 'nvme0n1'
    assert dev['targets'] == ['/dev/nvme0n1p1']
    assert env.ra('nvme0n1') == 64


def test_md_raid_is_tuned_and_persisted_by_md_uuid(env):
    md_uuid = '3f2c1a4b:5d6e7f80:91a2b3c4:d5e6f708'
    env.host.add_disk('sdb', '8:16', udev={'ID_SERIAL': 'disk-b'})
    env.host.add_partition('sdb', 'sdb1', '8:17')
    env.host.add_disk('sdc', '8:32', udev={'ID_SERIAL': 'disk-c'})
    env.host.add_partition('sdc', 'sdc1', '8:33')
    env.host.add_md('md127', '9:127', md_uuid, slaves=['sdb1', 'sdc1'], read_ahead_kb=256)
    env.host.mount('9:127', '/srv', 'ext4', '/dev/md127')
    result = env.run({'paths': ['/srv'], 'read_ahead_kb': 32, 'underlying': True})
    assert [(d['name'], d['type']) for d in result['devices']] == [('md127', 'md'), ('sdb', 'disk'), ('sdc', 'disk')]
    assert [env.ra(n) for n in ('md127', 'sdb', 'sdc')] == [32, 32, 32]
    assert env.rules()[0] == {'ENV{MD_UUID}=="%s"' % md_uuid: 32, 'ENV{ID_SERIAL}=="disk-b"': 32,
                              'ENV{ID_SERIAL}=="disk-c"': 32}
    env.run({'paths': ['/srv'], 'state': 'absent', 'underlying': True})
    assert [env.ra(n) for n in ('md127', 'sdb', 'sdc')] == [256, 128, 128]
    assert env.rules() is None


def test_udev_trigger_when_udevd_runs(env):
    env.host.write('/run/udev/control', '')
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert env.tools.ran('udevadm', 'trigger') == [[
        '/usr/bin/udevadm', 'trigger', '--action=change', '--subsystem-match=block', '--sysname-match=dm-0']]


# The fake udevadm runs the rules as udevd does (fakehost.FakeTools.udev_event: systemd man/udev.xml and
# src/udev/udev-rules.c token_match_attr): a rule the collection writes must set the value again on the
# next event, for every kind of identity it uses.

def _reset_and_trigger(env, names):
    """What a reboot or a hotplug leaves (the kernel's 128 KiB), then the change events udevd processes."""
    for name in names:
        env.host.write(env.host._devdir(name) + '/queue/read_ahead_kb', '128\n')
    rc, _out, _err = env.tools.run(['/usr/bin/udevadm', 'trigger', '--action=change', '--subsystem-match=block'])
    assert rc == 0
    return [env.ra(n) for n in names]


def test_the_rules_written_set_the_value_again_on_the_next_event(env):
    env.host.write('/run/udev/control', '')
    env.run({'devices': ['dm-0', 'nvme1n1'], 'read_ahead_kb': 32})
    assert env.rules()[0] == {LV_MATCH: 32, NVME1_MATCH: 32}   # ENV{DM_UUID}, ATTRS{serial} of the controller
    assert _reset_and_trigger(env, ['dm-0', 'nvme1n1', 'nvme0n1']) == [32, 32, 128]  # nvme0n1 has no rule
    assert env.tools.udev_unmodelled == []


def test_without_udevd_the_events_are_not_processed(env):
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert _reset_and_trigger(env, ['dm-0']) == [128]   # /run/udev/control is absent: the rule waits for the boot


def test_the_xen_and_md_rules_match_their_devices(env):
    env.host.write('/run/udev/control', '')
    parent = '/sys/devices/vbd-51760'
    env.host.write(parent + '/nodename', 'device/vbd/51760\n')
    env.host.mkdir('/sys/bus/xen')
    env.host.symlink(parent + '/subsystem', '../../bus/xen')
    devdir = env.host.add_disk('xvdd', '202:48', read_ahead_kb=4096, parent=parent)
    env.host.symlink(devdir + '/device', '../../../vbd-51760')
    env.host.add_disk('sdb', '8:16', udev={'ID_SERIAL': 'disk-b'})
    env.host.add_partition('sdb', 'sdb1', '8:17')
    env.host.add_md('md127', '9:127', 'a1b2c3d4:e5f6a7b8:c9d0e1f2:a3b4c5d6', slaves=['sdb1'])
    env.run({'devices': ['xvdd', 'sdb', 'md127'], 'read_ahead_kb': 32})
    assert sorted(env.rules()[0]) == ['ATTRS{nodename}=="device/vbd/51760"',
                                      'ENV{ID_SERIAL}=="disk-b"', 'ENV{MD_UUID}=="a1b2c3d4:e5f6a7b8:c9d0e1f2:a3b4c5d6"']
    assert _reset_and_trigger(env, ['xvdd', 'sdb', 'md127', 'sdb1']) == [32, 32, 32, 128]  # DEVTYPE partition


def test_a_serial_rule_for_a_controller_without_a_serial_file_never_matches(env):
    """Why the NVMe fallback uses the next identity (blockdev.stable_id_candidates): udev reads ATTRS{serial}
    from sysfs only, never from the udev database's ID_SERIAL_SHORT."""
    env.host.write('/run/udev/control', '')
    os.unlink(env.host.path(env.host._devdir('nvme1n1') + '/device/serial'))
    env.host.write('/etc/udev/rules.d/80-by-hand.rules', 'ACTION=="add|change", SUBSYSTEM=="block", '
                   'ENV{DEVTYPE}=="disk", ATTRS{serial}=="vol0123456789abcdef0", ATTR{queue/read_ahead_kb}="64"\n')
    assert _reset_and_trigger(env, ['nvme1n1']) == [128]
    dev = only_device(env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32}))
    assert dev['stable_id']['key'] == 'ENV{ID_SERIAL}'
    assert _reset_and_trigger(env, ['nvme1n1']) == [32]


def test_a_later_rules_file_overrides_ours_on_every_event(env):
    """udevd runs the files in name order: a 99- rule that sets read-ahead wins over the 90- one (the module
    reports such rules as competing)."""
    env.host.write('/run/udev/control', '')
    env.host.write('/usr/lib/udev/rules.d/99-vendor.rules',
                   'SUBSYSTEM=="block", KERNEL=="dm-[0-9]*|nvme*", ATTR{queue/read_ahead_kb}="4096"\n')
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert _reset_and_trigger(env, ['dm-0']) == [4096]
    env.host.write('/etc/udev/rules.d/99-vendor.rules', '# masked by the administrator\n')
    assert _reset_and_trigger(env, ['dm-0']) == [32]


def test_same_device_by_several_names_is_one_entry(env):
    result = env.run({'devices': ['dm-0', '/dev/mapper/vg_aem-lv_repo', '/dev/vg_aem/lv_repo'],
                      'paths': [REPO], 'read_ahead_kb': 32})
    dev = only_device(result)
    assert dev['targets'] == ['dm-0', '/dev/mapper/vg_aem-lv_repo', '/dev/vg_aem/lv_repo', REPO]


def test_second_run_is_idempotent(env):
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    before = tree_checksum(env.root)
    del env.tools.calls[:]
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert result['changed'] is False
    assert tree_checksum(env.root) == before
    assert env.tools.ran('lvchange') == []
    assert env.tools.ran('udevadm') == []
    assert only_device(result)['before_kb'] == 32


def test_changing_the_value_keeps_the_original_baseline(env):
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 128})
    rules, baselines = env.rules()
    assert rules == {LV_MATCH: 128}
    assert baselines[LV_MATCH]['read_ahead_kb'] == 4096
    assert baselines[LV_MATCH]['lvm_read_ahead'] == 'auto'
    assert env.ra('dm-0') == 128
    assert env.tools.lvm['vg_aem/lv_repo']['read_ahead'] == 256


def test_persist_false_changes_only_the_running_value(env):
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32, 'persist': False})
    assert result['changed'] is True
    assert env.ra('dm-0') == 32
    assert env.rules() is None
    assert env.tools.ran('lvchange') == []
    assert env.tools.lvm['vg_aem/lv_repo']['read_ahead'] == 'auto'
    assert only_device(result)['rule'] is None


def test_persist_false_warns_when_a_persisted_rule_disagrees(env):
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 64, 'persist': False})
    assert env.ra('dm-0') == 64
    assert env.rules()[0] == {LV_MATCH: 32}
    assert any('persisted rule' in w and '32 KiB' in w for w in env.warnings)


def test_zero_is_a_valid_value(env):
    env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 0})
    assert env.ra('nvme1n1') == 0
    assert env.rules()[0] == {NVME1_MATCH: 0}


def test_rules_for_other_devices_are_preserved(env):
    env.run({'devices': ['nvme0n1'], 'read_ahead_kb': 256})
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert env.rules()[0] == {NVME0_MATCH: 256, LV_MATCH: 32}
    env.run({'devices': ['dm-0'], 'state': 'absent'})
    rules, baselines = env.rules()
    assert rules == {NVME0_MATCH: 256}
    assert list(baselines) == [NVME0_MATCH]
    assert env.ra('nvme0n1') == 256


def test_underlying_tunes_the_disks_beneath_the_lv(env):
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32, 'underlying': True})
    assert [d['name'] for d in result['devices']] == ['dm-0', 'nvme1n1']
    assert result['devices'][1]['targets'] == [REPO]
    assert env.ra('dm-0') == 32
    assert env.ra('nvme1n1') == 32
    assert env.ra('nvme0n1') == 4096
    assert env.rules()[0] == {LV_MATCH: 32, NVME1_MATCH: 32}


def test_without_lvs_the_lvm_metadata_is_left_alone_with_a_warning(env):
    env.tools.uninstall('lvs')
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert 'lvm' not in only_device(result)
    assert env.ra('dm-0') == 32
    assert env.tools.lvm['vg_aem/lv_repo']['read_ahead'] == 'auto'
    assert any('lvs is not installed' in w for w in env.warnings)


def test_without_udevadm_warns_that_the_rule_applies_at_boot(env):
    env.tools.uninstall('udevadm')
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert env.rules()[0] == {LV_MATCH: 32}
    assert any('udevadm not found' in w for w in env.warnings)


def test_nvme_without_udev_db_is_persisted_by_controller_serial(env):
    os.unlink(env.host.path('/run/udev/data/b259:2'))
    dev = only_device(env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32}))
    assert dev['stable_id'] == {'key': 'ATTRS{serial}', 'value': 'vol0123456789abcdef0',
                                'serial': 'vol0123456789abcdef0'}
    assert env.rules()[0] == {'ATTRS{serial}=="vol0123456789abcdef0"': 32}


# ---------------------------------------------------------------------------------------------
# Backing out

def test_absent_restores_the_recorded_baseline(env):
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    del env.tools.calls[:]
    result = env.run({'paths': [REPO], 'state': 'absent'})
    assert result['changed'] is True
    dev = only_device(result)
    assert (dev['before_kb'], dev['after_kb']) == (32, 4096)
    assert env.ra('dm-0') == 4096
    assert env.tools.ran('lvchange') == [['/usr/sbin/lvchange', '--readahead', 'auto', 'vg_aem/lv_repo']]
    assert env.tools.lvm['vg_aem/lv_repo']['read_ahead'] == 'auto'
    assert not env.host.exists(RULES)
    assert env.host.exists('/etc/udev/rules.d')    # a shared directory stays


def test_absent_with_tuned_removes_the_child_profile_and_its_directory(env):
    env.with_tuned('virtual-guest')
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    child_dir = '/etc/tuned/%s' % tuned.CHILD_PROFILE
    assert env.host.exists(child_dir)
    env.run({'paths': [REPO], 'state': 'absent'})
    assert not env.host.exists(child_dir)          # the directory the collection owns goes with it
    assert tuned.active_profiles(env.root) == ['virtual-guest']


def test_absent_check_mode_changes_nothing(env):
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    before = tree_checksum(env.root)
    result = env.run({'paths': [REPO], 'state': 'absent'}, check=True, diff=True)
    assert tree_checksum(env.root) == before
    assert result['changed'] is True
    assert only_device(result)['after_kb'] == 4096
    assert result['diff'][0]['after_header'] == '%s (absent)' % RULES


def test_absent_twice_is_unchanged(env):
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    env.run({'paths': [REPO], 'state': 'absent'})
    before = tree_checksum(env.root)
    result = env.run({'paths': [REPO], 'state': 'absent'})
    assert result['changed'] is False
    assert tree_checksum(env.root) == before


def test_absent_without_record_leaves_value_and_warns(env):
    result = env.run({'devices': ['nvme1n1'], 'state': 'absent'})
    assert result['changed'] is False
    assert env.ra('nvme1n1') == 4096
    assert any('no recorded original value' in w for w in env.warnings)


def test_absent_ignores_read_ahead_kb(env):
    env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32})
    env.run({'devices': ['nvme1n1'], 'state': 'absent', 'read_ahead_kb': 64})
    assert env.ra('nvme1n1') == 4096


# ---------------------------------------------------------------------------------------------
# Conflicts

def test_tuned_conflict_reported_when_override_is_off(env):
    env.with_tuned('virtual-guest')
    result = env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32, 'tuned_override': False})
    conflicts = only_device(result)['conflicts']
    assert len(conflicts) == 1
    conflict = conflicts[0]
    assert conflict['source'] == 'tuned'
    assert conflict['profile'] == 'throughput-performance'
    assert conflict['active_profiles'] == ['virtual-guest']
    assert conflict['instance'] == 'disk'
    assert conflict['setting'] == '>4096'
    assert conflict['running'] is False
    assert '4096 KiB' in conflict['effect']
    assert any('tuned profile virtual-guest' in w and 'throughput-performance' in w and '>4096' in w
               for w in env.warnings)
    assert not env.host.exists(tuned.child_profile_path(env.root))


def test_tuned_conflict_for_nvme_only_from_tuned_2_18(env):
    env.with_tuned('virtual-guest')
    env.tools.tuned_version = '2.11.0'
    assert only_device(env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32,
                                'tuned_override': False}))['conflicts'] == []
    # dm devices are tuned by every version.
    assert only_device(env.run({'devices': ['dm-0'], 'read_ahead_kb': 32,
                                'tuned_override': False}))['conflicts'][0]['source'] == 'tuned'


def test_no_conflict_when_tuned_child_instance_takes_the_device(env):
    env.with_tuned('aemops')
    env.host.write('/etc/tuned/aemops/tuned.conf', '\n'.join([
        '[main]', 'include=virtual-guest',
        '[mydisk]', 'type=disk', 'devices_udev_regex=ID_SERIAL=.*vol0123456789abcdef0.*', 'priority=-5',
        'readahead=32',
    ]) + '\n')
    result = env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32, 'tuned_override': False})
    assert only_device(result)['conflicts'] == []
    assert not any('tuned' in w for w in env.warnings)
    # The root disk is still raised by the inherited [disk] instance.
    other = env.run({'devices': ['nvme0n1'], 'read_ahead_kb': 32, 'tuned_override': False})
    assert only_device(other)['conflicts'][0]['instance'] == 'disk'


def test_broken_tuned_profile_only_warns_when_override_is_off(env):
    env.with_tuned('broken')
    env.host.write('/etc/tuned/broken/tuned.conf', '[main]\ninclude=no-such-profile\n')
    result = env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32, 'tuned_override': False})
    assert only_device(result)['conflicts'] == []
    assert any('cannot read the active tuned profile' in w for w in env.warnings)
    assert env.ra('nvme1n1') == 32


def test_competing_udev_rule_and_rc_local_are_reported(env):
    env.host.write('/etc/udev/rules.d/60-custom.rules',
                   'ACTION=="add", KERNEL=="nvme*", ATTR{queue/read_ahead_kb}="4096"\n')
    env.host.write('/etc/rc.d/rc.local', '#!/bin/sh\nblockdev --setra 8192 /dev/nvme1n1\n')
    env.host.symlink('/etc/rc.local', 'rc.d/rc.local')
    conflicts = only_device(env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32}))['conflicts']
    assert conflicts == [
        {'source': 'udev rule', 'file': '/etc/udev/rules.d/60-custom.rules', 'line': 1,
         'text': 'ACTION=="add", KERNEL=="nvme*", ATTR{queue/read_ahead_kb}="4096"'},
        {'source': 'rc.local', 'file': '/etc/rc.d/rc.local', 'line': 2,
         'text': 'blockdev --setra 8192 /dev/nvme1n1'},
    ]


# ---------------------------------------------------------------------------------------------
# tuned_override: the collection's tuned child profile

def test_tuned_override_writes_and_activates_the_child_profile(env):
    env.with_tuned('virtual-guest')
    result = env.run({'devices': ['nvme1n1'], 'read_ahead_kb': 32})
    assert only_device(result)['conflicts'] == []
    path = tuned.child_profile_path(env.root)
    assert result['tuned_profile']['path'] == path
    assert result['tuned_profile']['parents'] == ['virtual-guest']
    assert result['tuned_profile']['changed'] is True
    # tuned is not running: the state files are written as tuned-adm would; ours is last in the list.
    assert tuned.active_profiles(env.root) == ['virtual-guest', tuned.CHILD_PROFILE]
    units = tuned.effective_units(env.root)[0]
    props = blockdev.udev_db(env.root, 'nvme1n1')[0]
    assert tuned.read_ahead_for_device(units, 'nvme1n1', props)['readahead']['kb'] == 32
    root_props = blockdev.udev_db(env.root, 'nvme0n1')[0]
    assert tuned.read_ahead_for_device(units, 'nvme0n1', root_props)['readahead']['raw'] == '>4096'


def test_tuned_override_with_tuned_running_switches_with_tuned_adm(env):
    env.with_tuned('virtual-guest', running=True)
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert env.tools.ran('tuned-adm', 'profile') == [
        ['/usr/sbin/tuned-adm', 'profile', 'virtual-guest', tuned.CHILD_PROFILE]]
    assert tuned.active_profiles(env.root) == ['virtual-guest', tuned.CHILD_PROFILE]


def test_tuned_override_is_idempotent(env):
    env.with_tuned('virtual-guest', running=True)
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    before = tree_checksum(env.root)
    del env.tools.calls[:]
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert result['changed'] is False
    assert result['tuned_profile']['changed'] is False
    assert tree_checksum(env.root) == before
    assert env.tools.ran('tuned-adm', 'profile') == []


def test_tuned_override_diff_includes_the_child_profile(env):
    env.with_tuned('virtual-guest')
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32}, check=True, diff=True)
    assert len(result['diff']) == 2
    assert result['diff'][1]['after_header'] == tuned.child_profile_path(env.root)
    assert 'include=' not in result['diff'][1]['after']  # activated after virtual-guest instead
    assert '\n[disk]\n' in result['diff'][1]['after']


def test_absent_removes_the_child_profile_and_restores_the_parent(env):
    env.with_tuned('virtual-guest', running=True)
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    env.run({'devices': ['dm-0'], 'state': 'absent'})
    assert not env.host.exists(tuned.child_profile_path(env.root))
    assert tuned.active_profiles(env.root) == ['virtual-guest']
    assert env.ra('dm-0') == 4096


def test_absent_restores_the_recorded_profile_mode(env):
    env.with_tuned('virtual-guest')
    assert tuned.profile_mode(env.root) == 'auto'
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    env.run({'devices': ['dm-0'], 'state': 'absent'})
    assert tuned.profile_mode(env.root) == 'auto'


def test_orphaned_child_profile_activation_is_not_reported_as_a_change_every_run(env):
    env.with_tuned(tuned.CHILD_PROFILE)  # active, but /etc/tuned/aemops-os-tuning/tuned.conf does not exist
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    before = tree_checksum(env.root)
    second = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert tree_checksum(env.root) == before
    assert second['changed'] is False


def test_tuned_override_without_active_profile_does_nothing_to_tuned(env):
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert result['tuned_profile'] is None
    assert not env.host.exists(tuned.child_profile_path(env.root))


def test_tuned_override_broken_active_profile_fails_cleanly(env):
    env.with_tuned('loop')
    env.tools.tuned_version = '2.15.0'
    env.host.write('/etc/tuned/loop/tuned.conf', '[main]\ninclude=loop\n')  # loads from 2.16 (commit bd6697f)
    before = tree_checksum(env.root)
    result = env.fail({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert 'cannot plan the tuned child profile' in result['msg']
    assert 'cannot load profile loop twice' in result['msg']
    assert tree_checksum(env.root) == before


# ---------------------------------------------------------------------------------------------
# ignore_missing

def test_ignore_missing_skips_a_missing_device_with_a_warning(env):
    result = env.run({'devices': ['sdz', 'dm-0'], 'paths': ['/tmp'], 'read_ahead_kb': 32, 'ignore_missing': True})
    assert [s['target'] for s in result['skipped_targets']] == ['sdz', '/tmp']
    assert 'no such block device: sdz' in result['skipped_targets'][0]['reason']
    assert [d['name'] for d in result['devices']] == ['dm-0']
    assert env.ra('dm-0') == 32
    assert any(w.startswith('skipping sdz: ') for w in env.warnings)
    assert any(w.startswith('skipping /tmp: ') for w in env.warnings)


def test_ignore_missing_with_nothing_left_is_unchanged(env):
    before = tree_checksum(env.root)
    result = env.run({'devices': ['sdz'], 'read_ahead_kb': 32, 'ignore_missing': True})
    assert result['changed'] is False
    assert result['devices'] == []
    assert tree_checksum(env.root) == before


# ---------------------------------------------------------------------------------------------
# Errors: each fails with a message naming the problem, and changes nothing.

def _no_stable_id(env):
    env.host.add_disk('vdb', '252:16')


def _foreign_rules_line(env):
    env.host.write(RULES, udev_rules.render({LV_MATCH: 32}, {}) + 'KERNEL=="sdb", ATTR{queue/read_ahead_kb}="512"\n')


def _damaged_baseline(env):
    env.host.write(RULES, udev_rules.render({}, {LV_MATCH: {'match': LV_MATCH}}).replace('}', ''))


def _read_only_sysfs(env, monkeypatch):
    env.host.mount('0:30', '/sys', 'sysfs', 'sysfs', 'ro,nosuid,nodev,noexec,relatime')
    _deny_sysfs_writes(monkeypatch)


def _deny_sysfs_writes(monkeypatch):
    real = os.access

    def access(path, mode):
        if mode & os.W_OK and str(path).endswith('read_ahead_kb'):
            return False
        return real(path, mode)
    monkeypatch.setattr(os, 'access', access)


def _not_root(env, monkeypatch):
    _deny_sysfs_writes(monkeypatch)
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    deny_run_dir(env.root, monkeypatch)


def _lvs_fails(env):
    env.tools.fail('lvs', 5, '  Volume group "vg_aem" not found\n')


BAD_INPUTS = [
    # (id, args, setup, message fragments)
    ('no-targets', {'read_ahead_kb': 32}, None, ['nothing to tune']),
    ('no-value', {'devices': ['dm-0']}, None, ['read_ahead_kb is required with state=present']),
    ('negative', {'devices': ['dm-0'], 'read_ahead_kb': -4}, None, ['read_ahead_kb=-4 is out of range']),
    ('too-large', {'devices': ['dm-0'], 'read_ahead_kb': 65537}, None, ['read_ahead_kb=65537 is out of range']),
    ('not-page-multiple', {'devices': ['dm-0'], 'read_ahead_kb': 30}, None,
     ['read_ahead_kb=30 is not a multiple of the page size', 'would store 28']),
    ('not-an-int', {'devices': ['dm-0'], 'read_ahead_kb': 'lots'}, None, ['read_ahead_kb']),
    ('bad-state', {'devices': ['dm-0'], 'read_ahead_kb': 32, 'state': 'gone'}, None, ['state', 'present, absent']),
    ('unknown-option', {'devices': ['dm-0'], 'read_ahead_kb': 32, 'readahead': 32}, None, ['readahead']),
    ('relative-path', {'paths': ['opt/aem'], 'read_ahead_kb': 32}, None,
     ["'opt/aem' is not an absolute path"]),
    ('empty-device', {'devices': [''], 'read_ahead_kb': 32}, None, ['devices[0] is an empty string']),
    ('blank-device', {'devices': ['dm-0', '  '], 'read_ahead_kb': 32}, None, ['devices[1] is an empty string']),
    ('missing-device', {'devices': ['sdz'], 'read_ahead_kb': 32}, None, ['no such block device: sdz']),
    ('missing-dev-path', {'devices': ['/dev/mapper/vg_aem-nope'], 'read_ahead_kb': 32}, None,
     ['no such block device: /dev/mapper/vg_aem-nope']),
    ('path-as-device', {'devices': ['opt/aem'], 'read_ahead_kb': 32}, None, ['opt/aem must be a kernel name']),
    ('tmpfs-path', {'paths': ['/tmp'], 'read_ahead_kb': 32}, None, ['/tmp is on tmpfs', 'no block device']),
    ('missing-path', {'paths': ['/opt/aem/nope'], 'read_ahead_kb': 32}, None, ['/opt/aem/nope does not exist']),
    ('all-errors-at-once', {'devices': ['sdz'], 'paths': ['/tmp'], 'read_ahead_kb': 32}, None,
     ['no such block device: sdz', '/tmp is on tmpfs']),
    ('no-stable-id', {'devices': ['vdb'], 'read_ahead_kb': 32}, _no_stable_id,
     ['vdb (disk) has no stable identity', 'persist=false']),
    ('foreign-rules-line', {'devices': ['dm-0'], 'read_ahead_kb': 32}, _foreign_rules_line,
     ['%s line 4 was not written by aemops.os_tuning' % RULES]),
    ('damaged-baseline', {'devices': ['dm-0'], 'read_ahead_kb': 32}, _damaged_baseline,
     ['damaged baseline records']),
    ('lvs-fails', {'devices': ['dm-0'], 'read_ahead_kb': 32}, _lvs_fails,
     ['lvs failed for vg_aem/lv_repo (dm-0)', 'not found']),
]


@pytest.mark.parametrize('args, setup, fragments', [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_fails_and_changes_nothing(env, args, setup, fragments):
    if setup is not None:
        setup(env)
    before = tree_checksum(env.root)
    result = env.fail(args)
    assert result['failed'] is True
    for fragment in fragments:
        assert fragment in result['msg']
    assert tree_checksum(env.root) == before
    assert env.tools.ran('lvchange') == []
    assert env.tools.ran('udevadm') == []


def test_read_only_sysfs_gives_the_container_message(env, monkeypatch):
    _read_only_sysfs(env, monkeypatch)
    before = tree_checksum(env.root)
    result = env.fail({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert 'cannot set read-ahead inside a container' in result['msg']
    assert 'dm-0/queue/read_ahead_kb' in result['msg']
    assert tree_checksum(env.root) == before
    assert env.tools.ran('lvchange') == []


def test_read_only_sysfs_also_fails_in_check_mode(env, monkeypatch):
    _read_only_sysfs(env, monkeypatch)
    result = env.fail({'devices': ['dm-0'], 'read_ahead_kb': 32}, check=True)
    assert 'inside a container' in result['msg']


def test_permission_denied_gives_the_become_message(env, monkeypatch):
    _not_root(env, monkeypatch)
    before = tree_checksum(env.root)
    result = env.fail({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert 'permission denied' in result['msg']
    assert 'needs root' in result['msg']
    assert 'become: true' in result['msg']
    assert tree_checksum(env.root) == before


def test_unchanged_value_needs_no_write_access(env, monkeypatch):
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    _not_root(env, monkeypatch)
    assert env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})['changed'] is False


# ---------------------------------------------------------------------------------------------
# Hostile inputs (issue 12): refused before anything changes, or undone after a late failure.

def _fifo_rules(env):
    # An open() for reading would hang the run. fakehost.tree_checksum opens every file, so the
    # FIFO sits in a directory of its own, outside what the test compares (see fifo_checksum).
    env.host.mkdir('/srv/fifo')
    os.mkfifo(env.host.path('/srv/fifo/90-x.rules'))


def _mask_rules(env):
    os.symlink('/dev/null', env.host.path(RULES))


def _link_rules(env):
    env.host.write('/etc/udev/real.rules', '')
    os.symlink('../real.rules', env.host.path(RULES))


def _loop_rules(env):
    os.symlink('b.rules', env.host.path(RULES))
    os.symlink(os.path.basename(RULES), env.host.path('/etc/udev/rules.d/b.rules'))


def _dir_rules(env):
    env.host.mkdir(RULES)


def _immutable_rules(env):
    env.host.write(RULES, udev_rules.render({LV_MATCH: 64}, {}))
    real = files.inode_flags
    full = env.host.path(RULES)
    # chattr +i needs a file system with inode flags and CAP_LINUX_IMMUTABLE: modelled here,
    # proven on the real kernel by tests/integration (bad_inputs.yml, "immutable rules file").
    files.inode_flags = lambda path: files.FS_IMMUTABLE_FL if path == full else real(path)
    env.restore.append(lambda: setattr(files, 'inode_flags', real))


def _hostile_loop(backing):
    def setup(env):
        env.host.add_loop('loop7', '7:7', backing)
    return setup


def _baseline_rules(kb, lvm='auto'):
    def setup(env):
        env.host.write(RULES, udev_rules.render({LV_MATCH: 32}, {LV_MATCH: {
            'match': LV_MATCH, 'device': 'dm-0', 'read_ahead_kb': kb, 'lvm_read_ahead': lvm}}))
    return setup


HOSTILE_INPUTS = [
    ('kb-false', {'devices': ['dm-0'], 'read_ahead_kb': False}, None, ['is a boolean, not a number of KiB']),
    ('kb-true', {'devices': ['dm-0'], 'read_ahead_kb': True}, None, ['is a boolean']),
    ('kb-arabic-indic-digits', {'devices': ['dm-0'], 'read_ahead_kb': u'\u0663\u0662'}, None,
     ['unable to convert to int', 'ASCII digits']),
    ('kb-fraction', {'devices': ['dm-0'], 'read_ahead_kb': 32.5}, None, ['unable to convert to int']),
    ('kb-hex', {'devices': ['dm-0'], 'read_ahead_kb': '0x20'}, None, ['unable to convert to int']),
    ('kb-list', {'devices': ['dm-0'], 'read_ahead_kb': [32]}, None, ['unable to convert to int']),
    ('rules-relative', {'devices': ['dm-0'], 'read_ahead_kb': 32, 'rules_file': 'etc/udev/90-x.rules'}, None,
     ['rules_file path "etc/udev/90-x.rules" is not absolute']),
    ('rules-dotdot', {'devices': ['dm-0'], 'read_ahead_kb': 32, 'rules_file': '/etc/udev/nope/../90-x.rules'}, None,
     ['is not normalised', 'give it as /etc/udev/90-x.rules']),
    ('rules-fifo', {'devices': ['dm-0'], 'read_ahead_kb': 32, 'rules_file': '/srv/fifo/90-x.rules'}, _fifo_rules,
     ['is a FIFO (named pipe)']),
    ('rules-fifo-absent', {'devices': ['dm-0'], 'state': 'absent', 'rules_file': '/srv/fifo/90-x.rules'}, _fifo_rules,
     ['is a FIFO (named pipe)']),
    ('rules-mask', {'devices': ['dm-0'], 'read_ahead_kb': 32}, _mask_rules, ['symbolic link to /dev/null: a mask']),
    ('rules-mask-absent', {'devices': ['dm-0'], 'state': 'absent'}, _mask_rules, ['a mask']),
    ('rules-symlink', {'devices': ['dm-0'], 'read_ahead_kb': 32}, _link_rules, ['is a symbolic link (to ../real.rules)']),
    ('rules-symlink-loop', {'devices': ['dm-0'], 'read_ahead_kb': 32}, _loop_rules, ['symlink loop']),
    ('rules-directory', {'devices': ['dm-0'], 'read_ahead_kb': 32}, _dir_rules, ['is a directory']),
    ('rules-missing-dir', {'devices': ['dm-0'], 'read_ahead_kb': 32, 'rules_file': '/etc/udev/nodir/90-x.rules'},
     None, ['does not exist. Create it first']),
    ('rules-immutable', {'devices': ['dm-0'], 'read_ahead_kb': 32}, _immutable_rules, ['is immutable (chattr +i)']),
    ('loop-glob', {'devices': ['loop7'], 'read_ahead_kb': 32}, _hostile_loop('/img/*.img'),
     ['loop7 (loop) has no stable identity', "Refused: ATTR{loop/backing_file} it contains '*'"]),
    ('loop-alternative', {'devices': ['loop7'], 'read_ahead_kb': 32}, _hostile_loop('/img/a|b.img'), ["'|'"]),
    ('loop-deleted', {'devices': ['loop7'], 'read_ahead_kb': 32}, _hostile_loop('/img/a.img (deleted)'),
     ['(deleted)']),
    ('loop-trailing-space', {'devices': ['loop7'], 'read_ahead_kb': 32}, _hostile_loop('/img/a.img '),
     ['trailing whitespace']),
    ('loop-too-long', {'devices': ['loop7'], 'read_ahead_kb': 32}, _hostile_loop('/' + 'x' * 520),
     ['udev compares at most 511']),
    ('loop-with-a-good-device', {'devices': ['dm-0', 'loop7'], 'read_ahead_kb': 32}, _hostile_loop('/img/?.img'),
     ['loop7 (loop) has no stable identity']),
    ('baseline-1gib', {'devices': ['dm-0'], 'state': 'absent'}, _baseline_rules(1048576),
     ['read_ahead_kb is 1048576, not an integer from 0 to 65536']),
    ('baseline-string', {'devices': ['dm-0'], 'state': 'absent'}, _baseline_rules('128'), ['read_ahead_kb is "128"']),
    ('baseline-bool', {'devices': ['dm-0'], 'state': 'absent'}, _baseline_rules(True), ['read_ahead_kb is true']),
    ('baseline-lvm', {'devices': ['dm-0'], 'state': 'absent'}, _baseline_rules(128, 'lots'),
     ['lvm_read_ahead is "lots"']),
]


@pytest.fixture
def hostile_env(env):
    env.restore = []
    yield env
    for undo in env.restore:
        undo()


@pytest.mark.parametrize('args, setup, fragments', [b[1:] for b in HOSTILE_INPUTS], ids=[b[0] for b in HOSTILE_INPUTS])
def test_hostile_input_fails_and_changes_nothing(hostile_env, args, setup, fragments):
    env = hostile_env
    if setup is not None:
        setup(env)
    before = tree_checksum(env.root)
    result = env.fail(args)
    assert result['failed'] is True
    assert not result.get('changed')
    for fragment in fragments:
        assert fragment in result['msg']
    assert 'MODULE FAILURE' not in result['msg']
    assert tree_checksum(env.root) == before
    assert env.tools.ran('lvchange') == []
    assert env.tools.ran('udevadm') == []


@pytest.mark.parametrize('value', ['32', 32, ' 32'])
def test_read_ahead_kb_as_ascii_digits_or_int(env, value):
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': value})
    assert only_device(result)['after_kb'] == 32


def test_rules_file_not_ending_in_rules_warns(env):
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32, 'rules_file': '/etc/udev/rules.d/90-x.conf'})
    assert any('does not end in .rules: udev reads only *.rules' in w for w in env.warnings)
    assert env.host.exists('/etc/udev/rules.d/90-x.conf')


def test_planted_rules_file_becomes_root_0644(env):
    full = env.host.write(RULES, udev_rules.render({LV_MATCH: 64}, {}))
    os.chmod(full, 0o666)
    if os.geteuid() == 0:
        os.chown(full, 65534, 65534)
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    st = os.stat(full)
    assert oct(st.st_mode & 0o7777) == oct(0o644)
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (0, 0)


def test_failure_after_the_first_change_reports_it_and_rolls_back(env, monkeypatch):
    def broken_write(path, content, mode=0o644, module=None, owner=(0, 0)):
        raise OSError(13, 'Permission denied', path)
    monkeypatch.setattr(files, 'atomic_write', broken_write)
    result = env.fail({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert result['changed'] is True
    assert 'writing the rules file %s failed: permission denied' % RULES in result['msg']
    assert 'dm-0: read_ahead_kb 4096 -> 32' in result['changes']
    assert 'vg_aem/lv_repo: LVM read-ahead auto -> 64' in result['changes']
    assert result['rolled_back'] == ['vg_aem/lv_repo: LVM read-ahead back to auto', 'dm-0: read_ahead_kb back to 4096']
    assert env.ra('dm-0') == 4096
    assert env.rules() is None


def test_lock_held_by_another_run_times_out_naming_the_file(env, monkeypatch):
    import fcntl
    monkeypatch.setattr(runstate, 'DEFAULT_LOCK_TIMEOUT', 0)
    lock_path = files.lock_file_for(env.root, RULES)
    os.makedirs(os.path.dirname(lock_path), 0o700)
    with open(lock_path, 'w') as holder:
        holder.write('pid 31337\n')  # the text is never believed: the holder comes from /proc/locks
        holder.flush()
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        before = tree_checksum(env.root)
        result = env.fail({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert 'timed out after 0 s waiting for the lock on %s' % RULES in result['msg']
    assert 'held by pid %d (' % os.getpid() in result['msg'] and '31337' not in result['msg']
    assert tree_checksum(env.root) == before
    assert env.ra('dm-0') == 4096


def test_runs_hold_the_lock_of_the_rules_file_and_of_the_tuned_child(env, monkeypatch):
    seen = []
    real_run = read_ahead.run

    def spy(module, root):
        seen.extend(sorted(runstate._held))
        return real_run(module, root)
    monkeypatch.setattr(read_ahead, 'run', spy)
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert seen == sorted([files.lock_file_for(env.root, RULES),
                           files.lock_file_for(env.root, tuned.child_profile_path(env.root))])
    assert runstate._held == {}
    seen[:] = []
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32}, check=True)
    assert seen == []  # check mode writes nothing and takes no lock


def test_xen_vbd_is_persisted_by_its_xenbus_node(env):
    parent = '/sys/devices/vbd-51760'
    env.host.write(parent + '/nodename', 'device/vbd/51760\n')
    env.host.mkdir('/sys/bus/xen')
    env.host.symlink(parent + '/subsystem', '../../bus/xen')
    devdir = env.host.add_disk('xvdd', '202:48', read_ahead_kb=4096, parent=parent, udev={'SUBSYSTEM': 'block'})
    env.host.symlink(devdir + '/device', '../../../vbd-51760')
    result = env.run({'devices': ['xvdd'], 'read_ahead_kb': 32})
    entry = only_device(result)
    assert entry['stable_id'] == {'key': 'ATTRS{nodename}', 'value': 'device/vbd/51760', 'serial': None}
    assert env.rules()[0] == {'ATTRS{nodename}=="device/vbd/51760"': 32}


def test_non_utf8_loop_works_with_persist_false(env):
    devdir = env.host.add_loop('loop8', '7:8', '/img/x', read_ahead_kb=128)
    with open(env.host.path(devdir + '/loop/backing_file'), 'wb') as f:
        f.write(b'/img/\xff.img\n')
    result = env.run({'devices': ['loop8'], 'read_ahead_kb': 32, 'persist': False})
    assert only_device(result)['after_kb'] == 32
    failed = env.fail({'devices': ['loop8'], 'read_ahead_kb': 64})
    assert 'not valid UTF-8' in failed['msg']


# ---------------------------------------------------------------------------------------------
# The device's read-ahead lock: shared with read_ahead_sweep (issue 24)

def _hold_device_lock(env, majmin='253:0'):
    """Another run (a sweep) holds the device's read-ahead lock: a descriptor of its own."""
    import fcntl
    runstate.run_dir(env.root)
    fd = os.open(runstate.lock_path(env.root, runstate.device_lock_name(majmin)), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_run_during_a_sweep_waits_and_plans_from_the_restored_value(env):
    import threading
    blockdev.write_read_ahead_kb(env.root, 'dm-0', 64)  # the sweep is measuring 64 KiB
    fd = _hold_device_lock(env)

    def sweep_ends():
        blockdev.write_read_ahead_kb(env.root, 'dm-0', 4096)  # its restore
        os.close(fd)
    timer = threading.Timer(0.5, sweep_ends)
    timer.start()
    try:
        result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    finally:
        timer.join()
    entry = only_device(result)
    assert (entry['before_kb'], entry['after_kb'], result['changed']) == (4096, 32, True)
    assert env.ra('dm-0') == 32
    assert env.rules()[1][LV_MATCH]['read_ahead_kb'] == 4096  # the baseline is not the sweep's value


def test_a_run_during_a_sweep_fails_clearly_when_it_does_not_end(env, monkeypatch):
    monkeypatch.setattr(runstate, 'DEFAULT_LOCK_TIMEOUT', 0)
    blockdev.write_read_ahead_kb(env.root, 'dm-0', 64)
    fd = _hold_device_lock(env)
    try:
        before = tree_checksum(env.root)
        result = env.fail({'devices': ['dm-0'], 'read_ahead_kb': 32})
        assert tree_checksum(env.root) == before
    finally:
        os.close(fd)
    assert 'waiting for the lock on the read-ahead of block device 253:0' in result['msg']
    assert 'held by pid %d (' % os.getpid() in result['msg']
    assert env.ra('dm-0') == 64


# ---------------------------------------------------------------------------------------------
# Live state wins over recorded state: tuned runs no profile (issue 24)

def test_after_tuned_adm_off_a_reapply_activates_nothing_and_says_so(env):
    env.with_tuned('virtual-guest', running=True)
    env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert env.tools._tuned_adm(['off'])[0] == 0  # the administrator runs tuned-adm off (see fakehost)
    del env.tools.calls[:]
    untargeted = dict((n, env.ra(n)) for n in ('nvme0n1', 'nvme1n1'))
    for kb in (32, 64):  # the same value (nothing to write), then a new one (the child is rewritten)
        result = env.run({'devices': ['dm-0'], 'read_ahead_kb': kb})
        assert env.tools.ran('tuned-adm', 'profile') == []
        assert tuned.active_profiles(env.root) == []
        assert result['tuned_profile']['not_activated'] == (
            'tuned runs no profile (tuned-adm off: /etc/tuned/active_profile is empty)')
        assert [w for w in env.warnings if w.startswith(tuned.NO_PROFILE + ' (tuned runs no profile (tuned-adm off')]
        assert not any(a.startswith('activated') for a in result['tuned_profile']['actions'])
        assert dict((n, env.ra(n)) for n in untargeted) == untargeted
        assert env.ra('dm-0') == kb and env.rules()[0][LV_MATCH] == kb  # udev persists it
    child = tuned.child_profile_path(env.root)
    assert result['changed'] is True and result['tuned_profile']['actions'] == ['wrote %s' % child]
    assert env.run({'devices': ['dm-0'], 'read_ahead_kb': 64})['changed'] is False


def test_tuned_stopped_and_disabled_activates_nothing(env):
    env.with_tuned('virtual-guest', running=False)
    env.host.write('/usr/lib/systemd/system/tuned.service', '[Install]\nWantedBy=multi-user.target\n')
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert result['tuned_profile']['not_activated'] == 'tuned runs no profile (tuned is stopped and disabled)'
    assert tuned.active_profiles(env.root) == ['virtual-guest']
    assert env.tools.ran('tuned-adm', 'profile') == []


def test_tuned_stopped_but_enabled_is_still_activated_for_its_next_start(env):
    env.with_tuned('virtual-guest', running=False)
    env.host.write('/usr/lib/systemd/system/tuned.service', '[Install]\nWantedBy=multi-user.target\n')
    env.host.symlink('/etc/systemd/system/multi-user.target.wants/tuned.service',
                     '/usr/lib/systemd/system/tuned.service')
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert result['tuned_profile']['not_activated'] is None
    assert tuned.active_profiles(env.root) == ['virtual-guest', tuned.CHILD_PROFILE]


@pytest.mark.parametrize('args, message', [
    ({'devices': ['dm-0', ''], 'read_ahead_kb': 32}, 'devices[1] is an empty string'),
    ({'paths': [''], 'read_ahead_kb': 32}, 'paths[0] is an empty string'),
    ({'devices': ['dm-0'], 'read_ahead_kb': 1000.0}, 'read_ahead_kb: unable to convert to int: 1000.0 is a floating-point number'),
])
def test_edge_inputs_are_refused_naming_option_and_index(env, args, message):
    before = tree_checksum(env.root)
    assert message in env.fail(args)['msg']
    assert tree_checksum(env.root) == before


def test_one_run_on_an_lv_reads_each_source_once_to_plan(env, monkeypatch):
    # One apply run on the LV with tuned running. The plan is made from one frozen state of the host (host.Host with
    # read_only, until the module thaws it): every source is read once, tuned's state files, the child profile,
    # read_ahead_kb and the lock's tuned-main.conf included (before: active_profile 4 times, tuned.pid 3,
    # tuned-main.conf 10, each stock profile 3). After the plan, the run reads again only what it has just changed or
    # is about to replace, written out below.
    env.with_tuned(running=True)
    reads = HostReads(env.root, monkeypatch).from_thaw(monkeypatch)
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert reads.more_than_once('plan') == {}
    assert reads.phases['plan']['/etc/tuned/active_profile'] == 1
    assert reads.more_than_once() == {
        # tuned-adm profile rewrites it: read after the switch, to set the mode the plan chose
        '/etc/tuned/profile_mode': 2,
        # planned, read back after the write, read again to enforce after udev, LVM and tuned acted
        '/sys/devices/virtual/block/dm-0/queue/read_ahead_kb': 3,
        # the readers' record: read to plan, and again under its lock before it is written (another writer's
        # entries kept: readers_record.update_record)
        '/run/aemops-os-tuning/readers.json': 2,
    }
    assert reads.counts['/proc/self/mountinfo'] == 1
    assert reads.counts['/run/udev/data/b253:0'] == 1


# ---------------------------------------------------------------------------------------------
# AEM's start guard (aem_service): module_utils/boot_guard.py, installed and backed out by the module

GUARD = '/etc/systemd/system/aem.service.d/90-aemops-read-ahead.conf'


def test_the_start_guard_is_installed_once_shown_in_diff_and_backed_out(env):
    env.tools.install('systemctl')
    checked = env.run({'paths': [REPO], 'read_ahead_kb': 32, 'aem_service': 'aem.service'}, check=True, diff=True)
    assert checked['start_guard']['changed'] and [d for d in checked['diff'] if d['after_header'] == GUARD]
    assert not os.path.exists(os.path.join(env.root, GUARD.lstrip('/')))
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32, 'aem_service': 'aem.service'})
    assert result['start_guard'] == {'unit': 'aem.service', 'path': GUARD, 'installed': True, 'changed': True,
                                     'removed': []}
    assert env.tools.ran('systemctl', 'daemon-reload')
    before = tree_checksum(env.root)
    again = env.run({'paths': [REPO], 'read_ahead_kb': 32, 'aem_service': 'aem.service'})
    assert again['changed'] is False and tree_checksum(env.root) == before
    gone = env.run({'paths': [REPO], 'state': 'absent', 'aem_service': 'aem.service'})
    assert gone['start_guard']['installed'] is False and gone['start_guard']['removed'] == [GUARD]
    assert not os.path.exists(os.path.join(env.root, 'usr/local/lib/aemops-os-tuning'))


@pytest.mark.parametrize('params, words', [
    ({'aem_service': 'aem.socket'}, 'is not a service unit'),
    ({'aem_service': 'aem.service', 'rules_file': '/etc/udev/rules.d/91-x.rules'}, 'Leave rules_file at its default'),
])
def test_a_start_guard_that_cannot_work_is_refused_with_nothing_changed(env, params, words):
    env.tools.install('systemctl')
    before = tree_checksum(env.root)
    result = env.fail(dict({'paths': [REPO], 'read_ahead_kb': 32}, **params))
    assert words in result['msg'] and tree_checksum(env.root) == before
