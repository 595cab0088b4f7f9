# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests for bench/fleet.py (make bench-fleet) and its part of bench/RESULTS.md (controller side, no run).

The callback lines are shaped like bench/callback_plugins/aemops_bench_count.py's: the baseline
role's report block (delegated to localhost: a directory, a loop over two files, report.md) and
this tree's one run_once report step.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, 'bench')


def _load(name):
    spec = importlib.util.spec_from_file_location('aemops_bench_' + name, os.path.join(BENCH, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fleet = _load('fleet')
report = _load('report')


def line(host, task, status='ok', item=False, delegated_local=False, run_once=False):
    return json.dumps({'host': host, 'task': task, 'action': 'x', 'status': status, 'item': item,
                       'delegated_local': delegated_local, 'run_once': run_once,
                       'changed': False, 'loop_summary': False, 'on_target': False})


def write(tmp_path, lines):
    path = tmp_path / 'count.jsonl'
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def baseline_lines(hosts):
    out = []
    for h in hosts:
        out.append(line(h, 'Gather tuning facts'))
        out.append(line(h, 'Create the report directory', delegated_local=True))
        # A loop: its two items and its own result (the callback takes the last's delegation from the task).
        out.append(line(h, 'Write before.json and after.json', item=True, delegated_local=True))
        out.append(line(h, 'Write before.json and after.json', item=True, delegated_local=True))
        out.append(line(h, 'Write before.json and after.json', delegated_local=True))
        out.append(line(h, 'Write report.md', delegated_local=True))
        out.append(line(h, 'Draw the sweep', status='skipped'))
        out.append(line(h, 'Audit verdict', status='failed'))
    out.append(line(hosts[0], 'Write the fleet summary once', delegated_local=True, run_once=True))
    return out


def test_the_baselines_report_block_costs_three_controller_tasks_per_host(tmp_path):
    hosts = ['aem001', 'aem002']
    counted = fleet.count_tasks(write(tmp_path, baseline_lines(hosts)), hosts)
    assert counted['controller_tasks_per_host'] == 3.0
    assert counted['task_results_per_host'] == 5.0
    assert counted['controller_tasks'] == ['Create the report directory', 'Write before.json and after.json',
                                           'Write report.md']
    assert counted['run_once_tasks'] == ['Write the fleet summary once']
    assert counted['failed_tasks'] == ['Audit verdict']
    assert counted['hosts_seen'] == 2


def test_one_run_once_report_step_is_no_per_host_cost(tmp_path):
    hosts = ['aem001', 'aem002', 'aem003']
    lines = [line(h, 'Gather tuning facts') for h in hosts]
    lines.append(line('aem001', 'Write the reports for the play', delegated_local=True,
                      run_once=True))
    counted = fleet.count_tasks(write(tmp_path, lines), hosts)
    assert counted['controller_tasks_per_host'] == 0.0
    assert counted['run_once_tasks'] == ['Write the reports for the play']


def test_fit_is_least_squares():
    assert fleet.fit([(50, 110.0), (200, 410.0)]) == pytest.approx((10.0, 2.0))
    assert fleet.fit([(1, 3.0), (2, 5.0), (3, 7.5)]) == pytest.approx((0.6666667, 2.25))


def run(variant, hosts, wall, tasks, rss=200.0):
    cpu = wall * 1.6
    return {'variant': variant, 'hosts': hosts, 'wall_s': wall, 'per_host_s': wall / hosts, 'rc': 2,
            'cpu_s': cpu, 'cpu_per_host_s': cpu / hosts, 'load_1min_after': 2.0,
            'controller_tasks_per_host': tasks, 'task_results_per_host': 20.0, 'peak_rss_mib': rss,
            'controller_tasks': ['Write report.md'] if tasks else [], 'run_once_tasks': ['Write the reports'],
            'failed_tasks': ['Audit verdict'], 'hosts_seen': hosts}


RUNS = [run('baseline', 50, 400.0, 3.0, 400.0), run('tree', 50, 150.0, 0.0, 300.0),
        run('tree', 200, 580.0, 0.0, 330.0), run('baseline', 200, 1700.0, 3.0, 420.0)]


def test_summary_ratios_and_goals():
    s = fleet.summarize(RUNS, [50, 200])
    assert s['tree']['fit_per_host_s'] == pytest.approx(2.867, abs=0.001)
    assert s['tree']['per_host_growth'] == pytest.approx(-0.033, abs=0.001)
    assert s['baseline']['per_host_growth'] == pytest.approx(0.062, abs=0.001)
    assert s['tree']['fit_cpu_per_host_s'] == pytest.approx(4.587, abs=0.001)
    assert s['tree']['cpu_per_host_growth'] == pytest.approx(-0.033, abs=0.001)
    assert s['ratio_tree_to_baseline']['200'] == {'wall_s': 0.34, 'cpu_s': 0.34, 'peak_rss_mib': 0.79,
                                                  'controller_tasks_per_host': 0.0}
    assert [g['met'] for g in s['goals']] == [True, True, True]
    # The load doubles the wall time of the large run, not its CPU time.
    loaded = fleet.summarize([dict(r, wall_s=r['wall_s'] * (1.5 if r['hosts'] == 200 else 1),
                                   per_host_s=r['per_host_s'] * (1.5 if r['hosts'] == 200 else 1)) for r in RUNS],
                             [50, 200])
    assert [g['met'] for g in loaded['goals']] == [True, True, False]
    grown = fleet.summarize([dict(r, cpu_s=r['cpu_s'] * (1.5 if r['hosts'] == 200 else 1),
                                  cpu_per_host_s=r['cpu_per_host_s'] * (1.5 if r['hosts'] == 200 else 1)) for r in RUNS],
                            [50, 200])
    assert [g['met'] for g in grown['goals']] == [True, False, True]


def test_a_baseline_at_one_size_gives_ratios_there_and_no_growth():
    runs = [r for r in RUNS if not (r['variant'] == 'baseline' and r['hosts'] == 200)]
    s = fleet.summarize(runs, [50, 200])
    assert s['baseline']['fit_per_host_s'] is None and s['baseline']['cpu_per_host_growth'] is None
    assert list(s['ratio_tree_to_baseline']) == ['50']
    assert [g['met'] for g in s['goals']] == [True, True, True]


def test_results_md_has_the_fleet_section():
    with open(os.path.join(BENCH, 'results.json')) as f:
        doc = json.load(f)
    doc['fleet'] = {'started': '2026-12-03 08:40 UTC', 'forks': 20, 'sizes': [50, 200], 'baseline_sizes': [50, 200],
                    'cpus': 2,
                    'load_1min_at_start': 0.5, 'ansible_core': 'ansible-playbook [core 2.16.14]',
                    'baseline': {'ref': '1e379f6', 'commit': '1e379f644d82d9fb93a77dec465065c078780ca9'},
                    'tree': {'commit': 'bf8ac95' + '0' * 33, 'dirty': False},
                    'runs': RUNS, 'summary': fleet.summarize(RUNS, [50, 200])}
    text = report.render(doc)
    section = text[text.index('## Fleet'):]
    assert '| baseline | 50 | 400.0 | 8.000 | 12.800 | 20.0 | 3.00 | 400.0 | 2 |' in section
    assert '| this tree | 200 | 580.0 | 2.900 | 4.640 | 20.0 | 0.00 | 330.0 | 2 |' in section
    assert 'At 200 hosts, this tree against the baseline: wall time 0.34x' in section
    assert 'at most 1: 0.0, **met**' in section
    assert 'charts/fleet.png' in section
    assert 'Growth of this tree (least squares over 50 and 200 hosts): wall time 2.867 s per host' in section
    assert 'its growth is not measured here' not in section


# The control: ansible-core alone. Its CPU time per host rises from 1.000 to 1.300 s between 50 and 200
# hosts; this tree's from 4.800 to 5.400 s (RUNS_C below).
RUNS_C = [dict(run('tree', 50, 150.0, 0.0), cpu_s=240.0, cpu_per_host_s=4.8),
          dict(run('tree', 200, 580.0, 0.0), cpu_s=1080.0, cpu_per_host_s=5.4),
          dict(run('control', 50, 40.0, 0.0), cpu_s=50.0, cpu_per_host_s=1.0, rc=0),
          dict(run('control', 200, 170.0, 0.0), cpu_s=260.0, cpu_per_host_s=1.3, rc=0),
          run('baseline', 50, 400.0, 3.0)]


def test_growth_beyond_the_control_takes_out_what_ansible_core_adds():
    s = fleet.summarize(RUNS_C, [50, 200])
    net = s['tree_beyond_control']
    # this tree: +0.600 s per host (+12.5%); the control: +0.300 s; beyond it: 0.300 / 4.800 = +6.25%, kept as 0.063
    assert net['cpu_per_host_added_s'] == pytest.approx(0.6)
    assert net['cpu_per_host_added_by_control_s'] == pytest.approx(0.3)
    assert net['cpu_per_host_growth'] == pytest.approx(0.0625, abs=0.001)
    # wall: this tree 3.000 -> 2.900 s per host (-0.100), the control 0.800 -> 0.850 (+0.050): -0.150 / 3.000
    assert net['per_host_growth'] == pytest.approx(-0.05, abs=0.001)
    assert s['tree']['cpu_per_host_growth'] == pytest.approx(0.125)
    assert [(g['value'], g['met']) for g in s['goals'][1:]] == [(0.125, False), (-0.033, True), (0.063, True)]


def test_no_control_no_net_growth_and_no_fourth_goal():
    s = fleet.summarize([r for r in RUNS_C if r['variant'] != 'control'], [50, 200])
    assert s['tree_beyond_control'] is None
    assert 'control' not in s
    assert len(s['goals']) == 3


def test_the_control_playbook_has_the_audits_task_count(tmp_path):
    path = fleet.control_playbook(str(tmp_path / 'control.yml'), 16)
    text = open(path).read()
    # gathering (min), then 16 debug tasks: 17 task results per host, as this tree's audit has
    assert text.count('ansible.builtin.debug:') == 16
    assert 'gather_subset: [min]' in text and 'hosts: aem' in text and 'aemops' not in text


def test_results_md_names_the_growth_beyond_the_control():
    with open(os.path.join(BENCH, 'results.json')) as f:
        doc = json.load(f)
    doc['fleet'] = {'started': '2026-12-03 13:10 UTC', 'forks': 20, 'sizes': [50, 200], 'baseline_sizes': [50],
                    'cpus': 2, 'load_1min_at_start': 0.5, 'ansible_core': 'ansible-playbook [core 2.16.19]',
                    'baseline': {'ref': '1e379f6', 'commit': '1e379f644d82d9fb93a77dec465065c078780ca9'},
                    'tree': {'commit': 'ab' * 20, 'dirty': False},
                    'runs': RUNS_C, 'summary': fleet.summarize(RUNS_C, [50, 200])}
    section = report.render(doc)
    section = section[section.index('## Fleet'):]
    assert '| control: ansible-core alone | 200 | 170.0 | 0.850 | 1.300 | 20.0 | 0.00 |' in section
    assert ('the CPU time per host of this tree grew by 0.600 s and the control\'s by 0.300 s: beyond '
            'ansible-core\'s own, this tree\'s CPU time per host changed by +6%') in section
    assert "beyond ansible-core's own (the control's) at most 0.1: 0.063, **met**" in section
    assert 'and a control (ansible-core alone), alternating' in section


def test_the_artifact_is_measured_at_the_sizes_run_and_computed_at_1000():
    runs = [dict(run('tree', 50, 150.0, 0.0), artifact_bytes=112030, artifact_largest_result_bytes=2240),
            dict(run('tree', 200, 580.0, 0.0), artifact_bytes=448030, artifact_largest_result_bytes=2241),
            dict(run('baseline', 50, 400.0, 3.0), artifact_bytes=0, artifact_largest_result_bytes=0)]
    a = fleet.summarize(runs, [50, 200])['artifact']
    assert a['fit_per_host_bytes'] == 2240 and a['fit_fixed_bytes'] == 30
    assert a['sizes'] == [{'hosts': 50, 'bytes': 112030, 'how': 'measured'},
                          {'hosts': 200, 'bytes': 448030, 'how': 'measured'},
                          {'hosts': 1000, 'bytes': 2240030, 'how': 'computed'}]
    assert a['largest_result_bytes'] == 2241
    # One measured size: its bytes per host, times N.
    one = fleet.artifact([dict(runs[0], hosts=10, artifact_bytes=22400)])
    assert [(s['hosts'], s['bytes'], s['how']) for s in one['sizes']] == [
        (10, 22400, 'measured'), (50, 112000, 'computed'), (200, 448000, 'computed'), (1000, 2240000, 'computed')]
    assert fleet.artifact([]) is None


def test_the_artifact_is_read_from_the_callbacks_file(tmp_path):
    (tmp_path / 'artifact.json').write_text(json.dumps({'bytes': 4600, 'per_host_bytes': {'aem001': 2252, 'aem002': 2300}}))
    assert fleet.read_artifact(str(tmp_path)) == (4600, 2300)
    assert fleet.read_artifact(str(tmp_path / 'none')) == (None, None)


def test_results_md_gives_the_artifact_at_1000_hosts():
    with open(os.path.join(BENCH, 'results.json')) as f:
        doc = json.load(f)
    runs = [dict(r, artifact_bytes=(112030 if r['hosts'] == 50 else 448030) if r['variant'] == 'tree' else None,
                 artifact_largest_result_bytes=2241) for r in RUNS]
    doc['fleet'] = {'started': '2026-12-05 14:00 UTC', 'forks': 20, 'sizes': [50, 200], 'baseline_sizes': [50, 200],
                    'cpus': 2, 'load_1min_at_start': 0.5, 'ansible_core': 'ansible-playbook [core 2.16.14]',
                    'baseline': {'ref': '1e379f6', 'commit': '1e379f644d82d9fb93a77dec465065c078780ca9'},
                    'tree': {'commit': 'cd' * 20, 'dirty': False}, 'runs': runs, 'summary': fleet.summarize(runs, [50, 200])}
    section = report.render(doc)
    section = section[section.index('## Fleet'):]
    assert ('as JSON: 50 hosts 109.4 KiB (measured), 200 hosts 437.5 KiB (measured), 1,000 hosts 2187.5 KiB (computed); '
            'computed sizes from the least-squares line over the measured runs, 2240 bytes per host plus 30.') in section
