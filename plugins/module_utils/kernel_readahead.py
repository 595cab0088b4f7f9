# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel as a source of read-ahead: the default the block layer gives a device, and "set by".

Functions over a root path (tests run on fake sysfs trees). The kernel's rule, by upstream
release (the kernel's own source, block layer; no code copied):

- before Linux 5.10: every queue starts at ``VM_READAHEAD_PAGES`` (128 KiB); the optimal I/O size
  (``queue/optimal_io_size``) plays no part in the block layer (md raid0/10/5 set twice a stripe
  themselves). Commit c2e4cd57cfa1 "block: lift setting the readahead size into the block layer"
  (mainline, Christoph Hellwig, 2020-09-24; in v5.10 through block-5.10-2020-10-12; f8d6c28b2a8e is
  its pre-merge id in the block tree) removed those driver settings and added the rule below.
- from Linux 5.10: ``ra_pages = max(io_opt * 2 / PAGE_SIZE, VM_READAHEAD_PAGES)``, applied when the
  disk is registered and when its limits change (``blk_queue_io_opt``; ``disk_update_readahead`` later;
  ``blk_apply_bdi_limits`` in block/blk-settings.c from the atomic queue limits, 6.10/6.11). dm devices
  get it from their stacked limits. So a device reporting a large ``io_opt`` comes up at twice that.
  A 2025 change (``max3(bdi->ra_pages, ...)``, "don't ever decrease it") keeps a larger value already set
  when limits are applied again; it does not change the value a device comes up with.
- from Linux 6.17: commit 459779d04ae8 "block: Improve read ahead size for rotational devices" (in
  v6.17-rc1): a rotational device (``queue/rotational`` 1) that reports no ``io_opt`` uses its
  ``max_sectors`` (``queue/max_sectors_kb``) in its place: twice max_sectors_kb.

The integer division is in pages: on a 64 KiB page kernel twice io_opt is rounded down to whole pages.
RHEL kernels carry backports (RHEL 8's 4.18 is reported to apply the io_opt rule to dm devices since 8.5);
that is not verified against RHEL source here, so on a kernel older than 5.10 a value of exactly twice
io_opt is named as the 5.10 rule, "as a backport".
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils.files import host_text

VM_READAHEAD_KB = 128
IO_OPT_RULE_FROM = (5, 10)
ROTATIONAL_RULE_FROM = (6, 17)
OSRELEASE = '/proc/sys/kernel/osrelease'


def _read(root, path):
    try:
        text = host_text(root, path, static=True)  # the running kernel's release: fixed for the boot
    except (IOError, OSError):
        return None
    return None if text is None else text.strip()


def kernel_release(root):
    """The running kernel's release (``uname -r``), or None."""
    return _read(root, OSRELEASE) or None


def release_version(release):
    """(major, minor) of a release such as ``5.14.0-427.13.1.el9_4.x86_64``, or None."""
    match = re.match(r'^(\d+)\.(\d+)', release or '')
    return (int(match.group(1)), int(match.group(2))) if match else None


def queue_limits(device_dir):
    """``optimal_io_size`` (bytes), ``rotational`` (bool) and ``max_sectors_kb`` of the queue of the device whose
    sysfs directory (as found under the root) is ``device_dir``; None each where missing or not a number."""
    result = {}
    for key in ('optimal_io_size', 'rotational', 'max_sectors_kb'):
        text = _read('/', os.path.join(device_dir, 'queue', key))
        value = int(text) if text is not None and text.isdigit() else None
        result[key] = bool(value) if key == 'rotational' and value is not None else value
    return result


def default_kb(release, limits, page_kb):
    """The read-ahead the kernel gives a device with ``limits`` (see ``queue_limits``) at this ``release``:
    ``{'kb': N, 'rule': text}``, or None when the release is unknown."""
    version = release_version(release)
    if version is None:
        return None
    if version < IO_OPT_RULE_FROM:
        return {'kb': VM_READAHEAD_KB, 'rule': 'kernel default: %d KiB (Linux before 5.10 does not use io_opt)'
                                               % VM_READAHEAD_KB}
    io_opt = limits.get('optimal_io_size') or 0
    rule = 'kernel default: 2 x io_opt = %d KiB'
    if not io_opt and version >= ROTATIONAL_RULE_FROM and limits.get('rotational') and limits.get('max_sectors_kb'):
        io_opt = limits['max_sectors_kb'] * 1024
        rule = 'rotational default, Linux >= 6.17: 2 x max_sectors_kb = %d KiB'
    page_bytes = page_kb * 1024
    kb = (io_opt * 2 // page_bytes) * page_kb
    if kb > VM_READAHEAD_KB:
        return {'kb': kb, 'rule': rule % kb}
    return {'kb': VM_READAHEAD_KB, 'rule': 'kernel default: %d KiB' % VM_READAHEAD_KB}


def set_by(read_ahead_kb, kernel, limits, tuned_hit=None, rule=None):
    """What explains a device's read-ahead of ``read_ahead_kb``: tuned's instance (``tuned_hit``, when it gives
    this value), the collection's udev rule (``rule``, its KiB), or the kernel's own rule (``kernel`` from
    ``default_kb``, ``limits`` from ``queue_limits``); None when none of them gives this value."""
    if read_ahead_kb is None:
        return None
    if tuned_hit and tuned_hit.get('kb') == read_ahead_kb:
        return 'tuned %s [%s] readahead=%s' % (tuned_hit.get('profile'), tuned_hit.get('instance'),
                                               tuned_hit.get('setting'))
    if rule is not None and rule == read_ahead_kb:
        return 'aemops udev rule'
    if kernel is not None and read_ahead_kb == kernel['kb']:
        return kernel['rule']
    io_opt = (limits or {}).get('optimal_io_size') or 0
    if kernel is not None and io_opt and read_ahead_kb == io_opt * 2 // 1024 and read_ahead_kb > VM_READAHEAD_KB:
        return ('kernel default: 2 x io_opt = %d KiB (the Linux 5.10 rule; this kernel is older, so a vendor '
                'backport)' % read_ahead_kb)
    return None
