# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/readers.py: one run composed of the scan, the verdict, the refresh and the record."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers, readers_record, readers_refresh
from fakehost import FakeSyscalls, nitro_host
from readers_fakes import lucene, oak


@pytest.fixture
def host(tmpdir):
    host = nitro_host(tmpdir)
    host.write(readers_record.BOOT_ID, 'boot-1\n')
    return host


def test_a_survey_names_what_it_found_and_the_report_and_record_follow(host):
    oak(host)
    lucene(host)
    sys = FakeSyscalls(host)
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(), syscalls=sys)
    assert isinstance(surveyed, readers.Survey)
    assert (sorted(surveyed.devices), surveyed.record, surveyed.record_problem, surveyed.boot_id, surveyed.cannot) == (
        ['253:0'], None, None, 'boot-1', None)
    assert [(e['pid'], [i['fd'] for i in items]) for e, items in surveyed.plan['refresh']] == [(4242, [10, 11])]
    assert [(e['pid'], why) for e, _items, why in surveyed.plan['restart']] == [(4300, 'mapping_without_fd')]
    planned = readers.reader_report(surveyed)
    assert [r['pid'] for r in planned['refreshed']] == [4242] and [r['pid'] for r in planned['needs_restart']] == [4300]
    assert readers.still_stale(surveyed) == {'253:0': set([(4242, 5000, 10, 131), (4242, 5000, 11, 132),
                                                           (4300, 5100, readers_record.MAPPING_ONLY, 200)])}
    done = readers_refresh.refresh(host.root, surveyed.plan['refresh'], sys)
    written = []
    report, warnings = readers.report_and_record(host.root, surveyed, done, lambda root, rec: written.append(rec))
    assert warnings == [] and [r['count'] for r in report['refreshed']] == [2]
    assert written[0]['devices']['253:0']['stale'] == [[4300, 5100, readers_record.MAPPING_ONLY, 200]]
    assert readers.diff_entry(surveyed, report)['after'].startswith(
        "pid 4242 (java, aem.service): 2 open file(s) refreshed to the device's read-ahead\n")


def test_a_record_that_cannot_be_replaced_is_a_warning_and_the_report_is_kept(host):
    from ansible_collections.aemops.os_tuning.plugins.module_utils import runstate
    oak(host)
    sys = FakeSyscalls(host)
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(), syscalls=sys)
    done = readers_refresh.refresh(host.root, surveyed.plan['refresh'], sys)

    def planted(root, record):
        raise runstate.UnsafeStateError('/run/aemops-os-tuning/readers.json is a FIFO (named pipe), not a regular file.')

    report, warnings = readers.report_and_record(host.root, surveyed, done, planted)
    assert [r['pid'] for r in report['refreshed']] == [4242]
    assert warnings == ['readers: the record was not written, the next run will refresh the same readers again: '
                        '/run/aemops-os-tuning/readers.json is a FIFO (named pipe), not a regular file.']


def test_a_survey_has_every_field_and_no_other():
    fields = dict((name, None) for name in readers.Survey.__slots__)
    assert readers.Survey(**fields).plan is None
    with pytest.raises(TypeError):
        readers.Survey(**dict(fields, extra=1))
    del fields['plan']
    with pytest.raises(TypeError):
        readers.Survey(**fields)


def counters(host, pid, start_ticks, majflt, read_kib, rchar_kib=0):
    """/proc/PID/stat with ``majflt`` (field 12) and /proc/PID/io as the kernel prints them (fs/proc/array.c,
    fs/proc/base.c)."""
    host.write('/proc/%d/stat' % pid, '%d (java) S 1 %d %d 0 -1 4194560 100 0 %d 0 5 3 0 0 20 0 40 0 %d 1000 50 '
               '18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n' % (pid, pid, pid, majflt, start_ticks))
    host.write('/proc/%d/io' % pid, 'rchar: %d\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: %d\nwrite_bytes: 0\n'
               'cancelled_write_bytes: 0\n' % (rchar_kib * 1024, read_kib * 1024))


def test_the_measurement_finds_a_reader_the_record_calls_fresh_and_the_refresh_proves_itself(host):
    """After a boot where AEM opened its files at 4096 and the value came back to 32 by another route: the record
    of this boot calls Oak fresh, its own counters say 3900 KiB per major fault. It is refreshed, and measured
    again after the refresh at the device's window."""
    oak(host)
    readers_record.write_record(host.root, {'format': 1, 'boot_id': 'boot-1', 'devices': {
        '253:0': {'name': 'dm-0', 'kb': 32, 'since': 1764650100.0, 'stale': []}}})
    counters(host, 4242, 5000, 1000, 10 ** 6)

    def window(faults, read_kib):  # what Oak's counters read at the end of a window (the window runs in a child)
        return lambda _seconds: counters(host, 4242, 5000, faults, read_kib)

    sys = FakeSyscalls(host)
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(), syscalls=sys,
                              window=3, sleep=window(1060, 10 ** 6 + 60 * 3900))
    assert [(e['pid'], [i['fd'] for i in items]) for e, items in surveyed.plan['refresh']] == [(4242, [10, 11])]
    done = readers_refresh.refresh(host.root, surveyed.plan['refresh'], sys)
    report, _warnings = readers.report_and_record(host.root, surveyed, done, lambda root, rec: None)
    readers.measure_after(host.root, report, surveyed, sleep=window(1120, 10 ** 6 + 60 * 3900 + 60 * 32))
    oak_report = report['refreshed'][0]
    assert (oak_report['basis'], oak_report['measured']['kib_per_fault'], oak_report['measured']['faults']) == (
        'measured', 3900.0, 60)
    assert oak_report['measured_after']['kib_per_fault'] == 32.0 and report['window'] == 3
    # Without the measurement the record decides: nothing to refresh.
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(), syscalls=sys)
    assert surveyed.plan['refresh'] == [] and surveyed.window == 0
    audit = readers.audit_report(surveyed)
    assert [(r['pid'], r['basis'], r['unmeasured']) for r in audit['fine']] == [(4242, 'inferred', 'off')]


def test_a_measurement_that_never_answers_leaves_the_readers_to_the_inference_and_keeps_the_scan(host, monkeypatch):
    """Reading /proc/PID/io can wait on a process in execve under a tracer: the measurement runs in a child, bounded
    as the scan is, and a child that never answers costs the measurement only."""
    import time
    from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_scan
    oak(host)
    monkeypatch.setattr(readers_scan, 'APART_GRACE', 0.5)
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(),
                              syscalls=FakeSyscalls(host), window=1, sleep=lambda _s: time.sleep(3600))
    oak_entry = [e for e in surveyed.assessed if e['pid'] == 4242][0]
    assert (oak_entry['basis'], oak_entry['unmeasured']) == ('inferred', 'unreadable')
    assert [e['pid'] for e, _items in surveyed.plan['refresh']] == [4242]  # no record: stale, by the inference


def test_aems_processes_that_map_nothing_on_the_targets_are_measured_for_information(host):
    """A process of AEM's unit that maps no file on the targets (its repository elsewhere, a helper) is found by its
    unit and measured in the same window: it cannot be stale on the targets, so it is only reported; a process of
    another unit is not sampled."""
    oak(host)
    host.add_process(4300, comm='java', start_ticks=5100, unit='aem.service')
    host.add_process(4400, comm='sshd', start_ticks=5200, unit='sshd.service')
    counters(host, 4242, 5000, 1000, 10 ** 6)
    counters(host, 4300, 5100, 1000, 10 ** 6)

    def window(_seconds):
        counters(host, 4242, 5000, 1060, 10 ** 6 + 60 * 32)
        counters(host, 4300, 5100, 1060, 10 ** 6 + 60 * 3900)
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(),
                              syscalls=FakeSyscalls(host), window=3, sleep=window, aem_unit='aem')
    report = readers.audit_report(surveyed)
    assert [(p['pid'], p['comm'], p['unit'], p['measured']['kib_per_fault']) for p in report['aem_other']] == [
        (4300, 'java', 'aem.service', 3900.0)]
    assert 4300 not in [r['pid'] for r in report['stale'] + report['needs_restart'] + report['fine']]
    # Without AEM's unit, nothing else is sampled.
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(),
                              syscalls=FakeSyscalls(host), window=3, sleep=lambda _s: None)
    assert 'aem_other' not in readers.audit_report(surveyed)
