# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Build fake host trees (sysfs, /run/udev/data, /proc/self/mountinfo, /etc) for unit tests.

The layout mirrors a real host: device directories under /sys/devices, with /sys/class/block,
/sys/block and /sys/dev/block as relative symlinks into them; partitions inside their disk's
directory; ``slaves``/``holders`` as directories of links; udev properties as ``E:`` lines.
Python 2.7 and 3.6 compatible, like the code under test.

Transparent Huge Pages (:meth:`FakeHost.add_thp`) are files that read like the kernel's
(``always madvise [never]``, ``0``/``1`` or ``[yes] no``); a plain file cannot react to
writes, so :meth:`FakeHost.thp_open` returns an ``open`` replacement that behaves like
sysfs for the THP files: a write of an offered value moves the brackets (the file reads back
in the kernel's format), anything else fails with EINVAL and leaves the file as it was.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import os
import re

THP_DIR = '/sys/kernel/mm/transparent_hugepage'
THP_DIR_RHEL6 = '/sys/kernel/mm/redhat_transparent_hugepage'

# What each kernel offers (None: a plain 0/1 file) and its defaults at boot.
THP_KERNELS = {
    # RHEL 6 (2.6.32): redhat_transparent_hugepage, khugepaged/defrag as "[yes] no".
    'el6': {'dir': THP_DIR_RHEL6,
            'offered': {'enabled': ['always', 'madvise', 'never'], 'defrag': ['always', 'madvise', 'never'],
                        'khugepaged/defrag': ['yes', 'no']},
            'default': {'enabled': 'always', 'defrag': 'always', 'khugepaged/defrag': 'yes'}},
    # RHEL 7 (3.10): no defer values for defrag.
    'el7': {'dir': THP_DIR,
            'offered': {'enabled': ['always', 'madvise', 'never'], 'defrag': ['always', 'madvise', 'never'],
                        'khugepaged/defrag': None},
            'default': {'enabled': 'always', 'defrag': 'always', 'khugepaged/defrag': '1'}},
    # RHEL 8 (4.18) and 9 (5.14).
    'el8': {'dir': THP_DIR,
            'offered': {'enabled': ['always', 'madvise', 'never'],
                        'defrag': ['always', 'defer', 'defer+madvise', 'madvise', 'never'],
                        'khugepaged/defrag': None},
            'default': {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1'}},
}


def render_choice(offered, active):
    """``always madvise [never]``: the offered values with the active one in brackets."""
    return ' '.join('[%s]' % v if v == active else v for v in offered) + '\n'


class _SysfsAttrWrite(object):
    """An open-for-writing THP attribute: the value takes effect (or fails) on close, as in sysfs."""

    def __init__(self, host, target):
        self.host = host
        self.target = target
        self.data = []
        self.closed = False

    def write(self, data):
        self.data.append(data)

    def flush(self):
        pass

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.host.thp_store(self.target, ''.join(self.data))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class FakeHost(object):
    def __init__(self, root):
        self.root = str(root)
        self._mountinfo = []
        self._next_mount_id = 20
        self.thp_dir = THP_DIR
        self.thp_offered = {}
        self.thp_stuck = {}
        self.write('/proc/self/mountinfo', '')

    # -- generic helpers -------------------------------------------------------------------
    def path(self, target):
        return os.path.join(self.root, target.lstrip('/'))

    def write(self, target, text):
        full = self.path(target)
        if not os.path.isdir(os.path.dirname(full)):
            os.makedirs(os.path.dirname(full))
        with open(full, 'w') as f:
            f.write(text)
        return full

    def read(self, target):
        with open(self.path(target)) as f:
            return f.read()

    def exists(self, target):
        return os.path.exists(self.path(target))

    def mkdir(self, target):
        full = self.path(target)
        if not os.path.isdir(full):
            os.makedirs(full)
        return full

    def symlink(self, target, link_target):
        full = self.path(target)
        if not os.path.isdir(os.path.dirname(full)):
            os.makedirs(os.path.dirname(full))
        os.symlink(link_target, full)

    # -- block devices ---------------------------------------------------------------------
    def _register(self, name, devdir, majmin, whole):
        rel = os.path.relpath(devdir, '/sys/class/block')
        self.symlink('/sys/class/block/%s' % name, rel)
        self.symlink('/sys/dev/block/%s' % majmin, os.path.relpath(devdir, '/sys/dev/block'))
        if whole:
            self.symlink('/sys/block/%s' % name, os.path.relpath(devdir, '/sys/block'))
        self.write(devdir + '/dev', majmin + '\n')
        self.mkdir(devdir + '/holders')
        self.mkdir(devdir + '/slaves')

    def udev(self, majmin, props=None, links=None):
        lines = ['S:%s' % link for link in (links or [])]
        lines += ['E:%s=%s' % (k, v) for k, v in sorted((props or {}).items())]
        self.write('/run/udev/data/b%s' % majmin, '\n'.join(lines) + '\n')

    def add_disk(self, name, majmin, read_ahead_kb=128, parent='/sys/devices/pci0000:00/0000:00:04.0/virtio1',
                 udev=None, links=None, attrs=None):
        devdir = '%s/block/%s' % (parent, name)
        self._register(name, devdir, majmin, whole=True)
        self.write(devdir + '/queue/read_ahead_kb', '%d\n' % read_ahead_kb)
        self.write(devdir + '/removable', '0\n')
        for attr, value in (attrs or {}).items():
            self.write('%s/%s' % (devdir, attr), value)
        if udev is not None or links:
            self.udev(majmin, dict({'DEVTYPE': 'disk'}, **(udev or {})), links)
        return devdir

    def add_nvme(self, name, majmin, serial, model='Amazon Elastic Block Store', read_ahead_kb=128, udev=True):
        ctrl = '/sys/devices/pci0000:00/0000:00:1f.0/nvme/nvme%s' % name[4:].split('n')[0]
        self.write(ctrl + '/serial', serial.ljust(20) + '\n')
        self.write(ctrl + '/model', model.ljust(40) + '\n')
        devdir = '%s/%s' % (ctrl, name)
        self._register(name, devdir, majmin, whole=True)
        self.symlink(devdir + '/device', '..')
        self.write(devdir + '/queue/read_ahead_kb', '%d\n' % read_ahead_kb)
        self.write(devdir + '/removable', '0\n')
        if udev:
            ident = '%s_%s' % (model, serial)
            self.udev(majmin, {'DEVTYPE': 'disk', 'ID_MODEL': model, 'ID_SERIAL': ident, 'ID_SERIAL_SHORT': serial},
                      ['disk/by-id/nvme-%s' % ident.replace(' ', '_')])
        return devdir

    def add_partition(self, disk, name, majmin, number=1, udev=None):
        diskdir = os.path.dirname(os.path.realpath(self.path('/sys/class/block/%s/dev' % disk)))
        diskdir = '/' + os.path.relpath(diskdir, self.root)
        devdir = '%s/%s' % (diskdir, name)
        self._register(name, devdir, majmin, whole=False)
        self.write(devdir + '/partition', '%d\n' % number)
        if udev is not None:
            self.udev(majmin, dict({'DEVTYPE': 'partition'}, **udev))
        return devdir

    def _link_stack(self, name, below):
        for lower in below:
            self.symlink('/sys/class/block/%s/slaves/%s' % (name, lower), '../../%s' % lower)
            self.symlink(self._devdir(lower) + '/holders/%s' % name, '../../%s' % name)

    def _devdir(self, name):
        real = os.path.realpath(self.path('/sys/class/block/%s' % name))
        return '/' + os.path.relpath(real, self.root)

    def add_dm(self, name, majmin, dm_name, dm_uuid, slaves=(), read_ahead_kb=128, udev=None):
        devdir = '/sys/devices/virtual/block/%s' % name
        self._register(name, devdir, majmin, whole=True)
        self.write(devdir + '/queue/read_ahead_kb', '%d\n' % read_ahead_kb)
        self.write(devdir + '/removable', '0\n')
        self.write(devdir + '/dm/name', dm_name + '\n')
        self.write(devdir + '/dm/uuid', dm_uuid + '\n')
        self._link_stack(name, slaves)
        props = {'DEVTYPE': 'disk', 'DM_NAME': dm_name, 'DM_UUID': dm_uuid}
        props.update(udev or {})
        self.udev(majmin, props, ['mapper/%s' % dm_name])
        return devdir

    def add_lv(self, name, majmin, vg, lv, slaves=(), read_ahead_kb=128):
        dm_name = '%s-%s' % (vg.replace('-', '--'), lv.replace('-', '--'))
        uuid = 'LVM-%s' % ('x' * 64)
        return self.add_dm(name, majmin, dm_name, uuid, slaves, read_ahead_kb,
                           udev={'DM_VG_NAME': vg, 'DM_LV_NAME': lv})

    def add_md(self, name, majmin, md_uuid, slaves=(), read_ahead_kb=128):
        devdir = '/sys/devices/virtual/block/%s' % name
        self._register(name, devdir, majmin, whole=True)
        self.write(devdir + '/queue/read_ahead_kb', '%d\n' % read_ahead_kb)
        self.write(devdir + '/md/level', 'raid1\n')
        self._link_stack(name, slaves)
        self.udev(majmin, {'DEVTYPE': 'disk', 'MD_UUID': md_uuid, 'MD_LEVEL': 'raid1'})
        return devdir

    def add_loop(self, name, majmin, backing_file, read_ahead_kb=128):
        devdir = '/sys/devices/virtual/block/%s' % name
        self._register(name, devdir, majmin, whole=True)
        self.write(devdir + '/queue/read_ahead_kb', '%d\n' % read_ahead_kb)
        self.write(devdir + '/loop/backing_file', backing_file + '\n')
        return devdir

    def read_ahead(self, name):
        return int(self.read(self._devdir(name) + '/queue/read_ahead_kb').strip())

    # -- Transparent Huge Pages ------------------------------------------------------------
    def add_thp(self, kernel='el8', enabled=None, defrag=None, khugepaged=None):
        """THP sysfs files of ``kernel`` (a THP_KERNELS key) with the given active values.

        ``khugepaged=False`` leaves khugepaged/defrag out. Returns the THP directory.
        ``thp_stuck[attr] = value`` makes the attribute read ``value`` after every write, as when
        something else keeps resetting it.
        """
        spec = THP_KERNELS[kernel]
        self.thp_dir = spec['dir']
        self.thp_offered = dict(spec['offered'])
        self.thp_stuck = {}
        values = dict(spec['default'])
        for attr, value in (('enabled', enabled), ('defrag', defrag), ('khugepaged/defrag', khugepaged)):
            if value is not None:
                values[attr] = value
        for attr in ('enabled', 'defrag', 'khugepaged/defrag'):
            if attr == 'khugepaged/defrag' and khugepaged is False:
                del self.thp_offered[attr]
                if self.exists('%s/%s' % (self.thp_dir, attr)):
                    os.unlink(self.path('%s/%s' % (self.thp_dir, attr)))
                continue
            self._thp_render(attr, values[attr])
        return self.thp_dir

    def _thp_render(self, attr, value):
        offered = self.thp_offered[attr]
        self.write('%s/%s' % (self.thp_dir, attr), render_choice(offered, value) if offered else value + '\n')

    def thp(self, attr):
        """The active value of a THP attribute, as the kernel would show it."""
        text = self.read('%s/%s' % (self.thp_dir, attr)).strip()
        m = re.search(r'\[([^\]]+)\]', text)
        return m.group(1) if m else text

    def thp_text(self, attr):
        return self.read('%s/%s' % (self.thp_dir, attr))

    def thp_store(self, target, data):
        """What the kernel does with ``data`` written to THP attribute ``target`` (a target path)."""
        attr = target[len(self.thp_dir) + 1:]
        offered = self.thp_offered[attr]
        value = data[:-1] if data.endswith('\n') else data     # sysfs_streq: one trailing newline
        if offered:
            valid = value in offered
        else:
            valid = re.match(r'^[0-9]+$', value) is not None and int(value) <= 1  # kstrtoul, then > 1 is EINVAL
            value = str(int(value)) if valid else value
        if not valid:
            raise IOError(errno.EINVAL, os.strerror(errno.EINVAL), self.path(target))
        self._thp_render(attr, self.thp_stuck.get(attr, value))

    def thp_open(self, real_open=open):
        """An ``open`` that sends writes to THP attributes through :meth:`thp_store`."""
        def fake_open(path, mode='r', *args, **kwargs):
            full = str(path)
            prefix = self.path(self.thp_dir) + os.sep     # the directory of the last add_thp()
            if full.startswith(prefix) and ('w' in mode or 'a' in mode or '+' in mode):
                if os.path.isdir(full):
                    return real_open(path, mode, *args, **kwargs)  # the real EISDIR
                if not os.path.exists(full):
                    raise IOError(errno.ENOENT, os.strerror(errno.ENOENT), full)  # sysfs creates no files
                return _SysfsAttrWrite(self, '/' + os.path.relpath(full, self.root))
            return real_open(path, mode, *args, **kwargs)
        return fake_open

    # -- mounts ----------------------------------------------------------------------------
    def mount(self, majmin, mountpoint, fstype='xfs', source='/dev/root', options='rw,relatime'):
        self.mkdir(mountpoint)
        self._next_mount_id += 1
        escaped = mountpoint.replace(' ', '\\040')
        self._mountinfo.append('%d 1 %s / %s %s shared:1 - %s %s rw' % (
            self._next_mount_id, majmin, escaped, options, fstype, source))
        self.write('/proc/self/mountinfo', '\n'.join(self._mountinfo) + '\n')


def nitro_host(root):
    """A typical AEM host on AWS Nitro: root on nvme0n1p1, the repository on LVM over nvme1n1."""
    host = FakeHost(root)
    host.add_nvme('nvme0n1', '259:0', 'vol0rootrootrootroot', read_ahead_kb=4096)
    host.add_partition('nvme0n1', 'nvme0n1p1', '259:1')
    host.add_nvme('nvme1n1', '259:2', 'vol0123456789abcdef0', read_ahead_kb=4096)
    host.add_lv('dm-0', '253:0', 'vg_aem', 'lv_repo', slaves=['nvme1n1'], read_ahead_kb=4096)
    host.mount('259:1', '/', 'xfs', '/dev/nvme0n1p1')
    host.mount('0:22', '/sys', 'sysfs', 'sysfs', 'rw,nosuid')
    host.mount('0:23', '/tmp', 'tmpfs', 'tmpfs')
    host.mount('253:0', '/opt/aem', 'xfs', '/dev/mapper/vg_aem-lv_repo')
    host.mkdir('/opt/aem/crx-quickstart/repository/segmentstore')
    return host


def tree_checksum(root):
    """Content, mode and link target of everything under ``root``."""
    result = {}
    for directory, dirs, names in os.walk(root):
        for name in sorted(dirs + names):
            full = os.path.join(directory, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                result[rel] = ('link', os.readlink(full))
            elif os.path.isdir(full):
                result[rel] = ('dir', oct(os.stat(full).st_mode))
            else:
                with open(full, 'rb') as f:
                    result[rel] = ('file', oct(os.stat(full).st_mode), hashlib.sha1(f.read()).hexdigest())
    return result
