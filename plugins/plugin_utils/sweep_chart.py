# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Draw a host's read-ahead sweep as a PNG, on the controller: ``draw(evidence, png, host)`` (aem_reports.py's sweep.png).

``evidence`` is the sweep's evidence with its results (the role's ``read_ahead_sweep`` in after.json). Returns
``{"chart": PNG}`` when drawn, ``{"skipped": "why"}`` when matplotlib is not importable or there is nothing to draw
(the chart is optional: the report's table has the same numbers).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def series(evidence):
    """(labels, random reads/s, sequential MiB/s, amplification, chosen index) from the sweep's results,
    in ascending read-ahead."""
    rows = sorted((r for r in evidence.get('results') or [] if r.get('reads_per_s') is not None),
                  key=lambda r: r['read_ahead_kb'])
    labels = [str(r['read_ahead_kb']) for r in rows]
    chosen = None
    for i, r in enumerate(rows):
        if r['read_ahead_kb'] == evidence.get('recommended_kb'):
            chosen = i
    return (labels, [r['reads_per_s'] for r in rows], [r.get('seq_mib_s') or 0 for r in rows],
            [r.get('read_amplification') or 0 for r in rows], chosen)


def draw(evidence, png, host):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError as e:
        return {'skipped': 'matplotlib is not importable on the controller (%s), so no sweep.png; the table above '
                           'has the same numbers' % e}
    labels, reads, seq, amp, chosen = series(evidence)
    if not labels:
        return {'skipped': 'no value completed any random read, nothing to draw'}
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = list(range(len(labels)))
    ax.plot(xs, reads, marker='o', color='tab:blue', label='random reads/s (%s readers)' % evidence.get('readers'))
    ax.set_xticks(xs)
    ax.set_xticklabels(labels)
    ax.set_xlabel('read_ahead_kb')
    ax.set_ylabel('random reads/s', color='tab:blue')
    ax2 = ax.twinx()
    ax2.plot(xs, seq, marker='s', color='tab:orange', label='sequential MiB/s')
    ax2.set_ylabel('sequential MiB/s', color='tab:orange')
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    caps = evidence.get('caps') or {}
    if caps.get('mib_s'):
        ax2.axhline(caps['mib_s'], color='tab:orange', linestyle=':', linewidth=1,
                    label='%s cap %s MiB/s' % (caps.get('type'), caps['mib_s']))
    if chosen is not None:
        ax.axvline(chosen, color='tab:green', linestyle='--', linewidth=1.5,
                   label='chosen %s KiB (amplification %sx)' % (labels[chosen], amp[chosen]))
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc='best', fontsize='small')
    ax.set_title('%s: read-ahead sweep of %s (%s, %s IOPS / %s MiB/s)'
                 % (host, evidence.get('device'), caps.get('type'), caps.get('iops'), caps.get('mib_s')),
                 fontsize='medium')
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return {'chart': png}
