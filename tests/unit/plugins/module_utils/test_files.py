# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/files.py: atomic writes, baseline records, diffs, removal."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, runstate


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _leftovers(directory):
    return [n for n in os.listdir(directory) if n.startswith('.aemops-')]


def _read(path):
    with open(path) as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# root_path / read_text

def test_root_path_joins_absolute_target_under_root():
    assert files.root_path('/tmp/fake', '/etc/udev/rules.d/x.rules') == '/tmp/fake/etc/udev/rules.d/x.rules'


def test_root_path_on_real_root_is_the_path_itself():
    assert files.root_path('/', '/etc/tuned/active_profile') == '/etc/tuned/active_profile'


def test_read_text_returns_content(tmpdir):
    path = str(tmpdir.join('f'))
    with open(path, 'w') as f:
        f.write('hello\n')
    assert files.read_text(path) == 'hello\n'


def test_read_text_missing_file_is_none(tmpdir):
    assert files.read_text(str(tmpdir.join('missing'))) is None


def test_read_text_below_a_regular_file_is_none(tmpdir):
    path = str(tmpdir.join('file'))
    with open(path, 'w') as f:
        f.write('x')
    assert files.read_text(os.path.join(path, 'child')) is None


def test_read_text_other_errors_propagate(tmpdir):
    with pytest.raises((IOError, OSError)) as info:
        files.read_text(str(tmpdir))  # a directory
    assert info.value.errno == errno.EISDIR


# ---------------------------------------------------------------------------------------------
# atomic_write

def test_atomic_write_creates_file_with_mode_0644(tmpdir):
    path = str(tmpdir.join('90-test.rules'))
    files.atomic_write(path, 'content\n')
    assert _read(path) == 'content\n'
    assert _mode(path) == 0o644
    assert _leftovers(str(tmpdir)) == []


def test_atomic_write_honours_explicit_mode(tmpdir):
    path = str(tmpdir.join('secret'))
    files.atomic_write(path, 'x', mode=0o600)
    assert _mode(path) == 0o600


def test_atomic_write_ignores_umask(tmpdir):
    old = os.umask(0o077)
    try:
        path = str(tmpdir.join('f'))
        files.atomic_write(path, 'x')
    finally:
        os.umask(old)
    assert _mode(path) == 0o644


def test_atomic_write_replaces_existing_file_and_resets_mode(tmpdir):
    path = str(tmpdir.join('f'))
    with open(path, 'w') as f:
        f.write('old content that is longer\n')
    os.chmod(path, 0o600)
    files.atomic_write(path, 'new\n')
    assert _read(path) == 'new\n'
    assert _mode(path) == 0o644


def test_atomic_write_creates_missing_directories(tmpdir):
    path = str(tmpdir.join('etc', 'udev', 'rules.d', '90-x.rules'))
    files.atomic_write(path, 'x\n')
    assert _read(path) == 'x\n'
    assert _mode(os.path.dirname(path)) & 0o755 == 0o755


def test_atomic_write_failing_write_leaves_no_temp_file_and_keeps_old_content(tmpdir, monkeypatch):
    path = str(tmpdir.join('f'))
    with open(path, 'w') as f:
        f.write('original\n')
    real_fdopen = os.fdopen

    class DiskFull(object):
        def __init__(self, fd, *args):
            self._f = real_fdopen(fd, *args)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()
            return False

        def write(self, data):
            raise IOError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(os, 'fdopen', DiskFull)
    with pytest.raises(IOError) as info:
        files.atomic_write(path, 'replacement\n')
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSPC
    assert _leftovers(str(tmpdir)) == []
    assert _read(path) == 'original\n'


def test_atomic_write_failing_rename_leaves_no_temp_file(tmpdir, monkeypatch):
    path = str(tmpdir.join('f'))

    def refuse(src, dst):
        raise OSError(errno.EXDEV, 'Invalid cross-device link')

    monkeypatch.setattr(os, 'rename', refuse)
    with pytest.raises(OSError):
        files.atomic_write(path, 'x')
    monkeypatch.undo()
    assert _leftovers(str(tmpdir)) == []
    assert not os.path.exists(path)


class _RecordingModule(object):
    """Stands in for AnsibleModule: atomic_move renames and records, like the real one."""

    def __init__(self):
        self.moves = []

    def atomic_move(self, src, dest):
        self.moves.append((src, dest))
        os.rename(src, dest)


def test_atomic_write_uses_module_atomic_move_from_the_same_directory(tmpdir):
    module = _RecordingModule()
    path = str(tmpdir.join('f'))
    files.atomic_write(path, 'via module\n', module=module)
    assert len(module.moves) == 1
    src, dest = module.moves[0]
    assert dest == path
    assert os.path.dirname(src) == str(tmpdir)
    assert os.path.basename(src).startswith('.aemops-')
    assert _read(path) == 'via module\n'
    assert _mode(path) == 0o644
    assert _leftovers(str(tmpdir)) == []


def test_atomic_write_module_mode_reapplied_after_move(tmpdir):
    class ModeResettingModule(_RecordingModule):
        def atomic_move(self, src, dest):
            _RecordingModule.atomic_move(self, src, dest)
            os.chmod(dest, 0o600)  # the real atomic_move copies the old file's mode

    path = str(tmpdir.join('f'))
    files.atomic_write(path, 'x', module=ModeResettingModule())
    assert _mode(path) == 0o644


# ---------------------------------------------------------------------------------------------
# managed header and baselines

def test_managed_header_names_owner_and_is_detected():
    lines = files.managed_header('read_ahead module', 'What this file is for.')
    text = '\n'.join(lines) + '\n'
    assert lines[0].startswith('# ')
    assert 'read_ahead module' in lines[0]
    assert 'Do not edit' in lines[0]
    assert lines[1] == '# What this file is for.'
    assert files.is_managed(text)


def test_managed_header_other_comment_character():
    lines = files.managed_header('x', 'y', comment=';')
    assert all(line.startswith('; ') for line in lines)


def test_is_managed_false_for_foreign_or_missing_text():
    assert not files.is_managed(None)
    assert not files.is_managed('')
    assert not files.is_managed('ACTION=="add", ATTR{queue/read_ahead_kb}="128"\n')


def test_baseline_line_is_sorted_compact_json():
    line = files.baseline_line({'match': 'ENV{X}=="1"', 'device': 'sdb', 'read_ahead_kb': 128})
    assert line == '# aemops-baseline {"device":"sdb","match":"ENV{X}==\\"1\\"","read_ahead_kb":128}'


def test_parse_baselines_roundtrip_in_file_order():
    first = {'match': 'b', 'read_ahead_kb': 4096, 'lvm_read_ahead': 'auto'}
    second = {'match': 'a', 'read_ahead_kb': 128, 'lvm_read_ahead': None}
    text = '\n'.join(['# header', files.baseline_line(first), 'RULE', files.baseline_line(second)]) + '\n'
    records, errors = files.parse_baselines(text)
    assert records == [first, second]
    assert errors == []


def test_parse_baselines_ignores_other_lines():
    text = '# plain comment\n#aemops-baseline {"no":"space"}\n  # aemops-baseline {"indented":1}\n'
    assert files.parse_baselines(text) == ([], [])


def test_parse_baselines_of_none_or_empty():
    assert files.parse_baselines(None) == ([], [])
    assert files.parse_baselines('') == ([], [])


def test_parse_baselines_reports_damaged_json_with_line_number():
    text = '# header\n# aemops-baseline {"match": "x", \n# aemops-baseline {"match":"ok"}\n'
    records, errors = files.parse_baselines(text)
    assert records == [{'match': 'ok'}]
    assert len(errors) == 1
    assert errors[0].startswith('line 2: ')
    assert '{"match": "x",' in errors[0]


def test_parse_baselines_reports_non_object_json():
    records, errors = files.parse_baselines('# aemops-baseline [1, 2]\n# aemops-baseline "s"\n')
    assert records == []
    assert [e.split(':')[0] for e in errors] == ['line 1', 'line 2']


def test_parse_baselines_other_comment_character():
    line = files.baseline_line({'k': 1}, comment=';')
    assert line.startswith('; aemops-baseline ')
    assert files.parse_baselines(line + '\n', comment=';') == ([{'k': 1}], [])
    assert files.parse_baselines(line + '\n') == ([], [])


# ---------------------------------------------------------------------------------------------
# diff_entry

def test_diff_entry_changed_file():
    assert files.diff_entry('/etc/x', 'a\n', 'b\n') == {
        'before_header': '/etc/x', 'after_header': '/etc/x', 'before': 'a\n', 'after': 'b\n'}


def test_diff_entry_new_file():
    diff = files.diff_entry('/etc/x', None, 'b\n')
    assert diff['before_header'] == '/etc/x (absent)'
    assert diff['before'] == ''
    assert diff['after_header'] == '/etc/x'
    assert diff['after'] == 'b\n'


def test_diff_entry_removed_file():
    diff = files.diff_entry('/etc/x', 'a\n', None)
    assert diff['before_header'] == '/etc/x'
    assert diff['after_header'] == '/etc/x (absent)'
    assert diff['after'] == ''


def test_diff_entry_empty_but_present_file_is_not_absent():
    diff = files.diff_entry('/etc/x', '', '')
    assert diff['before_header'] == '/etc/x'
    assert diff['after_header'] == '/etc/x'


# ---------------------------------------------------------------------------------------------
# remove_file

def test_remove_file_removes_and_reports_true(tmpdir):
    path = str(tmpdir.join('f'))
    with open(path, 'w') as f:
        f.write('x')
    assert files.remove_file(path) is True
    assert not os.path.exists(path)


def test_remove_file_missing_reports_false(tmpdir):
    assert files.remove_file(str(tmpdir.join('missing'))) is False


def test_remove_file_other_errors_propagate(tmpdir):
    with pytest.raises(OSError) as info:
        files.remove_file(str(tmpdir))  # a directory cannot be unlinked
    assert info.value.errno in (errno.EISDIR, errno.EPERM)


# ---------------------------------------------------------------------------------------------
# Hostile inputs (issue 12): owned files are validated before the first change of a run.

def _fifo(path):
    os.mkfifo(path)
    return path


def test_describe_os_error_tells_permission_loop_and_missing_apart():
    assert 'permission denied' in files.describe_os_error(OSError(errno.EACCES, 'x'))
    assert 'needs root' in files.describe_os_error(OSError(errno.EPERM, 'x'))
    assert 'symlink loop' in files.describe_os_error(OSError(errno.ELOOP, 'x'))
    assert files.describe_os_error(OSError(errno.ENOENT, 'x')) == 'does not exist'
    assert 'too long' in files.describe_os_error(OSError(errno.ENAMETOOLONG, 'x'))


@pytest.mark.parametrize('path, words', [
    ('relative/90-x.rules', 'is not absolute'),
    ('', 'is not absolute'),
    ('/etc/udev/rules.d/../90-x.rules', 'not normalised'),
    ('/etc/udev/rules.d/./90-x.rules', 'not normalised'),
    ('/etc/udev//rules.d/90-x.rules', 'not normalised'),
    ('//etc/udev/rules.d/90-x.rules', 'not normalised'),
    ('/etc/udev/rules.d/', 'not normalised'),
    ('/etc/udev/rules.d/90-x\n.rules', 'newline'),
])
def test_check_path_form_refuses(path, words):
    with pytest.raises(files.FileError) as info:
        files.check_path_form(path, 'rules_file')
    assert words in str(info.value)


def test_check_path_form_accepts_a_plain_absolute_path():
    files.check_path_form('/etc/udev/rules.d/90-aemops-read-ahead.rules')


def test_check_owned_target_accepts_absent_and_regular(tmpdir):
    target = str(tmpdir.join('90-x.rules'))
    files.check_owned_target(target)
    tmpdir.join('90-x.rules').write('x\n')
    files.check_owned_target(target)


def test_check_owned_target_refuses_fifo_without_opening_it(tmpdir):
    target = _fifo(str(tmpdir.join('fifo.rules')))  # opening it for reading would block the test
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(target)
    assert 'is a FIFO (named pipe), not a regular file' in str(info.value)


def test_check_owned_target_refuses_directory_and_socket(tmpdir):
    import socket
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(str(tmpdir.mkdir('d.rules')))
    assert 'is a directory' in str(info.value)
    sock_path = str(tmpdir.join('s.rules'))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(sock_path)
        with pytest.raises(files.FileError) as info:
            files.check_owned_target(sock_path)
        assert 'is a socket' in str(info.value)
    finally:
        sock.close()


def test_check_owned_target_refuses_character_device():
    with pytest.raises(files.FileError) as info:
        files.check_owned_target('/dev/null')
    assert '/dev/null is a character device node' in str(info.value)


def test_check_owned_target_refuses_a_udev_mask_and_leaves_it(tmpdir):
    target = str(tmpdir.join('90-x.rules'))
    os.symlink('/dev/null', target)
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(target)
    assert 'symbolic link to /dev/null: a mask' in str(info.value)
    assert os.readlink(target) == '/dev/null'
    with pytest.raises(files.FileError) as info:
        files.read_owned(target)
    assert 'a mask' in str(info.value)


def test_check_owned_target_refuses_links_to_files_and_loops(tmpdir):
    real = tmpdir.join('real.rules')
    real.write('x\n')
    link = str(tmpdir.join('link.rules'))
    os.symlink(str(real), link)
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(link)
    assert 'is a symbolic link (to %s)' % real in str(info.value)
    loop_a, loop_b = str(tmpdir.join('a.rules')), str(tmpdir.join('b.rules'))
    os.symlink(loop_b, loop_a)
    os.symlink(loop_a, loop_b)
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(loop_a)
    assert 'symlink loop' in str(info.value)
    assert 'does not exist' not in str(info.value)


def test_check_owned_target_refuses_missing_or_file_parent(tmpdir):
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(str(tmpdir.join('missing', 'x.rules')))
    assert 'does not exist. Create it first' in str(info.value)
    tmpdir.join('plain').write('')
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(str(tmpdir.join('plain', 'x.rules')))
    assert 'not a directory' in str(info.value)


@pytest.mark.parametrize('flag, words', [(files.FS_IMMUTABLE_FL, 'immutable (chattr +i)'),
                                         (files.FS_APPEND_FL, 'append-only (chattr +a)')])
def test_check_owned_target_refuses_immutable_file_and_directory(tmpdir, monkeypatch, flag, words):
    target = tmpdir.join('90-x.rules')
    target.write('x\n')
    monkeypatch.setattr(files, 'inode_flags', lambda path: flag if path == str(target) else 0)
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(str(target))
    assert words in str(info.value)
    monkeypatch.setattr(files, 'inode_flags', lambda path: flag if path == str(tmpdir) else 0)
    with pytest.raises(files.FileError) as info:
        files.check_owned_target(str(tmpdir.join('new.rules')))
    assert 'the directory of' in str(info.value) and words in str(info.value)


def test_inode_flags_reads_the_real_flags_or_none(tmpdir):
    target = tmpdir.join('x')
    target.write('x')
    flags = files.inode_flags(str(target))
    assert flags is None or not flags & files.FS_IMMUTABLE_FL
    assert files.inode_flags(str(tmpdir.join('missing'))) is None


def test_read_owned(tmpdir):
    assert files.read_owned(str(tmpdir.join('missing'))) is None
    tmpdir.join('ok').write('a\n')
    assert files.read_owned(str(tmpdir.join('ok'))) == 'a\n'
    tmpdir.join('bad').write_binary(b'# \xff\xfe\n')
    with pytest.raises(files.FileError) as info:
        files.read_owned(str(tmpdir.join('bad')))
    assert 'is not UTF-8 text' in str(info.value)
    with pytest.raises(files.FileError) as info:
        files.read_owned(_fifo(str(tmpdir.join('fifo'))))
    assert 'FIFO' in str(info.value)


def test_read_text_never_blocks_on_a_fifo_and_replaces_bad_bytes(tmpdir):
    with pytest.raises((IOError, OSError)) as info:
        files.read_text(_fifo(str(tmpdir.join('fifo'))))
    assert info.value.errno == errno.EINVAL
    tmpdir.join('bad').write_binary(b'/img/\xff.img\n')
    text = files.read_text(str(tmpdir.join('bad')))
    assert text.startswith('/img/') and text.endswith('.img\n')


def test_atomic_write_takes_ownership_of_a_planted_file(tmpdir):
    target = tmpdir.join('90-x.rules')
    target.write('planted\n')
    os.chmod(str(target), 0o666)
    if os.geteuid() == 0:
        os.chown(str(target), 65534, 65534)
    files.atomic_write(str(target), 'ours\n', 0o644)
    st = os.stat(str(target))
    assert stat.S_IMODE(st.st_mode) == 0o644
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (0, 0)
    assert target.read() == 'ours\n'


# ---------------------------------------------------------------------------------------------
# Locks

def test_lock_file_lives_under_run_and_names_the_file(tmpdir):
    path = files.lock_file_for(str(tmpdir), '/etc/udev/rules.d/90-aemops-read-ahead.rules')
    assert path == str(tmpdir.join('run/aemops-os-tuning/etc%2Fudev%2Frules.d%2F90-aemops-read-ahead.rules.lock'))
    long_path = files.lock_file_for(str(tmpdir), '/' + 'x' * 300)
    assert len(os.path.basename(long_path)) < 255


def test_locked_is_reentrant_and_leaves_nothing(tmpdir):
    root = str(tmpdir)
    with files.locked('/etc/a.rules', root) as lock_path:
        assert os.path.exists(lock_path)
        assert stat.S_IMODE(os.stat(os.path.dirname(lock_path)).st_mode) == 0o700
        with open(lock_path) as f:
            assert f.read() == ''  # the holder is read from the kernel, nothing is written
        with files.locked('/etc/a.rules', root, timeout=0):  # the same run does not wait for itself
            pass
        assert os.path.exists(lock_path)
    assert os.listdir(root) == []  # lock file and the directories made for it are gone


def test_locked_times_out_naming_the_holder_from_the_kernel(tmpdir):
    import fcntl
    root = str(tmpdir)
    lock_path = files.lock_file_for(root, '/etc/a.rules')
    os.makedirs(os.path.dirname(lock_path), 0o700)
    with open(lock_path, 'w') as holder:  # another open file description, as far as flock is concerned
        holder.write('pid 1\n')  # the file's text is never believed
        holder.flush()
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        with pytest.raises(files.FileError) as info:
            with files.locked('/etc/a.rules', root, timeout=0):
                raise AssertionError('got a lock that is held')
    msg = str(info.value)
    assert 'timed out after 0 s waiting for the lock on /etc/a.rules' in msg
    assert 'held by pid %d (' % os.getpid() in msg and 'pid 1 ' not in msg
    assert '/run/aemops-os-tuning/etc%2Fa.rules.lock' in msg


def test_locked_retakes_the_lock_when_the_holder_unlinked_it(tmpdir, monkeypatch):
    root = str(tmpdir)
    lock_path = files.lock_file_for(root, '/etc/a.rules')
    real_wait = runstate._wait_flock
    calls = []

    def wait(fd, deadline, poll):
        calls.append(fd)
        if len(calls) == 1:  # the previous holder finishes: it unlinks the file we opened
            os.unlink(lock_path)
        return real_wait(fd, deadline, poll)

    monkeypatch.setattr(runstate, '_wait_flock', wait)
    with files.locked('/etc/a.rules', root, timeout=0):
        assert os.path.exists(lock_path)
    assert len(calls) == 2


def _no_mkdir(monkeypatch):
    """mkdir fails as it does for a run that is not root."""
    def mkdir(path, mode=0o777):
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)
    monkeypatch.setattr(runstate.os, 'mkdir', mkdir)


def test_locked_not_required_skips_an_uncreatable_lock(tmpdir, monkeypatch):
    root = str(tmpdir)
    tmpdir.mkdir('run')
    _no_mkdir(monkeypatch)
    with files.locked('/etc/a.rules', root, required=False) as lock_path:
        assert lock_path is None
    with pytest.raises(files.FileError) as info:
        with files.locked('/etc/a.rules', root):
            pass
    assert 'cannot create the lock file' in str(info.value)


def test_locked_all_names_every_owned_file_when_a_lock_cannot_be_created(tmpdir, monkeypatch):
    root = str(tmpdir)
    tmpdir.mkdir('run')
    _no_mkdir(monkeypatch)  # no lock directory can be made: as a non-root run sees it
    with pytest.raises(files.LockCreateError) as info:
        with files.locked_all(['/tmp/w/nonroot.rules', '/etc/tuned/aemops-os-tuning/tuned.conf'], root):
            pass
    text = str(info.value)
    # The first lock in sorted order fails; the message still names the rules file.
    assert 'for /etc/tuned/aemops-os-tuning/tuned.conf' in text
    assert 'This run writes /etc/tuned/aemops-os-tuning/tuned.conf, /tmp/w/nonroot.rules.' in text


def test_locked_all_takes_locks_in_sorted_order(tmpdir, monkeypatch):
    order = []
    real = files.locked

    def spy(path, root='/', timeout=None, poll=0.05, required=True):
        order.append(path)
        return real(path, root, timeout, poll, required)

    monkeypatch.setattr(files, 'locked', spy)
    with files.locked_all(['/etc/tuned/x/tuned.conf', '/etc/udev/rules.d/a.rules', None], str(tmpdir)):
        pass
    assert order == ['/etc/tuned/x/tuned.conf', '/etc/udev/rules.d/a.rules']


@pytest.mark.parametrize('record, why', [
    ('[' * 100000 + ']' * 100000, 'nested too deeply'),
    ('{"a": ' * 100000, 'nested too deeply'),
    ('[1]', 'holds a JSON array, not object'),
])
def test_parse_baselines_reports_hostile_records_never_raises(record, why):
    records, errors = files.parse_baselines('# aemops-baseline %s\n# aemops-baseline {"ok": 1}\n' % record)
    assert records == [{'ok': 1}]
    assert len(errors) == 1 and errors[0].startswith('line 1: %s' % why)


@pytest.mark.parametrize('values, message', [
    ([], None),
    (['/srv', 'x'], None),
    ([''], 'paths[0] is an empty string: remove it'),
    (['/srv', ' ', ''], 'paths[1], paths[2] are an empty string: remove them'),
])
def test_empty_entries_names_the_option_and_index(values, message):
    problem = files.empty_entries('paths', values)
    assert (problem is None) if message is None else problem.startswith(message)
