# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the read_ahead module does, as ``plan(snapshot, params)`` and ``apply(plan, ...)``.

The snapshot is the run's ``ReadAheadHost``, the one model of the host (``host.Host``) with this module's answers: the udev database, mountinfo, the stable
identities, the rules file, the other files that set read-ahead, the LVM values (lvs), tuned's answers and the
files the collection never writes (tuned's main configuration and stock profiles) are read once whatever step
asks. Read again: tuned's state files (active_profile, profile_mode, the pid) by the tuned functions that plan
and activate the child, and the sysfs values a run changes (read_ahead_kb). :func:`plan` decides
everything from it, validates everything before the first write and changes nothing; the
plan is not changed afterwards. :func:`apply` makes the changes, undoes what it can when one
fails, and reads the values back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    blockdev, boot_guard, compliance, files, host, runstate, tuned, udev_rules)


class PlanError(Exception):
    """The run cannot go ahead; nothing was changed. ``warnings`` are the ones found before,
    ``extra`` more keys for the failure result."""

    def __init__(self, msg, warnings=(), **extra):
        Exception.__init__(self, msg)
        self.warnings = list(warnings)
        self.extra = extra


class ApplyError(Exception):
    """A change failed; ``extra`` holds changed, changes, rolled_back and not_rolled_back."""

    def __init__(self, msg, **extra):
        Exception.__init__(self, msg)
        self.extra = extra


class ReadAheadHost(host.Host):
    """The host model (host.Host) with what the read_ahead module asks of it besides, in the same cache."""

    def rules(self, rules_path):
        """(text, rules, baselines) of the collection's udev rules file; raises RulesFileError or FileError."""
        def read():
            text = files.read_owned(files.root_path(self, rules_path), rules_path)
            return (text,) + tuple(udev_rules.parse(text, rules_path))
        return self.once(('rules', rules_path), read)

    def file_conflicts(self, rules_path):
        """Other udev rules and rc.local lines that set read-ahead (udev_rules.file_conflicts)."""
        return self.once(('file_conflicts', rules_path), lambda: udev_rules.file_conflicts(self, rules_path))

    def lvs(self, vg, lv, name):
        """(blockdev.lvs_read_ahead for the LV, None) or (None, why it failed); None without lvs."""
        def read():
            lvs = self.which('lvs')
            if not lvs:
                return None
            try:
                return blockdev.lvs_read_ahead(self.run, lvs, vg, lv, name), None
            except blockdev.BlockDeviceError as e:
                return None, str(e)
        return self.once(('lvs', vg, lv), read)


# -- parameters ---------------------------------------------------------------------------------

def strict_kb(value):
    """read_ahead_kb as an int: an int (not a bool, not a float) or a string of ASCII digits; ValueError otherwise.

    Ansible's int type takes False as 0 and, on Python 3, any Unicode digits ('٣٢' as 32).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError('read_ahead_kb: unable to convert to int: %r is a boolean, not a number of KiB.' % value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        raise ValueError('read_ahead_kb: unable to convert to int: %r is a floating-point number: give a whole '
                         'number of KiB as an integer or a string of ASCII digits (for example 32).' % (value,))
    text = value if isinstance(value, str) else None
    if text is None:
        try:
            text = value.encode('utf-8') if not isinstance(value, bytes) else value  # Python 2 unicode
            text = text.decode('ascii') if str is not bytes else text
        except (AttributeError, UnicodeError):
            text = None
    if text is not None and re.match(r'^-?[0-9]+\Z', text.strip()):
        return int(text.strip())
    raise ValueError('read_ahead_kb: unable to convert to int: %r is not a whole number of KiB written in ASCII '
                     'digits (for example 32).' % (value,))


def validate(params):
    """(read_ahead_kb as an int or None, warnings); PlanError for parameters that cannot work."""
    warnings = []
    try:
        kb = strict_kb(params['read_ahead_kb'])
    except ValueError as e:
        raise PlanError(str(e), warnings)
    try:
        files.check_path_form(params['rules_file'], 'rules_file')
    except files.FileError as e:
        raise PlanError(str(e), warnings)
    if not params['rules_file'].endswith('.rules'):
        warnings.append('rules_file %s does not end in .rules: udev reads only *.rules files, so this rule will not '
                        'apply at boot.' % params['rules_file'])
    if params['state'] == 'present':
        if kb is None:
            raise PlanError('read_ahead_kb is required with state=present, in KiB (for example 32).', warnings)
        error = compliance.read_ahead_error(kb, compliance.page_kb_of())
        if error:
            raise PlanError(error, warnings)
    unit = params.get('aem_service')
    if unit:
        problem = boot_guard.unit_problem(unit)
        if problem:
            raise PlanError('%s; nothing was changed.' % problem, warnings)
        if params['rules_file'] != udev_rules.RULES_FILE:
            raise PlanError('aem_service installs a start guard that reads the rules file %s; it cannot be used with '
                            'rules_file %s. Leave rules_file at its default, or aem_service unset.'
                            % (udev_rules.RULES_FILE, params['rules_file']), warnings)
    if not params['devices'] and not params['paths']:
        raise PlanError('nothing to tune: give devices= (kernel names or /dev paths) or paths= (filesystem paths).',
                        warnings)
    for problem in (files.empty_entries('devices', params['devices']), files.empty_entries('paths', params['paths']),
                    files.relative_entries('paths', params['paths'])):
        if problem:
            raise PlanError(problem, warnings)
    return kb, warnings


def resolve(snap, params, warnings):
    """([governing device names in order], {name: [targets]}, skipped); PlanError (changed=False) on errors."""
    root = snap.root
    order, targets, skipped, errors = [], {}, [], []

    def add(name, target):
        if name not in targets:
            order.append(name)
            targets[name] = []
        if target not in targets[name]:
            targets[name].append(target)

    def take(target, finder):
        try:
            name = finder()
        except blockdev.BlockDeviceError as e:
            if params['ignore_missing']:
                skipped.append({'target': target, 'reason': str(e)})
                warnings.append('skipping %s: %s' % (target, e))
            else:
                errors.append(str(e))
            return
        governing = blockdev.whole_disk(root, name)
        add(governing, target)
        if params['underlying']:
            for disk in blockdev.underlying_disks(root, governing):
                add(disk, target)

    for spec in params['devices']:
        take(spec, lambda spec=spec: blockdev.resolve_device(root, spec))
    for path in params['paths']:
        take(path, lambda path=path: blockdev.device_for_path(root, path)[0])
    if errors:
        raise PlanError('; '.join(errors), warnings, changed=False)
    return order, targets, skipped


@contextlib.contextmanager
def device_locks(snap, params, check_mode):
    """Hold the read-ahead lock of every device this run may write, in sorted order.

    It is the lock a read-ahead sweep holds while it measures and restores (runstate.device_lock_name,
    keyed by major:minor), so the run waits for a sweep to end (at most runstate.DEFAULT_LOCK_TIMEOUT
    seconds, then fails naming the holder) and plans from the value the device holds afterwards.
    Check mode writes nothing and takes none; a run that is not root cannot take them (see
    files.locked_all). Unresolvable targets are left to :func:`plan` to report.
    """
    if check_mode:
        yield
        return
    try:
        names = resolve(snap, dict(params, ignore_missing=True), [])[0]
    except PlanError:
        names = []
    stack = []
    try:
        for majmin in sorted(set(blockdev.majmin(snap.root, name) for name in names) - set([None])):
            cm = runstate.locked(snap.root, runstate.device_lock_name(majmin), 'the read-ahead of block device %s'
                                 % majmin, required=runstate.euid() == 0)
            cm.__enter__()
            stack.append(cm)
        yield
    finally:
        while stack:
            stack.pop().__exit__(None, None, None)


# -- planning -------------------------------------------------------------------------------------

def lvm_state(snap, name, warnings):
    """{vg, lv, before} for an LV, or None. Uses lvs, which is read-only."""
    vg, lv = blockdev.lvm_names(snap.root, name)
    if not vg or not lv:
        return None
    answer = snap.lvs(vg, lv, name)
    if answer is None:
        warnings.append('%s is an LVM volume but lvs is not installed; its LVM read-ahead is left alone.' % name)
        return None
    before, error = answer
    if error:
        raise PlanError(error, warnings)
    return {'vg': vg, 'lv': lv, 'before': before}


def _plan_device(snap, params, kb, name, rules, new, warnings):
    """One device's planned entry; updates the planned rules and baselines in ``new``."""
    root = snap.root
    kind = blockdev.device_type(root, name)
    before = blockdev.read_ahead_kb(root, name)
    if before is None:
        raise PlanError('%s has no queue/read_ahead_kb in sysfs; it cannot be tuned.' % name, warnings)
    sid, refused = blockdev.stable_id_report(root, name)
    match = udev_rules.match_clause(sid)
    entry = {'name': name, 'path': blockdev.device_path(root, name), 'type': kind, 'stable_id': sid,
             'mount_points': blockdev.mount_points(root, name), 'before_kb': before, 'rule': None,
             'lvm': lvm_state(snap, name, warnings) if kind == 'lvm' else None, 'lvm_target': None}
    lvm = entry['lvm']
    rules_path = params['rules_file']
    if params['state'] == 'present':
        target = kb
        if params['persist']:
            if match is None:
                raise PlanError('%s (%s) has no stable identity (no serial, WWN, DM UUID or MD UUID) to '
                                'match in a udev rule, and kernel names can change at boot.%s Give the disk '
                                'a serial (for a loop device: a backing file with a plain name), or set '
                                'persist=false to change only the running value.'
                                % (name, kind, (' Refused: %s.' % '; '.join(refused)) if refused else ''), warnings)
            new['rules'][match] = kb
            entry['rule'] = udev_rules.render_rule(match, kb)
            if match not in new['baselines']:
                new['baselines'][match] = {'match': match, 'device': name, 'read_ahead_kb': before,
                                           'lvm_read_ahead': lvm['before'] if lvm else None}
            if lvm is not None and lvm['before'] != blockdev.kb_to_sectors(kb):
                entry['lvm_target'] = blockdev.kb_to_sectors(kb)
        elif match in rules and rules[match] != kb:
            warnings.append('%s: the persisted rule in %s sets %d KiB and will apply again at the next boot '
                            '(persist=false changes only the running value).' % (name, rules_path, rules[match]))
    else:
        baseline = new['baselines'].pop(match, None) if match else None
        new['rules'].pop(match, None)
        target = baseline.get('read_ahead_kb') if baseline else None
        if baseline is None:
            warnings.append('%s: no recorded original value in %s; its running read-ahead (%d KiB) is left as it '
                            'is.' % (name, rules_path, before))
        elif lvm is not None and baseline.get('lvm_read_ahead') is not None \
                and lvm['before'] != baseline['lvm_read_ahead']:
            entry['lvm_target'] = baseline['lvm_read_ahead']
    entry['planned_kb'] = target if target is not None else before
    return entry


def tuned_context(snap, warnings, planned_child=None):
    """What tuned does to disks, from the active profiles or, when planned, from our child profile."""
    profiles = snap.active_profiles()
    texts = None
    if planned_child is not None:
        profiles = tuned.desired_active(planned_child['parents'])
        texts = {planned_child['path']: planned_child['after']}
    if not profiles:
        return None
    version = snap.tuned_version()
    try:
        units, chain = tuned.effective_units(snap.root, profiles, version, texts)
    except tuned.TunedProfileError as e:
        warnings.append('cannot read the active tuned profile to check for conflicts: %s' % e)
        return None
    warnings.extend(w for w in tuned.not_evaluated(chain) if w not in warnings)
    return {'profiles': profiles, 'units': units, 'version': version, 'running': snap.tuned_running()}


def tuned_groups(snap, rules, warnings):
    """{kb: [(udev property, value)]}: how tuned can select each device that has a rule."""
    root = snap.root
    by_match = {}
    for name in blockdev.whole_disks(root):
        match = udev_rules.match_clause(blockdev.stable_id(root, name))
        if match in rules:
            by_match[match] = name
    groups = {}
    for match in sorted(rules):
        name = by_match.get(match)
        if name is None:
            continue  # the device is not attached now; its rule stays for when it is
        ident = blockdev.tuned_identity(root, name)
        if ident is None:
            warnings.append('%s has no udev property that tuned can select it by (udev database missing?), so the '
                            'tuned child profile cannot protect it; tuned may still change its read-ahead.' % name)
            continue
        groups.setdefault(rules[match], []).append(ident)
    return groups


def plan_tuned(snap, params, rules, warnings):
    """Plan the read_ahead sections of the tuned child profile, or None when tuned is not in use."""
    if not params['tuned_override']:
        return None
    try:
        if not snap.active_profiles() and snap.child_state()[1] is None:
            return None
        parents = snap.child_state()[4]
        version = snap.tuned_version()
        sections = tuned.disk_sections(snap.root, parents, tuned_groups(snap, rules, warnings), version) \
            if parents else []
        return tuned.plan_child(snap.root, 'read_ahead', sections, version, state=snap.child_state())
    except tuned.TunedProfileError as e:
        raise PlanError('cannot plan the tuned child profile: %s' % e, warnings)


def tuned_read_ahead(root, units, version, name, kind):
    """The tuned instance of ``units`` that sets the read-ahead of ``name`` (a device of ``kind``): tuned's
    read_ahead_for_device ({instance, profile, readahead}), or None when none does or tuned ``version``'s disk plugin
    does not take such a device. The one check of it: tuning_facts reports it, :func:`device_conflicts` compares it
    with the value asked for."""
    hit = tuned.read_ahead_for_device(units, name, blockdev.tuned_properties(root, name))
    if hit and hit['readahead'] and tuned.disk_plugin_covers(
            kind, version=version, parent_subsystem=tuned.device_parent_subsystem(root, name)):
        return hit
    return None


def device_conflicts(root, entry, kb, tuned_ctx, file_conflicts):
    name = entry['name']
    conflicts = []
    if tuned_ctx is not None:
        hit = tuned_read_ahead(root, tuned_ctx['units'], tuned_ctx['version'], name, entry['type'])
        if hit:
            setting = hit['readahead']
            expected = tuned.expected_read_ahead(setting, kb)
            if expected != kb:
                conflicts.append({
                    'source': 'tuned',
                    'profile': hit['profile'],
                    'active_profiles': tuned_ctx['profiles'],
                    'instance': hit['instance'],
                    'setting': setting['raw'],
                    'running': tuned_ctx['running'],
                    'effect': 'tuned sets read-ahead of %s to %d KiB when it starts or switches profile, and '
                              '"tuned-adm verify" fails while it is %d' % (name, expected, kb),
                })
    conflicts.extend(file_conflicts)
    return conflicts


def _check_writes(snap, params, check_mode, devices, file_changed, warnings):
    """Everything is validated before the first write: the sysfs files and the rules file."""
    for entry in devices:
        if entry['planned_kb'] != entry['before_kb']:
            try:
                blockdev.check_writable(snap.root, entry['name'])
            except blockdev.BlockDeviceError as e:
                raise PlanError(str(e), warnings)
    if file_changed:
        try:
            files.check_owned_target(files.root_path(snap.root, params['rules_file']), params['rules_file'],
                                     check_only=check_mode)
        except files.FileError as e:
            raise PlanError('cannot write the rules file: %s' % e, warnings)


def _final_warnings(params, devices, tuned_plan):
    """The warnings given after the changes: what tuned will set back."""
    out = []
    for entry in devices:
        for conflict in entry['conflicts']:
            if conflict['source'] == 'tuned':
                hint = ('' if params['tuned_override'] and params['persist'] else
                        ' Set tuned_override=true (with persist=true) to make tuned agree.')
                out.append('%s: active tuned profile %s ([%s] readahead=%s from %s) will set it back to a different '
                           'value at the next tuned start or profile switch.%s'
                           % (entry['name'], ' '.join(conflict['active_profiles']), conflict['instance'],
                              conflict['setting'], conflict['profile'], hint))
    return out + tuned.conflict_warnings(tuned_plan)


def plan_guard(snap, params, present, warnings):
    """AEM's start guard (module_utils/boot_guard.py): None when ``aem_service`` is not given (left as it is)."""
    unit = params.get('aem_service')
    if unit is None:
        return None
    try:
        guard = boot_guard.plan(snap.root, unit, present, snap.systemd_version() if unit and present else None)
    except (files.FileError, IOError, OSError) as e:
        raise PlanError('cannot install the start guard of %s: %s' % (unit, e), warnings)
    if guard['warning']:
        warnings.append(guard['warning'])
    return guard


def plan(snap, params, check_mode, kb, warnings):
    """Everything one run does; raises PlanError with nothing changed.

    ``kb`` and ``warnings`` come from :func:`validate`. The plan's ``devices`` carry each
    device's ``planned_kb`` and ``lvm_target`` (None: the LVM value stays).
    """
    present = params['state'] == 'present'
    rules_path = params['rules_file']
    order, targets, skipped = resolve(snap, params, warnings)
    try:
        before_text, rules, baselines = snap.rules(rules_path)
    except (udev_rules.RulesFileError, files.FileError) as e:
        raise PlanError(str(e), warnings)
    new = {'rules': dict(rules), 'baselines': dict(baselines)}
    file_conflicts = snap.file_conflicts(rules_path)
    devices = []
    for name in order:
        entry = _plan_device(snap, params, kb, name, rules, new, warnings)
        entry['targets'] = targets[name]
        devices.append(entry)
    after_text = udev_rules.render(new['rules'], new['baselines'])
    tuned_plan = plan_tuned(snap, params, new['rules'], warnings) if (params['persist'] or not present) else None
    tuned_changed = tuned.plan_changes(tuned_plan)
    tuned_ctx = None
    if present and not (tuned_plan or {}).get('not_activated'):
        planned = tuned_plan if tuned_plan and tuned_plan['after'] else None
        tuned_ctx = tuned_context(snap, warnings, planned)
    for entry in devices:
        entry['conflicts'] = device_conflicts(snap.root, entry, kb, tuned_ctx, file_conflicts) if present else []
    file_changed = after_text != before_text
    _check_writes(snap, params, check_mode, devices, file_changed, warnings)
    guard = plan_guard(snap, params, present, warnings)
    changed = bool(file_changed or tuned_changed or (guard or {}).get('changed')
                   or any(e['planned_kb'] != e['before_kb'] or e['lvm_target'] is not None for e in devices))
    return {'root': snap.root, 'rules_path': rules_path, 'before_text': before_text, 'after_text': after_text,
            'file_changed': file_changed, 'devices': devices, 'skipped': skipped, 'tuned_plan': tuned_plan,
            'tuned_changed': tuned_changed, 'tuned_running': snap.tuned_running() if tuned_plan else None,
            'changed': changed, 'warnings': warnings, 'guard': guard,
            'final_warnings': _final_warnings(params, devices, tuned_plan)}


def diff(plan):
    out = [files.diff_entry(plan['rules_path'], plan['before_text'], plan['after_text'])]
    if plan['guard'] and plan['guard']['before'] != plan['guard']['after']:
        out.append(files.diff_entry(plan['guard']['path'], plan['guard']['before'], plan['guard']['after']))
    if plan['tuned_plan']:
        tuned_plan = plan['tuned_plan']
        out.append(files.diff_entry(tuned_plan['path'], tuned_plan['before'], tuned_plan['after']))
    return out


def guard_result(guard):
    """The module's ``start_guard``: None when ``aem_service`` was not given."""
    if guard is None:
        return None
    return {'unit': guard['unit'] or None, 'path': guard['path'] if guard['after'] else None,
            'installed': guard['after'] is not None, 'changed': guard['changed'],
            'removed': [boot_guard.dropin_path(u) for u in guard['remove']]}


def device_results(plan, after_kb=None):
    """The module's ``devices``: each planned device with ``after_kb`` (read back, or else as planned)."""
    out = []
    for entry in plan['devices']:
        result = {'targets': list(entry['targets'])}
        for key in ('name', 'path', 'type', 'stable_id', 'mount_points', 'before_kb', 'rule', 'conflicts'):
            result[key] = entry[key]
        result['after_kb'] = (after_kb or {}).get(entry['name'], entry['planned_kb'])
        if entry['lvm'] is not None:
            after = entry['lvm_target'] if entry['lvm_target'] is not None else entry['lvm']['before']
            result['lvm'] = dict(entry['lvm'], after=after)
        out.append(result)
    return out


# -- applying -------------------------------------------------------------------------------------

def lvchange(run, which, lvm, value):
    """Store ``value`` as the LV's read-ahead in the VG metadata; an error message, or None."""
    lvchange_bin = which('lvchange')
    if not lvchange_bin:
        return 'lvchange is not installed; it is needed to store the read-ahead of %s/%s.' % (lvm['vg'], lvm['lv'])
    rc, out, err = run(blockdev.lvchange_read_ahead_args(lvchange_bin, lvm['vg'], lvm['lv'], value))
    if rc != 0:
        return 'lvchange --readahead %s %s/%s failed: %s' % (value, lvm['vg'], lvm['lv'], err.strip() or out.strip())
    return None


class Applied(object):
    """What a run has changed so far, so that a failure after the first change says so and undoes what it can.

    The failure reports changed=true, lists every change made (``changes``) and what was rolled
    back: the runtime read_ahead_kb and the LVM metadata value go back to their values from
    before the run. A written rules file stays (it is consistent on its own) and is listed.
    """

    def __init__(self, root, run, which):
        self.root = root
        self.run = run
        self.which = which
        self.runtime = []  # (entry, before, after)
        self.lvm = []  # (entry, before, after)
        self.files = []

    def lvchange(self, entry, value):
        before = entry['lvm']['before']
        error = lvchange(self.run, self.which, entry['lvm'], value)
        if error:
            self.fail(error)
        self.lvm.append((entry, before, value))

    def changes(self):
        out = ['%s: read_ahead_kb %s -> %s' % (e['name'], b, a) for e, b, a in self.runtime]
        out += ['%s/%s: LVM read-ahead %s -> %s' % (e['lvm']['vg'], e['lvm']['lv'], b, a) for e, b, a in self.lvm]
        out += ['wrote %s' % path for path in self.files]
        return out

    def fail(self, msg):
        """Roll back, then raise ApplyError."""
        changes = self.changes()
        rolled_back, not_rolled_back = [], []
        # LVM first: activation and lvchange may set the runtime value, which comes back last.
        for entry, before, _after in reversed(self.lvm):
            error = lvchange(self.run, self.which, entry['lvm'], before)
            if error:
                not_rolled_back.append(error)
            else:
                rolled_back.append('%s/%s: LVM read-ahead back to %s' % (entry['lvm']['vg'], entry['lvm']['lv'], before))
        for entry, before, _after in reversed(self.runtime):
            try:
                blockdev.write_read_ahead_kb(self.root, entry['name'], before)
                rolled_back.append('%s: read_ahead_kb back to %s' % (entry['name'], before))
            except blockdev.BlockDeviceError as e:
                not_rolled_back.append('%s: %s' % (entry['name'], e))
        if changes:
            msg = '%s (after these changes: %s; rolled back: %s)' % (
                msg, '; '.join(changes), '; '.join(rolled_back) or 'nothing')
        raise ApplyError(msg, changed=bool(changes), changes=changes, rolled_back=rolled_back,
                         not_rolled_back=not_rolled_back)


def udev_apply(root, run, which, warn, names, rules_path):
    """Reload udev rules and replay change events for ``names`` so the new rules take effect.

    ``run`` is the module's run_command (check_rc=True fails the module).
    """
    udevadm = which('udevadm')
    if not udevadm:
        warn('udevadm not found: %s takes effect at the next boot.' % rules_path)
        return
    if not os.path.exists(files.root_path(root, '/run/udev/control')):
        return  # udevd is not running (a chroot, a container, a minimal host): it reads the file when it starts.
    run([udevadm, 'control', '--reload'], check_rc=True)
    if not names:
        return
    cmd = [udevadm, 'trigger', '--action=change', '--subsystem-match=block']
    for name in names:
        cmd.append('--sysname-match=%s' % name)
    run(cmd, check_rc=True)
    run([udevadm, 'settle', '--timeout=30'])


def _write_changes(plan, applied, run, which, write, warn):
    """LVM values, runtime values, the rules file (then udev), the tuned child: the tuned actions."""
    root = plan['root']
    for entry in plan['devices']:
        if entry['lvm_target'] is not None:
            applied.lvchange(entry, entry['lvm_target'])
    for entry in plan['devices']:
        if entry['planned_kb'] != entry['before_kb']:
            try:
                blockdev.write_read_ahead_kb(root, entry['name'], entry['planned_kb'])
            except blockdev.BlockDeviceError as e:
                applied.fail(str(e))
            applied.runtime.append((entry, entry['before_kb'], entry['planned_kb']))
    rules_path = plan['rules_path']
    if plan['file_changed']:
        rules_full = files.root_path(root, rules_path)
        try:
            if plan['after_text'] is None:
                files.remove_file(rules_full)
            else:
                write(rules_full, plan['after_text'])
        except (IOError, OSError) as e:
            applied.fail('writing the rules file %s failed: %s' % (rules_path, files.describe_os_error(e)))
        applied.files.append(rules_path)
        udev_apply(root, run, which, warn, [e['name'] for e in plan['devices']], rules_path)
    if plan['guard'] and plan['guard']['changed']:
        try:
            applied.files.extend(boot_guard.apply(root, plan['guard'], write, run, which('systemctl')))
        except (IOError, OSError, files.FileError) as e:
            applied.fail('the start guard of %s: %s' % (plan['guard']['unit'], e))
    if plan['tuned_changed']:
        try:
            return tuned.apply_child(root, plan['tuned_plan'], run, which('tuned-adm'), plan['tuned_running'],
                                     write, files.remove_owned_file)
        except tuned.TunedProfileError as e:
            applied.fail(str(e))
    return []


def apply(plan, run, which, write, warn):
    """Carry out ``plan``, then enforce and read back; returns {changed, after_kb, tuned_actions}.

    ``write(path, text)`` writes a host path atomically, ``warn(msg)`` warns. Raises
    ApplyError, having rolled back what it could, when a change fails.
    """
    root = plan['root']
    tuned_actions = _write_changes(plan, Applied(root, run, which), run, which, write, warn)
    # udev, LVM or another agent may have acted on the change events: enforce and verify.
    changed = plan['changed']
    after_kb = {}
    for entry in plan['devices']:
        value = entry['planned_kb']
        actual = blockdev.read_ahead_kb(root, entry['name'])
        if actual != value:
            actual = blockdev.write_read_ahead_kb(root, entry['name'], value)
            changed = True
        if actual != value:
            raise ApplyError('%s still reads %s KiB after writing %d: something else sets it (conflicts: %s).'
                             % (entry['name'], actual, value, entry['conflicts']), changed=True)
        after_kb[entry['name']] = actual
    return {'changed': changed, 'after_kb': after_kb, 'tuned_actions': tuned_actions}
