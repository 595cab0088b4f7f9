# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/readers.py: the /proc scan, the refresh and the record, on the fake host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers, runstate
from fakehost import FakeSyscalls, nitro_host

SEG = '/opt/aem/crx-quickstart/repository/segmentstore'
NUMBERS = {'253:0': 'dm-0'}


@pytest.fixture
def host(tmpdir):
    return nitro_host(tmpdir)


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
    return readers.scan(procfs or host.proc_procfs(), NUMBERS)


# -- parsing ----------------------------------------------------------------------------------

def test_parse_stat_takes_the_command_to_the_last_parenthesis():
    text = '77 (a) b (c)) S 1 77 77 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 1 1\n'
    assert readers.parse_stat(text) == ('a) b (c)', 123456)


def test_parse_maps_keeps_spaces_drops_deleted_skips_other_devices_and_anonymous():
    text = ('7f0-7f1 r--s 00000000 fd:00 200                        /srv/my files/a b.tar (deleted)\n'
            '7f1-7f2 r--s 00000000 fd:00 201 /srv/plain.tar\n'
            '7f2-7f3 r--s 00000000 fd:01 202 /srv/other-lv.tar\n'
            '7f3-7f4 rw-p 00000000 00:00 0 \n'
            '7f4-7f5 rw-p 00000000 00:00 0                          [heap]\n'
            'garbage line\n')
    assert readers.parse_maps(text, NUMBERS) == ({('253:0', 200): '/srv/my files/a b.tar',
                                                  ('253:0', 201): '/srv/plain.tar'}, set())


def test_parse_maps_large_device_numbers_are_hex():
    # major 259 = 0x103, minor 17 = 0x11 (nvme partitions)
    assert readers.parse_maps('1-2 r--s 0 103:11 9 /x\n', {'259:17': 'nvme1n1'}) == ({('259:17', 9): '/x'}, set())


@pytest.mark.parametrize('text, unit', [
    ('0::/system.slice/aem.service\n', 'aem.service'),
    ('0::/system.slice/aem.service/payload\n', 'aem.service'),
    ('12:pids:/system.slice/aem.service\n1:name=systemd:/system.slice/aem.service\n', 'aem.service'),
    ('0::/user.slice/user-0.slice/session-3.scope\n', 'session-3.scope'),
    ('0::/\n', None),
    ('', None),
])
def test_parse_unit(text, unit):
    assert readers.parse_unit(text) == unit


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
    assert readers.describe(o) == {'pid': 4242, 'comm': 'java', 'unit': 'aem.service', 'start': '2025-12-02T04:34:10Z',
                                   'fds': 2, 'mappings': 2, 'mapped_without_fd': 0}
    assert readers.describe(lu)['mapped_without_fd'] == 1


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


# -- assessing, planning ------------------------------------------------------------------------

DEVICES = {'253:0': {'name': 'dm-0', 'kb': 32, 'seq': None}}


def record(stale=(), kb=32, boot='boot-1'):
    return {'format': 1, 'boot_id': boot,
            'devices': {'253:0': {'name': 'dm-0', 'kb': kb, 'since': 1764650100.0, 'stale': [list(s) for s in stale]}}}


def stale_summary(assessed):
    return [(a['pid'], [i['fd'] for i in a['stale_fds']], [i['ino'] for i in a['stale_maps']], a['fresh'])
            for a in assessed]


def test_without_a_record_every_reader_is_stale(host):
    oak(host)
    lucene(host)
    assessed = readers.assess(scan(host), DEVICES, None, 'boot-1')
    assert stale_summary(assessed) == [(4242, [10, 11], [], 0), (4300, [], [200], 0)]


def test_a_valid_record_makes_unlisted_readers_fresh(host):
    oak(host)
    lucene(host)
    rec = record(stale=[(4300, 5100, readers.MAPPING_ONLY, 200)])
    assessed = readers.assess(scan(host), DEVICES, rec, 'boot-1')
    assert stale_summary(assessed) == [(4242, [], [], 2), (4300, [], [200], 0)]


def reattached():
    rec = record()
    rec['devices']['253:0']['seq'] = 41  # DEVICES has seq None: another device under the same number
    return rec


@pytest.mark.parametrize('rec, changed', [
    (record(kb=64), ()),  # set by hand since: the record no longer holds
    (reattached(), ()),
    (record(boot='boot-0'), ()),  # another boot
    (record(), ('dm-0',)),  # this run changes the value
])
def test_a_record_that_no_longer_holds_is_not_obeyed(host, rec, changed):
    oak(host)
    assessed = readers.assess(scan(host), DEVICES, rec, 'boot-1', changed)
    assert stale_summary(assessed) == [(4242, [10, 11], [], 0)]


def test_a_reused_pid_does_not_inherit_the_record(host):
    oak(host, start_ticks=9999)  # pid 4242 again, another process
    rec = record(stale=[(4242, 5000, 10, 131)])
    assert stale_summary(readers.assess(scan(host), DEVICES, rec, 'boot-1')) == [(4242, [], [], 2)]
    rec = record(stale=[(4242, 9999, readers.UNSCANNED, 0)])  # unreadable last time: all of it
    assert stale_summary(readers.assess(scan(host), DEVICES, rec, 'boot-1')) == [(4242, [10, 11], [], 0)]


def test_plan_scope_only_and_off(host):
    oak(host)
    lucene(host)
    host.add_process(7000, 'tar', 8000, unit='backup.service', fds={3: ('/opt/aem/backup/x.tar', '253:0', 300)})
    assessed = readers.assess(scan(host), DEVICES, None, 'boot-1')

    def names(plan):
        return {'refresh': [(e['pid'], [i['fd'] for i in items]) for e, items in plan['refresh']],
                'restart': [(e['pid'], [i.get('fd', i['ino']) for i in items], why) for e, items, why in plan['restart']]}

    lucene_restart = (4300, [200], 'mapping_without_fd')
    assert names(readers.plan_refresh(assessed, {'253:0': None})) == {
        'refresh': [(4242, [10, 11]), (7000, [3])], 'restart': [lucene_restart]}
    assert names(readers.plan_refresh(assessed, {'253:0': ['/opt/aem/crx-quickstart/repository']})) == {
        'refresh': [(4242, [10, 11])], 'restart': [lucene_restart]}
    assert names(readers.plan_refresh(assessed, {'253:0': None}, only=['aem'])) == {
        'refresh': [(4242, [10, 11])], 'restart': [lucene_restart, (7000, [3], 'not_named')]}
    assert names(readers.plan_refresh(assessed, {'253:0': None}, only=['tar'])) == {
        'refresh': [(7000, [3])], 'restart': [(4242, [10, 11], 'not_named'), lucene_restart]}
    assert names(readers.plan_refresh(assessed, {'253:0': None}, enabled=False)) == {
        'refresh': [], 'restart': [(4242, [10, 11], 'refresh_off'), lucene_restart, (7000, [3], 'refresh_off')]}
    # a kernel without pidfd_getfd: every stale descriptor needs a restart, whatever refresh_only says
    assert names(readers.plan_refresh(assessed, {'253:0': None}, only=['tar'], cannot='no_pidfd_getfd')) == {
        'refresh': [], 'restart': [(4242, [10, 11], 'no_pidfd_getfd'), lucene_restart,
                                   (7000, [3], 'no_pidfd_getfd')]}


# -- refreshing ---------------------------------------------------------------------------------

def planned(host):
    assessed = readers.assess(scan(host), DEVICES, None, 'boot-1')
    return readers.plan_refresh(assessed, {'253:0': None})['refresh']


def test_refresh_duplicates_each_descriptor_and_advises_normal(host):
    oak(host)
    sys = FakeSyscalls(host)
    out = readers.refresh(host.root, planned(host), sys)
    assert sys.calls == [('pidfd_open', 4242), ('pidfd_getfd', 4242, 10), ('fadvise_normal', ('253:0', 131)),
                         ('pidfd_getfd', 4242, 11), ('fadvise_normal', ('253:0', 132))]
    assert sys.open_fds == set()  # every duplicate and the pidfd closed
    assert [(r['entry']['pid'], [i['fd'] for i in r['refreshed']], r['failed'], r['reason']) for r in out] == [
        (4242, [10, 11], [], None)]


def test_refresh_skips_a_descriptor_that_now_names_another_file(host):
    oak(host)
    plan = planned(host)
    host.proc_stats[host.path('/proc/4242/fd/11')] = ('253:0', 999)  # closed and reused since the scan
    sys = FakeSyscalls(host)
    out = readers.refresh(host.root, plan, sys)
    assert [i['fd'] for i in out[0]['refreshed']] == [10] and [i['fd'] for i in out[0]['vanished']] == [11]
    assert ('fadvise_normal', ('253:0', 999)) not in sys.calls


def test_refresh_skips_a_reused_pid(host):
    oak(host)
    plan = planned(host)
    host.write('/proc/4242/stat', host.read('/proc/4242/stat').replace(' 5000 ', ' 5001 '))
    sys = FakeSyscalls(host)
    out = readers.refresh(host.root, plan, sys)
    assert sys.calls == [('pidfd_open', 4242)] and out[0]['refreshed'] == [] and out[0]['reason'] is None


@pytest.mark.parametrize('call, code, yama, why', [
    ('pidfd_open', errno.ENOSYS, None, 'no_pidfd_getfd'),
    ('pidfd_getfd', errno.ENOSYS, None, 'no_pidfd_getfd'),
    ('pidfd_getfd', errno.EPERM, '3\n', 'yama'),
    ('pidfd_getfd', errno.EPERM, '1\n', 'eperm'),
    ('pidfd_getfd', errno.EACCES, None, 'lsm'),
])
def test_refusals_are_reported_in_one_line_not_raised(host, call, code, yama, why):
    reason = readers.WHY[why]
    oak(host)
    oak(host, pid=4500, start_ticks=6000)
    if yama:
        host.write(readers.YAMA_PTRACE_SCOPE, yama)
    sys = FakeSyscalls(host, fail={call: code})
    out = readers.refresh(host.root, planned(host), sys)
    assert [(r['entry']['pid'], r['refreshed'], [i['fd'] for i in r['failed']], r['why'], r['reason'])
            for r in out] == [(4242, [], [10, 11], why, reason), (4500, [], [10, 11], why, reason)]
    assert sys.open_fds == set()
    if code == errno.ENOSYS:  # not tried again for the second process
        assert [c for c in sys.calls if c[0] == 'pidfd_open'] == [('pidfd_open', 4242)]


def test_a_process_that_exits_before_the_refresh_is_not_a_failure(host):
    oak(host)
    out = readers.refresh(host.root, planned(host), FakeSyscalls(host, fail={'pidfd_open': errno.ESRCH}))
    assert (out[0]['reason'], out[0]['failed'], len(out[0]['vanished'])) == (None, [], 2)


def test_the_real_syscalls_on_this_python():
    """On the test machine: a descriptor of our own process, refreshed through pidfd when the kernel has it."""
    sys = readers.Syscalls()
    fd = os.open(__file__, os.O_RDONLY)
    try:
        sys.fadvise_normal(fd)
        try:
            pidfd = sys.pidfd_open(os.getpid())
        except OSError as e:
            assert e.errno in (errno.ENOSYS, errno.EPERM)
            return
        try:
            dup = sys.pidfd_getfd(pidfd, fd)
            assert os.fstat(dup).st_ino == os.fstat(fd).st_ino
            sys.fadvise_normal(dup)
            sys.close(dup)
        finally:
            sys.close(pidfd)
    finally:
        os.close(fd)


# -- the record ---------------------------------------------------------------------------------

def test_record_round_trip_and_new_record(host):
    old = record(stale=[(1, 2, 3, 4)])
    old['devices']['259:2'] = {'name': 'nvme1n1', 'kb': 128, 'seq': 7, 'since': 1.0, 'stale': []}
    new = readers.new_record(old, DEVICES, set(['253:0']), 'boot-1', 1764659999.0,
                             {'253:0': set([(4300, 5100, -1, 200)])},
                             [{'pid': 9, 'start_ticks': 10, 'comm': 'x', 'reason': 'r'}])
    assert new == {'format': 1, 'boot_id': 'boot-1', 'devices': {
        '253:0': {'name': 'dm-0', 'kb': 32, 'seq': None, 'since': 1764650100.0,
                  'stale': [[4300, 5100, -1, 200], [9, 10, -2, 0]]},
        '259:2': {'name': 'nvme1n1', 'kb': 128, 'seq': 7, 'since': 1.0, 'stale': []}}}
    if os.geteuid() != 0:
        pytest.skip('the record must be owned by root')
    readers.write_record(host.root, new)
    assert oct(os.stat(readers.record_path(host.root)).st_mode & 0o777) == oct(0o600)
    assert readers.read_record(host.root) == (new, None)


def test_new_record_without_a_valid_old_one_starts_now():
    new = readers.new_record(None, DEVICES, set(), 'boot-2', 1764659999.0, {}, [])
    assert new == {'format': 1, 'boot_id': 'boot-2',
                   'devices': {'253:0': {'name': 'dm-0', 'kb': 32, 'seq': None, 'since': 1764659999.0, 'stale': []}}}


def test_missing_record_is_none_without_a_problem(host):
    assert readers.read_record(host.root) == (None, None)


@pytest.mark.parametrize('content', [
    'not json',
    '[' * 100000,
    json.dumps({'format': 1, 'boot_id': 'b', 'devices': {'253:0': {'name': 'dm-0', 'kb': True, 'since': 1, 'stale': []}}}),
    json.dumps({'format': 1, 'boot_id': 'b', 'devices': {'x': {'name': 'dm-0', 'kb': 32, 'since': 1, 'stale': []}}}),
    json.dumps({'format': 1, 'boot_id': 'b', 'devices': {'253:0': {'name': 'dm-0', 'kb': 32, 'since': 1,
                                                                   'stale': [[1, 2, 'x', 4]]}}}),
    json.dumps({'format': 2, 'boot_id': 'b', 'devices': {}}),
])
def test_a_damaged_record_is_reported_and_ignored(host, content):
    path = readers.record_path(host.root)
    host.write(readers.RECORD_PATH, content)
    if os.geteuid() != 0:
        pytest.skip('the record must be owned by root')
    rec, problem = readers.read_record(host.root)
    assert rec is None and '/run/aemops-os-tuning/readers.json' in problem and problem.endswith('; ignored')
    assert os.path.exists(path)


def test_a_linked_or_oversized_record_is_ignored(host):
    if os.geteuid() != 0:
        pytest.skip('the record must be owned by root')
    path = readers.record_path(host.root)
    host.write('/run/elsewhere.json', json.dumps(record()))
    host.mkdir(runstate.RUN_DIR)
    os.symlink(host.path('/run/elsewhere.json'), path)
    problem = readers.read_record(host.root)[1]
    assert problem.startswith('damaged: /run/aemops-os-tuning/readers.json: ') and 'is a symbolic link' in problem
    os.unlink(path)
    os.link(host.path('/run/elsewhere.json'), path)
    assert 'has 2 hard links' in readers.read_record(host.root)[1]
    os.unlink(path)
    host.write(readers.RECORD_PATH, ' ' * (readers.RECORD_MAX_BYTES + 1))
    assert 'is larger than 4194304 bytes' in readers.read_record(host.root)[1]


# -- never touching other filesystems (issue 34) --------------------------------------------------

def test_parse_fdinfo_and_mountinfo():
    assert readers.parse_fdinfo('pos:\t0\nflags:\t0100002\nmnt_id:\t31\nino:\t131\n') == {
        'flags': 0o100002, 'mnt_id': 31, 'ino': 131}
    # a kernel before 3.15 (no mnt_id) and before 5.14 (no ino); damaged values are unknown, not errors
    assert readers.parse_fdinfo('pos:\t0\nflags:\t02\n') == {'flags': 2, 'mnt_id': None, 'ino': None}
    assert readers.parse_fdinfo('flags:\tzz\nmnt_id:\t\n') == {'flags': None, 'mnt_id': None, 'ino': None}
    assert readers.parse_fdinfo(None) == {'flags': None, 'mnt_id': None, 'ino': None}
    text = ('22 1 253:0 / /opt/aem rw,relatime shared:1 - xfs /dev/mapper/vg-lv rw\n'
            '40 22 0:55 / /mnt/my\\040share rw - fuse.s3fs s3fs rw\n'
            'garbage\n'
            'x 1 0:1 / /y rw - tmpfs t rw\n')
    assert readers.parse_mountinfo(text) == {22: {'dev': '253:0', 'point': '/opt/aem'},
                                             40: {'dev': '0:55', 'point': '/mnt/my share'}}


def hung_mount_user(host, pid=9100, mnt_id=True):
    """An unprivileged user's process with a file open on a FUSE mount whose server no longer answers."""
    host.add_process(pid, 'cat', 9500, unit='session-3.scope', uid=1000, mnt_id=mnt_id, fds={
        3: ('/mnt/s3/assets/big.bin', '0:55', 77)})


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
    found = readers.scan(procfs, NUMBERS, deadline=2.0)
    assert __import__('time').time() - began < 30.0  # returned long before the blocked read did
    assert [r['pid'] for r in found['readers']] == [4242]
    assert [(u['pid'], u['reason'].split(':')[0]) for u in found['unscanned']] == [
        (4500, "its /proc entries did not answer within the scan's deadline (2 s) (a fault on a hung mount can hold a process's memory map)"),
        (4600, "not reached before the scan's deadline (2 s)")]
    assert found['cost']['deadline_s'] == 2.0 and found['cost']['processes'] == 1
    # the record marks them unscanned, whatever their start: the next run refreshes them
    new = readers.new_record(None, DEVICES, set(), 'boot-1', 1.0, {}, found['unscanned'])
    assert new['devices']['253:0']['stale'] == [[4500, readers.ANY_START, readers.UNSCANNED, 0],
                                                [4600, readers.ANY_START, readers.UNSCANNED, 0]]
    assessed = readers.assess(scan(host), DEVICES, new, 'boot-1')  # 4500 answers again
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
    found = readers.scan(host.proc_procfs(), ROOT_DISK)
    # journald's descriptor is open for reading and writing: refreshed in place if stale, never a restart
    assert [(r['pid'], [(f['path'], f['fds'], f['mapped']) for f in r['files']]) for r in found['readers']] == [
        (600, [('/var/log/journal/system.journal', [20], False)]),
        (4242, [('/srv/aem/segmentstore/data00000a.tar', [10], True)])]


def test_a_file_no_larger_than_the_window_is_not_a_reader(host):
    oak(host)
    found = readers.scan(host.proc_procfs(), NUMBERS, min_bytes=2 << 30)  # the fake's files are 1 GiB
    assert found['readers'][0]['files'] == [
        {'dev': '253:0', 'ino': 131, 'path': SEG + '/data00000a.tar', 'fds': [], 'paths': {}, 'mapped': True},
        {'dev': '253:0', 'ino': 132, 'path': SEG + '/data00001a.tar', 'fds': [], 'paths': {}, 'mapped': True}]


# -- the boot rule (issue 35) ---------------------------------------------------------------------

def booted_host(host, rule_age=3600, initialized_s=4.5):
    """After a reboot: no record; the rules file was written before the boot; udev initialised dm-0 4.5 s
    after boot; Oak started 50 s after boot (start_ticks 5000 at 100 Hz)."""
    host.write(readers.BOOT_ID, 'boot-2\n')
    host.write('/etc/udev/rules.d/90-aemops-read-ahead.rules', '# ours\n')
    os.utime(host.path('/etc/udev/rules.d/90-aemops-read-ahead.rules'), (1764650000 - rule_age,) * 2)
    host.write('/run/udev/data/b253:0', host.read('/run/udev/data/b253:0') + 'I:%d\n' % (initialized_s * 1e6))
    oak(host)


def settled(host, record=None, persisted=32, changed=()):
    return readers.settled_since(host.root, {'253:0': {'name': 'dm-0', 'kernel': 'dm-0', 'kb': 32, 'seq': None}},
                                 record, 'boot-2', set(changed), {'dm-0': persisted},
                                 ['/etc/udev/rules.d/90-aemops-read-ahead.rules'], 1764650000)


def test_the_boot_rule_makes_a_process_started_after_the_device_settled_fresh(host):
    booted_host(host)
    since = settled(host)
    assert since == {'253:0': 4.5}
    assert stale_summary(readers.assess(scan(host), DEVICES, None, 'boot-2', settled=since)) == [(4242, [], [], 2)]
    # a process that started before the device was initialised keeps its files stale
    assert stale_summary(readers.assess(scan(host), DEVICES, None, 'boot-2', settled={'253:0': 60.0})) == [
        (4242, [10, 11], [], 0)]


@pytest.mark.parametrize('case', ['rule_written_this_boot', 'value_not_persisted', 'changed_by_this_run',
                                  'named_by_this_boots_record', 'no_udev_time'])
def test_the_boot_rule_does_not_hold(host, case):
    booted_host(host, rule_age=-60 if case == 'rule_written_this_boot' else 3600)
    if case == 'no_udev_time':
        host.write('/run/udev/data/b253:0', 'E:DM_NAME=vg_aem-lv_repo\n')
    rec = dict(record(boot='boot-2'), devices={'253:0': dict(record()['devices']['253:0'], kb=readers.CHANGED_KB)})
    since = settled(host, record=rec if case == 'named_by_this_boots_record' else None,
                    persisted=4096 if case == 'value_not_persisted' else 32,
                    changed=['dm-0'] if case == 'changed_by_this_run' else ())
    assert since == {}


def test_a_record_of_this_boot_without_the_device_keeps_the_boot_rule(host):
    """Another run's record on this boot: no run changed dm-0 (a run records every device it tunes)."""
    booted_host(host, rule_age=-60)
    rec = {'format': 1, 'boot_id': 'boot-2', 'devices': {}}
    assert settled(host, record=rec) == {'253:0': 4.5}


# -- the sweep keeps the record true (issue 35) ---------------------------------------------------

def test_a_sweep_marks_the_device_so_every_open_file_counts_as_stale(host):
    if os.geteuid() != 0:
        pytest.skip('the record must be owned by root')
    oak(host)
    host.write(readers.BOOT_ID, 'boot-1\n')
    readers.write_record(host.root, record())
    assert stale_summary(readers.assess(scan(host), DEVICES, readers.read_record(host.root)[0], 'boot-1')) == [
        (4242, [], [], 2)]
    readers.mark_changed(host.root, {'253:0': 'dm-0'}, now=5.0)
    rec = readers.read_record(host.root)[0]
    assert rec['devices']['253:0']['kb'] == readers.CHANGED_KB
    assert stale_summary(readers.assess(scan(host), DEVICES, rec, 'boot-1')) == [(4242, [10, 11], [], 0)]
    assert settled(host, record=dict(rec, boot_id='boot-2')) == {}


# -- symbolic links and anonymous devices (issue 35) ----------------------------------------------

def test_a_linked_target_path_is_scoped_as_the_kernel_reports_it(host):
    host.mkdir('/opt/aem/crx-quickstart/repository')
    host.mkdir('/srv')
    host.symlink('/srv/repo', '../opt/aem/crx-quickstart/repository')
    scope, links = readers.real_scope(host.root, {'dm-0': ['/srv/repo'], 'nvme1n1': None})
    assert scope == {'dm-0': ['/opt/aem/crx-quickstart/repository'], 'nvme1n1': None}
    assert links == {'/srv/repo': '/opt/aem/crx-quickstart/repository'}


def test_btrfs_readers_are_matched_through_the_mount_and_said_so(host):
    host.mount('0:45', '/srv/btrfs', 'btrfs', '/dev/mapper/vg_aem-lv_repo')
    numbers, kernel, notes = readers.device_numbers(host.root, ['dm-0'])
    assert numbers == {'253:0': 'dm-0', '0:45': 'dm-0'} and kernel == {'253:0': 'dm-0'}
    assert notes == ['/srv/btrfs (btrfs on dm-0) reports the anonymous device 0:45: its readers are matched through '
                     'that mount; files in other subvolumes are found by their descriptors only, and btrfs reads '
                     "ahead by its own setting (/sys/class/bdi), not by dm-0's"]
