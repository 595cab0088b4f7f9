# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tuning_snapshot on the facts tuning_facts gathers on the fake Nitro host, as the aem_tuning role calls it: in
apply mode before its first change, and on backout.

The host is that of test_tuning_facts.py (the repository on dm-0, an LV over nvme1n1, read-ahead 4096 KiB, tuned
virtual-guest running, THP always). Here: the snapshot is written once (with the directories it made) and removed
with those directories only; check mode writes nothing; whatever is at the path is reported and kept; a directory
above it that another user could change is refused with nothing written. The file's rules in detail are in
module_utils/test_snapshot_fact.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, snapshot_fact
from ansible_collections.aemops.os_tuning.plugins.modules import tuning_facts, tuning_snapshot
from ansible_collections.aemops.os_tuning.tests.unit.plugins.modules.test_tuning_facts import REPO, el8_env
from ansible_collections.aemops.os_tuning.tests.unit.utils import run_module
from fakehost import tree_checksum

SNAPSHOT = '/etc/ansible/facts.d/aem_tuning_before.fact'
TAKEN = '2026-12-01T11:00:00Z'
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason='another user\'s directory is made with chown, as root')


@pytest.fixture
def env(tmpdir, monkeypatch, module_exit):
    environment = el8_env(tmpdir, monkeypatch)
    for d in ('/', '/etc'):
        os.chmod(environment.host.path(d), 0o755)  # whatever the umask
    monkeypatch.setattr(tuning_snapshot, 'ROOT', environment.root)
    return environment


@pytest.fixture
def os_tuning(env):
    """What tuning_facts returned before the first change (the role passes it on)."""
    return run_module(tuning_facts.main, {'paths': [REPO]})['ansible_facts']['os_tuning']


def snap(args=None, failed=False, check=False):
    args = dict(args or {})
    if check:
        args['_ansible_check_mode'] = True
    return run_module(tuning_snapshot.main, args, failed=failed)


def present(facts, **kw):
    return dict({'facts': facts, 'taken': TAKEN}, **kw)


def on_disk(env, path=SNAPSHOT):
    with open(env.host.path(path)) as f:
        return json.load(f)


def test_the_snapshot_is_written_once_and_records_the_directories_it_made(env, os_tuning):
    result = snap(present(os_tuning))
    assert result['changed'] is True and result['path'] == SNAPSHOT and result['taken'] == TAKEN
    data = on_disk(env)
    assert sorted(data) == ['created_dirs', 'os_tuning', 'taken']
    assert data['taken'] == TAKEN
    assert data['created_dirs'] == ['/etc/ansible', '/etc/ansible/facts.d']
    assert data['os_tuning']['paths'][REPO]['read_ahead_kb'] == 4096
    assert data['os_tuning']['paths'][REPO]['device'] == 'dm-0'
    assert 'snapshot' not in data['os_tuning'] and 'plan' not in data['os_tuning']
    assert 'compliance' not in data['os_tuning']
    assert result['snapshot'] == data
    st = os.lstat(env.host.path(SNAPSHOT))
    assert stat.S_IMODE(st.st_mode) == 0o644
    with open(env.host.path(SNAPSHOT)) as f:
        text = f.read()
    assert text.startswith('{\n  "created_dirs": [\n    "/etc/ansible",\n') and text.endswith('}\n')
    assert not os.path.lexists(env.host.path('/run/aemops-os-tuning'))  # the lock is gone
    env.host.write('/sys/block/dm-0/queue/read_ahead_kb', '32\n')
    later = run_module(tuning_facts.main, {'paths': [REPO]})['ansible_facts']['os_tuning']
    result = snap(present(later, taken='2026-12-02T08:00:00Z'))
    assert result['changed'] is False
    assert result['taken'] == TAKEN and result['snapshot'] == data  # the first run's, as it is on disk
    assert on_disk(env) == data  # written once: still the first run's values


@pytest.mark.parametrize('taken', [{}, {'taken': ''}])
def test_the_host_clock_is_the_default_time(env, os_tuning, monkeypatch, taken):
    monkeypatch.setattr(tuning_snapshot.time, 'time', lambda: 1764586800.75)
    result = snap(dict({'facts': os_tuning}, **taken))
    assert result['taken'] == '2025-12-01T11:00:00Z'
    assert on_disk(env)['taken'] == '2025-12-01T11:00:00Z'


def test_check_mode_writes_nothing(env, os_tuning):
    before = tree_checksum(env.root)
    result = snap(present(os_tuning), check=True)
    assert result['changed'] is True and result['snapshot'] is None and result['taken'] == TAKEN
    assert tree_checksum(env.root) == before


def test_backout_removes_the_snapshot_and_the_directories_it_made(env, os_tuning):
    before = tree_checksum(env.root)
    snap(present(os_tuning))
    result = snap({'state': 'absent'}, check=True)
    assert result['changed'] is True and result['taken'] == TAKEN  # check mode: still there
    assert result['snapshot']['created_dirs'] == ['/etc/ansible', '/etc/ansible/facts.d']
    result = snap({'state': 'absent'})
    assert result == {'changed': True, 'path': SNAPSHOT, 'snapshot': None, 'taken': None}
    assert tree_checksum(env.root) == before
    assert snap({'state': 'absent'})['changed'] is False


def test_backout_keeps_a_directory_that_was_there_or_is_not_empty(env, os_tuning):
    env.host.mkdir('/etc/ansible')
    os.chmod(env.host.path('/etc/ansible'), 0o755)
    snap(present(os_tuning))
    assert on_disk(env)['created_dirs'] == ['/etc/ansible/facts.d']
    env.host.write('/etc/ansible/facts.d/other.fact', '{}\n')
    assert snap({'state': 'absent'})['changed'] is True
    assert not env.host.exists(SNAPSHOT)
    assert env.host.exists('/etc/ansible/facts.d/other.fact')


def test_a_hand_edited_snapshot_cannot_remove_other_directories(env):
    for d in ('/etc/ansible', '/etc/ansible/facts.d', '/srv', '/srv/empty'):
        env.host.mkdir(d)
        os.chmod(env.host.path(d), 0o755)
    env.host.write(SNAPSHOT, json.dumps({'taken': 'x', 'os_tuning': {}, 'created_dirs': ['/srv/empty', '/etc']}))
    assert snap({'state': 'absent'})['changed'] is True
    assert not env.host.exists(SNAPSHOT)
    assert env.host.exists('/srv/empty') and env.host.exists('/etc/ansible/facts.d')


def test_a_damaged_snapshot_is_reported_not_trusted(env, os_tuning):
    env.host.write(SNAPSHOT, '{not json')
    os.chmod(env.host.path('/etc/ansible'), 0o755)
    os.chmod(env.host.path('/etc/ansible/facts.d'), 0o755)
    before = tree_checksum(env.root)
    result = snap(present(os_tuning))
    assert result['changed'] is False and result['taken'] is None
    assert result['snapshot']['error'].startswith('damaged: %s: not valid JSON' % SNAPSHOT)
    assert result['snapshot']['error'].endswith('restore it from backup, or delete it to take a new snapshot.')
    assert tree_checksum(env.root) == before
    # Backout removes the file, but no directory: the record cannot be read.
    assert snap({'state': 'absent'})['changed'] is True
    assert not env.host.exists(SNAPSHOT) and env.host.exists('/etc/ansible/facts.d')


@pytest.mark.parametrize('plant, why', [
    (os.mkfifo, 'is a FIFO (named pipe), not a regular file'),
    (lambda path: os.symlink(os.path.join(os.path.dirname(path), 'victim'), path), 'is a symbolic link'),
    (os.mkdir, 'is a directory, not a regular file'),
    (lambda path: open(path, 'w').write('[' * 100000 + ']' * 100000), 'nested too deeply'),
    (lambda path: open(path, 'w').write('[1]'), 'holds a JSON array, not object'),
])
def test_a_hostile_snapshot_is_reported_and_kept(env, os_tuning, plant, why):
    facts_d = env.host.mkdir(os.path.dirname(SNAPSHOT))
    for d in ('/etc/ansible', '/etc/ansible/facts.d'):
        os.chmod(env.host.path(d), 0o755)
    with open(os.path.join(facts_d, 'victim'), 'w') as f:
        f.write('root:*:1:0\n')
    plant(env.host.path(SNAPSHOT))
    before = tree_checksum(env.root)
    result = snap(present(os_tuning))
    assert result['changed'] is False and result['taken'] is None
    assert result['snapshot']['error'].startswith('damaged: %s: %s' % (SNAPSHOT, why))
    assert tree_checksum(env.root) == before  # what is there is kept, never replaced (nor the link's target)


# ---------------------------------------------------------------------------------------------
# Root trusts nothing another user can write

@pytest.mark.parametrize('directory, mode, fix', [
    ('/etc', 0o777, 'Make it root\'s and not writable by others (chown root:root /etc; chmod go-w /etc), or give '
                    'another path.'),
    ('/etc/ansible', 0o775, 'Make it root\'s and not writable by others (chown root:root /etc/ansible; chmod go-w '
                            '/etc/ansible), or give another path.'),
    # sticky, as /tmp: chmod go-w would break a shared directory
    ('/etc/ansible', 0o1777, 'Give a path outside it: a directory all users share is never made private.'),
])
def test_a_directory_above_others_can_write_is_refused_with_nothing_written(env, os_tuning, directory, mode, fix):
    env.host.mkdir('/etc/ansible')
    os.chmod(env.host.path('/etc/ansible'), 0o755)
    os.chmod(env.host.path(directory), mode)
    before = tree_checksum(env.root)
    result = snap(present(os_tuning), failed=True)
    shared = ': a shared directory, such as /tmp' if mode & 0o1000 else ''
    assert result['msg'] == ('cannot write the snapshot %s: %s, above it, is writable by group or others (mode %04o%s): '
                             'another user could put a file or link of their own there for root to write. Nothing '
                             'was written. %s' % (SNAPSHOT, directory, mode, shared, fix))
    assert result['changed'] is False
    assert tree_checksum(env.root) == before


def test_check_mode_refuses_an_unsafe_directory_too(env, os_tuning):
    os.chmod(env.host.path('/etc'), 0o777)
    result = snap(present(os_tuning), failed=True, check=True)
    assert '/etc, above it, is writable by group or others (mode 0777)' in result['msg']


def test_a_symlinked_directory_above_is_refused_and_never_followed(env, os_tuning):
    elsewhere = env.host.mkdir('/srv/elsewhere')
    env.host.symlink('/etc/ansible', elsewhere)
    before = tree_checksum(env.root)
    result = snap(present(os_tuning), failed=True)
    assert result['msg'] == ('cannot write the snapshot %s: /etc/ansible, above it, is a symbolic link (to %s), not a '
                             'directory: another user could put a file or link of their own there for root to '
                             'write. Nothing was written. A symbolic link above the snapshot is never followed: give '
                             'the real path, or replace the link with a directory.' % (SNAPSHOT, elsewhere))
    assert tree_checksum(env.root) == before
    assert os.listdir(elsewhere) == []


@AS_ROOT
def test_a_directory_above_of_another_user_is_refused(env, os_tuning):
    env.host.mkdir('/etc/ansible/facts.d')
    os.chown(env.host.path('/etc/ansible/facts.d'), 4242, 4242)
    os.chmod(env.host.path('/etc/ansible'), 0o755)
    os.chmod(env.host.path('/etc/ansible/facts.d'), 0o755)
    before = tree_checksum(env.root)
    result = snap(present(os_tuning), failed=True)
    assert ('cannot write the snapshot %s: /etc/ansible/facts.d, above it, is owned by uid 4242, not root: '
            'another user' % SNAPSHOT) in result['msg']
    assert tree_checksum(env.root) == before


def test_backout_under_an_unsafe_directory_removes_nothing(env, os_tuning):
    snap(present(os_tuning))
    os.chmod(env.host.path('/etc/ansible/facts.d'), 0o777)
    before = tree_checksum(env.root)
    result = snap({'state': 'absent'}, failed=True)
    assert result['msg'].startswith('cannot remove the snapshot %s: /etc/ansible/facts.d, above it, is writable by '
                                    'group or others (mode 0777)' % SNAPSHOT)
    assert 'Nothing was removed.' in result['msg']
    assert tree_checksum(env.root) == before


# ---------------------------------------------------------------------------------------------
# Arguments

@pytest.mark.parametrize('args, text', [
    ({}, 'state is present but all of the following are missing: facts'),
    ({'facts': {}}, 'nothing was changed: facts has no block_devices: give the ansible_facts.os_tuning that '
                    'aemops.os_tuning.tuning_facts returned (not the whole result, nor an empty dict).'),
    ({'facts': {'block_devices': {}}, 'taken': 'yesterday'},
     'nothing was changed: taken "yesterday" is not an ISO 8601 time: give one such as 2026-12-01T11:00:00Z, or '
     'leave it out for the host\'s clock.'),
    ({'facts': {'block_devices': {}}, 'path': 'facts.d/x.fact'},
     'nothing was changed: the snapshot path "facts.d/x.fact" is not the absolute path of a file: give one, for '
     'example /etc/ansible/facts.d/aem_tuning_before.fact.'),
    ({'state': 'absent', 'path': '/etc/ansible/../x.fact'},
     'nothing was changed: snapshot path /etc/ansible/../x.fact is not normalised'),
])
def test_arguments_are_checked_before_anything_is_written(env, args, text):
    before = tree_checksum(env.root)
    result = snap(args, failed=True)
    assert text in result['msg']
    assert tree_checksum(env.root) == before


def test_another_path_is_written_and_removed(env, os_tuning):
    path = '/var/lib/aem/before.fact'
    env.host.mkdir('/var/lib')
    for d in ('/var', '/var/lib'):
        os.chmod(env.host.path(d), 0o755)
    result = snap(present(os_tuning, path=path))
    assert result['changed'] is True and result['path'] == path
    assert on_disk(env, path)['created_dirs'] == ['/var/lib/aem']
    assert not env.host.exists(SNAPSHOT)
    assert snap({'state': 'absent', 'path': path})['changed'] is True
    assert not os.path.lexists(files.root_path(env.root, '/var/lib/aem'))


def test_the_snapshot_is_written_and_removed_under_its_lock(env, os_tuning, monkeypatch):
    lock = files.lock_file_for(env.root, SNAPSHOT)
    held = []

    def watched(real):
        def call(*args, **kwargs):
            held.append((real.__name__, os.path.exists(lock)))
            return real(*args, **kwargs)
        return call

    for name in ('write_snapshot', 'remove_snapshot'):
        monkeypatch.setattr(snapshot_fact, name, watched(getattr(snapshot_fact, name)))
    snap(present(os_tuning))
    snap({'state': 'absent'})
    assert held == [('write_snapshot', True), ('remove_snapshot', True)]
    assert not os.path.lexists(lock)
