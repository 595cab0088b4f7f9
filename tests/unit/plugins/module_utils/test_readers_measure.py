# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""readers_measure: /proc/PID/io and stat as RHEL 7's and RHEL 8's kernels print them, hostile texts, the
pairing of two samples over one window, and every row of the verdict table (issue 39)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_measure as rm

# /proc/PID/io: fs/proc/base.c do_io_accounting(), torvalds/linux v3.10 (sprintf into the page) and
# v4.18 (seq_printf): the same seven "name: %llu" lines, the thread group's sums (whole = 1,
# proc_tgid_io_accounting). A JVM on RHEL 7 (3.10.0) and one on RHEL 8 (4.18.0).
IO_RHEL7 = ('rchar: 8273619482\nwchar: 1934712\nsyscr: 2419877\nsyscw: 10234\n'
            'read_bytes: 73728212992\nwrite_bytes: 81920\ncancelled_write_bytes: 0\n')
IO_RHEL8 = ('rchar: 51220\nwchar: 0\nsyscr: 131\nsyscw: 0\n'
            'read_bytes: 1302528\nwrite_bytes: 0\ncancelled_write_bytes: 0\n')

# /proc/PID/stat: fs/proc/array.c do_task_stat(), v3.10 and v4.18: "%d (%s) %c" then 49 fields, 52 in all;
# field 12 majflt (the live threads' maj_flt summed with signal->maj_flt when whole = 1), field 22 starttime.
# v3.10 prints wchan (field 35) as an address, v4.18 as 0 or 1.
STAT_RHEL7 = ('2345 (java) S 1 2345 2345 0 -1 1077944576 1203345 0 4521 0 35120 8123 0 0 20 0 187 0 14523 '
              '9876543210 1234567 18446744073709551615 4194304 4196468 140736322112336 0 0 0 0 3 16800972 '
              '18446744073709551615 0 0 17 1 0 0 12 0 0 6295592 6296224 22138880 140736322116513 '
              '140736322116930 140736322116930 140736322117599 0\n')
STAT_RHEL8 = ('1187 ((sd-pam)) S 1186 1186 1186 0 -1 1077936448 49 0 7 0 0 0 0 0 20 0 1 0 2093 '
              '185634816 1287 18446744073709551615 1 1 0 0 0 0 0 4096 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n')


def test_both_kernels_print_52_stat_fields():
    for text in (STAT_RHEL7, STAT_RHEL8):
        assert len(text[text.rfind(')') + 1:].split()) + 2 == 52


@pytest.mark.parametrize('text, expected', [
    (IO_RHEL7, {'rchar': 8273619482, 'syscr': 2419877, 'read_bytes': 73728212992}),
    (IO_RHEL8, {'rchar': 51220, 'syscr': 131, 'read_bytes': 1302528}),
])
def test_io_of_rhel7_and_rhel8(text, expected):
    assert rm.parse_io(text) == expected


@pytest.mark.parametrize('text, expected', [
    (STAT_RHEL7, {'majflt': 4521, 'starttime': 14523}),
    (STAT_RHEL8, {'majflt': 7, 'starttime': 2093}),
    # a command with spaces and parentheses, as any user may name a process (prctl PR_SET_NAME)
    (STAT_RHEL7.replace('(java)', '(a) 9 9 (b) S)'), {'majflt': 4521, 'starttime': 14523}),
    (STAT_RHEL7.replace('(java)', '()'), {'majflt': 4521, 'starttime': 14523}),
])
def test_stat_of_rhel7_and_rhel8(text, expected):
    assert rm.parse_stat(text) == expected


@pytest.mark.parametrize('text', [
    '', 'rchar: 1\nsyscr: 1\n',                                          # read_bytes missing
    IO_RHEL8.replace('read_bytes: 1302528', 'read_bytes: -1'),
    IO_RHEL8.replace('read_bytes: 1302528', 'read_bytes: 0x10'),
    IO_RHEL8.replace('read_bytes: 1302528', 'read_bytes: %d' % 2 ** 64),
    IO_RHEL8.replace('read_bytes: 1302528', 'read_bytes: ' + '1' * 30),
    IO_RHEL8.replace('read_bytes: 1302528', 'read_bytes:'),
    IO_RHEL8 + 'read_bytes: 5\n',                                         # twice
    IO_RHEL8 + 'garbage\n',
    IO_RHEL8 + 'x' * rm.READ_CAP,
])
def test_hostile_io_is_refused(text):
    with pytest.raises(ValueError):
        rm.parse_io(text)


@pytest.mark.parametrize('text', [
    '', 'java S 1 2 3',                                                   # no "PID ("
    '2345 (java S 1 2 3',                                                 # no ")"
    'x (java) ' + STAT_RHEL7.split(') ', 1)[1],                           # a pid that is no number
    '2345 (java) S 1 2 3 4 5 6 7 8 9 10 11\n',                            # too few fields
    STAT_RHEL7.replace(' 4521 ', ' -4521 '),
    STAT_RHEL7.replace(' 14523 ', ' 1.5e3 '),
    STAT_RHEL7 + ' ' * rm.READ_CAP,
])
def test_hostile_stat_is_refused(text):
    with pytest.raises(ValueError):
        rm.parse_stat(text)


# --- a fake /proc --------------------------------------------------------------------------------

def stat_text(majflt, start):
    return STAT_RHEL7.replace(' 4521 ', ' %d ' % majflt).replace(' 14523 ', ' %d ' % start)


def io_text(read_bytes, rchar=0, syscr=0):
    return 'rchar: %d\nwchar: 0\nsyscr: %d\nsyscw: 0\nread_bytes: %d\nwrite_bytes: 0\ncancelled_write_bytes: 0\n' % (
        rchar, syscr, read_bytes)


def put(root, pid, majflt=0, read_bytes=0, rchar=0, start=500, io=None, stat=None):
    d = root.join('proc', str(pid))
    d.ensure(dir=True)
    d.join('stat').write(stat if stat is not None else stat_text(majflt, start))
    d.join('io').write(io if io is not None else io_text(read_bytes, rchar))


class Window:
    """An injectable sleep: records the calls, then turns the fake /proc into its second state."""

    def __init__(self, after=None):
        self.calls = []
        self.after = after or (lambda: None)

    def __call__(self, seconds):
        self.calls.append(seconds)
        self.after()


def clock():
    ticks = iter([100.0, 103.0])
    return lambda: next(ticks)


def test_one_window_for_all_and_each_outcome(tmpdir):
    root = tmpdir.join('root')
    put(root, 10, majflt=1000, read_bytes=0)                     # a stale reader
    put(root, 11, majflt=50, read_bytes=0)                       # a fresh one
    put(root, 12, majflt=5)                                      # idle
    put(root, 13, majflt=5)                                      # exits during the window
    put(root, 14, majflt=5, start=500)                           # its pid reused during the window
    put(root, 15, io='rchar: 1\n')                               # unreadable

    def second():
        put(root, 10, majflt=1100, read_bytes=100 * 4096 * 1024, rchar=4096)
        put(root, 11, majflt=90, read_bytes=40 * 32 * 1024)
        put(root, 12, majflt=9, read_bytes=8192, rchar=8192)
        root.join('proc', '13').remove()
        put(root, 14, majflt=500, read_bytes=10 ** 9, start=501)
    window = Window(second)
    out = rm.measure(str(root), [10, 11, 12, 13, 14, 15, 10], seconds=3, sleep=window, clock=clock())
    assert window.calls == [3.0]
    assert out[10] == {'measured': {'kib_per_fault': 4096.0, 'faults': 100, 'seconds': 3.0,
                                    'read_kib': 409600, 'rchar_kib': 4}}
    assert out[11]['measured']['kib_per_fault'] == 32.0 and out[11]['measured']['faults'] == 40
    assert out[12]['unmeasured'] == 'idle' and out[12]['faults'] == 4 and out[12]['read_kib'] == 8
    assert 'kib_per_fault' not in out[12]
    assert out[13] == {'unmeasured': 'gone'}
    assert out[14]['unmeasured'] == 'gone'
    assert out[15]['unmeasured'] == 'unreadable' and 'read_bytes' in out[15]['detail']
    assert sorted(out) == [10, 11, 12, 13, 14, 15]


def test_a_pid_that_is_not_the_scanned_process_is_gone(tmpdir):
    root = tmpdir.join('root')
    put(root, 10, majflt=1, start=700)
    out = rm.measure(str(root), [10], seconds=1, starts={10: 699}, sleep=Window(), clock=clock())
    assert out[10]['unmeasured'] == 'gone'
    out = rm.measure(str(root), [10], seconds=1, starts={10: 700}, sleep=Window(), clock=clock())
    assert out[10]['unmeasured'] == 'idle'


def test_counters_going_backwards_are_unreadable(tmpdir):
    root = tmpdir.join('root')
    put(root, 10, majflt=100, read_bytes=10 ** 6)
    out = rm.measure(str(root), [10], seconds=1, sleep=Window(lambda: put(root, 10, majflt=200, read_bytes=5)),
                     clock=clock())
    assert out[10]['unmeasured'] == 'unreadable' and 'read_bytes' in out[10]['detail']


def test_a_process_gone_before_the_first_sample(tmpdir):
    root = tmpdir.join('root')
    root.join('proc').ensure(dir=True)
    assert rm.measure(str(root), [42], seconds=1, sleep=Window(), clock=clock()) == {42: {'unmeasured': 'gone'}}


def test_off_sleeps_nothing(tmpdir):
    window = Window()
    off = {'unmeasured': 'off'}
    assert rm.measure(str(tmpdir), [1, 2], seconds=0, sleep=window) == {1: off, 2: off}
    assert window.calls == []


def test_over_the_cap_is_refused_not_sampled(tmpdir, monkeypatch):
    monkeypatch.setattr(rm, 'MAX_PIDS', 2)
    root = tmpdir.join('root')
    for pid in (1, 2, 3):
        put(root, pid)
    out = rm.measure(str(root), [1, 2, 3], seconds=1, sleep=Window(), clock=clock())
    assert out[3]['unmeasured'] == 'unreadable' and 'cap' in out[3]['detail']
    assert out[1]['unmeasured'] == 'idle'


@pytest.mark.parametrize('value', [-1, rm.MAX_SECONDS + 1, 'soon', None, True, float('nan'), [3]])
def test_the_window_is_bounded(value):
    with pytest.raises(ValueError):
        rm.window_seconds(value)


@pytest.mark.parametrize('value, expected', [(0, 0.0), ('2.5', 2.5), (rm.MAX_SECONDS, float(rm.MAX_SECONDS))])
def test_the_window_accepted(value, expected):
    assert rm.window_seconds(value) == expected


def test_a_fifo_or_a_long_file_is_unreadable(tmpdir):
    root = tmpdir.join('root')
    put(root, 10)
    io = root.join('proc', '10', 'io')
    io.remove()
    os.mkfifo(str(io))
    assert rm.read_sample(str(root), 10) == ('unreadable', '%s: not a regular file' % io)
    io.remove()
    io.write(io_text(1) + 'x: 1\n' * rm.READ_CAP)
    state, why = rm.read_sample(str(root), 10)
    assert state == 'unreadable' and 'longer than' in why


def test_a_refusal_is_unreadable(tmpdir, monkeypatch):
    root = tmpdir.join('root')
    put(root, 10)
    real_open = os.open

    def refuse(path, flags, *args):
        if path.endswith('/io'):
            raise OSError(errno.EACCES, 'Permission denied')
        return real_open(path, flags, *args)
    monkeypatch.setattr(rm.os, 'open', refuse)
    state, why = rm.read_sample(str(root), 10)
    assert state == 'unreadable' and 'Permission denied' in why


def test_a_sample_of_a_pid_reused_while_read_is_gone(tmpdir, monkeypatch):
    root = tmpdir.join('root')
    put(root, 10, start=500)
    real = rm._read_capped
    texts = iter([stat_text(1, 500), io_text(1), stat_text(1, 501)])
    monkeypatch.setattr(rm, '_read_capped', lambda path: next(texts) if path.startswith(str(root)) else real(path))
    assert rm.read_sample(str(root), 10) == ('gone', None)


def test_this_process_reads_itself():
    state, sample = rm.read_sample('/', os.getpid())
    assert state == 'ok' and set(sample) == {'starttime', 'majflt', 'read_bytes', 'rchar', 'syscr'}


# --- conclusive and the verdict table ------------------------------------------------------------

def m(kib_per_fault, faults=100, rchar_kib=0):
    return {'kib_per_fault': kib_per_fault, 'faults': faults, 'seconds': 3.0,
            'read_kib': int(kib_per_fault * faults), 'rchar_kib': rchar_kib}


@pytest.mark.parametrize('measurement, expected', [
    (m(3888.3), True),
    (m(31.9), True),
    (m(3888.3, faults=rm.MIN_FAULTS - 1), False),                 # too few faults
    (m(317.8, faults=143, rchar_kib=36352), False),              # a read() stream beside a mapping at 32
    (m(4131.3, faults=91, rchar_kib=27968), True),                # the same beside a mapping at 4096
    (m(100, rchar_kib=int(100 * 100 * rm.RCHAR_SHARE) + 1), False),
    (None, False), ({}, False), ({'faults': 'x', 'rchar_kib': 0, 'read_kib': 0}, False),
    (dict(m(3888.3), faults='100'), False), (dict(m(3888.3), faults=True), False), (m(0, faults=0), False),
    ('measured', False), ([1, 2], False),
])
def test_conclusive(measurement, expected):
    assert rm.conclusive(measurement) is expected


def test_thresholds():
    assert rm.thresholds(32) == (128, 256)           # the window counts for one 64 KiB page at least
    assert rm.thresholds(0) == (128, 256)
    assert rm.thresholds(4096) == (8192, 16384)
    assert rm.thresholds(None) == (128, 256)


@pytest.mark.parametrize('inferred, measurement, reason, kb, expected', [
    # measured stale: whatever the record and the boot rule say
    (False, m(3888.3), None, 32, (True, 'measured')),
    (True, m(3888.3), None, 32, (True, 'measured')),
    (False, m(4131.3, faults=91, rchar_kib=27968), None, 32, (True, 'measured')),
    (False, m(5053.3, faults=83, rchar_kib=97280), None, 32, (True, 'measured')),   # 23% rchar: 365 left
    # conclusive, but what read() could have fetched leaves too little for the faults
    (False, m(1000, rchar_kib=24000), None, 32, (False, 'inferred')),
    (True, m(1000, rchar_kib=24000), None, 32, (True, 'inferred')),
    # measured at the window: fine, measured; but a reader the record calls stale stays stale
    (False, m(31.9), None, 32, (False, 'measured')),
    (False, m(128), None, 32, (False, 'measured')),
    (True, m(31.9), None, 32, (True, 'inferred')),
    # measured at the window, beside a read() stream: read_bytes bounds the faults' reads, still fine
    (False, m(40, rchar_kib=3000), None, 32, (False, 'measured')),
    # inconclusive: the inference decides
    (False, m(317.8, faults=143, rchar_kib=36352), None, 32, (False, 'inferred')),
    (True, m(317.8, faults=143, rchar_kib=36352), None, 32, (True, 'inferred')),
    (False, m(200), None, 32, (False, 'inferred')),              # between the two thresholds
    (False, m(3888.3, faults=rm.MIN_FAULTS - 1), None, 32, (False, 'inferred')),
    (False, m(3888.3), None, 4096, (False, 'measured')),         # the window of a device at 4096
    # no measurement, each reason
    (False, None, 'idle', 32, (False, 'inferred')),
    (True, None, 'idle', 32, (True, 'inferred')),
    (False, None, 'gone', 32, (False, 'inferred')),
    (True, None, 'gone', 32, (True, 'inferred')),
    (False, None, 'unreadable', 32, (False, 'inferred')),
    (True, None, 'unreadable', 32, (True, 'inferred')),
    (False, None, 'off', 32, (False, 'inferred')),
    (True, None, 'off', 32, (True, 'inferred')),
    (False, m(3888.3), 'gone', 32, (False, 'inferred')),         # a reason wins over stray figures
    (False, dict(m(31.9), kib_per_fault='31.9'), None, 32, (False, 'inferred')),   # figures that are no numbers
    (True, {'faults': 100}, None, 32, (True, 'inferred')),
])
def test_verdict(inferred, measurement, reason, kb, expected):
    assert rm.verdict(inferred, measurement, reason, kb) == expected


def test_fault_kib_takes_off_what_read_could_have_fetched():
    assert rm.fault_kib(m(4131.3, faults=91, rchar_kib=27968)) == pytest.approx(
        (int(4131.3 * 91) - rm.READ_AMPLIFICATION * 27968) / 91.0)
    assert rm.fault_kib(m(10, rchar_kib=10 ** 6)) == 0
    assert rm.fault_kib(m(0, faults=0)) == 0 and rm.fault_kib(None) == 0


@pytest.mark.parametrize('outcome, inferred, expected', [
    ({'measured': m(3888.3)}, False, (True, 'measured')),
    ({'measured': m(31.9)}, True, (True, 'inferred')),
    ({'measured': m(31.9)}, False, (False, 'measured')),
    (dict(rm.unmeasured('idle', 'few'), faults=3, read_kib=12000, rchar_kib=0, seconds=3.0), False, (False, 'inferred')),
    (None, True, (True, 'inferred')),
    ('garbage', False, (False, 'inferred')),
])
def test_judge_one_entry_of_a_measurement(outcome, inferred, expected):
    assert rm.judge(outcome, inferred, 32) == expected
