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
  - On AWS Nitro, each EBS volume's own statistics (NVMe log page 0xD0, read-only), among them the microseconds
    during which the volume's or the instance's IOPS or throughput cap was exceeded.
  - Changes nothing. Runs unprivileged where the files are readable; what needs root (C(lvs), the EBS statistics)
    is then left out, with the reason.
author:
  - aemops.os_tuning contributors (@aemops)
options:
  paths:
    description:
      - Filesystem paths to resolve to their governing device (reported under C(paths)).
      - An empty entry (here or in the list keys of O(intent)) is an error naming its index, not the current
        directory; nothing is gathered or changed.
      - So is a relative path, here or in O(intent.paths) and O(intent.candidates), as M(aemops.os_tuning.read_ahead)
        refuses it (it would be looked up from C(/)); the error names each and asks for the full path.
    type: list
    elements: path
    default: []
  intent:
    description:
      - What the caller (the C(aem_tuning) role) wants of the host. When given, the module resolves the targets,
        checks every value that the C(read_ahead) and C(thp) modules would refuse, and fails naming each one,
        having changed nothing. It also returns C(plan), with the read-ahead the run applies
        (C(plan.read_ahead)), and C(compliance) with the misses.
    type: dict
    suboptions:
      state:
        description: V(present) to tune, V(absent) to back out.
        type: str
        choices: [present, absent]
        default: present
      mode:
        description:
          - The role's C(aem_tuning_mode). Only V(apply), of state V(present) and outside check mode, may sweep the live
            device (C(plan.read_ahead.may_sweep)).
        type: str
        choices: [apply, audit]
        default: audit
      read_ahead_kb:
        description:
          - A whole number of KiB (text of ASCII digits is taken as one), V(auto), or not given.
          - Not given (or null) means 32 KiB, or the page size of the host's kernel where that is larger (64 KiB on
            RHEL 9 C(kernel-64k) and RHEL 8 on aarch64); C(plan.read_ahead) says which, and why.
          - V(auto) leaves the value to M(aemops.os_tuning.read_ahead_sweep); O(intent.sweep) then holds its settings,
            checked here like every other value (also where a recorded result is used). The read-ahead value is left
            out of the misses (persistence is still checked) until one is chosen.
        type: raw
      sweep:
        description:
          - With V(auto), the sweep's settings (the role's C(aem_tuning_sweep_*) and C(aem_tuning_volume_*)); 0 or
            null for the volume type's default. Checked by the collection's rules (C(module_utils/compliance.py)).
        type: dict
        suboptions:
          values:
            description: The values to measure (a list), or null for the default of the host's page size.
            type: raw
          readers:
            description: Concurrent readers.
            type: int
          duration:
            description: Seconds per phase.
            type: int
          size_mb:
            description: MiB of scratch file.
            type: int
          tolerance_pct:
            description: The tolerance of the recommendation, in percent.
            type: float
          volume_type:
            description: The EBS volume type, or V(custom).
            type: str
          volume_size_gb:
            description: The volume's size in GiB.
            type: int
          iops:
            description: The volume's IOPS cap.
            type: int
          throughput_mibps:
            description: The volume's throughput cap in MiB/s.
            type: float
      sweep_force:
        description: With V(auto) in an apply run, sweep even where the recorded result holds.
        type: bool
        default: false
      sweep_record:
        description:
          - With V(auto), the file where M(aemops.os_tuning.read_ahead_sweep) (its O(aemops.os_tuning.read_ahead_sweep#module:record))
            recorded an earlier apply run's result (JSON with C(recommended_kb), C(knobs), C(path), C(device),
            C(stable_id) and more). When that result holds (a valid value, measured with the same O(intent.sweep)
            settings, on the first target path, on the device with the same stable identity that governs it now),
            its value is validated and checked in place of V(auto), and C(plan.recorded_sweep) returns C(usable),
            C(why) it does not hold, and the C(record). Where the run may not sweep (audit and check mode), a
            result that does not hold is an error, and one that holds is used with a warning.
        type: path
      paths:
        description: Given repository paths; when empty, the first of O(intent.candidates) that exists is the target.
        type: list
        elements: path
        default: []
      candidates:
        description: Repository paths to choose from when O(intent.paths) is empty.
        type: list
        elements: path
        default: []
      devices:
        description: Block devices to tune besides the repository's.
        type: list
        elements: str
        default: []
      underlying:
        description: Also tune the disks beneath each target device.
        type: bool
        default: false
      thp:
        description: The wanted THP mode.
        type: str
      thp_defrag:
        description: The wanted THP defrag mode.
        type: str
      thp_persist:
        description: Where THP is persisted (V(tuned), V(cmdline)).
        type: list
        elements: str
        default: []
      thp_persist_effective:
        description: What the C(thp) module reported it persists, for the command-line check.
        type: list
        elements: str
      aem_service:
        description:
          - The systemd unit AEM runs as. With C(state=present), its start guard (the drop-in that
            M(aemops.os_tuning.read_ahead) installs with its O(aemops.os_tuning.read_ahead#module:aem_service)) is
            reported in C(start_guard), and a guard that is missing or changed is a miss.
        type: str
        version_added: 0.3.0
  snapshot:
    description:
      - Read the snapshot of the host from before the collection's first change, which
        M(aemops.os_tuning.tuning_snapshot) keeps in O(snapshot.path), and return it under C(snapshot) (a damaged
        or foreign file as C(error), never trusted). This module never writes or removes it.
    type: dict
    suboptions:
      path:
        description: The snapshot file.
        type: path
        default: /etc/ansible/facts.d/aem_tuning_before.fact
  fail_on_invalid:
    description:
      - With O(intent), fail (having written nothing) when a value is invalid for this host. V(false) lists
        each such error as a miss of kind C(invalid) instead, for a check after a change.
    type: bool
    default: true
  verify:
    description:
      - Run C(tuned-adm verify) when a tuned profile is active, and read the failures tuned logs for it from
        C(/var/log/tuned/tuned.log), into C(compliance.tuned_verify) (one result naming the devices and options).
    type: bool
    default: false
  measure_readers:
    description:
      - Seconds over which every process that maps a file on the targets is measured, all at once, for its own KiB
        read from storage per major fault, the window its mappings fault with (see
        O(aemops.os_tuning.read_ahead#module:measure_readers)). V(0) turns it off. At most 30.
    type: int
    default: 3
notes:
  - Runs on the target's Python 2.7 (RHEL 7), 3.6 (RHEL 8 platform-python) and newer.
extends_documentation_fragment:
  - aemops.os_tuning.attributes
attributes:
  check_mode:
    details: The module changes nothing in any mode; in check mode O(intent) may not sweep (C(plan.read_ahead)).
  diff_mode:
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

- name: Check a host against what the role wants, and run tuned-adm verify
  aemops.os_tuning.tuning_facts:
    intent:
      read_ahead_kb: 32
      paths: [/opt/aem/crx-quickstart/repository]
      thp: never
    verify: true
  register: tuning

- name: Fail with the misses
  ansible.builtin.assert:
    that: tuning.ansible_facts.os_tuning.compliance.misses | length == 0
    fail_msg: "{{ tuning.ansible_facts.os_tuning.compliance.misses | map(attribute='message') | list }}"

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
      description:
        - Keys C(block_devices), C(mounts), C(paths), C(thp), C(tuned), C(managed_files), C(conflicts), C(os)
          (release, family, boot method, C(kernel_release), and C(python), the interpreter the module ran with),
          C(clock) (the host's own time, C(epoch) and C(iso)), C(errors), and C(snapshot) (the recorded snapshot,
          or null).
        - C(tuned.no_profile) names the administrator's live decision when tuned applies no profile (C(tuned runs
          no profile (tuned-adm off ...)) or C(... (tuned is stopped and disabled))), else null; the modules then
          write the child profile but activate nothing.
        - Each of C(block_devices) with a queue also has C(queue) (C(optimal_io_size) in bytes, C(rotational),
          C(max_sectors_kb) from sysfs), C(kernel_default) (C(kb) and C(rule), the read-ahead the block layer
          gives the device at this kernel release, for example 2 x io_opt from Linux 5.10, or twice
          C(max_sectors_kb) for a rotational disk without io_opt from 6.17; null when the release is unknown) and
          C(set_by) (what explains the current value, a tuned instance, the collection's udev rule or the kernel's
          rule, or null).
        - With O(intent), also C(plan) (C(targets), the chosen repository paths; C(devices), each given device's
          kernel name; C(underlying); C(page_kb); C(sweep_values), the values a sweep measures when none are given
          (the defaults of M(aemops.os_tuning.read_ahead_sweep) for this page size); C(read_ahead_default), with
          C(kb) and C(why), when the intent gave no C(read_ahead_kb); C(read_ahead), the read-ahead the run applies, decided
          once before any change, with C(kb) (null while a sweep of this run is to choose it, and with state absent),
          C(source) (C(given), C(default), C(recorded), C(sweep) or null), C(why), C(auto), C(may_sweep), C(sweep)
          (whether this run sweeps), C(knobs) (what it measures, the values resolved) and C(evidence) (the recorded
          sweep it uses, with C(source=recorded)); C(warnings); C(sweep_timeout), the seconds the
          role gives the read-ahead sweep of the intent's C(sweep) settings (the phases, the scratch file at 10 MiB/s
          and 600 s more), or null without valid ones) and C(compliance) (C(misses), a list of
          C(subject), C(kind), C(message); C(compliant); C(tuned_verify) with C(rc), C(passed), C(failures),
          C(summary), or null when not run).
        - C(ebs), per NVMe namespace the run targets (beneath the O(intent)'s target paths and devices; without
          O(intent), every NVMe namespace), what the EBS volume says of itself in its NVMe log page 0xD0 (read once
          per run with an NVMe Get Log Page, which reads only; root is needed), with C(device), C(volume_id) (from the
          NVMe serial, or null) and either C(stats) or C(reason). C(stats) holds the counters since the volume was
          attached, C(total_read_ops), C(total_write_ops), C(total_read_bytes), C(total_write_bytes),
          C(total_read_time), C(total_write_time), C(ebs_volume_performance_exceeded_iops),
          C(ebs_volume_performance_exceeded_tp), C(ec2_instance_performance_exceeded_iops) and
          C(ec2_instance_performance_exceeded_tp) (times in microseconds), the gauge C(volume_queue_length), the
          page's C(version), and C(read_io_latency_histogram) and C(write_io_latency_histogram), each a list of
          C([lower_us, upper_us, count]). C(reason) is one line that starts with C(no EBS statistics) and a colon
          and says why (not an EBS volume, another page, the NVMe status with which the device refused the page,
          no permission).
        - With an O(intent) of state present, also C(readers), the running processes that read the targets with
          an earlier read-ahead (see O(aemops.os_tuning.read_ahead#module:refresh_readers)). It holds
          C(stale) (open files an apply run refreshes in place) and C(needs_restart) (files only a restart
          brings to the value, mapped with no descriptor or on a kernel without C(pidfd_getfd), with C(why)),
          each with C(pid), C(comm), C(unit), C(start), counts and C(reason); C(descriptor_only) (stale files only
          open through descriptors, reported, never a miss); C(fine) (the mapping readers at the device's window);
          C(unreadable); C(unscanned); C(scan) (its cost); C(kernel_refresh); C(boot_rule); C(links); C(notes);
          C(record_problem); C(window) (the seconds of the measurement). A process that maps a file on the targets
          has C(basis) (V(measured) when its own KiB per major fault decided, V(inferred) when the record and the boot
          rule did) and C(measured) (C(kib_per_fault), C(faults), C(seconds), C(read_kib), C(rchar_kib)) or
          C(unmeasured). Each stale and needs_restart reader is a miss in C(compliance).
        - With an O(intent) of state present that names C(aem_service), also C(start_guard), with C(unit), C(path) (the
          drop-in), C(state) (V(ok); V(missing); V(changed), when the drop-in or its library is not what this version of
          the collection installs, or not root's alone; V(unsupported), systemd older than 231, where none is
          installed), C(problem) and C(systemd) (the version). A missing or changed guard is a miss.
        - With O(intent), also C(reading), what the role's result keeps of this reading (a few hundred bytes),
          C(now) and C(snapshot) (the first run's snapshot read the same way, or null), each with C(read_ahead_kb)
          (each device of the plan), C(devices) (each one's C(type)), C(paths) (each target's device), C(thp)
          (C(enabled), C(defrag), C(running_cmdline)), C(tuned) (C(version), C(active_profiles), the number of
          C(conflicts)) and C(os) (C(id), C(version_id), C(boot_method)).
      type: dict
      sample:
        block_devices:
          nvme1n1: {type: nvme, read_ahead_kb: 4096, stable_id: {key: "ATTRS{serial}", value: vol0123456789abcdef0}}
        paths:
          /opt/aem/crx-quickstart/repository: {device: dm-0, read_ahead_kb: 4096, mount: /opt/aem}
        ebs:
          nvme1n1: {device: nvme1n1, volume_id: vol-0123456789abcdef0,
                    stats: {total_read_ops: 1234567, ebs_volume_performance_exceeded_tp: 41000000,
                            read_io_latency_histogram: [[0, 128, 10], [128, 256, 3]]}}
        thp: {runtime: {enabled: always}, running_cmdline: null}
        tuned: {installed: true, running: true, active_profiles: [virtual-guest], post_loaded_profile: null, version: "2.21.0",
                no_profile: null}
'''

import os
import sys
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    blockdev, boot_guard, bootloader, compliance, ebs_stats, files, host, kernel_readahead, read_ahead_plan, readers,
    readers_measure, readers_scan, runstate, snapshot_fact, sweep, thp, tuned, udev_rules)

ROOT = '/'
SKIP_PREFIXES = ('ram', 'zram', 'sr', 'fd')

# The intent's keys and types (the role's aem_tuning_* variables without the prefix; see DOCUMENTATION). Two are raw,
# because each may be a number or a word (compliance.normalise_intent): read_ahead_kb (a number, auto or none) and the
# sweep's values (a list, or none for the page-size default).
SWEEP_SPEC = dict(
    values=dict(type='raw'),
    readers=dict(type='int'),
    duration=dict(type='int'),
    size_mb=dict(type='int'),
    tolerance_pct=dict(type='float'),
    volume_type=dict(type='str'),
    volume_size_gb=dict(type='int'),
    iops=dict(type='int'),
    throughput_mibps=dict(type='float'),
)
INTENT_SPEC = dict(
    state=dict(type='str', choices=['present', 'absent'], default='present'),
    mode=dict(type='str', choices=['apply', 'audit'], default='audit'),
    read_ahead_kb=dict(type='raw'),
    sweep=dict(type='dict', options=SWEEP_SPEC),
    sweep_force=dict(type='bool', default=False),
    sweep_record=dict(type='path'),
    paths=dict(type='list', elements='path', default=[]),
    candidates=dict(type='list', elements='path', default=[]),
    devices=dict(type='list', elements='str', default=[]),
    underlying=dict(type='bool', default=False),
    thp=dict(type='str'),
    thp_defrag=dict(type='str'),
    thp_persist=dict(type='list', elements='str', default=[]),
    thp_persist_effective=dict(type='list', elements='str'),
    aem_service=dict(type='str'),
)


def block_devices(module, root, rules, errors=None):
    devices = {}
    lvs = module.get_bin_path('lvs')
    names, bad = blockdev.whole_disks_checked(root)
    release, page_kb = kernel_readahead.kernel_release(root), compliance.page_kb_of()
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
        if info['read_ahead_kb'] is not None:
            info['queue'] = kernel_readahead.queue_limits(blockdev.device_dir(root, name))
            info['kernel_default'] = kernel_readahead.default_kb(release, info['queue'], page_kb)
        if info['type'] == 'lvm' and lvs and info.get('lvm', {}).get('vg'):
            try:
                info['lvm']['read_ahead'] = blockdev.lvs_read_ahead(module.run_command, lvs, info['lvm']['vg'],
                                                                    info['lvm']['lv'], name)
            except blockdev.LvsFailed:
                pass  # no LVM value to report
            except blockdev.BlockDeviceError:
                info['lvm']['read_ahead'] = None  # lvs answered what cannot be parsed
        devices[name] = info
    return devices


def mounts(root):
    result = {}
    for entry in blockdev.mounts(root):
        if entry['fstype'] in blockdev.NON_BLOCK_FSTYPES:
            continue
        name = blockdev.mount_device(root, entry)
        if name is None:
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
    tuned_adm, version = tuned.installed_version(module.run_command, module.get_bin_path, root)
    facts = {
        'installed': bool(tuned_adm) or os.path.isdir(files.root_path(root, '/usr/lib/tuned')),
        'running': tuned.daemon_running(root),
        'version': '.'.join(str(v) for v in version) if version else None,
        'active_profiles': tuned.active_profiles(root),
        'profile_mode': tuned.profile_mode(root),
        'post_loaded_profile': tuned.post_loaded_profile(root),
        'child_profile': tuned.child_profile_path(root),
        'no_profile': tuned.no_profile_reason(root),
        'read_ahead': {},
        'thp': None,
        'conflicts': [],
        'error': None,
    }
    if not facts['active_profiles']:
        return facts, version
    try:
        units, chain = tuned.effective_units(root, version=version)
    except tuned.TunedProfileError as e:
        facts['error'] = str(e)
        return facts, version
    facts['include_chain'] = [p['name'] for p in chain]
    facts['not_evaluated'] = tuned.not_evaluated(chain)
    for name, info in devices.items():
        hit = read_ahead_plan.tuned_read_ahead(root, units, version, name, info['type'])
        if hit:
            facts['read_ahead'][name] = {'instance': hit['instance'], 'profile': hit['profile'],
                                         'setting': hit['readahead']['raw'], 'kb': hit['readahead']['kb']}
    facts['conflicts'] = child_conflicts(root, chain, units)
    for unit in units:
        if unit['type'] != 'vm':
            continue
        for key in ('transparent_hugepages', 'transparent_hugepage'):  # tuned accepts both spellings
            if key in unit['options']:
                facts['thp'] = {'enabled': unit['options'][key], 'profile': unit['origins'].get(key, unit['profile']),
                                'defrag': unit['options'].get('transparent_hugepage.defrag')}
    return facts, version


def child_conflicts(root, chain, units):
    """Where another loaded profile (kernel_settings, a custom one, the post-loaded one) sets THP or
    read-ahead differently from our child, and whose value tuned ends with; [] when ours is not loaded."""
    if tuned.CHILD_PROFILE not in [p['name'] for p in chain]:
        return []
    try:
        current = tuned.child_state(root)[2]
    except tuned.TunedProfileError:
        return []
    return tuned.child_conflicts(chain, units, current['sections']) if current else []


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


TUNED_LOG = '/var/log/tuned/tuned.log'
LOG_TAIL_BYTES = 256 * 1024


def read_tail(path, size):
    """The last ``size`` bytes of ``path`` as text (undecodable bytes replaced), or None."""
    try:
        with open(path, 'rb') as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


def resolve_intent(root, intent, path_facts):
    """The targets the intent names, resolved on this host (see compliance.validate)."""
    targets, errors, warnings = compliance.choose_targets(intent.get('paths') or [], intent.get('candidates') or [],
                                                          path_facts)
    devices, device_errors, underlying = {}, {}, {}
    for spec in intent.get('devices') or []:
        try:
            devices[spec] = blockdev.whole_disk(root, blockdev.resolve_device(root, spec))
        except blockdev.BlockDeviceError as e:
            devices[spec], device_errors[spec] = None, str(e)
    if intent.get('underlying'):
        for name in [path_facts[p]['device'] for p in targets] + [n for n in devices.values() if n]:
            underlying[name] = blockdev.underlying_disks(root, name)
    page_kb = compliance.page_kb_of()
    return {'targets': targets, 'devices': devices, 'device_errors': device_errors, 'underlying': underlying,
            'page_kb': page_kb, 'sweep_values': sweep.default_sweep(page_kb), 'errors': errors, 'warnings': warnings}


def _resolved_knobs(intent, resolved):
    """The intent's sweep settings with the values a sweep measures: the page-size defaults (resolved's
    sweep_values) where the role gave none (aem_tuning_sweep_values null)."""
    knobs = intent.get('sweep')
    if isinstance(knobs, dict) and knobs.get('values') is None:
        return dict(knobs, values=resolved['sweep_values'])
    return knobs


def tuned_verify(module, root, tuned_info):
    """``tuned-adm verify`` with the failures tuned logged for it, or None when no tuned profile is active."""
    tuned_adm = module.get_bin_path('tuned-adm')
    if not tuned_info.get('active_profiles') or not tuned_adm:
        return None
    rc, out, err = module.run_command([tuned_adm, 'verify'])
    return compliance.parse_verify(rc, out, err, read_tail(files.root_path(root, TUNED_LOG), LOG_TAIL_BYTES))


def check_intent(module, root, facts):
    """(intent, plan): the intent resolved and validated, with the default read-ahead or the recorded sweep's value
    in place; fail, having changed nothing, on any error. The plan is built once, from what was decided before; its
    ``read_ahead`` is the value the run applies (compliance.read_ahead_choice)."""
    given = compliance.normalise_intent(module.params['intent'])
    given['may_sweep'] = compliance.may_sweep(given, module.check_mode)
    if not compliance.is_auto(given):
        given['sweep'] = None  # the sweep's settings matter only with auto (the role always passes them)
    resolved = resolve_intent(root, given, facts['paths'])
    intent, read_ahead_default = compliance.with_default(given, resolved['page_kb'])
    recorded = {}
    record_errors, record_warnings = [], []
    if compliance.is_auto(intent) and intent.get('sweep_record') and intent.get('state', 'present') == 'present':
        data, damage = runstate.read_checked(files.root_path(root, intent['sweep_record']), intent['sweep_record'])
        recorded['recorded_sweep'] = (compliance.recorded_sweep(facts, intent, resolved, data) if damage is None else
                                      {'usable': False, 'why': damage, 'record': None})
        record_errors, record_warnings = compliance.recorded_sweep_messages(intent, recorded['recorded_sweep'])
        intent = compliance.with_recorded(intent, recorded['recorded_sweep'])
    errors = resolved['errors'] + record_errors + compliance.validate(facts, intent, resolved)
    knobs = _resolved_knobs(intent, resolved) if compliance.is_auto(given) else None
    plan = dict(resolved, read_ahead_default=read_ahead_default, errors=errors,
                warnings=resolved['warnings'] + record_warnings,
                sweep_timeout=compliance.sweep_timeout(knobs) if not errors else None,
                read_ahead=compliance.read_ahead_choice(given, read_ahead_default,
                                                        recorded.get('recorded_sweep'), knobs),
                **recorded)
    if errors and module.params['fail_on_invalid']:
        module.fail_json(msg='nothing was changed: %s' % ' '.join(errors), errors=errors, changed=False,
                         ansible_facts={'os_tuning': dict(facts, plan=plan, reading=result_reading(facts, plan))})
    for warning in plan['warnings']:
        module.warn(warning)
    return intent, plan


def result_reading(facts, plan):
    """What the role's result keeps of this reading and of the first run's snapshot (compliance.reading)."""
    snapshot = (facts.get('snapshot') or {}).get('os_tuning')
    return {'now': compliance.reading(facts, plan), 'snapshot': compliance.reading(snapshot, plan) if snapshot else None}


def reader_facts(root, facts, plan, window=0):
    """The running processes that read the targets with an earlier read-ahead (module_utils/readers.py)."""
    scope = compliance.reader_scope(facts, plan)
    info = dict((name, facts['block_devices'].get(name) or {}) for name in scope)
    kb = dict((name, i['read_ahead_kb']) for name, i in info.items() if i.get('read_ahead_kb') is not None)
    persisted = dict((name, i['rule']) for name, i in info.items() if i.get('rule') is not None)
    try:
        return readers.audit_report(readers.survey(root, kb, scope, persisted=persisted,
                                                   config_paths=[udev_rules.RULES_FILE], window=window))
    except readers_scan.ReadersError as e:
        raise OSError(str(e))


def ebs_devices(facts):
    """The devices whose EBS statistics these facts report (module_utils/ebs_stats.py finds the NVMe disks beneath
    them): with a plan, the device of each target path and each device given; without one, every NVMe namespace."""
    plan = facts.get('plan')
    if plan is None:
        return sorted(n for n, info in (facts.get('block_devices') or {}).items() if (info or {}).get('type') == 'nvme')
    paths = facts.get('paths') or {}
    names = [(paths.get(p) or {}).get('device') for p in plan.get('targets') or []]
    names += [n for _spec, n in sorted((plan.get('devices') or {}).items())]
    return [n for n in names if n]


def run(module, root):
    """Gather; with an intent, validate it, verify, and list the misses. Writes nothing (the snapshot is read only:
    aemops.os_tuning.tuning_snapshot keeps it)."""
    given = module.params['intent'] or {}
    problems = [files.empty_entries('paths', module.params['paths']), files.relative_entries('paths', module.params['paths'])]
    problems += [files.empty_entries('intent.%s' % key, given.get(key))
                 for key in ('paths', 'candidates', 'devices', 'thp_persist') if isinstance(given.get(key), list)]
    # As read_ahead refuses them (read_ahead_plan): a relative path would be looked up from / and could silently
    # resolve to another directory (tmp/x as /tmp/x).
    problems += [files.relative_entries('intent.%s' % key, given.get(key))
                 for key in ('paths', 'candidates') if isinstance(given.get(key), list)]
    window = readers_measure.window_problem(module.params['measure_readers'])
    problems.append('measure_readers: %s.' % window if window else None)
    problems = [p for p in problems if p]
    if problems:
        module.fail_json(msg='nothing was changed: %s' % ' '.join(problems), errors=problems, changed=False)
    now = time.time()
    facts = gather(module, root)
    facts['clock'] = {'epoch': now, 'iso': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now))}
    snap = module.params['snapshot'] or {'path': None}
    facts['snapshot'] = snapshot_fact.read_snapshot(root, snap['path']) if snap['path'] else None
    intent, plan = check_intent(module, root, facts) if module.params['intent'] is not None else (None, None)
    verify = tuned_verify(module, root, facts['tuned']) if module.params['verify'] else None
    if plan is not None and intent.get('state', 'present') == 'present':
        facts['readers'] = guarded(facts['errors'], 'readers', None, reader_facts, root, facts, plan,
                                   module.params['measure_readers'])
    if plan is not None:
        facts['plan'] = plan
    facts['ebs'] = guarded(facts['errors'], 'EBS statistics', {}, ebs_stats.samples, root, ebs_devices(facts))
    unit = given.get('aem_service')
    if unit and given.get('state', 'present') == 'present':
        facts['start_guard'] = guarded(facts['errors'], 'start guard', None, boot_guard.facts, root, unit,
                                       root.systemd_version())
    if plan is not None:
        found = [compliance.miss('intent', 'invalid', e) for e in plan['errors']]
        found += compliance.misses(facts, intent, plan, verify) + boot_guard.misses(facts.get('start_guard'))
        facts['compliance'] = {'misses': found, 'compliant': not found, 'tuned_verify': verify}
        facts['reading'] = result_reading(facts, plan)
    elif verify is not None:
        facts['compliance'] = {'misses': None, 'compliant': None, 'tuned_verify': verify}
    return {'changed': False, 'ansible_facts': {'os_tuning': facts}}


def gather(module, root):
    errors = []
    files_facts, rules = guarded(errors, 'managed files', ({}, {}), managed_files, root)
    devices = guarded(errors, 'block devices', {}, block_devices, module, root, rules, errors)
    boot = guarded(errors, 'boot loader', None, bootloader.detect, root, module.get_bin_path)
    if boot is None:
        boot = {'os_id': None, 'version_id': None, 'major': None, 'family': 'unknown', 'efi': None, 'bls': None,
                'method': 'none', 'reason': 'unreadable', 'tools': {}}
    tuned_info, version = guarded(errors, 'tuned', ({'version': None, 'error': 'unreadable'}, None),
                                  tuned_facts, module, root, devices)
    for name, info in devices.items():
        info['set_by'] = kernel_readahead.set_by(info['read_ahead_kb'], info.get('kernel_default'), info.get('queue'),
                                                 tuned_info.get('read_ahead', {}).get(name), info.get('rule'))
    facts = {
        'block_devices': devices,
        'mounts': guarded(errors, 'mounts', {}, mounts, root),
        'paths': guarded(errors, 'paths', {}, resolve_paths, root, wanted_paths(module.params)),
        'thp': guarded(errors, 'THP', {'runtime': None, 'error': 'unreadable'}, thp_facts, module, root, boot),
        'tuned': tuned_info,
        'managed_files': files_facts,
        'conflicts': udev_rules.file_conflicts(root, errors=errors),
        'os': {'id': boot['os_id'], 'version_id': boot['version_id'], 'major': boot['major'],
               'family': boot['family'], 'efi': boot['efi'], 'bls': boot['bls'],
               'boot_method': boot['method'], 'boot_reason': boot['reason'],
               'grubby': bool(boot['tools'].get('grubby')), 'tuned_version': tuned_info.get('version'),
               'python': sys.executable, 'kernel_release': kernel_readahead.kernel_release(root)},
        'errors': errors,
    }
    return facts


def wanted_paths(params):
    """The paths to resolve: those asked for, and those the intent names or may choose from, once each."""
    intent = params['intent'] or {}
    result = []
    for path in list(params['paths']) + list(intent.get('paths') or []) + list(intent.get('candidates') or []):
        if path not in result:
            result.append(path)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            paths=dict(type='list', elements='path', default=[]),
            intent=dict(type='dict', options=INTENT_SPEC),
            snapshot=dict(type='dict', options=dict(
                path=dict(type='path', default=snapshot_fact.DEFAULT_PATH))),
            verify=dict(type='bool', default=False),
            fail_on_invalid=dict(type='bool', default=True),
            measure_readers=dict(type='int', default=3),
        ),
        supports_check_mode=True,
    )
    # One state of the host for the whole run: host.Host reads each source once (the module changes nothing, so
    # nothing it read goes stale).
    module.exit_json(**run(module, host.Host(ROOT, module.run_command, module.get_bin_path, read_only=True)))


if __name__ == '__main__':
    main()
