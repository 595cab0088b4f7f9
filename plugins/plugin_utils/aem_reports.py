# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's reports on the controller, from the hosts' aem_tuning_result: ``render(directory, payload)``.

Called by the action plugin ``aemops.os_tuning.aem_reports`` (plugins/action/aem_reports.py), once per play batch
(the role's tasks/report.yml, run_once) or per fleet summary (tasks/summary.yml), whatever the number of hosts. The
action builds the payload from the play's host variables in the controller's memory: it never goes on a command line,
stdin or a file, nor into the task's arguments or result, which the job events keep. The payload is a mapping:

- ``results``: ``{host: aem_tuning_result or None}`` (None: the host has no result);
- ``facts``: ``{host: [before, after, sweep evidence]}``, the full facts the result does not carry (the role's
  ``__aem_tuning_before``, ``__aem_tuning_after``, and the sweep's evidence with its rows), for before.json,
  after.json and the report's sweep table; absent from the fleet summary (the fact cache holds results only);
- ``write``: the hosts whose own files are written (default: every host with a result);
- ``play``: when set, a result whose ``play`` differs is left out of the summary (one set by an earlier play of the
  same run, e.g. migrate-aem.yml's pre phase seen from post);
- ``summary`` (default true), ``chart`` (default true: sweep.png where a host has sweep results and matplotlib is
  importable), ``title``.

Writes DIR/HOST/report.md (and sweep.png; before.json and after.json where ``facts`` has the host), DIR/summary.md
and DIR/summary.json, each through a temporary file renamed into place. Reads nothing else: the reports depend only
on the payload. Returns ``written`` (paths) and ``charts`` (per host: the PNG, or why none was drawn).

The role's two summaries in the play's output are worded here too, as lists of lines: ``summary_before_lines``
(before.yml, from the steps' records) and ``result_brief_lines`` (report.yml, from aem_tuning_result), through the
filters ``aemops.os_tuning.summary_before`` and ``aemops.os_tuning.result_brief``.

Reads aem_tuning_result's schema 3 (docs/result.md: ``misses`` as mappings) and schema 2 (``misses`` as
"subject: message" strings), which a fact cache may still hold from an earlier run: a miss reads the same in both.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import numbers
import os
import tempfile
import time

from ansible_collections.aemops.os_tuning.plugins.module_utils.aem import is_aem, label
from ansible_collections.aemops.os_tuning.plugins.module_utils.readers_refresh import WHY
from ansible_collections.aemops.os_tuning.plugins.plugin_utils import sweep_chart

SCHEMA_VERSION = 1
TEXT = type(u'')

# scan_aem_log.py's counters, as the report names them.
SYMPTOMS = (
    ('commit_blocked', 'This commit is blocked by a commit'),
    ('checkpoint_failed', 'Failed to create checkpoint'),
)


def text(value):
    if isinstance(value, bytes):
        return value.decode('utf-8', 'replace')
    return TEXT(value)


def dash(value, empty='-'):
    """The value for a table cell: '-' for None or an empty value."""
    if value is None or value == '' or value == [] or value == {}:
        return empty
    return text(value)


def get(data, *keys, **kw):
    """data[k1][k2]... or ``default`` (kw), where any level is missing or not a mapping, or is None (unless
    ``keep_none``: then a None found is the value, as Jinja's ``| default(d)`` keeps it)."""
    default = kw.get('default')
    for key in keys:
        if not isinstance(data, dict) or key not in data or (data[key] is None and not kw.get('keep_none')):
            return default
        data = data[key]
    return data


def write_file(path, content, binary=False):
    """Write through a temporary file in the same directory, renamed into place (a reader never sees half a file)."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path))
    try:
        if binary:
            with os.fdopen(fd, 'wb') as f:
                f.write(content)
        else:
            with io.open(fd, 'w', encoding='utf-8') as f:
                f.write(text(content))
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def to_json(data):
    return text(json.dumps(data, indent=4, sort_keys=True, separators=(',', ': '))) + u'\n'


# --------------------------------------------------------------------------------------------------------------------
# Words for the data


def would(r, words):
    """words (past participle first) as done, or in check mode as what the run would have done."""
    if r.get('check_mode'):
        return 'would have ' + words
    return ('wrote ' + words[len('written '):]) if words.startswith('written ') else words


def change_words(r, change):
    """One change of the run (aem_tuning_result.changes) as a short phrase."""
    kind = change.get('kind')
    if kind in ('snapshot', 'sweep_record'):
        what = 'the first-run snapshot' if kind == 'snapshot' else 'the recorded sweep result'
        return would(r, '%s %s %s' % (change.get('action'), what, change.get('path')))
    if kind == 'sweep':
        return would(r, 'swept read-ahead on %s (the original %s KiB restored)'
                     % (dash(change.get('device'), '?'), dash(change.get('original_kb'), '?')))
    if kind == 'tuned':
        return would(r, '%s tuned' % change.get('action'))
    if kind == 'read_ahead':
        # The values from the readings; in check mode the host was not changed, and a lost host was not read again:
        # "after" is then the value the run applies.
        _first, before, after = readings(r)
        devices = change.get('devices') or []
        moved = []
        for name in devices:
            was = get(before, 'read_ahead_kb', name)
            now = r.get('read_ahead_kb') if r.get('check_mode') or not after else get(after, 'read_ahead_kb', name)
            if was != now:
                moved.append('%s %s -> %s KiB' % (name, dash(was, '?'), dash(now, '?')))
        if moved:
            return would(r, 'set read-ahead: %s' % ', '.join(moved))
        return would(r, 'set the persistence of the read-ahead of %s' % (', '.join(text(n) for n in devices) or 'the targets'))
    if kind == 'thp':
        moved = []
        for attr, value in sorted((change.get('runtime') or {}).items()):
            if isinstance(value, dict) and value.get('before') != value.get('after'):
                moved.append('%s %s -> %s' % (attr, dash(value.get('before'), '?'), dash(value.get('after'), '?')))
        return would(r, 'set THP%s' % ((': ' + ', '.join(moved)) if moved else ' (its persistence)'))
    if kind == 'aem':
        return would(r, '%s AEM (%s)' % (change.get('action'), change.get('unit')))
    if kind == 'reboot':
        rb = r.get('reboot') or {}
        return would(r, 'rebooted (boot %s -> %s)' % (dash(rb.get('boot_id_before'), '?'), dash(rb.get('boot_id_after'), '?')))
    return would(r, 'changed %s' % kind)


def lost_words(r):
    """Why a lost host has no reading after the change: 'did not come back after the reboot at <time>'."""
    lost = r.get('lost') or {}
    if lost.get('step') == 'reboot':
        return 'did not come back after the reboot at %s' % dash(lost.get('since') or lost.get('at'), '?')
    return 'stopped answering at %s (%s)' % (dash(lost.get('at'), '?'), lost.get('task') or lost.get('step'))


VERDICTS = ('compliant', 'not compliant', 'failed', 'lost', 'no result')


def verdict(r):
    """Which count of the summary a host is in: compliant, not compliant (misses, no error), failed (an error), lost
    (did not come back after the reboot, or stopped answering later), no result."""
    if not r:
        return 'no result'
    if r.get('lost'):
        return 'lost'
    if r.get('error'):
        return 'failed'
    return 'compliant' if not miss_count(r) else 'not compliant'


def miss_count(r):
    """How many misses the run found after it: ``misses_count`` (the result lists the first few only)."""
    count = r.get('misses_count')
    return count if count is not None else len(r.get('misses') or [])


def miss_text(miss):
    """One miss as the reports word it: "subject: message". A schema 3 result holds each miss as a mapping; a schema
    2 result (an older run's, in the fact cache) held the string already."""
    if isinstance(miss, dict):
        return '%s: %s' % (miss.get('subject'), miss.get('message'))
    return text(miss)


def outcome(r):
    """The one-line result of a host, as the summary states it."""
    if r.get('lost'):
        return 'LOST: %s: %s' % (lost_words(r), (r.get('lost') or {}).get('message') or r.get('error'))
    if r.get('error'):
        return 'FAILED: %s' % r['error']
    count = miss_count(r)
    if not count:
        return 'compliant'
    return '%d %s' % (count, 'miss' if count == 1 else 'misses')


def failure_paragraph(r):
    """The report's first lines after a failure: the message first, worded by what the run had changed before it."""
    error = r.get('error')
    if not error:
        return []
    changes = r.get('changes') or []
    if r.get('lost'):
        done = '; '.join(change_words(r, c) for c in changes) or 'nothing'
        return ['**The host %s: %s.** The run had changed: %s. Nothing was read from the host after that: the '
                '"after" column is empty, and the host must be looked at (its console) before the role runs again.'
                % (lost_words(r), error, done), '']
    if r.get('failed_before_change'):
        return ['**The run stopped before any change: %s**' % error, '',
                'Nothing was changed on the host: the role checks every wanted value against the host before its '
                'first change, and this check refused the run. Fix the value the message names and run again.', '']
    compliant = ' Its tuning was compliant when the run started.' if r.get('compliant_before') else ''
    if not changes:
        return ['**The run failed; it had changed nothing on the host: %s.**%s The tables below are read from the host '
                'after the failure.' % (error, compliant), '']
    return ['**The run failed after it changed the host (%s): %s.**%s What was changed up to then is kept; the tables '
            'below are read from the host after the failure.'
            % ('; '.join(change_words(r, c) for c in changes), error, compliant), '']


# --------------------------------------------------------------------------------------------------------------------
# report.md


def readings(r):
    """The result's readings of the host (first run, before, after), each {} when missing."""
    rd = r.get('readings') or {}
    # first is null when it reads as before (schema 3: the first run, or nothing changed since).
    return rd.get('first') or rd.get('before') or {}, rd.get('before') or {}, rd.get('after') or {}


def device_rows(r):
    """(target, device) for the report's table: the path targets, the device targets, then the devices beneath."""
    _first, before, after = readings(r)
    rows = []
    for path in r.get('targets') or []:
        name = get(after, 'paths', path, default=get(before, 'paths', path, default='?'))
        rows.append((path, name))
    for spec, name in sorted((r.get('devices') or {}).items()):
        rows.append((spec, name))
    names = [name for _spec, name in rows]
    for name in sorted(set(list(get(before, 'read_ahead_kb', default={})) + list(get(after, 'read_ahead_kb', default={})))):
        if name not in names:
            rows.append(('beneath the targets', name))
            names.append(name)
    return rows


def wanted(r):
    if r.get('state') != 'present':
        return 'baseline'
    if r.get('read_ahead_kb') is not None:
        return text(r['read_ahead_kb'])
    return 'auto' if r.get('auto') else '?'


def sweep_section(host, r, chart):
    sw = r.get('read_ahead_sweep') or {}
    out = ['## Read-ahead: auto', '']
    if 'recommended_kb' not in sw:
        failure = r.get('sweep_failure') or {}
        restored = (' (the sweep restored %s: %s)' % (failure.get('device'), failure.get('restored'))
                    if failure.get('restored') is not None else '')
        out += ['**No value was chosen**: %s. The read-ahead was not set by this run%s.'
                % (('the sweep failed: ' + failure['msg']) if failure.get('msg') else 'the sweep did not run', restored), '']
        return out
    if sw.get('source') == 'sweep':
        where = 'in this run'
    else:
        if not r.get('may_sweep'):
            why = '%s does not sweep: it would change the live device' % (
                'check mode' if r.get('check_mode') else '%s mode' % r.get('mode'))
        else:
            why = ('it still holds: the same sweep settings, repository path and device; aem_tuning_sweep_force: true '
                   'measures again')
        where = 'that an apply run recorded on the host at %s (%s)' % (sw.get('taken'), why)
    restored = (' (read back: %s KiB)' % sw['restored_kb']) if sw.get('restored_kb') is not None else ''
    out += ['**%s KiB**, chosen by the sweep of %s (%s) %s; its original %s KiB was restored after the sweep%s.'
            % (sw['recommended_kb'], sw.get('device'), sw.get('path'), where, sw.get('original_kb'), restored), '']
    out += ['Why: %s' % sw.get('why'), '']
    caps = sw.get('caps') or {}
    noisy = ('; left out as noisy: ' + ', '.join(text(x) for x in sw['excluded_noisy_kb'])) \
        if sw.get('excluded_noisy_kb') else ''
    out += ['Caps used: %s, %s IOPS, %s MiB/s (%s). Values %s KiB, %s readers, %s s per phase, tolerance %s%% of the '
            'best random reads/s (best: %s KiB; within: %s%s).'
            % (caps.get('type'), caps.get('iops'), caps.get('mib_s'), caps.get('basis'),
               ', '.join(text(x) for x in sw.get('sweep') or []), sw.get('readers'), sw.get('duration'),
               sw.get('tolerance_pct'), sw.get('best_kb'), ', '.join(text(x) for x in sw.get('within_kb') or []),
               noisy), '']
    out += ['| read-ahead KiB | random reads/s | amplification | device IOPS | device MiB/s | p50 ms | p99 ms '
            '| sequential MiB/s | bound | |',
            '|---:|---:|---:|---:|---:|---:|---:|---:|---|---|']
    for x in sw.get('results') or []:
        marks = ''.join([
            'chosen' if x.get('read_ahead_kb') == sw.get('recommended_kb') else '',
            ' best' if x.get('read_ahead_kb') == sw.get('best_kb') else '',
            ' noisy' if x.get('noisy') else ''])
        lat = x.get('latency') or {}
        out.append('| %s | %s | %sx | %s | %s | %s | %s | %s | %s | %s |' % (
            x.get('read_ahead_kb'), dash(x.get('reads_per_s'), '?'), dash(x.get('read_amplification'), '?'),
            dash(x.get('device_iops'), '?'), dash(x.get('device_mib_s'), '?'), dash(lat.get('p50_ms'), '?'),
            dash(lat.get('p99_ms'), '?'), dash(x.get('seq_mib_s'), '?'), dash(x.get('bound'), '?'), marks.strip()))
    out.append('')
    if chart.get('chart'):
        out += ['![read-ahead sweep of %s](sweep.png)' % host, '']
    else:
        out += ['Chart: %s.' % (chart.get('skipped') or 'not drawn'), '']
    return out


def reboot_lines(r):
    rb = r.get('reboot') or {}
    if rb.get('done') and r.get('check_mode'):
        return ['Reboot: the run would reboot (aem_tuning_reboot: %s; check mode does not).' % rb.get('requested')]
    if rb.get('done'):
        return ['Rebooted (aem_tuning_reboot: %s): boot %s, before the reboot at %s, came back as boot %s, booted at %s, '
                'boot finished at %s (%s s for the reboot module).'
                % (rb.get('requested'), dash(rb.get('boot_id_before'), '?'), dash(rb.get('before'), '?'),
                   dash(rb.get('boot_id_after'), '?'), dash(rb.get('booted'), '?'), dash(rb.get('after'), '?'),
                   dash(rb.get('elapsed_s'), '?'))]
    if rb.get('required') or r.get('reboot_required'):
        return ['Reboot required: yes, the kernel command line changed and the host was not rebooted '
                '(aem_tuning_reboot: %s).' % rb.get('requested', '?')]
    return ['Reboot: none needed%s.' % (' (aem_tuning_reboot: %s)' % rb['requested'] if rb.get('requested') else '')]


def aem_lines(r):
    aem = r.get('aem')
    if not aem:
        unit = get(r, 'readers', 'aem_unit')
        return ['AEM: %s.' % ('not stopped or started by this run (unit %s)' % unit if unit
                              else 'no unit named (aem_tuning_aem_service)')]
    if aem.get('ok'):
        answer = 'answered %s at %s (%s s after the start, %s)' % (
            aem.get('status'), dash(aem.get('answered'), '?'), dash(aem.get('waited_s'), '?'), aem.get('url'))
    else:
        answer = 'did not answer 200: %s' % aem.get('message')
    return ['AEM (%s, %s): stopped at %s, started at %s, %s.' % (
        aem.get('unit'), aem.get('why'), dash(aem.get('stopped'), '?'), dash(aem.get('started'), '?'), answer)]


def guard_lines(facts_after):
    """AEM's start guard as tuning_facts read it after the run (only with aem_tuning_aem_service)."""
    guard = get(facts_after or {}, 'start_guard')
    if not isinstance(guard, dict) or not guard.get('unit'):
        return []
    words = {'ok': 'in place: AEM opens its files at the persisted read-ahead after every boot',
             'missing': 'missing', 'changed': 'changed', 'unsupported': 'not installed (systemd %s has no "+" prefix)'
             % dash(guard.get('systemd'), '?')}
    problem = guard.get('problem') if guard.get('state') in ('missing', 'changed') else None
    return ['Start guard of %s: %s%s.' % (guard['unit'], words.get(guard.get('state'), text(guard.get('state'))),
                                          ' (%s)' % problem if problem else '')]


def error_log_lines(r):
    scan = r.get('error_log')
    if not scan:
        return []
    out = ['## AEM error.log', '']
    if scan.get('error'):
        return out + ['%s could not be read: %s' % (scan.get('path'), scan['error']), '']
    out += ['%s, from the run\'s start to its end on the host\'s clock, and in the whole file:' % scan.get('path'), '',
            '| symptom | during the run | in the file |', '|---|---:|---:|']
    for key, words in SYMPTOMS:
        out.append('| %s | %s | %s |' % (words, dash(get(scan, 'since_run', key), '?'),
                                         dash(get(scan, 'total', key), '?')))
    return out + ['']


def aem_state(rd, stale):
    """What became of AEM's open files (the readers' summary of the result)."""
    if rd.get('aem_restarted'):
        return 'restarted (aem_tuning_restart_stale_aem)'
    if rd.get('aem_needs_restart'):
        return 'needs a restart (set aem_tuning_restart_stale_aem: true to let the role do it)'
    if any(is_aem(x, rd.get('aem_unit')) for x in stale):
        return 'still stale: an apply run refreshes it in place'
    if rd.get('aem_refreshed'):
        return 'refreshed in place, no restart needed'
    return 'not among them'


def fault_kib(x):
    """A reader's own KiB read per major fault (module_utils/readers_measure.py): measured before the run, and
    after read_ahead refreshed it; or how it was judged without one. The result keeps ``kib_per_fault`` and
    ``kib_per_fault_after``; the facts, ``measured`` and ``measured_after``."""
    before = x.get('kib_per_fault', (x.get('measured') or {}).get('kib_per_fault'))
    after = x.get('kib_per_fault_after', (x.get('measured_after') or {}).get('kib_per_fault'))
    if before is None and after is None:
        return 'not measured' if x.get('basis') else '-'
    return ' -> '.join('%s' % v for v in (before, after) if v is not None)


def reason(x):
    """Why a reader is stale or needs a restart: its reason, or (the result keeps the codes only) the words of its
    ``why`` codes (module_utils/readers_refresh.py)."""
    if x.get('reason'):
        return x['reason']
    words = [WHY.get(code, code).replace('%(count)d', str(x.get('count', '?'))) for code in x.get('why') or []]
    return '; '.join(words) or 'holds %s file(s) opened at an earlier read-ahead' % x.get('count', '?')


def readers_lines(r):
    rd = r.get('readers') or {}
    refreshed, stale, restart = rd.get('refreshed') or [], rd.get('stale') or [], rd.get('needs_restart') or []
    if not (refreshed or stale or restart or rd.get('aem_restarted')):
        return []
    out = ['## Processes that already read the targets', '',
           'The kernel gives each open file the device\'s read-ahead when it is opened; these processes had files '
           'open before the change.', '',
           '| pid | command | unit | started | files | KiB per major fault | now |', '|---:|---|---|---|---:|---|---|']

    def row(x, now):
        return '| %s | %s | %s | %s | %s | %s | %s |' % (x.get('pid'), x.get('comm'), x.get('unit') or '-',
                                                         x.get('start') or '?', x.get('count'), fault_kib(x), now)
    for x in refreshed:
        out.append(row(x, 'would be refreshed (check mode)' if r.get('check_mode') else 'refreshed in place'))
    for x in stale:
        out.append(row(x, 'still stale: %s' % reason(x)))
    for x in restart:
        out.append(row(x, 'needs a restart (%s): %s' % (', '.join(x.get('why') or []), reason(x))))
    out.append('')
    if rd.get('kernel_refresh') is False:
        out += ['This kernel has no pidfd_getfd(2) (RHEL 7 and RHEL 8 kernels lack it): no open file can be refreshed '
                'in place, so a reader opened at the earlier value needs a restart in your next window.', '']
    unit = rd.get('aem_unit')
    if unit:
        out.append('AEM\'s unit %s: %s.' % (unit, aem_state(rd, stale)))
        others = [x for x in refreshed if not is_aem(x, unit)]
        if others:
            out.append('Also refreshed, outside AEM\'s unit (POSIX_FADV_NORMAL also clears a RANDOM or SEQUENTIAL hint '
                       'they may have set): %s.' % ', '.join(label(x) for x in others))
    else:
        out.append('AEM\'s unit: not named (aem_tuning_aem_service).')
    return out + ['']


# The rows of an EBS volume's rates over each io_probe window (result.ebs; module_utils/ebs_stats.py rates).
EBS_ROWS = (
    ('window, s', 'window_s'),
    ('at the volume\'s throughput cap, s per minute', 'volume_tp_s_per_min'),
    ('at the volume\'s IOPS cap, s per minute', 'volume_iops_s_per_min'),
    ('at the instance\'s EBS throughput cap, s per minute', 'instance_tp_s_per_min'),
    ('at the instance\'s EBS IOPS cap, s per minute', 'instance_iops_s_per_min'),
    ('read MiB/s', 'read_mib_s'),
    ('read IOPS', 'read_iops'),
)


def _ms(us):
    return round(us / 1000.0, 2) if isinstance(us, (int, float)) and not isinstance(us, bool) else None


def ebs_lines(r):
    """Per EBS volume, what it says of itself over io_probe's reads before and after the change (result.ebs): the
    rates and the cap that bound, or the one line why there are none."""
    volumes = r.get('ebs')
    if not isinstance(volumes, list) or not r.get('probe'):
        return []
    if not volumes:
        return ['EBS volumes\' own statistics: no EBS statistics: no NVMe device beneath the probed path or among '
                'the devices tuned.', '']
    out = []
    for v in volumes:
        if not isinstance(v, dict):
            continue
        b, a = v.get('before') or {}, v.get('after') or {}
        rb, ra = b.get('rates') or {}, a.get('rates') or {}
        volume = a.get('volume_id') or b.get('volume_id')
        name = '%s (%s)' % (v.get('device'), volume) if volume else text(v.get('device'))
        if not rb and not ra:
            out += ['EBS volume %s: %s.' % (name, a.get('reason') or b.get('reason') or 'no EBS statistics'), '']
            continue
        out += ['| EBS volume %s, its own statistics over io_probe\'s reads | before | after |' % name,
                '|---|---:|---:|']
        out += ['| %s | %s | %s |' % (label, dash(rb.get(key)), dash(ra.get(key))) for label, key in EBS_ROWS]
        out.append('| read latency mean / p99 (histogram bin\'s upper bound), ms | %s / %s | %s / %s |' % (
            dash(_ms(rb.get('read_latency_mean_us'))), dash(_ms(rb.get('read_latency_p99_us'))),
            dash(_ms(ra.get('read_latency_mean_us'))), dash(_ms(ra.get('read_latency_p99_us')))))
        out += ['', 'Before: %s.' % (rb.get('bound') or b.get('reason') or 'no EBS statistics'),
                'After: %s.' % (ra.get('bound') or a.get('reason') or 'no EBS statistics'), '']
    return out


def header_lines(host, r):
    """The title and, after a failure, its paragraph."""
    check = ', check mode' if r.get('check_mode') else ''
    return (['# %s: read-ahead and THP (%s, %s mode%s)' % (host, r.get('state'), r.get('mode'), check), '']
            + failure_paragraph(r))


def run_lines(r):
    """When the run started, the OS and tuned, and what "first run" means."""
    first, before, after = readings(r)
    out = ['Run started %s (the host\'s clock). %s %s, tuned %s: %s -> %s.' % (
        r.get('started'), get(before, 'os', 'id'), get(before, 'os', 'version_id'),
        get(after or before, 'tuned', 'version') or 'not installed',
        ' '.join(get(before, 'tuned', 'active_profiles', default=[])) or '-',
        ' '.join(get(after, 'tuned', 'active_profiles', default=[])) or '-'), '']
    taken = r.get('snapshot_taken')
    out += ['"first run" is the snapshot taken before this collection first changed the host%s.' % (
        (' (%s, %s %s)' % (taken, get(first, 'os', 'id'), get(first, 'os', 'version_id'))) if taken else ''), '']
    return out


def device_lines(r, facts_before):
    """The read-ahead table: each target and device, first run, before, after, wanted, what set it before."""
    first, before, after = readings(r)
    if r.get('failed_before_change') and not r.get('targets') and not r.get('devices'):
        out = ['No target was resolved.', '']
    else:
        out = ['| target | device | layer | first run KiB | before KiB | after KiB | wanted | before set by |',
               '|---|---|---|---:|---:|---:|---:|---|']
        for target, name in device_rows(r):
            out.append('| %s | %s | %s | %s | %s | %s | %s | %s |' % (
                target, name, get(before, 'devices', name, default='?'),
                get(first, 'read_ahead_kb', name, default='?'), get(before, 'read_ahead_kb', name, default='?'),
                get(after, 'read_ahead_kb', name, default='?'), wanted(r),
                get(facts_before or {}, 'block_devices', name, 'set_by') or '-'))
    why = get(r, 'read_ahead_default', 'why')
    if r.get('state') == 'present' and why:
        out += ['', 'Wanted read-ahead: %s.' % why]
    return out + ['']


def thp_lines(r):
    first, before, after = readings(r)
    out = ['| THP | first run | before | after |', '|---|---|---|---|']
    for attr in ('enabled', 'defrag'):
        out.append('| %s | %s | %s | %s |' % (attr, get(first, 'thp', attr, default='n/a'),
                                              get(before, 'thp', attr, default='n/a'),
                                              get(after, 'thp', attr, default='n/a')))
    out.append('| kernel command line (running) | %s | %s | %s |' % (
        dash(get(first, 'thp', 'running_cmdline')), dash(get(before, 'thp', 'running_cmdline')),
        dash(get(after, 'thp', 'running_cmdline'))))
    return out + ['']


def probe_lines(r):
    """io_probe's reads before and after the change, and what each EBS volume says of them."""
    probe = r.get('probe') or {}
    pb, pa = probe.get('before') or {}, probe.get('after') or {}
    if 'read_amplification' not in pb or 'read_amplification' not in pa:
        return []
    out = ['| io_probe (%s, %s KiB random reads on %s) | before | after |' % (
        probe.get('method'), probe.get('record_kb'), probe.get('device')), '|---|---:|---:|',
        '| read-ahead KiB | %s | %s |' % (pb.get('read_ahead_kb'), pa.get('read_ahead_kb')),
        '| reads | %s | %s |' % (pb.get('reads'), pa.get('reads')),
        '| read amplification (device bytes / bytes read) | %s%s | %s%s |' % (
            pb.get('read_amplification'), ' (noisy)' if pb.get('noisy') else '',
            pa.get('read_amplification'), ' (noisy)' if pa.get('noisy') else ''),
        '| latency p50 / p99 ms | %s / %s | %s / %s |' % (
            get(pb, 'latency', 'p50_ms', default='?'), get(pb, 'latency', 'p99_ms', default='?'),
            get(pa, 'latency', 'p50_ms', default='?'), get(pa, 'latency', 'p99_ms', default='?')), '']
    return out + ebs_lines(r)


def conflict_lines(r, facts_after):
    """tuned's other profiles that set what the collection sets: from the full facts, else their number."""
    conflicts = get(facts_after or {}, 'tuned', 'conflicts', default=[])
    if conflicts:
        out = ['Other tuned profiles that set what the collection sets (tuned ends with the winner\'s value):', '',
               '| profile | section | option | its value | ours | winner |', '|---|---|---|---|---|---|']
        for c in conflicts:
            out.append('| %s | %s | %s | %s | %s | %s%s |' % (
                c.get('profile'), c.get('section'), c.get('option'), c.get('value'), c.get('ours'), c.get('winner'),
                (' (where %s)' % c['condition']) if c.get('condition') else ''))
        return out + ['']
    _first, _before, after = readings(r)
    if get(after, 'tuned', 'conflicts'):
        return ['Other tuned profiles set what the collection sets: %s (listed in the role\'s report on the '
                'controller).' % get(after, 'tuned', 'conflicts'), '']
    return []


def host_lines(r, facts_after):
    """The boot loader, the reboot, AEM and tuned-adm verify."""
    _first, before, _after = readings(r)
    reason = get(facts_after or {}, 'os', 'boot_reason')
    out = ['Boot loader: %s%s.' % (get(before, 'os', 'boot_method'), ' (%s)' % reason if reason else '')]
    out += reboot_lines(r)
    out += aem_lines(r) + guard_lines(facts_after)
    return out + ['tuned-adm verify: %s.' % r.get('tuned_verify'), '']


def changes_lines(r):
    changes = r.get('changes') or []
    if changes:
        title = 'What this run would change (check mode)' if r.get('check_mode') else 'What this run changed'
        return ['## %s' % title, ''] + ['- %s' % change_words(r, c) for c in changes] + ['']
    if not r.get('error'):
        return ['This run changed nothing on the host.', '']
    return []


def misses_lines(r, facts_after):
    """Every miss: from the full facts where the payload has them, else the result's first ones and how many more."""
    out = ['Facts not read: %s' % e for e in r.get('fact_errors') or []]
    full = get(facts_after or {}, 'compliance', 'misses')
    misses = [miss_text(m) for m in (full if full and not r.get('lost') else r.get('misses') or [])]
    if misses:
        out.append('Not compliant:')
        out += ['- %s' % m for m in misses]
        if miss_count(r) > len(misses):
            out.append('- and %d more (not kept in the result; the report written with the run lists them all)'
                       % (miss_count(r) - len(misses)))
    elif not r.get('error'):
        out.append('Compliant.')
    return out + ['']


def report_md(host, r, chart, facts_before=None, facts_after=None):
    """report.md from the result; the full facts, when the payload has them, add what set each value before, tuned's
    conflicting profiles and why the boot loader is handled as it is."""
    out = header_lines(host, r)
    if not readings(r)[1].get('os'):
        # A refusal before the facts were complete: the message above is the report. (A host lost after the change
        # has no reading after it: its "after" column is empty.)
        return '\n'.join(out + ['No facts were read from the host.', ''])
    out += run_lines(r) + device_lines(r, facts_before)
    if r.get('auto') and r.get('state') == 'present':
        out += sweep_section(host, r, chart)
    out += thp_lines(r) + probe_lines(r) + conflict_lines(r, facts_after) + host_lines(r, facts_after)
    out += error_log_lines(r) + readers_lines(r) + changes_lines(r) + misses_lines(r, facts_after)
    return '\n'.join(out)


# --------------------------------------------------------------------------------------------------------------------
# The fleet summary


def summary_row(host, r):
    """The summary's data for one host (summary.json), or None without a result."""
    if not r:
        return None
    _first, before, after = readings(r)
    names = [get(after, 'paths', path, default=get(before, 'paths', path, default='?')) for path in r.get('targets') or []]
    for name in sorted((r.get('devices') or {}).values()):
        if name not in names:
            names.append(name)
    sw = r.get('read_ahead_sweep') or {}
    rd = r.get('readers') or {}
    rb = r.get('reboot') or {}
    return {
        'host': host, 'schema_version': r.get('schema_version'), 'state': r.get('state'), 'mode': r.get('mode'),
        'check_mode': r.get('check_mode'), 'started': r.get('started'), 'verified': r.get('verified'),
        'compliant': r.get('compliant'), 'outcome': outcome(r),
        'misses': [miss_text(m) for m in r.get('misses') or []],
        'misses_count': miss_count(r),
        'lost': r.get('lost'), 'verdict': verdict(r),
        'error': r.get('error') or '', 'read_ahead_kb': r.get('read_ahead_kb'),
        'devices': [{'name': n, 'before_kb': get(before, 'read_ahead_kb', n), 'after_kb': get(after, 'read_ahead_kb', n)}
                    for n in names],
        'auto': ({'recommended_kb': sw['recommended_kb'], 'source': sw.get('source')}
                 if 'recommended_kb' in sw else None),
        'thp': {'before': get(before, 'thp', 'enabled'), 'after': get(after, 'thp', 'enabled')},
        'tuned': get(after, 'tuned', 'active_profiles', default=[]),
        'changes': len(r.get('changes') or []),
        'rebooted': bool(rb.get('done')), 'reboot_required': bool(r.get('reboot_required')) and not rb.get('done'),
        'readers': {'refreshed': len(rd.get('refreshed') or []), 'needs_restart': len(rd.get('needs_restart') or []),
                    'aem_restarted': bool(rd.get('aem_restarted')), 'aem_needs_restart': bool(rd.get('aem_needs_restart')),
                    'aem_unit': rd.get('aem_unit') or ''},
    }


def summary_counts(rows):
    """{verdict: number of hosts}, every verdict present."""
    counts = dict((v, 0) for v in VERDICTS)
    for _host, row in rows:
        counts[row['verdict'] if row else 'no result'] += 1
    return counts


def summary_md(rows, title):
    counts = summary_counts(rows)
    out = ['# aemops.os_tuning fleet summary%s' % (': ' + title if title else ''), '',
           '%d %s: %s.' % (len(rows), 'host' if len(rows) == 1 else 'hosts',
                           ', '.join('%d %s' % (counts[v], v) for v in VERDICTS)), '']
    lost = [(host, row) for host, row in rows if row and row['lost']]
    if lost:
        out += ['Lost (no reading after the change; look at the host\'s console):', '']
        out += ['- %s %s' % (host, row['outcome'][len('LOST: '):]) for host, row in lost]
        out.append('')
    out += ['| host | state | mode | targets (before -> after KiB) | THP | tuned | result | running readers '
            '| reboot | verified (host clock) |',
            '|---|---|---|---|---|---|---|---|---|---|']
    for host, row in rows:
        if row is None:
            out.append('| %s | | | | | | no result (the role did not reach its result on this host) | | | |' % host)
            continue
        targets = '; '.join('%s %s -> %s' % (d['name'], dash(d['before_kb'], '?'), dash(d['after_kb'], '?'))
                            for d in row['devices'])
        if row['auto']:
            targets += ' (auto: %s KiB, %s)' % (row['auto']['recommended_kb'], row['auto']['source'])
        rd = row['readers']
        readers = '%d refreshed, %d need a restart' % (rd['refreshed'], rd['needs_restart'])
        if rd['aem_unit'] and rd['aem_restarted']:
            readers += ' (AEM restarted)'
        elif rd['aem_unit'] and rd['aem_needs_restart']:
            readers += ' (AEM among them)'
        reboot = 'rebooted' if row['rebooted'] else ('required' if row['reboot_required'] else '-')
        if row['lost'] and row['lost'].get('step') == 'reboot':
            reboot = 'issued, not back'

        out.append('| %s | %s | %s | %s | %s -> %s | %s | %s | %s | %s | %s |' % (
            host, row['state'], row['mode'] + (' (check)' if row['check_mode'] else ''), targets,
            dash(row['thp']['before'], '?'), dash(row['thp']['after'], '?'), ' '.join(row['tuned']) or '-',
            row['outcome'], readers, reboot, dash(row['verified'], '?')))
    out.append('')
    return '\n'.join(out)


# --------------------------------------------------------------------------------------------------------------------
# The role's two summaries in the play's output (debug): before.yml's "Summarise what will change" from the steps'
# records (the filter aemops.os_tuning.summary_before), report.yml's "Show the result" from aem_tuning_result
# (aemops.os_tuning.result_brief). Each is a list of lines, and reads as the Jinja templates they replace did
# (summary_before.j2, result_brief.j2): a value is written as Ansible's Jinja wrote it (None as nothing where the
# template printed the value alone, as "None" where it joined it to words or formatted it: :func:`shown`), "?" stands
# for a reading that is missing, and a value with a line break in it (an error's stderr) spans lines.

SUMMARY_ROW = '%-42s %-10s %-6s %8s -> %-6s %s'
SET_BY_UNKNOWN = 'not explained (another udev rule, lvm2, rc.local or by hand)'


def at(data, *keys, **kw):
    """Jinja's ``data.k1.k2 | default(d)``: :func:`get` keeping a value of None."""
    return get(data, *keys, keep_none=True, **kw)


def shown(value):
    """A value as Ansible's Jinja prints it alone (``{{ value }}``): None as nothing (ansible-core's finalize). Joined
    to words (``~``) or formatted, None reads "None" (``'%s' % None``)."""
    return '' if value is None else value


def jinja_int(value):
    """Jinja's ``value | int``: the number ("42.23" gives 42), or 0 where it is none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def summary_head(facts, settings):
    """The summary's first line: the host, its OS, tuned and its profiles, THP now and as wanted."""
    runtime = at(facts, 'thp', 'runtime')
    tuned = facts.get('tuned') or {}
    profiles = ' '.join(text(p) for p in tuned.get('active_profiles') or [])
    return '%s: %s %s, tuned %s (%s), THP %s -> %s' % (
        shown(settings.get('host')), shown(at(facts, 'os', 'id')), shown(at(facts, 'os', 'version_id')),
        tuned.get('version') or 'not installed', profiles or 'no profile',
        shown(at(runtime, 'enabled', 'value')) if runtime else 'n/a', shown(settings.get('thp')))


def summary_rows(steps, facts, settings):
    """A row per target (its device) and per device target: the layer, the read-ahead now and as wanted, and what
    set it."""
    choice = steps.get('choice') or {}
    if settings.get('state') == 'present':
        wanted_kb = 'auto' if choice.get('kb') is None else choice['kb']
    else:
        wanted_kb = 'baseline'
    rows = [(path, at(facts, 'paths', path, 'device')) for path in steps.get('targets') or []]
    rows += list((steps.get('device_names') or {}).items())
    devices = facts.get('block_devices') or {}
    out = [SUMMARY_ROW % ('target', 'device', 'layer', 'now KiB', 'KiB', 'set by')]
    for target, name in rows:
        d = devices.get(name, {})
        out.append(SUMMARY_ROW % (target, name, at(d, 'type', default='?'), at(d, 'read_ahead_kb', default='?'),
                                  wanted_kb, at(d, 'set_by') or SET_BY_UNKNOWN))
    return out


def summary_choice(steps, settings):
    """What the run does next about the read-ahead: a sweep, or an earlier sweep's recorded result; [] otherwise."""
    choice = steps.get('choice') or {}
    if choice.get('sweep'):
        values = at(choice, 'knobs', 'values') or []
        targets = steps.get('targets') or []
        return ['read-ahead auto: next, the sweep measures %s KiB on the live device of %s (about %s s, the original '
                'restored), then the role applies the value it recommends: %s'
                % (', '.join(text(v) for v in values), shown(targets[0]) if targets else '?',
                   len(values) * 2 * jinja_int(settings.get('sweep_duration')), shown(choice.get('why')))]
    if choice.get('source') == 'recorded':
        return ['read-ahead %s' % shown(choice.get('why'))]
    return []


def summary_before_lines(steps):
    """before.yml's summary of what the run will change, from the steps' records (the lookup aemops.os_tuning.aem_tuning
    'steps' once the check has run: ``before``, ``targets``, ``device_names``, ``choice`` and the ``settings``
    ``host``, ``state``, ``thp`` and ``sweep_duration``): a list of lines, the last one empty."""
    settings = steps.get('settings') or {}
    facts = steps.get('before') or {}
    out = [summary_head(facts, settings)] + summary_rows(steps, facts, settings) + summary_choice(steps, settings)
    out += ['conflict: %s %s:%s: %s' % tuple(shown(at(c, key)) for key in ('source', 'file', 'line', 'text'))
            for c in facts.get('conflicts') or []]
    return '\n'.join(out + ['']).split('\n')


def brief_outcome(r):
    """The first line of the result after the host's name: lost, stopped before any change, failed, or the verdict."""
    lost = r.get('lost')
    if lost:
        if lost.get('step') == 'reboot':
            where = 'did not come back after the reboot at %s' % (lost.get('since') or lost.get('at'))
        else:
            where = 'stopped answering at %s' % lost.get('at')
        return 'LOST: %s: %s' % (where, shown(r.get('error')))
    if r.get('failed_before_change'):
        return 'stopped before any change: %s' % shown(r.get('error'))
    changes = r.get('changes')
    if r.get('error'):
        return 'FAILED %s: %s' % ('after %s change(s)' % len(changes) if changes else 'having changed nothing', r['error'])
    if not changes:
        done = 'nothing changed'
    else:
        done = '%s%s' % (len(changes), ' change(s) it would make' if r.get('check_mode') else ' change(s)')
    compliance = 'compliant' if r.get('compliant') else 'not compliant'
    return '%s (%s, %s mode%s), %s' % (compliance, shown(r.get('state')), shown(r.get('mode')),
                                       ', check mode' if r.get('check_mode') else '', done)


def brief_devices(r):
    """The read-ahead before -> after of each target (by its device) and each device target."""
    readings_ = r.get('readings') or {}
    before, after = readings_.get('before') or {}, readings_.get('after') or {}
    rows = [(path, at(after, 'paths', path, default=at(before, 'paths', path, default='?')))
            for path in r.get('targets') or []]
    rows += list((r.get('devices') or {}).items())
    out = ['  %s (%s): %s -> %s KiB' % (shown(target), shown(name), shown(at(before, 'read_ahead_kb', name, default='?')),
                                        shown(at(after, 'read_ahead_kb', name, default='?'))) for target, name in rows]
    if 'thp' in after:
        out.append('  THP %s -> %s; tuned-adm verify: %s' % (
            shown(at(before, 'thp', 'enabled', default='?')), shown(at(after, 'thp', 'enabled', default='?')),
            shown(r.get('tuned_verify'))))
    return out


def brief_host(r):
    """The reboot (done, or required) and AEM's stop, start and answer."""
    reboot, aem = r.get('reboot') or {}, r.get('aem')
    out = []
    if reboot.get('done'):
        out.append('  rebooted: boot %s -> %s, boot finished %s' % (
            shown(reboot.get('boot_id_before')), shown(reboot.get('boot_id_after')), shown(reboot.get('after'))))
    elif r.get('reboot_required'):
        out.append('  reboot required (the kernel command line changed)')
    if aem:
        out.append('  AEM %s: stopped %s, started %s, %s' % (
            shown(aem.get('unit')), shown(aem.get('stopped')), shown(aem.get('started')),
            ('answered %s at %s' % (aem.get('status'), aem.get('answered'))) if aem.get('ok') else 'did not answer 200'))
    return out


def result_brief_lines(r):
    """report.yml's brief of ``aem_tuning_result`` (schema 3, or a schema 2 result's misses as strings): a list of
    lines, the first one the host's outcome."""
    misses = r.get('misses') or []
    out = ['%s: %s' % (shown(r.get('host')), brief_outcome(r))] + brief_devices(r) + brief_host(r)
    out += ['  miss: %s%s' % (miss_text(m) if isinstance(m, dict) else shown(m),
                              ' (deferred to a later play)' if isinstance(m, dict) and m.get('deferred') else '')
            for m in misses]
    if miss_count(r) > len(misses):
        out.append('  and %s more misses (the report lists them all)' % (r['misses_count'] - len(misses)))
    if r.get('report'):
        out.append('  report: %s' % r['report'])
    return '\n'.join(out).strip().split('\n')


# --------------------------------------------------------------------------------------------------------------------


def draw_chart(host, r, directory):
    """sweep.png from the host's sweep results (sweep_chart.draw); {} when there is nothing to draw."""
    sw = r.get('read_ahead_sweep') or {}
    if not sw.get('results'):
        return {}
    png = os.path.join(directory, 'sweep.png')
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    return sweep_chart.draw(sw, png, host)


def plain(value):
    """A copy of a host variable as plain JSON data (dict, list, text, numbers, booleans, None): what the renderer
    reads, whatever container types the controller's ansible-core gives (its lazily templated dicts and lists, its
    tagged or unsafe strings). Any other value becomes its text."""
    if isinstance(value, dict) or hasattr(value, 'items'):
        return dict((text(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, numbers.Number):
        return value
    return text(value)


# The role's host variables the reports read in a play (tasks/report.yml): its result (the cacheable fact), and the
# full facts before and after the change and the sweep's choice, which the result does not carry.
RESULT, BEFORE, AFTER, CHOICE = 'aem_tuning_result', '__aem_tuning_before', '__aem_tuning_after', '__aem_tuning_choice'


def play_payload(hostvars, hosts, batch, play):
    """The payload of a play's reports: every host's result and full facts; this batch's hosts get their files."""
    results, facts = {}, {}
    for host in hosts:
        hv = hostvars.get(host) or {}
        results[host] = plain(hv.get(RESULT))
        choice = hv.get(CHOICE)
        facts[host] = [plain(hv.get(BEFORE, {})), plain(hv.get(AFTER, {})),
                       plain(choice.get('evidence')) if hasattr(choice, 'get') else None]
    return {'results': results, 'facts': facts, 'write': list(batch), 'play': play or '', 'chart': True}


def cache_payload(hostvars, hosts, host_reports):
    """The payload of the fleet summary from the fact cache (tasks/summary.yml): each host's cached result only."""
    results = {}
    for host in hosts:
        cached = (hostvars.get(host) or {}).get('ansible_facts')
        results[host] = plain(cached.get(RESULT)) if hasattr(cached, 'get') else None
    return {'results': results, 'write': list(hosts) if host_reports else [], 'chart': bool(host_reports),
            'title': 'from the fact cache'}


def render(directory, payload):
    """Write the files the payload asks for under directory; return the paths written and the charts' outcome."""
    results = payload.get('results') or {}
    write = payload.get('write')
    if write is None:
        write = sorted(h for h, r in results.items() if r)
    play = payload.get('play')
    facts = payload.get('facts') or {}
    written, charts = [], {}
    for host in write:
        r = results.get(host)
        if not r:
            continue
        hostdir = os.path.join(directory, host)
        before, after, evidence = (list(facts.get(host) or []) + [None, None, None])[:3]
        if evidence and r.get('read_ahead_sweep'):
            # The sweep's rows (the table, the chart) come with the facts, not in the result.
            r = dict(r, read_ahead_sweep=dict(r['read_ahead_sweep'], results=evidence.get('results') or []))
        chart = draw_chart(host, r, hostdir) if payload.get('chart', True) else {}
        if chart:
            charts[host] = chart.get('chart') or chart.get('skipped')
            if chart.get('chart'):
                written.append(chart['chart'])
        if host in facts:
            after = dict(after or {})
            if r.get('read_ahead_sweep'):
                after['read_ahead_sweep'] = r['read_ahead_sweep']
            written.append(write_file(os.path.join(hostdir, 'before.json'), to_json(before or {})))
            written.append(write_file(os.path.join(hostdir, 'after.json'), to_json(after)))
        written.append(write_file(os.path.join(hostdir, 'report.md'), report_md(host, r, chart, before, after)))
    if payload.get('summary', True):
        rows = []
        for host in sorted(results):
            r = results[host]
            if r and play is not None and r.get('play') != play:
                r = None
            rows.append((host, summary_row(host, r)))
        generated = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
        written.append(write_file(os.path.join(directory, 'summary.md'), summary_md(rows, payload.get('title'))))
        written.append(write_file(os.path.join(directory, 'summary.json'), to_json({
            'schema_version': SCHEMA_VERSION, 'generated': generated, 'title': payload.get('title'),
            'counts': summary_counts(rows), 'hosts': dict((host, row) for host, row in rows)})))
    return {'written': written, 'charts': charts}
