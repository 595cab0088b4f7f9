# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host as one module run sees it: the one model of the host, and its one cache.

:class:`Host` is the root path of the run (a ``str``: every function that takes ``root`` takes it) that
remembers what the run read, so that the steps of a run (resolving, planning, conflicts, the tuned profile,
the facts) see one state of the host:

- in every run: the udev database, mountinfo, the stable identities, dm names and uuids, device numbers
  (``blockdev``), the files the collection never writes (tuned's main configuration and stock profiles, the
  kernel's release: ``files.host_text`` with ``static``), and the answers below (the rules file, the other
  files that set read-ahead, lvs, tuned's version, active profiles, daemon and child profile, THP, the THP
  baseline, the running and configured kernel command line, the boot loader);
- in a run that changes nothing (``read_only``: tuning_facts), every file besides, read_ahead_kb and tuned's
  state files included.

A run that changes the host reads again what it changes (read_ahead_kb after a write, tuned's
active_profile after an activation, the boot files around grubby): those reads are the read-back, not
planning. ``run`` and ``which`` are the module's run_command and get_bin_path; only read-only commands run
through it (lvs, tuned-adm --version, rpm -q grubby, grubby --info, grub2-editenv list).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    blockdev, bootloader, files, thp, tuned, udev_rules)

THP_KEY = 'transparent_hugepage'


class Host(str):
    """One run's root path and what the run read of it (``memo``; see the module's docstring)."""

    def __new__(cls, root, run=None, which=None, read_only=False):
        self = str.__new__(cls, root)
        self.memo = {}
        self.run = run
        self.which = which
        self.read_only = read_only
        return self

    @property
    def root(self):
        """The host itself: the planners pass ``snap.root`` where a function takes the root path."""
        return self

    def _once(self, key, read):
        key = ('host',) + (key if isinstance(key, tuple) else (key,))
        if key not in self.memo:
            self.memo[key] = read()
        return self.memo[key]

    # -- read-ahead ---------------------------------------------------------------------------------------------

    def rules(self, rules_path):
        """(text, rules, baselines) of the collection's udev rules file; raises RulesFileError or FileError."""
        def read():
            text = files.read_owned(files.root_path(self, rules_path), rules_path)
            return (text,) + tuple(udev_rules.parse(text, rules_path))
        return self._once(('rules', rules_path), read)

    def file_conflicts(self, rules_path):
        """Other udev rules and rc.local lines that set read-ahead (udev_rules.file_conflicts)."""
        return self._once(('file_conflicts', rules_path), lambda: udev_rules.file_conflicts(self, rules_path))

    def lvs(self, vg, lv, name):
        """(blockdev.lvs_read_ahead for the LV, None) or (None, why it failed); None without lvs."""
        def read():
            lvs = self.which('lvs')
            if not lvs:
                return None
            try:
                return blockdev.lvs_read_ahead(self.run, lvs, vg, lv, name), None
            except blockdev.BlockDeviceError as e:
                return None, str(e)
        return self._once(('lvs', vg, lv), read)

    # -- tuned ----------------------------------------------------------------------------------------------------

    def tuned(self):
        """(tuned-adm path or None, tuned version or None)."""
        return self._once('tuned', lambda: tuned.installed_version(self.run, self.which, self))

    def tuned_version(self):
        return self.tuned()[1]

    def active_profiles(self):
        return self._once('active_profiles', lambda: tuned.active_profiles(self))

    def tuned_running(self):
        return self._once('tuned_running', lambda: tuned.daemon_running(self))

    def child_state(self):
        return self._once('child_state', lambda: tuned.child_state(self))

    # -- THP and the kernel command line --------------------------------------------------------------------------

    def thp_state(self):
        """thp.read_state (raises thp.ThpError without THP)."""
        return self._once('thp_state', lambda: thp.read_state(self))

    def thp_baseline_text(self):
        """The THP baseline file's text or None (raises files.FileError when it is not a regular file)."""
        return self._once('thp_baseline_text', lambda: files.read_owned(
            files.root_path(self, thp.BASELINE_FILE), thp.BASELINE_FILE))

    def running_thp(self):
        """The value of transparent_hugepage= on /proc/cmdline."""
        return self._once('running_thp', lambda: bootloader.running(self, THP_KEY))

    def boot_facts(self):
        return self._once('boot_facts', lambda: bootloader.detect(self, self.which))

    def configured_thp(self):
        """bootloader.configured for transparent_hugepage (raises bootloader.BootloaderError)."""
        return self._once('configured_thp', lambda: bootloader.configured(self, self.boot_facts(), THP_KEY,
                                                                          self.run))
