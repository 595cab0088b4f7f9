# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/bootloader.py.

Fake hosts are trees under ``tmpdir`` (fakehost.FakeHost: os-release, /etc/default/grub, BLS
entries, EFI directories, /proc/cmdline); the boot tools are fakehost.FakeTools, injected as
the ``run`` and ``which`` callables. On RHEL 8 and 9, grubby, rpm and grub2-editenv are the
versioned grubby-bls model of fakehost.py (``FakeTools.boot_tools``): grubby behaves as the
script of one package release (fakehost.GRUBBY_VERSIONS; sources named there) on the BLS entry
files, /boot/grub2/grubenv, /etc/default/grub and /etc/kernel/cmdline of the tree. The fake
grub2-mkconfig and update-grub regenerate grub.cfg by sourcing /etc/default/grub with /bin/sh,
which checks the quoting of the edited file independently of the parser under test. grub.cfg
fixtures are in tests/unit/fixtures/grub.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import bootloader as bl
from ansible_collections.aemops.os_tuning.plugins.module_utils.files import atomic_write
from fakehost import GRUBBY_VERSIONS, OS_RELEASE, FakeHost, FakeTools, fixture

KEY = 'transparent_hugepage'

GRUB_EL7 = (
    'GRUB_TIMEOUT=5\n'
    'GRUB_DISTRIBUTOR="$(sed \'s, release .*$,,g\' /etc/system-release)"\n'
    'GRUB_DEFAULT=saved\n'
    'GRUB_DISABLE_SUBMENU=true\n'
    'GRUB_TERMINAL_OUTPUT="console"\n'
    'GRUB_CMDLINE_LINUX="crashkernel=auto rd.lvm.lv=centos/root rd.lvm.lv=centos/swap rhgb quiet"\n'
    'GRUB_DISABLE_RECOVERY="true"\n'
)

GRUB_DEBIAN = (
    '# If you change this file, run \'update-grub\' afterwards to update\n'
    'GRUB_DEFAULT=0\n'
    'GRUB_TIMEOUT=5\n'
    'GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n'
    'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    'GRUB_CMDLINE_LINUX=""\n'
)

EL9_ARGS = 'ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=UUID=5b4c rhgb quiet'
EL9_KERNEL_CMDLINE = 'root=UUID=0f1e2d3c-aaaa-bbbb-cccc-1234567890ab %s\n' % EL9_ARGS

PROC_CMDLINE = 'BOOT_IMAGE=(hd0,msdos1)/vmlinuz-x root=/dev/mapper/rhel-root ro crashkernel=auto rhgb quiet\n'


class Host(FakeHost):
    """The fake host (fakehost.FakeHost under ``tmpdir/root``) and its tools (fakehost.FakeTools)."""

    def __init__(self, tmpdir):
        super(Host, self).__init__(tmpdir.join('root'))
        self.tools = FakeTools(self, str(tmpdir.join('bin')))

    def read(self, target):
        """The text of ``target``, or None when it does not exist."""
        return super(Host, self).read(target) if self.exists(target) else None

    # fake tools
    def mkconfig(self, name, linux='linux16', kernels='3.10.0-1160.el7.x86_64 3.10.0-957.el7.x86_64'):
        """A working grub2-mkconfig or update-grub that writes entries for ``kernels``."""
        self.tools.menus[name] = (linux, kernels.split())
        self.tools.failures = [f for f in self.tools.failures if f[0] != name]
        self.tools.install(name)

    # the injected callables
    def run(self, argv):
        return self.tools.run(argv)

    def which(self, name):
        return self.tools.which(name)

    def calls(self):
        """The grub2-mkconfig and update-grub runs: [tool name, arguments...]."""
        return [[os.path.basename(c[0])] + c[1:] for c in self.tools.calls
                if os.path.basename(c[0]) in ('grub2-mkconfig', 'update-grub')]

    # convenience
    def detect(self):
        return bl.detect(self.root, self.which)

    def plan(self, value='never'):
        return bl.plan(self.root, self.detect(), KEY, value, self.run)

    def configured(self):
        return bl.configured(self.root, self.detect(), KEY, self.run)

    def apply(self, result):
        """What the caller does outside check mode: the files, the commands, then the files
        written after the commands (thp.apply_bootloader does the same)."""
        for entry in result['files']:
            if not entry.get('after_commands'):
                atomic_write(self.path(entry['path']), entry['after'])
        for argv in result['commands']:
            rc, out, err = self.run(argv)
            assert rc == 0, (argv, out, err)
        for entry in result['files']:
            if entry.get('after_commands'):
                atomic_write(self.path(entry['path']), entry['after'])


def sh_value(host, target, var='GRUB_CMDLINE_LINUX'):
    """What /bin/sh sees in ``var`` after sourcing ``target`` (independent of the parser)."""
    out = subprocess.check_output(['/bin/sh', '-c', '. "$1"; printf %s "$' + var + '"', 'sh', host.path(target)],
                                  universal_newlines=True)
    return out


@pytest.fixture
def host(tmpdir):
    return Host(tmpdir)


def el7_host(host, efi=False, vendor_dir=None, os_release='el7'):
    host.write('/etc/os-release', OS_RELEASE[os_release])
    host.write('/etc/default/grub', GRUB_EL7)
    host.write('/proc/cmdline', PROC_CMDLINE)
    host.mkconfig('grub2-mkconfig')
    host.tools.install('grubby')      # present on RHEL 7, never used there
    if efi:
        host.mkdir('/sys/firmware/efi')
        if vendor_dir:
            host.write('/boot/efi/EFI/%s/grub.cfg' % vendor_dir, '# old\n')
        host.mkdir('/boot/efi/EFI/BOOT')
    else:
        host.write('/boot/grub2/grub.cfg', '# not generated yet\n')
    return host


# The RHEL minor release that shipped each modelled grubby package (RHEL 8 grubby.spec changelog
# dates against the minor releases; el9: the package seen on 9.2/9.3 hosts).
GRUBBY_RHEL = {'8.40-34.el8': '8.0', '8.40-37.el8': '8.1', '8.40-38.el8': '8.2', '8.40-41.el8': '8.4',
               '8.40-42.el8': '8.6', '8.40-48.el8': '8.8', '8.40-63.el9': '9.3'}
EL8_VERSIONS = [v for v in GRUBBY_VERSIONS if v.endswith('.el8')]
MACHINE_ID = '0123456789abcdef0123456789abcdef'
EL8_KERNELS = ('4.18.0-513.5.1.el8_9.x86_64', '4.18.0-477.10.1.el8_8.x86_64')
EL8_ENTRY_ARGS = 'root=/dev/mapper/rhel-root ro crashkernel=auto resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root rhgb quiet'
EL8_GRUB = GRUB_EL7.replace('centos/', 'rhel/') + 'GRUB_ENABLE_BLSCFG=true\n'


def bls_entry(kernel, options, title='Red Hat Enterprise Linux'):
    """A BLS entry as kernel-install's 20-grub.install writes it on RHEL 8/9."""
    return ''.join('%s %s\n' % kv for kv in [
        ('title', '%s (%s)' % (title, kernel)), ('version', kernel), ('linux', '/vmlinuz-%s' % kernel),
        ('initrd', '/initramfs-%s.img $tuned_initrd' % kernel), ('options', options),
        ('id', 'rhel-20231101000000-%s' % kernel), ('grub_users', '$grub_users'), ('grub_arg', '--unrestricted'),
        ('grub_class', 'kernel')])


def grubenv_block(pairs):
    body = '# GRUB Environment Block\n' + ''.join('%s=%s\n' % kv for kv in pairs)
    return body + '#' * (1024 - len(body))


def entry_path(kernel):
    return '/boot/loader/entries/%s-%s.conf' % (MACHINE_ID, kernel)


def el8_host(host, version='8.40-42.el8', tuned_params='', kernelopts=EL8_ENTRY_ARGS, grub=EL8_GRUB):
    """RHEL 8 (the minor release that shipped grubby ``version``) with BLS entries GRUB reads.

    The newest entry boots ``$kernelopts $tuned_params`` (as anaconda and kernel-install write
    it), the older one has literal options (as after a per-kernel grubby edit). grub.cfg is the
    BLS one (blscfg), grubenv a real 1024-byte block. grubby, rpm and grub2-editenv are the
    versioned fakes of fakehost.py.
    """
    host.write('/etc/os-release', OS_RELEASE['el8'].replace('8.9', GRUBBY_RHEL[version]))
    if grub is not None:
        host.write('/etc/default/grub', grub)
    host.write(entry_path(EL8_KERNELS[0]), bls_entry(EL8_KERNELS[0], '$kernelopts $tuned_params'))
    host.write(entry_path(EL8_KERNELS[1]), bls_entry(EL8_KERNELS[1], EL8_ENTRY_ARGS + ' $tuned_params'))
    host.write('/boot/grub2/grubenv', grubenv_block([
        ('saved_entry', '%s-%s' % (MACHINE_ID, EL8_KERNELS[0])), ('kernelopts', kernelopts),
        ('boot_success', '0'), ('tuned_params', tuned_params), ('tuned_initrd', '')]))
    host.write('/boot/grub2/grub.cfg', fixture('grub/el8-bls-grub.cfg'))
    host.mkdir('/etc/kernel')              # kernel-install's directory (systemd-udev), on every RHEL 8
    host.write('/proc/cmdline', 'BOOT_IMAGE=(hd0,msdos1)/vmlinuz-%s %s\n' % (EL8_KERNELS[0], kernelopts))
    host.tools.boot_tools(version).install('grub2-mkconfig').fail('grub2-mkconfig', 1)
    return host


EL9_KERNELS = ('5.14.0-362.8.1.el9_3.x86_64', '5.14.0-284.11.1.el9_2.x86_64')


def el9_host(host, kernel_cmdline=EL9_KERNEL_CMDLINE, efi=False, version='8.40-63.el9'):
    """Rocky 9.3 with BLS entries (literal options), grubby 8.40-63.el9 and (by default) /etc/kernel/cmdline."""
    host.write('/etc/os-release', OS_RELEASE['el9'])
    host.write('/etc/default/grub', 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M '
                                    'resume=UUID=5b4c rhgb quiet"\nGRUB_ENABLE_BLSCFG=true\n')
    for kernel in EL9_KERNELS:
        host.write(entry_path(kernel), bls_entry(kernel, 'root=UUID=0f1e2d3c-aaaa-bbbb-cccc-1234567890ab %s' % EL9_ARGS,
                                                 title='Rocky Linux'))
    host.write('/boot/grub2/grub.cfg', fixture('grub/el8-bls-grub.cfg'))
    host.write('/boot/grub2/grubenv', grubenv_block([('saved_entry', '%s-%s' % (MACHINE_ID, EL9_KERNELS[0])),
                                                     ('boot_success', '0')]))
    host.mkdir('/etc/kernel')
    if kernel_cmdline is not None:
        host.write('/etc/kernel/cmdline', kernel_cmdline)
    if efi:
        host.mkdir('/sys/firmware/efi')
        host.write('/boot/efi/EFI/rocky/grub.cfg', 'configfile ($root)/grub2/grub.cfg\n')
    host.write('/proc/cmdline', PROC_CMDLINE)
    host.tools.boot_tools(version).install('grub2-mkconfig').fail('grub2-mkconfig', 1)
    return host


def debian_host(host, grub=True, os_release='debian'):
    host.write('/etc/os-release', OS_RELEASE[os_release])
    host.write('/proc/cmdline', 'BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro console=ttyS0 transparent_hugepage=always\n')
    host.write('/etc/default/grub', GRUB_DEBIAN)
    if grub:
        host.write('/boot/grub/grub.cfg', '# generated by grub-mkconfig\n')
        host.mkconfig('update-grub', linux='linux', kernels='6.1.0-18-amd64')
    return host


# ---------------------------------------------------------------------------------------------
# get_arg / set_arg

@pytest.mark.parametrize('cmdline, expected', [
    ('', None),
    ('ro quiet', None),
    ('ro transparent_hugepage=never quiet', 'never'),
    ('transparent_hugepage=always ro transparent_hugepage=never', 'never'),
    ('transparent-hugepage=madvise', 'madvise'),
    ('transparent_hugepage', ''),
    ('foo="transparent_hugepage=always x" ro', None),
    ('transparent_hugepage="never"', 'never'),
    ('transparent_hugepagefoo=1 xtransparent_hugepage=2', None),
])
def test_get_arg(cmdline, expected):
    assert bl.get_arg(cmdline, KEY) == expected


@pytest.mark.parametrize('cmdline, value, expected', [
    ('', 'never', 'transparent_hugepage=never'),
    ('ro quiet', 'never', 'ro quiet transparent_hugepage=never'),
    ('ro quiet\n', 'never', 'ro quiet transparent_hugepage=never\n'),
    ('ro transparent_hugepage=always quiet', 'never', 'ro transparent_hugepage=never quiet'),
    ('a transparent_hugepage=always b transparent_hugepage=madvise  c', 'never', 'a transparent_hugepage=never b  c'),
    ('a transparent-hugepage=always b', 'never', 'a transparent_hugepage=never b'),
    ('foo="a b" quiet', 'never', 'foo="a b" quiet transparent_hugepage=never'),
    ('ro transparent_hugepage=never quiet', 'never', 'ro transparent_hugepage=never quiet'),
    ('ro transparent_hugepage=always quiet', None, 'ro quiet'),
    ('transparent_hugepage=always quiet', None, 'quiet'),
    ('ro quiet transparent_hugepage=never', None, 'ro quiet'),
    ('transparent_hugepage=a  transparent_hugepage=b  x', None, 'x'),
    ('x transparent_hugepage=a y transparent_hugepage=b', None, 'x y'),
    ('foo="a transparent_hugepage=x" ro', None, 'foo="a transparent_hugepage=x" ro'),
    ('ro quiet', None, 'ro quiet'),
    ('transparent_hugepage=never', None, ''),
])
def test_set_arg(cmdline, value, expected):
    assert bl.set_arg(cmdline, KEY, value) == expected


@pytest.mark.parametrize('cmdline', ['', 'ro quiet', 'a transparent_hugepage=x b transparent_hugepage=y', 'foo="a b"'])
def test_set_arg_is_idempotent_and_backs_out(cmdline):
    once = bl.set_arg(cmdline, KEY, 'never')
    assert bl.set_arg(once, KEY, 'never') == once
    assert bl.get_arg(once, KEY) == 'never'
    removed = bl.set_arg(once, KEY, None)
    assert bl.get_arg(removed, KEY) is None
    assert bl.set_arg(removed, KEY, None) == removed


def test_set_arg_quotes_a_value_with_spaces():
    assert bl.set_arg('ro', 'foo', 'a b') == 'ro foo="a b"'
    assert bl.get_arg('ro foo="a b"', 'foo') == 'a b'


def test_split_args_keeps_quoted_arguments_whole():
    assert bl.split_args(' ro  foo="a b"\tquiet\n') == ['ro', 'foo="a b"', 'quiet']


# ---------------------------------------------------------------------------------------------
# /etc/default/grub

QUOTING_CASES = [
    # (before, after setting never, value the shell sees after)
    ('GRUB_CMDLINE_LINUX="rhgb quiet"\n',
     'GRUB_CMDLINE_LINUX="rhgb quiet transparent_hugepage=never"\n',
     'rhgb quiet transparent_hugepage=never'),
    ("GRUB_CMDLINE_LINUX='rhgb quiet'\n",
     "GRUB_CMDLINE_LINUX='rhgb quiet transparent_hugepage=never'\n",
     'rhgb quiet transparent_hugepage=never'),
    ('GRUB_CMDLINE_LINUX=quiet\n',
     'GRUB_CMDLINE_LINUX="quiet transparent_hugepage=never"\n',
     'quiet transparent_hugepage=never'),
    ('GRUB_CMDLINE_LINUX=""\n',
     'GRUB_CMDLINE_LINUX="transparent_hugepage=never"\n',
     'transparent_hugepage=never'),
    ('GRUB_CMDLINE_LINUX=\n',
     'GRUB_CMDLINE_LINUX="transparent_hugepage=never"\n',
     'transparent_hugepage=never'),
    ('GRUB_CMDLINE_LINUX="console=ttyS0 foo=\\"a b\\" rhgb"  # serial console\n',
     'GRUB_CMDLINE_LINUX="console=ttyS0 foo=\\"a b\\" rhgb transparent_hugepage=never"  # serial console\n',
     'console=ttyS0 foo="a b" rhgb transparent_hugepage=never'),
    ('  export GRUB_CMDLINE_LINUX="ro transparent_hugepage=always quiet"\n',
     '  export GRUB_CMDLINE_LINUX="ro transparent_hugepage=never quiet"\n',
     'ro transparent_hugepage=never quiet'),
    ("GRUB_CMDLINE_LINUX='a=\"x y\" transparent_hugepage=madvise'\n",
     "GRUB_CMDLINE_LINUX='a=\"x y\" transparent_hugepage=never'\n",
     'a="x y" transparent_hugepage=never'),
    ('GRUB_CMDLINE_LINUX="path=C:\\\\x cost=\\$5"\n',
     'GRUB_CMDLINE_LINUX="path=C:\\\\x cost=\\$5 transparent_hugepage=never"\n',
     'path=C:\\x cost=$5 transparent_hugepage=never'),
]


@pytest.mark.parametrize('before, after, shell', QUOTING_CASES)
def test_edit_grub_default_keeps_quoting_style(host, before, after, shell):
    text = 'GRUB_TIMEOUT=5\n# GRUB_CMDLINE_LINUX="commented out"\n' + before + 'GRUB_DISABLE_RECOVERY="true"\n'
    new = bl.edit_grub_default(text, KEY, 'never')
    assert new == 'GRUB_TIMEOUT=5\n# GRUB_CMDLINE_LINUX="commented out"\n' + after + 'GRUB_DISABLE_RECOVERY="true"\n'
    assert bl.grub_cmdline_linux(new) == shell
    host.write('/etc/default/grub', new)
    assert sh_value(host, '/etc/default/grub') == shell
    assert bl.edit_grub_default(new, KEY, 'never') == new


@pytest.mark.parametrize('before', [c[0] for c in QUOTING_CASES if 'always' not in c[0] and 'madvise' not in c[0]
                                    and c[0] != 'GRUB_CMDLINE_LINUX=quiet\n' and c[0] != 'GRUB_CMDLINE_LINUX=\n'])
def test_edit_grub_default_backout_restores_the_original_text(before):
    text = 'GRUB_TIMEOUT=5\n' + before
    assert bl.edit_grub_default(bl.edit_grub_default(text, KEY, 'never'), KEY, None) == text


def test_edit_grub_default_backout_of_an_unquoted_value(host):
    new = bl.edit_grub_default('GRUB_CMDLINE_LINUX=quiet\n', KEY, 'never')
    back = bl.edit_grub_default(new, KEY, None)
    assert back == 'GRUB_CMDLINE_LINUX="quiet"\n'
    host.write('/etc/default/grub', back)
    assert sh_value(host, '/etc/default/grub') == 'quiet'


def test_grub_cmdline_linux_keeps_unknown_variable_references(host):
    text = 'GRUB_CMDLINE_LINUX="rhgb $GRUB_CMDLINE_LINUX_EXTRA quiet"\n'
    assert bl.grub_cmdline_linux(text) == 'rhgb $GRUB_CMDLINE_LINUX_EXTRA quiet'
    new = bl.edit_grub_default(text, KEY, 'never')
    assert new == 'GRUB_CMDLINE_LINUX="rhgb $GRUB_CMDLINE_LINUX_EXTRA quiet transparent_hugepage=never"\n'
    host.write('/etc/default/grub', new)
    assert sh_value(host, '/etc/default/grub') == 'rhgb  quiet transparent_hugepage=never'


def test_edit_grub_default_removes_the_key_from_referenced_variables(host):
    text = ('GRUB_TIMEOUT=5\nTHP_ARGS="transparent_hugepage=always numa=off"\n'
            'GRUB_CMDLINE_LINUX="rhgb ${THP_ARGS} quiet"\n')
    assert bl.grub_cmdline_linux(text) == 'rhgb transparent_hugepage=always numa=off quiet'
    new = bl.edit_grub_default(text, KEY, 'never')
    assert new == ('GRUB_TIMEOUT=5\nTHP_ARGS="numa=off"\n'
                   'GRUB_CMDLINE_LINUX="rhgb ${THP_ARGS} quiet transparent_hugepage=never"\n')
    host.write('/etc/default/grub', new)
    assert sh_value(host, '/etc/default/grub') == 'rhgb numa=off quiet transparent_hugepage=never'
    gone = bl.edit_grub_default(new, KEY, None)
    assert bl.get_arg(bl.grub_cmdline_linux(gone), KEY) is None


def test_single_quoted_dollar_is_not_a_reference():
    text = "X=transparent_hugepage=always\nGRUB_CMDLINE_LINUX='a $X'\n"
    assert bl.grub_cmdline_linux(text) == 'a $X'
    assert bl.edit_grub_default(text, KEY, None) == text


def test_duplicate_definitions_edit_the_last(host):
    text = 'GRUB_CMDLINE_LINUX="first transparent_hugepage=always"\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="second"\n'
    assert bl.grub_cmdline_linux(text) == 'second'
    new = bl.edit_grub_default(text, KEY, 'never')
    assert new == ('GRUB_CMDLINE_LINUX="first transparent_hugepage=always"\nGRUB_TIMEOUT=5\n'
                   'GRUB_CMDLINE_LINUX="second transparent_hugepage=never"\n')
    host.write('/etc/default/grub', new)
    assert sh_value(host, '/etc/default/grub') == 'second transparent_hugepage=never'


def test_self_reference_chain_is_followed(host):
    text = 'GRUB_CMDLINE_LINUX="a transparent_hugepage=madvise"\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX b"\n'
    assert bl.grub_cmdline_linux(text) == 'a transparent_hugepage=madvise b'
    new = bl.edit_grub_default(text, KEY, 'never')
    assert new == 'GRUB_CMDLINE_LINUX="a"\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX b transparent_hugepage=never"\n'
    host.write('/etc/default/grub', new)
    assert sh_value(host, '/etc/default/grub') == 'a b transparent_hugepage=never'


def test_missing_line_is_appended(host):
    text = 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"'
    assert bl.grub_cmdline_linux(text) == ''
    new = bl.edit_grub_default(text, KEY, 'never')
    assert new == text + '\nGRUB_CMDLINE_LINUX="transparent_hugepage=never"\n'
    host.write('/etc/default/grub', new)
    assert sh_value(host, '/etc/default/grub') == 'transparent_hugepage=never'
    assert bl.edit_grub_default(text, KEY, None) == text
    assert bl.edit_grub_default(None, KEY, None) is None
    assert bl.edit_grub_default(None, KEY, 'never') == 'GRUB_CMDLINE_LINUX="transparent_hugepage=never"\n'


def test_edit_other_variable():
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet transparent_hugepage=always"\nGRUB_CMDLINE_LINUX="ro"\n'
    new = bl.edit_grub_default(text, KEY, None, var='GRUB_CMDLINE_LINUX_DEFAULT')
    assert new == 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="ro"\n'


@pytest.mark.parametrize('line', [
    'GRUB_CMDLINE_LINUX="rhgb quiet\n',
    "GRUB_CMDLINE_LINUX='rhgb quiet\n",
    'GRUB_CMDLINE_LINUX="rhgb \\"quiet\n',
    'GRUB_CMDLINE_LINUX=rhgb\\\n',
])
def test_unbalanced_quotes_raise_with_file_and_line(line):
    text = 'GRUB_TIMEOUT=5\n' + line + 'GRUB_DISABLE_RECOVERY="true"\n'
    with pytest.raises(bl.BootloaderError) as excinfo:
        bl.edit_grub_default(text, KEY, 'never')
    message = str(excinfo.value)
    assert '/etc/default/grub line 2' in message
    assert 'Fix the line' in message
    with pytest.raises(bl.BootloaderError):
        bl.grub_cmdline_linux(text)


def test_malformed_unrelated_line_is_ignored():
    text = 'GRUB_DISTRIBUTOR="oops\nGRUB_CMDLINE_LINUX="ro"\n'
    assert bl.edit_grub_default(text, KEY, 'never') == 'GRUB_DISTRIBUTOR="oops\nGRUB_CMDLINE_LINUX="ro transparent_hugepage=never"\n'


# ---------------------------------------------------------------------------------------------
# detect

def test_detect_el7_bios(host):
    facts = el7_host(host).detect()
    assert facts['os_id'] == 'centos'
    assert facts['version_id'] == '7'
    assert facts['major'] == 7
    assert facts['family'] == 'el7'
    assert facts['efi'] is False
    assert facts['bls'] is False
    assert facts['method'] == 'grub2-mkconfig'
    assert facts['grub_cfg'] == '/boot/grub2/grub.cfg'
    assert facts['tools']['grub2_mkconfig'] == host.tools.path('grub2-mkconfig')
    assert facts['tools']['update_grub'] is None
    assert 'BIOS' in facts['reason']


@pytest.mark.parametrize('vendor_dir, os_release, vendor_mkdir, os_id, grub_cfg', [
    pytest.param('centos', 'el7', None, 'centos', '/boot/efi/EFI/centos/grub.cfg', id='the-vendor-directory'),
    # RHEL 7 host whose ESP came from an image built as CentOS
    pytest.param('centos', 'rhel7', None, 'rhel', '/boot/efi/EFI/centos/grub.cfg', id='the-directory-with-a-grub-cfg'),
    pytest.param(None, 'rhel7', 'redhat', 'rhel', '/boot/efi/EFI/redhat/grub.cfg', id='else-the-os-release-vendor'),
])
def test_detect_el7_efi_grub_cfg(host, vendor_dir, os_release, vendor_mkdir, os_id, grub_cfg):
    el7_host(host, efi=True, vendor_dir=vendor_dir, os_release=os_release)
    if vendor_mkdir:
        host.mkdir('/boot/efi/EFI/%s' % vendor_mkdir)
    facts = host.detect()
    assert facts['efi'] is True
    assert facts['os_id'] == os_id
    assert facts['grub_cfg'] == grub_cfg
    assert facts['method'] == 'grub2-mkconfig'


def test_detect_el7_without_grub_cfg_is_none(host):
    el7_host(host)
    os.unlink(host.path('/boot/grub2/grub.cfg'))
    facts = host.detect()
    assert facts['method'] == 'none'
    assert 'no /boot/grub2/grub.cfg' in facts['reason']


@pytest.mark.parametrize('os_release, family', [
    ('ID="ol"\nVERSION_ID="8.8"\n', 'el8'),
    ('ID="almalinux"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.2"\n', 'el9'),
    ('ID="myrhel"\nID_LIKE="rhel fedora"\nVERSION_ID="8.1"\n', 'el8'),
    ('ID="rhel"\nVERSION_ID="10.0"\n', 'el9'),   # RHEL 10 boots as 9 does (grubby-bls, /etc/kernel/cmdline)
    ('ID="rhel"\nVERSION_ID="11.0"\n', 'unknown'),
    ('ID=fedora\nVERSION_ID=39\n', 'unknown'),
    ('ID="amzn"\nID_LIKE="centos rhel fedora"\nVERSION_ID="2"\n', 'unknown'),
    ('ID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n', 'debian'),
    ('ID=debian\n', 'debian'),
    ('', 'unknown'),
])
def test_detect_family(host, os_release, family):
    host.write('/etc/os-release', os_release)
    facts = host.detect()
    assert facts['family'] == family
    if family == 'unknown':
        assert facts['method'] == 'none'
        assert 'not supported' in facts['reason']


def test_detect_reads_usr_lib_os_release(host):
    host.write('/usr/lib/os-release', OS_RELEASE['el9'])
    assert host.detect()['family'] == 'el9'


def test_detect_el8_bls(host):
    facts = el8_host(host).detect()
    assert facts['family'] == 'el8'
    assert facts['major'] == 8
    assert facts['version_id'] == '8.6'
    assert facts['bls'] is True
    assert facts['bls_enabled'] is True
    assert facts['method'] == 'grubby'
    assert facts['grub_cfg'] == '/boot/grub2/grub.cfg'
    assert 'kernelopts' in facts['reason']


def test_detect_el9_bls_efi_grub_cfg_is_not_the_stub(host):
    facts = el9_host(host, efi=True).detect()
    assert facts['family'] == 'el9'
    assert facts['method'] == 'grubby'
    assert facts['efi'] is True
    assert facts['grub_cfg'] == '/boot/grub2/grub.cfg'
    assert '/etc/kernel/cmdline' in facts['reason']


def test_detect_bls_without_grubby_says_so(host):
    el8_host(host)
    host.tools.uninstall('grubby')
    facts = host.detect()
    assert facts['method'] == 'grubby'
    assert facts['tools']['grubby'] is None
    assert 'grubby is not installed' in facts['reason']


# BLS entries alone do not decide: GRUB reads them only through blscfg in the grub.cfg it loads,
# which grub2-mkconfig writes only with GRUB_ENABLE_BLSCFG=true (the two facts leapp-repository
# collects: actors/systemfacts/libraries/systemfacts.py get_bios_grubcfg_details, "insmod
# blscfg"; libraries/grub.py is_blscfg_enabled_in_defaultgrub, quotes stripped, == "true").
@pytest.mark.parametrize('blscfg_line, cfg, method', [
    ('GRUB_ENABLE_BLSCFG=true\n', 'grub/el8-bls-grub.cfg', 'grubby'),
    ('GRUB_ENABLE_BLSCFG="true"\n', 'grub/el8-bls-grub.cfg', 'grubby'),
    ('', 'grub/el8-bls-grub.cfg', 'grubby'),                        # unset: grub.cfg decides today
    ('GRUB_ENABLE_BLSCFG=false\n', 'grub/el8-menu-grub.cfg', 'grub2-mkconfig'),
    ('GRUB_ENABLE_BLSCFG=false\n', 'grub/el8-bls-grub.cfg', 'grub2-mkconfig'),   # regenerated as a menu
    ('', 'grub/el8-menu-grub.cfg', 'grub2-mkconfig'),
    ('GRUB_ENABLE_BLSCFG=true\nGRUB_ENABLE_BLSCFG=false\n', 'grub/el8-menu-grub.cfg', 'grub2-mkconfig'),
])
def test_detect_follows_what_grub_reads(host, blscfg_line, cfg, method):
    el8_host(host, grub=EL8_GRUB.replace('GRUB_ENABLE_BLSCFG=true\n', blscfg_line))
    host.write('/boot/grub2/grub.cfg', fixture(cfg))
    facts = host.detect()
    assert facts['bls'] is True
    assert facts['method'] == method
    assert facts['error'] is None
    if method == 'grub2-mkconfig':
        assert facts['grub_cfg'] == '/boot/grub2/grub.cfg'
        assert 'BLS entries are not read' in facts['reason'] or 'GRUB_ENABLE_BLSCFG=false' in facts['reason']


def test_detect_bls_enabled_but_grub_cfg_without_blscfg_is_an_error(host):
    el8_host(host)
    host.write('/boot/grub2/grub.cfg', fixture('grub/el8-menu-grub.cfg'))
    facts = host.detect()
    assert 'no blscfg' in facts['error'] and 'grub2-mkconfig -o /boot/grub2/grub.cfg' in facts['error']
    del host.tools.calls[:]
    for call in (host.plan, host.configured):
        with pytest.raises(bl.BootloaderError) as excinfo:
            call()
        assert 'GRUB_ENABLE_BLSCFG=false' in str(excinfo.value)
    assert host.tools.calls == []


def test_bls_disabled_edits_the_menu_grub_boots(host):
    """RHEL 8 with GRUB_ENABLE_BLSCFG=false: the kernel lines of grub.cfg boot, so the value goes
    into /etc/default/grub and grub2-mkconfig regenerates the menu; grubby is not run."""
    el8_host(host, grub=EL8_GRUB.replace('GRUB_ENABLE_BLSCFG=true', 'GRUB_ENABLE_BLSCFG=false'))
    host.write('/boot/grub2/grub.cfg', fixture('grub/el8-menu-grub.cfg'))
    host.mkconfig('grub2-mkconfig', kernels=' '.join(EL8_KERNELS))
    assert host.configured()['/boot/grub2/grub.cfg'] is None
    result = host.plan()
    assert result['method'] == 'grub2-mkconfig'
    assert [os.path.basename(c[0]) for c in result['commands']] == ['grub2-mkconfig']
    host.apply(result)
    assert host.configured() == {'/etc/default/grub': 'never', '/boot/grub2/grub.cfg': 'never'}
    assert host.plan()['changed'] is False


def test_detect_debian_with_grub(host):
    facts = debian_host(host).detect()
    assert facts['family'] == 'debian'
    assert facts['method'] == 'update-grub'
    assert facts['grub_cfg'] == '/boot/grub/grub.cfg'


@pytest.mark.parametrize('grub_cfg, reason', [
    pytest.param(None, 'the boot loader is not managed here: no /boot/grub/grub.cfg (direct kernel boot?)',
                 id='direct-kernel-boot'),
    pytest.param('#\n', 'update-grub was not found', id='grub-cfg-without-update-grub'),
])
def test_detect_debian_without_a_managed_boot_loader_is_none(host, grub_cfg, reason):
    debian_host(host, grub=False)
    if grub_cfg is not None:
        host.write('/boot/grub/grub.cfg', grub_cfg)
    facts = host.detect()
    assert facts['method'] == 'none'
    assert facts['grub_cfg'] is None
    assert reason in facts['reason']


# ---------------------------------------------------------------------------------------------
# RHEL 7: /etc/default/grub + grub2-mkconfig

def test_el7_plan_apply_replan(host):
    el7_host(host)
    result = host.plan()
    assert host.calls() == []                       # planning runs nothing on RHEL 7
    assert result['method'] == 'grub2-mkconfig'
    assert result['changed'] is True
    assert [f['path'] for f in result['files']] == ['/etc/default/grub']
    assert result['files'][0]['before'] == GRUB_EL7
    assert result['files'][0]['after'] == GRUB_EL7.replace('rhgb quiet"', 'rhgb quiet transparent_hugepage=never"')
    assert result['commands'] == [[host.tools.path('grub2-mkconfig'), '-o', '/boot/grub2/grub.cfg']]
    assert result['args_after']['/etc/default/grub'][-1] == 'transparent_hugepage=never'
    assert 'transparent_hugepage=never' not in result['args_before']['/etc/default/grub']
    assert result['reboot_required'] is True

    host.apply(result)
    assert [c[0] for c in host.calls()] == ['grub2-mkconfig']
    cfg = host.read('/boot/grub2/grub.cfg')
    assert '\tlinux16\t/vmlinuz-3.10.0-1160.el7.x86_64 root=/dev/sda1 ro crashkernel=auto' in cfg
    assert cfg.count('transparent_hugepage=never') == 4
    assert host.configured() == {'/etc/default/grub': 'never', '/boot/grub2/grub.cfg': 'never'}

    again = host.plan()
    assert again['changed'] is False
    assert again['files'] == [] and again['commands'] == []
    assert again['reboot_required'] is True         # /proc/cmdline still lacks it
    host.write('/proc/cmdline', PROC_CMDLINE.strip() + ' transparent_hugepage=never\n')
    assert host.plan()['reboot_required'] is False


@pytest.mark.parametrize('make_host, grub_default, grub_cfg', [
    pytest.param(el7_host, GRUB_EL7, '/boot/grub2/grub.cfg', id='el7'),
    pytest.param(debian_host, GRUB_DEBIAN, '/boot/grub/grub.cfg', id='debian'),
])
def test_backout_restores_grub_default(host, make_host, grub_default, grub_cfg):
    make_host(host)
    host.apply(host.plan())
    host.write('/proc/cmdline', host.read('/proc/cmdline').strip() + ' transparent_hugepage=never\n')
    back = host.plan(None)
    assert back['changed'] is True
    assert back['files'][0]['after'] == grub_default
    assert back['reboot_required'] is True
    host.apply(back)
    assert host.read('/etc/default/grub') == grub_default
    assert 'transparent_hugepage' not in host.read(grub_cfg)
    assert host.configured() == {'/etc/default/grub': None, grub_cfg: None}
    assert host.plan(None)['changed'] is False


def test_el7_stale_grub_cfg_only_regenerates(host):
    el7_host(host)
    host.write('/etc/default/grub', GRUB_EL7.replace('rhgb quiet"', 'rhgb quiet transparent_hugepage=never"'))
    host.write('/boot/grub2/grub.cfg', '### BEGIN /etc/grub.d/10_linux ###\n'
                                       '\tlinux16 /vmlinuz-3.10.0-1160.el7.x86_64 root=/dev/sda1 ro rhgb quiet\n'
                                       '### END /etc/grub.d/10_linux ###\n')
    result = host.plan()
    assert result['files'] == []
    assert result['commands'] == [[host.tools.path('grub2-mkconfig'), '-o', '/boot/grub2/grub.cfg']]
    label = '/boot/grub2/grub.cfg:/vmlinuz-3.10.0-1160.el7.x86_64'
    assert result['args_before'][label] == ['root=/dev/sda1', 'ro', 'rhgb', 'quiet']
    assert result['args_after'][label] == ['root=/dev/sda1', 'ro', 'rhgb', 'quiet', 'transparent_hugepage=never']
    host.apply(result)
    assert host.plan()['changed'] is False


def test_el7_custom_entries_do_not_force_regeneration(host):
    el7_host(host)
    host.apply(host.plan())
    assert 'vmlinuz-custom root=/dev/sda1 }' in host.read('/boot/grub2/grub.cfg')   # no arg there
    assert host.plan()['changed'] is False


def test_el7_efi_targets_the_vendor_grub_cfg(host):
    el7_host(host, efi=True, vendor_dir='centos')
    result = host.plan()
    assert result['commands'] == [[host.tools.path('grub2-mkconfig'), '-o', '/boot/efi/EFI/centos/grub.cfg']]
    host.mkconfig('grub2-mkconfig', linux='linuxefi')
    host.apply(result)
    assert '\tlinuxefi\t/vmlinuz-3.10.0-1160.el7.x86_64' in host.read('/boot/efi/EFI/centos/grub.cfg')
    assert not os.path.exists(host.path('/boot/grub2/grub.cfg'))
    assert host.plan()['changed'] is False


def test_el7_grub_cmdline_linux_default_override_is_removed(host):
    el7_host(host)
    host.write('/etc/default/grub', GRUB_EL7 + 'GRUB_CMDLINE_LINUX_DEFAULT="transparent_hugepage=always"\n')
    assert host.configured()['/etc/default/grub'] == 'always'
    result = host.plan()
    assert result['files'][0]['after'].endswith('GRUB_CMDLINE_LINUX_DEFAULT=""\n')
    host.apply(result)
    assert host.configured() == {'/etc/default/grub': 'never', '/boot/grub2/grub.cfg': 'never'}
    assert host.plan()['changed'] is False


def _malformed_grub_default(host):
    host.write('/etc/default/grub', 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="crashkernel=auto rhgb quiet\n')


def _no_grub_default(host):
    os.unlink(host.path('/etc/default/grub'))


def _no_grub2_mkconfig(host):
    host.tools.uninstall('grub2-mkconfig')


@pytest.mark.parametrize('breakage, fragment', [
    pytest.param(_malformed_grub_default, '/etc/default/grub line 2', id='malformed-grub-default'),
    pytest.param(_no_grub_default, 'does not exist', id='missing-grub-default'),
    pytest.param(_no_grub2_mkconfig, 'grub2-tools', id='missing-grub2-mkconfig-names-the-package'),
])
def test_el7_broken_setup_is_an_error_and_runs_nothing(host, breakage, fragment):
    el7_host(host)
    breakage(host)
    with pytest.raises(bl.BootloaderError) as excinfo:
        host.plan()
    assert fragment in str(excinfo.value)
    assert host.calls() == []


# ---------------------------------------------------------------------------------------------
# RHEL 8 and 9: grubby, planned around what each grubby release edits besides the entries
# (grubby-bls history, see fakehost.py: FAKE_BOOT_TOOLS)

def grubenv_vars(host):
    return dict(line.split('=', 1) for line in host.read('/boot/grub2/grubenv').splitlines()
                if line and not line.startswith('#'))


def plan_matches_disk(host, result):
    """Every file the plan writes or predicts reads as the plan's ``after``."""
    for change in result['files'] + result['predicted']:
        assert host.read(change['path']) == change['after'], change['path']
    if 'kernelopts' in result['args_after']:
        assert bl.split_args(grubenv_vars(host)['kernelopts']) == result['args_after']['kernelopts']


def snapshot(host):
    paths = [GRUB_DEFAULT_PATH, '/etc/kernel/cmdline'] + [entry_path(k) for k in EL8_KERNELS + EL9_KERNELS]
    found = dict((p, host.read(p)) for p in paths)
    env = grubenv_vars(host) if host.read('/boot/grub2/grubenv') else {}
    found['kernelopts'] = env.get('kernelopts')
    return found


GRUB_DEFAULT_PATH = '/etc/default/grub'


@pytest.mark.parametrize('version', GRUBBY_VERSIONS)
@pytest.mark.parametrize('grub', ['stock', 'default-and-var'])
def test_grubby_plan_equals_what_each_release_leaves_on_disk(host, version, grub):
    """For every modelled grubby release (fakehost.GRUBBY_VERSIONS; grubby-bls history), the
    planned and predicted files equal the files after the real run, the second run plans
    nothing, and the backout restores /etc/default/grub, kernelopts and /etc/kernel/cmdline
    byte for byte."""
    text = EL8_GRUB
    if grub == 'default-and-var':
        # quoting, a $VAR reference and GRUB_CMDLINE_LINUX_DEFAULT: what grubby's sed flattens
        text = EL8_GRUB.replace('GRUB_CMDLINE_LINUX="', 'GRUB_SERIAL="console=ttyS0,115200"\nGRUB_CMDLINE_LINUX="$GRUB_SERIAL ') \
            + "GRUB_CMDLINE_LINUX_DEFAULT='nomodeset'  # site default\n"
    if version.endswith('.el9'):
        el9_host(host, version=version)
        host.write(GRUB_DEFAULT_PATH, text)
    else:
        el8_host(host, version=version, grub=text)
    original = snapshot(host)
    result = host.plan()
    assert result['grubby']['version'] == version and result['grubby']['modelled'] is True
    grubby_argv = [c for c in result['commands'] if os.path.basename(c[0]) == 'grubby']
    assert len(grubby_argv) == 1
    # --no-etc-grub-update where the release has it (8.40-39 on), and last (its double shift)
    without = ('8.40-34.el8', '8.40-37.el8', '8.40-38.el8')
    assert (grubby_argv[0][-1] == '--no-etc-grub-update') == (version not in without)
    host.apply(result)
    plan_matches_disk(host, result)
    assert host.read(GRUB_DEFAULT_PATH) == bl.edit_grub_default(
        bl.edit_grub_default(text, KEY, 'never'), KEY, None, var='GRUB_CMDLINE_LINUX_DEFAULT')
    assert set(host.configured().values()) == set(['never'])
    again = host.plan()
    assert again['changed'] is False, (again['files'], again['commands'])

    back = host.plan(None)
    host.apply(back)
    plan_matches_disk(host, back)
    after_backout = snapshot(host)
    assert after_backout[GRUB_DEFAULT_PATH] == text
    assert after_backout['kernelopts'] == original['kernelopts']
    if original['/etc/kernel/cmdline'] is not None:
        assert after_backout['/etc/kernel/cmdline'] == original['/etc/kernel/cmdline']
    assert set(host.configured().values()) == set([None])
    assert host.plan(None)['changed'] is False


@pytest.mark.parametrize('version', GRUBBY_VERSIONS)
def test_grubby_version_comes_from_rpm_not_grubby(host, version):
    (el9_host if version.endswith('.el9') else el8_host)(host, version=version)
    rc, out, err = host.run([host.which('grubby'), '--version'])
    assert rc == 1 and "unrecognized option '--version'" in err       # grubby-bls has no --version
    assert bl.grubby_version(host.detect(), host.run) == version


def test_no_etc_grub_update_anywhere_but_last_breaks_grubby(host):
    # grubby-bls shifts twice for --no-etc-grub-update: put first, it swallows --update-kernel.
    el8_host(host, version='8.40-42.el8')
    grubby = host.which('grubby')
    rc, _out, err = host.run([grubby, '--no-etc-grub-update', '--update-kernel=ALL', '--args=x=1'])
    assert rc == 1 and 'invalid option "ALL"' in err
    assert host.run([grubby, '--update-kernel=ALL', '--args=x=1', '--no-etc-grub-update'])[0] == 0


def test_grubby_before_8_40_39_rejects_no_etc_grub_update(host):
    el8_host(host, version='8.40-38.el8')
    rc, _out, err = host.run([host.which('grubby'), '--update-kernel=ALL', '--args=x=1', '--no-etc-grub-update'])
    assert rc == 1 and "unrecognized option '--no-etc-grub-update'" in err


# grubby-bls update_args (fedora-riscv/grubby grubby-bls; unchanged from 8.40-34 to 8.40-69): one
# sed per argument, "(start or blank)NAME(blank or end | =value)" replaced by a blank, then an
# unquoted echo that joins the words with single spaces.
@pytest.mark.parametrize('args, remove, add, expected', [
    ('ro  quiet', [], ['transparent_hugepage=never'], 'ro quiet transparent_hugepage=never'),
    ('ro transparent_hugepage=always quiet', [], ['transparent_hugepage=never'], 'ro quiet transparent_hugepage=never'),
    ('a transparent_hugepage=x transparent_hugepage=y b', ['transparent_hugepage'], [], 'a b'),
    # a bare NAME match takes the blank after it: the adjacent second word survives the pass
    ('a X X b', ['X'], [], 'a X b'),
    ('X X X', ['X'], [], 'X'),
    # an argument with "=" is removed once, exactly
    ('a k=1 b k=1', ['k=1'], [], 'a b k=1'),
    ('transparent_hugepagefoo=1 transparent_hugepage', ['transparent_hugepage'], [], 'transparent_hugepagefoo=1'),
    ('$kernelopts $tuned_params', [], ['transparent_hugepage=never'], '$kernelopts $tuned_params transparent_hugepage=never'),
])
def test_grubby_update_args(args, remove, add, expected):
    assert bl.grubby_update_args(args, remove, add) == expected


def test_el8_plan_apply_replan(host):
    el8_host(host)
    before = host.configured()
    assert before == {
        '/etc/default/grub': None,
        'grubby:/boot/vmlinuz-4.18.0-513.5.1.el8_9.x86_64': None,
        'grubby:/boot/vmlinuz-4.18.0-477.10.1.el8_8.x86_64': None,
        'kernelopts': None,
    }
    del host.tools.calls[:]
    result = host.plan()
    # planning only read: grubenv list, grubby --info=ALL and rpm -q grubby
    assert sorted(os.path.basename(c[0]) for c in host.tools.calls) == ['grub2-editenv', 'grubby', 'rpm']
    assert result['method'] == 'grubby'
    assert result['commands'] == [
        [host.which('grubby'), '--update-kernel=ALL', '--args=transparent_hugepage=never', '--no-etc-grub-update'],
    ]
    # grubby 8.40-42 edits kernelopts itself, with the same result: no grub2-editenv call.
    assert result['args_after']['kernelopts'][-1] == 'transparent_hugepage=never'
    # the entry with literal options is rewritten by grubby; the $kernelopts one is left alone
    assert [p['path'] for p in result['predicted']] == [entry_path(EL8_KERNELS[1])]
    assert 'options %s $tuned_params transparent_hugepage=never\n' % EL8_ENTRY_ARGS in result['predicted'][0]['after']
    assert [f['path'] for f in result['files']] == ['/etc/default/grub']
    label = 'grubby:/boot/vmlinuz-4.18.0-513.5.1.el8_9.x86_64'
    assert result['args_before'][label][-1] == 'quiet'
    assert result['args_after'][label][-1] == 'transparent_hugepage=never'
    assert result['reboot_required'] is True
    host.apply(result)
    plan_matches_disk(host, result)
    assert host.plan()['changed'] is False


@pytest.mark.parametrize('version', EL8_VERSIONS)
def test_el8_tuned_params_is_seen_on_every_release(host, version):
    """A tuned [bootloader] section sets $tuned_params in grubenv. grubby 8.40-34..-41 (RHEL 8.0
    to 8.4) prints every $var expanded in --info, so its args show tuned's value as if it were
    the entry's own; from 8.40-42 (commit 2b59d13) --info keeps $tuned_params. The raw entry
    file says where the value is from on every release."""
    el8_host(host, version=version, tuned_params='transparent_hugepage=always')
    info = host.run([host.which('grubby'), '--info=ALL'])[1]
    if version in ('8.40-34.el8', '8.40-37.el8', '8.40-38.el8', '8.40-41.el8'):
        assert '$tuned_params' not in info and 'quiet transparent_hugepage=always' in info
    else:
        assert 'quiet $tuned_params' in info
    with pytest.raises(bl.BootloaderError) as excinfo:
        host.plan()
    assert 'the grubenv variable $tuned_params' in str(excinfo.value)
    assert 'tuned [bootloader]' in str(excinfo.value)


@pytest.mark.parametrize('version', EL8_VERSIONS)
def test_el8_tuned_params_with_the_same_value_converges(host, version):
    el8_host(host, version=version, tuned_params='transparent_hugepage=never')
    result = host.plan()
    assert not any(os.path.basename(c[0]) == 'grubby' for c in result['commands'])
    host.apply(result)
    plan_matches_disk(host, result)
    assert host.plan()['changed'] is False


@pytest.mark.parametrize('version', ['8.40-34.el8', '8.40-42.el8'])
def test_el8_backout_with_tuned_params_warns_and_converges(host, version):
    el8_host(host, version=version)
    host.apply(host.plan())
    env = grubenv_vars(host)
    host.write('/boot/grub2/grubenv', grubenv_block([(k, 'transparent_hugepage=never' if k == 'tuned_params' else v)
                                                     for k, v in sorted(env.items())]))
    back = host.plan(None)
    assert back['warnings'] and '$tuned_params' in back['warnings'][0]
    host.apply(back)
    plan_matches_disk(host, back)
    assert host.plan(None)['changed'] is False
    assert grubenv_vars(host)['kernelopts'] == EL8_ENTRY_ARGS


def test_el8_0_grubby_rewrites_kernelopts_entries_and_kernelopts_is_set_here(host):
    """RHEL 8.0's grubby (8.40-34) neither edits kernelopts nor keeps $kernelopts entries."""
    el8_host(host, version='8.40-34.el8')
    result = host.plan()
    assert [os.path.basename(c[0]) for c in result['commands']] == ['grubby', 'grub2-editenv']
    assert sorted(p['path'] for p in result['predicted']) == sorted(entry_path(k) for k in EL8_KERNELS)
    host.apply(result)
    plan_matches_disk(host, result)
    assert 'options %s $tuned_params transparent_hugepage=never\n' % EL8_ENTRY_ARGS in host.read(entry_path(EL8_KERNELS[0]))


def test_el8_other_spelling_is_replaced(host):
    el8_host(host)
    path = entry_path(EL8_KERNELS[1])
    host.write(path, host.read(path).replace(' quiet', ' quiet transparent-hugepage=always'))
    result = host.plan()
    assert result['commands'][0] == [host.which('grubby'), '--update-kernel=ALL', '--remove-args=transparent-hugepage',
                                     '--args=transparent_hugepage=never', '--no-etc-grub-update']
    host.apply(result)
    plan_matches_disk(host, result)
    assert 'transparent-hugepage' not in host.read(path)
    assert host.plan()['changed'] is False


def test_bls_without_grubby_is_an_error(host):
    el8_host(host)
    host.tools.uninstall('grubby')
    with pytest.raises(bl.BootloaderError) as excinfo:
        host.plan()
    message = str(excinfo.value)
    assert 'grubby is not installed' in message
    assert 'install grubby' in message
    with pytest.raises(bl.BootloaderError):
        host.configured()


def test_el8_without_grub2_editenv_is_an_error(host):
    el8_host(host)
    host.tools.uninstall('grub2-editenv')
    with pytest.raises(bl.BootloaderError) as excinfo:
        host.plan()
    assert 'grub2-tools-minimal' in str(excinfo.value)


def test_failing_grubby_is_an_error(host):
    el8_host(host)
    host.tools.fail('grubby', 3, 'grubby: boom\n')
    with pytest.raises(bl.BootloaderError) as excinfo:
        host.plan()
    assert 'rc=3' in str(excinfo.value)
    assert 'boom' in str(excinfo.value)


def test_unknown_grubby_version_warns_and_still_ends_as_planned(host):
    el8_host(host, version='8.40-48.el8')
    host.tools.uninstall('rpm')
    result = host.plan()
    assert result['grubby']['version'] is None
    assert 'not one this module models' in result['warnings'][0]
    argv = [c for c in result['commands'] if os.path.basename(c[0]) == 'grubby'][0]
    assert '--no-etc-grub-update' not in argv
    assert [f['after_commands'] for f in result['files'] if f['path'] == '/etc/default/grub'] == [True]
    host.apply(result)
    plan_matches_disk(host, result)
    assert host.plan()['changed'] is False


# ---------------------------------------------------------------------------------------------
# RHEL 9: grubby + /etc/kernel/cmdline + /etc/default/grub, no grub2-mkconfig

def test_el9_plan_apply_replan(host):
    el9_host(host)
    result = host.plan()
    assert result['commands'] == [
        [host.which('grubby'), '--update-kernel=ALL', '--args=transparent_hugepage=never', '--no-etc-grub-update'],
    ]
    assert sorted(f['path'] for f in result['files']) == ['/etc/default/grub', '/etc/kernel/cmdline']
    cmdline = [f for f in result['files'] if f['path'] == '/etc/kernel/cmdline'][0]
    assert cmdline['before'] == EL9_KERNEL_CMDLINE and cmdline['after_commands'] is True
    assert cmdline['after'] == EL9_KERNEL_CMDLINE.rstrip('\n') + ' transparent_hugepage=never\n'
    assert result['args_after']['/etc/kernel/cmdline'][-1] == 'transparent_hugepage=never'
    assert result['warnings'] == []
    host.apply(result)
    plan_matches_disk(host, result)
    assert set(host.configured().values()) == set(['never'])
    assert 'kernelopts' not in host.configured()
    assert host.plan()['changed'] is False


def test_el9_kernel_cmdline_in_place_value_survives_grubby(host):
    """grubby removes and appends; this module rewrites /etc/kernel/cmdline after it, in place."""
    el9_host(host, kernel_cmdline='root=UUID=0f1e transparent_hugepage=always ro quiet\n')
    result = host.plan()
    host.apply(result)
    assert host.read('/etc/kernel/cmdline') == 'root=UUID=0f1e transparent_hugepage=never ro quiet\n'
    plan_matches_disk(host, result)


def test_el9_without_kernel_cmdline_it_is_created_as_grubby_creates_it(host):
    el9_host(host, kernel_cmdline=None)
    result = host.plan()
    created = [f for f in result['files'] if f['path'] == '/etc/kernel/cmdline'][0]
    assert created['before'] is None
    # grubby 8.40-63.el9 creates it from the oldest entry's options
    assert created['after'] == 'root=UUID=0f1e2d3c-aaaa-bbbb-cccc-1234567890ab %s transparent_hugepage=never\n' % EL9_ARGS
    assert result['warnings'] == []
    host.apply(result)
    plan_matches_disk(host, result)
    assert host.plan()['changed'] is False


# ---------------------------------------------------------------------------------------------
# Debian / Ubuntu

def test_debian_plan_apply_replan(host):
    debian_host(host)
    result = host.plan()
    assert result['method'] == 'update-grub'
    assert result['files'][0]['after'] == GRUB_DEBIAN.replace('GRUB_CMDLINE_LINUX=""',
                                                              'GRUB_CMDLINE_LINUX="transparent_hugepage=never"')
    assert result['commands'] == [[host.tools.path('update-grub')]]
    assert result['reboot_required'] is True        # /proc/cmdline has always
    host.apply(result)
    assert host.configured() == {'/etc/default/grub': 'never', '/boot/grub/grub.cfg': 'never'}
    assert host.plan()['changed'] is False


def test_debian_dropin_carrying_the_key_is_edited(host):
    debian_host(host, os_release='ubuntu')
    dropin = 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 transparent_hugepage=always"\n'
    host.write('/etc/default/grub.d/50-cloudimg-settings.cfg', dropin)
    assert host.configured()['/etc/default/grub.d/50-cloudimg-settings.cfg'] == 'always'
    result = host.plan()
    paths = [f['path'] for f in result['files']]
    assert paths == ['/etc/default/grub', '/etc/default/grub.d/50-cloudimg-settings.cfg']
    assert result['files'][1]['after'] == 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1"\n'
    host.apply(result)
    assert host.configured()['/boot/grub/grub.cfg'] == 'never'
    assert host.plan()['changed'] is False


def test_debian_dropin_replacing_grub_cmdline_linux_is_an_error(host):
    debian_host(host)
    host.write('/etc/default/grub.d/60-site.cfg', 'GRUB_CMDLINE_LINUX="console=ttyS0"\n')
    with pytest.raises(bl.BootloaderError) as excinfo:
        host.plan()
    assert '/etc/default/grub.d/60-site.cfg line 1' in str(excinfo.value)
    host.write('/etc/default/grub.d/60-site.cfg', 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX console=ttyS0"\n')
    host.apply(host.plan())
    assert host.plan()['changed'] is False


def test_debian_direct_kernel_boot_plans_nothing(host):
    debian_host(host, grub=False)
    result = host.plan()
    assert result['method'] == 'none'
    assert result['changed'] is False
    assert result['files'] == [] and result['commands'] == []
    assert result['reboot_required'] is False
    assert 'direct kernel boot' in result['reason']
    assert host.configured() == {}
    assert host.calls() == []


# ---------------------------------------------------------------------------------------------
# running / reboot_required: /proc/cmdline never decides the plan

def test_running(host):
    assert bl.running(host.root, KEY) is None                # no /proc/cmdline
    host.write('/proc/cmdline', 'ro transparent_hugepage=madvise quiet\n')
    assert bl.running(host.root, KEY) == 'madvise'
    host.write('/proc/cmdline', 'ro quiet\n')
    assert bl.running(host.root, KEY) is None


def test_running_value_does_not_make_the_plan_skip(host):
    el7_host(host)
    host.write('/proc/cmdline', PROC_CMDLINE.strip() + ' transparent_hugepage=never\n')
    result = host.plan()
    assert result['changed'] is True                # persisted config lacks it
    assert result['reboot_required'] is False       # the running kernel already has it


def test_persisted_value_without_running_value_needs_reboot_only(host):
    el9_host(host)
    host.apply(host.plan())
    host.write('/proc/cmdline', 'BOOT_IMAGE=/vmlinuz ro transparent_hugepage=always\n')
    result = host.plan()
    assert result['changed'] is False
    assert result['reboot_required'] is True
