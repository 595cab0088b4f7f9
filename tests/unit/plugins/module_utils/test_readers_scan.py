# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/readers_scan.py: the /proc scan, on the fake host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers, readers_record, readers_scan, readers_verdict
from fakehost import nitro_host
from readers_fakes import DEVICES, NUMBERS, SEG, hung_mount_user, lucene, oak, scan


@pytest.fixture
def host(tmpdir):
    return nitro_host(tmpdir)


# -- parsing ----------------------------------------------------------------------------------

def test_parse_stat_takes_the_command_to_the_last_parenthesis():
    text = '77 (a) b (c)) S 1 77 77 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 1 1\n'
    assert readers_scan.parse_stat(text) == ('a) b (c)', 123456)


def test_parse_maps_keeps_spaces_drops_deleted_skips_other_devices_and_anonymous():
    text = ('7f0-7f1 r--s 00000000 fd:00 200                        /srv/my files/a b.tar (deleted)\n'
            '7f1-7f2 r--s 00000000 fd:00 201 /srv/plain.tar\n'
            '7f2-7f3 r--s 00000000 fd:01 202 /srv/other-lv.tar\n'
            '7f3-7f4 rw-p 00000000 00:00 0 \n'
            '7f4-7f5 rw-p 00000000 00:00 0                          [heap]\n'
            'garbage line\n')
    assert readers_scan.parse_maps(text, NUMBERS) == ({('253:0', 200): '/srv/my files/a b.tar',
                                                       ('253:0', 201): '/srv/plain.tar'}, set())


def test_parse_maps_large_device_numbers_are_hex():
    # major 259 = 0x103, minor 17 = 0x11 (nvme partitions)
    assert readers_scan.parse_maps('1-2 r--s 0 103:11 9 /x\n', {'259:17': 'nvme1n1'}) == ({('259:17', 9): '/x'}, set())


@pytest.mark.parametrize('text, unit', [
    ('0::/system.slice/aem.service\n', 'aem.service'),
    ('0::/system.slice/aem.service/payload\n', 'aem.service'),
    ('12:pids:/system.slice/aem.service\n1:name=systemd:/system.slice/aem.service\n', 'aem.service'),
    ('0::/user.slice/user-0.slice/session-3.scope\n', 'session-3.scope'),
    ('0::/\n', None),
    ('', None),
])
def test_parse_unit(text, unit):
    assert readers_scan.parse_unit(text) == unit


# -- the scan ---------------------------------------------------------------------------------

def test_scan_finds_descriptors_and_mappings_by_device_number(host):
    oak(host)
    lucene(host)
    host.add_process(500, 'bash', 900, unit=None, fds={0: ('/dev/pts/0', '0:25', 3)})
    found = scan(host)
    assert found['unreadable'] == [] and found['exited'] == 0
    assert [r['pid'] for r in found['readers']] == [4242, 4300]
    o, lu = found['readers']
    assert (o['comm'], o['unit'], o['start_ticks'], o['start']) == ('java', 'aem.service', 5000, 1764650050.0)
    assert [(f['dev'], f['ino'], f['fds'], f['mapped']) for f in o['files']] == [
        ('253:0', 131, [10], True), ('253:0', 132, [11], True)]
    assert o['files'][0]['path'] == SEG + '/data00000a.tar'
    assert [(f['ino'], f['fds'], f['mapped'], f['path']) for f in lu['files']] == [
        (200, [], True, '/opt/aem/crx-quickstart/repository/index/lucene 1/_0.cfs')]
    assert readers.reported_reader(o) == {'pid': 4242, 'comm': 'java', 'unit': 'aem.service',
                                          'start': '2025-12-02T04:34:10Z', 'fds': 2, 'mappings': 2,
                                          'mapped_without_fd': 0}
    assert readers.reported_reader(lu)['mapped_without_fd'] == 1


def test_scan_stats_only_descriptors_on_the_devices(host):
    oak(host)
    procfs = host.proc_procfs()
    found = scan(host, procfs)
    # never the socket, never the jar on / (another mount, decided from fdinfo's mnt_id and the mountinfo)
    assert sorted(os.path.basename(p) for p in procfs.stats) == ['10', '11']
    assert dict((k, found['cost'][k]) for k in ('processes', 'descriptors', 'stats', 'by_path')) == {
        'processes': 1, 'descriptors': 4, 'stats': 2, 'by_path': 0}


def test_scan_other_users_and_other_namespaces(host):
    oak(host, pid=4242, uid=1001)
    host.add_process(6000, 'java', 7000, unit=None, mnt_ns='mnt:[4026532999]', fds={
        5: ('/data/segmentstore/data00000a.tar', '253:0', 131)})
    found = scan(host)
    assert [(r['pid'], r['uid'], r['other_namespace']) for r in found['readers']] == [
        (4242, 1001, False), (6000, 0, True)]


def test_scan_tolerates_exits_and_unreadable_entries(host):
    oak(host)
    oak(host, pid=4500, start_ticks=6000)
    lucene(host)
    host.mkdir('/proc/812')  # an entry without stat: gone before it was read
    procfs = host.proc_procfs()
    procfs.exits.add(4500)
    procfs.unreadable[4300] = errno.EACCES
    found = scan(host, procfs)
    assert [r['pid'] for r in found['readers']] == [4242]
    assert found['exited'] == 2
    assert found['unreadable'] == [{'pid': 4300, 'comm': 'java', 'start_ticks': 5100,
                                    'reason': 'cannot read /proc/4300: permission denied (this needs root: become: true)'}]


# -- never touching other filesystems (issue 34) --------------------------------------------------

def test_parse_fdinfo_and_mountinfo():
    assert readers_scan.parse_fdinfo('pos:\t0\nflags:\t0100002\nmnt_id:\t31\nino:\t131\n') == {
        'flags': 0o100002, 'mnt_id': 31, 'ino': 131}
    # a kernel before 3.15 (no mnt_id) and before 5.14 (no ino); damaged values are unknown, not errors
    assert readers_scan.parse_fdinfo('pos:\t0\nflags:\t02\n') == {'flags': 2, 'mnt_id': None, 'ino': None}
    assert readers_scan.parse_fdinfo('flags:\tzz\nmnt_id:\t\n') == {'flags': None, 'mnt_id': None, 'ino': None}
    assert readers_scan.parse_fdinfo(None) == {'flags': None, 'mnt_id': None, 'ino': None}
    text = ('22 1 253:0 / /opt/aem rw,relatime shared:1 - xfs /dev/mapper/vg-lv rw\n'
            '40 22 0:55 / /mnt/my\\040share rw - fuse.s3fs s3fs rw\n'
            'garbage\n'
            'x 1 0:1 / /y rw - tmpfs t rw\n')
    assert readers_scan.parse_mountinfo(text) == {22: {'dev': '253:0', 'point': '/opt/aem'},
                                                  40: {'dev': '0:55', 'point': '/mnt/my share'}}


def test_a_file_on_a_hung_mount_is_never_stat_ed_nor_named(host):
    oak(host)
    hung_mount_user(host)
    procfs = host.proc_procfs()
    found = scan(host, procfs)
    assert not any('/9100/' in p for p in procfs.stats)
    assert [r['pid'] for r in found['readers']] == [4242]
    assert found['unscanned'] == [] and found['cost']['stats'] == 2


def test_without_mnt_id_descriptors_are_matched_by_path_against_the_mounts(host):
    """Kernels before 3.15 (without the backport) print no mnt_id: the longest mount point decides, still no stat."""
    oak(host)
    host.add_process(4500, 'java', 6000, mnt_id=False, fds={10: (SEG + '/data00000a.tar', '253:0', 131),
                                                            11: ('/mnt/s3/assets/big.bin', '0:55', 77)})
    procfs = host.proc_procfs()
    found = scan(host, procfs)
    assert [(r['pid'], [f['fds'] for f in r['files']]) for r in found['readers']] == [(4242, [[10], [11]]),
                                                                                      (4500, [[10]])]
    assert not any(p.endswith('/4500/fd/11') for p in procfs.stats)
    assert found['cost']['by_path'] == 2


def test_a_mount_gone_since_the_table_was_read_is_skipped(host):
    oak(host)
    host.write('/proc/4242/fdinfo/11', 'pos:\t0\nflags:\t0100000\nmnt_id:\t4711\n')  # unmounted meanwhile
    found = scan(host)
    assert [f['fds'] for f in found['readers'][0]['files']] == [[10], []]


def test_the_scan_has_a_deadline_and_names_what_it_did_not_reach(host):
    """A process whose /proc reads block (a fault on a hung mount holds its memory map) cannot hold the run."""
    oak(host)
    oak(host, pid=4500, start_ticks=6000)
    lucene(host, pid=4600)
    procfs = host.proc_procfs()
    procfs.slow[4500] = 60.0
    began = __import__('time').time()
    found = readers_scan.scan(procfs, NUMBERS, deadline=2.0)
    assert __import__('time').time() - began < 30.0  # returned long before the blocked read did
    assert [r['pid'] for r in found['readers']] == [4242]
    assert [(u['pid'], u['reason'].split(':')[0]) for u in found['unscanned']] == [
        (4500, "its /proc entries did not answer within the scan's deadline (2 s) (a fault on a hung mount can hold a process's memory map)"),
        (4600, "not reached before the scan's deadline (2 s)")]
    assert found['cost']['deadline_s'] == 2.0 and found['cost']['processes'] == 1
    # the record marks them unscanned, whatever their start: the next run refreshes them
    new = readers_record.new_record(None, DEVICES, set(), 'boot-1', 1.0, {}, found['unscanned'])
    assert new['devices']['253:0']['stale'] == [[4500, readers_record.ANY_START, readers_record.UNSCANNED, 0],
                                                [4600, readers_record.ANY_START, readers_record.UNSCANNED, 0]]
    assessed = readers_verdict.assess(scan(host), DEVICES, new, 'boot-1')  # 4500 answers again
    assert [(a['pid'], [i['fd'] for i in a['stale_fds']]) for a in assessed if a['stale_fds']] == [(4500, [10, 11])]


# -- only readers that matter (issue 35) ----------------------------------------------------------

ROOT_DISK = {'259:1': 'nvme0n1'}


def test_program_text_private_and_writable_mappings_and_write_only_descriptors_are_not_readers(host):
    """A device target on the root disk: a shell, sshd and journald are not AEM's readers; AEM's data is."""
    host.add_process(500, 'bash', 900, unit='session-3.scope', fds={1: ('/var/log/x.log', '259:1', 40)},
                     flags={1: '0102001'}, maps=[
                         '55-56 r--p 00000000 103:01 11 /usr/bin/bash',
                         '56-57 r-xp 00001000 103:01 11 /usr/bin/bash',
                         '57-58 r--p 00000000 103:01 12 /usr/lib64/libc.so.6',
                         '58-59 r-xp 00001000 103:01 12 /usr/lib64/libc.so.6',
                         '59-5a r--p 00000000 103:01 13 /usr/lib/locale/locale-archive'])
    host.add_process(600, 'systemd-journal', 950, unit='systemd-journald.service',
                     fds={20: ('/var/log/journal/system.journal', '259:1', 50)}, flags={20: '0100002'},
                     maps=['60-61 rw-s 00000000 103:01 50 /var/log/journal/system.journal'])
    host.add_process(4242, 'java', 5000, fds={10: ('/srv/aem/segmentstore/data00000a.tar', '259:1', 131),
                                              11: ('/usr/lib/jvm/lib/libjvm.so', '259:1', 14)}, maps=[
        '70-71 r--s 00000000 103:01 131 /srv/aem/segmentstore/data00000a.tar',
        '71-72 r-xp 00000000 103:01 14 /usr/lib/jvm/lib/libjvm.so'])
    found = readers_scan.scan(host.proc_procfs(), ROOT_DISK)
    # journald's descriptor is open for reading and writing: refreshed in place if stale, never a restart
    assert [(r['pid'], [(f['path'], f['fds'], f['mapped']) for f in r['files']]) for r in found['readers']] == [
        (600, [('/var/log/journal/system.journal', [20], False)]),
        (4242, [('/srv/aem/segmentstore/data00000a.tar', [10], True)])]


def test_a_file_no_larger_than_the_window_is_not_a_reader(host):
    oak(host)
    found = readers_scan.scan(host.proc_procfs(), NUMBERS, min_bytes=2 << 30)  # the fake's files are 1 GiB
    assert found['readers'][0]['files'] == [
        {'dev': '253:0', 'ino': 131, 'path': SEG + '/data00000a.tar', 'fds': [], 'paths': {}, 'mapped': True},
        {'dev': '253:0', 'ino': 132, 'path': SEG + '/data00001a.tar', 'fds': [], 'paths': {}, 'mapped': True}]


# -- symbolic links and anonymous devices (issue 35) ----------------------------------------------

def test_btrfs_readers_are_matched_through_the_mount_and_said_so(host):
    host.mount('0:45', '/srv/btrfs', 'btrfs', '/dev/mapper/vg_aem-lv_repo')
    numbers, kernel, notes = readers_scan.device_numbers(host.root, ['dm-0'])
    assert numbers == {'253:0': 'dm-0', '0:45': 'dm-0'} and kernel == {'253:0': 'dm-0'}
    assert notes == ['/srv/btrfs (btrfs on dm-0) reports the anonymous device 0:45: its readers are matched through '
                     'that mount; files in other subvolumes are found by their descriptors only, and btrfs reads '
                     "ahead by its own setting (/sys/class/bdi), not by dm-0's"]


# -- a read that never returns (issue 39) -----------------------------------------------------------

STUCK_SCRIPT = r'''
import json, sys, threading
from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_scan


class Stuck(readers_scan.ProcFs):
    """/proc/PID/maps of a process whose memory-map lock a fault on a hung mount holds: the read never returns."""

    def read(self, path):
        if path.endswith('/maps'):
            threading.Event().wait()
        return readers_scan.ProcFs.read(self, path)


found = readers_scan.scan_apart(Stuck(sys.argv[1]), {'253:0': 'dm-0'}, deadline=1.0)
sys.stdout.write(json.dumps({'unscanned': found['unscanned'], 'threads': threading.active_count()}) + '\n')
sys.stdout.flush()
sys.exit(0)  # as AnsibleModule.exit_json leaves
'''


def run_with_limit(args, limit, env):
    """(returncode or None when still running after ``limit`` seconds (then killed), stdout): Python 2.7 too."""
    import subprocess
    import time
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    until = time.time() + limit
    while proc.poll() is None and time.time() < until:
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        return None, proc.stdout.read()
    return proc.returncode, proc.stdout.read()


def test_a_read_of_proc_that_never_returns_cannot_keep_the_module_from_exiting(host):
    """The module prints its result and exits although the scan's read of /proc/PID/maps never returns; its own
    process keeps no thread in that read (a thread stuck in the kernel would keep the process, and its output,
    alive), and the child that made the read is gone."""
    import json
    import sys
    oak(host)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    code, out = run_with_limit([sys.executable, '-c', STUCK_SCRIPT, host.root], 60, env)
    assert code == 0, out
    result = json.loads(out.decode('utf-8').strip().splitlines()[-1])
    assert [(u['pid'], u['reason'].split(' (')[0]) for u in result['unscanned']] == [
        (4242, "its /proc entries did not answer within the scan's deadline")]
    assert result['threads'] == 1


def test_the_scan_apart_gives_what_the_scan_gives(host):
    oak(host)
    lucene(host)
    apart = readers_scan.scan_apart(host.proc_procfs(), NUMBERS)
    here = scan(host)
    for found in (apart, here):
        del found['time'], found['cost']['seconds']
    assert apart == here and [r['pid'] for r in apart['readers']] == [4242, 4300]
    procfs = host.proc_procfs()
    procfs.proc = host.path('/nowhere')
    with pytest.raises(readers_scan.ReadersError) as info:
        readers_scan.scan_apart(procfs, NUMBERS)
    assert str(info.value).startswith('cannot list %s: ' % host.path('/nowhere'))


# -- the system's own shared mappings (issue 39) -----------------------------------------------------

def sss_client(host, pid, comm, unit, fds=None, maps=()):
    """A process that looked up a user through SSSD: its client maps the memory cache read-only and shared and
    keeps the descriptors (sss_nss_mc)."""
    held = {5: ('/var/lib/sss/mc/passwd', '259:1', 60), 6: ('/var/lib/sss/mc/initgroups', '259:1', 61)}
    held.update(fds or {})
    host.add_process(pid, comm, 900 + pid, unit=unit, fds=held, maps=[
        '10-20 r--s 00000000 103:01 60 /var/lib/sss/mc/passwd',
        '20-30 r--s 00000000 103:01 61 /var/lib/sss/mc/initgroups (deleted)'] + list(maps))


def test_the_name_service_caches_on_the_root_disk_are_not_readers(host):
    """A device target on the root disk of an IdM- or AD-joined host names AEM's data, not sshd, crond and bash
    for SSSD's memory cache, nor a process that maps nscd's database (its descriptor closed), the hwdb or glibc's
    gconv cache (every shell on a real host here), nor the JVM's own files; an application under /usr/local is the
    site's and still counts."""
    sss_client(host, 700, 'sshd', 'sshd.service')
    sss_client(host, 710, 'crond', 'crond.service')
    sss_client(host, 720, 'bash', 'session-3.scope')
    host.add_process(730, 'id', 990, unit='session-3.scope', maps=[
        '40-50 r--s 00000000 103:01 70 /var/db/nscd/passwd',
        '50-60 r--s 00000000 103:01 71 /etc/udev/hwdb.bin',
        '60-70 r--s 00000000 103:01 72 /usr/lib64/gconv/gconv-modules.cache'])
    sss_client(host, 4242, 'java', 'aem.service', fds={10: ('/srv/aem/segmentstore/data00000a.tar', '259:1', 131),
                                                       11: ('/usr/lib/jvm/lib/modules', '259:1', 77)},
               maps=['70-71 r--s 00000000 103:01 131 /srv/aem/segmentstore/data00000a.tar'])
    host.add_process(4500, 'java', 6000, unit='aem-author.service', maps=[
        '80-81 r--s 00000000 103:01 140 /usr/local/aem/crx-quickstart/repository/index/_0.cfs'])
    found = readers_scan.scan(host.proc_procfs(), ROOT_DISK)
    assert [(r['pid'], [(f['path'], f['fds'], f['mapped']) for f in r['files']]) for r in found['readers']] == [
        (4242, [('/srv/aem/segmentstore/data00000a.tar', [10], True)]),
        (4500, [('/usr/local/aem/crx-quickstart/repository/index/_0.cfs', [], True)])]
    # the rule is the path as the process sees it: a directory, not a name that merely starts alike
    assert [readers_scan.system_shared(p) for p in ('/var/lib/sss/mc/group', '/var/lib/sss/mcx/passwd',
                                                    '/usr/share/x', '/usrdata/x', '/usr/local/x')] == [
        True, False, True, False, False]
