# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""extensions/prometheus/aemops-os-tuning.rules.yml under promtool: check rules, and test rules on the series of
textfiles that the collection's own textfile_metrics wrote (tests/monitoring/hosts.py), never typed by hand.

Each scenario is a host with a run of the role every hour (or not), whose textfile node_exporter would serve until
the next run; the test writes each run's file with the module, reads it back with prometheus_client's parser, and
turns the samples into promtool's input series (a scrape every 5 minutes, with the instance and job labels a scrape
adds). At each evaluation time every alert of the file is checked: the scenario's expected alerts, and no other.
For every alert there is a scenario where it fires and one where it does not (the compliant host, and one just
under its threshold).

promtool compares annotations too; they are templates checked by ``promtool check rules`` and rendered by the real
Prometheus in test_scrape.py, so the copy of the rules under test here has them removed (nothing else changed).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import re
import shutil
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import hosts

STEP = 300  # seconds between two scrapes
HOUR = 3600
VOL_TP = 'ebs_volume_performance_exceeded_tp'
VOL_IOPS = 'ebs_volume_performance_exceeded_iops'
INST_TP = 'ec2_instance_performance_exceeded_tp'


def need_promtool():
    if shutil.which('promtool') is None:
        if os.environ.get('CI') == 'true':
            pytest.fail('promtool is not installed (make deps: prometheus) - required in CI')
        pytest.skip('promtool is not installed (apt-get install --no-install-recommends prometheus)')


def selector(name, labels):
    body = ','.join('%s="%s"' % (k, v.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n'))
                    for k, v in sorted(labels.items()))
    return '%s{%s}' % (name, body)


def scraped(content, instance):
    """{series selector: value} of one textfile, as a scrape of it has them (instance and job added)."""
    out = {}
    for family in text_string_to_metric_families(content):
        for s in family.samples:
            out[selector(s.name, dict(s.labels, instance=instance, job='node'))] = s.value
    return out


def growing(ratio, hours_at, key=VOL_TP):
    """The EBS counter of a volume at its cap ``ratio`` of the time since attachment, at hour ``hours_at``."""
    return {key: int(round(ratio * hours_at * HOUR * 10 ** 6))}


def input_series(tmp_path, instance, runs, hours):
    """promtool's input_series for a host whose runs are [(second, facts, textfile_metrics options)]: at each scrape
    the file of the last run before it (no series before the first run)."""
    files = []
    for i, (at, facts, params) in enumerate(runs):
        root = str(tmp_path / ('%s-%d' % (instance, i)))
        files.append((at, scraped(hosts.write(root, facts, at, **params), instance)))
    steps = int(hours * HOUR / STEP) + 1
    names = sorted(set(k for _at, s in files for k in s))
    series = dict((n, []) for n in names)
    for step in range(steps):
        current = [s for at, s in files if at <= step * STEP]
        now = current[-1] if current else {}
        for n in names:
            series[n].append(repr(float(now[n])) if n in now else '_')
    return [{'series': n, 'values': ' '.join(v)} for n, v in series.items()]


def hourly(facts_at, hours=6, **params):
    """A run every hour from 0 on; facts_at(hour) gives that run's facts."""
    return [(h * HOUR, facts_at(h), params) for h in range(hours + 1)]


def labels(instance, **extra):
    out = {'instance': instance, 'job': 'node'}
    out.update(extra)
    return out


W = {'severity': 'warning'}
C = {'severity': 'critical'}

# name: (runs, {eval time: {alertname: [expected labels]}}, extra node_exporter series)
SCENARIOS = {
    'compliant': (
        hourly(lambda h: hosts.facts(aem_kib=36.5, exceeded=growing(0.001, h))),
        {'5h10m': {}}, {}),
    'drift': (
        [(0, hosts.facts(), {})] + [(h * HOUR, hosts.facts(read_ahead_kb=4096), {}) for h in range(1, 7)],
        {'50m': {},
         '3h': {'AemTuningDrift': [labels('drift', **W)],
                'AemReadAheadNotAsWanted': [labels('drift', device='nvme1n1', **W)]}}, {}),
    'thp': (
        hourly(lambda h: hosts.facts(thp='always', cmdline_thp='always')),
        {'3h': {'AemTuningDrift': [labels('thp', **W)],
                'AemThpNotAsWanted': [labels('thp', kind='thp', **W), labels('thp', kind='cmdline', **W)]}}, {}),
    'stale-audit': (
        [(0, hosts.facts(), {})],
        {'2h': {}, '3h5m': {'AemTuningAuditStale': [labels('stale-audit', **W)]}}, {}),
    'ebs-volume-at-cap': (
        hourly(lambda h: hosts.facts(exceeded=dict(growing(1.0, h), **growing(0.2, h, VOL_IOPS)))),
        {'5h10m': {'AemEbsVolumeAtCap': [
            labels('ebs-volume-at-cap', device='nvme1n1', volume_id=hosts.VOLUME, cap='volume_throughput', **C),
            labels('ebs-volume-at-cap', device='nvme1n1', volume_id=hosts.VOLUME, cap='volume_iops', **C)]}}, {}),
    'ebs-under-the-threshold': (
        hourly(lambda h: hosts.facts(exceeded=dict(growing(0.04, h), **growing(0.04, h, INST_TP)))),
        {'5h10m': {}}, {}),
    'ebs-instance-at-cap': (
        hourly(lambda h: hosts.facts(exceeded=growing(0.5, h, INST_TP))),
        {'5h10m': {'AemEbsInstanceAtCap': [labels('ebs-instance-at-cap', cap='instance_throughput', **C)]}}, {}),
    'readers': (
        hourly(lambda h: hosts.facts(stale=2, restart=1, aem_kib=4090.0)),
        {'3h': {'AemTuningDrift': [labels('readers', **W)],
                'AemReadersAtEarlierReadAhead': [labels('readers', fix='refresh', **W),
                                                 labels('readers', fix='restart', **W)],
                'AemReadAmplification': [labels('readers', **W)]}}, {}),
    'aem-under-the-limit': (
        # 127 KiB per fault: under 4 x 32 KiB (the limit is 128 KiB)
        hourly(lambda h: hosts.facts(aem_kib=127.0)),
        {'3h': {}}, {}),
    'textfile-unreadable': (
        hourly(lambda h: hosts.facts()),
        {'3h': {'AemTuningMetricsUnreadable': [labels('textfile-unreadable', **W)]}},
        # node_exporter's own series (not the collection's): what it reports for a file it cannot parse
        {'node_textfile_scrape_error': '1+0x72'}),
}


def rules_without_annotations(tmp_path):
    rules = copy.deepcopy(hosts.load_rules())
    for group in rules['groups']:
        for rule in group['rules']:
            rule.pop('annotations', None)
    path = str(tmp_path / 'rules.yml')
    with open(path, 'w') as f:
        yaml.safe_dump(rules, f)
    return path


def promtool_tests(tmp_path):
    names = hosts.alert_names()
    tests = []
    for instance, (runs, checks, extra) in sorted(SCENARIOS.items()):
        series = input_series(tmp_path, instance, runs, 6)
        series += [{'series': selector(n, labels(instance)), 'values': v} for n, v in sorted(extra.items())]
        if instance != 'textfile-unreadable':
            series.append({'series': selector('node_textfile_scrape_error', labels(instance)), 'values': '0+0x72'})
        alert_tests = []
        for at, expected in sorted(checks.items()):
            unknown = set(expected) - set(names)
            assert not unknown, unknown
            for name in names:
                alert_tests.append({'eval_time': at, 'alertname': name,
                                    'exp_alerts': [{'exp_labels': lab} for lab in expected.get(name, [])]})
        tests.append({'interval': '5m', 'name': instance, 'input_series': series, 'alert_rule_test': alert_tests})
    return tests


def recording_tests(tmp_path):
    """The recording rules on the compliant host: the 3 h rate of its EBS counters, AEM's limit."""
    runs = SCENARIOS['compliant'][0]
    inst = 'records'
    series = input_series(tmp_path, inst, runs, 6)
    host = 'instance="records",job="node"'
    return [{'interval': '5m', 'name': 'records', 'input_series': series, 'promql_expr_test': [
        {'eval_time': '5h', 'expr': 'aemops_os_tuning:aem_read_bytes_per_fault:limit',
         'exp_samples': [{'labels': 'aemops_os_tuning:aem_read_bytes_per_fault:limit{%s}' % host, 'value': 4 * 32768}]},
        {'eval_time': '5h', 'expr': 'count by (cap) (aemops_os_tuning:ebs_exceeded_seconds:rate3h)',
         'exp_samples': [{'labels': '{cap="%s"}' % cap, 'value': 1} for cap in
                         ('instance_iops', 'instance_throughput', 'volume_iops', 'volume_throughput')]},
        # 0.1 % of the time at the throughput cap, as textfile_metrics wrote it in seconds: within 5 % of 0.001
        {'eval_time': '5h', 'expr': 'round(aemops_os_tuning:ebs_exceeded_seconds:rate3h{cap="volume_throughput"} * 10000) / 100',
         'exp_samples': [{'labels': '{cap="volume_throughput",device="nvme1n1",%s,volume_id="%s"}' % (host, hosts.VOLUME),
                          'value': 0.1}]},
    ]}]


def run_promtool(*args):
    proc = subprocess.run(['promtool'] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, proc.stdout


def test_promtool_check_rules():
    need_promtool()
    rc, out = run_promtool('check', 'rules', hosts.RULES)
    assert rc == 0, out
    assert re.search(r'SUCCESS: \d+ rules found', out), out


def test_promtool_test_rules_on_the_textfiles_of_textfile_metrics(tmp_path):
    need_promtool()
    path = str(tmp_path / 'tests.yml')
    with open(path, 'w') as f:
        yaml.safe_dump({'rule_files': [rules_without_annotations(tmp_path)], 'evaluation_interval': '1m',
                        'tests': promtool_tests(tmp_path) + recording_tests(tmp_path)}, f)
    rc, out = run_promtool('test', 'rules', path)
    assert rc == 0, out
    assert 'SUCCESS' in out, out


def test_every_alert_fires_in_a_scenario_and_stays_quiet_in_another():
    fired, quiet = set(), set()
    for _runs, checks, _extra in SCENARIOS.values():
        for expected in checks.values():
            fired.update(n for n, found in expected.items() if found)
            quiet.update(n for n in hosts.alert_names() if not expected.get(n))
    assert fired == set(hosts.alert_names()) == quiet


def test_promtool_check_metrics_on_a_textfile_with_every_family(tmp_path):
    need_promtool()
    content = hosts.write(str(tmp_path), hosts.facts(read_ahead_kb=4096, thp='always', stale=1, restart=1,
                                                     aem_kib=4090.0), 3600)
    assert all('\n%s ' % n in content or '\n%s{' % n in content for n in hosts.metrics.NAMES), content
    proc = subprocess.run(['promtool', 'check', 'metrics'], input=content, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=60, check=False)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout
