# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The role is glue: it decides nothing in Jinja (issue 38).

The decisions are made in Python (tuning_facts' plan; the role's filters, plugins/plugin_utils/role_result.py), and
the task files pass values. Three checks hold the line:

- no task file or template decides with a regular expression on a text (a miss's message, a process's name): the
  data carries what a decision needs (a miss's ``unit`` and ``deferred``);
- the Jinja share of the task files: the characters inside ``{{ }}`` and ``{% %}`` over every non-blank character
  of the non-comment lines of ``roles/aem_tuning/tasks/*.yml`` (56% before issue 38). It may only go down;
- verify.yml, the result's step, reads as a contents list (under 80 lines).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest

ROLE = os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, os.pardir, os.pardir, 'roles', 'aem_tuning')
TASKS = os.path.join(ROLE, 'tasks')
TEMPLATES = os.path.join(ROLE, 'templates')
# Deciding by a pattern on text: Jinja's regex filters and the match/search tests (as tests, or by name in
# select/reject/selectattr/rejectattr).
REGEX = re.compile(r"regex_(search|replace|findall)|\bis\s+(not\s+)?(match|search)\b|['\"](match|search)['\"]")
JINJA = re.compile(r'\{\{.*?\}\}|\{%.*?%\}', re.S)
# Measured at the commit that set it; lower it as the role's Jinja goes down (the aim is 20%).
JINJA_CEILING = 0.199


def task_files():
    return sorted(os.path.join(TASKS, n) for n in os.listdir(TASKS) if n.endswith('.yml'))


def jinja_share(paths):
    """(Jinja characters, all characters): non-blank characters of the non-comment lines."""
    jinja = total = 0
    for path in paths:
        with open(path) as f:
            text = ''.join(line for line in f if line.strip() and not line.strip().startswith('#'))
        total += len(re.sub(r'\s', '', text))
        jinja += sum(len(re.sub(r'\s', '', m)) for m in JINJA.findall(text))
    return jinja, total


def template_files():
    """The role's templates, if it has any (its summaries are built in Python: plugin_utils/aem_reports.py)."""
    if not os.path.isdir(TEMPLATES):
        return []
    return sorted(os.path.join(TEMPLATES, n) for n in os.listdir(TEMPLATES))


@pytest.mark.parametrize('path', task_files() + template_files())
def test_no_task_file_or_template_decides_with_a_regex_on_text(path):
    with open(path) as f:
        found = ['%d: %s' % (n, line.strip()) for n, line in enumerate(f, 1)
                 if not line.strip().startswith('#') and REGEX.search(line)]
    assert found == []


def test_the_regex_check_sees_the_old_restart_later_filter():
    # The filter issue 38 removed from verify.yml and comply.yml.
    assert REGEX.search("| selectattr('subject', 'search', ', ' ~ unit ~ '\\)$')")
    assert REGEX.search("| reject('search', '^(' ~ deferred | join('|') ~ '): ')")
    assert REGEX.search("aem_tuning_aem_service | regex_replace('\\.service$', '')")
    assert not REGEX.search("when: aem_tuning_result.misses_failing_count == 0")


def test_the_jinja_share_of_the_task_files_only_goes_down():
    jinja, total = jinja_share(task_files())
    share = float(jinja) / total
    print('Jinja: %d of %d characters (%.1f%%)' % (jinja, total, 100 * share))
    assert share <= JINJA_CEILING


def test_every_record_the_steps_lookup_reads_starts_empty_in_before_yml():
    # The lookup aemops.os_tuning.aem_tuning reads every step's record by name (role_result.STEPS): one that a run
    # never set (a failure before its task) would be undefined, or an earlier run's in the same play.
    from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result
    with open(os.path.join(TASKS, 'before.yml')) as f:
        text = f.read()
    start = text.index('- name: Start without a sweep result')
    reset = re.findall(r'^    (__aem_tuning_\w+):', text[start:text.index('\n- name:', start + 1)], re.M)
    assert sorted('__aem_tuning_' + name for name in role_result.STEPS) == sorted(reset)


def test_every_record_the_steps_lookup_reads_is_set_by_a_task():
    # A register or set_fact under another name would leave the record empty (before.yml's reset) without an error.
    from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result
    text = ''
    for path in task_files():
        with open(path) as f:
            text += f.read()
    start = text.index('- name: Start without a sweep result')
    text = text[:start] + text[text.index('\n- name:', start + 1):]
    unset = [name for name in role_result.STEPS
             if not re.search(r'(register:\s*__aem_tuning_%s\b|^\s+__aem_tuning_%s:\s*\S)' % (name, name), text, re.M)]
    assert unset == []


def test_verify_reads_as_a_contents_list():
    with open(os.path.join(TASKS, 'verify.yml')) as f:
        assert len(f.readlines()) < 80
