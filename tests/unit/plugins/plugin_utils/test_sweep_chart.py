# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The chart of a read-ahead sweep in the role's report (plugin_utils/sweep_chart.py), drawn on the controller.

matplotlib is optional: without it the chart is skipped with a note; with it (only where it is installed) it is a PNG.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

import pytest

from ansible_collections.aemops.os_tuning.plugins.plugin_utils import sweep_chart

EVIDENCE = {
    'source': 'sweep', 'device': 'dm-0', 'recommended_kb': 64, 'best_kb': 32, 'readers': 4,
    'caps': {'type': 'gp3', 'iops': 3000, 'mib_s': 125.0, 'basis': 'gp3 baseline'},
    'results': [
        {'read_ahead_kb': 256, 'reads_per_s': 900.0, 'seq_mib_s': 120.0, 'read_amplification': 20.1},
        {'read_ahead_kb': 32, 'reads_per_s': 2950.4, 'seq_mib_s': 80.0, 'read_amplification': 2.7},
        {'read_ahead_kb': 64, 'reads_per_s': 2890.0, 'seq_mib_s': 118.0, 'read_amplification': 5.1},
        {'read_ahead_kb': 8, 'reads_per_s': None},
    ],
}


def test_series_are_in_ascending_read_ahead_and_mark_the_chosen_value():
    labels, reads, seq, amp, chosen = sweep_chart.series(EVIDENCE)
    assert labels == ['32', '64', '256']
    assert reads == [2950.4, 2890.0, 900.0]
    assert seq == [80.0, 118.0, 120.0]
    assert labels[chosen] == '64' and amp[chosen] == 5.1


def test_without_matplotlib_it_skips_with_a_note(tmp_path, monkeypatch):
    # A matplotlib that cannot be imported (None in sys.modules makes its import fail).
    for name in [m for m in sys.modules if m == 'matplotlib' or m.startswith('matplotlib.')]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, 'matplotlib', None)
    png = tmp_path / 'sweep.png'
    result = sweep_chart.draw(EVIDENCE, str(png), 'aem1')
    assert 'matplotlib is not importable' in result['skipped']
    assert not png.exists()


def test_nothing_to_draw_is_said(tmp_path):
    pytest.importorskip('matplotlib')
    result = sweep_chart.draw(dict(EVIDENCE, results=[{'read_ahead_kb': 8, 'reads_per_s': None}]),
                              str(tmp_path / 'sweep.png'), 'aem1')
    assert result == {'skipped': 'no value completed any random read, nothing to draw'}


def test_with_matplotlib_it_writes_a_png(tmp_path):
    pytest.importorskip('matplotlib')
    png = tmp_path / 'sweep.png'
    assert sweep_chart.draw(EVIDENCE, str(png), 'aem1') == {'chart': str(png)}
    with open(str(png), 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'
