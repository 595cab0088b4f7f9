# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/thp.py: reading, validating and writing THP in sysfs.

The THP files are built by ``FakeHost.add_thp`` in the kernel's own formats. Writes go
through ``FakeHost.thp_open`` (patched in as ``thp.open``), which behaves like sysfs: an
offered value moves the brackets, anything else fails with EINVAL and changes nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import thp, tuned
from fakehost import THP_DIR, THP_DIR_RHEL6, FakeHost

EL8_DEFRAG = ['always', 'defer', 'defer+madvise', 'madvise', 'never']
EL7_DEFRAG = ['always', 'madvise', 'never']


@pytest.fixture
def host(tmpdir, monkeypatch):
    fake = FakeHost(tmpdir)
    monkeypatch.setattr(thp, 'open', fake.thp_open(), raising=False)
    return fake


# ---------------------------------------------------------------------------------------------
# parse_choice

@pytest.mark.parametrize('text, expected', [
    ('always madvise [never]\n', ('never', ['always', 'madvise', 'never'])),
    ('[always] madvise never', ('always', ['always', 'madvise', 'never'])),
    ('always defer [defer+madvise] madvise never\n', ('defer+madvise', EL8_DEFRAG)),
    ('always defer defer+madvise [madvise] never\n', ('madvise', EL8_DEFRAG)),
    ('0\n', ('0', [])),
    ('1', ('1', [])),
    ('[yes] no\n', ('yes', ['yes', 'no'])),        # khugepaged/defrag before 2011 (RHEL 6)
    ('yes [no]\n', ('no', ['yes', 'no'])),
    ('', ('', [])),
    (None, ('', [])),
])
def test_parse_choice(text, expected):
    assert thp.parse_choice(text) == expected


# ---------------------------------------------------------------------------------------------
# thp_dir / read_state

MODES = ['always', 'madvise', 'never']


@pytest.mark.parametrize('kernel, values, directory, expected', [
    pytest.param('el8', {}, THP_DIR,
                 {'enabled': ('always', MODES), 'defrag': ('madvise', EL8_DEFRAG), 'khugepaged/defrag': ('1', [])},
                 id='rhel8'),
    pytest.param('el7', {'enabled': 'never', 'defrag': 'never', 'khugepaged': '0'}, THP_DIR,
                 {'enabled': ('never', MODES), 'defrag': ('never', EL7_DEFRAG), 'khugepaged/defrag': ('0', [])},
                 id='rhel7-offers-no-defer'),
    pytest.param('el6', {}, THP_DIR_RHEL6,
                 {'enabled': ('always', MODES), 'defrag': ('always', MODES), 'khugepaged/defrag': ('yes', ['yes', 'no'])},
                 id='rhel6-redhat-directory'),
])
def test_read_state(host, kernel, values, directory, expected):
    host.add_thp(kernel, **values)
    other = THP_DIR_RHEL6 if directory == THP_DIR else THP_DIR
    assert host.exists(directory + '/enabled') and not host.exists(other)
    assert thp.thp_dir(host.root) == directory
    state = thp.read_state(host.root)
    assert state == dict([('dir', directory)] + [
        (attr, {'value': value, 'offered': offered, 'path': '%s/%s' % (directory, attr)})
        for attr, (value, offered) in expected.items()])


def test_standard_directory_wins_over_the_redhat_one(host):
    host.add_thp('el6')
    host.add_thp('el8')
    assert thp.read_state(host.root)['dir'] == THP_DIR


def test_missing_attribute_is_left_out(host):
    host.add_thp('el8', khugepaged=False)
    state = thp.read_state(host.root)
    assert sorted(state) == ['defrag', 'dir', 'enabled']


def test_no_thp_directory_is_an_error(host):
    host.mkdir('/sys/kernel/mm')
    assert thp.thp_dir(host.root) is None
    with pytest.raises(thp.ThpError) as excinfo:
        thp.read_state(host.root)
    message = str(excinfo.value)
    assert 'no Transparent Huge Pages in sysfs' in message
    assert THP_DIR in message and THP_DIR_RHEL6 in message


def test_a_file_named_like_the_thp_directory_is_not_thp(host):
    host.write(THP_DIR, 'not a directory\n')
    with pytest.raises(thp.ThpError):
        thp.read_state(host.root)


# ---------------------------------------------------------------------------------------------
# check_offered

def test_check_offered_accepts_offered_values(host):
    host.add_thp('el8')
    state = thp.read_state(host.root)
    for value in EL8_DEFRAG:
        thp.check_offered(state, 'defrag', value)
    thp.check_offered(state, 'enabled', 'madvise')


@pytest.mark.parametrize('value', ['defer', 'defer+madvise'])
def test_check_offered_lists_what_a_rhel7_kernel_offers(host, value):
    host.add_thp('el7')
    state = thp.read_state(host.root)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.check_offered(state, 'defrag', value)
    assert str(excinfo.value) == ('defrag=%s is not offered by this kernel; %s/defrag offers: always, madvise, never.'
                                  % (value, THP_DIR))


def test_check_offered_names_khugepaged_with_an_underscore(host):
    host.add_thp('el6')
    state = thp.read_state(host.root)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.check_offered(state, 'khugepaged/defrag', '0')
    assert str(excinfo.value).startswith('khugepaged_defrag=0 is not offered')
    assert 'offers: yes, no.' in str(excinfo.value)


def test_check_offered_missing_attribute(host):
    host.add_thp('el8', khugepaged=False)
    state = thp.read_state(host.root)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.check_offered(state, 'khugepaged/defrag', '0')
    assert str(excinfo.value) == '%s/khugepaged/defrag does not exist on this kernel; it cannot be set.' % THP_DIR


# ---------------------------------------------------------------------------------------------
# khugepaged_value

@pytest.mark.parametrize('kernel, current, expected', [
    ('el8', '1', ('1', '0')),
    ('el8', '0', ('1', '0')),
    ('el7', '1', ('1', '0')),
    ('el6', 'yes', ('yes', 'no')),     # "[yes] no"
    ('el6', 'no', ('yes', 'no')),      # "yes [no]"
])
def test_khugepaged_value_follows_the_kernel_style(host, kernel, current, expected):
    host.add_thp(kernel, khugepaged=current)
    state = thp.read_state(host.root)
    assert (thp.khugepaged_value(state, True), thp.khugepaged_value(state, False)) == expected


def test_khugepaged_value_plain_yes_no_style():
    state = {'dir': THP_DIR, 'khugepaged/defrag': {'value': 'no', 'offered': [], 'path': 'x'}}
    assert thp.khugepaged_value(state, True) == 'yes'
    assert thp.khugepaged_value(state, False) == 'no'


# ---------------------------------------------------------------------------------------------
# write: through the fake sysfs

def test_write_moves_the_brackets_and_returns_the_value_read_back(host):
    host.add_thp('el8')
    state = thp.read_state(host.root)
    assert thp.write(host.root, state, 'enabled', 'never') == 'never'
    assert host.thp_text('enabled') == 'always madvise [never]\n'
    assert thp.write(host.root, state, 'defrag', 'defer+madvise') == 'defer+madvise'
    assert host.thp_text('defrag') == 'always defer [defer+madvise] madvise never\n'
    assert thp.read_state(host.root)['defrag']['value'] == 'defer+madvise'


@pytest.mark.parametrize('kernel, read_back, text', [
    ('el8', '0', '0\n'),
    ('el6', 'no', 'yes [no]\n'),
])
def test_write_khugepaged_in_the_kernel_style(host, kernel, read_back, text):
    host.add_thp(kernel)
    state = thp.read_state(host.root)
    assert thp.write(host.root, state, 'khugepaged/defrag', thp.khugepaged_value(state, False)) == read_back
    assert host.thp_text('khugepaged/defrag') == text


def test_write_on_the_rhel6_directory(host):
    host.add_thp('el6')
    state = thp.read_state(host.root)
    assert thp.write(host.root, state, 'enabled', 'never') == 'never'
    assert host.read(THP_DIR_RHEL6 + '/enabled') == 'always madvise [never]\n'


@pytest.mark.parametrize('kernel, attr, value', [
    ('el7', 'defrag', 'defer'),                # RHEL 7's kernel has no defer
    ('el8', 'enabled', 'sometimes'),
    ('el8', 'khugepaged/defrag', 'no'),        # a 0/1 kernel rejects the old yes/no
    ('el8', 'khugepaged/defrag', '2'),
    ('el6', 'khugepaged/defrag', '0'),
])
def test_write_rejected_by_the_kernel_is_einval(host, kernel, attr, value):
    host.add_thp(kernel)
    state = thp.read_state(host.root)
    before = host.thp_text(attr)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.write(host.root, state, attr, value)
    assert str(excinfo.value) == 'the kernel rejected %s for %s (Invalid argument).' % (value, state[attr]['path'])
    assert host.thp_text(attr) == before


def _failing_open(error_number, exc_class=IOError):
    def fake_open(path, mode='r', *args, **kwargs):
        if 'w' in mode:
            raise exc_class(error_number, os.strerror(error_number), path)
        return open(path, mode, *args, **kwargs)
    return fake_open


@pytest.mark.parametrize('exc_class', [IOError, OSError])
def test_write_on_read_only_sysfs_gives_the_container_message(host, monkeypatch, exc_class):
    host.add_thp('el8')
    state = thp.read_state(host.root)
    monkeypatch.setattr(thp, 'open', _failing_open(errno.EROFS, exc_class), raising=False)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.write(host.root, state, 'enabled', 'never')
    assert str(excinfo.value) == ('cannot set THP inside a container: %s/enabled is on a read-only /sys. Run this '
                                  'on the host (or a VM).' % THP_DIR)
    assert host.thp('enabled') == 'always'


@pytest.mark.parametrize('error_number', [errno.EACCES, errno.EPERM])
def test_write_permission_denied_gives_the_become_message(host, monkeypatch, error_number):
    host.add_thp('el8')
    state = thp.read_state(host.root)
    monkeypatch.setattr(thp, 'open', _failing_open(error_number), raising=False)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.write(host.root, state, 'defrag', 'never')
    assert str(excinfo.value) == ('permission denied writing %s/defrag: changing THP needs root. Use become: true.'
                                  % THP_DIR)


def test_write_einval_from_open(host, monkeypatch):
    host.add_thp('el8')
    state = thp.read_state(host.root)
    monkeypatch.setattr(thp, 'open', _failing_open(errno.EINVAL), raising=False)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.write(host.root, state, 'enabled', 'never')
    assert 'the kernel rejected never for %s/enabled (Invalid argument)' % THP_DIR in str(excinfo.value)


def test_write_other_errors_name_file_and_value(host):
    host.add_thp('el8')
    state = thp.read_state(host.root)
    os.unlink(host.path(THP_DIR + '/enabled'))
    host.mkdir(THP_DIR + '/enabled')           # a directory in place of the file: EISDIR
    with pytest.raises(thp.ThpError) as excinfo:
        thp.write(host.root, state, 'enabled', 'never')
    message = str(excinfo.value)
    assert message.startswith('writing never to %s/enabled failed: ' % THP_DIR)
    assert 'directory' in message


def test_write_returns_what_reads_back_when_something_resets_it(host):
    host.add_thp('el8')
    host.thp_stuck['enabled'] = 'always'
    state = thp.read_state(host.root)
    assert thp.write(host.root, state, 'enabled', 'never') == 'always'


# ---------------------------------------------------------------------------------------------
# check_writable

def _deny_write(monkeypatch, euid):
    real = os.access

    def access(path, mode):
        if mode & os.W_OK and '/transparent_hugepage/' in str(path):
            return False
        return real(path, mode)
    monkeypatch.setattr(os, 'access', access)
    monkeypatch.setattr(os, 'geteuid', lambda: euid)


def test_check_writable_passes_on_a_writable_file(host):
    host.add_thp('el8')
    thp.check_writable(host.root, thp.read_state(host.root), 'enabled')


def test_check_writable_not_root(host, monkeypatch):
    host.add_thp('el8')
    state = thp.read_state(host.root)
    _deny_write(monkeypatch, 1000)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.check_writable(host.root, state, 'enabled')
    assert str(excinfo.value) == ('permission denied writing %s/enabled: changing THP needs root. Use become: true.'
                                  % THP_DIR)


def test_check_writable_root_on_read_only_sysfs(host, monkeypatch):
    host.add_thp('el8')
    state = thp.read_state(host.root)
    _deny_write(monkeypatch, 0)
    with pytest.raises(thp.ThpError) as excinfo:
        thp.check_writable(host.root, state, 'defrag')
    assert str(excinfo.value) == ('cannot set THP inside a container: %s/defrag is not writable (read-only /sys). '
                                  'Run this on the host (or a VM).' % THP_DIR)


# ---------------------------------------------------------------------------------------------
# tuned_sections

STATE = {'dir': THP_DIR}
KHUGEPAGED = THP_DIR + '/khugepaged/defrag'


@pytest.mark.parametrize('enabled, defrag, khugepaged, version, expected', [
    pytest.param('never', 'never', '0', (2, 19, 0), [
        ('thp', 'vm', [('transparent_hugepages', 'never'), ('transparent_hugepage.defrag', 'never')]),
        ('thp', 'sysfs', [(KHUGEPAGED, '0')]),
    ], id='tuned-2.19'),
    pytest.param('never', 'never', '0', (2, 10, 0), [
        ('thp', 'vm', [('transparent_hugepages', 'never')]),
        ('thp', 'sysfs', [(THP_DIR + '/defrag', 'never'), (KHUGEPAGED, '0')]),
    ], id='tuned-2.10-sets-defrag-through-sysfs'),
    pytest.param('never', 'never', None, (2, 19, 0), [
        ('thp', 'vm', [('transparent_hugepages', 'never'), ('transparent_hugepage.defrag', 'never')]),
    ], id='without-khugepaged'),
    pytest.param('madvise', None, '1', (2, 10, 0), [
        ('thp', 'vm', [('transparent_hugepages', 'madvise')]),
        ('thp', 'sysfs', [(KHUGEPAGED, '1')]),
    ], id='without-defrag'),
])
def test_tuned_sections(enabled, defrag, khugepaged, version, expected):
    assert thp.tuned_sections(enabled, defrag, khugepaged, version, STATE) == expected


@pytest.mark.parametrize('version, in_vm', [
    ((2, 10, 9), False),
    ((2, 11, 0), True),
    ((2, 21, 0), True),
    ((3, 0, 0), True),
    (None, True),
])
def test_tuned_sections_defrag_option_from_2_11(version, in_vm):
    sections = thp.tuned_sections('madvise', 'defer+madvise', None, version, STATE)
    vm = dict(sections[0][2])
    assert ('transparent_hugepage.defrag' in vm) is in_vm
    assert (len(sections) == 2) is (not in_vm)


def test_tuned_sections_use_the_rhel6_directory():
    sections = thp.tuned_sections('never', 'never', 'no', (2, 10, 0), {'dir': THP_DIR_RHEL6})
    assert sections[1] == ('thp', 'sysfs', [(THP_DIR_RHEL6 + '/defrag', 'never'),
                                            (THP_DIR_RHEL6 + '/khugepaged/defrag', 'no')])


def test_tuned_sections_render_into_a_profile_tuned_parses():
    sections = thp.tuned_sections('never', 'never', '0', (2, 10, 0), STATE)
    text = tuned.render_child({'active_profiles': ['virtual-guest']}, sections)
    parsed = tuned.parse_conf(text)
    assert ('vm', [('transparent_hugepages', 'never')]) in parsed
    assert ('sysfs', [(THP_DIR + '/defrag', 'never'), (KHUGEPAGED, '0')]) in parsed
    assert [s[0] for s in tuned.parse_child(text, 'x')['sections']] == ['thp', 'thp']
