#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: textfile_metrics
short_description: Write the host's read-ahead and THP drift as a Prometheus textfile-collector file
version_added: 0.2.0
description:
  - Turns what M(aemops.os_tuning.tuning_facts) returned (C(ansible_facts.os_tuning), with its C(compliance)) into
    the Prometheus text exposition format and writes it as O(directory)/O(name), for node_exporter's textfile
    collector (C(--collector.textfile.directory)). node_exporter has no read-ahead metric of its own.
  - "Per device: the read-ahead now (C(aemops_os_tuning_read_ahead_bytes)), the read-ahead wanted for the devices
    the run tunes (C(aemops_os_tuning_read_ahead_wanted_bytes)), what set it (C(aemops_os_tuning_read_ahead_source_info)),
    the targets that name it (C(aemops_os_tuning_target_info)). Per host: THP (C(aemops_os_tuning_thp_info)),
    C(aemops_os_tuning_compliant), C(aemops_os_tuning_misses) (and C(_misses_by_kind)), C(_run_failed),
    C(_fact_errors), C(_stale_readers), C(_run_info) and C(aemops_os_tuning_last_run_timestamp_seconds)."
  - "With O(aem_service), AEM's own read amplification: C(aemops_os_tuning_aem_read_bytes_per_fault), the largest
    bytes read per major page fault over the processes of that unit whose faults were measured (the C(measured)
    of their entries in C(readers)); absent when none was."
  - "Per EBS volume whose NVMe log page 0xD0 was read (C(ebs) of M(aemops.os_tuning.tuning_facts)), labelled by
    C(device) and C(volume_id), the volume's own counters since it was attached, as Prometheus counters: the seconds
    at the volume's and the instance's caps (C(aemops_os_tuning_ebs_volume_iops_exceeded_seconds_total),
    C(_ebs_volume_throughput_exceeded_seconds_total), C(_ebs_instance_iops_exceeded_seconds_total),
    C(_ebs_instance_throughput_exceeded_seconds_total)), C(_ebs_read_ops_total), C(_ebs_write_ops_total),
    C(_ebs_read_bytes_total), C(_ebs_written_bytes_total), C(_ebs_read_seconds_total) and
    C(_ebs_write_seconds_total). A dashboard shows their rate."
  - The file is written atomically (a temporary file in the directory, renamed over the target) with mode 0644,
    owned by root, under the collection's lock for the file.
  - Owned-file rules. The directory must exist and be a real directory (not a symbolic link), owned by root and
    not writable by group or others, and so must the directories above it (a sticky one, such as C(/tmp),
    excepted). The file must be absent, or a regular file with one link, owned by root, not writable by group or
    others, and written by this module (its first line is the collection's managed header). Anything else (a
    symbolic link, a FIFO, a hard link, another user's file, another tool's file) is refused with a message
    naming it and the fix; it is never opened, followed or replaced.
  - The timestamp changes on every run, and the file is rewritten on every run, so that it tells when the host
    was last looked at. C(changed) is true only when the file is new, a value other than the timestamp or an EBS
    counter differs, or its mode or owner differ; a run that finds the same state reports C(changed=false).
author:
  - aemops.os_tuning contributors (@aemops)
options:
  directory:
    description:
      - The directory node_exporter reads (its C(--collector.textfile.directory)), for example
        C(/var/lib/node_exporter/textfile_collector). It must exist; it is not created.
    type: path
    required: true
  name:
    description:
      - The file name in O(directory). node_exporter reads only names that end in C(.prom).
    type: str
    default: aemops_os_tuning.prom
  facts:
    description:
      - What M(aemops.os_tuning.tuning_facts) returned as C(ansible_facts.os_tuning), gathered with an C(intent)
        so that it holds C(plan) and C(compliance) (the C(aem_tuning) role passes its facts from after the change).
      - Without C(compliance), C(aemops_os_tuning_compliant) and C(aemops_os_tuning_misses) are left out.
    type: dict
    required: true
  read_ahead_kb:
    description:
      - The read-ahead in KiB the run wants for the devices it tunes (C(aemops_os_tuning_read_ahead_wanted_bytes) is
        it in bytes).
      - Null, V(auto) (no sweep result yet) or a backout (O(run_state=absent)) leave the wanted values out.
    type: raw
  error:
    description:
      - The run's first error (the role's), or empty. An error makes C(aemops_os_tuning_compliant) 0 and
        C(aemops_os_tuning_run_failed) 1.
    type: str
    default: ''
  run_mode:
    description: The role's mode, for the C(mode) label of C(aemops_os_tuning_run_info).
    type: str
    choices: [apply, audit]
  run_state:
    description: The role's state, for the C(state) label of C(aemops_os_tuning_run_info).
    type: str
    choices: [present, absent]
    default: present
  aem_service:
    description:
      - AEM's systemd unit, with or without C(.service) (the C(aem_tuning) role's C(aem_tuning_aem_service)). The
        reader entries of that unit (C(stale), C(needs_restart), C(fine) of C(readers) in O(facts)) whose
        C(measured) holds C(kib_per_fault) give C(aemops_os_tuning_aem_read_bytes_per_fault).
      - Empty (the default) leaves that metric out.
    type: str
    default: ''
notes:
  - Runs on the target's Python 2.7 (RHEL 7), 3.6 (RHEL 8 platform-python) and newer.
  - Read-ahead is in bytes (KiB x 1024), the base unit Prometheus names want; C(promtool check metrics) reports a
    C(_kb) suffix as an abbreviated unit.
  - Label values are escaped as the text format wants (backslash, double quote, line feed); samples are sorted, so
    the same state gives the same file but for the timestamp line.
  - Needs root (C(become=true)) to write the file and take its lock in C(/run/aemops-os-tuning).
seealso:
  - module: aemops.os_tuning.tuning_facts
  - name: Prometheus text exposition format
    description: The format of the file.
    link: https://prometheus.io/docs/instrumenting/exposition_formats/
  - name: node_exporter textfile collector
    description: How node_exporter reads the file.
    link: https://github.com/prometheus/node_exporter#textfile-collector
extends_documentation_fragment:
  - aemops.os_tuning.attributes
attributes:
  check_mode:
    details: Nothing is written; C(changed) says whether a run would change a value.
'''

EXAMPLES = r'''
- name: Gather the facts and the misses
  aemops.os_tuning.tuning_facts:
    intent:
      read_ahead_kb: 32
      paths: [/opt/aem/crx-quickstart/repository]
      thp: never
  register: tuning

- name: Write them for node_exporter
  aemops.os_tuning.textfile_metrics:
    directory: /var/lib/node_exporter/textfile_collector
    facts: "{{ tuning['ansible_facts']['os_tuning'] }}"
    read_ahead_kb: 32
    run_mode: audit
  become: true
'''

RETURN = r'''
path:
  description: The metrics file.
  returned: always
  type: str
  sample: /var/lib/node_exporter/textfile_collector/aemops_os_tuning.prom
written:
  description: Whether the file was written (every run outside check mode whose content differs, the timestamp included).
  returned: always
  type: bool
  sample: true
content:
  description: The metrics, as written (or, in check mode, as they would be written).
  returned: always
  type: str
  sample: |
    # Managed by aemops.os_tuning (textfile_metrics module). Do not edit: the next run rewrites this file.
    # Read-ahead and THP drift for node_exporter's textfile collector (--collector.textfile.directory).
    # HELP aemops_os_tuning_last_run_timestamp_seconds Time of the last run of aemops.os_tuning on this host (Unix time, the host's clock).
    # TYPE aemops_os_tuning_last_run_timestamp_seconds gauge
    aemops_os_tuning_last_run_timestamp_seconds 1764684000.25
    # HELP aemops_os_tuning_compliant 1 when the last run found the host as wanted (no misses, no error), else 0.
    # TYPE aemops_os_tuning_compliant gauge
    aemops_os_tuning_compliant 1
    # HELP aemops_os_tuning_read_ahead_bytes Read-ahead of the block device in bytes, as the kernel has it now (/sys/block/<device>/queue/read_ahead_kb x 1024).
    # TYPE aemops_os_tuning_read_ahead_bytes gauge
    aemops_os_tuning_read_ahead_bytes{device="nvme1n1"} 32768
metrics:
  description: The names of the metric families in the file, in file order.
  returned: always
  type: list
  elements: str
  sample: [aemops_os_tuning_last_run_timestamp_seconds, aemops_os_tuning_compliant, aemops_os_tuning_read_ahead_bytes]
'''

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.aemops.os_tuning.plugins.module_utils import files, metrics

ROOT = '/'


def run(module, root, now=None):
    p = module.params
    families = metrics.samples(p['facts'], time.time() if now is None else now, read_ahead_kb=p['read_ahead_kb'],
                               error=p['error'] or '', mode=p['run_mode'], state=p['run_state'],
                               aem_service=p['aem_service'] or '')
    content = metrics.render(families)
    try:
        outcome = metrics.publish(root, p['directory'], p['name'], content, check_mode=module.check_mode,
                                  module=module)
    except metrics.MetricsError as e:
        module.fail_json(msg='nothing was changed: %s' % to_native(e), changed=False)
    result = {'changed': outcome['changed'], 'path': outcome['path'], 'written': outcome['written'],
              'content': content, 'metrics': [n for n in metrics.NAMES if families.get(n)]}
    if module._diff:
        result['diff'] = files.diff_entry(outcome['path'], outcome['before'], content)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directory=dict(type='path', required=True),
            name=dict(type='str', default=metrics.DEFAULT_NAME),
            facts=dict(type='dict', required=True),
            read_ahead_kb=dict(type='raw'),
            error=dict(type='str', default=''),
            run_mode=dict(type='str', choices=['apply', 'audit']),
            run_state=dict(type='str', choices=['present', 'absent'], default='present'),
            aem_service=dict(type='str', default=''),
        ),
        supports_check_mode=True,
    )
    module.exit_json(**run(module, ROOT))


if __name__ == '__main__':
    main()
