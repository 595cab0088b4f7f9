# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The role keeps no lazy state: vars/main.yml holds constants only.

A templated role variable is evaluated each time it is read, so before issue 21 ``__aem_tuning_read_ahead_kb`` was
``auto`` in before.yml and a number after apply.yml, and the run's decisions were made in Jinja. They are made in
Python now (tuning_facts' plan.read_ahead) and kept once with set_fact.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

VARS = os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, os.pardir, os.pardir,
                    'roles', 'aem_tuning', 'vars', 'main.yml')


def test_vars_main_holds_constants_only():
    # Read as text (the compat Pythons, 2.7 and 3.6, run this too, without PyYAML): no template anywhere, and each
    # top-level key internal.
    with open(VARS) as f:
        text = f.read()
    keys = re.findall(r'^([^\s#-][^:]*):', text, re.M)
    assert keys and all(k.startswith('__aem_tuning_') for k in keys), keys
    assert '{{' not in text and '{%' not in text
