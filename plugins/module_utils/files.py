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

import errno
import json
import os
import tempfile

MANAGED_MARK = 'Managed by aemops.os_tuning'
BASELINE_PREFIX = 'aemops-baseline '


def root_path(root, path):
    """Join an absolute target path under ``root`` (``/`` on a real host)."""
    return os.path.join(root, path.lstrip('/'))


def read_text(path):
    """Return the content of ``path``, or None when it does not exist."""
    try:
        with open(path) as f:
            return f.read()
    except IOError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise


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
        try:
            record = json.loads(line[len(prefix):])
        except ValueError:
            errors.append('line %d: %s' % (number, line))
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            errors.append('line %d: %s' % (number, line))
    return records, errors


def diff_entry(path, before, after):
    """An Ansible diff dict for one file; None content stands for an absent file."""
    return {
        'before_header': path if before is not None else '%s (absent)' % path,
        'after_header': path if after is not None else '%s (absent)' % path,
        'before': before or '',
        'after': after or '',
    }


def atomic_write(path, content, mode=0o644, module=None):
    """Write ``content`` to ``path`` atomically with ``mode``.

    The temporary file is created in the destination directory and renamed over the
    target. With an AnsibleModule, ``module.atomic_move`` does the rename, which also keeps
    the SELinux context of an existing file.
    """
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix='.aemops-', dir=directory)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(content)
        os.chmod(tmp, mode)
        if module is not None:
            module.atomic_move(tmp, path)
            os.chmod(path, mode)
        else:
            os.rename(tmp, path)
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
