#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: tuning_snapshot
short_description: Keep the snapshot of a host from before the collection's first change, as an Ansible local fact
version_added: 0.2.0
description:
  - Writes what M(aemops.os_tuning.tuning_facts) returned (C(ansible_facts.os_tuning)) to O(path) as an Ansible
    local fact (JSON), once, and removes it again on backout. The C(aem_tuning) role calls it in apply mode before
    its first change (O(state=present)), and on backout (O(state=absent)); M(aemops.os_tuning.tuning_facts) itself
    writes nothing.
  - O(state=present) writes the snapshot only when nothing is at O(path). Whatever is there already (the first
    run's snapshot, or a damaged or non-regular file) is kept, never replaced, and returned under C(snapshot)
    (a damaged one as C(error)). The file is JSON with C(taken), C(created_dirs) and C(os_tuning) (the facts
    without C(snapshot), C(plan) and C(compliance)), indented, with sorted keys, mode 0644, written atomically.
    Directories created for it are recorded in C(created_dirs).
  - O(state=absent) removes the snapshot, then the directories it recorded creating, deepest first, only those
    above O(path) and only while empty. A damaged snapshot is removed, but its record is not trusted, so no directory
    is removed then.
  - Every existing directory above O(path) must be a real directory (not a symbolic link), owned by root and not
    writable by group or others, or nothing is written or removed and the module fails naming the directory,
    what is wrong and the fix. So no other user can put a file or a link at O(path) for root to write.
author:
  - aemops.os_tuning contributors (@aemops)
options:
  path:
    description:
      - The snapshot file, an absolute path. Ansible reads C(/etc/ansible/facts.d/*.fact) as
        C(ansible_local).
    type: path
    default: /etc/ansible/facts.d/aem_tuning_before.fact
  state:
    description:
      - V(present) writes the snapshot when nothing is at O(path); V(absent) removes it and the directories it
        created.
    type: str
    choices: [present, absent]
    default: present
  facts:
    description:
      - What M(aemops.os_tuning.tuning_facts) returned as C(ansible_facts.os_tuning), before any change. The
        snapshot records it (without C(snapshot), C(plan) and C(compliance)).
      - Required with O(state=present); it must hold C(block_devices), as every result of
        M(aemops.os_tuning.tuning_facts) does. Ignored with O(state=absent).
    type: dict
  taken:
    description:
      - The time to record as C(taken), ISO 8601 (for example the C(clock.iso) that
        M(aemops.os_tuning.tuning_facts) returned).
      - When omitted or empty, the host's clock now, in UTC, as C(%Y-%m-%dT%H:%M:%SZ).
    type: str
notes:
  - Runs on the target's Python 2.7 (RHEL 7), 3.6 (RHEL 8 platform-python) and newer.
  - Needs root (C(become=true)) to write under C(/etc) and to take the file's lock in C(/run/aemops-os-tuning).
seealso:
  - module: aemops.os_tuning.tuning_facts
  - name: Ansible local facts
    description: How C(ansible.builtin.setup) reads C(/etc/ansible/facts.d).
    link: https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_vars_facts.html#adding-custom-facts
extends_documentation_fragment:
  - aemops.os_tuning.attributes
attributes:
  check_mode:
    support: full
    details: Nothing is written or removed; C(changed) says whether a run would write or remove the snapshot.
  diff_mode:
    support: none
'''

EXAMPLES = r'''
- name: Gather the facts before any change
  aemops.os_tuning.tuning_facts:
    paths: [/opt/aem/crx-quickstart/repository]
  register: tuning

- name: Keep them as the snapshot from before the first change (written once)
  aemops.os_tuning.tuning_snapshot:
    facts: "{{ tuning['ansible_facts']['os_tuning'] }}"
    taken: "{{ tuning['ansible_facts']['os_tuning']['clock']['iso'] }}"
  become: true
  register: snapshot

- name: Show when the first run looked at the host
  ansible.builtin.debug:
    msg: "{{ snapshot.taken }}"

- name: Back out, removing the snapshot and the directories it created
  aemops.os_tuning.tuning_snapshot:
    state: absent
  become: true
'''

RETURN = r'''
path:
  description: The snapshot file.
  returned: always
  type: str
  sample: /etc/ansible/facts.d/aem_tuning_before.fact
snapshot:
  description:
    - The snapshot on O(path) after the run, parsed (C(taken), C(created_dirs), C(os_tuning)), or null when there is
      none (removed, or not written yet in check mode).
    - For a damaged or non-regular file, C(error) only, naming the path, what is wrong and the fix; the file is kept
      with O(state=present).
  returned: always
  type: dict
  sample:
    taken: "2026-12-01T11:00:00Z"
    created_dirs: [/etc/ansible, /etc/ansible/facts.d]
    os_tuning: {paths: {/opt/aem/crx-quickstart/repository: {device: dm-0, read_ahead_kb: 4096, mount: /opt/aem}}}
taken:
  description:
    - The C(taken) of the snapshot on O(path) (the one written now, or the one kept), or the time that would be
      recorded in check mode; null when there is no usable snapshot.
  returned: always
  type: str
  sample: "2026-12-01T11:00:00Z"
'''

import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.aemops.os_tuning.plugins.module_utils import files, snapshot_fact

ROOT = '/'
TEXT_TYPES = (str, type(u''))
ISO_TIME = re.compile(r'^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:?[0-9]{2})$')


def problems(params):
    """What is wrong with the arguments (the argument spec cannot say), or []."""
    found = []
    try:
        snapshot_fact.check_path(params['path'])
    except snapshot_fact.SnapshotError as e:
        found.append(e.args[0])
    if params['state'] == 'present':
        if not params['facts'] or 'block_devices' not in params['facts']:
            found.append('facts has no block_devices: give the ansible_facts.os_tuning that '
                         'aemops.os_tuning.tuning_facts returned (not the whole result, nor an empty dict).')
        taken = params['taken']
        if taken and not ISO_TIME.match(taken):
            found.append('taken "%s" is not an ISO 8601 time: give one such as 2026-12-01T11:00:00Z, or leave it out '
                         'for the host\'s clock.' % taken)
    return found


def run(module, root):
    p = module.params
    path = p['path']
    snapshot = snapshot_fact.read_snapshot(root, path)
    if p['state'] == 'present':
        taken = p['taken'] or time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(time.time()))
        changed = snapshot_fact.write_snapshot(root, path, p['facts'], taken, check_mode=module.check_mode,
                                               module=module)
        if changed:
            snapshot = None if module.check_mode else snapshot_fact.read_snapshot(root, path)
        else:
            taken = None
    else:
        taken = None
        changed = snapshot_fact.remove_snapshot(root, path, snapshot, check_mode=module.check_mode)
        if changed and not module.check_mode:
            snapshot = None
    if p['state'] == 'present' and snapshot is not None and snapshot.get('error'):
        module.warn('the snapshot is kept as it is, and not used: %s' % snapshot['error'])
    elif snapshot is not None and taken is None and isinstance(snapshot.get('taken'), TEXT_TYPES):
        taken = snapshot['taken']
    return {'changed': changed, 'path': path, 'snapshot': snapshot, 'taken': taken}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default=snapshot_fact.DEFAULT_PATH),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            facts=dict(type='dict'),
            taken=dict(type='str'),
        ),
        required_if=[('state', 'present', ('facts',))],
        supports_check_mode=True,
    )
    found = problems(module.params)
    if found:
        module.fail_json(msg='nothing was changed: %s' % ' '.join(found), changed=False)
    # The file's lock (in /run/aemops-os-tuning): two runs cannot both find it absent and write it.
    # Check mode writes nothing and takes none.
    owned = [] if module.check_mode else [module.params['path']]
    try:
        with files.locked_all(owned, ROOT):
            result = run(module, ROOT)
    except snapshot_fact.SnapshotError as e:
        module.fail_json(msg=to_native(e.args[0] if e.args else e), changed=False)  # it says what was not changed
    except files.FileError as e:
        module.fail_json(msg='nothing was changed: %s' % to_native(e.args[0] if e.args else e), changed=False)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
