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
      - Where to persist the setting, from V(tuned) and V(cmdline). An empty list changes only the running values;
        an empty string in the list is refused, naming its index.
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
from ansible_collections.aemops.os_tuning.plugins.module_utils import files, thp, thp_plan, tuned

ROOT = '/'
KEY = thp_plan.KEY


def run(module, snap):
    """The run on ``snap``, the host model (thp_plan.ThpHost), frozen until the plan is made."""
    try:
        plan = thp_plan.plan(snap, module.params)
    except thp_plan.PlanError as e:
        for warning in e.warnings:
            module.warn(warning)
        module.fail_json(msg=str(e))
    # Planned from one state of the host, each source read once; what the run changes is read again from here on.
    snap.thaw()
    for warning in plan['warnings']:
        module.warn(warning)
    diff = thp_plan.diff(plan)
    changed = plan['changed']
    tuned_actions = []
    if not module.check_mode:
        try:
            applied = thp_plan.apply(plan, module.run_command,
                                     lambda path, text: files.atomic_write(path, text, 0o644, module=module))
        except thp_plan.ApplyError as e:
            module.fail_json(msg=str(e), **e.extra)
        changed = applied['changed']
        tuned_actions = applied['tuned_actions']
    for warning in plan['final_warnings']:
        module.warn(warning)
    tuned_profile = tuned.plan_summary(plan['tuned_plan'], plan['tuned_changed'], tuned_actions)
    result = {'changed': changed, 'runtime': plan['runtime'], 'persist': plan['persist'],
              'tuned_profile': tuned_profile, 'cmdline': plan['cmdline'],
              'reboot_required': plan['reboot_required'], 'baseline': plan['baseline'] or {}}
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
    snap = thp_plan.ThpHost(ROOT, module.run_command, module.get_bin_path, read_only=True)
    owned = [] if module.check_mode else [thp.BASELINE_FILE, tuned.child_profile_path(snap)]
    try:
        with files.locked_all(owned, ROOT):
            result = run(module, snap)
    except files.FileError as e:
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
