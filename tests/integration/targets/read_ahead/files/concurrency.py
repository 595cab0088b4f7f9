#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Two read_ahead module processes against one rules file, released at the same moment, N rounds.

Usage: concurrency.py ROUNDS RULES_FILE DEVICE_A DEVICE_B KB_A KB_B

Each round starts two module processes (the collection's read_ahead.main(), imported before the
start signal so that both race from the first line of the run), one per device, each with its
own value. Both wait on a pipe and are released together. After every round the rules file must
hold both devices' rules with that round's values and one baseline per device: a lost update
shows as a missing rule or baseline. Prints one JSON line with the totals; exit 1 on any loss.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r'''
import sys
from ansible_collections.aemops.os_tuning.plugins.modules import read_ahead
sys.stdin.read(1)  # the start signal: both processes are past their imports
read_ahead.main()
'''


def backing(dev):
    with open('/sys/block/%s/loop/backing_file' % dev) as f:
        return f.read().rstrip('\n')


def main():
    rounds, rules, dev_a, dev_b = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    kbs = [int(sys.argv[5]), int(sys.argv[6])]
    match = dict((dev, 'ATTR{loop/backing_file}=="%s"' % backing(dev)) for dev in (dev_a, dev_b))
    work = tempfile.mkdtemp(prefix='aemops-conc-')
    lost, failed = [], []
    for number in range(rounds):
        procs = []
        for i, dev in enumerate((dev_a, dev_b)):
            kb = kbs[(number + i) % 2]  # every round changes both rules
            args = os.path.join(work, '%s.json' % dev)
            with open(args, 'w') as f:
                json.dump({'ANSIBLE_MODULE_ARGS': {
                    'devices': [dev], 'read_ahead_kb': kb, 'rules_file': rules, 'tuned_override': False,
                    '_ansible_remote_tmp': work, '_ansible_keep_remote_files': False}}, f)
            procs.append((dev, kb, subprocess.Popen([sys.executable, '-c', CHILD, args], stdin=subprocess.PIPE,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
        for _dev, _kb, proc in procs:
            proc.stdin.write(b'g')
            proc.stdin.flush()
        for _dev, _kb, proc in procs:
            proc.stdin.close()
            proc.stdin = None  # communicate() must not flush it again
        results = []
        for dev, kb, proc in procs:
            out, err = proc.communicate()
            try:
                result = json.loads(out.decode('utf-8'))
            except ValueError:
                result = {'failed': True, 'msg': (out + err).decode('utf-8', 'replace')[-400:]}
            if result.get('failed') or proc.returncode != 0:
                failed.append('round %d %s: %s' % (number, dev, result.get('msg')))
            results.append((dev, kb, result))
        with open(rules) as f:
            text = f.read()
        for dev, kb, _result in results:
            rule = '%s, ATTR{queue/read_ahead_kb}="%d"' % (match[dev], kb)
            if rule not in text:
                lost.append('round %d: rule of %s (%d KiB) missing' % (number, dev, kb))
            if text.count('"match":%s' % json.dumps(match[dev])) != 1:
                lost.append('round %d: baseline of %s missing or doubled' % (number, dev))
    shutil.rmtree(work)
    print(json.dumps({'rounds': rounds, 'runs': 2 * rounds, 'lost': lost, 'failed': failed}))
    return 1 if lost or failed else 0


if __name__ == '__main__':
    sys.exit(main())
