# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Records, collects and renders the measurements of ``make bench`` (bench/run.sh).

Subcommands (run with the controller venv's Python):

  probe-record --label L --read-ahead KB --round R --seed S --load X --out F < ansible-output
      The result of one ``ansible -m aemops.os_tuning.io_probe`` run, with its metadata, as JSON.
      Fails when the probe failed or found another read-ahead than KB.
  cost-record --kind K --round R --start T0 --end T1 --rc RC --load X [--tasks F] [--guest F] --out F < playbook-log
      Wall time and the PLAY RECAP counts of one ansible-playbook run, the tasks that changed, the
      task results that executed on the target (--tasks: the JSON lines of the aemops_bench_count
      callback) and what the guest counted (--guest: "python" and "tuned-adm ARGS" lines).
  brief FILE...                       one line per record, for the progress log
  collect RAWDIR OUT.json             every record and the environment in one JSON document
  render IN.json OUT.md               bench/RESULTS.md from that document: the numbers are computed here
                                      (render_context), bench/RESULTS.md.j2 lays them out (Jinja2)

bench/caps.sh (the plateau under EBS-like caps) adds:

  caps-record --phase P --round R --load X --load-after Y --out F < ansible-output
      The result of one ``ansible -m aemops.os_tuning.read_ahead_sweep`` run as JSON. Fails when the
      sweep failed or did not restore the device; for before/after (one value) also when the
      device was not at that value already (the sweep must measure the current state, not set it).
  seq-record --caps SPEC --round R --load X --load-after Y --out F < seq_guest-output
      One run of bench/seq_guest.py (a tar or a cp at one read-ahead, under the caps SPEC) as JSON.
  caps-collect RAWDIR OUT.json        the records and their summary under the key "caps" of OUT.json;
                                      the other keys are kept (collect keeps "caps" in turn)
  charts IN.json OUTDIR               the PNG charts of the caps results (matplotlib, Agg backend)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import glob
import io
import json
import math
import os
import re
import statistics
import sys

SCHEMA = 1
RECAP = re.compile(r'^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$')
TASK = re.compile(r'^(?:TASK|RUNNING HANDLER) \[(?P<name>.*)\] \**$')
DEVICE_LABELS = {'nvme': 'NVMe data disk', 'lv': 'LV (repository)'}
READ_AHEAD_NOTES = {4096: 'preset, tuned', 128: 'kernel default, RHEL 7', 32: 'aem_tuning'}
DEFAULTS = {'runs': 3, 'size_mb': 256, 'reads': 2000}
# EBS gp3 baseline (AWS documentation): 125 MiB/s and 3,000 IOPS per volume.
GP3_MIB_S = 125
GP3_IOPS = 3000
# Issue 11's performance bar: module executions on the target in a no-change run of the role.
BAR_MODULE_EXECUTIONS = 5
KIND_LABELS = {'role': 'aem_tuning role', 'manual': 'manual playbook (ansible.builtin)'}


def fail(msg):
    sys.stderr.write('bench/report.py: %s\n' % msg)
    sys.exit(1)


def read_json(path):
    with io.open(path, encoding='utf-8') as f:
        return json.load(f)


def write_json(path, data):
    with io.open(path, 'w', encoding='utf-8') as f:
        f.write(json.dumps(data, indent=2, sort_keys=True) + '\n')


def read_kv(path):
    """KEY=VALUE lines as a dict (values as text)."""
    result = {}
    with io.open(path, encoding='utf-8') as f:
        for line in f:
            key, sep, value = line.rstrip('\n').partition('=')
            if sep:
                result[key] = value
    return result


def round_value(text):
    return int(text) if text.isdigit() else text


# ---------------------------------------------------------------------------------------------
# Records

def adhoc_result(text):
    """The module result of ``ansible HOST -m MODULE`` (default callback): ``HOST | STATUS => {json}``."""
    match = re.search(r'^(\S+) \| (\S+) => ', text, re.M)
    if not match:
        fail('no "HOST | STATUS => {...}" in the ansible output:\n%s' % text[-2000:])
    status = match.group(2)
    try:
        result = json.loads(text[match.end():])
    except ValueError as e:
        fail('cannot parse the module result (%s):\n%s' % (e, text[-2000:]))
    return status, result


def cmd_probe_record(args):
    status, result = adhoc_result(sys.stdin.read())
    if status != 'SUCCESS' or not result.get('measured'):
        fail('io_probe did not measure (%s): %s' % (status, result.get('msg', result)))
    if result['read_ahead_kb'] != args.read_ahead:
        fail('io_probe found read_ahead_kb=%s on %s, expected %s: something changed it (tuned?)'
             % (result['read_ahead_kb'], result['device'], args.read_ahead))
    record = {'label': args.label, 'read_ahead_kb': args.read_ahead, 'round': round_value(args.round),
              'seed': args.seed, 'host_load': args.load, 'result': result}
    write_json(args.out, record)


def parse_playbook_log(text):
    """PLAY RECAP counts (summed over hosts) and the names of the tasks that reported changed."""
    counts = {}
    changed_tasks = []
    task = None
    in_recap = False
    for line in text.splitlines():
        match = TASK.match(line)
        if match:
            task = match.group('name')
            continue
        if line.startswith('changed: [') and task and task not in changed_tasks:
            changed_tasks.append(task)
        if line.startswith('PLAY RECAP'):
            in_recap = True
            continue
        match = RECAP.match(line) if in_recap else None
        if match:
            for item in match.group('counts').split():
                key, value = item.split('=')
                counts[key] = counts.get(key, 0) + int(value)
    if not counts:
        return None, changed_tasks
    return counts, changed_tasks


def read_task_results(path):
    """The callback's JSON lines (bench/callback_plugins/aemops_bench_count.py), in order."""
    if not path or not os.path.exists(path):
        return []
    with io.open(path, encoding='utf-8') as f:
        return [json.loads(line) for line in f if line.strip()]


def per_task(results):
    """One entry per task, in order: its results on the target and its seconds (loop: the whole loop)."""
    tasks = []
    by_name = {}
    for r in results:
        entry = by_name.get(r['task'])
        if entry is None:
            entry = {'task': r['task'], 'action': r['action'], 'on_target': 0, 'seconds': 0.0,
                     'delegated_local': r['delegated_local']}
            by_name[r['task']] = entry
            tasks.append(entry)
        entry['on_target'] += 1 if r['on_target'] else 0
        entry['seconds'] = round(entry['seconds'] + r.get('seconds', 0.0), 3)
    return tasks


def read_guest_counts(path):
    """(module processes, tuned-adm argument lines) from the guest's shim logs."""
    python = 0
    tuned_adm = []
    if path and os.path.exists(path):
        with io.open(path, encoding='utf-8') as f:
            for line in f:
                kind, _sep, rest = line.rstrip('\n').partition(' ')
                if kind == 'python':
                    python += 1
                elif kind == 'tuned-adm':
                    tuned_adm.append(rest)
    return python, tuned_adm


def cmd_cost_record(args):
    counts, changed_tasks = parse_playbook_log(sys.stdin.read())
    record = {'kind': args.kind, 'round': args.round, 'first_run': args.round == 0, 'rc': args.rc,
              'started_epoch': round(args.start, 3),
              'wall_s': round(args.end - args.start, 2), 'host_load': args.load, 'recap': counts,
              'changed_tasks': changed_tasks}
    if counts:
        # "ok" counts every task that ran and did not fail, changed ones included; "failed" the others.
        record['executed_tasks'] = counts.get('ok', 0) + counts.get('failed', 0)
    if args.tasks:
        results = read_task_results(args.tasks)
        record['target_results'] = sum(1 for r in results if r['on_target'])
        record['tasks'] = per_task(results)
    if args.guest:
        python, tuned_adm = read_guest_counts(args.guest)
        record['module_processes'] = python
        record['tuned_adm'] = tuned_adm
        record['tuned_adm_version'] = sum(1 for a in tuned_adm if '--version' in a.split())
    write_json(args.out, record)


def cmd_brief(args):
    parts = []
    for path in args.files:
        rec = read_json(path)
        if 'cap_iops' in rec:
            parts.append(seq_brief(rec))
        elif 'phase' in rec:
            parts.extend(caps_brief(r) for r in rec['result']['results'])
            if rec['result'].get('recommended_kb') is not None and len(rec['result']['results']) > 1:
                parts.append('recommended %s KiB' % rec['result']['recommended_kb'])
        elif 'result' in rec:
            r = rec['result']
            parts.append('%s %s reads %.1fx p50 %.3f ms p99 %.3f ms%s'
                         % (rec['label'], r['reads'], r['read_amplification'], r['latency']['p50_ms'],
                            r['latency']['p99_ms'], ' (noisy)' if r['noisy'] else ''))
        else:
            recap = rec['recap'] or {}
            parts.append('%.1f s, %s tasks executed, changed=%s, rc=%s, host load %s; on the target: %s task '
                         'results, %s module processes, tuned-adm %s'
                         % (rec['wall_s'], rec.get('executed_tasks'), recap.get('changed'), rec['rc'],
                            rec['host_load'], rec.get('target_results'), rec.get('module_processes'),
                            rec.get('tuned_adm')))
    print('; '.join(parts))


# ---------------------------------------------------------------------------------------------
# Collect

def spread(values):
    return {'median': round(statistics.median(values), 3), 'min': round(min(values), 3),
            'max': round(max(values), 3), 'n': len(values)}


def summarize_effect(probes):
    rows = []
    keys = []
    for p in probes:
        if p['round'] == 'role':
            continue
        key = (p['label'], p['read_ahead_kb'])
        if key not in keys:
            keys.append(key)
    for label, ra in sorted(keys, key=lambda k: (list(DEVICE_LABELS).index(k[0]), -k[1])):
        group = [p['result'] for p in probes if p['label'] == label and p['read_ahead_kb'] == ra and p['round'] != 'role']
        rows.append({
            'label': label,
            'device': group[0]['device'],
            'read_ahead_kb': ra,
            'runs': len(group),
            'reads': sorted(set(r['reads'] for r in group)),
            'reads_requested': group[0]['reads_requested'],
            'reads_capped': any(r['reads_capped'] for r in group),
            'read_amplification': spread([r['read_amplification'] for r in group]),
            'page_cache_amplification': spread([r['page_cache_amplification'] for r in group
                                                if r['page_cache_amplification'] is not None] or [0]),
            'device_mib_per_read': spread([r['bytes_per_read'] / 1048576.0 for r in group]),
            'p50_ms': spread([r['latency']['p50_ms'] for r in group]),
            'p99_ms': spread([r['latency']['p99_ms'] for r in group]),
            'mean_ms': spread([r['latency']['mean_ms'] for r in group]),
            'noisy_runs': sum(1 for r in group if r['noisy']),
            'timed_out_runs': sum(1 for r in group if r['timed_out']),
        })
    return rows


def summarize_cost(records):
    summary = {}
    for kind in ('role', 'manual'):
        first = [r for r in records if r['kind'] == kind and r['first_run']]
        repeat = [r for r in records if r['kind'] == kind and not r['first_run']]
        if not repeat:
            continue
        summary[kind] = {
            'repeat_runs': len(repeat),
            'wall_s': spread([r['wall_s'] for r in repeat]),
            'executed_tasks': spread([r['executed_tasks'] for r in repeat]),
            'skipped_tasks': spread([r['recap'].get('skipped', 0) for r in repeat]),
            'changed_tasks': spread([r['recap'].get('changed', 0) for r in repeat]),
            'changed_task_names': sorted(set(t for r in repeat for t in r['changed_tasks'])),
            'host_load': spread([float(r['host_load']) for r in repeat]),
            'first_run': {'wall_s': first[0]['wall_s'], 'executed_tasks': first[0]['executed_tasks'],
                          'changed': first[0]['recap'].get('changed', 0),
                          'target_results': first[0].get('target_results'),
                          'module_processes': first[0].get('module_processes'),
                          'tuned_adm_version': first[0].get('tuned_adm_version')} if first else None,
        }
        if all('module_processes' in r and 'target_results' in r for r in repeat):
            summary[kind].update({
                'target_results': spread([r['target_results'] for r in repeat]),
                'module_processes': spread([r['module_processes'] for r in repeat]),
                'tuned_adm_version': spread([r['tuned_adm_version'] for r in repeat]),
                'tuned_adm_processes': spread([len(r['tuned_adm']) for r in repeat]),
                'tuned_adm_args': sorted(set(a for r in repeat for a in r['tuned_adm'])),
                'tasks': task_medians(repeat),
            })
    if 'role' in summary and 'manual' in summary:
        role, manual = summary['role'], summary['manual']
        ratio = summary['ratio_role_to_manual'] = {
            'wall_s': round(role['wall_s']['median'] / manual['wall_s']['median'], 2),
            'executed_tasks': round(role['executed_tasks']['median'] / manual['executed_tasks']['median'], 2),
        }
        if 'module_processes' in role and 'module_processes' in manual:
            ratio['target_results'] = round(role['target_results']['median'] / manual['target_results']['median'], 2)
            ratio['module_processes'] = round(role['module_processes']['median']
                                              / manual['module_processes']['median'], 2)
            summary['bar'] = [
                bar_line('wall time of a no-change run, role / manual (medians)', ratio['wall_s'], 1.0, 'x'),
                bar_line('module executions on the target in a no-change run of the role (median)',
                         role['module_processes']['median'], BAR_MODULE_EXECUTIONS, ''),
                bar_line('`tuned-adm --version` processes in a no-change run of the role (median)',
                         role['tuned_adm_version']['median'], 0, ''),
            ]
    repeat = sorted((r for r in records if not r['first_run'] and 'started_epoch' in r), key=lambda r: r['started_epoch'])
    if repeat:
        summary['order'] = ['%s %s' % (r['kind'], r['round']) for r in repeat]
        summary['alternating'] = all(a['kind'] != b['kind'] for a, b in zip(repeat, repeat[1:]))
    return summary


def bar_line(what, value, limit, unit):
    return {'what': what, 'value': value, 'limit': limit, 'unit': unit, 'met': value <= limit}


def task_medians(repeat):
    """Per task of the repeat runs (in the first run's order): median seconds and results on the target."""
    names = []
    for r in repeat:
        for t in r['tasks']:
            if t['task'] not in [n['task'] for n in names]:
                names.append(t)
    rows = []
    for t in names:
        found = [x for r in repeat for x in r['tasks'] if x['task'] == t['task']]
        rows.append({'task': t['task'], 'action': t['action'], 'delegated_local': t['delegated_local'],
                     'runs': len(found),
                     'seconds': round(statistics.median([x['seconds'] for x in found]), 2),
                     'on_target': statistics.median([x['on_target'] for x in found])})
    return rows


def cmd_collect(args):
    raw = args.raw
    probes = [read_json(p) for p in sorted(glob.glob(os.path.join(raw, 'probes', '*.json')))]
    cost = [read_json(p) for p in sorted(glob.glob(os.path.join(raw, 'cost', '*.json')))]
    cost.sort(key=lambda r: (['role', 'manual'].index(r['kind']), r['round']))
    probes.sort(key=lambda p: (str(p['round']), p['label'], -p['read_ahead_kb']))
    host = read_kv(os.path.join(raw, 'env-host.txt'))
    guest = read_kv(os.path.join(raw, 'env-guest.txt'))
    with io.open(os.path.join(raw, 'started'), encoding='utf-8') as f:
        started = f.read().strip()
    with io.open(os.path.join(raw, 'duration_s'), encoding='utf-8') as f:
        duration = int(f.read().strip())
    loads = [float(p['host_load']) for p in probes] + [float(r['host_load']) for r in cost]
    doc = {
        'schema': SCHEMA,
        'started': started,
        'duration_s': duration,
        'command': 'make bench',
        'config': {'runs': int(host['runs']), 'size_mb': int(host['size_mb']), 'reads': int(host['reads']),
                   'record_kb': int(host['record_kb']), 'method': 'mmap',
                   'read_aheads_kb': [int(x) for x in host['read_aheads'].split()]},
        'host': dict((k, v) for k, v in host.items() if k not in ('runs', 'size_mb', 'reads', 'record_kb', 'read_aheads')),
        'host_load_1min': spread(loads) if loads else None,
        'vm': guest,
        'effect': {'summary': summarize_effect(probes),
                   'role_crosscheck': [p for p in probes if p['round'] == 'role'],
                   'probes': [p for p in probes if p['round'] != 'role']},
        'cost': {'summary': summarize_cost(cost), 'runs': cost},
    }
    if os.path.exists(args.out):  # bench/caps.sh's section, measured apart, is kept
        caps = read_json(args.out).get('caps')
        if caps is not None:
            doc['caps'] = caps
    write_json(args.out, doc)


# ---------------------------------------------------------------------------------------------
# Render: the numbers are computed here; bench/RESULTS.md.j2 only lays them out.

TEMPLATE = 'RESULTS.md.j2'


def fmt(value, digits=1):
    return '%.*f' % (digits, value)


def fmt_ms(value):
    return fmt(value, 3 if value < 1 else 2)


def fmt_ratio(value):
    """A ratio with 2 significant digits at least: 96.2, 1.35, 0.011."""
    return fmt(value, 1 if value >= 10 else 2 if value >= 0.1 else 3)


def thousands(value):
    return '{:,}'.format(int(value))


def row_for(doc, label, ra):
    for row in doc['effect']['summary']:
        if row['label'] == label and row['read_ahead_kb'] == ra:
            return row
    return None


def headline_rows(doc):
    rows = []
    for label in DEVICE_LABELS:
        a, b, c = (row_for(doc, label, ra) for ra in (4096, 128, 32))
        if a and c:
            rows.append({'device': DEVICE_LABELS[label], 'at': [a, b, c]})
    return rows


def effect_rows(doc):
    rows = []
    for row in doc['effect']['summary']:
        reads = '/'.join(str(n) for n in row['reads'])
        if row['reads_capped']:
            reads += ' (capped from %d)' % row['reads_requested']
        rows.append(dict(row, device_label=DEVICE_LABELS.get(row['label'], row['label']), reads_text=reads,
                         note=READ_AHEAD_NOTES.get(row['read_ahead_kb'], '')))
    return rows


def cost_rows(doc):
    summary = doc['cost']['summary']
    rows = []
    for kind in ('role', 'manual'):
        s = summary.get(kind)
        if s:
            rows.append(dict(s, kind=kind, label=KIND_LABELS[kind],
                             s_per_task=s['wall_s']['median'] / s['executed_tasks']['median']))
    return rows


def gp3_parts(doc):
    """What the measured device MiB per read means for a volume's throughput cap (arithmetic, not measured)."""
    parts = []
    for ra in doc['config']['read_aheads_kb']:
        rows = [r for r in doc['effect']['summary'] if r['read_ahead_kb'] == ra]
        if rows:
            per_read = max(r['device_mib_per_read']['median'] for r in rows)
            parts.append({'read_ahead_kb': ra, 'per_read': per_read, 'faults_per_s': int(GP3_MIB_S / per_read)})
    return parts


def device_differences(doc):
    """The read-ahead values at which the two devices differ by more than their spread."""
    found = []
    for ra in doc['config']['read_aheads_kb']:
        a, b = row_for(doc, 'nvme', ra), row_for(doc, 'lv', ra)
        if not a or not b:
            continue
        amp_a, amp_b = a['read_amplification'], b['read_amplification']
        if amp_a['max'] < amp_b['min'] or amp_b['max'] < amp_a['min']:
            found.append({'read_ahead_kb': ra, 'nvme': amp_a['median'], 'lv': amp_b['median']})
    return found


def reproduce_args(cfg):
    changed = ['BENCH_%s=%d' % (key.upper(), cfg[key]) for key in ('runs', 'size_mb', 'reads') if cfg[key] != DEFAULTS[key]]
    return ' with %s' % ' '.join(changed) if changed else ''


def reads_at(doc, ra):
    values = set()
    for row in doc['effect']['summary']:
        if row['read_ahead_kb'] == ra:
            values.update(row['reads'])
    return '/'.join(str(v) for v in sorted(values)) or '-'


def load_difference(summary):
    """The two sides' median loads when they differ by more than 20%, else None."""
    role, manual = summary.get('role'), summary.get('manual')
    if not role or not manual:
        return None
    a, b = role['host_load']['median'], manual['host_load']['median']
    hi, lo = max(a, b), min(a, b)
    return {'role': a, 'manual': b} if lo > 0 and hi / lo > 1.2 else None


def costly_tasks(summary, kind, limit=8):
    """The kind's tasks by median seconds, most expensive first."""
    tasks = (summary.get(kind) or {}).get('tasks') or []
    return sorted(tasks, key=lambda t: -t['seconds'])[:limit]


def checkout(host):
    commit = host.get('git_commit')
    if not commit:
        return None
    return {'commit': commit, 'dirty': host.get('git_dirty', ''), 'dirty_code': host.get('git_dirty_code', '')}


def render_context(doc):
    cfg = doc['config']
    summary = doc['cost']['summary']
    minutes, seconds = divmod(doc['duration_s'], 60)
    return {
        'doc': doc, 'cfg': cfg, 'vm': doc['vm'], 'host': doc['host'], 'cost': summary,
        'minutes': minutes, 'seconds': seconds,
        'reproduce_args': reproduce_args(cfg),
        'checkout': checkout(doc['host']),
        'headline': headline_rows(doc),
        'effect_rows': effect_rows(doc),
        'cost_rows': cost_rows(doc),
        'physical_mib_per_read': cfg['record_kb'] / 1024.0,
        'expected_amp': [{'read_ahead_kb': ra, 'x': ra // cfg['record_kb']} for ra in cfg['read_aheads_kb']],
        'gp3': {'mib_s': GP3_MIB_S, 'iops': GP3_IOPS, 'parts': gp3_parts(doc)},
        'device_differences': device_differences(doc),
        'reads_at_4096': reads_at(doc, 4096), 'reads_at_128': reads_at(doc, 128),
        'crosscheck': [dict(p, device_label=DEVICE_LABELS.get(p['label'], p['label']))
                       for p in doc['effect'].get('role_crosscheck') or []],
        'load_difference': load_difference(summary),
        'load': doc.get('host_load_1min'),
        'costly_role_tasks': costly_tasks(summary, 'role'),
        'costly_manual_tasks': costly_tasks(summary, 'manual'),
        'bar_module_executions': BAR_MODULE_EXECUTIONS,
        'caps': caps_context(doc['caps']) if doc.get('caps') else None,
        'fleet': fleet_context(doc['fleet']) if doc.get('fleet') else None,
    }


def fleet_context(fleet):
    """make bench-fleet's part (bench/fleet.py measures and summarizes; here only the layout's inputs)."""
    order = {'baseline': 0, 'tree': 1, 'control': 2}
    rows = sorted(fleet['runs'], key=lambda r: (r['hosts'], order[r['variant']]))
    ratios = sorted(fleet['summary']['ratio_tree_to_baseline'].items(), key=lambda kv: int(kv[0]))
    return {'f': fleet, 'rows': rows, 's': fleet['summary'],
            'ratios': [dict(hosts=int(n), **r) for n, r in ratios]}


def render(doc):
    import jinja2  # the controller venv has it (ansible-core depends on it)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.dirname(os.path.abspath(__file__))),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, autoescape=False)
    env.filters.update({'f': fmt, 'ms': fmt_ms, 'thousands': thousands, 'ratio': fmt_ratio})
    return env.get_template(TEMPLATE).render(**render_context(doc))


def cmd_render(args):
    text = render(read_json(args.json))
    with io.open(args.md, 'w', encoding='utf-8') as f:
        f.write(text)


# ---------------------------------------------------------------------------------------------
# Caps (bench/caps.sh): the plateau under EBS-like caps, before and after the role

CAPS_PHASES = ('before', 'after')
# The timeline's 0.5 s samples of QEMU's throttled device alternate above and below the cap (the
# throttle admits I/O in bursts), so the chart and the figures use windows of this many seconds.
WINDOW_S = 1.0
CAPS_METRICS = ('reads_per_s', 'p50_ms', 'p99_ms', 'device_mib_s', 'useful_mib_s', 'device_iops',
                'read_amplification', 'cap_share', 'window_p10_mib_s', 'window_p90_mib_s', 'seq_mib_s')


def caps_brief(r):
    lat = r.get('latency') or {}
    return ('%d KiB %s reads/s p50 %s ms p99 %s ms device %s MiB/s %s IOPS amplification %sx seq %s MiB/s%s'
            % (r['read_ahead_kb'], r.get('reads_per_s'), lat.get('p50_ms'), lat.get('p99_ms'), r.get('device_mib_s'),
               r.get('device_iops'), r.get('read_amplification'), r.get('seq_mib_s'),
               ' (noisy)' if r.get('noisy') else ''))


def cmd_caps_record(args):
    status, result = adhoc_result(sys.stdin.read())
    if status not in ('SUCCESS', 'CHANGED') or not result.get('measured'):
        fail('read_ahead_sweep did not measure (%s): %s' % (status, result.get('msg', result)))
    if not result.get('restored') or result.get('restored_kb') != result.get('original_kb'):
        fail('read_ahead_sweep did not restore %s: %s' % (result.get('device'), result.get('msg', '')))
    if args.phase in CAPS_PHASES and result['sweep'] != [result['original_kb']]:
        fail('%s round %s: the sweep measured %s, but the device was at %s KiB: it must measure the current value'
             % (args.phase, args.round, result['sweep'], result['original_kb']))
    record = {'phase': args.phase, 'round': args.round, 'host_load': args.load,
              'host_load_after': args.load_after, 'result': result}
    write_json(args.out, record)


def useful_mib_s(r):
    """MiB/s the readers asked for (the records' bytes), against the device's MiB/s."""
    if not r.get('elapsed_s'):
        return None
    return round(r['asked_bytes'] / 1048576.0 / r['elapsed_s'], 3)


def windows(points, seconds=WINDOW_S):
    """The timeline's [end s, MiB/s] samples merged into consecutive windows of at least ``seconds``
    (MiB/s weighted by each sample's span); a last window shorter than that is dropped."""
    merged = []
    start = 0.0
    acc = span = 0.0
    for t, rate in points:
        acc += rate * (t - start)
        span += t - start
        start = t
        if span >= seconds - 1e-6:
            merged.append([round(t, 3), round(acc / span, 2)])
            acc = span = 0.0
    return merged


def percentile(values, share):
    """Nearest-rank percentile: the value of rank ceil(share * n) (1-based) of the sorted values, the rank
    clamped to [1, n]. share * n is rounded to 9 decimals first, so that float error (0.14 * 50 is
    7.000000000000001) does not raise the rank by one."""
    ordered = sorted(values)
    rank = int(math.ceil(round(share * len(ordered), 9)))
    return ordered[min(len(ordered), max(1, rank)) - 1]


def caps_figures(r, mib_s_cap):
    lat = r.get('latency') or {}
    win = [rate for t, rate in windows(r.get('timeline') or [])]
    return {'read_ahead_kb': r['read_ahead_kb'], 'reads_per_s': r.get('reads_per_s'), 'p50_ms': lat.get('p50_ms'),
            'p99_ms': lat.get('p99_ms'), 'device_mib_s': r.get('device_mib_s'), 'useful_mib_s': useful_mib_s(r),
            'device_iops': r.get('device_iops'), 'read_amplification': r.get('read_amplification'),
            'seq_mib_s': r.get('seq_mib_s'),
            'cap_share': round(r['device_mib_s'] / mib_s_cap, 3) if mib_s_cap and r.get('device_mib_s') else None,
            'window_p10_mib_s': percentile(win, 0.1) if win else None,
            'window_p90_mib_s': percentile(win, 0.9) if win else None,
            'noisy': bool(r.get('noisy')), 'bound': r.get('bound')}


def summarize_caps(records):
    """Medians per phase (before, after) over the rounds, the ratios after/before, and the sweep."""
    mib_s_cap = None
    for rec in records:
        mib_s_cap = rec['result']['caps']['mib_s']
    phases = {}
    for phase in CAPS_PHASES:
        rows = [caps_figures(rec['result']['results'][0], mib_s_cap) for rec in records if rec['phase'] == phase]
        if not rows:
            continue
        summary = {'rounds': len(rows), 'read_ahead_kb': sorted(set(r['read_ahead_kb'] for r in rows)),
                   'noisy_rounds': sum(1 for r in rows if r['noisy']),
                   'bound': sorted(set(r['bound'] for r in rows))}
        for key in CAPS_METRICS:
            values = [r[key] for r in rows if r[key] is not None]
            summary[key] = spread(values) if values else None
        phases[phase] = summary
    ratios = {}
    if 'before' in phases and 'after' in phases:
        for key in CAPS_METRICS:
            a, b = phases['after'].get(key), phases['before'].get(key)
            if a and b and b['median']:
                ratios[key] = round(a['median'] / b['median'], 3)
    sweep = [rec['result'] for rec in records if rec['phase'] == 'sweep']
    trade = None
    if sweep:
        res = sweep[-1]
        trade = {'rows': [caps_figures(r, mib_s_cap) for r in res['results']], 'table': res.get('table'),
                 'recommended_kb': res.get('recommended_kb'), 'why': res.get('why'), 'best_kb': res.get('best_kb'),
                 'best_reads_per_s': res.get('best_reads_per_s'),
                 'threshold_reads_per_s': res.get('threshold_reads_per_s'), 'within_kb': res.get('within_kb'),
                 'excluded_noisy_kb': res.get('excluded_noisy_kb'), 'tolerance_pct': 5.0,
                 'caps': res.get('caps'), 'original_kb': res.get('original_kb')}
    return {'phases': phases, 'ratio_after_to_before': ratios, 'sweep': trade, 'mib_s_cap': mib_s_cap}


def cmd_caps_collect(args):
    raw = args.raw
    records = [read_json(p) for p in sorted(glob.glob(os.path.join(raw, 'sweeps', '*.json')))]
    order = list(CAPS_PHASES) + ['sweep']
    records.sort(key=lambda r: (order.index(r['phase']), r['round']))
    host = read_kv(os.path.join(raw, 'env-host.txt'))
    guest = read_kv(os.path.join(raw, 'env-guest.txt'))
    with io.open(os.path.join(raw, 'started'), encoding='utf-8') as f:
        started = f.read().strip()
    with io.open(os.path.join(raw, 'duration_s'), encoding='utf-8') as f:
        duration = int(f.read().strip())
    phases = []
    with io.open(os.path.join(raw, 'phases.txt'), encoding='utf-8') as f:
        for line in f:
            name, seconds = line.split()
            phases.append({'phase': name, 'seconds': int(seconds)})
    config_keys = ('runs', 'duration', 'readers', 'size_mb', 'interval', 'sweep_duration', 'sweep_values',
                   'nvme_caps', 'volume', 'seq_caps', 'seq_rounds', 'seq_values', 'seq_store_mb', 'seq_file_mb')
    config = dict((k, host[k]) for k in config_keys if k in host)
    for key in ('runs', 'duration', 'readers', 'size_mb', 'sweep_duration'):
        config[key] = int(config[key])
    config['interval'] = float(config['interval'])
    config['sweep_values'] = [int(x) for x in config['sweep_values'].split(',')]
    loads = [float(r[k]) for r in records for k in ('host_load', 'host_load_after')]
    caps = {
        'schema': SCHEMA,
        'started': started,
        'duration_s': duration,
        'command': 'make bench-caps',
        'config': config,
        'host': dict((k, v) for k, v in host.items() if k not in config_keys),
        'vm': guest,
        'phase_seconds': phases,
        'host_load_1min': spread(loads) if loads else None,
        'summary': summarize_caps(records),
        'records': records,
        'sequential': seq_collect(raw),
    }
    doc = read_json(args.out) if os.path.exists(args.out) else {}
    doc['caps'] = caps
    write_json(args.out, doc)


def caps_context(caps):
    """The numbers of the caps section of RESULTS.md."""
    summary = caps['summary']
    phases = summary['phases']
    rows = []
    labels = {'reads_per_s': ('random reads/s', 1), 'p50_ms': ('p50 latency ms', 2), 'p99_ms': ('p99 latency ms', 2),
              'device_mib_s': ('device MiB/s', 1), 'useful_mib_s': ('useful MiB/s (asked for)', 2),
              'device_iops': ('device IOPS', 0), 'read_amplification': ('read amplification', 1),
              'cap_share': ('device MiB/s / the MiB/s cap', 2),
              'window_p10_mib_s': ('device MiB/s in 1 s windows, 10th percentile', 1),
              'window_p90_mib_s': ('device MiB/s in 1 s windows, 90th percentile', 1),
              'seq_mib_s': ('sequential MiB/s (cold read)', 1)}
    for key in ('reads_per_s', 'p50_ms', 'p99_ms', 'device_mib_s', 'cap_share', 'window_p10_mib_s',
                'window_p90_mib_s', 'useful_mib_s', 'device_iops', 'read_amplification', 'seq_mib_s'):
        before, after = (phases.get('before') or {}).get(key), (phases.get('after') or {}).get(key)
        if not before and not after:
            continue
        rows.append({'label': labels[key][0], 'digits': labels[key][1], 'before': before, 'after': after,
                     'ratio': summary['ratio_after_to_before'].get(key)})
    checkout_info = checkout(caps['host'])
    if checkout_info is not None:
        checkout_info['dirty_code'] = caps['host'].get('git_dirty_code', '')
    minutes, seconds = divmod(caps['duration_s'], 60)
    sweep = summary.get('sweep')
    return {'c': caps, 'cfg': caps['config'], 'host': caps['host'], 'vm': caps['vm'], 'phases': phases,
            'rows': rows, 'ratios': summary['ratio_after_to_before'], 'sweep': sweep,
            'checkout': checkout_info, 'minutes': minutes, 'seconds': seconds,
            'mib_s_cap': summary['mib_s_cap'], 'load': caps.get('host_load_1min'),
            'phase_seconds': caps['phase_seconds'], 'charts': CHARTS,
            'seq': seq_context(caps['sequential']) if caps.get('sequential') else None}


# ---------------------------------------------------------------------------------------------
# Sequential readers under the caps (bench/caps.sh, issue 41): a tar of the segment store, a cp of one file

SEQ_JOBS = {'tar': 'tar of the segment store', 'cp': 'cp of one large file'}
CAP_SPECS = {'gp3': (3000, 125), 'io2': (16000, 1000), 'seed': (3000, 250)}
QEMU_OP_BYTES = 262144  # QEMU's throttling.iops-size, as EBS counts I/O: one op per 256 KiB
AT_CAP = 0.9  # at a cap: at 90% of it or more (read_ahead_sweep's rule)
SEQ_COST_LIMIT = 0.2  # issue 41: a cost above about 20% calls for a maintenance window
SEQ_METRICS = ('mib_s', 'device_mib_s', 'request_kb', 'merges_per_read', 'device_iops', 'ops_s',
               'queue_depth', 'read_ms', 'at_mib_cap_share', 'at_iops_cap_share', 'seconds')


def cap_numbers(spec):
    """(IOPS, MiB/s) of a caps spec: gp3, io2, seed or iops=N,mibps=M (tests/vm/lib.sh's table)."""
    if spec in CAP_SPECS:
        return CAP_SPECS[spec]
    m = re.match(r'^iops=(\d+),mibps=(\d+)$', spec)
    if not m:
        fail('unknown caps %r' % spec)
    return int(m.group(1)), int(m.group(2))


def cmd_seq_record(args):
    lines = [line for line in sys.stdin.read().splitlines() if line.strip().startswith('{')]
    if not lines:
        fail('seq_guest.py printed no result')
    result = json.loads(lines[-1])
    if result['restored_kb'] is None or result['read_ahead_kb'] <= 0:
        fail('seq_guest.py: no read-ahead measured: %r' % result)
    iops, mib_s = cap_numbers(args.caps)
    record = {'caps': args.caps, 'cap_iops': iops, 'cap_mib_s': mib_s, 'round': args.round,
              'host_load': args.load, 'host_load_after': args.load_after, 'result': result}
    write_json(args.out, record)


def seq_brief(rec):
    f = seq_figures(rec)
    return ('%s %s %d KiB: %.1f MiB/s, requests %.1f KiB, %.0f IOPS, %.1f s, bound %s'
            % (rec['caps'], rec['result']['job'], f['read_ahead_kb'], f['mib_s'], f['request_kb'], f['device_iops'],
               f['seconds'], f['bound']))


def delta(a, b):
    return dict((k, b[k] - a[k]) for k in a if k != 'in_flight')


def seq_windows(r, seconds=WINDOW_S):
    """[span s, MiB/s, ops/s] per window of at least ``seconds`` from the diskstats samples (the last,
    shorter window dropped); ops count as QEMU's throttle counts them, at least one per 256 KiB."""
    points = [[0.0, r['before']]] + [p for p in r['samples'] if p[0] < r['seconds']] + [[r['seconds'], r['after']]]
    out = []
    start = points[0]
    for point in points[1:]:
        span = point[0] - start[0]
        if span < seconds - 1e-6:
            continue
        d = delta(start[1], point[1])
        nbytes = d['read_sectors'] * 512.0
        out.append([round(span, 3), round(nbytes / 1048576.0 / span, 2),
                    round(max(d['read_ios'], nbytes / QEMU_OP_BYTES) / span, 1)])
        start = point
    return out


def seq_figures(rec):
    """One run's throughput, request size, rates, queue and time at the caps."""
    r = rec['result']
    d = delta(r['before'], r['after'])
    secs = r['seconds']
    nbytes = d['read_sectors'] * 512.0
    reads = max(d['read_ios'], 1)
    win = seq_windows(r)
    covered = sum(w[0] for w in win) or None
    at_mib = sum(w[0] for w in win if w[1] >= AT_CAP * rec['cap_mib_s'])
    at_iops = sum(w[0] for w in win if w[2] >= AT_CAP * rec['cap_iops'])
    fig = {'read_ahead_kb': r['read_ahead_kb'], 'seconds': round(secs, 2),
           'mib_s': round(r['bytes'] / 1048576.0 / secs, 2), 'device_mib_s': round(nbytes / 1048576.0 / secs, 2),
           'request_kb': round(nbytes / 1024.0 / reads, 1), 'merges_per_read': round(d['read_merges'] / reads, 3),
           'device_iops': round(d['read_ios'] / secs, 1),
           'ops_s': round(max(d['read_ios'], nbytes / QEMU_OP_BYTES) / secs, 1),
           'queue_depth': round(d['time_in_queue'] / 1000.0 / secs, 2), 'read_ms': round(d['read_ticks'] / reads, 3),
           'at_mib_cap_s': round(at_mib, 1), 'at_iops_cap_s': round(at_iops, 1), 'windowed_s': round(covered or 0, 1),
           'at_mib_cap_share': round(at_mib / covered, 3) if covered else None,
           'at_iops_cap_share': round(at_iops / covered, 3) if covered else None,
           'max_sectors_kb': r.get('max_sectors_kb')}
    fig['bound'] = seq_bound(fig, rec)
    return fig


def seq_bound(fig, rec):
    """Which cap bound the run, by read_ahead_sweep's rule (90% of a cap over the run), or none."""
    bound = []
    if fig['device_mib_s'] >= AT_CAP * rec['cap_mib_s']:
        bound.append('throughput')
    if fig['ops_s'] >= AT_CAP * rec['cap_iops']:
        bound.append('iops')
    return '+'.join(bound) or 'none'


def seq_case(recs):
    """Medians over the rounds of one (caps, job, read-ahead) case."""
    rows = [seq_figures(rec) for rec in recs]
    first = recs[0]
    case = {'caps': first['caps'], 'job': first['result']['job'], 'read_ahead_kb': first['result']['read_ahead_kb'],
            'cap_iops': first['cap_iops'], 'cap_mib_s': first['cap_mib_s'], 'rounds': len(rows),
            'bytes': first['result']['bytes'], 'device': first['result']['device'],
            'bound': sorted(set(r['bound'] for r in rows)), 'runs': rows}
    for key in SEQ_METRICS:
        values = [r[key] for r in rows if r[key] is not None]
        case[key] = spread(values) if values else None
    return case


def seq_costs(cases):
    """Per caps and job: 32 KiB against the best of the larger values and against 128 KiB."""
    costs = []
    for caps, job in sorted(set((c['caps'], c['job']) for c in cases),
                            key=lambda k: (k[0] != 'gp3', k[0], list(SEQ_JOBS).index(k[1]))):
        by_kb = dict((c['read_ahead_kb'], c['mib_s']['median']) for c in cases if (c['caps'], c['job']) == (caps, job))
        if 32 not in by_kb or len(by_kb) < 2:
            continue
        best_kb = max((kb for kb in by_kb if kb != 32), key=lambda kb: by_kb[kb])
        cost = {'caps': caps, 'job': job, 'mib_s_32': by_kb[32], 'best_kb': best_kb, 'best_mib_s': by_kb[best_kb],
                'throughput_loss': round(1 - by_kb[32] / by_kb[best_kb], 3),
                'time_ratio': round(by_kb[best_kb] / by_kb[32], 3)}
        if 128 in by_kb:
            cost['mib_s_128'] = by_kb[128]
            cost['time_ratio_128'] = round(by_kb[128] / by_kb[32], 3)
        cost['over_limit'] = cost['time_ratio'] - 1 > SEQ_COST_LIMIT
        costs.append(cost)
    return costs


def summarize_seq(records):
    groups = {}
    for rec in records:
        groups.setdefault((rec['caps'], rec['result']['job'], rec['result']['read_ahead_kb']), []).append(rec)
    order = []
    for rec in records:
        if rec['caps'] not in order:
            order.append(rec['caps'])
    keys = sorted(groups, key=lambda k: (order.index(k[0]), list(SEQ_JOBS).index(k[1]), k[2]))
    cases = [seq_case(sorted(groups[k], key=lambda r: r['round'])) for k in keys]
    costs = seq_costs(cases)
    return {'cases': cases, 'costs': costs, 'caps_order': order, 'limit': SEQ_COST_LIMIT,
            'over_limit': any(c['over_limit'] for c in costs),
            'max_time_ratio': max([c['time_ratio'] for c in costs] or [None])}


def seq_collect(raw):
    """The sequential part of the caps section, from RAWDIR/seq (None when the run had none)."""
    paths = sorted(glob.glob(os.path.join(raw, 'seq', '*-*-*-*.json')))
    if not paths:
        return None
    records = [read_json(p) for p in paths]
    setup = read_json(os.path.join(raw, 'seq', 'setup.json'))
    throttles = {}
    for path in glob.glob(os.path.join(raw, 'seq', 'throttle-*.json')):
        throttles[os.path.basename(path)[len('throttle-'):-len('.json')]] = read_json(path)
    records.sort(key=lambda r: (r['caps'] != 'gp3', r['caps'], r['round'], r['result']['job'],
                                r['result']['read_ahead_kb']))
    return {'setup': setup, 'throttle': throttles, 'summary': summarize_seq(records), 'records': records}


def seq_caps_label(spec, iops, mib_s):
    if spec == 'gp3':
        return 'gp3 baseline: %s IOPS, %g MiB/s' % (thousands(iops), mib_s)
    if spec == 'seed':
        return 'provisioned (the seed\'s volume): %s IOPS, %g MiB/s' % (thousands(iops), mib_s)
    return 'provisioned (%s): %s IOPS, %g MiB/s' % (spec, thousands(iops), mib_s)


def seq_context(seq):
    """The numbers of the sequential readers' part of RESULTS.md."""
    s = seq['summary']
    caps = []
    for spec in s['caps_order']:
        case = next(c for c in s['cases'] if c['caps'] == spec)
        caps.append({'spec': spec, 'iops': case['cap_iops'], 'mib_s': case['cap_mib_s'],
                     'label': seq_caps_label(spec, case['cap_iops'], case['cap_mib_s']),
                     'ceiling_32': case['cap_iops'] * 32 / 1024.0})
    labels = dict((c['spec'], c['label']) for c in caps)
    costs = [dict(c, caps_label=labels[c['caps']], job_label=SEQ_JOBS[c['job']]) for c in s['costs']]
    first = dict((c['job'], c) for c in s['cases'])
    return {'s': s, 'caps': caps, 'labels': labels, 'costs': costs, 'jobs': SEQ_JOBS,
            'setup': seq['setup'], 'limit_pct': 100 * s['limit'],
            'tar': first.get('tar'), 'cp': first.get('cp'),
            'max_sectors_kb': sorted(set(r['max_sectors_kb'] for c in s['cases'] for r in c['runs']
                                         if r.get('max_sectors_kb')))}


# ---------------------------------------------------------------------------------------------
# Charts of the caps results (PNG, matplotlib's Agg backend: no display needed)

CHARTS = {'timeline': 'charts/caps-timeline.png', 'amplification': 'charts/caps-amplification-p99.png',
          'sequential': 'charts/caps-sequential.png', 'seq_readers': 'charts/caps-seq-readers.png'}
PHASE_STYLE = {'before': ('#c0392b', 'before: tuned preset'), 'after': ('#2471a3', 'after: aem_tuning role')}


def cmd_charts(args):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    caps = read_json(args.json).get('caps')
    if not caps:
        fail('%s has no "caps" section: run bench/caps.sh (make bench-caps) first' % args.json)
    summary = caps['summary']
    sub = 'QEMU-throttled NVMe (AEMOPS_VM_NVME_CAPS=%s), %s readers of random 8-16 KiB mmap reads; commit %s' % (
        caps['config']['nvme_caps'], caps['config']['readers'], caps['host'].get('git_commit', '?')[:10])
    if not os.path.isdir(args.outdir):
        os.makedirs(args.outdir)
    written = [chart_timeline(plt, caps, sub, args.outdir)]
    if summary.get('sweep'):
        written.append(chart_amplification(plt, summary, sub, args.outdir))
        written.append(chart_sequential(plt, summary, sub, args.outdir))
    if caps.get('sequential'):
        written.append(chart_seq_readers(plt, caps, args.outdir))
    print('charts: %s' % ' '.join(written))


def save_chart(plt, fig, sub, outdir, name):
    """The chart's footnote, its layout, and the PNG written as CHARTS[name] in outdir; returns its path."""
    fig.text(0.01, 0.01, sub, fontsize=7, color='#555555')
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = os.path.join(outdir, os.path.basename(CHARTS[name]))
    fig.savefig(path)
    plt.close(fig)
    return path


def chart_timeline(plt, caps, sub, outdir):
    """1. Device MiB/s over time, before and after; below it what those MiB/s carried (useful MiB/s)."""
    summary = caps['summary']
    cap = summary['mib_s_cap']
    fig, (ax, axb) = plt.subplots(2, 1, figsize=(9, 6.6), dpi=110, gridspec_kw={'height_ratios': [3, 1.15]})
    for phase in CAPS_PHASES:
        timeline_lines(ax, caps, phase)
    if cap:
        ax.axhline(cap, color='black', ls='--', lw=1.2, label='throughput cap %g MiB/s' % cap)
    ax.set_xlabel('seconds into the random phase (one line per round)')
    ax.set_ylabel('device read MiB/s')
    peak = [p[1] for rec in caps['records'] if rec['phase'] in CAPS_PHASES
            for p in rec['result']['results'][0].get('timeline') or []]
    ax.set_ylim(0, max([cap or 0, 1] + peak) * 1.25)
    ax.set_title('Device MiB/s under the cap: read-ahead 4096 KiB (before) vs 32 KiB (after)', fontsize=11)
    ax.legend(loc='lower left', fontsize=7.5)
    ax.grid(alpha=0.3)
    useful_bars(axb, summary, cap)
    return save_chart(plt, fig, sub, outdir, 'timeline')


def timeline_lines(ax, caps, phase):
    """One phase's rounds on the timeline: the raw samples of its first round, and each round's windows."""
    color, label = PHASE_STYLE[phase]
    recs = [r for r in caps['records'] if r['phase'] == phase]
    med = caps['summary']['phases'].get(phase) or {}
    for i, rec in enumerate(recs):
        r = rec['result']['results'][0]
        points = r.get('timeline') or []
        if not points:
            continue
        text = raw_text = None
        if i == 0:
            text = '%s, %d KiB: %s s windows (median %s reads/s, amplification %sx, p99 %s ms)' % (
                label, r['read_ahead_kb'], '%g' % WINDOW_S, fmt(med['reads_per_s']['median'], 0),
                fmt(med['read_amplification']['median'], 1), fmt(med['p99_ms']['median'], 1))
            raw_text = '%s, %g s samples' % (label.partition(':')[0], caps['config']['interval'])
        win = windows(points)
        if i == 0:
            ax.plot([0.0] + [p[0] for p in points], [points[0][1]] + [p[1] for p in points],
                    drawstyle='steps-pre', color=color, alpha=0.3, lw=0.8, label=raw_text)
        if win:
            ax.plot([0.0] + [p[0] for p in win], [win[0][1]] + [p[1] for p in win], drawstyle='steps-pre',
                    color=color, alpha=0.95 if i == 0 else 0.6, lw=2.0, label=text)


def useful_bars(axb, summary, cap):
    """Below the timeline: per phase, the device's median MiB/s and the useful part of it."""
    names, device, useful = [], [], []
    for phase in CAPS_PHASES:
        med = summary['phases'].get(phase)
        if med:
            names.append('%s\n%s KiB' % (phase, ', '.join(str(v) for v in med['read_ahead_kb'])))
            device.append(med['device_mib_s']['median'])
            useful.append(med['useful_mib_s']['median'])
    ys = list(range(len(names)))
    axb.barh(ys, device, color='#bbbbbb', label='device MiB/s (median)')
    axb.barh(ys, useful, color='#27ae60', label='useful MiB/s: the records asked for (median)')
    for y, d, u in zip(ys, device, useful):
        axb.text(d + 1, y, '%s of %s MiB/s useful (%s%%)' % (fmt(u, 2), fmt(d, 1), fmt(100.0 * u / d, 1)),
                 va='center', fontsize=8)
    axb.set_yticks(ys)
    axb.set_yticklabels(names, fontsize=8)
    axb.invert_yaxis()
    axb.set_xlim(0, max([cap or 0] + device) * 1.45)
    axb.set_xlabel('MiB/s over the random phase')
    axb.legend(loc='lower right', fontsize=7.5, ncol=2, bbox_to_anchor=(1.0, 1.0), frameon=False)
    axb.grid(alpha=0.3, axis='x')


def sweep_rows(summary):
    """The sweep's rows in ascending read-ahead, and their read-ahead values (the x axis)."""
    rows = sorted(summary['sweep']['rows'], key=lambda r: r['read_ahead_kb'])
    return rows, [r['read_ahead_kb'] for r in rows]


def log2_axis(ax, xs, recommended):
    """A read-ahead x axis: log 2, a tick at each value swept, the recommended value marked."""
    import matplotlib
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator
    ax.set_xscale('log', base=2)
    ax.xaxis.set_major_locator(FixedLocator(xs))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FixedFormatter([str(x) for x in xs]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel('read_ahead_kb')
    if recommended is not None:
        ax.axvline(recommended, color='#27ae60', ls=':', lw=1.5, label='recommended %s KiB' % recommended)


def chart_amplification(plt, summary, sub, outdir):
    """2. Amplification and p99 latency against read-ahead."""
    rows, xs = sweep_rows(summary)
    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=110)
    ax.plot(xs, [r['read_amplification'] for r in rows], 'o-', color='#c0392b', label='read amplification')
    ax.set_yscale('log')
    ax.set_ylabel('read amplification (device bytes / bytes asked), log', color='#c0392b')
    log2_axis(ax, xs, summary['sweep']['recommended_kb'])
    ax2 = ax.twinx()
    ax2.plot(xs, [r['p99_ms'] for r in rows], 's--', color='#2471a3', label='p99 latency')
    ax2.plot(xs, [r['p50_ms'] for r in rows], '^:', color='#5dade2', label='p50 latency')
    ax2.set_ylabel('latency ms', color='#2471a3')
    ax2.set_ylim(0, max(r['p99_ms'] for r in rows) * 1.15)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc='upper left', fontsize=8)
    ax.set_title('Random 8-16 KiB mmap reads: amplification and latency against read-ahead', fontsize=11)
    ax.grid(alpha=0.3)
    return save_chart(plt, fig, sub, outdir, 'amplification')


def chart_sequential(plt, summary, sub, outdir):
    """3. Sequential MiB/s against read-ahead (with random reads/s for the trade-off)."""
    rows, xs = sweep_rows(summary)
    cap = summary['mib_s_cap']
    cap_iops = (summary['sweep'] or {}).get('caps', {}).get('iops')
    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=110)
    ax.plot(xs, [r['seq_mib_s'] for r in rows], 'o-', color='#8e44ad', label='sequential MiB/s (cold read)')
    if cap:
        ax.axhline(cap, color='black', ls='--', lw=1.2, label='throughput cap %g MiB/s' % cap)
    ax.set_ylabel('sequential MiB/s', color='#8e44ad')
    ax.set_ylim(0, max([r['seq_mib_s'] or 0 for r in rows] + [cap or 0]) * 1.2)
    log2_axis(ax, xs, summary['sweep']['recommended_kb'])
    ax2 = ax.twinx()
    ax2.plot(xs, [r['reads_per_s'] for r in rows], 's--', color='#d35400', label='random reads/s')
    ax2.set_ylabel('random reads/s', color='#d35400')
    ax2.set_ylim(0, max(r['reads_per_s'] for r in rows) * 1.2)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc='center right', fontsize=8)
    ax.set_title('The trade-off: sequential MiB/s and random reads/s against read-ahead', fontsize=11)
    ax.grid(alpha=0.3)
    note = sub if cap_iops is None else '%s; caps %s IOPS, %g MiB/s' % (sub, cap_iops, cap)
    return save_chart(plt, fig, note, outdir, 'sequential')


SEQ_STYLE = {'tar': ('#8e44ad', 'o-'), 'cp': ('#16a085', 's--')}


def chart_seq_readers(plt, caps, outdir):
    """4. The sequential readers: MiB/s against read-ahead, one panel per caps, request KiB at each point."""
    seq = caps['sequential']['summary']
    specs = seq['caps_order']
    fig, axes = plt.subplots(1, len(specs), figsize=(4.8 * len(specs), 4.8), dpi=110, sharey=True, squeeze=False)
    top = max([c['cap_mib_s'] for c in seq['cases']] + [c['mib_s']['max'] for c in seq['cases']]) * 1.25
    for ax, spec in zip(axes[0], specs):
        cases = [c for c in seq['cases'] if c['caps'] == spec]
        for job, (color, style) in SEQ_STYLE.items():
            rows = sorted((c for c in cases if c['job'] == job), key=lambda c: c['read_ahead_kb'])
            if not rows:
                continue
            xs = [c['read_ahead_kb'] for c in rows]
            ax.plot(xs, [c['mib_s']['median'] for c in rows], style, color=color, label=SEQ_JOBS[job])
            for c in rows:
                ax.annotate('%s KiB' % fmt(c['request_kb']['median'], 0), (c['read_ahead_kb'], c['mib_s']['median']),
                            textcoords='offset points', xytext=(0, -13 if job == 'tar' else 7), ha='center',
                            fontsize=7, color=color)
        log2_axis(ax, sorted(set(c['read_ahead_kb'] for c in cases)), None)
        cap = cases[0]
        ax.axhline(cap['cap_mib_s'], color='black', ls='--', lw=1.2, label='throughput cap %g MiB/s' % cap['cap_mib_s'])
        ax.axhline(cap['cap_iops'] * 32 / 1024.0, color='#c0392b', ls=':', lw=1.2,
                   label='IOPS cap x 32 KiB requests: %s MiB/s' % fmt(cap['cap_iops'] * 32 / 1024.0, 1))
        ax.set_title(seq_caps_label(spec, cap['cap_iops'], cap['cap_mib_s']), fontsize=9.5)
        ax.set_ylim(0, top)
        ax.grid(alpha=0.3)
        ax.legend(loc='lower right', fontsize=7)
    axes[0][0].set_ylabel('job MiB/s (median of rounds; labels: device KiB per read)')
    fig.suptitle('Sequential readers under QEMU-throttled NVMe: a cold tar and cp against read-ahead', fontsize=11)
    sub = 'cold page cache; tar -cf /dev/zero of the segment store (10 KiB reads), cp FILE /dev/null (128 KiB reads); ' \
          'commit %s' % caps['host'].get('git_commit', '?')[:10]
    return save_chart(plt, fig, sub, outdir, 'seq_readers')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest='command')
    sub.required = True
    p = sub.add_parser('probe-record')
    p.add_argument('--label', required=True)
    p.add_argument('--read-ahead', type=int, required=True)
    p.add_argument('--round', required=True)
    p.add_argument('--seed', type=int, required=True)
    p.add_argument('--load', required=True)
    p.add_argument('--out', required=True)
    p.set_defaults(func=cmd_probe_record)
    p = sub.add_parser('cost-record')
    p.add_argument('--kind', required=True, choices=sorted(KIND_LABELS))
    p.add_argument('--round', type=int, required=True)
    p.add_argument('--start', type=float, required=True)
    p.add_argument('--end', type=float, required=True)
    p.add_argument('--rc', type=int, required=True)
    p.add_argument('--load', required=True)
    p.add_argument('--tasks')
    p.add_argument('--guest')
    p.add_argument('--out', required=True)
    p.set_defaults(func=cmd_cost_record)
    p = sub.add_parser('brief')
    p.add_argument('files', nargs='+')
    p.set_defaults(func=cmd_brief)
    p = sub.add_parser('collect')
    p.add_argument('raw')
    p.add_argument('out')
    p.set_defaults(func=cmd_collect)
    p = sub.add_parser('render')
    p.add_argument('json')
    p.add_argument('md')
    p.set_defaults(func=cmd_render)
    p = sub.add_parser('caps-record')
    p.add_argument('--phase', required=True, choices=list(CAPS_PHASES) + ['sweep'])
    p.add_argument('--round', type=int, required=True)
    p.add_argument('--load', required=True)
    p.add_argument('--load-after', required=True)
    p.add_argument('--out', required=True)
    p.set_defaults(func=cmd_caps_record)
    p = sub.add_parser('seq-record')
    p.add_argument('--caps', required=True)
    p.add_argument('--round', type=int, required=True)
    p.add_argument('--load', required=True)
    p.add_argument('--load-after', required=True)
    p.add_argument('--out', required=True)
    p.set_defaults(func=cmd_seq_record)
    p = sub.add_parser('caps-collect')
    p.add_argument('raw')
    p.add_argument('out')
    p.set_defaults(func=cmd_caps_collect)
    p = sub.add_parser('charts')
    p.add_argument('json')
    p.add_argument('outdir')
    p.set_defaults(func=cmd_charts)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == '__main__':
    main()
