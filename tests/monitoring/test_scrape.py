# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A real scrape: Debian's node_exporter reads a textfile directory that textfile_metrics wrote, Debian's Prometheus
scrapes it with extensions/prometheus/aemops-os-tuning.rules.yml loaded, and the test asks Prometheus' HTTP API.

- every family of the textfile is there, with the type the file gives it (/api/v1/metadata);
- a host that is not compliant makes AemTuningDrift (and the read-ahead, readers and AEM alerts) pending, with their
  annotations rendered; a file node_exporter cannot parse makes AemTuningMetricsUnreadable pending;
- every query of the Grafana dashboard evaluates without an error, and returns series (its joins match the labels
  the files really carry: device, instance, job);
- a compliant textfile clears the drift alert.

Both programs listen on 127.0.0.1 only, on ports the kernel picked free, scrape and evaluate every second, and are
stopped by the test (each by its own process). It takes seconds. Needs the prometheus and prometheus-node-exporter
packages (make deps; installed without their recommends); elsewhere than in CI a missing one skips the test.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import socket
import subprocess
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

try:
    from urllib.parse import urlencode
    from urllib.request import urlopen
except ImportError:  # pragma: no cover (Python 2: the test runs on the controller's Python 3)
    pytest.skip('Python 3 only', allow_module_level=True)

import hosts
from ansible_collections.aemops.os_tuning.plugins.module_utils import metrics

NODE_EXPORTER = 'prometheus-node-exporter'
PROMETHEUS = 'prometheus'
# node_exporter's default --collector.diskstats.device-exclude: the devices it has no series for.
DISK_EXCLUDE = re.compile(r'^(ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$')
WAIT = 60  # seconds at most for any one state to show (it takes one or two)


def need(program):
    if shutil.which(program) is None:
        if os.environ.get('CI') == 'true':
            pytest.fail('%s is not installed (make deps) - required in CI' % program)
        pytest.skip('%s is not installed (apt-get install --no-install-recommends prometheus prometheus-node-exporter)'
                    % program)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def disk():
    """A block device of this machine that node_exporter's diskstats reports, so that the dashboard's join of
    node_disk_* with the collection's device label is proven on a real series; nvme1n1 (no such series) when none."""
    with open('/proc/diskstats') as f:
        names = [line.split()[2] for line in f if len(line.split()) > 3]
    found = [n for n in names if not DISK_EXCLUDE.match(n) and not n.startswith(('zram', 'sr'))]
    return found[0] if found else None


def get(url, params=None, timeout=5):
    with urlopen(url + ('?' + urlencode(params) if params else ''), timeout=timeout) as r:
        return json.loads(r.read().decode('utf-8'))


def wait_for(what, check, deadline=WAIT):
    end = time.time() + deadline
    last = None
    while time.time() < end:
        try:
            last = check()
            if last:
                return last
        except (OSError, ValueError) as e:  # not listening yet, a partial answer
            last = e
        time.sleep(0.25)
    raise AssertionError('%s: not within %d s (last: %r)' % (what, deadline, last))


class Stack(object):
    """node_exporter and Prometheus on 127.0.0.1, on a textfile directory under ``base``."""

    def __init__(self, base):
        self.base = base
        self.root = os.path.join(base, 'root')
        self.textfiles = os.path.join(self.root, hosts.TEXTFILE_DIR.lstrip('/'))
        self.procs = []
        self.logs = []

    def start(self, argv, name):
        log = open(os.path.join(self.base, name + '.log'), 'wb')
        self.logs.append(log)
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.base))
        return self.procs[-1]

    def up(self):
        node_port, prom_port = free_port(), free_port()
        self.node = 'http://127.0.0.1:%d' % node_port
        self.prom = 'http://127.0.0.1:%d' % prom_port
        self.start([NODE_EXPORTER, '--web.listen-address=127.0.0.1:%d' % node_port, '--collector.disable-defaults',
                    '--collector.textfile', '--collector.textfile.directory=' + self.textfiles,
                    '--collector.diskstats'], 'node_exporter')
        config = os.path.join(self.base, 'prometheus.yml')
        with open(config, 'w') as f:
            json.dump({'global': {'scrape_interval': '1s', 'evaluation_interval': '1s'},
                       'rule_files': [hosts.RULES],
                       'scrape_configs': [{'job_name': 'node',
                                           'static_configs': [{'targets': ['127.0.0.1:%d' % node_port]}]}]}, f)
        self.start([PROMETHEUS, '--config.file=' + config, '--storage.tsdb.path=' + os.path.join(self.base, 'data'),
                    '--web.listen-address=127.0.0.1:%d' % prom_port, '--log.level=warn'], 'prometheus')
        wait_for('node_exporter serves the textfile', lambda: b'aemops_os_tuning_compliant' in urlopen(
            self.node + '/metrics', timeout=5).read())
        wait_for('Prometheus is ready', lambda: urlopen(self.prom + '/-/ready', timeout=5).status == 200)

    def down(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()

    def log_tail(self):
        out = []
        for log in self.logs:
            with open(log.name, 'rb') as f:
                out.append('%s:\n%s' % (os.path.basename(log.name), f.read()[-2000:].decode('utf-8', 'replace')))
        return '\n'.join(out)

    def query(self, expr):
        answer = get(self.prom + '/api/v1/query', {'query': expr})
        assert answer['status'] == 'success', (expr, answer)
        return answer['data']['result']

    def alerts(self):
        return get(self.prom + '/api/v1/alerts')['data']['alerts']


@pytest.fixture
def stack(tmp_path):
    need(NODE_EXPORTER)
    need(PROMETHEUS)
    s = Stack(str(tmp_path))
    s.device = disk() or 'nvme1n1'
    s.has_disk = disk() is not None
    s.content = hosts.write(s.root, not_compliant(s.device), time.time())
    try:
        s.up()
        yield s
    except Exception:
        print(s.log_tail())
        raise
    finally:
        s.down()


def not_compliant(device):
    return hosts.facts(device=device, read_ahead_kb=4096, thp='always', stale=1, restart=1, aem_kib=4090.0,
                       exceeded={'ebs_volume_performance_exceeded_tp': 10 ** 9})


def active(stack, name):
    return [a for a in stack.alerts() if a['labels']['alertname'] == name and a['state'] in ('pending', 'firing')]


def dashboard_queries():
    with open(hosts.DASHBOARD) as f:
        dash = json.load(f)
    for panel in dash['panels']:
        for target in panel.get('targets', []):
            yield panel['title'], target['expr'].replace('$instance', '.*').replace('$__rate_interval', '1m')


def test_a_real_scrape_of_the_textfile_with_the_rules_loaded(stack):
    # The families, with their types, as the scrape gave them to Prometheus.
    written = dict((f.name, f.type) for f in text_string_to_metric_families(stack.content))
    want = {}
    for name in re.findall(r'^# TYPE (\S+) (\S+)$', stack.content, re.M):
        want[name[0]] = name[1]
    assert len(want) == len(written) and set(want) == set(
        n for n in metrics.NAMES if '\n%s' % n in stack.content), want

    def metadata():
        found = get(stack.prom + '/api/v1/metadata')['data']
        return found if set(want) <= set(found) else None

    def stored():
        found = set(r['metric']['__name__'] for r in stack.query('{__name__=~"aemops_os_tuning_.*"}'))
        return found if found >= set(want) else None

    meta = wait_for('the metadata of every family', metadata)
    for name, kind in want.items():
        assert [m['type'] for m in meta[name]] == [kind], (name, meta[name])
    assert wait_for('every family in the TSDB', stored) == set(want)

    # Not compliant: the drift alerts go pending (for: 15m), with their annotations rendered.
    for name in ('AemTuningDrift', 'AemReadAheadNotAsWanted', 'AemThpNotAsWanted', 'AemReadersAtEarlierReadAhead',
                 'AemReadAmplification'):
        found = wait_for(name + ' pending', lambda n=name: active(stack, n))
        for alert in found:
            notes = alert['annotations']
            assert '127.0.0.1' in notes['summary'] and '<no value>' not in notes['summary'] + notes['description']
            assert notes['runbook_url'].endswith('#' + name.lower())
    ra = active(stack, 'AemReadAheadNotAsWanted')
    assert [a['labels']['device'] for a in ra] == [stack.device]
    assert 'reads ahead 4MiB' in ra[0]['annotations']['summary'], ra[0]['annotations']
    assert not active(stack, 'AemTuningAuditStale') and not active(stack, 'AemTuningMetricsUnreadable')

    # Every query of the dashboard, against this Prometheus: no error, and series (the joins match).
    wait_for('the recording rules', lambda: stack.query('aemops_os_tuning:ebs_exceeded_seconds:rate3h')
             and stack.query('aemops_os_tuning:aem_read_bytes_per_fault:limit'))
    empty = []
    for title, expr in dashboard_queries():
        if not stack.query(expr):
            empty.append((title, expr))
    if not stack.has_disk:  # no disk node_exporter reports on this machine: that join cannot be proven here
        empty = [e for e in empty if 'node_disk_' not in e[1]]
    assert not empty, 'dashboard queries without a series: %s' % empty

    # A file node_exporter cannot parse.
    broken = os.path.join(stack.textfiles, 'broken.prom')
    with open(broken, 'w') as f:
        f.write('this is not a metric\n')
    wait_for('AemTuningMetricsUnreadable pending', lambda: active(stack, 'AemTuningMetricsUnreadable'))
    os.unlink(broken)

    # Compliant: the drift alert clears.
    hosts.write(stack.root, hosts.facts(device=stack.device, aem_kib=30.0), time.time())
    wait_for('AemTuningDrift cleared', lambda: not active(stack, 'AemTuningDrift')
             and not active(stack, 'AemReadAheadNotAsWanted') and not active(stack, 'AemReadAmplification'))
    assert stack.query('aemops_os_tuning_compliant == 1')
