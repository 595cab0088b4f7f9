# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/readers.py: one run composed of the scan, the verdict, the refresh and the record."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import readers, readers_record, readers_refresh
from fakehost import FakeSyscalls, nitro_host
from readers_fakes import lucene, oak


@pytest.fixture
def host(tmpdir):
    host = nitro_host(tmpdir)
    host.write(readers_record.BOOT_ID, 'boot-1\n')
    return host


def test_a_survey_names_what_it_found_and_the_report_and_record_follow(host):
    oak(host)
    lucene(host)
    sys = FakeSyscalls(host)
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(), syscalls=sys)
    assert isinstance(surveyed, readers.Survey)
    assert (sorted(surveyed.devices), surveyed.record, surveyed.record_problem, surveyed.boot_id, surveyed.cannot) == (
        ['253:0'], None, None, 'boot-1', None)
    assert [(e['pid'], [i['fd'] for i in items]) for e, items in surveyed.plan['refresh']] == [(4242, [10, 11])]
    assert [(e['pid'], why) for e, _items, why in surveyed.plan['restart']] == [(4300, 'mapping_without_fd')]
    planned = readers.reader_report(surveyed)
    assert [r['pid'] for r in planned['refreshed']] == [4242] and [r['pid'] for r in planned['needs_restart']] == [4300]
    assert readers.still_stale(surveyed) == {'253:0': set([(4242, 5000, 10, 131), (4242, 5000, 11, 132),
                                                           (4300, 5100, readers_record.MAPPING_ONLY, 200)])}
    done = readers_refresh.refresh(host.root, surveyed.plan['refresh'], sys)
    written = []
    report, warnings = readers.report_and_record(host.root, surveyed, done, lambda root, rec: written.append(rec))
    assert warnings == [] and [r['count'] for r in report['refreshed']] == [2]
    assert written[0]['devices']['253:0']['stale'] == [[4300, 5100, readers_record.MAPPING_ONLY, 200]]
    assert readers.diff_entry(surveyed, report)['after'].startswith(
        "pid 4242 (java, aem.service): 2 open file(s) refreshed to the device's read-ahead\n")


def test_a_record_that_cannot_be_replaced_is_a_warning_and_the_report_is_kept(host):
    from ansible_collections.aemops.os_tuning.plugins.module_utils import runstate
    oak(host)
    sys = FakeSyscalls(host)
    surveyed = readers.survey(host.root, {'dm-0': 32}, {'dm-0': None}, procfs=host.proc_procfs(), syscalls=sys)
    done = readers_refresh.refresh(host.root, surveyed.plan['refresh'], sys)

    def planted(root, record):
        raise runstate.UnsafeStateError('/run/aemops-os-tuning/readers.json is a FIFO (named pipe), not a regular file.')

    report, warnings = readers.report_and_record(host.root, surveyed, done, planted)
    assert [r['pid'] for r in report['refreshed']] == [4242]
    assert warnings == ['readers: the record was not written, the next run will refresh the same readers again: '
                        '/run/aemops-os-tuning/readers.json is a FIFO (named pipe), not a regular file.']


def test_a_survey_has_every_field_and_no_other():
    fields = dict((name, None) for name in readers.Survey.__slots__)
    assert readers.Survey(**fields).plan is None
    with pytest.raises(TypeError):
        readers.Survey(**dict(fields, extra=1))
    del fields['plan']
    with pytest.raises(TypeError):
        readers.Survey(**fields)
