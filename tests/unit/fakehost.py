# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Build fake host trees (sysfs, /run/udev/data, /proc/self/mountinfo, /etc) for unit tests.

The layout mirrors a real host: device directories under /sys/devices, with /sys/class/block,
/sys/block and /sys/dev/block as relative symlinks into them; partitions inside their disk's
directory; ``slaves``/``holders`` as directories of links; udev properties as ``E:`` lines.
Python 2.7 and 3.6 compatible, like the code under test.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


class FakeHost(object):
    def __init__(self, root):
        self.root = str(root)
        self._mountinfo = []
        self._next_mount_id = 20
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
