# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the thp module does, as ``plan(snapshot, params)`` and ``apply(plan, ...)``.

The snapshot is the run's ``ThpHost``, the one model of the host (``host.Host``) with this module's answers: the THP sysfs values, tuned, the THP
baseline file, the running and the configured kernel command line, the boot loader facts, the tuned child
profile and the files the collection never writes, each read at most once and only when the run needs it.
Read again: tuned's state files by tuned.no_profile_reason and tuned.plan_child, and the boot files by the
bootloader's edits and checks. :func:`plan` decides
everything from it and changes nothing; the plan it returns is not changed afterwards.
:func:`apply` carries it out and reads the values back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aemops.os_tuning.plugins.module_utils import bootloader, compliance, files, host, thp, tuned

KEY = 'transparent_hugepage'


class PlanError(Exception):
    """The run cannot go ahead; nothing was changed. ``warnings`` are the ones found before."""

    def __init__(self, msg, warnings=()):
        Exception.__init__(self, msg)
        self.warnings = list(warnings)


class ApplyError(Exception):
    """A change failed; ``extra`` holds changed, changes, rolled_back and not_rolled_back (as read_ahead's)."""

    def __init__(self, msg, **extra):
        Exception.__init__(self, msg)
        self.extra = extra


class ThpHost(host.Host):
    """The host model (host.Host) with what the thp module asks of it besides, in the same cache."""

    def thp_state(self):
        """thp.read_state (raises thp.ThpError without THP)."""
        return self.once('thp_state', lambda: thp.read_state(self))

    def thp_baseline_text(self):
        """The THP baseline file's text or None (raises files.FileError when it is not a regular file)."""
        return self.once('thp_baseline_text', lambda: files.read_owned(
            files.root_path(self, thp.BASELINE_FILE), thp.BASELINE_FILE))

    def running_thp(self):
        """The value of transparent_hugepage= on /proc/cmdline."""
        return self.once('running_thp', lambda: bootloader.running(self, KEY))

    def boot_facts(self):
        return self.once('boot_facts', lambda: bootloader.detect(self, self.which))

    def configured_thp(self):
        """bootloader.configured for transparent_hugepage (raises bootloader.BootloaderError)."""
        def read():
            return bootloader.configured(self, self.boot_facts(), KEY, self.run)
        return self.once('configured_thp', read)


def resolve_persist(snap, requested, warnings):
    """Where to persist: ``requested`` (None: the default) less tuned when tuned is not in use."""
    tuned_adm = snap.tuned()[0]
    have_tuned = bool(tuned_adm) and bool(snap.active_profiles())
    off = tuned.no_profile_reason(snap.root) if tuned_adm and not have_tuned else None
    if requested is None:
        if off:
            warnings.append('%s: THP persists on the kernel command line only; the tuned child profile is not '
                            'written or activated.' % off)
        return list(compliance.THP_PERSIST) if have_tuned else ['cmdline']
    problem = files.empty_entries('persist', requested)
    if problem:
        raise PlanError(problem, warnings)
    bad = [p for p in requested if p not in compliance.THP_PERSIST]
    if bad:
        raise PlanError('persist has unknown entries %s: use tuned, cmdline, or an empty list for runtime only.'
                        % ', '.join(bad), warnings)
    persist = requested
    if 'tuned' in persist and not have_tuned:
        warnings.append('persist includes tuned, but %s; THP is persisted on the kernel command line only. '
                        'Install and start tuned (the aem_tuning role does so with aem_tuning_install_tuned) to use '
                        'it.' % ('tuned is not installed' if not tuned_adm else
                                 off or 'tuned is without an active profile'))
        persist = [p for p in persist if p != 'tuned']
    return persist


def read_baseline(snap, state, warnings):
    """(baseline file text, the recorded baseline or None); PlanError when it cannot be used."""
    try:
        text = snap.thp_baseline_text()
    except files.FileError as e:
        raise PlanError(str(e), warnings)
    records, errors = files.parse_baselines(text)
    if errors:
        raise PlanError('%s has damaged baseline records (%s); restore it from backup or delete it.'
                        % (thp.BASELINE_FILE, '; '.join(errors)), warnings)
    problems = thp.baseline_problems(records[0], state) if records else []
    if problems:
        raise PlanError('%s has a baseline that cannot be restored: %s. Fix the record or delete the file (the '
                        'recorded original values are then lost).' % (thp.BASELINE_FILE, '; '.join(problems)),
                        warnings)
    return text, (records[0] if records else None)


def render_baseline(record):
    lines = files.managed_header('thp module', 'THP values found before the first change, restored by '
                                               'state=absent.')
    lines.append(files.baseline_line(record))
    return '\n'.join(lines) + '\n'


def _wanted(params, state, baseline, warnings):
    """(enabled, defrag, khugepaged value, {attr: value to set or None}, command-line value)."""
    enabled = params['enabled']
    defrag = params['defrag'] or None
    khugepaged = None
    if params['khugepaged_defrag'] is not None and 'khugepaged/defrag' in state:
        khugepaged = thp.khugepaged_value(state, params['khugepaged_defrag'])
    try:
        thp.check_offered(state, 'enabled', enabled)
        if defrag is not None:
            thp.check_offered(state, 'defrag', defrag)
    except thp.ThpError as e:
        raise PlanError(str(e), warnings)
    if params['state'] == 'present':
        return enabled, defrag, khugepaged, {'enabled': enabled, 'defrag': defrag, 'khugepaged/defrag': khugepaged}, \
            enabled
    if baseline is None:
        warnings.append('no recorded THP baseline in %s: the running values and the command line are left as they '
                        'are; only this module\'s tuned sections are removed.' % thp.BASELINE_FILE)
    return enabled, defrag, khugepaged, dict((a, (baseline or {}).get(a)) for a in thp.ATTRS), \
        (baseline or {}).get('cmdline')


def _plan_cmdline(snap, present, persist, baseline, value, warnings):
    """(cmdline result, boot loader plan or None)."""
    cmdline = {'managed': False, 'method': None, 'reason': None, 'running': snap.running_thp()}
    if not (('cmdline' in persist and present)
            or (not present and baseline is not None and baseline.get('cmdline_managed'))):
        return cmdline, None
    try:
        boot_plan = bootloader.plan(snap.root, snap.boot_facts(), KEY, value, snap.run)
    except bootloader.BootloaderError as e:
        raise PlanError('cannot plan the kernel command line: %s' % e, warnings)
    warnings.extend(boot_plan.get('warnings', []))
    cmdline.update(method=boot_plan['method'], reason=boot_plan['reason'], grubby=boot_plan.get('grubby'))
    if boot_plan['method'] == 'none':
        warnings.append('the kernel command line is not managed here: %s' % boot_plan['reason'])
        return cmdline, None
    cmdline.update(managed=True, args_before=boot_plan['args_before'], args_after=boot_plan['args_after'])
    return cmdline, boot_plan


def _plan_baseline(snap, present, state, baseline, baseline_text, boot_plan):
    """(new baseline file text or None, the baseline as the run leaves it).

    Recorded before the first change of each kind: the runtime values on the first run, the
    command line on the first run that manages it.
    """
    if present and (baseline is None or (boot_plan is not None and not baseline.get('cmdline_managed'))):
        record = dict(baseline or dict((a, state[a]['value']) for a in thp.ATTRS if a in state))
        record['cmdline_managed'] = boot_plan is not None
        record['cmdline'] = None
        if boot_plan is not None:
            values = [v for v in snap.configured_thp().values() if v is not None]
            record['cmdline'] = values[0] if values else None
        return render_baseline(record), record
    if not present:
        return None, baseline
    return baseline_text, baseline


def _plan_tuned(snap, present, persist, sections, warnings):
    """The tuned child profile plan, or None: a run that does not persist to tuned leaves its sections alone."""
    if not ((present and 'tuned' in persist) or (not present and snap.child_state()[1] is not None)):
        return None
    try:
        return tuned.plan_child(snap.root, 'thp', sections if present else [], snap.tuned()[1],
                                state=snap.child_state())
    except tuned.TunedProfileError as e:
        raise PlanError('cannot plan the tuned child profile: %s' % e, warnings)


def _plan_runtime(snap, state, wanted, warnings):
    """({attr: {before, after, offered}}, [attrs to write]); PlanError when one cannot be written."""
    runtime = {}
    changes = []
    for attr in thp.ATTRS:
        if attr not in state:
            continue
        value = wanted.get(attr)
        after = value if value is not None and value != state[attr]['value'] else state[attr]['value']
        runtime[attr] = {'before': state[attr]['value'], 'after': after, 'offered': state[attr]['offered']}
        if value is not None and value != state[attr]['value']:
            changes.append(attr)
    for attr in changes:
        try:
            thp.check_writable(snap.root, state, attr)
        except thp.ThpError as e:
            raise PlanError(str(e), warnings)
    return runtime, changes


def _reboot_required(snap, boot_plan, cmdline):
    if boot_plan is not None or cmdline['managed']:
        return bool(boot_plan and boot_plan['reboot_required'])
    # Nothing planned here (runtime only, or a backout already done): the running kernel may
    # still differ from what the boot loader is configured with, for example after a backout
    # whose reboot has not happened yet.
    if snap.boot_facts()['method'] == 'none':
        return False
    try:
        configured = snap.configured_thp()
    except bootloader.BootloaderError:
        configured = {}
    return any(v != cmdline['running'] for v in configured.values())


def _final_warnings(present, persist, enabled, defrag, cmdline, tuned_plan):
    """The warnings given after the changes."""
    out = []
    if present and defrag is not None and 'tuned' not in persist and persist:
        out.append('defrag=%s is set at runtime only: the kernel command line carries only the THP mode, so '
                   'defrag and khugepaged_defrag persist through tuned alone (persist: [tuned, cmdline]).' % defrag)
    if present and 'tuned' in persist and cmdline['running'] not in (None, enabled):
        out.append('the running kernel was booted with transparent_hugepage=%s, so tuned ignores its own THP value '
                   'until the next boot.' % cmdline['running'])
    return out + tuned.conflict_warnings(tuned_plan)


def plan(snap, params):
    """Everything one run does, from ``snap`` and the module's ``params``; raises PlanError.

    The warnings found on the way are in ``warnings``; ``final_warnings`` are the ones to give
    after the changes.
    """
    warnings = []
    present = params['state'] == 'present'
    try:
        state = snap.thp_state()
    except thp.ThpError as e:
        raise PlanError(str(e), warnings)
    tuned_adm, version = snap.tuned()
    persist = resolve_persist(snap, params['persist'], warnings)
    baseline_text, baseline = read_baseline(snap, state, warnings)
    enabled, defrag, khugepaged, wanted, cmdline_value = _wanted(params, state, baseline, warnings)
    cmdline, boot_plan = _plan_cmdline(snap, present, persist, baseline, cmdline_value, warnings)
    new_baseline_text, baseline = _plan_baseline(snap, present, state, baseline, baseline_text, boot_plan)
    sections = thp.tuned_sections(enabled, defrag, khugepaged, version, state) if present else []
    tuned_plan = _plan_tuned(snap, present, persist, sections, warnings)
    runtime, runtime_changes = _plan_runtime(snap, state, wanted, warnings)
    result = {
        'root': snap.root, 'state': state, 'tuned_adm': tuned_adm, 'persist': persist,
        'baseline_text': baseline_text, 'new_baseline_text': new_baseline_text, 'baseline': baseline,
        'baseline_changed': new_baseline_text != baseline_text,
        'cmdline': cmdline, 'boot_plan': boot_plan, 'boot_changed': bool(boot_plan and boot_plan['changed']),
        'tuned_plan': tuned_plan, 'tuned_changed': tuned.plan_changes(tuned_plan),
        # whether tuned runs, as planned: apply_child switches with tuned-adm, or writes tuned's state files
        'tuned_running': snap.tuned_running() if tuned_plan else None,
        'runtime': runtime, 'runtime_changes': runtime_changes,
        'reboot_required': _reboot_required(snap, boot_plan, cmdline),
        'warnings': warnings,
        'final_warnings': _final_warnings(present, persist, enabled, defrag, cmdline, tuned_plan),
    }
    result['changed'] = bool(runtime_changes or result['tuned_changed'] or result['boot_changed']
                             or result['baseline_changed'])
    return result


def diff(plan):
    """The diff of a plan: the runtime values, the baseline, the tuned child, the boot files and arguments."""
    runtime = plan['runtime']
    out = [{'before_header': 'THP runtime (sysfs)', 'after_header': 'THP runtime (sysfs)',
            'before': ''.join('%s=%s\n' % (a, runtime[a]['before']) for a in sorted(runtime)),
            'after': ''.join('%s=%s\n' % (a, runtime[a]['after']) for a in sorted(runtime))}]
    out.append(files.diff_entry(thp.BASELINE_FILE, plan['baseline_text'], plan['new_baseline_text']))
    tuned_plan = plan['tuned_plan']
    if tuned_plan:
        out.append(files.diff_entry(tuned_plan['path'], tuned_plan['before'], tuned_plan['after']))
    boot_plan = plan['boot_plan']
    if boot_plan:
        # The files written here and the ones the boot loader tool rewrites (BLS entries), as
        # they will read after the run.
        for change in boot_plan['files'] + boot_plan.get('predicted', []):
            if change['before'] != change['after']:
                out.append(files.diff_entry(change['path'], change['before'], change['after']))
        for source in sorted(boot_plan['args_after']):
            out.append({'before_header': '%s (kernel arguments)' % source,
                        'after_header': '%s (kernel arguments)' % source,
                        'before': '\n'.join(boot_plan['args_before'].get(source) or []) + '\n',
                        'after': '\n'.join(boot_plan['args_after'].get(source) or []) + '\n'})
    return out


def apply_bootloader(root, boot_plan, run, write):
    """The plan's files, then its commands, then the files it writes after them (grubby also
    rewrites /etc/kernel/cmdline, and without --no-etc-grub-update /etc/default/grub)."""
    for change in boot_plan['files']:
        if not change.get('after_commands'):
            write(files.root_path(root, change['path']), change['after'])
    for argv in boot_plan['commands']:
        rc, out, err = run(argv)
        if rc != 0:
            raise ApplyError('%s failed (rc %d): %s' % (' '.join(argv), rc, (err or out).strip()))
    for change in boot_plan['files']:
        if change.get('after_commands'):
            write(files.root_path(root, change['path']), change['after'])


class Applied(object):
    """What a run has changed so far, so that a failure says so and undoes what it can (as read_ahead's).

    A failure rolls the runtime THP values back to what they were before the run, lists every change
    made (``changes``) and what was rolled back, and reports changed only when something changed.
    Written files stay (each is consistent on its own) and are listed.
    """

    def __init__(self, plan):
        self.plan = plan
        self.runtime = []  # (attr, before, after)
        self.done = []

    def changes(self):
        return ['%s: %s -> %s' % (self.plan['state'][a]['path'], b, v) for a, b, v in self.runtime] + self.done

    def fail(self, msg):
        changes = self.changes()
        rolled_back, not_rolled_back = [], []
        root, state = self.plan['root'], self.plan['state']
        for attr, before, _after in reversed(self.runtime):
            try:
                thp.write(root, state, attr, before)
                rolled_back.append('%s back to %s' % (state[attr]['path'], before))
            except thp.ThpError as e:
                not_rolled_back.append(str(e))
        if changes:
            msg = '%s (after these changes: %s; rolled back: %s)' % (
                msg, '; '.join(changes), '; '.join(rolled_back) or 'nothing')
        raise ApplyError(msg, changed=bool(changes), changes=changes, rolled_back=rolled_back,
                         not_rolled_back=not_rolled_back)


def apply(plan, run, write):
    """Carry out ``plan``, then read the values back; returns {changed, tuned_actions}.

    ``write(path, text)`` writes a host path atomically. Raises ApplyError (with ``extra``: changed,
    changes, rolled_back, not_rolled_back) when a change fails, having rolled back the runtime values.
    """
    applied = Applied(plan)
    try:
        return _apply(plan, run, write, applied)
    except ApplyError as e:
        if 'changes' in e.extra:
            raise
        applied.fail(str(e))
    except (thp.ThpError, tuned.TunedProfileError) as e:
        applied.fail(str(e))
    except (IOError, OSError) as e:
        applied.fail('writing %s failed: %s' % (getattr(e, 'filename', None) or 'a file',
                                                files.describe_os_error(e)))


def _apply(plan, run, write, applied):
    root = plan['root']
    runtime = plan['runtime']
    tuned_actions = []
    if plan['baseline_changed'] and plan['new_baseline_text'] is not None:
        write(files.root_path(root, thp.BASELINE_FILE), plan['new_baseline_text'])
        applied.done.append('wrote %s' % thp.BASELINE_FILE)
    for attr in plan['runtime_changes']:
        thp.write(root, plan['state'], attr, runtime[attr]['after'])
        applied.runtime.append((attr, runtime[attr]['before'], runtime[attr]['after']))
    if plan['tuned_changed']:
        tuned_actions = tuned.apply_child(root, plan['tuned_plan'], run, plan['tuned_adm'],
                                          plan['tuned_running'], write, files.remove_owned_file)
        applied.done.extend(tuned_actions)
    if plan['boot_changed']:
        apply_bootloader(root, plan['boot_plan'], run, write)
        applied.done.append('changed the kernel command line')
    if plan['baseline_changed'] and plan['new_baseline_text'] is None:
        files.remove_owned_file(files.root_path(root, thp.BASELINE_FILE))
        applied.done.append('removed %s' % thp.BASELINE_FILE)
    # A tuned profile switch re-applies tuned's values: enforce ours and read back.
    changed = plan['changed']
    after = thp.read_state(root)
    for attr in runtime:
        value = runtime[attr]['after']
        if after[attr]['value'] != value:
            if thp.write(root, after, attr, value) != value:
                raise ApplyError('%s reads %s after writing %s: something else sets it.'
                                 % (after[attr]['path'], after[attr]['value'], value))
            changed = True
    return {'changed': changed, 'tuned_actions': tuned_actions}
