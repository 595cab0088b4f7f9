#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The documentation of the action plugin plugins/action/aem_reports.py, which runs on the controller; there is no
# module to run on a host.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: aem_reports
short_description: Write the aem_tuning role's reports on the controller from the hosts' results
version_added: 0.2.0
description:
  - Renders, on the controller and in one step for the play's hosts, each host's C(report.md) (and C(sweep.png),
    C(before.json), C(after.json)) and the fleet's C(summary.md) and C(summary.json) under O(directory), from each
    host's C(aem_tuning_result) (the role's result, schema 2 or 3 of the collection's C(docs/result.md)).
  - The results and facts are read from the play's host variables in the controller's memory; they never go into the
    task's arguments or result, a command line, stdin or a file other than the reports, which the job events would
    keep.
  - Each file is written through a temporary file in its directory, renamed into place. Nothing else under
    O(directory) is read; a file from an earlier run is replaced.
  - The C(aem_tuning) role runs it (its C(report) and C(summary) task files); it reads the role's own host variables.
author:
  - aemops.os_tuning contributors (@aemops)
options:
  directory:
    description:
      - The directory on the controller that receives C(summary.md), C(summary.json) and one directory per host.
        It is created when missing.
    type: path
    required: true
  source:
    description:
      - V(play) reads, for every host of the play, its C(aem_tuning_result) and the full facts the result does not
        carry (the role's C(__aem_tuning_before), C(__aem_tuning_after) and the sweep's evidence); the hosts of the
        current batch (C(ansible_play_batch)) get their own files, and a result set by another play is left out of
        the summary.
      - V(cache) reads each host's cached C(ansible_facts.aem_tuning_result) (a fact cache, whichever job ran the
        role on the host), for the fleet summary; see O(host_reports).
    type: str
    default: play
    choices: [play, cache]
  host_reports:
    description:
      - With O(source=cache), also write each host's C(report.md) (and C(sweep.png)) from its result alone.
    type: bool
    default: false
extends_documentation_fragment:
  - aemops.os_tuning.attributes
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on
      the controller.
    support: full
  check_mode:
    support: none
    details: Check mode writes no report (the task is skipped).
  diff_mode:
    support: none
  platform:
    support: full
    platforms: posix
    details: Runs on the controller only, without a connection to the hosts.
notes:
  - Runs on the controller's Python. C(sweep.png) needs matplotlib there; without it the report says why there is no
    chart, and its table has the same numbers.
'''

EXAMPLES = r'''
- name: Write the reports for the play's hosts
  aemops.os_tuning.aem_reports:
    directory: "{{ playbook_dir }}/reports"
  run_once: true

- name: Write the fleet summary from the fact cache
  aemops.os_tuning.aem_reports:
    directory: /srv/reports/fleet
    source: cache
  run_once: true
'''

RETURN = r'''
written:
  description: The files written, as paths on the controller.
  returned: success
  type: list
  elements: str
  sample: [/srv/reports/aem1/report.md, /srv/reports/summary.md, /srv/reports/summary.json]
charts:
  description: Per host with sweep results, the C(sweep.png) written or why none was drawn.
  returned: success
  type: dict
  sample: {aem1: /srv/reports/aem1/sweep.png}
hosts:
  description: How many hosts the play has (C(ansible_play_hosts_all)).
  returned: success
  type: int
  sample: 3
with_result:
  description: How many of them have a result (a cached one with O(source=cache)).
  returned: success
  type: int
  sample: 2
msg:
  description: Where the summary is and how many hosts have a result; in check mode, that no report was written.
  returned: always
  type: str
  sample: "/srv/reports/summary.md and summary.json: 2 of 3 hosts with a cached result"
'''
