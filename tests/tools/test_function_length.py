# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""No Python function outside tests/ is longer than 60 lines: plugins/, roles/, bench/, scripts/ and any other
directory of the tree, and scripts without ``.py`` whose first line names a Python (issue 38 extended the rule from
plugins/, where the review of issue 34 had split four functions). Lines from ``def`` to the function's last line,
docstring included; nested functions count within the function that holds them and on their own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
LIMIT = 60
# tests/ is left out by the rule; the rest are not the project's sources (venvs, caches, the collection link, outputs).
SKIP = ('tests', 'node_modules')


def is_python(path):
    if path.endswith('.py'):
        return True
    try:
        with open(path, 'rb') as f:
            first = f.readline(200)
    except (IOError, OSError):
        return False
    return first.startswith(b'#!') and b'python' in first


def python_files(directory):
    for base, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith('.') and d not in SKIP)
        for name in sorted(names):
            path = os.path.join(base, name)
            if os.path.isfile(path) and not os.path.islink(path) and is_python(path):
                yield path


def long_functions(directory):
    found = []
    for path in python_files(directory):
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LIMIT:
                    found.append('%s: %s, %d lines' % (os.path.relpath(path, directory), node.name, length))
    return found


def test_no_function_outside_tests_is_over_60_lines():
    assert long_functions(TOP) == []


def test_the_check_covers_every_source_directory():
    checked = set(os.path.relpath(p, TOP).split(os.sep)[0] for p in python_files(TOP))
    assert {'plugins', 'roles', 'bench', 'scripts'} <= checked
    assert 'tests' not in checked
    assert os.path.join(TOP, 'scripts', 'failure-excerpt.py') in set(python_files(os.path.join(TOP, 'scripts')))


def test_the_check_sees_a_long_function(tmp_path):
    (tmp_path / 'm.py').write_text(u'def f():\n' + u'    x = 1\n' * LIMIT)
    (tmp_path / 'ok.py').write_text(u'def g():\n' + u'    x = 1\n' * (LIMIT - 1))
    (tmp_path / 'tool').write_text(u'#!/usr/bin/env python3\ndef h():\n' + u'    x = 1\n' * LIMIT)
    (tmp_path / 'notes').write_text(u'def i():\n' + u'    x = 1\n' * LIMIT)
    (tmp_path / 'tests').mkdir()
    (tmp_path / 'tests' / 't.py').write_text(u'def t():\n' + u'    x = 1\n' * LIMIT)
    found = long_functions(str(tmp_path))
    assert sorted(found) == ['m.py: f, 61 lines', 'tool: h, 61 lines']
