# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Module-level tests for tuning_facts, through main(), on a fake host.

``ROOT`` points at a fake tree (fakehost.py). ``run_command`` and ``get_bin_path`` go to
fakehost.FakeTools (through utils.Env): ``lvs``, ``tuned-adm``, and on RHEL 8 the versioned
grubby-bls model with its ``rpm`` and ``grub2-editenv`` (release ``EL8_GRUBBY``), acting on the
tree's BLS entries and grubenv. Every run goes through :meth:`FactsEnv.facts`, which also checks
that the module reported ``changed=False``, ran only read-only commands
(``FakeTools.mutations``) and left every file, directory and link of the tree as it was.

THP sysfs files, os-release, BLS entries and tuned profiles are written here with
``FakeHost.write`` and ``FakeHost.add_tuned``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import shutil
import sys

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, thp, tuned, udev_rules
from ansible_collections.aemops.os_tuning.plugins.modules import tuning_facts
from ansible_collections.aemops.os_tuning.tests.unit.utils import Env
from fakehost import OS_RELEASE, THROUGHPUT_PERFORMANCE, FakeHost, FakeTools, nitro_host, tree_checksum

RULES = udev_rules.RULES_FILE
CHILD = '/etc/tuned/%s/tuned.conf' % tuned.CHILD_PROFILE
REPO = '/opt/aem/crx-quickstart/repository'
LV_UUID = 'LVM-' + 'x' * 64
LV_MATCH = 'ENV{DM_UUID}=="%s"' % LV_UUID
NVME1_SERIAL = 'vol0123456789abcdef0'
NVME0_SERIAL = 'vol0rootrootrootroot'
NVME1_MATCH = 'ATTRS{serial}=="%s"' % NVME1_SERIAL
THP_DIR = thp.THP_DIRS[0]

TP_4096 = {'instance': 'disk', 'profile': 'throughput-performance', 'setting': '>4096', 'kb': 4096}

EL8_KERNEL = '4.18.0-513.5.1.el8_9.x86_64'
EL8_GRUBBY = '8.40-48.el8'  # the newest RHEL 8 grubby-bls that fakehost models
EL8_ARGS = 'root=/dev/nvme0n1p1 ro console=ttyS0,115200n8 crashkernel=auto'
GRUB_EL8 = ('GRUB_TIMEOUT=1\nGRUB_DEFAULT=saved\nGRUB_DISABLE_SUBMENU=true\n'
            'GRUB_CMDLINE_LINUX="console=ttyS0,115200n8 crashkernel=auto transparent_hugepage=never"\n'
            'GRUB_ENABLE_BLSCFG=true\n')
GRUB_EL7 = ('GRUB_TIMEOUT=5\nGRUB_DEFAULT=saved\nGRUB_TERMINAL_OUTPUT="console"\n'
            'GRUB_CMDLINE_LINUX="crashkernel=auto rhgb quiet transparent_hugepage=madvise"\n')
GRUB_CFG_EL7 = ('set default=0\n### BEGIN /etc/grub.d/10_linux ###\n'
                "menuentry 'CentOS Linux' {\n\tlinux16 /vmlinuz-3.10.0-1160.el7.x86_64 root=/dev/xvda1 ro "
                'crashkernel=auto rhgb quiet transparent_hugepage=madvise\n}\n### END /etc/grub.d/10_linux ###\n')


# ---------------------------------------------------------------------------------------------
# The fake host and its tools

class FactsEnv(Env):
    """The Env of tuning_facts: every run must change nothing; host layouts for the facts."""

    def facts(self, paths=None, check=False):
        """Run the module; return ``ansible_facts.os_tuning`` after checking it changed nothing
        and ran only read-only commands."""
        args = {}
        if paths is not None:
            args['paths'] = paths
        before = tree_checksum(self.root)
        self.run(args, check=check)
        assert self.result['changed'] is False
        assert 'failed' not in self.result
        assert tree_checksum(self.root) == before
        assert self.tools.mutations() == [], 'tuning_facts ran a command it must not run'
        return self.result['ansible_facts']['os_tuning']

    # -- host builders ---------------------------------------------------------------------
    def with_tuned(self, active='virtual-guest', running=True, version='2.21.0', mode='auto'):
        self.host.add_tuned(active, mode, running)
        self.tools.tuned_version = version
        return self

    def with_thp(self, enabled='always madvise never', defrag='always defer defer+madvise madvise never',
                 active=('always', 'madvise'), khugepaged='1'):
        def mark(offered, value):
            return ' '.join('[%s]' % w if w == value else w for w in offered.split()) + '\n'
        self.host.write(THP_DIR + '/enabled', mark(enabled, active[0]))
        self.host.write(THP_DIR + '/defrag', mark(defrag, active[1]))
        if khugepaged is not None:
            self.host.write(THP_DIR + '/khugepaged/defrag', khugepaged + '\n')
        return self

    def with_os(self, release):
        self.host.write('/etc/os-release', OS_RELEASE[release])
        return self

    def with_el8_bls(self, cmdline_value='never'):
        """RHEL 8 with BLS entries, grubby and the grubenv kernelopts, ``transparent_hugepage`` persisted."""
        self.with_os('el8')
        args = EL8_ARGS + (' transparent_hugepage=%s' % cmdline_value if cmdline_value else '')
        self.host.write('/boot/loader/entries/%s-%s.conf' % ('0' * 32, EL8_KERNEL),
                        'title Red Hat Enterprise Linux (%s) 8.9 (Ootpa)\nversion %s\nlinux /vmlinuz-%s\n'
                        'initrd /initramfs-%s.img\noptions %s\nid rhel-%s\ngrub_users $grub_users\n'
                        'grub_arg --unrestricted\ngrub_class kernel\n'
                        % (EL8_KERNEL, EL8_KERNEL, EL8_KERNEL, EL8_KERNEL, args, EL8_KERNEL))
        self.host.write('/boot/grub2/grub.cfg', '# stub\nblscfg\n')
        self.host.write('/etc/default/grub', GRUB_EL8)
        body = '# GRUB Environment Block\nsaved_entry=%s-%s\nkernelopts=%s\nboot_success=1\n' % ('0' * 32, EL8_KERNEL, args)
        self.host.write('/boot/grub2/grubenv', body + '#' * (1024 - len(body)))
        self.tools.boot_tools(EL8_GRUBBY).install('grub2-mkconfig')
        return self

    def with_el7_bios(self):
        self.with_os('el7')
        self.host.write('/etc/default/grub', GRUB_EL7)
        self.host.write('/boot/grub2/grub.cfg', GRUB_CFG_EL7)
        self.tools.installed.update(['grub2-mkconfig', 'grub2-editenv'])
        return self

    def with_rules(self, rules=None, baselines=None):
        if rules is None:
            rules = {LV_MATCH: 32}
        if baselines is None:
            baselines = {LV_MATCH: {'match': LV_MATCH, 'device': 'dm-0', 'read_ahead_kb': 4096,
                                    'lvm_read_ahead': 'auto'}}
        self.host.write(RULES, udev_rules.render(rules, baselines))
        return self

    def with_child_profile(self, thp_enabled='never'):
        """The collection's child profile on top of virtual-guest, as read_ahead and thp write it."""
        parents = tuned.active_profiles(self.root)
        sections = tuned.disk_sections(self.root, parents, {32: [('DM_UUID', LV_UUID)]})
        if thp_enabled:
            sections.append(('thp', 'vm', [('transparent_hugepages', thp_enabled)]))
        baseline = {'active_profiles': parents, 'profile_mode': tuned.profile_mode(self.root)}
        self.host.write(CHILD, tuned.render_child(baseline, sections))
        self.host.write(tuned.ACTIVE_PROFILE_FILE, ' '.join(tuned.desired_active(parents)) + '\n')
        self.host.write(tuned.PROFILE_MODE_FILE, 'manual\n')
        return self

    def with_thp_baseline(self, record=None):
        record = record or {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1',
                            'cmdline_managed': False, 'cmdline': None}
        lines = files.managed_header('thp module', 'THP values found before the first change.')
        lines.append(files.baseline_line(record))
        self.host.write(thp.BASELINE_FILE, '\n'.join(lines) + '\n')
        return record

    def remove(self, target):
        full = self.host.path(target)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)


def facts_env(tmpdir, monkeypatch):
    """The Nitro host with lvs (knowing its LV) and tuned-adm, tuning_facts attached to it."""
    host = nitro_host(tmpdir.join('root'))
    tools = FakeTools(host, str(tmpdir.join('bin')), ['lvs', 'tuned-adm']).add_lv('vg_aem/lv_repo', 'dm-0')
    return FactsEnv(tuning_facts, host, tools).attach(monkeypatch)


def el8_env(tmpdir, monkeypatch):
    """facts_env as RHEL 8 on Nitro with tuned virtual-guest running and THP: the host the role meets."""
    environment = facts_env(tmpdir, monkeypatch)
    environment.with_tuned('virtual-guest', running=True)
    environment.with_thp()
    environment.with_os('el8')
    return environment


@pytest.fixture
def env(tmpdir, monkeypatch, module_exit):
    return facts_env(tmpdir, monkeypatch)


@pytest.fixture
def nitro(env):
    """The Nitro host of the brief: tuned virtual-guest -> throughput-performance running, THP always."""
    env.with_tuned('virtual-guest', running=True)
    env.with_thp()
    env.host.write('/proc/cmdline', 'BOOT_IMAGE=(hd0,gpt1)/boot/vmlinuz-%s root=UUID=0f1e ro console=ttyS0 '
                                    'transparent_hugepage=never\n' % EL8_KERNEL)
    return env


def deny_reading(monkeypatch, host, *targets):
    """Reading these target paths fails with EACCES, as for an unprivileged user (the tests run as root)."""
    denied = set(host.path(t) for t in targets)
    real_open = open

    def fake_open(path, *args, **kwargs):
        if str(path) in denied:
            raise IOError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(files, 'open', fake_open, raising=False)


# ---------------------------------------------------------------------------------------------
# The Nitro host: block devices, mounts, paths

def test_block_devices_of_the_nitro_host(nitro):
    devices = nitro.facts()['block_devices']
    assert sorted(devices) == ['dm-0', 'nvme0n1', 'nvme1n1']
    assert devices['nvme1n1'] == {
        'name': 'nvme1n1', 'path': '/dev/nvme1n1', 'type': 'nvme', 'majmin': '259:2', 'read_ahead_kb': 4096,
        'mount_points': [], 'holders': ['dm-0'], 'slaves': [], 'model': 'Amazon Elastic Block Store',
        'stable_id': {'key': 'ATTRS{serial}', 'value': NVME1_SERIAL, 'serial': NVME1_SERIAL}, 'rule': None,
        # no kernel release and no queue limits on this fake host: no kernel rule; tuned's >4096 explains 4096
        'queue': {'optimal_io_size': None, 'rotational': None, 'max_sectors_kb': None}, 'kernel_default': None,
        'set_by': 'tuned throughput-performance [disk] readahead=>4096',
    }
    assert devices['nvme0n1']['stable_id'] == {'key': 'ATTRS{serial}', 'value': NVME0_SERIAL, 'serial': NVME0_SERIAL}
    assert devices['nvme0n1']['mount_points'] == ['/']
    assert (devices['nvme0n1']['holders'], devices['nvme0n1']['slaves']) == ([], [])
    assert devices['dm-0'] == {
        'name': 'dm-0', 'path': '/dev/mapper/vg_aem-lv_repo', 'type': 'lvm', 'majmin': '253:0', 'read_ahead_kb': 4096,
        'mount_points': ['/opt/aem'], 'holders': [], 'slaves': ['nvme1n1'],
        'stable_id': {'key': 'ENV{DM_UUID}', 'value': LV_UUID, 'serial': None},
        'dm_name': 'vg_aem-lv_repo', 'dm_uuid': LV_UUID,
        'lvm': {'vg': 'vg_aem', 'lv': 'lv_repo', 'read_ahead': 'auto'}, 'rule': None,
        'queue': {'optimal_io_size': None, 'rotational': None, 'max_sectors_kb': None}, 'kernel_default': None,
        'set_by': 'tuned throughput-performance [disk] readahead=>4096',
    }


def test_a_disk_at_the_kernels_io_opt_default_is_named_as_set_by_the_kernel(env):
    # A virtio disk with QEMU's opt_io_size=4194304 on RHEL 10's 6.12, no tuned: 2 x io_opt = 8192 KiB
    # (block/blk-settings.c from v5.10; see module_utils/test_kernel_readahead.py).
    env.host.set_kernel('6.12.0-55.el10.x86_64')
    env.host.add_disk('vdb', '252:16', read_ahead_kb=8192)
    env.host.set_queue('vdb', optimal_io_size=4194304, rotational=0, max_sectors_kb=1280)
    env.host.add_disk('vdc', '252:32', read_ahead_kb=2560)
    env.host.set_queue('vdc', optimal_io_size=0, rotational=1, max_sectors_kb=1280)
    facts = env.facts()
    vdb, vdc = facts['block_devices']['vdb'], facts['block_devices']['vdc']
    assert facts['os']['kernel_release'] == '6.12.0-55.el10.x86_64'
    assert vdb['queue'] == {'optimal_io_size': 4194304, 'rotational': False, 'max_sectors_kb': 1280}
    assert vdb['kernel_default'] == {'kb': 8192, 'rule': 'kernel default: 2 x io_opt = 8192 KiB'}
    assert vdb['set_by'] == 'kernel default: 2 x io_opt = 8192 KiB'
    # 6.12 has no rotational rule: 2560 is not the kernel's 128, and nothing else explains it
    assert vdc['kernel_default'] == {'kb': 128, 'rule': 'kernel default: 128 KiB'}
    assert vdc['set_by'] is None
    env.host.set_kernel('6.17.1')
    assert env.facts()['block_devices']['vdc']['set_by'] == (
        'rotational default, Linux >= 6.17: 2 x max_sectors_kb = 2560 KiB')


def test_a_xen_vbd_taken_by_devpath_is_ours_although_the_udev_database_lacks_it(env):
    # Xen-based EC2 on RHEL 7: the udev database of xvdb holds no identity at all (systemd 219), so the child profile
    # selects it by DEVPATH, which tuned finds among pyudev's properties (the uevent values;
    # tuned/hardware/device_matcher_udev.py). Before, the model searched the database only: the parent's [disk]
    # seemed to take it (a false "tuned ... still applies", and audit's false "child profile not in effect").
    from ansible_collections.aemops.os_tuning.tests.unit.plugins.module_utils.test_blockdev import add_xen_vbd
    add_xen_vbd(env.host, 'xvdb', '202:16', 51728)
    env.host.write('/sys/devices/vbd-51728/block/xvdb/queue/read_ahead_kb', '32\n')
    env.with_tuned('virtual-guest %s' % tuned.CHILD_PROFILE)
    devpath = 'DEVPATH=/devices/vbd-51728/block/xvdb'
    env.host.write(CHILD, '[main]\nsummary=aemops\n\n[disk]\ntype=disk\n'
                          'devices_udev_regex=\\A(?![\\s\\S]*^(?:%s)$)\n\n'
                          '[aemops_read_ahead_32]\ntype=disk\ndevices_udev_regex=^(?:%s)$\nreadahead=32\n'
                   % (devpath, devpath))
    facts = env.facts()
    assert facts['tuned']['read_ahead']['xvdb'] == {
        'instance': 'aemops_read_ahead_32', 'profile': tuned.CHILD_PROFILE, 'setting': '32', 'kb': 32}
    assert facts['block_devices']['xvdb']['set_by'] == 'tuned %s [aemops_read_ahead_32] readahead=32' % (
        tuned.CHILD_PROFILE)


def test_partitions_are_not_listed_as_devices(nitro):
    assert 'nvme0n1p1' not in nitro.facts()['block_devices']


def test_read_ahead_is_the_current_sysfs_value(nitro):
    nitro.host.write(nitro.host._devdir('nvme1n1') + '/queue/read_ahead_kb', '128\n')
    devices = nitro.facts()['block_devices']
    assert devices['nvme1n1']['read_ahead_kb'] == 128
    assert devices['dm-0']['read_ahead_kb'] == 4096


def test_mounts_name_their_governing_device(nitro):
    mounts = nitro.facts()['mounts']
    assert mounts == {
        '/': {'source': '/dev/nvme0n1p1', 'fstype': 'xfs', 'device': 'nvme0n1p1', 'governing_device': 'nvme0n1',
              'read_ahead_kb': 4096},
        '/opt/aem': {'source': '/dev/mapper/vg_aem-lv_repo', 'fstype': 'xfs', 'device': 'dm-0',
                     'governing_device': 'dm-0', 'read_ahead_kb': 4096},
    }
    assert mounts['/opt/aem']['governing_device'] == 'dm-0'


def test_paths_resolve_to_the_governing_device(nitro):
    nitro.host.mkdir('/etc')
    paths = nitro.facts(paths=[REPO, '/etc', '/tmp', '/opt/aem/nope'])['paths']
    assert paths[REPO] == {'device': 'dm-0', 'mount': '/opt/aem', 'fstype': 'xfs', 'type': 'lvm',
                           'read_ahead_kb': 4096}
    assert paths['/etc'] == {'device': 'nvme0n1', 'mount': '/', 'fstype': 'xfs', 'type': 'nvme',
                             'read_ahead_kb': 4096}
    assert list(paths['/tmp']) == ['error']
    assert '/tmp is on tmpfs' in paths['/tmp']['error']
    assert 'no block device' in paths['/tmp']['error']
    assert list(paths['/opt/aem/nope']) == ['error']
    assert 'does not exist' in paths['/opt/aem/nope']['error']


def test_paths_through_a_symlink(nitro):
    nitro.host.symlink('/srv/aem', '../opt/aem/crx-quickstart')
    paths = nitro.facts(paths=['/srv/aem/repository'])['paths']
    assert paths['/srv/aem/repository']['device'] == 'dm-0'
    assert paths['/srv/aem/repository']['mount'] == '/opt/aem'


def test_no_paths_gives_an_empty_dict(nitro):
    assert nitro.facts()['paths'] == {}


# ---------------------------------------------------------------------------------------------
# LVM read-ahead from lvs

def test_lvm_read_ahead_auto_from_lvs(nitro):
    facts = nitro.facts()
    assert facts['block_devices']['dm-0']['lvm']['read_ahead'] == 'auto'
    assert nitro.tools.ran('lvs') == [['/usr/sbin/lvs', '--noheadings', '--nosuffix', '--units', 's', '-o',
                                       'lv_read_ahead', 'vg_aem/lv_repo']]


def test_lvm_read_ahead_in_sectors(nitro):
    nitro.tools.lvm['vg_aem/lv_repo']['read_ahead'] = '8192.00'
    assert nitro.facts()['block_devices']['dm-0']['lvm']['read_ahead'] == 8192


def test_lvm_read_ahead_absent_when_lvs_fails(nitro):
    nitro.tools.fail('lvs', 5, '  WARNING: Running as a non-root user. Functionality may be unavailable.\n'
                               '  /run/lock/lvm/P_global:aux: open failed: Permission denied\n')  # unprivileged
    lvm = nitro.facts()['block_devices']['dm-0']['lvm']
    assert lvm == {'vg': 'vg_aem', 'lv': 'lv_repo'}


def test_lvm_read_ahead_absent_without_lvs(nitro):
    nitro.tools.installed.discard('lvs')
    assert nitro.facts()['block_devices']['dm-0']['lvm'] == {'vg': 'vg_aem', 'lv': 'lv_repo'}
    assert nitro.tools.ran('lvs') == []


def test_lvm_read_ahead_none_when_lvs_output_is_unparsable(nitro):
    nitro.tools.lvm['vg_aem/lv_repo']['read_ahead'] = 'garbage'
    assert nitro.facts()['block_devices']['dm-0']['lvm']['read_ahead'] is None


# ---------------------------------------------------------------------------------------------
# tuned

def test_tuned_facts_of_the_nitro_host(nitro):
    facts = nitro.facts()
    assert facts['tuned'] == {
        'installed': True, 'running': True, 'version': '2.21.0', 'active_profiles': ['virtual-guest'],
        'profile_mode': 'auto', 'post_loaded_profile': None, 'child_profile': CHILD, 'error': None, 'no_profile': None,
        'include_chain': ['throughput-performance', 'virtual-guest'], 'conflicts': [], 'not_evaluated': [],
        'read_ahead': {'dm-0': TP_4096, 'nvme0n1': TP_4096, 'nvme1n1': TP_4096},
        'thp': None,  # throughput-performance sets no THP on x86_64 since tuned v2.5.0
    }
    assert facts['os']['tuned_version'] == '2.21.0'
    assert nitro.tools.ran('tuned-adm') == [['/usr/sbin/tuned-adm', '--version']]


def test_tuned_version_printed_on_stderr(nitro):
    nitro.tools.tuned_version, nitro.tools.tuned_python2 = '2.10.0', True  # argparse on Python 2 (RHEL 7): stderr
    assert nitro.facts()['tuned']['version'] == '2.10.0'


def test_tuned_before_2_18_leaves_nvme_out(nitro):
    nitro.with_tuned('virtual-guest', running=True, version='2.11.0')
    tuned_facts = nitro.facts()['tuned']
    assert tuned_facts['version'] == '2.11.0'
    assert tuned_facts['read_ahead'] == {'dm-0': TP_4096}


def test_tuned_2_18_covers_nvme(nitro):
    nitro.with_tuned('virtual-guest', running=True, version='2.18.0')
    assert sorted(nitro.facts()['tuned']['read_ahead']) == ['dm-0', 'nvme0n1', 'nvme1n1']


def test_tuned_version_unknown_when_tuned_adm_fails(nitro):
    nitro.tools.fail('tuned-adm', 1, when=['--version'])
    tuned_facts = nitro.facts()['tuned']
    assert tuned_facts['version'] is None
    assert tuned_facts['installed'] is True
    # Without a version NVMe is assumed covered (current tuned).
    assert sorted(tuned_facts['read_ahead']) == ['dm-0', 'nvme0n1', 'nvme1n1']


def test_tuned_not_running_without_pid_file(env):
    env.with_tuned(running=False)
    facts = env.facts()['tuned']
    assert facts['installed'] is True
    assert facts['running'] is False
    assert facts['read_ahead']['dm-0'] == TP_4096


def test_tuned_not_running_with_a_stale_pid_file(env):
    env.with_tuned(running=False)
    env.host.write(tuned.PID_FILE, '4242\n')
    assert env.facts()['tuned']['running'] is False


def test_tuned_installed_without_tuned_adm_on_path(env):
    env.with_tuned(running=False)
    env.tools.installed.discard('tuned-adm')
    facts = env.facts()['tuned']
    assert facts['installed'] is True  # /usr/lib/tuned exists
    assert facts['version'] is None
    assert env.tools.ran('tuned-adm') == []


def test_tuned_instance_with_its_own_device_selection(env):
    env.with_tuned('aem')
    env.host.write('/etc/tuned/aem/tuned.conf', '\n'.join([
        '[main]', 'include=virtual-guest',
        '[repo_disk]', 'type=disk', 'devices=dm-*', 'priority=-5', 'readahead=8192 s',
    ]) + '\n')
    facts = env.facts()['tuned']
    assert facts['include_chain'] == ['throughput-performance', 'virtual-guest', 'aem']
    assert facts['read_ahead']['dm-0'] == {'instance': 'repo_disk', 'profile': 'aem', 'setting': '8192 s',
                                           'kb': 4096}
    assert facts['read_ahead']['nvme1n1'] == TP_4096


def test_tuned_disk_instance_without_readahead_is_not_reported(env):
    env.with_tuned('aem')
    env.host.write('/etc/tuned/aem/tuned.conf', '[main]\ninclude=virtual-guest\n'
                                                '[other]\ntype=disk\ndevices=nvme1n1\npriority=-5\nelevator=none\n')
    assert sorted(env.facts()['tuned']['read_ahead']) == ['dm-0', 'nvme0n1']


def test_tuned_profile_missing_is_an_error_fact(env):
    env.with_tuned('does-not-exist')
    facts = env.facts()['tuned']
    assert facts['active_profiles'] == ['does-not-exist']
    assert 'tuned profile does-not-exist was not found' in facts['error']
    assert facts['read_ahead'] == {}
    assert facts['thp'] is None


def test_tuned_profile_that_includes_itself_is_an_error_fact(env):
    # tuned 2.15 (tuned/profiles/locator.py v2.15.0) cannot load a profile twice; 2.16 skips it.
    env.with_tuned('loop', version='2.15.0')
    env.host.write('/etc/tuned/loop/tuned.conf', '[main]\ninclude=loop\n')
    assert 'cannot load profile loop twice' in env.facts()['tuned']['error']
    env.with_tuned('loop', version='2.16.0')
    env.host.write('/etc/tuned/loop/tuned.conf', '[main]\ninclude=loop\n')
    assert env.facts()['tuned']['error'] is None


def test_tuned_malformed_profile_is_an_error_fact(env):
    env.with_tuned('bad')
    env.host.write('/etc/tuned/bad/tuned.conf', '[main\ninclude=virtual-guest\n')
    assert 'malformed section header' in env.facts()['tuned']['error']


@pytest.mark.parametrize('version, rejected', [('2.11.0', True), ('2.19.0', True), ('2.20.0', False), ('2.25.1', False)])
def test_a_profile_the_installed_tuned_rejects_is_an_error_fact(env, version, rejected):
    # A key given twice: configobj (v2.11.0) and strict configparser (v2.17.0-v2.19.0) refuse the file, so tuned
    # applies no profile; from v2.20.0 (strict=False, commit 11e9929) the last value wins (tuned/profiles/loader.py).
    env.with_tuned('site', version=version)
    env.host.write('/etc/tuned/site/tuned.conf', '[main]\ninclude=virtual-guest\n[disk]\nreadahead=>4096\nreadahead=64\n')
    tuned_facts = env.facts()['tuned']
    if rejected:
        assert '/etc/tuned/site/tuned.conf line 5: key readahead given twice in [disk]' in tuned_facts['error']
    else:
        assert not tuned_facts.get('error')
        assert tuned_facts['read_ahead']['nvme1n1'] == dict(TP_4096, profile='site', setting='64', kb=64)


def test_tuned_readahead_from_a_variable_does_not_crash(env):
    env.with_tuned('aem')
    env.host.write('/etc/tuned/aem/tuned.conf', '[main]\ninclude=virtual-guest\n'
                                                '[variables]\nrepo_ra=8192\n'
                                                '[repo_disk]\ntype=disk\ndevices=dm-*\npriority=-5\n'
                                                'readahead=${repo_ra}\n')
    facts = env.facts()['tuned']
    assert facts['read_ahead']['nvme1n1'] == TP_4096


def test_tuned_thp_from_the_child_profile(env):
    env.with_tuned('virtual-guest')
    env.with_child_profile(thp_enabled='never')
    facts = env.facts()['tuned']
    assert facts['active_profiles'] == ['virtual-guest', tuned.CHILD_PROFILE]
    assert facts['profile_mode'] == 'manual'
    assert facts['include_chain'] == ['throughput-performance', 'virtual-guest', tuned.CHILD_PROFILE]
    assert facts['thp'] == {'enabled': 'never', 'profile': tuned.CHILD_PROFILE, 'defrag': None}
    assert facts['read_ahead']['dm-0'] == {'instance': 'aemops_read_ahead_32', 'profile': tuned.CHILD_PROFILE,
                                           'setting': '32', 'kb': 32}
    assert facts['read_ahead']['nvme1n1']['instance'] == 'disk'
    assert facts['read_ahead']['nvme1n1']['setting'] == '>4096'


def test_tuned_read_ahead_names_the_profile_that_sets_it_under_the_child(env):
    env.with_tuned('virtual-guest')
    env.with_child_profile(thp_enabled=None)
    assert env.facts()['tuned']['read_ahead']['nvme1n1'] == TP_4096


def test_tuned_thp_with_defrag(env):
    env.with_tuned('aem')
    env.host.write('/etc/tuned/aem/tuned.conf', '[main]\ninclude=virtual-guest\n'
                                                '[vm]\ntransparent_hugepages=madvise\n'
                                                'transparent_hugepage.defrag=defer+madvise\n')
    assert env.facts()['tuned']['thp'] == {'enabled': 'madvise', 'profile': 'aem', 'defrag': 'defer+madvise'}


def test_tuned_thp_singular_alias(env):
    env.with_tuned('aem')
    env.host.write('/etc/tuned/aem/tuned.conf', '[main]\nsummary=no includes\n[vm]\ntransparent_hugepage=never\n')
    assert env.facts()['tuned']['thp'] == {'enabled': 'never', 'profile': 'aem', 'defrag': None}


def test_no_tuned_at_all(env):
    env.tools.installed.discard('tuned-adm')
    facts = env.facts()
    assert facts['tuned'] == {
        'installed': False, 'running': False, 'version': None, 'active_profiles': [], 'profile_mode': None,
        'post_loaded_profile': None, 'child_profile': CHILD, 'no_profile': None, 'read_ahead': {}, 'thp': None,
        'conflicts': [],
        'error': None,
    }
    assert facts['os']['tuned_version'] is None
    assert 'tuned_child_profile' not in facts['managed_files']
    assert env.tools.calls == [c for c in env.tools.calls if os.path.basename(c[0]) == 'lvs']


def test_tuned_installed_but_no_active_profile(env):
    env.host.write('/usr/lib/tuned/throughput-performance/tuned.conf', THROUGHPUT_PERFORMANCE)
    env.host.write(tuned.ACTIVE_PROFILE_FILE, '\n')
    facts = env.facts()['tuned']
    assert facts['installed'] is True
    assert facts['active_profiles'] == []
    assert facts['read_ahead'] == {}
    assert facts['error'] is None


# ---------------------------------------------------------------------------------------------
# THP

def test_thp_runtime_and_running_cmdline(nitro):
    facts = nitro.facts()['thp']
    assert facts == {
        'runtime': {
            'enabled': {'value': 'always', 'offered': ['always', 'madvise', 'never']},
            'defrag': {'value': 'madvise', 'offered': ['always', 'defer', 'defer+madvise', 'madvise', 'never']},
            'khugepaged_defrag': {'value': '1', 'offered': []},
        },
        'running_cmdline': 'never',
        'configured_cmdline': None,  # no os-release: the boot loader is not managed here
        'error': None,
    }


def test_thp_el7_kernel_without_khugepaged_defrag(env):
    env.with_thp(defrag='always madvise never', active=('never', 'never'), khugepaged=None)
    runtime = env.facts()['thp']['runtime']
    assert runtime == {'enabled': {'value': 'never', 'offered': ['always', 'madvise', 'never']},
                       'defrag': {'value': 'never', 'offered': ['always', 'madvise', 'never']}}


def test_thp_rhel6_directory(env):
    env.host.write('/sys/kernel/mm/redhat_transparent_hugepage/enabled', '[always] madvise never\n')
    env.host.write('/sys/kernel/mm/redhat_transparent_hugepage/khugepaged/defrag', '[yes] no\n')
    runtime = env.facts()['thp']['runtime']
    assert runtime == {'enabled': {'value': 'always', 'offered': ['always', 'madvise', 'never']},
                       'khugepaged_defrag': {'value': 'yes', 'offered': ['yes', 'no']}}


def test_no_thp_directory(env):
    facts = env.facts()['thp']
    assert facts['runtime'] is None
    assert 'no Transparent Huge Pages' in facts['error']
    assert facts['running_cmdline'] is None  # and no /proc/cmdline either


def test_thp_running_cmdline_last_occurrence_wins(nitro):
    nitro.host.write('/proc/cmdline', 'ro transparent_hugepage=always quiet transparent-hugepage=madvise\n')
    assert nitro.facts()['thp']['running_cmdline'] == 'madvise'


# ---------------------------------------------------------------------------------------------
# Managed files

def test_no_managed_files(nitro):
    assert nitro.facts()['managed_files'] == {}


def test_managed_rules_file_with_rules_and_baselines(nitro):
    nitro.with_rules()
    facts = nitro.facts()
    assert facts['managed_files'] == {'read_ahead_rules': {
        'path': RULES, 'rules': {LV_MATCH: 32},
        'baselines': [{'match': LV_MATCH, 'device': 'dm-0', 'read_ahead_kb': 4096, 'lvm_read_ahead': 'auto'}],
    }}
    assert facts['block_devices']['dm-0']['rule'] == 32
    assert facts['block_devices']['nvme1n1']['rule'] is None
    assert facts['conflicts'] == []  # our own file is no competitor


def test_managed_rules_file_for_an_nvme_by_serial(nitro):
    baseline = {'match': NVME1_MATCH, 'device': 'nvme1n1', 'read_ahead_kb': 4096}
    nitro.with_rules({NVME1_MATCH: 256}, {NVME1_MATCH: baseline})
    devices = nitro.facts()['block_devices']
    assert devices['nvme1n1']['rule'] == 256
    assert devices['dm-0']['rule'] is None


def test_damaged_rules_file_is_an_error_not_a_failure(nitro):
    nitro.host.write(RULES, udev_rules.render({LV_MATCH: 32}, {}) + 'KERNEL=="sdb", ATTR{queue/read_ahead_kb}="512"\n')
    facts = nitro.facts()
    entry = facts['managed_files']['read_ahead_rules']
    assert sorted(entry) == ['error', 'path']
    assert entry['path'] == RULES
    assert 'was not written by aemops.os_tuning' in entry['error']
    assert facts['block_devices']['dm-0']['rule'] is None


def test_damaged_rules_baseline_is_an_error_not_a_failure(nitro):
    nitro.host.write(RULES, udev_rules.render({}, {LV_MATCH: {'match': LV_MATCH}}).replace('}', ''))
    entry = nitro.facts()['managed_files']['read_ahead_rules']
    assert 'damaged baseline records' in entry['error']


def test_managed_tuned_child_profile(nitro):
    nitro.with_child_profile(thp_enabled='never')
    child = nitro.facts()['managed_files']['tuned_child_profile']
    assert child == {
        'path': CHILD,
        'baseline': {'active_profiles': ['virtual-guest'], 'profile_mode': 'auto'},
        'parents': ['virtual-guest'],
        'sections': [{'owner': 'read_ahead', 'name': 'disk'},
                     {'owner': 'read_ahead', 'name': 'aemops_read_ahead_32'},
                     {'owner': 'thp', 'name': 'vm'}],
    }


def test_damaged_tuned_child_profile_is_an_error_not_a_failure(nitro):
    nitro.with_child_profile()
    text = nitro.host.read(CHILD).replace('"profile_mode"', 'profile_mode')
    nitro.host.write(CHILD, text)
    facts = nitro.facts()
    assert list(facts['managed_files']['tuned_child_profile']) == ['error']
    assert 'damaged baseline record' in facts['managed_files']['tuned_child_profile']['error']


def test_managed_thp_baseline(nitro):
    record = nitro.with_thp_baseline()
    assert nitro.facts()['managed_files'] == {'thp_baseline': {
        'path': thp.BASELINE_FILE, 'baseline': record, 'errors': []}}


def test_damaged_thp_baseline_is_reported(nitro):
    nitro.host.write(thp.BASELINE_FILE, '# aemops-baseline {"enabled": "always"\n')
    entry = nitro.facts()['managed_files']['thp_baseline']
    assert entry['baseline'] is None
    assert len(entry['errors']) == 1
    assert entry['errors'][0].startswith('line 1: not valid JSON (')
    assert entry['errors'][0].endswith(': # aemops-baseline {"enabled": "always"')


def test_all_managed_files_together(nitro):
    nitro.with_rules()
    nitro.with_child_profile()
    nitro.with_thp_baseline()
    assert sorted(nitro.facts()['managed_files']) == ['read_ahead_rules', 'thp_baseline', 'tuned_child_profile']


# ---------------------------------------------------------------------------------------------
# Conflicts

def test_competing_udev_rule_and_rc_local(nitro):
    nitro.with_rules()  # ours: not a conflict
    nitro.host.write('/etc/udev/rules.d/60-custom.rules',
                     '# ATTR{queue/read_ahead_kb}="1" in a comment\n'
                     'ACTION=="add", KERNEL=="nvme*", ATTR{queue/read_ahead_kb}="4096"\n')
    nitro.host.write('/usr/lib/udev/rules.d/60-custom.rules', 'ATTR{queue/read_ahead_kb}="8"\n')  # masked
    nitro.host.write('/etc/rc.d/rc.local', '#!/bin/sh\n# blockdev --setra 1 /dev/sda\n'
                                           'blockdev --setra 8192 /dev/nvme1n1\n')
    nitro.host.symlink('/etc/rc.local', 'rc.d/rc.local')
    assert nitro.facts()['conflicts'] == [
        {'source': 'udev rule', 'file': '/etc/udev/rules.d/60-custom.rules', 'line': 2,
         'text': 'ACTION=="add", KERNEL=="nvme*", ATTR{queue/read_ahead_kb}="4096"'},
        {'source': 'rc.local', 'file': '/etc/rc.d/rc.local', 'line': 3,
         'text': 'blockdev --setra 8192 /dev/nvme1n1'},
    ]


def test_no_conflicts(nitro):
    assert nitro.facts()['conflicts'] == []


# ---------------------------------------------------------------------------------------------
# OS and boot facts

def test_os_rhel8_with_bls(nitro):
    nitro.with_el8_bls('never')
    nitro.host.set_kernel(EL8_KERNEL)
    facts = nitro.facts()
    os_facts = facts['os']
    reason = os_facts.pop('boot_reason')
    assert os_facts == {'id': 'rhel', 'version_id': '8.9', 'major': 8, 'family': 'el8', 'efi': False, 'bls': True,
                        'boot_method': 'grubby', 'grubby': True, 'tuned_version': '2.21.0', 'python': sys.executable,
                        'kernel_release': EL8_KERNEL}
    assert 'BLS entries' in reason and 'grubby' in reason
    assert facts['thp']['configured_cmdline'] == {
        '/etc/default/grub': 'never', 'grubby:/boot/vmlinuz-%s' % EL8_KERNEL: 'never', 'kernelopts': 'never'}
    assert facts['thp']['running_cmdline'] == 'never'
    assert facts['thp']['error'] is None
    assert nitro.tools.ran('grubby') == [['/usr/sbin/grubby', '--info=ALL']]


def test_os_rhel8_efi(nitro):
    nitro.with_el8_bls()
    nitro.host.mkdir('/sys/firmware/efi')
    os_facts = nitro.facts()['os']
    assert (os_facts['efi'], os_facts['bls'], os_facts['boot_method']) == (True, True, 'grubby')


def test_os_rhel8_without_grubby_is_an_error_fact(nitro):
    nitro.with_el8_bls()
    nitro.tools.installed.discard('grubby')
    facts = nitro.facts()
    assert facts['os']['grubby'] is False
    assert facts['os']['boot_method'] == 'grubby'
    assert 'grubby is not installed' in facts['os']['boot_reason']
    assert facts['thp']['configured_cmdline'] is None
    assert 'grubby is not installed' in facts['thp']['error']
    assert facts['thp']['runtime']['enabled']['value'] == 'always'


def test_os_rhel8_grubby_failing_unprivileged_is_an_error_fact(nitro):
    nitro.with_el8_bls()
    nitro.tools.fail('grubby', 1, 'grubby: Permission denied\n', when=['--info=ALL'])
    facts = nitro.facts()
    assert 'grubby --info=ALL failed' in facts['thp']['error']
    assert facts['thp']['configured_cmdline'] is None


def test_os_rhel7_bios(nitro):
    nitro.with_el7_bios()
    facts = nitro.facts()
    assert (facts['os']['family'], facts['os']['bls'], facts['os']['boot_method']) == ('el7', False, 'grub2-mkconfig')
    assert facts['thp']['configured_cmdline'] == {'/etc/default/grub': 'madvise', '/boot/grub2/grub.cfg': 'madvise'}


def test_os_debian_without_grub(nitro):
    nitro.with_os('debian')
    facts = nitro.facts()
    assert facts['os'] == {
        'id': 'debian', 'version_id': '12', 'major': 12, 'family': 'debian', 'efi': False, 'bls': False,
        'boot_method': 'none', 'boot_reason': 'the boot loader is not managed here: no /boot/grub/grub.cfg '
                                              '(direct kernel boot?)',
        'grubby': False, 'tuned_version': '2.21.0', 'python': sys.executable, 'kernel_release': None}
    assert facts['thp']['configured_cmdline'] is None
    assert facts['thp']['error'] is None


def test_os_without_os_release(nitro):
    os_facts = nitro.facts()['os']
    assert (os_facts['id'], os_facts['family'], os_facts['major'], os_facts['boot_method']) == (
        '', 'unknown', None, 'none')
    assert 'is not supported' in os_facts['boot_reason']


# ---------------------------------------------------------------------------------------------
# Which devices are listed

def test_unbound_loop_and_pseudo_devices_are_skipped(nitro):
    nitro.host.add_loop('loop0', '7:0', '')
    nitro.remove(nitro.host._devdir('loop0') + '/loop')  # unbound: the kernel has no loop/ directory
    nitro.host.add_loop('loop1', '7:1', '/var/lib/images/scratch.img', read_ahead_kb=128)
    for name, majmin in (('ram0', '1:0'), ('zram0', '252:0'), ('sr0', '11:0'), ('fd0', '2:0')):
        nitro.host.add_disk(name, majmin)
    devices = nitro.facts()['block_devices']
    assert sorted(devices) == ['dm-0', 'loop1', 'nvme0n1', 'nvme1n1']
    assert devices['loop1']['type'] == 'loop'
    assert devices['loop1']['stable_id'] == {'key': 'ATTR{loop/backing_file}', 'value': '/var/lib/images/scratch.img',
                                             'serial': None}
    assert 'loop1' in nitro.facts()['tuned']['read_ahead']


def test_btrfs_mount_is_listed_like_paths_resolves_it(env):
    env.host.add_disk('vdb', '252:16', udev={'ID_SERIAL': 'disk-b'}, links=['disk/by-id/virtio-disk-b'])
    env.host.mount('0:45', '/srv/aem', 'btrfs', '/dev/vdb')
    facts = env.facts(paths=['/srv/aem'])
    assert facts['paths']['/srv/aem']['device'] == 'vdb'
    assert facts['mounts']['/srv/aem']['governing_device'] == 'vdb'


def test_md_raid_and_plain_disks(env):
    env.host.add_disk('sdb', '8:16', udev={'ID_SERIAL': 'disk-b'})
    env.host.add_partition('sdb', 'sdb1', '8:17')
    env.host.add_disk('sdc', '8:32', udev={'ID_SERIAL': 'disk-c'})
    env.host.add_partition('sdc', 'sdc1', '8:33')
    env.host.add_md('md127', '9:127', 'aa:bb:cc:dd', slaves=['sdb1', 'sdc1'], read_ahead_kb=256)
    env.host.mount('9:127', '/srv', 'ext4', '/dev/md127')
    facts = env.facts(paths=['/srv'])
    md = facts['block_devices']['md127']
    assert (md['type'], md['slaves'], md['read_ahead_kb']) == ('md', ['sdb1', 'sdc1'], 256)
    assert md['stable_id'] == {'key': 'ENV{MD_UUID}', 'value': 'aa:bb:cc:dd', 'serial': None}
    assert facts['block_devices']['sdb']['stable_id']['key'] == 'ENV{ID_SERIAL}'
    assert facts['mounts']['/srv']['governing_device'] == 'md127'
    assert facts['paths']['/srv']['device'] == 'md127'


# ---------------------------------------------------------------------------------------------
# Read-only, and never failing on a missing piece

def test_changed_is_false_and_nothing_changes_on_a_full_host(nitro):
    nitro.with_el8_bls()
    nitro.with_rules()
    nitro.with_child_profile()
    nitro.with_thp_baseline()
    before = tree_checksum(nitro.root)
    nitro.facts(paths=[REPO, '/tmp'])
    assert nitro.result['changed'] is False
    assert tree_checksum(nitro.root) == before
    assert sorted(nitro.result) == ['ansible_facts', 'changed']
    assert sorted(os.path.basename(c[0]) for c in nitro.tools.calls) == [
        'grub2-editenv', 'grubby', 'lvs', 'tuned-adm']


def test_check_mode_gives_the_same_facts(nitro):
    nitro.with_rules()
    checked, applied = nitro.facts(paths=[REPO], check=True), nitro.facts(paths=[REPO])
    assert checked.pop('clock') and applied.pop('clock')  # the host's time: the one key that differs
    assert checked == applied


def test_facts_have_every_top_level_key(env):
    assert sorted(env.facts()) == ['block_devices', 'clock', 'conflicts', 'ebs', 'errors', 'managed_files', 'mounts',
                                   'os', 'paths', 'snapshot', 'thp', 'tuned']


def test_no_udev_database(nitro):
    nitro.remove('/run/udev')
    facts = nitro.facts()
    devices = facts['block_devices']
    assert devices['nvme1n1']['stable_id']['value'] == NVME1_SERIAL  # from the controller's sysfs serial
    assert devices['dm-0']['stable_id'] == {'key': 'ENV{DM_UUID}', 'value': LV_UUID, 'serial': None}
    assert devices['dm-0']['lvm'] == {'vg': 'vg_aem', 'lv': 'lv_repo', 'read_ahead': 'auto'}  # from the dm name
    assert facts['tuned']['read_ahead'] == {'dm-0': TP_4096, 'nvme0n1': TP_4096, 'nvme1n1': TP_4096}


def test_bare_host_with_nothing_at_all(tmpdir, monkeypatch, module_exit):
    host = FakeHost(tmpdir.join('root'))
    tools = FakeTools(host)
    facts = FactsEnv(tuning_facts, host, tools).attach(monkeypatch).facts(paths=['/'])
    assert facts['block_devices'] == {}
    assert facts['mounts'] == {}
    assert 'no mount found for /' in facts['paths']['/']['error']
    assert facts['thp']['runtime'] is None
    assert facts['tuned']['installed'] is False
    assert facts['managed_files'] == {}
    assert facts['conflicts'] == []
    assert facts['os']['boot_method'] == 'none'
    assert tools.calls == []


def test_host_with_only_sysfs_and_mounts(nitro):
    for target in ('/usr/lib/tuned', '/etc/tuned', '/run/tuned', '/proc/cmdline', '/proc/812',
                   THP_DIR, '/run/udev'):
        nitro.remove(target)
    nitro.tools.installed = set()
    facts = nitro.facts(paths=[REPO])
    assert facts['paths'][REPO]['device'] == 'dm-0'
    assert facts['tuned']['installed'] is False
    assert facts['thp']['runtime'] is None


# Pieces an unprivileged user may be unable to read on a real host. The module must still exit with facts.
UNREADABLE = [
    # (id, setup, target, xfail)
    ('grub-cfg-el7', 'with_el7_bios', '/boot/grub2/grub.cfg', True),
    ('etc-default-grub', 'with_el7_bios', '/etc/default/grub', True),
    ('rc-local', None, '/etc/rc.d/rc.local', True),
    ('tuned-pid', None, tuned.PID_FILE, True),
]


@pytest.mark.parametrize('setup, target', [pytest.param(u[1], u[2], id=u[0]) for u in UNREADABLE])
def test_unreadable_piece_does_not_fail_the_module(nitro, monkeypatch, setup, target):
    if setup:
        getattr(nitro, setup)()
    if not nitro.host.exists(target):
        nitro.host.write(target, '#!/bin/sh\nblockdev --setra 8192 /dev/nvme1n1\n')
    deny_reading(monkeypatch, nitro.host, target)
    facts = nitro.facts(paths=[REPO])
    assert facts['paths'][REPO]['device'] == 'dm-0'


def test_the_audit_names_tuned_running_no_profile(nitro):
    nitro.host.write(tuned.ACTIVE_PROFILE_FILE, '')
    assert nitro.facts()['tuned']['no_profile'] == 'tuned runs no profile (tuned-adm off: /etc/tuned/active_profile is empty)'


@pytest.mark.parametrize('args, message', [
    ({'paths': ['']}, 'paths[0] is an empty string'),
    ({'intent': {'paths': ['/opt/aem', ''], 'read_ahead_kb': 32}}, 'intent.paths[1] is an empty string'),
    ({'intent': {'devices': [''], 'read_ahead_kb': 32}}, 'intent.devices[0] is an empty string'),
])
def test_an_empty_path_is_an_error_not_the_current_directory(nitro, args, message):
    result = nitro.fail(args)
    assert message in result['msg'] and result['changed'] is False


@pytest.mark.parametrize('args, message', [
    ({'paths': ['relative/x']}, "paths entry 'relative/x' is not an absolute path: give the full path, for example "
                                "/opt/aem/crx-quickstart/repository"),
    ({'intent': {'paths': ['tmp/x'], 'read_ahead_kb': 32}}, "intent.paths entry 'tmp/x' is not an absolute path"),
    ({'intent': {'candidates': ['/opt/aem', 'srv/aem', 'aem'], 'read_ahead_kb': 32}},
     "intent.candidates entries 'srv/aem', 'aem' are not absolute paths"),
])
def test_a_relative_path_is_refused_not_looked_up_from_the_root(nitro, args, message):
    # tmp/x would otherwise resolve as /tmp/x, silently: refused as read_ahead refuses it, with nothing read.
    nitro.host.mkdir('/tmp/x')
    nitro.host.mkdir('/relative/x')
    result = nitro.fail(args)
    assert message in result['msg'] and result['msg'].startswith('nothing was changed: ')
    assert result['changed'] is False and 'ansible_facts' not in result
