# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""scripts/deps (make deps): the Debian packages of requirements/system-packages.txt.

Each case runs the script with a PATH of its own: stand-ins for dpkg-query, apt-get, sudo and id
that keep their state in files of the test (the installed packages, every apt-get call), and the
few real tools the script needs besides (dirname, date, env, true). Nothing of the host's dpkg is read
or changed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

import pytest

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
DEPS = os.path.join(TOP, 'scripts', 'deps')
LIST = os.path.join(TOP, 'requirements', 'system-packages.txt')
GROUPS = ('run', 'check', 'test')
EX_CANNOT = 3
EX_FAILED = 4

# dpkg-query -W -f='${db:Status-Status} ${Package}\n' PKG...: "installed PKG" for what $FAKE/installed
# lists; for the rest, the real one's complaint on stderr and exit 1.
DPKG_QUERY = r'''#!/bin/sh
rc=0
for a in "$@"; do
  case $a in -*) continue ;; esac
  found=
  while read -r p; do [ "$p" = "$a" ] && found=1; done < "$FAKE/installed"
  if [ -n "$found" ]; then echo "installed $a"; else echo "dpkg-query: no packages found matching $a" >&2; rc=1; fi
done
exit $rc
'''

# apt-get: logs each call (one line) to $FAKE/apt.log; install adds its packages to $FAKE/installed
# unless $FAKE/install-fails exists.
APT_GET = r'''#!/bin/sh
echo "$*" >> "$FAKE/apt.log"
verb=
for a in "$@"; do
  case $a in
  -o) skip=1; continue ;;
  -*) continue ;;
  esac
  if [ -n "${skip:-}" ]; then skip=; continue; fi
  if [ -z "$verb" ]; then verb=$a; continue; fi
  [ "$verb" = install ] && [ ! -e "$FAKE/install-fails" ] && echo "$a" >> "$FAKE/installed"
done
if [ "$verb" = install ] && [ -e "$FAKE/install-fails" ]; then echo "E: Unable to locate package" >&2; exit 100; fi
exit 0
'''

# sudo -n CMD...: runs CMD when $FAKE/sudo-ok exists, else refuses as sudo does without a password.
SUDO = r'''#!/bin/sh
echo "sudo $*" >> "$FAKE/sudo.log"
[ -e "$FAKE/sudo-ok" ] || { echo "sudo: a password is required" >&2; exit 1; }
[ "$1" = -n ] && shift
exec "$@"
'''

ID = r'''#!/bin/sh
echo "${FAKE_UID:-0}"
'''


def packages(*groups):
    """(package, reason) of the list's lines in any of groups, in the list's order."""
    out = []
    with open(LIST) as f:
        for line in f:
            spec, _sep, reason = line.partition('#')
            words = spec.split()
            if words and set(words[1:]) & set(groups):
                out.append((words[0], reason.strip()))
    return out


@pytest.fixture
def fake(tmp_path):
    """A directory of stand-ins and their state; fake.run(groups, ...) runs scripts/deps with it."""
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    for name, body in (('dpkg-query', DPKG_QUERY), ('apt-get', APT_GET), ('sudo', SUDO), ('id', ID)):
        (bindir / name).write_text(body)
        os.chmod(str(bindir / name), 0o755)
    for tool in ('dirname', 'date', 'env', 'true'):
        for d in ('/usr/bin', '/bin'):
            if os.path.exists(os.path.join(d, tool)):
                os.symlink(os.path.join(d, tool), str(bindir / tool))
                break
    (tmp_path / 'installed').write_text(u'')

    class Fake(object):
        path = tmp_path

        def install(self, names):
            with open(str(tmp_path / 'installed'), 'a') as f:
                f.write(u''.join(n + '\n' for n in names))

        def calls(self, name='apt.log'):
            p = tmp_path / name
            return p.read_text().splitlines() if p.exists() else []

        def run(self, *groups, **kw):
            env = {'PATH': str(bindir), 'FAKE': str(tmp_path), 'FAKE_UID': str(kw.get('uid', 0))}
            return subprocess.run(['/bin/bash', DEPS] + list(groups), env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)

    return Fake()


def test_the_list():
    """Every line: a package, groups among run/check/test, a reason; test has every package; make run's are there."""
    seen = []
    with open(LIST) as f:
        for line in f:
            spec, sep, reason = line.partition('#')
            words = spec.split()
            if not words:
                continue
            assert sep and reason.strip(), line
            assert words[1:] and set(words[1:]) <= set(GROUPS), line
            assert 'test' in words[1:], line
            assert words[0] not in seen, line
            seen.append(words[0])
    run = [p for p, _r in packages('run')]
    for p in ('qemu-system-x86', 'qemu-utils', 'mmdebstrap', 'openssh-client', 'e2fsprogs'):
        assert p in run
    for p in ('lvm2', 'udev', 'strace', 'shellcheck'):
        assert p not in run and p in seen


def test_nothing_missing_prints_nothing(fake):
    fake.install(p for p, _r in packages(*GROUPS))
    r = fake.run('run', 'check', 'test')
    assert (r.returncode, r.stdout, r.stderr) == (0, '', '')
    assert fake.calls() == []


def test_missing_named_and_installed_once(fake):
    want = packages('test')
    fake.install(['git', 'make'])
    r = fake.run('test')
    assert r.returncode == 0, r.stderr
    missing = [(p, why) for p, why in want if p not in ('git', 'make')]
    for p, why in missing:
        assert any(line.split(None, 1) == [p, why] for line in r.stdout.splitlines()), (p, r.stdout)
    calls = fake.calls()
    assert len(calls) == 2, calls
    assert calls[0].endswith('update -qq')
    assert calls[1].split()[-len(missing):] == [p for p, _w in missing]
    assert '--no-install-recommends' in calls[1].split() and '-y' in calls[1].split()
    # and then it is all there: the next run is silent and calls nothing
    again = fake.run('test')
    assert (again.returncode, again.stdout, again.stderr) == (0, '', '')
    assert len(fake.calls()) == 2


def test_run_installs_only_what_run_needs(fake):
    r = fake.run('run')
    assert r.returncode == 0, r.stderr
    install = fake.calls()[-1].split()
    assert install[-len(packages('run')):] == [p for p, _r in packages('run')]
    for p in ('lvm2', 'udev', 'strace', 'shellcheck'):
        assert p not in install and p not in r.stdout


def test_not_root_with_passwordless_sudo(fake):
    (fake.path / 'sudo-ok').write_text(u'')
    r = fake.run('run', uid=1000)
    assert r.returncode == 0, r.stderr
    assert len(fake.calls()) == 2
    assert [c.split()[:3] for c in fake.calls('sudo.log')[1:]] == [['sudo', '-n', 'env']] * 2


@pytest.mark.parametrize('case', ['no-sudo', 'no-dpkg'])
def test_cannot_install_one_line(fake, case):
    """Not root without passwordless sudo, or no dpkg: one line with the command, exit 3, nothing run."""
    run = [p for p, _r in packages('run')]
    if case == 'no-dpkg':
        os.remove(str(fake.path / 'bin' / 'dpkg-query'))
    r = fake.run('run', uid=1000)
    assert r.returncode == EX_CANNOT
    assert r.stdout == ''
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    if case == 'no-sudo':
        assert "sudo sh -c 'apt-get update && apt-get install -y --no-install-recommends %s'" % ' '.join(run) in lines[0]
    else:
        assert ' '.join(run) in lines[0] and 'DEPS=' in lines[0]
    assert fake.calls() == []
    assert (fake.path / 'installed').read_text() == ''


def test_install_fails(fake):
    (fake.path / 'install-fails').write_text(u'')
    r = fake.run('run')
    assert r.returncode == EX_FAILED
    assert len(fake.calls()) == 2
    assert r.stderr.splitlines()[-1].startswith('deps: apt-get install failed')


def test_usage(fake):
    assert fake.run().returncode == 2
    assert fake.run('bench').returncode == 2
    assert fake.calls() == []


def test_ci_and_make_use_the_one_list():
    with open(os.path.join(TOP, '.ci', 'run')) as f:
        ci = f.read()
    assert 'phase apt scripts/deps test' in ci
    assert 'APT_PACKAGES' not in ci and 'apt-get install' not in ci
    out = subprocess.run(['make', '-n', 'run'], cwd=TOP, stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    assert out.split('\n')[0] == 'scripts/deps run'
    out = subprocess.run(['make', '-n', 'deps'], cwd=TOP, stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    assert out.split('\n')[0] == 'scripts/deps test'
