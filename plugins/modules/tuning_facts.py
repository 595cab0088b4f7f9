#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: tuning_facts
short_description: Gather read-ahead, THP, tuned and boot facts for AEM tuning, read-only
version_added: 0.1.0
description:
  - Returns C(ansible_facts.os_tuning) with what decides read-ahead and Transparent Huge Pages on the host, read
    with the same code the other modules of the collection use.
  - Block devices with their C(read_ahead_kb), type, stable id, holders, slaves and mount points; which device
    governs each mounted filesystem; the LVM read-ahead of logical volumes.
  - THP at runtime and as persisted (tuned, the configured kernel command line, C(/proc/cmdline)).
  - tuned (installed, running, active profiles, version, and the effective C([disk] readahead) per device and THP
    setting through the include chain), the collection's managed files with their recorded baselines, conflicts,
    and the OS facts needed for planning (release, boot method).
  - Changes nothing. Runs unprivileged where the files are readable; what needs root (C(lvs)) is then left out.
author:
  - aemops.os_tuning contributors (@aemops)
options:
  paths:
    description: Filesystem paths to resolve to their governing device (reported under C(paths)).
    type: list
    elements: path
    default: []
notes:
  - Runs on the target's Python 2.7 (RHEL 7), 3.6 (RHEL 8 platform-python) and newer.
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
'''

EXAMPLES = r'''
- name: Gather tuning facts, resolving the AEM repository path
  aemops.os_tuning.tuning_facts:
    paths:
      - /opt/aem/crx-quickstart/repository

- name: Show the read-ahead of the device that governs the repository
  ansible.builtin.debug:
    msg: "{{ ansible_facts.os_tuning.paths['/opt/aem/crx-quickstart/repository'] }}"
'''

RETURN = r'''
ansible_facts:
  description: Facts under C(os_tuning).
  returned: always
  type: dict
  contains:
    os_tuning:
      description: Keys C(block_devices), C(mounts), C(paths), C(thp), C(tuned), C(managed_files), C(conflicts), C(os).
      type: dict
      sample:
        block_devices:
          nvme1n1: {type: nvme, read_ahead_kb: 4096, stable_id: {key: "ATTRS{serial}", value: vol0123456789abcdef0}}
        paths:
          /opt/aem/crx-quickstart/repository: {device: dm-0, read_ahead_kb: 4096, mount: /opt/aem}
        thp: {runtime: {enabled: always}, running_cmdline: null}
        tuned: {installed: true, running: true, active_profiles: [virtual-guest], version: "2.21.0"}
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, bootloader, files, thp, tuned, udev_rules

ROOT = '/'
SKIP_PREFIXES = ('ram', 'zram', 'sr', 'fd')


def block_devices(module, root, rules, errors=None):
    devices = {}
    lvs = module.get_bin_path('lvs')
    names, bad = blockdev.whole_disks_checked(root)
    errors = [] if errors is None else errors
    errors.extend(bad)
    for name in names:
        if name.startswith(SKIP_PREFIXES):
            continue
        try:
            info = blockdev.describe(root, name)
        except (IOError, OSError, ValueError, blockdev.BlockDeviceError) as e:
            errors.append('block device %s: %s' % (name, e))  # one odd device; the others are still listed
            continue
        if info['type'] == 'loop' and not info.get('loop_bound'):
            continue  # an unbound loop device
        info['rule'] = rules.get(udev_rules.match_clause(info['stable_id']))
        if info['type'] == 'lvm' and lvs and info.get('lvm', {}).get('vg'):
            rc, out, _err = module.run_command(blockdev.lvs_read_ahead_args(lvs, info['lvm']['vg'], info['lvm']['lv']))
            if rc == 0:
                try:
                    info['lvm']['read_ahead'] = blockdev.parse_lvs_read_ahead(out)
                except blockdev.BlockDeviceError:
                    info['lvm']['read_ahead'] = None
        devices[name] = info
    return devices


def mounts(root):
    result = {}
    for entry in blockdev.mounts(root):
        if entry['fstype'] in blockdev.NON_BLOCK_FSTYPES:
            continue
        link = files.root_path(root, '/sys/dev/block/%s' % entry['majmin'])
        if not entry['majmin'].startswith('0:') and os.path.exists(link):
            name = os.path.basename(os.path.realpath(link))
        elif entry['source'].startswith('/dev/'):
            try:  # btrfs and others report an anonymous 0:N device: resolve the source instead
                name = blockdev.resolve_device(root, entry['source'])
            except blockdev.BlockDeviceError:
                continue
        else:
            continue
        governing = blockdev.whole_disk(root, name)
        result[entry['mountpoint']] = {'source': entry['source'], 'fstype': entry['fstype'], 'device': name,
                                       'governing_device': governing,
                                       'read_ahead_kb': blockdev.read_ahead_kb(root, governing)}
    return result


def resolve_paths(root, paths):
    result = {}
    for path in paths:
        try:
            name, mount = blockdev.device_for_path(root, path)
        except blockdev.BlockDeviceError as e:
            result[path] = {'error': str(e)}
            continue
        governing = blockdev.whole_disk(root, name)
        result[path] = {'device': governing, 'mount': mount['mountpoint'], 'fstype': mount['fstype'],
                        'type': blockdev.device_type(root, governing),
                        'read_ahead_kb': blockdev.read_ahead_kb(root, governing)}
    return result


def tuned_facts(module, root, devices):
    tuned_adm, version = tuned.installed_version(module.run_command, module.get_bin_path)
    facts = {
        'installed': bool(tuned_adm) or os.path.isdir(files.root_path(root, '/usr/lib/tuned')),
        'running': tuned.daemon_running(root),
        'version': '.'.join(str(v) for v in version) if version else None,
        'active_profiles': tuned.active_profiles(root),
        'profile_mode': tuned.profile_mode(root),
        'child_profile': tuned.child_profile_path(root),
        'read_ahead': {},
        'thp': None,
        'error': None,
    }
    if not facts['active_profiles']:
        return facts, version
    try:
        units, chain = tuned.effective_units(root)
    except tuned.TunedProfileError as e:
        facts['error'] = str(e)
        return facts, version
    facts['include_chain'] = [p['name'] for p in chain]
    for name, info in devices.items():
        hit = tuned.read_ahead_for_device(units, name, blockdev.udev_db(root, name)[0])
        if hit and hit['readahead'] and tuned.disk_plugin_covers(info['type'], version=version):
            facts['read_ahead'][name] = {'instance': hit['instance'], 'profile': hit['profile'],
                                         'setting': hit['readahead']['raw'], 'kb': hit['readahead']['kb']}
    for unit in units:
        if unit['type'] != 'vm':
            continue
        for key in ('transparent_hugepages', 'transparent_hugepage'):  # tuned accepts both spellings
            if key in unit['options']:
                facts['thp'] = {'enabled': unit['options'][key], 'profile': unit['origins'].get(key, unit['profile']),
                                'defrag': unit['options'].get('transparent_hugepage.defrag')}
    return facts, version


def thp_facts(module, root, boot):
    result = {'runtime': None, 'running_cmdline': bootloader.running(root, 'transparent_hugepage'),
              'configured_cmdline': None, 'error': None}
    try:
        state = thp.read_state(root)
        result['runtime'] = dict((a.replace('/', '_'), {'value': state[a]['value'], 'offered': state[a]['offered']})
                                 for a in thp.ATTRS if a in state)
    except thp.ThpError as e:
        result['error'] = str(e)
    if boot['method'] != 'none':
        try:
            result['configured_cmdline'] = bootloader.configured(root, boot, 'transparent_hugepage',
                                                                 module.run_command)
        except bootloader.BootloaderError as e:
            result['error'] = str(e)
    return result


def managed_files(root):
    result = {}
    text = files.read_text(files.root_path(root, udev_rules.RULES_FILE))
    rules = {}
    if text is not None:
        try:
            rules, baselines = udev_rules.parse(text)
            result['read_ahead_rules'] = {'path': udev_rules.RULES_FILE, 'rules': rules,
                                          'baselines': list(baselines.values())}
        except udev_rules.RulesFileError as e:
            result['read_ahead_rules'] = {'path': udev_rules.RULES_FILE, 'error': str(e)}
    path, text, current, baseline, parents = None, None, None, None, []
    try:
        path, text, current, baseline, parents = tuned.child_state(root)
    except tuned.TunedProfileError as e:
        result['tuned_child_profile'] = {'error': str(e)}
    if text is not None:
        result['tuned_child_profile'] = {'path': path, 'baseline': baseline, 'parents': parents,
                                         'sections': [{'owner': o, 'name': n} for o, n, _opts in current['sections']]}
    text = files.read_text(files.root_path(root, thp.BASELINE_FILE))
    if text is not None:
        records, errors = files.parse_baselines(text)
        result['thp_baseline'] = {'path': thp.BASELINE_FILE, 'baseline': records[0] if records else None,
                                  'errors': errors}
    return result, rules


def guarded(errors, what, default, fn, *args):
    """Run one fact-gathering step; a file this user cannot read becomes an error entry, not a failure."""
    try:
        return fn(*args)
    except (IOError, OSError) as e:
        errors.append('%s: %s' % (what, e))
        return default


def run(module, root):
    errors = []
    files_facts, rules = guarded(errors, 'managed files', ({}, {}), managed_files, root)
    devices = guarded(errors, 'block devices', {}, block_devices, module, root, rules, errors)
    boot = guarded(errors, 'boot loader', None, bootloader.detect, root, module.get_bin_path)
    if boot is None:
        boot = {'os_id': None, 'version_id': None, 'major': None, 'family': 'unknown', 'efi': None, 'bls': None,
                'method': 'none', 'reason': 'unreadable', 'tools': {}}
    tuned_info, version = guarded(errors, 'tuned', ({'version': None, 'error': 'unreadable'}, None),
                                  tuned_facts, module, root, devices)
    conflicts = guarded(errors, 'udev rules', [], udev_rules.competing_rules, root)
    rc_local = guarded(errors, 'rc.local', [], udev_rules.rc_local_setra, root)
    facts = {
        'block_devices': devices,
        'mounts': guarded(errors, 'mounts', {}, mounts, root),
        'paths': guarded(errors, 'paths', {}, resolve_paths, root, module.params['paths']),
        'thp': guarded(errors, 'THP', {'runtime': None, 'error': 'unreadable'}, thp_facts, module, root, boot),
        'tuned': tuned_info,
        'managed_files': files_facts,
        'conflicts': ([dict(c, source='udev rule') for c in conflicts]
                      + [dict(c, source='rc.local') for c in rc_local]),
        'os': {'id': boot['os_id'], 'version_id': boot['version_id'], 'major': boot['major'],
               'family': boot['family'], 'efi': boot['efi'], 'bls': boot['bls'],
               'boot_method': boot['method'], 'boot_reason': boot['reason'],
               'grubby': bool(boot['tools'].get('grubby')), 'tuned_version': tuned_info.get('version')},
        'errors': errors,
    }
    return {'changed': False, 'ansible_facts': {'os_tuning': facts}}


def main():
    module = AnsibleModule(
        argument_spec=dict(paths=dict(type='list', elements='path', default=[])),
        supports_check_mode=True,
    )
    module.exit_json(**run(module, ROOT))


if __name__ == '__main__':
    main()
