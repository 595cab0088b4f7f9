# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""`tests/vm/vm.sh _watch` starts a fresh qemu after the guest's own reboot, and only then.

start_qemu runs qemu with -action reboot=shutdown and leaves a watcher beside it. When that qemu
exits, the watcher starts the next one on the same run state if the console since the last start
ends in the kernel's "reboot: Restarting system" (Debian's 5.10, 6.1 and 6.12 print it, as in the
serial logs of run 4), and vm.sh did not stop it itself ($RUN/hold). A poweroff or a kill leaves
the guest down. No VM runs here: a stand-in qemu on PATH records its arguments and leaves a
process named like qemu's (aemops-vm) as the daemon.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess
import time

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
VM_SH = os.path.join(TOP, 'tests', 'vm', 'vm.sh')

FAKE_QEMU = r'''#!/bin/bash
# Stand-in for qemu-system-x86_64 -daemonize -pidfile F: record the arguments, leave a daemon.
set -eu
n=$(ls "$AEMOPS_VM_RUN"/qemu-args.* 2>/dev/null | wc -l)
printf '%s\n' "$@" >"$AEMOPS_VM_RUN/qemu-args.$n"
pidfile=
while [ $# -gt 0 ]; do [ "$1" = -pidfile ] && pidfile=$2; shift; done
setsid bash -c 'exec -a aemops-vm sleep 30' </dev/null >/dev/null 2>&1 &
echo $! >"$pidfile"
'''

BOOT = [
    '=== qemu start 11:53:58 boot=kernel accel=tcg nvme-order=ab port=51465',
    '[    0.000000] Linux version 6.1.0-57-amd64 (debian-kernel@lists.debian.org) #1 SMP',
    'aemvm login: ',
]


def _kill(path):
    try:
        with open(path) as f:
            os.kill(int(f.read().strip()), signal.SIGKILL)
    except (IOError, OSError, ValueError):
        pass


def watch(tmp_path, last_lines, hold=False, env=None):
    """Run the watcher over a qemu that exits at once; return the run dir and what it did."""
    run = tmp_path / 'run'
    (run / 'disks').mkdir(parents=True)
    for name, text in (('.aemops-vm', ''), ('image', str(tmp_path / 'image')), ('boot', 'kernel'),
                       ('accel', 'tcg'), ('nvme-order', 'ab'), ('port', '51465'), ('nvme-caps', 'none'),
                       ('id_ed25519.pub', 'ssh-ed25519 AAAA test')):
        (run / name).write_text(text + ('\n' if text else ''))
    (run / 'serial.log').write_bytes(('\r\n'.join(BOOT + last_lines) + '\r\n').encode('utf-8'))
    if hold:
        (run / 'hold').write_text('')
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    (bindir / 'qemu-system-x86_64').write_text(FAKE_QEMU)
    (bindir / 'qemu-system-x86_64').chmod(0o755)
    # The qemu that is about to exit: a process named like ours, gone after a second.
    old = subprocess.Popen(['bash', '-c', 'exec -a aemops-vm sleep 1'])
    (run / 'qemu.pid').write_text('%d\n' % old.pid)
    full = dict(os.environ, AEMOPS_VM_RUN=str(run), PATH='%s:%s' % (bindir, os.environ['PATH']))
    full.pop('AEMOPS_VM_SMP', None)
    full.update(env or {})
    try:
        watcher = subprocess.Popen([VM_SH, '_watch'], env=full, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = watcher.communicate(timeout=60)[0]
        old.wait()
        # A new qemu has a watcher of its own, which replaces this one's pid in watch.pid when it
        # starts: wait for it, so that the cleanup below ends it.
        deadline = time.time() + 10
        while (run / 'qemu-args.0').exists() and time.time() < deadline \
                and (run / 'watch.pid').read_text().strip() == str(watcher.pid):
            time.sleep(0.1)
        return run, watcher.returncode, out.decode('utf-8', 'replace')
    finally:
        old.kill()
        _kill(str(run / 'watch.pid'))
        if (run / 'qemu-args.0').exists():
            _kill(str(run / 'qemu.pid'))


def started(run):
    return sorted(p.name for p in run.iterdir() if p.name.startswith('qemu-args.'))


def test_a_guest_reset_gets_a_fresh_qemu_with_one_vcpu(tmp_path):
    run, rc, out = watch(tmp_path, ['[  252.525544] reboot: Restarting system',
                                    '[  252.525868] reboot: machine restart'])
    assert rc == 0, out
    assert started(run) == ['qemu-args.0'], out
    args = (run / 'qemu-args.0').read_text().splitlines()
    assert args[args.index('-smp') + 1] == '1'
    assert args[args.index('-action') + 1] == 'reboot=shutdown'
    assert 'exited at the guest\'s own reboot' in out
    serial = (run / 'serial.log').read_text()
    assert serial.count('=== qemu start') == 2
    assert 'hold' not in os.listdir(str(run))


def test_aemops_vm_smp_still_decides_the_vcpus(tmp_path):
    run, rc, out = watch(tmp_path, ['[  252.525544] reboot: Restarting system'], env={'AEMOPS_VM_SMP': '2'})
    assert rc == 0, out
    args = (run / 'qemu-args.0').read_text().splitlines()
    assert args[args.index('-smp') + 1] == '2'


def test_a_poweroff_leaves_the_guest_down(tmp_path):
    run, rc, out = watch(tmp_path, ['[  134.080474] reboot: Power down'])
    assert rc == 0, out
    assert started(run) == [], out


def test_a_reset_before_the_last_start_does_not_count(tmp_path):
    # The earlier boot ended in a reset and qemu was started again; the last one was killed.
    run, rc, out = watch(tmp_path, ['[  252.525544] reboot: Restarting system'] + BOOT)
    assert rc == 0, out
    assert started(run) == [], out


def test_vm_sh_stopping_the_guest_itself_is_not_restarted(tmp_path):
    run, rc, out = watch(tmp_path, ['[  252.525544] reboot: Restarting system'], hold=True)
    assert rc == 0, out
    assert started(run) == [], out
