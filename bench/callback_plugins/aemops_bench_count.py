# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make bench: one JSON line per task result, saying whether the task executed on the target.

Enabled by bench/run.sh and bench/fleet.py only (ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins,
ANSIBLE_CALLBACKS_ENABLED=aemops_bench_count); writes to the file named by BENCH_COUNT_OUT. With
BENCH_ARTIFACT_OUT, also the size of the run's set_stats artifact (what AAP stores and hands to the
next workflow node) at the end: one JSON object, ``bytes`` (the whole artifact as JSON) and, for
``aem_tuning_result``, ``per_host_bytes`` (each host's result as JSON).

A result counts as an execution on the target unless
- the action runs on the controller only (set_fact, assert, debug, fail, meta, include/import
  of tasks, roles or variables, add_host, group_by, pause, validate_argument_spec (the role's
  argument spec check), ...), or
- the task was delegated to a host whose connection is ``local`` (the role's report tasks), or
- it was skipped.
Loop tasks count once per item that ran (the items' results), not once for the loop.

One action may run several modules on the target (``copy`` runs ``stat`` and then ``copy`` or
``file``); this plugin counts tasks as the playbook author sees them. bench/run.sh counts the
module processes in the guest as well (a logging interpreter shim); the two are reported side by
side.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = '''
name: aemops_bench_count
type: aggregate
short_description: counts the task results that executed on the target (make bench only)
description:
  - Writes one JSON line per task result to the file named by the environment variable
    C(BENCH_COUNT_OUT), and the size of the set_stats artifact to C(BENCH_ARTIFACT_OUT) when set.
options: {}
'''

import json
import os
import time

from ansible.plugins.callback import CallbackBase

CONTROLLER_ACTIONS = frozenset([
    'add_host', 'assert', 'debug', 'fail', 'group_by', 'import_playbook', 'import_role', 'import_tasks',
    'include', 'include_role', 'include_tasks', 'include_vars', 'meta', 'pause', 'set_fact', 'set_stats',
    'validate_argument_spec',
])


# The names the role's report tasks delegate to: the controller, whose connection is local.
CONTROLLER_NAMES = ('localhost', '127.0.0.1')


def short_action(action):
    """``ansible.builtin.set_fact`` and ``ansible.legacy.set_fact`` -> ``set_fact``; collection modules keep their name."""
    for prefix in ('ansible.builtin.', 'ansible.legacy.'):
        if action.startswith(prefix):
            return action[len(prefix):]
    return action


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'aemops_bench_count'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._out = os.environ.get('BENCH_COUNT_OUT')
        self._started = {}

    def _write(self, record):
        if not self._out:
            return
        with open(self._out, 'a') as f:
            f.write(json.dumps(record, sort_keys=True) + '\n')

    def v2_runner_on_start(self, host, task):
        self._started[(host.get_name(), task._uuid)] = time.time()

    def _record(self, result, status, item=False):
        task = result._task
        action = short_action(task.action)
        delegated = result._result.get('_ansible_delegated_vars') or {}
        # A loop's own result (not its items') carries no _ansible_delegated_vars: the task says.
        local = (delegated.get('ansible_connection') in ('local', 'ansible.builtin.local')
                 or (not delegated and task.delegate_to in CONTROLLER_NAMES))
        loop_summary = not item and isinstance(result._result.get('results'), list)
        on_target = status != 'skipped' and action not in CONTROLLER_ACTIONS and not local and not loop_summary
        start = self._started.get((result._host.get_name(), task._uuid))
        record = {
            'task': task.get_name(),
            'action': action,
            'host': result._host.get_name(),
            'status': status,
            'changed': bool(result._result.get('changed')),
            'item': item,
            'loop_summary': loop_summary,
            'delegated_local': local,
            'run_once': bool(task.run_once),
            'on_target': on_target,
        }
        if not item and start is not None:
            record['seconds'] = round(time.time() - start, 3)
        self._write(record)

    def v2_runner_on_ok(self, result):
        self._record(result, 'ok')

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, 'failed')

    def v2_runner_on_skipped(self, result):
        self._record(result, 'skipped')

    def v2_runner_on_unreachable(self, result):
        self._record(result, 'unreachable')

    def v2_runner_item_on_ok(self, result):
        self._record(result, 'ok', item=True)

    def v2_runner_item_on_failed(self, result):
        self._record(result, 'failed', item=True)

    def v2_runner_item_on_skipped(self, result):
        self._record(result, 'skipped', item=True)

    def v2_playbook_on_stats(self, stats):
        out = os.environ.get('BENCH_ARTIFACT_OUT')
        if not out:
            return
        # set_stats with per_host: false: the run's data under '_run', as ansible-runner's artifact_data has it.
        data = (getattr(stats, 'custom', None) or {}).get('_run') or {}
        results = data.get('aem_tuning_result') or {}
        with open(out, 'w') as f:
            json.dump({'bytes': len(json.dumps(data, default=str)),
                       'per_host_bytes': dict((h, len(json.dumps(r, default=str))) for h, r in results.items())}, f)
