# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The reader scan: which processes hold or map files on the tuned devices, in one pass over ``/proc`` with a
deadline (module_utils/readers.py composes it with the verdict, the refresh and the record).

Every function takes ``root``, the host's root path (``/`` on a host, a fake tree in the unit tests; a
``host.Host`` is one), and reads ``/proc`` under it through a :class:`ProcFs`, the one place the unit tests fake
(``tests/unit/fakehost.py``). :func:`scan` takes the ProcFs itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import pickle
import re
import select
import signal
import stat
import threading
import time

from ansible_collections.aemops.os_tuning.plugins.module_utils import aem, blockdev, files

PROC = '/proc'
# The whole scan of /proc, in seconds: past it the processes not reached are named and the run goes on.
SCAN_DEADLINE = 20.0
# AEM's processes that map nothing on the targets, sampled at most (a JVM and its few helpers; a bound, not a guess).
MAX_UNIT_PROCESSES = 64
# The scan's worker thread (a daemon thread: see scan).
WORKER_NAME = 'aemops-readers-scan'
# scan_apart: how long past the scan's own deadline the module waits for the child's answer, and for its end.
APART_GRACE = 10.0
APART_REAP = 0.5

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


def proc_text(path):
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
        text = proc_text(os.path.join(proc_root, 'stat')) or ''
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


# Files of the system itself, which many processes map read-only and shared or hold open, and which are never an
# application's data: the distribution's trees (libraries, their caches such as glibc's gconv-modules.cache, which
# every shell that converts a character set maps shared; udev's hwdb; the JVM's own lib/modules), the configuration
# in /etc, and the name service caches every process that looks up a user or group maps (SSSD's memory cache,
# sss_nss_mc, whose client keeps the descriptor; nscd's databases, whose clients close it). A lookup there reads a
# few pages of a file of a few MiB that stays in the page cache; none is AEM's repository. So a device target on
# the root disk (of an IdM- or AD-joined host too) does not name sshd, crond and bash. /usr/local is the site's own
# and is not among them.
SYSTEM_SHARED = ('/usr/', '/etc/', '/lib/', '/lib64/', '/bin/', '/sbin/', '/var/lib/sss/mc/', '/var/db/nscd/',
                 '/var/cache/nscd/')
SITE_LOCAL = '/usr/local/'


def system_shared(path):
    """Whether ``path`` (as the process sees it) is a file of the system itself (:data:`SYSTEM_SHARED`)."""
    return not path.startswith(SITE_LOCAL) and any(path.startswith(p) for p in SYSTEM_SHARED)


def drop_system_files(opened, mapped):
    """Leave out of one process's files ({(dev, ino): {fd: path}} open, {(dev, ino): path} mapped) those
    :func:`system_shared` names, by any of their paths: they are not readers (the rule is in docs/design.md)."""
    for key in [k for k, path in mapped.items() if system_shared(path)]:
        mapped.pop(key)
        opened.pop(key, None)
    for key in [k for k, fds in opened.items() if any(system_shared(path) for path in fds.values())]:
        opened.pop(key)
        mapped.pop(key, None)


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
        return proc_text(path)

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
                entry = self.reader_entry(pid)
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

    def mount_table(self, ns, base):
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

    def open_files(self, base, mounts):
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

    def reader_entry(self, pid):
        """One process's reader entry, None when it reads none of the devices, 'gone' when it exited."""
        procfs = self.procfs
        base = os.path.join(procfs.proc, str(pid))
        text = procfs.read(os.path.join(base, 'stat'))
        if text is None:
            return 'gone'
        comm, start_ticks = parse_stat(text)
        ns = _mount_ns(procfs, base)
        mounts = self.mount_table(ns, base)
        if mounts is None:
            return 'gone'
        opened = self.open_files(base, mounts)
        if opened is None:
            return 'gone'
        maps_text = procfs.read(os.path.join(base, 'maps'))
        if maps_text is None:
            return 'gone'
        mapped, program = parse_maps(maps_text, self.numbers) if any(h in maps_text for h in self.hints) else ({}, ())
        for key in program:
            opened.pop(key, None)  # its own program text, open as a file too (a JVM's lib/modules)
        drop_system_files(opened, mapped)
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


def unit_processes(procfs, unit, skip=(), limit=MAX_UNIT_PROCESSES):
    """[{pid, comm, start_ticks, unit}] of the processes of AEM's ``unit`` (aem.is_aem) that are not in ``skip``
    (pids), from /proc/PID/cgroup and stat only: files of procfs itself, no link is followed. At most ``limit``."""
    out = []
    if not unit:
        return out
    for name in sorted(procfs.listdir(procfs.proc), key=lambda n: (len(n), n)):
        if not name.isdigit() or int(name) in skip or len(out) >= limit:
            continue
        base = os.path.join(procfs.proc, name)
        try:
            found = parse_unit(procfs.read(os.path.join(base, 'cgroup')))
            text = procfs.read(os.path.join(base, 'stat')) if aem.is_aem({'unit': found}, unit) else None
            if text:
                comm, start_ticks = parse_stat(text)
                out.append({'pid': int(name), 'comm': comm, 'start_ticks': start_ticks, 'unit': found})
        except (IOError, OSError, ValueError, IndexError):
            continue  # gone, or not readable: not sampled
    return out


def _mount_ns(procfs, base):
    try:
        return procfs.readlink(os.path.join(base, 'ns', 'mnt'))
    except (IOError, OSError):
        return None


def scan(procfs, numbers, deadline=SCAN_DEADLINE, min_bytes=0):
    """The processes that hold files on the devices ``numbers`` ({'major:minor': name}), in one pass over the /proc
    of ``procfs`` (a :class:`ProcFs`).

    Returns {'readers': [entry], 'unreadable': [{pid, comm, start_ticks, reason}], 'unscanned': [{pid,
    reason}], 'exited': n, 'time': when the scan began, 'boot': the boot's time, 'cost': {processes, descriptors,
    stats, by_path, seconds, deadline_s}}. An entry: pid, comm, uid, unit, start_ticks, start (epoch seconds), and
    ``files``: one per (dev, ino) with its descriptors (``fds``, their link text in ``paths``) and
    whether it is ``mapped``. A process that exits during the scan is counted, not an error; one whose
    /proc entries cannot be read (hidepid, an LSM) is listed with the reason; past ``deadline`` seconds
    the processes not reached are listed in ``unscanned`` and the run goes on. Files no larger than
    ``min_bytes`` are left out (the window reads them whole at any value).

    The pass runs in a daemon thread: one whose read of /proc never returns is left behind and never joined. The
    modules scan through :func:`scan_apart`, which keeps even that thread out of their own process.
    """
    began = time.time()
    try:
        pids = sorted(int(n) for n in procfs.listdir(procfs.proc) if n.isdigit())
    except (IOError, OSError) as e:
        raise ReadersError('cannot list %s: %s' % (procfs.proc, files.describe_os_error(e)))
    state = _Scan(procfs, numbers, min_bytes)
    worker = threading.Thread(target=state.run, args=(pids,), name=WORKER_NAME)
    worker.daemon = True  # a read that never returns must not keep the module from exiting
    worker.start()
    worker.join(deadline)
    with state.lock:
        state.abandoned = worker.is_alive()
        unscanned = _unscanned(state, pids, deadline) if state.abandoned else []
        cost = dict(state.cost, seconds=round(time.time() - began, 3), deadline_s=deadline)
        return {'readers': list(state.readers), 'unreadable': list(state.unreadable), 'unscanned': unscanned,
                'exited': state.exited, 'time': began, 'boot': state.boot, 'cost': cost}


def _unscanned(state, pids, deadline):
    """The processes an abandoned scan did not finish, each with the reason."""
    out = []
    for pid in pids:
        if pid == state.current:
            out.append({'pid': pid, 'reason': 'its /proc entries did not answer within the scan\'s deadline (%g s) (a '
                                              'fault on a hung mount can hold a process\'s memory map)' % deadline})
        elif pid not in state.done:
            out.append({'pid': pid, 'reason': 'not reached before the scan\'s deadline (%g s)' % deadline})
    return out


def scan_apart(procfs, numbers, deadline=SCAN_DEADLINE, min_bytes=0):
    """:func:`scan` in a child process: the module keeps no thread of its own in a read of /proc.

    A read of /proc/PID/maps waits for the process's memory-map lock, uninterruptibly where ``m_start``
    (fs/proc/task_mmu.c) takes it with a plain ``down_read`` (older kernels; later ones take it killable). A
    thread stuck there keeps its whole process alive, and with it the descriptors the threads share: the module's
    output, which Ansible reads to its end. So the scan runs in a child with its own descriptors (its standard
    streams on /dev/null, none of the module's kept), which hands the result back through a pipe and is killed
    once it has; a child still stuck in the kernel is left behind (the init process reaps it when it wakes) and the
    module exits. ReadersError when /proc cannot be listed, or when the child does not answer within ``deadline``
    and :data:`APART_GRACE` seconds.
    """
    return apart(lambda: scan(procfs, numbers, deadline, min_bytes), deadline, 'the scan of /proc')


def apart(work, seconds, what):
    """``work()`` in a child process with its own descriptors (see :func:`scan_apart`), its result handed back
    through a pipe (pickled), within ``seconds`` and :data:`APART_GRACE`; ReadersError otherwise, or with the
    message of a ReadersError it raised."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        _child(read_end, write_end, work)  # never returns
    os.close(write_end)
    try:
        data = _read_until(read_end, time.time() + seconds + APART_GRACE)
    finally:
        os.close(read_end)
        _end_child(child)
    try:
        kind, value = pickle.loads(data)
    except Exception:  # noqa: BLE001 - a child killed mid-write: cut-short data of any kind
        raise ReadersError('%s gave no answer within %g s' % (what, seconds + APART_GRACE))
    if kind != 'done':
        raise ReadersError(value)
    return value


def _child(read_end, write_end, work):
    """The child of :func:`apart`: only the pipe's write end kept, the result written, then gone."""
    try:
        os.close(read_end)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        for name in os.listdir('/proc/self/fd'):
            if name.isdigit() and int(name) > 2 and int(name) != write_end:
                try:
                    os.close(int(name))
                except OSError:
                    pass  # the listing's own descriptor
        try:
            result = ('done', work())
        except ReadersError as e:
            result = ('error', str(e))
        data = pickle.dumps(result, 2)
        while data:
            data = data[os.write(write_end, data):]
        os.close(write_end)
    finally:
        os._exit(0)  # never the parent's cleanup, never its buffered output


def _read_until(fd, until):
    """The bytes from ``fd`` up to its end, or what came before ``until`` (epoch seconds)."""
    chunks = []
    while True:
        remaining = until - time.time()
        if remaining <= 0:
            return b''.join(chunks)
        try:
            ready = select.select([fd], [], [], remaining)[0]
        except (select.error, OSError) as e:  # Python 2.7: EINTR is raised
            if (getattr(e, 'errno', None) or e.args[0]) == errno.EINTR:
                continue
            raise
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return b''.join(chunks)
        chunks.append(chunk)


def _end_child(child):
    """Kill and reap the child of :func:`scan_apart`, waiting at most :data:`APART_REAP` seconds: one stuck in the
    kernel dies when it wakes, and the init process reaps it once the module has exited."""
    try:
        os.kill(child, signal.SIGKILL)
    except OSError:
        pass
    until = time.time() + APART_REAP
    while True:
        try:
            if os.waitpid(child, os.WNOHANG)[0] or time.time() >= until:
                return
        except OSError:
            return
        time.sleep(0.01)


def _unreadable(procfs, pid, error):
    base = os.path.join(procfs.proc, str(pid))
    comm, start_ticks = None, None
    try:
        comm, start_ticks = parse_stat(procfs.read(os.path.join(base, 'stat')) or '')
    except (IOError, OSError, ValueError, IndexError):
        pass
    return {'pid': pid, 'comm': comm, 'start_ticks': start_ticks,
            'reason': 'cannot read /proc/%d: %s' % (pid, files.describe_os_error(error))}
