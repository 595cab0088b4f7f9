# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's controller-side chart of a read-ahead sweep (files/sweep_chart.py), run as the role runs it.

matplotlib is optional: without it the script says the chart was skipped and exits 0; with it (only where
it is installed) it writes a PNG.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

FILES = os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, os.pardir, os.pardir,
                     'roles', 'aem_tuning', 'files')
CHART = os.path.join(FILES, 'sweep_chart.py')

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


def run(tmp_path, evidence, env=None):
    after = tmp_path / 'after.json'
    with open(str(after), 'w') as f:
        f.write(json.dumps({'os': {}, 'read_ahead_sweep': evidence}))
    png = tmp_path / 'sweep.png'
    proc = subprocess.Popen([sys.executable, CHART, str(after), str(png), 'aem1'], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    out, err = proc.communicate()
    return proc.returncode, out.decode('utf-8'), err.decode('utf-8'), png


def load():
    sys.path.insert(0, FILES)
    try:
        import sweep_chart
    finally:
        sys.path.pop(0)
    return sweep_chart


def test_series_are_in_ascending_read_ahead_and_mark_the_chosen_value():
    labels, reads, seq, amp, chosen = load().series(EVIDENCE)
    assert labels == ['32', '64', '256']
    assert reads == [2950.4, 2890.0, 900.0]
    assert seq == [80.0, 118.0, 120.0]
    assert labels[chosen] == '64' and amp[chosen] == 5.1


def test_without_matplotlib_it_skips_with_a_note_and_exits_0(tmp_path):
    # A matplotlib package that cannot be imported, first on the path.
    fake = tmp_path / 'fake'
    (fake / 'matplotlib').mkdir(parents=True)
    (fake / 'matplotlib' / '__init__.py').write_text(u'raise ImportError("no matplotlib here")\n')
    env = dict(os.environ, PYTHONPATH=str(fake))
    rc, out, err, png = run(tmp_path, EVIDENCE, env)
    assert rc == 0, err
    result = json.loads(out)
    assert 'matplotlib is not importable' in result['skipped']
    assert not png.exists()


def test_unreadable_input_exits_2(tmp_path):
    proc = subprocess.Popen([sys.executable, CHART, str(tmp_path / 'missing.json'), str(tmp_path / 'x.png'), 'h'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = proc.communicate()[1]
    assert proc.returncode == 2 and b'cannot read' in err


def test_with_matplotlib_it_writes_a_png(tmp_path):
    pytest.importorskip('matplotlib')
    rc, out, err, png = run(tmp_path, EVIDENCE)
    assert rc == 0, err
    assert json.loads(out) == {'chart': str(png)}
    with open(str(png), 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'
