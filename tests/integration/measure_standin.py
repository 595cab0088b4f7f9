# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readers of one kind each, for tests/integration/measure.sh: measured from outside, never by themselves.

Usage: measure_standin.py KIND FILE READY [THREADS | OTHER [CHUNK]]

- ``mmap``: open, mmap (PROT_READ, MAP_SHARED, as a JVM's FileChannel.map), keep the descriptor,
  then fault random 8 KiB records (two pages each) without end, one every 20 ms (Oak's
  FileAccess.Mapped);
- ``threads``: the same mapping, faulted by THREADS threads (default 4) while the main thread only
  waits: the process's major faults are its threads';
- ``idle``: the same mapping, never touched (an AEM with nothing to do);
- ``pread``: open, no mapping, random 8 KiB ``pread()`` calls, one every 5 ms (a descriptor-only
  random reader);
- ``mixed``: the ``mmap`` reader, whose main thread also streams OTHER with ``read()`` calls of CHUNK bytes (default 65536) as ``read``
  does, opened once READY.go exists (so at another read-ahead value than the mapping);
- ``read``: open, no mapping, sequential 64 KiB ``read()`` calls, one every 5 ms, from the start
  again at the end (a log shipper, a backup agent, the FileDataStore's binaries);
- ``busy``: the ``mmap`` reader, faulting one record every 66 ms only while READY.go exists, and
  dropping its file's pages every second (madvise MADV_DONTNEED on the mapping, then
  posix_fadvise POSIX_FADV_DONTNEED) so that its faults keep reading from the device: an AEM that
  keeps reading, in a guest where nobody drops the caches for it (the VM's start-guard step).

The mapping is made with libc's mmap through ctypes (as tests/integration/readers_standin.py: the
same system calls as a JVM). READY is written (the pid) once the file is open and mapped, before
the first read. The program runs until it is killed.
"""

from __future__ import absolute_import, division, print_function

import ctypes
import ctypes.util
import os
import random
import sys
import threading
import time

PROT_READ = 1
MAP_SHARED = 1
RECORD = 8192
PAGE = 4096


def mapping(fd, size):
    libc = ctypes.CDLL(ctypes.util.find_library('c') or None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), 'mmap failed')
    return addr


def fault_forever(addr, size, seed):
    rng = random.Random(seed)
    records = size // RECORD
    total = 0
    while True:
        record = rng.randrange(records)
        for page in (0, PAGE):
            total += ord(ctypes.string_at(addr + record * RECORD + page, 1))
        time.sleep(0.02)


def busy_while_asked(addr, size, fd, go):
    libc = ctypes.CDLL(ctypes.util.find_library('c') or None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rng = random.Random(os.getpid())
    dropped = time.time()
    while True:
        if not os.path.exists(go):
            time.sleep(0.2)
            continue
        record = rng.randrange(size // RECORD)
        ctypes.string_at(addr + record * RECORD, 1)
        if time.time() - dropped >= 1:
            libc.madvise(addr, size, 4)  # MADV_DONTNEED: the pages are no longer mapped, so they can be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            dropped = time.time()
        time.sleep(0.066)


def pread_forever(fd, size):
    rng = random.Random(1)
    while True:
        os.pread(fd, RECORD, rng.randrange(size // RECORD) * RECORD)
        time.sleep(0.005)


def read_forever(fd, chunk=65536):
    while True:
        if not os.read(fd, chunk):
            os.lseek(fd, 0, os.SEEK_SET)
        time.sleep(0.005)


def main(argv):
    kind, path, ready = argv[1:4]
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    addr = mapping(fd, size) if kind in ('mmap', 'threads', 'idle', 'mixed', 'busy') else None
    with open(ready, 'w') as out:
        out.write('%d\n' % os.getpid())
    if kind == 'mmap':
        fault_forever(addr, size, 1)
    elif kind == 'threads':
        for n in range(int(argv[4]) if len(argv) > 4 else 4):
            t = threading.Thread(target=fault_forever, args=(addr, size, 100 + n))
            t.daemon = True
            t.start()
    elif kind == 'mixed':
        while not os.path.exists(ready + '.go'):
            time.sleep(0.05)
        other = os.open(argv[4], os.O_RDONLY)
        t = threading.Thread(target=fault_forever, args=(addr, size, 7))
        t.daemon = True
        t.start()
        read_forever(other, int(argv[5]) if len(argv) > 5 else 65536)
    elif kind == 'busy':
        busy_while_asked(addr, size, fd, ready + '.go')
    elif kind == 'pread':
        pread_forever(fd, size)
    elif kind == 'read':
        read_forever(fd)
    while True:
        time.sleep(3600)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
