# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel's own read-ahead rule by release (module_utils/kernel_readahead.py).

Upstream Linux, block layer: before v5.10 every queue starts at 128 KiB (VM_READAHEAD_PAGES); from
v5.10 (c2e4cd57cfa1, "block: lift setting the readahead size into the block layer") at
max(2 x io_opt, 128 KiB), in block/blk-settings.c (blk_queue_io_opt, later blk_apply_bdi_limits);
from v6.17 (459779d04ae8, "block: Improve read ahead size for rotational devices") a rotational
device without io_opt uses 2 x max_sectors.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import kernel_readahead as kr
from fakehost import FakeHost

MIB = 1024 * 1024


@pytest.mark.parametrize('release, limits, page_kb, kb, rule', [
    # RHEL 8 (4.18): the upstream block layer ignores io_opt
    ('4.18.0-553.el8_10.x86_64', {'optimal_io_size': 4 * MIB}, 4, 128,
     'kernel default: 128 KiB (Linux before 5.10 does not use io_opt)'),
    ('5.4.0-150-generic', {'optimal_io_size': 4 * MIB}, 4, 128,
     'kernel default: 128 KiB (Linux before 5.10 does not use io_opt)'),
    # RHEL 9 (5.14), Debian 12 (6.1), RHEL 10 / Debian 13 (6.12): max(2 x io_opt, 128 KiB)
    ('5.14.0-427.13.1.el9_4.x86_64', {'optimal_io_size': 4 * MIB}, 4, 8192, 'kernel default: 2 x io_opt = 8192 KiB'),
    ('6.1.0-28-amd64', {'optimal_io_size': 0, 'rotational': True, 'max_sectors_kb': 1280}, 4, 128,
     'kernel default: 128 KiB'),
    ('6.12.48+deb13-amd64', {'optimal_io_size': 32768}, 4, 128, 'kernel default: 128 KiB'),   # 64 < 128
    ('6.12.0-55.el10.x86_64', {'optimal_io_size': 512 * 1024}, 4, 1024, 'kernel default: 2 x io_opt = 1024 KiB'),
    # before 6.17 a rotational disk without io_opt stays at 128
    ('6.16.9', {'optimal_io_size': 0, 'rotational': True, 'max_sectors_kb': 1280}, 4, 128, 'kernel default: 128 KiB'),
    # 6.17+: rotational without io_opt -> 2 x max_sectors_kb
    ('6.17.0', {'optimal_io_size': 0, 'rotational': True, 'max_sectors_kb': 1280}, 4, 2560,
     'rotational default, Linux >= 6.17: 2 x max_sectors_kb = 2560 KiB'),
    ('6.18.5-200.fc43.x86_64', {'optimal_io_size': 0, 'rotational': False, 'max_sectors_kb': 1280}, 4, 128,
     'kernel default: 128 KiB'),
    ('6.18.0', {'optimal_io_size': 1 * MIB, 'rotational': True, 'max_sectors_kb': 1280}, 4, 2048,
     'kernel default: 2 x io_opt = 2048 KiB'),                                              # io_opt wins
    # whole pages: on a 64 KiB page kernel 2 x 100,000 bytes is 3 pages
    ('5.14.0-503.el9.aarch64+64k', {'optimal_io_size': 100000}, 64, 192, 'kernel default: 2 x io_opt = 192 KiB'),
    ('5.14.0-503.el9.x86_64', {'optimal_io_size': 100000}, 4, 192, 'kernel default: 2 x io_opt = 192 KiB'),
    ('5.14.0-503.el9.x86_64', {'optimal_io_size': 70000}, 4, 136, 'kernel default: 2 x io_opt = 136 KiB'),
])
def test_the_kernel_default_by_release(release, limits, page_kb, kb, rule):
    assert kr.default_kb(release, limits, page_kb) == {'kb': kb, 'rule': rule}


def test_an_unknown_release_has_no_rule():
    assert kr.default_kb(None, {'optimal_io_size': 4 * MIB}, 4) is None
    assert kr.default_kb('unknown', {}, 4) is None


KERNEL_8192 = {'kb': 8192, 'rule': 'kernel default: 2 x io_opt = 8192 KiB'}
TUNED_4096 = {'profile': 'throughput-performance', 'instance': 'disk', 'setting': '>4096', 'kb': 4096}


@pytest.mark.parametrize('value, kernel, limits, hit, rule, expected', [
    (4096, KERNEL_8192, {}, TUNED_4096, None, 'tuned throughput-performance [disk] readahead=>4096'),
    # tuned's >4096 only raises: a disk at the kernel's 8192 is the kernel's
    (8192, KERNEL_8192, {'optimal_io_size': 4 * MIB}, TUNED_4096, None, 'kernel default: 2 x io_opt = 8192 KiB'),
    (32, KERNEL_8192, {}, TUNED_4096, 32, 'aemops udev rule'),
    (128, {'kb': 128, 'rule': 'kernel default: 128 KiB'}, {}, None, None, 'kernel default: 128 KiB'),
    (1024, KERNEL_8192, {}, None, None, None),                  # something else: not explained
    (8192, {'kb': 128, 'rule': 'kernel default: 128 KiB (Linux before 5.10 does not use io_opt)'},
     {'optimal_io_size': 4 * MIB}, None, None,
     'kernel default: 2 x io_opt = 8192 KiB (the Linux 5.10 rule; this kernel is older, so a vendor backport)'),
    (None, KERNEL_8192, {}, None, None, None),
])
def test_set_by(value, kernel, limits, hit, rule, expected):
    assert kr.set_by(value, kernel, limits, hit, rule) == expected


def test_queue_limits_and_release_from_sysfs(tmpdir):
    host = FakeHost(tmpdir)
    host.add_disk('vdb', '252:16')
    host.set_queue('vdb', optimal_io_size=4 * MIB, rotational=1, max_sectors_kb=2560)
    host.set_kernel('6.12.0-55.el10.x86_64')
    assert kr.kernel_release(host.root) == '6.12.0-55.el10.x86_64'
    assert kr.queue_limits(host.path(host._devdir('vdb'))) == {
        'optimal_io_size': 4194304, 'rotational': True, 'max_sectors_kb': 2560}
    host.add_disk('vdc', '252:32')
    assert kr.queue_limits(host.path(host._devdir('vdc'))) == {
        'optimal_io_size': None, 'rotational': None, 'max_sectors_kb': None}
