#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Wait for AEM to answer 200 at a URL while its systemd unit stays up.

Usage: wait_aem.py UNIT URL TIMEOUT_SECONDS. Prints one JSON object: ok, message, waited,
started (when the wait began, right after the unit was started) and answered (when the URL
answered 200, or null), both on the host's clock in UTC, status (the last HTTP status, or
null), and on failure the unit's state and its last journal lines. Exit code 0 when AEM answered.
Before every poll the unit is checked: a unit that failed, stopped or is waiting to restart
ends the wait at once. Runs on Python 2.7 and 3.
"""
from __future__ import absolute_import, division, print_function

import json
import subprocess
import sys
import time

try:
    from urllib.request import urlopen
    from urllib.error import HTTPError, URLError
except ImportError:  # Python 2.7 (RHEL 7). A plain script on the host: ansible.module_utils is not there.
    _urllib2 = __import__('urllib2')
    urlopen, HTTPError, URLError = _urllib2.urlopen, _urllib2.HTTPError, _urllib2.URLError

PROPERTIES = ('ActiveState', 'SubState', 'Result', 'StateChangeTimestamp', 'NRestarts')
DEAD_STATES = ('failed', 'inactive', 'deactivating')
JOURNAL_LINES = 20


def output(argv):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.communicate()[0]
    return out.decode('utf-8', 'replace')


def unit_state(unit):
    argv = ['systemctl', 'show', unit, '--no-pager'] + ['--property=%s' % p for p in PROPERTIES]
    state = {}
    for line in output(argv).splitlines():
        key, _sep, value = line.partition('=')
        state[key] = value
    return state


def dead(state):
    return state.get('ActiveState') in DEAD_STATES or state.get('SubState') == 'auto-restart'


def poll(url):
    """The HTTP status of url, or a text saying why there was none."""
    try:
        return urlopen(url, timeout=10).getcode(), None
    except HTTPError as e:
        return e.code, None
    except (URLError, IOError, OSError) as e:
        return None, str(getattr(e, 'reason', e))


def iso(epoch):
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(epoch))


def main(unit, url, timeout):
    result = wait(unit, url, timeout)
    result['url'] = url
    return result


def wait(unit, url, timeout):
    start = time.time()
    last = 'no answer yet'
    status = None
    delay = 1
    while True:
        state = unit_state(unit)
        if dead(state):
            journal = output(['journalctl', '-u', unit, '-n', str(JOURNAL_LINES), '--no-pager', '-o', 'short-iso'])
            return {'ok': False, 'waited': round(time.time() - start, 1), 'unit': state,
                    'started': iso(start), 'answered': None, 'status': status,
                    'journal': journal.splitlines(),
                    'message': 'AEM did not come back: %s is %s (%s, result %s) since %s, %.0f s after it was started; '
                               'its last journal lines: %s'
                               % (unit, state.get('ActiveState'), state.get('SubState'), state.get('Result'),
                                  state.get('StateChangeTimestamp') or '?', time.time() - start,
                                  ' | '.join(journal.strip().splitlines()[-5:]))}
        status, reason = poll(url)
        if status == 200:
            now = time.time()
            return {'ok': True, 'waited': round(now - start, 1), 'unit': state,
                    'started': iso(start), 'answered': iso(now), 'status': status,
                    'message': 'AEM answered 200 at %s after %.0f s' % (url, time.time() - start)}
        last = 'HTTP %s' % status if status is not None else reason
        remaining = start + timeout - time.time()
        if remaining <= 0:
            return {'ok': False, 'waited': round(time.time() - start, 1), 'unit': state,
                    'started': iso(start), 'answered': None, 'status': status,
                    'message': 'AEM did not come back: %s did not answer 200 within %d s (last: %s), while %s stayed '
                               '%s; raise aem_tuning_aem_timeout if AEM needs longer to start'
                               % (url, timeout, last, unit, state.get('ActiveState'))}
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 10)


if __name__ == '__main__':
    result = main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    print(json.dumps(result))
    sys.exit(0 if result['ok'] else 1)
