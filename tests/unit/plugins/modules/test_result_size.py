# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""aem_tuning_result sized for a fleet (issue 34): at most 4 KB per host as JSON on the project's VM.

set_stats gathers every host's result into one artifact that AAP stores and hands to the next workflow node; schema 1
carried the full facts three times (first, before, after: 33.7 KB per host measured on the VM). Schema 2 carries
tuning_facts' ``reading`` of the host instead (compliance.reading). Here the facts and readings are tuning_facts' own,
on the fake host shaped like the VM (two NVMe disks, a virtio disk and the LV), after an apply run with a reboot, AEM
stopped and started, the probe before and after and the error.log scan; the result is the role's own
(plugins/plugin_utils/role_result.py), from those steps' records. molecule/default's converge asserts the same bound on the VM itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.aemops.os_tuning.plugins.modules import tuning_facts
from ansible_collections.aemops.os_tuning.plugins.plugin_utils import role_result
from ansible_collections.aemops.os_tuning.tests.unit.plugins.plugin_utils.test_role_result import SETTINGS, apply_with_reboot
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
    """What the result keeps of one io_probe measurement (role_result.PROBE_KEYS)."""
    return {'read_ahead_kb': kb, 'reads': 400, 'read_amplification': 31.87 if kb > 32 else 1.93, 'noisy': False,
            'latency': {'mean_ms': 0.733, 'p50_ms': 0.412, 'p99_ms': 3.877, 'max_ms': 12.5}}


def without(reading, *keys):
    return dict((k, v) for k, v in reading.items() if k not in keys)


def result(before, after, check_mode=False):
    """aem_tuning_result as the role builds it (plugins/plugin_utils/role_result.py) from these facts and the other
    steps' records of an apply run that rebooted with AEM stopped and started, the probe before and after and the
    error.log scan (tests/unit/plugins/plugin_utils/test_role_result.py has those records)."""
    steps = apply_with_reboot()
    start = role_result.run_start({'ansible_facts': {'os_tuning': before}}, SETTINGS)
    steps.update(facts_before={'ansible_facts': {'os_tuning': before}}, before=before, targets=start['targets'],
                 device_names=start['device_names'], reading_first=start['reading_first'],
                 started=start['started'], choice=start['choice'],
                 facts_after={'ansible_facts': {'os_tuning': after}}, reread=not check_mode,
                 probes={'before': dict(probe(4096), method='pread, page cache dropped', record_kb=4, device='dm-0'),
                         'after': dict(probe(32), method='pread, page cache dropped', record_kb=4, device='dm-0')},
                 log_scan={'rc': 0, 'stdout': json.dumps({'since_run': {'commit_blocked': 0, 'checkpoint_failed': 0},
                                                          'total': {'commit_blocked': 17, 'checkpoint_failed': 3}})})
    if check_mode:
        # Check mode skips the scripts (ansible.builtin.script), the reboot and AEM's stop and start.
        for name in ('reboot_done', 'clock_before', 'clock_after', 'aem_wait', 'aem_stop', 'log_scan'):
            steps[name] = {'changed': False, 'skipped': True}
        steps.update(do_reboot=False, aem_record={})
    settings = dict(SETTINGS, aem_service='aem.service', error_log='/opt/aem/crx-quickstart/logs/error.log',
                    check_mode=check_mode, report_dir='/home/ops/.cache/molecule/os_tuning/default/reports')
    return role_result.result(steps, settings)


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
    # The fake host has its read-ahead set, not the rules and the tuned profile an apply run writes: after it, the
    # host is compliant.
    after['compliance']['misses'] = []
    r = result(before, after)
    # first reads as before (this run is the first): null, sized for a fleet
    assert r['readings']['first'] is None and r['readings']['before']['read_ahead_kb']['dm-0'] == 4096 and r['compliant'] is True
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


def test_a_check_mode_run_on_the_untuned_vm_is_at_most_4_kb_with_its_misses_cut_to_3(vm):
    """molecule default's prepare runs the role in check mode on the untuned VM: 14 misses, about 1.8 KB of text. The
    result lists the first 3 (role_result.MISSES_KEPT) and counts them all; nothing is read again."""
    before = facts(vm)
    misses = before['compliance']['misses']
    assert len(misses) > 6 and len(json.dumps(misses)) > 1500
    r = result(before, before, check_mode=True)
    assert r['misses'] == [dict(m) for m in misses[:role_result.MISSES_KEPT]] and r['misses_count'] == len(misses)
    assert r['changes'][-1]['kind'] == 'thp' and r['aem'] is None and r['report'] == ''
    size = len(json.dumps(r))
    print('aem_tuning_result in check mode: %d bytes' % size)
    assert size <= LIMIT, json.dumps(r, indent=1)
    assert len(json.dumps(dict(r, misses=[dict(m) for m in misses]))) > size + 500


def test_three_jvms_that_need_a_restart_keep_the_result_within_4_kb(vm, monkeypatch):
    """Issue 39: on a kernel without pidfd_getfd, an author, a publish and a dispatcher-side JVM each map segment files
    opened at 4096 KiB: each is a reader that needs a restart, with its miss. The readers and the misses come from
    tuning_facts' own output, the result from the role's builder (role_result.result), as the role builds it."""
    import errno
    from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_refresh, readers_scan
    from fakehost import FakeSyscalls
    seg = REPO + '/segmentstore'
    for n, (pid, unit) in enumerate([(4242, 'aem-author.service'), (4343, 'aem-publish.service'), (4444, 'aem.service')]):
        vm.host.add_process(pid, 'java', 5000 + n, unit=unit, fds={10: (seg + '/data0000%da.tar' % n, '253:0', 131 + n)},
                            maps=['7f2-7f3 r--s 00000000 fd:00 %d %s/data0000%da.tar' % (131 + n, seg, n)])
    monkeypatch.setattr(readers_scan, 'ProcFs', lambda root: vm.host.proc_procfs())
    monkeypatch.setattr(readers_refresh, 'Syscalls', lambda: FakeSyscalls(vm.host, {'pidfd_getfd': errno.ENOSYS}))
    before = facts(vm)
    assert [r['pid'] for r in before['readers']['needs_restart']] == [4242, 4343, 4444]
    r = result(before, before, check_mode=True)
    assert [x['pid'] for x in r['readers']['needs_restart']] == [4242, 4343, 4444]
    reader_misses = [m for m in before['compliance']['misses'] if m['kind'] == 'reader_restart']
    assert r['readers']['aem_needs_restart'] is True and len(reader_misses) == 3 and r['misses_count'] > 3
    size = len(json.dumps(r))
    print('aem_tuning_result with three JVMs that need a restart: %d bytes' % size)
    assert size <= LIMIT, json.dumps(r, indent=1)
