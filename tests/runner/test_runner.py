# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role run the way AWX and Automation Platform run it, and the fleet summary from the fact cache (make runner).

1. ``ansible-runner run`` (the library AWX uses, from requirements/dev.txt) drives playbooks/migrate-aem.yml
   (``--tags pre``, ``aem_tuning_mode: audit``) against two inventory aliases of this machine (connection local, no
   VM), in a private data directory, with ``ANSIBLE_INJECT_FACT_VARS=False``: once with ansible-core 2.16 (the dev
   venv) and the role's reports on, written inside the data directory; once with the newest ansible-core
   (.cache/venv-2.21, runner's ``--binary``) and ``aem_tuning_reports: false``, as under AAP. Each run is traced with
   strace (every successful open for writing, create, rename, remove, link, chmod or mkdir), and no path outside the
   data directory may appear, except the terminals and ``/dev/null``, the role's own files on the host (none
   in audit mode), and a system library's state files that every ansible process writes (SYSTEM_STATE: libuuid's
   clock, where uuid-runtime is installed). The per-host result must be in the artifacts: ``set_stats`` data in
   the ``playbook_on_stats`` event, the ``Keep the result`` task's events, and runner's jsonfile fact cache. The only failure allowed is the
   audit's verdict: this machine is not tuned (read-ahead, no udev rule, THP), so the audit fails with its misses.
2. ``playbooks/summary.yml`` builds one summary of four aliases from the ``jsonfile`` fact cache of two audit runs
   of two halves of the inventory (``--limit``), as two slices of a job would.

Needs root (the role's facts read every process's open files), ansible-runner and strace; elsewhere than in CI
(CI=true) a missing piece skips the test, naming it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
NEWEST = os.path.join(ROOT, '.cache', 'venv-2.21', 'bin')
HOST_PYTHON = '/usr/bin/python3'
HOSTS = ['aem1', 'aem2']
# The system calls that write, create, rename, remove or change a file or directory.
WRITE_CALLS = ('chdir,fchdir,open,openat,openat2,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir,link,'
               'linkat,symlink,symlinkat,truncate,chmod,fchmodat,chown,lchown,fchownat,utimensat,mknod,mknodat')
WRITE_FLAGS = ('O_WRONLY', 'O_RDWR', 'O_CREAT', 'O_TRUNC', 'O_APPEND')
# What may be written outside the private data directory: terminals and /dev/null; the named semaphores of Python's
# multiprocessing (ansible's worker locks: created in /dev/shm and unlinked at once); lvm2's lock and hints, which
# the read-only lvs/vgs of the role's facts take and refresh; and the files the role owns on the host (an audit
# writes none of them; allowed so that the test is about the controller side).
ALLOWED = re.compile(r'^(/dev/(null|tty|ptmx|pts/\d+)|/dev/shm/sem\.[^/]+|/run/lock/lvm/.*|/run/lvm/.*'
                     r'|/etc/ansible/facts\.d/aem_tuning_[a-z]+\.fact|/run/aemops-os-tuning(/.*)?)$')
# What a system library writes by itself in every process, whoever runs it: state files that are not the collection's,
# each matched by its exact path, with why it is allowed. A write by the collection anywhere else (next to one of
# these included) is still reported.
SYSTEM_STATE = (
    # libuuid's clock (util-linux). Where /var/lib/libuuid exists (uuid-runtime creates it; Debian's prometheus
    # recommends nvme-cli, which depends on it), every ansible process writes this file: ansible-core's
    # ansible/utils/vars.py calls uuid.getnode() at import, which Python's _uuid answers through libuuid's
    # uuid_generate_time, and that opens /var/lib/libuuid/clock.txt for writing to keep its clock sequence. Not the
    # collection's write: ansible-core alone does it, on every host.
    re.compile(r'^/var/lib/libuuid/clock\.txt$'),
)
LINE = re.compile(r'^(?P<pid>\d+)\s+(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+|\?)')


def need(condition, why):
    if not condition:
        if os.environ.get('CI') == 'true':
            pytest.fail('%s (required in CI)' % why)
        pytest.skip(why)


def runner_available():
    try:
        import ansible_runner  # noqa: F401  pylint: disable=unused-import
    except ImportError:
        return False
    return True


@pytest.fixture(scope='module')
def prerequisites():
    need(os.geteuid() == 0, 'the role reads every process\'s open files: run as root')
    need(runner_available(), 'ansible-runner is not importable: make venv')
    need(shutil.which('strace') is not None, 'strace is not installed (apt-get install strace)')
    need(os.path.exists(HOST_PYTHON), '%s (the Python the role runs on this host) is missing' % HOST_PYTHON)


def strace_paths(line, cwd):
    """The absolute paths a successful writing call of one ``strace -y`` line touched. cwd maps each pid to its
    working directory, as the trace shows it (``AT_FDCWD</dir>``, chdir, fchdir), for the relative paths of calls
    that are not *at (``mkdir -p`` walks down with chdir and mkdir)."""
    m = LINE.match(line)
    if not m:
        return []
    pid, call, args, ret = m.group('pid'), m.group('call'), m.group('args'), m.group('ret')
    here = re.search(r'AT_FDCWD<([^>]*)>', args)
    if here:
        cwd[pid] = here.group(1)
    if ret == '?' or ret.startswith('-'):
        return []
    if call in ('chdir', 'fchdir'):
        target = re.search(r'"((?:[^"\\]|\\.)*)"|\d+<([^>]*)>', args)
        if target:
            path = target.group(1) if target.group(1) is not None else target.group(2)
            cwd[pid] = os.path.normpath(os.path.join(cwd.get(pid, '?'), path))
        return []
    if call in ('open', 'openat', 'openat2') and not any(flag in args for flag in WRITE_FLAGS):
        return []
    # "</dir>" after a descriptor (strace -y) and "path" strings; a relative path is joined to the descriptor
    # before it, or to the process's working directory.
    paths, base = [], cwd.get(pid)
    for token in re.finditer(r'AT_FDCWD(?:<(?P<cwd>[^>]*)>)?|\d+<(?P<fd>[^>]*)>|"(?P<path>(?:[^"\\]|\\.)*)"', args):
        if token.group('path') is not None:
            path = token.group('path')
            if not path.startswith('/'):
                path = os.path.join(base, path) if base else "<relative to an unknown directory>/" + path
            paths.append(os.path.normpath(path) if path.startswith('/') else path)
            base = cwd.get(pid)
        else:
            base = token.group('fd') or token.group('cwd') or cwd.get(pid)
    return paths


UNFINISHED = re.compile(r'^(?P<pid>\d+)\s+(?P<head>.*?)\s*<unfinished \.\.\.>$')
RESUMED = re.compile(r'^(?P<pid>\d+)\s+<\.\.\. (?P<call>\w+) resumed>(?P<tail>.*)$')


def whole_calls(lines):
    """The calls of a ``strace -f`` log, each on one line. When two processes are in system calls at once,
    strace writes the first as ``PID call(args <unfinished ...>`` and its end later as ``PID <... call resumed>
    rest``; a chdir split so would otherwise be lost, and every relative path after it joined to the wrong
    directory (CI once flagged ``<base>/tmp/remote`` for ``<base>/pdd/tmp/remote``)."""
    pending = {}
    for line in lines:
        line = line.rstrip('\n')
        m = UNFINISHED.match(line)
        if m:
            pending[m.group('pid')] = m.group('head')
            continue
        m = RESUMED.match(line)
        if m:
            head = pending.pop(m.group('pid'), None)
            if head is not None and head.startswith(m.group('call') + '('):
                yield '%s  %s%s' % (m.group('pid'), head, m.group('tail'))
            continue
        yield line


def outside(trace, inside):
    """Paths written outside `inside` (the private data directory), apart from what ALLOWED names."""
    found, cwd = set(), {}
    with open(trace) as f:
        for line in whole_calls(f):
            for path in strace_paths(line, cwd):
                if path == inside or path.startswith(inside + os.sep) or ALLOWED.match(path):
                    continue
                if any(state.match(path) for state in SYSTEM_STATE):
                    continue
                found.add(path)
    return sorted(found)


def test_outside_reads_calls_that_strace_split(tmp_path):
    """mkdir -p's walk down, as strace -f wrote it in a run of this test (pids and base shortened), with the
    chdir into pdd and the mkdir of the remote temporary directory each split by another process's call."""
    base = str(tmp_path)
    trace = tmp_path / 'strace.txt'
    trace.write_text('\n'.join([
        '41  chdir("%s") = 0' % base,
        '41  mkdir("pdd", 0777) = -1 EEXIST (File exists)',
        '41  chdir("pdd" <unfinished ...>',
        '42  openat(AT_FDCWD</>, "/etc/hosts", O_RDONLY|O_CLOEXEC) = 3</etc/hosts>',
        '41  <... chdir resumed>) = 0',
        '41  mkdir("tmp", 0777) = -1 EEXIST (File exists)',
        '41  chdir("tmp") = 0',
        '41  mkdir("remote", 0777 <unfinished ...>',
        '42  close(3) = 0',
        '41  <... mkdir resumed>) = 0',
        '41  mkdir("%s/stray", 0700 <unfinished ...>' % base,
        '43  mkdir("/run/lvm", 0700) = -1 EEXIST (File exists)',
        '41  <... mkdir resumed>) = 0',
    ]) + '\n')
    assert outside(str(trace), os.path.join(base, 'pdd')) == [os.path.join(base, 'stray')]
    pending = list(whole_calls(['7  chdir("a" <unfinished ...>', '7  <... chdir resumed>) = 0']))
    assert pending == ['7  chdir("a") = 0']


def test_outside_allows_a_system_librarys_state_file_and_no_write_beside_it(tmp_path):
    """libuuid's clock, as strace wrote it in an ansible process on a machine with uuid-runtime, is no write of the
    collection's; a file next to it, a file named like it elsewhere, and the collection's own files on the host
    outside the allowed ones are."""
    pdd = str(tmp_path / 'pdd')
    trace = tmp_path / 'strace.txt'
    trace.write_text('\n'.join([
        '51  openat(AT_FDCWD</work>, "/var/lib/libuuid/clock.txt", O_RDWR|O_CREAT|O_CLOEXEC, 0660) = 4</var/lib/libuuid/clock.txt>',
        '52  openat(AT_FDCWD</var/lib/libuuid>, "clock.txt", O_RDWR|O_CREAT|O_CLOEXEC, 0660) = 4</var/lib/libuuid/clock.txt>',
        '53  openat(AT_FDCWD</work>, "/var/lib/libuuid/clock.txt.aemops", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 5</x>',
        '53  openat(AT_FDCWD</work>, "/var/lib/libuuid", O_RDONLY|O_DIRECTORY) = 6</var/lib/libuuid>',
        '53  mkdirat(AT_FDCWD</work>, "/var/lib/libuuid/aemops", 0700) = 0',
        '53  openat(AT_FDCWD</work>, "/tmp/clock.txt", O_WRONLY|O_CREAT, 0644) = 7</tmp/clock.txt>',
        '53  openat(AT_FDCWD</work>, "/etc/udev/rules.d/99-aemops-os-tuning.rules", O_WRONLY|O_CREAT, 0644) = 8</x>',
    ]) + '\n')
    assert outside(str(trace), pdd) == ['/etc/udev/rules.d/99-aemops-os-tuning.rules', '/tmp/clock.txt',
                                        '/var/lib/libuuid/aemops', '/var/lib/libuuid/clock.txt.aemops']


def untag(data):
    """ansible-core 2.19's cache serialisation without its tags: {"value": X, "tags": [...], "__ansible_type": T}
    is X."""
    if isinstance(data, dict):
        if '__ansible_type' in data and 'value' in data:
            return untag(data['value'])
        return dict((k, untag(v)) for k, v in data.items() if k != '__ansible_type')
    if isinstance(data, list):
        return [untag(v) for v in data]
    return data


def cached_facts(cache, host):
    """A host's facts in a jsonfile fact cache: the file is named after the host (ansible-core 2.16), or s1_<host>
    with the facts as JSON text under __payload__, tagged with their origins (2.19 and later)."""
    for name in (host, 's1_' + host):
        path = os.path.join(cache, name)
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
            return untag(json.loads(data['__payload__'])) if '__payload__' in data else data
    raise AssertionError('no facts of %s in %s: %s' % (host, cache, sorted(os.listdir(cache))))


def write_yaml_json(path, data):
    """YAML is a superset of JSON: runner's env files and the inventory are written as JSON."""
    with open(path, 'w') as f:
        json.dump(data, f, indent=2)


def data_dir(base, hosts, extravars):
    """A private data directory as AWX lays it out: project (the playbooks), inventory, env; collections inside."""
    pdd = os.path.join(str(base), 'pdd')
    for sub in ('project', 'inventory', 'env', 'tmp', 'repo', 'collections/ansible_collections/aemops'):
        os.makedirs(os.path.join(pdd, sub))
    for name in ('migrate-aem.yml', 'summary.yml'):
        shutil.copy(os.path.join(ROOT, 'playbooks', name), os.path.join(pdd, 'project', name))
    os.symlink(ROOT, os.path.join(pdd, 'collections', 'ansible_collections', 'aemops', 'os_tuning'))
    write_yaml_json(os.path.join(pdd, 'inventory', 'hosts.yml'), {'aem': {
        'hosts': dict((h, {}) for h in hosts),
        'vars': {'ansible_connection': 'local', 'ansible_python_interpreter': HOST_PYTHON,
                 # root already, and no sudo on a CI host: the play's become: true must not call it.
                 'ansible_become': False,
                 'aem_tuning_paths': [os.path.join(pdd, 'repo')]}}})
    write_yaml_json(os.path.join(pdd, 'env', 'envvars'), {
        'ANSIBLE_COLLECTIONS_PATH': os.path.join(pdd, 'collections'),
        'ANSIBLE_INJECT_FACT_VARS': 'False',
        'ANSIBLE_LOCAL_TEMP': os.path.join(pdd, 'tmp', 'local'),
        'ANSIBLE_REMOTE_TEMP': os.path.join(pdd, 'tmp', 'remote'),
        'ANSIBLE_HOME': os.path.join(pdd, 'tmp', 'ansible-home'),
        'ANSIBLE_RETRY_FILES_ENABLED': 'False',
        'ANSIBLE_NOCOLOR': 'True',
        'PYTHONDONTWRITEBYTECODE': '1',
        'TMPDIR': os.path.join(pdd, 'tmp'),
    })
    write_yaml_json(os.path.join(pdd, 'env', 'extravars'), extravars)
    with open(os.path.join(pdd, 'env', 'cmdline'), 'w') as f:
        f.write('--tags pre')
    return pdd


def clean_env(pdd):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith('ANSIBLE_'))
    env.update({'PYTHONDONTWRITEBYTECODE': '1', 'TMPDIR': os.path.join(pdd, 'tmp'), 'PWD': pdd})
    return env


def run_runner(pdd, ident, bindir=None):
    """ansible-runner run, under strace, with the ansible-playbook of bindir (default: the one next to this Python)
    first on PATH, as an execution environment has it."""
    bindir = bindir or os.path.dirname(sys.executable)
    trace = os.path.join(os.path.dirname(pdd), 'strace-%s.txt' % ident)
    argv = ['strace', '-f', '--seccomp-bpf', '-qq', '-y', '-s', '4096', '-e', 'trace=' + WRITE_CALLS, '-o', trace,
            sys.executable, '-m', 'ansible_runner', 'run', pdd, '-p', 'migrate-aem.yml', '--ident', ident]
    env = clean_env(pdd)
    env['PATH'] = bindir + os.pathsep + env.get('PATH', '')
    proc = subprocess.run(argv, cwd=pdd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    return proc, trace


def events(pdd, ident):
    out = []
    for path in glob.glob(os.path.join(pdd, 'artifacts', ident, 'job_events', '*.json')):
        with open(path) as f:
            out.append(json.load(f))
    return sorted(out, key=lambda e: e.get('counter', 0))


def check_run(pdd, ident, proc, trace, reports):
    stdout = proc.stdout
    art = os.path.join(pdd, 'artifacts', ident)
    assert os.path.exists(os.path.join(art, 'status')), stdout[-3000:]
    with open(os.path.join(art, 'status')) as f:
        status = f.read().strip()
    evs = events(pdd, ident)
    failed = [e for e in evs if e.get('event') == 'runner_on_failed' and not e['event_data'].get('ignore_errors')]
    # The audit's verdict, and nothing else, fails: this machine is not tuned.
    assert status == 'failed', stdout[-3000:]
    assert sorted(e['event_data']['host'] for e in failed) == HOSTS, stdout[-3000:]
    for e in failed:
        assert e['event_data']['task'] == 'Assert the host is compliant (every miss is listed)', e['event_data']
        assert 'is not compliant (audit mode)' in e['event_data']['res']['msg']
    assert not [e for e in evs if e.get('event') == 'runner_on_unreachable']
    # A clean run: no warning, no deprecation (e.g. a fact read as an injected variable on 2.21).
    assert not re.search(r'\[(DEPRECATION )?WARNING\]', stdout), [
        line for line in stdout.splitlines() if 'WARNING' in line]

    # set_stats: one key per host under aem_tuning_result, for the whole run (AAP passes it to workflow nodes).
    stats = [e for e in evs if e.get('event') == 'playbook_on_stats']
    assert len(stats) == 1
    artifact = stats[0]['event_data']['artifact_data']['aem_tuning_result']
    assert sorted(artifact) == HOSTS
    for host in HOSTS:
        r = artifact[host]
        assert r['schema_version'] == 3 and r['host'] == host
        # Sized for a fleet (issue 34): readings, not three copies of the facts.
        assert len(json.dumps(r)) <= 4096, len(json.dumps(r))
        assert r['lost'] is None and set(r['readings']) == {'first', 'before', 'after'}
        assert r['mode'] == 'audit' and r['state'] == 'present' and r['compliant'] is False
        assert r['changes'] == [] and r['error'] == '' and not r['failed_before_change']
        assert any('no udev rule persists' in m['message'] and 'deferred' not in m for m in r['misses'])
        assert r['misses_failing_count'] == r['misses_count'] > 0
        assert r['targets'] == [os.path.join(pdd, 'repo')]
        assert r['read_ahead_kb'] == 32 and isinstance(r['read_ahead_kb'], int)
        assert r['reboot']['done'] is False and r['aem'] is None
        assert set(r['readers']) >= {'refreshed', 'stale', 'needs_restart'}
        assert r['report'] == (os.path.join(pdd, 'reports', host, 'report.md') if reports else '')
    # The job events carry it too (the task that sets it), and runner's jsonfile fact cache holds it (cacheable).
    kept = [e for e in evs if e.get('event') == 'runner_on_ok'
            and e['event_data'].get('task', '').startswith('Keep the result (aem_tuning_result')]
    assert sorted(e['event_data']['host'] for e in kept) == HOSTS
    for e in kept:
        assert e['event_data']['res']['ansible_facts']['aem_tuning_result']['host'] == e['event_data']['host']
    for host in HOSTS:
        assert cached_facts(os.path.join(art, 'fact_cache'), host)['aem_tuning_result']['schema_version'] == 3

    # The reports: one controller-side task for both hosts (run_once), or none with aem_tuning_reports: false.
    report_tasks = [e for e in evs if e.get('event') in ('runner_on_ok', 'runner_on_skipped')
                    and e['event_data'].get('task', '').startswith('Write the reports on the controller')]
    # The results reach the renderer in the controller's memory (the action aemops.os_tuning.aem_reports reads the
    # play's host variables), never in a task's arguments or result, a command line or stdin (the job events keep
    # those; the payload was base64 on stdin before issue 34, and in a file of its own before issue 38): none of the
    # report step's events holds a key of the result, and each event stays small.
    assert not [e['event_data']['task'] for e in report_tasks if 'misses_before_count' in json.dumps(e)]
    for e in report_tasks:
        args = ((e['event_data'].get('res') or {}).get('invocation') or {}).get('module_args') or {}
        assert set(args) <= {'directory', 'source', 'host_reports'}, e['event_data']['task']
        assert len(json.dumps(e)) < 8192, (e['event_data']['task'], len(json.dumps(e)))
    if reports:
        assert len(report_tasks) == 1 and report_tasks[0]['event'] == 'runner_on_ok'
        assert not [n for n in os.listdir(os.path.join(pdd, 'tmp')) if n.endswith('.aem-reports.json')]
        for host in HOSTS:
            with open(os.path.join(pdd, 'reports', host, 'report.md')) as f:
                text = f.read()
            assert text.startswith('# %s: read-ahead and THP (present, audit mode)' % host)
            assert 'This run changed nothing on the host.' in text and 'Not compliant:' in text
            assert 'Reboot: none needed' in text
            with open(os.path.join(pdd, 'reports', host, 'after.json')) as f:
                assert 'block_devices' in json.load(f)  # the full facts, which the result no longer carries
        with open(os.path.join(pdd, 'reports', 'summary.json')) as f:
            summary = json.load(f)
        assert sorted(summary['hosts']) == HOSTS
        assert summary['counts']['not compliant'] == len(HOSTS) and summary['counts']['lost'] == 0
    else:
        assert [e['event'] for e in report_tasks] in ([], ['runner_on_skipped'])
        assert not os.path.exists(os.path.join(pdd, 'reports'))

    written = outside(trace, pdd)
    assert written == [], 'written outside the private data directory %s: %s' % (pdd, written)


@pytest.mark.usefixtures('prerequisites')
def test_runner_audit_216_reports_in_the_data_dir(tmp_path):
    pdd = data_dir(tmp_path, HOSTS, {'aem_tuning_mode': 'audit', 'aem_tuning_report_dir': str(tmp_path / 'pdd' / 'reports')})
    proc, trace = run_runner(pdd, 'audit-2.16')
    check_run(pdd, 'audit-2.16', proc, trace, reports=True)
    assert 'ansible-core 2.16' in core_version(pdd, 'audit-2.16')


@pytest.mark.usefixtures('prerequisites')
def test_runner_audit_newest_core_reports_off(tmp_path):
    need(os.path.exists(os.path.join(NEWEST, 'ansible-playbook')), 'no newest ansible-core in %s: make venv' % NEWEST)
    pdd = data_dir(tmp_path, HOSTS, {'aem_tuning_mode': 'audit', 'aem_tuning_reports': False})
    proc, trace = run_runner(pdd, 'audit-newest', NEWEST)
    check_run(pdd, 'audit-newest', proc, trace, reports=False)
    assert 'ansible-core 2.21' in core_version(pdd, 'audit-newest')


def core_version(pdd, ident):
    """The ansible-core that ran: the first directory of the PATH runner gave ansible-playbook (its command file),
    asked for its version."""
    with open(os.path.join(pdd, 'artifacts', ident, 'command')) as f:
        command = json.load(f)
    assert command['command'][0] == 'ansible-playbook'
    bindir = command['env']['PATH'].split(os.pathsep)[0]
    version = subprocess.check_output([os.path.join(bindir, 'python'), '-c', 'import ansible; print(ansible.__version__)'],
                                      universal_newlines=True).strip()
    return 'ansible-core %s' % version


@pytest.mark.usefixtures('prerequisites')
def test_summary_from_the_fact_cache_of_two_sliced_runs(tmp_path):
    """Two audits of two halves of one inventory (--limit), then playbooks/summary.yml: one summary of all four."""
    hosts = ['aem1', 'aem2', 'aem3', 'aem4']
    pdd = data_dir(tmp_path, hosts, {})
    cache = str(tmp_path / 'facts')
    env = clean_env(pdd)
    env.update({'ANSIBLE_COLLECTIONS_PATH': os.path.join(pdd, 'collections'), 'ANSIBLE_CACHE_PLUGIN': 'jsonfile',
                'ANSIBLE_CACHE_PLUGIN_CONNECTION': cache, 'ANSIBLE_INJECT_FACT_VARS': 'False',
                'ANSIBLE_LOCAL_TEMP': os.path.join(pdd, 'tmp', 'local'),
                'ANSIBLE_REMOTE_TEMP': os.path.join(pdd, 'tmp', 'remote'), 'ANSIBLE_NOCOLOR': 'True'})
    playbook = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    inventory = os.path.join(pdd, 'inventory', 'hosts.yml')
    for half in ('aem1,aem2', 'aem3,aem4'):
        proc = subprocess.run([playbook, '-i', inventory, os.path.join(pdd, 'project', 'migrate-aem.yml'),
                               '--tags', 'pre', '--limit', half, '-e', 'aem_tuning_mode=audit',
                               '-e', 'aem_tuning_reports=false'], cwd=pdd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)
        # The audit fails on this untuned machine; each host's result is cached all the same.
        assert proc.returncode == 2 and 'is not compliant (audit mode)' in proc.stdout, proc.stdout[-3000:]
    for host in hosts:
        assert cached_facts(cache, host)['aem_tuning_result']['host'] == host
    out = str(tmp_path / 'fleet')
    proc = subprocess.run([playbook, '-i', inventory, os.path.join(pdd, 'project', 'summary.yml'),
                           '-e', 'aem_tuning_report_dir=' + out], cwd=pdd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert '4 of 4 hosts with a cached result' in proc.stdout
    with open(os.path.join(out, 'summary.json')) as f:
        summary = json.load(f)
    assert sorted(summary['hosts']) == hosts
    for host in hosts:
        row = summary['hosts'][host]
        assert row['host'] == host and row['mode'] == 'audit' and row['compliant'] is False
        assert row['misses'] and row['outcome'].endswith('misses')
    with open(os.path.join(out, 'summary.md')) as f:
        text = f.read()
    for host in hosts:
        assert re.search(r'^\| %s \| present \| audit \| .*\| \d+ misses \|' % host, text, re.M), text
    # The summary step writes only the summary: the per-host reports are opt-in.
    assert sorted(os.listdir(out)) == ['summary.json', 'summary.md']
