# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""aem_tuning_result sized for a fleet (issue 34): at most 4 KB per host as JSON on the project's VM.

set_stats gathers every host's result into one artifact that AAP stores and hands to the next workflow node; schema 1
carried the full facts three times (first, before, after: 33.7 KB per host measured on the VM). Schema 2 carries
tuning_facts' ``reading`` of the host instead (compliance.reading). Here the facts and readings are tuning_facts' own,
on the fake host shaped like the VM (two NVMe disks, a virtio disk and the LV), after an apply run with a reboot, AEM
stopped and started, the probe before and after and the error.log scan; the rest of the result is shaped as
roles/aem_tuning/tasks/verify.yml sets it. molecule/default's converge asserts the same bound on the VM itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.aemops.os_tuning.plugins.modules import tuning_facts
from ansible_collections.aemops.os_tuning.tests.unit.plugins.modules.test_tuning_facts import REPO, el8_env
from ansible_collections.aemops.os_tuning.tests.unit.utils import run_module

LIMIT = 4096
SNAPSHOT = '/etc/ansible/facts.d/aem_tuning_before.fact'
NVME2_SERIAL = 'vol0fedcba9876543210'


@pytest.fixture
def vm(tmpdir, monkeypatch, module_exit):
    """The VM's disks: nvme0n1 (root), nvme1n1 under the LV, a second data NVMe (nvme2n1) and a virtio disk (vda)."""
    environment = el8_env(tmpdir, monkeypatch)
    environment.host.add_nvme('nvme2n1', '259:4', NVME2_SERIAL, read_ahead_kb=4096)
    environment.host.add_disk('vda', '252:0', read_ahead_kb=4096, links=['disk/by-id/virtio-ioopt0'])
    return environment


def links(env):
    return ['/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_%s' % s for s in ('vol0123456789abcdef0', NVME2_SERIAL)] + [
        '/dev/disk/by-id/virtio-ioopt0']


def facts(env):
    intent = {'state': 'present', 'mode': 'apply', 'read_ahead_kb': 32, 'paths': [REPO], 'candidates': [],
              'devices': links(env), 'underlying': True, 'thp': 'never', 'thp_defrag': 'never', 'thp_persist': []}
    result = run_module(tuning_facts.main, {'intent': intent, 'verify': True, 'fail_on_invalid': False,
                                            'snapshot': {'path': SNAPSHOT}})
    return result['ansible_facts']['os_tuning']


def probe(kb):
    """What the result keeps of one io_probe measurement (verify.yml's __aem_tuning_probe_keys)."""
    return {'read_ahead_kb': kb, 'reads': 400, 'read_amplification': 31.87 if kb > 32 else 1.93, 'noisy': False,
            'latency': {'mean_ms': 0.733, 'p50_ms': 0.412, 'p99_ms': 3.877, 'max_ms': 12.5}}


def without(reading, *keys):
    return dict((k, v) for k, v in reading.items() if k not in keys)


def result(first, before, after):
    """aem_tuning_result (schema 2) as verify.yml sets it after an apply run that rebooted, from these facts."""
    return {
        'schema_version': 2, 'host': 'aemvm', 'play': 'Converge', 'state': 'present',
        'mode': 'apply', 'check_mode': False, 'started': '2026-12-05T10:00:00Z', 'verified': '2026-12-05T10:04:31Z',
        'targets': before['plan']['targets'], 'devices': before['plan']['devices'], 'read_ahead_kb': 32,
        'compliant': True, 'lost': None, 'compliant_before': False,
        'misses_before_count': len(before['compliance']['misses']), 'misses': [],
        'changes': [
            {'kind': 'snapshot', 'path': SNAPSHOT, 'action': 'written'},
            {'kind': 'tuned', 'action': 'started and enabled'},
            {'kind': 'read_ahead', 'devices': sorted(before['reading']['now']['read_ahead_kb'])},
            {'kind': 'thp', 'runtime': {'enabled': {'before': 'always', 'after': 'never'},
                                        'defrag': {'before': 'madvise', 'after': 'never'}},
             'persist': ['tuned', 'cmdline'],
             'cmdline': {'method': 'grubby', 'managed': True, 'running': 'always'}},
            {'kind': 'aem', 'unit': 'aem.service', 'action': 'stopped'},
            {'kind': 'reboot'},
            {'kind': 'aem', 'unit': 'aem.service', 'action': 'started'},
        ],
        'failed_before_change': False, 'error': '', 'errors': [], 'fact_errors': after['errors'],
        'reboot_required': True,
        'reboot': {'requested': 'auto', 'required': True, 'done': True,
                   'boot_id_before': 'f3a1c2d4-0b9e-4c57-9a51-3d2f7e1b8c60', 'before': '2026-12-05T10:01:02Z',
                   'boot_id_after': '7c0d9e8f-1a2b-4c3d-8e5f-6a7b8c9d0e1f', 'booted': '2026-12-05T10:01:48Z',
                   'after': '2026-12-05T10:02:30Z', 'elapsed_s': 71},
        'aem': {'unit': 'aem.service', 'why': 'reboot', 'stopped': '2026-12-05T10:01:00Z',
                'started': '2026-12-05T10:02:31Z', 'answered': '2026-12-05T10:03:40Z', 'status': 200, 'waited_s': 69.2,
                'ok': True, 'url': 'http://127.0.0.1:4502/libs/granite/core/content/login.html',
                'message': 'AEM answered 200'},
        'readers': {'refreshed': [], 'stale': [], 'needs_restart': [], 'not_refreshed': [], 'unreadable': [],
                    'aem_unit': 'aem.service', 'aem_refreshed': False, 'aem_needs_restart': False,
                    'aem_restarted': False},
        'error_log': {'path': '/opt/aem/crx-quickstart/logs/error.log',
                      'since_run': {'commit_blocked': 0, 'checkpoint_failed': 0},
                      'total': {'commit_blocked': 17, 'checkpoint_failed': 3}, 'error': None},
        'probe': {'before': probe(4096), 'after': probe(32), 'method': 'pread, page cache dropped', 'record_kb': 4,
                  'device': 'dm-0'},
        'auto': False, 'may_sweep': False, 'read_ahead_sweep': {}, 'sweep_failure': None,
        'read_ahead_default': {}, 'tuned_verify': 'passed', 'snapshot_taken': '2026-12-05T10:00:00Z',
        # verify.yml keeps each device's type and the OS from before only, and tuned's profiles from before and after.
        'readings': {'first': without(first, 'devices', 'tuned'), 'before': before['reading']['now'],
                     'after': without(after['reading']['now'], 'devices', 'os')},
        'report': '/home/ops/.cache/molecule/os_tuning/default/reports/aemvm/report.md',
    }


def test_the_result_of_the_four_device_vm_is_at_most_4_kb(vm):
    before = facts(vm)
    # What an apply run changes: the read-ahead of every device of the plan, and the snapshot it keeps.
    for name in before['reading']['now']['devices']:
        vm.host.write(vm.host._devdir(name) + '/queue/read_ahead_kb', '32\n')
    vm.host.write(SNAPSHOT, json.dumps({'taken': '2026-12-05T10:00:00Z', 'created_dirs': [], 'os_tuning': before}))
    after = facts(vm)
    assert sorted(before['reading']['now']['devices']) == ['dm-0', 'nvme1n1', 'nvme2n1', 'vda']
    assert after['reading']['snapshot']['read_ahead_kb']['dm-0'] == 4096
    assert after['reading']['now']['read_ahead_kb']['dm-0'] == 32
    r = result(after['reading']['snapshot'], before, after)
    size = len(json.dumps(r))
    # Schema 1 carried the facts three times over; here they are tens of KB together.
    schema1 = size + len(json.dumps({'first': before, 'before': before, 'after': after}))
    print('aem_tuning_result: %d bytes (schema 1 on this host: %d)' % (size, schema1))
    assert size <= LIMIT, json.dumps(r, indent=1)
    assert schema1 > 4 * size


def test_a_reading_holds_each_device_of_the_plan_and_nothing_of_the_full_facts(vm):
    reading = facts(vm)['reading']
    assert reading['snapshot'] is None
    now = reading['now']
    assert sorted(now) == ['devices', 'os', 'paths', 'read_ahead_kb', 'thp', 'tuned']
    assert now['paths'] == {REPO: 'dm-0'}
    assert now['read_ahead_kb'] == {'dm-0': 4096, 'nvme1n1': 4096, 'nvme2n1': 4096, 'vda': 4096}
    assert now['devices'] == {'dm-0': 'lvm', 'nvme1n1': 'nvme', 'nvme2n1': 'nvme', 'vda': 'disk'}
    assert now['thp'] == {'enabled': 'always', 'defrag': 'madvise', 'running_cmdline': None}
    assert now['os']['id'] == 'rhel' and now['tuned']['active_profiles'] == ['virtual-guest']
    assert len(json.dumps(now)) < 1024


def test_a_check_mode_run_on_the_untuned_vm_is_at_most_4_kb_with_its_misses_cut_to_6(vm):
    """molecule default's prepare runs the role in check mode on the untuned VM: 14 misses, about 1.8 KB of text. The
    result lists the first 6 (__aem_tuning_misses_kept) and counts them all; nothing is read again."""
    before = facts(vm)
    misses = ['%s: %s' % (m['subject'], m['message']) for m in before['compliance']['misses']]
    assert len(misses) > 6 and len(json.dumps(misses)) > 1500
    r = result(without(before['reading']['now'], 'devices', 'tuned'), before, before)
    not_rebooted = dict(r['reboot'], done=False, boot_id_before=None, boot_id_after=None, before=None, after=None,
                        booted=None, elapsed_s=None)
    r.update(check_mode=True, compliant=False, misses=misses[:6], misses_count=len(misses), verified=r['started'],
             changes=r['changes'][:4], reboot=not_rebooted, aem=None, probe=None, report='')
    size = len(json.dumps(r))
    print('aem_tuning_result in check mode: %d bytes' % size)
    assert size <= LIMIT, json.dumps(r, indent=1)
    assert len(json.dumps(dict(r, misses=misses))) > size + 500
