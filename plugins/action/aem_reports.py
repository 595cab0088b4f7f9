# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's reports on the controller (documentation: plugins/modules/aem_reports.py).

An action plugin, not a script the role runs: the hosts' results and full facts go from the play's host variables
to the renderer (plugin_utils/aem_reports.py) in the controller's memory, never through a command line, stdin, a
payload file or the task's arguments and result, which the job events keep. The renderer imports the collection's
module_utils (module_utils/aem.py) as any plugin does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.aemops.os_tuning.plugins.plugin_utils import aem_reports

ARGUMENT_SPEC = {
    'directory': {'type': 'path', 'required': True},
    'source': {'type': 'str', 'default': 'play', 'choices': ['play', 'cache']},
    'host_reports': {'type': 'bool', 'default': False},
}


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result['changed'] = False
        if self._task.check_mode:
            result.update(skipped=True, msg='check mode writes no report')
            return result
        hostvars = task_vars.get('hostvars') or {}
        hosts = list(task_vars.get('ansible_play_hosts_all') or [])
        if args['source'] == 'cache':
            payload = aem_reports.cache_payload(hostvars, hosts, args['host_reports'])
        else:
            payload = aem_reports.play_payload(hostvars, hosts, task_vars.get('ansible_play_batch') or [],
                                               task_vars.get('ansible_play_name'))
        try:
            written = aem_reports.render(args['directory'], payload)
        except (IOError, OSError) as e:
            result.update(failed=True, msg='the reports could not be written in %s: %s' % (args['directory'], e))
            return result
        count = sum(1 for r in payload['results'].values() if r)
        result.update(written, hosts=len(hosts), with_result=count, msg='%s/summary.md and summary.json: %d of %d hosts '
                      'with a%s result' % (args['directory'], count, len(hosts), ' cached' if args['source'] == 'cache' else ''))
        return result
