# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What AEM is, and how a process is named: one rule and one format for the modules, the role's result builder
and the reports.

A process is AEM when its systemd unit is the unit the role manages (``aem_tuning_aem_service``), given with or
without its ``.service`` suffix: that is the only thing the role knows of AEM, and what it stops, starts and
restarts. A process of any other unit (or of none) is another reader, whatever its command.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

SUFFIX = '.service'


def unit_names(unit):
    """The names a process's unit may carry for the managed ``unit`` (``aem`` and ``aem.service``); none when no
    unit is managed."""
    if not unit:
        return ()
    base = unit[:-len(SUFFIX)] if unit.endswith(SUFFIX) else unit
    return (base, base + SUFFIX)


def is_aem(process, unit):
    """Whether ``process`` (a mapping with ``unit``) runs in AEM's ``unit``."""
    return bool(unit) and (process or {}).get('unit') in unit_names(unit)


def label(process):
    """``pid 1234 (java, aem.service)``: a process as every message, miss and report names it."""
    process = process or {}
    unit = process.get('unit')
    return 'pid %s (%s%s)' % (process.get('pid'), process.get('comm'), ', %s' % unit if unit else '')
