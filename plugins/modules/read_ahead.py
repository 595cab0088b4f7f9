#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: read_ahead
short_description: Set block-device read-ahead at runtime and persistently, on the layer that counts
version_added: 0.1.0
description:
  - Finds the block device that governs read-ahead for each target and sets its
    C(queue/read_ahead_kb), then reads the value back from sysfs.
  - A filesystem on a partition reads ahead by its whole disk (partitions have no C(queue/)).
    A filesystem on LVM, dm-crypt, multipath or md RAID reads ahead by the C(dm-N) or C(mdN)
    device itself, not by the disks beneath it. This module tunes that governing device.
  - Persists the value with one owned udev rules file, one rule per device, matched by a
    stable identity, never by a kernel name such as C(nvme1n1), which can change at the next
    boot. NVMe namespaces match the controller's C(ATTRS{serial}) (the EBS volume id on AWS),
    which reads the same on every release; other disks C(ID_SERIAL) or C(ID_WWN); dm devices
    C(DM_UUID) or C(DM_NAME); md arrays C(MD_UUID); loop devices their backing file.
  - For an LVM logical volume it also stores the value in the VG metadata with
    C(lvchange --readahead), so that LV activation does not reset it.
  - The rules file records each device's original value, so O(state=absent) can restore it.
  - Reports what else sets read-ahead on the device (conflicts), in particular a tuned profile
    whose C([disk] readahead) (for example C(>4096) in C(throughput-performance), included by
    C(virtual-guest)) raises the value again whenever tuned starts.
author:
  - aemops.os_tuning contributors (@aemops)
options:
  devices:
    description:
      - Block devices to tune, as kernel names (C(nvme1n1), C(dm-2)) or C(/dev) paths,
        including C(/dev/mapper/*), C(/dev/<vg>/<lv>) and C(/dev/disk/by-id/*) links.
      - A partition is resolved to its whole disk.
    type: list
    elements: str
    default: []
  paths:
    description:
      - Filesystem paths. Each is resolved to the block device behind its mount, then to the
        governing device as described above.
      - A path on a filesystem without a block device (tmpfs, NFS, overlayfs) is an error,
        unless O(ignore_missing=true).
    type: list
    elements: path
    default: []
  read_ahead_kb:
    description:
      - The read-ahead in KiB, as in C(/sys/block/*/queue/read_ahead_kb) and tuned profiles.
        Not in 512-byte sectors as C(blockdev --setra) takes it (32 KiB is 64 sectors).
      - From 0 to 65536, and a multiple of the page size in KiB (4 on x86_64), because the
        kernel keeps read-ahead in pages.
      - Required when O(state=present).
      - An integer, or a string of ASCII digits. A boolean, a fraction or digits of another script
        (C('٣٢')) are refused, not converted.
    type: raw
  persist:
    description:
      - Write the udev rule (and for an LV, the LVM metadata value) so that the value survives
        a reboot. With V(false) only the running value changes.
    type: bool
    default: true
  state:
    description:
      - V(present) sets the value. V(absent) removes this module's rules for the targets and
        restores the original values recorded in the rules file, at runtime and in LVM.
    type: str
    choices: [present, absent]
    default: present
  underlying:
    description:
      - Also tune the whole disks beneath a dm or md device. The filesystem's read-ahead is
        decided by the top device alone; this is for operators who want the whole stack alike.
    type: bool
    default: false
  ignore_missing:
    description:
      - Skip, with a warning, targets that do not exist or have no block device, instead of
        failing.
    type: bool
    default: false
  tuned_override:
    description:
      - When tuned has an active profile, also make tuned agree. The collection's tuned child
        profile C(aemops-os-tuning) excludes these devices from the C([disk]) instances of the
        active profiles, and adds one C([disk]) instance per value that matches these devices by
        their udev identity and sets this read-ahead. It is activated as the last of the active
        profiles (no C(include=)); the others stay in the list.
      - Without it, tuned (for example C(throughput-performance) with C(readahead=>4096)) raises
        the value again whenever it starts or switches profile, and C(tuned-adm verify) fails.
      - Other disks keep the parent profile's tuning. Only applies with O(persist=true).
    type: bool
    default: true
  rules_file:
    description:
      - The udev rules file this module owns. It is numbered to run after the rules that set
        C(ID_SERIAL), C(DM_UUID) and C(MD_UUID).
      - An absolute, normalised path of a regular file (or of one that does not exist yet) in an
        existing, writable directory. Device nodes, FIFOs, sockets, directories, symbolic links
        (a udev mask, a link to C(/dev/null), is never replaced) and immutable files are refused
        before anything changes. udev reads only names ending in C(.rules); others get a warning.
      - The file is written as root:root, mode 0644, whatever it had before.
    type: path
    default: /etc/udev/rules.d/90-aemops-read-ahead.rules
notes:
  - Check mode changes nothing and reports what would change; diff mode shows the rules file.
  - Runs on the target's Python 2.7 (RHEL 7), 3.6 (RHEL 8 platform-python) and newer.
  - Changing read-ahead needs root (C(become=true)) and a writable C(/sys), so not a container.
  - tuned with C(throughput-performance) or C(virtual-guest) raises read-ahead to 4096 KiB on
    NVMe (tuned 2.18 and later) and other disks when it starts. This module reports that as a
    conflict unless O(tuned_override) makes tuned agree, which it does by default.
extends_documentation_fragment:
  - aemops.os_tuning.attributes
seealso:
  - name: Kernel queue sysfs documentation
    description: C(read_ahead_kb) is the maximum number of kilobytes to read ahead for filesystems on the device.
    link: https://www.kernel.org/doc/Documentation/block/queue-sysfs.txt
'''

EXAMPLES = r'''
- name: Set 32 KiB read-ahead on the device that holds the AEM repository
  aemops.os_tuning.read_ahead:
    paths:
      - /opt/aem/crx-quickstart/repository
    read_ahead_kb: 32
  become: true

- name: Tune two EBS volumes by their stable links, runtime only
  aemops.os_tuning.read_ahead:
    devices:
      - /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0
      - /dev/mapper/vg_aem-lv_repo
    read_ahead_kb: 32
    persist: false
  become: true

- name: Tune the LV and the NVMe disks beneath it alike
  aemops.os_tuning.read_ahead:
    paths: [/srv/aem]
    read_ahead_kb: 32
    underlying: true
  become: true

- name: Back out, restoring the recorded original values
  aemops.os_tuning.read_ahead:
    paths:
      - /opt/aem/crx-quickstart/repository
    state: absent
  become: true
'''

RETURN = r'''
devices:
  description: One entry per governing device that was tuned or restored.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Kernel name.
      type: str
      sample: dm-2
    path:
      description: Device path (C(/dev/mapper/<name>) for dm devices).
      type: str
      sample: /dev/mapper/vg_aem-lv_repo
    type:
      description: One of C(disk), C(nvme), C(lvm), C(crypt), C(mpath), C(dm), C(md), C(loop).
      type: str
      sample: lvm
    targets:
      description: The O(devices) and O(paths) entries that resolved to this device.
      type: list
      elements: str
      sample: [/srv/aem/crx-quickstart/repository]
    stable_id:
      description: The udev match key and value used in the rule, and the bare serial where there is one (the EBS volume id).
      type: dict
      sample: {key: "ENV{DM_UUID}", value: "LVM-abc...", serial: null}
    mount_points:
      description: Mount points of filesystems on the device or its partitions.
      type: list
      elements: str
    before_kb:
      description: C(read_ahead_kb) read from sysfs before any change.
      type: int
      sample: 4096
    after_kb:
      description: C(read_ahead_kb) read back from sysfs at the end (the planned value in check mode).
      type: int
      sample: 32
    rule:
      description: The udev rule line for this device, or null when not persisted.
      type: str
    lvm:
      description: For an LV, its VG and LV names and the LVM read-ahead before and after, in 512-byte sectors or C(auto).
      type: dict
      sample: {vg: vg_aem, lv: lv_repo, before: auto, after: 64}
    conflicts:
      description: Other settings that change this device's read-ahead, each with its C(source), C(file) or C(profile), and what it does.
      type: list
      elements: dict
      sample:
        - source: tuned
          profile: throughput-performance
          instance: disk
          setting: ">4096"
          effect: "tuned raises read-ahead to 4096 KiB when it starts or switches profile"
tuned_profile:
  description: What was planned for the collection's tuned child profile, or null when tuned is not in use.
  returned: always
  type: dict
  sample: {path: /etc/tuned/aemops-os-tuning/tuned.conf, parents: [virtual-guest], conflicts: [],
           actions: [wrote ..., activated virtual-guest aemops-os-tuning]}
rules_file:
  description: Path of the owned udev rules file.
  returned: always
  type: str
  sample: /etc/udev/rules.d/90-aemops-read-ahead.rules
skipped_targets:
  description: Targets skipped because of O(ignore_missing), with the reason.
  returned: always
  type: list
  elements: dict
'''

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, files, tuned, udev_rules

ROOT = '/'
MAX_READ_AHEAD_KB = udev_rules.MAX_READ_AHEAD_KB


class Plan(object):
    """Resolved targets: an ordered map of governing device name to its entry."""

    def __init__(self):
        self.order = []
        self.entries = {}
        self.skipped = []

    def add(self, name, target):
        if name not in self.entries:
            self.order.append(name)
            self.entries[name] = {'targets': []}
        if target not in self.entries[name]['targets']:
            self.entries[name]['targets'].append(target)


def strict_kb(value):
    """read_ahead_kb as an int: an int (not a bool) or a string of ASCII digits; ValueError otherwise.

    Ansible's int type takes False as 0 and, on Python 3, any Unicode digits ('٣٢' as 32).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError('read_ahead_kb: unable to convert to int: %r is a boolean, not a number of KiB.' % value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
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


def validate(module):
    p = module.params
    try:
        p['read_ahead_kb'] = kb = strict_kb(p['read_ahead_kb'])
    except ValueError as e:
        module.fail_json(msg=str(e))
    try:
        files.check_path_form(p['rules_file'], 'rules_file')
    except files.FileError as e:
        module.fail_json(msg=str(e))
    if not p['rules_file'].endswith('.rules'):
        module.warn('rules_file %s does not end in .rules: udev reads only *.rules files, so this rule will not '
                    'apply at boot.' % p['rules_file'])
    if p['state'] == 'present':
        if kb is None:
            module.fail_json(msg='read_ahead_kb is required with state=present, in KiB (for example 32).')
        if kb < 0 or kb > MAX_READ_AHEAD_KB:
            module.fail_json(msg='read_ahead_kb=%d is out of range: give KiB between 0 and %d (32 is the usual '
                                 'value for AEM TarMK). Note blockdev --setra takes 512-byte sectors, not KiB.'
                                 % (kb, MAX_READ_AHEAD_KB))
        page_kb = max(1, os.sysconf('SC_PAGE_SIZE') // 1024) if hasattr(os, 'sysconf') else 4
        if kb % page_kb:
            module.fail_json(msg='read_ahead_kb=%d is not a multiple of the page size (%d KiB): the kernel keeps '
                                 'read-ahead in pages and would store %d. Use a multiple of %d.'
                                 % (kb, page_kb, kb - kb % page_kb, page_kb))
    if not p['devices'] and not p['paths']:
        module.fail_json(msg='nothing to tune: give devices= (kernel names or /dev paths) or paths= (filesystem paths).')
    for spec in p['devices']:
        if not spec or not spec.strip():
            module.fail_json(msg='devices contains an empty entry; remove it.')
    for path in p['paths']:
        if not path or not path.startswith('/'):
            module.fail_json(msg='paths entry %r is not an absolute path; give the full path, for example '
                                 '/opt/aem/crx-quickstart/repository.' % path)


def resolve(module, root):
    """Resolve every target to its governing device; fail (having changed nothing) on errors."""
    p = module.params
    plan = Plan()
    errors = []

    def take(target, finder):
        try:
            name = finder()
        except blockdev.BlockDeviceError as e:
            if p['ignore_missing']:
                plan.skipped.append({'target': target, 'reason': str(e)})
                module.warn('skipping %s: %s' % (target, e))
            else:
                errors.append(str(e))
            return
        governing = blockdev.whole_disk(root, name)
        plan.add(governing, target)
        if p['underlying']:
            for disk in blockdev.underlying_disks(root, governing):
                plan.add(disk, target)

    for spec in p['devices']:
        take(spec, lambda spec=spec: blockdev.resolve_device(root, spec))
    for path in p['paths']:
        take(path, lambda path=path: blockdev.device_for_path(root, path)[0])
    if errors:
        module.fail_json(msg='; '.join(errors), changed=False)
    return plan


def tuned_context(module, root, planned_child=None):
    """What tuned does to disks, from the active profiles or, when planned, from our child profile."""
    profiles = tuned.active_profiles(root)
    texts = None
    if planned_child is not None:
        profiles = tuned.desired_active(planned_child['parents'])
        texts = {planned_child['path']: planned_child['after']}
    if not profiles:
        return None
    version = tuned.installed_version(module.run_command, module.get_bin_path, root)[1]
    try:
        units = tuned.effective_units(root, profiles, version, texts)[0]
    except tuned.TunedProfileError as e:
        module.warn('cannot read the active tuned profile to check for conflicts: %s' % e)
        return None
    return {'profiles': profiles, 'units': units, 'version': version, 'running': tuned.daemon_running(root)}


def tuned_groups(module, root, rules):
    """{kb: [(udev property, value)]}: how tuned can select each device that has a rule."""
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
            module.warn('%s has no udev property that tuned can select it by (udev database missing?), so the '
                        'tuned child profile cannot protect it; tuned may still change its read-ahead.' % name)
            continue
        groups.setdefault(rules[match], []).append(ident)
    return groups


def plan_tuned(module, root, rules):
    """Plan the read_ahead sections of the tuned child profile, or None when tuned is not in use."""
    if not module.params['tuned_override']:
        return None
    path = tuned.child_profile_path(root)
    if not tuned.active_profiles(root) and files.read_text(files.root_path(root, path)) is None:
        return None
    try:
        parents = tuned.child_state(root)[4]
        version = tuned.installed_version(module.run_command, module.get_bin_path)[1]
        sections = tuned.disk_sections(root, parents, tuned_groups(module, root, rules), version) if parents else []
        return tuned.plan_child(root, 'read_ahead', sections, version)
    except tuned.TunedProfileError as e:
        module.fail_json(msg='cannot plan the tuned child profile: %s' % e)


def device_conflicts(root, name, kind, kb, tuned_ctx, file_conflicts):
    conflicts = []
    if tuned_ctx is not None:
        props = blockdev.udev_db(root, name)[0]
        hit = tuned.read_ahead_for_device(tuned_ctx['units'], name, props)
        if hit and hit['readahead'] and tuned.disk_plugin_covers(
                kind, version=tuned_ctx['version'], parent_subsystem=tuned.device_parent_subsystem(root, name)):
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


def lvm_state(module, root, name):
    """{vg, lv, before} for an LV, or None. Uses lvs, which is read-only."""
    vg, lv = blockdev.lvm_names(root, name)
    if not vg or not lv:
        return None
    lvs = module.get_bin_path('lvs')
    if not lvs:
        module.warn('%s is an LVM volume but lvs is not installed; its LVM read-ahead is left alone.' % name)
        return None
    rc, out, err = module.run_command(blockdev.lvs_read_ahead_args(lvs, vg, lv))
    if rc != 0:
        module.fail_json(msg='lvs failed for %s/%s (%s): %s' % (vg, lv, name, err.strip() or out.strip()))
    try:
        before = blockdev.parse_lvs_read_ahead(out)
    except blockdev.BlockDeviceError as e:
        module.fail_json(msg=str(e))
    return {'vg': vg, 'lv': lv, 'before': before, 'after': before}


def lvchange(module, lvm, value):
    """Store ``value`` as the LV's read-ahead in the VG metadata; an error message, or None."""
    lvchange_bin = module.get_bin_path('lvchange')
    if not lvchange_bin:
        return 'lvchange is not installed; it is needed to store the read-ahead of %s/%s.' % (lvm['vg'], lvm['lv'])
    rc, out, err = module.run_command(blockdev.lvchange_read_ahead_args(lvchange_bin, lvm['vg'], lvm['lv'], value))
    if rc != 0:
        return 'lvchange --readahead %s %s/%s failed: %s' % (value, lvm['vg'], lvm['lv'], err.strip() or out.strip())
    lvm['after'] = value
    return None


class Applied(object):
    """What a run has changed so far, so that a failure after the first change says so and undoes what it can.

    The failure reports changed=true, lists every change made (``changes``) and what was rolled
    back: the runtime read_ahead_kb and the LVM metadata value go back to their values from
    before the run. A written rules file stays (it is consistent on its own) and is listed.
    """

    def __init__(self, module, root):
        self.module = module
        self.root = root
        self.runtime = []  # (entry, before, after)
        self.lvm = []  # (entry, before, after)
        self.files = []

    def lvchange(self, entry, value):
        before = entry['lvm']['before']
        error = lvchange(self.module, entry['lvm'], value)
        if error:
            self.fail(error)
        self.lvm.append((entry, before, value))

    def changes(self):
        out = ['%s: read_ahead_kb %s -> %s' % (e['name'], b, a) for e, b, a in self.runtime]
        out += ['%s/%s: LVM read-ahead %s -> %s' % (e['lvm']['vg'], e['lvm']['lv'], b, a) for e, b, a in self.lvm]
        out += ['wrote %s' % path for path in self.files]
        return out

    def fail(self, msg):
        changes = self.changes()
        rolled_back, not_rolled_back = [], []
        # LVM first: activation and lvchange may set the runtime value, which comes back last.
        for entry, before, _after in reversed(self.lvm):
            error = lvchange(self.module, entry['lvm'], before)
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
        self.module.fail_json(msg=msg, changed=bool(changes), changes=changes, rolled_back=rolled_back,
                              not_rolled_back=not_rolled_back)


def udev_apply(module, root, names, rules_path):
    """Reload udev rules and replay change events for ``names`` so the new rules take effect."""
    udevadm = module.get_bin_path('udevadm')
    if not udevadm:
        module.warn('udevadm not found: %s takes effect at the next boot.' % rules_path)
        return
    if not os.path.exists(files.root_path(root, '/run/udev/control')):
        return  # udevd is not running (a chroot, a container, a minimal host): it reads the file when it starts.
    module.run_command([udevadm, 'control', '--reload'], check_rc=True)
    if not names:
        return
    cmd = [udevadm, 'trigger', '--action=change', '--subsystem-match=block']
    for name in names:
        cmd.append('--sysname-match=%s' % name)
    module.run_command(cmd, check_rc=True)
    module.run_command([udevadm, 'settle', '--timeout=30'])


def run(module, root):
    p = module.params
    validate(module)
    plan = resolve(module, root)
    present = p['state'] == 'present'
    kb = p['read_ahead_kb']
    rules_path = p['rules_file']
    rules_full = files.root_path(root, rules_path)

    try:
        before_text = files.read_owned(rules_full, rules_path)
        rules, baselines = udev_rules.parse(before_text, rules_path)
    except (udev_rules.RulesFileError, files.FileError) as e:
        module.fail_json(msg=str(e))
    new_rules, new_baselines = dict(rules), dict(baselines)

    file_conflicts = [dict(c, source='udev rule') for c in udev_rules.competing_rules(root, rules_path)]
    file_conflicts += [dict(c, source='rc.local') for c in udev_rules.rc_local_setra(root)]

    results = []
    runtime_changes = []  # (entry, value)
    lvm_changes = []  # (entry, value)
    for name in plan.order:
        entry = plan.entries[name]
        kind = blockdev.device_type(root, name)
        before = blockdev.read_ahead_kb(root, name)
        if before is None:
            module.fail_json(msg='%s has no queue/read_ahead_kb in sysfs; it cannot be tuned.' % name)
        sid, refused = blockdev.stable_id_report(root, name)
        match = udev_rules.match_clause(sid)
        entry.update({
            'name': name,
            'path': blockdev.describe(root, name)['path'],
            'type': kind,
            'stable_id': sid,
            'mount_points': blockdev.mount_points(root, name),
            'before_kb': before,
            'after_kb': before,
            'rule': None,
            'conflicts': [],
        })
        lvm = lvm_state(module, root, name) if kind == 'lvm' else None
        if lvm is not None:
            entry['lvm'] = lvm
        if present:
            target = kb
            if p['persist']:
                if match is None:
                    module.fail_json(msg='%s (%s) has no stable identity (no serial, WWN, DM UUID or MD UUID) to '
                                         'match in a udev rule, and kernel names can change at boot.%s Give the disk '
                                         'a serial (for a loop device: a backing file with a plain name), or set '
                                         'persist=false to change only the running value.'
                                         % (name, kind, (' Refused: %s.' % '; '.join(refused)) if refused else ''))
                new_rules[match] = kb
                entry['rule'] = udev_rules.render_rule(match, kb)
                if match not in new_baselines:
                    new_baselines[match] = {'match': match, 'device': name, 'read_ahead_kb': before,
                                            'lvm_read_ahead': lvm['before'] if lvm else None}
                if lvm is not None and lvm['before'] != blockdev.kb_to_sectors(kb):
                    lvm_changes.append((entry, blockdev.kb_to_sectors(kb)))
            elif match in rules and rules[match] != kb:
                module.warn('%s: the persisted rule in %s sets %d KiB and will apply again at the next boot '
                            '(persist=false changes only the running value).' % (name, rules_path, rules[match]))
        else:
            baseline = new_baselines.pop(match, None) if match else None
            new_rules.pop(match, None)
            target = baseline.get('read_ahead_kb') if baseline else None
            if baseline is None:
                module.warn('%s: no recorded original value in %s; its running read-ahead (%d KiB) is left as it '
                            'is.' % (name, rules_path, before))
            elif lvm is not None and baseline.get('lvm_read_ahead') is not None \
                    and lvm['before'] != baseline['lvm_read_ahead']:
                lvm_changes.append((entry, baseline['lvm_read_ahead']))
        if target is not None and target != before:
            runtime_changes.append((entry, target))
        entry['planned_kb'] = target if target is not None else before
        results.append(entry)

    after_text = udev_rules.render(new_rules, new_baselines)
    file_changed = after_text != before_text
    tuned_plan = plan_tuned(module, root, new_rules) if (p['persist'] or not present) else None
    tuned_changed = tuned.plan_changes(tuned_plan)
    if present:
        planned = tuned_plan if tuned_plan and tuned_plan['after'] else None
        tuned_ctx = tuned_context(module, root, planned)
        for entry in results:
            entry['conflicts'] = device_conflicts(root, entry['name'], entry['type'], kb, tuned_ctx, file_conflicts)
    changed = bool(runtime_changes or lvm_changes or file_changed or tuned_changed)

    for entry, _value in runtime_changes:
        try:
            blockdev.check_writable(root, entry['name'])
        except blockdev.BlockDeviceError as e:
            module.fail_json(msg=str(e))
    if file_changed:
        try:
            files.check_owned_target(rules_full, rules_path, check_only=module.check_mode)
        except files.FileError as e:
            module.fail_json(msg='cannot write the rules file: %s' % e)

    diff = [files.diff_entry(rules_path, before_text, after_text)]
    if tuned_plan:
        diff.append(files.diff_entry(tuned_plan['path'], tuned_plan['before'], tuned_plan['after']))

    if not module.check_mode:
        applied = Applied(module, root)
        for entry, value in lvm_changes:
            applied.lvchange(entry, value)
        for entry, value in runtime_changes:
            try:
                blockdev.write_read_ahead_kb(root, entry['name'], value)
            except blockdev.BlockDeviceError as e:
                applied.fail(str(e))
            applied.runtime.append((entry, entry['before_kb'], value))
        if file_changed:
            try:
                if after_text is None:
                    files.remove_file(rules_full)
                else:
                    files.atomic_write(rules_full, after_text, 0o644, module=module)
            except (IOError, OSError) as e:
                applied.fail('writing the rules file %s failed: %s' % (rules_path, files.describe_os_error(e)))
            applied.files.append(rules_path)
            udev_apply(module, root, [e['name'] for e in results], rules_path)
        if tuned_changed:
            try:
                tuned_plan['actions'] = tuned.apply_child(
                    root, tuned_plan, module.run_command, module.get_bin_path('tuned-adm'), tuned.daemon_running(root),
                    lambda path, text: files.atomic_write(path, text, 0o644, module=module), files.remove_owned_file)
            except tuned.TunedProfileError as e:
                applied.fail(str(e))
        # udev, LVM or another agent may have acted on the change events: enforce and verify.
        for entry in results:
            value = entry['planned_kb']
            actual = blockdev.read_ahead_kb(root, entry['name'])
            if actual != value:
                actual = blockdev.write_read_ahead_kb(root, entry['name'], value)
                changed = True
            if actual != value:
                module.fail_json(msg='%s still reads %s KiB after writing %d: something else sets it (conflicts: %s).'
                                     % (entry['name'], actual, value, entry['conflicts']), changed=True)
            entry['after_kb'] = actual
    else:
        for entry in results:
            entry['after_kb'] = entry['planned_kb']
            if entry.get('lvm'):
                for lvm_entry, value in lvm_changes:
                    if lvm_entry is entry:
                        entry['lvm']['after'] = value

    for entry in results:
        entry.pop('planned_kb', None)
        for conflict in entry['conflicts']:
            if conflict['source'] == 'tuned':
                hint = ('' if module.params['tuned_override'] and module.params['persist'] else
                        ' Set tuned_override=true (with persist=true) to make tuned agree.')
                module.warn('%s: active tuned profile %s ([%s] readahead=%s from %s) will set it back to a different '
                            'value at the next tuned start or profile switch.%s'
                            % (entry['name'], ' '.join(conflict['active_profiles']), conflict['instance'],
                               conflict['setting'], conflict['profile'], hint))

    for warning in tuned.conflict_warnings(tuned_plan):
        module.warn(warning)
    result = {'changed': changed, 'devices': results, 'rules_file': rules_path, 'skipped_targets': plan.skipped,
              'tuned_profile': tuned.plan_summary(tuned_plan, tuned_changed)}
    if module._diff:
        result['diff'] = diff
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            devices=dict(type='list', elements='str', default=[]),
            paths=dict(type='list', elements='path', default=[]),
            read_ahead_kb=dict(type='raw'),
            persist=dict(type='bool', default=True),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            underlying=dict(type='bool', default=False),
            ignore_missing=dict(type='bool', default=False),
            tuned_override=dict(type='bool', default=True),
            rules_file=dict(type='path', default=udev_rules.RULES_FILE),
        ),
        supports_check_mode=True,
    )
    try:
        files.check_path_form(module.params['rules_file'], 'rules_file')
    except files.FileError as e:
        module.fail_json(msg=str(e))
    # One lock per owned file, taken in a fixed order: the rules file and the tuned child
    # profile are read, planned and written by one run at a time. Check mode writes nothing
    # (and the files are replaced atomically, so it never reads half a file): it takes none.
    owned = [] if module.check_mode else [module.params['rules_file'], tuned.child_profile_path(ROOT)]
    try:
        with files.locked_all(owned, ROOT):
            result = run(module, ROOT)
    except files.FileError as e:
        module.fail_json(msg=str(e))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
