# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""`tests/vm/vm.sh collect` names why a guest's boot stopped, and the CI summary repeats it.

The serial log is a short copy of the shape a real one had (run of 2026-12-03, the upgrade
scenario's backout reboot on trixie under TCG beside a second VM): an earlier boot that came up,
then a boot whose LV did not appear within systemd's 90 s device wait, and emergency mode. No VM
runs here: collect on a run dir without a qemu keeps the host side, which is what a failure with
an unreachable guest leaves.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import subprocess

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
VM_SH = os.path.join(TOP, 'tests', 'vm', 'vm.sh')

ESC = '\x1b'
OLD_BOOT = [
    '=== qemu start 03:20:01 boot=grub accel=tcg nvme-order=ba port=53959',
    '[    0.000000] Linux version 6.12.118+deb13-amd64 (debian-kernel@lists.debian.org) #1 SMP',
    # A device wait that ended well in an earlier boot is no cause of the last one.
    '[  OK  ] Found device dev-disk-by\\x2duuid-d57b88f4.device',
    'aemvm login: ',
]
STOPPED_BOOT = [
    '[  457.613040] reboot: machine restart',
    '[    0.000000] Linux version 6.12.118+deb13-amd64 (debian-kernel@lists.debian.org) #1 SMP',
    ESC + '[K[' + ESC + '[0;1;31m TIME ' + ESC + '[0m] Timed out waiting for device '
    + ESC + '[0;1;39mdev-d\u2026' + ESC + '[0mf1b866-45b5-44dc-bc5b-38d7c62c2bb9.',
    ESC + '[K[' + ESC + '[0;1;38:5:185mDEPEND' + ESC + '[0m] Dependency failed for '
    + ESC + '[0;1;39msrv-aem.mount' + ESC + '[0m - /srv/aem.',
    '[' + ESC + '[0;32m  OK  ' + ESC + '[0m] Started ' + ESC + '[0;1;39memergency.service' + ESC + '[0m - Emergency Shell.',
    'You are in emergency mode. After logging in, type "journalctl -xb" to view',
    'Cannot open access to console, the root account is locked.',
]


def _lanes():
    spec = importlib.util.spec_from_file_location('aemops_test_lanes', os.path.join(TOP, 'scripts', 'test-lanes.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def collect(tmp_path, lines, *args):
    run = tmp_path / 'run'
    run.mkdir()
    (run / '.aemops-vm').write_text('')
    (run / 'serial.log').write_bytes(('\r\n'.join(lines) + '\r\n').encode('utf-8'))
    out = tmp_path / 'logs' / 'vm' / 'upgrade-main'
    env = dict(os.environ, AEMOPS_VM_RUN=str(run))
    subprocess.check_call(['bash', VM_SH, 'collect'] + list(args) + [str(out)], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def test_collect_names_the_last_boots_trouble_without_colours(tmp_path):
    out = collect(tmp_path, OLD_BOOT + STOPPED_BOOT)
    status = (out / 'status.txt').read_text().splitlines()
    assert status == [
        'stopped (%s)' % (tmp_path / 'run'),
        "the guest did not answer: only the serial log and qemu's stderr",
        'serial log, last boot: [ TIME ] Timed out waiting for device dev-d\u2026f1b866-45b5-44dc-bc5b-38d7c62c2bb9.',
        'serial log, last boot: [DEPEND] Dependency failed for srv-aem.mount - /srv/aem.',
        'serial log, last boot: You are in emergency mode. After logging in, type "journalctl -xb" to view',
    ]
    assert (out / 'serial.log').read_bytes().startswith(b'=== qemu start')


def test_a_boot_that_came_up_has_no_trouble_line(tmp_path):
    # The stopped boot came first; the last boot is a good one.
    out = collect(tmp_path, STOPPED_BOOT + OLD_BOOT, '--host-only')
    status = (out / 'status.txt').read_text()
    assert 'host side only' in status
    assert 'serial log, last boot' not in status


def test_the_ci_summary_repeats_the_trouble_of_the_failed_phases_vms(tmp_path):
    collect(tmp_path, OLD_BOOT + STOPPED_BOOT)
    lanes = _lanes()
    vm_logs = str(tmp_path / 'logs' / 'vm')
    found = lanes.boot_trouble(vm_logs, 'molecule-upgrade')
    assert found[0] == 'upgrade-main: [ TIME ] Timed out waiting for device dev-d\u2026f1b866-45b5-44dc-bc5b-38d7c62c2bb9.'
    assert found[-1].startswith('upgrade-main: You are in emergency mode.')
    assert lanes.boot_trouble(vm_logs, 'molecule-default') == []
