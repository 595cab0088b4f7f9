# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The aem_tuning role's decisions as filters: the role registers what its steps return and passes the records
here; plugins/plugin_utils/role_result.py decides, and plugins/plugin_utils/aem_reports.py words the role's two
summaries in the play's output (``summary_before``, ``result_brief``). Each filter's documentation is in the .yml
file of its name."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aemops.os_tuning.plugins.plugin_utils import aem_reports, role_result


def _settings(function):
    """``function(steps, settings)`` as a filter whose settings default to those the steps carry (the lookup
    aemops.os_tuning.aem_tuning's ``steps`` has them), so that a task passes one value."""
    def with_settings(steps, settings=None):
        return function(steps, settings if settings is not None else steps.get('settings') or {})
    with_settings.__doc__ = function.__doc__
    return with_settings


def run_start(steps, settings=None):
    settings = settings if settings is not None else steps.get('settings') or {}
    return role_result.run_start(steps.get('facts_before'), settings)


def intent(steps):
    return role_result.intent(steps.get('settings') or {})


def reboot_decision(steps, settings=None):
    settings = settings if settings is not None else steps.get('settings') or {}
    return role_result.do_reboot(settings.get('reboot'), steps.get('thp'))


class FilterModule(object):
    """aemops.os_tuning's filters for the aem_tuning role."""

    def filters(self):
        return {
            'intent': intent,
            'run_start': run_start,
            'with_failure': role_result.with_failure,
            'change_failure': role_result.change_failure,
            'aem_record': _settings(role_result.aem_record),
            'aem_restart': _settings(role_result.aem_restart),
            'reboot_decision': reboot_decision,
            'must_reread': _settings(role_result.must_reread),
            'facts_after': _settings(role_result.facts_after),
            'intent_after': _settings(role_result.intent_after),
            'lost_in_verify': role_result.lost_in_verify,
            'verified': _settings(role_result.verified),
            'metrics_args': _settings(role_result.metrics_args),
            'summary_before': aem_reports.summary_before_lines,
            'result_brief': aem_reports.result_brief_lines,
        }
