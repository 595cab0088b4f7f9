# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""No function in plugins/ is longer than 60 lines (review of issue 34 split the four that were: sweep.random_phase,
sweep.volume_caps, tuned._parse_configparser, tuned.plan_child). Lines from ``def`` to the function's last line,
docstring included; nested functions count within the function that holds them and on their own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
LIMIT = 60


def long_functions(directory):
    found = []
    for base, _dirs, names in os.walk(directory):
        for name in sorted(names):
            if not name.endswith('.py'):
                continue
            path = os.path.join(base, name)
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > LIMIT:
                        found.append('%s: %s, %d lines' % (os.path.relpath(path, TOP), node.name, length))
    return found


def test_no_function_in_plugins_is_over_60_lines():
    assert long_functions(os.path.join(TOP, 'plugins')) == []


def test_the_check_sees_a_long_function(tmp_path):
    (tmp_path / 'm.py').write_text(u'def f():\n' + u'    x = 1\n' * LIMIT)
    (tmp_path / 'ok.py').write_text(u'def g():\n' + u'    x = 1\n' * (LIMIT - 1))
    found = long_functions(str(tmp_path))
    assert len(found) == 1 and found[0].endswith(': f, 61 lines')
