# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make bench-fleet: the controller's cost of an audit of N hosts, this tree against a baseline.

Each run is ``playbooks/migrate-aem.yml --tags pre -e aem_tuning_mode=audit`` against N inventory
aliases of this machine (connection local, forks 20), with the file reports on (the CLI default),
as an operator audits a fleet from one controller. The baseline is the same playbook and role of
an earlier commit (default 1e379f6, the role before issue 23: reports written by 4-5 delegated
tasks per host), exported with ``git archive``. The runs alternate baseline and tree at each N,
so that the machine's load affects both alike.

Measured per run:
- wall time, and time per host (wall / N);
- CPU time of ansible-playbook and everything under it (getrusage of the reaped children), per
  host: on a shared machine the load moves the wall time, much less the CPU time;
- task results per host, and the controller-side ones: tasks delegated to a local connection,
  per host (run_once tasks counted apart, once per play), from the task callback that make bench
  uses (bench/callback_plugins/aemops_bench_count.py);
- the controller's peak memory: the largest sum of the resident sets of ansible-playbook and
  every process under it (its forks and their module processes), sampled every 0.2 s;
- the exit code and the failed tasks (the audit of an untuned host fails on its verdict);
- the size of the run's set_stats artifact as JSON (``aem_tuning_result``, one key per host: what
  AAP stores and hands to the next workflow node as extra variables), and each host's result in it.
  The summary gives it at 50, 200 and 1,000 hosts: measured where a run of this tree had that many
  hosts, else computed from the least-squares line (bytes = fixed + per host x N) over the measured
  runs, and says which.

A third variant, the control, is ansible-core alone on the same inventory: one play that gathers
the min subset, as migrate-aem.yml's pre play does, then debug tasks, as many as make its task
results per host equal this tree's (counted at the first size, where the tree runs before it), and
no role. What the engine itself adds per
host as N grows (its per-task work over every host of the play) shows there, and the summary
gives this tree's growth with the control's taken out.

The growth fits are least-squares lines of wall and CPU time over N: seconds per host and a fixed part.
Writes the runs and their summary into bench/results.json as "fleet" (beside make bench's own
parts), renders bench/RESULTS.md (bench/report.py render) and draws bench/charts/fleet.png. Each
run's inventory, ansible output and task records stay in bench/raw/fleet (not committed).

usage: python bench/fleet.py [--sizes 50,200] [--forks 20] [--baseline REF] [--baseline-sizes 50]
                             [--no-control] [--raw DIR] [--no-render]
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import datetime
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
HOST_PYTHON = '/usr/bin/python3'
DEFAULT_BASELINE = '1e379f6'
# Issue 23's goals: at most one controller-side task per host beyond the run_once steps, and a
# time per host that does not grow with N (here: within this share from the smallest N to the largest).
GOAL_TASKS_PER_HOST = 1
GOAL_GROWTH = 0.10
VARIANTS = ('baseline', 'tree', 'control')
# The fleet sizes the set_stats artifact is given at (issue 34): measured, or computed from the measured sizes.
ARTIFACT_SIZES = (50, 200, 1000)


def fail(msg):
    sys.stderr.write('bench/fleet.py: %s\n' % msg)
    sys.exit(1)


def git(*args):
    return subprocess.check_output(('git', '-C', TOP) + args, universal_newlines=True).strip()


def export_tree(ref, dest):
    """The collection at REF, unpacked from git archive by tar (no worktree left behind)."""
    os.makedirs(dest)
    archive = subprocess.Popen(['git', '-C', TOP, 'archive', '--format=tar', ref], stdout=subprocess.PIPE)
    subprocess.check_call(['tar', '-x', '-C', dest], stdin=archive.stdout)
    archive.stdout.close()
    if archive.wait() != 0:
        fail('git archive %s failed' % ref)
    return dest


def tree_rss_kib(root_pid):
    """The summed VmRSS of root_pid and every process under it (read from /proc)."""
    children = {}
    rss = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/status' % name) as f:
                ppid = kib = None
                for line in f:
                    if line.startswith('PPid:'):
                        ppid = int(line.split()[1])
                    elif line.startswith('VmRSS:'):
                        kib = int(line.split()[1])
        except (IOError, OSError, ValueError):
            continue
        pid = int(name)
        rss[pid] = kib or 0
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def control_playbook(path, count):
    """ansible-core alone: the pre play's fact gathering, then ``count`` debug tasks, no role."""
    tasks = ''.join('    - name: Control task %d\n      ansible.builtin.debug:\n        msg: "{{ inventory_hostname }}"\n'
                    % (i + 1) for i in range(count))
    with open(path, 'w') as f:
        f.write('---\n- name: Control - ansible-core alone, as many task results per host as the audit\n'
                '  hosts: aem\n  gather_facts: true\n  gather_subset: [min]\n  tasks:\n' + tasks)
    return path


def run_once_audit(tree, rundir, hosts, forks, ansible_playbook, control_tasks=None):
    """One run: migrate-aem.yml's audit of ``tree``, or with ``control_tasks`` the control playbook."""
    os.makedirs(os.path.join(rundir, 'collections', 'ansible_collections', 'aemops'))
    os.symlink(tree, os.path.join(rundir, 'collections', 'ansible_collections', 'aemops', 'os_tuning'))
    repo = os.path.join(rundir, 'repo')
    os.makedirs(repo)
    inventory = os.path.join(rundir, 'hosts.json')
    with open(inventory, 'w') as f:
        json.dump({'aem': {'hosts': dict((h, {}) for h in hosts), 'vars': {
            'ansible_connection': 'local', 'ansible_python_interpreter': HOST_PYTHON,
            'ansible_become': False, 'aem_tuning_paths': [repo]}}}, f, indent=1)
    count = os.path.join(rundir, 'count.jsonl')
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith('ANSIBLE_'))
    env.update({
        'ANSIBLE_COLLECTIONS_PATH': os.path.join(rundir, 'collections'),
        'ANSIBLE_CALLBACK_PLUGINS': os.path.join(HERE, 'callback_plugins'),
        'ANSIBLE_CALLBACKS_ENABLED': 'aemops_bench_count',
        'BENCH_COUNT_OUT': count,
        'BENCH_ARTIFACT_OUT': os.path.join(rundir, 'artifact.json'),
        'ANSIBLE_LOCAL_TEMP': os.path.join(rundir, 'tmp', 'local'),
        'ANSIBLE_REMOTE_TEMP': os.path.join(rundir, 'tmp', 'remote'),
        'ANSIBLE_HOME': os.path.join(rundir, 'tmp', 'home'),
        'ANSIBLE_RETRY_FILES_ENABLED': 'False',
        'ANSIBLE_NOCOLOR': 'True',
        'TMPDIR': os.path.join(rundir, 'tmp'),
    })
    os.makedirs(os.path.join(rundir, 'tmp'))
    if control_tasks is not None:
        argv = [ansible_playbook, '-i', inventory, control_playbook(os.path.join(rundir, 'control.yml'), control_tasks),
                '-f', str(forks)]
    else:
        argv = [ansible_playbook, '-i', inventory, os.path.join(tree, 'playbooks', 'migrate-aem.yml'),
                '--tags', 'pre', '-f', str(forks), '-e', 'aem_tuning_mode=audit',
                '-e', 'aem_tuning_report_dir=' + os.path.join(rundir, 'reports')]
    peak = [0]
    with open(os.path.join(rundir, 'ansible.log'), 'w') as log:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.time()
        proc = subprocess.Popen(argv, cwd=rundir, env=env, stdout=log, stderr=subprocess.STDOUT)
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], tree_rss_kib(proc.pid))
                done.wait(0.2)
        sampler = threading.Thread(target=sample)
        sampler.start()
        rc = proc.wait()
        wall = time.time() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        done.set()
        sampler.join()
    # ansible-playbook reaps its forks and they their module processes: all of it is in the delta.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, wall, cpu, peak[0], count


def count_tasks(path, hosts):
    records = []
    with open(path) as f:
        for line in f:
            records.append(json.loads(line))
    top = [r for r in records if not r['item']]
    per_host = [r for r in top if not r.get('run_once') and r['status'] != 'skipped']
    delegated = [r for r in per_host if r['delegated_local']]
    once = set(r['task'] for r in top if r.get('run_once') and r['status'] != 'skipped')
    failed = sorted(set(r['task'] for r in top if r['status'] == 'failed'))
    return {
        'task_results_per_host': round(len(per_host) / float(len(hosts)), 2),
        'controller_tasks_per_host': round(len(delegated) / float(len(hosts)), 2),
        'controller_tasks': sorted(set(r['task'] for r in delegated)),
        'run_once_tasks': sorted(once),
        'failed_tasks': failed,
        'hosts_seen': len(set(r['host'] for r in per_host)),
    }


def fit(points):
    """Least squares wall = a + b * n over (n, wall) points: (a, b)."""
    n = float(len(points))
    sx = sum(p[0] for p in points)
    sy = sum(p[1] for p in points)
    sxx = sum(p[0] * p[0] for p in points)
    sxy = sum(p[0] * p[1] for p in points)
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return (sy - b * sx) / n, b


def growth(rows):
    """Fits and growth from the smallest to the largest N of one variant's runs (None with one N)."""
    rows = sorted(rows, key=lambda r: r['hosts'])
    out = {'sizes': [r['hosts'] for r in rows],
           'controller_tasks_per_host': max(r['controller_tasks_per_host'] for r in rows)}
    if len(rows) < 2:
        return dict(out, fit_fixed_s=None, fit_per_host_s=None, fit_cpu_fixed_s=None, fit_cpu_per_host_s=None,
                    per_host_growth=None, cpu_per_host_growth=None)
    fixed, per_host = fit([(r['hosts'], r['wall_s']) for r in rows])
    cpu_fixed, cpu_per_host = fit([(r['hosts'], r['cpu_s']) for r in rows])
    first, last = rows[0], rows[-1]
    return dict(out, fit_fixed_s=round(fixed, 2), fit_per_host_s=round(per_host, 3),
                fit_cpu_fixed_s=round(cpu_fixed, 2), fit_cpu_per_host_s=round(cpu_per_host, 3),
                per_host_growth=round(last['per_host_s'] / first['per_host_s'] - 1, 3),
                cpu_per_host_growth=round(last['cpu_per_host_s'] / first['cpu_per_host_s'] - 1, 3))


def summarize(runs, sizes):
    out = dict((variant, growth([r for r in runs if r['variant'] == variant]))
               for variant in VARIANTS if any(r['variant'] == variant for r in runs))
    tree = out['tree']
    out['tree_beyond_control'] = beyond_control(runs)
    out['artifact'] = artifact([r for r in runs if r['variant'] == 'tree' and r.get('artifact_bytes') is not None])
    out['ratio_tree_to_baseline'] = dict(
        ('%d' % n, {
            'wall_s': round(t['wall_s'] / b['wall_s'], 2),
            'cpu_s': round(t['cpu_s'] / b['cpu_s'], 2),
            'peak_rss_mib': round(t['peak_rss_mib'] / b['peak_rss_mib'], 2),
            'controller_tasks_per_host': (round(t['controller_tasks_per_host'] / b['controller_tasks_per_host'], 2)
                                          if b['controller_tasks_per_host'] else None),
        })
        for n in sizes
        for t in [r for r in runs if r['variant'] == 'tree' and r['hosts'] == n]
        for b in [r for r in runs if r['variant'] == 'baseline' and r['hosts'] == n])
    out['goals'] = [
        {'what': 'controller-side tasks per host beyond the run_once steps', 'limit': GOAL_TASKS_PER_HOST,
         'value': tree['controller_tasks_per_host'], 'met': tree['controller_tasks_per_host'] <= GOAL_TASKS_PER_HOST},
        {'what': 'growth of the CPU time per host from %d to %d hosts' % (sizes[0], sizes[-1]), 'limit': GOAL_GROWTH,
         'value': tree['cpu_per_host_growth'], 'met': tree['cpu_per_host_growth'] <= GOAL_GROWTH},
        {'what': 'growth of the wall time per host from %d to %d hosts' % (sizes[0], sizes[-1]), 'limit': GOAL_GROWTH,
         'value': tree['per_host_growth'], 'met': tree['per_host_growth'] <= GOAL_GROWTH},
    ]
    net = out['tree_beyond_control']
    if net:
        out['goals'].append(
            {'what': "growth of the CPU time per host from %d to %d hosts beyond ansible-core's own (the control's)"
                     % (sizes[0], sizes[-1]), 'limit': GOAL_GROWTH,
             'value': net['cpu_per_host_growth'], 'met': net['cpu_per_host_growth'] <= GOAL_GROWTH})
    return out


def read_artifact(rundir):
    """(bytes of the set_stats artifact, the largest result of one host in it), or (None, None) without one."""
    try:
        with open(os.path.join(rundir, 'artifact.json')) as f:
            data = json.load(f)
    except (IOError, OSError, ValueError):
        return None, None
    return data.get('bytes'), max(list((data.get('per_host_bytes') or {}).values()) or [0])


def artifact(rows):
    """The set_stats artifact at ARTIFACT_SIZES hosts: measured where a run had that many hosts, else computed from
    the least-squares line over the measured runs (one run: its bytes per host times N). None without a measure."""
    if not rows:
        return None
    points = sorted((r['hosts'], r['artifact_bytes']) for r in rows)
    if len(points) > 1:
        fixed, per_host = fit(points)
    else:
        fixed, per_host = 0.0, points[0][1] / float(points[0][0])
    measured = dict(points)
    sizes = []
    for n in sorted(set(ARTIFACT_SIZES) | set(measured)):
        sizes.append({'hosts': n, 'bytes': measured[n] if n in measured else int(round(fixed + per_host * n)),
                      'how': 'measured' if n in measured else 'computed'})
    return {'sizes': sizes, 'fit_fixed_bytes': round(fixed), 'fit_per_host_bytes': round(per_host),
            'largest_result_bytes': max(r['artifact_largest_result_bytes'] or 0 for r in rows)}


def beyond_control(runs):
    """This tree's growth per host from the fewest hosts to the most, less the control's, as a share of
    this tree's time per host at the fewest: None without a control at both ends."""
    def ends(variant):
        rows = sorted((r for r in runs if r['variant'] == variant), key=lambda r: r['hosts'])
        return (rows[0], rows[-1]) if len(rows) > 1 else None
    tree, control = ends('tree'), ends('control')
    if not tree or not control or [r['hosts'] for r in tree] != [r['hosts'] for r in control]:
        return None
    out = {'sizes': [r['hosts'] for r in tree]}
    for key, name in (('cpu_per_host_s', 'cpu_per_host_growth'), ('per_host_s', 'per_host_growth')):
        tree_added = tree[1][key] - tree[0][key]
        control_added = control[1][key] - control[0][key]
        out[name] = round((tree_added - control_added) / tree[0][key], 3)
        out[name.replace('growth', 'added_s')] = round(tree_added, 3)
        out[name.replace('growth', 'added_by_control_s')] = round(control_added, 3)
    return out


def chart(doc, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for variant, label in (('baseline', 'baseline %s' % doc['baseline']['commit'][:7]),
                           ('tree', 'this tree %s' % doc['tree']['commit'][:7]),
                           ('control', 'control: ansible-core alone')):
        rows = sorted((r for r in doc['runs'] if r['variant'] == variant), key=lambda r: r['hosts'])
        if not rows:
            continue
        xs = [r['hosts'] for r in rows]
        axes[0].plot(xs, [r['per_host_s'] for r in rows], marker='o', label=label + ', wall')
        axes[0].plot(xs, [r['cpu_per_host_s'] for r in rows], marker='s', linestyle='--', label=label + ', CPU')
        axes[1].plot(xs, [r['controller_tasks_per_host'] for r in rows], marker='o', label=label)
    axes[0].set_title('wall and CPU time per host (s)')
    axes[1].set_title('controller-side tasks per host')
    for ax in axes:
        ax.set_xlabel('hosts (aliases, forks %d)' % doc['forks'])
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--sizes', default=os.environ.get('BENCH_FLEET_SIZES', '50,200'))
    parser.add_argument('--forks', type=int, default=int(os.environ.get('BENCH_FLEET_FORKS', '20')))
    parser.add_argument('--baseline', default=os.environ.get('BENCH_FLEET_BASELINE', DEFAULT_BASELINE))
    parser.add_argument('--baseline-sizes', default=os.environ.get('BENCH_FLEET_BASELINE_SIZES'),
                        help='the host counts the baseline runs at (default: all of --sizes; its ratios need one)')
    parser.add_argument('--no-control', action='store_true', help="no control runs (ansible-core alone)")
    parser.add_argument('--raw', default=os.path.join(HERE, 'raw', 'fleet'))
    parser.add_argument('--no-render', action='store_true', help='measure only: no results.json, RESULTS.md, chart')
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(','))
    if len(sizes) < 2 or sizes[0] < 1:
        fail('--sizes needs two or more host counts, each at least 1 (got %r)' % args.sizes)
    base_sizes = sorted(int(s) for s in args.baseline_sizes.split(',')) if args.baseline_sizes else sizes
    if not base_sizes or not set(base_sizes) <= set(sizes):
        fail('--baseline-sizes must be some of --sizes %s (got %r)' % (sizes, args.baseline_sizes))
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    if not os.path.exists(ansible_playbook):
        fail('no ansible-playbook next to %s: run it with the dev venv (make bench-fleet)' % sys.executable)
    if os.path.exists(args.raw):
        shutil.rmtree(args.raw)
    os.makedirs(args.raw)
    baseline_commit = git('rev-parse', args.baseline + '^{commit}')
    # Outside the checkout (linters walk bench/raw), and removed at the end.
    scratch = tempfile.mkdtemp(prefix='aemops-fleet-')
    try:
        base_tree = export_tree(baseline_commit, os.path.join(scratch, 'baseline-tree'))
        return measure(args, sizes, base_sizes, baseline_commit, base_tree, ansible_playbook)
    finally:
        shutil.rmtree(scratch)


def measure(args, sizes, base_sizes, baseline_commit, base_tree, ansible_playbook):
    dirty = git('status', '--porcelain', '--', 'plugins', 'roles', 'playbooks')
    doc = {
        'started': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
        'forks': args.forks, 'sizes': sizes, 'baseline_sizes': base_sizes,
        'ansible_core': subprocess.check_output([ansible_playbook, '--version'],
                                                universal_newlines=True).splitlines()[0],
        'cpus': os.cpu_count(), 'load_1min_at_start': round(os.getloadavg()[0], 2),
        'baseline': {'ref': args.baseline, 'commit': baseline_commit},
        'tree': {'commit': git('rev-parse', 'HEAD'), 'dirty': bool(dirty)},
        'runs': [],
    }
    control_tasks = None
    for n in sizes:
        hosts = ['aem%03d' % i for i in range(1, n + 1)]
        order = ('baseline', 'tree', 'control') if n == sizes[0] else ('control', 'tree', 'baseline')
        for variant in order:
            if variant == 'baseline' and n not in base_sizes or variant == 'control' and args.no_control:
                continue
            tree = base_tree if variant == 'baseline' else TOP
            rundir = os.path.join(args.raw, '%s-%d' % (variant, n))
            rc, wall, cpu, peak_kib, count = run_once_audit(tree, rundir, hosts, args.forks, ansible_playbook,
                                                            control_tasks if variant == 'control' else None)
            artifact_bytes, largest = read_artifact(rundir)
            row = dict(count_tasks(count, hosts), variant=variant, hosts=n, rc=rc, wall_s=round(wall, 1),
                       artifact_bytes=artifact_bytes, artifact_largest_result_bytes=largest,
                       per_host_s=round(wall / n, 3), cpu_s=round(cpu, 1), cpu_per_host_s=round(cpu / n, 3),
                       peak_rss_mib=round(peak_kib / 1024.0, 1), load_1min_after=round(os.getloadavg()[0], 2))
            if row['hosts_seen'] != n:
                fail('%s with %d hosts: task results for %d hosts only (see %s/ansible.log)'
                     % (variant, n, row['hosts_seen'], rundir))
            print('%-8s %4d hosts: %7.1f s (%.3f s/host), CPU %.3f s/host, %5.2f controller tasks/host, peak %6.1f MiB, '
                  'set_stats %s bytes, rc %d'
                  % (variant, n, wall, row['per_host_s'], row['cpu_per_host_s'], row['controller_tasks_per_host'],
                     row['peak_rss_mib'], artifact_bytes, rc))
            sys.stdout.flush()
            doc['runs'].append(row)
            if variant == 'tree' and control_tasks is None:
                # The control's debug tasks: the tree's task results per host, less the fact gathering.
                control_tasks = int(round(row['task_results_per_host'])) - 1
    doc['summary'] = summarize(doc['runs'], sizes)
    print(json.dumps(doc['summary'], indent=1, sort_keys=True))
    if args.no_render:
        return 0
    results = os.path.join(HERE, 'results.json')
    with io.open(results, encoding='utf-8') as f:
        whole = json.load(f)
    whole['fleet'] = doc
    with io.open(results, 'w', encoding='utf-8') as f:
        f.write(json.dumps(whole, indent=2, sort_keys=True) + '\n')
    chart(doc, os.path.join(HERE, 'charts', 'fleet.png'))
    subprocess.check_call([sys.executable, os.path.join(HERE, 'report.py'), 'render', results,
                           os.path.join(HERE, 'RESULTS.md')])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
