# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Small file helpers shared by every writer in this collection.

Each file the collection owns on a target starts with a managed header and may carry
recorded baseline values (the state before our first change) as JSON comment lines, so
that ``state: absent`` can restore what was there. Writes are atomic.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import array
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import struct
import tempfile

from ansible_collections.aemops.os_tuning.plugins.module_utils import runstate

MANAGED_MARK = 'Managed by aemops.os_tuning'
BASELINE_PREFIX = 'aemops-baseline '


def root_path(root, path):
    """Join an absolute target path under ``root`` (``/`` on a real host)."""
    return os.path.join(root, path.lstrip('/'))


def read_bytes(path):
    """The bytes of ``path``, or None when it does not exist.

    Opened without blocking (a FIFO planted where a file is expected cannot hang the run) and
    refused with IOError when it is not a regular file (sysfs and procfs files are regular).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (IOError, OSError) as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise
    try:
        mode = os.fstat(fd).st_mode
        kind = runstate.file_kind(mode)
        if kind is not None:
            raise IOError(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, '%s, not a regular file' % kind, path)
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b''.join(chunks)


def to_native_text(data, errors='replace'):
    """UTF-8 ``data`` (bytes) as the native str; undecodable bytes become U+FFFD, never an exception."""
    text = data.decode('utf-8', errors)
    return text if str is not bytes else text.encode('utf-8')


def read_text(path):
    """Return the content of ``path`` as text (UTF-8, bad bytes replaced), or None when it does not exist."""
    data = read_bytes(path)
    return None if data is None else to_native_text(data)


def host_text(root, path, static=False):
    """``read_text`` of the target path ``path`` under ``root``, read once per run where ``root`` keeps a memo (a
    ``host.Host``): a file the collection never writes (``static``: tuned's main configuration, the stock
    profiles, the kernel's release) in every run, and every file while the host is frozen (``root.read_only``:
    the whole of a tuning_facts run, the planning of the modules that change the host). ``host.Host.thaw`` forgets
    all but the static files, so that a run reads again, after its first change, what it may have changed. An
    unreadable file is not remembered: the error is raised each time."""
    memo = getattr(root, 'memo', None)
    if memo is None or not (static or getattr(root, 'read_only', False)):
        return read_text(root_path(root, path))
    key, other = (('static', path), ('text', path)) if static else (('text', path), ('static', path))
    if key not in memo:
        memo[key] = memo[other] if other in memo else read_text(root_path(root, path))
    return memo[key]


def managed_header(owner, purpose, comment='#'):
    """Lines that say the file is owned by ``owner`` and must not be edited by hand."""
    return [
        '%s %s (%s). Do not edit: the next run rewrites this file.' % (comment, MANAGED_MARK, owner),
        '%s %s' % (comment, purpose),
    ]


def is_managed(text):
    return text is not None and MANAGED_MARK in text


def baseline_line(record, comment='#'):
    """One comment line holding a baseline record (a dict) as sorted, compact JSON."""
    return '%s %s%s' % (comment, BASELINE_PREFIX, json.dumps(record, sort_keys=True, separators=(',', ':')))


def parse_baselines(text, comment='#'):
    """Return the baseline records found in ``text``, in file order.

    Lines that look like baseline records but do not parse are returned as errors rather
    than ignored, so a damaged file is reported instead of silently losing the backout data.
    """
    records, errors = [], []
    prefix = '%s %s' % (comment, BASELINE_PREFIX)
    for number, line in enumerate((text or '').splitlines(), 1):
        if not line.startswith(prefix):
            continue
        record, damage = runstate.parse_json(line[len(prefix):], 'line %d' % number, dict)
        if damage is None:
            records.append(record)
        else:
            errors.append('%s: %s' % (damage[len('damaged: '):], line[:200]))
    return records, errors


def empty_entries(option, values):
    """The error for the empty (or blank) strings in list option ``option``, naming each index; None when
    there is none. An empty path would otherwise resolve to the current directory."""
    bad = ['%s[%d]' % (option, i) for i, v in enumerate(values or []) if _is_text(v) and not v.strip()]
    if not bad:
        return None
    return ('%s %s an empty string: remove %s, or give a value (an empty path is not the current directory).'
            % (', '.join(bad), 'is' if len(bad) == 1 else 'are', 'it' if len(bad) == 1 else 'them'))


def relative_entries(option, values, example='/opt/aem/crx-quickstart/repository'):
    """The error for the entries of list option ``option`` that are not absolute paths, naming each; None when every
    one is. The modules join a path under the host's root (root_path), so ``relative/x`` would be looked up as
    ``/relative/x``. Empty entries are empty_entries' to name. read_ahead and tuning_facts refuse them alike."""
    bad = [v for v in values or [] if _is_text(v) and v.strip() and not v.startswith('/')]
    if not bad:
        return None
    one = len(bad) == 1
    return ('%s %s %s %s: give the full path, for example %s (the module does not resolve a path against a working '
            'directory).' % (option, 'entry' if one else 'entries', ', '.join(repr(v) for v in bad),
                             'is not an absolute path' if one else 'are not absolute paths', example))


def diff_entry(path, before, after):
    """An Ansible diff dict for one file; None content stands for an absent file."""
    return {
        'before_header': path if before is not None else '%s (absent)' % path,
        'after_header': path if after is not None else '%s (absent)' % path,
        'before': before or '',
        'after': after or '',
    }


def atomic_write(path, content, mode=0o644, module=None, owner=(0, 0)):
    """Write ``content`` to ``path`` atomically, owned by ``owner`` (uid, gid) with ``mode``.

    The temporary file is created in the destination directory and renamed over the
    target. With an AnsibleModule, ``module.atomic_move`` does the rename, which also gives
    the file its SELinux context. The owner and mode are set after the move whatever the file
    had before (atomic_move copies them from the file it replaces, so a planted 0666 file of
    another user would otherwise stay theirs); the owner only when running as root.
    """
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix='.aemops-', dir=directory)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(content.encode('utf-8') if not isinstance(content, bytes) else content)
        os.chmod(tmp, mode)
        as_root = owner is not None and hasattr(os, 'geteuid') and os.geteuid() == 0
        if as_root:
            os.chown(tmp, owner[0], owner[1])
        if module is not None:
            module.atomic_move(tmp, path)
        else:
            os.rename(tmp, path)
        if as_root:
            os.lchown(path, owner[0], owner[1])
        os.chmod(path, mode)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def can_create_in(directory, check_only=False):
    """Whether a file can be created in ``directory``: tried for real, unless ``check_only``.

    os.access() says yes to root on /proc or a read-only bind mount; creating (and removing)
    an empty temporary file is the only reliable test before changing anything else.
    """
    if check_only:
        return os.access(directory, os.W_OK)
    try:
        fd, tmp = tempfile.mkstemp(prefix='.aemops-probe-', dir=directory)
    except (IOError, OSError):
        return False
    os.close(fd)
    os.unlink(tmp)
    return True


def remove_file(path, prune_parent=False):
    """Remove ``path``; return True when something was removed.

    ``prune_parent``: also remove its directory when that is now empty, for directories the
    collection owns whole (``/etc/tuned/aemops-os-tuning``, ``/etc/aemops-os-tuning``), never
    for shared ones such as ``/etc/udev/rules.d``.
    """
    try:
        os.unlink(path)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return False
        raise
    if prune_parent:
        try:
            os.rmdir(os.path.dirname(path))
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                raise
    return True


def remove_owned_file(path):
    """remove_file for a file in a directory the collection owns whole: the empty directory goes too."""
    return remove_file(path, prune_parent=True)


# ---------------------------------------------------------------------------------------------
# Errors from the file system, in words an operator can act on.

def describe_os_error(e):
    """A short, specific reason for an IOError/OSError: permission, symlink loop, missing, ..."""
    code = getattr(e, 'errno', None)
    if code in (errno.EACCES, errno.EPERM):
        return 'permission denied (this needs root: become: true)'
    if code == errno.ELOOP:
        return 'too many levels of symbolic links (a symlink loop)'
    if code == errno.ENOENT:
        return 'does not exist'
    if code == errno.ENOTDIR:
        return 'a component of the path is not a directory'
    if code == errno.ENAMETOOLONG:
        return 'the name is too long (longer than PATH_MAX or NAME_MAX)'
    if code == errno.EROFS:
        return 'read-only file system'
    if code == errno.EISDIR:
        return 'is a directory'
    return getattr(e, 'strerror', None) or str(e)


FileError = runstate.FileError
LockCreateError = runstate.LockCreateError


# ---------------------------------------------------------------------------------------------
# Owned files: validated before the first change of a run, read without following or blocking.

MASK_MESSAGE = ('%s is a symbolic link to /dev/null: a mask (udev and systemd switch a file off this way). It is '
                'left alone, never replaced. Remove the mask if it is not wanted, or choose another file.')

# FS_IOC_GETFLAGS is _IOR('f', 1, long) in linux/fs.h; the kernel writes an int. The flags are
# FS_IMMUTABLE_FL and FS_APPEND_FL (chattr +i, chattr +a).
FS_IOC_GETFLAGS = (2 << 30) | (struct.calcsize('l') << 16) | (ord('f') << 8) | 1
FS_IMMUTABLE_FL = 0x00000010
FS_APPEND_FL = 0x00000020


def check_path_form(path, what='file'):
    """Raise FileError unless ``path`` is absolute and normalised (no '..', '.', '//' or trailing '/')."""
    if not isinstance(path, str) and not _is_text(path):
        raise FileError('%s path "%s" is not a string.' % (what, path))
    if not path or not path.startswith('/'):
        raise FileError('%s path "%s" is not absolute: give the full path, for example %s.'
                        % (what, path, '/etc/udev/rules.d/90-aemops-read-ahead.rules'))
    if '\0' in path or '\n' in path:
        raise FileError('%s path "%s" contains a NUL or newline character.' % (what, path))
    if os.path.normpath(path) != path or path.startswith('//'):
        raise FileError('%s path %s is not normalised (it has "..", ".", "//" or a trailing "/"); give it as %s.'
                        % (what, path, os.path.normpath(path)))


def _is_text(value):
    """str on Python 3; str or unicode on Python 2."""
    return isinstance(value, (str, type(u'')))


def inode_flags(path):
    """The FS_IOC_GETFLAGS flags of ``path`` (a regular file or a directory), or None if unsupported."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, 'O_NOFOLLOW', 0))
    except OSError:
        return None
    try:
        buf = array.array('i', [0, 0])  # room for a long; the kernel writes an int at the start
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf, True)
        return buf[0]
    except (IOError, OSError, TypeError, OverflowError):
        return None  # ENOTTY/EINVAL/EOPNOTSUPP: the file system has no such flags
    finally:
        os.close(fd)


def _flag_problem(path, flags):
    if flags is None:
        return None
    if flags & FS_IMMUTABLE_FL:
        return 'is immutable (chattr +i): remove the flag with chattr -i %s, or choose another file' % path
    if flags & FS_APPEND_FL:
        return 'is append-only (chattr +a): remove the flag with chattr -a %s, or choose another file' % path
    return None


def check_owned_target(full, display=None, check_only=False):
    """Prove that the owned file at ``full`` (a host path) can be replaced; raise FileError otherwise.

    Before any change of a run: the path is absolute and normalised; it is a regular file or
    absent (never a device node, FIFO, socket or directory, and never a symbolic link, which
    would be replaced: a udev mask is a link to /dev/null); the file and its directory are not
    immutable or append-only; the directory exists and a file can be created in it.
    ``display`` is the target path shown in messages. Nothing is opened that could block.
    """
    display = display or full
    check_path_form(display)
    try:
        st = os.lstat(full)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise FileError('cannot check %s: %s.' % (display, describe_os_error(e)))
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(full)
        except OSError:
            target = '?'
        try:
            real = os.path.realpath(full)
            os.stat(full)
        except OSError as e:
            raise FileError('%s is a symbolic link (to %s) that cannot be followed: %s. Remove the link; this '
                            'collection owns the file and writes it itself.' % (display, target, describe_os_error(e)))
        if real == '/dev/null' or target == '/dev/null':
            raise FileError(MASK_MESSAGE % display)
        raise FileError('%s is a symbolic link (to %s). This collection owns the file and replaces it atomically, '
                        'which would replace the link: point the setting at the real file, or remove the link.'
                        % (display, target))
    if st is not None:
        kind = runstate.file_kind(st.st_mode)
        if kind is not None:
            raise FileError('%s is %s, not a regular file. Give the path of a regular file (or of one that does not '
                            'exist yet).' % (display, kind))
        problem = _flag_problem(display, inode_flags(full))
        if problem:
            raise FileError('%s %s.' % (display, problem))
    directory = os.path.dirname(full)
    try:
        dst = os.stat(directory)
    except OSError as e:
        raise FileError('the directory of %s cannot be used: %s. Create it first.'
                        % (display, describe_os_error(e)))
    if not stat.S_ISDIR(dst.st_mode):
        raise FileError('the parent of %s is not a directory.' % display)
    problem = _flag_problem(os.path.dirname(display), inode_flags(directory))
    if problem:
        raise FileError('the directory of %s %s.' % (display, problem))
    if not can_create_in(directory, check_only=check_only):
        raise FileError('cannot create files in %s, so %s cannot be written (permission denied or a read-only '
                        'file system). Run as root (become: true) with a path on a writable file system.'
                        % (os.path.dirname(display), display))


def read_owned(full, display=None):
    """The text of an owned file, or None when it is absent; FileError when it is not a regular file.

    It is never opened when it is a FIFO, socket, device node or directory (an open FIFO blocks
    until a writer comes), and it is read as UTF-8 bytes, so no content can raise a traceback.
    """
    display = display or full
    try:
        st = os.lstat(full)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise FileError('cannot read %s: %s.' % (display, describe_os_error(e)))
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(full)
        except OSError as e:
            if e.errno == errno.ENOENT:
                return None  # a dangling link: refused by check_owned_target before any write
            raise FileError('cannot read %s: %s.' % (display, describe_os_error(e)))
        if os.path.realpath(full) == '/dev/null':
            raise FileError(MASK_MESSAGE % display)
    kind = runstate.file_kind(st.st_mode)
    if kind is not None:
        raise FileError('%s is %s, not a regular file; it is not read. Give the path of a regular file.'
                        % (display, kind))
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise FileError('cannot read %s: %s.' % (display, describe_os_error(e)))
    chunks = []
    try:
        if runstate.file_kind(os.fstat(fd).st_mode) is not None:
            raise FileError('%s changed into a non-regular file while being read.' % display)
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as e:
        raise FileError('cannot read %s: %s.' % (display, describe_os_error(e)))
    finally:
        os.close(fd)
    data = b''.join(chunks)
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise FileError('%s is not UTF-8 text (byte %d): it was not written by this collection. Restore it from '
                        'backup or remove it.' % (display, e.start))
    return text if str is not bytes else data


# ---------------------------------------------------------------------------------------------
# One advisory lock per owned file, in the runtime-state home (runstate.RUN_DIR).

LOCK_DIR = runstate.RUN_DIR
DEFAULT_LOCK_TIMEOUT = runstate.DEFAULT_LOCK_TIMEOUT


def lock_file_for(root, path):
    """The lock file (host path) that guards owned file ``path`` (a target path).

    It lives in /run/aemops-os-tuning (a tmpfs, emptied at boot; see runstate), not beside the
    file: nothing is added to /etc/udev/rules.d or /etc/tuned, and the name says which file it
    guards. It exists only while a run holds it.
    """
    return runstate.lock_path(root, _lock_name(path))


def _lock_name(path):
    name = path.strip('/').replace('%', '%25').replace('/', '%2F') or 'root'
    if len(name) > 200:
        name = name[:160] + '.' + hashlib.sha1(path.encode('utf-8')).hexdigest()
    return name + '.lock'


def locked(path, root='/', timeout=None, poll=0.05, required=True):
    """Hold the advisory lock (fcntl.flock) of owned file ``path`` (a target path) for a read-modify-write.

    Waits at most ``timeout`` seconds, then raises FileError naming the file, the lock file
    and the process that holds it (from /proc/locks). With ``required=False`` (check mode:
    nothing is written) a lock file that cannot be created (no root) is skipped instead of
    raising. Re-entrant in one process. Concurrent runs (two modules, two hosts of a play
    delegated to one machine) serialise, and no rule or baseline is lost. The lock directory and
    file are checked before use (runstate): anything another user planted is refused.
    """
    return runstate.locked(root, _lock_name(path), path, timeout=timeout, poll=poll, required=required)


@contextlib.contextmanager
def locked_all(paths, root='/', timeout=None, required=None):
    """Hold the locks of several owned files, always taken in sorted order (so runs cannot deadlock).

    ``required`` None: required when the run is root. A run that is not root cannot create a lock
    in the root-only runtime directory, nor write any file root owns: it goes on without the locks
    and its plan refuses every write it cannot make (naming the file and that it needs root), while
    a run that changes nothing still succeeds.
    """
    if required is None:
        required = runstate.euid() == 0
    stack = []
    wanted = sorted(set(p for p in paths if p))
    try:
        for path in wanted:
            cm = locked(path, root, timeout, required=required)
            try:
                cm.__enter__()
            except LockCreateError as e:
                if len(wanted) < 2:
                    raise
                # Name every file the run would write, not only the first in lock order.
                raise LockCreateError('%s This run writes %s.' % (e, ', '.join(wanted)))
            stack.append(cm)
        yield
    finally:
        while stack:
            stack.pop().__exit__(None, None, None)
