# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/tuned.py: reading profiles like tuned, and our child profile.

The stock profiles are those of tests/unit/fixtures/tuned (``FakeHost.install_profiles``): abridged
upstream files, with only the keys that matter; the ``host`` fixture has the tuned 2.11 set.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, tuned
from fakehost import FakeHost, fixture

# tuned 2.3 era (RHEL 7.0): a plain value, and THP in the same profile.
THROUGHPUT_PERFORMANCE_2_3 = """\
[main]
summary=Broadly applicable tuning for throughput, old style (test fixture)

[disk]
readahead=4096

[vm]
transparent_hugepages=always
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
    return FakeHost(tmpdir).install_profiles('stock-2.11.0')


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
    text = '# comment\n; other comment\n[main]\nsummary = x = y\n\n[disk]\nreadahead=>4096\n devices = sd*  \n'
    # configparser (tuned 2.17+; the newest rules): ';' starts a comment line, and the indented line continues
    # the value above it (tuned/profiles/loader.py at v2.17.0 and v2.25.1: no empty_lines/indent arguments).
    assert tuned.parse_conf(text) == [
        ('main', [('summary', 'x = y')]),
        ('disk', [('readahead', '>4096\ndevices = sd*')]),
    ]
    # configobj (tuned before 2.17): indentation means nothing; ';' is no comment (see the per-version tests).
    assert tuned.parse_conf(text.replace('; other comment\n', ''), 'x', (2, 16, 0)) == [
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
    host = FakeHost(tmpdir).install_profiles('stock-2.11.0', '/usr/lib/tuned/profiles')
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


@pytest.mark.parametrize('version', [(2, 17, 0), (2, 25, 1), None])
def test_a_conditional_include_loads_when_found_and_is_skipped_when_not(host, version):
    # tuned/profiles/locator.py v2.17.0 get_config (commit 2cc251c): "-name" is loaded when a profile of that name
    # exists, and otherwise returns "", which the loader skips.
    write_profile(host, 'child', '[main]\ninclude=-no-such-profile\n[disk]\nreadahead=32\n', '/etc/tuned')
    assert [p['name'] for p in tuned.load_chain(host.root, 'child', version)] == ['child']
    write_profile(host, 'child2', '[main]\ninclude=-throughput-performance\n[disk]\nreadahead=32\n', '/etc/tuned')
    chain = tuned.load_chain(host.root, 'child2', version)
    assert [(p['name'], p['path']) for p in chain] == [
        ('-throughput-performance', '/usr/lib/tuned/throughput-performance/tuned.conf'),
        ('child2', '/etc/tuned/child2/tuned.conf')]


@pytest.mark.parametrize('version', [(2, 11, 0), (2, 16, 0)])
def test_a_conditional_include_before_2_17_is_a_missing_profile(host, version):
    # tuned/profiles/locator.py v2.16.0 has no conditional loading: "-name" is a name no profile has.
    write_profile(host, 'child', '[main]\ninclude=-throughput-performance\n', '/etc/tuned')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.load_chain(host.root, 'child', version)
    assert 'tuned profile -throughput-performance was not found' in str(info.value)


def test_load_chain_malformed_profile_names_the_file(host):
    write_profile(host, 'broken', '[main]\ninclude=virtual-guest\n[disk]\nreadahead\n', '/etc/tuned')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.load_chain(host.root, 'broken')
    assert '/etc/tuned/broken/tuned.conf line 4' in str(info.value)


def test_load_chain_skips_variable_includes(host):
    write_profile(host, 'cond', '[main]\ninclude=${f:virt_check:virtual-guest:throughput-performance}\n')
    assert [p['name'] for p in tuned.load_chain(host.root, 'cond')] == ['cond']


def test_a_function_include_is_reported_as_not_evaluated(host):
    # Stock openshift (profiles/openshift/tuned.conf at v2.25.1) includes ${f:virt_check:virtual-guest:throughput-
    # performance}; tuned/profiles/functions/function_virt_check.py runs virt-what on the host to choose.
    write_profile(host, 'openshift', '[main]\ninclude=${f:virt_check:virtual-guest:throughput-performance}\n')
    chain = tuned.load_chain(host.root, 'openshift')
    assert chain[-1]['not_evaluated'] == ['${f:virt_check:virtual-guest:throughput-performance}']
    assert tuned.not_evaluated(chain) == [
        'tuned profile openshift (/usr/lib/tuned/openshift/tuned.conf) includes '
        '${f:virt_check:virtual-guest:throughput-performance}, which tuned evaluates on the host and this collection '
        'does not: the [disk] instances of the profile it names are not seen, so not narrowed. Name the profile in '
        'include= instead, or check the devices\' read-ahead after tuned applies it.']
    assert tuned.not_evaluated(tuned.load_chain(host.root, 'virtual-guest')) == []


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
    host = FakeHost(tmpdir).install_profiles('stock-2.11.0', '/usr/lib/tuned/profiles')
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
    text = tuned.render_child(BASELINE, SECTIONS)
    assert files.is_managed(text)
    assert 'include=' not in text
    assert tuned.parse_child(text, '/etc/tuned/aemops-os-tuning/tuned.conf') == {
        'baseline': BASELINE, 'include': [], 'sections': SECTIONS}


def test_rendered_child_is_a_valid_profile(host):
    write_profile(host, tuned.CHILD_PROFILE, tuned.render_child(BASELINE, SECTIONS), '/etc/tuned')
    chain = tuned.load_profiles(host.root, ['virtual-guest', tuned.CHILD_PROFILE])
    assert [p['name'] for p in chain] == ['throughput-performance', 'virtual-guest', tuned.CHILD_PROFILE]


def test_parse_child_damaged_baseline(host):
    text = tuned.render_child(BASELINE, SECTIONS).replace('"auto"}', '"auto"')
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
    write_profile(host, tuned.CHILD_PROFILE, tuned.render_child(BASELINE, SECTIONS), '/etc/tuned')
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
    text = tuned.render_child(BASELINE, sections)
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


# =============================================================================================
# Fidelity to tuned, version by version (issue 10, items 1 to 7).
#
# Each test names the upstream tag and file whose behaviour its fixture reproduces. The stock
# profiles come from tests/unit/fixtures/tuned/ (abridged descriptions of the upstream files,
# see its README.md).

VERSIONS = [(2, 11, 0), (2, 13, 0), (2, 15, 0), (2, 16, 0), (2, 17, 0), (2, 18, 0), (2, 20, 0), (2, 23, 0),
            (2, 25, 1)]
LV_UUID = 'LVM-' + 'a' * 32 + 'b' * 32
LV_PROPS = props('dm-0', DM_UUID=LV_UUID, DM_NAME='vg_aem-lv_repo')
ROOT_PROPS = props('vda', ID_SERIAL='root-disk')


def stock_dir(version):
    """The stock profile set of tuned ``version`` (see tests/unit/fixtures/tuned/README.md)."""
    if version < (2, 13):
        return 'stock-2.11.0'
    if version < (2, 23):
        return 'stock-2.15.0'
    return 'stock-2.25.1'


@pytest.fixture
def bare(tmpdir):
    """A host with no profiles at all (the ``host`` fixture has the tuned 2.11 stock set)."""
    return FakeHost(tmpdir)


def stock_host(bare, version):
    bare.install_profiles(stock_dir(version))
    return bare


def kernel_settings_role(host):
    """One run of linux-system-roles kernel_settings 1.5.0 (tasks/main.yml), as it touches tuned's files.

    Writes its profile (templates/kernel_settings.j2), then "Set active_profile": the current list
    unchanged when the *string* contains ``kernel_settings``, else the list plus `` kernel_settings``;
    written with a folded scalar (a trailing newline); then profile_mode ``manual``. Returns changed.
    """
    changed = False
    text = fixture('tuned/kernel_settings-1.5.0/kernel_settings/tuned.conf')
    path = '/etc/tuned/kernel_settings/tuned.conf'
    if not host.exists(path) or host.read(path) != text:
        host.write(path, text)
        changed = True
    current = (host.read(tuned.ACTIVE_PROFILE_FILE) if host.exists(tuned.ACTIVE_PROFILE_FILE) else '').strip()
    wanted = (current if 'kernel_settings' in current else current + ' kernel_settings') + '\n'
    if current + '\n' != wanted or host.read(tuned.ACTIVE_PROFILE_FILE) != wanted:
        host.write(tuned.ACTIVE_PROFILE_FILE, wanted)
        changed = True
    if not host.exists(tuned.PROFILE_MODE_FILE) or host.read(tuned.PROFILE_MODE_FILE) != 'manual\n':
        host.write(tuned.PROFILE_MODE_FILE, 'manual\n')
        changed = True
    return changed


def our_run(host, version, thp_value='never'):
    """read_ahead then thp, as the modules plan and apply the child (tuned not running). Returns (changed, plans)."""
    plans = []
    parents = tuned.child_state(host.root)[4]
    sections = tuned.disk_sections(host.root, parents, {32: [('DM_UUID', LV_UUID)]}, version)
    plans.append(tuned.plan_child(host.root, 'read_ahead', sections, version))
    changed = tuned.plan_changes(plans[-1])
    rec = Recorder()
    tuned.apply_child(host.root, plans[-1], rec.run, None, False, rec.write, rec.remove)
    plans.append(tuned.plan_child(host.root, 'thp', [('thp', 'vm', [('transparent_hugepages', thp_value)])], version))
    changed = tuned.plan_changes(plans[-1]) or changed
    tuned.apply_child(host.root, plans[-1], rec.run, None, False, rec.write, rec.remove)
    return changed, plans


def child_text_0_1_0(includes):
    """The child 0.1.0 wrote: include= of its parents, activated alone."""
    return ('[main]\nsummary=old layout\ninclude=%s\n# owner: read_ahead\n[disk]\ntype=disk\n'
            'devices_udev_regex=\\A(?![\\s\\S]*^(?:DM_UUID=%s)$)\n'
            '# owner: read_ahead\n[aemops_read_ahead_32]\ntype=disk\ndevices_udev_regex=^(?:DM_UUID=%s)$\nreadahead=32\n'
            % (includes, LV_UUID, LV_UUID))


def thp_conflicts(plan):
    return [c for c in plan['conflicts'] if c['section'] != 'disk']


# -- item 1: composition ----------------------------------------------------------------------

@pytest.mark.parametrize('version', VERSIONS)
def test_the_0_1_0_layout_fails_where_tuned_fails(bare, version):
    """The issue's table. tuned/profiles/loader.py: v2.11.0 passes include= whole (one name);
    v2.13.0 splits it (commit feb6e8b); before v2.16.0 a profile loaded twice is "Cannot find
    profile" (locator.py get_config returns None; commit bd6697f returns "" and skips)."""
    host = stock_host(bare, version)
    host.install_profiles('kernel_settings-1.5.0', '/etc/tuned')
    write_profile(host, tuned.CHILD_PROFILE, child_text_0_1_0('virtual-guest'), '/etc/tuned')
    assert tuned.effective_units(host.root, [tuned.CHILD_PROFILE], version)  # one parent loads everywhere
    write_profile(host, tuned.CHILD_PROFILE, child_text_0_1_0('virtual-guest,kernel_settings'), '/etc/tuned')
    if version < (2, 13):
        with pytest.raises(tuned.TunedProfileError) as info:
            tuned.effective_units(host.root, [tuned.CHILD_PROFILE], version)
        assert 'virtual-guest,kernel_settings was not found' in str(info.value)
    else:
        tuned.effective_units(host.root, [tuned.CHILD_PROFILE], version)
    # The kernel_settings role appended itself after ours.
    if version < (2, 16):
        with pytest.raises(tuned.TunedProfileError) as info:
            tuned.effective_units(host.root, [tuned.CHILD_PROFILE, 'kernel_settings'], version)
        assert 'kernel_settings' in str(info.value)
    else:
        tuned.effective_units(host.root, [tuned.CHILD_PROFILE, 'kernel_settings'], version)


@pytest.mark.parametrize('version', VERSIONS)
@pytest.mark.parametrize('active', [['virtual-guest'], ['virtual-guest', 'kernel_settings']])
def test_the_child_loads_last_in_the_list_on_every_version(bare, version, active):
    host = stock_host(bare, version)
    host.install_profiles('kernel_settings-1.5.0', '/etc/tuned')
    activate(host, *active)
    changed, plans = our_run(host, version)
    assert changed
    assert tuned.active_profiles(host.root) == active + [tuned.CHILD_PROFILE]
    text = host.read(plans[-1]['path'])
    assert 'include=' not in text
    units, chain = tuned.effective_units(host.root, None, version)
    names = [p['name'] for p in chain]
    assert names == ['throughput-performance', 'virtual-guest'] + active[1:] + [tuned.CHILD_PROFILE]
    assert tuned.read_ahead_for_device(units, 'dm-0', LV_PROPS)['readahead']['kb'] == 32
    assert tuned.read_ahead_for_device(units, 'vda', ROOT_PROPS)['readahead']['raw'] == '>4096'
    vm = [u for u in units if u['name'] == 'vm'][0]
    assert vm['options']['transparent_hugepages'] == 'never'
    assert our_run(host, version)[0] is False


@pytest.mark.parametrize('version', [(2, 11, 0), (2, 15, 0), (2, 20, 0), (2, 25, 1)])
@pytest.mark.parametrize('first', ['ours', 'kernel_settings'])
def test_kernel_settings_role_and_ours_converge_in_any_order(bare, version, first):
    """linux-system-roles kernel_settings 1.5.0 appends its name only when missing, so moving ours
    back to the end once is stable: the second run of each is unchanged, and tuned loads the list."""
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    host.write(tuned.PROFILE_MODE_FILE, 'auto\n')
    runs = [lambda: our_run(host, version)[0], lambda: kernel_settings_role(host)]
    if first == 'kernel_settings':
        runs.reverse()
    assert [run() for run in runs] == [True, True]
    if first == 'ours':
        # The role appended itself after ours; our next run moves ours back to the end, once.
        assert tuned.active_profiles(host.root) == ['virtual-guest', tuned.CHILD_PROFILE, 'kernel_settings']
        assert our_run(host, version)[0] is True
    assert tuned.active_profiles(host.root) == ['virtual-guest', 'kernel_settings', tuned.CHILD_PROFILE]
    assert [run() for run in runs] == [False, False]
    assert our_run(host, version)[0] is False and kernel_settings_role(host) is False
    assert tuned.profile_mode(host.root) == 'manual'
    units = tuned.effective_units(host.root, None, version)[0]
    assert [u for u in units if u['name'] == 'vm'][0]['options']['transparent_hugepages'] == 'never'


@pytest.mark.parametrize('version', [(2, 11, 0), (2, 25, 1)])
def test_kernel_settings_thp_is_a_conflict_naming_it(bare, version):
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    kernel_settings_role(host)
    plans = our_run(host, version)[1]
    assert thp_conflicts(plans[-1]) == [
        {'profile': 'kernel_settings', 'section': 'vm', 'option': 'transparent_hugepages', 'value': 'madvise',
         'ours': 'never', 'winner': tuned.CHILD_PROFILE}]
    assert tuned.plan_summary(plans[-1], False)['conflicts'] == plans[-1]['conflicts']


def test_kernel_settings_sysfs_read_ahead_is_a_conflict_it_wins(bare):
    """plugin_sysfs writes any path; its [sysfs] read_ahead_kb competes with our [disk] instance."""
    version = (2, 25, 1)
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    kernel_settings_role(host)
    host.write('/etc/tuned/kernel_settings/tuned.conf', host.read('/etc/tuned/kernel_settings/tuned.conf')
               + '[sysfs]\n/sys/block/dm-*/queue/read_ahead_kb = 4096\n')
    plan = our_run(host, version)[1][0]
    assert {'profile': 'kernel_settings', 'section': 'sysfs', 'option': '/sys/block/dm-*/queue/read_ahead_kb',
            'value': '4096', 'ours': '32', 'winner': 'kernel_settings'} in plan['conflicts']


def test_parent_disk_readahead_narrowed_is_reported_as_ours(bare):
    version = (2, 20, 0)
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    plan = our_run(host, version)[1][0]
    assert plan['conflicts'] == [{'profile': 'throughput-performance', 'section': 'disk', 'option': 'readahead',
                                  'value': '>4096', 'ours': '32', 'winner': tuned.CHILD_PROFILE}]


def test_thunderx_vm_unit_is_reported_with_its_condition(bare):
    """v2.15.0 throughput-performance sets THP never in [vm.thunderx] (uname_regex=aarch64)."""
    version = (2, 15, 0)
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    plan = our_run(host, version, thp_value='madvise')[1][-1]
    assert thp_conflicts(plan) == [{
        'profile': 'throughput-performance', 'section': 'vm.thunderx', 'option': 'transparent_hugepages',
        'value': 'never', 'ours': 'madvise', 'winner': 'throughput-performance',
        'condition': 'uname_regex=aarch64, cpuinfo_regex=${thunderx_cpuinfo_regex}'}]


def test_backout_removes_only_our_name(bare):
    version = (2, 20, 0)
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    host.write(tuned.PROFILE_MODE_FILE, 'auto\n')
    our_run(host, version)
    kernel_settings_role(host)
    our_run(host, version)
    rec = Recorder()
    for owner in ('read_ahead', 'thp'):
        plan = tuned.plan_child(host.root, owner, [], version)
        tuned.apply_child(host.root, plan, rec.run, None, False, rec.write, rec.remove)
    assert tuned.active_profiles(host.root) == ['virtual-guest', 'kernel_settings']
    assert not host.exists(tuned.child_profile_path(host.root))
    assert tuned.profile_mode(host.root) == 'manual'  # the list is not the one we found: kernel_settings needs manual
    assert kernel_settings_role(host) is False


def test_backout_to_the_list_we_found_restores_its_mode(bare):
    version = (2, 20, 0)
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    host.write(tuned.PROFILE_MODE_FILE, 'auto\n')
    our_run(host, version)
    rec = Recorder()
    for owner in ('read_ahead', 'thp'):
        tuned.apply_child(host.root, tuned.plan_child(host.root, owner, [], version), rec.run, None, False,
                          rec.write, rec.remove)
    assert tuned.active_profiles(host.root) == ['virtual-guest']
    assert tuned.profile_mode(host.root) == 'auto'


def test_a_0_1_0_child_active_alone_migrates_to_the_list(bare):
    version = (2, 11, 0)
    host = stock_host(bare, version)
    baseline = {'active_profiles': ['virtual-guest'], 'profile_mode': 'auto'}
    old = files.baseline_line(baseline) + '\n' + child_text_0_1_0('virtual-guest')
    write_profile(host, tuned.CHILD_PROFILE, old, '/etc/tuned')
    activate(host, tuned.CHILD_PROFILE)
    assert our_run(host, version)[0] is True
    assert tuned.active_profiles(host.root) == ['virtual-guest', tuned.CHILD_PROFILE]
    assert 'include=' not in host.read(tuned.child_profile_path(host.root))
    assert our_run(host, version)[0] is False


def test_a_planned_list_tuned_cannot_load_is_refused(bare):
    """tuned 2.15: a custom profile that includes throughput-performance next to virtual-guest
    loads throughput-performance twice: "Cannot find profile", no tuning at all (locator.py v2.15.0)."""
    host = stock_host(bare, (2, 15, 0))
    write_profile(host, 'site', '[main]\ninclude=throughput-performance\n', '/etc/tuned')
    activate(host, 'virtual-guest', 'site')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.plan_child(host.root, 'thp', [('thp', 'vm', [('transparent_hugepages', 'never')])], (2, 15, 0))
    assert 'tuned 2.15 could not load the planned profile list "virtual-guest site aemops-os-tuning"' in str(info.value)
    assert 'cannot load profile throughput-performance twice' in str(info.value)
    plan = tuned.plan_child(host.root, 'thp', [('thp', 'vm', [('transparent_hugepages', 'never')])], (2, 16, 0))
    assert plan['activate'] == ['virtual-guest', 'site', tuned.CHILD_PROFILE]


@pytest.mark.parametrize('version, value, expected', [
    # tuned/profiles/loader.py: v2.11.0 one name; v2.13.0-v2.17.0 re.split(r"\b\s*[,;]\s*"); v2.18.0+ r"\s*[,;]\s*".
    ((2, 11, 0), 'a,b', ['a,b']),
    ((2, 11, 0), 'virtual-guest', ['virtual-guest']),
    ((2, 13, 0), 'a, b;c', ['a', 'b', 'c']),
    ((2, 13, 0), 'a b', ['a b']),
    ((2, 17, 0), 'a-,b', ['a-,b']),
    ((2, 18, 0), 'a-,b', ['a-', 'b']),
    ((2, 25, 1), 'a ; b', ['a', 'b']),
    (None, '', []),
])
def test_split_includes_by_version(version, value, expected):
    assert tuned.split_includes(value, version) == expected


# -- item 2: post_loaded_profile --------------------------------------------------------------

@pytest.mark.parametrize('version, merged', [((2, 13, 0), False), ((2, 14, 0), True), ((2, 25, 1), True)])
def test_post_loaded_profile_is_merged_after_the_list_from_2_14(bare, version, merged):
    """tuned/daemon/daemon.py (v2.14.0, commit 4f5f358) appends /etc/tuned/post_loaded_profile."""
    host = stock_host(bare, version)
    write_profile(host, 'site-thp', '[main]\nsummary=post-loaded\n[vm]\ntransparent_hugepages=always\n', '/etc/tuned')
    host.write(tuned.POST_LOADED_PROFILE_FILE, 'site-thp\n')
    activate(host, 'virtual-guest')
    assert tuned.post_loaded_profile(host.root) == 'site-thp'
    plan = our_run(host, version)[1][-1]
    # tuned-adm profile rewrites active_profile only: the post-loaded profile stays, after ours.
    assert tuned.active_profiles(host.root) == ['virtual-guest', tuned.CHILD_PROFILE]
    assert tuned.loaded_profiles(host.root, version) == ['virtual-guest', tuned.CHILD_PROFILE] + (
        ['site-thp'] if merged else [])
    units = tuned.effective_units(host.root, None, version)[0]
    vm = [u for u in units if u['name'] == 'vm'][0]
    if merged:
        assert vm['options']['transparent_hugepages'] == 'always'
        assert thp_conflicts(plan) == [{'profile': 'site-thp', 'section': 'vm', 'option': 'transparent_hugepages',
                                        'value': 'always', 'ours': 'never', 'winner': 'site-thp'}]
    else:
        assert vm['options']['transparent_hugepages'] == 'never'
        assert thp_conflicts(plan) == []


def test_post_loaded_disk_instance_that_rewidens_takes_our_device(bare):
    version = (2, 20, 0)
    host = stock_host(bare, version)
    write_profile(host, 'site', '[main]\nsummary=x\n[disk]\ndevices_udev_regex=.*\nreadahead=>8192\n', '/etc/tuned')
    host.write(tuned.POST_LOADED_PROFILE_FILE, 'site\n')
    activate(host, 'virtual-guest')
    plan = our_run(host, version)[1][0]
    assert {'profile': 'site', 'section': 'disk', 'option': 'readahead', 'value': '>8192', 'ours': '32',
            'winner': 'site'} in plan['conflicts']
    units = tuned.effective_units(host.root, None, version)[0]
    assert tuned.read_ahead_for_device(units, 'dm-0', LV_PROPS)['profile'] == 'site'


def test_post_loaded_profile_absent_or_empty(bare):
    assert tuned.post_loaded_profile(bare.root) is None
    bare.write(tuned.POST_LOADED_PROFILE_FILE, '\n')
    assert tuned.post_loaded_profile(bare.root) is None


# -- item 3: same-name override ---------------------------------------------------------------

@pytest.mark.parametrize('version', VERSIONS)
def test_same_name_override_includes_the_stock_profile(bare, version):
    """tuned/profiles/locator.py get_config(skip_files): /etc/tuned/X is already loaded, so include=X
    finds /usr/lib/tuned/X (on every version: the stock file is not loaded yet)."""
    host = stock_host(bare, version)
    write_profile(host, 'throughput-performance', '[main]\ninclude=throughput-performance\n[disk]\nreadahead=>8192\n',
                  '/etc/tuned')
    chain = tuned.load_chain(host.root, 'virtual-guest', version)
    assert [p['path'] for p in chain] == ['/usr/lib/tuned/throughput-performance/tuned.conf',
                                          '/etc/tuned/throughput-performance/tuned.conf',
                                          '/usr/lib/tuned/virtual-guest/tuned.conf']
    units = tuned.merge(chain, version)
    assert tuned.read_ahead_for_device(units, 'vda', ROOT_PROPS)['readahead']['raw'] == '>8192'


# -- item 4: booleans -------------------------------------------------------------------------

@pytest.mark.parametrize('version', VERSIONS)
@pytest.mark.parametrize('value, enabled_from', [
    # tuned/profiles/unit.py: v2.11.0 accepts true/1; v2.13.0 adds True (commit d6f0a09); yes/on never.
    ('true', (2, 11)), ('1', (2, 11)), ('True', (2, 13)), ('yes', None), ('on', None), ('false', None),
])
def test_enabled_is_read_as_tuned_reads_it(bare, version, value, enabled_from):
    host = stock_host(bare, version)
    write_profile(host, 'site', '[main]\ninclude=virtual-guest\n[disk]\nenabled=%s\n' % value, '/etc/tuned')
    units = tuned.effective_units(host.root, ['site'], version)[0]
    expected = enabled_from is not None and version[:2] >= enabled_from
    hit = tuned.read_ahead_for_device(units, 'vda', ROOT_PROPS)
    assert (hit is not None) == expected
    # A disabled parent instance is not narrowed by our child either.
    sections = tuned.disk_sections(host.root, ['site'], {32: [('DM_UUID', LV_UUID)]}, version)
    assert ('disk' in [s[1] for s in sections]) == expected


@pytest.mark.parametrize('version, value, replaced', [((2, 11, 0), 'True', False), ((2, 13, 0), 'True', True),
                                                      ((2, 25, 1), 'yes', False), ((2, 25, 1), '1', True)])
def test_replace_is_read_as_tuned_reads_it(bare, version, value, replaced):
    host = stock_host(bare, version)
    write_profile(host, 'site', '[main]\ninclude=virtual-guest\n[disk]\nreplace=%s\ndevices=sd*\n' % value, '/etc/tuned')
    unit = [u for u in tuned.effective_units(host.root, ['site'], version)[0] if u['name'] == 'disk'][0]
    assert ('readahead' not in unit['options']) == replaced


# -- item 5: '#' in values --------------------------------------------------------------------

@pytest.mark.parametrize('version, expected', [
    # v2.11.0-v2.16.0 configobj (list_values=False): '#' after the first character starts a comment.
    ((2, 11, 0), 'ID_SERIAL=vol'), ((2, 16, 0), 'ID_SERIAL=vol'),
    # v2.17.0/v2.18.0 ConfigParser() without inline comments (commit 063277a): '#' is kept.
    ((2, 17, 0), 'ID_SERIAL=vol#1 #x'), ((2, 18, 0), 'ID_SERIAL=vol#1 #x'),
    # v2.19.0+ inline_comment_prefixes=('#') (commit 910ff51): a '#' after whitespace starts a comment.
    ((2, 19, 0), 'ID_SERIAL=vol#1'), ((2, 25, 1), 'ID_SERIAL=vol#1'),
])
def test_hash_in_a_value_by_version(version, expected):
    sections = tuned.parse_conf('[d]\ndevices_udev_regex=ID_SERIAL=vol#1 #x\n', 'x', version)
    assert sections == [('d', [('devices_udev_regex', expected)])]


@pytest.mark.parametrize('version', VERSIONS)
def test_an_identity_with_hash_is_escaped_so_every_parser_keeps_it(bare, version):
    host = stock_host(bare, version)
    serial = 'Disk #1 serial'
    sections = tuned.disk_sections(host.root, ['virtual-guest'], {32: [('ID_SERIAL', serial)]}, version)
    text = tuned.render_child(BASELINE, sections)
    assert '#1' not in text.split('[main]', 1)[1]
    write_profile(host, tuned.CHILD_PROFILE, text, '/etc/tuned')
    units = tuned.effective_units(host.root, ['virtual-guest', tuned.CHILD_PROFILE], version)[0]
    assert tuned.read_ahead_for_device(units, 'sdb', props('sdb', ID_SERIAL=serial))['readahead']['kb'] == 32
    assert tuned.read_ahead_for_device(units, 'sdc', props('sdc', ID_SERIAL='Disk '))['instance'] == 'disk'


def test_a_parent_regex_with_hash_is_copied_without_it(bare):
    """tuned 2.17 keeps '#' in a value; the copy in our child must survive an older parser too."""
    version = (2, 17, 0)
    host = stock_host(bare, version)
    write_profile(host, 'site', '[main]\ninclude=virtual-guest\n[disk]\ndevices_udev_regex=ID_MODEL=[#]x|ID_MODEL=\\#y\n',
                  '/etc/tuned')
    sections = tuned.disk_sections(host.root, ['site'], {32: [('ID_SERIAL', 'ours')]}, version)
    regex = dict(sections[0][2])['devices_udev_regex']
    assert '#' not in regex
    for model, taken in (('#x', True), ('#y', True), ('zz', False)):
        assert (re.search(regex, tuned.udev_properties_text({'ID_MODEL': model}), re.MULTILINE) is not None) == taken


def test_hash_free_regex():
    assert tuned.hash_free_regex(r'a#b\#c[#]\\#') == r'a\x23b\x23c[\x23]\\\x23'
    assert tuned.regex_escape('a#b') == r'a\x23b'


# -- item 6: NVMe native multipath ------------------------------------------------------------

def nvme_namespace(host, name, majmin, multipath):
    """sysfs as the kernel lays it out: under the controller (parent subsystem nvme), or, with
    native multipath, under /sys/devices/virtual/nvme-subsystem/nvme-subsysN (parent nvme-subsystem)."""
    if multipath:
        parent = '/sys/devices/virtual/nvme-subsystem/nvme-subsys0'
        host.symlink(parent + '/subsystem', '../../../../class/nvme-subsystem')
    else:
        parent = '/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0'
        host.symlink(parent + '/subsystem', '../../../../../class/nvme')
    host.mkdir('/sys/class/nvme')
    host.mkdir('/sys/class/nvme-subsystem')
    devdir = parent + '/' + name
    host._register(name, devdir, majmin, whole=True)
    host.write(devdir + '/removable', '0\n')


@pytest.mark.parametrize('version', VERSIONS)
@pytest.mark.parametrize('multipath', [False, True])
def test_nvme_coverage_follows_the_parent_subsystem(bare, version, multipath):
    """tuned/plugins/plugin_disk.py _device_is_supported: parent None or in scsi/virtio/xen, nvme from
    v2.18.0 (commit e6dda32); "nvme-subsystem" is in no version's list."""
    nvme_namespace(bare, 'nvme0n1', '259:0', multipath)
    subsystem = tuned.device_parent_subsystem(bare.root, 'nvme0n1')
    assert subsystem == ('nvme-subsystem' if multipath else 'nvme')
    expected = not multipath and version[:2] >= (2, 18)
    assert tuned.disk_plugin_covers('nvme', version=version, parent_subsystem=subsystem) is expected


def test_parent_subsystem_of_dm_virtio_and_unknown(bare):
    bare.add_dm('dm-0', '253:0', 'vg-lv', LV_UUID)
    assert tuned.device_parent_subsystem(bare.root, 'dm-0') == ''
    assert tuned.disk_plugin_covers('lvm', version=(2, 11, 0), parent_subsystem='') is True
    bare.add_disk('vda', '252:0')
    assert tuned.device_parent_subsystem(bare.root, 'vda') is None  # no subsystem links: fall back to the kind
    bare.symlink('/sys/devices/pci0000:00/0000:00:04.0/virtio1/subsystem', '../../../../bus/virtio')
    assert tuned.device_parent_subsystem(bare.root, 'vda') == 'virtio'
    assert tuned.disk_plugin_covers('disk', version=(2, 11, 0), parent_subsystem='virtio') is True
    assert tuned.disk_plugin_covers('disk', version=(2, 25, 1), parent_subsystem='mmc') is False
    assert tuned.disk_plugin_covers('disk', version=(2, 26, 0), parent_subsystem='mmc') is True


# -- item 7: LVs activated after tuned started ------------------------------------------------

# The udev database entry of a dm device right after its "add" uevent when it is not a coldplug:
# lvm2 udev/10-dm.rules.in (v2_02_187, RHEL 7; v2_03_14, RHEL 8/9) jumps to "dm_disable", so
# DM_NAME/DM_UUID are not set yet and 13-dm-disk.rules is skipped; only the kernel's properties
# and the three disable flags are there.
DM_ADD_PROPS = {
    'DEVNAME': '/dev/dm-3', 'DEVPATH': '/devices/virtual/block/dm-3', 'DEVTYPE': 'disk', 'MAJOR': '253',
    'MINOR': '3', 'SUBSYSTEM': 'block', 'DM_UDEV_DISABLE_SUBSYSTEM_RULES_FLAG': '1',
    'DM_UDEV_DISABLE_DISK_RULES_FLAG': '1', 'DM_UDEV_DISABLE_OTHER_RULES_FLAG': '1',
}
DM_CHANGE_PROPS = dict(DM_ADD_PROPS, DM_NAME='vg_aem-lv_repo', DM_UUID=LV_UUID, DM_UDEV_RULES_VSN='2')
for _flag in ('SUBSYSTEM', 'DISK', 'OTHER'):
    DM_CHANGE_PROPS.pop('DM_UDEV_DISABLE_%s_RULES_FLAG' % _flag)


@pytest.mark.parametrize('version', [(2, 11, 0), (2, 15, 0), (2, 20, 0), (2, 25, 1)])
def test_an_lv_activated_later_is_taken_by_no_instance(bare, version):
    """tuned/plugins/hotplug.py _add_device: on "add" only, the first instance (priority order) whose
    regex matches the udev database then (plugin_disk _get_device_objects). 0.1.0's narrowed [disk]
    took the new LV (>4096; verify failed until a restart); the child now leaves it free, and the next
    profile load (properties complete) gives it to ours."""
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    our_run(host, version)
    units = tuned.effective_units(host.root, None, version)[0]
    assert tuned.hotplug_instance(units, 'dm-3', DM_ADD_PROPS) is None
    assert tuned.hotplug_instance(units, 'dm-3', DM_CHANGE_PROPS) == 'aemops_read_ahead_32'
    # An LV that is not ours, complete in the database (a coldplug or a reload), keeps the parent's tuning.
    other = dict(DM_CHANGE_PROPS, DM_NAME='vg_other-lv', DM_UUID='LVM-other')
    assert tuned.hotplug_instance(units, 'dm-3', other) == 'disk'
    # The 0.1.0 regex (without the dm lookahead) took it at "add".
    old = [dict(u, options=dict(u['options'], devices_udev_regex=u['options']['devices_udev_regex'].replace(
        tuned.UNIDENTIFIED_DM, ''))) if u['name'] == 'disk' else u for u in units]
    assert tuned.hotplug_instance(old, 'dm-3', DM_ADD_PROPS) == 'disk'


def test_no_dm_lookahead_without_a_dm_identity(bare):
    host = stock_host(bare, (2, 20, 0))
    sections = tuned.disk_sections(host.root, ['virtual-guest'], {32: [('ID_SERIAL', 'ours')]})
    assert tuned.UNIDENTIFIED_DM not in dict(sections[0][2])['devices_udev_regex']
    units = tuned.merge(tuned.load_profiles(host.root, ['virtual-guest']) + [
        {'name': tuned.CHILD_PROFILE, 'path': 'x', 'sections': [(n, o) for _w, n, o in sections]}])
    assert tuned.hotplug_instance(units, 'dm-3', DM_ADD_PROPS) == 'disk'


def test_same_sysfs_key_in_our_later_sysfs_unit_is_won_by_ours(bare):
    """Same-named [sysfs] units merge (merger.py); our child merges after kernel_settings."""
    version = (2, 20, 0)
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    kernel_settings_role(host)
    key = '/sys/kernel/mm/transparent_hugepage/khugepaged/defrag'
    host.write('/etc/tuned/kernel_settings/tuned.conf', host.read('/etc/tuned/kernel_settings/tuned.conf')
               + '[sysfs]\n%s = 1\n' % key)
    plan = tuned.plan_child(host.root, 'thp', [('thp', 'vm', [('transparent_hugepages', 'never')]),
                                               ('thp', 'sysfs', [(key, '0')])], version)
    assert {'profile': 'kernel_settings', 'section': 'sysfs', 'option': key, 'value': '1', 'ours': '0',
            'winner': tuned.CHILD_PROFILE} in plan['conflicts']


def test_backout_is_not_blocked_by_a_list_tuned_cannot_load(bare):
    version = (2, 15, 0)
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    our_run(host, version)
    write_profile(host, 'site', '[main]\ninclude=throughput-performance\n', '/etc/tuned')
    activate(host, 'virtual-guest', 'site', tuned.CHILD_PROFILE)
    plan = tuned.plan_child(host.root, 'thp', [], version)
    assert 'cannot load profile throughput-performance twice' in plan['load_error']
    assert tuned.plan_summary(plan, True)['load_error'] == plan['load_error']
    with pytest.raises(tuned.TunedProfileError):
        tuned.plan_child(host.root, 'thp', [('thp', 'vm', [('transparent_hugepages', 'never')])], version)


def test_conflict_warnings_name_only_what_another_profile_wins():
    plan = {'conflicts': [
        {'profile': 'kernel_settings', 'section': 'vm', 'option': 'transparent_hugepages', 'value': 'madvise',
         'ours': 'never', 'winner': tuned.CHILD_PROFILE},
        {'profile': 'my-post', 'section': 'vm', 'option': 'transparent_hugepages', 'value': 'always',
         'ours': 'never', 'winner': 'my-post'},
        {'profile': 'throughput-performance', 'section': 'vm.thunderx', 'option': 'transparent_hugepages',
         'value': 'never', 'ours': 'madvise', 'winner': 'throughput-performance', 'condition': 'cpuinfo_regex=x'}]}
    assert tuned.conflict_warnings(plan) == [
        "tuned profile my-post [vm] transparent_hugepages=always wins over the collection's never: change or remove "
        "it there, or stop loading it after aemops-os-tuning.",
        "tuned profile throughput-performance [vm.thunderx] transparent_hugepages=never wins over the collection's "
        "madvise (where cpuinfo_regex=x): change or remove it there, or stop loading it after aemops-os-tuning."]
    assert tuned.conflict_warnings(None) == []


def test_the_stand_in_throughput_performance_sets_only_what_upstream_sets_on_x86_64():
    # tuned v2.5.0 removed [vm] transparent_hugepages=always from profiles/throughput-performance/tuned.conf
    # (present at v2.4.1); v2.11.0 (RHEL 7) has no [vm], later releases set THP for aarch64 ThunderX only.
    import fakehost
    sections = re.findall(r'^\[([^\]]+)\]', fakehost.THROUGHPUT_PERFORMANCE, re.M)
    upstream = re.findall(r'^\[([^\]]+)\]', fixture('tuned/stock-2.11.0/throughput-performance/tuned.conf'), re.M)
    assert set(sections) <= set(upstream), sections
    assert 'transparent_hugepage' not in fakehost.THROUGHPUT_PERFORMANCE


# -- the profile parser of each tuned version (issue 22) --------------------------------------
#
# redhat-performance/tuned tuned/profiles/loader.py, _load_config_data, at the tags RHEL ships:
# v2.11.0 (RHEL 7) and v2.16.0: ConfigObj(raise_errors=True, list_values=False, interpolation=False);
# v2.17.0, v2.18.0 (RHEL 8.6): ConfigParser() with Python's defaults (commit 063277a);
# v2.19.0: ConfigParser(delimiters=('='), inline_comment_prefixes=('#')) (commit 910ff51);
# v2.20.0 to v2.25.1 (RHEL 8.8+, 9, 10): the same with strict=False (commit 11e9929).
# The expected values were checked against the real parsers run with those arguments: configobj 4.7.2 on
# Python 2.7 and Python 3.6/3.9's configparser (3.12/3.13 differ only for a ']' inside a section name).
V2_11, V2_17, V2_19, V2_20, V2_25 = (2, 11, 0), (2, 17, 0), (2, 19, 0), (2, 20, 0), (2, 25, 1)
REJECTED = 'rejected'


@pytest.mark.parametrize('text, expected', [
    # a key given twice: configobj DuplicateError, configparser DuplicateOptionError while strict; from 2.20 the last wins
    ('[disk]\nreadahead=4096\nreadahead=32\n',
     {V2_11: REJECTED, V2_17: REJECTED, V2_19: REJECTED, V2_20: [('disk', [('readahead', '32')])],
      V2_25: [('disk', [('readahead', '32')])]}),
    # a section given twice: rejected the same way; from 2.20 the two merge, in the first one's place
    ('[disk]\nreadahead=4096\n[vm]\nx=1\n[disk]\ndevices=sdb\n',
     {V2_11: REJECTED, V2_17: REJECTED, V2_19: REJECTED,
      V2_20: [('disk', [('readahead', '4096'), ('devices', 'sdb')]), ('vm', [('x', '1')])]}),
    # an indented line continues the value above it in configparser; configobj ignores indentation
    ('[disk]\nreadahead=>4096\n    devices=sdb\n',
     {V2_11: [('disk', [('readahead', '>4096'), ('devices', 'sdb')])],
      V2_17: [('disk', [('readahead', '>4096\ndevices=sdb')])], V2_25: [('disk', [('readahead', '>4096\ndevices=sdb')])]}),
    # a blank line inside a value is kept, so an indented line after it still continues the value
    ('[disk]\nreadahead=32\n\n  devices=sdb\n',
     {V2_11: [('disk', [('readahead', '32'), ('devices', 'sdb')])], V2_20: [('disk', [('readahead', '32\n\ndevices=sdb')])]}),
    # ':' delimits in 2.17 and 2.18 (Python's default delimiters), not before (configobj) and not after (910ff51)
    ('[disk]\nreadahead:32\n',
     {V2_11: REJECTED, V2_17: [('disk', [('readahead', '32')])], (2, 18, 0): [('disk', [('readahead', '32')])],
      V2_19: REJECTED, V2_25: REJECTED}),
    # the first delimiter wins: a [sysfs] path with ':' before '=' is cut there in 2.17 and 2.18
    ('[sysfs]\n/sys/bus/pci/devices/0000:00:1f.2/x=1\n',
     {V2_11: [('sysfs', [('/sys/bus/pci/devices/0000:00:1f.2/x', '1')])],
      V2_17: [('sysfs', [('/sys/bus/pci/devices/0000', '00:1f.2/x=1')])],
      V2_19: [('sysfs', [('/sys/bus/pci/devices/0000:00:1f.2/x', '1')])]}),
    # ';' starts a comment line in configparser only; configobj reads it as a line without '='
    ('; site tuning\n[disk]\nreadahead=32\n',
     {V2_11: REJECTED, V2_17: [('disk', [('readahead', '32')])], V2_25: [('disk', [('readahead', '32')])]}),
    # [DEFAULT] options appear in every configparser section; configobj has a section named DEFAULT
    ('[DEFAULT]\nreadahead=32\n[disk]\ntype=disk\n',
     {V2_11: [('DEFAULT', [('readahead', '32')]), ('disk', [('type', 'disk')])],
      V2_17: [('disk', [('type', 'disk'), ('readahead', '32')])], V2_25: [('disk', [('type', 'disk'), ('readahead', '32')])]}),
    # a triple-quoted value spans lines in configobj only
    ("[disk]\ndevices='''sda\nsdb'''\n",
     {V2_11: [('disk', [('devices', 'sda\nsdb')])], V2_17: REJECTED}),
    # configparser keeps the spaces inside a section name; configobj strips them
    ('[ disk ]\nreadahead=32\n',
     {V2_11: [('disk', [('readahead', '32')])], V2_20: [(' disk ', [('readahead', '32')])]}),
])
def test_each_tuned_version_accepts_and_rejects_what_its_parser_does(text, expected):
    for version, sections in sorted(expected.items()):
        if sections == REJECTED:
            with pytest.raises(tuned.TunedProfileError) as info:
                tuned.parse_conf(text, '/etc/tuned/site/tuned.conf', version)
            assert '/etc/tuned/site/tuned.conf line ' in str(info.value)
        else:
            assert tuned.parse_conf(text, 'x', version) == sections, version


@pytest.mark.parametrize('version, outcome', [
    (V2_11, REJECTED), (V2_17, REJECTED), (V2_19, REJECTED), (V2_20, 32), (V2_25, 32)])
def test_a_parent_with_a_repeated_key_loads_only_where_tuned_loads_it(bare, version, outcome):
    """A site profile tuned 2.11-2.19 refuses (then it applies no profile at all) is reported, naming the file and
    line; tuned 2.20+ takes the last value (tuned/profiles/loader.py at v2.19.0 and v2.20.0, commit 11e9929)."""
    host = stock_host(bare, version)
    write_profile(host, 'site', '[main]\ninclude=virtual-guest\n[disk]\nreadahead=>4096\nreadahead=32\n', '/etc/tuned')
    if outcome == REJECTED:
        with pytest.raises(tuned.TunedProfileError) as info:
            tuned.effective_units(host.root, ['site'], version)
        assert '/etc/tuned/site/tuned.conf line 5: key readahead given twice in [disk]' in str(info.value)
    else:
        units = tuned.effective_units(host.root, ['site'], version)[0]
        assert tuned.read_ahead_for_device(units, 'sdb', props('sdb'))['readahead']['kb'] == outcome


@pytest.mark.parametrize('version, kb', [(V2_11, 4096), ((2, 16, 0), 4096), (V2_17, None), (V2_25, None)])
def test_an_indented_readahead_is_part_of_the_value_above_from_2_17(bare, version, kb):
    """configparser (tuned/profiles/loader.py v2.17.0+) joins an indented line to the previous value, so the
    ``readahead`` below is no option of its own there; configobj (v2.11.0-v2.16.0) reads two options."""
    host = stock_host(bare, version)
    write_profile(host, 'site', '[main]\nsummary=site\n[disk]\ndevices=sd*\n  readahead=>4096\n', '/etc/tuned')
    hit = tuned.read_ahead_for_device(tuned.effective_units(host.root, ['site'], version)[0], 'sdb', props('sdb'))
    assert (hit['readahead']['kb'] if hit['readahead'] else None) == kb


@pytest.mark.parametrize('version', VERSIONS)
def test_the_child_the_collection_writes_reads_the_same_under_every_parser(bare, version):
    host = stock_host(bare, version)
    activate(host, 'virtual-guest')
    sections = tuned.disk_sections(host.root, ['virtual-guest'], {32: [('ID_SERIAL', 'vol #1; x:y')]}, version)
    plan = tuned.plan_child(host.root, 'read_ahead', sections, version)
    tuned.check_every_parser(plan['after'], plan['path'])
    assert tuned.parse_child(plan['after'], plan['path'])['sections'] == sections


@pytest.mark.parametrize('options, why', [
    ([('transparent_hugepages', 'never'), ('transparent_hugepages', 'never')], 'rejected by tuned 2.11'),
    ([('/sys/devices/pci0000:00/x', '1')], 'read differently by tuned 2.11 and tuned 2.17'),
    ([('transparent_hugepages', 'never #x')], 'read differently by tuned 2.11 and tuned 2.17'),
])
def test_a_child_some_tuned_would_reject_or_misread_is_refused(host, options, why):
    """The child is written once for RHEL 7 to 10: configobj (v2.11.0), configparser with ':' (v2.17.0), with inline
    comments (v2.19.0) and without strict (v2.20.0) must all read it, and read it the same."""
    activate(host, 'virtual-guest')
    with pytest.raises(tuned.TunedProfileError) as info:
        tuned.plan_child(host.root, 'thp', [('thp', 'vm', options)])
    assert 'not valid for every tuned version' in str(info.value)
    assert why in str(info.value)


# -- a unit's priority when a later profile re-declares the unit (issue 22) -------------------

@pytest.mark.parametrize('version, kb', [
    # v2.11.0-v2.22.0: tuned/profiles/unit.py keeps priority among the options; merger.py's options.update takes the
    # later value, so [disk] sorts after [fast] (units/manager.py sorts instances by priority, stably).
    (V2_11, 64), ((2, 20, 0), 64), ((2, 22, 0), 64),
    # v2.23.0 (commit b10bafc): Unit pops priority into an attribute and merger.py does not copy it: [disk] keeps
    # the stock declaration's (none: 0) and, first in the list, takes the disk.
    ((2, 23, 0), 4096), ((2, 24, 0), 4096), (V2_25, 4096),
    # v2.26.0 (commit 94be52a, "Fixed instance priority inheritance", RHEL-94842): merger.py copies it again.
    ((2, 26, 0), 64), (None, 64),
])
def test_a_priority_re_declared_by_a_later_profile_by_version(bare, version, kb):
    host = stock_host(bare, version or (2, 26, 0))
    write_profile(host, 'site', '[main]\nsummary=site\n[disk]\npriority=10\n'
                  '[fast]\ntype=disk\ndevices=sdb\nreadahead=64\n', '/etc/tuned')
    units = tuned.effective_units(host.root, ['virtual-guest', 'site'], version)[0]
    assert tuned.read_ahead_for_device(units, 'sdb', props('sdb'))['readahead']['kb'] == kb
    # replace=1 makes a new unit with the later declaration: its priority counts on every version
    write_profile(host, 'site', '[main]\nsummary=site\n[disk]\nreplace=1\npriority=10\nreadahead=>4096\n'
                  '[fast]\ntype=disk\ndevices=sdb\nreadahead=64\n', '/etc/tuned')
    units = tuned.effective_units(host.root, ['virtual-guest', 'site'], version)[0]
    assert tuned.read_ahead_for_device(units, 'sdb', props('sdb'))['readahead']['kb'] == 64
