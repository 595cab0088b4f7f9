# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Module-level tests for thp, through main(), on a fake host.

``ROOT`` points at a fake tree (fakehost.py). The THP files read like the kernel's, and
``thp.open`` is replaced by ``FakeHost.thp_open`` so that writing one behaves like sysfs
(the brackets move; a value the kernel does not offer fails with EINVAL).

The host's tools are fakehost.FakeTools, behind the patched ``get_bin_path`` and
``run_command`` (utils.Env), recording every call. They act on the fake tree the way the real
ones act on a host: ``grubby`` (with ``rpm`` and ``grub2-editenv``) is the versioned grubby-bls
model of fakehost.py (``FakeTools.boot_tools``), acting on the BLS entries, the grubenv block,
/etc/default/grub and /etc/kernel/cmdline as that package release does;
``grub2-mkconfig``/``update-grub`` regenerate grub.cfg by sourcing /etc/default/grub with
/bin/sh, ``tuned-adm profile`` switches the active profile. So a second run sees what the
first one did, and idempotence is real.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, thp, tuned
from ansible_collections.aemops.os_tuning.plugins.modules import thp as thp_module
from ansible_collections.aemops.os_tuning.tests.unit.utils import Env
from fakehost import (
    GRUBBY_VERSIONS, OS_RELEASE, THP_DIR, THP_DIR_RHEL6, FakeHost, FakeTools, HostReads, deny_run_dir, fixture,
    tree_checksum,
)

BASELINE = thp.BASELINE_FILE
CHILD = '/etc/tuned/%s/tuned.conf' % tuned.CHILD_PROFILE
KHUGEPAGED_PATH = THP_DIR + '/khugepaged/defrag'
EL8_DEFRAG = ['always', 'defer', 'defer+madvise', 'madvise', 'never']
MODES = ['always', 'madvise', 'never']

EL8_ARGS = 'ro crashkernel=auto resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap rhgb quiet'
KERNELOPTS = 'root=/dev/mapper/rhel-root ' + EL8_ARGS
GRUB_EL8 = (
    'GRUB_TIMEOUT=5\n'
    'GRUB_DISTRIBUTOR="$(sed \'s, release .*$,,g\' /etc/system-release)"\n'
    'GRUB_DEFAULT=saved\n'
    'GRUB_DISABLE_SUBMENU=true\n'
    'GRUB_TERMINAL_OUTPUT="console"\n'
    'GRUB_CMDLINE_LINUX="crashkernel=auto resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap '
    'rhgb quiet"\n'
    'GRUB_DISABLE_RECOVERY="true"\n'
    'GRUB_ENABLE_BLSCFG=true\n'
)
EL8_KERNELS = ('4.18.0-513.5.1.el8_9.x86_64', '4.18.0-477.10.1.el8_8.x86_64')
MACHINE_ID = '0123456789abcdef0123456789abcdef'
PROC_CMDLINE_EL8 = 'BOOT_IMAGE=(hd0,msdos1)/vmlinuz-4.18.0-513.5.1.el8_9.x86_64 %s\n' % KERNELOPTS

EL9_KERNELS = ('5.14.0-362.8.1.el9_3.x86_64', '5.14.0-284.11.1.el9_2.x86_64')
EL9_ARGS = 'root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap rhgb quiet'

GRUB_EL7 = (
    'GRUB_TIMEOUT=5\n'
    'GRUB_DISTRIBUTOR="CentOS Linux"\n'
    'GRUB_DEFAULT=saved\n'
    'GRUB_DISABLE_SUBMENU=true\n'
    'GRUB_TERMINAL_OUTPUT="console"\n'
    'GRUB_CMDLINE_LINUX="crashkernel=auto rd.lvm.lv=centos/root rd.lvm.lv=centos/swap rhgb quiet"\n'
    'GRUB_DISABLE_RECOVERY="true"\n'
)
PROC_CMDLINE_EL7 = ('BOOT_IMAGE=/vmlinuz-3.10.0-1160.el7.x86_64 root=/dev/mapper/centos-root ro crashkernel=auto '
                    'rd.lvm.lv=centos/root rd.lvm.lv=centos/swap rhgb quiet\n')

GRUB_DEBIAN = (
    '# If you change this file, run \'update-grub\' afterwards to update\n'
    'GRUB_DEFAULT=0\n'
    'GRUB_TIMEOUT=5\n'
    'GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n'
    'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    'GRUB_CMDLINE_LINUX=""\n'
)


# ---------------------------------------------------------------------------------------------
# The fake host and its tools (fakehost.FakeHost, FakeTools)

class ThpEnv(Env):
    """The Env of thp: host layouts (RHEL 7/8/9, Debian) and readers of the THP state."""

    def __init__(self, tmpdir):
        host = FakeHost(tmpdir.join('root'))
        super(ThpEnv, self).__init__(thp_module, host, FakeTools(host, str(tmpdir.join('bin'))))

    # -- state -----------------------------------------------------------------------------
    def runtime(self):
        return dict((a, self.host.thp(a)) for a in ('enabled', 'defrag', 'khugepaged/defrag')
                    if self.host.exists('%s/%s' % (self.host.thp_dir, a)))

    def baseline(self):
        text = files.read_text(files.root_path(self.root, BASELINE))
        if text is None:
            return None
        records, errors = files.parse_baselines(text)
        assert errors == [] and len(records) == 1
        return records[0]

    def child(self):
        """The parsed child profile, or None when it does not exist."""
        text = files.read_text(files.root_path(self.root, CHILD))
        return None if text is None else tuned.parse_child(text, CHILD)

    def thp_sections(self):
        return [(name, options) for owner, name, options in self.child()['sections'] if owner == 'thp']

    def bls_options(self):
        result = []
        for kernel in EL8_KERNELS:
            text = self.host.read('/boot/loader/entries/%s-%s.conf' % (MACHINE_ID, kernel))
            result.append([l for l in text.splitlines() if l.startswith('options ')][0][len('options '):])
        return result

    def grubenv(self):
        return dict(l.split('=', 1) for l in self.host.read('/boot/grub2/grubenv').splitlines()
                    if l and not l.startswith('#'))

    def grub_cmdline_linux(self):
        lines = [l for l in self.host.read('/etc/default/grub').splitlines() if l.startswith('GRUB_CMDLINE_LINUX=')]
        return lines[-1]

    # -- host layouts ----------------------------------------------------------------------
    def el8(self, cmdline_value=None, thp_kernel='el8', tuned_installed=True, grubby_version='8.40-42.el8'):
        """RHEL 8.6 with BLS entries that GRUB reads (blscfg), grubby ``grubby_version`` (the versioned
        grubby-bls fake of fakehost.py, with its rpm and grub2-editenv), grubenv kernelopts and tuned."""
        arg = '' if cmdline_value is None else ' transparent_hugepage=%s' % cmdline_value
        self.host.add_thp(thp_kernel)
        self.host.write('/etc/os-release', OS_RELEASE['el8'].replace('8.9', '8.6'))
        self.host.write('/etc/default/grub', GRUB_EL8.replace('rhgb quiet"', 'rhgb quiet%s"' % arg))
        for kernel in EL8_KERNELS:
            self.host.write('/boot/loader/entries/%s-%s.conf' % (MACHINE_ID, kernel), ''.join('%s %s\n' % kv for kv in [
                ('title', 'Red Hat Enterprise Linux (%s) 8.9 (Ootpa)' % kernel),
                ('version', kernel),
                ('linux', '/vmlinuz-%s' % kernel),
                ('initrd', '/initramfs-%s.img $tuned_initrd' % kernel),
                ('options', '%s%s $tuned_params' % (KERNELOPTS, arg)),
                ('id', 'rhel-20231101000000-%s' % kernel),
                ('grub_users', '$grub_users'),
                ('grub_arg', '--unrestricted'),
                ('grub_class', 'kernel'),
            ]))
        body = ('# GRUB Environment Block\nsaved_entry=%s-%s\nkernelopts=%s%s\nboot_success=0\n'
                'tuned_params=\ntuned_initrd=\n' % (MACHINE_ID, EL8_KERNELS[0], KERNELOPTS, arg))
        self.host.write('/boot/grub2/grubenv', body + '#' * (1024 - len(body)))
        self.host.write('/boot/grub2/grub.cfg', fixture('grub/el8-bls-grub.cfg'))
        self.host.mkdir('/etc/kernel')
        self.host.write('/proc/cmdline', PROC_CMDLINE_EL8.replace(' quiet\n', ' quiet%s\n' % arg))
        self.tools.install('grub2-mkconfig').boot_tools(grubby_version)
        if tuned_installed:
            self.with_tuned()
        return self

    def el9(self, grubby_version='8.40-63.el9', kernel_cmdline=True):
        """Rocky 9.3: BLS entries with literal options that GRUB reads, no grubenv kernelopts,
        /etc/kernel/cmdline (unless ``kernel_cmdline`` is False), grubby ``grubby_version``, tuned."""
        self.host.add_thp('el8')
        self.host.write('/etc/os-release', OS_RELEASE['el9'])
        self.host.write('/etc/default/grub', GRUB_EL8.replace('rhel/', 'rl/'))
        for kernel in EL9_KERNELS:
            self.host.write('/boot/loader/entries/%s-%s.conf' % (MACHINE_ID, kernel), ''.join('%s %s\n' % kv for kv in [
                ('title', 'Rocky Linux (%s) 9.3 (Blue Onyx)' % kernel), ('version', kernel),
                ('linux', '/vmlinuz-%s' % kernel), ('initrd', '/initramfs-%s.img $tuned_initrd' % kernel),
                ('options', '%s $tuned_params' % EL9_ARGS), ('grub_users', '$grub_users'),
                ('grub_arg', '--unrestricted'), ('grub_class', 'kernel')]))
        body = '# GRUB Environment Block\nsaved_entry=%s-%s\nboot_success=0\n' % (MACHINE_ID, EL9_KERNELS[0])
        self.host.write('/boot/grub2/grubenv', body + '#' * (1024 - len(body)))
        self.host.write('/boot/grub2/grub.cfg', fixture('grub/el8-bls-grub.cfg'))
        self.host.mkdir('/etc/kernel')
        if kernel_cmdline:
            self.host.write('/etc/kernel/cmdline', EL9_ARGS + '\n')
        self.host.write('/proc/cmdline', 'BOOT_IMAGE=(hd0,gpt2)/vmlinuz-%s %s\n' % (EL9_KERNELS[0], EL9_ARGS))
        self.tools.install('grub2-mkconfig').boot_tools(grubby_version)
        self.with_tuned()
        return self

    def el7(self, tuned_version='2.10.0', grub=GRUB_EL7):
        """CentOS 7 (BIOS) with /etc/default/grub, grub2-mkconfig and tuned 2.10."""
        self.host.add_thp('el7')
        self.host.write('/etc/os-release', OS_RELEASE['el7'])
        self.host.write('/etc/default/grub', grub)
        self.host.write('/boot/grub2/grub.cfg', '# generated long ago\n')
        self.host.write('/proc/cmdline', PROC_CMDLINE_EL7)
        self.tools.install('grub2-mkconfig', 'grubby')   # grubby: present on RHEL 7, never used there
        self.with_tuned()
        self.tools.tuned_version, self.tools.tuned_python2 = tuned_version, True
        return self

    def debian(self, grub=False):
        """Debian 12; by default booted without a boot loader (direct kernel boot)."""
        self.host.add_thp('el8')
        self.host.write('/etc/os-release', OS_RELEASE['debian'])
        self.host.write('/etc/default/grub', GRUB_DEBIAN)
        self.host.write('/proc/cmdline', 'root=/dev/vda1 ro console=ttyS0\n')
        if grub:
            self.host.write('/boot/grub/grub.cfg', '# generated by grub-mkconfig\n')
            self.tools.install('update-grub')
        return self

    def with_tuned(self, active='virtual-guest', running=False):
        self.host.add_tuned(active, running=running)
        self.tools.install('tuned-adm')
        return self


@pytest.fixture
def env(tmpdir, monkeypatch, module_exit):
    environment = ThpEnv(tmpdir).attach(monkeypatch)
    monkeypatch.setattr(thp, 'open', environment.host.thp_open(), raising=False)
    return environment


@pytest.fixture
def el8(env):
    return env.el8()


APPLY = {'enabled': 'never', 'defrag': 'never', 'khugepaged_defrag': False}
NEVER_ARG = 'transparent_hugepage=never'


def _deny_thp_writes(monkeypatch, euid):
    """os.access says no for the THP files: read-only /sys (euid 0) or not root (euid 1000)."""
    real = os.access

    def access(path, mode):
        if mode & os.W_OK and '/transparent_hugepage/' in str(path):
            return False
        return real(path, mode)
    monkeypatch.setattr(os, 'access', access)
    monkeypatch.setattr(os, 'geteuid', lambda: euid)


# ---------------------------------------------------------------------------------------------
# Check and diff mode

def test_check_mode_changes_nothing_and_reports_the_plan(el8):
    before = el8.runtime()
    checksum = tree_checksum(el8.root)
    result = el8.run(APPLY, check=True, diff=True)
    assert tree_checksum(el8.root) == checksum
    assert el8.tools.mutations() == []
    assert el8.runtime() == before == {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1'}
    assert result['changed'] is True
    assert result['runtime'] == {
        'enabled': {'before': 'always', 'after': 'never', 'offered': MODES},
        'defrag': {'before': 'madvise', 'after': 'never', 'offered': EL8_DEFRAG},
        'khugepaged/defrag': {'before': '1', 'after': '0', 'offered': []},
    }
    assert result['reboot_required'] is True
    assert result['tuned_profile']['actions'] == []
    diff = dict((d['after_header'], d) for d in result['diff'])
    runtime = diff['THP runtime (sysfs)']
    assert runtime['before'] == 'defrag=madvise\nenabled=always\nkhugepaged/defrag=1\n'
    assert runtime['after'] == 'defrag=never\nenabled=never\nkhugepaged/defrag=0\n'
    baseline = diff[BASELINE]
    assert baseline['before_header'] == '%s (absent)' % BASELINE and baseline['before'] == ''
    assert files.parse_baselines(baseline['after'])[0] == [
        {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1', 'cmdline_managed': True, 'cmdline': None}]
    profile = diff[CHILD]
    assert profile['before_header'] == '%s (absent)' % CHILD
    assert '[vm]\ntransparent_hugepages=never\ntransparent_hugepage.defrag=never\n' in profile['after']
    assert '[sysfs]\n%s=0\n' % KHUGEPAGED_PATH in profile['after']
    assert 'include=' not in profile['after']
    assert diff['/etc/default/grub']['after'].count(NEVER_ARG) == 1
    label = 'grubby:/boot/vmlinuz-%s (kernel arguments)' % EL8_KERNELS[0]
    assert NEVER_ARG not in diff[label]['before'] and NEVER_ARG in diff[label]['after']
    assert NEVER_ARG in diff['kernelopts (kernel arguments)']['after']


def boot_files(env):
    """The files the kernel command line lives in, and grubenv's kernelopts."""
    paths = ['/etc/default/grub', '/etc/kernel/cmdline'] + [
        '/boot/loader/entries/' + n for n in sorted(os.listdir(env.host.path('/boot/loader/entries')))]
    found = dict((p, env.host.read(p) if env.host.exists(p) else None) for p in paths)
    found['kernelopts'] = env.grubenv().get('kernelopts')
    return found


@pytest.mark.parametrize('state', ['present', 'absent'])
@pytest.mark.parametrize('version', GRUBBY_VERSIONS)
def test_check_mode_diff_equals_the_files_after_the_run(env, version, state):
    """Issue 10, item 8: for each modelled grubby release (fakehost.GRUBBY_VERSIONS, the
    grubby-bls script of that package), the check-mode diff shows every boot file that the real
    run changes, grubby's own edits included, exactly as the run leaves it."""
    if version.endswith('.el9'):
        env.el9(grubby_version=version, kernel_cmdline=state == 'present')
    else:
        env.el8(grubby_version=version)
    args = APPLY
    if state == 'absent':
        env.run(APPLY)
        args = {'state': 'absent'}
    before = boot_files(env)
    checksum = tree_checksum(env.root)
    check = env.run(args, check=True, diff=True)
    assert tree_checksum(env.root) == checksum
    env.run(args)
    after = boot_files(env)
    diff = dict((d['after_header'].replace(' (absent)', ''), d) for d in check['diff'])
    changed = [p for p in after if after[p] != before[p]]
    assert changed, 'the run changed no boot file'
    for path in changed:
        if path == 'kernelopts':
            assert diff['kernelopts (kernel arguments)']['after'].split() == after['kernelopts'].split()
        else:
            assert path in diff, '%s changed by the run but not in the check-mode diff' % path
    for path, entry in diff.items():
        if path.startswith('/') and path in after:
            assert after[path] == (entry['after'] if not entry['after_header'].endswith('(absent)') else None), path
    assert env.run(args)['changed'] is False


def test_bls_switched_off_regenerates_the_menu_and_the_reboot_brings_the_value(env):
    """Issue 10, item 10: RHEL 8 with BLS entries but GRUB_ENABLE_BLSCFG=false and a menu grub.cfg
    (tests/unit/fixtures/grub/el8-menu-grub.cfg). GRUB boots grub.cfg's kernel lines, so grubby
    would never reach the kernel and reboot_required would stay true; the module edits
    /etc/default/grub and regenerates grub.cfg instead."""
    env.el8()
    env.host.write('/etc/default/grub', GRUB_EL8.replace('GRUB_ENABLE_BLSCFG=true', 'GRUB_ENABLE_BLSCFG=false'))
    env.host.write('/boot/grub2/grub.cfg', fixture('grub/el8-menu-grub.cfg'))
    result = env.run(APPLY)
    assert result['cmdline']['method'] == 'grub2-mkconfig'
    assert env.ran('grubby', '--update-kernel=ALL') == []
    assert env.ran('grub2-mkconfig') == [[env.tools.path('grub2-mkconfig'), '-o', '/boot/grub2/grub.cfg']]
    assert result['reboot_required'] is True
    # the reboot: the kernel gets the arguments of the grub.cfg kernel line GRUB boots
    kernel_line = [l for l in env.host.read('/boot/grub2/grub.cfg').splitlines() if l.strip().startswith('linux16')][0]
    env.host.write('/proc/cmdline', 'BOOT_IMAGE=' + kernel_line.split(None, 1)[1] + '\n')
    again = env.run(APPLY)
    assert again['changed'] is False
    assert again['reboot_required'] is False


def test_check_mode_on_a_converged_host_is_unchanged(el8):
    el8.run(APPLY)
    checksum = tree_checksum(el8.root)
    result = el8.run(APPLY, check=True, diff=True)
    assert result['changed'] is False
    assert tree_checksum(el8.root) == checksum
    runtime = [d for d in result['diff'] if d['after_header'] == 'THP runtime (sysfs)'][0]
    assert runtime['before'] == runtime['after']


def test_no_diff_without_diff_mode(el8):
    assert 'diff' not in el8.run(APPLY, check=True)


# ---------------------------------------------------------------------------------------------
# present on RHEL 8: runtime, baseline, tuned child profile, kernel command line

def test_apply_sets_runtime_persists_and_records_the_baseline(el8):
    grub_before = el8.host.read('/etc/default/grub')
    result = el8.run(APPLY)
    assert result['changed'] is True
    # Runtime: read back from the fake sysfs, in the kernel's format.
    assert el8.runtime() == {'enabled': 'never', 'defrag': 'never', 'khugepaged/defrag': '0'}
    assert el8.host.thp_text('enabled') == 'always madvise [never]\n'
    assert el8.host.thp_text('defrag') == 'always defer defer+madvise madvise [never]\n'
    assert el8.host.thp_text('khugepaged/defrag') == '0\n'
    # Baseline: the values found before the change.
    assert el8.baseline() == {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1',
                              'cmdline_managed': True, 'cmdline': None}
    assert result['baseline'] == el8.baseline()
    assert files.is_managed(el8.host.read(BASELINE))
    assert stat.S_IMODE(os.stat(el8.host.path(BASELINE)).st_mode) == 0o644
    # tuned: the child profile includes the profile active before, and is active now.
    assert result['persist'] == ['tuned', 'cmdline']
    child = el8.child()
    assert child['include'] == []
    assert child['baseline'] == {'active_profiles': ['virtual-guest'], 'profile_mode': 'auto'}
    assert el8.thp_sections() == [
        ('vm', [('transparent_hugepages', 'never'), ('transparent_hugepage.defrag', 'never')]),
        ('sysfs', [(KHUGEPAGED_PATH, '0')]),
    ]
    assert tuned.active_profiles(el8.root) == ['virtual-guest', tuned.CHILD_PROFILE]
    assert tuned.profile_mode(el8.root) == 'manual'
    assert result['tuned_profile'] == {
        'path': CHILD, 'parents': ['virtual-guest'], 'changed': True,
        'actions': ['wrote %s' % CHILD, 'activated virtual-guest %s' % tuned.CHILD_PROFILE],
        'conflicts': [],  # throughput-performance sets no THP on x86_64 (tuned v2.5.0 removed its [vm])
        'not_activated': None}
    # ... and is the only [vm] when tuned merges them.
    units = tuned.effective_units(el8.root)[0]
    assert [u['options']['transparent_hugepages'] for u in units if u['type'] == 'vm'] == ['never']
    # Kernel command line: grubby for the entries and (8.40-37 on) kernelopts for new kernels;
    # /etc/default/grub by this module, so grubby is told to keep out (8.40-39 on; the last option).
    assert el8.ran('grubby', '--update-kernel=ALL') == [
        [el8.tools.path('grubby'), '--update-kernel=ALL', '--args=' + NEVER_ARG, '--no-etc-grub-update']]
    assert el8.ran('grub2-editenv', 'set') == []    # grubby 8.40-42 already wrote the same kernelopts
    assert el8.ran('grub2-mkconfig') == []
    assert el8.ran('tuned-adm', 'profile') == []    # tuned not running: the state files are written
    assert el8.bls_options() == ['%s $tuned_params %s' % (KERNELOPTS, NEVER_ARG)] * 2
    assert el8.grubenv()['kernelopts'] == '%s %s' % (KERNELOPTS, NEVER_ARG)
    assert el8.host.read('/etc/default/grub') == grub_before.replace('rhgb quiet"', 'rhgb quiet %s"' % NEVER_ARG)
    assert result['cmdline']['method'] == 'grubby'
    assert result['cmdline']['managed'] is True
    assert result['cmdline']['running'] is None
    assert result['cmdline']['reason'].startswith('rhel 8.6 with BLS entries in /boot/loader/entries that GRUB reads '
                                                  '(blscfg in /boot/grub2/grub.cfg): grubby')
    assert result['cmdline']['grubby']['version'] == '8.40-42.el8'
    assert result['cmdline']['args_after']['kernelopts'][-1] == NEVER_ARG
    assert result['reboot_required'] is True
    assert el8.warnings == []


def test_second_run_is_idempotent_and_plans_nothing(el8):
    el8.run(APPLY)
    checksum = tree_checksum(el8.root)
    del el8.tools.calls[:]
    result = el8.run(APPLY)
    assert result['changed'] is False
    assert tree_checksum(el8.root) == checksum
    assert el8.tools.mutations() == []
    assert result['tuned_profile']['changed'] is False
    assert result['cmdline']['args_after'] == {}
    # The running kernel still lacks the argument until the reboot.
    assert result['reboot_required'] is True
    assert result['runtime']['enabled'] == {'before': 'never', 'after': 'never', 'offered': MODES}


def test_after_the_reboot_no_reboot_is_required(el8):
    el8.run(APPLY)
    el8.host.write('/proc/cmdline', PROC_CMDLINE_EL8.replace(' quiet\n', ' quiet %s\n' % NEVER_ARG))
    result = el8.run(APPLY)
    assert result['changed'] is False
    assert result['reboot_required'] is False
    assert result['cmdline']['running'] == 'never'


def test_tuned_running_switches_with_tuned_adm(env):
    env.el8()
    env.with_tuned(running=True)
    env.run(APPLY)
    assert env.ran('tuned-adm', 'profile') == [[env.tools.path('tuned-adm'), 'profile', 'virtual-guest',
                                                tuned.CHILD_PROFILE]]
    assert tuned.active_profiles(env.root) == ['virtual-guest', tuned.CHILD_PROFILE]
    del env.tools.calls[:]
    assert env.run(APPLY)['changed'] is False
    assert env.ran('tuned-adm', 'profile') == []


def test_tuned_resetting_thp_on_the_profile_switch_is_enforced(env):
    env.el8()
    env.with_tuned(running=True)
    env.tools.tuned_sets_enabled = 'always'       # tuned applies a stale value when switching
    result = env.run(APPLY)
    assert result['changed'] is True
    assert env.host.thp('enabled') == 'never'
    assert env.run(APPLY)['changed'] is False


def test_something_else_keeping_its_value_fails(el8):
    el8.host.thp_stuck['enabled'] = 'always'
    result = el8.fail(APPLY)
    assert result['msg'].startswith('%s/enabled reads always after writing never: something else sets it. (after '
                                    'these changes: ' % THP_DIR)
    assert result['changed'] is True and result['changes']


def test_a_boot_file_write_failing_after_the_runtime_change_rolls_back_without_a_traceback(el8, monkeypatch):
    from ansible_collections.aemops.os_tuning.plugins.module_utils import thp_plan

    def broken(root, boot_plan, run, write):
        raise OSError(errno.EIO, os.strerror(errno.EIO), '/boot/grub2/grubenv')
    monkeypatch.setattr(thp_plan, 'apply_bootloader', broken)
    result = el8.fail(APPLY)
    assert result['msg'].startswith('writing /boot/grub2/grubenv failed: Input/output error (after these changes: ')
    assert result['changed'] is True
    assert '%s/enabled: always -> never' % THP_DIR in result['changes']
    assert '%s/enabled back to always' % THP_DIR in result['rolled_back'] and result['not_rolled_back'] == []
    assert el8.runtime() == {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1'}


def test_a_failure_before_any_change_reports_changed_false(el8, monkeypatch):
    real = files.atomic_write

    def write(path, *args, **kwargs):
        if path.endswith(thp.BASELINE_FILE):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real(path, *args, **kwargs)
    monkeypatch.setattr(files, 'atomic_write', write)
    result = el8.fail(APPLY)
    assert result['changed'] is False and result['changes'] == []
    assert 'No space left on device' in result['msg']
    assert el8.runtime() == {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1'}


def test_changing_the_value_keeps_the_original_baseline(el8):
    el8.run(APPLY)
    result = el8.run({'enabled': 'madvise', 'defrag': 'defer+madvise'})
    assert result['changed'] is True
    assert el8.runtime() == {'enabled': 'madvise', 'defrag': 'defer+madvise', 'khugepaged/defrag': '0'}
    assert el8.baseline() == {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1',
                              'cmdline_managed': True, 'cmdline': None}
    assert el8.thp_sections() == [
        ('vm', [('transparent_hugepages', 'madvise'), ('transparent_hugepage.defrag', 'defer+madvise')])]
    assert el8.grubenv()['kernelopts'] == KERNELOPTS + ' transparent_hugepage=madvise'
    assert el8.bls_options() == ['%s $tuned_params transparent_hugepage=madvise' % KERNELOPTS] * 2
    assert el8.run({'enabled': 'madvise', 'defrag': 'defer+madvise'})['changed'] is False


def test_empty_defrag_and_omitted_khugepaged_are_left_alone(el8):
    result = el8.run({'enabled': 'never', 'defrag': ''})
    assert el8.runtime() == {'enabled': 'never', 'defrag': 'madvise', 'khugepaged/defrag': '1'}
    assert result['runtime']['defrag'] == {'before': 'madvise', 'after': 'madvise', 'offered': EL8_DEFRAG}
    assert el8.thp_sections() == [('vm', [('transparent_hugepages', 'never')])]


def test_khugepaged_defrag_true(el8):
    el8.host.add_thp('el8', khugepaged='0')
    el8.run({'khugepaged_defrag': True})
    assert el8.host.thp_text('khugepaged/defrag') == '1\n'
    assert ('sysfs', [(KHUGEPAGED_PATH, '1')]) in el8.thp_sections()


def test_kernel_without_khugepaged_defrag_ignores_the_option(el8):
    el8.host.add_thp('el8', khugepaged=False)
    result = el8.run(APPLY)
    assert 'khugepaged/defrag' not in result['runtime']
    assert [name for name, _options in el8.thp_sections()] == ['vm']


def test_running_kernel_booted_with_another_value_warns_about_tuned(env):
    env.el8(cmdline_value='always')
    env.run(APPLY)
    assert any('booted with transparent_hugepage=always' in w and 'tuned ignores' in w for w in env.warnings)


def test_already_persisted_value_is_not_planned_again(env):
    env.el8(cmdline_value='never')
    result = env.run(APPLY)
    assert env.ran('grubby', '--update-kernel=ALL') == []
    assert env.ran('grub2-editenv', 'set') == []
    assert result['reboot_required'] is False
    assert env.baseline()['cmdline'] == 'never'


def test_read_ahead_sections_in_the_child_profile_are_preserved(el8):
    read_ahead = ('read_ahead', 'aemops_read_ahead_32', [
        ('type', 'disk'), ('devices_udev_regex', '^(?:ID_SERIAL=Amazon_EBS_vol0123)$'), ('readahead', '32')])
    el8.host.write(CHILD, tuned.render_child({'active_profiles': ['virtual-guest'], 'profile_mode': 'auto'},
                                             [read_ahead]))
    el8.host.write(tuned.ACTIVE_PROFILE_FILE, tuned.CHILD_PROFILE + '\n')
    el8.host.write(tuned.PROFILE_MODE_FILE, 'manual\n')
    el8.run(APPLY)
    child = el8.child()
    assert child['include'] == []
    assert [(owner, name) for owner, name, _o in child['sections']] == [
        ('read_ahead', 'aemops_read_ahead_32'), ('thp', 'vm'), ('thp', 'sysfs')]
    assert child['sections'][0] == read_ahead
    # Ours alone was active (the 0.1.0 layout): the recorded parent goes back in front of it.
    assert tuned.active_profiles(el8.root) == ['virtual-guest', tuned.CHILD_PROFILE]
    # Backing THP out leaves read_ahead's section, the file and the active profiles.
    el8.run({'state': 'absent'})
    child = el8.child()
    assert child['sections'] == [read_ahead]
    assert tuned.active_profiles(el8.root) == ['virtual-guest', tuned.CHILD_PROFILE]


# ---------------------------------------------------------------------------------------------
# persist

def test_persist_empty_touches_only_runtime(el8):
    checksum = tree_checksum(el8.root)
    result = el8.run({'enabled': 'never', 'defrag': 'never', 'khugepaged_defrag': False, 'persist': []})
    assert result['changed'] is True
    assert result['persist'] == []
    assert result['tuned_profile'] is None
    assert result['cmdline']['managed'] is False
    assert result['reboot_required'] is False
    assert el8.runtime() == {'enabled': 'never', 'defrag': 'never', 'khugepaged/defrag': '0'}
    assert el8.tools.mutations() == []
    # Only the THP files and the baseline record (for state=absent) differ.
    after = tree_checksum(el8.root)
    changed = sorted(k for k in set(checksum) | set(after) if checksum.get(k) != after.get(k))
    thp_rel = THP_DIR.lstrip('/')
    baseline_rel = BASELINE.lstrip('/')
    assert changed == sorted([thp_rel + '/defrag', thp_rel + '/enabled', thp_rel + '/khugepaged/defrag',
                              os.path.dirname(baseline_rel), baseline_rel])
    assert el8.baseline()['cmdline_managed'] is False


def test_persist_empty_after_a_persisted_run_leaves_the_tuned_profile(el8):
    el8.run(APPLY)
    profile = el8.host.read(CHILD)
    el8.run({'enabled': 'madvise', 'persist': []})
    assert el8.host.thp('enabled') == 'madvise'
    assert el8.host.exists(CHILD) and el8.host.read(CHILD) == profile
    assert tuned.active_profiles(el8.root) == ['virtual-guest', tuned.CHILD_PROFILE]


def test_persist_default_without_tuned_is_cmdline_only(env):
    env.el8(tuned_installed=False)
    result = env.run(APPLY)
    assert result['persist'] == ['cmdline']
    assert result['tuned_profile'] is None
    assert not env.host.exists(CHILD)
    assert env.bls_options() == ['%s $tuned_params %s' % (KERNELOPTS, NEVER_ARG)] * 2
    # Without tuned, defrag has nowhere to persist: the command line carries only the THP mode.
    assert len(env.warnings) == 1 and 'defrag=never is set at runtime only' in env.warnings[0]


def test_persist_default_with_tuned_but_no_active_profile_is_cmdline_only(el8):
    el8.host.write(tuned.ACTIVE_PROFILE_FILE, '')
    result = el8.run(APPLY)
    assert result['persist'] == ['cmdline']
    assert not el8.host.exists(CHILD)


def test_persist_tuned_without_tuned_warns_and_uses_the_cmdline(env):
    env.el8(tuned_installed=False)
    result = env.run(dict(APPLY, persist=['tuned', 'cmdline']))
    assert result['persist'] == ['cmdline']
    assert any('persist includes tuned, but tuned is not installed' in w for w in env.warnings)
    assert not env.host.exists(CHILD)
    assert env.grubenv()['kernelopts'].endswith(NEVER_ARG)


def test_persist_tuned_without_an_active_profile_says_so(el8):
    el8.host.write(tuned.ACTIVE_PROFILE_FILE, '')
    result = el8.run(dict(APPLY, persist=['tuned']))
    assert result['persist'] == []
    assert any('persist includes tuned, but tuned runs no profile (tuned-adm off: /etc/tuned/active_profile is empty)'
               in w for w in el8.warnings)


def test_persist_tuned_only(el8):
    result = el8.run(dict(APPLY, persist=['tuned']))
    assert result['persist'] == ['tuned']
    assert el8.thp_sections()[0][0] == 'vm'
    assert el8.ran('grubby', '--update-kernel=ALL') == []
    assert result['cmdline']['managed'] is False
    assert result['reboot_required'] is False


# ---------------------------------------------------------------------------------------------
# Other releases and kernels

def test_rhel7_with_tuned_2_10_sets_defrag_through_sysfs_and_runs_grub2_mkconfig(env):
    env.el7()
    result = env.run(APPLY)
    assert env.runtime() == {'enabled': 'never', 'defrag': 'never', 'khugepaged/defrag': '0'}
    assert env.host.thp_text('defrag') == 'always madvise [never]\n'
    assert env.thp_sections() == [
        ('vm', [('transparent_hugepages', 'never')]),
        ('sysfs', [(THP_DIR + '/defrag', 'never'), (KHUGEPAGED_PATH, '0')]),
    ]
    assert env.ran('grub2-mkconfig') == [[env.tools.path('grub2-mkconfig'), '-o', '/boot/grub2/grub.cfg']]
    assert env.ran('grubby') == []
    assert result['cmdline']['method'] == 'grub2-mkconfig'
    assert 'GRUB_CMDLINE_LINUX="crashkernel=auto rd.lvm.lv=centos/root rd.lvm.lv=centos/swap rhgb quiet %s"' \
        % NEVER_ARG in env.host.read('/etc/default/grub')
    cfg = env.host.read('/boot/grub2/grub.cfg')
    assert cfg.count(NEVER_ARG) == 2                 # the normal and the rescue entry
    assert result['reboot_required'] is True
    del env.tools.calls[:]
    checksum = tree_checksum(env.root)
    assert env.run(APPLY)['changed'] is False
    assert env.tools.mutations() == []
    assert tree_checksum(env.root) == checksum


def test_rhel7_tuned_2_11_gets_the_vm_defrag_option(env):
    env.el7(tuned_version='2.11.0')
    env.run(APPLY)
    assert env.thp_sections()[0] == ('vm', [('transparent_hugepages', 'never'),
                                            ('transparent_hugepage.defrag', 'never')])


def test_rhel6_kernel_redhat_directory_runtime_only(env):
    env.host.add_thp('el6')
    result = env.run(dict(APPLY, persist=[]))
    assert result['changed'] is True
    assert env.host.read(THP_DIR_RHEL6 + '/enabled') == 'always madvise [never]\n'
    assert env.host.read(THP_DIR_RHEL6 + '/khugepaged/defrag') == 'yes [no]\n'
    assert result['runtime']['khugepaged/defrag'] == {'before': 'yes', 'after': 'no', 'offered': ['yes', 'no']}
    env.run({'state': 'absent'})
    assert env.runtime() == {'enabled': 'always', 'defrag': 'always', 'khugepaged/defrag': 'yes'}


def test_debian_without_grub_does_not_manage_the_cmdline(env):
    env.debian()
    result = env.run(APPLY)
    assert result['changed'] is True
    assert result['persist'] == ['cmdline']
    assert result['cmdline']['managed'] is False
    assert result['cmdline']['method'] == 'none'
    assert 'no /boot/grub/grub.cfg' in result['cmdline']['reason']
    assert result['reboot_required'] is False
    assert any(w.startswith('the kernel command line is not managed here: ') and 'direct kernel boot' in w
               for w in env.warnings)
    assert env.host.read('/etc/default/grub') == GRUB_DEBIAN
    assert env.runtime()['enabled'] == 'never'
    assert env.baseline()['cmdline_managed'] is False
    assert env.run(APPLY)['changed'] is False


def test_debian_with_grub_runs_update_grub(env):
    env.debian(grub=True)
    result = env.run(APPLY)
    assert result['cmdline']['method'] == 'update-grub'
    assert env.ran('update-grub') == [[env.tools.path('update-grub')]]
    assert 'GRUB_CMDLINE_LINUX="%s"' % NEVER_ARG in env.host.read('/etc/default/grub')
    assert env.host.read('/boot/grub/grub.cfg').count(NEVER_ARG) == 2
    assert env.run(APPLY)['changed'] is False
    env.run({'state': 'absent'})
    assert env.host.read('/etc/default/grub') == GRUB_DEBIAN
    assert NEVER_ARG not in env.host.read('/boot/grub/grub.cfg')


# ---------------------------------------------------------------------------------------------
# absent

def test_absent_restores_everything(el8):
    originals = dict((t, el8.host.read(t)) for t in ['/etc/default/grub', '/boot/grub2/grubenv'] + [
        '/boot/loader/entries/%s-%s.conf' % (MACHINE_ID, k) for k in EL8_KERNELS])
    el8.run(APPLY)
    del el8.tools.calls[:]
    result = el8.run({'state': 'absent'})
    assert result['changed'] is True
    assert el8.runtime() == {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1'}
    assert result['runtime']['enabled'] == {'before': 'never', 'after': 'always', 'offered': MODES}
    assert el8.ran('grubby', '--update-kernel=ALL') == [
        [el8.tools.path('grubby'), '--update-kernel=ALL', '--remove-args=transparent_hugepage', '--no-etc-grub-update']]
    assert el8.ran('grub2-editenv', 'set') == []
    for target, text in originals.items():
        assert el8.host.read(target) == text, target
    assert not el8.host.exists(CHILD)
    assert tuned.active_profiles(el8.root) == ['virtual-guest']
    assert tuned.profile_mode(el8.root) == 'auto'
    assert not el8.host.exists(BASELINE)
    # The directories the collection owns whole go with their last file.
    assert not el8.host.exists(os.path.dirname(CHILD)) and not el8.host.exists(os.path.dirname(BASELINE))
    assert el8.host.exists('/etc/tuned')
    assert result['reboot_required'] is False      # /proc/cmdline never had it


def test_absent_restores_the_recorded_cmdline_value(env):
    env.el8(cmdline_value='always')
    env.run(APPLY)
    assert env.baseline()['cmdline'] == 'always'
    assert env.grubenv()['kernelopts'] == '%s %s' % (KERNELOPTS, NEVER_ARG)
    # grubby drops the old value and appends the new one.
    assert env.bls_options() == ['%s $tuned_params %s' % (KERNELOPTS, NEVER_ARG)] * 2
    del env.tools.calls[:]
    env.run({'state': 'absent'})
    assert env.ran('grubby', '--update-kernel=ALL') == [
        [env.tools.path('grubby'), '--update-kernel=ALL', '--args=transparent_hugepage=always', '--no-etc-grub-update']]
    assert env.grubenv()['kernelopts'] == KERNELOPTS + ' transparent_hugepage=always'
    assert 'rhgb quiet transparent_hugepage=always"' in env.grub_cmdline_linux()
    assert all(o.endswith('transparent_hugepage=always') for o in env.bls_options())


def test_absent_with_tuned_running_restores_the_profile_with_tuned_adm(env):
    env.el8()
    env.with_tuned(running=True)
    env.run(APPLY)
    del env.tools.calls[:]
    env.run({'state': 'absent'})
    assert env.ran('tuned-adm', 'profile') == [[env.tools.path('tuned-adm'), 'profile', 'virtual-guest']]
    assert tuned.active_profiles(env.root) == ['virtual-guest']
    assert not env.host.exists(CHILD)


def test_absent_check_mode_changes_nothing(el8):
    el8.run(APPLY)
    checksum = tree_checksum(el8.root)
    del el8.tools.calls[:]
    result = el8.run({'state': 'absent'}, check=True, diff=True)
    assert result['changed'] is True
    assert tree_checksum(el8.root) == checksum
    assert el8.tools.mutations() == []
    headers = [d['after_header'] for d in result['diff']]
    assert '%s (absent)' % BASELINE in headers
    assert '%s (absent)' % CHILD in headers


def test_absent_twice_is_unchanged(el8):
    el8.run(APPLY)
    el8.run({'state': 'absent'})
    checksum = tree_checksum(el8.root)
    del el8.tools.calls[:]
    result = el8.run({'state': 'absent'})
    assert result['changed'] is False
    assert tree_checksum(el8.root) == checksum
    assert el8.tools.mutations() == []


def test_absent_without_baseline_warns_and_restores_nothing(el8):
    el8.host.add_thp('el8', enabled='never')
    checksum = tree_checksum(el8.root)
    result = el8.run({'state': 'absent'})
    assert result['changed'] is False
    assert tree_checksum(el8.root) == checksum
    assert el8.host.thp('enabled') == 'never'
    assert result['baseline'] == {}
    assert any('no recorded THP baseline' in w and BASELINE in w for w in el8.warnings)
    assert el8.tools.mutations() == []


def test_absent_without_baseline_still_removes_thp_tuned_sections(el8):
    el8.run(APPLY)
    os.unlink(el8.host.path(BASELINE))
    el8.run({'state': 'absent'})
    assert not el8.host.exists(CHILD)
    assert el8.runtime()['enabled'] == 'never'           # nothing recorded to restore
    assert any('no recorded THP baseline' in w for w in el8.warnings)


def test_absent_removes_a_cmdline_argument_added_after_a_runtime_only_first_run(el8):
    el8.run(dict(APPLY, persist=[]))
    el8.run(APPLY)
    assert el8.grubenv()['kernelopts'].endswith(NEVER_ARG)
    el8.run({'state': 'absent'})
    assert el8.grubenv()['kernelopts'] == KERNELOPTS
    assert NEVER_ARG not in ' '.join(el8.bls_options())


# ---------------------------------------------------------------------------------------------
# Failures while applying

def test_failing_grubby_fails_with_its_message(el8):
    el8.tools.fail('grubby', 1, 'grubby: error writing entry\n', when=['--update-kernel=ALL'])
    result = el8.fail(APPLY)
    expected = '%s --update-kernel=ALL --args=%s --no-etc-grub-update failed (rc 1): ' % (el8.tools.path('grubby'), NEVER_ARG)
    assert result['msg'].startswith(expected)
    assert 'error writing entry' in result['msg']
    assert result['changed'] is True


def test_write_failing_after_the_checks_reports_the_kernel_error(el8, monkeypatch):
    # os.access said yes, the write itself fails (a read-only /sys that access() does not see).
    def read_only_sysfs(path, mode='r', *args, **kwargs):
        if 'w' in mode and '/transparent_hugepage/' in str(path):
            raise IOError(errno.EROFS, os.strerror(errno.EROFS), path)
        return open(path, mode, *args, **kwargs)
    monkeypatch.setattr(thp, 'open', read_only_sysfs, raising=False)
    result = el8.fail(APPLY)
    assert result['msg'].startswith('cannot set THP inside a container: %s/' % THP_DIR)
    assert result['changed'] is True                 # the baseline record was written first
    assert el8.runtime() == {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1'}


def test_failing_tuned_adm_fails_with_its_message(env):
    env.el8()
    env.with_tuned(running=True)
    env.tools.fail('tuned-adm', 1, 'Cannot talk to TuneD daemon via DBus.\n', when=['profile'])
    result = env.fail(APPLY)
    assert 'tuned-adm profile virtual-guest %s failed' % tuned.CHILD_PROFILE in result['msg']
    assert 'DBus' in result['msg']
    assert result['changed'] is True


# ---------------------------------------------------------------------------------------------
# Bad inputs: each fails with a message naming the problem, and changes nothing.

def _el7_kernel(env):
    env.host.add_thp('el7')


def _no_thp(env):
    os.unlink(env.host.path(THP_DIR + '/enabled'))
    os.unlink(env.host.path(THP_DIR + '/defrag'))
    os.unlink(env.host.path(THP_DIR + '/khugepaged/defrag'))
    os.rmdir(env.host.path(THP_DIR + '/khugepaged'))
    os.rmdir(env.host.path(THP_DIR))


def _unbalanced_grub(env):
    env.host.write('/etc/default/grub', GRUB_EL7.replace('rhgb quiet"', 'rhgb quiet'))


def _no_grubby(env):
    env.tools.uninstall('grubby')


def _no_grub2_editenv(env):
    env.tools.uninstall('grub2-editenv')


def _damaged_baseline(env):
    env.host.write(BASELINE, '# Managed by aemops.os_tuning (thp module).\n# aemops-baseline {"enabled": "always",\n')


def _baseline_not_a_dict(env):
    env.host.write(BASELINE, '# aemops-baseline ["always"]\n')


def _malformed_child_header(env):
    env.host.write(CHILD, '[main]\ninclude=virtual-guest\n# owner: thp\n[vm\ntransparent_hugepages=never\n')


def _malformed_child_line(env):
    env.host.write(CHILD, '[main]\ninclude=virtual-guest\n# owner: thp\n[vm]\ntransparent_hugepages never\n')


def _damaged_child_baseline(env):
    env.host.write(CHILD, '# aemops-baseline {"active_profiles": [\n[main]\ninclude=virtual-guest\n')


def _hand_added_vm_section(env):
    env.host.write(CHILD, '[main]\ninclude=virtual-guest\n[vm]\ntransparent_hugepages=madvise\n')


def _tuned_params_conflict(env):
    env.host.write('/boot/grub2/grubenv', env.host.read('/boot/grub2/grubenv').replace(
        'tuned_params=\n', 'tuned_params=transparent_hugepage=always\n'))


def _no_grub_default(env):
    os.unlink(env.host.path('/etc/default/grub'))


def _no_grub2_mkconfig(env):
    env.tools.uninstall('grub2-mkconfig')


def _read_only_sysfs(env, monkeypatch):
    _deny_thp_writes(monkeypatch, 0)


def _not_root(env, monkeypatch):
    _deny_thp_writes(monkeypatch, 1000)
    deny_run_dir(env.root, monkeypatch)


BAD_INPUTS = [
    # (id, host layout, args, setup(env[, monkeypatch]) or None, message fragments)
    ('enabled-bogus', 'el8', {'enabled': 'bogus'}, None, ['enabled', 'never, madvise, always', 'bogus']),
    ('state-bogus', 'el8', {'state': 'gone'}, None, ['state', 'present, absent']),
    ('khugepaged-not-bool', 'el8', {'khugepaged_defrag': 'maybe'}, None, ['khugepaged_defrag', 'maybe']),
    ('unknown-option', 'el8', {'transparent_hugepage': 'never'}, None, ['transparent_hugepage']),
    ('defrag-bogus', 'el8', {'defrag': 'sometimes'}, None,
     ['defrag=sometimes is not offered by this kernel', '%s/defrag offers: %s.' % (THP_DIR, ', '.join(EL8_DEFRAG))]),
    ('defer-on-rhel7-kernel', 'el8', {'defrag': 'defer'}, _el7_kernel,
     ['defrag=defer is not offered by this kernel', 'offers: always, madvise, never.']),
    ('el7-defer-madvise', 'el7', {'defrag': 'defer+madvise'}, None,
     ['defrag=defer+madvise is not offered by this kernel', 'offers: always, madvise, never.']),
    ('persist-unknown', 'el8', {'persist': ['tuned', 'grub']}, None,
     ['persist has unknown entries grub: use tuned, cmdline, or an empty list for runtime only.']),
    ('no-thp', 'el8', {}, _no_thp, ['this kernel has no Transparent Huge Pages in sysfs', THP_DIR_RHEL6]),
    ('read-only-sysfs', 'el8', APPLY, _read_only_sysfs,
     ['cannot set THP inside a container', '%s/' % THP_DIR, 'read-only /sys']),
    ('not-root', 'el8', APPLY, _not_root, ['permission denied writing %s/' % THP_DIR, 'needs root', 'become: true']),
    ('el7-unbalanced-grub-default', 'el7', APPLY, _unbalanced_grub,
     ['cannot plan the kernel command line: /etc/default/grub line 6: unbalanced double quote',
      'GRUB_CMDLINE_LINUX']),
    ('el7-no-grub-default', 'el7', APPLY, _no_grub_default,
     ['cannot plan the kernel command line: /etc/default/grub does not exist']),
    ('el7-no-grub2-mkconfig', 'el7', APPLY, _no_grub2_mkconfig, ['grub2-mkconfig is not installed', 'grub2-tools']),
    ('el8-no-grubby', 'el8', APPLY, _no_grubby,
     ['cannot plan the kernel command line: grubby is not installed', 'yum/dnf install grubby']),
    ('el8-no-grub2-editenv', 'el8', APPLY, _no_grub2_editenv, ['grub2-editenv is not installed', 'grub2-tools-minimal']),
    ('el8-tuned-params-conflict', 'el8', APPLY, _tuned_params_conflict,
     ['the grubenv variable $tuned_params', 'transparent_hugepage=always', 'tuned [bootloader]']),
    ('damaged-baseline', 'el8', APPLY, _damaged_baseline, ['%s has damaged baseline records (line 2: ' % BASELINE]),
    ('baseline-not-a-record', 'el8', {'state': 'absent'}, _baseline_not_a_dict, ['%s has damaged baseline records' % BASELINE]),
    ('child-bad-header', 'el8', APPLY, _malformed_child_header,
     ['cannot plan the tuned child profile: %s line 4: malformed section header' % CHILD]),
    ('child-bad-line', 'el8', APPLY, _malformed_child_line,
     ['cannot plan the tuned child profile: %s line 5: expected key=value' % CHILD]),
    ('child-damaged-baseline', 'el8', APPLY, _damaged_child_baseline,
     ['cannot plan the tuned child profile: %s has a damaged baseline record' % CHILD]),
    ('child-hand-added-vm', 'el8', APPLY, _hand_added_vm_section,
     ['cannot plan the tuned child profile: tuned section [vm] is wanted by both thp']),
]


def test_hand_added_section_in_the_child_profile_is_named_clearly(el8):
    _hand_added_vm_section(el8)
    message = el8.fail(APPLY)['msg']
    assert CHILD in message
    assert 'None' not in message


@pytest.mark.parametrize('layout, args, setup, fragments', [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_fails_and_changes_nothing(env, monkeypatch, layout, args, setup, fragments):
    getattr(env, layout)()
    if setup is not None:
        if setup in (_read_only_sysfs, _not_root):
            setup(env, monkeypatch)
        else:
            setup(env)
    checksum = tree_checksum(env.root)
    result = env.fail(args)
    assert result['failed'] is True
    for fragment in fragments:
        assert fragment in result['msg']
    assert tree_checksum(env.root) == checksum
    assert env.tools.mutations() == []


@pytest.mark.parametrize('setup, fragment', [
    (_read_only_sysfs, 'cannot set THP inside a container'),
    (_not_root, 'Use become: true'),
])
def test_unwritable_sysfs_also_fails_in_check_mode(el8, monkeypatch, setup, fragment):
    setup(el8, monkeypatch)
    assert fragment in el8.fail(APPLY, check=True)['msg']


def test_unchanged_values_need_no_write_access(el8, monkeypatch):
    el8.run(APPLY)
    _not_root(el8, monkeypatch)
    assert el8.run(APPLY)['changed'] is False


def test_after_tuned_adm_off_a_reapply_activates_nothing_and_says_so(env):
    env.el8()
    env.with_tuned(running=True)
    env.run(APPLY)
    assert env.tools._tuned_adm(['off'])[0] == 0  # the administrator runs tuned-adm off (see fakehost)
    del env.tools.calls[:]
    result = env.run(dict(APPLY, enabled='madvise'))
    assert env.ran('tuned-adm', 'profile') == [] and tuned.active_profiles(env.root) == []
    assert result['persist'] == ['cmdline'] and env.host.thp('enabled') == 'madvise'
    assert any(w.startswith('tuned runs no profile (tuned-adm off: /etc/tuned/active_profile is empty): THP persists '
                            'on the kernel command line only') for w in env.warnings)


def test_an_empty_persist_entry_is_named(el8):
    before = tree_checksum(el8.root)
    assert el8.fail(dict(APPLY, persist=['tuned', '']))['msg'].startswith('persist[1] is an empty string')
    assert tree_checksum(el8.root) == before


def test_one_run_reads_each_source_once_to_plan(el8, monkeypatch):
    # One apply run on RHEL 8 with tuned and BLS entries. The plan is made from one frozen state of the host
    # (host.Host with read_only, until the module thaws it): every source is read once, the boot files, THP and
    # tuned's state files included (before: /etc/default/grub 5 times, each BLS entry 3, active_profile 4,
    # tuned-main.conf 5). After the plan, the run reads again only what it has just changed, written out below.
    reads = HostReads(el8.root, monkeypatch).from_thaw(monkeypatch)
    el8.run(APPLY)
    assert reads.more_than_once('plan') == {}
    assert reads.phases['plan']['/etc/default/grub'] == 1
    assert reads.more_than_once() == {
        # tuned-adm profile rewrites it: read after the switch, to set the mode the plan chose
        '/etc/tuned/profile_mode': 2,
        # planned, read back after the write, read again to enforce after the tuned switch
        '/sys/kernel/mm/transparent_hugepage/defrag': 3,
        '/sys/kernel/mm/transparent_hugepage/enabled': 3,
        '/sys/kernel/mm/transparent_hugepage/khugepaged/defrag': 3,
    }
