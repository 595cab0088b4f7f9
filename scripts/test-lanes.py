# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the phases of `make test` on two workers: python3 scripts/test-lanes.py PHASE...

What `make test` runs (and .ci/run through it). The phases come in the Makefile's order
(TEST_PHASES): longest and earliest-needed first. Two workers take the first phase from that
queue that can start as each becomes free, so that on CI's 2 cores the CPU-bound checks (sanity, unit,
compat) overlap the image builds, which wait on the mirror and the disk, and the VM
scenarios, whose guests mostly wait on their own vCPUs. A phase that boots a VM is not
started before `vm-images` has ended (a worker takes that first; the other runs the checks
meanwhile), so that two builders never race for the same image. A failed phase does not stop the others; the exit status is 1 if any
phase failed. docs/testing.md has the measured split.

Each phase is `make PHASE`, its whole output in AEMOPS_CI_LOGS/PHASE.log (default
.cache/ci-logs); this prints a line when each starts and ends, and at the end: the phase
table (the set-up rows .ci/run wrote to phases.tsv first), the total against the budget,
and for each failed phase the lines around its last failure (scripts/failure-excerpt.py)
above the table, and its cause in brief (failure-excerpt.py --brief: the task, the scenario
step, the message) below it, as the last lines of the run: CI shows only the last couple of
dozen lines of a run, and stop 25's upgrade failure, excerpted above the table, was cut off.

Environment: TEST_WORKERS (2; 1 runs the phases one after another), AEMOPS_CI_LOGS,
AEMOPS_CI_START (epoch seconds the run started: .ci/run sets it, so that the total includes
its set-up), AEMOPS_CI_BUDGET (seconds, default 3000: 50 minutes).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys
import threading
import time

IMAGES = 'vm-images'


def needs_images(name):
    """The phases that boot a VM start only after IMAGES has ended."""
    return name == 'run' or name.startswith('molecule-') and name != 'molecule-syntax'


class Lanes(object):
    def __init__(self, phases, logs, start, workers):
        self.queue = list(phases)
        self.logs = logs
        self.start = start
        self.workers = workers
        self.lock = threading.Lock()
        self.images_done = threading.Event()
        if IMAGES not in self.queue:
            self.images_done.set()
        self.rows = []

    def say(self, text):
        with self.lock:
            print('%s [%s] %s' % ('==>', time.strftime('%H:%M:%S'), text))
            sys.stdout.flush()

    def next_phase(self, worker):
        """The first phase in the queue that can start now; waits only when every one left needs the images."""
        while True:
            with self.lock:
                if not self.queue:
                    return None
                ready = self.images_done.is_set()
                for i, name in enumerate(self.queue):
                    if ready or not needs_images(name):
                        return self.queue.pop(i)
            self.say('worker %d: the phases left need %s: waiting for it' % (worker, IMAGES))
            self.images_done.wait()

    def run_phase(self, worker, name):
        log = os.path.join(self.logs, name + '.log')
        self.say('worker %d: %s (log: %s)' % (worker, name, log))
        t0 = time.time()
        with open(log, 'wb') as out:
            # A standard input of its own (its own open file description): ssh sets O_NONBLOCK on the stdin
            # it is given and can leave it so (killed by a timeout or its keepalive); on a /dev/null shared by
            # every phase, each later ansible-* then refuses to start ("Ansible requires blocking IO ...
            # <stdin>"), as molecule-syntax did at the end of the final run of stop 26.
            with open(os.devnull) as stdin:
                rc = subprocess.call(['make', name], stdin=stdin, stdout=out, stderr=subprocess.STDOUT)
        took = int(time.time() - t0)
        result = 'OK' if rc == 0 else 'FAILED'
        self.say('worker %d: %s: %s (%ds)' % (worker, name, result, took))
        with self.lock:
            self.rows.append(('w%d' % worker, name, result, int(t0 - self.start), took))
        if name == IMAGES:
            self.images_done.set()

    def worker(self, worker):
        while True:
            name = self.next_phase(worker)
            if name is None:
                return
            try:
                self.run_phase(worker, name)
            finally:
                if name == IMAGES:
                    self.images_done.set()

    def run(self):
        threads = [threading.Thread(target=self.worker, args=(i + 1,)) for i in range(self.workers)]
        for t in threads:
            t.daemon = True
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(1)
        return self.rows


# vm.sh collect's prefix for the console lines of a boot that stopped (its boot_trouble).
TROUBLE = 'serial log, last boot:'


def tail(path, count):
    try:
        with open(path, 'rb') as f:
            lines = f.read().decode('utf-8', 'replace').splitlines()
    except (IOError, OSError):
        return []
    return lines[-count:]


def guest_dirs(vm_logs, phase):
    """What `vm.sh collect` kept of each VM of a phase (molecule-X: vm/X and vm/X-*; run: vm/run)."""
    scenario = 'run' if phase == 'run' else phase[len('molecule-'):]
    try:
        return sorted(d for d in os.listdir(vm_logs) if d == scenario or d.startswith(scenario + '-'))
    except OSError:
        return []


def boot_trouble(vm_logs, phase):
    """The lines `vm.sh collect` put in status.txt for a boot that stopped (emergency mode, ...)."""
    found = []
    for d in guest_dirs(vm_logs, phase):
        for line in tail(os.path.join(vm_logs, d, 'status.txt'), 20):
            if line.startswith(TROUBLE):
                found.append('%s: %s' % (d, line[len(TROUBLE):].strip()))
    return found


def show_guest_logs(vm_logs, phase):
    """The end of what `vm.sh collect` kept of each VM of a failed phase."""
    for d in guest_dirs(vm_logs, phase):
        path = os.path.join(vm_logs, d)
        print('    guest logs of %s (vm.sh collect): %s' % (d, path))
        for name, count in (('status.txt', 12), ('tuned.log', 6), ('serial.log', 6)):
            for line in tail(os.path.join(path, name), count):
                print('      %s| %s' % (name, line[:200]))
    sys.stdout.flush()


def read_setup_rows(table):
    rows = []
    try:
        with open(table) as f:
            for line in f:
                parts = line.rstrip('\n').split('\t')
                if len(parts) == 5:
                    rows.append((parts[0], parts[1], parts[2], int(parts[3]), int(parts[4])))
    except (IOError, OSError, ValueError):
        pass
    return rows


def main(argv):
    phases = argv[1:]
    if not phases:
        sys.exit('usage: test-lanes.py PHASE...')
    logs = os.environ.get('AEMOPS_CI_LOGS') or os.path.join(os.getcwd(), '.cache', 'ci-logs')
    budget = int(os.environ.get('AEMOPS_CI_BUDGET') or 3000)
    from_ci = bool(os.environ.get('AEMOPS_CI_START'))
    start = int(os.environ.get('AEMOPS_CI_START') or time.time())
    workers = max(1, int(os.environ.get('TEST_WORKERS') or 2))
    if not os.path.isdir(logs):
        os.makedirs(logs)
    table = os.path.join(logs, 'phases.tsv')
    setup = read_setup_rows(table) if from_ci else []

    lanes = Lanes(phases, logs, start, workers)
    lanes.say('%d phases on %d workers: %s' % (len(phases), workers, ' '.join(phases)))
    rows = setup + sorted(lanes.run(), key=lambda row: row[3])
    with open(table, 'w') as f:
        for row in rows:
            f.write('%s\t%s\t%s\t%d\t%d\n' % row)

    total = int(time.time() - start)
    failed = [row[1] for row in rows if row[2] != 'OK']
    for name in failed:
        log = os.path.join(logs, name + '.log')
        print('\n==> where %s failed (scripts/failure-excerpt.py %s):' % (name, log))
        sys.stdout.flush()
        subprocess.call([sys.executable, 'scripts/failure-excerpt.py', log, str(120 // len(failed))])
        if needs_images(name):
            show_guest_logs(os.path.join(logs, 'vm'), name)
    print('\n==> phases (worker, result, start offset and length in seconds)')
    for row in rows:
        print('  %-5s %-22s %-7s %7s %6d' % (row[0], row[1], row[2], '+%d' % row[3], row[4]))
    verdict = 'within' if total <= budget else 'OVER'
    print('==> total %ds (%d min %02d s): %s the budget of %ds (%d min)'
          % (total, total // 60, total % 60, verdict, budget, budget // 60))
    ran = len(rows) - len(setup)
    # CI shows only the last couple of dozen lines of a run: the cause goes last, in brief.
    for name in failed:
        print('==> cause of %s (brief; the excerpt is above the table, the log in %s):'
              % (name, os.path.join(logs, name + '.log')))
        sys.stdout.flush()
        subprocess.call([sys.executable, 'scripts/failure-excerpt.py', '--brief',
                         os.path.join(logs, name + '.log')])
        if needs_images(name):
            for line in boot_trouble(os.path.join(logs, 'vm'), name):
                print('  | guest console, %s' % line[:200])
    if failed:
        print('FAILED phases: %s' % ' '.join(failed))
        print('phases: %d passed, %d failed' % (ran - len(failed), len(failed)))
        return 1
    print('All phases passed.')
    print('phases: %d passed, 0 failed' % ran)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
