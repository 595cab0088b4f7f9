# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a command as on a kernel without pidfd_open(2) and pidfd_getfd(2), as RHEL 7 (3.10) and RHEL 8 (4.18) are.

Usage: python3 no_pidfd.py COMMAND [ARG...]

A seccomp filter makes syscalls 434 (pidfd_open) and 438 (pidfd_getfd) fail with ENOSYS, which is what a
kernel without them answers (the RHEL 8.6 kernel's x86_64 syscall table has neither:
../shared/research/rhel8-pidfd-and-ebs-log-page.md); every other call is allowed, and the command and its
children inherit the filter. x86_64 only (the numbers are the same on every architecture but alpha; the
filter checks the audit arch and allows everything on another). Installed with prctl(PR_SET_NO_NEW_PRIVS)
and prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER), then exec. Python 3 or 2.7 (it is copied into the test VM
as the targets' interpreter wrapper).
"""

import ctypes
import errno
import os
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
# classic BPF opcodes
LD_W_ABS = 0x20     # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15        # BPF_JMP | BPF_JEQ | BPF_K
RET_K = 0x06        # BPF_RET | BPF_K
# struct seccomp_data: int nr at 0, __u32 arch at 4
OFF_NR, OFF_ARCH = 0, 4
SYSCALLS = (434, 438)  # pidfd_open, pidfd_getfd


def program():
    insns = [
        (LD_W_ABS, 0, 0, OFF_ARCH),
        (JEQ_K, 0, 3, AUDIT_ARCH_X86_64),      # another arch: jump 3 past the next, to ALLOW
        (LD_W_ABS, 0, 0, OFF_NR),
        (JEQ_K, 2, 0, SYSCALLS[0]),
        (JEQ_K, 1, 0, SYSCALLS[1]),
        (RET_K, 0, 0, SECCOMP_RET_ALLOW),
        (RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    return insns


def install():
    insns = program()
    raw = b''.join(struct.pack('HBBI', *i) for i in insns)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]

    prog = SockFprog(len(insns), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), 'prctl(PR_SET_NO_NEW_PRIVS)')
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), 'prctl(PR_SET_SECCOMP)')


def main():
    if len(sys.argv) < 2:
        sys.stderr.write('usage: no_pidfd.py COMMAND [ARG...]\n')
        return 2
    install()
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == '__main__':
    sys.exit(main())
