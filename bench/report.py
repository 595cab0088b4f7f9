# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Records, collects and renders the measurements of ``make bench`` (bench/run.sh).

Subcommands (run with the controller venv's Python):

  probe-record --label L --read-ahead KB --round R --seed S --load X --out F < ansible-output
      The result of one ``ansible -m aemops.os_tuning.io_probe`` run, with its metadata, as JSON.
      Fails when the probe failed or found another read-ahead than KB.
  cost-record --kind K --round R --start T0 --end T1 --rc RC --load X --out F < playbook-log
      Wall time and the PLAY RECAP counts of one ansible-playbook run, and the tasks that changed.
  brief FILE...                       one line per record, for the progress log
  collect RAWDIR OUT.json             every record and the environment in one JSON document
  render IN.json OUT.md               bench/RESULTS.md from that document
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


def cmd_cost_record(args):
    counts, changed_tasks = parse_playbook_log(sys.stdin.read())
    record = {'kind': args.kind, 'round': args.round, 'first_run': args.round == 0, 'rc': args.rc,
              'wall_s': round(args.end - args.start, 2), 'host_load': args.load, 'recap': counts,
              'changed_tasks': changed_tasks}
    if counts:
        # "ok" counts every task that ran and did not fail, changed ones included; "failed" the others.
        record['executed_tasks'] = counts.get('ok', 0) + counts.get('failed', 0)
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
            parts.append('%.1f s, %s tasks executed, changed=%s, rc=%s, host load %s'
                         % (rec['wall_s'], rec.get('executed_tasks'), recap.get('changed'), rec['rc'],
                            rec['host_load']))
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
                          'changed': first[0]['recap'].get('changed', 0)} if first else None,
        }
    if 'role' in summary and 'manual' in summary:
        summary['ratio_role_to_manual'] = {
            'wall_s': round(summary['role']['wall_s']['median'] / summary['manual']['wall_s']['median'], 2),
            'executed_tasks': round(summary['role']['executed_tasks']['median']
                                    / summary['manual']['executed_tasks']['median'], 2),
        }
    return summary


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
# Render

def fmt(value, digits=1):
    return '%.*f' % (digits, value)


def fmt_ms(value):
    return fmt(value, 3 if value < 1 else 2)


def effect_table(doc):
    lines = ['| device | read-ahead KiB | reads per run | amplification (median) | spread (min-max) '
             '| page cache x (median) | device MiB per read | p50 ms | p99 ms | noisy runs |',
             '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for row in doc['effect']['summary']:
        amp = row['read_amplification']
        reads = '/'.join(str(n) for n in row['reads'])
        if row['reads_capped']:
            reads += ' (capped from %d)' % row['reads_requested']
        lines.append('| %s `%s` | %d (%s) | %s | **%sx** | %sx-%sx | %sx | %s | %s (%s-%s) | %s (%s-%s) | %d/%d |' % (
            DEVICE_LABELS.get(row['label'], row['label']), row['device'], row['read_ahead_kb'],
            READ_AHEAD_NOTES.get(row['read_ahead_kb'], ''), reads, fmt(amp['median']), fmt(amp['min']),
            fmt(amp['max']), fmt(row['page_cache_amplification']['median']),
            fmt(row['device_mib_per_read']['median'], 3),
            fmt_ms(row['p50_ms']['median']), fmt_ms(row['p50_ms']['min']), fmt_ms(row['p50_ms']['max']),
            fmt_ms(row['p99_ms']['median']), fmt_ms(row['p99_ms']['min']), fmt_ms(row['p99_ms']['max']),
            row['noisy_runs'], row['runs']))
    lines.append('| physical limit (any device) | - | - | **1.0x** | - | 1.0x | %s | - | - | - |'
                 % fmt(doc['config']['record_kb'] / 1024.0, 3))
    return lines


def cost_table(doc):
    summary = doc['cost']['summary']
    lines = ['| playbook | repeat runs | tasks executed (ok+failed) | skipped | changed | wall time s (median) '
             '| spread s (min-max) | s per task | host load | first run: s / tasks / changed |',
             '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for kind in ('role', 'manual'):
        s = summary.get(kind)
        if not s:
            continue
        first = s['first_run']
        lines.append('| %s | %d | %s | %s | %s | **%s** | %s-%s | %s | %s | %s |' % (
            KIND_LABELS[kind], s['repeat_runs'], fmt(s['executed_tasks']['median'], 0),
            fmt(s['skipped_tasks']['median'], 0), fmt(s['changed_tasks']['median'], 0),
            fmt(s['wall_s']['median']), fmt(s['wall_s']['min']), fmt(s['wall_s']['max']),
            fmt(s['wall_s']['median'] / s['executed_tasks']['median']), fmt(s['host_load']['median'], 2),
            '%s / %d / %d' % (fmt(first['wall_s']), first['executed_tasks'], first['changed']) if first else '-'))
    ratio = summary.get('ratio_role_to_manual')
    if ratio:
        lines.append('| **ratio role / manual** | | **%.2f** | | | **%.2f** | | | | |'
                     % (ratio['executed_tasks'], ratio['wall_s']))
    return lines


def row_for(doc, label, ra):
    for row in doc['effect']['summary']:
        if row['label'] == label and row['read_ahead_kb'] == ra:
            return row
    return None


def headline(doc):
    lines = []
    for label in DEVICE_LABELS:
        a, b, c = (row_for(doc, label, ra) for ra in (4096, 128, 32))
        if a and c:
            lines.append('- %s: read amplification %sx at 4096 KiB, %sx at 128 KiB, %sx at 32 KiB (limit 1.0x); '
                         'p99 %s ms -> %s ms -> %s ms.'
                         % (DEVICE_LABELS[label], fmt(a['read_amplification']['median']),
                            fmt(b['read_amplification']['median']) if b else '-',
                            fmt(c['read_amplification']['median']), fmt_ms(a['p99_ms']['median']),
                            fmt_ms(b['p99_ms']['median']) if b else '-', fmt_ms(c['p99_ms']['median'])))
    ratio = doc['cost']['summary'].get('ratio_role_to_manual')
    if ratio:
        s = doc['cost']['summary']
        lines.append('- Cost of a repeat run: the role %s s for %s tasks, the manual playbook %s s for %s tasks: '
                     'ratio %.2f in wall time, %.2f in tasks.'
                     % (fmt(s['role']['wall_s']['median']), fmt(s['role']['executed_tasks']['median'], 0),
                        fmt(s['manual']['wall_s']['median']), fmt(s['manual']['executed_tasks']['median'], 0),
                        ratio['wall_s'], ratio['executed_tasks']))
    return lines


def notes(doc):
    cfg = doc['config']
    vm = doc['vm']
    out = []
    accel = doc['host']['accel'].upper()
    out.append('- **What is emulated.** QEMU (%s) emulates the NVMe controller and the virtio disk; both are qcow2 '
               'overlays (`%s`) on the host\'s %s file system, with the host\'s page cache beneath them. A device '
               'read in the guest is a read of a file on the host, usually served from the host\'s RAM (the probe '
               'has just written its scratch file), through an emulator running under %s. Absolute latencies are '
               'therefore not those of EBS on EC2, where every I/O crosses the network (AWS quotes single-digit '
               'milliseconds for gp3) and each volume has a throughput and IOPS cap that amplified reads use up; '
               'compare the rows with each other, not with production.'
               % (accel, doc['host']['disk_cache'], doc['host']['overlay_fs'], accel))
    out.append('- **What the amplification counts.** Bytes the governing block device (`%s`, `%s`) read during the '
               'reads, from `/sys/block/<dev>/stat`, divided by the bytes asked for (reads x %d KiB). It does not '
               'depend on the emulation: it is what the guest kernel asks the disk for, and it is what would use up '
               'an EBS volume\'s throughput. The page-cache column (pages of the scratch file resident afterwards, '
               'by mincore) is a noise-free cross-check; "noisy" marks runs where other I/O on the device was more '
               'than 10%% of the figure.' % (vm.get('nvme_dev'), vm.get('lv_dev'), cfg['record_kb']))
    out.append('- **Reading the effect table.** A page fault in a memory-mapped file makes the kernel read one '
               'read-ahead window around the faulting page, so the expected amplification of an isolated %d KiB '
               'read is about read-ahead / record: %s. The measured values sit a little below that, because windows '
               'overlap and the ends of the file clip them. %s' % (
                   cfg['record_kb'], ', '.join('%dx at %d KiB' % (ra // cfg['record_kb'], ra)
                                               for ra in cfg['read_aheads_kb']), gp3_note(doc)))
    diff = device_difference(doc)
    if diff:
        out.append(diff)
    out.append('- **Sparse cap.** io_probe keeps reads x max(read-ahead, record) within 25%% of its %d MiB scratch '
               'file, so at 4096 KiB each run makes only %s reads and at 128 KiB %s (of %d requested); at 4096 KiB '
               'the p99 is therefore close to the maximum of the run. Every value runs in each of the %d rounds, the order of the '
               'values rotated between rounds; one seed per round (4242, 4243, ...), the same for every device and '
               'value.' % (cfg['size_mb'], reads_at(doc, 4096), reads_at(doc, 128), cfg['reads'], cfg['runs']))
    out.append('- **How read-ahead was held.** For the effect tables tuned was stopped (`systemctl stop tuned`, which '
               'rolls its settings back) and each value was written to `/sys/block/<dev>/queue/read_ahead_kb` '
               'before the probe; io_probe reads the value back and the run fails if it differs. 4096 is the value '
               'tuned %s sets in the preset (`throughput-performance`, `readahead=>4096`), written by hand here. '
               'Then tuned was started again, the preset\'s 4096 KiB checked, and the role applied.'
               % vm.get('tuned', '?'))
    cross = doc['effect'].get('role_crosscheck') or []
    if cross:
        out.append('- **After the role.** With tuned running the role\'s child profile, one probe per device at '
                   'the value the role left (seed 4242, as in round 1): %s.' % '; '.join(
                       '%s `%s` read_ahead_kb=%d: %sx, p50 %s ms, p99 %s ms' % (
                           DEVICE_LABELS.get(p['label'], p['label']), p['result']['device'],
                           p['result']['read_ahead_kb'], fmt(p['result']['read_amplification']),
                           fmt_ms(p['result']['latency']['p50_ms']), fmt_ms(p['result']['latency']['p99_ms']))
                       for p in cross))
    out.append('- **Cost.** Wall time of `ansible-playbook` on the controller, from start to exit; tasks executed '
               'from the PLAY RECAP (ok + failed: `ok` includes the changed ones; skipped tasks listed apart). '
               'Both playbooks use gather_facts: false (the role gathers the minimal subset it needs), SSH '
               'pipelining, and the same VM, one after the other: first the role (a first run, then %d repeat '
               'runs), then the manual playbook (the same). Tasks are not equal units: a module run in the guest '
               'costs seconds under TCG (Python starts on an emulated CPU), once per loop item (the manual '
               'playbook loops over 3 devices and 2 THP files), while set_fact, assert and debug, and the role\'s '
               'report tasks delegated to the controller, cost little; hence the different seconds per task, and '
               'wall time is the ratio that counts. The manual playbook reads its values back and asserts them, '
               'as the role verifies; it does not do what the role does beyond that (facts and the snapshot '
               'before, tuned-adm verify, rules matched by stable ids, LVM metadata, conflict checks, the report).'
               % cfg['runs'])
    role = doc['cost']['summary'].get('role')
    manual = doc['cost']['summary'].get('manual')
    if role and manual:
        hi, lo = max(role['host_load']['median'], manual['host_load']['median']), \
            min(role['host_load']['median'], manual['host_load']['median'])
        if lo > 0 and hi / lo > 1.2:
            out.append('- **Load during the cost runs differed:** the host\'s load average was %s (median) at the '
                       'start of the role\'s repeat runs and %s at the manual playbook\'s. Both run in the same '
                       'emulated guest, so the more loaded side is slowed down; the wall-time ratio carries that '
                       'error (the task counts do not).'
                       % (fmt(role['host_load']['median'], 2), fmt(manual['host_load']['median'], 2)))
    if role and role['changed_tasks']['max'] > 0:
        out.append('- **The role\'s repeat runs were not no-change runs:** changed=%s (median) in the repeat runs, '
                   'from the tasks: %s. Their wall time includes that work (rewriting the tuned profile and '
                   're-activating it), so the ratio is higher than it would be for an idempotent run.'
                   % (fmt(role['changed_tasks']['median'], 0),
                      ', '.join('"%s"' % t for t in role['changed_task_names'])))
    if manual and manual['changed_tasks']['max'] > 0:
        out.append('- The manual playbook\'s repeat runs reported changes (changed=%s, tasks: %s).'
                   % (fmt(manual['changed_tasks']['median'], 0),
                      ', '.join('"%s"' % t for t in manual['changed_task_names'])))
    load = doc.get('host_load_1min')
    if load:
        out.append('- **Noise.** The host has %s cores and ran other VMs and tests at the same time: its 1-minute '
                   'load average was %s-%s (median %s) at the start of the measurements. Medians of %d runs are '
                   'reported with their min-max spread; every run is in `bench/results.json`.'
                   % (doc['host']['host_cpus'], fmt(load['min'], 2), fmt(load['max'], 2), fmt(load['median'], 2),
                      cfg['runs']))
    return out


def gp3_note(doc):
    """What the measured device MiB per read means for a volume's throughput cap (arithmetic, not measured)."""
    parts = []
    for ra in doc['config']['read_aheads_kb']:
        rows = [r for r in doc['effect']['summary'] if r['read_ahead_kb'] == ra]
        if rows:
            per_read = max(r['device_mib_per_read']['median'] for r in rows)
            parts.append('%s faults/s at %d KiB (%s MiB per read)'
                         % ('{:,}'.format(int(GP3_MIB_S / per_read)), ra, fmt(per_read, 3)))
    if not parts:
        return ''
    return ('For scale (arithmetic, not measured): an EBS gp3 volume has a baseline of %d MiB/s and %s IOPS; at the '
            'device MiB per read measured here (the larger of the two devices) its throughput allows about %s. '
            'Where that is above %s, the IOPS cap binds first.'
            % (GP3_MIB_S, '{:,}'.format(GP3_IOPS), ', '.join(parts), '{:,}'.format(GP3_IOPS)))


def device_difference(doc):
    """A note when the two devices differ at the same read-ahead by more than their spread."""
    notes_ = []
    for ra in doc['config']['read_aheads_kb']:
        a, b = row_for(doc, 'nvme', ra), row_for(doc, 'lv', ra)
        if not a or not b:
            continue
        amp_a, amp_b = a['read_amplification'], b['read_amplification']
        if amp_a['max'] < amp_b['min'] or amp_b['max'] < amp_a['min']:
            notes_.append('%d KiB (NVMe %sx, LV %sx)' % (ra, fmt(amp_a['median']), fmt(amp_b['median'])))
    if not notes_:
        return None
    return ('- **The two devices differ** at %s, in every run. Their file systems differ (%s on the NVMe disk, '
            '%s on the LV; the kernel\'s page cache handles them differently, for example XFS uses large folios on '
            'Linux 6.1 and ext4 does not); the bench does not isolate the cause.'
            % (', '.join(notes_), doc['vm'].get('nvme_fs'), doc['vm'].get('lv_fs')))


def reproduce_args(cfg):
    changed = ['BENCH_%s=%d' % (key.upper(), cfg[key]) for key in ('runs', 'size_mb', 'reads') if cfg[key] != DEFAULTS[key]]
    return ' with %s' % ' '.join(changed) if changed else ''


def reads_at(doc, ra):
    values = set()
    for row in doc['effect']['summary']:
        if row['read_ahead_kb'] == ra:
            values.update(row['reads'])
    return '/'.join(str(v) for v in sorted(values)) or '-'


def cmd_render(args):
    doc = read_json(args.json)
    cfg, vm, host = doc['config'], doc['vm'], doc['host']
    minutes, seconds = divmod(doc['duration_s'], 60)
    lines = [
        '# make bench: results',
        '',
        'Measured %s by `make bench` (`bench/run.sh`, %d min %d s). Every number below is computed from '
        '`bench/results.json`, which holds each run\'s raw module and playbook results.' % (doc['started'], minutes, seconds),
        '',
        '## Headline',
        '',
    ] + headline(doc) + [
        '',
        '## Setup',
        '',
        '| | |',
        '|---|---|',
        '| date | %s |' % doc['started'],
        '| reproduce | `make bench` (`bench/run.sh`)%s |' % reproduce_args(cfg),
        '| VM | QEMU %s, %s (%s), %s vCPUs (%s), %s MiB RAM |' % (
            host['qemu'], host['accel'].upper(), 'software emulation, no KVM' if host['accel'] == 'tcg' else 'KVM',
            vm['cpus'], vm['cpu_model'], vm['mem_mib']),
        '| guest | %s, kernel %s, tuned %s (profile `%s`), THP at start `%s` |' % (
            vm['os'], vm['kernel'], vm['tuned'], vm['tuned_profile'], vm['thp']),
        '| NVMe data disk | `%s`: QEMU NVMe controller (model "%s", serial %s), %s MiB, %s made by the bench, '
        'mounted at /srv/nvme-probe |' % (vm['nvme_dev'], vm['nvme_model'], vm['nvme_serial'], vm['nvme_size_mib'],
                                          vm['nvme_fs']),
        '| LV | `%s` = %s on virtio-blk `%s`, %s MiB, %s, the AEM repository /srv/aem/crx-quickstart/repository |' % (
            vm['lv_dev'], vm['lv_name'], vm['lv_slaves'], vm['lv_size_mib'], vm['lv_fs']),
        '| disk backing | qcow2 overlays, `%s`, on the host\'s %s |' % (host['disk_cache'], host['overlay_fs']),
        '| checkout | %s |' % host.get('git_commit', 'not recorded'),
        '| host | %s cores (%s), %s MiB, kernel %s, ansible-core %s |' % (
            host['host_cpus'], host['host_cpu_model'], host['host_mem_mib'], host['host_kernel'], host['ansible']),
        '| probe | `ansible -m aemops.os_tuning.io_probe`: method mmap, %d KiB records at random offsets, %d MiB '
        'scratch file, %d reads requested, %d runs per row |' % (cfg['record_kb'], cfg['size_mb'], cfg['reads'],
                                                                 cfg['runs']),
        '',
        '## Effect: random %d KiB reads through mmap' % cfg['record_kb'],
        '',
        'Medians of %d runs; p50 and p99 are the medians of the runs\' percentiles, with their min-max in '
        'parentheses.' % cfg['runs'],
        '',
    ] + effect_table(doc) + [
        '',
        '## Cost: a repeat run of the role against the manual playbook',
        '',
        'Repeat runs on the same VM after a first run that applied the settings; medians of %d runs.' % cfg['runs'],
        '',
    ] + cost_table(doc) + [
        '',
        '## Notes',
        '',
    ] + notes(doc) + ['']
    with io.open(args.md, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines))


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
