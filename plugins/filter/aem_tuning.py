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


def step_failure(failed_result, task_name, phase, at=None, first_error=''):
    return role_result.step_failure(failed_result, task_name, phase, at=at, first_error=first_error)


def lost_at_change(failed_result, failed_task, steps, at):
    return role_result.lost_at_change(failed_task, failed_result, steps, at)


def aem_record(steps, settings):
    return role_result.aem_record(steps, settings)


def aem_needs_restart(read_ahead, unit):
    return role_result.aem_needs_restart(read_ahead, unit)


def reboot_decision(requested, thp):
    return role_result.do_reboot(requested, thp)


def must_reread(steps, settings):
    return role_result.must_reread(steps, settings)


def verified(steps, settings):
    """The facts the run ends with, the result, and comply.yml's verdict, in one mapping."""
    after = role_result.facts_after(steps, settings)
    out = role_result.result(steps, settings)
    ok, text = role_result.verdict(out, role_result.failing_misses(steps, settings))
    return {'facts': after, 'result': out, 'ok': ok, 'text': text, 'report_note': role_result.report_note(out)}


def intent_after(steps, intent):
    return role_result.intent_after(steps, intent)


def lost_in_verify(steps, at):
    return role_result.lost_in_verify(steps, at)


def facts_after(steps, settings):
    return role_result.facts_after(steps, settings)


class FilterModule(object):
    """aemops.os_tuning's filters for the aem_tuning role."""

    def filters(self):
        return {
            'run_start': run_start,
            'step_failure': step_failure,
            'lost_at_change': lost_at_change,
            'aem_record': aem_record,
            'aem_needs_restart': aem_needs_restart,
            'reboot_decision': reboot_decision,
            'must_reread': must_reread,
            'facts_after': facts_after,
            'intent_after': intent_after,
            'lost_in_verify': lost_in_verify,
            'verified': verified,
        }
