# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/readers_verdict.py: which readers are stale (the record, the boot rule) and what a
run refreshes, on the fake host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_record, readers_verdict
from fakehost import nitro_host
from readers_fakes import DEVICES, booted_host, lucene, oak, record, scan, settled, stale_summary


@pytest.fixture
def host(tmpdir):
    return nitro_host(tmpdir)


# -- assessing, planning ------------------------------------------------------------------------

def test_without_a_record_every_reader_is_stale(host):
    oak(host)
    lucene(host)
    assessed = readers_verdict.assess(scan(host), DEVICES, None, 'boot-1')
    assert stale_summary(assessed) == [(4242, [10, 11], [], 0), (4300, [], [200], 0)]


def test_a_valid_record_makes_unlisted_readers_fresh(host):
    oak(host)
    lucene(host)
    rec = record(stale=[(4300, 5100, readers_record.MAPPING_ONLY, 200)])
    assessed = readers_verdict.assess(scan(host), DEVICES, rec, 'boot-1')
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
    assessed = readers_verdict.assess(scan(host), DEVICES, rec, 'boot-1', changed)
    assert stale_summary(assessed) == [(4242, [10, 11], [], 0)]


def test_a_reused_pid_does_not_inherit_the_record(host):
    oak(host, start_ticks=9999)  # pid 4242 again, another process
    rec = record(stale=[(4242, 5000, 10, 131)])
    assert stale_summary(readers_verdict.assess(scan(host), DEVICES, rec, 'boot-1')) == [(4242, [], [], 2)]
    rec = record(stale=[(4242, 9999, readers_record.UNSCANNED, 0)])  # unreadable last time: all of it
    assert stale_summary(readers_verdict.assess(scan(host), DEVICES, rec, 'boot-1')) == [(4242, [10, 11], [], 0)]


def test_plan_scope_only_and_off(host):
    oak(host)
    lucene(host)
    host.add_process(7000, 'tar', 8000, unit='backup.service', fds={3: ('/opt/aem/backup/x.tar', '253:0', 300)})
    assessed = readers_verdict.assess(scan(host), DEVICES, None, 'boot-1')

    def names(plan):
        out = {'refresh': [(e['pid'], [i['fd'] for i in items]) for e, items in plan['refresh']],
               'restart': [(e['pid'], [i.get('fd', i['ino']) for i in items], why) for e, items, why in plan['restart']]}
        if plan['descriptor_only']:
            out['descriptor_only'] = [(e['pid'], [i['fd'] for i in items], why)
                                      for e, items, why in plan['descriptor_only']]
        return out

    lucene_restart = (4300, [200], 'mapping_without_fd')
    assert names(readers_verdict.plan_refresh(assessed, {'253:0': None})) == {
        'refresh': [(4242, [10, 11]), (7000, [3])], 'restart': [lucene_restart]}
    assert names(readers_verdict.plan_refresh(assessed, {'253:0': ['/opt/aem/crx-quickstart/repository']})) == {
        'refresh': [(4242, [10, 11])], 'restart': [lucene_restart]}
    # tar only holds its file through a descriptor: not read around, so it needs no restart (issue 39); it is named
    assert names(readers_verdict.plan_refresh(assessed, {'253:0': None}, only=['aem'])) == {
        'refresh': [(4242, [10, 11])], 'restart': [lucene_restart], 'descriptor_only': [(7000, [3], 'not_named')]}
    assert names(readers_verdict.plan_refresh(assessed, {'253:0': None}, only=['tar'])) == {
        'refresh': [(7000, [3])], 'restart': [(4242, [10, 11], 'not_named'), lucene_restart]}
    assert names(readers_verdict.plan_refresh(assessed, {'253:0': None}, enabled=False)) == {
        'refresh': [], 'restart': [(4242, [10, 11], 'refresh_off'), lucene_restart],
        'descriptor_only': [(7000, [3], 'refresh_off')]}
    # a kernel without pidfd_getfd: every stale descriptor needs a restart, whatever refresh_only says
    assert names(readers_verdict.plan_refresh(assessed, {'253:0': None}, only=['tar'], cannot='no_pidfd_getfd')) == {
        'refresh': [], 'restart': [(4242, [10, 11], 'no_pidfd_getfd'), lucene_restart],
        'descriptor_only': [(7000, [3], 'no_pidfd_getfd')]}


# -- the boot rule (issue 35) ---------------------------------------------------------------------

def test_the_boot_rule_makes_a_process_started_after_the_device_settled_fresh(host):
    booted_host(host)
    since = settled(host)
    assert since == {'253:0': 4.5}
    assert stale_summary(readers_verdict.assess(scan(host), DEVICES, None, 'boot-2', settled=since)) == [(4242, [], [], 2)]
    # a process that started before the device was initialised keeps its files stale
    assert stale_summary(readers_verdict.assess(scan(host), DEVICES, None, 'boot-2', settled={'253:0': 60.0})) == [
        (4242, [10, 11], [], 0)]


@pytest.mark.parametrize('case', ['rule_written_this_boot', 'value_not_persisted', 'changed_by_this_run',
                                  'named_by_this_boots_record', 'no_udev_time'])
def test_the_boot_rule_does_not_hold(host, case):
    booted_host(host, rule_age=-60 if case == 'rule_written_this_boot' else 3600)
    if case == 'no_udev_time':
        host.write('/run/udev/data/b253:0', 'E:DM_NAME=vg_aem-lv_repo\n')
    rec = dict(record(boot='boot-2'), devices={'253:0': dict(record()['devices']['253:0'], kb=readers_record.CHANGED_KB)})
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
    host.write(readers_record.BOOT_ID, 'boot-1\n')
    readers_record.write_record(host.root, record())
    assert stale_summary(readers_verdict.assess(scan(host), DEVICES, readers_record.read_record(host.root)[0], 'boot-1')) == [
        (4242, [], [], 2)]
    readers_record.mark_changed(host.root, {'253:0': 'dm-0'}, now=5.0)
    rec = readers_record.read_record(host.root)[0]
    assert rec['devices']['253:0']['kb'] == readers_record.CHANGED_KB
    assert stale_summary(readers_verdict.assess(scan(host), DEVICES, rec, 'boot-1')) == [(4242, [10, 11], [], 0)]
    assert settled(host, record=dict(rec, boot_id='boot-2')) == {}


def test_a_linked_target_path_is_scoped_as_the_kernel_reports_it(host):
    host.mkdir('/opt/aem/crx-quickstart/repository')
    host.mkdir('/srv')
    host.symlink('/srv/repo', '../opt/aem/crx-quickstart/repository')
    scope, links = readers_verdict.real_scope(host.root, {'dm-0': ['/srv/repo'], 'nvme1n1': None})
    assert scope == {'dm-0': ['/opt/aem/crx-quickstart/repository'], 'nvme1n1': None}
    assert links == {'/srv/repo': '/opt/aem/crx-quickstart/repository'}


# -- the measurement decides where it is conclusive (issue 39) -------------------------------------

def measured(kib_per_fault, faults=60, rchar_kib=0):
    return {'measured': {'kib_per_fault': kib_per_fault, 'faults': faults, 'seconds': 3.0,
                         'read_kib': int(kib_per_fault * faults), 'rchar_kib': rchar_kib}}


def judged(host, rec, outcomes, add=True):
    if add:
        oak(host)
        lucene(host)
    assessed = readers_verdict.assess(scan(host), DEVICES, rec, 'boot-1')
    return dict((e['pid'], e) for e in readers_verdict.judge_measured(assessed, DEVICES, outcomes))


def test_a_reader_the_record_calls_fresh_that_measures_above_the_window_is_stale(host):
    # The value went to 4096, Oak mapped its files, and it came back to 32 by another route than read_ahead: the
    # record of this boot says every file is fresh, Oak faults at 3900 KiB.
    out = judged(host, record(), {4242: measured(3900.0), 4300: measured(31.9)})
    oak_entry, lucene_entry = out[4242], out[4300]
    assert (oak_entry['basis'], sorted(i['fd'] for i in oak_entry['stale_fds'])) == ('measured', [10, 11])
    assert oak_entry['measured']['kib_per_fault'] == 3900.0
    # Lucene measured at the window, and the record calls it fresh: fine, as measured.
    assert (lucene_entry['basis'], lucene_entry['stale_maps'], lucene_entry['stale_fds']) == ('measured', [], [])
    plan = readers_verdict.plan_refresh(list(out.values()), {'253:0': None})
    assert [(e['pid'], [i['fd'] for i in items]) for e, items in plan['refresh']] == [(4242, [10, 11])]


def test_a_reader_the_record_calls_stale_stays_stale_when_it_measures_small(host):
    # MMAP_LOTSAMISS or MADV_RANDOM: a stale window can measure small for a while.
    out = judged(host, record(stale=[(4300, 5100, readers_record.MAPPING_ONLY, 200)]), {4300: measured(12.0)})
    assert (out[4300]['basis'], [i['ino'] for i in out[4300]['stale_maps']]) == ('inferred', [200])


@pytest.mark.parametrize('outcome, unmeasured', [
    ({'unmeasured': 'idle', 'faults': 3}, 'idle'), ({'unmeasured': 'gone'}, 'gone'),
    ({'unmeasured': 'unreadable', 'detail': 'EACCES'}, 'unreadable'), (None, 'off'),
    (measured(3900.0, rchar_kib=200000), None),   # read() traffic could account for it all: inconclusive
])
def test_without_a_conclusive_measurement_the_inference_decides(host, outcome, unmeasured):
    out = judged(host, record(), {4242: outcome} if outcome else {})
    assert (out[4242]['basis'], out[4242]['stale_fds'], out[4242]['unmeasured'] if outcome is None or 'unmeasured' in outcome
            else None) == ('inferred', [], unmeasured)
    out = judged(host, None, {4242: outcome} if outcome else {}, add=False)  # no record: every file may be stale
    assert (out[4242]['basis'], len(out[4242]['stale_fds'])) == ('inferred', 2)


def test_a_reader_that_only_holds_descriptors_is_not_measured_or_judged(host):
    host.add_process(7000, 'tar', 8000, unit='backup.service', fds={3: ('/opt/aem/backup/x.tar', '253:0', 300)})
    out = judged(host, None, {7000: measured(3900.0)})
    assert 'basis' not in out[7000] and not readers_verdict.maps_on(out[7000], DEVICES)
    assert readers_verdict.maps_on(out[4242], DEVICES) and readers_verdict.maps_on(out[4300], DEVICES)


def test_only_readers_that_map_a_file_the_run_was_asked_about_are_judged_by_measurement(host):
    oak(host)
    lucene(host)
    assessed = readers_verdict.assess(scan(host), DEVICES, record(), 'boot-1')
    outcomes = {4242: measured(3900.0), 4300: measured(3900.0)}
    scope = {'253:0': ['/opt/aem/crx-quickstart/repository/index']}  # Lucene's directory, not Oak's
    out = dict((e['pid'], e) for e in readers_verdict.judge_measured(assessed, DEVICES, outcomes, scope))
    assert 'basis' not in out[4242] and out[4242]['stale_fds'] == []
    assert out[4300]['basis'] == 'measured' and [i['ino'] for i in out[4300]['stale_maps']] == [200]
