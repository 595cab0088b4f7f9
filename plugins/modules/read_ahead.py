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
      - An empty entry is refused, naming its index.
    type: list
    elements: str
    default: []
  paths:
    description:
      - Filesystem paths. Each is resolved to the block device behind its mount, then to the
        governing device as described above.
      - A path on a filesystem without a block device (tmpfs, NFS, overlayfs) is an error,
        unless O(ignore_missing=true). An empty entry is refused, naming its index (it is not the current
        directory).
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
      - An integer, or a string of ASCII digits. A boolean, a floating-point number (even C(32.0)), a
        fraction or digits of another script (C('٣٢')) are refused, not converted.
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
  refresh_readers:
    description:
      - After setting the value, bring the files that running processes already hold open on the
        device to it, without restarting them. The kernel copies a device's read-ahead into each
        open file when it is opened, and a page fault in a mapping reads around with that copy, so
        a process that opened its files at 4096 KiB (Oak's tar files) keeps faulting 4 MiB per
        record after C(read_ahead_kb) is 32.
      - For each such file the module takes a duplicate of the process's descriptor with
        C(pidfd_getfd(2)), calls C(posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL)) on it and closes it.
        That sets the open file's read-ahead to the device's current value and nothing else; the
        process keeps running, its data, offsets and mappings are untouched.
      - C(POSIX_FADV_NORMAL) also clears a C(POSIX_FADV_RANDOM) or C(SEQUENTIAL) hint the process
        may have set on that file itself; no interface shows whether it did. The result names
        every refreshed process, with its systemd unit; O(refresh_only) limits the refresh.
      - Every stale reader that cannot be refreshed in place is named in C(readers.needs_restart), with
        its reasons (C(why)). A file it mapped and then closed (Lucene's C(MMapDirectory)) has no
        descriptor to take; a kernel without C(pidfd_getfd) (before Linux 5.6, so RHEL 7 and RHEL 8
        kernels, probed once a run); Yama C(ptrace_scope=3) or SELinux refusing it; O(refresh_readers)
        off; O(refresh_only) not naming it. The run does not fail.
      - Which files are refreshed. For a target in O(paths), the files under that path, resolved
        through symbolic links as the kernel reports open files (C(readers.links) names a link); for a
        process in another mount namespace, every file on the device. For a target in O(devices),
        every file on the device.
      - Which files are readers. A descriptor open for reading on a regular file larger than the new
        window, and a shared read-only mapping (as Oak maps its tar files); never program text (a file
        the process maps executable, with its other mappings), private mappings (C(locale-archive)),
        writable mappings or write-only descriptors, nor the files of the system itself (under C(/usr)
        but not C(/usr/local), C(/etc), C(/lib), C(/lib64), C(/bin), C(/sbin), and the name service
        caches of SSSD, C(/var/lib/sss/mc), and nscd). So a device target on the root disk names AEM
        and its data, not the shells and daemons that run from it.
      - How they are found, without touching other filesystems. The device of a descriptor comes from
        C(/proc/PID/fdinfo/N) (C(mnt_id)) and the process's C(mountinfo); only descriptors on the tuned
        devices are C(stat)ed, so a hung NFS or FUSE mount is never touched. Mappings carry their
        device in C(/proc/PID/maps). The scan has a 20-second deadline; the processes it did not reach
        are named in C(readers.unscanned). C(readers.scan) reports its cost. The scan runs in a child
        process, so that a read of C(/proc) that never returns cannot keep the module from exiting, and
        after the module's locks are released.
      - Which readers may be stale. The module records, in C(/run/aemops-os-tuning/readers.json),
        the device's value and the open files that were still stale after each run. While sysfs
        still reads that value and the run does not change it, a file is stale only when the
        record lists it, since anything opened since got the value at C(open). After a boot, with no
        record of that boot, a process that started after udev initialised the device is fresh when
        sysfs reads the value of the device's rule in O(rules_file) and that file is older than the
        boot (the boot rule, C(readers.boot_rule)). Otherwise (the first run, a value set by hand),
        every open file on the device may be stale and is refreshed, which makes the run C(changed)
        even when sysfs was already right. A value changed by hand and changed back on one boot is
        not seen.
      - With V(false), nothing is refreshed and the readers are only reported.
      - Only with O(state=present). Check mode refreshes nothing and lists what a run would do.
    type: bool
    default: true
  refresh_only:
    description:
      - Refresh only the processes named here, by command (C(java)) or systemd unit (C(aem.service)
        or C(aem)). The other stale readers are named in C(readers.needs_restart).
      - Empty (the default) refreshes every process that reads the targets.
    type: list
    elements: str
    default: []
  measure_readers:
    description:
      - Seconds over which every process that maps a file on the targets is measured, all at once, before the
        refresh and again after it (for the processes refreshed), for its own KiB read from storage per major fault
        (C(/proc/PID/io) C(read_bytes) over C(/proc/PID/stat) C(majflt)), the window its mappings fault with.
      - A conclusive measurement decides whether the process is stale, whatever the record and the boot rule
        infer, and C(basis) says which decided. V(0) turns it off. At most 30.
    type: int
    default: 3
  aem_service:
    description:
      - The systemd unit AEM runs as (C(aem.service)). With O(state=present), a drop-in for that unit is installed
        (C(/etc/systemd/system/<unit>.d/90-aemops-read-ahead.conf), with its library under
        C(/usr/local/lib/aemops-os-tuning)). Before AEM starts, after udev and tuned, it puts every device of the
        rules file at its persisted read-ahead and records this boot, so that AEM opens its files at that value after
        every boot, with no Ansible on the host. It needs systemd 231 or later (not RHEL 7's 219; a warning says so).
      - The collection's drop-ins for other units are removed. V("") removes every one; with O(state=absent) they
        are removed too. Unset (the default) leaves them as they are.
      - Needs the default O(rules_file).
    type: str
    version_added: 0.3.0
notes:
  - Check mode changes nothing and reports what would change; diff mode shows the rules file and the drop-in.
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
start_guard:
  description:
    - AEM's start guard (O(aem_service)); null when O(aem_service) is not given.
  returned: always
  type: dict
  version_added: 0.3.0
  contains:
    unit:
      description: The unit guarded, or null.
      type: str
    path:
      description: The drop-in, when it is installed.
      type: str
    installed:
      description: Whether the guard is installed after the run.
      type: bool
    changed:
      description: Whether the run changed the drop-in, its library or removed others.
      type: bool
    removed:
      description: The collection's drop-ins of other units that the run removed.
      type: list
      elements: str
tuned_profile:
  description: What was planned for the collection's tuned child profile, or null when tuned is not in use.
  returned: always
  type: dict
  sample: {path: /etc/tuned/aemops-os-tuning/tuned.conf, parents: [virtual-guest], conflicts: [],
           actions: [wrote ..., activated virtual-guest aemops-os-tuning], not_activated: null}
  contains:
    not_activated:
      description:
        - >-
          Why the child profile was written but not activated, or null when it was activated (or needed no
          activation). Live state wins over the parents the child records. When tuned runs no profile (C(tuned-adm
          off) leaves C(/etc/tuned/active_profile) empty), or tuned is stopped and disabled, nothing is activated
          or started; the read-ahead still persists through udev and LVM, and the run warns
          C(tuned runs no profile: the child profile is written but not activated).
        - A tuned that is only stopped (still enabled) applies its active profiles at its next start, so the child
          is activated for it and this is null.
      returned: when tuned is in use
      type: str
      sample: "tuned runs no profile (tuned-adm off: /etc/tuned/active_profile is empty)"
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
readers:
  description:
    - The processes that hold files on the targets opened at an earlier read-ahead, and what the run did
      about them (in check mode, what it would do). Null with O(state=absent).
    - Each process has C(pid), C(comm), C(unit) (systemd), C(start) (UTC), C(fds), C(mappings) and
      C(mapped_without_fd) (counts on the device), C(count) (files in this list), C(mapped) (how many of them
      it maps) and up to 5 C(files).
    - A process that maps a file on the targets also has C(basis) (V(measured) or V(inferred), what decided
      whether it is stale) and C(measured) (C(kib_per_fault), C(faults), C(seconds), C(read_kib), C(rchar_kib)
      over O(measure_readers) seconds) or C(unmeasured) (V(idle), V(gone), V(unreadable), V(off)). A refreshed
      process measured again after the refresh has C(measured_after), or C(unmeasured_after).
  returned: always
  type: dict
  contains:
    descriptor_only:
      description:
        - Processes whose stale files on the targets are only open through descriptors, never mapped, that the
          run could not refresh (C(why) as in C(needs_restart)). A C(read()) of a small random record is read as
          it is, so the earlier window costs them nothing; reported, never a miss, never restarted.
      type: list
      elements: dict
    fine:
      description: The processes that map a file on the targets and hold none at an earlier read-ahead, with
        C(basis) and their measurement.
      type: list
      elements: dict
    window:
      description: The seconds each mapping reader was measured over (V(0) without a measurement).
      type: float
    refreshed:
      description: Processes whose open files now read with the device's value.
      type: list
      elements: dict
      sample: [{pid: 4242, comm: java, unit: aem.service, start: "2026-12-02T06:00:00Z", fds: 2, mappings: 2,
                mapped_without_fd: 0, count: 2, files: [/srv/aem/repository/segmentstore/data00000a.tar]}]
    needs_restart:
      description:
        - Processes with files at an earlier read-ahead that no refresh reached, so only a restart applies
          the new value, each with C(why) (a list of V(mapping_without_fd), V(no_pidfd_getfd), V(yama),
          V(eperm), V(lsm), V(refresh_off), V(not_named), V(failed)) and a one-line C(reason).
      type: list
      elements: dict
    unscanned:
      description: Processes the scan did not reach before its deadline, each with C(pid) and C(reason).
      type: list
      elements: dict
    scan:
      description: The scan's cost, C(processes), C(descriptors), C(stats) (only on the tuned devices),
        C(by_path) (descriptors matched by path where C(fdinfo) has no C(mnt_id)), C(seconds), C(deadline_s).
      type: dict
    kernel_refresh:
      description: Whether this kernel can take another process's descriptor (C(pidfd_getfd)); false on RHEL 7 and 8.
      type: bool
    boot_rule:
      description: The devices whose readers were judged by the boot rule (no record of this boot).
      type: list
      elements: str
    links:
      description: Target paths that were symbolic links, and what they resolve to.
      type: dict
    notes:
      description: One line per filesystem that needed a word (btrfs's anonymous device numbers).
      type: list
      elements: str
    unreadable:
      description: Processes whose C(/proc) entries could not be read, with the reason.
      type: list
      elements: dict
    record:
      description: The record of the last refresh.
      type: str
      sample: /run/aemops-os-tuning/readers.json
    record_problem:
      description: Why the record was ignored (damaged, not root's), or null.
      type: str
    refresh:
      description: The value of O(refresh_readers).
      type: bool
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    files, read_ahead_plan, readers, readers_measure, readers_refresh, readers_scan, runstate, tuned, udev_rules)

ROOT = '/'


def refresh_readers(module, root, plan, after_kb):
    """(readers report or None, changed, diff entry or None): the running readers of the targets."""
    p = module.params
    if p['state'] != 'present' or not plan['devices']:
        return None, False, None
    kb, scope, changed_names, persisted = readers.targets_of(plan['devices'], p['paths'], after_kb)
    try:
        surveyed = readers.survey(root, kb, scope, changed_names, p['refresh_only'], p['refresh_readers'],
                                  persisted=persisted, config_paths=[p['rules_file']], window=p['measure_readers'])
    except readers_scan.ReadersError as e:
        module.warn('cannot look for the processes that read the targets: %s' % e)
        return None, False, None
    if module.check_mode:
        report = readers.reader_report(surveyed)
    else:
        done = readers_refresh.refresh(root, surveyed.plan['refresh'])
        report, warnings = readers.report_and_record(root, surveyed, done)
        readers.measure_after(root, report, surveyed)
        for warning in warnings:
            module.warn(warning)
    for warning in readers.warnings_for(report):
        module.warn(warning)
    return report, bool(report['refreshed']), readers.diff_entry(surveyed, report) if module._diff else None


def run(module, snap):
    """The run on ``snap``, the host model (read_ahead_plan.ReadAheadHost), frozen until the plan is made."""
    p = module.params
    try:
        p['read_ahead_kb'] = read_ahead_plan.strict_kb(p['read_ahead_kb'])
    except ValueError as e:
        module.fail_json(msg=str(e))
    try:
        kb, warnings = read_ahead_plan.validate(p)
    except read_ahead_plan.PlanError as e:
        for warning in e.warnings:
            module.warn(warning)
        module.fail_json(msg=str(e), **e.extra)
    # The devices' read-ahead locks (a sweep's too): held from the plan to the read-back.
    with read_ahead_plan.device_locks(snap, p, module.check_mode):
        return _run_locked(module, snap, p, kb, warnings)


def _run_locked(module, snap, p, kb, warnings):
    try:
        plan = read_ahead_plan.plan(snap, p, module.check_mode, kb, warnings)
    except read_ahead_plan.PlanError as e:
        for warning in e.warnings:
            module.warn(warning)
        module.fail_json(msg=str(e), **e.extra)
    # Planned from one state of the host, each source read once; what the run changes is read again from here on.
    snap.thaw()
    for warning in plan['warnings']:
        module.warn(warning)
    changed = plan['changed']
    after_kb = None
    tuned_actions = []
    if not module.check_mode:
        try:
            applied = read_ahead_plan.apply(plan, module.run_command, module.get_bin_path,
                                            lambda path, text: files.atomic_write(path, text, 0o644, module=module),
                                            module.warn)
        except read_ahead_plan.ApplyError as e:
            module.fail_json(msg=str(e), **e.extra)
        changed, after_kb, tuned_actions = applied['changed'], applied['after_kb'], applied['tuned_actions']
    for warning in plan['final_warnings']:
        module.warn(warning)
    tuned_profile = tuned.plan_summary(plan['tuned_plan'], plan['tuned_changed'], tuned_actions)
    result = {'changed': changed, 'devices': read_ahead_plan.device_results(plan, after_kb),
              'rules_file': p['rules_file'], 'skipped_targets': plan['skipped'], 'tuned_profile': tuned_profile,
              'start_guard': read_ahead_plan.guard_result(plan['guard'])}
    if module._diff:
        result['diff'] = read_ahead_plan.diff(plan)
    return result, plan, after_kb


def with_readers(module, root, ran):
    """The run's result with its running readers refreshed: after the locks are released, so that no lock of the
    collection is held while other processes' files are scanned. The read-ahead is set by then: a reader step that
    fails on a file it cannot use is a warning, and the result is still returned."""
    result, plan, after_kb = ran
    try:
        reader_report, refreshed, reader_diff = refresh_readers(module, root, plan, after_kb)
    except (IOError, OSError, runstate.FileError) as e:
        module.warn('readers: the running readers were not handled (%s); the read-ahead was set as reported'
                    % (files.describe_os_error(e) if isinstance(e, (IOError, OSError)) else e))
        reader_report, refreshed, reader_diff = None, False, None
    result['changed'] = result['changed'] or refreshed
    result['readers'] = reader_report
    if reader_diff:
        result['diff'].append(reader_diff)
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
            refresh_readers=dict(type='bool', default=True),
            refresh_only=dict(type='list', elements='str', default=[]),
            measure_readers=dict(type='int', default=3),
            aem_service=dict(type='str'),
        ),
        supports_check_mode=True,
    )
    try:
        files.check_path_form(module.params['rules_file'], 'rules_file')
    except files.FileError as e:
        module.fail_json(msg=str(e))
    problem = readers_measure.window_problem(module.params['measure_readers'])
    if problem:
        module.fail_json(msg='measure_readers: %s; nothing was changed' % problem)
    # One lock per owned file, taken in a fixed order: the rules file and the tuned child
    # profile are read, planned and written by one run at a time. Check mode writes nothing
    # (and the files are replaced atomically, so it never reads half a file): it takes none.
    snap = read_ahead_plan.ReadAheadHost(ROOT, module.run_command, module.get_bin_path, read_only=True)
    owned = [] if module.check_mode else [module.params['rules_file'], tuned.child_profile_path(snap)]
    try:
        with files.locked_all(owned, ROOT):
            ran = run(module, snap)
    except files.FileError as e:
        module.fail_json(msg=str(e))
    module.exit_json(**with_readers(module, snap.root, ran))


if __name__ == '__main__':
    main()
