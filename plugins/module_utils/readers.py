# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The processes that read a tuned device, and refreshing the read-ahead of the files they hold open.

Why (kernel source, torvalds/linux):

- ``open(2)`` copies the device's read-ahead into the new ``struct file``:
  ``do_dentry_open`` (fs/open.c) calls ``file_ra_state_init`` (mm/readahead.c), which sets
  ``file->f_ra.ra_pages = inode_to_bdi(mapping->host)->ra_pages``; v3.10 to v6.18 alike.
- A page fault in a mapping reads around the fault with that copy: ``do_sync_mmap_readahead``
  (mm/filemap.c) uses ``vmf->vma->vm_file->f_ra``. A mapping holds its own reference to the
  ``struct file``, so closing the descriptor after ``mmap`` keeps the old copy alive.
- So ``read_ahead_kb`` (and ``blockdev --setra``, tuned, udev) changes only what files opened
  *later* get. ``posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL)`` sets ``file->f_ra.ra_pages``
  back to the device's current value (``generic_fadvise``, mm/fadvise.c, v4.19 to v6.18; the
  same lines sit in ``SYSCALL_DEFINE4(fadvise64_64)`` before v4.19, so RHEL 7's 3.10 and
  RHEL 8's 4.18 behave the same). It also clears ``FMODE_RANDOM`` (a ``POSIX_FADV_RANDOM``
  hint) on that open file: nothing else about the file changes.
- Any descriptor of the same open file will do. ``pidfd_getfd(2)`` (kernel/pid.c, Linux 5.6,
  syscall 438; ``pidfd_open(2)`` is 434, Linux 5.3; one number on every architecture but
  alpha since the 5.1 unified table) gives this process a duplicate of another process's
  descriptor (``fget_task``, the same ``struct file``). It requires
  ``ptrace_may_access(task, PTRACE_MODE_ATTACH_REALCREDS)``: root with CAP_SYS_PTRACE passes,
  Yama ``ptrace_scope=3`` refuses everyone (EPERM), an LSM (SELinux) may refuse (EACCES).
  RHEL 8's 4.18 and RHEL 7's 3.10 have neither call: ENOSYS, probed once a run
  (:func:`refresh_support`), and every stale reader then needs a restart.
- A mapping whose descriptor was closed cannot be reached: opening
  ``/proc/PID/map_files/...`` creates a *new* ``struct file``. Such a process must restart.

This file has three parts, each a set of plain functions over a root path (``/`` on a host,
a fake tree in the unit tests):

- :func:`scan`: one pass over ``/proc`` with a deadline, matching open descriptors (their
  device from ``fdinfo``'s ``mnt_id`` and the ``mountinfo``; ``stat`` only on the tuned
  devices) and mappings (the device field of ``/proc/PID/maps``) by device number, never by
  following a path into another filesystem;
- :func:`assess` (with :func:`settled_since`, the boot rule), :func:`plan_refresh`: which
  readers may have an old window and which of them this run refreshes or names as needing a
  restart, with the reason (:data:`WHY`);
- :func:`refresh`: ``pidfd_open`` + ``pidfd_getfd`` + ``posix_fadvise(NORMAL)`` + ``close``,
  through an injectable :class:`Syscalls`;
- the record of what was refreshed (:func:`record_path`, :func:`read_record`,
  :func:`write_record`), which makes a second run change nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import re
import stat
import threading
import time

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, files, runstate

PROC = '/proc'
# The record of the last refresh, in the collection's runtime-state directory (module_utils/runstate.py, checked
# before every use). Only record_path/read_record/write_record touch it. /run is a tmpfs: a reboot (which reopens
# every file) forgets it.
RECORD_NAME = 'readers.json'
RECORD_PATH = runstate.RUN_DIR + '/' + RECORD_NAME
RECORD_FORMAT = 1
RECORD_MAX_BYTES = 4 * 1024 * 1024
BOOT_ID = '/proc/sys/kernel/random/boot_id'
YAMA_PTRACE_SCOPE = '/proc/sys/kernel/yama/ptrace_scope'
# In the record's stale lists: fd -1 is a mapping without a descriptor, -2 a process whose /proc could not be read.
MAPPING_ONLY = -1
UNSCANNED = -2
SYS_PIDFD_OPEN = 434
SYS_PIDFD_GETFD = 438
POSIX_FADV_NORMAL = 0
# How many file names one reader lists in a result (the counts are always whole).
MAX_LISTED_FILES = 5
# The whole scan of /proc, in seconds: past it the processes not reached are named and the run goes on.
SCAN_DEADLINE = 20.0
# A record's ``kb`` for a device whose value changed outside a refresh (read_ahead_sweep): never valid.
CHANGED_KB = -1
# In the record's stale lists: a start time of -1 matches any start (a process the scan did not reach).
ANY_START = -1

_DELETED = ' (deleted)'


class ReadersError(Exception):
    pass


# -- the scan -------------------------------------------------------------------------------------
#
# Which device a descriptor is on is decided without following its link: ``readlink`` of
# /proc/PID/fd/N gives the path text (procfs prints it, no filesystem is asked), /proc/PID/fdinfo/N
# gives ``mnt_id`` (Linux 3.15, "proc: show mnt_id in /proc/pid/fdinfo"; ``ino`` from 5.14) and ``flags``, and the
# process's /proc/PID/mountinfo maps the mount id to ``major:minor``. Only a descriptor on one of
# the devices this run tunes (a local block device) is ``stat``ed. So an NFS, EFS or FUSE mount
# whose server is gone is never touched: a ``stat`` through its link would wait for that server.
# RHEL 7's 3.10 carries ``mnt_id`` (a CentOS 7 kernel's fdinfo shows it: checkpoint-restore/criu issue 502,
# 2018-06-07). Where fdinfo has no ``mnt_id`` (a kernel before 3.15 without the backport), the link's path is
# matched against the mount table (the longest mount point that holds it), still without a
# ``stat`` outside the tuned devices. The whole scan runs in a worker thread with a deadline: past
# it the run goes on and names the processes it did not reach (reading /proc/PID/maps waits for
# the process's mmap lock, which a fault on a hung mount can hold).

def devnum_text(dev):
    """``253:0`` for a device number as ``stat`` gives it."""
    return '%d:%d' % (os.major(dev), os.minor(dev))


def device_numbers(root, names):
    """({'major:minor': governing name}, {'major:minor': kernel name of that number}, [notes]) for ``names``
    and their partitions (a filesystem on a partition has the partition's number; the read-ahead is its
    disk's), and for mounts of them whose filesystem reports an anonymous device (btrfs: ``0:N``),
    matched through that number, each with a note that says so."""
    out, kernel = {}, {}
    for name in names:
        for each in [name] + blockdev.partitions(root, name):
            number = blockdev.majmin(root, each)
            if number:
                out[number.strip()] = name
                kernel[number.strip()] = each
    notes = []
    for mount in blockdev.mounts(root):
        if not mount['majmin'].startswith('0:') or not mount['source'].startswith('/dev/'):
            continue
        name = blockdev.mount_device(root, mount)
        number = (blockdev.majmin(root, name) or '').strip() if name else ''
        if number in out and mount['majmin'] not in out:
            out[mount['majmin']] = out[number]
            notes.append('%s (%s on %s) reports the anonymous device %s: its readers are matched through that mount; '
                         'files in other subvolumes are found by their descriptors only, and %s reads ahead by its own '
                         'setting (/sys/class/bdi), not by %s\'s'
                         % (mount['mountpoint'], mount['fstype'], out[number], mount['majmin'], mount['fstype'],
                            out[number]))
    return out, kernel, notes


def disk_sequence(root, name):
    """The device's ``diskseq`` (Linux 5.15 and later: a number never reused on one boot), or None."""
    try:
        return int(blockdev.read_attr_checked(os.path.join(blockdev.device_dir(root, name), 'diskseq'))[0] or '')
    except (ValueError, TypeError, IOError, OSError, blockdev.BlockDeviceError):
        return None


def _read(path):
    """Text of a /proc file; None when the process went away; IOError/OSError otherwise."""
    try:
        data = files.read_bytes(path)
    except (IOError, OSError) as e:
        if e.errno in (errno.ENOENT, errno.ESRCH):
            return None
        raise
    return None if data is None else files.to_native_text(data)


def boot_time(proc_root):
    """``btime`` of /proc/stat, in seconds since the epoch (0 when unknown)."""
    try:
        text = _read(os.path.join(proc_root, 'stat')) or ''
    except (IOError, OSError):
        text = ''
    for line in text.splitlines():
        if line.startswith('btime '):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return 0
    return 0


def clock_ticks():
    try:
        return int(os.sysconf('SC_CLK_TCK')) or 100
    except (AttributeError, ValueError, OSError):
        return 100


def parse_stat(text):
    """(comm, start in clock ticks since boot) from /proc/PID/stat; ValueError when malformed.

    The command is between the first ``(`` and the *last* ``)`` (it may hold both, and
    spaces); ``starttime`` is field 22 (proc(5)), the 20th after the ``)``.
    """
    left, right = text.find('('), text.rfind(')')
    if left < 0 or right < left:
        raise ValueError('no command in stat')
    fields = text[right + 1:].split()
    return text[left + 1:right], int(fields[19])


def parse_unit(text):
    """The systemd unit (``aem.service``, ``session-3.scope``) of a process from /proc/PID/cgroup, or None.

    cgroup v2 has one line ``0::/system.slice/aem.service``; v1 (RHEL 7, 8) a ``name=systemd``
    line. The unit is the last ``.service`` or ``.scope`` component of that path (a service may
    have sub-cgroups below it).
    """
    path = None
    for line in (text or '').splitlines():
        parts = line.split(':', 2)
        if len(parts) != 3:
            continue
        if parts[1] == 'name=systemd' or (parts[0] == '0' and parts[1] == '' and path is None):
            path = parts[2]
    if not path:
        return None
    unit = None
    for part in path.split('/'):
        if part.endswith('.service') or part.endswith('.scope'):
            unit = part
    return unit


def parse_fdinfo(text):
    """{'flags': int or None, 'mnt_id': int or None, 'ino': int or None} from /proc/PID/fdinfo/N.

    ``flags`` is octal (``0100002``); ``mnt_id`` is there from Linux 3.15, ``ino`` from 5.14.
    """
    out = {'flags': None, 'mnt_id': None, 'ino': None}
    for line in (text or '').splitlines()[:16]:
        key, _sep, value = line.partition(':')
        value = value.strip()
        try:
            if key == 'flags':
                out['flags'] = int(value, 8)
            elif key in ('mnt_id', 'ino'):
                out[key] = int(value)
        except ValueError:
            pass
    return out


def parse_mountinfo(text):
    """{mount id: {'dev': 'major:minor', 'point': mount point}} from a /proc/PID/mountinfo (blockdev's parser)."""
    return dict((mount_id, {'dev': e['majmin'], 'point': e['mountpoint']})
                for mount_id, e in blockdev.parse_mountinfo(text) if re.match(r'^[0-9]+:[0-9]+\Z', e['majmin']))


def _mount_of_path(mounts, path):
    """The mount whose mount point is the longest one holding ``path`` (the fallback without mnt_id)."""
    best = None
    for mount in mounts.values():
        if blockdev.within(path, mount['point']) and (best is None or len(mount['point']) >= len(best['point'])):
            best = mount
    return best


_MAPS_LINE = re.compile(r'^[0-9a-f]+-[0-9a-f]+ (\S+) [0-9a-f]+ ([0-9a-f]+):([0-9a-f]+) ([0-9]+)(?: +(.*))?$')


def parse_maps(text, numbers):
    """({(dev 'major:minor', inode): path} of the data mappings in /proc/PID/maps on ``numbers``,
    set of the (dev, inode) that the process maps as program text).

    A line is ``start-end perms offset major:minor inode   path``, with major and minor in hex;
    the path runs to the end of the line and may hold spaces, and ends in `` (deleted)`` when
    the file was removed (the suffix is dropped here). Inode 0 is an anonymous mapping.

    What is a data mapping (the rule, documented in docs/design.md): a shared, read-only mapping
    (``r--s``), as Oak maps its tar files and Lucene its index, of a file the process does not also
    map executable. Program text and the loader's other segments of the same file, private
    mappings (``locale-archive``, the loader's read-only segments) and writable shared mappings (a
    journal the process writes) are not readers: no page fault there reads a record of AEM's.
    """
    data, program = {}, set()
    for line in text.splitlines():
        m = _MAPS_LINE.match(line)
        if not m:
            continue
        ino = int(m.group(4))
        if not ino:
            continue
        dev = '%d:%d' % (int(m.group(2), 16), int(m.group(3), 16))
        if dev not in numbers:
            continue
        perms = m.group(1)
        if 'x' in perms:
            program.add((dev, ino))
            continue
        if perms[3:4] != 's' or 'w' in perms:
            continue
        path = m.group(5) or ''
        if path.endswith(_DELETED):
            path = path[:-len(_DELETED)]
        data.setdefault((dev, ino), path)
    for key in program:
        data.pop(key, None)
    return data, program


def _maps_hint(numbers):
    """The ``fd:00`` forms of ``numbers`` as maps prints them (%02x:%02x), to skip files that hold none."""
    out = []
    for number in numbers:
        major, minor = number.split(':')
        out.append('%02x:%02x ' % (int(major), int(minor)))
    return out


class ProcFs(object):
    """The /proc reads of a scan, one place to fake them. ``stat`` goes through a descriptor link into
    the file's own filesystem: the scan calls it only for descriptors on the devices it looks for."""

    def __init__(self, root):
        self.proc = files.root_path(root, PROC)

    def listdir(self, path):
        return os.listdir(path)

    def readlink(self, path):
        return os.readlink(path)

    def read(self, path):
        return _read(path)

    def stat(self, path):
        return os.stat(path)

    def owner(self, path):
        return os.lstat(path).st_uid


class _Scan(object):
    """One pass over /proc, in a worker thread that the caller can stop waiting for."""

    def __init__(self, procfs, numbers, min_bytes):
        self.procfs = procfs
        self.numbers = numbers
        self.min_bytes = min_bytes
        self.hints = _maps_hint(numbers)
        self.boot = boot_time(procfs.proc)
        self.ticks = clock_ticks()
        self.our_ns = _mount_ns(procfs, os.path.join(procfs.proc, 'self'))
        self.namespaces = {}
        self.lock = threading.Lock()
        self.abandoned = False
        self.current = None
        self.done = set()
        self.readers, self.unreadable, self.exited = [], [], 0
        self.cost = {'processes': 0, 'descriptors': 0, 'stats': 0, 'by_path': 0}

    def run(self, pids):
        for pid in pids:
            with self.lock:
                if self.abandoned:
                    return
                self.current = pid
            try:
                entry = self.one(pid)
            except ValueError:
                entry = 'gone'  # a stat line cut short: the process is being reaped
            except (IOError, OSError) as e:
                entry = _unreadable(self.procfs, pid, e)
            with self.lock:
                if self.abandoned:
                    return
                self.cost['processes'] += 1
                if entry == 'gone':
                    self.exited += 1
                elif entry is not None and 'reason' in entry:
                    self.unreadable.append(entry)
                elif entry is not None:
                    self.readers.append(entry)
                self.done.add(pid)
                self.current = None

    def mounts(self, ns, base):
        """The mount table of the process's mount namespace, read once per namespace; IOError/OSError."""
        if ns is not None and ns in self.namespaces:
            return self.namespaces[ns]
        text = self.procfs.read(os.path.join(base, 'mountinfo'))
        if text is None:
            return None
        table = parse_mountinfo(text)
        if ns is not None:
            self.namespaces[ns] = table
        return table

    def files(self, base, mounts):
        """{(dev, ino): {fd: path}} of the open regular files on the devices, opened for reading and larger
        than ``min_bytes``; None when the process is gone."""
        procfs = self.procfs
        fd_dir = os.path.join(base, 'fd')
        try:
            names = procfs.listdir(fd_dir)
        except (IOError, OSError) as e:
            if e.errno in (errno.ENOENT, errno.ESRCH):
                return None
            raise
        out = {}
        for name in names:
            if not name.isdigit():
                continue
            self.cost['descriptors'] += 1
            link = os.path.join(fd_dir, name)
            try:
                target = procfs.readlink(link)  # procfs prints the path: no filesystem is asked
                if not target.startswith('/'):
                    continue  # socket:[...], pipe:[...], anon_inode:...: never a file on a disk
                info = parse_fdinfo(procfs.read(os.path.join(base, 'fdinfo', name)))
            except (IOError, OSError):
                continue  # closed since the listing, or unreadable: one descriptor, not the process
            if info['flags'] is not None and info['flags'] & 3 == os.O_WRONLY:
                continue  # opened write-only: it never reads
            if info['mnt_id'] is not None:
                mount = mounts.get(info['mnt_id'])
            else:
                self.cost['by_path'] += 1
                mount = _mount_of_path(mounts, target)
            if mount is None or mount['dev'] not in self.numbers:
                continue  # another filesystem, or a mount gone since the table was read: never stat()ed
            try:
                self.cost['stats'] += 1
                st = procfs.stat(link)  # on a tuned device: a local block device
            except (IOError, OSError):
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size <= self.min_bytes:
                continue  # a directory, or a file the window reads whole at any setting
            if target.endswith(_DELETED):
                target = target[:-len(_DELETED)]
            out.setdefault((mount['dev'], st.st_ino), {})[int(name)] = target
        return out

    def one(self, pid):
        """One process's reader entry, None when it reads none of the devices, 'gone' when it exited."""
        procfs = self.procfs
        base = os.path.join(procfs.proc, str(pid))
        text = procfs.read(os.path.join(base, 'stat'))
        if text is None:
            return 'gone'
        comm, start_ticks = parse_stat(text)
        ns = _mount_ns(procfs, base)
        mounts = self.mounts(ns, base)
        if mounts is None:
            return 'gone'
        opened = self.files(base, mounts)
        if opened is None:
            return 'gone'
        maps_text = procfs.read(os.path.join(base, 'maps'))
        if maps_text is None:
            return 'gone'
        mapped, program = parse_maps(maps_text, self.numbers) if any(h in maps_text for h in self.hints) else ({}, ())
        for key in program:
            opened.pop(key, None)  # its own program text, open as a file too (a JVM's lib/modules)
        if not opened and not mapped:
            return None
        try:
            unit = parse_unit(procfs.read(os.path.join(base, 'cgroup')))
        except (IOError, OSError):
            unit = None
        try:
            uid = procfs.owner(base)
        except (IOError, OSError):
            uid = None
        entry = {
            'pid': pid, 'comm': comm, 'uid': uid, 'unit': unit, 'start_ticks': start_ticks,
            'start': round(self.boot + start_ticks / float(self.ticks), 2),
            'other_namespace': ns != self.our_ns,
            'files': [],
        }
        for key in sorted(set(opened) | set(mapped)):
            fds = opened.get(key, {})
            path = mapped.get(key) or (sorted(fds.values())[0] if fds else '')
            entry['files'].append({'dev': key[0], 'ino': key[1], 'path': path, 'fds': sorted(fds),
                                   'paths': dict((fd, fds[fd]) for fd in fds), 'mapped': key in mapped})
        return entry


def _mount_ns(procfs, base):
    try:
        return procfs.readlink(os.path.join(base, 'ns', 'mnt'))
    except (IOError, OSError):
        return None


def scan(root, numbers, deadline=SCAN_DEADLINE, min_bytes=0):
    """The processes that hold files on the devices ``numbers`` ({'major:minor': name}), in one pass.

    Returns {'readers': [entry], 'unreadable': [{pid, comm, start_ticks, reason}], 'unscanned': [{pid,
    reason}], 'exited': n, 'time': when the scan began, 'cost': {processes, descriptors, stats, by_path,
    seconds, deadline_s}}. An entry: pid, comm, uid, unit, start_ticks, start (epoch seconds), and
    ``files``: one per (dev, ino) with its descriptors (``fds``, their link text in ``paths``) and
    whether it is ``mapped``. A process that exits during the scan is counted, not an error; one whose
    /proc entries cannot be read (hidepid, an LSM) is listed with the reason; past ``deadline`` seconds
    the processes not reached are listed in ``unscanned`` and the run goes on. Files no larger than
    ``min_bytes`` are left out (the window reads them whole at any value).
    """
    procfs = ProcFs(root) if isinstance(root, str) else root
    began = time.time()
    try:
        pids = sorted(int(n) for n in procfs.listdir(procfs.proc) if n.isdigit())
    except (IOError, OSError) as e:
        raise ReadersError('cannot list %s: %s' % (procfs.proc, files.describe_os_error(e)))
    state = _Scan(procfs, numbers, min_bytes)
    worker = threading.Thread(target=state.run, args=(pids,), name='aemops-readers-scan')
    worker.daemon = True  # a read that never returns must not keep the module from exiting
    worker.start()
    worker.join(deadline)
    with state.lock:
        state.abandoned = worker.is_alive()
        unscanned = []
        if state.abandoned:
            for pid in pids:
                if pid == state.current:
                    unscanned.append({'pid': pid, 'reason': 'its /proc entries did not answer within the scan\'s '
                                                            'deadline (%g s) (a fault on a hung mount can hold a '
                                                            'process\'s memory map)' % deadline})
                elif pid not in state.done:
                    unscanned.append({'pid': pid, 'reason': 'not reached before the scan\'s deadline (%g s)'
                                                            % deadline})
        cost = dict(state.cost, seconds=round(time.time() - began, 3), deadline_s=deadline)
        return {'readers': list(state.readers), 'unreadable': list(state.unreadable), 'unscanned': unscanned,
                'exited': state.exited, 'time': began, 'boot': state.boot, 'cost': cost}


def _unreadable(procfs, pid, error):
    base = os.path.join(procfs.proc, str(pid))
    comm, start_ticks = None, None
    try:
        comm, start_ticks = parse_stat(procfs.read(os.path.join(base, 'stat')) or '')
    except (IOError, OSError, ValueError, IndexError):
        pass
    return {'pid': pid, 'comm': comm, 'start_ticks': start_ticks,
            'reason': 'cannot read /proc/%d: %s' % (pid, files.describe_os_error(error))}


# -- which readers are stale ----------------------------------------------------------------------

def _reader_keys(entry):
    """(key, kind) of each possibly-stale thing a reader holds: (pid, start, fd, ino) per descriptor,
    (pid, start, MAPPING_ONLY, ino) per file mapped with no descriptor."""
    out = []
    for f in entry['files']:
        if f['fds']:
            out.extend(((entry['pid'], entry['start_ticks'], fd, f['ino']), f) for fd in f['fds'])
        else:
            out.append(((entry['pid'], entry['start_ticks'], MAPPING_ONLY, f['ino']), f))
    return out


def valid_devices(record, devices, boot_id, changed):
    """The devices whose recorded state still holds: recorded on this boot at the value sysfs reads now, for
    the same device (its ``diskseq``, Linux 5.15 and later, tells a loop or dm device attached again under the
    same number), and not changed by this run. ``devices``: {'major:minor': {'name', 'kb', 'seq'}};
    ``changed``: names."""
    out = set()
    if not record or record.get('boot_id') != boot_id:
        return out
    for number, dev in devices.items():
        rec = record['devices'].get(number)
        if (rec and rec['kb'] == dev['kb'] and rec['name'] == dev['name'] and rec.get('seq') == dev.get('seq')
                and dev['name'] not in changed):
            out.add(number)
    return out


def settled_since(root, devices, record, boot_id, changed, persisted, config_paths, booted):
    """The boot rule: {'major:minor': seconds after boot} for the devices that have read their current
    value since udev initialised them on this boot, so that every file a process opened after that
    time got it.

    It holds for a device that no record of this boot names (no run of the collection changed it on
    this boot: a run records every device it tunes), that this run does not change, whose value in
    sysfs is the one the collection persists for it (``persisted``: {name: KiB of its udev rule}), and
    whose udev database has an initialisation time. Without any record of this boot, the persisted
    configuration (``config_paths``: the rules file) must also be older than the boot, so that the
    boot applied it: a record lost or deleted after a run changed the value is then never taken for a
    boot. ``booted``: the boot's time (epoch seconds, /proc/stat's btime). Limits: a value changed by
    hand and set back on this boot is not seen; a process that started before the device was
    initialised counts as stale.
    """
    if record is not None and record.get('boot_id') == boot_id:
        named = set(record['devices'])
    else:
        named = set()
        for path in config_paths:
            try:
                mtime = os.lstat(files.root_path(root, path)).st_mtime
            except (IOError, OSError):
                return {}
            if not booted or mtime >= booted:
                return {}
    out = {}
    for number, dev in devices.items():
        if number in named or dev['name'] in changed or (persisted or {}).get(dev['name']) != dev['kb']:
            continue
        since = blockdev.udev_initialized(root, dev.get('kernel') or dev['name'])
        if since is not None:
            out[number] = since
    return out


def assess(found, devices, record, boot_id, changed=(), settled=None):
    """Mark what may hold an old read-ahead window; returns the readers with ``stale`` lists.

    The rule. A device's record (written by the last real run, on this boot) says: at time
    ``since`` its read-ahead was ``kb``, and these (pid, start time, fd, inode) were still
    stale, every other matching file in every process was fresh (refreshed then, or opened at
    ``kb``). When sysfs still reads ``kb`` and this run does not change it, a file is stale only
    when the record lists it: anything opened since, in any process, got ``kb`` at ``open``.
    Without such a record, the boot rule (:func:`settled_since`) makes fresh the files of the
    processes that started after the device was initialised with its persisted value; otherwise
    (first run, a value changed by hand or by this run) every file open on the device may be stale.
    The start time in the key keeps a reused pid from inheriting a record. Limits: a value changed by
    hand and changed back between two runs is not seen; a file both mapped through a closed
    descriptor and open again through a new one looks refreshable (the new descriptor is refreshed,
    the old mapping is not).
    """
    valid = valid_devices(record, devices, boot_id, set(changed))
    settled = settled or {}
    ticks = float(clock_ticks())
    listed = set()
    unscanned = set()
    for number in valid:
        for item in record['devices'][number]['stale']:
            key = tuple(item)
            if key[2] == UNSCANNED:
                unscanned.add((number, key[0], key[1]))
            else:
                listed.add((number,) + key)
    out = []
    for entry in found['readers']:
        stale_fds, stale_maps, fresh = [], [], 0
        for key, f in _reader_keys(entry):
            number = f['dev']
            if number not in devices:
                continue
            if number in valid:
                is_stale = ((number,) + key in listed or (number, key[0], key[1]) in unscanned
                            or (number, key[0], ANY_START) in unscanned)
            else:
                is_stale = number not in settled or entry['start_ticks'] / ticks <= settled[number]
            if not is_stale:
                fresh += 1
            elif key[2] == MAPPING_ONLY:
                stale_maps.append({'dev': number, 'ino': key[3], 'path': f['path']})
            else:
                stale_fds.append({'dev': number, 'ino': key[3], 'fd': key[2], 'path': f['paths'].get(key[2], f['path'])})
        out.append(dict(entry, stale_fds=stale_fds, stale_maps=stale_maps, fresh=fresh))
    return out


# -- what this run refreshes ----------------------------------------------------------------------

def _under(path, prefixes):
    return any(path == p or path.startswith(p.rstrip('/') + '/') for p in prefixes)


def in_scope(entry, item, scope):
    """Whether a stale file is one this run was asked about. ``scope``: {'major:minor': None (the
    whole device, a device target) or [path prefixes] (path targets, resolved as the kernel reports
    them: :func:`real_scope`)}. Paths are compared as the process sees them; for a process in another
    mount namespace (a container) the device decides."""
    prefixes = scope.get(item['dev'])
    if prefixes is None:
        return True
    if entry.get('other_namespace'):
        return True
    return _under(item['path'], prefixes)


def real_scope(root, scope_by_name):
    """(scope with every path prefix resolved through symbolic links, as the kernel reports an open
    file's path, {given path: resolved path} for those that were links)."""
    out, links = {}, {}
    for name, prefixes in scope_by_name.items():
        if prefixes is None:
            out[name] = None
            continue
        out[name] = []
        for prefix in prefixes:
            try:
                real = blockdev.real_target_path(root, prefix)
            except blockdev.BlockDeviceError:
                real = prefix
            if real != prefix.rstrip('/') and real != prefix:
                links[prefix] = real
            out[name].append(real)
    return out, links


def matches_only(entry, only):
    """Whether refresh_only names the process: its command, its unit, or its unit without ``.service``."""
    if not only:
        return True
    unit = entry.get('unit') or ''
    names = set([entry.get('comm') or '', unit])
    if unit.endswith('.service'):
        names.add(unit[:-len('.service')])
    return any(name in names for name in only)


def plan_refresh(assessed, scope, only=(), enabled=True, cannot=None):
    """{'refresh': [(entry, [stale fd items])], 'restart': [(entry, [items], why)]}: the stale readers in
    scope. What cannot be refreshed in place needs a restart, ``why`` says why (:data:`WHY`): a mapping
    without a descriptor; ``cannot`` (the kernel has no pidfd_getfd: :func:`refresh_support`);
    refreshing off; a process that refresh_only does not name."""
    out = {'refresh': [], 'restart': []}
    for entry in assessed:
        fds = [i for i in entry['stale_fds'] if in_scope(entry, i, scope)]
        maps = [i for i in entry['stale_maps'] if in_scope(entry, i, scope)]
        if maps:
            out['restart'].append((entry, maps, 'mapping_without_fd'))
        if not fds:
            continue
        if cannot:
            out['restart'].append((entry, fds, cannot))
        elif not enabled:
            out['restart'].append((entry, fds, 'refresh_off'))
        elif not matches_only(entry, only):
            out['restart'].append((entry, fds, 'not_named'))
        else:
            out['refresh'].append((entry, fds))
    return out


# -- refreshing -----------------------------------------------------------------------------------

class Syscalls(object):
    """pidfd_open, pidfd_getfd and posix_fadvise through libc (Python 2.7 has no os.posix_fadvise and
    no Python has os.pidfd_getfd); each raises OSError with the errno, as os functions do."""

    def __init__(self):
        self._libc = None
        self.problem = None
        try:
            import ctypes
            self._ctypes = ctypes
            self._libc = ctypes.CDLL(None, use_errno=True)
        except (ImportError, OSError) as e:
            self.problem = 'ctypes cannot load libc (%s)' % e

    def _check(self, result):
        if result < 0:
            code = self._ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return result

    def _syscall(self, number, *args):
        if self._libc is None:
            raise OSError(errno.ENOSYS, self.problem)
        c = self._ctypes
        return self._check(self._libc.syscall(c.c_long(number), *[c.c_int(a) for a in args]))

    def pidfd_open(self, pid):
        return self._syscall(SYS_PIDFD_OPEN, pid, 0)

    def pidfd_getfd(self, pidfd, fd):
        return self._syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)

    def fadvise_normal(self, fd):
        native = getattr(os, 'posix_fadvise', None)  # Python 3.3 and later
        if native is not None:
            native(fd, 0, 0, POSIX_FADV_NORMAL)
            return
        c = self._ctypes
        func = getattr(self._libc, 'posix_fadvise64', None) or self._libc.posix_fadvise
        func.argtypes = [c.c_int, c.c_int64, c.c_int64, c.c_int]
        rc = func(fd, 0, 0, POSIX_FADV_NORMAL)  # returns the error number, does not set errno
        if rc:
            raise OSError(rc, os.strerror(rc))

    def fstat(self, fd):
        return os.fstat(fd)

    def close(self, fd):
        os.close(fd)


def _yama_scope(root):
    try:
        return int((_read(files.root_path(root, YAMA_PTRACE_SCOPE)) or '').strip())
    except (IOError, OSError, ValueError):
        return None


# Why a reader needs a restart: each reason once, as the reports and the misses say it (%(count)d: its files).
WHY = {
    'mapping_without_fd': 'maps %(count)d file(s) whose descriptor it closed (as Lucene\'s MMapDirectory does): no '
                          'descriptor to refresh',
    'no_pidfd_getfd': 'this kernel has no pidfd_getfd(2) (Linux 5.6 and later; RHEL 7 and RHEL 8 kernels lack it), so '
                      'its %(count)d open file(s) cannot be refreshed in place',
    'yama': 'Yama ptrace_scope is 3, which forbids taking another process\'s descriptors (pidfd_getfd needs ptrace '
            'attach rights)',
    'eperm': 'pidfd_getfd was refused (EPERM): it needs ptrace attach rights over the process (root with '
             'CAP_SYS_PTRACE; Yama ptrace_scope below 3)',
    'lsm': 'pidfd_getfd was refused by a security module (EACCES; SELinux denies ptrace or fd use, see the audit log)',
    'refresh_off': 'refresh_readers=false: its open files were not refreshed',
    'not_named': 'refresh_only does not name it: its open files were not refreshed',
    'failed': 'its open files could not be refreshed',
}


def refusal(root, error):
    """(why, one line) for why a process's descriptors cannot be taken or refreshed."""
    code = getattr(error, 'errno', None)
    if code == errno.ENOSYS:
        why = 'no_pidfd_getfd'
    elif code == errno.EPERM:
        why = 'yama' if _yama_scope(root) == 3 else 'eperm'
    elif code == errno.EACCES:
        why = 'lsm'
    else:
        return 'failed', '%s (%s)' % (WHY['failed'], files.describe_os_error(error))
    return why, WHY[why]


def refresh_support(syscalls=None):
    """None when this kernel can take another process's descriptor, else 'no_pidfd_getfd'. Probed once a run,
    with arguments that can only fail (pid 0, descriptor -1): ENOSYS says the call is missing (RHEL 7 and 8,
    or a seccomp filter that refuses it); EINVAL or EBADF say it is there."""
    syscalls = syscalls or Syscalls()
    for call, args in (('pidfd_open', (0,)), ('pidfd_getfd', (-1, 0))):
        try:
            syscalls.close(getattr(syscalls, call)(*args))
        except OSError as e:
            if e.errno == errno.ENOSYS:
                return 'no_pidfd_getfd'
    return None


def _refresh_process(root, entry, items, syscalls):
    """(refreshed items, vanished items, (why, reason) or None): refresh one process's stale descriptors."""
    try:
        pidfd = syscalls.pidfd_open(entry['pid'])
    except OSError as e:
        if e.errno == errno.ESRCH:
            return [], list(items), None
        return [], [], refusal(root, e)
    refreshed, vanished = [], []
    try:
        # The pidfd pins this process: if its start time still matches, the pid was not reused.
        try:
            text = _read(os.path.join(files.root_path(root, PROC), str(entry['pid']), 'stat'))
            same = text is not None and parse_stat(text)[1] == entry['start_ticks']
        except (IOError, OSError, ValueError, IndexError):
            same = False
        if not same:
            return [], list(items), None
        for item in items:
            try:
                fd = syscalls.pidfd_getfd(pidfd, item['fd'])
            except OSError as e:
                if e.errno in (errno.EBADF, errno.ESRCH):
                    vanished.append(item)  # closed since the scan, or the process exited
                    continue
                return refreshed, vanished, refusal(root, e)
            try:
                st = syscalls.fstat(fd)
                if devnum_text(st.st_dev) != item['dev'] or st.st_ino != item['ino']:
                    vanished.append(item)  # the number now names another file: not ours to touch
                    continue
                syscalls.fadvise_normal(fd)
                refreshed.append(item)
            except OSError as e:
                failure = '%s (posix_fadvise: %s)' % (WHY['failed'], files.describe_os_error(e))
                return refreshed, vanished, ('failed', failure)
            finally:
                syscalls.close(fd)
    finally:
        syscalls.close(pidfd)
    return refreshed, vanished, None


def refresh(root, planned, syscalls=None):
    """Refresh each planned process: [{entry, refreshed, vanished, failed, why, reason}].

    After an ENOSYS (the kernel has no pidfd) the rest are not tried: each gets the same reason.
    """
    syscalls = syscalls or Syscalls()
    out = []
    no_kernel_support = None
    for entry, items in planned:
        if no_kernel_support:
            out.append({'entry': entry, 'refreshed': [], 'vanished': [], 'failed': items,
                        'why': no_kernel_support[0], 'reason': no_kernel_support[1]})
            continue
        refreshed, vanished, refused = _refresh_process(root, entry, items, syscalls)
        failed = [i for i in items if i not in refreshed and i not in vanished] if refused else []
        if refused and refused[0] == 'no_pidfd_getfd':
            no_kernel_support = refused
        out.append({'entry': entry, 'refreshed': refreshed, 'vanished': vanished, 'failed': failed,
                    'why': refused[0] if refused else None, 'reason': refused[1] if refused else None})
    return out


# -- the record -----------------------------------------------------------------------------------

def record_path(root):
    return files.root_path(root, RECORD_PATH)


def read_boot_id(root):
    try:
        return (_read(files.root_path(root, BOOT_ID)) or '').strip()
    except (IOError, OSError):
        return ''


def _valid_record(data):
    """The record if it has the expected shape, else None. Never trusts what it does not check."""
    int_types = (int, type(2 ** 64))
    str_types = (str, type(u''))
    if not isinstance(data, dict) or data.get('format') != RECORD_FORMAT:
        return None
    if not isinstance(data.get('boot_id'), str_types) or not isinstance(data.get('devices'), dict):
        return None
    devices = {}
    for number, rec in data['devices'].items():
        if not isinstance(number, str_types) or not re.match(r'^[0-9]+:[0-9]+\Z', number):
            return None
        if not isinstance(rec, dict) or not isinstance(rec.get('name'), str_types):
            return None
        if not isinstance(rec.get('kb'), int_types) or isinstance(rec.get('kb'), bool):
            return None
        if not isinstance(rec.get('since'), (float,) + int_types) or not isinstance(rec.get('stale'), list):
            return None
        stale = []
        for item in rec['stale']:
            if (not isinstance(item, list) or len(item) != 4
                    or not all(isinstance(v, int_types) and not isinstance(v, bool) for v in item)):
                return None
            stale.append(item)
        seq = rec.get('seq')
        if seq is not None and (not isinstance(seq, int_types) or isinstance(seq, bool)):
            return None
        devices[str(number)] = {'name': str(rec['name']), 'kb': rec['kb'], 'seq': seq, 'since': rec['since'],
                                'stale': stale}
    return {'format': RECORD_FORMAT, 'boot_id': str(data['boot_id']), 'devices': devices}


def read_record(root):
    """(record or None, problem or None). A record that is missing is (None, None); one that is not
    a regular file of this run's user with one link, in a checked directory, too big, or not the
    expected JSON is reported and ignored, never obeyed (every reader is then treated as possibly
    stale). Read through runstate, the one reader of the collection's runtime state."""
    try:
        runstate.run_dir(root, create=False)
    except (IOError, OSError) as e:
        if getattr(e, 'errno', None) == errno.ENOENT:
            return None, None
        return None, '%s cannot be read (%s); ignored' % (RECORD_PATH, files.describe_os_error(e))
    except runstate.FileError as e:
        return None, '%s; ignored' % e
    data, damage = runstate.read_json(record_path(root), RECORD_PATH, dict, max_bytes=RECORD_MAX_BYTES, owned=True)
    if damage:
        return None, '%s; ignored' % damage
    if data is None:
        return None, None
    record = _valid_record(data)
    if record is None:
        return None, '%s does not have the expected content; ignored' % RECORD_PATH
    return record, None


def write_record(root, record, module=None):  # pylint: disable=unused-argument
    """Replace the record atomically (0600, in the checked 0700 runtime-state directory)."""
    runstate.write_state(root, RECORD_NAME, json.dumps(record, sort_keys=True) + '\n')


def new_record(old, devices, valid, boot_id, now, still_stale, unreadable):
    """The record after this run. ``still_stale``: {number: set of (pid, start, fd, ino)}.

    A device keeps its ``since`` while its record stayed valid; otherwise ``since`` is now.
    Processes whose /proc could not be read, or that the scan did not reach (``start_ticks`` unknown:
    any start), are listed as UNSCANNED on every device.
    """
    out = {'format': RECORD_FORMAT, 'boot_id': boot_id or '', 'devices': {}}
    if old and old.get('boot_id') == boot_id:
        for number, rec in old['devices'].items():
            if number not in devices:
                out['devices'][number] = rec  # another run's device: left as it was
    extra = [[u['pid'], ANY_START if u.get('start_ticks') is None else u['start_ticks'], UNSCANNED, 0]
             for u in unreadable]
    for number, dev in sorted(devices.items()):
        since = old['devices'][number]['since'] if number in valid else now
        stale = sorted(list(k) for k in still_stale.get(number, ()))
        out['devices'][number] = {'name': dev['name'], 'kb': dev['kb'], 'seq': dev.get('seq'), 'since': since,
                                  'stale': stale + [e for e in extra if e not in stale]}
    return out


def mark_changed(root, names_by_number, now=None):
    """Note in the record that the read-ahead of these devices ({'major:minor': name}) changed outside a
    refresh (read_ahead_sweep sets candidates on the live device): a file opened meanwhile may hold any
    window, so every open file there counts as stale until a run refreshes it. Raises IOError/OSError
    or runstate.FileError when the record cannot be written."""
    record, _problem = read_record(root)
    boot_id = read_boot_id(root)
    if not record or record.get('boot_id') != boot_id:
        record = {'format': RECORD_FORMAT, 'boot_id': boot_id, 'devices': {}}
    for number, name in sorted(names_by_number.items()):
        record['devices'][number] = {'name': name, 'kb': CHANGED_KB, 'seq': None,
                                     'since': now if now is not None else time.time(), 'stale': []}
    write_record(root, record)


# -- results --------------------------------------------------------------------------------------

def describe(entry, items=None, boot=None):
    """A reader as the module reports it."""
    start = entry.get('start')
    out = {'pid': entry['pid'], 'comm': entry['comm'], 'unit': entry.get('unit'),
           'start': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(start)) if start else None,
           'fds': sum(len(f['fds']) for f in entry['files']),
           'mappings': sum(1 for f in entry['files'] if f['mapped']),
           'mapped_without_fd': sum(1 for f in entry['files'] if f['mapped'] and not f['fds'])}
    if items is not None:
        paths = sorted(set(i['path'] for i in items))
        out['files'] = paths[:MAX_LISTED_FILES]
        out['count'] = len(items)
    return out


def line(entry):
    """``pid 1234 (java, aem.service)``."""
    return 'pid %d (%s%s)' % (entry['pid'], entry['comm'], ', %s' % entry['unit'] if entry.get('unit') else '')


# -- one run --------------------------------------------------------------------------------------

def survey(root, kb_by_name, scope_by_name, changed=(), only=(), enabled=True, procfs=None, persisted=None,
           config_paths=(), syscalls=None, deadline=SCAN_DEADLINE):
    """Scan, read the record, assess and plan for the governing devices ``kb_by_name`` ({name: KiB now}).

    ``scope_by_name``: {name: None (whole device) or [path prefixes]}; ``changed``: the names whose
    read-ahead this run changes; ``persisted`` and ``config_paths``: the boot rule's evidence
    (:func:`settled_since`). Nothing is changed here.
    """
    numbers, kernel, notes = device_numbers(root, sorted(kb_by_name))
    devices = dict((n, {'name': name, 'kernel': kernel.get(n), 'kb': kb_by_name[name],
                        'seq': disk_sequence(root, name)}) for n, name in numbers.items())
    scope, links = real_scope(root, scope_by_name)
    scope = dict((n, scope.get(name)) for n, name in numbers.items())
    found = scan(procfs or root, numbers, deadline, min(kb_by_name.values() or [0]) * 1024)
    record, problem = read_record(root)
    boot_id = read_boot_id(root)
    valid = valid_devices(record, devices, boot_id, set(changed))
    settled = {} if problem else settled_since(root, devices, record, boot_id, set(changed), persisted,
                                               config_paths, found['boot'])
    assessed = assess(found, devices, record, boot_id, changed, settled)
    cannot = refresh_support(syscalls) if any(e['stale_fds'] for e in assessed) else None
    return {'devices': devices, 'found': found, 'record': record, 'record_problem': problem, 'boot_id': boot_id,
            'valid': valid, 'settled': settled, 'assessed': assessed, 'links': links, 'notes': notes,
            'cannot': cannot, 'plan': plan_refresh(assessed, scope, only, enabled, cannot), 'only': list(only),
            'enabled': enabled}


def _restart_entry(surveyed, entry, items, why, reason=None):
    reason = (reason or WHY[why]).replace('%(count)d', str(len(items)))
    if why == 'not_named':
        reason = '%s (%s)' % (reason, ', '.join(surveyed['only']))
    return dict(describe(entry, items), why=why, reason=reason)


def _merge_restarts(out):
    """One entry per process: its reasons joined, its ``why`` a list."""
    merged = {}
    for r in out:
        key = (r['pid'], r['start'])
        if key not in merged:
            merged[key] = dict(r, why=[r['why']], files=list(r['files']))
            continue
        m = merged[key]
        m['why'].append(r['why'])
        m['reason'] = '%s; %s' % (m['reason'], r['reason'])
        m['count'] += r['count']
        m['files'] = sorted(set(m['files'] + r['files']))[:MAX_LISTED_FILES]
    return [merged[k] for k in sorted(merged)]


def outcome(surveyed, refreshed=None):
    """What the module reports (``refreshed``: the result of :func:`refresh`, None in check mode, when
    ``refreshed`` lists what a real run would refresh), and the items still stale per device number.

    Every stale reader is either refreshed or in ``needs_restart`` with its reasons (``why``: codes of
    :data:`WHY`); the role decides which of them is AEM."""
    plan = surveyed['plan']
    found = surveyed['found']
    out = {'refreshed': [], 'needs_restart': [], 'unreadable': found['unreadable'], 'unscanned': found['unscanned'],
           'scan': found['cost'], 'record': RECORD_PATH, 'record_problem': surveyed['record_problem'],
           'refresh': surveyed['enabled'], 'kernel_refresh': surveyed['cannot'] is None,
           'boot_rule': sorted(surveyed['devices'][n]['name'] for n in surveyed['settled']),
           'links': surveyed['links'], 'notes': surveyed['notes']}
    gone = set()
    restarts = [_restart_entry(surveyed, e, items, why) for e, items, why in plan['restart']]
    if refreshed is None:
        out['refreshed'] = [describe(e, items) for e, items in plan['refresh']]
    else:
        for r in refreshed:
            if r['refreshed']:
                out['refreshed'].append(describe(r['entry'], r['refreshed']))
            if r['failed']:
                restarts.append(_restart_entry(surveyed, r['entry'], r['failed'], r['why'], r['reason']))
            for item in r['refreshed'] + r['vanished']:
                gone.add((r['entry']['pid'], r['entry']['start_ticks'], item['fd'], item['ino']))
    out['needs_restart'] = _merge_restarts(restarts)
    still = {}
    for entry in surveyed['assessed']:
        for item in entry['stale_fds']:
            key = (entry['pid'], entry['start_ticks'], item['fd'], item['ino'])
            if key not in gone:
                still.setdefault(item['dev'], set()).add(key)
        for item in entry['stale_maps']:
            still.setdefault(item['dev'], set()).add((entry['pid'], entry['start_ticks'], MAPPING_ONLY, item['ino']))
    return out, still


def finish(root, surveyed, refreshed, write=None):
    """After a real run: the report, and the record rewritten when it differs. A record that cannot be
    written is a warning (the next run then refreshes again), never a failure. Returns (report, warnings)."""
    report, still = outcome(surveyed, refreshed)
    warnings = []
    found = surveyed['found']
    record = new_record(surveyed['record'], surveyed['devices'], surveyed['valid'], surveyed['boot_id'],
                        found['time'], still, found['unreadable'] + found['unscanned'])
    if record != surveyed['record']:
        try:
            (write or write_record)(root, record)
        except (IOError, OSError) as e:
            warnings.append('cannot write %s (%s): the next run will refresh the same readers again'
                            % (RECORD_PATH, files.describe_os_error(e)))
    return report, warnings


def diff(surveyed, report):
    """Diff-mode lines: each stale reader before, and what the run did (or would do) about it; None for none."""
    before, after = [], []
    for entry, items in surveyed['plan']['refresh']:
        for item in items:
            before.append('%s fd %d %s: read-ahead window from an earlier value' % (line(entry), item['fd'], item['path']))
    for entry, items, _why in surveyed['plan']['restart']:
        for item in items:
            before.append('%s %s %s: read-ahead window from an earlier value'
                          % (line(entry), 'fd %d' % item['fd'] if 'fd' in item else 'mapping', item['path']))
    for r in report['refreshed']:
        after.append('%s: %d open file(s) refreshed to the device\'s read-ahead' % (line(r), r['count']))
    for r in report['needs_restart']:
        after.append('%s: needs a restart: %s' % (line(r), r['reason']))
    if not before and not after:
        return None
    return files.diff_entry('open files on %s (read-ahead of running readers)'
                            % ', '.join(sorted(set(d['name'] for d in surveyed['devices'].values()))),
                            ''.join(x + '\n' for x in before), ''.join(x + '\n' for x in after))


def audit(surveyed):
    """For tuning_facts: the readers of the targets that do not read at the device's value. ``stale``: an apply
    run refreshes them in place; ``needs_restart``: only a restart helps, with the reasons."""
    report = outcome(surveyed)[0]
    stale = [dict(r, reason='holds %d file(s) opened at an earlier read-ahead' % r['count'])
             for r in report.pop('refreshed')]
    return dict(report, stale=stale)


def targets_of(devices, paths, after_kb=None):
    """From the read_ahead plan's devices: ({name: KiB after the run}, {name: scope}, [names this run changes],
    {name: KiB its udev rule persists}).

    A device named by a device target is refreshed whole; one reached only through path targets,
    for the files under those paths.
    """
    kb, scope, changed, persisted = {}, {}, [], {}
    for entry in devices:
        name = entry['name']
        kb[name] = (after_kb or {}).get(name, entry['planned_kb'])
        if entry['planned_kb'] != entry['before_kb']:
            changed.append(name)
        if entry.get('rule'):
            persisted[name] = entry['planned_kb']
        prefixes = [t for t in entry['targets'] if t in paths]
        scope[name] = None if len(prefixes) < len(entry['targets']) else sorted(prefixes)
    return kb, scope, changed, persisted


def warnings_for(report):
    """One line per reader the run could not bring to the device's value, and per thing it did not see."""
    out = []
    for r in report['needs_restart']:
        out.append('%s needs a restart for the new read-ahead to apply: it %s.' % (line(r), r['reason']))
    for u in report['unreadable']:
        out.append('readers: %s; its open files were not checked.' % u['reason'])
    if report['unscanned']:
        out.append('readers: %d process(es) were not scanned (%s): pid %s.'
                   % (len(report['unscanned']), report['unscanned'][0]['reason'],
                      ', '.join(str(u['pid']) for u in report['unscanned'][:MAX_LISTED_FILES])))
    for given, real in sorted(report['links'].items()):
        out.append('readers: %s is a link to %s; open files are matched under %s, as the kernel reports them.'
                   % (given, real, real))
    for note in report['notes']:
        out.append('readers: %s.' % note)
    if report['record_problem']:
        out.append('readers: %s' % report['record_problem'])
    return out
