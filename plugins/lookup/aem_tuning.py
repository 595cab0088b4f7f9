# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: aem_tuning
author:
  - aemops.os_tuning contributors (@aemops)
version_added: 0.3.0
short_description: The aem_tuning role's step records and settings, by name, for its filters
description:
  - "For the tasks of the collection's role C(aemops.os_tuning.aem_tuning) only: the variables that the role's
    filters (for example P(aemops.os_tuning.verified#filter)) decide from, gathered by the names that
    C(plugins/plugin_utils/role_result.py) gives them once, so that a task passes one value, not a table of them."
  - It decides nothing itself beyond what follows from the records (the read-ahead the sweep chose, the first run's
    reading, the run's first error); each variable is read as the builtin C(ansible.builtin.vars) lookup
    reads it.
options:
  _terms:
    description:
      - V(steps) - what each step of the role registered or kept, by step name (C(read_ahead), C(thp),
        C(reboot_done), and so on), with the run's C(error) (the first of C(errors)) and the settings as
        C(settings).
      - V(settings) - the role's public variables the decisions read (C(state), C(mode), C(aem_service), and so
        on), the host, the play and check mode.
      - V(record) - for the collection's own tests, once the result is built - every variable that V(steps) reads,
        by variable name, the built result with its verdict, and the controller's ansible-core, as JSON (C(json)),
        with the file to write it to (C(path), in the directory C(__aem_tuning_record_dir)).
    type: list
    elements: str
    choices: [steps, settings, record]
    required: true
notes:
  - "Only for the C(aemops.os_tuning.aem_tuning) role's own tasks: the variable names are the role's internal ones."
'''

EXAMPLES = r'''
- name: The result, from the steps' records and the role's settings they carry (as the role's verify.yml)
  ansible.builtin.set_fact:
    __aem_tuning_verified: "{{ lookup('aemops.os_tuning.aem_tuning', 'steps') | aemops.os_tuning.verified }}"
'''

RETURN = r'''
_raw:
  description: One mapping per term, in the order of the terms.
  type: list
  elements: dict
'''

from ansible.errors import AnsibleError
from ansible.plugins.loader import lookup_loader
from ansible.plugins.lookup import LookupBase

from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        builtin = lookup_loader.get('ansible.builtin.vars', loader=self._loader, templar=self._templar)

        def read(names, default=None):
            return builtin.run(list(names), variables, default=default)

        out = []
        for term in terms:
            if term not in role_result.GATHER:
                raise AnsibleError('aemops.os_tuning.aem_tuning: %r is not one of %s' % (term, ', '.join(sorted(role_result.GATHER))))
            out.append(role_result.GATHER[term](read))
        return out
