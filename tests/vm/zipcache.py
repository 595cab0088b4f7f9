# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Test VM only: keep the bytecode that zipimport compiles for Ansible's module payloads.

Every module run sends a fresh AnsiballZ zip, and Python compiles each source in it again:
ansible.module_utils.basic and its imports, and this collection's module_utils. A regular import
would find a .pyc; zipimport cannot write one. Under TCG that compiling is a third to nearly half
of a module run (docs/testing.md, "Where the time goes"). `vm.sh up` and `vm.sh upgrade` put this
file and a .pth that imports it into the site-packages directory of the guest's /usr/bin/python3
(AEMOPS_VM_PYCACHE=0: they do not). From then on zipimport's compile step looks in CACHE first,
by the sha256 of Python's bytecode magic, the file's path inside the zip and its source. The
code object it returns is the one compile() would return, with the file name of this run, so a
traceback names the right file. Nothing else changes: the same source runs, and the
interpreters that have no Python zipimport (2.7, 3.6) compile as before.

What root reads back here, it checks first: CACHE must be a real directory owned by root with
mode 0700, entries are read with O_NOFOLLOW and at most MAX_BYTES, and anything that does not
unmarshal into a code object is compiled again and replaced.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import zipimport

CACHE = '/var/cache/aemops-zipimport'
MAX_BYTES = 8 * 1024 * 1024

_COMPILE = getattr(zipimport, '_compile_source', None)


def _trusted():
    if os.geteuid() != 0:
        return False
    try:
        st = os.lstat(CACHE)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700


def _sha256(data):
    try:
        from _sha2 import sha256  # Python 3.12 and later: no OpenSSL to load
    except ImportError:
        try:
            from _sha256 import sha256  # 3.8 to 3.11
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()


def _renamed(code, filename):
    consts = tuple(_renamed(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _read(path):
    fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    return data if len(data) <= MAX_BYTES else None


def _write(path, code):
    import marshal
    tmp = '%s.%d.tmp' % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0), 0o600)
    try:
        os.write(fd, marshal.dumps(code))
    finally:
        os.close(fd)
    os.rename(tmp, path)


def compile_cached(pathname, source):
    """zipimport._compile_source, with the code objects kept in CACHE."""
    if not _trusted():
        return _COMPILE(pathname, source)
    import marshal
    from _frozen_importlib_external import MAGIC_NUMBER
    raw = source if isinstance(source, bytes) else source.encode('utf-8')
    inner = pathname.replace(os.sep, '/')
    cut = inner.find('.zip/')
    inner = inner[cut + 5:] if cut >= 0 else inner
    path = os.path.join(CACHE, _sha256(MAGIC_NUMBER + inner.encode('utf-8') + b'\0' + raw))
    try:
        data = _read(path)
        code = marshal.loads(data) if data else None
        if isinstance(code, type(compile_cached.__code__)):
            return _renamed(code, pathname)
    except (OSError, EOFError, ValueError, TypeError):
        pass
    code = _COMPILE(pathname, source)
    try:
        _write(path, code)
    except OSError:
        pass
    return code


if _COMPILE is not None and hasattr(compile_cached.__code__, 'replace'):
    zipimport._compile_source = compile_cached
