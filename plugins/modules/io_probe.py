#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: io_probe
short_description: Measure what block-device read-ahead does to random small reads from memory-mapped files
version_added: 0.1.0
description:
  - Models the access pattern of Oak TarMK, the AEM segment store, random 8-16 KiB reads from large memory-mapped
    files, and measures what the block device under O(path) reads for them. With a large C(read_ahead_kb) every
    page fault makes the kernel read around the faulting page by up to that much, so an 8 KiB record can cost the
    disk 4 MiB. The numbers make a read-ahead change easy to judge before and after.
  - Creates a scratch file C(.aemops-io-probe-<pid>-<random>) of O(size_mb) in O(path), filled with random data
    (not sparse, since holes are not read from the disk, and not compressible) and fsync'ed. The file is unlinked
    right after it is created and used through its open descriptor, so it is gone when the module ends, also on
    failure, on timeout and when the module is killed.
  - Evicts the file's pages, and only them, from the page cache with C(posix_fadvise(POSIX_FADV_DONTNEED)) and
    checks with C(mincore) that they are gone. The global page cache is never dropped.
  - Reads O(reads) records of O(record_kb) at random record-aligned offsets (reproducible with O(seed)) through
    C(mmap) or C(pread), timing each, and reads the I/O counters of the block device that holds the filesystem
    (C(/sys/block/<dev>/stat), or the partition's own) before and after. Reports the bytes the device read, the
    read amplification (device bytes per byte asked for), the bytes per read, the mean, p50 and p99 latency, and
    the C(read_ahead_kb) of the governing device (the C(dm-N) device for an LVM volume, the whole disk for a
    partition).
  - Keeps the workload sparse. O(reads) is lowered so that reads times the larger of read-ahead and O(record_kb)
    stays within 25% of the file, and RV(reads_capped) says why. Otherwise a large read-ahead sweeps the whole
    file and the file size, not read-ahead, bounds the amplification. For example at 4096 KiB read-ahead,
    2000 reads over 256 MiB are lowered to 16, while at 32 KiB all 2000 run.
  - On AWS Nitro, reads each EBS volume's own statistics beneath the device before and after the reads (RV(ebs)),
    whether the volume or the instance sat at an IOPS or throughput cap while the probe read.
  - Detects other readers of the device. What the device read beyond what the scratch file gained in the page
    cache (by C(mincore)) was read for someone else. Where C(mincore) is not available, the device's idle read
    rate, measured for a second before and after the probe, times the probe's duration is the estimate. When
    that is more than 10% of the result, RV(noisy) is true, RV(noise_reason) explains, and the device figures are
    upper bounds, not exact.
  - Always reports C(changed=false), because it leaves nothing behind.
author:
  - aemops.os_tuning contributors (@aemops)
options:
  path:
    description:
      - An existing, writable directory on the filesystem to probe, for example the AEM segment store. The
        scratch file is created here.
      - A path on a filesystem without a block device (tmpfs, NFS, overlayfs) is an error, as there is no device
        read-ahead to measure.
    type: path
    required: true
  size_mb:
    description:
      - Size of the scratch file in MiB. The filesystem needs this plus 10% free.
      - Larger files allow more reads at a large read-ahead (see O(reads)). Writing it costs the device O(size_mb)
        once, which counts against the I/O credits of burstable cloud volumes.
    type: int
    default: 256
  record_kb:
    description:
      - Size of each read in KiB, a multiple of 4. Oak TarMK reads 8-16 KiB records.
    type: int
    default: 8
  reads:
    description:
      - Number of random reads, at least 1. Lowered when reads times the larger of C(read_ahead_kb) and O(record_kb)
        exceeds 25% of O(size_mb); see RV(reads_capped).
    type: int
    default: 2000
  method:
    description:
      - V(mmap) reads through a read-only memory mapping, as Oak TarMK does. Each page fault reads around the
        faulting page by up to C(read_ahead_kb), which is the effect to measure.
      - V(pread) reads with C(pread(2)) (on Python 2.7 C(lseek) and C(read), which the kernel sees alike). The
        kernel recognises random C(read(2)) calls and reads little more than asked, whatever C(read_ahead_kb) is,
        so this serves as a control.
    type: str
    choices: [mmap, pread]
    default: mmap
  timeout:
    description:
      - Seconds, at least 1. The random reads stop when this time is up, and RV(timed_out) is true with the figures
        of the reads done.
      - Writing the scratch file is bounded by the same number of seconds separately, and the module fails, leaving
        nothing behind, when writing takes longer. The idle-rate windows (about a second each) come on top.
    type: int
    default: 120
  seed:
    description:
      - Seed of the random offsets. The same seed gives the same offsets on every Python version, so runs before
        and after a change read the same records.
    type: int
    default: 4242
  ebs_devices:
    description:
      - Other devices (kernel names or C(/dev) paths) whose EBS volumes' own statistics are sampled over the same
        reads (RV(ebs)), besides those beneath O(path). The C(aem_tuning) role passes the devices it tunes.
    type: list
    elements: str
    default: []
notes:
  - Check mode writes and measures nothing. It checks the path, the device and the free space and reports the
    device, the file size and the number of reads after capping.
  - Runs as any user that can write to O(path) and read C(/sys). It needs no root, but AEM's directories usually
    require C(become=true).
  - Run it with AEM stopped or idle for exact figures. Other I/O on the same device is detected and reported as
    noise, not subtracted.
  - Runs on the target's Python 2.7 (RHEL 7), 3.6 (RHEL 8 platform-python) and newer. On 2.7, which lacks
    C(os.posix_fadvise) and C(os.pread), it calls libc's C(posix_fadvise) through ctypes and reads with C(lseek)
    and C(read).
extends_documentation_fragment:
  - aemops.os_tuning.attributes
attributes:
  diff_mode:
    support: none
seealso:
  - module: aemops.os_tuning.read_ahead
  - module: aemops.os_tuning.read_ahead_sweep
    description: Sets each candidate read-ahead in turn, measures random and sequential reads, and recommends one.
  - name: Kernel block layer statistics
    description: The fields of C(/sys/block/<dev>/stat).
    link: https://www.kernel.org/doc/Documentation/block/stat.rst
'''

EXAMPLES = r'''
- name: Measure what read-ahead does to AEM's random reads
  aemops.os_tuning.io_probe:
    path: /opt/aem/crx-quickstart/repository/segmentstore
  become: true
  register: before

- name: Show the result
  ansible.builtin.debug:
    msg: "{{ before.summary }}"

- name: Set 32 KiB read-ahead
  aemops.os_tuning.read_ahead:
    paths: [/opt/aem/crx-quickstart/repository]
    read_ahead_kb: 32
  become: true

- name: Measure again, reading the same records
  aemops.os_tuning.io_probe:
    path: /opt/aem/crx-quickstart/repository/segmentstore
    reads: "{{ before.reads }}"
  become: true
  register: after

- name: Compare
  ansible.builtin.debug:
    msg: >-
      read amplification {{ before.read_amplification }} -> {{ after.read_amplification }},
      p99 {{ before.latency.p99_ms }} ms -> {{ after.latency.p99_ms }} ms

- name: The pread control with 16 KiB records on a larger file
  aemops.os_tuning.io_probe:
    path: /srv/aem
    method: pread
    record_kb: 16
    size_mb: 1024
    timeout: 60
  become: true
'''

RETURN = r'''
summary:
  description: One line with the reads, what the device read, the amplification and the latency. Starts with C(APPROXIMATE) when noisy.
  returned: success and not check mode
  type: str
  sample: >-
    16 random 8 KiB reads by mmap from a 256 MiB file on dm-0 (read_ahead_kb=4096): the device read 62.4 MiB in
    31 I/Os, 499.2x the 128.0 KiB asked for (3.9 MiB per read); latency mean 9.466 ms, p50 8.911 ms, p99 14.020 ms.
msg:
  description: In check mode, what the probe would do.
  returned: check mode
  type: str
measured:
  description: Whether anything was measured (false in check mode).
  returned: always
  type: bool
directory:
  description: The probed directory, O(path).
  returned: always
  type: str
  sample: /opt/aem/crx-quickstart/repository/segmentstore
device:
  description: The governing device, whose C(read_ahead_kb) applies (C(dm-N) for an LVM volume, the whole disk for a partition).
  returned: always
  type: str
  sample: dm-0
stat_device:
  description: The device whose I/O counters were read, the one the filesystem is on (a partition counts only its own I/O).
  returned: always
  type: str
  sample: nvme0n1p1
mount_point:
  description: Mount point of the filesystem that holds O(path).
  returned: always
  type: str
fstype:
  description: Its filesystem type.
  returned: always
  type: str
read_ahead_kb:
  description: The current C(read_ahead_kb) of RV(device).
  returned: always
  type: int
  sample: 4096
method:
  description: O(method).
  returned: always
  type: str
size_mb:
  description: O(size_mb).
  returned: always
  type: int
record_kb:
  description: O(record_kb).
  returned: always
  type: int
seed:
  description: O(seed).
  returned: always
  type: int
timeout:
  description: O(timeout).
  returned: always
  type: int
free_mb:
  description: Free space in MiB on the filesystem before the probe.
  returned: always
  type: int
reads_requested:
  description: O(reads).
  returned: always
  type: int
reads_planned:
  description: The reads to do after the sparse cap.
  returned: always
  type: int
  sample: 16
reads_capped:
  description: Whether O(reads) was lowered to keep the reads within 25% of the file.
  returned: always
  type: bool
reads_capped_reason:
  description: Why, with the O(size_mb) that would allow all reads, or null.
  returned: always
  type: str
stale_scratch_files:
  description: Scratch files of an earlier probe found in O(path), left when a run was killed between creating and unlinking its file.
  returned: always
  type: list
  elements: str
scratch_file:
  description: Path of the scratch file used, gone by the time the module returns.
  returned: success and not check mode
  type: str
  sample: /srv/aem/.aemops-io-probe-4711-9f86d081
scratch_removed:
  description: Whether the scratch file is gone. Always true, as the file is unlinked right after it is created.
  returned: success and not check mode
  type: bool
reads:
  description: The reads done (fewer than RV(reads_planned) when timed out).
  returned: success and not check mode
  type: int
timed_out:
  description: Whether the reads stopped at O(timeout).
  returned: success and not check mode
  type: bool
elapsed_s:
  description: Seconds the reads took.
  returned: success and not check mode
  type: float
eviction:
  description: >-
    How the file's pages were evicted (C(method)), how many stayed in the page cache (C(resident_pages), by mincore),
    and whether that could be checked (C(verified)).
  returned: success and not check mode
  type: dict
  sample: {method: os.posix_fadvise, resident_pages: 0, verified: true}
device_read_ios:
  description: Read I/Os the device completed during the reads.
  returned: success and not check mode
  type: int
device_read_bytes:
  description: Bytes the device read during the reads (read sectors times 512).
  returned: success and not check mode
  type: int
device_read_mb:
  description: The same in MiB.
  returned: success and not check mode
  type: float
device_read_ticks_ms:
  description: Milliseconds the device spent on those reads (the stat file's read ticks).
  returned: success and not check mode
  type: int
device_bytes_per_io:
  description: Average size of a device read I/O in bytes, or null without I/O.
  returned: success and not check mode
  type: float
read_amplification:
  description: Device bytes read divided by the bytes asked for (RV(reads) times O(record_kb)). 1 means no waste.
  returned: success and not check mode
  type: float
  sample: 499.2
bytes_per_read:
  description: >-
    Device bytes read per probe read, over all reads. Reads served from the page cache (pages an earlier read-ahead
    brought in) cannot be told apart, so this is not per faulting read; RV(device_read_ios) counts the device I/Os.
  returned: success and not check mode
  type: float
latency:
  description: Per-read latency in milliseconds, C(mean_ms), C(p50_ms), C(p99_ms) and C(max_ms). Percentiles interpolate between the closest ranks.
  returned: success and not check mode
  type: dict
  sample: {mean_ms: 9.466, p50_ms: 8.911, p99_ms: 14.02, max_ms: 14.2}
page_cache_bytes:
  description: >-
    Bytes of the scratch file in the page cache after the reads (mincore), that is what the reads brought in.
    Other readers of the device do not affect it. Null when mincore is not available.
  returned: success and not check mode
  type: int
page_cache_amplification:
  description: RV(page_cache_bytes) divided by the bytes asked for, a noise-free cross-check of RV(read_amplification).
  returned: success and not check mode
  type: float
noise_bytes_per_s:
  description: The device's read rate while idle, the larger of the windows before and after the probe.
  returned: success and not check mode
  type: float
noise:
  description: >-
    C(before_bytes_per_s) and C(after_bytes_per_s), C(estimate_bytes) (idle rate times the probe's duration) and
    C(unaccounted_bytes) (device bytes beyond what the file gained in the page cache, or null).
  returned: success and not check mode
  type: dict
noisy:
  description: >-
    Whether other I/O makes up more than 10% of the device figures, which are then upper bounds. Decided by
    C(noise.unaccounted_bytes) when known, else by C(noise.estimate_bytes).
  returned: success and not check mode
  type: bool
noise_reason:
  description: Why the measurement is noisy, or null.
  returned: success and not check mode
  type: str
ebs:
  description:
    - Per NVMe namespace beneath the device (an EBS volume on AWS Nitro), what the volume says of itself over the
      reads, from its NVMe log page 0xD0 read (read-only, as root) before the first read and after the device
      settled. Each has C(device), C(volume_id) and either C(rates) or C(reason), one line that starts with
      C(no EBS statistics) (not an EBS volume, no permission, the device's refusal).
    - C(rates) has C(window_s); per minute of the window, the seconds at the volume's throughput and IOPS caps
      (C(volume_tp_s_per_min), C(volume_iops_s_per_min)) and at the instance's EBS caps (C(instance_tp_s_per_min),
      C(instance_iops_s_per_min)); C(read_mib_s), C(read_iops), C(read_latency_mean_us), C(read_latency_p99_us)
      (the upper bound of the volume's histogram bin that holds the 99th percentile); and C(bound), the cap that
      bound, in words (for example C(the volume sat at its throughput cap for 41 of 60 seconds)).
  returned: success and not check mode
  type: dict
  sample:
    nvme1n1:
      device: nvme1n1
      volume_id: vol-0123456789abcdef0
      rates: {window_s: 12.5, volume_tp_s_per_min: 48.0, volume_iops_s_per_min: 0.0, instance_tp_s_per_min: 0.0,
              instance_iops_s_per_min: 0.0, read_mib_s: 250.1, read_iops: 160.2, read_latency_mean_us: 6210.4,
              read_latency_p99_us: 16384, bound: the volume sat at its throughput cap for 10 of 12.5 seconds}
'''

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.aemops.os_tuning.plugins.module_utils import probe

ROOT = '/'


def run(module, root):
    p = module.params
    try:
        the_plan = probe.plan(root, p['path'], size_mb=p['size_mb'], record_kb=p['record_kb'], reads=p['reads'],
                              method=p['method'], timeout=p['timeout'], seed=p['seed'])
        the_plan['ebs_devices'] = p['ebs_devices']
        if module.check_mode:
            result = probe.check_mode_result(the_plan)
        else:
            result = probe.run(the_plan)
    except probe.ProbeError as e:
        module.fail_json(msg=str(e), changed=False)
    except (IOError, OSError) as e:
        module.fail_json(msg='the I/O probe in %s failed: %s. Its scratch file was removed.' % (p['path'], e),
                         changed=False)
    for warning in result.pop('warnings', []):
        module.warn(warning)
    # Not returned as "path": exit_json would add the directory's stat (size, mode, owner...) to the result.
    result['directory'] = result.pop('path')
    result['changed'] = False
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            size_mb=dict(type='int', default=probe.DEFAULT_SIZE_MB),
            record_kb=dict(type='int', default=probe.DEFAULT_RECORD_KB),
            reads=dict(type='int', default=probe.DEFAULT_READS),
            method=dict(type='str', choices=list(probe.METHODS), default='mmap'),
            timeout=dict(type='int', default=probe.DEFAULT_TIMEOUT),
            seed=dict(type='int', default=probe.DEFAULT_SEED),
            ebs_devices=dict(type='list', elements='str', default=[]),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run(module, ROOT))


if __name__ == '__main__':
    main()
