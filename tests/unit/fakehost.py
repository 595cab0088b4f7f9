# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fake host of every unit test: its tree, its tools and the fixtures that describe it.

- :class:`FakeHost` builds host trees (sysfs, /run/udev/data, /proc/self/mountinfo, /etc,
  tuned profiles with :meth:`FakeHost.add_tuned`); :func:`nitro_host` is the typical AEM host.
- :class:`FakeTools` is the one fake of the programs the modules run (lvs, lvchange, udevadm,
  tuned-adm, grubby/rpm/grub2-editenv, grub2-mkconfig, update-grub): stateful, acting on the
  tree, dispatching by tool name and recording every call (see the comment above it).
- ``FAKE_BOOT_TOOLS`` is the versioned grubby-bls model (GRUBBY_VERSIONS), the one grubby
  fake: FakeTools runs it as a script (``FakeTools.boot_tools``).
- OS_RELEASE, STOCK_PROFILES (THROUGHPUT_PERFORMANCE, VIRTUAL_GUEST) and :func:`fixture`
  (tests/unit/fixtures) are the shared fixtures.

utils.py runs a module's ``main()`` against a FakeHost and its FakeTools (``Env``).

The tree's layout mirrors a real host: device directories under /sys/devices, with /sys/class/block,
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
import fnmatch
import hashlib
import os
import re
import stat
import struct
import subprocess
import sys

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


# /etc/os-release of the distributions the tests model (the boot-loader family comes from it).
OS_RELEASE = {
    'el7': 'NAME="CentOS Linux"\nVERSION="7 (Core)"\nID="centos"\nID_LIKE="rhel fedora"\nVERSION_ID="7"\n',
    'rhel7': 'NAME="Red Hat Enterprise Linux Server"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="7.9"\n',
    'el8': ('NAME="Red Hat Enterprise Linux"\nVERSION="8.9 (Ootpa)"\nID="rhel"\nID_LIKE="fedora"\n'
            'VERSION_ID="8.9"\nPLATFORM_ID="platform:el8"\n'),
    'el9': 'NAME="Rocky Linux"\nVERSION="9.3 (Blue Onyx)"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n',
    'debian': ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\n'
               'VERSION="12 (bookworm)"\nID=debian\n'),
    'ubuntu': 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n',
}

# Stand-ins for the stock tuned profiles, reduced to the keys the tests look at (the upstream
# files, abridged and by tuned version, are in fixtures/tuned): throughput-performance raises
# read-ahead to 4096 KiB; virtual-guest includes it. Neither sets THP on x86_64: upstream removed
# throughput-performance's [vm] transparent_hugepages=always in v2.5.0
# (profiles/throughput-performance/tuned.conf at v2.4.1 and v2.5.0); later releases set it for aarch64
# ThunderX only ([vm.thunderx]).
THROUGHPUT_PERFORMANCE = ('[main]\nsummary=Broadly applicable tuning for throughput (test fixture)\n\n'
                          '[cpu]\ngovernor=performance\n\n[disk]\nreadahead=>4096\n')
VIRTUAL_GUEST = ('[main]\nsummary=Tuning for virtual guests (test fixture)\ninclude=throughput-performance\n\n'
                 '[sysctl]\nvm.swappiness = 30\n')
STOCK_PROFILES = {'throughput-performance': THROUGHPUT_PERFORMANCE, 'virtual-guest': VIRTUAL_GUEST}

# tuned's state files (as plugins/module_utils/tuned.py names them).
TUNED_ACTIVE_PROFILE = '/etc/tuned/active_profile'
TUNED_PROFILE_MODE = '/etc/tuned/profile_mode'
TUNED_PID = '/run/tuned/tuned.pid'


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
        self.proc_stats = {}
        self.proc_uids = {}
        self.write('/proc/self/mountinfo', '')

    def use_page_kb(self, monkeypatch, kb):
        """A kernel with ``kb`` KiB pages (64 on RHEL 9's aarch64 kernel-64k and RHEL 8 on aarch64): what every
        page-size check of the collection sees (compliance.page_kb_of, the one page-size function)."""
        from ansible_collections.aemops.os_tuning.plugins.module_utils import compliance
        monkeypatch.setattr(compliance, 'page_kb_of', lambda sysconf=None: kb)
        return self

    def set_kernel(self, release):
        """The running kernel's release, as in /proc/sys/kernel/osrelease (``uname -r``)."""
        self.write('/proc/sys/kernel/osrelease', release + '\n')
        return self

    def set_queue(self, name, optimal_io_size=0, rotational=0, max_sectors_kb=1280):
        """A device's queue limits in sysfs: ``optimal_io_size`` in bytes (virtio-blk's opt_io_size, NVMe's NOWS,
        SCSI's OPTIMAL TRANSFER LENGTH), ``rotational`` and ``max_sectors_kb``."""
        queue = self._devdir(name) + '/queue/'
        self.write(queue + 'optimal_io_size', '%d\n' % optimal_io_size)
        self.write(queue + 'rotational', '%d\n' % rotational)
        self.write(queue + 'max_sectors_kb', '%d\n' % max_sectors_kb)
        return self

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
        # The kernel's uevent file (block/genhd.c disk_uevent, block/partitions/core.c part_uevent); the udev
        # database (self.udev) holds only what the rules added, never these keys.
        major, minor = majmin.split(':')
        self.write(devdir + '/uevent', 'MAJOR=%s\nMINOR=%s\nDEVNAME=%s\nDEVTYPE=%s\n'
                   % (major, minor, name, 'disk' if whole else 'partition'))
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
            self.udev(majmin, dict(udev or {}), links)
        return devdir

    def add_nvme(self, name, majmin, serial, model='Amazon Elastic Block Store', read_ahead_kb=128, udev=True):
        ctrl = '/sys/devices/pci0000:00/0000:00:1f.0/nvme/nvme%s' % name[4:].split('n')[0]
        self.write(ctrl + '/serial', serial.ljust(20) + '\n')
        self.write(ctrl + '/model', model.ljust(40) + '\n')
        # the controller is a device of class nvme (drivers/nvme/host/core.c: its uevent names the transport)
        self.write(ctrl + '/uevent', 'MAJOR=243\nMINOR=%s\nDEVNAME=%s\nNVME_TRTYPE=pcie\n'
                   % (name[4:].split('n')[0], os.path.basename(ctrl)))
        devdir = '%s/%s' % (ctrl, name)
        self._register(name, devdir, majmin, whole=True)
        self.symlink(devdir + '/device', '..')
        self.write(devdir + '/queue/read_ahead_kb', '%d\n' % read_ahead_kb)
        self.write(devdir + '/removable', '0\n')
        if udev:
            ident = '%s_%s' % (model, serial)
            self.udev(majmin, {'ID_MODEL': model, 'ID_SERIAL': ident, 'ID_SERIAL_SHORT': serial},
                      ['disk/by-id/nvme-%s' % ident.replace(' ', '_')])
        return devdir

    def add_partition(self, disk, name, majmin, number=1, udev=None):
        diskdir = os.path.dirname(os.path.realpath(self.path('/sys/class/block/%s/dev' % disk)))
        diskdir = '/' + os.path.relpath(diskdir, self.root)
        devdir = '%s/%s' % (diskdir, name)
        self._register(name, devdir, majmin, whole=False)
        self.write(devdir + '/partition', '%d\n' % number)
        if udev is not None:
            self.udev(majmin, dict(udev))
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
        props = {'DM_NAME': dm_name, 'DM_UUID': dm_uuid}
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
        self.udev(majmin, {'MD_UUID': md_uuid, 'MD_LEVEL': 'raid1'})
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

    # -- tuned ---------------------------------------------------------------------------
    def add_tuned(self, active='virtual-guest', mode='auto', running=False, profiles=None):
        """The stock profiles (``profiles``: name -> text, STOCK_PROFILES by default) in /usr/lib/tuned,
        ``active`` as the active profile in ``mode``; ``running`` adds tuned's PID file and process."""
        for name, text in sorted((STOCK_PROFILES if profiles is None else profiles).items()):
            self.write('/usr/lib/tuned/%s/tuned.conf' % name, text)
        self.write(TUNED_ACTIVE_PROFILE, active + '\n')
        self.write(TUNED_PROFILE_MODE, mode + '\n')
        if running:
            self.write(TUNED_PID, '812\n')
            self.mkdir('/proc/812')
        return self

    def install_profiles(self, name, directory='/usr/lib/tuned'):
        """The profile set ``fixtures/tuned/<name>`` (``<profile>/tuned.conf`` each) into ``directory``."""
        base = os.path.join(FIXTURES, 'tuned', name)
        for profile in sorted(os.listdir(base)):
            if os.path.isfile(os.path.join(base, profile, 'tuned.conf')):  # the shadow tree adds __init__.py files
                self.write('%s/%s/tuned.conf' % (directory, profile), fixture('tuned/%s/%s/tuned.conf' % (name, profile)))
        return self

    # -- mounts ----------------------------------------------------------------------------
    def mount(self, majmin, mountpoint, fstype='xfs', source='/dev/root', options='rw,relatime'):
        self.mkdir(mountpoint)
        self._next_mount_id += 1
        escaped = mountpoint.replace(' ', '\\040')
        self._mountinfo.append('%d 1 %s / %s %s shared:1 - %s %s rw' % (
            self._next_mount_id, majmin, escaped, options, fstype, source))
        self.write('/proc/self/mountinfo', '\n'.join(self._mountinfo) + '\n')

    # -- processes (/proc/PID) -------------------------------------------------------------

    def add_process(self, pid, comm='java', start_ticks=1000, fds=None, maps=(), unit='aem.service', uid=0,
                    mnt_ns='mnt:[4026531841]', cgroup=None, flags=None, mnt_id=True):
        """A process in /proc: ``fds`` {fd: (link text, 'major:minor', inode)} (a link text that does
        not start with / is a socket or a pipe), ``maps`` the lines of /proc/PID/maps as given.

        The descriptors are symbolic links to their text, as in procfs; what ``stat`` through them
        gives (the device number of another filesystem) is kept here for :class:`FakeProcFs`. Each
        has its fdinfo (``flags`` {fd: octal flags}, O_RDONLY|O_LARGEFILE by default; ``mnt_id``
        False leaves it out, as kernels before 3.15 do) pointing into the process's mountinfo: the
        host's mounts, and one more per other device of its descriptors, mounted at the first
        descriptor's directory.
        """
        base = '/proc/%d' % pid
        self.write(base + '/stat', '%d (%s) S 1 %d %d 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 40 0 %d 1000 50 '
                   '18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n'
                   % (pid, comm, pid, pid, start_ticks))
        self.write(base + '/maps', ''.join(line + '\n' for line in maps))
        self.write(base + '/cgroup', cgroup if cgroup is not None else
                   ('0::/system.slice/%s\n' % unit if unit else '0::/user.slice\n'))
        self.mkdir(base + '/fd')
        self.mkdir(base + '/ns')
        if mnt_ns:
            self.symlink(base + '/ns/mnt', mnt_ns)
        lines = list(self._mountinfo)
        ids = {}
        for line in lines:
            ids.setdefault(line.split(' ')[2], int(line.split(' ')[0]))
        self.mkdir(base + '/fdinfo')
        for fd, (text, majmin, ino) in sorted((fds or {}).items()):
            self.symlink('%s/fd/%d' % (base, fd), text)
            self.proc_stats[self.path('%s/fd/%d' % (base, fd))] = (majmin, ino)
            if text.startswith('/') and majmin not in ids:
                ids[majmin] = 9000 + len(lines)
                lines.append('%d 1 %s / %s rw - fakefs none rw' % (ids[majmin], majmin, os.path.dirname(text)))
            self.write('%s/fdinfo/%d' % (base, fd), 'pos:\t0\nflags:\t%s\n%sino:\t%d\n' % (
                (flags or {}).get(fd, '0100000'), 'mnt_id:\t%d\n' % ids.get(majmin, 0) if mnt_id else '', ino))
        self.write(base + '/mountinfo', ''.join(line + '\n' for line in lines))
        self.proc_uids[self.path(base)] = uid
        if not os.path.lexists(self.path('/proc/self/ns/mnt')):
            self.mkdir('/proc/self/ns')
            self.symlink('/proc/self/ns/mnt', 'mnt:[4026531841]')
        if not self.exists('/proc/stat'):
            self.write('/proc/stat', 'cpu  1 2 3 4\nbtime 1764650000\nprocesses 900\n')
        return base

    def proc_procfs(self):
        return FakeProcFs(self)


class FakeProcFs(object):
    """The /proc reads of readers_scan.scan on a FakeHost: ``stat`` through a descriptor link gives the device
    and inode recorded by add_process (a fake tree's link cannot point into another filesystem).
    ``unreadable`` {pid: errno} makes that process's fd directory fail; ``exits`` {pid} makes a
    process vanish when its fd directory is listed (it exited during the scan); ``slow`` {pid: seconds}
    makes its fd directory take that long (a process whose /proc reads block). ``stats`` and ``reads``
    list every stat and read."""

    def __init__(self, host):
        self.host = host
        self.proc = host.path('/proc')
        self.unreadable = {}
        self.exits = set()
        self.slow = {}
        self.stats = []
        self.reads = []

    def _pid_of(self, path):
        rel = os.path.relpath(path, self.proc).split(os.sep)
        return int(rel[0]) if rel and rel[0].isdigit() else None

    def listdir(self, path):
        pid = self._pid_of(path)
        if pid is not None and path.endswith('/fd'):
            if pid in self.unreadable:
                raise OSError(self.unreadable[pid], os.strerror(self.unreadable[pid]), path)
            if pid in self.exits:
                import shutil
                shutil.rmtree(self.host.path('/proc/%d' % pid))
            if pid in self.slow:
                import time
                time.sleep(self.slow[pid])
        return os.listdir(path)

    def readlink(self, path):
        return os.readlink(path)

    def read(self, path):
        self.reads.append(path)
        from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_scan
        return readers_scan.proc_text(path)

    def stat(self, path):
        self.stats.append(path)
        if path not in self.host.proc_stats:
            raise OSError(errno.ENOENT, 'No such file or directory', path)
        majmin, ino = self.host.proc_stats[path]
        major, minor = (int(x) for x in majmin.split(':'))
        return os.stat_result((stat.S_IFREG | 0o644, ino, os.makedev(major, minor), 1, 0, 0, 1 << 30, 0, 0, 0))

    def owner(self, path):
        return self.host.proc_uids.get(path, 0)


class FakeSyscalls(object):
    """readers_refresh.Syscalls of a fake kernel over FakeHost processes: ``fail`` {call: errno} makes that call
    fail (the probe of readers_refresh.refresh_support too, listed in ``probes``); a duplicate refers to the (dev, ino)
    add_process gave the descriptor. Records every other call and
    keeps the descriptors it handed out in ``open_fds`` until they are closed."""

    def __init__(self, host, fail=None):
        self.host = host
        self.fail = fail or {}
        self.calls = []
        self.probes = []
        self.open_fds = set()
        self.next_fd = 100
        self.dups = {}

    def _new(self):
        self.next_fd += 1
        self.open_fds.add(self.next_fd)
        return self.next_fd

    def _maybe_fail(self, call):
        if call in self.fail:
            raise OSError(self.fail[call], os.strerror(self.fail[call]))

    def pidfd_open(self, pid):
        if pid == 0:  # readers_refresh.refresh_support's probe: pid 0 is never valid
            self.probes.append('pidfd_open')
            self._maybe_fail('pidfd_open')
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        self.calls.append(('pidfd_open', pid))
        self._maybe_fail('pidfd_open')
        fd = self._new()
        self.dups[fd] = pid
        return fd

    def pidfd_getfd(self, pidfd, fd):
        if pidfd not in self.dups:  # the probe's descriptor -1
            self.probes.append('pidfd_getfd')
            self._maybe_fail('pidfd_getfd')
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        self.calls.append(('pidfd_getfd', self.dups[pidfd], fd))
        self._maybe_fail('pidfd_getfd')
        link = self.host.path('/proc/%d/fd/%d' % (self.dups[pidfd], fd))
        if link not in self.host.proc_stats:
            raise OSError(errno.EBADF, 'Bad file descriptor')
        new = self._new()
        self.dups[new] = self.host.proc_stats[link]
        return new

    def fstat(self, fd):
        majmin, ino = self.dups[fd]
        major, minor = (int(x) for x in majmin.split(':'))
        return os.stat_result((0o100644, ino, os.makedev(major, minor), 1, 0, 0, 0, 0, 0, 0))

    def fadvise_normal(self, fd):
        self.calls.append(('fadvise_normal', self.dups[fd]))

    def close(self, fd):
        self.open_fds.remove(fd)


# -- EBS: NVMe log page 0xD0 ---------------------------------------------------------------------
# Built here byte by byte from the documented layout (nvme-cli plugins/amzn/amzn-nvme.c and amazon-ec2-utils
# ebsnvme; see module_utils/ebs_stats.py), never by the parser the tests check.

EBS_MAGIC = 0x3C23B510
INSTANCE_STORE_MAGIC = 0xEC2C0D7E
EBS_COUNTER_ORDER = ('total_read_ops', 'total_write_ops', 'total_read_bytes', 'total_write_bytes',
                     'total_read_time', 'total_write_time', 'ebs_volume_performance_exceeded_iops',
                     'ebs_volume_performance_exceeded_tp', 'ec2_instance_performance_exceeded_iops',
                     'ec2_instance_performance_exceeded_tp', 'volume_queue_length')


def ebs_page(counters=None, read_bins=(), write_bins=(), magic=EBS_MAGIC, version=0, read_num_bins=None):
    """A 4096-byte 0xD0 page: magic and version (u32 at 0x000, 0x004), the eleven u64 from 0x008 in
    EBS_COUNTER_ORDER, zeros to 0x200, the read histogram at 0x200 and the write one at 0x808 (u64 number of
    bins, then 64 bins of u64 lower, u64 upper, u32 count, u32 reserved), zeros to 4096. ``read_num_bins``
    overrides the number of read bins written (a page that claims more than it has)."""
    counters = counters or {}
    page = bytearray(4096)
    struct.pack_into('<I', page, 0x000, magic)
    struct.pack_into('<I', page, 0x004, version)
    for i, key in enumerate(EBS_COUNTER_ORDER):
        struct.pack_into('<Q', page, 0x008 + 8 * i, counters.get(key, 0))
    for offset, bins, count in ((0x200, read_bins, read_num_bins), (0x808, write_bins, None)):
        struct.pack_into('<Q', page, offset, len(bins) if count is None else count)
        for i, (lower, upper, n) in enumerate(bins):
            struct.pack_into('<QQII', page, offset + 8 + 24 * i, lower, upper, n, 0xFFFFFFFF)
    return bytes(page)


class FakeNvme(object):
    """ebs_stats.Nvme of a fake kernel: ``nodes`` {device path: (majmin, answer)}, where the answer is page bytes
    (copied into the buffer the command points at, status 0), ``('status', n)`` (the ioctl returns the NVMe
    status n) or ``('errno', e)`` (the ioctl fails with e). A majmin of None makes the node a regular file.
    Records every ioctl as (request, the command's bytes, the buffer's address); never writes anything else."""

    def __init__(self, nodes=None, open_errno=None):
        self.nodes = dict(nodes or {})
        self.open_errno = open_errno
        self.ioctls = []
        self.fds = {}
        self.closed = []

    def open(self, path):
        if self.open_errno:
            raise OSError(self.open_errno, os.strerror(self.open_errno))
        if path not in self.nodes:
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT))
        fd = 200 + len(self.fds)
        self.fds[fd] = path
        return fd

    def fstat(self, fd):
        majmin = self.nodes[self.fds[fd]][0]
        if majmin is None:
            return os.stat_result((0o100644, 1, 0, 1, 0, 0, 0, 0, 0, 0))
        major, minor = (int(x) for x in majmin.split(':'))
        st = os.stat_result((0o060600, 1, 5, 1, 0, 0, 0, 0, 0, 0))
        return _StatWithRdev(st, os.makedev(major, minor))

    def admin(self, fd, request, cmd, data):
        import ctypes
        self.ioctls.append((request, bytes(bytearray(cmd)), ctypes.addressof(data)))
        answer = self.nodes[self.fds[fd]][1]
        if isinstance(answer, bytes):
            ctypes.memmove(data, answer, min(len(answer), len(data)))
            return 0
        kind, value = answer
        if kind == 'status':
            return value
        raise IOError(value, os.strerror(value))

    def close(self, fd):
        self.closed.append(fd)


class _StatWithRdev(object):
    """An os.stat_result with st_rdev (os.stat_result cannot be built with one on every Python)."""

    def __init__(self, st, rdev):
        self.st_mode = st.st_mode
        self.st_rdev = rdev


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
    """Content, mode and link target of everything under ``root``.

    FIFOs, sockets and device nodes are recorded by their mode, never opened (a FIFO blocks).
    """
    result = {}
    for directory, dirs, names in os.walk(root):
        for name in sorted(dirs + names):
            full = os.path.join(directory, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                result[rel] = ('link', os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                result[rel] = ('dir', oct(st.st_mode))
            elif not stat.S_ISREG(st.st_mode):
                result[rel] = ('other', oct(st.st_mode))
            else:
                with open(full, 'rb') as f:
                    result[rel] = ('file', oct(st.st_mode), hashlib.sha1(f.read()).hexdigest())
    return result


class HostReads(object):
    """Counts, per host path (``/etc/tuned/active_profile``), the opens for reading of files under a fake host's
    root while it is installed (monkeypatch): every read of the host goes through os.open (files.read_bytes and
    the modules' own readers) or open(). A missing file counts too: the run asked for it.
    """

    def __init__(self, root, monkeypatch):
        self.root = os.path.normpath(str(root))
        self.counts = {}
        self.phase = 'plan'
        self.phases = {}
        real_os_open = os.open
        builtins = __import__('builtins' if str is not bytes else '__builtin__')
        real_open = builtins.open

        def os_open(path, flags, *args, **kwargs):
            if not flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                self._count(path)
            return real_os_open(path, flags, *args, **kwargs)

        def open_(path, mode='r', *args, **kwargs):
            if not any(c in mode for c in 'wax+'):
                self._count(path)
            return real_open(path, mode, *args, **kwargs)
        monkeypatch.setattr(os, 'open', os_open)
        monkeypatch.setattr(builtins, 'open', open_)

    def _count(self, path):
        if not isinstance(path, (str, type(u''))):
            return  # a descriptor (os.fdopen), not a path
        full = os.path.normpath(path)
        if full.startswith(self.root + os.sep):
            host_path = full[len(self.root):]
            self.counts[host_path] = self.counts.get(host_path, 0) + 1
            phase = self.phases.setdefault(self.phase, {})
            phase[host_path] = phase.get(host_path, 0) + 1

    def more_than_once(self, phase=None):
        """{host path: count} of the paths opened for reading more than once, in the whole run or in ``phase``."""
        counts = self.counts if phase is None else self.phases.get(phase, {})
        return dict((p, n) for p, n in counts.items() if n > 1)

    def from_thaw(self, monkeypatch):
        """Count the reads after the plan (host.Host.thaw, where a module that changes the host starts to
        change it) as phase ``apply``: the reads before it are the planning's. Without a thaw, every read stays
        in ``plan``."""
        from ansible_collections.aemops.os_tuning.plugins.module_utils import host
        real_thaw = host.Host.thaw

        def thaw(snap):
            self.phase = 'apply'
            return real_thaw(snap)
        monkeypatch.setattr(host.Host, 'thaw', thaw)
        return self


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures')


def deny_run_dir(root, monkeypatch):
    """mkdir under the fake host's /run fails with EACCES, as it does for a run that is not root
    (/run is 0755 root, so /run/aemops-os-tuning cannot be created)."""
    real = os.mkdir
    run = os.path.join(str(root), 'run')

    def mkdir(path, mode=0o777):
        if str(path) == run or str(path).startswith(run + os.sep):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real(path, mode)
    monkeypatch.setattr(os, 'mkdir', mkdir)


def fixture(name):
    """The text of ``tests/unit/fixtures/<name>`` (each fixture names its upstream source)."""
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


# -- grubby (the BLS grubby of RHEL 8 and 9), rpm and grub2-editenv ---------------------------------
#
# A fake of /usr/sbin/grubby as the grubby-bls script of each modelled package release behaves,
# written from the script's history (Fedora dist-git grubby, mirrored as fedora-riscv/grubby:
# commits 290786e, 6abeb6f, 08153fc, 8c7d866, f24781c, 770392f, 2b59d13, 1faea2d, 0da23ad) and
# the RHEL 8 grubby.spec changelog (which el8 release took which change). Behaviour by release
# (el8 numbering; el9 is the Fedora 8.40-66+ script):
#
# =========  ====  ===========================================================================
# release    RHEL  --update-kernel=ALL --args/--remove-args
# =========  ====  ===========================================================================
# 8.40-34    8.0   rewrites every entry's options, every $var expanded (grubenv, if not empty)
# 8.40-37    8.1   + edits grubenv kernelopts; its "$kernelopts in the entry" test is always
#                  true, so entries are still all rewritten; an entry equal to the new
#                  kernelopts is set back to "$kernelopts"
# 8.40-38    8.2   entries holding $kernelopts are left alone
# 8.40-41    8.3   + GRUB_CMDLINE_LINUX sed on /etc/default/grub (every GRUB_CMDLINE_LINUX*
#                  line, value as sourced), --no-etc-grub-update; both only when set
# 8.40-42    8.5   only $kernelopts is expanded (--info and updates)
# 8.40-48    8.8   + /etc/kernel/cmdline rewritten, created from the oldest entry when missing
# 8.40-63    9.x   as 8.40-48, without the "$kernelopts" reset (Fedora commit 12e62c4)
# =========  ====  ===========================================================================
#
# grubby-bls has no --version: its getopt rejects it, so the package version comes from
# ``rpm -q --qf '%{VERSION}-%{RELEASE}\n' grubby`` (the fake rpm). Options are normalised the
# way getopt(1) does (``--opt=value`` and ``--opt value``, then ``--``) and then parsed with
# the script's double shift for --no-etc-grub-update, so the option works only when last.
# grub2-editenv keeps the 1024-byte block /boot/grub2/grubenv (set replaces in place).

GRUBBY_VERSIONS = ('8.40-34.el8', '8.40-37.el8', '8.40-38.el8', '8.40-41.el8', '8.40-42.el8',
                   '8.40-48.el8', '8.40-63.el9')

FAKE_BOOT_TOOLS = r'''
import os
import re
import subprocess
import sys

ROOT, VERSION, TOOL, ARGS = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
m = re.match(r'^\d+\.\d+-(\d+)\.(el\d+)$', VERSION)
RELEASE, DIST = int(m.group(1)), m.group(2)
EL9 = DIST == 'el9'
GRUBENV = '/boot/grub2/grubenv'
ENTRIES = '/boot/loader/entries'
LOG = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), 'boot-tools.log')


def path(target):
    return os.path.join(ROOT, target.lstrip('/'))


def read(target):
    try:
        with open(path(target)) as f:
            return f.read()
    except IOError:
        return None


def write(target, text):
    with open(path(target), 'w') as f:
        f.write(text)


def err(message, rc=1):
    sys.stderr.write(message + '\n')
    return rc


# grub2-editenv: the environment block
def env_lines():
    return [l for l in (read(GRUBENV) or '').splitlines() if l and not l.startswith('#')]


def env_set(assignment):
    lines = env_lines()
    name = assignment.split('=', 1)[0]
    names = [l.split('=', 1)[0] for l in lines]
    if name in names:
        lines[names.index(name)] = assignment
    else:
        lines.append(assignment)
    body = '# GRUB Environment Block\n' + ''.join(l + '\n' for l in lines)
    if len(body) > 1024:
        return err('grub2-editenv: error: environment block too small.')
    write(GRUBENV, body + '#' * (1024 - len(body)))
    return 0


def editenv():
    if ARGS == ['-', 'list']:
        sys.stdout.write(''.join(l + '\n' for l in env_lines()))
        return 0
    if ARGS[:2] == ['-', 'set'] and len(ARGS) == 3:
        return env_set(ARGS[2])
    return err('grub2-editenv: unexpected arguments %r' % (ARGS,), 64)


def env_grep(name):
    # grub2-editenv list | grep NAME | sed s/NAME=//: every line holding NAME, joined by echo
    values = [l.replace(name + '=', '', 1) for l in env_lines() if name in l]
    return ' '.join(' '.join(values).split())


# rpm -q
def rpm():
    if ARGS == ['-q', '--qf', '%{VERSION}-%{RELEASE}\\n', 'grubby']:
        sys.stdout.write(VERSION + '\n')
        return 0
    if ARGS == ['-q', 'grubby']:
        sys.stdout.write('grubby-%s.x86_64\n' % VERSION)
        return 0
    return err('rpm: unexpected arguments %r' % (ARGS,), 64)


# grubby-bls
def flat(text):
    return ' '.join(text.split())


def sed_strip(args, name, first_only):
    name = re.escape(name)
    if first_only:
        return flat(re.sub(r'(^|\s)' + name + r'(\s|$)', ' ', args, count=1))
    return flat(re.sub(r'(^|\s)' + name + r'((\s|$)|(=[^ ]*(\$*)))', ' ', args))


def update_args(args, remove, add):
    args = flat(args)
    for arg in remove.split():
        args = sed_strip(args, arg, '=' in arg)
    for arg in add.split():
        args = sed_strip(args, arg.split('=', 1)[0], False)
    for arg in add.split():
        args = args + ' ' + arg
    return flat(args)


def entries():
    names = [n[:-5] for n in os.listdir(path(ENTRIES)) if n.endswith('.conf')] if os.path.isdir(path(ENTRIES)) else []
    def key(n):
        return [(0, int(p), '') if p.isdigit() else (1, 0, p) for p in re.findall(r'\d+|\D+', n)]
    found = []
    for name in sorted(names, key=key, reverse=True):
        text = read('%s/%s.conf' % (ENTRIES, name))
        fields = {}
        for line in text.splitlines():
            mm = re.match(r'^(\S+)[ \t]*(.*)$', line)
            if mm and mm.group(1) not in fields:
                fields[mm.group(1)] = mm.group(2)
        fields['__id'] = name
        found.append(fields)
    return found


def bls_args(entry):
    args = flat(entry.get('options', ''))
    for opt in args.split():
        expand = opt == '$kernelopts' if RELEASE >= 42 or EL9 else opt.startswith('$')
        if expand:
            value = env_grep(opt[1:])
            if value:
                args = flat(args.replace(opt, value, 1))
    return args


def set_options(entry, value):
    target = '%s/%s.conf' % (ENTRIES, entry['__id'])
    lines = read(target).splitlines(True)
    out = []
    for line in lines:
        if line.startswith('options'):
            line = 'options %s\n' % flat(value)
        out.append(line)
    write(target, ''.join(out))


def has_kernelopts(entry):
    if RELEASE < 38 and not EL9:
        return False            # 8.40-34: no such test; 8.40-37: the test is always "not there"
    return '$kernelopts' in entry.get('options', '').split()


def sourced(var):
    script = '. "$1"; printf %s "$' + var + '"'
    out = subprocess.check_output(['/bin/sh', '-c', script, 'sh', path('/etc/default/grub')],
                                  universal_newlines=True)
    return flat(out)


LONG = {'args': 1, 'remove-args': 1, 'update-kernel': 1, 'info': 1, 'no-etc-grub-update': 0}


def getopt(argv):
    known = dict(LONG)
    if RELEASE < 39 and not EL9:
        del known['no-etc-grub-update']
    out, rest, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a.startswith('--'):
            name, eq, value = a[2:].partition('=')
            if name not in known:
                return None, "grubby: unrecognized option '%s'" % a
            out.append('--' + name)
            if known[name]:
                if not eq:
                    i += 1
                    value = argv[i]
                out.append(value)
        else:
            rest.append(a)
        i += 1
    return out + ['--'] + rest, None


def grubby():
    opts, problem = getopt(ARGS)
    if problem:
        return err(problem)
    o = {}
    while opts:
        a = opts[0]
        if a == '--no-etc-grub-update':
            o['no_etc'] = True
            opts = opts[1:]                  # the handler's own shift, then the loop's
        elif a == '--':
            opts = opts[1:]
            break
        elif a in ('--args', '--remove-args', '--update-kernel', '--info'):
            o[a[2:]] = opts[1]
            opts = opts[1:]
        else:
            return err('grubby: invalid option "%s"' % a)
        opts = opts[1:]
    all_entries = entries()
    if 'info' in o:
        if o['info'] != 'ALL':
            return err('fake grubby: only --info=ALL')
        for index, entry in enumerate(all_entries):
            args, root = bls_args(entry), ''
            for opt in args.split():
                if opt.startswith('root='):
                    root = opt[5:]
                    args = flat(args.replace(opt, '', 1))
                    break
            sys.stdout.write('index=%d\nkernel="/boot%s"\nargs="%s"\n' % (index, entry.get('linux', ''), args))
            if root:
                sys.stdout.write('root="%s"\n' % root)
            sys.stdout.write('initrd="/boot%s"\ntitle="%s"\nid="%s"\n'
                             % (entry.get('initrd', ''), entry.get('title', ''), entry['__id']))
        return 0
    if o.get('update-kernel') != 'ALL' or not (o.get('args') or o.get('remove-args')):
        return err('fake grubby: only --update-kernel=ALL with --args/--remove-args')
    add, remove = o.get('args', ''), o.get('remove-args', '')
    with open(LOG, 'a') as f:
        f.write('grubby %s\n' % ' '.join(ARGS))
    opts_now = ''
    if RELEASE >= 39 or EL9:
        if not o.get('no_etc') and os.path.exists(path('/etc/default/grub')):
            old = sourced('GRUB_CMDLINE_LINUX')
            if old or (RELEASE < 41 and not EL9):
                value = update_args(old, remove, add)
                text = read('/etc/default/grub')
                write('/etc/default/grub', ''.join(
                    ('GRUB_CMDLINE_LINUX="%s"\n' % value) if l.startswith('GRUB_CMDLINE_LINUX') else l
                    for l in text.splitlines(True)))
    if RELEASE >= 37 or EL9:
        old = env_grep('kernelopts')
        if old or (RELEASE < 41 and not EL9):
            opts_now = update_args(old, remove, add)
            env_set('kernelopts=' + opts_now)
    for entry in all_entries:
        new = update_args(bls_args(entry), remove, add)
        if not has_kernelopts(entry):
            set_options(entry, new)
        if RELEASE >= 37 and not EL9 and not has_kernelopts(entry) and opts_now and opts_now == new:
            set_options(entry, '$kernelopts')
    if RELEASE >= 47 or EL9:
        if read('/etc/kernel/cmdline') is None and all_entries:
            write('/etc/kernel/cmdline', bls_args(all_entries[-1]) + '\n')
        first = (read('/etc/kernel/cmdline').splitlines() or [''])[0]
        first = re.sub(r'\\(.)', r'\1', first)
        write('/etc/kernel/cmdline', update_args(first, remove, add) + '\n')
    return 0


sys.exit({'grubby': grubby, 'rpm': rpm, 'grub2-editenv': editenv}[TOOL]())
'''


# -- the host's tools ---------------------------------------------------------------------------
#
# One stateful fake of the programs the modules run, for every module test: ``get_bin_path`` and
# ``run_command`` of AnsibleModule (or ``which``/``run`` for module_utils) are pointed at a
# FakeTools, which records every argv in ``calls`` and answers as the program would, acting on
# the FakeHost's tree, so a second run sees what the first one did:
#
#   lvs, lvchange       the LVM read-ahead held in ``lvm`` (``add_lv``); lvchange also sets the
#                       LV's read_ahead_kb as LVM does on an active LV
#   udevadm             control and settle succeed; trigger runs the rules files on the block devices it
#                       matches when udevd runs (/run/udev/control), as systemd's udevd does for the keys
#                       the collection's rules use (``udev_event`` and the comment above it)
#   tuned-adm           --version (``tuned_version``, on stderr when ``tuned_python2``), off (empties
#                       active_profile, mode manual, as controller.py disable() does), verify
#                       (``verify_rc``), profile (switches active_profile, mode manual; sets THP
#                       enabled to ``tuned_sets_enabled`` when that is set, as a stale tuned does)
#   grubby, rpm,        the versioned grubby-bls model above (``boot_tools(version)``), run as a
#   grub2-editenv       script on the tree
#   grub2-mkconfig,     regenerate grub.cfg (the kernels of ``menus``) from /etc/default/grub as
#   update-grub         /bin/sh sources it, update-grub with the /etc/default/grub.d drop-ins
#
# ``fail(tool, rc, err, when)`` makes the calls of ``tool`` whose argv holds every word of ``when``
# fail without running. A tool that is not ``installed`` is not found, an installed one without a
# model exits 127.

TOOL_PATHS = {
    'lvs': '/usr/sbin/lvs', 'lvchange': '/usr/sbin/lvchange', 'udevadm': '/usr/bin/udevadm',
    'tuned-adm': '/usr/sbin/tuned-adm', 'grubby': '/usr/sbin/grubby', 'rpm': '/usr/bin/rpm',
    'grub2-editenv': '/usr/bin/grub2-editenv', 'grub2-mkconfig': '/usr/sbin/grub2-mkconfig',
    'update-grub': '/usr/sbin/update-grub',
}

# Calls that only read: (tool, words its argv holds).
READ_ONLY_CALLS = (('lvs', ()), ('tuned-adm', ('--version',)), ('tuned-adm', ('verify',)), ('grubby', ('--info=ALL',)),
                   ('grub2-editenv', ('-', 'list')), ('rpm', ('-q',)))

LVS_ARGS = ['--noheadings', '--nosuffix', '--units', 's', '-o', 'lv_read_ahead']

TUNED_VERIFY_OK = 'Verification succeeded, current system settings match the preset profile.\n'
TUNED_VERIFY_FAILED = ('Verification failed, current system settings differ from the preset profile.\n'
                       'You can mostly fix this by restarting the TuneD daemon, e.g.:\n  systemctl restart tuned\n')


class FakeTools(object):
    """The host's tools, faked in one place: dispatch by tool name, record every call (see above)."""

    HANDLERS = {'lvs': '_lvs', 'lvchange': '_lvchange', 'udevadm': '_udevadm', 'tuned-adm': '_tuned_adm',
                'grubby': '_grubby', 'rpm': '_rpm', 'grub2-editenv': '_grub2_editenv',
                'grub2-mkconfig': '_grub2_mkconfig', 'update-grub': '_update_grub', 'systemctl': '_systemctl'}
    # ``systemctl --version``'s first line: "systemd 219" then the feature flags on RHEL 7 (version() prints
    # PACKAGE_STRING), "systemd 239 (239-78.el8)" on RHEL 8 and later (the build's version in parentheses; the
    # release where that began is not pinned here: the fake switches at 234, and host.systemd_version reads only the
    # number after "systemd ", which both forms start with). RHEL 8 ships 239, RHEL 9 252, RHEL 10 257; bookworm 252.
    SYSTEMD_VERSION = 252

    def __init__(self, host, bin_dir=None, installed=()):
        self.host = host
        self.bin_dir = bin_dir
        self.installed = set(installed)
        self.calls = []
        self.failures = []
        self.lvm = {}
        self.tuned_version = '2.21.0'
        self.tuned_python2 = False
        self.tuned_sets_enabled = None
        self.verify_rc = 0
        self.grubby_version = None
        self.udev_unmodelled = []  # rules udev_event skipped: a match key it does not model
        # the menu grub2-mkconfig/update-grub write: (kernel line command, kernels)
        self.menus = {'grub2-mkconfig': ('linux16', ['3.10.0-1160.el7.x86_64']),
                      'update-grub': ('linux', ['6.1.0-18-amd64'])}

    # -- setup ---------------------------------------------------------------------------------
    def path(self, name):
        return TOOL_PATHS.get(name, '/usr/bin/' + name)

    def install(self, *names):
        self.installed.update(names)
        return self

    def uninstall(self, *names):
        self.installed.difference_update(names)
        return self

    def add_lv(self, vg_lv, dm, read_ahead='auto', stripe_kb=None):
        """An LV ``vg/lv`` on device ``dm`` whose LVM read-ahead is ``read_ahead`` (sectors or 'auto'); ``stripe_kb``
        for a striped LV (stripe size x stripes)."""
        self.lvm[vg_lv] = {'read_ahead': read_ahead, 'dm': dm, 'stripe_kb': stripe_kb}
        return self

    def boot_tools(self, version):
        """grubby, rpm and grub2-editenv as the grubby-bls of package ``version`` (GRUBBY_VERSIONS)."""
        assert version in GRUBBY_VERSIONS, version
        if not os.path.isdir(self.bin_dir):
            os.makedirs(self.bin_dir)
        with open(os.path.join(self.bin_dir, 'fake_boot_tools.py'), 'w') as f:
            f.write(FAKE_BOOT_TOOLS)
        self.grubby_version = version
        return self.install('grubby', 'rpm', 'grub2-editenv')

    def fail(self, tool, rc=1, err='', when=()):
        """Calls of ``tool`` whose argv holds every word of ``when`` exit ``rc`` with ``err``."""
        self.failures.append((tool, tuple(when), rc, err))
        return self

    # -- the injected callables ----------------------------------------------------------------
    def which(self, name):
        return self.path(name) if name in self.installed else None

    def run(self, argv):
        argv = list(argv)
        self.calls.append(argv)
        tool = os.path.basename(argv[0])
        if tool not in self.installed or argv[0] != self.path(tool):
            return 127, '', 'sh: %s: command not found\n' % argv[0]
        for name, words, rc, err in self.failures:
            if name == tool and all(w in argv[1:] for w in words):
                return rc, '', err
        if tool not in self.HANDLERS:
            return 127, '', '%s: not faked\n' % tool
        return getattr(self, self.HANDLERS[tool])(argv[1:])

    def get_bin_path(self, module, arg, required=False, opt_dirs=None):
        found = self.which(arg)
        if found is None and required:
            module.fail_json(msg='Failed to find required executable "%s"' % arg)
        return found

    def run_command(self, module, args, check_rc=False, **kwargs):
        rc, out, err = self.run(args)
        if check_rc and rc != 0:
            module.fail_json(msg='command failed: %s' % ' '.join(args), rc=rc, stdout=out, stderr=err)
        return rc, out, err

    # -- what was run ----------------------------------------------------------------------------
    def ran(self, tool, *words):
        """The recorded invocations of ``tool`` (optionally only those containing ``words``)."""
        return [c for c in self.calls if os.path.basename(c[0]) == tool and all(w in c for w in words)]

    def mutations(self):
        """The calls other than the read-only ones (READ_ONLY_CALLS)."""
        return [c for c in self.calls if not any(
            os.path.basename(c[0]) == tool and all(w in c[1:] for w in words) for tool, words in READ_ONLY_CALLS)]

    # -- the tools -------------------------------------------------------------------------------
    def _lvs(self, args):
        if args[:-1] != LVS_ARGS:
            return 3, '', 'fake lvs: only %s VG/LV\n' % ' '.join(LVS_ARGS)
        if args[-1] not in self.lvm:
            return 5, '', '  Failed to find logical volume "%s"\n' % args[-1]
        return 0, '  %s\n' % self.lvm[args[-1]]['read_ahead'], ''

    def _lvchange(self, args):
        """``lvchange --readahead auto|SECTORS VG/LV`` on an active LV, as lvm2 2.03 does it (tools/lvchange.c
        _lvchange_readahead, then a reload; lib/activate/dev_manager.c and lib/metadata/metadata.c
        lv_calculate_readahead; libdm _set_dev_node_read_ahead, at v2_03_14): a number is set as given; ``auto``
        is twice the stripe size (``stripe_kb`` of add_lv), or for a linear LV the read-ahead of its first PV,
        applied as a minimum (a larger current value is kept). The same value again fails, as in lvm2."""
        if len(args) != 3 or args[0] != '--readahead' or args[2] not in self.lvm:
            return 3, '', 'fake lvchange: only --readahead VALUE VG/LV\n'
        lv = self.lvm[args[2]]
        wanted = args[1] if args[1] == 'auto' else int(args[1])
        if lv['read_ahead'] == wanted:
            return 5, '', '  Read ahead is already %s for %s.\n' % (wanted, args[2])
        lv['read_ahead'] = wanted
        node = self.host._devdir(lv['dm']) + '/queue/read_ahead_kb'
        if wanted == 'auto':
            kb = 2 * lv['stripe_kb'] if lv.get('stripe_kb') else self._first_pv_read_ahead_kb(lv['dm'])
            kb = max(kb, int(self.host.read(node)))
        else:
            kb = wanted // 2
        self.host.write(node, '%d\n' % kb)
        return 0, '  Logical volume %s changed.\n' % args[2], ''

    def _first_pv_read_ahead_kb(self, dm):
        """The read-ahead of the LV's first PV (a partition reads its disk's), 0 when it has none."""
        slaves_dir = self.host.path(self.host._devdir(dm) + '/slaves')
        pvs = sorted(os.listdir(slaves_dir)) if os.path.isdir(slaves_dir) else []
        if not pvs:
            return 0
        devdir = self.host.path(self.host._devdir(pvs[0]))
        for candidate in (devdir, os.path.dirname(devdir)):
            if os.path.isfile(os.path.join(candidate, 'queue', 'read_ahead_kb')):
                with open(os.path.join(candidate, 'queue', 'read_ahead_kb')) as f:
                    return int(f.read())
        return 0

    def _systemctl(self, args):
        """``systemctl --version`` (see SYSTEMD_VERSION) and ``daemon-reload``, the two the collection runs."""
        if args == ['--version']:
            version = self.SYSTEMD_VERSION
            head = 'systemd %d' % version if version < 234 else 'systemd %d (%d-1)' % (version, version)
            return 0, head + '\n+PAM +AUDIT +SELINUX\n', ''
        if args == ['daemon-reload']:
            return 0, '', ''
        return 1, '', 'systemctl: not faked: %s\n' % ' '.join(args)

    def _udevadm(self, args):
        """``udevadm control --reload``, ``trigger`` and ``settle``, as the collection runs them (see UDEV_RULES_DIRS).

        ``trigger [--action=A] [--subsystem-match=S]... [--sysname-match=GLOB]...`` sends the event to every matching
        block device and, when udevd runs (``/run/udev/control`` exists), runs the rules files on it as
        :meth:`udev_event` does; without udevd the events are not processed. ``control`` and ``settle`` succeed.
        """
        if args[:1] in (['control'], ['settle']):
            return 0, '', ''
        if args[:1] != ['trigger']:
            return 64, '', 'fake udevadm: only control, trigger and settle are modelled, not %r\n' % (args,)
        action, subsystems, sysnames = 'change', [], []
        for arg in args[1:]:
            key, _sep, value = arg.partition('=')
            if key in ('--action', '-c'):
                action = value
            elif key in ('--subsystem-match', '-s'):
                subsystems.append(value)
            elif key in ('--sysname-match', '-y'):
                sysnames.append(value)
            else:
                return 64, '', 'fake udevadm trigger: %s is not modelled\n' % arg
        if subsystems and 'block' not in subsystems:
            return 0, '', ''  # only block devices are in the fake tree
        if not self.host.exists('/run/udev/control'):
            return 0, '', ''  # the kernel sends the uevents; no udevd processes them
        names = sorted(os.listdir(self.host.path('/sys/class/block')))
        for name in names:
            if not sysnames or any(fnmatch.fnmatchcase(name, glob) for glob in sysnames):
                self.udev_event(name, action)
        return 0, '', ''

    # -- udevd's rule processing ---------------------------------------------------------------
    # The rules files in the order udevd reads them, and the subset of the rule language the collection and the
    # tests use, as systemd's udev(7) documents it (man/udev.xml: rules directories, lexical order and masking,
    # parent keys on one device, trailing whitespace, globs and '|') and src/udev/udev-rules.c implements it
    # (token_match_attr, token_match_string with fnmatch(3) flags 0). Both were read at systemd's current sources,
    # not at a RHEL tag; these parts of the language are documented the same for RHEL 7's v219 to v257:
    #
    # * files: every ``*.rules`` of the directories below, sorted by file name; a name in an earlier directory
    #   masks the same name in a later one;
    # * a rule is one line of comma-separated ``KEY op "value"`` (a line ending in ``\`` continues); its match
    #   keys are all tested before its assignments are made (the parser sorts match tokens first);
    # * ``==``/``!=`` values: ``|`` separates alternatives, each a glob (fnmatch(3) with no flags) or plain text;
    # * ACTION, SUBSYSTEM, KERNEL, DEVPATH: the event device; ``ENV{K}``: its properties (the uevent file, the udev
    #   database, and earlier ``ENV{K}=`` assignments of this event; a missing one is the empty string);
    # * ``ATTR{file}``: the event device's sysfs attribute, trailing whitespace dropped unless the match value ends
    #   in whitespace; an attribute that cannot be read matches neither ``==`` nor ``!=`` (token_match_attr);
    # * ``ATTRS{file}``, KERNELS, SUBSYSTEMS: the device or one of its parents, walking up; all of them must
    #   match on the same device; a parent is a directory with a ``uevent`` file (sd-device) or, in this fake's
    #   trees, a ``subsystem`` link;
    # * assignments: ``ATTR{file}="v"`` writes the event device's attribute, ``ENV{K}="v"`` sets a property; the
    #   others (RUN, SYMLINK, OPTIONS, GOTO, LABEL, ...) are not run. A rule with a match key not listed here is
    #   skipped and recorded in ``udev_unmodelled``.
    UDEV_RULES_DIRS = ('/etc/udev/rules.d', '/run/udev/rules.d', '/usr/local/lib/udev/rules.d', '/usr/lib/udev/rules.d',
                       '/lib/udev/rules.d')
    _UDEV_TOKEN = re.compile(r'\s*(?P<key>[A-Z_]+)(?:\{(?P<attr>[^}]*)\})?\s*(?P<op>==|!=|\+=|-=|:=|=)\s*"(?P<value>[^"]*)"\s*(?:,|$)')
    _UDEV_SELF_KEYS = ('ACTION', 'SUBSYSTEM', 'KERNEL', 'DEVPATH', 'ENV', 'ATTR')
    _UDEV_PARENT_KEYS = ('ATTRS', 'KERNELS', 'SUBSYSTEMS')

    def udev_rules(self):
        """[(file, line number, [(key, attr, op, value)])] in the order udevd runs them."""
        chosen = {}
        for directory in reversed(self.UDEV_RULES_DIRS):
            full = self.host.path(directory)
            for name in (sorted(os.listdir(full)) if os.path.isdir(full) else []):
                if name.endswith('.rules') and os.path.isfile(os.path.join(full, name)):
                    chosen[name] = directory + '/' + name
        rules = []
        for name in sorted(chosen):
            lines = self.host.read(chosen[name]).split('\n')
            number = 0
            while number < len(lines):
                start = number + 1
                line = lines[number]
                number += 1
                while line.endswith('\\') and number < len(lines):
                    line = line[:-1] + lines[number]
                    number += 1
                if not line.strip() or line.strip().startswith('#'):
                    continue
                tokens = [(m.group('key'), m.group('attr'), m.group('op'), m.group('value'))
                          for m in self._UDEV_TOKEN.finditer(line)]
                rules.append((chosen[name], start, tokens))
        return rules

    @staticmethod
    def _udev_value_matches(pattern, value):
        return any(fnmatch.fnmatchcase(value, alternative) for alternative in pattern.split('|'))

    def _udev_match(self, op, pattern, value):
        if value is None:
            return False
        if not pattern[-1:].isspace():
            value = value.rstrip()
        return self._udev_value_matches(pattern, value) == (op == '==')

    def _udev_attr(self, devdir, attr):
        full = self.host.path(devdir + '/' + attr)
        if not os.path.isfile(full):
            return None
        with open(full) as f:
            return f.read()

    def _udev_parents(self, devdir):
        """The event device, then each parent device up to /sys/devices (see above)."""
        current = devdir
        while current.startswith('/sys/devices/'):
            full = self.host.path(current)
            if current == devdir or os.path.isfile(full + '/uevent') or os.path.islink(full + '/subsystem'):
                yield current
            current = os.path.dirname(current)

    def _udev_properties(self, name, devdir, action):
        props = {'ACTION': action, 'SUBSYSTEM': 'block', 'DEVPATH': devdir[len('/sys'):]}
        for line in (self._udev_attr(devdir, 'uevent') or '').splitlines():
            key, _sep, value = line.partition('=')
            props[key] = '/dev/' + value if key == 'DEVNAME' else value
        majmin = (self._udev_attr(devdir, 'dev') or '').strip()
        if self.host.exists('/run/udev/data/b%s' % majmin):
            for line in self.host.read('/run/udev/data/b%s' % majmin).splitlines():
                if line.startswith('E:'):
                    key, _sep, value = line[2:].partition('=')
                    props[key] = value
        return props

    def udev_event(self, name, action='change'):
        """udevd processing one uevent of block device ``name``: the rules run and their assignments are made."""
        devdir = self.host._devdir(name)
        props = self._udev_properties(name, devdir, action)
        for path, number, tokens in self.udev_rules():
            matches = [t for t in tokens if t[2] in ('==', '!=')]
            if any(t[0] not in self._UDEV_SELF_KEYS + self._UDEV_PARENT_KEYS for t in matches):
                self.udev_unmodelled.append('%s:%d' % (path, number))
                continue
            own = {'ACTION': action, 'SUBSYSTEM': 'block', 'KERNEL': name, 'DEVPATH': props['DEVPATH']}
            ok = True
            for key, attr, op, value in matches:
                if key == 'ENV':
                    ok = ok and self._udev_match(op, value, props.get(attr, ''))
                elif key == 'ATTR':
                    ok = ok and self._udev_match(op, value, self._udev_attr(devdir, attr))
                elif key in own:
                    ok = ok and self._udev_match(op, value, own[key])
            parents = [t for t in matches if t[0] in self._UDEV_PARENT_KEYS]
            if ok and parents:
                ok = any(all(self._udev_match(op, value, self._udev_parent_value(parent, key, attr, devdir))
                             for key, attr, op, value in parents) for parent in self._udev_parents(devdir))
            if not ok:
                continue
            for key, attr, op, value in tokens:
                if op in ('=', ':=') and key == 'ATTR':
                    self.host.write(devdir + '/' + attr, value)
                elif op in ('=', ':=') and key == 'ENV':
                    props[attr] = value

    def _udev_parent_value(self, devdir, key, attr, event_devdir):
        if key == 'ATTRS':
            return self._udev_attr(devdir, attr)
        if key == 'KERNELS':
            return os.path.basename(devdir)
        if devdir == event_devdir:
            return 'block'
        link = self.host.path(devdir + '/subsystem')
        return os.path.basename(os.path.realpath(link)) if os.path.islink(link) else None

    def _tuned_adm(self, args):
        if args == ['--version']:
            # argparse's version action prints to stderr on Python 2 (tuned on RHEL 7), stdout on 3.
            text = 'tuned-adm %s\n' % self.tuned_version
            return (0, '', text) if self.tuned_python2 else (0, text, '')
        if args == ['verify']:
            return (self.verify_rc, TUNED_VERIFY_FAILED, '') if self.verify_rc else (0, TUNED_VERIFY_OK, '')
        if args[:1] == ['profile'] and len(args) > 1:
            for name in args[1:]:
                if not any(self.host.exists('%s/%s/tuned.conf' % (d, name)) for d in
                           ('/usr/lib/tuned', '/etc/tuned', '/usr/lib/tuned/profiles', '/etc/tuned/profiles')):
                    return 1, '', "Requested profile '%s' doesn't exist.\n" % name
            self.host.write(TUNED_ACTIVE_PROFILE, ' '.join(args[1:]) + '\n')
            self.host.write(TUNED_PROFILE_MODE, 'manual\n')
            if self.tuned_sets_enabled:
                target = self.host.thp_dir + '/enabled'
                offered = [w.strip('[]') for w in self.host.read(target).split()]
                self.host.write(target, render_choice(offered, self.tuned_sets_enabled))
            return 0, '', ''
        if args == ['off']:
            # tuned/daemon/controller.py disable(): stop the tuning, save no profile in manual mode
            # (set_profile(None, None, save_instantly=True)); the daemon keeps running.
            self.host.write(TUNED_ACTIVE_PROFILE, '')
            self.host.write(TUNED_PROFILE_MODE, 'manual\n')
            return 0, '', ''
        return 64, '', 'tuned-adm: unexpected arguments %r\n' % (args,)

    def _boot(self, tool, args):
        if self.grubby_version is None:
            return 127, '', '%s: not faked\n' % tool
        argv = [sys.executable, os.path.join(self.bin_dir, 'fake_boot_tools.py'), self.host.root, self.grubby_version,
                tool] + list(args)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        out, err = proc.communicate()
        return proc.returncode, out, err

    def _grubby(self, args):
        return self._boot('grubby', args)

    def _rpm(self, args):
        return self._boot('rpm', args)

    def _grub2_editenv(self, args):
        return self._boot('grub2-editenv', args)

    def _grub2_mkconfig(self, args):
        if args[:1] != ['-o'] or len(args) != 2:
            return 64, '', 'grub2-mkconfig: usage: grub2-mkconfig -o FILE\n'
        return self._mkconfig('grub2-mkconfig', args[1], dropins=False)

    def _update_grub(self, args):
        return self._mkconfig('update-grub', '/boot/grub/grub.cfg', dropins=True)

    def _mkconfig(self, tool, target, dropins):
        """grub.cfg from /etc/default/grub (and for update-grub the grub.d drop-ins) as /bin/sh sources
        it: for each kernel of ``menus[tool]`` a normal and a recovery entry, then a custom one."""
        linux, kernels = self.menus[tool]
        script = ('GRUB_CMDLINE_LINUX=; GRUB_CMDLINE_LINUX_DEFAULT=; . "$1"; '
                  'if [ "$2" = yes ]; then for f in "$3"/*.cfg; do [ -e "$f" ] && . "$f"; done; fi; '
                  'printf "%s\\n%s" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"')
        proc = subprocess.Popen(['/bin/sh', '-c', script, 'sh', self.host.path('/etc/default/grub'),
                                 'yes' if dropins else 'no', self.host.path('/etc/default/grub.d')],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        value, err = proc.communicate()
        if proc.returncode:
            return 1, '', '%s: /etc/default/grub: %s\n' % (tool, err.strip())
        cmdline, default = value.split('\n', 1)
        lines = ['set default=0', '### BEGIN /etc/grub.d/10_linux ###']
        for kernel in kernels:
            lines += ["menuentry 'Linux %s' {" % kernel,
                      '\t%s\t/vmlinuz-%s root=/dev/sda1 ro %s %s' % (linux, kernel, cmdline, default), '}',
                      "menuentry 'Linux %s (recovery mode)' {" % kernel,
                      '\t%s\t/vmlinuz-%s root=/dev/sda1 ro single %s' % (linux, kernel, cmdline), '}']
        lines += ['### END /etc/grub.d/10_linux ###', '### BEGIN /etc/grub.d/40_custom ###',
                  "menuentry 'custom' { %s /vmlinuz-custom root=/dev/sda1 }" % linux, '### END /etc/grub.d/40_custom ###']
        self.host.write(target, ''.join(line + '\n' for line in lines))
        return 0, '', ''


def nitro_tools(host, bin_dir=None):
    """The tools of nitro_host(): lvs and lvchange know its LV, udevadm and tuned-adm are installed."""
    return FakeTools(host, bin_dir, ['lvs', 'lvchange', 'udevadm', 'tuned-adm']).add_lv('vg_aem/lv_repo', 'dm-0')
