# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/tuned.py: reading profiles like tuned, and our child profile.

The fixture profiles are minimal stand-ins for the stock ones, with only the keys that matter.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, tuned
from fakehost import FakeHost

# Current stock layout: read-ahead raised to at least 4096 KiB.
THROUGHPUT_PERFORMANCE = """\
[main]
summary=Broadly applicable tuning for throughput (test fixture)

[cpu]
governor=performance

[disk]
readahead=>4096

[sysctl]
vm.dirty_ratio = 40
"""

# tuned 2.3 era (RHEL 7.0): a plain value, and THP in the same profile.
THROUGHPUT_PERFORMANCE_2_3 = """\
[main]
summary=Broadly applicable tuning for throughput, old style (test fixture)

[disk]
readahead=4096

[vm]
transparent_hugepages=always
"""

VIRTUAL_GUEST = """\
[main]
summary=Tuning for virtual guests (test fixture)
include=throughput-performance

[sysctl]
vm.swappiness = 30
"""

NVME_SERIAL = 'Amazon Elastic Block Store_vol0123456789abcdef0'
OTHER_SERIAL = 'Amazon Elastic Block Store_vol0fedcba987654321f'


def write_profile(host, name, text, directory='/usr/lib/tuned'):
    host.write('%s/%s/tuned.conf' % (directory, name), text)


def activate(host, *names):
    host.write(tuned.ACTIVE_PROFILE_FILE, ' '.join(names) + '\n')


def props(devname, **extra):
    """udev properties as tuned sees them (pyudev includes DEVNAME)."""
    result = {'DEVNAME': '/dev/%s' % devname, 'DEVTYPE': 'disk', 'SUBSYSTEM': 'block'}
    result.update(extra)
    return result


def hit_for(root, name, device_props, profiles=None):
    units, _chain = tuned.effective_units(root, profiles)
    return tuned.read_ahead_for_device(units, name, device_props)


@pytest.fixture
def host(tmpdir):
    host = FakeHost(tmpdir)
    write_profile(host, 'throughput-performance', THROUGHPUT_PERFORMANCE)
    write_profile(host, 'virtual-guest', VIRTUAL_GUEST)
    return host


# ---------------------------------------------------------------------------------------------
# parse_version

@pytest.mark.parametrize('text, expected', [
    ('tuned-adm 2.19.0', (2, 19, 0)),
    ('tuned-adm 2.19.0\n', (2, 19, 0)),
    ('2.11.0-11.el7', (2, 11, 0)),
    ('tuned 2.22', (2, 22, 0)),
    ('', None),
    (None, None),
    ('unknown', None),
])
def test_parse_version(text, expected):
    assert tuned.parse_version(text) == expected


# ---------------------------------------------------------------------------------------------
# parse_conf

def test_parse_conf_sections_in_order_with_comments():
    text = '# comment\n; other comment\n[main]\nsummary = x = y\n\n[disk]\nreadahead=>4096\n  devices = sd*  \n'
    assert tuned.parse_conf(text) == [
        ('main', [('summary', 'x = y')]),
        ('disk', [('readahead', '>4096'), ('devices', 'sd*')]),
    ]


def test_parse_conf_empty():
    assert tuned.parse_conf('') == []
    assert tuned.parse_conf(None) == []


@pytest.mark.parametrize('text, line, what', [
    ('[main]\nsummary=x\n[disk\nreadahead=32\n', 3, 'malformed section header'),
    ('[main]\n[]\n', 2, 'malformed section header'),
    ('[disk]\nreadahead 32\n', 2, 'expected key=value'),
    ('readahead=32\n[disk]\n', 1, 'outside any [section]'),
])
def test_parse_conf_malformed_lines_name_file_and_line(text, line, what):
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.parse_conf(text, '/etc/tuned/bad/tuned.conf')
    msg = str(info.value)
    assert '/etc/tuned/bad/tuned.conf line %d' % line in msg
    assert what in msg


# ---------------------------------------------------------------------------------------------
# profile directories, active profiles

def test_profile_dirs_default(host):
    assert tuned.profile_dirs(host.root) == tuned.DEFAULT_PROFILE_DIRS


def test_profile_dirs_from_tuned_main_conf(host):
    host.write(tuned.MAIN_CONF, '# comment\ndaemon = 1\nprofile_dirs = /usr/lib/tuned/profiles, /etc/tuned/profiles\n')
    assert tuned.profile_dirs(host.root) == ('/usr/lib/tuned/profiles', '/etc/tuned/profiles')


def test_profile_dirs_custom_directory_is_searched(host):
    host.write(tuned.MAIN_CONF, 'profile_dirs=/usr/lib/tuned,/opt/tuned\n')
    write_profile(host, 'site', '[disk]\nreadahead=64\n', '/opt/tuned')
    write_profile(host, 'site', '[disk]\nreadahead=8\n', '/etc/tuned')  # not in profile_dirs
    assert tuned.find_profile(host.root, 'site') == '/opt/tuned/site/tuned.conf'


def test_find_profile_etc_overrides_usr_lib(host):
    write_profile(host, 'throughput-performance', '[disk]\nreadahead=32\n', '/etc/tuned')
    assert tuned.find_profile(host.root, 'throughput-performance') == '/etc/tuned/throughput-performance/tuned.conf'


def test_find_profile_2_23_layout(tmpdir):
    host = FakeHost(tmpdir)
    write_profile(host, 'throughput-performance', THROUGHPUT_PERFORMANCE, '/usr/lib/tuned/profiles')
    assert tuned.find_profile(host.root, 'throughput-performance') == \
        '/usr/lib/tuned/profiles/throughput-performance/tuned.conf'
    write_profile(host, 'throughput-performance', '[disk]\nreadahead=32\n', '/etc/tuned/profiles')
    assert tuned.find_profile(host.root, 'throughput-performance') == \
        '/etc/tuned/profiles/throughput-performance/tuned.conf'


def test_find_profile_missing(host):
    assert tuned.find_profile(host.root, 'nope') is None


def test_find_profile_ignores_directory_without_tuned_conf(host):
    host.mkdir('/etc/tuned/virtual-guest')
    assert tuned.find_profile(host.root, 'virtual-guest') == '/usr/lib/tuned/virtual-guest/tuned.conf'


def test_active_profiles(host):
    assert tuned.active_profiles(host.root) == []
    activate(host, 'virtual-guest')
    assert tuned.active_profiles(host.root) == ['virtual-guest']
    host.write(tuned.ACTIVE_PROFILE_FILE, 'virtual-guest aemops\n')
    assert tuned.active_profiles(host.root) == ['virtual-guest', 'aemops']


def test_profile_mode(host):
    assert tuned.profile_mode(host.root) is None
    host.write(tuned.PROFILE_MODE_FILE, 'manual\n')
    assert tuned.profile_mode(host.root) == 'manual'


# ---------------------------------------------------------------------------------------------
# include chains

def test_load_chain_includes_first(host):
    chain = tuned.load_chain(host.root, 'virtual-guest')
    assert [p['name'] for p in chain] == ['throughput-performance', 'virtual-guest']
    assert chain[0]['path'] == '/usr/lib/tuned/throughput-performance/tuned.conf'


def test_load_chain_multiple_includes_in_order(host):
    write_profile(host, 'a', '[main]\ninclude=throughput-performance, b\n')
    write_profile(host, 'b', '[disk]\nreadahead=64\n')
    assert [p['name'] for p in tuned.load_chain(host.root, 'a')] == ['throughput-performance', 'b', 'a']


@pytest.mark.parametrize('version', [(2, 11, 0), (2, 15, 0)])
def test_load_chain_include_loop_fails_before_2_16(host, version):
    # tuned/profiles/locator.py v2.15.0: get_config returns None when the only file is already loaded.
    write_profile(host, 'a', '[main]\ninclude=b\n')
    write_profile(host, 'b', '[main]\ninclude=a\n')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.load_chain(host.root, 'a', version)
    assert 'cannot load profile a twice' in str(info.value)
    assert 'a -> b -> a' in str(info.value)


@pytest.mark.parametrize('version', [(2, 16, 0), (2, 25, 1), None])
def test_load_chain_include_loop_is_skipped_from_2_16(host, version):
    # tuned/profiles/locator.py v2.16.0 (commit bd6697f): "" for an already-loaded file; the loader skips it.
    write_profile(host, 'a', '[main]\ninclude=b\n')
    write_profile(host, 'b', '[main]\ninclude=a\n')
    assert [p['name'] for p in tuned.load_chain(host.root, 'a', version)] == ['b', 'a']


@pytest.mark.parametrize('version, loads', [((2, 15, 0), False), ((2, 16, 0), True)])
def test_load_chain_self_include(host, version, loads):
    write_profile(host, 'a', '[main]\ninclude=a\n')
    if loads:
        assert [p['name'] for p in tuned.load_chain(host.root, 'a', version)] == ['a']
    else:
        with pytest.raises(tuned.TunedProfileError):
            tuned.load_chain(host.root, 'a', version)


def test_load_chain_missing_include(host):
    write_profile(host, 'child', '[main]\ninclude=no-such-profile\n', '/etc/tuned')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.load_chain(host.root, 'child')
    assert 'tuned profile no-such-profile was not found' in str(info.value)
    assert '/etc/tuned' in str(info.value)


def test_load_chain_malformed_profile_names_the_file(host):
    write_profile(host, 'broken', '[main]\ninclude=virtual-guest\n[disk]\nreadahead\n', '/etc/tuned')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.load_chain(host.root, 'broken')
    assert '/etc/tuned/broken/tuned.conf line 4' in str(info.value)


def test_load_chain_skips_variable_includes(host):
    write_profile(host, 'cond', '[main]\ninclude=${f:virt_check:virtual-guest:throughput-performance}\n')
    assert [p['name'] for p in tuned.load_chain(host.root, 'cond')] == ['cond']


def test_load_chain_too_deep(host):
    for i in range(tuned.MAX_INCLUDE_DEPTH + 2):
        write_profile(host, 'p%d' % i, '[main]\ninclude=p%d\n' % (i + 1))
    write_profile(host, 'p%d' % (tuned.MAX_INCLUDE_DEPTH + 2), '[disk]\nreadahead=1\n')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.load_chain(host.root, 'p0')
    assert 'deeper than' in str(info.value)


# ---------------------------------------------------------------------------------------------
# which [disk] instance takes a device, and its readahead

def test_throughput_performance_raises_to_4096(host):
    activate(host, 'throughput-performance')
    hit = hit_for(host.root, 'nvme1n1', props('nvme1n1', ID_SERIAL=NVME_SERIAL))
    assert hit == {'instance': 'disk', 'profile': 'throughput-performance',
                   'readahead': {'kb': 4096, 'modifier': '>', 'raw': '>4096'}}


def test_virtual_guest_inherits_disk_from_throughput_performance(host):
    activate(host, 'virtual-guest')
    hit = hit_for(host.root, 'nvme1n1', props('nvme1n1'))
    assert hit['instance'] == 'disk'
    assert hit['profile'] == 'throughput-performance'
    assert hit['readahead']['kb'] == 4096
    assert hit['readahead']['modifier'] == '>'


def test_old_style_plain_readahead_and_vm_section(host):
    write_profile(host, 'throughput-performance', THROUGHPUT_PERFORMANCE_2_3)
    activate(host, 'virtual-guest')
    units, _chain = tuned.effective_units(host.root)
    assert [u['name'] for u in units] == ['disk', 'vm', 'sysctl']
    vm = [u for u in units if u['name'] == 'vm'][0]
    assert vm['type'] == 'vm'
    assert vm['options']['transparent_hugepages'] == 'always'
    hit = tuned.read_ahead_for_device(units, 'sda', props('sda'))
    assert hit['readahead'] == {'kb': 4096, 'modifier': '', 'raw': '4096'}


def test_custom_child_in_etc_overrides_readahead(host):
    write_profile(host, 'aemops', '[main]\ninclude=virtual-guest\n[disk]\nreadahead=32\n', '/etc/tuned')
    activate(host, 'aemops')
    hit = hit_for(host.root, 'nvme1n1', props('nvme1n1'))
    assert hit['profile'] == 'aemops'
    assert hit['readahead'] == {'kb': 32, 'modifier': '', 'raw': '32'}


def test_custom_child_disables_disk_instance(host):
    write_profile(host, 'aemops', '[main]\ninclude=virtual-guest\n[disk]\nenabled=false\n', '/etc/tuned')
    activate(host, 'aemops')
    assert hit_for(host.root, 'nvme1n1', props('nvme1n1')) is None


def test_later_same_named_section_re_enables_like_tuned(host):
    """tuned's merger resets enabled (and devices, type) from the later section."""
    write_profile(host, 'off', '[main]\ninclude=throughput-performance\n[disk]\nenabled=false\n', '/etc/tuned')
    write_profile(host, 'on', '[main]\ninclude=off\n[disk]\nreadahead=64\n', '/etc/tuned')
    activate(host, 'on')
    assert hit_for(host.root, 'sda', props('sda'))['readahead']['kb'] == 64


def test_later_same_named_section_resets_devices_to_all(host):
    write_profile(host, 'only-sdb', '[main]\ninclude=throughput-performance\n[disk]\ndevices=sdb\n', '/etc/tuned')
    write_profile(host, 'child', '[main]\ninclude=only-sdb\n[disk]\nreadahead=64\n', '/etc/tuned')
    activate(host, 'only-sdb')
    assert hit_for(host.root, 'sda', props('sda')) is None
    activate(host, 'child')
    assert hit_for(host.root, 'sda', props('sda'))['readahead']['kb'] == 64


def test_custom_child_replace_drops_inherited_options(host):
    write_profile(host, 'aemops', '[main]\ninclude=virtual-guest\n[disk]\nreplace=1\ndevices=sdb\n', '/etc/tuned')
    activate(host, 'aemops')
    units, _chain = tuned.effective_units(host.root)
    disk = [u for u in units if u['name'] == 'disk'][0]
    assert 'readahead' not in disk['options']
    assert disk['profile'] == 'aemops'
    assert hit_for(host.root, 'sdb', props('sdb')) == {'instance': 'disk', 'profile': 'aemops', 'readahead': None}
    assert hit_for(host.root, 'nvme1n1', props('nvme1n1')) is None


def test_replace_keeps_unit_position(host):
    write_profile(host, 'aemops', '[main]\ninclude=throughput-performance\n[disk]\nreplace=1\nreadahead=8\n')
    units, _chain = tuned.effective_units(host.root, ['aemops'])
    assert [u['name'] for u in units] == ['cpu', 'disk', 'sysctl']


def test_udev_regex_instance_with_lower_priority_takes_the_device_first(host):
    write_profile(host, 'aemops', '\n'.join([
        '[main]', 'include=virtual-guest',
        '[mydisk]', 'type=disk', 'devices_udev_regex=ID_SERIAL=.*vol0abc.*', 'priority=-5', 'readahead=32',
    ]) + '\n', '/etc/tuned')
    activate(host, 'aemops')
    ours = hit_for(host.root, 'nvme1n1', props('nvme1n1', ID_SERIAL='Amazon Elastic Block Store_vol0abc'))
    assert ours == {'instance': 'mydisk', 'profile': 'aemops', 'readahead': {'kb': 32, 'modifier': '', 'raw': '32'}}
    other = hit_for(host.root, 'nvme2n1', props('nvme2n1', ID_SERIAL=OTHER_SERIAL))
    assert other['instance'] == 'disk'
    assert other['readahead']['kb'] == 4096


def test_same_priority_first_declared_instance_wins(host):
    write_profile(host, 'aemops', '\n'.join([
        '[main]', 'include=throughput-performance',
        '[mydisk]', 'type=disk', 'devices_udev_regex=ID_SERIAL=.*vol0abc.*', 'readahead=32',
    ]) + '\n', '/etc/tuned')
    hit = hit_for(host.root, 'nvme1n1', props('nvme1n1', ID_SERIAL='x_vol0abc'), ['aemops'])
    assert hit['instance'] == 'disk'  # [disk] came first from the include and has the same priority


def test_devices_udev_regex_ignores_devices_option(host):
    unit = {'name': 'd', 'type': 'disk', 'profile': 'p',
            'options': {'devices': 'sdz', 'devices_udev_regex': r'^ID_SERIAL=abc$'}}
    assert tuned.instance_matches(unit, 'sda', {'ID_SERIAL': 'abc'})
    assert not tuned.instance_matches(unit, 'sdz', {'ID_SERIAL': 'abd'})


def test_devices_udev_regex_searches_sorted_property_lines():
    assert tuned.udev_properties_text({'B': '2', 'A': '1'}) == 'A=1\nB=2\n'
    unit = {'options': {'devices_udev_regex': r'^A=1$\n^B=2$'}}
    assert tuned.instance_matches(unit, 'sda', {'B': '2', 'A': '1'})


def test_invalid_udev_regex_matches_nothing():
    unit = {'options': {'devices_udev_regex': 'ID_SERIAL=(unclosed'}}
    assert not tuned.instance_matches(unit, 'sda', {'ID_SERIAL': 'x'})


def test_devices_exclusion(host):
    write_profile(host, 'aemops', '[main]\ninclude=throughput-performance\n[disk]\ndevices=!nvme0n1\n', '/etc/tuned')
    activate(host, 'aemops')
    assert hit_for(host.root, 'nvme0n1', props('nvme0n1')) is None
    assert hit_for(host.root, 'nvme1n1', props('nvme1n1'))['readahead']['kb'] == 4096


@pytest.mark.parametrize('devices, name, expected', [
    ('*', 'sda', True),
    ('sd*', 'sda', True),
    ('sd*', 'nvme0n1', False),
    ('sda, sdb', 'sdb', True),
    ('sda sdb', 'sdc', False),
    ('!sda', 'sdb', True),
    ('!sda', 'sda', False),
    ('sd*, !sda', 'sda', False),
    ('sd*,!sda', 'sdb', True),
    ('nvme[0-1]n1', 'nvme1n1', True),
])
def test_devices_globs(devices, name, expected):
    unit = {'options': {'devices': devices}}
    assert tuned.instance_matches(unit, name, {}) is expected


def test_sectors_suffix(host):
    write_profile(host, 'sectors', '[disk]\nreadahead=8192 s\n', '/etc/tuned')
    hit = hit_for(host.root, 'sda', props('sda'), ['sectors'])
    assert hit['readahead'] == {'kb': 4096, 'modifier': '', 'raw': '8192 s'}


def test_multiple_active_profiles_later_wins(host):
    write_profile(host, 'aemops', '[disk]\nreadahead=32\n', '/etc/tuned')
    host.write(tuned.ACTIVE_PROFILE_FILE, 'virtual-guest aemops\n')
    units, chain = tuned.effective_units(host.root)
    assert [p['name'] for p in chain] == ['throughput-performance', 'virtual-guest', 'aemops']
    hit = tuned.read_ahead_for_device(units, 'sda', props('sda'))
    assert hit['profile'] == 'aemops'
    assert hit['readahead']['kb'] == 32


def test_multiple_active_profiles_earlier_section_survives(host):
    write_profile(host, 'aemops', '[vm]\ntransparent_hugepages=never\n', '/etc/tuned')
    host.write(tuned.ACTIVE_PROFILE_FILE, 'virtual-guest aemops\n')
    assert hit_for(host.root, 'sda', props('sda'))['readahead']['raw'] == '>4096'


def test_profiles_in_2_23_layout_with_child_in_etc(tmpdir):
    host = FakeHost(tmpdir)
    write_profile(host, 'throughput-performance', THROUGHPUT_PERFORMANCE, '/usr/lib/tuned/profiles')
    write_profile(host, 'virtual-guest', VIRTUAL_GUEST, '/usr/lib/tuned/profiles')
    write_profile(host, 'aemops', '[main]\ninclude=virtual-guest\n[disk]\nreadahead=32\n', '/etc/tuned/profiles')
    activate(host, 'aemops')
    units, chain = tuned.effective_units(host.root)
    assert [p['path'] for p in chain] == [
        '/usr/lib/tuned/profiles/throughput-performance/tuned.conf',
        '/usr/lib/tuned/profiles/virtual-guest/tuned.conf',
        '/etc/tuned/profiles/aemops/tuned.conf',
    ]
    assert tuned.read_ahead_for_device(units, 'sda', props('sda'))['readahead']['kb'] == 32


def test_no_disk_instance(host):
    write_profile(host, 'cpu-only', '[cpu]\ngovernor=performance\n')
    assert hit_for(host.root, 'sda', props('sda'), ['cpu-only']) is None


def test_disk_instance_without_readahead(host):
    write_profile(host, 'elevator', '[disk]\nelevator=none\n')
    assert hit_for(host.root, 'sda', props('sda'), ['elevator']) == {
        'instance': 'disk', 'profile': 'elevator', 'readahead': None}


def test_disk_instances_sorted_by_priority_stably():
    units = [
        {'name': 'a', 'type': 'disk', 'options': {}},
        {'name': 'b', 'type': 'disk', 'options': {'priority': '-1'}},
        {'name': 'c', 'type': 'disk', 'options': {'priority': 'bogus'}},
        {'name': 'off', 'type': 'disk', 'options': {'priority': '-9', 'enabled': 'false'}},
        {'name': 'cpu', 'type': 'cpu', 'options': {}},
        {'name': 'd', 'type': 'disk', 'options': {'priority': '5'}},
    ]
    assert [u['name'] for u in tuned.disk_instances(units)] == ['b', 'a', 'c', 'd']


# ---------------------------------------------------------------------------------------------
# readahead values

@pytest.mark.parametrize('value, expected', [
    ('4096', {'kb': 4096, 'modifier': '', 'raw': '4096'}),
    ('>4096', {'kb': 4096, 'modifier': '>', 'raw': '>4096'}),
    ('<256', {'kb': 256, 'modifier': '<', 'raw': '<256'}),
    (' > 4096 ', {'kb': 4096, 'modifier': '>', 'raw': '> 4096'}),
    ('8192 s', {'kb': 4096, 'modifier': '', 'raw': '8192 s'}),
    ('>8192 sectors', {'kb': 4096, 'modifier': '>', 'raw': '>8192 sectors'}),
    ('64 kb', {'kb': 64, 'modifier': '', 'raw': '64 kb'}),
])
def test_parse_readahead(value, expected):
    assert tuned.parse_readahead(value) == expected


@pytest.mark.parametrize('value', ['', '>', 'lots', '-32', '4k'])
def test_parse_readahead_rejects_non_numbers(value):
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.parse_readahead(value)
    assert 'not a number of KiB' in str(info.value)


def test_unparsable_readahead_in_profile_is_reported_not_raised(host):
    # tuned ignores a value it cannot parse; the device still belongs to the instance.
    write_profile(host, 'bad', '[disk]\nreadahead=fast\n')
    units, _chain = tuned.effective_units(host.root, ['bad'])
    hit = tuned.read_ahead_for_device(units, 'sda', props('sda'))
    assert hit['readahead'] is None
    assert hit['unparsed'] == 'fast'


def test_readahead_from_variables_is_expanded(host):
    write_profile(host, 'vars', '[variables]\nra=8192\n[disk]\nreadahead=>${ra}\n')
    units, _chain = tuned.effective_units(host.root, ['vars'])
    assert tuned.read_ahead_for_device(units, 'sda', props('sda'))['readahead']['kb'] == 8192


@pytest.mark.parametrize('raw, current, expected', [
    ('>4096', 32, 4096),
    ('>4096', 8192, 8192),
    ('<256', 4096, 256),
    ('<256', 32, 32),
    ('32', 4096, 32),
    ('4096', 32, 4096),
])
def test_expected_read_ahead(raw, current, expected):
    assert tuned.expected_read_ahead(tuned.parse_readahead(raw), current) == expected


@pytest.mark.parametrize('kind, removable, version, expected', [
    ('nvme', False, (2, 17, 0), False),
    ('nvme', False, (2, 11, 0), False),
    ('nvme', False, (2, 18, 0), True),
    ('nvme', False, (2, 21, 1), True),
    ('nvme', False, None, True),
    ('disk', False, (2, 11, 0), True),
    ('lvm', False, (2, 11, 0), True),
    ('md', False, None, True),
    ('part', False, None, False),
    ('disk', True, None, False),
])
def test_disk_plugin_covers(kind, removable, version, expected):
    assert tuned.disk_plugin_covers(kind, removable=removable, version=version) is expected


# ---------------------------------------------------------------------------------------------
# Our child profile: location, rendering, parsing

def test_user_profile_dir_classic(host):
    assert tuned.user_profile_dir(host.root) == '/etc/tuned'
    assert tuned.child_profile_path(host.root) == '/etc/tuned/aemops-os-tuning/tuned.conf'


def test_user_profile_dir_2_23_layout(host):
    host.mkdir('/usr/lib/tuned/profiles')
    assert tuned.user_profile_dir(host.root) == '/etc/tuned/profiles'


def test_user_profile_dir_from_profile_dirs(host):
    host.write(tuned.MAIN_CONF, 'profile_dirs=/usr/lib/tuned,/srv/tuned\n')
    assert tuned.child_profile_path(host.root) == '/srv/tuned/aemops-os-tuning/tuned.conf'


SECTIONS = [
    ('read_ahead', 'disk', [('type', 'disk'), ('devices_udev_regex', r'\A(?![\s\S]*^(?:DM_UUID=x)$)')]),
    ('read_ahead', 'aemops_read_ahead_32', [('type', 'disk'), ('devices_udev_regex', '^(?:DM_UUID=x)$'),
                                            ('readahead', '32')]),
    ('thp', 'vm', [('transparent_hugepages', 'never')]),
]
BASELINE = {'active_profiles': ['virtual-guest'], 'profile_mode': 'auto'}


def test_render_parse_child_roundtrip():
    text = tuned.render_child(BASELINE, ['virtual-guest'], SECTIONS)
    assert files.is_managed(text)
    assert 'include=' not in text
    assert tuned.parse_child(text, '/etc/tuned/aemops-os-tuning/tuned.conf') == {
        'baseline': BASELINE, 'include': [], 'sections': SECTIONS}


def test_rendered_child_is_a_valid_profile(host):
    write_profile(host, tuned.CHILD_PROFILE, tuned.render_child(BASELINE, ['virtual-guest'], SECTIONS), '/etc/tuned')
    chain = tuned.load_profiles(host.root, ['virtual-guest', tuned.CHILD_PROFILE])
    assert [p['name'] for p in chain] == ['throughput-performance', 'virtual-guest', tuned.CHILD_PROFILE]


def test_parse_child_damaged_baseline(host):
    text = tuned.render_child(BASELINE, ['virtual-guest'], SECTIONS).replace('"auto"}', '"auto"')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.parse_child(text, '/etc/tuned/aemops-os-tuning/tuned.conf')
    assert 'damaged baseline record' in str(info.value)


def test_replace_owned_keeps_other_owners_and_a_fixed_order():
    new = [('read_ahead', 'aemops_read_ahead_64', [('readahead', '64')])]
    result = tuned.replace_owned(SECTIONS, 'read_ahead', new)
    assert result == new + [SECTIONS[2]]


def test_two_owners_rewriting_in_turn_settle():
    # read_ahead then thp then read_ahead again with the same sections: nothing moves.
    ra = [('read_ahead', 'disk', [('type', 'disk')]), ('read_ahead', 'aemops_read_ahead_32', [('readahead', '32')])]
    thp_sections = [('thp', 'vm', [('transparent_hugepages', 'never')])]
    first = tuned.replace_owned(tuned.replace_owned([], 'read_ahead', ra), 'thp', thp_sections)
    again = tuned.replace_owned(tuned.replace_owned(first, 'read_ahead', ra), 'thp', thp_sections)
    assert tuned.replace_owned(first, 'read_ahead', ra) == first
    assert again == first


def test_replace_owned_refuses_a_section_owned_by_another_module():
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.replace_owned(SECTIONS, 'read_ahead', [('read_ahead', 'vm', [])])
    assert '[vm] is wanted by both read_ahead and thp' in str(info.value)


def test_child_state_records_active_profiles_first_time(host):
    activate(host, 'virtual-guest')
    host.write(tuned.PROFILE_MODE_FILE, 'auto\n')
    path, before, current, baseline, parents = tuned.child_state(host.root)
    assert path == '/etc/tuned/aemops-os-tuning/tuned.conf'
    assert before is None and current is None
    assert baseline == {'active_profiles': ['virtual-guest'], 'profile_mode': 'auto'}
    assert parents == ['virtual-guest']


def test_child_state_keeps_recorded_parents_once_active(host):
    write_profile(host, tuned.CHILD_PROFILE, tuned.render_child(BASELINE, ['virtual-guest'], SECTIONS), '/etc/tuned')
    activate(host, tuned.CHILD_PROFILE)
    _path, before, current, baseline, parents = tuned.child_state(host.root)
    assert before is not None
    assert current['sections'] == SECTIONS
    assert baseline == BASELINE
    assert parents == ['virtual-guest']


def test_plan_child_first_write_activates(host):
    activate(host, 'virtual-guest')
    plan = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    assert plan['before'] is None
    assert plan['activate'] == ['virtual-guest', tuned.CHILD_PROFILE]
    assert plan['restore'] is None
    assert tuned.parse_child(plan['after'], plan['path'])['sections'] == SECTIONS[:2]


def test_plan_child_already_active_and_unchanged(host):
    activate(host, 'virtual-guest')
    first = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    host.write(first['path'], first['after'])
    activate(host, 'virtual-guest', tuned.CHILD_PROFILE)
    again = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    assert again['after'] == again['before']
    assert again['activate'] is None


def test_plan_child_last_owner_leaving_removes_and_restores(host):
    activate(host, 'virtual-guest')
    first = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    host.write(first['path'], first['after'])
    activate(host, tuned.CHILD_PROFILE)
    plan = tuned.plan_child(host.root, 'read_ahead', [])
    assert plan['after'] is None
    assert plan['restore'] == ['virtual-guest']


def test_plan_child_other_owner_stays(host):
    activate(host, 'virtual-guest')
    first = tuned.plan_child(host.root, 'thp', [SECTIONS[2]])
    host.write(first['path'], first['after'])
    plan = tuned.plan_child(host.root, 'read_ahead', [])
    assert plan['after'] == plan['before']


def test_plan_child_without_active_profile_is_an_error(host):
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    assert 'tuned has no active profile' in str(info.value)


# ---------------------------------------------------------------------------------------------
# disk_sections: the generated profile makes tuned take exactly our devices

def _child_units(host, parents, groups):
    sections = tuned.disk_sections(host.root, parents, groups)
    text = tuned.render_child(BASELINE, parents, sections)
    write_profile(host, tuned.CHILD_PROFILE, text, '/etc/tuned')
    return tuned.effective_units(host.root, tuned.desired_active(parents))[0]


def test_regex_escape():
    assert tuned.regex_escape('a.b*c(d)[e]{f}|g^h$i+j?k\\l') == 'a\\.b\\*c\\(d\\)\\[e\\]\\{f\\}\\|g\\^h\\$i\\+j\\?k\\\\l'
    assert tuned.regex_escape('Amazon Elastic Block Store_vol0') == 'Amazon Elastic Block Store_vol0'
    assert re.match(tuned.regex_escape('x.y(z)'), 'x.y(z)')


def test_disk_sections_without_groups_is_empty(host):
    assert tuned.disk_sections(host.root, ['virtual-guest'], {}) == []


def test_disk_sections_take_our_devices_only(host):
    units = _child_units(host, ['virtual-guest'], {32: [('ID_SERIAL', NVME_SERIAL), ('DM_UUID', 'LVM-abc')]})
    ours = tuned.read_ahead_for_device(units, 'nvme1n1', props('nvme1n1', ID_SERIAL=NVME_SERIAL))
    assert ours['instance'] == 'aemops_read_ahead_32'
    assert ours['readahead']['kb'] == 32
    lv = tuned.read_ahead_for_device(units, 'dm-0', props('dm-0', DM_UUID='LVM-abc', DM_NAME='vg-lv'))
    assert lv['instance'] == 'aemops_read_ahead_32'
    other = tuned.read_ahead_for_device(units, 'nvme2n1', props('nvme2n1', ID_SERIAL=OTHER_SERIAL))
    assert other['instance'] == 'disk'
    assert other['readahead']['raw'] == '>4096'


def test_disk_sections_exact_identity_not_prefix(host):
    units = _child_units(host, ['virtual-guest'], {32: [('ID_SERIAL', 'disk-1')]})
    similar = tuned.read_ahead_for_device(units, 'sdb', props('sdb', ID_SERIAL='disk-10'))
    assert similar['instance'] == 'disk'


def test_disk_sections_one_instance_per_value(host):
    units = _child_units(host, ['virtual-guest'], {32: [('ID_SERIAL', 'a')], 64: [('ID_SERIAL', 'b')]})
    assert tuned.read_ahead_for_device(units, 'sda', props('sda', ID_SERIAL='a'))['readahead']['kb'] == 32
    assert tuned.read_ahead_for_device(units, 'sdb', props('sdb', ID_SERIAL='b'))['readahead']['kb'] == 64


def test_disk_sections_keep_parent_device_globs(host):
    write_profile(host, 'site', '[main]\ninclude=virtual-guest\n[disk]\ndevices=sd*, !sdc\n', '/etc/tuned')
    units = _child_units(host, ['site'], {32: [('ID_SERIAL', 'ours')]})
    assert tuned.read_ahead_for_device(units, 'sdb', props('sdb', ID_SERIAL='x'))['instance'] == 'disk'
    assert tuned.read_ahead_for_device(units, 'sdc', props('sdc', ID_SERIAL='y')) is None
    assert tuned.read_ahead_for_device(units, 'nvme2n1', props('nvme2n1', ID_SERIAL='z')) is None
    assert tuned.read_ahead_for_device(units, 'sdd', props('sdd', ID_SERIAL='ours'))['instance'] == \
        'aemops_read_ahead_32'


def test_disk_sections_keep_parent_udev_regex_instances(host):
    write_profile(host, 'site', '\n'.join([
        '[main]', 'include=virtual-guest',
        '[fast]', 'type=disk', 'devices_udev_regex=ID_MODEL=Fast.*', 'priority=-5', 'readahead=8192',
    ]) + '\n', '/etc/tuned')
    units = _child_units(host, ['site'], {32: [('ID_SERIAL', 'ours')]})
    fast_other = tuned.read_ahead_for_device(units, 'sdb', props('sdb', ID_MODEL='FastDisk', ID_SERIAL='x'))
    assert fast_other['instance'] == 'fast'
    assert fast_other['readahead']['kb'] == 8192
    fast_ours = tuned.read_ahead_for_device(units, 'sdc', props('sdc', ID_MODEL='FastDisk', ID_SERIAL='ours'))
    assert fast_ours['instance'] == 'aemops_read_ahead_32'


def test_disk_sections_skip_disabled_parent_instances(host):
    write_profile(host, 'site', '[main]\ninclude=virtual-guest\n[disk]\nenabled=false\n', '/etc/tuned')
    sections = tuned.disk_sections(host.root, ['site'], {32: [('ID_SERIAL', 'ours')]})
    assert [s[1] for s in sections] == ['aemops_read_ahead_32']


def test_disk_sections_escape_identity_values(host):
    value = 'odd.serial(1)+x'
    units = _child_units(host, ['virtual-guest'], {32: [('ID_SERIAL', value)]})
    assert tuned.read_ahead_for_device(units, 'sda', props('sda', ID_SERIAL=value))['readahead']['kb'] == 32
    assert tuned.read_ahead_for_device(units, 'sdb', props('sdb', ID_SERIAL='oddXserial1+x'))['instance'] == 'disk'


# ---------------------------------------------------------------------------------------------
# apply_child

class Recorder(object):
    def __init__(self, rc=0):
        self.rc = rc
        self.commands = []
        self.writes = {}
        self.removed = []

    def run(self, cmd):
        self.commands.append(cmd)
        return self.rc, '', 'boom' if self.rc else ''

    def write(self, path, text):
        self.writes[path] = text
        files.atomic_write(path, text)

    def remove(self, path):
        self.removed.append(path)
        files.remove_file(path)


def test_apply_child_with_tuned_running_uses_tuned_adm(host):
    activate(host, 'virtual-guest')
    plan = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    rec = Recorder()
    done = tuned.apply_child(host.root, plan, rec.run, '/usr/sbin/tuned-adm', True, rec.write, rec.remove)
    assert rec.commands == [['/usr/sbin/tuned-adm', 'profile', 'virtual-guest', tuned.CHILD_PROFILE]]
    assert host.read(plan['path']) == plan['after']
    assert done == ['wrote %s' % plan['path'], 'activated virtual-guest %s' % tuned.CHILD_PROFILE]
    assert tuned.active_profiles(host.root) == ['virtual-guest']  # tuned-adm would change it, not us


def test_apply_child_without_tuned_running_writes_state_files(host):
    activate(host, 'virtual-guest')
    plan = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    rec = Recorder()
    tuned.apply_child(host.root, plan, rec.run, '/usr/sbin/tuned-adm', False, rec.write, rec.remove)
    assert rec.commands == []
    assert tuned.active_profiles(host.root) == ['virtual-guest', tuned.CHILD_PROFILE]
    assert tuned.profile_mode(host.root) == 'manual'


def test_apply_child_changed_file_while_active_reloads(host):
    activate(host, 'virtual-guest')
    first = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    host.write(first['path'], first['after'])
    activate(host, 'virtual-guest', tuned.CHILD_PROFILE)
    plan = tuned.plan_child(host.root, 'read_ahead', SECTIONS[1:2])
    assert plan['activate'] is None
    rec = Recorder()
    tuned.apply_child(host.root, plan, rec.run, '/usr/sbin/tuned-adm', True, rec.write, rec.remove)
    assert rec.commands == [['/usr/sbin/tuned-adm', 'profile', 'virtual-guest', tuned.CHILD_PROFILE]]


def test_apply_child_removal_restores_parents(host):
    activate(host, 'virtual-guest')
    first = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    host.write(first['path'], first['after'])
    activate(host, tuned.CHILD_PROFILE)
    plan = tuned.plan_child(host.root, 'read_ahead', [])
    rec = Recorder()
    done = tuned.apply_child(host.root, plan, rec.run, '/usr/sbin/tuned-adm', False, rec.write, rec.remove)
    assert not host.exists(plan['path'])
    assert tuned.active_profiles(host.root) == ['virtual-guest']
    assert done == ['activated virtual-guest', 'removed %s' % plan['path']]


def test_apply_child_tuned_adm_failure(host):
    activate(host, 'virtual-guest')
    plan = tuned.plan_child(host.root, 'read_ahead', SECTIONS[:2])
    rec = Recorder(rc=1)
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.apply_child(host.root, plan, rec.run, '/usr/sbin/tuned-adm', True, rec.write, rec.remove)
    assert 'tuned-adm profile virtual-guest aemops-os-tuning failed: boom' in str(info.value)
