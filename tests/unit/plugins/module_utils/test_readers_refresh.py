# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/readers_refresh.py: pidfd_getfd and posix_fadvise on another process's
descriptors, through a fake kernel (fakehost.FakeSyscalls) and once through the real one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_refresh
from fakehost import FakeSyscalls, nitro_host
from readers_fakes import oak, planned


@pytest.fixture
def host(tmpdir):
    return nitro_host(tmpdir)


# -- refreshing ---------------------------------------------------------------------------------

def test_refresh_duplicates_each_descriptor_and_advises_normal(host):
    oak(host)
    sys = FakeSyscalls(host)
    out = readers_refresh.refresh(host.root, planned(host), sys)
    assert sys.calls == [('pidfd_open', 4242), ('pidfd_getfd', 4242, 10), ('fadvise_normal', ('253:0', 131)),
                         ('pidfd_getfd', 4242, 11), ('fadvise_normal', ('253:0', 132))]
    assert sys.open_fds == set()  # every duplicate and the pidfd closed
    assert [(r['entry']['pid'], [i['fd'] for i in r['refreshed']], r['failed'], r['reason']) for r in out] == [
        (4242, [10, 11], [], None)]


def test_refresh_skips_a_descriptor_that_now_names_another_file(host):
    oak(host)
    plan = planned(host)
    host.proc_stats[host.path('/proc/4242/fd/11')] = ('253:0', 999)  # closed and reused since the scan
    sys = FakeSyscalls(host)
    out = readers_refresh.refresh(host.root, plan, sys)
    assert [i['fd'] for i in out[0]['refreshed']] == [10] and [i['fd'] for i in out[0]['vanished']] == [11]
    assert ('fadvise_normal', ('253:0', 999)) not in sys.calls


def test_refresh_skips_a_reused_pid(host):
    oak(host)
    plan = planned(host)
    host.write('/proc/4242/stat', host.read('/proc/4242/stat').replace(' 5000 ', ' 5001 '))
    sys = FakeSyscalls(host)
    out = readers_refresh.refresh(host.root, plan, sys)
    assert sys.calls == [('pidfd_open', 4242)] and out[0]['refreshed'] == [] and out[0]['reason'] is None


@pytest.mark.parametrize('call, code, yama, why', [
    ('pidfd_open', errno.ENOSYS, None, 'no_pidfd_getfd'),
    ('pidfd_getfd', errno.ENOSYS, None, 'no_pidfd_getfd'),
    ('pidfd_getfd', errno.EPERM, '3\n', 'yama'),
    ('pidfd_getfd', errno.EPERM, '1\n', 'eperm'),
    ('pidfd_getfd', errno.EACCES, None, 'lsm'),
])
def test_refusals_are_reported_in_one_line_not_raised(host, call, code, yama, why):
    reason = readers_refresh.WHY[why]
    oak(host)
    oak(host, pid=4500, start_ticks=6000)
    if yama:
        host.write(readers_refresh.YAMA_PTRACE_SCOPE, yama)
    sys = FakeSyscalls(host, fail={call: code})
    out = readers_refresh.refresh(host.root, planned(host), sys)
    assert [(r['entry']['pid'], r['refreshed'], [i['fd'] for i in r['failed']], r['why'], r['reason'])
            for r in out] == [(4242, [], [10, 11], why, reason), (4500, [], [10, 11], why, reason)]
    assert sys.open_fds == set()
    if code == errno.ENOSYS:  # not tried again for the second process
        assert [c for c in sys.calls if c[0] == 'pidfd_open'] == [('pidfd_open', 4242)]


def test_a_process_that_exits_before_the_refresh_is_not_a_failure(host):
    oak(host)
    out = readers_refresh.refresh(host.root, planned(host), FakeSyscalls(host, fail={'pidfd_open': errno.ESRCH}))
    assert (out[0]['reason'], out[0]['failed'], len(out[0]['vanished'])) == (None, [], 2)


def test_the_real_syscalls_on_this_python():
    """On the test machine: a descriptor of our own process, refreshed through pidfd when the kernel has it."""
    sys = readers_refresh.Syscalls()
    fd = os.open(__file__, os.O_RDONLY)
    try:
        sys.fadvise_normal(fd)
        try:
            pidfd = sys.pidfd_open(os.getpid())
        except OSError as e:
            assert e.errno in (errno.ENOSYS, errno.EPERM)
            return
        try:
            dup = sys.pidfd_getfd(pidfd, fd)
            assert os.fstat(dup).st_ino == os.fstat(fd).st_ino
            sys.fadvise_normal(dup)
            sys.close(dup)
        finally:
            sys.close(pidfd)
    finally:
        os.close(fd)
