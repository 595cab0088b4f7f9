# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/readers_record.py: the record of what a run left stale, in /run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_record, runstate
from fakehost import nitro_host
from readers_fakes import DEVICES, record


@pytest.fixture
def host(tmpdir):
    return nitro_host(tmpdir)


# -- the record ---------------------------------------------------------------------------------

def test_record_round_trip_and_new_record(host):
    old = record(stale=[(1, 2, 3, 4)])
    old['devices']['259:2'] = {'name': 'nvme1n1', 'kb': 128, 'seq': 7, 'since': 1.0, 'stale': []}
    new = readers_record.new_record(old, DEVICES, set(['253:0']), 'boot-1', 1764659999.0,
                                    {'253:0': set([(4300, 5100, -1, 200)])},
                                    [{'pid': 9, 'start_ticks': 10, 'comm': 'x', 'reason': 'r'}])
    assert new == {'format': 1, 'boot_id': 'boot-1', 'devices': {
        '253:0': {'name': 'dm-0', 'kb': 32, 'seq': None, 'since': 1764650100.0,
                  'stale': [[4300, 5100, -1, 200], [9, 10, -2, 0]]},
        '259:2': {'name': 'nvme1n1', 'kb': 128, 'seq': 7, 'since': 1.0, 'stale': []}}}
    if os.geteuid() != 0:
        pytest.skip('the record must be owned by root')
    readers_record.write_record(host.root, new)
    assert oct(os.stat(readers_record.record_path(host.root)).st_mode & 0o777) == oct(0o600)
    assert readers_record.read_record(host.root) == (new, None)


def test_new_record_without_a_valid_old_one_starts_now():
    new = readers_record.new_record(None, DEVICES, set(), 'boot-2', 1764659999.0, {}, [])
    assert new == {'format': 1, 'boot_id': 'boot-2',
                   'devices': {'253:0': {'name': 'dm-0', 'kb': 32, 'seq': None, 'since': 1764659999.0, 'stale': []}}}


def test_missing_record_is_none_without_a_problem(host):
    assert readers_record.read_record(host.root) == (None, None)


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
    path = readers_record.record_path(host.root)
    host.write(readers_record.RECORD_PATH, content)
    if os.geteuid() != 0:
        pytest.skip('the record must be owned by root')
    rec, problem = readers_record.read_record(host.root)
    assert rec is None and '/run/aemops-os-tuning/readers.json' in problem and problem.endswith('; ignored')
    assert os.path.exists(path)


def test_a_linked_or_oversized_record_is_ignored(host):
    if os.geteuid() != 0:
        pytest.skip('the record must be owned by root')
    path = readers_record.record_path(host.root)
    host.write('/run/elsewhere.json', json.dumps(record()))
    host.mkdir(runstate.RUN_DIR)
    os.symlink(host.path('/run/elsewhere.json'), path)
    problem = readers_record.read_record(host.root)[1]
    assert problem.startswith('damaged: /run/aemops-os-tuning/readers.json: ') and 'is a symbolic link' in problem
    os.unlink(path)
    os.link(host.path('/run/elsewhere.json'), path)
    assert 'has 2 hard links' in readers_record.read_record(host.root)[1]
    os.unlink(path)
    host.write(readers_record.RECORD_PATH, ' ' * (readers_record.RECORD_MAX_BYTES + 1))
    assert 'is larger than 4194304 bytes' in readers_record.read_record(host.root)[1]


# -- every writer under the record's lock ------------------------------------------------------------

def test_a_run_keeps_the_entries_another_writer_left_for_devices_it_did_not_judge():
    # read_ahead computed its record from the one it read first; AEM's start guard wrote nvme1n1 meanwhile.
    mine = record()
    mine['devices']['259:2'] = {'name': 'nvme1n1', 'kb': 4096, 'seq': 7, 'since': 1.0, 'stale': []}
    current = record(kb=4096)
    current['devices']['259:2'] = {'name': 'nvme1n1', 'kb': 32, 'seq': 7, 'since': 2.0, 'stale': [[5, 6, 7, 8]]}
    out = readers_record.merged(mine, current, set(['253:0']))
    assert out['devices']['253:0'] == mine['devices']['253:0'] and out['devices']['259:2']['since'] == 2.0
    assert mine['devices']['259:2']['since'] == 1.0  # not changed in place
    # Another boot's record, or none: the run's own.
    assert readers_record.merged(mine, record(boot='boot-0'), set(['253:0'])) == mine
    assert readers_record.merged(mine, None, set(['253:0'])) == mine


def test_update_record_writes_a_change_under_the_lock_and_nothing_else(host, monkeypatch):
    host.write(readers_record.BOOT_ID, 'boot-1\n')
    written = []

    def write(root, rec):
        assert os.path.exists(runstate.lock_path(root, readers_record.RECORD_LOCK))
        written.append(rec)
    kept = readers_record.update_record(host.root, lambda rec: readers_record.this_boot(rec, 'boot-1'), write=write)
    assert written == [kept] and kept['devices'] == {}
    # The same record back: nothing written.
    monkeypatch.setattr(readers_record, 'read_record', lambda root: (kept, None))
    readers_record.update_record(host.root, lambda rec: readers_record.this_boot(rec, 'boot-1'), write=write)
    assert len(written) == 1


def test_a_record_lock_held_by_another_writer_is_waited_for_then_named(host, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip('the run directory must be owned by root')
    monkeypatch.setattr(readers_record, 'RECORD_LOCK_TIMEOUT', 0.2)
    runstate.run_dir(host.root)
    fd = os.open(runstate.lock_path(host.root, readers_record.RECORD_LOCK), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(runstate.FileError) as info:
            readers_record.update_record(host.root, lambda rec: {'changed': True})
        assert readers_record.RECORD_PATH in str(info.value)
    finally:
        os.close(fd)
    assert readers_record.update_record(host.root, lambda rec: readers_record.this_boot(rec, 'boot-1'))
