# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""module_utils/snapshot_fact.py: the snapshot written once, removed with the directories it made, and refused
(nothing written or removed) under a directory another user could change.

The root is a pytest tmpdir standing for ``/`` (its directories 0755, whatever the umask). The tests run as root,
so another user's directory is made with chown (those tests are skipped for other users); the module's own tests
are in modules/test_tuning_snapshot.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, snapshot_fact
from fakehost import tree_checksum

PATH = '/etc/ansible/facts.d/aem_tuning_before.fact'
TAKEN = '2026-12-01T11:00:00Z'
FACTS = {'block_devices': {'dm-0': {'read_ahead_kb': 4096}}, 'errors': [],
         'snapshot': None, 'plan': {'targets': ['/srv/aem']}, 'compliance': {'misses': []},
         'readers': {'stale': []}}
# The file as written, spelled out: indent 2, sorted keys, no 'snapshot', 'plan', 'compliance' or 'readers', a final
# newline.
TEXT = '''{
  "created_dirs": [
    "/etc/ansible",
    "/etc/ansible/facts.d"
  ],
  "os_tuning": {
    "block_devices": {
      "dm-0": {
        "read_ahead_kb": 4096
      }
    },
    "errors": []
  },
  "taken": "2026-12-01T11:00:00Z"
}
'''
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason='another user\'s directory is made with chown, as root')


@pytest.fixture
def root(tmpdir):
    path = str(tmpdir.join('root'))
    os.makedirs(files.root_path(path, '/etc'))
    for d in (path, files.root_path(path, '/etc')):
        os.chmod(d, 0o755)
    return path


def full(root, target=PATH):
    return files.root_path(root, target)


def mkdirs(root, *targets):
    for target in targets:
        os.mkdir(full(root, target))
        os.chmod(full(root, target), 0o755)


def write(root, **kw):
    return snapshot_fact.write_snapshot(root, PATH, kw.pop('facts', FACTS), kw.pop('taken', TAKEN), **kw)


def refused(root, fragment, call=write):
    before = tree_checksum(root)
    with pytest.raises(snapshot_fact.SnapshotError) as info:
        call(root)
    message = info.value.args[0]
    assert fragment in message, message
    assert tree_checksum(root) == before
    return message


def test_the_snapshot_is_written_as_json_once_with_the_directories_it_made(root):
    assert write(root) is True
    with open(full(root)) as f:
        assert f.read() == TEXT
    st = os.lstat(full(root))
    assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_uid == os.geteuid()
    for d in ('/etc/ansible', '/etc/ansible/facts.d'):
        assert stat.S_IMODE(os.lstat(full(root, d)).st_mode) == 0o755
    assert sorted(os.listdir(full(root, '/etc/ansible/facts.d'))) == ['aem_tuning_before.fact']  # no temporary file
    assert write(root, facts={'block_devices': {}}, taken='2027-01-01T00:00:00Z') is False
    with open(full(root)) as f:
        assert f.read() == TEXT  # written once: still the first one


def test_a_directory_that_was_there_is_not_recorded(root):
    mkdirs(root, '/etc/ansible')
    write(root)
    with open(full(root)) as f:
        assert json.load(f)['created_dirs'] == ['/etc/ansible/facts.d']


def test_check_mode_writes_nothing_and_says_it_would(root):
    before = tree_checksum(root)
    assert write(root, check_mode=True) is True
    assert tree_checksum(root) == before


def test_read_snapshot_reads_it_back_or_none(root):
    assert snapshot_fact.read_snapshot(root, PATH) is None
    write(root)
    assert snapshot_fact.read_snapshot(root, PATH) == {
        'taken': TAKEN, 'created_dirs': ['/etc/ansible', '/etc/ansible/facts.d'],
        'os_tuning': {'block_devices': {'dm-0': {'read_ahead_kb': 4096}}, 'errors': []}}


def test_a_damaged_snapshot_reads_as_an_error_with_the_fix(root):
    mkdirs(root, '/etc/ansible', '/etc/ansible/facts.d')
    with open(full(root), 'w') as f:
        f.write('{not json')
    error = snapshot_fact.read_snapshot(root, PATH)['error']
    assert error.startswith('damaged: %s: not valid JSON (' % PATH)
    assert error.endswith('): restore it from backup, or delete it to take a new snapshot.')


def test_remove_takes_the_file_and_the_directories_it_made(root):
    before = tree_checksum(root)
    write(root)
    assert snapshot_fact.remove_snapshot(root, PATH, snapshot_fact.read_snapshot(root, PATH)) is True
    assert tree_checksum(root) == before
    assert snapshot_fact.remove_snapshot(root, PATH, None) is False


def test_remove_in_check_mode_removes_nothing(root):
    write(root)
    before = tree_checksum(root)
    assert snapshot_fact.remove_snapshot(root, PATH, snapshot_fact.read_snapshot(root, PATH), check_mode=True) is True
    assert tree_checksum(root) == before


def test_remove_keeps_a_directory_that_is_not_empty_and_those_above_it(root):
    write(root)
    with open(full(root, '/etc/ansible/facts.d/other.fact'), 'w') as f:
        f.write('{}\n')
    snapshot_fact.remove_snapshot(root, PATH, snapshot_fact.read_snapshot(root, PATH))
    assert not os.path.lexists(full(root))
    assert os.path.isfile(full(root, '/etc/ansible/facts.d/other.fact'))
    assert os.path.isdir(full(root, '/etc/ansible'))


@pytest.mark.parametrize('created', [
    ['/srv/empty', '/etc', '/'],
    ['/etc/ansible/facts.d/..', '/srv/empty/../../etc/ansible/facts.d'],
    ['/etc/ansible/facts', '/etc/ansible/facts.d/aem_tuning_before.fact/x', 7, None],
])
def test_a_hand_edited_record_cannot_remove_other_directories(root, created):
    mkdirs(root, '/etc/ansible', '/etc/ansible/facts.d', '/etc/ansible/facts', '/srv', '/srv/empty')
    with open(full(root), 'w') as f:
        f.write(json.dumps({'taken': TAKEN, 'os_tuning': {}, 'created_dirs': created}))
    snapshot_fact.remove_snapshot(root, PATH, snapshot_fact.read_snapshot(root, PATH))
    assert not os.path.lexists(full(root))
    for d in ('/etc', '/etc/ansible', '/etc/ansible/facts.d', '/etc/ansible/facts', '/srv/empty'):
        assert os.path.isdir(full(root, d)), d


def test_a_damaged_snapshot_is_removed_but_its_directories_are_not(root):
    mkdirs(root, '/etc/ansible', '/etc/ansible/facts.d')
    with open(full(root), 'w') as f:
        f.write('["created_dirs", "/etc/ansible", "/etc/ansible/facts.d"]')
    damaged = snapshot_fact.read_snapshot(root, PATH)
    assert snapshot_fact.remove_snapshot(root, PATH, damaged) is True
    assert not os.path.lexists(full(root))
    assert os.path.isdir(full(root, '/etc/ansible/facts.d'))


@pytest.mark.parametrize('plant', [
    os.mkfifo,
    lambda path: os.symlink('/etc/shadow', path),
    os.mkdir,
    lambda path: open(path, 'w').write('{not json'),
])
def test_whatever_is_at_the_path_is_kept(root, plant):
    mkdirs(root, '/etc/ansible', '/etc/ansible/facts.d')
    plant(full(root))
    before = tree_checksum(root)
    assert write(root) is False
    assert tree_checksum(root) == before


# ---------------------------------------------------------------------------------------------
# Root trusts nothing another user can write

@pytest.mark.parametrize('directory, mode', [
    ('/etc', 0o777), ('/etc', 0o775), ('/etc/ansible', 0o757), ('/', 0o770)])
def test_a_directory_above_others_can_write_is_refused(root, directory, mode):
    mkdirs(root, '/etc/ansible', '/etc/ansible/facts.d')
    os.chmod(full(root, directory), mode)
    message = refused(root, 'cannot write the snapshot %s: %s, above it, is writable by group or others (mode %04o): '
                            'another user could put a file or link of their own there for root to write. Nothing was '
                            'written. Make it root\'s and not writable by others (chown root:root %s; chmod go-w %s), '
                            'or give another path.' % (PATH, directory, mode, directory, directory))
    assert 'rm -rf' not in message


def test_a_shared_directory_above_is_refused_with_another_path_as_the_fix(root):
    # sticky and world-writable, as /tmp: chmod go-w would break it, so the fix is another path
    mkdirs(root, '/etc/ansible', '/etc/ansible/facts.d')
    os.chmod(full(root, '/etc/ansible/facts.d'), 0o1777)
    message = refused(root, 'cannot write the snapshot %s: /etc/ansible/facts.d, above it, is writable by group or '
                            'others (mode 1777: a shared directory, such as /tmp): another user could put a file or '
                            'link of their own there for root to write. Nothing was written. Give a path outside it: '
                            'a directory all users share is never made private.' % PATH)
    assert 'chmod' not in message


def test_an_unsafe_directory_is_refused_before_any_directory_is_made(root):
    os.chmod(full(root, '/etc'), 0o777)
    refused(root, '/etc, above it, is writable by group or others (mode 0777)')
    assert not os.path.lexists(full(root, '/etc/ansible'))


def test_check_mode_refuses_too(root):
    os.chmod(full(root, '/etc'), 0o777)
    refused(root, '/etc, above it, is writable by group or others', call=lambda r: write(r, check_mode=True))


def test_a_symlinked_directory_above_is_refused_and_never_followed(root):
    mkdirs(root, '/srv', '/srv/elsewhere')
    os.symlink(full(root, '/srv/elsewhere'), full(root, '/etc/ansible'))
    refused(root, 'cannot write the snapshot %s: /etc/ansible, above it, is a symbolic link (to %s), not a '
                  'directory: another user could put a file or link of their own there for root to write. Nothing '
                  'was written. A symbolic link above the snapshot is never followed: give the real path, or replace '
                  'the link with a directory.' % (PATH, full(root, '/srv/elsewhere')))
    assert os.listdir(full(root, '/srv/elsewhere')) == []


def test_a_file_where_a_directory_above_should_be_is_refused(root):
    with open(full(root, '/etc/ansible'), 'w') as f:
        f.write('x')
    refused(root, '/etc/ansible, above it, is a regular file, not a directory: another user could put a file or link of their own '
                  'there for root to write. Nothing was written. Move it away, or give another path.')


@AS_ROOT
def test_a_directory_above_of_another_user_is_refused(root):
    mkdirs(root, '/etc/ansible')
    os.chown(full(root, '/etc/ansible'), 4242, 4242)
    refused(root, '/etc/ansible, above it, is owned by uid 4242, not root: another user')


def test_removal_under_an_unsafe_directory_is_refused(root):
    write(root)
    snapshot = snapshot_fact.read_snapshot(root, PATH)
    os.chmod(full(root, '/etc/ansible'), 0o777)
    refused(root, 'cannot remove the snapshot %s: /etc/ansible, above it, is writable by group or others (mode 0777): '
                  'another user could put a file or link of their own there for root to remove. Nothing was removed.'
                  % PATH, call=lambda r: snapshot_fact.remove_snapshot(r, PATH, snapshot))


@pytest.mark.parametrize('path, fragment', [
    ('etc/x.fact', 'the snapshot path "etc/x.fact" is not the absolute path of a file: give one, for example '
                   '/etc/ansible/facts.d/aem_tuning_before.fact.'),
    ('/', 'the snapshot path "/" is not the absolute path of a file'),
    ('', 'the snapshot path "" is not the absolute path of a file'),
    ('/etc/../x.fact', 'snapshot path /etc/../x.fact is not normalised'),
    ('/etc/ansible/facts.d/', 'snapshot path /etc/ansible/facts.d/ is not normalised'),
])
def test_a_path_that_is_not_absolute_and_normalised_is_refused(root, path, fragment):
    refused(root, fragment, call=lambda r: snapshot_fact.write_snapshot(r, path, FACTS, TAKEN))


def test_a_directory_that_cannot_be_created_in_is_refused(root, monkeypatch):
    monkeypatch.setattr(files, 'can_create_in', lambda directory, check_only=False: False)
    refused(root, 'cannot write the snapshot %s: cannot create /etc/ansible in /etc (permission denied or a read-only '
                  'file system). Nothing was written.' % PATH)


def test_a_failed_write_leaves_no_directory_behind(root, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(files, 'atomic_write', fail)
    refused(root, 'cannot write the snapshot %s: No space left on device. Nothing was left behind.' % PATH)
    assert not os.path.lexists(full(root, '/etc/ansible'))


def test_a_directory_of_the_snapshot_that_cannot_be_written_is_refused(root, monkeypatch):
    mkdirs(root, '/etc/ansible', '/etc/ansible/facts.d')
    monkeypatch.setattr(files, 'can_create_in', lambda directory, check_only=False: False)
    refused(root, 'cannot write the snapshot: cannot create files in /etc/ansible/facts.d, so %s cannot be written '
                  '(permission denied or a read-only file system). Run as root (become: true) with a path on a '
                  'writable file system. Nothing was written.' % PATH)


def test_an_immutable_directory_of_the_snapshot_is_refused(root, monkeypatch):
    mkdirs(root, '/etc/ansible', '/etc/ansible/facts.d')
    facts_d = full(root, '/etc/ansible/facts.d')
    monkeypatch.setattr(files, 'inode_flags', lambda path: files.FS_IMMUTABLE_FL if path == facts_d else 0)
    refused(root, 'cannot write the snapshot: the directory of %s is immutable (chattr +i): remove the flag with '
                  'chattr -i /etc/ansible/facts.d, or choose another file. Nothing was written.' % PATH)


def test_the_run_s_own_keys_and_the_ebs_counters_are_not_recorded():
    facts = {'block_devices': {'nvme1n1': {'read_ahead_kb': 4096}}, 'plan': {}, 'compliance': {}, 'readers': {},
             'snapshot': None, 'ebs': {'nvme1n1': {'stats': {'total_read_ops': 1}}}}
    assert sorted(snapshot_fact.record(facts, 'now', [])['os_tuning']) == ['block_devices']
