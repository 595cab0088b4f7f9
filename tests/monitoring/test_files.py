# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shipped rules and dashboard against the metrics textfile_metrics writes and against docs/metrics.md.

- Every family the textfile can hold is used by a rule or a dashboard panel (or docs/metrics.md says why not, in
  its list under "Families no rule or panel uses"); every aemops_os_tuning name they use is one the module writes
  or one the rules record, and every node_exporter name is one of its standard collectors'.
- Every alert has a severity, a summary, a description and a runbook_url that points at a section of
  docs/metrics.md (the collection's repository, as galaxy.yml names it).
- The dashboard uses one data source variable and the variables Grafana gives, nothing else.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess

import yaml

import hosts
from ansible_collections.aemops.os_tuning.plugins.module_utils import metrics

DOCS = os.path.join(hosts.CHECKOUT, 'docs', 'metrics.md')
NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
# node_exporter's own names the files use: its textfile collector's and its diskstats collector's (on by default).
NODE = frozenset(['node_textfile_scrape_error', 'node_disk_read_bytes_total', 'node_disk_reads_completed_total'])


def rule_exprs():
    return [r['expr'] for g in hosts.load_rules()['groups'] for r in g['rules']]


def recorded():
    return set(r['record'] for g in hosts.load_rules()['groups'] for r in g['rules'] if 'record' in r)


def dashboard():
    with open(hosts.DASHBOARD) as f:
        return json.load(f)


def panels(dash=None):
    return [p for p in (dash or dashboard())['panels'] if p['type'] != 'row']


def dashboard_exprs():
    return [t['expr'] for p in panels() for t in p['targets']]


def names_in(expr):
    """The metric names of a PromQL expression: its identifiers, less label names, strings, functions, keywords."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', ' ', expr)
    expr = re.sub(r'\{[^}]*\}', ' ', expr)
    expr = re.sub(r'\[[^\]]*\]', ' ', expr)
    words = set(m.group(0) for m in NAME.finditer(expr))
    return set(w for w in words if w.startswith(('aemops_os_tuning', 'node_')) and not re.match(r'^\w+\s*\(', w))


def undocumented_unused():
    with open(DOCS) as f:
        text = f.read()
    section = text.split('### Families no rule or panel uses', 1)
    listed = set(re.findall(r'^- `(aemops_os_tuning_\w+)`', section[1].split('\n#', 1)[0], re.M)) if len(section) > 1 else set()
    return listed


def test_every_family_of_the_textfile_is_used_by_a_rule_or_a_panel_or_the_docs_say_why_not():
    used = set()
    for expr in rule_exprs() + dashboard_exprs():
        used |= names_in(expr)
    unused = set(metrics.NAMES) - used
    assert unused == undocumented_unused(), 'families no rule or panel uses (list them, with why, in docs/metrics.md): %s' % sorted(unused)


def test_every_name_the_files_use_is_written_by_textfile_metrics_recorded_or_node_exporters():
    known = set(metrics.NAMES) | recorded() | NODE
    for expr in rule_exprs() + dashboard_exprs():
        assert names_in(expr) <= known, (expr, sorted(names_in(expr) - known))
        assert names_in(expr) or re.match(r'^vector\([0-9.]+\)$', expr), expr  # a threshold is a number


def test_names_in_reads_a_join():
    assert names_in('a_x * on (instance, device) group_left (source) aemops_os_tuning_b{device=~"x"}') == set(
        ['aemops_os_tuning_b'])
    assert names_in('rate(node_disk_read_bytes_total{instance=~"$instance"}[$__rate_interval])') == set(
        ['node_disk_read_bytes_total'])


def anchors():
    """GitHub's anchors of the headings of docs/metrics.md."""
    with open(DOCS) as f:
        text = re.sub(r'^```.*?^```', '', f.read(), flags=re.M | re.S)  # not the comments of a code block
    headings = re.findall(r'^#+ (.+)$', text, re.M)
    return set(re.sub(r'[^a-z0-9 _-]', '', h.strip().lower()).replace(' ', '-') for h in headings)


def test_every_alert_has_a_severity_a_summary_and_a_runbook_in_the_docs():
    with open(os.path.join(hosts.CHECKOUT, 'galaxy.yml')) as f:
        repository = yaml.safe_load(f)['repository']
    prefix = repository.rstrip('/') + '/blob/main/docs/metrics.md#'
    found = anchors()
    alerts = [r for g in hosts.load_rules()['groups'] for r in g['rules'] if 'alert' in r]
    assert len(alerts) == len(set(r['alert'] for r in alerts)) >= 9
    for rule in alerts:
        assert rule['labels']['severity'] in ('warning', 'critical'), rule['alert']
        notes = rule['annotations']
        assert notes['summary'] and notes['description'], rule['alert']
        assert notes['runbook_url'] == prefix + rule['alert'].lower(), rule['alert']
        assert rule['alert'].lower() in found, 'docs/metrics.md has no section %s' % rule['alert']


def test_the_dashboard_uses_its_data_source_variable_and_grafanas_variables_only():
    dash = dashboard()
    ids = [p['id'] for p in dash['panels']]
    assert len(ids) == len(set(ids))
    variables = set(v['name'] for v in dash['templating']['list'])
    assert variables == set(['datasource', 'instance'])
    for p in panels(dash):
        assert p['datasource'] == {'type': 'prometheus', 'uid': '${datasource}'}, p['title']
        assert p['targets'] and p['description'], p['title']
        for t in p['targets']:
            assert set(re.findall(r'\$\{?(\w+)', t['expr'])) <= set(['instance', '__rate_interval']), t['expr']
    titles = ' '.join(p['title'] for p in dash['panels']).lower()
    for subject in ('compliance', 'read-ahead', 'ebs', 'readers'):
        assert subject in titles


def test_the_prometheusrule_of_the_docs_holds_the_rules_as_they_are(tmp_path):
    """The commands docs/metrics.md gives for kube-prometheus (less kubectl), run on the file: its spec.groups are
    the file's groups."""
    with open(DOCS) as f:
        text = f.read()
    block = re.search(r'```sh\n(rules=.*?)```', text, re.S).group(1)
    script = '\n'.join(line for line in block.splitlines() if not line.startswith(('rules=', 'kubectl ')))
    subprocess.run(['bash', '-euo', 'pipefail', '-c', script], cwd=str(tmp_path), check=True,
                   env=dict(os.environ, rules=hosts.RULES))
    with open(str(tmp_path / 'aemops-os-tuning.prometheusrule.yml')) as f:
        manifest = yaml.safe_load(f)
    assert manifest['kind'] == 'PrometheusRule' and manifest['apiVersion'] == 'monitoring.coreos.com/v1'
    assert manifest['spec'] == hosts.load_rules()
