# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host as one module run sees it: the one model of the host, and its one cache.

:class:`Host` is the root path of the run (a ``str``: every function that takes ``root`` takes it) that
remembers what the run read (``once``), so that the steps of a run (resolving, planning, conflicts, the tuned
profile, the facts) see one state of the host:

- in every run: the udev database, mountinfo, the stable identities, dm names and uuids, device numbers
  (``blockdev``), the files the collection never writes (tuned's main configuration and stock profiles, the
  kernel's release: ``files.host_text`` with ``static``), tuned's answers below, and the planners' own answers
  through the same cache (``read_ahead_plan.ReadAheadHost``: the rules file, the other files that set
  read-ahead, lvs; ``thp_plan.ThpHost``: THP, its baseline, the running and configured kernel command line, the
  boot loader). They live beside their planner so that a module's payload carries only the code it runs;
- while the host is frozen (``read_only``), every file besides, read_ahead_kb and tuned's state files included:
  for the whole of a run that changes nothing (tuning_facts), and for the planning of a run that changes the host
  (read_ahead, thp: the module builds its host frozen, plans, then calls ``thaw``). The plan is made from one
  state of the host, each source read once.

After ``thaw``, a run reads again what it changes (read_ahead_kb after a write, the THP attributes, tuned's
profile_mode after a switch, the boot files around grubby): those reads are the read-back, not planning.
``run`` and ``which`` are the module's run_command and get_bin_path; only read-only commands run through it
(lvs, tuned-adm --version, rpm -q grubby, grubby --info, grub2-editenv list).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.aemops.os_tuning.plugins.module_utils import tuned


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

    def thaw(self):
        """The plan is made and the run may now change the host: forget what the frozen host (``read_only``) read of
        the files and read_ahead_kb, so that the writes and the read-back see the host as it is then. Kept: the files
        the collection never writes (``static``), and the answers of ``once`` (the devices, tuned's state as
        planned)."""
        self.read_only = False
        for key in [k for k in self.memo if isinstance(k, tuple) and k[0] in ('text', 'read_ahead_kb')]:
            del self.memo[key]

    def once(self, key, read):
        """``read()``, once per run: the one cache, for the answers here and the planners' own
        (read_ahead_plan.ReadAheadHost, thp_plan.ThpHost)."""
        key = ('host',) + (key if isinstance(key, tuple) else (key,))
        if key not in self.memo:
            self.memo[key] = read()
        return self.memo[key]

    # -- systemd --------------------------------------------------------------------------------------------------

    def systemd_version(self):
        """systemd's major version from ``systemctl --version`` ("systemd 239 (239-78.el8)"), or None."""
        def read():
            systemctl = self.which('systemctl')
            rc, out, _err = self.run([systemctl, '--version']) if systemctl else (1, '', '')
            m = re.match(r'systemd (\d+)', out or '') if rc == 0 else None
            return int(m.group(1)) if m else None
        return self.once('systemd_version', read)

    # -- tuned ----------------------------------------------------------------------------------------------------

    def tuned(self):
        """(tuned-adm path or None, tuned version or None)."""
        return self.once('tuned', lambda: tuned.installed_version(self.run, self.which, self))

    def tuned_version(self):
        return self.tuned()[1]

    def active_profiles(self):
        return self.once('active_profiles', lambda: tuned.active_profiles(self))

    def tuned_running(self):
        return self.once('tuned_running', lambda: tuned.daemon_running(self))

    def child_state(self):
        return self.once('child_state', lambda: tuned.child_state(self))
