# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's host-side scripts, run as the role runs them (a Python on the host, arguments on the command line).

wait_aem.py gets fake ``systemctl`` and ``journalctl`` executables on PATH that report a unit
state from a file, and a real HTTP server on 127.0.0.1. scan_aem_log.py gets an error.log. boot_clock.py gets a
fake /proc, and this host's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

try:
    from http.server import BaseHTTPRequestHandler, HTTPServer
except ImportError:  # Python 2.7
    from BaseHTTPServer import BaseHTTPRequestHandler, HTTPServer

FILES = os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, os.pardir, os.pardir,
                     'roles', 'aem_tuning', 'files')
WAIT = os.path.join(FILES, 'wait_aem.py')
SCAN = os.path.join(FILES, 'scan_aem_log.py')
CLOCK = os.path.join(FILES, 'boot_clock.py')

FAKE_SYSTEMCTL = """#!/bin/sh
# systemctl show UNIT --no-pager --property=...: the state kept in $FAKE_UNIT_STATE
cat "$FAKE_UNIT_STATE"
"""
FAKE_JOURNALCTL = """#!/bin/sh
echo "2026-12-01T10:00:00+0000 host systemd[1]: aem.service: Main process exited, code=exited, status=1/FAILURE"
echo "2026-12-01T10:00:00+0000 host systemd[1]: aem.service: Failed with result 'exit-code'."
"""
ACTIVE = 'ActiveState=active\nSubState=running\nResult=success\nStateChangeTimestamp=Tue 2026-12-01 10:00:00 UTC\n'
FAILED = 'ActiveState=failed\nSubState=failed\nResult=exit-code\nStateChangeTimestamp=Tue 2026-12-01 10:00:01 UTC\n'
RESTARTING = 'ActiveState=activating\nSubState=auto-restart\nResult=exit-code\nStateChangeTimestamp=x\n'


@pytest.fixture
def fake_systemd(tmpdir):
    bin_dir = tmpdir.mkdir('bin')
    for name, text in (('systemctl', FAKE_SYSTEMCTL), ('journalctl', FAKE_JOURNALCTL)):
        path = bin_dir.join(name)
        path.write(text)
        path.chmod(0o755)
    state = tmpdir.join('state')
    state.write(ACTIVE)
    env = dict(os.environ, PATH='%s:%s' % (bin_dir, os.environ.get('PATH', '')), FAKE_UNIT_STATE=str(state))
    return env, state


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def server():
    """An HTTP server on 127.0.0.1 that answers with ``server.status`` (503 until AEM is 'up')."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(httpd.status)
            self.end_headers()
            self.wfile.write(b'ok')

        def log_message(self, *args):
            pass

    httpd = HTTPServer(('127.0.0.1', 0), Handler)
    httpd.status = 503
    thread = threading.Thread(target=httpd.serve_forever)
    thread.daemon = True
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def wait(env, url, timeout):
    start = time.time()
    proc = subprocess.Popen([sys.executable, WAIT, 'aem.service', url, str(timeout)], stdout=subprocess.PIPE,
                            env=env)
    out = proc.communicate()[0]
    return proc.returncode, json.loads(out.decode('utf-8')), time.time() - start


def test_aem_up_succeeds(fake_systemd, server):
    env, _state = fake_systemd
    server.status = 200
    rc, result, _took = wait(env, 'http://127.0.0.1:%d/login' % server.server_port, 30)
    assert rc == 0 and result['ok'] is True
    assert result['message'].startswith('AEM answered 200 at http://127.0.0.1:')
    # The times the role's result and report show, on the host's clock (UTC)
    assert result['status'] == 200 and result['url'] == 'http://127.0.0.1:%d/login' % server.server_port
    assert result['started'].endswith('Z') and result['answered'].endswith('Z')
    assert result['started'] <= result['answered']


def test_a_failed_unit_fails_at_once_naming_it_with_its_journal(fake_systemd):
    env, state = fake_systemd
    state.write(FAILED)
    rc, result, took = wait(env, 'http://127.0.0.1:%d/login' % free_port(), 600)
    assert rc == 1 and took < 10
    assert result['message'].startswith('AEM did not come back: aem.service is failed (failed, result exit-code) '
                                        'since Tue 2026-12-01 10:00:01 UTC')
    assert "Failed with result 'exit-code'" in result['message']
    assert len(result['journal']) == 2


def test_a_unit_waiting_to_restart_counts_as_dead(fake_systemd):
    env, state = fake_systemd
    state.write(RESTARTING)
    rc, result, _took = wait(env, 'http://127.0.0.1:%d/login' % free_port(), 600)
    assert rc == 1 and 'aem.service is activating (auto-restart' in result['message']


def test_a_unit_that_dies_while_waiting_ends_the_wait(fake_systemd, server):
    env, state = fake_systemd
    threading.Timer(1.5, lambda: state.write(FAILED)).start()
    rc, result, took = wait(env, 'http://127.0.0.1:%d/login' % server.server_port, 600)
    assert rc == 1 and 'aem.service is failed' in result['message'] and took < 15


def test_a_dead_url_times_out_saying_what_it_waited_for(fake_systemd, server):
    env, _state = fake_systemd
    url = 'http://127.0.0.1:%d/login' % server.server_port
    rc, result, took = wait(env, url, 3)
    assert rc == 1 and 3 <= took < 15
    assert result['status'] == 503 and result['answered'] is None and result['started'].endswith('Z')
    assert result['message'] == ('AEM did not come back: %s did not answer 200 within 3 s (last: HTTP 503), while '
                                 'aem.service stayed active; raise aem_tuning_aem_timeout if AEM needs longer to '
                                 'start' % url)


LOG = """30.11.2026 09:00:00.000 *WARN* [pool] LockBasedScheduler This commit is blocked by a commit that is in progress since 61000 ms
01.12.2026 10:00:00.000 *WARN* [pool] LockBasedScheduler This commit is blocked by a commit that is in progress since 70000 ms
01.12.2026 10:30:00.000 *WARN* [pool] Failed to create checkpoint 0b1 in 10 seconds.
01.12.2026 12:00:00.000 *WARN* [pool] LockBasedScheduler This commit is blocked by a commit that is in progress since 60500 ms
"""


def epoch(text):
    return time.mktime(time.strptime(text, '%d.%m.%Y %H:%M:%S'))


def test_the_log_window_is_from_the_start_to_the_end_of_the_run(tmpdir):
    log = tmpdir.join('error.log')
    log.write(LOG)
    out = subprocess.check_output([sys.executable, SCAN, str(log), str(epoch('01.12.2026 09:59:00')),
                                   str(epoch('01.12.2026 11:00:00'))])
    result = json.loads(out.decode('utf-8'))
    assert result['total'] == {'commit_blocked': 3, 'checkpoint_failed': 1}
    # 09:00 the day before is before the run; 12:00 is after its end (a future-dated line).
    assert result['since_run'] == {'commit_blocked': 1, 'checkpoint_failed': 1}


def test_a_missing_log_is_reported(tmpdir):
    out = subprocess.check_output([sys.executable, SCAN, str(tmpdir.join('none.log')), '0'])
    assert 'error' in json.loads(out.decode('utf-8'))


def test_boot_clock_reads_the_boot_id_and_boot_time(tmpdir):
    tmpdir.join('proc', 'sys', 'kernel', 'random').ensure(dir=True)
    tmpdir.join('proc', 'sys', 'kernel', 'random', 'boot_id').write('0f8e-boot\n')
    tmpdir.join('proc', 'stat').write('cpu  1 2 3\nbtime 1796219953\nprocesses 5\n')
    out = subprocess.check_output([sys.executable, CLOCK, str(tmpdir) + '/'])
    data = json.loads(out.decode('utf-8'))
    assert data['boot_id'] == '0f8e-boot'
    assert data['booted_epoch'] == 1796219953 and data['booted'] == '2026-12-02T13:59:13Z'
    assert data['iso'].endswith('Z') and data['epoch'] > 1796219953


@pytest.mark.skipif(not os.path.exists('/proc/sys/kernel/random/boot_id'), reason='not Linux')
def test_boot_clock_on_this_host():
    data = json.loads(subprocess.check_output([sys.executable, CLOCK]).decode('utf-8'))
    with open('/proc/sys/kernel/random/boot_id') as f:
        assert data['boot_id'] == f.read().strip()
