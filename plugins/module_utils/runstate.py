# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one home of the collection's runtime state, and the one reader of JSON read back from a host.

Every lock file and every state file (the read-ahead sweep's) lives in :data:`RUN_DIR`,
``/run/aemops-os-tuning``: a directory on the /run tmpfs (emptied at boot) that only root can
create, since /run is 0755 root (FHS 3.0 section 3.15; systemd's file-hierarchy(7)). Not
``/run/lock``, which is world-writable (1777), so another user can create a directory there first.

Nothing found there is trusted until checked, whatever planted it:

* a directory: a real directory (not a symbolic link), owned by root or by this run's user,
  not writable by group or others (:func:`check_dir`);
* a file: opened with ``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``: a regular file, owned by
  this run's user, with one link, not writable by group or others (:func:`open_verified`). Only a file checked so is truncated,
  written or unlinked.

Anything else is refused with :class:`UnsafeStateError`, whose message names the path, what is
wrong and the fix; nothing changes.

The holder of a lock is read from the kernel (``/proc/locks``), never from the lock file's text:
:func:`lock_holder` names its pid, command and user.

:func:`read_json` / :func:`parse_json` are the one reader of JSON the collection reads back
(baselines, the THP baseline, the snapshot, the sweep record, the sweep state): size-capped,
regular files only, every parse error (deep nesting included) returned as ``damaged: <path>:
<why>``, and the type checked after parsing. Each caller turns that into its documented
behaviour (ignore with a warning, or refuse).

Python 2.7, 3.6 and newer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import errno
import fcntl
import json
import os
import stat
import time

RUN_DIR = '/run/aemops-os-tuning'
PROC_LOCKS = '/proc/locks'
MAX_JSON_BYTES = 1024 * 1024
DEFAULT_LOCK_TIMEOUT = 120

_NOFOLLOW = getattr(os, 'O_NOFOLLOW', 0)
_CLOEXEC = getattr(os, 'O_CLOEXEC', 0)
_held = {}  # lock file path -> [fd, depth]: re-entrant within one process


class FileError(Exception):
    """A file the collection owns cannot be read, locked or written safely; the message names it and the fix."""


class UnsafeStateError(FileError):
    """A directory or file in the runtime-state home is not what this collection made; nothing was changed."""


class LockCreateError(FileError):
    """A lock file cannot be created (most often: the run is not root)."""


def root_path(root, path):
    return os.path.join(root, path.lstrip('/'))


def euid():
    return os.geteuid() if hasattr(os, 'geteuid') else 0


def _user(uid):
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return 'uid %d' % uid


def _refuse(display, problem, fix=None):
    raise UnsafeStateError('%s %s. It was not made by aemops.os_tuning as root, so nothing in it is used or changed. '
                           '%s' % (display, problem, fix or 'Check who created it, then remove it (rm -rf %s) and '
                                   'run again.' % display))


# ---------------------------------------------------------------------------------------------
# Directories and files

class UnsafeDirError(UnsafeStateError):
    """:func:`check_dir`'s refusal, with what it found: ``display`` (the directory), ``kind`` (``link``, ``type``,
    ``owner``, ``mode`` or ``shared``) and ``problem`` ('is writable by group or others (mode 0777)'), for a caller that
    words its own message and fix."""

    def __init__(self, msg, display, kind, problem):
        UnsafeStateError.__init__(self, msg)
        self.display, self.kind, self.problem = display, kind, problem


def owners():
    """Who may own a directory or file that root trusts: root, or this run's user (the unit tests run
    unprivileged). The one owner rule of the collection's files."""
    return (0, euid())


def dir_problem(st, allowed=None, sticky_ok=False):
    """``(kind, problem)`` when the directory's ``lstat`` result ``st`` (not a symbolic link) is unsafe for root to
    write in, or None: not a directory (``type``), owned by someone else than ``allowed`` (default :func:`owners`;
    ``owner``), writable by group or others (``mode``, or ``shared`` when sticky, as /tmp, where only an entry's
    owner may rename it: allowed with ``sticky_ok``). The one rule of a safe directory."""
    if not stat.S_ISDIR(st.st_mode):
        return 'type', 'is %s, not a directory' % (file_kind(st.st_mode) or 'a regular file')
    if st.st_uid not in (allowed if allowed is not None else owners()):
        return 'owner', 'is owned by %s, not root' % owner_text(st.st_uid)
    if st.st_mode & 0o022 and not (sticky_ok and st.st_mode & stat.S_ISVTX):
        if st.st_mode & stat.S_ISVTX:
            return 'shared', ('is writable by group or others (mode %04o: a shared directory, such as /tmp)'
                              % stat.S_IMODE(st.st_mode))
        return 'mode', 'is writable by group or others (mode %04o)' % stat.S_IMODE(st.st_mode)
    return None


def file_problem(st, allowed=None):
    """``(kind, problem)`` when the file's ``lstat`` result ``st`` is unsafe for root to read or run, or None: not a
    regular file (``type``: a symbolic link too), owned by someone else than ``allowed`` (default :func:`owners`;
    ``owner``), another name of the same file elsewhere (``links``), writable by group or others (``mode``). The one
    rule of a safe file, as :func:`dir_problem` is of a directory."""
    if not stat.S_ISREG(st.st_mode):
        return 'type', 'is %s, not a regular file' % file_kind(st.st_mode)
    if st.st_uid not in (allowed if allowed is not None else owners()):
        return 'owner', 'is owned by %s, not root' % owner_text(st.st_uid)
    if st.st_nlink != 1:
        return 'links', 'has %d hard links (another name of the same file elsewhere)' % st.st_nlink
    if st.st_mode & 0o022:
        return 'mode', 'is writable by group or others (mode %04o)' % stat.S_IMODE(st.st_mode)
    return None


def _refuse_dir(display, kind, problem):
    try:
        _refuse(display, problem)
    except UnsafeStateError as e:
        raise UnsafeDirError(e.args[0], display, kind, problem)


def check_dir(full, display=None, allowed=None):
    """Raise UnsafeDirError unless ``full`` is a real directory (not a symbolic link) that :func:`dir_problem`
    passes; return its lstat. OSError (ENOENT, EACCES) from lstat is passed on."""
    display = display or full
    st = os.lstat(full)
    if stat.S_ISLNK(st.st_mode):
        _refuse_dir(display, 'link', 'is a symbolic link (to %s), not a directory' % link_target(full))
    found = dir_problem(st, allowed)
    if found:
        _refuse_dir(display, found[0], found[1])
    return st


def check_above(root, path):
    """Check every directory above the target path ``path`` under ``root`` (outermost first, ``/`` included) with
    :func:`check_dir`, up to the first that does not exist; return the missing ones, outermost first (what a write
    would create). UnsafeDirError names the first unsafe one; OSError other than ENOENT is passed on. A file that
    root writes under them cannot be swapped or pointed elsewhere by another user between check and write."""
    chain, current = [], os.path.dirname(path)
    while True:
        chain.insert(0, current)
        if current in ('/', ''):
            break
        current = os.path.dirname(current)
    for index, directory in enumerate(chain):
        try:
            check_dir(root_path(root, directory), directory)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                return chain[index:]
            raise
    return []


def json_text(data):
    """A file's JSON text as the collection writes it: indent 2, sorted keys, a trailing newline, the same bytes on
    Python 2 and 3 (the snapshot, the sweep record)."""
    return json.dumps(data, indent=2, sort_keys=True, separators=(',', ': ')) + '\n'


def link_target(path):
    """Where the symbolic link ``path`` points, for a message ('?' when it cannot be read)."""
    try:
        return os.readlink(path)
    except OSError:
        return '?'


def owner_text(uid):
    """'name (uid N)' for a message naming a file's owner."""
    name = _user(uid)
    return name if name == 'uid %d' % uid else '%s (uid %d)' % (name, uid)


def run_dir(root='/', create=True):
    """The host path of :data:`RUN_DIR`, checked (and created 0700 when missing and ``create``).

    Returns (path, [directories created, outermost first]). /run itself is checked too (made 0755 under a test root that has
    none). OSError when it cannot be created (EACCES: not root); UnsafeStateError when /run or
    the directory is not safe.
    """
    created = []
    parent = root_path(root, os.path.dirname(RUN_DIR))
    if create and root != '/' and not os.path.lexists(parent):
        _mkdir(parent, 0o755, created)
    check_dir(parent, os.path.dirname(RUN_DIR))
    full = root_path(root, RUN_DIR)
    if create and not os.path.lexists(full):
        _mkdir(full, 0o700, created)
    check_dir(full, RUN_DIR)
    return full, created


def _mkdir(path, mode, created):
    try:
        os.mkdir(path, mode)
        created.append(path)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise


def check_fd(fd, display):
    """Raise UnsafeStateError unless the open ``fd`` is a regular file owned by this run's user with one link, not
    writable by group or others (the rule of its directory, :func:`dir_problem`)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        _refuse(display, 'is %s, not a regular file' % file_kind(st.st_mode))
    if st.st_uid == 0 and euid() != 0:
        # Root's file in root's 0700 directory: only root can use it (the open itself fails for anybody else).
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), display)
    if st.st_uid != euid():
        _refuse(display, 'is owned by %s (uid %d), not by this run\'s user (uid %d)'
                % (_user(st.st_uid), st.st_uid, euid()))
    if st.st_nlink != 1:
        _refuse(display, 'has %d hard links (another name of the same file elsewhere)' % st.st_nlink)
    if stat.S_IMODE(st.st_mode) & 0o022:
        _refuse(display, 'is writable by group or others (mode %04o)' % stat.S_IMODE(st.st_mode))
    return st


# The one table of file kinds, as the collection's messages name them (this module and files.py).
_FILE_KINDS = (
    (stat.S_ISLNK, 'a symbolic link'),
    (stat.S_ISDIR, 'a directory'),
    (stat.S_ISCHR, 'a character device node'),
    (stat.S_ISBLK, 'a block device node'),
    (stat.S_ISFIFO, 'a FIFO (named pipe)'),
    (stat.S_ISSOCK, 'a socket'),
)


def file_kind(mode):
    """'a directory', 'a FIFO (named pipe)', ... for a non-regular st_mode; None for a regular file."""
    for test, kind in _FILE_KINDS:
        if test(mode):
            return kind
    if stat.S_ISREG(mode):
        return None
    return 'not a regular file'


def open_verified(full, display=None, flags=os.O_RDONLY, create=False):
    """Open ``full`` with O_NOFOLLOW|O_NONBLOCK and check it (:func:`check_fd`); the descriptor.

    None when it does not exist and ``create`` is false. UnsafeStateError for a symbolic link or
    a file that is not regular, not ours or has other links; OSError otherwise.
    """
    display = display or full
    mode = flags | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC | (os.O_CREAT if create else 0)
    try:
        fd = os.open(full, mode, 0o600)
    except OSError as e:
        if e.errno == errno.ENOENT and not create:
            return None
        if e.errno == errno.ELOOP or (os.path.islink(full) and e.errno in (errno.EEXIST, errno.EMLINK)):
            _refuse(display, 'is a symbolic link (to %s), not a regular file' % link_target(full))
        raise
    try:
        check_fd(fd, display)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_verified(full, display=None, max_bytes=MAX_JSON_BYTES):
    """The bytes of a state file checked as :func:`open_verified` does, or None when absent; at most
    ``max_bytes`` (UnsafeStateError when larger)."""
    display = display or full
    fd = open_verified(full, display)
    if fd is None:
        return None
    try:
        return read_capped(fd, display, max_bytes)
    finally:
        os.close(fd)


def read_capped(fd, display, max_bytes):
    """The bytes of the open file ``fd``, at most ``max_bytes`` (FileError naming ``display`` when larger)."""
    chunks, size = [], 0
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        size += len(chunk)
        if size > max_bytes:
            raise FileError('%s is larger than %d bytes: it was not written by aemops.os_tuning.'
                            % (display, max_bytes))
        chunks.append(chunk)
    return b''.join(chunks)


def unlink_verified(full, fd):
    """Unlink ``full`` only when it is still the file open as ``fd`` (checked); True when removed."""
    try:
        st, mine = os.lstat(full), os.fstat(fd)
    except OSError:
        return False
    if (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino) or not stat.S_ISREG(st.st_mode):
        return False
    try:
        os.unlink(full)
    except OSError:
        return False
    return True


def remove_state(full, display=None):
    """Remove a state file after checking it (:func:`open_verified`); True when removed."""
    fd = open_verified(full, display)
    if fd is None:
        return False
    try:
        return unlink_verified(full, fd)
    finally:
        os.close(fd)


def write_state(root, name, data):
    """Write ``data`` (bytes or text) to ``RUN_DIR/name`` atomically: temporary file, fsync, rename.

    The directory is checked first and an existing file under that name is checked before it is
    replaced (a link or another user's file is refused, never replaced). Returns the host path.
    """
    directory = run_dir(root)[0]
    full = os.path.join(directory, name)
    display = os.path.join(RUN_DIR, name)
    fd = open_verified(full, display)  # refuse a planted file even though rename would replace it
    if fd is not None:
        os.close(fd)
    tmp = os.path.join(directory, '.%s.%d.tmp' % (name, os.getpid()))
    if os.path.lexists(tmp):
        remove_state(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, data.encode('utf-8') if not isinstance(data, bytes) else data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, full)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    _fsync_dir(directory)
    return full


def _fsync_dir(directory):
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# ---------------------------------------------------------------------------------------------
# JSON read back from the host

def damaged(display, why):
    return 'damaged: %s: %s' % (display, why)


def parse_json(text, display, kind=None):
    """(value, None) or (None, 'damaged: <display>: <why>'); never raises.

    ``kind``: the type the value must have (dict or list), checked after parsing. Nesting
    deeper than the interpreter's recursion limit is damage like any other (RecursionError on
    Python 3, RuntimeError on 2.7).
    """
    if isinstance(text, bytes):
        try:
            text = text.decode('utf-8')
        except UnicodeDecodeError as e:
            return None, damaged(display, 'not UTF-8 text (byte %d)' % e.start)
    if len(text) > MAX_JSON_BYTES:
        return None, damaged(display, 'larger than %d bytes' % MAX_JSON_BYTES)
    try:
        value = json.loads(text)
    except ValueError as e:
        return None, damaged(display, 'not valid JSON (%s)' % e)
    except RuntimeError:  # RecursionError is a RuntimeError
        return None, damaged(display, 'nested too deeply to be JSON this collection wrote')
    except MemoryError:
        return None, damaged(display, 'too large to parse')
    if kind is not None and not isinstance(value, kind):
        return None, damaged(display, 'holds a JSON %s, not %s' % (_json_type(value), _json_type(kind())))
    return value, None


def _json_type(value):
    if isinstance(value, dict):
        return 'object'
    if isinstance(value, list):
        return 'array'
    if isinstance(value, bool):
        return 'boolean'
    if value is None:
        return 'null'
    if isinstance(value, (int, float)):
        return 'number'
    return 'string'


def read_json(full, display=None, kind=dict, max_bytes=MAX_JSON_BYTES, owned=False):
    """(value, None), (None, None) when absent, or (None, 'damaged: <display>: <why>'); never raises.

    The file is opened with O_NOFOLLOW|O_NONBLOCK and must be a regular file (a FIFO is never
    waited on); ``owned``: also owned by this run's user with one link (state files under
    RUN_DIR). At most ``max_bytes`` are read.
    """
    display = display or full
    data, damage = read_checked(full, display, max_bytes, owned)
    if data is None:
        return None, damage
    return parse_json(data, display, kind)


def read_checked(full, display=None, max_bytes=MAX_JSON_BYTES, owned=False):
    """(bytes, None), (None, None) when absent, or (None, 'damaged: <display>: <why>'); never raises.

    Opened as :func:`read_json` opens its files.
    """
    display = display or full
    try:
        if owned:
            return read_verified(full, display, max_bytes), None
        return _read_regular(full, display, max_bytes), None
    except FileError as e:
        return None, damaged(display, _strip(str(e), display))
    except (IOError, OSError) as e:
        return None, damaged(display, os.strerror(e.errno) if getattr(e, 'errno', None) else str(e))


def _strip(message, display):
    return message[len(display):].strip() if message.startswith(display) else message


def _read_regular(full, display, max_bytes):
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        if e.errno == errno.ELOOP:
            raise FileError('%s is a symbolic link, not a regular file' % display)
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileError('%s is %s, not a regular file' % (display, file_kind(mode)))
        return read_capped(fd, display, max_bytes)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# Locks: flock on verified files in RUN_DIR; the holder from /proc/locks

def lock_path(root, name):
    """Host path of lock ``name`` (a file name) in RUN_DIR."""
    return root_path(root, '%s/%s' % (RUN_DIR, name))


def lock_holder(fd_or_path, proc_locks=PROC_LOCKS):
    """Who holds the flock of a file: a dict ``pid``, ``command``, ``uid``, ``user``, or None.

    Read from the kernel's /proc/locks (fs/locks.c ``lock_get_status``: ``FLOCK ADVISORY WRITE
    <pid> <major:minor in hex>:<inode>``), matching the file's device and inode; the file's own
    text is never read.
    """
    try:
        st = os.fstat(fd_or_path) if isinstance(fd_or_path, int) else os.stat(fd_or_path)
        with open(proc_locks) as f:
            lines = f.read().splitlines()
    except (IOError, OSError):
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] == '->' or fields[1] != 'FLOCK':
            continue
        try:
            pid = int(fields[4])
            major, minor, inode = fields[5].split(':')
            if (int(major, 16), int(minor, 16), int(inode)) != want:
                continue
        except ValueError:
            continue
        return describe_pid(pid)
    return None


def describe_pid(pid):
    info = {'pid': pid, 'command': None, 'uid': None, 'user': None}
    try:
        with open('/proc/%d/comm' % pid) as f:
            info['command'] = f.read().strip()
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('Uid:'):
                    info['uid'] = int(line.split()[1])
                    info['user'] = _user(info['uid'])
    except (IOError, OSError, ValueError, IndexError):
        pass
    return info


def holder_text(holder):
    """'pid 812 (python3, user root, uid 0)' or 'a process this run cannot see'."""
    if not holder:
        return 'a process this run cannot see in /proc/locks'
    details = [d for d in (holder.get('command'),
                           'user %s, uid %s' % (holder['user'], holder['uid']) if holder.get('uid') is not None
                           else None) if d]
    return 'pid %d%s' % (holder['pid'], ' (%s)' % ', '.join(details) if details else '')


@contextlib.contextmanager
def locked(root, name, what, timeout=None, poll=0.05, required=True, busy=None):
    """Hold the flock of lock file ``name`` in RUN_DIR, which guards ``what`` (named in messages).

    Waits at most ``timeout`` seconds (DEFAULT_LOCK_TIMEOUT), then raises ``busy`` (a function of
    the message, FileError by default) naming ``what``, the lock file and the holder from the kernel.
    With ``required=False`` a lock that cannot be created (no root) is skipped: yields None.
    Re-entrant in one process. The lock file is removed when released; the run directory too when
    this run created it and it is empty.
    """
    timeout = DEFAULT_LOCK_TIMEOUT if timeout is None else timeout
    full = lock_path(root, name)
    entry = _held.get(full)
    if entry is not None:
        entry[1] += 1
        try:
            yield full
        finally:
            entry[1] -= 1
        return
    got = _acquire(root, full, what, timeout, poll, required, busy)
    if got is None:
        yield None
        return
    fd, created = got
    _held[full] = [fd, 1]
    try:
        yield full
    finally:
        del _held[full]
        unlink_verified(full, fd)  # nothing is left behind; waiters see the new inode and retry
        os.close(fd)  # closing the descriptor releases the flock
        for made in reversed(created):
            try:
                os.rmdir(made)
            except OSError:
                break  # another run's file is in it


def _acquire(root, full, what, timeout, poll, required, busy):
    display = '%s/%s' % (RUN_DIR, os.path.basename(full))
    deadline = time.time() + max(0, timeout)
    attempts = 0
    while True:
        attempts += 1
        try:
            created = run_dir(root)[1]
            fd = open_verified(full, display, os.O_RDWR, create=True)
        except UnsafeStateError:
            raise
        except OSError as e:
            if e.errno == errno.ENOENT and attempts < 100:
                continue  # another run removed the empty directory just now
            if not required:
                return None
            raise LockCreateError('cannot create the lock file %s for %s: %s.' % (display, what, _os_reason(e)))
        try:
            got = _wait_flock(fd, deadline, poll)
            if got:
                # The holder before us unlinks the file when it is done: a lock on an unlinked
                # inode guards nothing, so take the lock again on the file now at that path.
                try:
                    same = os.fstat(fd).st_ino == os.lstat(full).st_ino
                except OSError:
                    same = False
                if not same:
                    os.close(fd)
                    continue
        except BaseException:
            os.close(fd)
            raise
        if not got:
            holder = holder_text(lock_holder(fd))
            os.close(fd)
            message = ('timed out after %s s waiting for the lock on %s (lock file %s, held by %s). Another run of '
                       'aemops.os_tuning is changing it: let it finish and run again.'
                       % (timeout, what, display, holder))
            raise (busy or FileError)(message)
        return fd, created


def _os_reason(e):
    if getattr(e, 'errno', None) in (errno.EACCES, errno.EPERM):
        return 'permission denied (this needs root: become: true)'
    return getattr(e, 'strerror', None) or str(e)


def _wait_flock(fd, deadline, poll):
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except (IOError, OSError) as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise FileError('cannot lock %s: %s.' % (fd, _os_reason(e)))
        if time.time() >= deadline:
            return False
        time.sleep(poll)


def lock_is_free(full):
    """Whether nobody holds the lock file ``full`` (a host path; for check mode and plans: nothing is
    created or changed)."""
    try:
        fd = os.open(full, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
    except OSError:
        return True
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (IOError, OSError):
        return False
    finally:
        os.close(fd)
    return True


# ---------------------------------------------------------------------------------------------
# The per-device read-ahead lock

def device_lock_name(majmin):
    """The lock every writer of one device's read-ahead takes: keyed by major:minor (the kernel's
    identity of the device now, which the sysfs file belongs to)."""
    return 'read-ahead-%s.lock' % str(majmin).replace(':', '-')
