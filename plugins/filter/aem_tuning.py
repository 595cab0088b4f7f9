# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The aem_tuning role's decisions as filters: the role registers what its steps return and passes the records
here; plugins/plugin_utils/role_result.py decides. Each filter's documentation is in the .yml file of its name."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result


def run_start(registered, probe=False, state='present'):
    return role_result.run_start(registered, {'probe': probe, 'state': state})


def lost_at_change(failed_result, failed_task, steps, at):
    return role_result.lost_at_change(failed_task, failed_result, steps, at)


class FilterModule(object):
    """aemops.os_tuning's filters for the aem_tuning role."""

    def filters(self):
        return {
            'run_start': run_start,
            'step_failure': role_result.step_failure,
            'lost_at_change': lost_at_change,
            'aem_record': role_result.aem_record,
            'aem_needs_restart': role_result.aem_needs_restart,
            'reboot_decision': role_result.do_reboot,
            'must_reread': role_result.must_reread,
            'facts_after': role_result.facts_after,
            'intent_after': role_result.intent_after,
            'lost_in_verify': role_result.lost_in_verify,
            'verified': role_result.verified,
        }
