# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for thp.baseline_problems: a hand-edited THP baseline is checked before it is restored."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import thp
from fakehost import FakeHost

GOOD = {'enabled': 'always', 'defrag': 'madvise', 'khugepaged/defrag': '1', 'cmdline_managed': True,
        'cmdline': None}


@pytest.fixture
def state(tmpdir):
    host = FakeHost(tmpdir)
    host.add_thp('el8')
    return thp.read_state(host.root)


def test_a_good_baseline_passes(state):
    assert thp.baseline_problems(GOOD, state) == []
    assert thp.baseline_problems(dict(GOOD, cmdline='never'), state) == []
    assert thp.baseline_problems({'enabled': 'never'}) == []


@pytest.mark.parametrize('key, value, words', [
    ('enabled', 'sometimes', 'enabled is "sometimes", which this kernel does not offer (always, madvise, never)'),
    ('enabled', 7, 'enabled is 7, not a THP value'),
    ('enabled', True, 'enabled is true, not a THP value'),
    ('defrag', '[always]', 'defrag is "[always]", not a THP value'),
    ('khugepaged/defrag', '2', 'khugepaged/defrag is "2", which this kernel does not offer (0, 1)'),
    ('cmdline', 'yes', 'cmdline is "yes", not null or one of always, madvise, never'),
    ('cmdline_managed', 'yes', 'cmdline_managed is "yes", not true or false'),
])
def test_a_hand_edited_baseline_is_refused(state, key, value, words):
    assert thp.baseline_problems(dict(GOOD, **{key: value}), state) == [words]


def test_not_an_object():
    assert thp.baseline_problems(['enabled', 'always']) == ['the record is not a JSON object']
