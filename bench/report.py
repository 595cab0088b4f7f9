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
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import glob
import io
import json
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
        if 'result' in rec:
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
    write_json(args.out, doc)


# ---------------------------------------------------------------------------------------------
# Render: the numbers are computed here; bench/RESULTS.md.j2 only lays them out.

TEMPLATE = 'RESULTS.md.j2'


def fmt(value, digits=1):
    return '%.*f' % (digits, value)


def fmt_ms(value):
    return fmt(value, 3 if value < 1 else 2)


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
    }


def render(doc):
    import jinja2  # the controller venv has it (ansible-core depends on it)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.dirname(os.path.abspath(__file__))),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, autoescape=False)
    env.filters.update({'f': fmt, 'ms': fmt_ms, 'thousands': thousands})
    return env.get_template(TEMPLATE).render(**render_context(doc))


def cmd_render(args):
    text = render(read_json(args.json))
    with io.open(args.md, 'w', encoding='utf-8') as f:
        f.write(text)


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
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == '__main__':
    main()
