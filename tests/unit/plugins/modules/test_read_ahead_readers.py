# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""read_ahead and the processes that already read the device: refresh, restart, record, check and diff mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_record, readers_refresh, readers_scan
from ansible_collections.aemops.os_tuning.plugins.modules import read_ahead
from ansible_collections.aemops.os_tuning.tests.unit.utils import Env
from fakehost import FakeSyscalls, nitro_host, nitro_tools, tree_checksum

REPO = '/opt/aem/crx-quickstart/repository'
SEG = REPO + '/segmentstore'


class ReadersEnv(Env):
    def attach(self, monkeypatch):
        Env.attach(self, monkeypatch)
        self.sys = FakeSyscalls(self.host)
        monkeypatch.setattr(readers_refresh, 'Syscalls', lambda: self.sys)
        monkeypatch.setattr(readers_scan, 'ProcFs', lambda root: self.host.proc_procfs())
        return self


@pytest.fixture
def env(tmpdir, monkeypatch, module_exit):
    host = nitro_host(tmpdir.join('root'))
    host.mkdir('/etc/udev/rules.d')
    host.write(readers_record.BOOT_ID, 'b0\n')
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
    assert r['needs_restart'][0]['why'] == ['mapping_without_fd']
    assert r['kernel_refresh'] is True and r['scan']['processes'] == 3
    assert [c for c in env.sys.calls if c[0] == 'fadvise_normal'] == [
        ('fadvise_normal', ('253:0', 131)), ('fadvise_normal', ('253:0', 132))]
    assert env.warnings == [
        'pid 4300 (java, aem.service) needs a restart for the new read-ahead to apply: it maps 1 file(s) whose '
        'descriptor it closed (as Lucene\'s MMapDirectory does): no descriptor to refresh.']


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


def test_a_kernel_without_pidfd_getfd_says_so_when_nothing_needs_a_refresh(env):
    # Measured on every run, not assumed where no descriptor was stale: after AEM's restart on RHEL 8 too (AEM
    # started after the reboot, at the new value).
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    reboot(env)
    env.sys.fail['pidfd_getfd'] = errno.ENOSYS
    r = env.run({'paths': [REPO], 'read_ahead_kb': 32})['readers']
    assert (r['refreshed'], r['needs_restart'], r['kernel_refresh']) == ([], [], False)
    del env.sys.fail['pidfd_getfd']
    assert env.run({'paths': [REPO], 'read_ahead_kb': 32})['readers']['kernel_refresh'] is True


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
        "MMapDirectory does): no descriptor to refresh\n")


def test_refresh_off_reports_only(env):
    env.host.write('/sys/devices/virtual/block/dm-0/queue/read_ahead_kb', '32\n')
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32, 'persist': False, 'refresh_readers': False})
    assert env.sys.calls == []
    assert result['changed'] is False
    assert [(e['pid'], e['why'], e['reason']) for e in result['readers']['needs_restart']][:1] == [
        (4242, ['refresh_off'], 'refresh_readers=false: its open files were not refreshed')]


def test_refresh_only_names_a_unit(env):
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32, 'refresh_only': ['aem']})
    assert pids(result['readers']['refreshed']) == [(4242, 2)]
    # tar reads its file through a descriptor only: not read around, so it is reported, never a restart (issue 39)
    assert [e['pid'] for e in result['readers']['needs_restart']] == [4300]
    assert [(e['pid'], e['why'], e['mapped'], e['count']) for e in result['readers']['descriptor_only']] == [
        (7000, ['not_named'], 0, 1)]
    # the backup tool stays stale in the record: a later run without the limit refreshes it
    result = env.run({'devices': ['dm-0'], 'read_ahead_kb': 32})
    assert pids(result['readers']['refreshed']) == [(7000, 1)] and result['changed'] is True


@pytest.mark.parametrize('code, why', [(errno.ENOSYS, 'no_pidfd_getfd'), (errno.EPERM, 'eperm'),
                                       (errno.EACCES, 'lsm')])
def test_a_refused_refresh_needs_a_restart_not_a_failure_and_is_tried_again(env, code, why):
    """Every reader that cannot be refreshed needs a restart, whatever the reason (issue 35)."""
    env.sys.fail['pidfd_getfd'] = code
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert result['readers']['refreshed'] == []
    # Oak's mapped tar file needs the restart; its other file, only open through a descriptor, is reported (issue 39)
    assert [(e['pid'], e['count'], e['why']) for e in result['readers']['needs_restart']] == [
        (4242, 1, [why]), (4300, 1, ['mapping_without_fd'])]
    assert [(e['pid'], e['count'], e['why']) for e in result['readers']['descriptor_only']] == [(4242, 1, [why])]
    if code == errno.ENOSYS:
        assert result['readers']['needs_restart'][0]['reason'] == readers_refresh.WHY[why].replace('%(count)d', '1')
    assert result['readers']['kernel_refresh'] is (code != errno.ENOSYS)
    if code == errno.ENOSYS:  # probed once: no descriptor is even tried
        assert env.sys.calls == []
    del env.sys.fail['pidfd_getfd']
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert pids(result['readers']['refreshed']) == [(4242, 2)] and result['changed'] is True


def test_state_absent_leaves_readers_alone(env):
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    del env.sys.calls[:]
    result = env.run({'paths': [REPO], 'state': 'absent'})
    assert result['readers'] is None and env.sys.calls == []


def reboot(env, initialized_s=4.5):
    """The role's reboot: /run is empty, a new boot id, the rules file older than the boot (btime 1764650000),
    udev initialised dm-0 4.5 s after boot; the processes (started 50 s and more after boot) opened at 32."""
    import os
    os.unlink(readers_record.record_path(env.root))
    env.host.write(readers_record.BOOT_ID, 'b1\n')
    os.utime(env.host.path('/etc/udev/rules.d/90-aemops-read-ahead.rules'), (1764640000, 1764640000))
    env.host.write('/run/udev/data/b253:0', env.host.read('/run/udev/data/b253:0') + 'I:%d\n' % (initialized_s * 1e6))


def test_after_the_reboot_a_reader_that_started_at_the_new_value_is_fresh(env):
    """Issue 35: after the role's own reboot (no record), AEM started at 32 is not stale; a second run changes nothing."""
    env.run({'paths': [REPO], 'read_ahead_kb': 32})
    reboot(env)
    del env.sys.calls[:]
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    r = result['readers']
    assert (result['changed'], r['refreshed'], r['needs_restart'], r['boot_rule']) == (False, [], [], ['dm-0'])
    assert env.sys.calls == []
    # a process that started before udev set the value (it cannot, on a real boot) is still stale
    reboot(env, initialized_s=60)
    result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
    assert pids(result['readers']['refreshed']) == [(4242, 2)]


def test_a_linked_target_path_refreshes_the_files_under_the_link(env):
    """Issue 35: the kernel reports the resolved path; a target given through a link is resolved before scoping."""
    env.host.mkdir('/srv')
    env.host.symlink('/srv/aem-repo', '../opt/aem/crx-quickstart/repository')
    result = env.run({'paths': ['/srv/aem-repo'], 'read_ahead_kb': 32})
    assert pids(result['readers']['refreshed']) == [(4242, 2)]
    assert result['readers']['links'] == {'/srv/aem-repo': REPO}
    assert 'readers: /srv/aem-repo is a link to %s; open files are matched under %s, as the kernel reports them.' % (
        REPO, REPO) in env.warnings


# -- a damaged record (issue 39) --------------------------------------------------------------------

def plant_record(env, kind):
    """A record file that no run of the collection wrote, as a restore from backup can leave it."""
    import json
    import os
    from ansible_collections.aemops.os_tuning.plugins.module_utils import runstate
    runstate.run_dir(env.root)
    path = readers_record.record_path(env.root)
    content = json.dumps({'format': 1, 'boot_id': 'b0', 'devices': {}})
    if kind == 'link':
        os.symlink(env.host.write('/var/tmp/elsewhere.json', content), path)
    elif kind == 'fifo':
        os.mkfifo(path, 0o600)
    else:
        with open(path, 'w') as f:
            f.write(content)
        if kind == 'owner':
            os.chown(path, 1000, 1000)
        else:
            os.chmod(path, 0o666)  # root's, but anybody could have written it
    return path


@pytest.mark.parametrize('kind, problem', [
    ('link', 'is a symbolic link (to '),
    ('fifo', 'is a FIFO (named pipe), not a regular file'),
    ('owner', 'is owned by '),
    ('writable', 'is writable by group or others (mode 0666)'),
])
def test_a_damaged_record_is_reported_and_the_result_kept(env, kind, problem):
    """Issue 39: a record that is a link, a FIFO, another user's file or a file anybody may write is read as a
    problem and ignored; the run refreshes the readers, reports them, names the file it did not replace, and leaves
    the file as it found it. Every run after it does the same (it never fails until someone removes the file)."""
    import os
    if os.geteuid() != 0:
        pytest.skip('the record must be owned by root')
    path = plant_record(env, kind)
    before = os.lstat(path)
    for _run in range(2):
        result = env.run({'paths': [REPO], 'read_ahead_kb': 32})
        r = result['readers']
        assert pids(r['refreshed']) == [(4242, 2)] and result['changed'] is True
        assert r['record_problem'].startswith('damaged: /run/aemops-os-tuning/readers.json: ') and problem in r[
            'record_problem']
        written = [w for w in env.warnings if w.startswith('readers: the record was not written')]
        assert len(written) == 1 and '/run/aemops-os-tuning/readers.json' in written[0] and problem in written[0]
        assert 'readers: %s' % r['record_problem'] in env.warnings
        after = os.lstat(path)
        assert (after.st_ino, after.st_mode, after.st_uid) == (before.st_ino, before.st_mode, before.st_uid)


@pytest.mark.parametrize('window', [-1, 31])
def test_a_measuring_window_out_of_bounds_is_refused_with_nothing_changed(env, window):
    before = env.host.read(env.host._devdir('dm-0') + '/queue/read_ahead_kb')
    result = env.fail({'devices': ['dm-0'], 'read_ahead_kb': 32, 'measure_readers': window})
    assert result['msg'].startswith('measure_readers: the measuring window is 0 (off) to 30 seconds')
    assert 'give 0 to turn the measurement off' in result['msg'] and result['msg'].endswith('nothing was changed')
    assert env.host.read(env.host._devdir('dm-0') + '/queue/read_ahead_kb') == before and env.sys.calls == []
