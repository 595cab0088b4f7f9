# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import aem


@pytest.mark.parametrize('unit, managed, expected', [
    ('aem.service', 'aem', True),
    ('aem', 'aem.service', True),
    ('aem.service', 'aem.service', True),
    ('aem-author.service', 'aem', False),   # another unit whose name begins the same
    ('crond.service', 'aem', False),
    (None, 'aem', False),
    ('aem.service', '', False),             # no unit managed: nothing is AEM
])
def test_a_process_is_aem_by_the_managed_unit_only(unit, managed, expected):
    assert aem.is_aem({'pid': 7, 'comm': 'java', 'unit': unit}, managed) is expected


def test_a_process_is_named_one_way():
    assert aem.label({'pid': 1234, 'comm': 'java', 'unit': 'aem.service'}) == 'pid 1234 (java, aem.service)'
    assert aem.label({'pid': 9, 'comm': 'bash', 'unit': None}) == 'pid 9 (bash)'
