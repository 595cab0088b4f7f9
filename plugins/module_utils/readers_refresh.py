# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The reader refresh: ``pidfd_open`` + ``pidfd_getfd`` + ``posix_fadvise(NORMAL)`` + ``close`` on each stale
descriptor of another process (:func:`refresh`), through an injectable :class:`Syscalls`; whether this kernel can at
all (:func:`refresh_support`); and why a process cannot be refreshed (:data:`WHY`, :func:`refusal`). ``root`` is the
host's root path (its /proc for the pid's start time and Yama's setting). The kernel facts are in
module_utils/readers.py's docstring.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, readers_scan

YAMA_PTRACE_SCOPE = '/proc/sys/kernel/yama/ptrace_scope'
SYS_PIDFD_OPEN = 434
SYS_PIDFD_GETFD = 438
POSIX_FADV_NORMAL = 0


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
        return int((readers_scan.proc_text(files.root_path(root, YAMA_PTRACE_SCOPE)) or '').strip())
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
            text = readers_scan.proc_text(os.path.join(files.root_path(root, readers_scan.PROC), str(entry['pid']), 'stat'))
            same = text is not None and readers_scan.parse_stat(text)[1] == entry['start_ticks']
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
                if readers_scan.devnum_text(st.st_dev) != item['dev'] or st.st_ino != item['ino']:
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
