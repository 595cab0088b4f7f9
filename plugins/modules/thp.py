#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: thp
short_description: Set Transparent Huge Pages at runtime and persist it through tuned and the kernel command line
version_added: 0.1.0
description:
  - Sets C(/sys/kernel/mm/transparent_hugepage/enabled), C(defrag) and C(khugepaged/defrag) and reads them back.
    Kernels of the RHEL 6 era with C(/sys/kernel/mm/redhat_transparent_hugepage) are handled too.
  - Persists the setting in the collection's tuned child profile C(aemops-os-tuning) (C([vm]) and C([sysfs])
    sections; the profile is activated last, after the profiles that were active) and on the kernel command line as
    C(transparent_hugepage=<enabled>), the way each release wants it. RHEL 7 edits C(/etc/default/grub) and runs
    C(grub2-mkconfig) for the BIOS or EFI C(grub.cfg). RHEL 8 runs C(grubby --update-kernel=ALL) and keeps grubenv
    C(kernelopts) and C(/etc/default/grub) in step. RHEL 9 runs grubby and edits C(/etc/kernel/cmdline).
    Debian and Ubuntu edit C(/etc/default/grub) and run C(update-grub).
  - grubby is used only where GRUB reads the BLS entries (C(blscfg) in C(grub.cfg), C(GRUB_ENABLE_BLSCFG=true));
    with BLS switched off RHEL 8 and 9 are handled like RHEL 7. What grubby edits besides the entries depends on
    the grubby package release (C(rpm -q grubby)); the module plans around it, so the diff shows every file as the
    run leaves it.
  - The values found before the first change are recorded in C(/etc/aemops-os-tuning/thp-baseline.conf), so
    O(state=absent) can restore them.
  - Reports C(reboot_required) when the persisted command line differs from C(/proc/cmdline). It never decides
    what to change from C(/proc/cmdline), so a second run before the reboot changes nothing.
author:
  - aemops.os_tuning contributors (@aemops)
options:
  enabled:
    description: The THP mode.
    type: str
    choices: [never, madvise, always]
    default: never
  defrag:
    description:
      - The THP defrag mode. The values are the ones the running kernel offers; RHEL 7's kernel has no C(defer)
        or C(defer+madvise). A value the kernel lacks is an error that lists the ones it has.
      - Set to an empty string to leave defrag alone.
      - Only tuned persists defrag (the kernel command line carries only the THP mode); without V(tuned) in
        O(persist) it is a runtime setting.
    type: str
    default: never
  khugepaged_defrag:
    description: Whether khugepaged may defragment memory (C(khugepaged/defrag)). Omit to leave it alone.
    type: bool
  persist:
    description:
      - Where to persist the setting, from V(tuned) and V(cmdline). An empty list changes only the running values.
      - Default is both when tuned is installed with an active profile, else V(cmdline).
      - tuned ignores its own THP value when C(transparent_hugepage=) is on the kernel command line, so with both,
        the command line decides at boot and tuned agrees with it.
    type: list
    elements: str
  state:
    description:
      - V(present) sets the values. V(absent) restores the recorded values at runtime and on the command line,
        and removes this module's sections from the tuned child profile.
    type: str
    choices: [present, absent]
    default: present
notes:
  - Check mode changes nothing; diff shows every file, the runtime values and the boot loader arguments before and
    after.
  - With direct kernel boot or no boot loader installed, the command line is reported as not managed instead of
    failing.
  - Runs on the target's Python 2.7 (RHEL 7), 3.6 (RHEL 8 platform-python) and newer.
extends_documentation_fragment:
  - aemops.os_tuning.attributes
'''

EXAMPLES = r'''
- name: THP never, persisted in tuned and on the kernel command line
  aemops.os_tuning.thp:
    enabled: never
    defrag: never
    khugepaged_defrag: false
  become: true
  register: thp

- name: Reboot when the command line changed
  ansible.builtin.reboot:
  when: thp.reboot_required
  become: true

- name: Runtime only
  aemops.os_tuning.thp:
    persist: []
  become: true

- name: Back out
  aemops.os_tuning.thp:
    state: absent
  become: true
'''

RETURN = r'''
runtime:
  description: Per attribute (C(enabled), C(defrag), C(khugepaged/defrag)), the value before and after and what the kernel offers.
  returned: always
  type: dict
  sample: {enabled: {before: always, after: never, offered: [always, madvise, never]}}
persist:
  description: Where the setting was persisted.
  returned: always
  type: list
  elements: str
  sample: [tuned, cmdline]
tuned_profile:
  description: The tuned child profile path, its parents, what was done and C(conflicts) with other loaded profiles, or null when tuned is not used.
  returned: always
  type: dict
cmdline:
  description: The boot loader method, why it was chosen, the argument lists that change, and the values configured and running.
  returned: always
  type: dict
  sample: {method: grubby, reason: "RHEL 8 with BLS entries", managed: true, running: always}
reboot_required:
  description: True when the persisted command line differs from the running kernel's C(/proc/cmdline).
  returned: always
  type: bool
baseline:
  description: The values recorded before the first change, used by O(state=absent).
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aemops.os_tuning.plugins.module_utils import bootloader, files, thp, tuned

ROOT = '/'
KEY = 'transparent_hugepage'


def resolve_persist(module, root, tuned_adm):
    persist = module.params['persist']
    have_tuned = bool(tuned_adm) and bool(tuned.active_profiles(root))
    if persist is None:
        return ['tuned', 'cmdline'] if have_tuned else ['cmdline']
    bad = [p for p in persist if p not in ('tuned', 'cmdline')]
    if bad:
        module.fail_json(msg='persist has unknown entries %s: use tuned, cmdline, or an empty list for runtime only.'
                             % ', '.join(bad))
    if 'tuned' in persist and not have_tuned:
        module.warn('persist includes tuned, but tuned is %s; THP is persisted on the kernel command line only. '
                    'Install and start tuned (the aem_tuning role does so with aem_tuning_install_tuned) to use it.'
                    % ('not installed' if not tuned_adm else 'without an active profile'))
        persist = [p for p in persist if p != 'tuned']
    return persist


def read_baseline(module, root, state=None):
    try:
        text = files.read_owned(files.root_path(root, thp.BASELINE_FILE), thp.BASELINE_FILE)
    except files.FileError as e:
        module.fail_json(msg=str(e))
    records, errors = files.parse_baselines(text)
    if errors:
        module.fail_json(msg='%s has damaged baseline records (%s); restore it from backup or delete it.'
                             % (thp.BASELINE_FILE, '; '.join(errors)))
    problems = thp.baseline_problems(records[0], state) if records else []
    if problems:
        module.fail_json(msg='%s has a baseline that cannot be restored: %s. Fix the record or delete the file (the '
                             'recorded original values are then lost).' % (thp.BASELINE_FILE, '; '.join(problems)))
    return text, (records[0] if records else None)


def render_baseline(record):
    lines = files.managed_header('thp module', 'THP values found before the first change, restored by '
                                               'state=absent.')
    lines.append(files.baseline_line(record))
    return '\n'.join(lines) + '\n'


def bootloader_plan(module, root, value):
    facts = bootloader.detect(root, module.get_bin_path)
    try:
        plan = bootloader.plan(root, facts, KEY, value, module.run_command)
    except bootloader.BootloaderError as e:
        module.fail_json(msg='cannot plan the kernel command line: %s' % e)
    for warning in plan.get('warnings', []):
        module.warn(warning)
    return facts, plan


def apply_bootloader(module, root, plan):
    """The plan's files, then its commands, then the files it writes after them (grubby also
    rewrites /etc/kernel/cmdline, and without --no-etc-grub-update /etc/default/grub)."""
    for change in plan['files']:
        if not change.get('after_commands'):
            files.atomic_write(files.root_path(root, change['path']), change['after'], 0o644, module=module)
    for argv in plan['commands']:
        rc, out, err = module.run_command(argv)
        if rc != 0:
            module.fail_json(msg='%s failed (rc %d): %s' % (' '.join(argv), rc, (err or out).strip()), changed=True)
    for change in plan['files']:
        if change.get('after_commands'):
            files.atomic_write(files.root_path(root, change['path']), change['after'], 0o644, module=module)


def run(module, root):
    p = module.params
    present = p['state'] == 'present'
    try:
        state = thp.read_state(root)
    except thp.ThpError as e:
        module.fail_json(msg=str(e))
    tuned_adm, version = tuned.installed_version(module.run_command, module.get_bin_path, root)
    persist = resolve_persist(module, root, tuned_adm)
    baseline_text, baseline = read_baseline(module, root, state)

    enabled = p['enabled']
    defrag = p['defrag'] or None
    khugepaged = None
    if p['khugepaged_defrag'] is not None and 'khugepaged/defrag' in state:
        khugepaged = thp.khugepaged_value(state, p['khugepaged_defrag'])
    try:
        thp.check_offered(state, 'enabled', enabled)
        if defrag is not None:
            thp.check_offered(state, 'defrag', defrag)
    except thp.ThpError as e:
        module.fail_json(msg=str(e))

    # What each attribute should become, and the command-line value to persist.
    if present:
        wanted = {'enabled': enabled, 'defrag': defrag, 'khugepaged/defrag': khugepaged}
        cmdline_value = enabled
    else:
        wanted = dict((a, (baseline or {}).get(a)) for a in thp.ATTRS)
        cmdline_value = (baseline or {}).get('cmdline')
        if baseline is None:
            module.warn('no recorded THP baseline in %s: the running values and the command line are left as they '
                        'are; only this module\'s tuned sections are removed.' % thp.BASELINE_FILE)

    # Kernel command line.
    cmdline = {'managed': False, 'method': None, 'reason': None, 'running': bootloader.running(root, KEY)}
    boot_plan = None
    if ('cmdline' in persist and present) or (not present and baseline is not None and baseline.get('cmdline_managed')):
        facts, boot_plan = bootloader_plan(module, root, cmdline_value)
        cmdline.update(method=boot_plan['method'], reason=boot_plan['reason'], grubby=boot_plan.get('grubby'))
        if boot_plan['method'] == 'none':
            module.warn('the kernel command line is not managed here: %s' % boot_plan['reason'])
            boot_plan = None
        else:
            cmdline.update(managed=True, args_before=boot_plan['args_before'], args_after=boot_plan['args_after'])

    # Baseline, recorded before the first change of each kind: the runtime values on the first
    # run, the command line on the first run that manages it.
    new_baseline_text = baseline_text
    if present and (baseline is None or (boot_plan is not None and not baseline.get('cmdline_managed'))):
        record = dict(baseline or dict((a, state[a]['value']) for a in thp.ATTRS if a in state))
        record['cmdline_managed'] = boot_plan is not None
        record['cmdline'] = None
        if boot_plan is not None:
            configured = bootloader.configured(root, facts, KEY, module.run_command)
            values = [v for v in configured.values() if v is not None]
            record['cmdline'] = values[0] if values else None
        new_baseline_text = render_baseline(record)
        baseline = record
    elif not present:
        new_baseline_text = None

    # tuned child profile.
    tuned_plan = None
    # persist lists where to write; a run that does not persist to tuned leaves its sections alone.
    if (present and 'tuned' in persist) or (not present and tuned.child_state(root)[1] is not None):
        sections = []
        if present:
            sections = thp.tuned_sections(enabled, defrag, khugepaged, version, state)
        try:
            tuned_plan = tuned.plan_child(root, 'thp', sections, version)
        except tuned.TunedProfileError as e:
            module.fail_json(msg='cannot plan the tuned child profile: %s' % e)
    tuned_changed = tuned.plan_changes(tuned_plan)

    runtime = {}
    runtime_changes = []
    for attr in thp.ATTRS:
        if attr not in state:
            continue
        entry = {'before': state[attr]['value'], 'after': state[attr]['value'], 'offered': state[attr]['offered']}
        runtime[attr] = entry
        value = wanted.get(attr)
        if value is not None and value != state[attr]['value']:
            runtime_changes.append(attr)
            entry['after'] = value
    for attr in runtime_changes:
        try:
            thp.check_writable(root, state, attr)
        except thp.ThpError as e:
            module.fail_json(msg=str(e))

    baseline_changed = new_baseline_text != baseline_text
    boot_changed = bool(boot_plan and boot_plan['changed'])
    changed = bool(runtime_changes or tuned_changed or boot_changed or baseline_changed)

    diff = [{'before_header': 'THP runtime (sysfs)', 'after_header': 'THP runtime (sysfs)',
             'before': ''.join('%s=%s\n' % (a, runtime[a]['before']) for a in sorted(runtime)),
             'after': ''.join('%s=%s\n' % (a, runtime[a]['after']) for a in sorted(runtime))}]
    diff.append(files.diff_entry(thp.BASELINE_FILE, baseline_text, new_baseline_text))
    if tuned_plan:
        diff.append(files.diff_entry(tuned_plan['path'], tuned_plan['before'], tuned_plan['after']))
    if boot_plan:
        # The files written here and the ones the boot loader tool rewrites (BLS entries), as
        # they will read after the run.
        for change in boot_plan['files'] + boot_plan.get('predicted', []):
            if change['before'] != change['after']:
                diff.append(files.diff_entry(change['path'], change['before'], change['after']))
        for source in sorted(boot_plan['args_after']):
            diff.append({'before_header': '%s (kernel arguments)' % source,
                         'after_header': '%s (kernel arguments)' % source,
                         'before': '\n'.join(boot_plan['args_before'].get(source) or []) + '\n',
                         'after': '\n'.join(boot_plan['args_after'].get(source) or []) + '\n'})

    if not module.check_mode:
        if baseline_changed and new_baseline_text is not None:
            files.atomic_write(files.root_path(root, thp.BASELINE_FILE), new_baseline_text, 0o644, module=module)
        for attr in runtime_changes:
            try:
                thp.write(root, state, attr, runtime[attr]['after'])
            except thp.ThpError as e:
                module.fail_json(msg=str(e), changed=True)
        if tuned_changed:
            try:
                tuned_plan['actions'] = tuned.apply_child(
                    root, tuned_plan, module.run_command, tuned_adm, tuned.daemon_running(root),
                    lambda path, text: files.atomic_write(path, text, 0o644, module=module), files.remove_owned_file)
            except tuned.TunedProfileError as e:
                module.fail_json(msg=str(e), changed=True)
        if boot_changed:
            apply_bootloader(module, root, boot_plan)
        if baseline_changed and new_baseline_text is None:
            files.remove_owned_file(files.root_path(root, thp.BASELINE_FILE))
        # A tuned profile switch re-applies tuned's values: enforce ours and read back.
        after = thp.read_state(root)
        for attr in runtime:
            value = runtime[attr]['after']
            if after[attr]['value'] != value:
                if thp.write(root, after, attr, value) != value:
                    module.fail_json(msg='%s reads %s after writing %s: something else sets it.'
                                         % (after[attr]['path'], after[attr]['value'], value), changed=True)
                changed = True

    reboot_required = bool(boot_plan and boot_plan['reboot_required'])
    if boot_plan is None and not cmdline['managed']:
        # Nothing planned here (runtime only, or a backout already done): the running kernel may
        # still differ from what the boot loader is configured with, for example after a backout
        # whose reboot has not happened yet.
        facts = bootloader.detect(root, module.get_bin_path)
        if facts['method'] != 'none':
            try:
                configured = bootloader.configured(root, facts, KEY, module.run_command)
            except bootloader.BootloaderError:
                configured = {}
            reboot_required = any(v != cmdline['running'] for v in configured.values())
    if present and defrag is not None and 'tuned' not in persist and persist:
        module.warn('defrag=%s is set at runtime only: the kernel command line carries only the THP mode, so '
                    'defrag and khugepaged_defrag persist through tuned alone (persist: [tuned, cmdline]).' % defrag)
    if present and 'tuned' in persist and cmdline['running'] not in (None, enabled):
        module.warn('the running kernel was booted with transparent_hugepage=%s, so tuned ignores its own THP value '
                    'until the next boot.' % cmdline['running'])

    for warning in tuned.conflict_warnings(tuned_plan):
        module.warn(warning)
    result = {'changed': changed, 'runtime': runtime, 'persist': persist, 'tuned_profile': tuned.plan_summary(tuned_plan, tuned_changed),
              'cmdline': cmdline, 'reboot_required': reboot_required, 'baseline': baseline or {}}
    if module._diff:
        result['diff'] = diff
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            enabled=dict(type='str', choices=['never', 'madvise', 'always'], default='never'),
            defrag=dict(type='str', default='never'),
            khugepaged_defrag=dict(type='bool'),
            persist=dict(type='list', elements='str'),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
        ),
        supports_check_mode=True,
    )
    # One lock per owned file (the THP baseline, the tuned child profile), in a fixed order;
    # check mode writes nothing and takes none.
    owned = [] if module.check_mode else [thp.BASELINE_FILE, tuned.child_profile_path(ROOT)]
    try:
        with files.locked_all(owned, ROOT):
            result = run(module, ROOT)
    except files.FileError as e:
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
