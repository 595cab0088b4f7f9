# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The maintenance window's decisions as filters, for playbooks/aem-window.yml: the playbook registers what its steps
return and passes the records here; plugins/plugin_utils/aem_window.py decides. Each filter's documentation is in the
.yml file of its name."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aemops.os_tuning.plugins.plugin_utils import aem_window


def aem_window_closed(registered, plan, step='close'):
    return aem_window.closed(registered, plan, step)


class FilterModule(object):
    """aemops.os_tuning's filters for playbooks/aem-window.yml."""

    def filters(self):
        return {
            'aem_window_plan': aem_window.plan,
            'aem_window_closed': aem_window_closed,
            'aem_window_result': aem_window.result,
        }
