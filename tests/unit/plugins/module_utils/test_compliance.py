# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The compliance rules (module_utils/compliance.py) on hand-made facts: one test per kind of miss.

The facts have the shape tuning_facts returns (``ansible_facts.os_tuning``); ``compliant()``
below builds a host where everything is as the intent wants, and each test breaks one thing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import compliance

REPO = '/opt/aem/crx-quickstart/repository'
NVME_LINK = '/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0aaaaaaaaaaaaaaaa'
RULE = 'ATTRS{serial}=="vol0aaaaaaaaaaaaaaaa"'

INTENT = {'state': 'present', 'read_ahead_kb': 32, 'paths': [REPO], 'candidates': [], 'devices': [NVME_LINK],
          'underlying': False, 'thp': 'never', 'thp_defrag': 'never', 'thp_persist': []}


def compliant():
    """Facts of a host that is as INTENT wants: the LV and an extra NVMe disk at 32, THP never."""
    facts = {
        'block_devices': {
            'dm-0': {'type': 'lvm', 'read_ahead_kb': 32, 'rule': 32,
                     'stable_id': {'key': 'ENV{DM_UUID}', 'value': 'LVM-x'}},
            'nvme1n1': {'type': 'nvme', 'read_ahead_kb': 32, 'rule': 32,
                        'stable_id': {'key': 'ATTRS{serial}', 'value': 'vol0aaaaaaaaaaaaaaaa'}},
            'nvme2n1': {'type': 'nvme', 'read_ahead_kb': 32, 'rule': 32,
                        'stable_id': {'key': 'ATTRS{serial}', 'value': 'vol0bbbbbbbbbbbbbbbb'}},
        },
        'paths': {REPO: {'device': 'dm-0', 'type': 'lvm', 'read_ahead_kb': 32, 'mount': '/opt/aem'}},
        'thp': {'runtime': {'enabled': {'value': 'never', 'offered': ['always', 'madvise', 'never']},
                            'defrag': {'value': 'never', 'offered': ['always', 'defer', 'madvise', 'never']}},
                'configured_cmdline': {'/etc/default/grub': 'never'}},
        'tuned': {'active_profiles': ['virtual-guest', 'aemops-os-tuning'], 'read_ahead': {
            'dm-0': {'profile': 'aemops-os-tuning', 'instance': 'aemops_read_ahead_32', 'setting': '32', 'kb': 32}}},
        'managed_files': {},
        'conflicts': [],
        'os': {'boot_method': 'grub2-mkconfig'},
    }
    return facts


def resolved(**kw):
    result = {'targets': [REPO], 'devices': {NVME_LINK: 'nvme1n1'}, 'underlying': {}, 'page_kb': 4}
    result.update(kw)
    return result


def kinds(found):
    return sorted(m['kind'] for m in found)


def test_a_compliant_host_has_no_misses():
    assert compliance.misses(compliant(), INTENT, resolved()) == []


def test_a_device_target_drifted_by_hand_is_a_miss_naming_it():
    facts = compliant()
    facts['block_devices']['nvme1n1']['read_ahead_kb'] = 4096
    found = compliance.misses(facts, INTENT, resolved())
    assert kinds(found) == ['read_ahead']
    assert found[0]['subject'] == '%s (nvme1n1)' % NVME_LINK
    assert 'nvme1n1 reads 4096 KiB, not 32' in found[0]['message']


def test_a_path_target_drifted_is_a_miss_naming_path_and_device():
    facts = compliant()
    facts['block_devices']['dm-0']['read_ahead_kb'] = 128
    found = compliance.misses(facts, INTENT, resolved())
    assert [(m['subject'], m['kind']) for m in found] == [('%s (dm-0)' % REPO, 'read_ahead')]


def test_the_disks_beneath_are_checked_when_underlying():
    facts = compliant()
    facts['block_devices']['nvme2n1']['read_ahead_kb'] = 4096
    assert compliance.misses(facts, INTENT, resolved()) == []
    found = compliance.misses(facts, dict(INTENT, underlying=True), resolved(underlying={'dm-0': ['nvme2n1']}))
    assert [m['subject'] for m in found] == ['beneath dm-0 (nvme2n1)']


def test_a_path_that_no_longer_resolves_is_a_miss():
    facts = compliant()
    facts['paths'][REPO] = {'error': 'path %s does not exist' % REPO}
    found = compliance.misses(facts, INTENT, resolved())
    assert kinds(found) == ['path']


def test_tuned_still_applying_its_own_readahead_is_a_miss():
    facts = compliant()
    facts['tuned']['read_ahead']['nvme1n1'] = {'profile': 'throughput-performance', 'instance': 'disk',
                                               'setting': '>4096', 'kb': 4096}
    found = compliance.misses(facts, INTENT, resolved())
    assert kinds(found) == ['tuned_read_ahead']
    assert 'throughput-performance [disk] readahead=>4096 still applies to nvme1n1' in found[0]['message']


def test_a_device_without_our_rule_is_a_miss():
    facts = compliant()
    facts['block_devices']['nvme1n1']['rule'] = None
    assert kinds(compliance.misses(facts, INTENT, resolved())) == ['persistence']


def test_thp_runtime_is_a_miss():
    facts = compliant()
    facts['thp']['runtime']['enabled']['value'] = 'always'
    found = compliance.misses(facts, INTENT, resolved())
    assert [(m['subject'], m['kind']) for m in found] == [('THP', 'thp')]


def test_tuned_without_the_child_profile_is_a_miss():
    facts = compliant()
    facts['tuned']['active_profiles'] = ['virtual-guest']
    assert kinds(compliance.misses(facts, INTENT, resolved())) == ['tuned_profile']


def test_a_profile_loaded_after_ours_is_a_miss():
    facts = compliant()
    facts['tuned']['active_profiles'] = ['virtual-guest', 'aemops-os-tuning', 'kernel_settings']
    found = compliance.misses(facts, INTENT, resolved())
    assert kinds(found) == ['tuned_profile']
    assert 'tuned loads kernel_settings after the collection\'s child profile' in found[0]['message']


def test_a_tuned_conflict_is_a_miss_only_where_the_other_profile_wins():
    facts = compliant()
    facts['tuned']['conflicts'] = [
        {'profile': 'kernel_settings', 'section': 'vm', 'option': 'transparent_hugepages', 'value': 'madvise',
         'ours': 'never', 'winner': 'aemops-os-tuning'}]
    assert compliance.misses(facts, INTENT, resolved()) == []
    facts['tuned']['conflicts'].append(
        {'profile': 'my-post', 'section': 'vm', 'option': 'transparent_hugepages', 'value': 'always',
         'ours': 'never', 'winner': 'my-post'})
    found = compliance.misses(facts, INTENT, resolved())
    assert [(m['subject'], m['kind']) for m in found] == [('tuned profile my-post', 'tuned_conflict')]
    assert found[0]['message'].startswith('[vm] transparent_hugepages=always wins over ours (never)')


def test_no_tuned_at_all_is_not_a_miss():
    facts = compliant()
    facts['tuned'] = {'active_profiles': [], 'read_ahead': {}}
    assert compliance.misses(facts, INTENT, resolved()) == []


@pytest.mark.parametrize('persist, boot_method, expected', [
    (None, 'grub2-mkconfig', ['cmdline']),            # the module's default persists on the command line
    (['cmdline', 'tuned'], 'grubby', ['cmdline']),
    (['tuned'], 'grub2-mkconfig', []),                # the command line is not ours to check
    (None, 'none', []),                               # direct kernel boot: nothing to persist
])
def test_the_configured_command_line(persist, boot_method, expected):
    """As the thp module reported it (after a run), or as asked (before it ran)."""
    facts = compliant()
    facts['thp']['configured_cmdline'] = {'/etc/default/grub': 'madvise'}
    facts['os']['boot_method'] = boot_method
    intent = dict(INTENT, thp_persist_effective=persist)
    assert kinds(compliance.misses(facts, intent, resolved())) == expected
    intent = dict(INTENT, thp_persist=persist or [])
    assert kinds(compliance.misses(facts, intent, resolved())) == expected


def test_a_failed_tuned_verify_is_one_miss_naming_the_device():
    verify = compliance.parse_verify(1, 'Verification failed, current system settings differ from the preset '
                                        'profile.\nYou can mostly fix this by restarting the TuneD daemon, e.g.:\n'
                                        '  systemctl restart tuned\nor\n  service tuned restart\n', '',
                                     VERIFY_LOG_2_20)
    found = compliance.misses(compliant(), INTENT, resolved(), verify)
    assert kinds(found) == ['tuned_verify']
    assert 'device dm-1: readahead is 32, expected 4096' in found[0]['message']
    assert '\n' not in found[0]['message']


def test_other_udev_rules_or_rc_local_are_misses():
    facts = compliant()
    facts['conflicts'] = [{'source': 'udev rule', 'file': '/etc/udev/rules.d/99-ra.rules', 'line': 3,
                           'text': 'ATTR{queue/read_ahead_kb}="4096"'}]
    found = compliance.misses(facts, INTENT, resolved())
    assert [(m['subject'], m['kind']) for m in found] == [('udev rule /etc/udev/rules.d/99-ra.rules line 3',
                                                           'conflict')]


def test_backout_misses_are_the_files_left_and_the_profile():
    facts = compliant()
    facts['managed_files'] = {'read_ahead_rules': {'path': '/etc/udev/rules.d/90-aemops-read-ahead.rules'}}
    found = compliance.misses(facts, dict(INTENT, state='absent'), resolved())
    assert [m['subject'] for m in found] == ['/etc/udev/rules.d/90-aemops-read-ahead.rules', 'tuned']
    facts['managed_files'] = {}
    facts['tuned']['active_profiles'] = ['virtual-guest']
    assert compliance.misses(facts, dict(INTENT, state='absent'), resolved()) == []


# ---------------------------------------------------------------------------------------------
# validate: what the modules would refuse, found before any change

def test_valid_intent_has_no_errors():
    assert compliance.validate(compliant(), INTENT, resolved()) == []


@pytest.mark.parametrize('kb, text', [
    (30, 'not a multiple of the page size (4 KiB)'),
    (-4, 'out of range'),
    (65540, 'out of range'),
    (True, 'whole number'),
    ('32', 'whole number'),          # not normalised: a string is not a number
    (u'\u0663\u0662', 'whole number'),
])
def test_bad_read_ahead_values_are_refused(kb, text):
    errors = compliance.validate(compliant(), dict(INTENT, read_ahead_kb=kb), resolved())
    assert len(errors) == 1 and text in errors[0] and errors[0].startswith('aem_tuning_read_ahead_kb')


def test_page_size_comes_from_the_host():
    assert compliance.validate(compliant(), dict(INTENT, read_ahead_kb=32), resolved(page_kb=64))[0].startswith(
        'aem_tuning_read_ahead_kb=32 is not a multiple of the page size (64 KiB)')


@pytest.mark.parametrize('page_kb, kb, why', [
    (4, 32, '32 KiB: the default'),
    (16, 32, '32 KiB: the default'),
    (64, 64, '64 KiB: the page size of this kernel (the default 32 KiB is less than one page)'),
])
def test_the_default_read_ahead_is_32_or_the_page_size(page_kb, kb, why):
    assert compliance.default_read_ahead(page_kb) == {'kb': kb, 'why': why}
    intent, chosen = compliance.with_default(dict(INTENT, read_ahead_kb=None), page_kb)
    assert intent['read_ahead_kb'] == kb and chosen == {'kb': kb, 'why': why}
    assert compliance.validate(compliant(), intent, resolved(page_kb=page_kb)) == [] or kb != 32


def test_a_given_read_ahead_is_kept_and_still_checked_against_the_page():
    intent, chosen = compliance.with_default(dict(INTENT, read_ahead_kb=32), 64)
    assert (intent['read_ahead_kb'], chosen) == (32, None)
    assert compliance.with_default(dict(INTENT, read_ahead_kb='auto'), 64) == (dict(INTENT, read_ahead_kb='auto'), None)


@pytest.mark.parametrize('text', ['', 'None', ' none '])
def test_none_as_ansible_core_2_16_renders_it_is_not_given(text):
    assert compliance.normalise_intent({'read_ahead_kb': text})['read_ahead_kb'] is None


def test_normalise_takes_ascii_digits_only():
    assert compliance.normalise_intent({'read_ahead_kb': '32'})['read_ahead_kb'] == 32
    assert compliance.normalise_intent({'read_ahead_kb': u'\u0663\u0662'})['read_ahead_kb'] == u'\u0663\u0662'
    # The other keys are typed by tuning_facts' declared spec (INTENT_SPEC) before they get here: left as given.
    assert compliance.normalise_intent({'underlying': 'False'})['underlying'] == 'False'


def test_a_number_given_as_text_has_no_errors():
    # read_ahead_kb is raw in the spec (a number, auto or none): text of ASCII digits is a number.
    intent = compliance.normalise_intent(dict(INTENT, read_ahead_kb='32'))
    assert intent['read_ahead_kb'] == 32
    assert compliance.validate(compliant(), intent, resolved()) == []
    assert compliance.misses(compliant(), intent, resolved()) == []


def test_a_device_that_does_not_resolve_is_refused_naming_it():
    unresolved = resolved(devices={NVME_LINK: None}, device_errors={NVME_LINK: 'no such device'})
    errors = compliance.validate(compliant(), INTENT, unresolved)
    assert errors == ['aem_tuning_devices: %s is not a block device on this host (no such device): correct or '
                      'remove it.' % NVME_LINK]


def test_a_device_without_stable_identity_is_refused():
    facts = compliant()
    facts['block_devices']['nvme1n1']['stable_id'] = None
    errors = compliance.validate(facts, INTENT, resolved())
    assert len(errors) == 1 and errors[0].startswith('nvme1n1 (nvme) has no stable identity')


def test_thp_values_the_kernel_does_not_offer_are_refused():
    facts = compliant()
    facts['thp']['runtime']['defrag']['offered'] = ['always', 'madvise', 'never']  # RHEL 7: no defer
    errors = compliance.validate(facts, dict(INTENT, thp_defrag='defer'), resolved())
    assert errors == ['aem_tuning_thp_defrag=defer is not offered by this kernel, which offers: always, madvise, '
                      'never.']


def test_an_unsupported_os_is_refused():
    facts = compliant()
    facts['os'].update(family='unknown', id='sles', version_id='15.5')
    assert compliance.validate(facts, INTENT, resolved()) == [
        'sles 15.5 is not supported: the collection supports RHEL, CentOS, Rocky, AlmaLinux and Oracle Linux 7, 8, 9 '
        'and 10 (and Debian, for its test harness).']


def test_unknown_persist_entries_are_refused():
    errors = compliance.validate(compliant(), dict(INTENT, thp_persist=['tuned', 'grub']), resolved())
    assert errors == ['aem_tuning_thp_persist has unknown entries grub: use tuned and/or cmdline.']


def test_nothing_to_tune_is_refused_only_when_present():
    assert compliance.validate(compliant(), dict(INTENT, paths=[]), resolved(targets=[], devices={}))
    assert compliance.validate(compliant(), dict(INTENT, paths=[], state='absent'),
                               resolved(targets=[], devices={})) == []


def test_backout_does_not_need_a_valid_read_ahead():
    assert compliance.validate(compliant(), dict(INTENT, state='absent', read_ahead_kb=30), resolved()) == []


# ---------------------------------------------------------------------------------------------
# choose_targets: explicit paths are never replaced by a candidate

def path_facts(*found):
    result = dict((p, {'device': 'dm-0'}) for p in found)
    result.setdefault('/nonexistent', {'error': 'path /nonexistent does not exist'})
    return result


def test_explicit_paths_that_exist_are_the_targets():
    assert compliance.choose_targets([REPO], ['/srv/aem/repo'], path_facts(REPO, '/srv/aem/repo')) == (
        [REPO], [], [])


def test_a_mistyped_explicit_path_fails_instead_of_tuning_a_candidate():
    targets, errors, _warnings = compliance.choose_targets(['/nonexistent'], ['/srv/aem/repo'],
                                                           path_facts('/srv/aem/repo'))
    assert targets == []
    assert errors and '/nonexistent (path /nonexistent does not exist)' in errors[0]


def test_some_explicit_paths_missing_is_a_warning():
    targets, errors, warnings = compliance.choose_targets([REPO, '/nonexistent'], [], path_facts(REPO))
    assert (targets, errors) == ([REPO], [])
    assert warnings == ['/nonexistent: path /nonexistent does not exist; skipped']


def test_without_paths_the_first_candidate_found_is_the_target():
    assert compliance.choose_targets([], ['/nonexistent', '/a', '/b'], path_facts('/a', '/b'))[0] == ['/a']


# ---------------------------------------------------------------------------------------------
# parse_verify: tuned-adm verify and the lines tuned logs for it

# tuned v2.20.0 tuned/consts.py STR_VERIFY_PROFILE_DEVICE_VALUE_FAIL (quoted values), logged by
# tuned/plugins/base.py _verify_value after daemon.py's "verifying profile(s): %s".
VERIFY_LOG_2_20 = (
    "2026-12-01 10:00:00,000 INFO     tuned.daemon.daemon: verifying profile(s): virtual-guest\n"
    "2026-12-01 10:00:00,001 ERROR    tuned.plugins.base: verify: failed: device dm-0: 'readahead' = '128', "
    "expected '4096'\n"
    "2026-12-01 11:00:00,000 INFO     tuned.daemon.daemon: verifying profile(s): virtual-guest aemops-os-tuning\n"
    "2026-12-01 11:00:00,001 INFO     tuned.plugins.base: verify: passed: device nvme0n1: 'readahead' = '32'\n"
    "2026-12-01 11:00:00,002 ERROR    tuned.plugins.base: verify: failed: device dm-1: 'readahead' = '32', "
    "expected '4096'\n")
# tuned v2.11.0 tuned/consts.py: the same message without quotes.
# The device line unquoted, as tuned v2.5.0 and v2.6.0 log it (tuned/consts.py at those tags; v2.7.0 and later,
# 2.11 on RHEL 7 included, quote every value).
VERIFY_LOG_UNQUOTED = (
    "2026-12-01 11:00:00,000 INFO     tuned.daemon.daemon: verifying profile(s): aemops-os-tuning\n"
    "2026-12-01 11:00:00,002 ERROR    tuned.plugins.base: verify: failed: 'vm.swappiness' = '60', expected '30'\n"
    "2026-12-01 11:00:00,003 ERROR    tuned.plugins.base: verify: failed: device xvdb: readahead = 256, "
    "expected 8192\n")


def test_parse_verify_reads_only_the_last_verify():
    result = compliance.parse_verify(1, 'Verification failed', '', VERIFY_LOG_2_20)
    assert result['passed'] is False
    assert result['failures'] == [{'device': 'dm-1', 'option': 'readahead', 'current': '32', 'expected': '4096'}]


def test_parse_verify_reads_the_unquoted_2_6_format_too():
    result = compliance.parse_verify(1, '', '', VERIFY_LOG_UNQUOTED)
    assert result['failures'] == [
        {'device': None, 'option': 'vm.swappiness', 'current': '60', 'expected': '30'},
        {'device': 'xvdb', 'option': 'readahead', 'current': '256', 'expected': '8192'}]
    assert 'device xvdb: readahead is 256, expected 8192' in result['summary']


def test_parse_verify_without_a_log_says_what_tuned_adm_said():
    result = compliance.parse_verify(1, '', 'Cannot talk to TuneD daemon via DBus.\n', None)
    assert result['summary'] == 'rc 1: Cannot talk to TuneD daemon via DBus. (see /var/log/tuned/tuned.log)'


def test_parse_verify_passed_ignores_older_failures_in_the_log():
    assert compliance.parse_verify(0, 'Verification succeeded, current system settings match the preset profile.',
                                   '', VERIFY_LOG_2_20) == {'rc': 0, 'passed': True, 'failures': [],
                                                            'summary': 'passed'}


def test_facts_are_not_modified():
    facts = compliant()
    snapshot = copy.deepcopy(facts)
    compliance.misses(facts, INTENT, resolved())
    compliance.validate(facts, INTENT, resolved())
    assert facts == snapshot


# read_ahead_kb: auto (the role's sweep): the knobs are refused before any change, and the misses wait for
# the value the sweep chooses.

SWEEP = {'values': [256, 64, 32], 'readers': 4, 'duration': 3, 'size_mb': 256, 'tolerance_pct': 5.0,
         'volume_type': 'gp3', 'volume_size_gb': 0, 'iops': 0, 'throughput_mibps': 0}


def auto_intent(**knobs):
    sweep = dict(SWEEP)
    sweep.update(knobs)
    return compliance.normalise_intent(dict(INTENT, read_ahead_kb='auto', sweep=sweep))


def test_auto_with_valid_knobs_has_no_errors():
    assert compliance.validate(compliant(), auto_intent(), resolved()) == []


def test_auto_is_normalised_and_templated_knobs_become_numbers():
    intent = compliance.normalise_intent(dict(INTENT, read_ahead_kb=' AUTO ', sweep=dict(
        SWEEP, values=['256', '32'], readers='8', duration='2', tolerance_pct='2.5', iops='0', throughput_mibps='')))
    assert intent['read_ahead_kb'] == 'auto'
    assert compliance.is_auto(intent)
    assert intent['sweep']['values'] == [256, 32]
    assert (intent['sweep']['readers'], intent['sweep']['duration']) == (8, 2)
    assert intent['sweep']['tolerance_pct'] == 2.5
    assert intent['sweep']['iops'] is None and intent['sweep']['throughput_mibps'] is None
    assert compliance.validate(compliant(), intent, resolved()) == []


def test_other_words_are_still_refused_and_the_error_mentions_auto():
    errors = compliance.validate(compliant(), dict(INTENT, read_ahead_kb='fast'), resolved())
    assert len(errors) == 1 and 'aem_tuning_read_ahead_kb must be a whole number' in errors[0]
    assert 'Or give auto' in errors[0]


@pytest.mark.parametrize('knobs, needle', [
    ({'values': []}, 'aem_tuning_sweep_values must be a non-empty list'),
    ({'values': list(range(4, 140, 4))}, 'aem_tuning_sweep_values has 34 values'),
    ({'values': [64, 30]}, 'aem_tuning_sweep_values: 30: each value must be'),
    ({'values': [64, 131072]}, 'aem_tuning_sweep_values: 131072'),
    ({'values': [64, 'x']}, "aem_tuning_sweep_values: 'x'"),
    ({'values': [64, 32, 64]}, 'lists 64 more than once'),
    ({'readers': 0}, 'aem_tuning_sweep_readers=0'),
    ({'readers': 65}, 'aem_tuning_sweep_readers=65'),
    ({'duration': 0}, 'aem_tuning_sweep_duration=0'),
    ({'duration': 200}, '= 1200 s on the live device, more than the 900 s the role allows a sweep'),
    ({'values': [4096, 32], 'size_mb': 8}, 'aem_tuning_sweep_size_mb=8: give MiB of scratch file, at least 16'),
    ({'tolerance_pct': 100}, 'aem_tuning_sweep_tolerance_pct=100'),
    ({'volume_type': 'standard'}, "aem_tuning_volume_type='standard'"),
    ({'volume_type': 'gp3', 'iops': 80001},
     'aem_tuning_volume_iops=80001 is outside what an EBS gp3 volume can have (3,000 to 80,000 IOPS): give a value '
     'in that range, or aem_tuning_volume_type=custom for an emulated or other device.'),
    ({'volume_type': 'io2', 'iops': 1000, 'throughput_mibps': 4001.0},
     'aem_tuning_volume_throughput_mibps=4001.0 is outside what an EBS io2 volume can have (at most 4,000 MiB/s)'),
    ({'volume_type': 'io2'}, 'aem_tuning_volume_type=io2 is provisioned: give aem_tuning_volume_iops'),
    ({'volume_type': 'custom', 'iops': 5000}, 'custom needs aem_tuning_volume_iops and'),
    ({'volume_type': 'gp2'}, 'give aem_tuning_volume_size_gb'),
    ({'iops': -1}, 'aem_tuning_volume_iops=-1: give a positive number'),
])
def test_a_bad_sweep_knob_is_refused_naming_the_variable(knobs, needle):
    errors = compliance.validate(compliant(), auto_intent(**knobs), resolved())
    assert len(errors) == 1, errors
    assert needle in errors[0]


@pytest.mark.parametrize('knobs, timeout', [
    (SWEEP, 643),                                               # 3 x 2 x 3 s + 256 MiB // 10 + 600 s
    (dict(SWEEP, values=[4096, 1024, 256, 128, 64, 32, 16, 8], duration=5, size_mb=1024), 782),  # 80 + 102 + 600
    (dict(SWEEP, duration='3'), None),                          # not normalised: not valid
    (dict(SWEEP, values=None), None),
    (None, None),
])
def test_the_timeout_the_role_gives_the_sweep(knobs, timeout):
    assert compliance.sweep_timeout(knobs) == timeout


def test_the_sweep_timeout_rule_is_the_sweep_modules():
    assert compliance.sweep_timeout_error(3, 3, 1) is None
    assert compliance.sweep_timeout_error(2, 3, 1) == (
        'timeout=2 s is shorter than the random phases alone (3 values x duration=1 s = 3 s): raise timeout, lower '
        'duration or give fewer values.')


def test_the_volume_rules_agree_with_the_sweep_module():
    from ansible_collections.aemops.os_tuning.plugins.module_utils import sweep
    for knobs in ({'volume_type': 'gp3'}, {'volume_type': 'gp2', 'volume_size_gb': 500},
                  {'volume_type': 'io1', 'iops': 8000}, {'volume_type': 'io2', 'iops': 16000},
                  {'volume_type': 'custom', 'iops': 3000, 'throughput_mibps': 125.0},
                  {'volume_type': 'gp3', 'iops': 80000, 'throughput_mibps': 2000.0},
                  {'volume_type': 'io2', 'iops': 256000, 'throughput_mibps': 4000.0},
                  {'volume_type': 'st1'}, {'volume_type': 'sc1', 'volume_size_gb': 500}):
        assert compliance.validate(compliant(), auto_intent(**knobs), resolved()) == []
        sweep.volume_caps(knobs['volume_type'], knobs.get('volume_size_gb'), knobs.get('iops'),
                          knobs.get('throughput_mibps'))  # does not raise either
    for knobs in ({'volume_type': 'gp2'}, {'volume_type': 'io1'}, {'volume_type': 'custom', 'iops': 1},
                  {'volume_type': 'gp3', 'iops': 80001}, {'volume_type': 'io2', 'iops': 256001},
                  {'volume_type': 'st1', 'throughput_mibps': 501.0}):
        assert compliance.validate(compliant(), auto_intent(**knobs), resolved())
        with pytest.raises(sweep.SweepError):
            sweep.volume_caps(knobs['volume_type'], knobs.get('volume_size_gb'), knobs.get('iops'),
                              knobs.get('throughput_mibps'))


def test_auto_needs_a_repository_path_to_measure_on():
    errors = compliance.validate(compliant(), auto_intent(), resolved(targets=[]))
    assert len(errors) == 1 and 'measures on the AEM repository' in errors[0]


def test_auto_without_the_knobs_is_refused():
    errors = compliance.validate(compliant(), dict(INTENT, read_ahead_kb='auto'), resolved())
    assert errors and 'needs the sweep' in errors[0]


def test_auto_leaves_the_read_ahead_value_out_of_the_misses_but_not_persistence():
    facts = compliant()
    facts['block_devices']['dm-0']['read_ahead_kb'] = 4096
    assert compliance.misses(facts, auto_intent(), resolved()) == []
    facts['block_devices']['dm-0']['rule'] = None
    assert kinds(compliance.misses(facts, auto_intent(), resolved())) == ['persistence']


def test_backout_with_auto_does_not_check_the_knobs():
    intent = auto_intent(values=[])
    intent['state'] = 'absent'
    assert compliance.validate(compliant(), intent, resolved()) == []


def test_the_knobs_are_checked_also_with_a_recorded_number():
    # audit and check mode with auto use the value an apply run recorded, and still refuse a bad knob
    intent = auto_intent(readers=0)
    intent['read_ahead_kb'] = 64
    errors = compliance.validate(compliant(), intent, resolved())
    assert len(errors) == 1 and 'aem_tuning_sweep_readers=0' in errors[0]
    intent = auto_intent()
    intent['read_ahead_kb'] = 64
    assert compliance.validate(compliant(), intent, resolved()) == []


# A recorded sweep (the role's /etc/ansible/facts.d/aem_tuning_sweep.fact): when it holds, and why not.
FACT = '/etc/ansible/facts.d/aem_tuning_sweep.fact'


def record(**kw):
    result = {'recommended_kb': 64, 'knobs': dict(SWEEP, values=['256', '64', '32'], readers='4'), 'path': REPO,
              'device': 'dm-0', 'stable_id': {'key': 'ENV{DM_UUID}', 'value': 'LVM-x'}, 'taken': '2026-12-01T10:00:00Z',
              'why': '64 KiB: the largest within 5% of the best random reads/s'}
    result.update(kw)
    return json.dumps(result)


def recorded(text, may_sweep=False, facts=None, **knobs):
    intent = dict(auto_intent(**knobs), sweep_record=FACT, may_sweep=may_sweep)
    return intent, compliance.recorded_sweep(facts or compliant(), intent, resolved(), text)


def test_a_recorded_sweep_with_the_same_settings_path_and_device_holds():
    # the knobs recorded as text (ansible-core 2.16 templating) compare equal to this run's numbers
    intent, found = recorded(record())
    assert found['usable'] and found['why'] == '' and found['record']['recommended_kb'] == 64
    assert compliance.with_recorded(intent, found)['read_ahead_kb'] == 64
    errors, warnings = compliance.recorded_sweep_messages(intent, found)
    assert errors == [] and len(warnings) == 1
    assert 'does not sweep' in warnings[0] and '64 KiB, recorded by the sweep of dm-0' in warnings[0]


def test_a_renamed_device_with_the_same_identity_still_holds():
    facts = compliant()
    facts['block_devices']['dm-3'] = facts['block_devices'].pop('dm-0')
    facts['paths'][REPO]['device'] = 'dm-3'
    assert recorded(record(), facts=facts)[1]['usable']


@pytest.mark.parametrize('text, knobs, needle', [
    (None, {}, 'no apply run recorded one in ' + FACT),
    ('{"recommended_kb": 6', {}, 'damaged: %s: not valid JSON' % FACT),
    ('[64]', {}, 'damaged: %s: holds a JSON array, not object' % FACT),
    ('[' * 100000 + ']' * 100000, {}, 'damaged: %s: nested too deeply' % FACT),
    (record(recommended_kb=30), {}, 'records no valid recommended_kb (30)'),
    (record(recommended_kb='64'), {}, 'records no valid recommended_kb ("64")'),
    (record(), {'readers': 8}, 'measured with other aem_tuning_sweep_* or aem_tuning_volume_* settings'),
    (record(knobs=None), {}, 'measured with other'),
    (record(path='/srv/other'), {}, 'measured /srv/other, and this run\'s repository path is ' + REPO),
    (record(stable_id={'key': 'ENV{DM_UUID}', 'value': 'LVM-y'}), {},
     'measured dm-0 (ENV{DM_UUID}=LVM-y), and %s is now on dm-0 (ENV{DM_UUID}=LVM-x): another device' % REPO),
])
def test_a_recorded_sweep_that_does_not_hold_says_why(text, knobs, needle):
    intent, found = recorded(text, **knobs)
    assert not found['usable'] and needle in found['why'], found['why']
    assert compliance.with_recorded(intent, found)['read_ahead_kb'] == 'auto'
    # audit and check mode: an error naming why and the fix; nothing to warn about
    errors, warnings = compliance.recorded_sweep_messages(intent, found)
    assert warnings == [] and len(errors) == 1
    assert needle in errors[0] and 'Give aem_tuning_read_ahead_kb a number' in errors[0]


def test_apply_mode_may_sweep_so_neither_an_error_nor_a_warning():
    for text in (None, record()):
        intent, found = recorded(text, may_sweep=True)
        assert compliance.recorded_sweep_messages(intent, found) == ([], [])


def test_the_recorded_value_is_what_the_misses_check_against():
    intent, found = recorded(record())
    facts = compliant()
    assert kinds(compliance.misses(facts, compliance.with_recorded(intent, found), resolved())) == [
        'read_ahead', 'read_ahead', 'tuned_read_ahead']  # dm-0 and nvme1n1 are at 32, the recorded sweep chose 64


@pytest.mark.parametrize('mode, state, check_mode, expected', [
    ('apply', 'present', False, True),
    ('apply', 'present', True, False),
    ('audit', 'present', False, False),
    ('apply', 'absent', False, False),
    (None, 'present', False, False),
])
def test_only_an_apply_run_of_state_present_outside_check_mode_may_sweep(mode, state, check_mode, expected):
    assert compliance.may_sweep({'mode': mode, 'state': state}, check_mode) is expected


USABLE = {'usable': True, 'why': '', 'record': {'recommended_kb': 64, 'device': 'dm-0', 'taken': '2026-12-01T10:00:00Z'}}
NOT_USABLE = {'usable': False, 'why': 'no apply run recorded one in /f', 'record': None}


@pytest.mark.parametrize('intent, default, recorded, expected', [
    ({'read_ahead_kb': 32}, None, None, (32, 'given', False, None)),
    ({'read_ahead_kb': 32}, {'kb': 32, 'why': '32 KiB: the default'}, None, (32, 'default', False, None)),
    ({'read_ahead_kb': 32, 'state': 'absent'}, None, None, (None, None, False, None)),
    ({'read_ahead_kb': 'auto', 'may_sweep': True}, None, NOT_USABLE, (None, 'sweep', True, None)),
    ({'read_ahead_kb': 'auto', 'may_sweep': True}, None, None, (None, 'sweep', True, None)),
    ({'read_ahead_kb': 'auto', 'may_sweep': True}, None, USABLE, (64, 'recorded', False, 'recorded')),
    ({'read_ahead_kb': 'auto', 'may_sweep': True, 'sweep_force': True}, None, USABLE, (None, 'sweep', True, None)),
    ({'read_ahead_kb': 'auto', 'may_sweep': False, 'sweep_force': True}, None, USABLE,
     (64, 'recorded', False, 'recorded')),
    ({'read_ahead_kb': 'auto', 'may_sweep': False}, None, NOT_USABLE, (None, None, False, None)),
])
def test_the_read_ahead_choice(intent, default, recorded, expected):
    choice = compliance.read_ahead_choice(intent, default, recorded, knobs={'values': [32]})
    evidence = choice['evidence']['source'] if choice['evidence'] else None
    assert (choice['kb'], choice['source'], choice['sweep'], evidence) == expected
    assert choice['knobs'] == ({'values': [32]} if choice['sweep'] else None)
    assert choice['auto'] is (intent['read_ahead_kb'] == 'auto')
