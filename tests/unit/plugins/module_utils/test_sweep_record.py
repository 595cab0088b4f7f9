# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/sweep_record.py: the sweep's record for later runs (the role's
/etc/ansible/facts.d/aem_tuning_sweep.fact), its target checked before the sweep, and its atomic write.

The record must hold for compliance.recorded_sweep, which a later run's tuning_facts applies: its knobs compare
equal to the role's (compliance._resolved_knobs) and its stable_id is the one tuning_facts reports. The tests run
as root, so another user's files are made with chown.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev, compliance, sweep_record
from fakehost import nitro_host, tree_checksum

FACT = '/etc/ansible/facts.d/aem_tuning_sweep.fact'
FACTS_D = '/etc/ansible/facts.d'
REPO = '/opt/aem/crx-quickstart/repository/segmentstore'
DEFAULT_VALUES = [4096, 1024, 256, 128, 64, 32, 16, 8]
DM0_ID = {'key': 'ENV{DM_UUID}', 'value': 'LVM-' + 'x' * 64, 'serial': None}
ALIEN = 4242  # another user

# The module's options as read_ahead_sweep gets them from the role with the defaults (volume_size_gb, iops and
# throughput_mibps 0 are omitted, so None).
PARAMS = {'path': REPO, 'sweep': None, 'readers': 4, 'duration': 5, 'size_mb': 1024, 'tolerance_pct': 5.0,
          'volume_type': 'gp3', 'volume_size_gb': None, 'iops': None, 'throughput_mibps': None,
          'sequential_block_kb': 8, 'timeout': 900, 'seed': 4242, 'timeline_interval': 0.0, 'recover': False,
          'record': FACT}
# The role's __aem_tuning_sweep_knobs with its defaults (roles/aem_tuning/defaults/main.yml).
ROLE_KNOBS = {'values': None, 'readers': 4, 'duration': 5, 'size_mb': 1024, 'tolerance_pct': 5.0,
              'volume_type': 'gp3', 'volume_size_gb': 0, 'iops': 0, 'throughput_mibps': 0}
RESULT = {
    'directory': REPO, 'device': 'dm-0', 'stat_device': 'dm-0', 'mount_point': '/opt/aem', 'fstype': 'xfs',
    'original_kb': 4096, 'restored_kb': 4096, 'restored': True, 'recommended_kb': 64, 'best_kb': 32,
    'best_reads_per_s': 2950.4, 'threshold_reads_per_s': 2802.9, 'within_kb': [64, 32], 'excluded_noisy_kb': [],
    'why': '64 KiB: the largest read-ahead within 5% of the best',
    'caps': {'type': 'gp3', 'iops': 3000, 'mib_s': 125.0, 'basis': 'gp3 baseline'},
    'table': ['   64 KiB: 2890.0 reads/s', '   32 KiB: 2950.4 reads/s'], 'sweep': [64, 32],
    'results': [{'read_ahead_kb': 64, 'reads_per_s': 2890.0}, {'read_ahead_kb': 32, 'reads_per_s': 2950.4}],
    'elapsed_s': 12.5, 'measured': True, 'changed': False, 'recovered': None, 'lock_file': '/x', 'state_file': '/y',
}
# What evidence() records for RESULT and PARAMS, written out.
EXPECTED = {
    'source': 'sweep',
    'taken': '2026-12-01T10:00:00Z',
    'path': REPO,
    'device': 'dm-0',
    'stable_id': DM0_ID,
    'original_kb': 4096,
    'restored_kb': 4096,
    'recommended_kb': 64,
    'why': '64 KiB: the largest read-ahead within 5% of the best',
    'caps': {'type': 'gp3', 'iops': 3000, 'mib_s': 125.0, 'basis': 'gp3 baseline'},
    'table': ['   64 KiB: 2890.0 reads/s', '   32 KiB: 2950.4 reads/s'],
    'sweep': [64, 32],
    'readers': 4,
    'duration': 5,
    'tolerance_pct': 5.0,
    'best_kb': 32,
    'within_kb': [64, 32],
    'excluded_noisy_kb': [],
    'knobs': {'values': [64, 32], 'readers': 4, 'duration': 5, 'size_mb': 1024, 'tolerance_pct': 5.0,
              'volume_type': 'gp3', 'volume_size_gb': None, 'iops': None, 'throughput_mibps': None},
    'results': [{'read_ahead_kb': 64, 'reads_per_s': 2890.0}, {'read_ahead_kb': 32, 'reads_per_s': 2950.4}],
}


@pytest.fixture
def host(tmpdir):
    """nitro_host with /etc/ansible/facts.d as Ansible's setup makes it: 0755 root."""
    h = nitro_host(tmpdir)
    os.chmod(h.mkdir('/etc'), 0o755)
    os.chmod(h.mkdir('/etc/ansible'), 0o755)
    os.chmod(h.mkdir(FACTS_D), 0o755)
    return h


def resolved(page_kb=4):
    """What tuning_facts resolves for the role's sweep (plan.sweep_values: the default for the page size)."""
    return {'targets': [REPO], 'devices': {}, 'underlying': {}, 'page_kb': page_kb,
            'sweep_values': [v for v in DEFAULT_VALUES if v >= page_kb]}


# ---------------------------------------------------------------------------------------------
# The record

def test_the_knob_keys():
    assert sweep_record.KNOB_KEYS == ('values', 'readers', 'duration', 'size_mb', 'tolerance_pct', 'volume_type',
                                      'volume_size_gb', 'iops', 'throughput_mibps')


def test_evidence_has_the_roles_keys_and_values():
    record = sweep_record.evidence(RESULT, PARAMS, DM0_ID, '2026-12-01T10:00:00Z')
    assert record == EXPECTED
    assert sorted(record) == sorted(['source', 'taken', 'path', 'device', 'stable_id', 'original_kb', 'restored_kb',
                                     'recommended_kb', 'why', 'caps', 'table', 'sweep', 'readers', 'duration',
                                     'tolerance_pct', 'best_kb', 'within_kb', 'excluded_noisy_kb', 'knobs',
                                     'results'])


def test_evidence_of_sweep_run_result_takes_its_path():
    result = dict(RESULT, path=REPO)
    del result['directory']
    assert sweep_record.evidence(result, PARAMS, None, 'T')['path'] == REPO


@pytest.mark.parametrize('given, recorded', [
    ({}, {'volume_size_gb': None, 'iops': None, 'throughput_mibps': None}),
    ({'volume_size_gb': 0, 'iops': 0, 'throughput_mibps': 0.0}, {'volume_size_gb': None, 'iops': None,
                                                                 'throughput_mibps': None}),
    ({'volume_type': 'gp2', 'volume_size_gb': 100}, {'volume_type': 'gp2', 'volume_size_gb': 100}),
    ({'iops': 6000, 'throughput_mibps': 500.0}, {'iops': 6000, 'throughput_mibps': 500.0}),
])
def test_knobs_record_zero_or_missing_caps_as_null(given, recorded):
    knobs = sweep_record.evidence(RESULT, dict(PARAMS, **given), None, 'T')['knobs']
    expected = dict(EXPECTED['knobs'], **recorded)
    assert knobs == expected


# The role's knobs, as ansible-core renders them: native (2.19+) or as text (2.16 templating of vars).
def _as_text(knobs):
    out = {}
    for key, value in knobs.items():
        if isinstance(value, list):
            out[key] = [str(v) for v in value]
        elif value is None:
            out[key] = ''
        else:
            out[key] = str(value)
    return out


@pytest.mark.parametrize('render', [dict, _as_text], ids=['native', 'text'])
@pytest.mark.parametrize('role, params, measured', [
    # defaults: the role gives no values (None), the module measures the page-size default
    ({}, {}, DEFAULT_VALUES),
    # values given
    ({'values': [256, 64, 32]}, {'sweep': [256, 64, 32]}, [256, 64, 32]),
    # volume settings given (the role passes the non-zero ones)
    ({'readers': 8, 'duration': 3, 'size_mb': 256, 'tolerance_pct': 2.5, 'volume_type': 'io2', 'iops': 16000,
      'throughput_mibps': 1000}, {'readers': 8, 'duration': 3, 'size_mb': 256, 'tolerance_pct': 2.5,
                                  'volume_type': 'io2', 'iops': 16000, 'throughput_mibps': 1000.0}, DEFAULT_VALUES),
    # volume_size_gb: the role's 0 is omitted (None at the module); the module given 0 directly, the same
    ({'volume_size_gb': 0}, {'volume_size_gb': None}, DEFAULT_VALUES),
    ({'volume_size_gb': 0}, {'volume_size_gb': 0}, DEFAULT_VALUES),
    ({'volume_size_gb': None}, {'volume_size_gb': 0}, DEFAULT_VALUES),
    ({'volume_type': 'gp2', 'volume_size_gb': 100}, {'volume_type': 'gp2', 'volume_size_gb': 100}, DEFAULT_VALUES),
])
def test_recorded_knobs_compare_equal_to_the_roles(render, role, params, measured):
    role_knobs = render(dict(ROLE_KNOBS, **role))
    result = dict(RESULT, sweep=list(measured))
    record = sweep_record.evidence(result, dict(PARAMS, **params), DM0_ID, 'T')
    assert record['knobs']['values'] == measured
    assert (compliance._resolved_knobs(record['knobs'], resolved())
            == compliance._resolved_knobs(role_knobs, resolved()))


def test_recorded_knobs_differ_where_the_settings_differ():
    record = sweep_record.evidence(dict(RESULT, sweep=DEFAULT_VALUES), dict(PARAMS, readers=8), DM0_ID, 'T')
    assert (compliance._resolved_knobs(record['knobs'], resolved())
            != compliance._resolved_knobs(ROLE_KNOBS, resolved()))
    # the default list of a 64 KiB page kernel is not the one measured on 4 KiB pages
    record = sweep_record.evidence(dict(RESULT, sweep=DEFAULT_VALUES), PARAMS, DM0_ID, 'T')
    assert (compliance._resolved_knobs(record['knobs'], resolved(64))
            != compliance._resolved_knobs(ROLE_KNOBS, resolved(64)))


def test_stable_id_is_the_one_tuning_facts_reports(host):
    assert sweep_record.stable_id(host.root, 'dm-0') == DM0_ID
    assert sweep_record.stable_id(host.root, 'dm-0') == blockdev.describe(host.root, 'dm-0')['stable_id']
    assert sweep_record.stable_id(host.root, 'nvme1n1') == {'key': 'ATTRS{serial}', 'value': 'vol0123456789abcdef0',
                                                            'serial': 'vol0123456789abcdef0'}


def test_the_written_record_holds_for_the_next_run(host):
    record = sweep_record.evidence(dict(RESULT, sweep=DEFAULT_VALUES), PARAMS,
                                   sweep_record.stable_id(host.root, 'dm-0'), '2026-12-01T10:00:00Z')
    assert sweep_record.write(host.root, FACT, record) is True
    facts = {'paths': {REPO: {'device': 'dm-0'}},
             'block_devices': {'dm-0': blockdev.describe(host.root, 'dm-0')}}
    intent = {'read_ahead_kb': 'auto', 'sweep': _as_text(ROLE_KNOBS), 'sweep_record': FACT}
    with open(host.path(FACT)) as f:
        found = compliance.recorded_sweep(facts, intent, resolved(), f.read())
    assert found['usable'], found['why']
    assert found['record']['recommended_kb'] == 64


# ---------------------------------------------------------------------------------------------
# The target, checked before the sweep

def test_a_good_target_passes(host):
    before = tree_checksum(host.root)
    assert sweep_record.check_target(host.root, FACT) is None
    host.write(FACT, '{}\n')
    assert sweep_record.check_target(host.root, FACT) is None
    assert sweep_record.check_target(host.root, FACT, check_only=True) is None
    os.unlink(host.path(FACT))
    assert tree_checksum(host.root) == before


def _group_writable(host):
    os.chmod(host.path(FACTS_D), 0o775)


def _other_writable(host):
    os.chmod(host.path(FACTS_D), 0o757)


def _dir_symlinked(host):
    os.rmdir(host.path(FACTS_D))
    host.mkdir('/srv/elsewhere')
    os.symlink(host.path('/srv/elsewhere'), host.path(FACTS_D))


def _dir_missing(host):
    os.rmdir(host.path(FACTS_D))


def _dir_alien(host):
    os.chown(host.path(FACTS_D), ALIEN, ALIEN)


def _dir_is_a_file(host):
    os.rmdir(host.path(FACTS_D))
    host.write(FACTS_D, 'x')


def _parent_other_writable(host):
    os.chmod(host.path('/etc/ansible'), 0o777)


def _parent_shared(host):
    os.chmod(host.path('/etc/ansible'), 0o1777)


def _parent_alien(host):
    os.chown(host.path('/etc'), ALIEN, ALIEN)


def _parent_symlinked(host):
    # /etc/ansible a link to a tree another user could change: facts.d itself is fine, but never reached
    host.mkdir('/srv/ansible/facts.d')
    for d in ('/srv/ansible/facts.d', '/srv/ansible'):
        os.chmod(host.path(d), 0o755)
    os.rmdir(host.path(FACTS_D))
    os.rmdir(host.path('/etc/ansible'))
    os.symlink(host.path('/srv/ansible'), host.path('/etc/ansible'))


def _file_symlink(host):
    host.write('/srv/victim', 'keep\n')
    os.symlink(host.path('/srv/victim'), host.path(FACT))


def _file_fifo(host):
    os.mkfifo(host.path(FACT))


def _file_hardlinked(host):
    host.write(FACT, '{}\n')
    host.mkdir('/srv')
    os.link(host.path(FACT), host.path('/srv/other-name'))


def _file_alien(host):
    host.write(FACT, '{}\n')
    os.chown(host.path(FACT), ALIEN, ALIEN)


def _file_is_a_directory(host):
    host.mkdir(FACT)


REFUSALS = [
    (_group_writable, ['the sweep record %s cannot be written' % FACT,
                       'its directory %s is writable by group or others (mode 0775)' % FACTS_D,
                       'chmod go-w %s' % FACTS_D]),
    (_other_writable, ['is writable by group or others (mode 0757)', 'chmod go-w %s' % FACTS_D]),
    (_dir_symlinked, ['its directory %s is a symbolic link (to ' % FACTS_D,
                      'install -d -o root -g root -m 0755 %s' % FACTS_D]),
    (_dir_missing, ['its directory %s does not exist' % FACTS_D, 'install -d -o root -g root -m 0755 %s' % FACTS_D]),
    (_dir_alien, ['its directory %s is owned by uid 4242, not root' % FACTS_D, 'chown root:root %s' % FACTS_D]),
    (_dir_is_a_file, ['%s is a regular file, not a directory' % FACTS_D]),
    # every directory above the record's is checked as its own is (runstate.check_above)
    (_parent_other_writable, ['/etc/ansible, above its directory %s, is writable by group or others (mode 0777)'
                              % FACTS_D, 'chmod go-w /etc/ansible']),
    (_parent_shared, ['/etc/ansible, above its directory %s, is writable by group or others (mode 1777: a shared '
                      'directory, such as /tmp)' % FACTS_D, 'Give record a path outside it']),
    (_parent_alien, ['/etc, above its directory %s, is owned by uid 4242, not root' % FACTS_D,
                     'chown root:root /etc,']),
    (_parent_symlinked, ['/etc/ansible, above its directory %s, is a symbolic link (to ' % FACTS_D,
                         'which is never followed', 'install -d -o root -g root -m 0755 /etc/ansible']),
    (_file_symlink, ['%s is a symbolic link (to ' % FACT, 'remove the link']),
    (_file_fifo, ['%s is a FIFO (named pipe), not a regular file' % FACT]),
    (_file_hardlinked, ['%s has 2 hard links' % FACT, 'give record another path']),
    (_file_alien, ['%s is owned by uid 4242, not root' % FACT, 'give record another path']),
    (_file_is_a_directory, ['%s is a directory, not a regular file' % FACT]),
]


@pytest.mark.parametrize('plant, words', REFUSALS, ids=[p.__name__.lstrip('_') for p, w in REFUSALS])
@pytest.mark.parametrize('check_only', [False, True], ids=['run', 'check'])
def test_an_unsafe_target_is_refused_and_left_alone(host, plant, words, check_only):
    plant(host)
    before = tree_checksum(host.root)
    problem = sweep_record.check_target(host.root, FACT, check_only=check_only)
    assert problem is not None
    for word in words:
        assert word in problem, problem
    assert tree_checksum(host.root) == before
    with pytest.raises(sweep_record.RecordError) as info:
        sweep_record.write(host.root, FACT, EXPECTED, check_mode=check_only)
    assert str(info.value) == problem
    assert tree_checksum(host.root) == before


@pytest.mark.parametrize('path, words', [
    ('etc/ansible/facts.d/x.fact', 'is not absolute'),
    ('/etc/ansible/facts.d/../x.fact', 'is not normalised'),
])
def test_a_malformed_path_is_refused(host, path, words):
    problem = sweep_record.check_target(host.root, path)
    assert words in problem and 'Give record an absolute path' in problem


# ---------------------------------------------------------------------------------------------
# The write

SMALL_RECORD = {'source': 'sweep', 'recommended_kb': 64, 'knobs': {'values': [64, 32], 'iops': None},
                'why': u'64 KiB \u2264 5%'}
SMALL_TEXT = ('{\n'
              '  "knobs": {\n'
              '    "iops": null,\n'
              '    "values": [\n'
              '      64,\n'
              '      32\n'
              '    ]\n'
              '  },\n'
              '  "recommended_kb": 64,\n'
              '  "source": "sweep",\n'
              '  "why": "64 KiB \\u2264 5%"\n'
              '}\n')


def _read(host, path=FACT):
    with open(host.path(path), 'rb') as f:
        return f.read().decode('utf-8')


def test_write_is_json_indent_2_sorted_with_a_newline_0644_root(host):
    assert sweep_record.write(host.root, FACT, SMALL_RECORD) is True
    assert _read(host) == SMALL_TEXT
    st = os.lstat(host.path(FACT))
    assert stat.S_IMODE(st.st_mode) == 0o644 and (st.st_uid, st.st_gid) == (0, 0) and st.st_nlink == 1
    assert os.listdir(host.path(FACTS_D)) == ['aem_tuning_sweep.fact']  # no temporary file left


def test_the_same_content_is_not_rewritten(host):
    assert sweep_record.write(host.root, FACT, SMALL_RECORD) is True
    inode = os.lstat(host.path(FACT)).st_ino
    assert sweep_record.write(host.root, FACT, SMALL_RECORD) is False
    assert sweep_record.write(host.root, FACT, SMALL_RECORD, check_mode=True) is False
    assert os.lstat(host.path(FACT)).st_ino == inode


def test_another_content_mode_or_owner_is_rewritten(host):
    host.write(FACT, SMALL_TEXT.replace('64,', '128,'))
    assert sweep_record.write(host.root, FACT, SMALL_RECORD) is True and _read(host) == SMALL_TEXT
    os.chmod(host.path(FACT), 0o600)
    assert sweep_record.write(host.root, FACT, SMALL_RECORD) is True
    assert stat.S_IMODE(os.lstat(host.path(FACT)).st_mode) == 0o644
    os.chown(host.path(FACT), 0, ALIEN)  # root's, another group
    assert sweep_record.write(host.root, FACT, SMALL_RECORD) is True
    assert os.lstat(host.path(FACT)).st_gid == 0


def test_check_mode_writes_nothing(host):
    before = tree_checksum(host.root)
    assert sweep_record.write(host.root, FACT, SMALL_RECORD, check_mode=True) is True
    assert tree_checksum(host.root) == before and not host.exists(FACT)
    host.write(FACT, '{}\n')
    before = tree_checksum(host.root)
    assert sweep_record.write(host.root, FACT, SMALL_RECORD, check_mode=True) is True
    assert tree_checksum(host.root) == before and _read(host) == '{}\n'


def test_the_text_is_the_same_on_every_python():
    assert sweep_record.text(SMALL_RECORD) == SMALL_TEXT
    assert json.loads(sweep_record.text(EXPECTED)) == EXPECTED


def test_now_iso_is_tuning_facts_clock_format():
    assert sweep_record.now_iso(1796119200) == '2026-12-01T10:00:00Z'
