# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The processes, records and plans the reader tests share (tests/unit/plugins/module_utils/test_readers*.py), on
the fake host (fakehost.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_record, readers_scan, readers_verdict

SEG = '/opt/aem/crx-quickstart/repository/segmentstore'
NUMBERS = {'253:0': 'dm-0'}


def oak(host, pid=4242, start_ticks=5000, uid=0):
    """Oak: two tar files open and mapped (FileAccess.Mapped keeps the descriptor), a socket, a jar on /."""
    return host.add_process(pid, 'java', start_ticks, uid=uid, fds={
        3: ('/usr/lib/jvm/lib/modules', '259:1', 77),
        4: ('socket:[12345]', '0:8', 12345),
        10: (SEG + '/data00000a.tar', '253:0', 131),
        11: (SEG + '/data00001a.tar', '253:0', 132),
    }, maps=[
        '7f0000000000-7f0000100000 r--s 00000000 fd:00 131                        %s/data00000a.tar' % SEG,
        '7f0000100000-7f0000200000 r--s 00100000 fd:00 131                        %s/data00000a.tar' % SEG,
        '7f0000200000-7f0000300000 r--s 00000000 fd:00 132                        %s/data00001a.tar' % SEG,
        '7f0000300000-7f0000400000 r-xp 00000000 103:01 77                        /usr/lib/jvm/lib/modules',
        '7f0000400000-7f0000500000 rw-p 00000000 00:00 0 ',
    ])


def lucene(host, pid=4300, start_ticks=5100):
    """Lucene's MMapDirectory: the index file is mapped, its descriptor closed; the name has spaces and was deleted."""
    return host.add_process(pid, 'java', start_ticks, unit='aem.service', fds={}, maps=[
        '7f1000000000-7f1000100000 r--s 00000000 fd:00 200                        '
        '/opt/aem/crx-quickstart/repository/index/lucene 1/_0.cfs (deleted)',
    ])


def scan(host, procfs=None):
    return readers_scan.scan(procfs or host.proc_procfs(), NUMBERS)


DEVICES = {'253:0': {'name': 'dm-0', 'kb': 32, 'seq': None}}


def record(stale=(), kb=32, boot='boot-1'):
    return {'format': 1, 'boot_id': boot,
            'devices': {'253:0': {'name': 'dm-0', 'kb': kb, 'since': 1764650100.0, 'stale': [list(s) for s in stale]}}}


def stale_summary(assessed):
    return [(a['pid'], [i['fd'] for i in a['stale_fds']], [i['ino'] for i in a['stale_maps']], a['fresh'])
            for a in assessed]


def planned(host):
    assessed = readers_verdict.assess(scan(host), DEVICES, None, 'boot-1')
    return readers_verdict.plan_refresh(assessed, {'253:0': None})['refresh']


def hung_mount_user(host, pid=9100, mnt_id=True):
    """An unprivileged user's process with a file open on a FUSE mount whose server no longer answers."""
    host.add_process(pid, 'cat', 9500, unit='session-3.scope', uid=1000, mnt_id=mnt_id, fds={
        3: ('/mnt/s3/assets/big.bin', '0:55', 77)})


def booted_host(host, rule_age=3600, initialized_s=4.5):
    """After a reboot: no record; the rules file was written before the boot; udev initialised dm-0 4.5 s
    after boot; Oak started 50 s after boot (start_ticks 5000 at 100 Hz)."""
    host.write(readers_record.BOOT_ID, 'boot-2\n')
    host.write('/etc/udev/rules.d/90-aemops-read-ahead.rules', '# ours\n')
    os.utime(host.path('/etc/udev/rules.d/90-aemops-read-ahead.rules'), (1764650000 - rule_age,) * 2)
    host.write('/run/udev/data/b253:0', host.read('/run/udev/data/b253:0') + 'I:%d\n' % (initialized_s * 1e6))
    oak(host)


def settled(host, record=None, persisted=32, changed=()):
    devices = {'253:0': {'name': 'dm-0', 'kernel': 'dm-0', 'kb': 32, 'seq': None}}
    return readers_verdict.settled_since(host.root, devices, record, 'boot-2', set(changed), {'dm-0': persisted},
                                         ['/etc/udev/rules.d/90-aemops-read-ahead.rules'], 1764650000)
