#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Print the host's boot id, its clock and the kernel's boot time as one JSON line: boot_clock.py [ROOT].

Run on the host around the role's reboot and AEM restart, so that the result records the boot ids and the
times of each step on the host's own clock (UTC, as tuning_facts' clock), not the controller's. ROOT (default
/) is for tests. Runs on Python 2.7 and 3.
"""
from __future__ import absolute_import, division, print_function

import json
import os
import sys
import time


def iso(epoch):
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch)) if epoch else None


def main(root):
    with open(os.path.join(root, 'proc/sys/kernel/random/boot_id')) as f:
        boot_id = f.read().strip()
    booted = 0
    with open(os.path.join(root, 'proc/stat')) as f:
        for line in f:
            if line.startswith('btime '):
                booted = int(line.split()[1])
    now = time.time()
    return {'boot_id': boot_id, 'epoch': round(now, 3), 'iso': iso(now), 'booted_epoch': booted, 'booted': iso(booted)}


if __name__ == '__main__':
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else '/')))
