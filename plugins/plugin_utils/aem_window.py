# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The maintenance window of playbooks/aem-window.yml (issue 41), decided on the controller.

A sequential job (a backup's ``tar``, Oak's offline compaction) reads faster with a large read-ahead; AEM's random
reads want the small one the collection persists. The window raises the running read-ahead of the repository's
devices for the job's length with ``read_ahead`` (``persist: false``, ``refresh_readers: false``: AEM's open files keep
their small window), then sets the persisted value again with ``refresh_readers: true``, which brings every file
opened during the window (AEM's new tar files included) back to it, measured in the process.

- :func:`plan`: from ``tuning_facts``' facts (each target's device, its running and its persisted read-ahead, the
  page size) and the playbook's settings: the mode (a job, ``--tags open`` or ``--tags close``), the window's value,
  the job's command line, whether a killed run left a window open, and what the run does at each step. Bad input is
  named with its fix in ``errors``, and then the plan does nothing;
- :func:`closed`: what a closing ``read_ahead`` (the recovery's or the close's) did, and whether the run must fail:
  a reader that no refresh reached (a kernel without ``pidfd_getfd``) needs a restart;
- :func:`result`: the run's record, ``aem_window_result``, and its verdict.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.aemops.os_tuning.plugins.module_utils import aem, compliance

DEFAULT_KB = 512          # docs/window.md: the largest request the emulated volume took (bench/RESULTS.md)
KILL_AFTER_S = 30         # timeout(1) sends SIGKILL this long after its SIGTERM
ASYNC_MARGIN_S = 60       # the async job outlives timeout(1) by this much, as a backstop
MAX_TIMEOUT_S = 7 * 24 * 3600
TIMED_OUT_RC = 124        # timeout(1)'s exit status when it stopped the job
OUR_TAGS = ('open', 'close', 'always')
DIGITS = re.compile(r'^[0-9]+$')
RULES = '/etc/udev/rules.d/90-aemops-read-ahead.rules'


def _whole(value):
    """``value`` as an int when it is one (not a bool) or text of ASCII digits; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, compliance.INTEGER_TYPES):
        return value
    if isinstance(value, compliance.STRING_TYPES) and DIGITS.match(value.strip()):
        return int(value.strip())
    return None


def mode_of(run_tags, skip_tags):
    """(mode, error): ``job`` without tags, ``open`` or ``close`` with that tag alone."""
    tags = set(run_tags or ['all']) - set(['always'])
    skipped = sorted(set(skip_tags or []) & set(OUR_TAGS))
    if skipped:
        return None, ('--skip-tags %s: the window\'s steps are chosen with --tags open or --tags close, never skipped '
                      '(a skipped close would leave the large read-ahead on AEM\'s device); drop --skip-tags.'
                      % ','.join(skipped))
    if tags == set(['all']):
        return 'job', None
    if tags in (set(['open']), set(['close'])):
        return tags.pop(), None
    return None, ('--tags %s: run with no --tags (the window around aem_window_command), with --tags open (raise it '
                  'for a job run by something else) or with --tags close (put it back); one of them.'
                  % ','.join(sorted(tags)))


def devices_of(facts):
    """([{name, paths, live_kb, persisted_kb}], errors): the governing device of each target path of tuning_facts'
    plan, once each, with its running read-ahead and the value its rule in the rules file persists."""
    plan = facts.get('plan') or {}
    paths = facts.get('paths') or {}
    blocks = facts.get('block_devices') or {}
    out, errors = [], []
    for target in plan.get('targets') or []:
        name = (paths.get(target) or {}).get('device')
        if not name:
            errors.append('%s: no block device found (%s); correct aem_tuning_paths.'
                          % (target, (paths.get(target) or {}).get('error', 'not resolved')))
            continue
        known = [d for d in out if d['name'] == name]
        if known:
            known[0]['paths'].append(target)
            continue
        info = blocks.get(name) or {}
        out.append({'name': name, 'paths': [target], 'live_kb': info.get('read_ahead_kb'),
                    'persisted_kb': info.get('rule')})
    if not out and not errors:
        errors.append('no AEM repository found: set aem_tuning_paths (the crx-quickstart/repository directory) for '
                      'the host; the window raises the read-ahead of its device only.')
    for d in out:
        if d['persisted_kb'] is None:
            errors.append('%s (%s) has no persisted read-ahead in %s: the window closes to that value, so apply the '
                          'aem_tuning role first (aemops.os_tuning.aem_tuning), then open the window.'
                          % (d['name'], ', '.join(d['paths']), RULES))
    return out, errors


def window_kb(value, page_kb, devices):
    """(kb, error): the window's read-ahead, DEFAULT_KB when none is given."""
    if value is None or value == '':
        value = DEFAULT_KB
    kb = _whole(value)
    if kb is None:
        return None, 'aem_window_kb must be a whole number of KiB (for example %d), not %r.' % (DEFAULT_KB, value)
    fault = compliance.read_ahead_fault(kb, page_kb)
    if fault == 'range':
        return None, ('aem_window_kb=%d is out of range: give at most %d KiB (the collection\'s largest read-ahead); '
                      '%d is the default.' % (kb, compliance.MAX_READ_AHEAD_KB, DEFAULT_KB))
    if fault == 'page':
        return None, ('aem_window_kb=%d is not a multiple of the page size (%d KiB): the kernel keeps read-ahead in '
                      'pages and would store %d. Use a multiple of %d.' % (kb, page_kb, kb - kb % page_kb, page_kb))
    low = [d for d in devices if d['persisted_kb'] is not None and kb <= d['persisted_kb']]
    if low:
        return None, ('aem_window_kb=%d is not above the persisted read-ahead of %s: a window raises it. Give more '
                      'than %d KiB (the default is %d).'
                      % (kb, ', '.join('%s (%d KiB)' % (d['name'], d['persisted_kb']) for d in low),
                         max(d['persisted_kb'] for d in low), DEFAULT_KB))
    return kb, None


def job_of(mode, command, timeout, check_mode=False):
    """(job, errors): the job's command line under timeout(1), its async limit and poll interval; None without one."""
    given = command not in (None, '', [])
    if mode != 'job':
        if given:
            return None, ['aem_window_command is run only without --tags: with --tags %s the job is run by something '
                          'else. Drop -e aem_window_command, or the tag.' % mode]
        return None, []
    errors, argv = [], None
    if not given:
        errors.append('aem_window_command is not set: give the job to run in the window (a list of arguments, or '
                      'one line for /bin/sh), or run --tags open before a job run by something else and --tags '
                      'close after it.')
    elif isinstance(command, compliance.STRING_TYPES):
        argv = ['/bin/sh', '-c', command]
    elif isinstance(command, list) and all(isinstance(a, compliance.STRING_TYPES) and a for a in command):
        argv = list(command)
    else:
        errors.append('aem_window_command must be a list of non-empty strings (the arguments) or one string (run '
                      'by /bin/sh -c), not %r.' % (command,))
    seconds = _whole(timeout)
    if seconds is None or not 0 < seconds <= MAX_TIMEOUT_S:
        errors.append('aem_window_timeout must be a whole number of seconds from 1 to %d (the job is stopped then, '
                      'and the window closes), not %r.' % (MAX_TIMEOUT_S, timeout))
    if errors:
        return None, errors
    return {'argv': ['timeout', '--kill-after=%d' % KILL_AFTER_S, str(seconds)] + argv, 'command': argv,
            'timeout_s': seconds, 'async_s': seconds + KILL_AFTER_S + ASYNC_MARGIN_S,
            'poll_s': 2 if seconds <= 120 else 10, 'check_mode': bool(check_mode)}, []


def _groups(devices):
    """[{kb, devices}]: the devices by their persisted value (one read_ahead call per value)."""
    by_kb = {}
    for d in devices:
        by_kb.setdefault(d['persisted_kb'], []).append(d['name'])
    return [{'kb': kb, 'devices': sorted(names)} for kb, names in sorted(by_kb.items())]


def plan(facts, settings):
    """What the run does, from tuning_facts' ``ansible_facts.os_tuning`` and the playbook's ``settings`` (``kb``,
    ``command``, ``timeout``, ``run_tags``, ``skip_tags``, ``restart_handled``, ``aem_service``, ``check_mode``).
    With ``errors``, nothing is to be done (``recover``, ``open`` and ``close`` are empty, ``job`` None)."""
    settings = settings or {}
    facts = facts or {}
    mode, mode_error = mode_of(settings.get('run_tags'), settings.get('skip_tags'))
    devices, errors = devices_of(facts)
    errors = ([mode_error] if mode_error else []) + errors
    page_kb = (facts.get('plan') or {}).get('page_kb') or 4
    kb, kb_error = window_kb(settings.get('kb'), page_kb, devices) if mode != 'close' else (None, None)
    job, job_errors = job_of(mode, settings.get('command'), settings.get('timeout'), settings.get('check_mode'))
    errors += ([kb_error] if kb_error else []) + job_errors
    left_open = [d for d in devices if d['persisted_kb'] is not None and d['live_kb'] != d['persisted_kb']]
    out = {'mode': mode, 'kb': kb, 'devices': devices, 'left_open': [d['name'] for d in left_open],
           'recover': [], 'open': [], 'job': None, 'close': [], 'errors': errors,
           'restart_handled': bool(settings.get('restart_handled')), 'aem_service': settings.get('aem_service') or ''}
    if errors:
        out['says'] = ['nothing was changed: %s' % ' '.join(errors)]
        return out
    if mode != 'close':
        out['recover'] = _groups(left_open)
        out['open'] = sorted(d['name'] for d in devices)
    if mode != 'open':
        out['close'] = _groups(devices)
    out['job'] = job if job and not job['check_mode'] else None
    out['says'] = plan_lines(out, devices, left_open, job)
    return out


def _kb_list(devices, key):
    return ', '.join('%s %s KiB' % (d['name'], d[key]) for d in devices)


def plan_lines(out, devices, left_open, job):
    """What the run will do, one line per step, in the order it does it."""
    lines = []
    if left_open and out['mode'] != 'close':
        now, persisted = _kb_list(left_open, 'live_kb'), _kb_list(left_open, 'persisted_kb')
        lines.append('a window is open (a killed run left it, or the value drifted): %s now, persisted %s; it is '
                     'closed first, its readers refreshed.' % (now, persisted))
    if out['open']:
        lines.append('open: %s to %d KiB, running value only (persist: false); the files AEM holds open keep their '
                     'window (refresh_readers: false), so read_ahead names them as needing a restart for the new '
                     'value: that is the window working, not a fault.' % (', '.join(out['open']), out['kb']))
    if job:
        lines.append('job: %s, stopped after %d s.' % (' '.join(job['command']), job['timeout_s'])
                     if not job['check_mode'] else 'job: not run in check mode.')
    if out['mode'] == 'open':
        lines.append('the window stays open: run the job, then this playbook with --tags close. Until then AEM '
                     'reads every file it opens at %d KiB.' % out['kb'])
    if out['close']:
        state = ''
        if out['mode'] == 'close':
            opened = [d for d in devices if d['name'] in out['left_open']]
            state = (' (open: %s now)' % _kb_list(opened, 'live_kb') if opened else
                     ' (no window is open: every device at its persisted value)')
        also = '' if out['mode'] == 'close' else ', also when the job fails'
        lines.append('close: %s back to the persisted value%s, every reader that opened a file meanwhile refreshed '
                     'in place (AEM\'s included)%s.' % (_kb_list(devices, 'persisted_kb'), state, also))
    return lines


def _ran(registered):
    """The results of a registered read_ahead task (a loop's, or one) that ran."""
    registered = registered or {}
    results = registered.get('results') if 'results' in registered else [registered] if registered else []
    return [r for r in results if isinstance(r, dict) and r and not r.get('skipped')]


def _kib(measurement):
    return (measurement or {}).get('kib_per_fault')


def _reader(r, unit, **extra):
    out = {'pid': r.get('pid'), 'comm': r.get('comm'), 'unit': r.get('unit'), 'aem': aem.is_aem(r, unit)}
    out.update(extra)
    return out


def _refreshed_line(r):
    if r['measured_kib'] is None or r['measured_after_kib'] is None:
        return '%s (not measured: it mapped nothing, or was idle)' % aem.label(r)
    return '%s: %s -> %s KiB per major fault, measured' % (aem.label(r), r['measured_kib'], r['measured_after_kib'])


def closed(registered, the_plan, step='close'):
    """What a closing read_ahead did (``step``: ``recover``, the window a killed run left open, or ``close``):
    ``ran``, ``devices`` (before and after), ``refreshed`` (each reader's KiB per major fault before and after),
    ``needs_restart``, ``failed`` (a reader needs a restart and none is handled elsewhere) and ``msg``."""
    the_plan = the_plan or {}
    unit = the_plan.get('aem_service') or ''
    results = _ran(registered)
    out = {'step': step, 'ran': bool(results), 'devices': [], 'refreshed': [], 'needs_restart': [],
           'kernel_refresh': None, 'failed': False, 'msg': ''}
    for r in results:
        out['devices'] += [{'name': d.get('name'), 'before_kb': d.get('before_kb'), 'after_kb': d.get('after_kb')}
                           for d in r.get('devices') or []]
        readers = r.get('readers') or {}
        if readers.get('kernel_refresh') is not None and out['kernel_refresh'] is not False:
            out['kernel_refresh'] = bool(readers['kernel_refresh'])
        out['refreshed'] += [_reader(x, unit, measured_kib=_kib(x.get('measured')),
                                     measured_after_kib=_kib(x.get('measured_after')))
                             for x in readers.get('refreshed') or []]
        out['needs_restart'] += [_reader(x, unit, why=x.get('why'), reason=x.get('reason'))
                                 for x in readers.get('needs_restart') or []]
    if not results:
        return out
    out['failed'] = bool(out['needs_restart']) and not the_plan.get('restart_handled')
    out['msg'] = ' '.join(closed_lines(out, unit, the_plan.get('restart_handled')))
    return out


def closed_lines(out, unit, handled):
    """The words of :func:`closed`'s result."""
    what = ('the window a killed run left open was closed first' if out['step'] == 'recover' else 'the window closed')
    lines = ['%s: %s.' % (what, ', '.join('%s %s -> %s KiB (persisted)' % (d['name'], d['before_kb'], d['after_kb'])
                                          for d in out['devices']))]
    if out['refreshed']:
        lines.append('Refreshed in place: %s.' % '; '.join(_refreshed_line(r) for r in out['refreshed']))
    if out['needs_restart']:
        named = '; '.join('%s%s: %s' % (aem.label(r), ' (AEM)' if r['aem'] else '', r['reason'])
                          for r in out['needs_restart'])
        kernel = (' This kernel has no pidfd_getfd (before Linux 5.6: RHEL 7 and 8), so no open file can be '
                  'refreshed in place.' if out['kernel_refresh'] is False else '')
        lines.append('NOT REFRESHED, A RESTART IS NEEDED: %s.%s These processes keep reading the files they opened '
                     'during the window at its read-ahead until they restart.' % (named, kernel))
        aem_named = unit and any(r['aem'] for r in out['needs_restart'])
        how = ' (systemctl restart %s)' % unit if aem_named else ''
        lines.append('A restart is handled elsewhere (aem_window_restart_handled): restart them in this maintenance.'
                     if handled else
                     'Restart them now%s, or run with -e aem_window_restart_handled=true when their restart is planned '
                     'elsewhere.' % how)
    return lines


def job_record(registered, the_plan):
    """The job's exit, time and last lines, or None when it did not run."""
    registered = registered or {}
    job = (the_plan or {}).get('job')
    if not job or not registered or registered.get('skipped'):
        return None
    rc = registered.get('rc')
    out = {'rc': rc, 'timed_out': rc == TIMED_OUT_RC, 'start': registered.get('start'),
           'end': registered.get('end'), 'delta': registered.get('delta'),
           'stdout_tail': (registered.get('stdout_lines') or [])[-20:],
           'stderr_tail': (registered.get('stderr_lines') or [])[-20:], 'failed': bool(registered.get('failed'))}
    if out['timed_out']:
        out['msg'] = 'the job was stopped at its timeout (%d s; timeout(1) exited 124).' % job['timeout_s']
    elif rc is None:
        out['msg'] = 'the job did not finish: %s' % registered.get('msg', 'no exit status')
    elif rc:
        out['msg'] = 'the job failed with exit status %d.' % rc
    else:
        out['msg'] = 'the job ended with exit status 0 after %s.' % registered.get('delta')
    out['failed'] = out['failed'] or rc != 0
    return out


def result(steps, the_plan):
    """``aem_window_result``: the run's record from its steps (``recover``, :func:`closed`'s result of the recovery;
    ``open``, ``job`` and ``close``, the registered tasks; ``failure``, what failed inside the window) and the
    verdict, ``failed`` and ``msg``."""
    steps = steps or {}
    the_plan = the_plan or {}
    opened = _ran(steps.get('open'))
    record = {'mode': the_plan.get('mode'), 'kb': the_plan.get('kb'), 'devices': the_plan.get('devices'),
              'recovered': steps.get('recover') if (steps.get('recover') or {}).get('ran') else None,
              'opened': ({'devices': [{'name': d.get('name'), 'before_kb': d.get('before_kb'),
                                       'after_kb': d.get('after_kb')} for r in opened for d in r.get('devices') or []]}
                         if opened else None),
              'job': job_record(steps.get('job'), the_plan), 'failure': steps.get('failure') or None}
    close = closed(steps.get('close'), the_plan, 'close')
    record['closed'] = close if close['ran'] else None
    lines = []
    if record['recovered']:
        lines.append(record['recovered']['msg'])
    if record['opened']:
        moved = ['%s %s -> %s KiB' % (d['name'], d['before_kb'], d['after_kb']) for d in record['opened']['devices']]
        lines.append('the window opened: %s.' % ', '.join(moved))
    if record['job']:
        lines.append(record['job']['msg'])
    failure = record['failure']
    if failure and not (record['job'] and record['job']['failed']):
        lines.append('failed inside the window: %s: %s' % (failure.get('task'), failure.get('msg')))
    if record['closed']:
        lines.append(close['msg'])
    elif the_plan.get('mode') == 'open' and record['opened']:
        lines.append('The window stays open: close it with --tags close after the job.')
    record['failed'] = bool(failure or (record['job'] or {}).get('failed') or close['failed']
                            or (record['recovered'] or {}).get('failed'))
    record['msg'] = ' '.join(lines) or 'nothing to do.'
    return record
