#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: read_ahead_sweep
short_description: Measure candidate read-ahead values on the live device and recommend one
version_added: 0.2.0
description:
  - For each value of O(sweep), sets the C(read_ahead_kb) of the device that governs O(path) (the C(dm-N) device
    for an LVM volume, the whole disk for a partition; the device M(aemops.os_tuning.io_probe) reports), and
    measures on a scratch file of O(size_mb) in O(path) (random data, unlinked at once, as in
    M(aemops.os_tuning.io_probe))
    the random side, O(readers) threads reading random 8, 12 and 16 KiB records through one shared memory mapping
    of the file for O(duration) seconds as Oak TarMK's threads do (reads/s, latency p50 and p99, the device's
    bytes, I/Os, MiB/s and IOPS, the read amplification), and the sequential side, a read of the cold file from
    its start in O(sequential_block_kb) reads for at most O(duration) seconds, as a backup, a tar compaction or
    an index rebuild reads (MiB/s).
  - Before each phase the file's pages, and only them, are evicted with C(posix_fadvise(POSIX_FADV_DONTNEED)).
    The global page cache is never dropped. The random reads go in rounds that pull at most 25% of the file at
    the value measured; when a round ends before the time is up, the file is evicted again and the next round
    starts cold (C(rounds) in RV(results)), so that read-ahead, not the file size, bounds the amplification.
  - Recommends the largest value whose random reads/s stay within O(tolerance_pct) (5%) of the best measured, so that
    sequential work keeps the largest window that does not cost the random reads, which stay bound by the
    volume's IOPS and not by its throughput. RV(why) names the numbers, with the volume's caps from
    O(volume_type).
  - B(Touches the live device) for about O(sweep) times 2 x O(duration) seconds plus the time to write the file.
    The device's original value is recorded first and restored on every way out; see the notes for how a run
    left half-done is recovered. Run it with AEM stopped or idle; other I/O on the device makes the figures noisy
    (C(noisy) in RV(results)) and noisy values are left out of the recommendation while a clean one remains.
  - Returns C(changed=false) as the device ends where it started; C(changed=true) only when it restored the value
    a killed earlier run left behind, or when the record in O(record) changed.
  - With O(record), records what it measured and chose in that file for later runs (RV(evidence)), as the
    M(aemops.os_tuning.tuning_facts) module reads it back.
author:
  - aemops.os_tuning contributors (@aemops)
options:
  path:
    description:
      - An existing, writable directory on the filesystem to measure, for example the AEM segment store. The
        scratch file is created here.
    type: path
    required: true
  sweep:
    description:
      - The C(read_ahead_kb) values to measure, in this order. Multiples of the page size (4 KiB on x86_64) from 0
        to 65536, each once, at most 32.
      - Not given, V([4096, 1024, 256, 128, 64, 32, 16, 8]) with the values below the page size of the host's kernel
        left out, so that each is a page multiple (V([4096, 1024, 256, 128, 64]) on a 64 KiB page kernel, RHEL 9's
        aarch64 C(kernel-64k) and RHEL 8 on aarch64).
    type: list
    elements: int
  readers:
    description:
      - Concurrent reader threads of the random phase, 1 to 64.
    type: int
    default: 4
  duration:
    description:
      - Seconds of each phase (random, sequential) per value, at least 1.
    type: int
    default: 5
  size_mb:
    description:
      - Size of the scratch file in MiB; the filesystem needs this plus 10% free. It must hold 4 reads at the
        largest value of O(sweep) within 25% of the file (16 MiB at 4096 KiB). Larger files allow more random reads
        at large values. Writing it costs the device O(size_mb) once.
    type: int
    default: 1024
  sequential_block_kb:
    description:
      - Size of each C(read(2)) of the sequential phase in KiB, a multiple of 4. Small, so that read-ahead and not
        the request size decides how much the device reads at once (the kernel may read up to the request size).
    type: int
    default: 8
  timeout:
    description:
      - Seconds for the whole sweep, at least the number of values times O(duration). When it is up the sweep
        stops, restores the device and fails with the values measured so far in RV(results).
    type: int
    default: 900
  seed:
    description:
      - Seed of the random offsets; value number N of the sweep uses O(seed) + N.
    type: int
    default: 4242
  volume_type:
    description:
      - The volume's type, for its caps in RV(caps) and RV(why) (AWS, Amazon EBS User Guide, "Amazon EBS volume
        types", and the EC2 ModifyVolume limits). A given O(iops) or O(throughput_mibps) outside what a volume of
        the type can have is refused before anything changes; use V(custom) for an emulated or other device.
      - V(gp3) 3,000 IOPS and 125 MiB/s unless provisioned higher (3,000 to 80,000 IOPS and 125 to 2,000 MiB/s;
        give O(iops) and O(throughput_mibps)).
      - V(gp2) 3 IOPS per GiB, at least 100, at most 16,000, bursting to 3,000 IOPS below 1,000 GiB while I/O
        credits last; 128 MiB/s up to 170 GiB, 250 MiB/s above (from 334 GiB without burst credits).
        Needs O(volume_size_gb).
      - V(io1) the provisioned O(iops) (100 to 64,000, at most 50 per GiB), up to 1,000 MiB/s.
      - V(io2) (io2 Block Express) the provisioned O(iops) (100 to 256,000, at most 1,000 per GiB), up to
        4,000 MiB/s.
      - V(st1) up to 500 IOPS (of up to 1 MiB each) and 500 MiB/s, bursting at 250 MiB/s per TiB of
        O(volume_size_gb); V(sc1) up to 250 IOPS and 250 MiB/s, 80 MiB/s per TiB. Without O(volume_size_gb), the
        type's maximum.
      - V(custom) the given O(iops) and O(throughput_mibps), for any other device or an emulated cap.
    type: str
    choices: [gp2, gp3, io1, io2, st1, sc1, custom]
    default: gp3
  volume_size_gb:
    description:
      - Size of a V(gp2), V(st1) or V(sc1) volume in GiB, from which its caps follow.
    type: int
  iops:
    description:
      - The volume's IOPS cap, overriding the type's default; required for V(io1), V(io2) and V(custom).
    type: int
  throughput_mibps:
    description:
      - The volume's throughput cap in MiB/s, overriding the type's default; required for V(custom).
    type: float
  tolerance_pct:
    description:
      - How far below the best random reads/s, in percent, a larger value may be and still be recommended.
    type: float
    default: 5.0
  timeline_interval:
    description:
      - Seconds between samples of the device's read MiB/s during each random phase (C(timeline) in RV(results)),
        from its C(/sys/block/<device>/stat) sectors read, by a thread apart from the readers. V(0) takes no
        samples. Otherwise from 0.1 to O(duration).
      - Shows whether the device runs flat at its throughput cap (the plateau of a large read-ahead under a
        volume's MiB/s cap) or below it.
    type: float
    default: 0
  record:
    description:
      - Where to record the result for later runs, for example V(/etc/ansible/facts.d/aem_tuning_sweep.fact), the
        local fact the C(aem_tuning) role gives, which M(aemops.os_tuning.tuning_facts) reads back to tell whether
        the recorded value still holds (the same settings, path and device).
      - After a sweep that recommends a value, the record (RV(evidence)) is written there atomically as JSON
        (sorted keys, mode 0644, owned by root), unless the file holds the same already. A failed sweep leaves
        an earlier record as it is.
      - Checked before the sweep touches anything, and refused with nothing changed, unless its directory exists
        and is a real directory (not a symbolic link) owned by root and not writable by group or others, and the
        path holds nothing or a regular file with one link owned by root.
      - Not given, nothing is recorded. Ignored with O(recover=true).
    type: path
  recover:
    description:
      - Only recover. Restore the C(read_ahead_kb) a killed sweep left on the device of O(path) from its state
        file, and measure nothing. A normal run does this first anyway.
    type: bool
    default: false
notes:
  - B(How a run left half-done is recovered.) Before the first change the sweep takes an exclusive C(flock) on
    the device's read-ahead lock C(/run/aemops-os-tuning/read-ahead-<major>-<minor>.lock), the lock the
    M(aemops.os_tuning.read_ahead) module takes too (another sweep of the device is refused while it is held; a
    read_ahead run waits for the sweep to end), and writes
    C(/run/aemops-os-tuning/read-ahead-sweep-<device>-<id>.json) atomically (temporary file, fsync, rename), where
    C(<id>) is derived from the device's stable identity (the one its udev rule matches, the NVMe serial, C(DM_UUID) or
    a loop device's backing file), with the original value, that identity, the pid and the boot id. The directory
    (0700 root) and every file in it are checked before use; see the README, "Runtime state". On success, on
    failure, on timeout, on SIGTERM, SIGHUP and SIGINT the original value is written back in a C(finally) and read
    back, and only then the state file is removed. SIGKILL cannot be caught; it leaves the state file, and the
    kernel releases the dead process's lock. The next sweep of that device, or a call with O(recover=true), finds
    the state file with the lock free, restores the recorded value and removes the file (RV(recovered)). Another
    device that gets the same name later never finds it. A state file from an earlier boot is removed without
    writing. A state file that is damaged, not a regular file owned by root, records another device, or records
    a value that is not a whole multiple of the page size from 0 to 65536 KiB is reported and left alone, never
    applied; the sweep and the recovery fail naming it and the fix. If a restore itself fails the state file stays
    and the module fails naming the value to set by hand.
  - Check mode writes nothing, not even the lock, the state file or the record. It checks the path, the device,
    its writability, the free space, the options and the record's path, and says what the sweep, a recovery and
    the record would do.
  - Needs root (C(become=true)) to write C(read_ahead_kb); fails before any change without it, or where C(/sys) is
    read-only (a container).
  - The reader threads copy from the mapping with C(ctypes.memmove), which releases the Python GIL, so their page
    faults run concurrently. Where libc cannot be reached through ctypes the reads use Python's mmap and are
    serialised, and the module warns.
  - Runs on the target's Python 2.7 (RHEL 7), 3.6 (RHEL 8 platform-python) and newer.
extends_documentation_fragment:
  - aemops.os_tuning.attributes
attributes:
  diff_mode:
    support: none
seealso:
  - module: aemops.os_tuning.io_probe
  - module: aemops.os_tuning.read_ahead
  - name: Amazon EBS volume types
    description: The IOPS and throughput of gp2, gp3, io1, io2, st1 and sc1 volumes (Amazon EBS User Guide).
    link: https://docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html
'''

EXAMPLES = r'''
- name: Sweep read-ahead on the segment store's device (AEM stopped), gp3 baseline caps
  aemops.os_tuning.read_ahead_sweep:
    path: /opt/aem/crx-quickstart/repository/segmentstore
  become: true
  register: sweep

- name: Show the trade-off and the recommendation
  ansible.builtin.debug:
    msg: "{{ sweep.table + [sweep.why] }}"

- name: Apply the recommendation
  aemops.os_tuning.read_ahead:
    paths: [/opt/aem/crx-quickstart/repository]
    read_ahead_kb: "{{ sweep.recommended_kb }}"
  become: true

- name: A shorter sweep on a provisioned io2 volume
  aemops.os_tuning.read_ahead_sweep:
    path: /srv/aem
    sweep: [256, 128, 64, 32, 16]
    readers: 8
    duration: 3
    volume_type: io2
    iops: 16000
  become: true

- name: The device's MiB/s every half second while 8 readers read at 4096 KiB (the preset's value, set and then restored)
  aemops.os_tuning.read_ahead_sweep:
    path: /srv/aem
    sweep: [4096]
    readers: 8
    duration: 20
    timeline_interval: 0.5
  become: true
  register: plateau

- name: After a sweep was killed (SIGKILL, a lost connection), put the original read-ahead back
  aemops.os_tuning.read_ahead_sweep:
    path: /opt/aem/crx-quickstart/repository/segmentstore
    recover: true
  become: true
'''

RETURN = r'''
msg:
  description: In check mode and with O(recover=true), what was or would be done.
  returned: check mode, recover
  type: str
measured:
  description: Whether anything was measured.
  returned: always
  type: bool
directory:
  description: O(path).
  returned: success, not recover
  type: str
device:
  description: The governing device whose C(read_ahead_kb) was swept.
  returned: always
  type: str
  sample: dm-0
stat_device:
  description: The device whose I/O counters were read (a partition counts its own I/O).
  returned: success, not recover
  type: str
mount_point:
  description: Mount point of the filesystem of O(path).
  returned: success, not recover
  type: str
fstype:
  description: Its filesystem type.
  returned: success, not recover
  type: str
original_kb:
  description: The device's C(read_ahead_kb) before the sweep, recorded before the first change.
  returned: success, not recover
  type: int
  sample: 4096
restored:
  description: Whether the original value is back on the device (also returned on failure).
  returned: success, failure after the first change
  type: bool
restored_kb:
  description: The device's C(read_ahead_kb) read back after the restore.
  returned: success and not check mode, not recover
  type: int
recovered:
  description: >-
    What was done with the state file of an earlier run found first: C(action) (C(restore), or C(discard) for a
    file from another boot or device), C(reason), C(original_kb), C(found_kb) (the value it had left) and
    C(changed). Null when there was none.
  returned: always except on failure
  type: dict
sweep:
  description: The values measured, O(sweep) or its default for the page size.
  returned: success, not recover
  type: list
  elements: int
caps:
  description: The volume's caps used, C(type), C(iops), C(mib_s) and C(basis).
  returned: success, not recover
  type: dict
  sample: {type: gp3, iops: 3000, mib_s: 125.0, basis: gp3 baseline}
state_file:
  description: The state file that records the original value while the sweep runs.
  returned: always except on failure
  type: str
  sample: /run/aemops-os-tuning/read-ahead-sweep-dm-0-3f1c2a9b7d5e4c10.json
lock_file:
  description: The device's read-ahead lock file, shared with the read_ahead module.
  returned: success, not recover
  type: str
results:
  description: >-
    One entry per value measured, in sweep order, also on failure (those measured before it). Keys
    C(read_ahead_kb); the random phase C(reads), C(reads_per_s), C(rounds), C(elapsed_s), C(asked_bytes),
    C(device_read_bytes), C(device_read_ios), C(device_mib_s), C(device_iops), C(read_amplification) (device bytes
    per byte asked for), C(page_cache_amplification) (by mincore, noise-free), C(latency) (C(mean_ms), C(p50_ms),
    C(p99_ms), C(max_ms)), C(concurrent), C(noisy), C(noise_reason), C(bound) (C(iops) or C(throughput) when the
    device ran at 90% of that cap, else C(none)); the sequential phase C(seq_bytes), C(seq_elapsed_s),
    C(seq_mib_s), C(seq_device_read_bytes), C(seq_whole_file). With O(timeline_interval) set also C(timeline), a list
    of C([seconds, MiB/s]) pairs, one per interval of the random phase (seconds since it started, at the interval's
    end; the device's read MiB/s in that interval), and C(timeline_interval_s). Where an EBS volume lies beneath
    the device (AWS Nitro, as root), also C(ebs), per volume from its own NVMe log page 0xD0 read before and after
    the random phase, C(volume_id), C(volume_at_cap) and C(instance_at_cap) (whether the volume or the instance sat
    at an IOPS or throughput cap meanwhile) and C(bound), in words (the C(table) line ends with it).
  returned: always
  type: list
  elements: dict
table:
  description: One line per value with the trade-off in numbers.
  returned: success and not check mode, not recover
  type: list
  elements: str
  sample:
    - " 4096 KiB: 31.0 reads/s, amplification 326.1x, device 124.9 MiB/s 250 IOPS, p50 120.1 ms, p99 160.2 ms, sequential 124.8 MiB/s"
    - "   32 KiB: 2950.4 reads/s, amplification 2.7x, device 92.0 MiB/s 2946 IOPS, p50 1.2 ms, p99 3.1 ms, sequential 88.0 MiB/s"
recommended_kb:
  description: The largest value whose random reads/s are within O(tolerance_pct) of the best.
  returned: success and not check mode, not recover
  type: int
  sample: 64
why:
  description: One line naming the numbers behind RV(recommended_kb).
  returned: success and not check mode, not recover
  type: str
  sample: >-
    64 KiB: the largest read-ahead whose random reads/s (2890.0) stay within 5% of the best (2950.4 at 32 KiB,
    threshold 2802.9); sequential 118.0 MiB/s (21.0 at 8 KiB); amplification 5.1x; device 2890 IOPS, 112.4 MiB/s
    against the gp3 caps 3000 IOPS, 125 MiB/s (IOPS-bound).
best_kb:
  description: The value with the most random reads/s.
  returned: success and not check mode, not recover
  type: int
best_reads_per_s:
  description: Its reads/s.
  returned: success and not check mode, not recover
  type: float
threshold_reads_per_s:
  description: The reads/s a value needed to be recommended.
  returned: success and not check mode, not recover
  type: float
within_kb:
  description: The values within the tolerance, largest first.
  returned: success and not check mode, not recover
  type: list
  elements: int
excluded_noisy_kb:
  description: Noisy values left out of the recommendation.
  returned: success and not check mode, not recover
  type: list
  elements: int
elapsed_s:
  description: Seconds the sweep took.
  returned: success and not check mode, not recover
  type: float
timed_out:
  description: Whether the sweep failed because O(timeout) was reached.
  returned: failure
  type: bool
record:
  description: >-
    The record: C(path) (O(record)) and C(changed), whether its file was (or in check mode would be) written: false
    when it held the same record with mode 0644 and owner root already.
  returned: success with O(record), not recover
  type: dict
  sample: {path: /etc/ansible/facts.d/aem_tuning_sweep.fact, changed: true}
evidence:
  description: >-
    What was recorded in O(record): C(source) (V(sweep)), C(taken) (when the sweep started, UTC, as
    C(2026-12-01T10:00:00Z)), C(path) (O(path)), C(device), C(stable_id) (its stable identity, as
    M(aemops.os_tuning.tuning_facts) reports it in C(block_devices), or null), C(original_kb), C(restored_kb),
    C(recommended_kb), C(why), C(caps), C(table), C(sweep), C(readers), C(duration), C(tolerance_pct), C(best_kb),
    C(within_kb), C(excluded_noisy_kb), C(results) (as returned here), and C(knobs), the settings measured with:
    C(values) (the values measured), C(readers), C(duration), C(size_mb), C(tolerance_pct), C(volume_type),
    C(volume_size_gb), C(iops) and C(throughput_mibps) (null where not given or 0).
  returned: success with O(record), not check mode, not recover
  type: dict
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aemops.os_tuning.plugins.module_utils import compliance, ebs, files, probe, sweep, sweep_record

ROOT = '/'


def run(module, root):
    p = module.params
    if p['recover']:
        if module.check_mode:
            return _check_recover(root, p['path'])
        try:
            result = sweep.recover_only(root, p['path'])
        except probe.ProbeError as e:
            module.fail_json(msg=str(e), changed=False)
        result['measured'] = False
        result['results'] = []
        return result
    if p['record']:
        problem = sweep_record.check_target(root, p['record'], check_only=module.check_mode)
        if problem:
            module.fail_json(msg='%s The sweep did not start; nothing was changed.' % problem, changed=False,
                             results=[])
    taken = None
    try:
        caps = sweep.volume_caps(p['volume_type'], p['volume_size_gb'], p['iops'], p['throughput_mibps'])
        the_plan = sweep.plan(root, p['path'], values=p['sweep'], readers=p['readers'], duration=p['duration'],
                              size_mb=p['size_mb'], sequential_block_kb=p['sequential_block_kb'],
                              timeout=p['timeout'], seed=p['seed'], caps=caps, tolerance_pct=p['tolerance_pct'],
                              timeline_interval=p['timeline_interval'])
        if module.check_mode:
            result = sweep.check_mode_result(the_plan)
        else:
            taken = sweep_record.now_iso()
            with sweep.terminate_as_exception():
                result = sweep.run(the_plan)
    except sweep.SweepError as e:
        module.fail_json(msg=str(e), changed=False, results=e.results, restored=e.restored, timed_out=e.timed_out)
    except probe.ProbeError as e:
        module.fail_json(msg=str(e), changed=False, results=[])
    for warning in result.pop('warnings', []):
        module.warn(warning)
    result['directory'] = result.pop('path')
    result.pop('largest_kb', None)
    if p['record']:
        _record(module, root, result, taken)
    return result


def _record(module, root, result, taken):
    """Write the sweep's record to O(record) (check mode: say that it would); fail naming it when it cannot be."""
    path = module.params['record']
    if module.check_mode:
        there = os.path.lexists(files.root_path(root, path))
        result['record'] = {'path': path, 'changed': True}
        result['changed'] = True
        result['msg'] += ' It would record the result in %s (%s).' % (
            path, 'replacing the record there' if there else 'a new file')
        return
    if result.get('recommended_kb') is None:
        return
    evidence = sweep_record.evidence(result, module.params, sweep_record.stable_id(root, result['device']), taken)
    try:
        changed = sweep_record.write(root, path, evidence, module=module)
    except sweep_record.RecordError as e:
        _record_failed(module, result, str(e))
    except (IOError, OSError) as e:
        _record_failed(module, result, 'cannot write %s: %s.' % (path, files.describe_os_error(e)))
    result['record'] = {'path': path, 'changed': changed}
    result['evidence'] = evidence
    result['changed'] = result['changed'] or changed


def _record_failed(module, result, why):
    module.fail_json(msg='the sweep recommends %s KiB (%s was restored to %s KiB), but the record was not written: %s'
                     % (result['recommended_kb'], result['device'], result['restored_kb'], why),
                     changed=result['changed'], results=result['results'], restored=True,
                     recommended_kb=result['recommended_kb'], why=result.get('why'))


def _check_recover(root, path):
    try:
        name = sweep.blockdev.device_for_path(root, path)[0]
    except sweep.blockdev.BlockDeviceError as e:
        raise probe.ProbeError(str(e))
    device = sweep.blockdev.whole_disk(root, name)
    state_path = sweep.state_paths(root, device)[1]
    found = sweep.recover(root, device, state_path, check_mode=True)
    msg = ('no leftover sweep state for %s: nothing to recover.' % device if found is None else
           'would %s the state file %s: %s; check mode changed nothing.' % (found['action'], state_path,
                                                                            found['reason']))
    return {'device': device, 'recovered': found, 'changed': bool(found and found['changed']),
            'state_file': state_path, 'msg': msg, 'measured': False, 'results': []}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            sweep=dict(type='list', elements='int'),
            readers=dict(type='int', default=sweep.DEFAULT_READERS),
            duration=dict(type='int', default=sweep.DEFAULT_DURATION),
            size_mb=dict(type='int', default=sweep.DEFAULT_SIZE_MB),
            sequential_block_kb=dict(type='int', default=sweep.DEFAULT_SEQUENTIAL_BLOCK_KB),
            timeout=dict(type='int', default=compliance.SWEEP_TIMEOUT),
            seed=dict(type='int', default=probe.DEFAULT_SEED),
            volume_type=dict(type='str', choices=list(ebs.CHOICES), default=ebs.DEFAULT_TYPE),
            volume_size_gb=dict(type='int'),
            iops=dict(type='int'),
            throughput_mibps=dict(type='float'),
            tolerance_pct=dict(type='float', default=sweep.DEFAULT_TOLERANCE_PCT),
            timeline_interval=dict(type='float', default=sweep.DEFAULT_TIMELINE_INTERVAL),
            record=dict(type='path'),
            recover=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module, ROOT)
    except probe.ProbeError as e:
        module.fail_json(msg=str(e), changed=False, results=[])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
