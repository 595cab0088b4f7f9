# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every conditional in the collection's YAML is a string (or a bare boolean).

An unquoted ``- x is search('aemvm: debian 11')`` is a mapping in YAML (the ``: `` inside the
quotes of the Jinja test does not protect it). ansible-core 2.16 took such a mapping as true, so two
assertions of the upgrade scenario could never fail; 2.19 and later refuse it ("Conditional
expressions must be strings"), which is how molecule/controllers found the third.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest
import yaml

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
KEYS = ('that', 'when', 'failed_when', 'changed_when', 'until')


def yaml_files():
    found = []
    for pattern in ('molecule/**/*.yml', 'roles/**/*.yml', 'playbooks/*.yml', 'tests/roles/**/*.yml'):
        found.extend(glob.glob(os.path.join(TOP, pattern), recursive=True))
    return sorted(os.path.relpath(path, TOP) for path in found)


def broken(node, where=''):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in KEYS:
                for item in value if isinstance(value, list) else [value]:
                    if not isinstance(item, (str, bool)):
                        yield '%s/%s: %r' % (where, key, item)
            yield from broken(value, '%s/%s' % (where, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from broken(item, '%s[%d]' % (where, index))


def test_there_are_files_to_check():
    assert len(yaml_files()) > 40


@pytest.mark.parametrize('name', yaml_files())
def test_every_conditional_is_a_string(name):
    with open(os.path.join(TOP, name)) as f:
        data = yaml.safe_load(f)
    assert list(broken(data)) == []


def test_the_check_finds_an_unquoted_colon():
    data = yaml.safe_load("- assert:\n    that:\n      - out is search('aemvm: debian 11')\n")
    assert len(list(broken(data))) == 1
