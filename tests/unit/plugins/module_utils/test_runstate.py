# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/runstate.py: the checked runtime directory, checked files, the kernel's
lock holder and the one JSON reader. Every refusal leaves the planted thing and its target as they were."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os
import stat

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import runstate


def _run_dir(tmpdir):
    return str(tmpdir.join('run/aemops-os-tuning'))


def _read(path):
    with open(path) as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# The directory

def test_run_dir_is_created_0700_and_reported(tmpdir):
    full, created = runstate.run_dir(str(tmpdir))
    assert full == _run_dir(tmpdir)
    assert created == [str(tmpdir.join('run')), full]
    assert stat.S_IMODE(os.lstat(full).st_mode) == 0o700
    assert runstate.run_dir(str(tmpdir))[1] == []  # the second call finds it


def test_run_dir_symlink_is_refused_and_its_target_untouched(tmpdir):
    tmpdir.mkdir('run')
    victim = tmpdir.mkdir('victim')
    os.symlink(str(victim), _run_dir(tmpdir))
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.run_dir(str(tmpdir))
    assert '/run/aemops-os-tuning is a symbolic link' in str(info.value)
    assert 'rm -rf /run/aemops-os-tuning' in str(info.value)
    assert os.listdir(str(victim)) == []


@pytest.mark.parametrize('mode', [0o777, 0o770, 0o702])
def test_run_dir_writable_by_others_is_refused(tmpdir, mode):
    tmpdir.mkdir('run')
    os.mkdir(_run_dir(tmpdir))
    os.chmod(_run_dir(tmpdir), mode)
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.run_dir(str(tmpdir))
    assert 'writable by group or others (mode %04o)' % mode in str(info.value)


def test_run_dir_owned_by_another_user_is_refused(tmpdir, monkeypatch):
    tmpdir.mkdir('run')
    os.mkdir(_run_dir(tmpdir), 0o700)
    os.chown(_run_dir(tmpdir), 4242, 4242)
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.run_dir(str(tmpdir))
    assert 'is owned by' in str(info.value) and 'uid 4242' in str(info.value)


def test_run_parent_writable_by_others_is_refused(tmpdir):
    os.mkdir(str(tmpdir.join('run')), 0o777)
    os.chmod(str(tmpdir.join('run')), 0o777)
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.run_dir(str(tmpdir))
    assert info.value.args[0].startswith('/run is writable by group or others')
    assert not os.path.exists(_run_dir(tmpdir))


# ---------------------------------------------------------------------------------------------
# Files

def _made(tmpdir):
    return runstate.run_dir(str(tmpdir))[0]


def test_open_verified_refuses_a_symlink_and_leaves_the_target(tmpdir):
    victim = tmpdir.join('passwd')
    victim.write('root:x:0:0\n')
    path = os.path.join(_made(tmpdir), 'x.lock')
    os.symlink(str(victim), path)
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.open_verified(path, 'x.lock', os.O_RDWR, create=True)
    assert 'x.lock is a symbolic link' in str(info.value)
    assert victim.read() == 'root:x:0:0\n'


def test_open_verified_refuses_a_hard_link(tmpdir):
    victim = tmpdir.join('passwd')
    victim.write('root:x:0:0\n')
    path = os.path.join(_made(tmpdir), 'x.lock')
    os.link(str(victim), path)
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.open_verified(path, 'x.lock', os.O_RDWR, create=True)
    assert 'has 2 hard links' in str(info.value)
    assert victim.read() == 'root:x:0:0\n'


def test_open_verified_refuses_a_fifo_without_blocking(tmpdir):
    path = os.path.join(_made(tmpdir), 'x.lock')
    os.mkfifo(path)
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.open_verified(path, 'x.lock', os.O_RDWR, create=True)
    assert 'is a FIFO (named pipe), not a regular file' in str(info.value)


def test_open_verified_refuses_another_users_file(tmpdir):
    path = os.path.join(_made(tmpdir), 'x.lock')
    with open(path, 'w'):
        pass
    os.chown(path, 4242, 4242)
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.open_verified(path, 'x.lock')
    assert 'owned by' in str(info.value) and 'uid 4242' in str(info.value)


@pytest.mark.parametrize('mode', [0o666, 0o620, 0o602])
def test_open_verified_refuses_a_file_group_or_others_may_write(tmpdir, mode):
    """Issue 39: a state file of the right owner that anybody may have written is refused, as its directory would
    be (dir_problem); a file only its owner writes is used."""
    path = os.path.join(_made(tmpdir), 'state.json')
    with open(path, 'w') as f:
        f.write('{}')
    os.chmod(path, mode)
    with pytest.raises(runstate.UnsafeStateError) as info:
        runstate.open_verified(path, 'state.json')
    assert 'state.json is writable by group or others (mode %04o)' % mode in str(info.value)
    assert runstate.read_json(path, 'state.json', owned=True)[1].startswith('damaged: state.json: is writable by')
    os.chmod(path, 0o644)
    assert runstate.read_json(path, 'state.json', owned=True) == ({}, None)


def test_open_verified_missing_is_none_or_created(tmpdir):
    path = os.path.join(_made(tmpdir), 'x.lock')
    assert runstate.open_verified(path) is None
    fd = runstate.open_verified(path, flags=os.O_RDWR, create=True)
    os.close(fd)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_write_state_refuses_to_replace_a_planted_link(tmpdir):
    victim = tmpdir.join('victim')
    victim.write('keep')
    os.symlink(str(victim), os.path.join(_made(tmpdir), 'state.json'))
    with pytest.raises(runstate.UnsafeStateError):
        runstate.write_state(str(tmpdir), 'state.json', '{}')
    assert victim.read() == 'keep'
    assert os.path.islink(os.path.join(_made(tmpdir), 'state.json'))


def test_write_state_and_remove_state(tmpdir):
    full = runstate.write_state(str(tmpdir), 'state.json', '{"a": 1}\n')
    assert _read(full) == '{"a": 1}\n' and stat.S_IMODE(os.stat(full).st_mode) == 0o600
    assert sorted(os.listdir(_made(tmpdir))) == ['state.json']
    assert runstate.remove_state(full) is True
    assert runstate.remove_state(full) is False


# ---------------------------------------------------------------------------------------------
# JSON read back

@pytest.mark.parametrize('text, kind, why', [
    ('[' * 100000 + ']' * 100000, dict, 'nested too deeply'),
    ('{"a": ', dict, 'not valid JSON'),
    ('[1, 2]', dict, 'holds a JSON array, not object'),
    ('"x"', dict, 'holds a JSON string, not object'),
    (b'{"a": "\xff"}', dict, 'not UTF-8 text'),
    ('{}', list, 'holds a JSON object, not array'),
])
def test_parse_json_reports_damage_never_raises(text, kind, why):
    value, damage = runstate.parse_json(text, '/etc/x.json', kind)
    assert value is None
    assert damage.startswith('damaged: /etc/x.json: ') and why in damage


def test_parse_json_good_value():
    assert runstate.parse_json('{"a": [1]}', 'x', dict) == ({'a': [1]}, None)


def test_read_json_fifo_is_damage_not_a_hang(tmpdir):
    path = str(tmpdir.join('snap.json'))
    os.mkfifo(path)
    value, damage = runstate.read_json(path, '/var/snap.json')
    assert value is None and damage == 'damaged: /var/snap.json: is a FIFO (named pipe), not a regular file'


def test_read_json_missing_symlink_and_too_large(tmpdir):
    assert runstate.read_json(str(tmpdir.join('missing'))) == (None, None)
    tmpdir.join('real').write('{}')
    os.symlink(str(tmpdir.join('real')), str(tmpdir.join('link')))
    assert 'symbolic link' in runstate.read_json(str(tmpdir.join('link')), 'link')[1]
    tmpdir.join('big').write(' ' * (runstate.MAX_JSON_BYTES + 1) + '{}')
    assert 'larger than' in runstate.read_json(str(tmpdir.join('big')), 'big')[1]
    tmpdir.join('ok').write(json.dumps({'a': 1}))
    assert runstate.read_json(str(tmpdir.join('ok'))) == ({'a': 1}, None)


def test_read_json_owned_refuses_a_hard_link(tmpdir):
    full = runstate.write_state(str(tmpdir), 'state.json', '{}')
    os.link(full, str(tmpdir.join('other')))
    assert 'hard links' in runstate.read_json(full, 'state.json', owned=True)[1]


# ---------------------------------------------------------------------------------------------
# Locks

def test_lock_holder_comes_from_proc_locks_not_the_file(tmpdir):
    path = str(tmpdir.join('x.lock'))
    with open(path, 'w') as f:
        f.write('pid 1\n')
        f.flush()
        assert runstate.lock_holder(path) is None
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        holder = runstate.lock_holder(path)
    assert holder['pid'] == os.getpid() and holder['uid'] == os.getuid()
    assert runstate.holder_text(holder).startswith('pid %d (' % os.getpid())


def test_lock_holder_parses_proc_locks_lines(tmpdir):
    path = str(tmpdir.join('x.lock'))
    tmpdir.join('x.lock').write('')
    st = os.stat(path)
    dev = '%02x:%02x:%d' % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    locks = tmpdir.join('locks')
    locks.write('1: POSIX  ADVISORY  WRITE 77 %s 0 EOF\n2: -> FLOCK  ADVISORY  WRITE 88 %s 0 EOF\n'
                '3: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n' % (dev, dev, os.getpid(), dev))
    assert runstate.lock_holder(path, str(locks))['pid'] == os.getpid()


def test_locked_busy_raises_the_given_error(tmpdir):
    class Busy(Exception):
        pass
    root = str(tmpdir)
    with runstate.locked(root, 'a.lock', 'sda'):
        fd = os.open(runstate.lock_path(root, 'a.lock'), os.O_RDONLY)
        try:
            with pytest.raises(Busy):  # another open file description: not re-entrant
                runstate._acquire(root, runstate.lock_path(root, 'a.lock'), 'sda', 0, 0.01, True, Busy)
        finally:
            os.close(fd)
    assert not os.path.exists(runstate.lock_path(root, 'a.lock'))


def test_device_lock_name_is_keyed_by_majmin():
    assert runstate.device_lock_name('253:0') == 'read-ahead-253-0.lock'


@pytest.mark.parametrize('make, kind', [
    (os.mkdir, 'a directory'),
    (os.mkfifo, 'a FIFO (named pipe)'),
])
def test_one_table_of_file_kinds_names_them_for_runstate_and_files_alike(tmp_path, make, kind):
    """runstate.file_kind is the collection's one table (files.py had a second copy); both modules' refusals name a
    kind from it, in the same words."""
    from ansible_collections.aemops.os_tuning.plugins.module_utils import files
    path = str(tmp_path / 'x')
    make(path)
    assert runstate.file_kind(os.lstat(path).st_mode) == kind
    assert not hasattr(files, 'file_kind') and not hasattr(files, '_FILE_KINDS')
    assert runstate.read_checked(path, path) == (None, 'damaged: %s: is %s, not a regular file' % (path, kind))
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(path)
    assert '%s is %s' % (path, kind) in str(info.value)


def test_a_regular_file_has_no_kind_to_name(tmp_path):
    path = tmp_path / 'f'
    path.write_text(u'x')
    assert runstate.file_kind(os.lstat(str(path)).st_mode) is None
    assert runstate.file_kind(0) == 'not a regular file'
