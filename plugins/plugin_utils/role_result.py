# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The aem_tuning role's decisions, on the controller, as pure functions over the steps' registered results.

The role is glue (linux-system-roles kernel_settings' way): its tasks call the modules and register what they
return; these functions decide from those records, and the filters of plugins/filter/aem_tuning.py expose them:

- :func:`gather_steps`, :func:`gather_settings`: the steps' records and the role's variables by the names given here
  once (``STEPS``, ``PUBLIC``, ``SETTINGS``), for the lookup plugins/lookup/aem_tuning.py, so that a task passes one
  value (``__aem_tuning_steps``, which carries the settings);
- :func:`intent`: what the role was given, as ``tuning_facts`` takes it;
- :func:`run_start`: what ``tuning_facts``' check before any change decided (the targets, the read-ahead, a
  refusal, the first run's snapshot, the probe), and the arguments of the modules and scripts the steps call
  (:func:`step_args`), as the run's start (``before.yml``, kept once as ``__aem_tuning_run``);
- :func:`with_failure`, :func:`change_failure`, :func:`lost_in_verify`: a failed step added to the run's ``errors``
  (the run's error is the first, :func:`first_error`), and a host lost on the way;
- :func:`aem_record`, :func:`aem_restart`, :func:`do_reboot`: AEM's stop, start and answer (``aem_start.yml``),
  its opt-in restart and the reboot (``reboot.yml``);
- :func:`must_reread`, :func:`facts_after`: whether the host is read again after the change, and its facts then;
- :func:`result`: ``aem_tuning_result`` (docs/result.md), with the misses as data and ``misses_failing_count``,
  the one field ``comply.yml`` asserts on (:func:`verified` adds the verdict and comply.yml's messages);
- :func:`metrics_args`: textfile_metrics' arguments.

Each takes plain mappings (``steps``: the registered results by step name; ``settings``: the role's variables it
needs) and returns plain data, so that numbers, booleans and null stay what they are on every ansible-core. A step
that did not run is ``{}`` or a skipped result: every lookup here tolerates both.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import time

from ansible.module_utils.six.moves import shlex_quote as shell_quote

from ansible_collections.aemops.os_tuning.plugins.module_utils import aem

SCHEMA = 3
# How many misses the result lists (misses_count has them all; the report lists every one): a non-compliant host of
# four devices has 14, each about 200 bytes as data (kind, subject, message; unit and deferred where set), and the result stays
# within 4 KB with 3 on the VM in check mode (molecule default, its probe and EBS rows included) and with three
# JVMs that need a restart (tests/unit/plugins/modules/test_result_size.py).
MISSES_KEPT = 3
# The result caps each list of processes: a scan past its deadline or a host with hidepid can name hundreds.
READERS_KEPT = 5
# What the result keeps of each running reader (the facts have its files and descriptors).
READER_KEYS = ('pid', 'comm', 'unit', 'count', 'why', 'basis')
# What the result keeps of each io_probe measurement (the rest is in the task's own result).
PROBE_KEYS = ('read_ahead_kb', 'reads', 'read_amplification', 'noisy', 'latency')


def _get(data, *keys):
    """``data[k1][k2]...``, or None where any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _json(stdout):
    """A script's JSON stdout (boot_clock.py, wait_aem.py, scan_aem_log.py), or {} when it printed none. The script
    prints one JSON line last; over ssh with a pseudo-terminal anything the interpreter wrote to stderr comes in
    stdout before it (and with carriage returns), so the last line that is a JSON object is the script's."""
    for line in reversed((stdout or '').splitlines()):
        text = line.strip()
        if not text.startswith('{'):
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        return value if isinstance(value, dict) else {}
    return {}


def truth(value):
    """A boolean as a role variable may carry it (ansible's booleans: true, yes, on, 1; before ansible-core 2.19 a
    value templated inside a mapping may arrive as text)."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ('true', 'yes', 'on', '1', 'y', 't')


def changed(step):
    return bool(isinstance(step, dict) and step.get('changed'))


def os_tuning(registered):
    """The ``os_tuning`` facts of a registered ``tuning_facts`` result, or {}."""
    return _get(registered, 'ansible_facts', 'os_tuning') or {}


# -- the role's variables, named once (the lookup aemops.os_tuning.aem_tuning reads them) --------------

# Each step's record by step name: what the task registered, or the fact it kept (before.yml starts each empty).
# ``run`` is what the check before any change decided (:func:`run_start`); :func:`gather_steps` spreads it.
STEPS = ('facts_before', 'facts_after', 'run', 'errors', 'lost', 'snapshot_write', 'snapshot_remove', 'sweep',
         'sweep_unrecord', 'tuned_install', 'tuned_service', 'read_ahead', 'thp', 'do_reboot', 'aem_stop',
         'aem_stop_restart', 'clock_before', 'reboot_done', 'boot_state', 'clock_after', 'clock_restart', 'aem_wait',
         'aem_record', 'aem_restarted', 'probe_before', 'probe_after', 'log_scan', 'reread')
# What the steps keep from the run's start, as they were before the change.
RUN_KEYS = ('failed_early', 'before', 'targets', 'device_names', 'started', 'read_ahead_default')
# The role's public variables the decisions read (aem_tuning_<name>), and the rest of the settings by variable.
PUBLIC = ('state', 'mode', 'probe', 'reboot', 'aem_service', 'aem_url', 'aem_timeout', 'restart_later', 'error_log',
          'reports', 'report_dir', 'metrics_dir', 'read_ahead_kb', 'sweep_values', 'sweep_readers', 'sweep_duration',
          'sweep_size_mb', 'sweep_tolerance_pct', 'sweep_force', 'volume_type', 'volume_size_gb', 'volume_iops',
          'volume_throughput_mibps', 'paths', 'repository_candidates', 'devices', 'underlying', 'thp', 'thp_defrag',
          'khugepaged_defrag', 'thp_persist', 'probe_size_mb', 'probe_reads', 'restart_stale_aem')
SETTINGS = {'host': 'inventory_hostname', 'check_mode': 'ansible_check_mode',
            'snapshot_path': '__aem_tuning_snapshot_path', 'sweep_record_path': '__aem_tuning_sweep_fact_path'}


def _step_names():
    """The variables of the steps' records, in the order of ``STEPS``."""
    return ['__aem_tuning_' + name for name in STEPS]


def _setting_names():
    """The variables of the settings: ``SETTINGS``' by key, then the public ones in the order of ``PUBLIC``."""
    return [SETTINGS[key] for key in sorted(SETTINGS)] + ['aem_tuning_' + name for name in PUBLIC]


def gather_steps(read):
    """The steps' records by step name, from ``read`` (a list of variable names -> their values, as the builtin
    ``vars`` lookup reads them), with what follows from them: the read-ahead chosen (the check's, completed by
    this run's sweep), the first run's reading (this run's, once its snapshot was written), the run's error and
    io_probe's measurements; and the role's settings (:func:`gather_settings`) as ``settings``."""
    steps = dict(zip(STEPS, read(_step_names())))
    run = steps.pop('run') or {}
    steps.update((key, run.get(key)) for key in RUN_KEYS)
    steps['choice'] = sweep_choice(run.get('choice'), steps.get('sweep'))
    taken = _get(steps.get('snapshot_write'), 'snapshot', 'taken')
    if taken:
        steps.update(snapshot_taken=taken, reading_first=_get(steps.get('before'), 'reading', 'now'))
    else:
        steps.update(snapshot_taken=run.get('snapshot_taken') or '', reading_first=run.get('reading_first'))
    steps['error'] = first_error(steps.get('errors'))
    # The role's variables the decisions read, so that a task passes the steps alone (one value).
    steps['settings'] = gather_settings(read)
    # io_probe's measurements by step, where it ran.
    probes = (('before', steps.pop('probe_before')), ('after', steps.pop('probe_after')))
    steps['probes'] = dict((step, found) for step, found in probes if found and not found.get('skipped'))
    return steps


def gather_settings(read):
    """The role's variables the decisions read, by setting name, from ``read`` (as :func:`gather_steps`)."""
    settings = dict(zip(sorted(SETTINGS) + list(PUBLIC), read(_setting_names())))
    settings['play'] = read(['ansible_play_name'], '')[0] or ''
    return settings


def gather_record(read):
    """What the result was built from and what was built, for the unit tests of the result from runs on the VM
    (tests/unit/fixtures/role_steps, scripts/record-role-steps.py): every variable :func:`gather_steps` reads, by
    variable name, ``__aem_tuning_verified`` (:func:`verified`'s output) and the controller's ansible-core, as JSON
    (``json``), and the file verify.yml writes it to on the controller (``path``: in ``__aem_tuning_record_dir``,
    named by the host, the run's start and the record's digest)."""
    names = _step_names() + _setting_names()
    variables = dict(zip(names, read(names)))
    variables['ansible_play_name'] = read(['ansible_play_name'], '')[0] or ''
    record = {'variables': variables, 'verified': read(['__aem_tuning_verified'])[0],
              'controller': _get(read(['ansible_version'], {})[0], 'full')}
    text = json.dumps(record, sort_keys=True, default=str)
    started = ''.join(c for c in str(_get(variables, '__aem_tuning_run', 'started') or '') if c.isalnum())
    name = '%s-%s-%s.json' % (variables.get('inventory_hostname'), started or 'unstarted',
                              hashlib.sha1(text.encode('utf-8')).hexdigest()[:8])
    return {'path': '%s/%s' % (read(['__aem_tuning_record_dir'], '')[0], name), 'json': text}


GATHER = {'steps': gather_steps, 'settings': gather_settings, 'record': gather_record}


def intent(settings):
    """What the role was given, as tuning_facts takes it (its ``intent``): it decides from it, in Python, what the
    run applies (plan.read_ahead: the value given, the default for the page size, an earlier sweep's recorded
    result that holds, or a sweep in this run)."""
    sweep = dict((key, settings.get(name)) for key, name in (
        ('values', 'sweep_values'), ('readers', 'sweep_readers'), ('duration', 'sweep_duration'),
        ('size_mb', 'sweep_size_mb'), ('tolerance_pct', 'sweep_tolerance_pct'), ('volume_type', 'volume_type'),
        ('volume_size_gb', 'volume_size_gb'), ('iops', 'volume_iops'), ('throughput_mibps', 'volume_throughput_mibps')))
    out = dict((key, settings.get(key)) for key in (
        'state', 'mode', 'read_ahead_kb', 'sweep_force', 'paths', 'devices', 'underlying', 'thp', 'thp_defrag',
        'thp_persist', 'aem_service'))
    out.update(sweep=sweep, sweep_record=settings.get('sweep_record_path'),
               candidates=settings.get('repository_candidates'))
    return out


def sweep_choice(choice, sweep):
    """The read-ahead the check chose, completed with the one this run's sweep recommends and what it measured."""
    choice = dict(choice or {})
    if isinstance(sweep, dict) and 'recommended_kb' in sweep:
        choice.update(kb=sweep['recommended_kb'], evidence=sweep.get('evidence'))
    return choice


# -- the start: before.yml ---------------------------------------------------------------------------

def run_start(registered, settings):
    """What the check before any change decided, from ``tuning_facts``' registered result, and what each step then
    needs (``__aem_tuning_run``, kept once). A refusal (its message, or facts without a plan) fails the run before any
    change: nothing is applied, and the result and the reports still come (``failed_early``)."""
    facts = os_tuning(registered)
    plan = facts.get('plan')
    failed = 'msg' in (registered or {}) or plan is None
    message = (registered or {}).get('msg') or 'tuning_facts failed'
    plan = plan or {}
    reading = facts.get('reading') or {}
    targets = list(plan.get('targets') or []) if not failed else []
    apply = settings.get('mode') == 'apply'
    out = {
        'failed_early': failed,
        'apply': apply,
        'error': message if failed else '',
        'errors': [{'phase': 'check', 'task': 'Gather tuning facts, check the wanted values against the host',
                    'message': message}] if failed else [],
        'before': facts,
        # The first run as the result keeps it: the host's snapshot, or (none yet) this run's reading.
        'reading_first': reading.get('snapshot') or (None if failed else reading.get('now')),
        'snapshot_taken': '' if failed else (facts.get('snapshot') or {}).get('taken') or '',
        # Apply mode, once per host: the state before the collection's first change (not after a refusal).
        'take_snapshot': bool(apply and settings.get('state') == 'present' and not failed
                              and facts.get('snapshot') is None),
        'targets': targets,
        'probing': bool(truth(settings.get('probe')) and settings.get('state') == 'present' and targets),
        'device_names': (plan.get('devices') or {}) if not failed else {},
        'started': _get(facts, 'clock', 'iso') or '',
        'started_epoch': _get(facts, 'clock', 'epoch') or '',
        'read_ahead_default': (plan.get('read_ahead_default') or {}) if not failed else {},
        # kb is null only while a sweep of this run is to choose it (apply.yml adds its choice), and for a backout.
        'choice': plan.get('read_ahead') or {},
        'sweep_timeout': plan.get('sweep_timeout'),
        # The host's Python, for the role's scripts (boot_clock.py, wait_aem.py, scan_aem_log.py).
        'python': _get(facts, 'os', 'python'),
    }
    out['scan_log'] = bool(settings.get('error_log') and str(out['started_epoch']) and 'os' in facts)
    out['args'] = step_args(out, settings)
    return out


def _positive(value, kind=int):
    """Jinja's ``value | int > 0`` (or ``| float``): text that is no number counts as 0."""
    try:
        return kind(value) > 0
    except (TypeError, ValueError):
        return False


def step_args(run, settings):
    """The arguments of the modules the steps call through ``module_defaults`` (read_ahead_sweep, thp, io_probe,
    and wait_aem.py's command line), from the role's variables and the check's decisions; an argument the module
    is to default is left out (a volume's size, IOPS and MiB/s of 0, an empty ``aem_tuning_thp_persist``)."""
    targets = run.get('targets') or []
    sweep = {
        'path': targets[0] if targets else None,
        'sweep': _get(run, 'choice', 'knobs', 'values'),
        'readers': settings.get('sweep_readers'), 'duration': settings.get('sweep_duration'),
        'size_mb': settings.get('sweep_size_mb'), 'tolerance_pct': settings.get('sweep_tolerance_pct'),
        'volume_type': settings.get('volume_type'),
        'timeout': run.get('sweep_timeout'), 'record': settings.get('sweep_record_path'),
    }
    for arg, name, kind in (('volume_size_gb', 'volume_size_gb', int), ('iops', 'volume_iops', int),
                            ('throughput_mibps', 'volume_throughput_mibps', float)):
        if _positive(settings.get(name), kind):
            sweep[arg] = settings[name]
    thp = {'enabled': settings.get('thp'), 'defrag': settings.get('thp_defrag'),
           'khugepaged_defrag': settings.get('khugepaged_defrag'), 'state': settings.get('state')}
    if settings.get('thp_persist'):
        thp['persist'] = settings['thp_persist']
    probe = {'path': targets[0] if targets else None, 'size_mb': settings.get('probe_size_mb'),
             'reads': settings.get('probe_reads'),
             'ebs_devices': [name for name in (run.get('device_names') or {}).values() if name]}
    try:
        timeout = int(settings.get('aem_timeout'))
    except (TypeError, ValueError):
        timeout = 0
    wait = ' '.join([shell_quote(str(settings.get('aem_service') or '')), shell_quote(str(settings.get('aem_url') or '')),
                     str(timeout)])
    scan_log = '%s %s' % (shell_quote(str(settings.get('error_log') or '')), run.get('started_epoch'))
    return {'sweep': sweep, 'thp': thp, 'probe': probe, 'wait_aem': wait, 'scan_log': scan_log}


# -- failures ------------------------------------------------------------------------------------------

def _now():
    """The controller's time, UTC, as the result writes times (Jinja's now(utc=true, fmt=...))."""
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


def first_error(errors):
    """The run's error: the first of ``errors``, as the run words it (a refusal of the check: its message)."""
    if not errors:
        return ''
    first = errors[0] or {}
    if first.get('phase') == 'check':
        return first.get('message') or ''
    return '%s: %s' % (first.get('task'), first.get('message'))


def failure_record(failed_result, task_name, phase, at=None):
    """A failed step as an ``errors`` record."""
    failed_result = failed_result or {}
    record = {'phase': phase, 'task': task_name or 'a task',
              'message': failed_result.get('msg') or failed_result.get('stderr') or 'failed'}
    if at:
        record['at'] = at
    return record


def with_failure(errors, failed_result, task_name, phase, timed=True):
    """``errors`` with a failed step's record added (with the controller's time unless ``timed`` is false); the
    run's error stays the first (:func:`first_error`)."""
    return list(errors or []) + [failure_record(failed_result, task_name, phase, _now() if truth(timed) else None)]


def change_failure(failed_result, failed_task, steps, at=None):
    """A failed step of the change (``main.yml``'s rescue): ``errors`` with its record, and ``lost`` (:func:`lost_at_change`),
    at the same time."""
    at = at or _now()
    record = failure_record(failed_result, (failed_task or {}).get('name'), 'change', at)
    return {'errors': list(steps.get('errors') or []) + [record],
            'lost': lost_at_change(failed_task, failed_result, steps, at)}


def lost_at_change(failed_task, failed_result, steps, at):
    """The host, lost in the change (``main.yml``'s rescue): unreachable, or a reboot the host did not come back
    from, or ``systemctl is-system-running`` finding it gone after it came back. {} when it was not lost."""
    failed_result = failed_result or {}
    action = (failed_task or {}).get('action') or ''
    gone = (bool(failed_result.get('unreachable'))
            or (action in ('ansible.builtin.reboot', 'reboot') and bool(failed_result.get('rebooted')))
            or bool(_get(steps, 'boot_state', 'unreachable')))
    if not gone:
        return {}
    return {'step': 'reboot' if truth(steps.get('do_reboot')) else 'change', 'task': (failed_task or {}).get('name') or 'a task',
            'at': at, 'since': _json(_get(steps, 'clock_before', 'stdout')).get('iso'),
            'message': failed_result.get('msg') or failed_result.get('stderr') or 'failed'}


# -- AEM's start: aem_start.yml ------------------------------------------------------------------------

def aem_record(steps, settings):
    """AEM's stop, start and answer with their times on the host's clock (the result's ``aem``), from wait_aem.py's
    output and the clock noted when AEM was stopped (the opt-in restart's, else the reboot's)."""
    wait_step = steps.get('aem_wait') or {}
    wait = _json(wait_step.get('stdout'))
    restart_clock = steps.get('clock_restart') or {}
    stop_clock = _json((restart_clock if 'stdout' in restart_clock else steps.get('clock_before') or {}).get('stdout'))
    return {
        'unit': settings.get('aem_service'),
        'why': 'reboot' if truth(steps.get('do_reboot')) else 'maps files at the earlier read-ahead (aem_tuning_restart_stale_aem)',
        'stopped': stop_clock.get('iso'),
        'started': wait.get('started'),
        'answered': wait.get('answered'),
        'status': wait.get('status'),
        'waited_s': wait.get('waited'),
        'ok': bool(wait.get('ok', False)),
        'url': settings.get('aem_url'),
        'message': wait.get('message') or wait_step.get('stderr') or 'no answer from wait_aem.py',
    }


def aem_processes(processes, unit):
    """The processes of AEM's ``unit`` among ``processes`` (module_utils/aem.py's one rule)."""
    return [p for p in (processes or []) if aem.is_aem(p, unit)]


def aem_needs_restart(read_ahead, unit):
    """Whether ``read_ahead``'s registered result names a process of AEM's unit that no refresh reached."""
    return bool(aem_processes(_get(read_ahead, 'readers', 'needs_restart'), unit))


def aem_restart(steps, settings):
    """Whether the role restarts AEM without a reboot (reboot.yml): asked to (``aem_tuning_restart_stale_aem``), not
    left to a later play (``aem_tuning_restart_later``), AEM maps files at the earlier read-ahead that no refresh can
    reach (:func:`aem_needs_restart`), no reboot follows, and not in check mode."""
    return bool(truth(settings.get('restart_stale_aem')) and not truth(settings.get('restart_later'))
                and aem_needs_restart(steps.get('read_ahead'), settings.get('aem_service'))
                and not truth(steps.get('do_reboot')) and not truth(settings.get('check_mode')))


def do_reboot(requested, thp):
    """``aem_tuning_reboot``: true, false, or auto (when the thp module says the kernel command line changed)."""
    requested = str(requested).lower()
    return requested == 'true' or (requested == 'auto' and bool((thp or {}).get('reboot_required')))


# -- verify.yml ----------------------------------------------------------------------------------------

def must_reread(steps, settings):
    """Whether the host is read again after the change: something changed (or failed) since the facts before, which
    are otherwise the verification, taken moments ago."""
    if truth(steps.get('failed_early')) or steps.get('lost'):
        return False
    sweep = steps.get('sweep') or {}
    return bool(changed(steps.get('read_ahead')) or changed(steps.get('thp')) or changed(steps.get('tuned_install'))
                or truth(steps.get('do_reboot')) or truth(steps.get('aem_restarted')) or steps.get('error')
                or sweep.get('measured')
                or (settings.get('state') == 'absent' and (steps.get('before') or {}).get('snapshot') is not None))


def intent_after(steps, settings):
    """The intent of the check before the change (:func:`intent`), for the facts after it: with the value this run
    applied in place of auto (the sweep's choice), and what the thp module persists."""
    out = intent(settings)
    kb = (steps.get('choice') or {}).get('kb')
    if kb is not None:
        out['read_ahead_kb'] = kb
    out['thp_persist_effective'] = (steps.get('thp') or {}).get('persist')
    return out


def lost_in_verify(steps, at=None):
    """The host, found gone when read again after the change (an unreachable step is kept, not fatal: a host taken
    out of the play would end with no result): ``lost`` and ``errors`` (with its record; the run's error stays the
    first); {} otherwise."""
    if steps.get('lost'):
        return {}
    gone = [s for s in (steps.get('snapshot_remove'), steps.get('facts_after')) if (s or {}).get('unreachable')]
    if not gone:
        return {}
    at = at or _now()
    task = 'Read the host again after the change'
    message = gone[0].get('msg') or 'unreachable'
    return {'lost': {'step': 'verify', 'task': task, 'at': at, 'since': None, 'message': message},
            'errors': list(steps.get('errors') or []) + [{'phase': 'verify', 'task': task, 'message': message, 'at': at}]}


def facts_after(steps, settings):
    """The facts the run ends with: those read after the change (``reread``, verify.yml's decision), or the facts
    before when nothing changed; {} for a host lost on the way."""
    if steps.get('lost'):
        return {}
    if truth(steps.get('reread')):
        return os_tuning(steps.get('facts_after'))
    return os_tuning(steps.get('facts_before'))


def miss_record(m, unit, restart_later):
    """A miss of ``compliance.py`` as the result keeps it. ``deferred``: AEM's own restart, left to a later play
    (``aem_tuning_restart_later``: migrate-aem.yml's restart batches)."""
    m = m or {}
    deferred = bool(truth(restart_later) and m.get('kind') == 'reader_restart' and aem.is_aem(m, unit))
    out = {'kind': m.get('kind'), 'subject': m.get('subject'), 'message': m.get('message')}
    # Only where they say something (a fleet's result is sized to the byte): a running reader's unit, a deferral.
    if m.get('unit'):
        out['unit'] = m['unit']
    if deferred:
        out['deferred'] = True
    return out


def _misses(facts):
    return list(_get(facts, 'compliance', 'misses') or [])


def reader_brief(process):
    """A running reader as the result keeps it, sized for a fleet (three JVMs that need a restart on a host of four
    devices stay within 4 KB): who it is, how many of its files, why (the codes; the reason in words is in the
    misses and the facts), how it was judged and the KiB per major fault it measured (and after the refresh); its
    start, file names and descriptor counts are in the facts (the report's after.json)."""
    process = process or {}
    out = dict((k, v) for k, v in process.items() if k in READER_KEYS and v not in (None, []))
    if out.get('basis') == 'inferred':
        del out['basis']  # the default: only a measurement is named
    for key, field in (('measured', 'kib_per_fault'), ('measured_after', 'kib_per_fault_after')):
        if (process.get(key) or {}).get('kib_per_fault') is not None:
            out[field] = process[key]['kib_per_fault']
    return out


def aem_left_stale(now, unit, settings):
    """Whether AEM still reads at an earlier read-ahead after the run, so that only a restart helps: named in the
    facts' ``needs_restart``, or, after an apply run (not in check mode), still ``stale``: read_ahead tried its
    refresh and could not (Yama or an LSM refused it, ``refresh_readers: false``), and the facts, which do not know
    why, would advise an apply run again. migrate-aem.yml's restart batches are gated on it."""
    left = list(now.get('needs_restart') or [])
    if settings.get('mode') == 'apply' and not truth(settings.get('check_mode')):
        left += now.get('stale') or []
    return bool(aem_processes(left, unit))


def readers_summary(steps, after, settings):
    """The processes that held files on the targets: what read_ahead refreshed (in check mode, would refresh), and
    from the facts after what still reads at an earlier read-ahead; and AEM among them, by its unit."""
    unit = settings.get('aem_service') or ''
    ra = (_get(steps, 'read_ahead', 'readers') or {}) if settings.get('mode') == 'apply' else {}
    now = after.get('readers') or {}
    unreadable = ra.get('unreadable') or []
    unscanned = now.get('unscanned') or []
    kernel_refresh = now.get('kernel_refresh')
    lists = {'refreshed': ra.get('refreshed') or [], 'stale': now.get('stale') or [],
             'needs_restart': now.get('needs_restart') or []}
    out = dict((key, [reader_brief(x) for x in found[:READERS_KEPT]]) for key, found in lists.items())
    # Sized for a fleet: a count beside a list only where the list was cut; the new keys only where they say something.
    out.update(('%s_count' % key, len(found)) for key, found in lists.items() if len(found) > READERS_KEPT)
    extra = {'descriptor_only_count': len(now.get('descriptor_only') or []),  # never a miss: the facts name them
             'aem_fine': [reader_brief(x) for x in aem_processes(now.get('fine'), unit)[:READERS_KEPT]]}
    out.update((key, value) for key, value in extra.items() if value)
    out.update({
        'unreadable': unreadable[:READERS_KEPT],
        'unreadable_count': len(unreadable),
        'unscanned': unscanned[:READERS_KEPT],
        'unscanned_count': len(unscanned),
        'kernel_refresh': kernel_refresh if kernel_refresh is not None else ra.get('kernel_refresh'),
        'aem_unit': unit,
        'aem_refreshed': bool(aem_processes(ra.get('refreshed'), unit)),
        'aem_needs_restart': aem_left_stale(now, unit, settings),
        'aem_restarted': truth(steps.get('aem_restarted')),
    })
    return out


def _thp_change(thp):
    runtime = thp.get('runtime') or {}
    cmdline = thp.get('cmdline') or None
    return {'kind': 'thp',
            'runtime': dict((name, dict((k, v) for k, v in (values or {}).items() if k != 'offered'))
                            for name, values in runtime.items()),
            'persist': thp.get('persist') or [],
            'cmdline': dict((k, v) for k, v in cmdline.items() if k in ('method', 'managed', 'running')) if cmdline else None}


def changes(steps, settings):
    """What the run changed on the host, in order (in check mode: what it would change), as records."""
    sweep = steps.get('sweep') or {}
    read_ahead = steps.get('read_ahead') or {}
    thp = steps.get('thp') or {}
    unit = settings.get('aem_service')
    snapshot = settings.get('snapshot_path')
    table = [
        (changed(steps.get('snapshot_write')), lambda: {'kind': 'snapshot', 'path': snapshot, 'action': 'written'}),
        (bool(sweep.get('measured')), lambda: {'kind': 'sweep', 'device': sweep.get('device'),
                                               'original_kb': sweep.get('original_kb'),
                                               'restored_kb': sweep.get('restored_kb')}),
        (bool((sweep.get('record') or {}).get('changed')) or changed(steps.get('sweep_unrecord')),
         lambda: {'kind': 'sweep_record', 'path': settings.get('sweep_record_path'),
                  'action': 'removed' if settings.get('state') == 'absent' else 'written'}),
        (changed(steps.get('tuned_install')), lambda: {'kind': 'tuned', 'action': 'installed'}),
        (changed(steps.get('tuned_service')), lambda: {'kind': 'tuned', 'action': 'started and enabled'}),
        (changed(read_ahead), lambda: {'kind': 'read_ahead',
                                       'devices': [d.get('name') for d in read_ahead.get('devices') or []]}),
        (changed(thp), lambda: _thp_change(thp)),
        (changed(steps.get('aem_stop')) or changed(steps.get('aem_stop_restart')),
         lambda: {'kind': 'aem', 'unit': unit, 'action': 'stopped'}),
        (bool((steps.get('reboot_done') or {}).get('rebooted')), lambda: {'kind': 'reboot'}),
        # Set once AEM was started (aem_start.yml), whether or not it then answered.
        (bool(steps.get('aem_record')), lambda: {'kind': 'aem', 'unit': unit, 'action': 'started'}),
        (changed(steps.get('snapshot_remove')), lambda: {'kind': 'snapshot', 'path': snapshot, 'action': 'removed'}),
    ]
    return [make() for done, make in table if done]


def reboot_record(steps, settings):
    """The reboot with its boot ids and times (the host's clock)."""
    before = _json(_get(steps, 'clock_before', 'stdout'))
    after = _json(_get(steps, 'clock_after', 'stdout'))
    done = steps.get('reboot_done') or {}
    return {'requested': str(settings.get('reboot')).lower(),
            'required': bool((steps.get('thp') or {}).get('reboot_required')),
            'done': bool(done.get('rebooted')) and not done.get('failed'),
            'boot_id_before': before.get('boot_id'), 'before': before.get('iso'),
            'boot_id_after': after.get('boot_id'), 'booted': after.get('booted'), 'after': after.get('iso'),
            'elapsed_s': done.get('elapsed')}


def probe_record(probes):
    """What the result keeps of io_probe's measurements before and after, or None without one after."""
    probes = probes or {}
    after = probes.get('after') or {}
    if 'read_amplification' not in after:
        return None
    out = dict((step, dict((k, v) for k, v in (probes.get(step) or {}).items() if k in PROBE_KEYS))
               for step in ('before', 'after'))
    out.update({'method': after.get('method'), 'record_kb': after.get('record_kb'), 'device': after.get('device')})
    return out


def ebs_record(probes):
    """Each NVMe volume's own statistics over the probe's reads, before and after, one entry per device."""
    by_device = {}
    for step in ('before', 'after'):
        for device, value in sorted((_get(probes, step, 'ebs') or {}).items()):
            by_device.setdefault(device, {'device': device})[step] = value
    return [by_device[d] for d in sorted(by_device)]


def _without(data, keys):
    return dict((k, v) for k, v in data.items() if k not in keys) if data else None


def readings_record(steps, after):
    """The readings the result keeps: ``first`` (the first run's, without the devices' types and tuned; null when it
    is what ``before`` reads: the first run, or nothing changed since, sized for a fleet), ``before`` and ``after``
    (without the types and the OS)."""
    before = _get(steps.get('before'), 'reading', 'now')
    first = _without(steps.get('reading_first'), ('devices', 'tuned'))
    if first and first == _without(before, ('devices', 'tuned')):
        first = None
    return {'first': first, 'before': before, 'after': _without(_get(after, 'reading', 'now'), ('devices', 'os'))}


def error_log_record(steps, settings):
    scan = _json(_get(steps, 'log_scan', 'stdout'))
    if not scan:
        return None
    return {'path': settings.get('error_log'), 'since_run': scan.get('since_run'), 'total': scan.get('total'),
            'error': scan.get('error')}


def sweep_failure(sweep):
    sweep = sweep or {}
    if not sweep.get('failed'):
        return None
    return {'msg': sweep.get('msg'), 'device': sweep.get('device'), 'restored': sweep.get('restored')}


def result(steps, settings):
    """``aem_tuning_result`` (docs/result.md, schema 3) from the steps' registered results and the run's state
    (``steps``: error, errors, lost, failed_early, choice, before, reading_first, ...) and the role's variables it
    needs (``settings``)."""
    after = facts_after(steps, settings)
    unit = settings.get('aem_service') or ''
    misses = [miss_record(m, unit, settings.get('restart_later')) for m in _misses(after)]
    misses_before = _misses(steps.get('before'))
    error = steps.get('error') or ''
    choice = steps.get('choice') or {}
    verify = _get(after, 'compliance', 'tuned_verify')
    report = ''
    if truth(settings.get('reports')) and not truth(settings.get('check_mode')):
        report = '%s/%s/report.md' % (settings.get('report_dir'), settings.get('host'))
    out = {
        'schema_version': SCHEMA, 'host': settings.get('host'), 'play': settings.get('play') or '',
        'state': settings.get('state'), 'mode': settings.get('mode'), 'check_mode': truth(settings.get('check_mode')),
        'started': steps.get('started'), 'verified': _get(after, 'clock', 'iso'),
        'targets': steps.get('targets') or [], 'devices': steps.get('device_names') or {},
        'read_ahead_kb': choice.get('kb') if settings.get('state') == 'present' else None,
        'compliant': not misses and not error,
        'lost': steps.get('lost') or None,
        'compliant_before': not misses_before and 'compliance' in (steps.get('before') or {}),
        'misses_before_count': len(misses_before),
        'misses': misses[:MISSES_KEPT], 'misses_count': len(misses),
        'misses_failing_count': len([m for m in misses if not m.get('deferred')]),
        'changes': changes(steps, settings),
        'failed_before_change': truth(steps.get('failed_early')),
        'error': error, 'errors': steps.get('errors') or [],
        'fact_errors': after.get('errors') or [],
        'reboot_required': bool((steps.get('thp') or {}).get('reboot_required')),
        'reboot': reboot_record(steps, settings),
        'aem': steps.get('aem_record') or None,
        'readers': readers_summary(steps, after, settings),
        'error_log': error_log_record(steps, settings),
        'probe': probe_record(steps.get('probes')), 'ebs': ebs_record(steps.get('probes')),
        'auto': bool(choice.get('auto', False)), 'may_sweep': bool(choice.get('may_sweep', False)),
        'read_ahead_sweep': _without(choice.get('evidence'), ('results',)) or {},
        'sweep_failure': sweep_failure(steps.get('sweep')),
        'read_ahead_default': steps.get('read_ahead_default') or {},
        'tuned_verify': verify.get('summary') if verify else 'not run',
        'snapshot_taken': steps.get('snapshot_taken') or '',
        'readings': readings_record(steps, after),
        'report': report,
    }
    return out


def failing_misses(steps, settings):
    """Every miss that fails the host ("subject: message"; the result lists the first 3): all but the deferred."""
    unit = settings.get('aem_service') or ''
    records = [miss_record(m, unit, settings.get('restart_later')) for m in _misses(facts_after(steps, settings))]
    keep_deferred = settings.get('state') == 'absent'
    return ['%s: %s' % (m['subject'], m['message']) for m in records if keep_deferred or not m.get('deferred')]


def report_note(result_data):
    """Where the report is, after the error that fails the host: what it says depends on whether anything changed."""
    if not result_data.get('report'):
        return ''
    if result_data.get('failed_before_change'):
        return ' (report: %s)' % result_data['report']
    return ' (the report says what was changed: %s)' % result_data['report']


def verdict(result_data, failing):
    """How comply.yml words the end of a run: (ok, text). Deferred misses (AEM's restart, left to a later play) do
    not fail the host; every other miss does, and ``failing`` names every one."""
    if not result_data.get('misses_count'):
        return True, 'compliant'
    if not failing:
        deferred = [m['subject'] for m in result_data.get('misses') or [] if m.get('deferred')]
        return True, ("compliant but for AEM's restart, left to a later play (aem_tuning_restart_later): "
                      + '; '.join(deferred))
    return False, '; '.join(failing)


def comply_messages(result_data, settings, text):
    """comply.yml's messages: the run's first error with where the report is (``error_msg``), the verdict of an
    apply or audit run (``fail_msg``, ``success_msg``) and of a backout (``backout_msg``)."""
    host = settings.get('host')
    return {'error_msg': '%s: %s%s' % (host, result_data.get('error'), report_note(result_data)),
            'fail_msg': '%s is not compliant (%s mode): %s' % (host, settings.get('mode'), text),
            'success_msg': '%s: %s' % (host, text),
            'backout_msg': '%s: backout incomplete: %s' % (host, text)}


def verified(steps, settings):
    """The facts the run ends with, the result, and comply.yml's verdict, note and messages (:func:`comply_messages`),
    in one mapping (one call)."""
    out = result(steps, settings)
    ok, text = verdict(out, failing_misses(steps, settings))
    verdict_out = {'facts': facts_after(steps, settings), 'result': out, 'ok': ok, 'text': text,
                   'report_note': report_note(out)}
    verdict_out.update(comply_messages(out, settings, text))
    return verdict_out


def metrics_args(steps, settings):
    """textfile_metrics' arguments (metrics.yml, through ``module_defaults``): the facts the run ends with, the
    read-ahead it applied, its first error, and the run's mode, state and AEM's unit."""
    return {'directory': settings.get('metrics_dir'), 'facts': facts_after(steps, settings),
            'read_ahead_kb': (steps.get('choice') or {}).get('kb'), 'error': steps.get('error') or '',
            'run_mode': settings.get('mode'), 'run_state': settings.get('state'), 'aem_service': settings.get('aem_service')}
