# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A FUSE filesystem whose server stops answering getattr: the stand-in for an NFS, EFS or s3fs mount whose
server went away (tests/integration/readers.sh, issue 34).

Usage: python3 hang_fuse.py MOUNTPOINT CONTROL_DIR   (as root; foreground; fusepy over libfuse2)

The root holds one file, ``big.bin`` (64 MiB of zeros). Once CONTROL_DIR/hang exists, every getattr is
written to CONTROL_DIR/getattr.log and then never answered (the calling thread waits forever), so a
``stat`` that reaches the mount blocks, as it does on a hard NFS mount. Mounted with ``allow_other``
(another user's process holds the file) and attribute caching off, so that each ``stat`` asks the server.
"""

import errno
import os
import stat
import sys
import threading
import time

from fuse import FUSE, FuseOSError, Operations  # fusepy

SIZE = 64 << 20


class Hanging(Operations):
    def __init__(self, control):
        self.control = control
        self.never = threading.Event()

    def _maybe_hang(self, path):
        if os.path.exists(os.path.join(self.control, 'hang')):
            with open(os.path.join(self.control, 'getattr.log'), 'a') as log:
                log.write('%.3f %s\n' % (time.time(), path))
            self.never.wait()

    def getattr(self, path, fh=None):
        self._maybe_hang(path)
        now = time.time()
        if path == '/':
            return {'st_mode': stat.S_IFDIR | 0o755, 'st_nlink': 2, 'st_ctime': now, 'st_mtime': now, 'st_atime': now}
        if path == '/big.bin':
            return {'st_mode': stat.S_IFREG | 0o444, 'st_nlink': 1, 'st_size': SIZE, 'st_ctime': now,
                    'st_mtime': now, 'st_atime': now}
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return ['.', '..', 'big.bin']

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        return b'\0' * max(0, min(size, SIZE - offset))


def main():
    mountpoint, control = sys.argv[1], sys.argv[2]
    FUSE(Hanging(control), mountpoint, foreground=True, allow_other=True, attr_timeout=0, entry_timeout=0,
         fsname='aemops-hang')


if __name__ == '__main__':
    main()
