# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/boot_guard.py: AEM's start guard (the drop-in, its library, the run at AEM's start)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    blockdev, boot_guard, files, readers_record, readers_verdict, udev_rules)
from fakehost import nitro_host

MODULE_UTILS = os.path.dirname(boot_guard.__file__)
LV_MATCH = 'ENV{DM_UUID}=="LVM-%s"' % ('x' * 64)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='the guard checks that its files are root\'s')


@pytest.fixture
def host(tmpdir):
    h = nitro_host(tmpdir)
    h.write(udev_rules.RULES_FILE, udev_rules.render({LV_MATCH: 32}, {}))
    h.write(readers_record.BOOT_ID, 'boot-1\n')
    h.add_process(700, comm='tuned', start_ticks=500, unit='tuned.service')
    return h


def _imports(name):
    tree = ast.parse(open(os.path.join(MODULE_UTILS, name + '.py')).read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == boot_guard.PACKAGE:
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or '').startswith(boot_guard.PACKAGE + '.'):
            out.add(node.module.rsplit('.', 1)[1])
    return out


def test_the_installed_modules_are_the_launchers_whole_import_closure():
    seen, todo = set(), ['boot_guard']
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_imports(name))
    assert seen == set(boot_guard.MODULES)


def test_the_drop_in_starts_aem_anyway_runs_as_root_and_finds_python_at_each_start():
    text = boot_guard.dropin_text('aem.service', '/usr/local/lib/aemops-os-tuning/abc')
    line = [l for l in text.splitlines() if l.startswith('ExecStartPre=')][0]
    assert line.startswith("ExecStartPre=-+/bin/sh -c '")
    assert '"$$p" -E -s -B /usr/local/lib/aemops-os-tuning/abc/pre-start.py' in line
    assert '/usr/libexec/platform-python /usr/bin/python3' in line and '%' not in line
    assert 'After=systemd-udev-trigger.service systemd-udev-settle.service tuned.service' in text


@pytest.mark.parametrize('unit, ok', [('aem.service', True), ('aem@author.service', True), ('aem', True),
                                      ('aem.socket', False), ('aem.target', False),
                                      ('aem@.service', False), ('a b.service', False), ('%n.service', False)])
def test_unit_names(unit, ok):
    assert (boot_guard.unit_problem(unit) is None) is ok


def test_at_aems_start_a_device_at_another_value_is_set_and_this_boot_recorded(host):
    report = boot_guard.settle(host.root, now=1764650500.0)
    assert report == {'set': [{'name': 'dm-0', 'majmin': '253:0', 'before_kb': 4096, 'kb': 32}], 'problems': []}
    assert host.read_ahead('dm-0') == 32 and host.read_ahead('nvme1n1') == 4096  # only what a rule names
    record = readers_record.read_record(host.root)[0]
    entry = record['devices']['253:0']
    assert record['boot_id'] == 'boot-1' and entry['kb'] == 32 and entry['since'] == 1764650500.0
    assert [700, 500, readers_record.UNSCANNED, 0] in entry['stale']
    # AEM, started after, is fresh by the record; tuned, alive then, may hold a file opened at 4096.
    devices = {'253:0': {'name': 'dm-0', 'kb': 32, 'seq': None}}

    def reader(pid, start, ino):
        held = {'dev': '253:0', 'ino': ino, 'fds': [40], 'paths': {}, 'mapped': True, 'path': '/opt/aem/%d.tar' % ino}
        return {'pid': pid, 'start_ticks': start, 'files': [held]}
    found = {'readers': [reader(900, 90000, 11), reader(700, 500, 12)]}
    assessed = dict((e['pid'], e) for e in readers_verdict.assess(found, devices, record, 'boot-1'))
    assert assessed[900]['stale_fds'] == [] and assessed[900]['fresh'] == 1
    assert len(assessed[700]['stale_fds']) == 1


def test_a_device_at_its_value_is_left_to_the_boot_rule(host):
    host.write('/sys/devices/virtual/block/dm-0/queue/read_ahead_kb', '32\n')
    assert boot_guard.settle(host.root) == {'set': [], 'problems': []}
    assert readers_record.read_record(host.root) == (None, None)


def test_a_rules_file_another_user_can_write_is_not_obeyed(host):
    os.chmod(host.path(udev_rules.RULES_FILE), 0o666)
    report = boot_guard.settle(host.root)
    assert report['set'] == [] and 'writable by group or others' in report['problems'][0]
    assert host.read_ahead('dm-0') == 4096


def _install(host, unit='aem.service', present=True, version=252):
    guard = boot_guard.plan(host.root, unit, present, version)
    calls = []
    changed = boot_guard.apply(host.root, guard, _write, lambda c, **kw: calls.append(c),
                               '/bin/systemctl') if guard['changed'] else []
    return guard, changed, calls


def _write(path, text):
    with open(path, 'w') as f:
        f.write(text)


def test_install_then_nothing_to_do_then_changed_then_backed_out(host):
    guard, changed, calls = _install(host)
    assert guard['changed'] and guard['path'] == '/etc/systemd/system/aem.service.d/90-aemops-read-ahead.conf'
    assert calls == [['/bin/systemctl', 'daemon-reload']] and guard['lib'] in changed
    assert boot_guard.state(host.root, 'aem.service')['state'] == 'ok'
    assert not boot_guard.plan(host.root, 'aem.service', True, 252)['changed']
    launcher = host.path(guard['lib'] + '/' + boot_guard.LAUNCHER)
    with open(launcher, 'a') as f:
        f.write('import os\n')
    assert boot_guard.state(host.root, 'aem.service')['problem'].endswith('pre-start.py differs from what this '
                                                                          'version of the collection installs')
    assert boot_guard.plan(host.root, 'aem.service', True, 252)['write_lib']
    os.unlink(host.path(guard['path']))
    assert boot_guard.state(host.root, 'aem.service')['state'] == 'missing'
    _install(host, 'aem-publish.service')
    assert boot_guard.state(host.root, 'aem.service')['state'] == 'missing'
    assert list(boot_guard.installed(host.root)[0]) == ['aem-publish.service']
    _install(host, 'aem-publish.service', present=False)
    assert boot_guard.installed(host.root) == ({}, [])
    assert not os.path.exists(host.path(boot_guard.LIB_DIR))
    assert not os.path.exists(host.path('/etc/systemd/system/aem-publish.service.d'))


def test_old_systemd_gets_no_guard_and_a_warning(host):
    guard, changed, calls = _install(host, version=219)
    assert 'systemd 219 has no "+" prefix' in guard['warning'] and changed == [] and calls == []


def test_the_installed_launcher_runs_alone_without_ansible(host):
    guard = _install(host)[0]
    launcher = host.path(guard['lib'] + '/' + boot_guard.LAUNCHER)
    # The interpreter of this test run (2.7 and 3.6 in make compat), with no Ansible and no path from outside.
    proc = subprocess.Popen([sys.executable, '-E', '-s', '-B', launcher, '--root', host.root],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, cwd='/')
    out = proc.communicate()[0]
    assert out == ('aemops-os-tuning: dm-0 read-ahead 4096 -> 32 KiB (persisted in %s), before the service '
                   'starts\n' % udev_rules.RULES_FILE), out
    assert proc.returncode == 0 and host.read_ahead('dm-0') == 32
    assert not [n for n in os.listdir(host.path(guard['lib'])) if n == '__pycache__']
    assert json.loads(open(host.path(readers_record.RECORD_PATH)).read())['devices']['253:0']['kb'] == 32
    assert blockdev  # the module the launcher set the value with


def test_a_library_directory_another_user_can_write_is_refused_before_any_change(host):
    guard = _install(host)[0]
    inner = host.path(guard['lib'] + '/ansible_collections')
    os.chmod(inner, 0o777)
    assert 'ansible_collections is writable by group or others (mode 0777)' in boot_guard.state(host.root, 'aem')['problem']
    with pytest.raises(files.FileError) as info:
        boot_guard.plan(host.root, 'aem', True, 252)
    assert 'ansible_collections is writable by group or others' in str(info.value) and 'then remove %s' % guard['lib'] in str(info.value)
    os.chmod(host.path(guard['lib']), 0o777)
    with pytest.raises(files.FileError):
        boot_guard.plan(host.root, 'aem', True, 252)


@pytest.mark.parametrize('damage, words', [
    (lambda lib: os.symlink('/tmp', os.path.join(lib, 'ansible_collections', 'evil')), 'is a symbolic link, not a regular file'),
    (lambda lib: open(os.path.join(lib, 'extra.py'), 'w').close(), 'is not one the collection installs'),
    (lambda lib: os.unlink(os.path.join(lib, boot_guard.LAUNCHER)), 'pre-start.py is missing'),
])
def test_a_library_root_cannot_trust_is_changed_and_written_again(host, damage, words):
    guard = _install(host)[0]
    damage(host.path(guard['lib']))
    found = boot_guard.state(host.root, 'aem')
    assert found['state'] == 'changed' and words in found['problem'], found
    assert _install(host, 'aem')[0]['write_lib']
    assert boot_guard.state(host.root, 'aem.service')['state'] == 'ok'
