# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tuned's version read from tuned/version.py, where tuned-adm --version takes it from.

Upstream (redhat-performance/tuned): tuned-adm.py prints "%(prog)s X.Y.Z" from
tuned.version's TUNED_VERSION_MAJOR/MINOR/PATCH, unchanged from v2.11.0 to v2.25.1; tuned.spec
installs the package into the interpreter's sitelib. The fixtures below are the file's three
assignments at the tags named, and the interpreter lines of tuned-adm as each release ships it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import tuned
from fakehost import FakeHost


def version_py(major, minor, patch):
    return ('TUNED_VERSION_MAJOR = %d\nTUNED_VERSION_MINOR = %d\nTUNED_VERSION_PATCH = %d\n\n'
            'TUNED_VERSION_STR = "%%d.%%d.%%d" %% (TUNED_VERSION_MAJOR, TUNED_VERSION_MINOR, TUNED_VERSION_PATCH)\n'
            % (major, minor, patch))


# (release, tuned tag, interpreter in tuned-adm's #! line, what it resolves to, sitelib)
RELEASES = [
    ('RHEL 7', (2, 11, 0), '/usr/bin/python', 'python2.7', '/usr/lib/python2.7/site-packages'),
    ('RHEL 8', (2, 22, 1), '/usr/libexec/platform-python', 'python3.6', '/usr/lib/python3.6/site-packages'),
    ('RHEL 9', (2, 24, 0), '/usr/bin/python3', 'python3.9', '/usr/lib/python3.9/site-packages'),
    ('Debian 12', (2, 20, 0), '/usr/bin/python3', 'python3.11', '/usr/lib/python3/dist-packages'),
]


class Tools(object):
    def __init__(self):
        self.calls = []

    def which(self, name):
        return '/usr/sbin/tuned-adm'

    def run(self, argv):
        self.calls.append(argv)
        return 0, 'tuned-adm 2.99.0\n', ''


def host_with(tmpdir, interpreter, resolved, sitelib, version):
    host = FakeHost(tmpdir)
    host.write('/usr/sbin/tuned-adm', '#!%s -Es\n# tuned-adm\n' % interpreter)
    host.write('/usr/bin/%s' % resolved, '')
    if interpreter != '/usr/bin/%s' % resolved:
        host.symlink(interpreter, '/usr/bin/%s' % resolved)
    host.write(sitelib + '/tuned/version.py', version_py(*version))
    return host


@pytest.mark.parametrize('release, version, interpreter, resolved, sitelib', RELEASES)
def test_the_version_comes_from_the_file_without_a_process(tmpdir, release, version, interpreter, resolved, sitelib):
    host = host_with(tmpdir, interpreter, resolved, sitelib, version)
    tools = Tools()
    assert tuned.installed_version(tools.run, tools.which, host.root) == ('/usr/sbin/tuned-adm', version)
    assert tools.calls == []


def test_two_sitelibs_pick_the_one_of_tuned_adms_interpreter(tmpdir):
    host = host_with(tmpdir, '/usr/libexec/platform-python', 'python3.6', '/usr/lib/python3.6/site-packages',
                     (2, 22, 1))
    host.write('/usr/lib/python2.7/site-packages/tuned/version.py', version_py(2, 11, 0))  # left over
    tools = Tools()
    assert tuned.installed_version(tools.run, tools.which, host.root)[1] == (2, 22, 1)
    assert tools.calls == []


def test_ambiguous_or_missing_files_fall_back_to_tuned_adm(tmpdir):
    host = FakeHost(tmpdir)
    host.write('/usr/sbin/tuned-adm', '#!/usr/bin/python3 -Es\n')
    host.write('/usr/lib/python3.9/site-packages/tuned/version.py', version_py(2, 24, 0))
    host.write('/usr/lib/python3.11/site-packages/tuned/version.py', version_py(2, 25, 1))
    tools = Tools()
    assert tuned.installed_version(tools.run, tools.which, host.root)[1] == (2, 99, 0)
    assert tools.calls == [['/usr/sbin/tuned-adm', '--version']]


def test_without_root_it_asks_tuned_adm():
    tools = Tools()
    assert tuned.installed_version(tools.run, tools.which) == ('/usr/sbin/tuned-adm', (2, 99, 0))


@pytest.mark.parametrize('text, expected', [
    (version_py(2, 11, 0), (2, 11, 0)),
    ('TUNED_VERSION_MAJOR = 2\nTUNED_VERSION_MINOR = 25\n', (2, 25, 0)),
    ('garbage', None),
    (None, None),
])
def test_version_from_file(text, expected):
    assert tuned.version_from_file(text) == expected
