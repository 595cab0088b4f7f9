# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The aem_tuning role's decisions, on the controller, as pure functions over the steps' registered results.

The role is glue (linux-system-roles kernel_settings' way): its tasks call the modules and register what they
return; these functions decide from those records, and the filters of plugins/filter/aem_tuning.py expose them:

- :func:`run_start`: what ``tuning_facts``' check before any change decided (the targets, the read-ahead, a
  refusal), as the run's start (``before.yml``);
- :func:`step_failure`: a failed step as the run's error and as an ``errors`` record (``main.yml``, ``verify.yml``);
- :func:`aem_record`: AEM's stop, start and answer (``aem_start.yml``);
- :func:`must_reread`, :func:`facts_after`: whether the host is read again after the change, and its facts then;
- :func:`result`: ``aem_tuning_result`` (docs/result.md), with the misses as data and ``misses_failing_count``,
  the one field ``comply.yml`` asserts on.

Each takes plain mappings (``steps``: the registered results by step name; ``settings``: the role's variables it
needs) and returns plain data, so that numbers, booleans and null stay what they are on every ansible-core. A step
that did not run is ``{}`` or a skipped result: every lookup here tolerates both.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

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


# -- the start: before.yml ---------------------------------------------------------------------------

def run_start(registered, settings):
    """What the check before any change decided, from ``tuning_facts``' registered result. A refusal (its message,
    or facts without a plan) fails the run before any change: nothing is applied, and the result and the reports
    still come (``failed_early``)."""
    facts = os_tuning(registered)
    plan = facts.get('plan')
    failed = 'msg' in (registered or {}) or plan is None
    message = (registered or {}).get('msg') or 'tuning_facts failed'
    plan = plan or {}
    reading = facts.get('reading') or {}
    targets = list(plan.get('targets') or []) if not failed else []
    return {
        'failed_early': failed,
        'error': message if failed else '',
        'errors': [{'phase': 'check', 'task': 'Gather tuning facts, check the wanted values against the host',
                    'message': message}] if failed else [],
        'before': facts,
        # The first run as the result keeps it: the host's snapshot, or (none yet) this run's reading.
        'reading_first': reading.get('snapshot') or (None if failed else reading.get('now')),
        'snapshot_taken': '' if failed else (facts.get('snapshot') or {}).get('taken') or '',
        'targets': targets,
        'probing': bool(truth(settings.get('probe')) and settings.get('state') == 'present' and targets),
        'device_names': (plan.get('devices') or {}) if not failed else {},
        'started': _get(facts, 'clock', 'iso') or '',
        'started_epoch': _get(facts, 'clock', 'epoch') or '',
        'read_ahead_default': (plan.get('read_ahead_default') or {}) if not failed else {},
        # kb is null only while a sweep of this run is to choose it (apply.yml adds its choice), and for a backout.
        'choice': plan.get('read_ahead') or {},
        'sweep_timeout': plan.get('sweep_timeout'),
    }


# -- failures ------------------------------------------------------------------------------------------

def step_failure(failed_result, task_name, phase, at=None, first_error=''):
    """A failed step: ``error`` (the run's first error: ``first_error`` when there is one) and ``record`` (for
    ``errors``)."""
    failed_result = failed_result or {}
    message = failed_result.get('msg') or failed_result.get('stderr') or 'failed'
    task = task_name or 'a task'
    record = {'phase': phase, 'task': task, 'message': message}
    if at:
        record['at'] = at
    return {'error': first_error or '%s: %s' % (task, message), 'record': record, 'message': message}


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


def intent_after(steps, intent):
    """The intent of the check before the change, for the facts after it: with the value this run applied in place
    of auto (the sweep's choice), and what the thp module persists."""
    out = dict(intent or {})
    kb = (steps.get('choice') or {}).get('kb')
    if kb is not None:
        out['read_ahead_kb'] = kb
    out['thp_persist_effective'] = (steps.get('thp') or {}).get('persist')
    return out


def lost_in_verify(steps, at):
    """The host, found gone when read again after the change (an unreachable step is kept, not fatal: a host taken
    out of the play would end with no result): ``lost``, ``error`` (the run's first) and ``record``; {} otherwise."""
    if steps.get('lost'):
        return {}
    gone = [s for s in (steps.get('snapshot_remove'), steps.get('facts_after')) if (s or {}).get('unreachable')]
    if not gone:
        return {}
    task = 'Read the host again after the change'
    message = gone[0].get('msg') or 'unreachable'
    return {'lost': {'step': 'verify', 'task': task, 'at': at, 'since': None, 'message': message},
            'error': steps.get('error') or '%s: %s' % (task, message),
            'record': {'phase': 'verify', 'task': task, 'message': message, 'at': at}}


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


def verified(steps, settings):
    """The facts the run ends with, the result, and comply.yml's verdict and note, in one mapping (one call)."""
    out = result(steps, settings)
    ok, text = verdict(out, failing_misses(steps, settings))
    return {'facts': facts_after(steps, settings), 'result': out, 'ok': ok, 'text': text, 'report_note': report_note(out)}
