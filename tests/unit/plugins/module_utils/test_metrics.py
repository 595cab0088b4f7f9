# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""module_utils/metrics.py: the facts as Prometheus text, and the owned-file rules of its directory and file.

The text is read back with a strict reader of the exposition format written here (``parse``), so that these
tests run on Python 2.7 and 3.6 too; tests/tools/test_textfile_metrics.py reads the same output with
prometheus_client's parser in the dev venv. The file tests write under a pytest tmpdir as the fake host's root
(the tests run as root, so another user's files are made with chown).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import stat

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, kernel_readahead, metrics
from fakehost import tree_checksum

NOW = 1764684000.25
DIR = '/var/lib/node_exporter/textfile_collector'
TARGET = DIR + '/' + metrics.DEFAULT_NAME
HOSTILE = u'/srv/a"em\\x\nrepo'


def facts(**kw):
    """tuning_facts' os_tuning, reduced to what the metrics read: the repository on dm-0 over nvme1n1."""
    result = {
        'block_devices': {
            'nvme1n1': {'read_ahead_kb': 4096, 'set_by': 'tuned throughput-performance [disk] readahead=>4096'},
            'dm-0': {'read_ahead_kb': 32, 'set_by': 'aemops udev rule'},
            'nvme0n1': {'read_ahead_kb': 128, 'set_by': 'kernel default: 128 KiB'},
            'sr0': {'read_ahead_kb': None},
        },
        'paths': {'/opt/aem/crx-quickstart/repository': {'device': 'dm-0'}},
        'plan': {'targets': ['/opt/aem/crx-quickstart/repository'], 'devices': {}, 'underlying': {'dm-0': ['nvme1n1']}},
        'thp': {'runtime': {'enabled': {'value': 'never', 'offered': ['always', 'madvise', 'never']},
                            'defrag': {'value': 'madvise', 'offered': ['always', 'madvise', 'never']}}},
        'compliance': {'misses': [], 'compliant': True, 'tuned_verify': None},
        'readers': {'stale': [], 'needs_restart': []},
        'errors': [],
    }
    result.update(kw)
    return result


# tuning_facts' ebs: the volume beneath the repository read, the root volume refused.
EBS = {
    'nvme1n1': {'device': 'nvme1n1', 'volume_id': 'vol-0123456789abcdef0', 'stats': {
        'ebs_volume_performance_exceeded_iops': 1500000, 'ebs_volume_performance_exceeded_tp': 41000001,
        'ec2_instance_performance_exceeded_iops': 0, 'ec2_instance_performance_exceeded_tp': 3,
        'total_read_ops': 123, 'total_write_ops': 45, 'total_read_bytes': 2 ** 40, 'total_write_bytes': 4096,
        'total_read_time': 2500000, 'total_write_time': 10, 'volume_queue_length': 2}},
    'nvme0n1': {'device': 'nvme0n1', 'volume_id': None,
                'reason': 'no EBS statistics: the device refused log page 0xD0 (NVMe status 2)'},
}


def reader(pid, unit, kib=None, faults=120, comm='java'):
    """A reader entry as tuning_facts' readers lists it (stale, needs_restart, fine), measured when ``kib`` is given."""
    measured = None if kib is None else {'kib_per_fault': kib, 'faults': faults, 'seconds': 5.0,
                                         'read_kib': int(kib * faults), 'rchar_kib': 4 * faults}
    return {'unit': unit, 'pid': pid, 'comm': comm, 'measured': measured,
            'basis': 'measured' if measured else 'inferred'}


# AEM (aem.service) maps its tar files twice: one process measured at 3.9 MiB per fault needs a restart, one at
# 36 KiB is fine; a process of another unit reads more per fault still, and is not AEM.
READERS = {
    'stale': [reader(4242, 'backup.service', kib=8192.0, comm='rsync')],
    'needs_restart': [reader(1234, 'aem.service', kib=3990.5)],
    'fine': [reader(1300, 'aem.service', kib=36.25), reader(1301, 'aem.service')],
}


def text_of(f=None, now=NOW, **kw):
    kw.setdefault('read_ahead_kb', 32)
    kw.setdefault('mode', 'audit')
    kw.setdefault('state', 'present')
    return metrics.render(metrics.samples(facts() if f is None else f, now, **kw))


# ---------------------------------------------------------------------------------------------
# A strict reader of the text exposition format 0.0.4 (what node_exporter's expfmt accepts).

_NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
_SAMPLE = re.compile(r'^(%s)(?:\{(.*)\})? ([^ ]+)$' % _NAME)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def _unescape(value):
    return re.sub(r'\\([\\"n])', lambda m: {'\\': '\\', '"': '"', 'n': '\n'}[m.group(1)], value)


def parse(content):
    """{name: {'help', 'type', 'samples': [(labels dict, float)]}}; AssertionError on anything the format forbids."""
    assert content.endswith('\n')
    families, current, seen = {}, None, set()
    for line in content[:-1].split('\n'):
        if line.startswith('# HELP ') or line.startswith('# TYPE '):
            keyword, name, rest = line[2:6], line.split(' ')[2], line.split(' ', 3)[3]
            assert re.match('^%s$' % _NAME, name), line
            family = families.setdefault(name, {'help': None, 'type': None, 'samples': []})
            assert family['samples'] == [] and family[keyword.lower()] is None, 'late or repeated: %s' % line
            if keyword == 'TYPE':
                assert rest in ('gauge', 'counter', 'untyped', 'summary', 'histogram'), line
            assert current in (None, name) or name not in seen, 'family split: %s' % line
            family[keyword.lower()] = rest
            current = name
            continue
        if line.startswith('#') or not line:
            continue
        m = _SAMPLE.match(line)
        assert m, 'not a sample: %r' % line
        name, body, value = m.groups()
        assert name == current, 'sample %s outside its family %s' % (name, current)
        seen.add(name)
        labels, pos = {}, 0
        while body and pos < len(body):
            lm = _LABEL.match(body, pos)
            assert lm, 'bad labels in %r at %d' % (line, pos)
            assert lm.group(1) not in labels, 'repeated label in %r' % line
            labels[lm.group(1)] = _unescape(lm.group(2))
            pos = lm.end()
        family = families[name]
        key = sorted(labels.items())
        assert key not in [sorted(s[0].items()) for s in family['samples']], 'duplicate series: %r' % line
        family['samples'].append((labels, float(value)))
    return families


def value(families, name, **labels):
    found = [v for lab, v in families[name]['samples'] if all(lab.get(k) == w for k, w in labels.items())]
    assert len(found) == 1, (name, labels, families.get(name))
    return found[0]


# ---------------------------------------------------------------------------------------------
# The text

def test_every_family_but_the_ebs_counters_is_a_gauge_with_help_and_follows_the_naming_conventions():
    families = parse(text_of(facts(readers={'stale': [{'pid': 1}], 'needs_restart': []})))
    assert set(families) == (set(metrics.NAMES) - set([metrics.PREFIX + '_misses_by_kind', metrics.AEM_BYTES_PER_FAULT])
                             - metrics.COUNTERS)
    families = parse(text_of(facts(readers=READERS, ebs=EBS), aem_service='aem'))
    assert set(families) == set(metrics.NAMES) - set([metrics.PREFIX + '_misses_by_kind'])
    for name, family in families.items():
        assert name.startswith('aemops_os_tuning_') and family['help']
        assert family['type'] == ('counter' if name in metrics.COUNTERS else 'gauge')
        assert name.endswith('_total') == (name in metrics.COUNTERS)
        if name.endswith('_info'):
            assert set(v for _l, v in family['samples']) == set([1.0])
    assert value(families, metrics.TIMESTAMP) == NOW


def test_the_values_of_the_compliant_host():
    families = parse(text_of())
    assert value(families, 'aemops_os_tuning_compliant') == 1
    assert value(families, 'aemops_os_tuning_misses') == 0
    assert value(families, 'aemops_os_tuning_run_failed') == 0
    assert value(families, 'aemops_os_tuning_read_ahead_bytes', device='dm-0') == 32 * 1024
    assert value(families, 'aemops_os_tuning_read_ahead_bytes', device='nvme1n1') == 4096 * 1024
    assert 'sr0' not in [lab['device'] for lab, _v in families['aemops_os_tuning_read_ahead_bytes']['samples']]
    # wanted: the repository's device and the disk beneath it; not the root disk
    assert sorted(lab['device'] for lab, _v in families['aemops_os_tuning_read_ahead_wanted_bytes']['samples']) == [
        'dm-0', 'nvme1n1']
    assert value(families, 'aemops_os_tuning_read_ahead_wanted_bytes', device='nvme1n1') == 32 * 1024
    assert value(families, 'aemops_os_tuning_target_info', device='nvme1n1', target='beneath dm-0') == 1
    assert value(families, 'aemops_os_tuning_target_info', device='dm-0',
                 target='/opt/aem/crx-quickstart/repository') == 1
    assert value(families, 'aemops_os_tuning_thp_info', enabled='never', defrag='madvise') == 1
    assert value(families, 'aemops_os_tuning_run_info', mode='audit', state='present') == 1
    assert value(families, 'aemops_os_tuning_stale_readers', fix='refresh') == 0
    assert value(families, 'aemops_os_tuning_stale_readers', fix='restart') == 0


@pytest.mark.parametrize('unit', ['aem', 'aem.service'])
def test_aem_bytes_per_fault_is_the_largest_over_the_measured_processes_of_aems_unit(unit):
    families = parse(text_of(facts(readers=READERS), aem_service=unit))
    assert families[metrics.AEM_BYTES_PER_FAULT]['samples'] == [({}, 3990.5 * 1024)]
    assert families[metrics.AEM_BYTES_PER_FAULT]['type'] == 'gauge'


@pytest.mark.parametrize('unit, readers', [
    ('', READERS),  # no unit given: nothing is AEM
    ('aem', {'stale': [], 'needs_restart': [], 'fine': [reader(1, 'aem.service')]}),  # AEM, not measured
    ('aem', {'stale': [], 'needs_restart': [], 'fine': [reader(1, 'other.service', kib=4096.0)]}),
    ('aem', {'stale': [], 'needs_restart': []}),  # facts from before the measurement: no fine list
    ('cq', READERS),  # another unit's name
])
def test_aem_bytes_per_fault_is_absent_when_no_process_of_aem_was_measured(unit, readers):
    families = parse(text_of(facts(readers=readers), aem_service=unit))
    assert metrics.AEM_BYTES_PER_FAULT not in families
    assert value(families, 'aemops_os_tuning_stale_readers', fix='refresh') == len(readers['stale'])


@pytest.mark.parametrize('measured', [
    {'kib_per_fault': float('nan'), 'faults': 3}, {'kib_per_fault': float('inf'), 'faults': 3},
    {'kib_per_fault': -1.0, 'faults': 3}, {'kib_per_fault': '4096', 'faults': 3}, {'kib_per_fault': True, 'faults': 3},
    {'kib_per_fault': 4096.0, 'faults': 0}, {'kib_per_fault': 4096.0, 'faults': None}, {'kib_per_fault': 4096.0},
    {'faults': 3}, [4096.0], 'measured',
])
def test_a_measurement_that_is_not_a_number_of_faults_is_left_out(measured):
    entry = dict(reader(1, 'aem.service'), measured=measured)
    families = parse(text_of(facts(readers={'stale': [], 'needs_restart': [entry], 'fine': 'bad'}), aem_service='aem'))
    assert metrics.AEM_BYTES_PER_FAULT not in families


def test_an_integer_kib_per_fault_is_taken():
    readers = {'stale': [], 'needs_restart': [], 'fine': [reader(7, 'aem', kib=32)]}
    assert value(parse(text_of(facts(readers=readers), aem_service='aem.service')), metrics.AEM_BYTES_PER_FAULT) == 32768


def test_misses_make_the_host_not_compliant_and_are_counted_by_kind():
    found = [{'subject': 'dm-0', 'kind': 'read_ahead', 'message': 'dm-0 reads 4096 KiB, not 32'},
             {'subject': 'nvme1n1', 'kind': 'read_ahead', 'message': '...'},
             {'subject': 'tuned', 'kind': 'tuned_profile', 'message': '...'}]
    families = parse(text_of(facts(compliance={'misses': found, 'compliant': False})))
    assert value(families, 'aemops_os_tuning_compliant') == 0
    assert value(families, 'aemops_os_tuning_misses') == 3
    assert value(families, 'aemops_os_tuning_misses_by_kind', kind='read_ahead') == 2
    assert value(families, 'aemops_os_tuning_misses_by_kind', kind='tuned_profile') == 1


def test_an_error_makes_the_host_not_compliant_without_misses():
    families = parse(text_of(error='Apply read-ahead: permission denied'))
    assert value(families, 'aemops_os_tuning_compliant') == 0
    assert value(families, 'aemops_os_tuning_run_failed') == 1


def test_facts_without_compliance_leave_compliant_and_misses_out():
    f = facts()
    del f['compliance']
    del f['readers']
    families = parse(text_of(f))
    for name in ('_compliant', '_misses', '_stale_readers'):
        assert metrics.PREFIX + name not in families


@pytest.mark.parametrize('kb, state, wanted', [
    (32, 'present', 32), ('64', 'present', 64), (u'128', 'present', 128), (4096.0, 'present', 4096),
    ('auto', 'present', None), (None, 'present', None), (True, 'present', None), (32, 'absent', None),
])
def test_the_wanted_value_is_a_number_or_left_out(kb, state, wanted):
    families = parse(text_of(read_ahead_kb=kb, state=state))
    name = 'aemops_os_tuning_read_ahead_wanted_bytes'
    if wanted is None:
        assert name not in families
    else:
        assert value(families, name, device='dm-0') == wanted * 1024


def test_source_kind_names_what_set_the_read_ahead_as_kernel_readahead_words_it():
    limits = {'optimal_io_size': 0, 'rotational': False, 'max_sectors_kb': 1280}
    kernel = kernel_readahead.default_kb('4.18.0-513.el8.x86_64', limits, 4)
    tuned = {'kb': 4096, 'profile': 'throughput-performance', 'instance': 'disk', 'setting': '>4096'}
    assert metrics.source_kind(kernel_readahead.set_by(4096, kernel, limits, tuned, None)) == 'tuned'
    assert metrics.source_kind(kernel_readahead.set_by(32, kernel, limits, tuned, 32)) == 'udev_rule'
    assert metrics.source_kind(kernel_readahead.set_by(kernel['kb'], kernel, limits, None, None)) == 'kernel'
    assert metrics.source_kind(kernel_readahead.set_by(512, kernel, limits, None, None)) == 'unknown'
    families = parse(text_of())
    assert value(families, 'aemops_os_tuning_read_ahead_source_info', device='nvme1n1', source_kind='tuned',
                 source='tuned throughput-performance [disk] readahead=>4096') == 1
    assert value(families, 'aemops_os_tuning_read_ahead_source_info', device='nvme0n1', source_kind='kernel') == 1


def test_hostile_label_values_are_escaped_and_read_back_exactly():
    device = u'nv"me\\1\n2'
    f = facts(block_devices={device: {'read_ahead_kb': 32, 'set_by': u'tuned "x" [d\\isk]\nreadahead=32'}},
              paths={HOSTILE: {'device': device}}, plan={'targets': [HOSTILE], 'devices': {}, 'underlying': {}})
    content = text_of(f)
    assert u'device="nv\\"me\\\\1\\n2"' in content
    lines = content.split(u'\n')[:-1]
    assert all(line.startswith((u'#', u'aemops_os_tuning_')) for line in lines)  # no line was split
    assert len([line for line in lines if line.startswith(u'aemops_os_tuning_read_ahead_bytes{')]) == 1
    families = parse(content)
    assert value(families, 'aemops_os_tuning_read_ahead_bytes', device=device) == 32 * 1024
    assert value(families, 'aemops_os_tuning_target_info', device=device, target=HOSTILE) == 1
    assert value(families, 'aemops_os_tuning_read_ahead_source_info', device=device,
                 source=u'tuned "x" [d\\isk]\nreadahead=32') == 1


def test_bytes_and_undecodable_names_become_valid_utf8():
    assert metrics.text(b'sd\xffa') == u'sd\ufffda'
    assert metrics.escape_label(u'caf\xe9') == u'caf\xe9'
    content = text_of(facts(block_devices={b'sd\xffa'.decode('utf-8', 'replace'): {'read_ahead_kb': 8}}))
    content.encode('utf-8')


def test_the_same_state_renders_the_same_text_whatever_the_order_of_the_facts():
    f = facts(compliance={'misses': [{'kind': 'b'}, {'kind': 'a'}, {'kind': 'b'}], 'compliant': False})
    again = facts(compliance={'misses': [{'kind': 'a'}, {'kind': 'b'}, {'kind': 'b'}], 'compliant': False},
                  block_devices=dict(reversed(list(f['block_devices'].items()))),
                  plan=dict(f['plan'], underlying={'dm-0': ['nvme1n1']}))
    assert text_of(f) == text_of(again)


def test_only_the_timestamp_line_differs_between_two_runs():
    first, second = text_of(now=NOW), text_of(now=NOW + 3600)
    diff = [(a, b) for a, b in zip(first.split('\n'), second.split('\n')) if a != b]
    assert diff == [('%s %s' % (metrics.TIMESTAMP, NOW), '%s %s' % (metrics.TIMESTAMP, NOW + 3600))]
    assert metrics.without_timestamp(first) == metrics.without_timestamp(second)


def test_the_ebs_counters_are_seconds_and_totals_labelled_by_device_and_volume_only_where_the_page_was_read():
    families = parse(text_of(facts(ebs=EBS)))
    vol = {'device': 'nvme1n1', 'volume_id': 'vol-0123456789abcdef0'}
    p = 'aemops_os_tuning_ebs_'
    assert value(families, p + 'volume_iops_exceeded_seconds_total', **vol) == 1.5
    assert value(families, p + 'volume_throughput_exceeded_seconds_total', **vol) == 41.000001
    assert value(families, p + 'instance_iops_exceeded_seconds_total', **vol) == 0
    assert value(families, p + 'instance_throughput_exceeded_seconds_total', **vol) == 0.000003
    assert value(families, p + 'read_ops_total', **vol) == 123
    assert value(families, p + 'write_ops_total', **vol) == 45
    assert value(families, p + 'read_bytes_total', **vol) == 2 ** 40
    assert value(families, p + 'written_bytes_total', **vol) == 4096
    assert value(families, p + 'read_seconds_total', **vol) == 2.5
    assert value(families, p + 'write_seconds_total', **vol) == 0.00001
    for name in metrics.COUNTERS:
        assert [lab['device'] for lab, _v in families[name]['samples']] == ['nvme1n1']


@pytest.mark.parametrize('hostile', [
    {'nvme1n1': {'stats': {'total_read_ops': 'many', 'total_write_ops': -1.5, 'total_read_bytes': True}}},
    {'nvme1n1': 'not a mapping'}, 'not a mapping', {'nvme1n1': {'stats': None}},
])
def test_a_damaged_ebs_entry_writes_no_series_and_no_error(hostile):
    families = parse(text_of(facts(ebs=hostile)))
    assert not set(families) & metrics.COUNTERS


def test_the_ebs_counters_move_between_runs_without_making_a_change():
    moved = dict(EBS, nvme1n1=dict(EBS['nvme1n1'], stats=dict(EBS['nvme1n1']['stats'], total_read_ops=999)))
    first, second = text_of(facts(ebs=EBS)), text_of(facts(ebs=moved), now=NOW + 60)
    assert first != second
    assert metrics.without_timestamp(first) == metrics.without_timestamp(second)


@pytest.mark.parametrize('v, out', [(True, '1'), (False, '0'), (32, '32'), (1.5, '1.5'), (3.0, '3'),
                                    (float('inf'), '+Inf'), (float('nan'), 'NaN')])
def test_number(v, out):
    assert metrics.number(v) == out


# ---------------------------------------------------------------------------------------------
# The directory and the file

@pytest.fixture
def root(tmpdir):
    path = str(tmpdir.join('root'))
    os.makedirs(files.root_path(path, DIR), 0o755)
    for d in (path, files.root_path(path, '/var'), files.root_path(path, '/var/lib'),
              files.root_path(path, '/var/lib/node_exporter'), files.root_path(path, DIR)):
        os.chmod(d, 0o755)
    return path


def full(root, target=TARGET):
    return files.root_path(root, target)


def publish(root, content=None, check=False, name=metrics.DEFAULT_NAME, directory=DIR):
    return metrics.publish(root, directory, name, text_of() if content is None else content, check_mode=check)


def refused(root, fragment, **kw):
    before = tree_checksum(root)
    with pytest.raises(metrics.MetricsError) as info:
        publish(root, **kw)
    assert fragment in str(info.value), str(info.value)
    assert tree_checksum(root) == before
    return str(info.value)


def test_publish_writes_the_file_0644_root_and_says_changed(root):
    result = publish(root)
    assert result == {'path': TARGET, 'changed': True, 'written': True, 'before': None}
    st = os.lstat(full(root))
    assert stat.S_IMODE(st.st_mode) == 0o644 and (st.st_uid, st.st_gid) == (0, 0)
    with open(full(root), 'rb') as f:
        assert f.read().decode('utf-8') == text_of()
    assert sorted(os.listdir(full(root, DIR))) == [metrics.DEFAULT_NAME]  # no temporary file left
    assert not os.path.exists(files.root_path(root, '/run/aemops-os-tuning'))  # the lock is gone


def test_a_timestamp_only_change_rewrites_the_file_but_is_not_changed(root):
    publish(root)
    result = publish(root, text_of(now=NOW + 60))
    assert result['changed'] is False and result['written'] is True
    with open(full(root)) as f:
        assert '%s %s' % (metrics.TIMESTAMP, NOW + 60) in f.read()
    assert publish(root, text_of(now=NOW + 60)) == dict(result, written=False, before=text_of(now=NOW + 60))


def test_a_value_change_is_changed(root):
    publish(root)
    drift = facts(block_devices={'dm-0': {'read_ahead_kb': 4096, 'set_by': None}})
    result = publish(root, text_of(drift, now=NOW + 60))
    assert result['changed'] is True and result['written'] is True and result['before'] == text_of()


def test_a_wrong_mode_is_changed_and_fixed(root):
    publish(root)
    os.chmod(full(root), 0o600)
    assert publish(root)['changed'] is True
    assert stat.S_IMODE(os.lstat(full(root)).st_mode) == 0o644


def test_check_mode_writes_nothing_and_predicts(root):
    before = tree_checksum(root)
    assert publish(root, check=True)['changed'] is True
    assert tree_checksum(root) == before
    publish(root)
    before = tree_checksum(root)
    assert publish(root, text_of(now=NOW + 5), check=True) == {'path': TARGET, 'changed': False, 'written': False,
                                                               'before': text_of()}
    assert tree_checksum(root) == before


def test_an_empty_file_of_root_is_replaced(root):
    open(full(root), 'w').close()
    os.chmod(full(root), 0o644)
    assert publish(root)['changed'] is True


@pytest.mark.parametrize('name', ['../x.prom', 'x.txt', '.hidden.prom', 'a/b.prom', '', 'x.prom\n'])
def test_a_name_node_exporter_does_not_read_is_refused(root, name):
    refused(root, 'is not a file name node_exporter reads', name=name)


def test_a_missing_directory_is_not_created(root):
    refused(root, 'does not exist', directory='/var/lib/prometheus/textfile')
    assert not os.path.exists(files.root_path(root, '/var/lib/prometheus'))


@pytest.mark.parametrize('directory', ['var/lib/x', '/var/lib/../lib/x', '/var/lib/x/'])
def test_a_directory_path_that_is_not_absolute_and_normalised_is_refused(root, directory):
    refused(root, 'textfile directory path', directory=directory)


def test_a_symlinked_directory_is_refused_and_never_followed(root):
    os.makedirs(files.root_path(root, '/etc/victim'), 0o755)
    os.symlink(files.root_path(root, '/etc/victim'), files.root_path(root, '/var/lib/link'))
    message = refused(root, 'is a symbolic link', directory='/var/lib/link')
    assert 'Give the real directory' in message
    assert os.listdir(files.root_path(root, '/etc/victim')) == []


@pytest.mark.parametrize('mode', [0o777, 0o775, 0o757, 0o1777])
def test_a_directory_others_can_write_is_refused(root, mode):
    os.chmod(full(root, DIR), mode)
    refused(root, 'is writable by group or others (mode %04o' % mode)


def test_a_directory_of_another_user_is_refused(root):
    os.chown(full(root, DIR), 4242, 4242)
    message = refused(root, 'is owned by uid 4242, not root')
    assert 'chown root:root %s' % DIR in message


def test_a_parent_others_can_write_is_refused_unless_sticky(root):
    parent = files.root_path(root, '/var/lib/node_exporter')
    os.chmod(parent, 0o777)
    refused(root, 'above the textfile directory %s, is writable by group or others (mode 0777)' % DIR)
    os.chmod(parent, 0o1777)  # like /tmp: only the owner of an entry may rename it
    assert publish(root)['changed'] is True


def test_a_parent_of_another_user_is_refused(root):
    os.chown(files.root_path(root, '/var/lib/node_exporter'), 4242, 4242)
    refused(root, 'above the textfile directory %s, is owned by uid 4242' % DIR)


def test_a_parent_link_of_another_user_is_refused(root):
    os.makedirs(files.root_path(root, '/data/ne/tf'), 0o755)
    for d in ('/data', '/data/ne', '/data/ne/tf'):
        os.chmod(files.root_path(root, d), 0o755)
    link = files.root_path(root, '/var/ne')
    os.symlink(files.root_path(root, '/data/ne'), link)
    os.lchown(link, 4242, 4242)
    refused(root, 'is a symbolic link owned by uid 4242', directory='/var/ne/tf')
    os.lchown(link, 0, 0)
    assert publish(root, directory='/var/ne/tf')['path'] == '/var/ne/tf/' + metrics.DEFAULT_NAME
    assert os.path.isfile(files.root_path(root, '/data/ne/tf/' + metrics.DEFAULT_NAME))


def test_a_symlinked_target_is_refused_and_its_target_left_alone(root):
    victim = files.root_path(root, '/etc/shadow')
    os.makedirs(os.path.dirname(victim))
    with open(victim, 'w') as f:
        f.write('root:*:1:0\n')
    os.symlink(victim, full(root))
    refused(root, '%s is a symbolic link (to %s)' % (TARGET, victim))
    with open(victim) as f:
        assert f.read() == 'root:*:1:0\n'


def test_a_fifo_target_is_refused_without_opening_it(root):
    os.mkfifo(full(root))
    refused(root, 'is a FIFO (named pipe), not a regular file: it is not opened')
    assert stat.S_ISFIFO(os.lstat(full(root)).st_mode)


def test_a_fifo_target_is_refused_in_check_mode_too(root):
    os.mkfifo(full(root))
    refused(root, 'FIFO', check=True)


def test_a_directory_target_is_refused(root):
    os.mkdir(full(root))
    refused(root, 'is a directory, not a regular file')


def test_a_hard_linked_target_is_refused(root):
    publish(root)
    other = files.root_path(root, '/var/lib/node_exporter/elsewhere')
    os.link(full(root), other)
    refused(root, 'has 2 hard links')


def test_a_target_larger_than_the_cap_is_refused_and_kept(root):
    publish(root)
    with open(full(root), 'a') as f:
        f.write('#' * (metrics.MAX_BYTES + 1))
    refused(root, 'is larger than %d bytes' % metrics.MAX_BYTES)
    assert os.path.getsize(full(root)) > metrics.MAX_BYTES


def test_another_users_file_is_refused(root):
    publish(root)
    os.chown(full(root), 4242, 4242)
    refused(root, 'is owned by uid 4242, not root: another user\'s file is not replaced')


def test_a_file_others_can_write_is_refused(root):
    publish(root)
    os.chmod(full(root), 0o666)
    refused(root, 'is writable by group or others (mode 0666)')


def test_another_tools_file_is_reported_never_overwritten(root):
    with open(full(root), 'w') as f:
        f.write('# HELP other_metric x\n# TYPE other_metric gauge\nother_metric 1\n')
    os.chmod(full(root), 0o644)
    refused(root, 'was not written by aemops.os_tuning (no "Managed by aemops.os_tuning" header)')


def test_a_file_that_is_not_utf8_is_refused(root):
    with open(full(root), 'wb') as f:
        f.write(b'\xff\xfe')
    os.chmod(full(root), 0o644)
    refused(root, 'is not UTF-8 text (byte 0)')


def test_a_lone_surrogate_becomes_a_question_mark():
    if str is bytes:
        pytest.skip('Python 2 encodes lone surrogates to UTF-8')
    name = b'sd\xffa'.decode('utf-8', 'surrogateescape')  # os.listdir's name for an undecodable byte
    assert metrics.escape_label(name) == u'sd?a'
