# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""read_ahead and the processes that already read the device: refresh, restart, record, check and diff mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers
from ansible_collections.aemops.os_tuning.plugins.modules import read_ahead
from ansible_collections.aemops.os_tuning.tests.unit.utils import Env
from fakehost import FakeSyscalls, nitro_host, nitro_tools, tree_checksum

REPO = '/opt/aem/crx-quickstart/repository'
SEG = REPO + '/segmentstore'


class ReadersEnv(Env):
    def attach(self, monkeypatch):
        Env.attach(self, monkeypatch)
        self.sys = FakeSyscalls(self.host)
        monkeypatch.setattr(readers, 'Syscalls', lambda: self.sys)
        monkeypatch.setattr(readers, 'ProcFs', lambda root: self.host.proc_procfs())
        return self


@pytest.fixture
def env(tmpdir, monkeypatch, module_exit):
    host = nitro_host(tmpdir.join('root'))
    host.mkdir('/etc/udev/rules.d')
    host.write(readers.BOOT_ID, 'b0\n')
    # Oak keeps its tar files open (FileAccess.Mapped); Lucene closed its index file after mmap.
    host.add_process(4242, 'java', 5000, fds={10: (SEG + '/data00000a.tar', '253:0', 131),
                                              11: (SEG + '/data00001a.tar', '253:0', 132)},
                     maps=['7f0-7f1 r--s 00000000 fd:00 131 %s/data00000a.tar' % SEG])
    host.add_process(4300, 'java', 5100, maps=['7f2-7f3 r--s 00000000 fd:00 200 %s/index/_0.cfs' % REPO])
    # A backup tool reads another directory on the same LV.
    host.add_process(7000, 'tar', 8000, unit='backup.service', fds={3: ('/opt/aem/backup/x.tar', '253:0', 300)})
    return ReadersEnv(read_ahead, host, nitro_tools(host, str(tmpdir.join('bin')))).attach(monkeypatch)


def pids(entries):
    return [(e['pid'], e['count']) for e in entries]


def test_refreshes_the_open_files_under_the_path_and_names_the_one_to_restart(env):
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    r = result['readers']
    assert pids(r['refreshed']) == [(4242, 2)]
    assert r['refreshed'][0]['unit'] == 'aem.service'
    assert pids(r['needs_restart']) == [(4300, 1)]
    assert r['not_refreshed'] == []
    assert [c for c in env.sys.calls if c[0] == 'fadvise_normal'] == [
        ('fadvise_normal', ('253:0', 131)), ('fadvise_normal', ('253:0', 132))]
    assert env.warnings == [
        'pid 4300 (java, aem.service) needs a restart for the new read-ahead to apply: it maps 1 file(s) whose '
        'descriptor it closed (as Lucene\'s MMapDirectory does): no descriptor to refresh, so only a restart applies '
        'the new read-ahead.']


def test_a_device_target_refreshes_every_file_on_the_device(env):
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert pids(result['readers']['refreshed']) == [(4242, 2), (7000, 1)]


def test_second_run_refreshes_nothing_and_changes_nothing(env):
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    before = tree_checksum(env.root)
    del env.sys.calls[:]
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert result['changed'] is False
    assert env.sys.calls == []
    assert result['readers']['refreshed'] == []
    assert pids(result['readers']['needs_restart']) == [(4300, 1)]  # still named until it restarts
    assert tree_checksum(env.root) == before


def test_a_file_opened_after_the_refresh_is_fresh(env):
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    env.host.add_process(4400, 'java', 9000, fds={12: (SEG + '/data00002a.tar', '253:0', 133)})
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert result['changed'] is False and result['readers']['refreshed'] == []


def test_value_set_by_hand_makes_readers_stale_and_the_run_changed(env):
    """The seed's case: read_ahead_kb already right (blockdev --setra by hand), no record: refresh, changed."""
    env.host.write('/sys/devices/virtual/block/dm-0/queue/read_ahead_kb', '32\n')
    assert env.host.read_ahead('dm-0') == 32
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32, 'persist': False})
    assert result['devices'][0]['before_kb'] == 32
    assert result['changed'] is True
    assert pids(result['readers']['refreshed']) == [(4242, 2)]


def test_check_mode_touches_no_process_and_names_them(env):
    before = tree_checksum(env.root)
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32}, check=True, diff=True)
    assert env.sys.calls == []
    assert tree_checksum(env.root) == before
    assert result['changed'] is True
    assert pids(result['readers']['refreshed']) == [(4242, 2)]
    assert pids(result['readers']['needs_restart']) == [(4300, 1)]
    reader_diff = result['diff'][-1]
    assert reader_diff['before_header'] == 'open files on dm-0 (read-ahead of running readers)'
    assert reader_diff['before'] == (
        'pid 4242 (java, aem.service) fd 10 %s/data00000a.tar: read-ahead window from an earlier value\n'
        'pid 4242 (java, aem.service) fd 11 %s/data00001a.tar: read-ahead window from an earlier value\n'
        'pid 4300 (java, aem.service) mapping %s/index/_0.cfs: read-ahead window from an earlier value\n'
        % (SEG, SEG, REPO))
    assert reader_diff['after'] == (
        "pid 4242 (java, aem.service): 2 open file(s) refreshed to the device's read-ahead\n"
        "pid 4300 (java, aem.service): needs a restart: maps 1 file(s) whose descriptor it closed (as Lucene's "
        "MMapDirectory does): no descriptor to refresh, so only a restart applies the new read-ahead\n")


def test_refresh_off_reports_only(env):
    env.host.write('/sys/devices/virtual/block/dm-0/queue/read_ahead_kb', '32\n')
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32, 'persist': False, 'refresh_readers': False})
    assert env.sys.calls == []
    assert result['changed'] is False
    assert [(e['pid'], e['reason']) for e in result['readers']['not_refreshed']] == [
        (4242, 'refresh_readers=false: reported only')]


def test_refresh_only_names_a_unit(env):
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32, 'refresh_only': ['aem']})
    assert pids(result['readers']['refreshed']) == [(4242, 2)]
    assert [(e['pid'], e['reason']) for e in result['readers']['not_refreshed']] == [
        (7000, 'not named in refresh_only (aem)')]
    # the backup tool stays stale in the record: a later run without the limit refreshes it
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert pids(result['readers']['refreshed']) == [(7000, 1)] and result['changed'] is True


@pytest.mark.parametrize('code', [errno.ENOSYS, errno.EPERM, errno.EACCES])
def test_a_refused_refresh_is_reported_not_failed_and_tried_again(env, code):
    env.sys.fail['pidfd_getfd'] = code
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert result['readers']['refreshed'] == []
    assert [(e['pid'], e['count']) for e in result['readers']['not_refreshed']] == [(4242, 2)]
    assert result['readers']['not_refreshed'][0]['reason'] == readers.refusal_reason(env.root, OSError(code, ''))
    del env.sys.fail['pidfd_getfd']
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert pids(result['readers']['refreshed']) == [(4242, 2)] and result['changed'] is True


def test_state_absent_leaves_readers_alone(env):
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    del env.sys.calls[:]
    result = env.run({'paths': [REPO], 'state': 'absent'})
    assert result['readers'] is None and env.sys.calls == []
