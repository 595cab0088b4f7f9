# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The textfile_metrics output read by prometheus_client's parser, and the VM's validator (controller side).

``make unit-bench`` runs this in the dev venv (requirements/dev.txt has prometheus_client). Two independent readers
of module_utils/metrics.py's text: prometheus_client.parser (the Python client's reader of the exposition format),
and molecule/default/files/check_prom.py, the strict reader and name lint (a port of promtool's promlint rules)
that the default VM scenario runs on the guest. The validator is tested here too, on files it must refuse.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.normpath(os.path.join(HERE, os.pardir, os.pardir))
CHECK_PROM = os.path.join(CHECKOUT, 'molecule', 'default', 'files', 'check_prom.py')
sys.path.insert(0, os.path.join(CHECKOUT, '.collections'))  # the link made by make venv

from ansible_collections.aemops.os_tuning.plugins.module_utils import metrics  # noqa: E402

HOSTILE_PATH = u'/srv/a"em\\x\nrepo \u00e9'
HOSTILE_DEVICE = u'nv"me\\1\n2'


def facts(hostile=False):
    device = HOSTILE_DEVICE if hostile else u'dm-0'
    path = HOSTILE_PATH if hostile else u'/opt/aem/crx-quickstart/repository'
    return {
        'block_devices': {
            device: {'read_ahead_kb': 4096, 'set_by': u'tuned "throughput-performance" [disk\\1]\nreadahead=>4096'},
            'nvme1n1': {'read_ahead_kb': 32, 'set_by': 'aemops udev rule'},
            'nvme0n1': {'read_ahead_kb': 128, 'set_by': None},
        },
        'paths': {path: {'device': device}},
        'plan': {'targets': [path], 'devices': {u'/dev/disk/by-id/nvme-"x"': 'nvme1n1'},
                 'underlying': {device: ['nvme1n1']}},
        'thp': {'runtime': {'enabled': {'value': 'always'}, 'defrag': {'value': 'defer+madvise'}}},
        'compliance': {'misses': [{'kind': 'read_ahead', 'subject': device, 'message': '...'},
                                  {'kind': 'reader', 'subject': 'pid 1', 'message': '...'}], 'compliant': False},
        'readers': {'stale': [{'pid': 1}], 'needs_restart': [{'pid': 2}, {'pid': 3}]},
        'errors': ['lvs: permission denied'],
        'ebs': {'nvme1n1': {'device': 'nvme1n1', 'volume_id': 'vol-0123456789abcdef0',
                            'stats': {'ebs_volume_performance_exceeded_tp': 41500000, 'total_read_bytes': 2 ** 40}},
                'nvme0n1': {'device': 'nvme0n1', 'volume_id': None, 'reason': 'no EBS statistics: not an EBS volume'}},
    }


def render(hostile=False, now=1764684000.125):
    return metrics.render(metrics.samples(facts(hostile), now, read_ahead_kb=32, error='', mode='audit',
                                          state='present'))


def client_families(content):
    return dict((f.name, f) for f in text_string_to_metric_families(content))


def client_value(families, family, **labels):
    found = [s.value for f in families.values() for s in f.samples
             if s.name == family and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (family, labels, found)
    return found[0]


@pytest.mark.parametrize('hostile', [False, True])
def test_prometheus_client_reads_every_family_and_label_back(hostile):
    content = render(hostile)
    families = client_families(content)
    # prometheus_client names an _info gauge's family without the suffix only for the OpenMetrics info type;
    # with the text format's gauge the family keeps its full name.
    # A counter's family is named without its _total suffix.
    written = [n[:-len('_total')] if n in metrics.COUNTERS else n for n in metrics.NAMES if n in content]
    assert sorted(families) == sorted(written)
    for name, family in families.items():
        assert family.type == ('counter' if name + '_total' in metrics.COUNTERS else 'gauge') and family.documentation
    assert client_value(families, 'aemops_os_tuning_ebs_volume_throughput_exceeded_seconds_total', device='nvme1n1',
                        volume_id='vol-0123456789abcdef0') == 41.5
    assert client_value(families, 'aemops_os_tuning_ebs_read_bytes_total', device='nvme1n1',
                        volume_id='vol-0123456789abcdef0') == 2 ** 40
    device = HOSTILE_DEVICE if hostile else 'dm-0'
    path = HOSTILE_PATH if hostile else '/opt/aem/crx-quickstart/repository'
    assert client_value(families, 'aemops_os_tuning_read_ahead_bytes', device=device) == 4096 * 1024
    assert client_value(families, 'aemops_os_tuning_read_ahead_wanted_bytes', device=device) == 32 * 1024
    assert client_value(families, 'aemops_os_tuning_target_info', device=device, target=path) == 1
    assert client_value(families, 'aemops_os_tuning_target_info', device='nvme1n1', target='beneath %s' % device) == 1
    assert client_value(families, 'aemops_os_tuning_target_info', device='nvme1n1',
                        target='/dev/disk/by-id/nvme-"x"') == 1
    assert client_value(families, 'aemops_os_tuning_read_ahead_source_info', device=device, source_kind='tuned',
                        source=u'tuned "throughput-performance" [disk\\1]\nreadahead=>4096') == 1
    assert client_value(families, 'aemops_os_tuning_read_ahead_source_info', device='nvme0n1', source_kind='unknown',
                        source='') == 1
    assert client_value(families, 'aemops_os_tuning_thp_info', enabled='always', defrag='defer+madvise') == 1
    assert client_value(families, 'aemops_os_tuning_compliant') == 0
    assert client_value(families, 'aemops_os_tuning_misses') == 2
    assert client_value(families, 'aemops_os_tuning_misses_by_kind', kind='reader') == 1
    assert client_value(families, 'aemops_os_tuning_stale_readers', fix='restart') == 2
    assert client_value(families, 'aemops_os_tuning_fact_errors') == 1
    assert client_value(families, 'aemops_os_tuning_last_run_timestamp_seconds') == 1764684000.125


def _check_prom(tmp_path, content):
    path = tmp_path / 'x.prom'
    path.write_bytes(content.encode('utf-8'))
    proc = subprocess.run([sys.executable, CHECK_PROM, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize('hostile', [False, True])
def test_the_vm_validator_accepts_the_output_and_agrees_with_prometheus_client(tmp_path, hostile):
    content = render(hostile)
    rc, out, err = _check_prom(tmp_path, content)
    assert rc == 0, err
    ours = json.loads(out)['families']
    # prometheus_client names a counter's family without its _total suffix
    theirs = dict((name + '_total' if family.type == 'counter' else name, family)
                  for name, family in client_families(content).items())
    assert sorted(ours) == sorted(theirs)
    for name, family in theirs.items():
        assert family.documentation == ours[name]['help']
        assert sorted((sorted(s.labels.items()), s.value) for s in family.samples) == sorted(
            (sorted(labels.items()), v) for labels, v in ours[name]['samples'])


@pytest.mark.parametrize('content, problem', [
    ('x_bytes{a="b} 1\n', 'bad label syntax'),
    ('x_bytes 1 2 3\n', 'not a sample'),
    ('x_bytes{a="b"c="d"} 1\n', 'expected ","'),
    ('x_bytes{a="\\q"} 1\n', 'bad label syntax'),
    ('x_bytes{a="1",a="2"} 1\n', 'label a repeated'),
    ('x_bytes 1\nx_bytes 2\n', 'a second sample with the same labels'),
    ('x_bytes 1 1700000000\n', 'a timestamp on a sample'),
    ('x_bytes one\n', 'bad value'),
    ('# HELP x_bytes a\n# HELP x_bytes b\nx_bytes 1\n', 'second HELP line'),
    ('x_bytes 1\n# TYPE x_bytes gauge\n', 'TYPE line for x_bytes after its samples'),
    ('# TYPE x_bytes gauge\nx_bytes 1\n# HELP y_bytes y\n# TYPE y_bytes gauge\ny_bytes 1\nx_bytes{a="b"} 2\n',
     'samples of x_bytes are not together'),
    ('# HELP x_bytes x\n# TYPE x_bytes gauge\nx_bytes 1', 'does not end with a newline'),
    ('# HELP read_ahead_kb x\n# TYPE read_ahead_kb gauge\nread_ahead_kb 32\n', 'abbreviated units'),
    ('# HELP read_ahead_kilobytes x\n# TYPE read_ahead_kilobytes gauge\nread_ahead_kilobytes 32\n',
     'use base unit "bytes" instead of "kilobytes"'),
    ('# TYPE x_bytes gauge\nx_bytes 1\n', 'no help text'),
    ('# HELP x_info x\n# TYPE x_info gauge\nx_info{a="b"} 2\n', 'an _info metric has the value 1'),
    ('# HELP x_runs x\n# TYPE x_runs counter\nx_runs 2\n', 'counter metrics should have "_total" suffix'),
])
def test_the_vm_validator_refuses_broken_files(tmp_path, content, problem):
    rc, out, err = _check_prom(tmp_path, content)
    assert rc == 1 and out == '' and problem in err, err


def test_the_output_passes_the_lint_that_promtool_applies():
    sys.path.insert(0, os.path.dirname(CHECK_PROM))
    try:
        import check_prom
    finally:
        sys.path.pop(0)
    families, _order = check_prom.parse(render(True))
    assert check_prom.lint(families) == []


def test_the_vm_validator_keys_each_series_as_the_file_writes_it(tmp_path):
    content = render(True)
    rc, out, err = _check_prom(tmp_path, content)
    assert rc == 0, err
    found = json.loads(out)['series']
    lines = [line for line in content.split('\n') if line and not line.startswith('#')]
    assert sorted(found) == sorted(line.rsplit(' ', 1)[0] for line in lines)
    assert found['aemops_os_tuning_compliant'] == 0
    assert found['aemops_os_tuning_read_ahead_bytes{device="nvme1n1"}'] == 32 * 1024
