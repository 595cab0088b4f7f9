# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/udev_rules.py: the owned rules file and competing settings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import files, udev_rules
from fakehost import FakeHost

NVME_MATCH = 'ENV{ID_SERIAL}=="Amazon Elastic Block Store_vol0123456789abcdef0"'
LV_MATCH = 'ENV{DM_UUID}=="LVM-%s"' % ('x' * 64)
MD_MATCH = 'ENV{MD_UUID}=="3f2c1a4b:5d6e7f80:91a2b3c4:d5e6f708"'
LOOP_MATCH = 'ATTR{loop/backing_file}=="/var/lib/images/data.img"'


def _baseline(match, device, kb, lvm=None):
    return {'match': match, 'device': device, 'read_ahead_kb': kb, 'lvm_read_ahead': lvm}


@pytest.fixture
def host(tmpdir):
    return FakeHost(tmpdir)


def _rules_lines(text):
    return [line for line in text.splitlines() if line and not line.startswith('#')]


# ---------------------------------------------------------------------------------------------
# match_clause / render_rule

def test_match_clause_quotes_value():
    sid = {'key': 'ENV{ID_SERIAL}', 'value': 'Amazon Elastic Block Store_vol0123456789abcdef0', 'serial': 'x'}
    assert udev_rules.match_clause(sid) == NVME_MATCH


def test_match_clause_of_no_stable_id_is_none():
    assert udev_rules.match_clause(None) is None


@pytest.mark.parametrize('value', ['has"quote', 'back\\slash', 'new\nline', 'carriage\rreturn'])
def test_match_clause_refuses_unquotable_values(value):
    assert udev_rules.match_clause({'key': 'ENV{ID_SERIAL}', 'value': value, 'serial': None}) is None


def test_render_rule_exact_text():
    assert udev_rules.render_rule(LV_MATCH, 32) == (
        'ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", %s, ATTR{queue/read_ahead_kb}="32"'
        % LV_MATCH)


# ---------------------------------------------------------------------------------------------
# render / parse

def test_render_empty_is_none_and_parse_none_is_empty():
    assert udev_rules.render({}, {}) is None
    assert udev_rules.parse(None) == ({}, {})


def test_render_parse_roundtrip():
    rules = {NVME_MATCH: 32, LV_MATCH: 64, MD_MATCH: 0, LOOP_MATCH: 128}
    baselines = {NVME_MATCH: _baseline(NVME_MATCH, 'nvme1n1', 4096),
                 LV_MATCH: _baseline(LV_MATCH, 'dm-0', 4096, 'auto')}
    text = udev_rules.render(rules, baselines)
    assert udev_rules.parse(text) == (rules, baselines)


def test_render_is_managed_and_ends_with_newline():
    text = udev_rules.render({LV_MATCH: 32}, {})
    assert files.is_managed(text)
    assert text.endswith('"\n')


def test_render_is_deterministic_and_sorted():
    pairs = [(NVME_MATCH, 32), (LV_MATCH, 64), (MD_MATCH, 16)]
    one = udev_rules.render(dict(pairs), {})
    other = udev_rules.render(dict(reversed(pairs)), {})
    assert one == other
    prefix = 'ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", '
    assert _rules_lines(one) == [
        prefix + 'ENV{DM_UUID}=="LVM-%s", ATTR{queue/read_ahead_kb}="64"' % ('x' * 64),
        prefix + 'ENV{ID_SERIAL}=="Amazon Elastic Block Store_vol0123456789abcdef0", ATTR{queue/read_ahead_kb}="32"',
        prefix + 'ENV{MD_UUID}=="3f2c1a4b:5d6e7f80:91a2b3c4:d5e6f708", ATTR{queue/read_ahead_kb}="16"',
    ]


def test_render_baselines_before_rules_sorted_by_match():
    baselines = {NVME_MATCH: _baseline(NVME_MATCH, 'nvme1n1', 4096), LV_MATCH: _baseline(LV_MATCH, 'dm-0', 128)}
    text = udev_rules.render({LV_MATCH: 32, NVME_MATCH: 32}, baselines)
    lines = text.splitlines()
    base_idx = [i for i, line in enumerate(lines) if line.startswith('# aemops-baseline ')]
    rule_idx = [i for i, line in enumerate(lines) if line.startswith('ACTION==')]
    assert max(base_idx) < min(rule_idx)
    assert [files.parse_baselines(lines[i])[0][0]['match'] for i in base_idx] == sorted(baselines)


def test_baselines_without_rules_are_kept():
    baselines = {LV_MATCH: _baseline(LV_MATCH, 'dm-0', 128)}
    text = udev_rules.render({}, baselines)
    assert text is not None
    assert udev_rules.parse(text) == ({}, baselines)


def test_baseline_record_without_match_is_ignored():
    text = udev_rules.render({LV_MATCH: 32}, {}) + files.baseline_line({'device': 'dm-0'}) + '\n'
    assert udev_rules.parse(text) == ({LV_MATCH: 32}, {})


def test_parse_tolerates_blank_lines_comments_and_surrounding_space():
    rule = udev_rules.render_rule(LV_MATCH, 32)
    text = '# my note\n\n   %s   \n\t\n' % rule
    assert udev_rules.parse(text) == ({LV_MATCH: 32}, {})


def test_parse_hand_edited_foreign_line_names_the_line():
    text = udev_rules.render({LV_MATCH: 32}, {})
    text += 'ACTION=="add", KERNEL=="sdb", ATTR{queue/read_ahead_kb}="512"\n'
    with pytest.raises(udev_rules.RulesFileError) as info:
        udev_rules.parse(text, '/etc/udev/rules.d/90-aemops-read-ahead.rules')
    msg = str(info.value)
    line_no = len(text.splitlines())
    assert '/etc/udev/rules.d/90-aemops-read-ahead.rules line %d' % line_no in msg
    assert 'KERNEL==\\"sdb\\"' in msg or 'KERNEL=="sdb"' in msg
    assert 'was not written by aemops.os_tuning' in msg


@pytest.mark.parametrize('mangle', [
    lambda rule: rule.replace('="32"', '="32k"'),
    lambda rule: rule.replace('ACTION=="add|change"', 'ACTION=="add"'),
    lambda rule: rule + ', RUN+="/bin/true"',
    lambda rule: rule.replace('ATTR{queue/read_ahead_kb}', 'ATTR{queue/nr_requests}'),
])
def test_parse_rejects_edited_rules(mangle):
    text = udev_rules.render({LV_MATCH: 32}, {})
    rule = udev_rules.render_rule(LV_MATCH, 32)
    with pytest.raises(udev_rules.RulesFileError):
        udev_rules.parse(text.replace(rule, mangle(rule)))


def test_parse_damaged_baseline_json_is_an_error():
    text = udev_rules.render({LV_MATCH: 32}, {LV_MATCH: _baseline(LV_MATCH, 'dm-0', 128)})
    text = text.replace('"read_ahead_kb":128}', '"read_ahead_kb":12')
    with pytest.raises(udev_rules.RulesFileError) as info:
        udev_rules.parse(text, '/etc/x.rules')
    msg = str(info.value)
    assert '/etc/x.rules has damaged baseline records' in msg
    assert 'line 3' in msg


# ---------------------------------------------------------------------------------------------
# competing_rules

def test_competing_rules_none_without_rules_dirs(host):
    assert udev_rules.competing_rules(host.root) == []


def test_competing_rules_finds_read_ahead_kb_and_setra(host):
    host.write('/etc/udev/rules.d/60-custom.rules', '\n'.join([
        '# set read-ahead for the data disk',
        'ACTION=="add", KERNEL=="sdb", ATTR{queue/read_ahead_kb}="4096"',
        'ACTION=="add", KERNEL=="sdc", RUN+="/sbin/blockdev --setra 8192 /dev/%k"',
        'ACTION=="add", KERNEL=="sdd", ATTR{queue/scheduler}="none"',
    ]) + '\n')
    found = udev_rules.competing_rules(host.root)
    assert found == [
        {'file': '/etc/udev/rules.d/60-custom.rules', 'line': 2,
         'text': 'ACTION=="add", KERNEL=="sdb", ATTR{queue/read_ahead_kb}="4096"'},
        {'file': '/etc/udev/rules.d/60-custom.rules', 'line': 3,
         'text': 'ACTION=="add", KERNEL=="sdc", RUN+="/sbin/blockdev --setra 8192 /dev/%k"'},
    ]


def test_competing_rules_ignores_commented_lines(host):
    host.write('/etc/udev/rules.d/60-custom.rules',
               '#ATTR{queue/read_ahead_kb}="4096"\n   # RUN+="/sbin/blockdev --setra 8192 /dev/%k"\n')
    assert udev_rules.competing_rules(host.root) == []


def test_competing_rules_searches_run_and_lib_dirs(host):
    host.write('/run/udev/rules.d/61-a.rules', 'ATTR{queue/read_ahead_kb}="1"\n')
    host.write('/usr/lib/udev/rules.d/62-b.rules', 'ATTR{queue/read_ahead_kb}="2"\n')
    host.write('/lib/udev/rules.d/63-c.rules', 'ATTR{queue/read_ahead_kb}="3"\n')
    assert [f['file'] for f in udev_rules.competing_rules(host.root)] == [
        '/run/udev/rules.d/61-a.rules', '/usr/lib/udev/rules.d/62-b.rules', '/lib/udev/rules.d/63-c.rules']


def test_competing_rules_etc_masks_same_named_vendor_file(host):
    host.write('/usr/lib/udev/rules.d/60-vendor.rules', 'ATTR{queue/read_ahead_kb}="4096"\n')
    host.write('/etc/udev/rules.d/60-vendor.rules', '# masked by the administrator\n')
    assert udev_rules.competing_rules(host.root) == []


def test_competing_rules_etc_override_is_reported_once(host):
    host.write('/usr/lib/udev/rules.d/60-vendor.rules', 'ATTR{queue/read_ahead_kb}="4096"\n')
    host.write('/etc/udev/rules.d/60-vendor.rules', 'ATTR{queue/read_ahead_kb}="512"\n')
    assert udev_rules.competing_rules(host.root) == [
        {'file': '/etc/udev/rules.d/60-vendor.rules', 'line': 1, 'text': 'ATTR{queue/read_ahead_kb}="512"'}]


def test_competing_rules_ignores_our_own_file(host):
    host.write(udev_rules.RULES_FILE, udev_rules.render({LV_MATCH: 32}, {}))
    assert udev_rules.competing_rules(host.root) == []


def test_competing_rules_ignores_our_file_at_a_custom_path_even_if_edited(host):
    # own_path is skipped by name, whatever its content.
    host.write('/etc/udev/rules.d/91-mine.rules', 'ATTR{queue/read_ahead_kb}="64"\n')
    assert udev_rules.competing_rules(host.root, '/etc/udev/rules.d/91-mine.rules') == []


def test_competing_rules_ignores_other_files_managed_by_the_collection(host):
    header = '\n'.join(files.managed_header('other module', 'x'))
    host.write('/etc/udev/rules.d/91-aemops-other.rules', header + '\nATTR{queue/read_ahead_kb}="64"\n')
    assert udev_rules.competing_rules(host.root) == []


def test_competing_rules_only_reads_rules_files(host):
    host.write('/etc/udev/rules.d/60-custom.rules.bak', 'ATTR{queue/read_ahead_kb}="4096"\n')
    host.write('/etc/udev/rules.d/README', 'read_ahead_kb\n')
    assert udev_rules.competing_rules(host.root) == []


# ---------------------------------------------------------------------------------------------
# rc_local_setra

def test_rc_local_setra_found(host):
    host.write('/etc/rc.local', '#!/bin/sh\n/sbin/blockdev --setra 8192 /dev/nvme1n1\nexit 0\n')
    assert udev_rules.rc_local_setra(host.root) == [
        {'file': '/etc/rc.local', 'line': 2, 'text': '/sbin/blockdev --setra 8192 /dev/nvme1n1'}]


def test_rc_local_setra_with_options_between(host):
    host.write('/etc/rc.d/rc.local', 'blockdev -v --setra 64 /dev/sdb\n')
    assert [f['line'] for f in udev_rules.rc_local_setra(host.root)] == [1]


def test_rc_local_read_ahead_kb_write_found(host):
    host.write('/etc/rc.local', 'echo 4096 > /sys/block/sdb/queue/read_ahead_kb\n')
    assert udev_rules.rc_local_setra(host.root)[0]['text'] == 'echo 4096 > /sys/block/sdb/queue/read_ahead_kb'


def test_rc_local_comments_ignored(host):
    host.write('/etc/rc.local', '#!/bin/sh\n# blockdev --setra 8192 /dev/sdb\n  #echo 1 > read_ahead_kb\n')
    assert udev_rules.rc_local_setra(host.root) == []


def test_rc_local_symlink_read_once_through_its_target(host):
    host.write('/etc/rc.d/rc.local', 'blockdev --setra 8192 /dev/sdb\n')
    host.symlink('/etc/rc.local', 'rc.d/rc.local')
    found = udev_rules.rc_local_setra(host.root)
    assert found == [{'file': '/etc/rc.d/rc.local', 'line': 1, 'text': 'blockdev --setra 8192 /dev/sdb'}]


def test_rc_local_missing(host):
    assert udev_rules.rc_local_setra(host.root) == []


# ---------------------------------------------------------------------------------------------
# Hostile identity values (issue 12). How udev reads a match value, per release:
# systemd v219 (RHEL 7) and v239 (RHEL 8) src/udev/udev-rules.c: get_key() has no escapes,
# match_key() globs on '*', '?', '[' and splits at '|', match_attr() compares at most
# UTIL_NAME_SIZE - 1 = 511 bytes; v252 (RHEL 9) src/shared/udev-util.c udev_rule_parse_value()
# unescapes only '\"', and v257 src/udev/udev-rules.c token_match_attr() still compares a
# vbuf[UDEV_NAME_SIZE]; '|' separates alternatives in every version.

@pytest.mark.parametrize('value, words', [
    ('/img/a*.img', "contains '*'"),
    ('/img/a?.img', "contains '?'"),
    ('/img/a[1].img', "contains '['"),
    ('/img/a|b.img', "contains '|'"),
    ('/img/a"b.img', 'double quote'),
    ('/img/a\\b.img', 'backslash'),
    ('/img/a\nb.img', 'control character'),
    ('/img/a\tb.img', 'control character'),
    ('/img/a.img ', 'trailing whitespace'),
    (' /img/a.img', 'leading or trailing whitespace'),
    ('/img/a.img (deleted)', '(deleted)'),
    ('/' + 'x' * 511, 'is 512 bytes long, and udev compares at most 511'),
    (u'/img/\u00e9' * 128, 'bytes long'),
    ('', 'empty'),
    (None, 'empty'),
    (u'/img/\ufffd.img', 'not valid UTF-8'),
    (b'/img/\xff.img', 'not valid UTF-8'),
])
def test_value_problem_refuses(value, words):
    problem = udev_rules.value_problem(value)
    assert problem is not None and words in problem
    assert udev_rules.match_clause({'key': 'ATTR{loop/backing_file}', 'value': value, 'serial': None}) is None


@pytest.mark.parametrize('value', ['/img/a.img', '/' + 'x' * 510, 'vol0123456789abcdef0',
                                   'Amazon Elastic Block Store_vol0', 'device/vbd/51712', u'/img/\u00e9t\u00e9.img'])
def test_value_problem_accepts(value):
    assert udev_rules.value_problem(value) is None
    assert udev_rules.match_clause({'key': 'ENV{ID_SERIAL}', 'value': value, 'serial': None}) is not None


def _rules_text(record, kb=32):
    lines = files.managed_header('read_ahead module', 'test') + [files.baseline_line(record)]
    lines.append(udev_rules.render_rule(LOOP_MATCH, kb))
    return '\n'.join(lines) + '\n'


@pytest.mark.parametrize('field, value, words', [
    ('read_ahead_kb', 1048576, 'read_ahead_kb is 1048576, not an integer from 0 to 65536'),
    ('read_ahead_kb', -4, 'read_ahead_kb is -4'),
    ('read_ahead_kb', 'x', 'read_ahead_kb is "x"'),
    ('read_ahead_kb', True, 'read_ahead_kb is true'),
    ('read_ahead_kb', None, 'read_ahead_kb is null'),
    ('read_ahead_kb', 32.5, 'read_ahead_kb is 32.5'),
    ('lvm_read_ahead', 'bogus', 'lvm_read_ahead is "bogus"'),
    ('lvm_read_ahead', 10 ** 9, 'lvm_read_ahead is 1000000000'),
    ('device', 7, 'device is not a string'),
    ('match', 7, 'match is not a string'),
])
def test_parse_refuses_baselines_that_cannot_be_restored(field, value, words):
    record = _baseline(LOOP_MATCH, 'loop0', 128, 'auto')
    record[field] = value
    with pytest.raises(udev_rules.RulesFileError) as info:
        udev_rules.parse(_rules_text(record), '/etc/udev/rules.d/90-x.rules')
    assert words in str(info.value)
    assert '/etc/udev/rules.d/90-x.rules has a baseline record that cannot be restored' in str(info.value)


def test_parse_accepts_good_baselines():
    for lvm in (None, 'auto', 8192):
        rules, baselines = udev_rules.parse(_rules_text(_baseline(LOOP_MATCH, 'loop0', 128, lvm)))
        assert rules == {LOOP_MATCH: 32}
        assert baselines[LOOP_MATCH]['lvm_read_ahead'] == lvm


def test_parse_refuses_a_rule_value_out_of_range():
    with pytest.raises(udev_rules.RulesFileError) as info:
        udev_rules.parse(_rules_text(_baseline(LOOP_MATCH, 'loop0', 128), kb=1048576), '/x.rules')
    assert 'read_ahead_kb=1048576, above 65536' in str(info.value)
