# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The role's task files import each other safely.

A task file that a role's main.yml imports, and that itself imports another by a bare name
(``import_tasks: metrics.yml``), gets ``tasks/metrics.yml`` from the playbook's directory when the
playbook has one, not the role's own (ansible-core 2.16, 2.19 and 2.21, tried on a two-file role).
An operator's playbook with a tasks/aem_start.yml would then run its own file inside the role's
reboot. So every import below main.yml names its file by ``role_path``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest

TASKS = os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, os.pardir, os.pardir,
                     'roles', 'aem_tuning', 'tasks')
IMPORT = re.compile(r'^\s*(?:ansible\.builtin\.)?(import_tasks|include_tasks):\s*(?P<target>.+?)\s*$')


def nested_files():
    return sorted(name for name in os.listdir(TASKS) if name.endswith('.yml') and name != 'main.yml')


@pytest.mark.parametrize('name', nested_files())
def test_imports_below_main_name_their_file_by_role_path(name):
    with open(os.path.join(TASKS, name)) as f:
        for number, line in enumerate(f, 1):
            found = IMPORT.match(line)
            if found:
                target = found.group('target').strip('"\'')
                assert target.startswith('{{ role_path }}/tasks/'), '%s:%d imports %s' % (name, number, target)
                assert os.path.isfile(os.path.join(TASKS, target[len('{{ role_path }}/tasks/'):]))


def imports(name):
    with open(os.path.join(TASKS, name)) as f:
        return [line for line in f if IMPORT.match(line)]


def test_the_check_sees_the_nested_imports():
    assert [name for name in nested_files() if imports(name)] == ['reboot.yml', 'verify.yml']
