# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The snapshot of a host from before the collection's first change: an Ansible local fact, written once.

Plain functions over a root path (``/`` on a host, a fake tree in the unit tests); the
``tuning_snapshot`` module is the only caller that writes.

- :func:`read_snapshot`: the record (a dict), None when absent, or ``{'error': ...}`` for a damaged
  or hostile file (runstate.read_json: never followed, never waited on, size-capped).
- :func:`write_snapshot`: written once, as JSON ``{'taken', 'created_dirs', 'os_tuning'}`` (indent 2,
  sorted keys, a trailing newline, mode 0644, files.atomic_write). Whatever is already at the path (a
  snapshot, or a damaged or non-regular file) is kept, never replaced. The directories created for it are
  recorded in it (``created_dirs``, outermost first).
- :func:`remove_snapshot`: the file, and then the directories it recorded creating, only ancestors of
  the snapshot, deepest first, each only while empty.

Root trusts nothing another user can write: before anything is written or removed, every existing
directory above the snapshot must be a real directory (not a symbolic link), owned by root (or by this
run's user, for tests) and not writable by group or others (runstate.check_dir), so that no other user
can put something at the path, or swap a directory, between the check and the write. Otherwise
:class:`SnapshotError` names the directory, what is wrong and the fix, and nothing is changed.

Python 2.7, 3.6 and newer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.aemops.os_tuning.plugins.module_utils import compliance, files, runstate

DEFAULT_PATH = '/etc/ansible/facts.d/aem_tuning_before.fact'
# What tuning_facts adds to the host's facts for one run (its plan, the misses, the readers it found, the snapshot
# it read, the EBS volumes' counters of the moment): not the host's settings, so not recorded.
SNAPSHOT_KEYS_LEFT_OUT = ('snapshot', 'plan', 'compliance', 'readers', 'ebs')
FILE_MODE = 0o644
DIR_MODE = 0o755


class SnapshotError(files.FileError):
    """The snapshot cannot be written or removed safely; nothing was changed. The message names the path,
    what is wrong and the fix."""


def read_snapshot(root, path):
    """The snapshot (a dict), None when absent, or {'error': 'damaged: <path>: <why> ...'} (runstate.read_json)."""
    data, damage = runstate.read_json(files.root_path(root, path), path, dict)
    if damage:
        return {'error': '%s: restore it from backup, or delete it to take a new snapshot.' % damage}
    return data


def record(facts, taken, created_dirs):
    """The snapshot as it is written: the facts without SNAPSHOT_KEYS_LEFT_OUT."""
    return {'taken': taken, 'created_dirs': list(created_dirs),
            'os_tuning': dict((k, v) for k, v in facts.items() if k not in SNAPSHOT_KEYS_LEFT_OUT)}


render = runstate.json_text  # the file's text


def write_snapshot(root, path, facts, taken, check_mode=False, module=None):
    """Write the snapshot once; the directories created for it are recorded in it. Returns changed (in check
    mode: whether it would be written).

    Whatever is at the path already (a snapshot, or a damaged or non-regular file) is kept, never replaced:
    False. SnapshotError, having written nothing, when the path or a directory above it is unsafe (see the
    module docstring) or the file cannot be created there. ``module``: an AnsibleModule, whose atomic_move
    gives the file its SELinux context."""
    full = files.root_path(root, path)
    check_path(path)
    if os.path.lexists(full):
        return False
    missing = check_ancestors(root, path, 'write')
    if missing:
        parent = os.path.dirname(missing[0])
        if not files.can_create_in(files.root_path(root, parent), check_only=check_mode):
            raise SnapshotError('cannot write the snapshot %s: cannot create %s in %s (permission denied or a '
                                'read-only file system). Nothing was written. Run as root (become: true), or give '
                                'a path on a writable file system.' % (path, missing[0], parent))
    else:
        _owned_target(full, path, check_mode)
    if check_mode:
        return True
    created = []
    try:
        for directory in missing:
            os.mkdir(files.root_path(root, directory), DIR_MODE)
            created.append(directory)
            os.chmod(files.root_path(root, directory), DIR_MODE)  # whatever the umask
        files.atomic_write(full, render(record(facts, taken, created)), FILE_MODE, module)
    except (IOError, OSError) as e:
        _remove_dirs(root, created)
        raise SnapshotError('cannot write the snapshot %s: %s. Nothing was left behind. Run as root (become: true), '
                            'or give a path on a writable file system.' % (path, files.describe_os_error(e)))
    return True


def remove_snapshot(root, path, snapshot, check_mode=False):
    """Remove the snapshot, and the (now empty) directories it recorded creating. Returns changed.

    ``snapshot`` is what read_snapshot returned: None (nothing there) changes nothing; a damaged file
    (``{'error': ...}``) is removed, but no directory is, since its record is not trusted. Only recorded
    directories above the snapshot are removed, deepest first, and only while empty: a hand-edited list
    cannot remove other directories."""
    if snapshot is None:
        return False
    check_path(path)
    check_ancestors(root, path, 'remove')
    if check_mode:
        return True
    try:
        files.remove_file(files.root_path(root, path))
    except (IOError, OSError) as e:
        raise SnapshotError('cannot remove the snapshot %s: %s. Nothing was removed. Remove it by hand, or run as '
                            'root (become: true).' % (path, files.describe_os_error(e)))
    created = snapshot.get('created_dirs') if isinstance(snapshot.get('created_dirs'), list) else []
    # Only ancestors of the snapshot, deepest first: a hand-edited list cannot remove other directories.
    ancestors = [d for d in created if isinstance(d, compliance.STRING_TYPES) and path.startswith(d.rstrip('/') + '/')]
    _remove_dirs(root, ancestors)
    return True


def _remove_dirs(root, directories):
    for directory in sorted(directories, key=len, reverse=True):
        try:
            os.rmdir(files.root_path(root, directory))
        except OSError:
            break  # not empty, or already gone: keep it and everything above it


def check_path(path):
    """Raise SnapshotError unless ``path`` is an absolute, normalised path of a file."""
    if not isinstance(path, compliance.STRING_TYPES) or not path.startswith('/') or path.rstrip('/') == '':
        raise SnapshotError('the snapshot path "%s" is not the absolute path of a file: give one, for example %s.'
                            % (path, DEFAULT_PATH))
    try:
        files.check_path_form(path, 'snapshot')
    except files.FileError as e:
        raise SnapshotError(e.args[0] if e.args else str(e))


def check_ancestors(root, path, verb):
    """Check every existing directory above ``path`` (outermost first) with runstate.check_above; return the
    missing ones (outermost first), which a write creates. SnapshotError names the first unsafe one."""
    try:
        return runstate.check_above(root, path)
    except runstate.UnsafeDirError as e:
        raise SnapshotError(_unsafe(path, e.display, e, verb))
    except OSError as e:
        raise SnapshotError('cannot %s the snapshot %s: cannot check a directory above it: %s. Nothing was %s.'
                            % (verb, path, files.describe_os_error(e), _done(verb)))


def _done(verb):
    return 'written' if verb == 'write' else 'removed'


def _unsafe(path, directory, found, verb):
    """The refusal for ``found`` (runstate.UnsafeDirError), with a fix for /etc, not the one check_dir gives for the
    collection's own runtime directory (rm -rf)."""
    if found.kind == 'link':
        fix = ('A symbolic link above the snapshot is never followed: give the real path, or replace the link with a '
               'directory.')
    elif found.kind == 'type':
        fix = 'Move it away, or give another path.'
    elif found.kind == 'shared':
        fix = 'Give a path outside it: a directory all users share is never made private.'
    else:
        fix = ('Make it root\'s and not writable by others (chown root:root %s; chmod go-w %s), or give another path.'
               % (directory, directory))
    return ('cannot %s the snapshot %s: %s, above it, %s: another user could put a file or link of their own there '
            'for root to %s. Nothing was %s. %s' % (verb, path, directory, found.problem, verb, _done(verb), fix))


def _owned_target(full, display, check_mode):
    """files.check_owned_target for an absent snapshot whose directory exists: not immutable, writable."""
    try:
        files.check_owned_target(full, display, check_only=check_mode)
    except files.FileError as e:
        raise SnapshotError('cannot write the snapshot: %s Nothing was written.'
                            % (e.args[0] if e.args else str(e)))
