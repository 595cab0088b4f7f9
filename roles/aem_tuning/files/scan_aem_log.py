#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Count the Oak symptoms of slow I/O in AEM's error.log, in all and within the run.

Usage: scan_aem_log.py ERROR_LOG SINCE_EPOCH [UNTIL_EPOCH]. Prints JSON. Runs on Python 2.7 and 3.
AEM log lines start with "30.11.2026 14:00:00.000" (the host's local time). The window is from
SINCE (the run's start, read from the host's own clock) to UNTIL (default: now, on the host),
so that neither clock skew with the controller nor future-dated lines count as "during the run".
"""
from __future__ import absolute_import, division, print_function

import json
import sys
import time

PATTERNS = {
    'commit_blocked': 'This commit is blocked by a commit',
    'checkpoint_failed': 'Failed to create checkpoint',
}


def main(path, since, until):
    counts = dict((k, 0) for k in PATTERNS)
    recent = dict((k, 0) for k in PATTERNS)
    try:
        handle = open(path)
    except IOError as e:
        print(json.dumps({'path': path, 'error': str(e)}))
        return 0
    with handle:
        for line in handle:
            hits = [k for k, text in PATTERNS.items() if text in line]
            if not hits:
                continue
            try:
                stamp = time.mktime(time.strptime(line[:19], '%d.%m.%Y %H:%M:%S'))
            except ValueError:
                stamp = None
            for key in hits:
                counts[key] += 1
                if stamp is not None and since <= stamp <= until:
                    recent[key] += 1
    print(json.dumps({'path': path, 'total': counts, 'since_run': recent, 'since': since, 'until': until}))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else time.time()))
