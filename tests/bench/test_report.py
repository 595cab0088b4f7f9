# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests for bench/report.py, the report script of ``make bench`` (controller side, no VM).

report.py is no module of the collection: it is loaded from its path, ``bench/report.py``
relative to this file. The inputs are small inline records shaped like the real ones in
bench/results.json (module results, playbook logs, callback lines); files go to tmp_path.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import io
import json
import os
import random
import sys
from fractions import Fraction

import pytest

REPORT_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, 'bench', 'report.py')
MIB = 1048576


def _load_report():
    spec = importlib.util.spec_from_file_location('aemops_bench_report', REPORT_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _load_report()


def run_main(monkeypatch, argv, stdin=''):
    monkeypatch.setattr(sys, 'stdin', io.StringIO(stdin))
    report.main(argv)


def write(path, text):
    with io.open(str(path), 'w', encoding='utf-8') as f:
        f.write(text)


def load(path):
    with io.open(str(path), encoding='utf-8') as f:
        return json.load(f)


def adhoc_output(result, status='SUCCESS'):
    """What ``ansible aemvm -m MODULE`` prints (default callback), a warning first."""
    return ('[WARNING]: Platform linux on host aemvm is using the discovered Python interpreter\n'
            'aemvm | %s => %s\n' % (status, json.dumps(result, indent=4, sort_keys=True)))


# ---------------------------------------------------------------------------------------------
# percentile


def ranked(n):
    """n distinct values in shuffled order: the value of rank k (1-based) is 10 * k."""
    values = [10 * k for k in range(1, n + 1)]
    random.Random(n).shuffle(values)
    return values


@pytest.mark.parametrize('share, n, rank', [
    (0.1, 10, 1),  # share * n = 1: the old round(1 + 0.5) rounded half to even, to 2
    (0.2, 10, 2),
    (0.3, 10, 3),
    (0.5, 10, 5),
    (0.9, 10, 9),
    (0.25, 4, 1),
    (0.1, 30, 3),
    (0.9, 30, 27),
    (0.99, 100, 99),
    (0.14, 50, 7),  # 0.14 * 50 is 7.000000000000001 in floats: still rank 7
    (0.56, 50, 28),  # 28.000000000000004
    (0.58, 50, 29),  # 28.999999999999996
    (0.1, 19, 2),  # 1.9: up to 2
    (0.9, 19, 18),  # 17.1: up to 18
    (0.9, 20, 18),
    (0.5, 3, 2),
])
def test_percentile_is_the_nearest_rank(share, n, rank):
    assert report.percentile(ranked(n), share) == 10 * rank


def test_percentile_matches_the_definition_in_exact_arithmetic():
    """Every share k/100 of every n up to 60: rank ceil(k * n / 100), at least 1."""
    for n in range(1, 61):
        values = list(range(n, 0, -1))  # the value of rank r is r
        for k in range(101):
            exact = Fraction(k * n, 100)
            rank = max(1, (exact.numerator + exact.denominator - 1) // exact.denominator)  # the ceiling
            assert report.percentile(values, k / 100.0) == rank, 'share %s of %d values' % (k / 100.0, n)


@pytest.mark.parametrize('share', [0, 0.1, 0.5, 0.9, 1])
def test_percentile_of_a_single_value(share):
    assert report.percentile([7.5], share) == 7.5


@pytest.mark.parametrize('n', [1, 2, 7, 10, 31])
def test_percentile_share_0_is_the_minimum_and_1_the_maximum(n):
    values = ranked(n)
    assert report.percentile(values, 0) == 10
    assert report.percentile(values, 0.0) == 10
    assert report.percentile(values, 1) == 10 * n
    assert report.percentile(values, 1.0) == 10 * n


def test_percentile_leaves_its_input_alone():
    values = [3.0, 1.0, 2.0]
    assert report.percentile(values, 0.5) == 2.0
    assert values == [3.0, 1.0, 2.0]


# ---------------------------------------------------------------------------------------------
# windows, useful_mib_s, caps_figures


def test_windows_merges_half_second_samples_and_drops_a_short_last_window():
    points = [[0.5, 100.0], [1.0, 200.0], [1.5, 50.0], [2.0, 150.0], [2.5, 80.0]]
    assert report.windows(points) == [[1.0, 150.0], [2.0, 100.0]]


def test_windows_weights_each_sample_by_its_span():
    # 0.4 s at 100 MiB/s, then 0.6 s at 200 MiB/s: 160, not the plain mean 150
    assert report.windows([[0.4, 100.0], [1.0, 200.0]]) == [[1.0, 160.0]]


def test_windows_of_a_real_timeline_close_at_the_sample_that_fills_a_second():
    # the module's samples are 0.5 s apart give or take a few ms (bench/results.json)
    points = [[0.501, 145.76], [1.002, 107.2], [1.514, 125.27], [2.017, 110.73], [2.518, 120.89]]
    assert report.windows(points) == [[1.002, 126.48], [2.017, round((125.27 * 0.512 + 110.73 * 0.503) / 1.015, 2)]]


def test_windows_tolerate_float_error_in_the_span():
    points = []
    t = 0.0
    for i in range(1, 26):
        t += 0.1  # ten of these add up to 0.9999999999999999
        points.append([t, 10.0 + i])
    win = report.windows(points)
    assert [w[0] for w in win] == [1.0, 2.0]
    assert [w[1] for w in win] == [15.5, 25.5]


def test_windows_of_other_lengths_and_of_nothing():
    points = [[0.5, 100.0], [1.0, 200.0], [1.5, 50.0], [2.0, 150.0], [2.5, 80.0]]
    assert report.windows(points, seconds=2.0) == [[2.0, 125.0]]
    assert report.windows(points, seconds=0.5) == [[0.5, 100.0], [1.0, 200.0], [1.5, 50.0], [2.0, 150.0], [2.5, 80.0]]
    assert report.windows([]) == []


@pytest.mark.parametrize('asked_bytes, elapsed_s, expected', [
    (10 * MIB, 4.0, 2.5),
    (MIB, 3.0, 0.333),
    (8249344, 20.252, 0.388),  # the before round 1 of bench/results.json
])
def test_useful_mib_s(asked_bytes, elapsed_s, expected):
    assert report.useful_mib_s({'asked_bytes': asked_bytes, 'elapsed_s': elapsed_s, 'device_mib_s': 114.77}) == expected


@pytest.mark.parametrize('row', [{'asked_bytes': MIB, 'elapsed_s': 0}, {'asked_bytes': MIB, 'elapsed_s': None}, {'asked_bytes': MIB}])
def test_useful_mib_s_without_elapsed_time(row):
    assert report.useful_mib_s(row) is None


def timeline_of(rates):
    """0.5 s samples, two per second at the same rate: the 1 s windows' rates are ``rates``."""
    points = []
    for i, rate in enumerate(rates):
        points.extend([[i + 0.5, rate], [i + 1.0, rate]])
    return points


def sweep_row(ra, reads_per_s, device_mib_s, **extra):
    """One entry of read_ahead_sweep's ``results``, shaped like the module's."""
    row = {'read_ahead_kb': ra, 'reads_per_s': reads_per_s, 'device_mib_s': device_mib_s, 'device_iops': 4.0 * device_mib_s,
           'read_amplification': round(ra / 10.0 + 1, 1), 'latency': {'p50_ms': 1000.0 / reads_per_s, 'p99_ms': 3000.0 / reads_per_s,
                                                                      'mean_ms': 1200.0 / reads_per_s, 'max_ms': 4000.0 / reads_per_s},
           'asked_bytes': int(reads_per_s * 20 * 12288), 'elapsed_s': 20.0, 'seq_mib_s': 120.0, 'noisy': False, 'noise_reason': None,
           'bound': 'none', 'rounds': 21, 'concurrent': True, 'timeline_interval_s': 0.5}
    row.update(extra)
    return row


def test_caps_figures():
    rates = [50.0, 20.0, 100.0, 10.0, 70.0, 40.0, 90.0, 30.0, 60.0, 80.0]
    row = sweep_row(4096, 32.9, 100.0, timeline=timeline_of(rates), asked_bytes=10 * MIB, elapsed_s=4.0, bound='throughput', noisy=None)
    fig = report.caps_figures(row, 125.0)
    assert fig == {'read_ahead_kb': 4096, 'reads_per_s': 32.9, 'p50_ms': row['latency']['p50_ms'], 'p99_ms': row['latency']['p99_ms'],
                   'device_mib_s': 100.0, 'useful_mib_s': 2.5, 'device_iops': 400.0, 'read_amplification': 410.6, 'seq_mib_s': 120.0,
                   'cap_share': 0.8,
                   'window_p10_mib_s': 10.0,  # rank 1 of 10 (was rank 2, 20.0)
                   'window_p90_mib_s': 90.0,  # rank 9 of 10 (was rank 10, 100.0)
                   'noisy': False, 'bound': 'throughput'}


def test_caps_figures_without_cap_timeline_or_latency():
    fig = report.caps_figures({'read_ahead_kb': 64, 'device_mib_s': 50.0, 'noisy': 1}, None)
    assert (fig['cap_share'], fig['window_p10_mib_s'], fig['window_p90_mib_s']) == (None, None, None)
    assert (fig['p50_ms'], fig['p99_ms'], fig['useful_mib_s'], fig['seq_mib_s']) == (None, None, None, None)
    assert fig['noisy'] is True
    assert report.caps_figures({'read_ahead_kb': 64, 'device_mib_s': 0.0}, 125.0)['cap_share'] is None
    assert report.caps_figures({'read_ahead_kb': 64, 'device_mib_s': 62.5}, 125.0)['cap_share'] == 0.5


# ---------------------------------------------------------------------------------------------
# summarize_caps

CAPS = {'basis': 'gp3 baseline', 'iops': 3000, 'mib_s': 125.0, 'type': 'gp3'}


def caps_result(rows, **extra):
    """read_ahead_sweep's result around ``rows``, as caps-record keeps it."""
    original = rows[0]['read_ahead_kb'] if len(rows) == 1 else 32
    result = {'caps': dict(CAPS), 'changed': False, 'device': 'nvme0n1', 'measured': True, 'restored': True, 'original_kb': original,
              'restored_kb': original, 'sweep': [r['read_ahead_kb'] for r in rows], 'results': rows, 'readers': 8, 'size_mb': 512,
              'recommended_kb': rows[0]['read_ahead_kb'], 'best_kb': rows[0]['read_ahead_kb'], 'excluded_noisy_kb': [],
              'table': ['%5d KiB: ...' % r['read_ahead_kb'] for r in rows], 'why': 'the best random reads/s', 'tolerance_pct': 5.0}
    result.update(extra)
    return result


def caps_rec(phase, rnd, rows, load='2.00', load_after='1.50', **extra):
    return {'phase': phase, 'round': rnd, 'host_load': load, 'host_load_after': load_after, 'result': caps_result(rows, **extra)}


def before_after_rows():
    """Three before rounds (4096 KiB) and three after rounds (32 KiB), in round order."""
    before = [
        sweep_row(4096, 30.0, 110.0, bound='throughput', timeline=timeline_of([10.0 * k for k in range(1, 11)])),
        sweep_row(4096, 40.0, 115.0, bound='throughput', noisy=True, timeline=timeline_of([10.0 * k for k in range(2, 12)])),
        sweep_row(4096, 35.0, 113.0, bound='throughput', timeline=timeline_of([10.0 * k for k in range(3, 13)])),
    ]
    after = [
        sweep_row(32, 1750.0, 80.0, bound='iops'),
        sweep_row(32, 1820.0, 82.0, bound='none'),
        sweep_row(32, 1800.0, 81.0, bound='iops', seq_mib_s=None),
    ]
    return before, after


SWEEP_ROWS = [sweep_row(4096, 34.7, 114.4, bound='throughput'), sweep_row(1024, 134.7, 116.8, bound='throughput'),
              sweep_row(64, 1907.6, 109.4), sweep_row(32, 1885.1, 84.1, bound='iops')]
SWEEP_EXTRA = {'recommended_kb': 64, 'best_kb': 64, 'best_reads_per_s': 1907.6, 'threshold_reads_per_s': 1812.2,
               'within_kb': [64, 32], 'why': '64 KiB: within 5% of the best random reads/s'}


def caps_records():
    before, after = before_after_rows()
    return ([caps_rec('before', i + 1, [r]) for i, r in enumerate(before)] + [caps_rec('after', i + 1, [r]) for i, r in enumerate(after)]
            + [caps_rec('sweep', 1, SWEEP_ROWS, **SWEEP_EXTRA)])


def test_summarize_caps_medians_over_the_rounds_and_ratios():
    summary = report.summarize_caps(caps_records())
    assert summary['mib_s_cap'] == 125.0
    before, after = summary['phases']['before'], summary['phases']['after']
    assert (before['rounds'], before['read_ahead_kb'], before['noisy_rounds'], before['bound']) == (3, [4096], 1, ['throughput'])
    assert (after['rounds'], after['read_ahead_kb'], after['noisy_rounds'], after['bound']) == (3, [32], 0, ['iops', 'none'])
    assert before['reads_per_s'] == {'median': 35.0, 'min': 30.0, 'max': 40.0, 'n': 3}
    assert after['reads_per_s'] == {'median': 1800.0, 'min': 1750.0, 'max': 1820.0, 'n': 3}
    assert before['device_mib_s']['median'] == 113.0
    assert before['cap_share'] == {'median': 0.904, 'min': 0.88, 'max': 0.92, 'n': 3}
    # the rounds' 10th percentiles are 10, 20, 30 and their 90th 90, 100, 110 (nearest rank of 10 windows)
    assert before['window_p10_mib_s'] == {'median': 20.0, 'min': 10.0, 'max': 30.0, 'n': 3}
    assert before['window_p90_mib_s'] == {'median': 100.0, 'min': 90.0, 'max': 110.0, 'n': 3}
    assert after['window_p10_mib_s'] is None  # no timeline after
    assert after['seq_mib_s'] == {'median': 120.0, 'min': 120.0, 'max': 120.0, 'n': 2}  # the round without one left out
    ratios = summary['ratio_after_to_before']
    assert ratios['reads_per_s'] == round(1800.0 / 35.0, 3) == 51.429
    assert ratios['device_mib_s'] == round(81.0 / 113.0, 3) == 0.717
    assert ratios['cap_share'] == round(0.648 / 0.904, 3)
    assert 'window_p10_mib_s' not in ratios and 'window_p90_mib_s' not in ratios
    sweep = summary['sweep']
    assert [r['read_ahead_kb'] for r in sweep['rows']] == [4096, 1024, 64, 32]
    assert [r['cap_share'] for r in sweep['rows']] == [round(mib_s / 125.0, 3) for mib_s in (114.4, 116.8, 109.4, 84.1)]
    assert (sweep['recommended_kb'], sweep['within_kb'], sweep['tolerance_pct'], sweep['caps']) == (64, [64, 32], 5.0, CAPS)
    assert sweep['original_kb'] == 32 and sweep['threshold_reads_per_s'] == 1812.2


def test_summarize_caps_before_only():
    before, _after = before_after_rows()
    summary = report.summarize_caps([caps_rec('before', 1, [before[0]]), caps_rec('before', 2, [before[1]])])
    assert list(summary['phases']) == ['before']
    assert summary['phases']['before']['reads_per_s'] == {'median': 35.0, 'min': 30.0, 'max': 40.0, 'n': 2}
    assert summary['ratio_after_to_before'] == {}
    assert summary['sweep'] is None
    assert report.summarize_caps([]) == {'phases': {}, 'ratio_after_to_before': {}, 'sweep': None, 'mib_s_cap': None}


# ---------------------------------------------------------------------------------------------
# summarize_effect

DEVICES = {'nvme': 'nvme0n1', 'lv': 'dm-0'}


def probe(label, ra, rnd, amp, p99, reads=2000, **extra):
    """A probe-record record: io_probe's result (the fields report.py reads) with its metadata."""
    result = {'device': DEVICES[label], 'read_ahead_kb': ra, 'reads': reads, 'reads_requested': 2000, 'reads_capped': reads < 2000,
              'read_amplification': amp, 'page_cache_amplification': amp, 'bytes_per_read': amp * 8192.0, 'record_kb': 8,
              'latency': {'p50_ms': p99 / 2.0, 'p99_ms': p99, 'mean_ms': p99 / 1.5, 'max_ms': p99 * 1.1}, 'noisy': False,
              'timed_out': False, 'measured': True, 'method': 'mmap', 'size_mb': 256}
    result.update(extra)
    return {'label': label, 'read_ahead_kb': ra, 'round': rnd, 'seed': 4242, 'host_load': '2.50', 'result': result}


def test_summarize_effect():
    probes = [
        probe('lv', 32, 1, 4.8, 2.24),
        probe('nvme', 4096, 1, 471.75, 18.46, reads=16),
        probe('nvme', 4096, 2, 404.3, 16.82, reads=15, noisy=True),
        probe('nvme', 4096, 3, 474.6, 19.2, reads=16),
        probe('nvme', 32, 1, 3.6, 2.7, page_cache_amplification=None),
        probe('nvme', 32, 2, 3.7, 4.38, page_cache_amplification=None),
        probe('lv', 32, 2, 4.9, 6.57, timed_out=True),
        probe('nvme', 32, 'role', 99.0, 99.0),  # the cross-check after the role: not in the summary
        probe('lv', 4096, 'role', 471.0, 16.0),
    ]
    rows = report.summarize_effect(probes)
    assert [(r['label'], r['read_ahead_kb']) for r in rows] == [('nvme', 4096), ('nvme', 32), ('lv', 32)]
    nvme_4096, nvme_32, lv_32 = rows
    assert (nvme_4096['device'], nvme_4096['runs'], nvme_4096['reads'], nvme_4096['reads_requested']) == ('nvme0n1', 3, [15, 16], 2000)
    assert nvme_4096['reads_capped'] is True and lv_32['reads_capped'] is False
    assert nvme_4096['read_amplification'] == {'median': 471.75, 'min': 404.3, 'max': 474.6, 'n': 3}
    assert nvme_4096['page_cache_amplification'] == nvme_4096['read_amplification']
    assert nvme_4096['device_mib_per_read'] == {'median': 3.686, 'min': 3.159, 'max': 3.708, 'n': 3}
    assert nvme_4096['p99_ms'] == {'median': 18.46, 'min': 16.82, 'max': 19.2, 'n': 3}
    assert nvme_4096['p50_ms']['median'] == 9.23
    assert (nvme_4096['noisy_runs'], nvme_4096['timed_out_runs']) == (1, 0)
    assert nvme_32['runs'] == 2 and nvme_32['read_amplification']['max'] == 3.7
    assert nvme_32['page_cache_amplification'] == {'median': 0, 'min': 0, 'max': 0, 'n': 1}  # none measured
    assert (lv_32['device'], lv_32['reads'], lv_32['timed_out_runs'], lv_32['noisy_runs']) == ('dm-0', [2000], 1, 0)
    assert lv_32['read_amplification']['median'] == 4.85


# ---------------------------------------------------------------------------------------------
# summarize_cost (and task_medians)

CHANGED = ('Gather tuning facts', 'Set read-ahead', 'Set THP')


def cost_run(kind, rnd, wall, executed, epoch, load='5.00', changed=(), modules=None, targets=None, tuned_adm=(), tasks=()):
    """A cost-record record."""
    rec = {'kind': kind, 'round': rnd, 'first_run': rnd == 0, 'rc': 0, 'started_epoch': epoch, 'wall_s': wall, 'host_load': load,
           'recap': {'ok': executed, 'changed': len(changed), 'failed': 0, 'skipped': 14 if kind == 'role' else 2, 'unreachable': 0,
                     'rescued': 0, 'ignored': 0},
           'changed_tasks': list(changed), 'executed_tasks': executed}
    if modules is not None:
        rec.update({'module_processes': modules, 'target_results': targets, 'tuned_adm': list(tuned_adm),
                    'tuned_adm_version': sum(1 for a in tuned_adm if '--version' in a.split()),
                    'tasks': [{'task': t, 'action': a, 'on_target': n, 'seconds': s, 'delegated_local': False} for t, a, n, s in tasks]})
    return rec


def cost_records():
    role_tasks = [('Gather tuning facts', 'aemops.os_tuning.tuning_facts', 1, 10.0), ('Show the result', 'debug', 0, 0.2)]
    manual_tasks = [('Read the current read-ahead', 'command', 3, 13.7)]
    return [
        cost_run('manual', 2, 73.8, 8, 600.0, load='6.10', modules=12, targets=10, tuned_adm=['active', '--version'], tasks=manual_tasks),
        cost_run('role', 0, 53.9, 17, 100.0, load='4.00', changed=CHANGED, modules=4, targets=4, tuned_adm=['verify'], tasks=role_tasks),
        cost_run('manual', 0, 80.7, 11, 200.0, load='4.50', changed=CHANGED * 2, modules=15, targets=13, tuned_adm=['active']),
        cost_run('role', 1, 32.4, 16, 300.0, load='6.62', modules=3, targets=3, tuned_adm=['verify'], tasks=role_tasks),
        cost_run('manual', 1, 55.6, 8, 400.0, load='6.49', modules=12, targets=10, tuned_adm=['active'], tasks=manual_tasks),
        cost_run('role', 2, 19.4, 16, 500.0, load='7.40', changed=['Set THP'], modules=3, targets=3, tuned_adm=['verify'],
                 tasks=[('Gather tuning facts', 'aemops.os_tuning.tuning_facts', 1, 11.0), ('Show the result', 'debug', 0, 0.3),
                        ('Write the report', 'template', 0, 1.0)]),
        cost_run('manual', 3, 53.4, 8, 800.0, load='2.11', modules=12, targets=10, tuned_adm=['active'], tasks=manual_tasks),
        cost_run('role', 3, 38.2, 16, 700.0, load='3.00', modules=3, targets=3, tuned_adm=['verify'],
                 tasks=[('Gather tuning facts', 'aemops.os_tuning.tuning_facts', 1, 9.0), ('Show the result', 'debug', 0, 0.25)]),
    ]


def test_summarize_cost():
    summary = report.summarize_cost(cost_records())
    role, manual = summary['role'], summary['manual']
    assert role['repeat_runs'] == 3 and manual['repeat_runs'] == 3
    assert role['wall_s'] == {'median': 32.4, 'min': 19.4, 'max': 38.2, 'n': 3}
    assert manual['wall_s'] == {'median': 55.6, 'min': 53.4, 'max': 73.8, 'n': 3}
    assert role['executed_tasks']['median'] == 16 and role['skipped_tasks']['median'] == 14
    assert role['changed_tasks'] == {'median': 0, 'min': 0, 'max': 1, 'n': 3}
    assert role['changed_task_names'] == ['Set THP']  # the repeat runs' only: not the first run's
    assert role['host_load'] == {'median': 6.62, 'min': 3.0, 'max': 7.4, 'n': 3}
    assert role['first_run'] == {'wall_s': 53.9, 'executed_tasks': 17, 'changed': 3, 'target_results': 4, 'module_processes': 4,
                                 'tuned_adm_version': 0}
    assert manual['first_run']['changed'] == 6
    assert role['module_processes']['median'] == 3 and manual['module_processes']['median'] == 12
    assert manual['tuned_adm_version'] == {'median': 0, 'min': 0, 'max': 1, 'n': 3}
    assert manual['tuned_adm_processes'] == {'median': 1, 'min': 1, 'max': 2, 'n': 3}
    assert manual['tuned_adm_args'] == ['--version', 'active'] and role['tuned_adm_args'] == ['verify']
    # per task: median seconds over the repeat runs that ran it, in the order they first appear
    assert role['tasks'] == [
        {'task': 'Gather tuning facts', 'action': 'aemops.os_tuning.tuning_facts', 'delegated_local': False, 'runs': 3, 'seconds': 10.0,
         'on_target': 1},
        {'task': 'Show the result', 'action': 'debug', 'delegated_local': False, 'runs': 3, 'seconds': 0.25, 'on_target': 0},
        {'task': 'Write the report', 'action': 'template', 'delegated_local': False, 'runs': 1, 'seconds': 1.0, 'on_target': 0},
    ]
    assert summary['ratio_role_to_manual'] == {'wall_s': 0.58, 'executed_tasks': 2.0, 'target_results': 0.3, 'module_processes': 0.25}
    assert [(b['value'], b['limit'], b['unit'], b['met']) for b in summary['bar']] == [(0.58, 1.0, 'x', True), (3, 5, '', True), (0, 0, '', True)]
    assert summary['order'] == ['role 1', 'manual 1', 'role 2', 'manual 2', 'role 3', 'manual 3']  # by start time
    assert summary['alternating'] is True


def test_summarize_cost_bar_not_met_and_not_alternating():
    records = [cost_run('role', 1, 60.0, 16, 100.0, modules=6, targets=6, tuned_adm=['--version', 'verify']),
               cost_run('role', 2, 62.0, 16, 200.0, modules=6, targets=6, tuned_adm=['--version', 'verify']),
               cost_run('manual', 1, 50.0, 8, 300.0, modules=12, targets=10, tuned_adm=['active'])]
    summary = report.summarize_cost(records)
    assert summary['role']['first_run'] is None
    assert summary['ratio_role_to_manual']['wall_s'] == 1.22
    assert [(b['value'], b['met']) for b in summary['bar']] == [(1.22, False), (6, False), (1, False)]
    assert summary['order'] == ['role 1', 'role 2', 'manual 1'] and summary['alternating'] is False


def test_summarize_cost_without_guest_counts_or_manual_repeats():
    records = [cost_run('role', 0, 50.0, 17, 100.0), cost_run('role', 1, 30.0, 16, 200.0), cost_run('manual', 0, 80.0, 11, 300.0)]
    summary = report.summarize_cost(records)
    assert 'manual' not in summary  # a first run only
    assert 'ratio_role_to_manual' not in summary and 'bar' not in summary
    assert 'module_processes' not in summary['role'] and 'tasks' not in summary['role']
    assert summary['role']['first_run']['target_results'] is None
    assert summary['order'] == ['role 1']


# ---------------------------------------------------------------------------------------------
# parse_playbook_log, round_value, adhoc_result

RECAP_LINE = 'aemvm                      : ok=6    changed=4    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0   '
PLAYBOOK_LOG = '\n'.join([
    '',
    'PLAY [Bench - the aem_tuning role (read-ahead 32 KiB, THP never, verify, report)] ***',
    '',
    "TASK [aemops.os_tuning.aem_tuning : Gather tuning facts, check the wanted values against the host, keep the first run's snapshot] ***",
    'changed: [aemvm]',
    '',
    'TASK [aemops.os_tuning.aem_tuning : Measure small random reads before the change, with io_probe] ***',
    'skipping: [aemvm]',
    '',
    'TASK [Set read-ahead per device] ***********************************************',
    'ok: [aemvm] => (item=nvme0n1)',
    'changed: [aemvm] => (item=nvme1n1)',
    'changed: [aemvm] => (item=dm-0)',
    '',
    'TASK [aemops.os_tuning.aem_tuning : Write before.json, after.json and report.md on the controller] ***',
    'changed: [aemvm -> localhost]',
    '',
    'TASK [Show the output] *********************************************************',
    'ok: [aemvm] => {',
    '    "changed": false,',
    '    "msg": "done"',
    '}',
    'aemvm : ok=99 changed=99',  # shaped like a recap line, but before PLAY RECAP
    '',
    'RUNNING HANDLER [Reload udev rules] ********************************************',
    'changed: [aemvm]',
    '',
    'PLAY RECAP *********************************************************************',
    RECAP_LINE,
    'other                      : ok=2    changed=0    unreachable=0    failed=1    skipped=0    rescued=0    ignored=0',
    '',
])


def test_parse_playbook_log():
    counts, changed = report.parse_playbook_log(PLAYBOOK_LOG)
    assert counts == {'ok': 8, 'changed': 4, 'unreachable': 0, 'failed': 1, 'skipped': 1, 'rescued': 0, 'ignored': 0}
    assert changed == [
        "aemops.os_tuning.aem_tuning : Gather tuning facts, check the wanted values against the host, keep the first run's snapshot",
        'Set read-ahead per device',  # once for its two changed items
        'aemops.os_tuning.aem_tuning : Write before.json, after.json and report.md on the controller',
        'Reload udev rules',
    ]


def test_parse_playbook_log_without_recap():
    assert report.parse_playbook_log('TASK [Set THP] ***\nchanged: [aemvm]\nERROR! the connection was lost\n') == (None, ['Set THP'])
    assert report.parse_playbook_log('') == (None, [])


@pytest.mark.parametrize('text, expected', [('1', 1), ('10', 10), ('0', 0), ('role', 'role'), ('', '')])
def test_round_value(text, expected):
    value = report.round_value(text)
    assert value == expected and isinstance(value, type(expected))


@pytest.mark.parametrize('status', ['SUCCESS', 'CHANGED', 'FAILED!'])
def test_adhoc_result(status):
    result = {'changed': status == 'CHANGED', 'measured': True, 'read_ahead_kb': 32, 'latency': {'p99_ms': 2.7}}
    assert report.adhoc_result(adhoc_output(result, status)) == (status, result)


def test_adhoc_result_without_a_result_fails(capsys):
    with pytest.raises(SystemExit) as exc:
        report.adhoc_result('ERROR! the module was not found\n')
    assert exc.value.code == 1
    assert 'no "HOST | STATUS => {...}" in the ansible output' in capsys.readouterr().err


def test_adhoc_result_with_broken_json_fails(capsys):
    with pytest.raises(SystemExit) as exc:
        report.adhoc_result('aemvm | SUCCESS => {"measured": tr\n')
    assert exc.value.code == 1
    assert 'cannot parse the module result' in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Filters of the template


@pytest.mark.parametrize('args, expected', [((3.14159,), '3.1'), ((1234.5678, 2), '1234.57'), ((471.75, 0), '472'), ((0.0,), '0.0')])
def test_fmt(args, expected):
    assert report.fmt(*args) == expected


@pytest.mark.parametrize('value, expected', [(0.4567, '0.457'), (0.05, '0.050'), (1.0, '1.00'), (18.456, '18.46'), (256.561, '256.56')])
def test_fmt_ms(value, expected):
    assert report.fmt_ms(value) == expected


@pytest.mark.parametrize('value, expected', [(96.24, '96.2'), (10.0, '10.0'), (9.99, '9.99'), (1.354, '1.35'), (0.1, '0.10'),
                                             (0.0114, '0.011'), (0.043, '0.043')])
def test_fmt_ratio(value, expected):
    assert report.fmt_ratio(value) == expected


@pytest.mark.parametrize('value, expected', [(3000, '3,000'), (33, '33'), (1234567.9, '1,234,567'), (0, '0')])
def test_thousands(value, expected):
    assert report.thousands(value) == expected


# ---------------------------------------------------------------------------------------------
# The command line, end to end on files in tmp_path

CAPS_ENV_HOST = '\n'.join([
    'accel=tcg', 'qemu=7.2.22', 'host_kernel=6.18.44-fc-v669', 'host_cpus=2', 'host_cpu_model=AMD EPYC', 'ansible=2.16.19',
    'git_commit=d60a7f7c2e9a55670421109015938183a464350c', 'git_dirty=', 'git_dirty_code=', 'nvme_caps=gp3', 'volume=volume_type=gp3',
    'runs=3', 'duration=20', 'readers=8', 'size_mb=512', 'interval=0.5', 'sweep_duration=5', 'sweep_values=4096,1024,64,32', ''])
CAPS_ENV_GUEST = '\n'.join([
    'nvme_dev=nvme0n1', 'nvme_size_mib=1024', 'kernel=6.1.0-57-amd64', 'os=Debian GNU/Linux 12 (bookworm)', 'cpus=2', 'mem_mib=1966',
    'tuned=2.20.0-1', 'tuned_profile=throughput-performance', 'tuned_active=active', 'preset_read_ahead_kb=4096', ''])


def caps_raw(tmp_path, monkeypatch):
    """bench/caps.sh's raw directory: the sweeps recorded through caps-record, and its environment files."""
    raw = tmp_path / 'caps-raw'
    (raw / 'sweeps').mkdir(parents=True)
    before, after = before_after_rows()
    runs = [('before', i + 1, [r], {}) for i, r in enumerate(before)] + [('after', i + 1, [r], {}) for i, r in enumerate(after)]
    runs.append(('sweep', 1, SWEEP_ROWS, SWEEP_EXTRA))
    for phase, rnd, rows, extra in runs:
        run_main(monkeypatch, ['caps-record', '--phase', phase, '--round', str(rnd), '--load', '2.%d0' % rnd, '--load-after', '1.%d0' % rnd,
                               '--out', str(raw / 'sweeps' / ('%s-%d.json' % (phase, rnd)))],
                 adhoc_output(caps_result(rows, **extra), 'CHANGED' if phase == 'sweep' else 'SUCCESS'))
    write(raw / 'env-host.txt', CAPS_ENV_HOST)
    write(raw / 'env-guest.txt', CAPS_ENV_GUEST)
    write(raw / 'started', '2026-12-01T15:37:47Z\n')
    write(raw / 'duration_s', '445\n')
    write(raw / 'phases.txt', 'boot 51\nmkfs 5\nbefore 128\nrole 29\nafter 129\nsweep 99\n')
    return raw


def test_caps_record_then_caps_collect(tmp_path, monkeypatch, capsys):
    raw = caps_raw(tmp_path, monkeypatch)
    record = load(raw / 'sweeps' / 'before-2.json')
    assert (record['phase'], record['round'], record['host_load'], record['host_load_after']) == ('before', 2, '2.20', '1.20')
    assert record['result']['results'][0]['reads_per_s'] == 40.0
    out = tmp_path / 'results.json'
    write(out, json.dumps({'schema': 1, 'command': 'make bench', 'effect': {'kept': True}}))
    report.main(['caps-collect', str(raw), str(out)])
    doc = load(out)
    assert doc['effect'] == {'kept': True} and doc['command'] == 'make bench'  # collect's keys are kept
    caps = doc['caps']
    assert [(r['phase'], r['round']) for r in caps['records']] == [('before', 1), ('before', 2), ('before', 3),
                                                                   ('after', 1), ('after', 2), ('after', 3), ('sweep', 1)]
    assert caps['config'] == {'runs': 3, 'duration': 20, 'readers': 8, 'size_mb': 512, 'interval': 0.5, 'sweep_duration': 5,
                              'sweep_values': [4096, 1024, 64, 32], 'nvme_caps': 'gp3', 'volume': 'volume_type=gp3'}
    assert 'runs' not in caps['host'] and caps['host']['git_commit'].startswith('d60a7f7c2e')
    assert caps['vm']['preset_read_ahead_kb'] == '4096'
    assert (caps['started'], caps['duration_s'], caps['command']) == ('2026-12-01T15:37:47Z', 445, 'make bench-caps')
    assert caps['phase_seconds'][2] == {'phase': 'before', 'seconds': 128} and len(caps['phase_seconds']) == 6
    # loads at the start (2.10, 2.20, 2.30 and the sweep's 2.10) and at the end (1.10, ...) of every record
    assert caps['host_load_1min'] == {'median': 1.7, 'min': 1.1, 'max': 2.3, 'n': 14}
    assert caps['summary']['phases']['before']['window_p10_mib_s']['median'] == 20.0
    assert caps['summary']['ratio_after_to_before']['reads_per_s'] == 51.429
    assert caps['summary']['sweep']['recommended_kb'] == 64

    report.main(['brief', str(raw / 'sweeps' / 'before-1.json'), str(raw / 'sweeps' / 'sweep-1.json')])
    brief = capsys.readouterr().out.strip()
    assert brief.startswith('4096 KiB 30.0 reads/s p50 33.333333333333336 ms')
    assert brief.endswith('; 32 KiB 1885.1 reads/s p50 %s ms p99 %s ms device 84.1 MiB/s 336.4 IOPS amplification 4.2x seq 120.0 MiB/s; '
                          'recommended 64 KiB' % (1000.0 / 1885.1, 3000.0 / 1885.1))


@pytest.mark.parametrize('phase, change, message', [
    ('before', {'sweep': [32], 'original_kb': 4096, 'restored_kb': 4096}, 'the sweep measured [32], but the device was at 4096 KiB'),
    ('sweep', {'restored': False}, 'read_ahead_sweep did not restore nvme0n1'),
    ('sweep', {'restored_kb': 128}, 'read_ahead_sweep did not restore nvme0n1'),
    ('after', {'measured': False, 'msg': 'another sweep holds the lock'}, 'did not measure (SUCCESS): another sweep holds the lock'),
])
def test_caps_record_refuses(tmp_path, monkeypatch, capsys, phase, change, message):
    result = caps_result([sweep_row(32, 1800.0, 81.0)])
    result.update(change)
    out = tmp_path / 'rec.json'
    with pytest.raises(SystemExit) as exc:
        run_main(monkeypatch, ['caps-record', '--phase', phase, '--round', '1', '--load', '1.0', '--load-after', '1.0', '--out', str(out)],
                 adhoc_output(result))
    assert exc.value.code == 1
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_charts(tmp_path, monkeypatch, capsys):
    raw = caps_raw(tmp_path, monkeypatch)
    out = tmp_path / 'results.json'
    report.main(['caps-collect', str(raw), str(out)])
    charts = tmp_path / 'charts'
    report.main(['charts', str(out), str(charts)])
    names = sorted(os.listdir(str(charts)))
    assert names == ['caps-amplification-p99.png', 'caps-sequential.png', 'caps-timeline.png']
    for name in names:
        with open(str(charts / name), 'rb') as f:
            data = f.read()
        assert data.startswith(b'\x89PNG\r\n\x1a\n') and len(data) > 10000, name
    assert capsys.readouterr().out.startswith('charts: %s' % charts)


def test_charts_without_caps_fails(tmp_path, capsys):
    out = tmp_path / 'results.json'
    write(out, json.dumps({'schema': 1}))
    with pytest.raises(SystemExit):
        report.main(['charts', str(out), str(tmp_path / 'charts')])
    assert 'has no "caps" section' in capsys.readouterr().err


ENV_HOST = '\n'.join([
    'accel=tcg', 'qemu=7.2.22', 'disk_cache=cache=unsafe', 'overlay_fs=ext4', 'host_kernel=6.18.44-fc-v669', 'host_cpus=2',
    'host_cpu_model=AMD EPYC', 'host_mem_mib=24105', 'ansible=2.16.19', 'git_commit=dfd2499f889f34da9975afb4e453a06bc5009ed0',
    'git_dirty=README.md', 'git_dirty_code=', 'nvme_caps=none', 'runs=1', 'size_mb=256', 'reads=2000', 'record_kb=8', 'read_aheads=4096 32', ''])
ENV_GUEST = '\n'.join([
    'nvme_dev=nvme0n1', 'lv_dev=dm-0', 'nvme_model=QEMU NVMe Ctrl', 'nvme_serial=vol0aaaaaaaaaaaaaaaa', 'nvme_size_mib=1024', 'nvme_fs=ext4',
    'lv_name=vg_aem/lv_repo', 'lv_slaves=vdb1', 'lv_size_mib=1280', 'lv_fs=xfs', 'kernel=6.1.0-57-amd64', 'os=Debian GNU/Linux 12 (bookworm)',
    'cpus=2', 'cpu_model=QEMU Virtual CPU version 2.5+', 'mem_mib=1966', 'tuned=2.20.0-1', 'tuned_profile=throughput-performance',
    'preset_read_ahead_kb=nvme0n1:4096 dm-0:4096', 'thp=[always] madvise never', ''])


def callback_line(task, action, on_target, seconds):
    """One line of bench/callback_plugins/aemops_bench_count.py."""
    return json.dumps({'action': action, 'changed': False, 'delegated_local': False, 'host': 'aemvm', 'item': False, 'loop_summary': False,
                       'on_target': on_target, 'seconds': seconds, 'status': 'ok', 'task': task})


def playbook_log(ok, changed, skipped, changed_tasks=()):
    lines = ['', 'PLAY [Bench] ***', '']
    for task in changed_tasks:
        lines.extend(['TASK [%s] ***' % task, 'changed: [aemvm]', ''])
    lines.extend(['PLAY RECAP ***', 'aemvm : ok=%d changed=%d unreachable=0 failed=0 skipped=%d rescued=0 ignored=0' % (ok, changed, skipped), ''])
    return '\n'.join(lines)


def bench_raw(tmp_path, monkeypatch):
    """bench/run.sh's raw directory, one round: the probes and the cost runs recorded through probe-record and cost-record."""
    raw = tmp_path / 'raw'
    (raw / 'probes').mkdir(parents=True)
    (raw / 'cost').mkdir()
    probes = [('nvme', 4096, '1', 471.75, 18.46, 16), ('nvme', 32, '1', 3.6, 2.7, 2000), ('lv', 4096, '1', 471.75, 16.25, 16),
              ('lv', 32, '1', 4.8, 2.24, 2000), ('lv', 32, 'role', 4.8, 3.233, 2000)]
    for label, ra, rnd, amp, p99, reads in probes:
        result = probe(label, ra, rnd, amp, p99, reads=reads)['result']
        run_main(monkeypatch, ['probe-record', '--label', label, '--read-ahead', str(ra), '--round', rnd, '--seed', '4242', '--load', '2.11',
                               '--out', str(raw / 'probes' / ('%s-ra%d-%s.json' % (label, ra, rnd)))], adhoc_output(result))
    tasks = {'role': [('Gather tuning facts', 'aemops.os_tuning.tuning_facts', True, 10.23), ('Set read-ahead', 'aemops.os_tuning.read_ahead', True, 6.23),
                      ('Set THP', 'aemops.os_tuning.thp', True, 5.32), ('Show the result', 'debug', False, 0.29)],
             'manual': [('Read the current read-ahead', 'command', True, 4.5)] * 3 + [('Set THP', 'shell', True, 4.0)] * 2
             + [('Persist read-ahead', 'copy', True, 9.12)] * 7}
    runs = [('role', 0, 100.0, 53.9, (17, 3, 13), 4), ('manual', 0, 200.0, 80.7, (11, 6, 2), 15),
            ('role', 1, 300.0, 32.4, (16, 0, 14), 3), ('manual', 1, 400.0, 55.6, (8, 0, 2), 12)]
    for kind, rnd, start, wall, (ok, changed, skipped), modules in runs:
        out = raw / 'cost' / ('%s-%d' % (kind, rnd))
        write(str(out) + '.tasks.jsonl', '\n'.join(callback_line(*t) for t in tasks[kind]) + '\n')
        write(str(out) + '.guest.txt', 'python\n' * modules + ('tuned-adm verify\n' if kind == 'role' else 'tuned-adm active\n'))
        run_main(monkeypatch, ['cost-record', '--kind', kind, '--round', str(rnd), '--start', str(start), '--end', str(start + wall), '--rc', '0',
                               '--load', '6.50', '--tasks', str(out) + '.tasks.jsonl', '--guest', str(out) + '.guest.txt', '--out', str(out) + '.json'],
                 playbook_log(ok, changed, skipped, ['Set THP'] * changed))
    write(raw / 'env-host.txt', ENV_HOST)
    write(raw / 'env-guest.txt', ENV_GUEST)
    write(raw / 'started', '2026-12-01T12:51:35Z\n')
    write(raw / 'duration_s', '946\n')
    return raw


def test_cost_record(tmp_path, monkeypatch):
    tasks = tmp_path / 'role-1.tasks.jsonl'
    write(tasks, '\n'.join([callback_line('Gather tuning facts', 'aemops.os_tuning.tuning_facts', True, 10.643),
                            callback_line('Set read-ahead', 'command', True, 1.5), callback_line('Set read-ahead', 'command', False, 0.25),
                            callback_line('Set read-ahead', 'command', True, 1.5), callback_line('Show the result', 'debug', False, 0.171)]) + '\n\n')
    guest = tmp_path / 'role-1.guest.txt'
    write(guest, 'python\npython\npython\ntuned-adm verify\ntuned-adm --version\n')
    out = tmp_path / 'role-1.json'
    run_main(monkeypatch, ['cost-record', '--kind', 'role', '--round', '1', '--start', '1796130073.0944', '--end', '1796130105.5', '--rc', '2',
                           '--load', '7.40', '--tasks', str(tasks), '--guest', str(guest), '--out', str(out)], PLAYBOOK_LOG)
    record = load(out)
    assert (record['kind'], record['round'], record['first_run'], record['rc'], record['host_load']) == ('role', 1, False, 2, '7.40')
    assert (record['started_epoch'], record['wall_s']) == (1796130073.094, 32.41)
    assert record['executed_tasks'] == 9  # ok + failed over both hosts
    assert record['recap']['changed'] == 4 and len(record['changed_tasks']) == 4
    assert record['target_results'] == 3
    assert record['tasks'] == [
        {'task': 'Gather tuning facts', 'action': 'aemops.os_tuning.tuning_facts', 'on_target': 1, 'seconds': 10.643, 'delegated_local': False},
        {'task': 'Set read-ahead', 'action': 'command', 'on_target': 2, 'seconds': 3.25, 'delegated_local': False},  # the loop in one
        {'task': 'Show the result', 'action': 'debug', 'on_target': 0, 'seconds': 0.171, 'delegated_local': False},
    ]
    assert (record['module_processes'], record['tuned_adm'], record['tuned_adm_version']) == (3, ['verify', '--version'], 1)


def test_probe_record_refuses_another_read_ahead(tmp_path, monkeypatch, capsys):
    result = probe('nvme', 4096, 1, 471.75, 18.46)['result']
    out = tmp_path / 'nvme-ra32-1.json'
    with pytest.raises(SystemExit):
        run_main(monkeypatch, ['probe-record', '--label', 'nvme', '--read-ahead', '32', '--round', '1', '--seed', '4242', '--load', '1.0',
                               '--out', str(out)], adhoc_output(result))
    assert 'found read_ahead_kb=4096 on nvme0n1, expected 32: something changed it (tuned?)' in capsys.readouterr().err
    assert not out.exists()


def render(doc_path, md_path):
    """``report.py render`` DOC MD; the Markdown written, as text and as lines."""
    report.main(['render', str(doc_path), str(md_path)])
    with io.open(str(md_path), encoding='utf-8') as f:
        text = f.read()
    return text, text.splitlines()


def test_collect_then_render(tmp_path, monkeypatch, capsys):
    raw = bench_raw(tmp_path, monkeypatch)
    out = tmp_path / 'results.json'
    report.main(['collect', str(raw), str(out)])
    doc = load(out)
    assert doc['config'] == {'runs': 1, 'size_mb': 256, 'reads': 2000, 'record_kb': 8, 'method': 'mmap', 'read_aheads_kb': [4096, 32]}
    assert [p['round'] for p in doc['effect']['role_crosscheck']] == ['role'] and len(doc['effect']['probes']) == 4
    assert [(r['kind'], r['round']) for r in doc['cost']['runs']] == [('role', 0), ('role', 1), ('manual', 0), ('manual', 1)]
    assert doc['cost']['summary']['role']['tasks'][0] == {'task': 'Gather tuning facts', 'action': 'aemops.os_tuning.tuning_facts',
                                                          'delegated_local': False, 'runs': 1, 'seconds': 10.23, 'on_target': 1}
    assert doc['cost']['summary']['manual']['target_results']['median'] == 12
    assert 'caps' not in doc

    report.main(['brief', str(raw / 'probes' / 'nvme-ra4096-1.json'), str(raw / 'cost' / 'role-1.json')])
    assert capsys.readouterr().out == ('nvme 16 reads 471.8x p50 9.230 ms p99 18.460 ms; 32.4 s, 16 tasks executed, changed=0, rc=0, '
                                       "host load 6.50; on the target: 3 task results, 3 module processes, tuned-adm ['verify']\n")

    md = tmp_path / 'RESULTS.md'
    text, lines = render(out, md)
    assert lines[0] == '# make bench: results'
    assert 'Measured 2026-12-01T12:51:35Z by `make bench` (`bench/run.sh`, 15 min 46 s).' in lines[2]
    assert ('- NVMe data disk: read amplification 471.8x at 4096 KiB, -x at 128 KiB, 3.6x at 32 KiB (limit 1.0x); '
            'p99 18.46 ms -> - ms -> 2.70 ms.') in lines
    assert ('- Cost of a repeat run: the role 32.4 s for 16 tasks, the manual playbook 55.6 s for 8 tasks: ratio 0.58 in wall time, '
            '2.00 in tasks.') in lines
    assert ('- Performance bar (issue 11), no-change runs: wall time **0.58x** the manual playbook\'s (bar 1.0x: met); **3** module '
            'executions on the target (bar 5: met; the manual playbook 12); **0** `tuned-adm --version` processes (bar 0: met).') in lines
    assert '| reproduce | `make bench` (`bench/run.sh`) with BENCH_RUNS=1 |' in lines
    assert '| checkout | `dfd2499f889f34da9975afb4e453a06bc5009ed0`, modified: README.md (none under plugins/ or roles/) |' in lines
    assert ('| NVMe data disk `nvme0n1` | 4096 (preset, tuned) | 16 (capped from 2000) | **471.8x** | 471.8x-471.8x | 471.8x | 3.686 '
            '| 9.23 (9.23-9.23) | 18.46 (18.46-18.46) | 0/1 |') in lines
    assert '| aem_tuning role | 1 | 16 | 14 | 0 | **32.4** | 32.4-32.4 | 2.0 | 6.50 | 53.9 / 17 / 3 |' in lines
    assert '| **ratio role / manual** | **0.25** | 0.25 | | | | |' in lines
    assert 'alternating role and manual (role 1, manual 1)' in text
    assert 'its throughput allows about 33 faults/s at 4096 KiB (3.686 MiB per read), 3,378 faults/s at 32 KiB (0.037 MiB per read).' in text
    assert '- **The two devices differ** at 32 KiB (NVMe 3.6x, LV 4.8x), in every run.' in text
    assert 'LV (repository) `dm-0` read_ahead_kb=32: 4.8x, p50 1.62 ms, p99 3.23 ms.' in text
    assert 'Plateau under EBS-like caps' not in text

    # bench/caps.sh's section next to it: caps-collect keeps collect's keys, render adds the section
    report.main(['caps-collect', str(caps_raw(tmp_path, monkeypatch)), str(out)])
    assert load(out)['effect'] == doc['effect']
    text, lines = render(out, md)
    assert '## Plateau under EBS-like caps (`make bench-caps`, `bench/caps.sh`)' in lines
    assert ('- Under gp3-like caps ([section below](#plateau-under-ebs-like-caps-make-bench-caps-benchcapssh), commit `d60a7f7c2e`), '
            '4096 KiB -> 32 KiB: random reads/s 35.0 -> 1800.0 (**51.4x**), p99 85.71 -> 1.67 ms') in text
    assert '| random reads/s | **35.0** (30.0-40.0) | **1800.0** (1750.0-1820.0) | **51.4x** |' in lines
    assert '| device MiB/s in 1 s windows, 10th percentile | **20.0** (10.0-30.0) | - | - |' in lines
    assert '| device MiB/s in 1 s windows, 90th percentile | **100.0** (90.0-110.0) | - | - |' in lines
    assert '| **64** | 1907.6 | 0.524 | 1.57 | 109.4 | 438 | 7.4x | 120.0 | none |' in lines
    assert '- **The sweep recommends 64 KiB, not the role\'s 32 KiB.**' in text
    assert 'Phase times (s): boot 51, mkfs 5, before 128, role 29, after 129, sweep 99.' in lines


# ---------------------------------------------------------------------------------------------
# The sequential readers under the caps (bench/caps.sh, bench/seq_guest.py; issue 41)

def diskstat(ios, sectors, ticks=0, queue=0, merges=0):
    return {'read_ios': ios, 'read_merges': merges, 'read_sectors': sectors, 'read_ticks': ticks, 'in_flight': 0,
            'io_ticks': 0, 'time_in_queue': queue}


def seq_output(job, kb, mib, seconds, request_kb, queue=1.0, ms=0.5):
    """What bench/seq_guest.py run prints: a steady job of mib MiB in seconds s, requests of request_kb KiB."""
    sectors = mib * 2048
    ios = int(sectors / (request_kb * 2))
    samples = []
    for i in range(1, int(seconds / 0.5) + 1):
        t = i * 0.5
        share = t / seconds
        samples.append([t, diskstat(int(ios * share), int(sectors * share), int(ios * share * ms),
                                    int(queue * t * 1000))])
    result = {'job': job, 'command': 'x', 'device': 'nvme1n1' if job == 'tar' else 'nvme0n1', 'read_ahead_kb': kb,
              'restored_kb': 32, 'bytes': mib * MIB, 'seconds': seconds, 'interval': 0.5,
              'before': diskstat(0, 0), 'after': diskstat(ios, sectors, int(ios * ms), int(queue * seconds * 1000), 3),
              'samples': samples, 'max_sectors_kb': 512}
    return 'Warning: Permanently added host\n' + json.dumps(result) + '\n'


# (caps, job, read-ahead KiB): (MiB/s, KiB per read); 32 KiB on gp3 at the IOPS ceiling of 3,000 x 32 KiB
SEQ_CASES = {('gp3', 'tar', 32): (93.0, 32.0), ('gp3', 'tar', 128): (120.0, 128.0), ('gp3', 'tar', 4096): (121.0, 512.0),
             ('gp3', 'cp', 32): (118.0, 128.0), ('gp3', 'cp', 128): (120.0, 128.0), ('gp3', 'cp', 4096): (120.0, 512.0),
             ('seed', 'tar', 32): (93.0, 32.0), ('seed', 'tar', 128): (200.0, 128.0), ('seed', 'tar', 4096): (240.0, 512.0),
             ('seed', 'cp', 32): (200.0, 128.0), ('seed', 'cp', 128): (205.0, 128.0), ('seed', 'cp', 4096): (240.0, 512.0)}


def seq_raw(tmp_path, monkeypatch, raw):
    (raw / 'seq').mkdir()
    for (caps, job, kb), (rate, req) in SEQ_CASES.items():
        for rnd, factor in ((1, 1.0), (2, 0.9)):
            mib = 96
            run_main(monkeypatch, ['seq-record', '--caps', caps, '--round', str(rnd), '--load', '1.0', '--load-after', '1.1',
                                   '--out', str(raw / 'seq' / ('%s-%s-%d-%d.json' % (caps, job, kb, rnd)))],
                     seq_output(job, kb, mib, round(mib / (rate * factor), 3), req))
    write(raw / 'seq' / 'setup.json', json.dumps({'store_files': 8, 'store_bytes': 896 * MIB + 30000, 'file_bytes': 512 * MIB}))
    write(raw / 'seq' / 'throttle-seed.json', json.dumps({'nvme-a': {'iops': 3000, 'bps': 262144000, 'iops_size': 262144}}))
    with io.open(str(raw / 'env-host.txt'), 'a', encoding='utf-8') as f:
        f.write('seq_caps=gp3 seed\nseq_rounds=2\nseq_values=32,128,4096\nseq_store_mb=896\nseq_file_mb=512\n')
    return raw


def test_cap_numbers():
    assert report.cap_numbers('gp3') == (3000, 125) and report.cap_numbers('seed') == (3000, 250)
    assert report.cap_numbers('iops=6000,mibps=500') == (6000, 500)
    with pytest.raises(SystemExit):
        report.cap_numbers('fast')


def test_seq_figures_request_size_rates_and_the_bound(tmp_path, monkeypatch):
    out = tmp_path / 'r.json'
    run_main(monkeypatch, ['seq-record', '--caps', 'gp3', '--round', '1', '--load', '1', '--load-after', '1', '--out', str(out)],
             seq_output('tar', 32, 93, 1.0 * 93 / 92.0, 32.0, queue=2.0, ms=0.6))
    rec = load(out)
    assert (rec['cap_iops'], rec['cap_mib_s']) == (3000, 125)
    f = report.seq_figures(rec)
    assert f['mib_s'] == 92.0 and f['request_kb'] == 32.0 and f['device_iops'] == 2944.0 and f['ops_s'] == 2944.0
    assert f['bound'] == 'iops' and f['queue_depth'] == 2.0 and f['read_ms'] == 0.6
    assert f['at_iops_cap_share'] == 1.0 and f['at_mib_cap_share'] == 0.0
    # large requests count as QEMU counts them: one operation per 256 KiB
    f = report.seq_figures(dict(rec, result=json.loads(seq_output('cp', 4096, 120, 1.0, 1024.0).splitlines()[-1])))
    assert f['device_iops'] == 120.0 and f['ops_s'] == 480.0 and f['bound'] == 'throughput'


def test_seq_record_refuses_no_output(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit):
        run_main(monkeypatch, ['seq-record', '--caps', 'gp3', '--round', '1', '--load', '1', '--load-after', '1',
                               '--out', str(tmp_path / 'r.json')], 'Traceback: nothing\n')
    assert 'printed no result' in capsys.readouterr().err


def test_seq_collect_costs_render_and_chart(tmp_path, monkeypatch, capsys):
    raw = seq_raw(tmp_path, monkeypatch, caps_raw(tmp_path, monkeypatch))
    out = tmp_path / 'results.json'
    report.main(['collect', str(bench_raw(tmp_path, monkeypatch)), str(out)])
    report.main(['caps-collect', str(raw), str(out)])
    seq = load(out)['caps']['sequential']
    assert load(out)['caps']['config']['seq_caps'] == 'gp3 seed'
    s = seq['summary']
    assert s['caps_order'] == ['gp3', 'seed']
    first = [(c['caps'], c['job'], c['read_ahead_kb']) for c in s['cases']][:3]
    assert first == [('gp3', 'tar', 32), ('gp3', 'tar', 128), ('gp3', 'tar', 4096)]
    tar32 = s['cases'][0]
    assert tar32['rounds'] == 2 and abs(tar32['mib_s']['max'] - 93.0) < 0.1 and tar32['request_kb']['median'] == 32.0
    costs = dict(((c['caps'], c['job']), c) for c in s['costs'])
    assert costs[('gp3', 'tar')]['best_kb'] == 4096 and costs[('gp3', 'tar')]['over_limit'] is True
    assert costs[('gp3', 'cp')]['over_limit'] is False and costs[('gp3', 'cp')]['time_ratio_128'] < 1.1
    assert costs[('seed', 'tar')]['time_ratio'] > 2.5 and s['over_limit'] is True

    report.main(['brief', str(raw / 'seq' / 'gp3-tar-32-1.json')])
    assert capsys.readouterr().out.startswith('gp3 tar 32 KiB: 93.0 MiB/s, requests 32.0 KiB')
    text, lines = render(out, tmp_path / 'RESULTS.md')
    assert '### Sequential readers under the caps: what 32 KiB costs a backup and a compaction' in lines
    assert 'provisioned (the seed\'s volume): 3,000 IOPS, 250 MiB/s set on both NVMe drives' in text
    assert any(line.startswith('| gp3 | tar | 32 | **') and line.endswith('| iops, none |') for line in lines)
    assert ('- Sequential readers under the same caps ([section below](#sequential-readers-under-the-caps-what-32-kib-costs-a-backup-and-a-'
            'compaction)), 32 KiB against the best larger read-ahead: tar at gp3 **1.30x** the time') in text
    assert '- **Against issue 41\'s limit** (a sequential job about 20% slower calls for a maintenance window): **exceeded**' in text
    assert '3,000 x 32 KiB = 93.8 MiB/s, below the 125 MiB/s throughput cap' in text
    charts = tmp_path / 'charts'
    report.main(['charts', str(out), str(charts)])
    assert 'caps-seq-readers.png' in os.listdir(str(charts))
