# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The hosts the monitoring tests watch, and their textfiles as the collection's own textfile_metrics writes them.

``facts()`` builds ``ansible_facts.os_tuning`` in tuning_facts' shape (the devices, the plan, THP, the misses, the
readers with their measurement, the EBS volume's log page 0xD0 counters); ``write()`` runs the module's own ``run()``
on it (the code the role runs on a host: metrics.samples, render and publish, with the module's defaults), into a
textfile directory under a root of the test's. Nothing here types a metric by hand.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import yaml

CHECKOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
RULES = os.path.join(CHECKOUT, 'extensions', 'prometheus', 'aemops-os-tuning.rules.yml')
DASHBOARD = os.path.join(CHECKOUT, 'extensions', 'grafana', 'aemops-os-tuning.dashboard.json')
TEXTFILE_DIR = '/textfile'
REPO = '/opt/aem/crx-quickstart/repository'
VOLUME = 'vol-0123456789abcdef0'
if os.path.join(CHECKOUT, '.collections') not in sys.path:
    sys.path.insert(0, os.path.join(CHECKOUT, '.collections'))  # the link made by make venv

from ansible_collections.aemops.os_tuning.plugins.module_utils import metrics  # noqa: E402
from ansible_collections.aemops.os_tuning.plugins.modules import textfile_metrics  # noqa: E402


def facts(device='nvme1n1', read_ahead_kb=32, thp='never', cmdline_thp=None, stale=0, restart=0, aem_kib=None,
          exceeded=None):
    """tuning_facts' os_tuning for a host whose repository is on ``device`` (an EBS volume) and whose root disk is
    nvme0n1, after a run that wants 32 KiB and THP never. ``exceeded``: {log page 0xD0 key: microseconds}."""
    misses = []
    if read_ahead_kb != 32:
        misses.append({'subject': device, 'kind': 'read_ahead', 'message': '%s reads %d KiB, not 32' % (device, read_ahead_kb)})
    if thp != 'never':
        misses.append({'subject': 'THP', 'kind': 'thp', 'message': 'transparent_hugepage/enabled is %s, not never' % thp})
    if cmdline_thp:
        misses.append({'subject': 'kernel command line', 'kind': 'cmdline', 'message': 'transparent_hugepage=%s' % cmdline_thp})
    aem = [{'unit': 'aem.service', 'pid': 2200, 'comm': 'java', 'basis': 'measured' if aem_kib else 'inferred',
            'measured': {'kib_per_fault': float(aem_kib), 'faults': 256, 'seconds': 5.0, 'read_kib': int(aem_kib * 256),
                         'rchar_kib': 2048} if aem_kib else None}]
    readers = {'stale': [{'unit': 'backup.service', 'pid': 3000 + i, 'comm': 'rsync', 'basis': 'inferred', 'measured': None}
                         for i in range(stale)],
               'needs_restart': aem[:1] * restart, 'fine': [] if restart else aem}
    misses += [{'subject': 'pid 2200', 'kind': 'reader_restart', 'message': 'restart it'}] * restart
    misses += [{'subject': 'pid %d' % (3000 + i), 'kind': 'reader', 'message': 'refresh'} for i in range(stale)]
    stats = dict({'ebs_volume_performance_exceeded_iops': 0, 'ebs_volume_performance_exceeded_tp': 0,
                  'ec2_instance_performance_exceeded_iops': 0, 'ec2_instance_performance_exceeded_tp': 0,
                  'total_read_ops': 10 ** 6, 'total_write_ops': 10 ** 5, 'total_read_bytes': 2 ** 36,
                  'total_write_bytes': 2 ** 30, 'total_read_time': 5 * 10 ** 8, 'total_write_time': 10 ** 8},
                 **(exceeded or {}))
    return {
        'block_devices': {device: {'read_ahead_kb': read_ahead_kb, 'set_by': 'aemops udev rule' if read_ahead_kb == 32
                                   else 'tuned throughput-performance [disk] readahead=>%d' % read_ahead_kb},
                          'nvme0n1': {'read_ahead_kb': 128, 'set_by': 'kernel default: 128 KiB'}},
        'paths': {REPO: {'device': device}},
        'plan': {'targets': [REPO], 'devices': {}, 'underlying': {}},
        'thp': {'runtime': {'enabled': {'value': thp}, 'defrag': {'value': 'madvise'}}},
        'compliance': {'misses': misses, 'compliant': not misses},
        'readers': readers,
        'errors': [],
        'ebs': {device: {'device': device, 'volume_id': VOLUME, 'stats': stats},
                'nvme0n1': {'device': 'nvme0n1', 'volume_id': None, 'reason': 'no EBS statistics: not an EBS volume'}},
    }


class _Module(object):
    """What textfile_metrics.run uses of an AnsibleModule: the parameters (the module's documented defaults, then
    the ones given), check and diff mode, fail_json and atomic_move."""

    def __init__(self, params):
        options = yaml.safe_load(textfile_metrics.DOCUMENTATION)['options']
        self.params = dict((name, spec.get('default')) for name, spec in options.items())
        self.params.update(params)
        self.check_mode = False
        self._diff = False

    def fail_json(self, **result):
        raise AssertionError('textfile_metrics failed: %s' % result)

    @staticmethod
    def atomic_move(src, dest):
        os.rename(src, dest)


def write(root, host_facts, now, **params):
    """Run textfile_metrics (its own run()) for ``host_facts`` at Unix time ``now`` into ``root``/textfile; return
    the text it wrote. ``params``: the module's other options (read_ahead_kb 32, run_mode audit, aem_service aem by
    default)."""
    directory = os.path.join(root, TEXTFILE_DIR.lstrip('/'))
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
        for made in (root, directory):  # whatever the umask: the module refuses a directory others can write
            os.chmod(made, 0o755)
    given = {'directory': TEXTFILE_DIR, 'facts': host_facts, 'read_ahead_kb': 32, 'run_mode': 'audit',
             'aem_service': 'aem'}
    given.update(params)
    result = textfile_metrics.run(_Module(given), root, now=now)
    with open(os.path.join(root, TEXTFILE_DIR.lstrip('/'), metrics.DEFAULT_NAME)) as f:
        content = f.read()
    assert content == result['content']
    return content


def load_rules():
    with open(RULES) as f:
        return yaml.safe_load(f)


def alert_names():
    return [r['alert'] for g in load_rules()['groups'] for r in g['rules'] if 'alert' in r]
