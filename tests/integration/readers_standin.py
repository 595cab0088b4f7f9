# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A stand-in for a reader that was already running: it maps a file as Oak or Lucene does, then measures.

Usage: readers_standin.py keep|close FILE DEVICE CONTROL_FIFO RESULTS

- ``keep``: open, mmap, keep the descriptor (Oak's FileAccess.Mapped holds its RandomAccessFile);
- ``close``: open, mmap, close the descriptor (Lucene's MMapDirectory closes the channel after mapping).

The mapping is made with libc's mmap through ctypes, not Python's mmap module, which keeps a
duplicate of the descriptor of its own (before Python 3.13's trackfd=False) and so could not
close it. The same system calls as a JVM: open, mmap(PROT_READ, MAP_SHARED), close or not.

Each line ``measure SEED N`` on CONTROL_FIFO faults N random 8 KiB records (two pages each) and
appends one JSON line to RESULTS: the device's sectors read (/sys/block/DEVICE/stat, field 3)
before and after, and ``amplification``: device bytes read per byte of the records faulted.
The caller drops the page cache before each measurement. ``quit`` ends the program.
"""

from __future__ import absolute_import, division, print_function

import ctypes
import ctypes.util
import json
import os
import random
import sys

PROT_READ = 1
MAP_SHARED = 1
RECORD = 8192
PAGE = 4096


def sectors_read(device):
    with open('/sys/block/%s/stat' % device) as f:
        return int(f.read().split()[2])


def main(argv):
    mode, path, device, control, results = argv[1:6]
    libc = ctypes.CDLL(ctypes.util.find_library('c') or None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), 'mmap failed')
    if mode == 'close':
        os.close(fd)
    with open(results, 'a') as out:
        out.write(json.dumps({'ready': True, 'pid': os.getpid(), 'mode': mode}) + '\n')
    while True:
        with open(control) as ctl:
            lines = ctl.read().split('\n')
        for line in lines:
            words = line.split()
            if not words:
                continue
            if words[0] == 'quit':
                return 0
            seed, count = int(words[1]), int(words[2])
            records = random.Random(seed).sample(range(size // RECORD), count)
            before = sectors_read(device)
            total = 0
            for record in records:
                for page in (0, PAGE):
                    total += ord(ctypes.string_at(addr + record * RECORD + page, 1))
            after = sectors_read(device)
            with open(results, 'a') as out:
                out.write(json.dumps({'mode': mode, 'records': count, 'sectors': after - before,
                                      'amplification': round((after - before) * 512.0 / (count * RECORD), 2),
                                      'checksum': total}) + '\n')


if __name__ == '__main__':
    sys.exit(main(sys.argv))
