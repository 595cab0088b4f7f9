# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""tests/vm/zipcache.py: the test guest's bytecode cache for zip-imported module payloads.

Each case runs a fresh interpreter, as a module run in the guest is one: it loads zipcache.py
with CACHE pointed at a directory of the test, then imports a module from a zip, as AnsiballZ
does. The host's python3 stands in for the guest's (both have the pure-Python zipimport).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import zipfile

import pytest

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
ZIPCACHE = os.path.join(TOP, 'tests', 'vm', 'zipcache.py')

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='zipcache trusts only a root-owned directory, as root')

RUNNER = r'''
import importlib.util, json, sys, traceback
spec = importlib.util.spec_from_file_location('aemops_zipcache', sys.argv[1])
z = importlib.util.module_from_spec(spec)
spec.loader.exec_module(z)
z.CACHE = sys.argv[2]
compiled = []
inner = z._COMPILE
def counting(pathname, source):
    compiled.append(pathname.rsplit('/', 1)[-1])
    return inner(pathname, source)
z._COMPILE = counting
sys.path.insert(0, sys.argv[3])
import payload.util as u
try:
    u.fail()
except ValueError:
    where = traceback.extract_tb(sys.exc_info()[2])[-1].filename
print(json.dumps({'value': u.VALUE, 'compiled': compiled, 'file': u.fail.__code__.co_filename,
                  'inner_file': u.helper().co_filename, 'traceback': where}))
'''

UTIL = u'''VALUE = %d


def helper():
    def inner():
        return 1
    return inner.__code__


def fail():
    raise ValueError("from the payload")
'''


def payload(tmp_path, name, value=1):
    path = tmp_path / name / 'payload.zip'
    path.parent.mkdir()
    with zipfile.ZipFile(str(path), 'w') as z:
        z.writestr('payload/__init__.py', u'')
        z.writestr('payload/util.py', UTIL % value)
    return path


def run(cache, zpath):
    out = subprocess.check_output([sys.executable, '-c', RUNNER, ZIPCACHE, str(cache), str(zpath)])
    return json.loads(out.decode('utf-8'))


@pytest.fixture
def cache(tmp_path):
    path = tmp_path / 'cache'
    path.mkdir()
    path.chmod(0o700)
    return path


def test_the_second_run_compiles_nothing_and_names_its_own_zip(tmp_path, cache):
    first = run(cache, payload(tmp_path, 'run1'))
    assert set(first['compiled']) == {'__init__.py', 'util.py'}
    assert len(os.listdir(str(cache))) == 2
    zpath = payload(tmp_path, 'run2')
    second = run(cache, zpath)
    assert second['compiled'] == []
    assert second['value'] == 1
    want = os.path.join(str(zpath), 'payload', 'util.py')
    assert second['file'] == want
    assert second['inner_file'] == want
    assert second['traceback'] == want


def test_changed_source_is_compiled_again(tmp_path, cache):
    run(cache, payload(tmp_path, 'run1', value=1))
    changed = run(cache, payload(tmp_path, 'run2', value=2))
    assert set(changed['compiled']) == {'util.py'}
    assert changed['value'] == 2


@pytest.mark.parametrize('mode', [0o755, 0o770, 0o1777])
def test_a_directory_others_may_write_or_read_is_not_used(tmp_path, cache, mode):
    cache.chmod(mode)
    run(cache, payload(tmp_path, 'run1'))
    again = run(cache, payload(tmp_path, 'run2'))
    assert set(again['compiled']) == {'__init__.py', 'util.py'}
    assert os.listdir(str(cache)) == []


def test_a_symlinked_directory_is_not_used(tmp_path, cache):
    link = tmp_path / 'link'
    link.symlink_to(cache)
    run(link, payload(tmp_path, 'run1'))
    assert os.listdir(str(cache)) == []


@pytest.mark.parametrize('damage', ['garbage', 'not code', 'symlink', 'too big'])
def test_a_damaged_entry_is_compiled_again_and_replaced(tmp_path, cache, damage):
    import marshal
    run(cache, payload(tmp_path, 'run1'))
    target = tmp_path / 'elsewhere'
    planted = marshal.dumps(compile('VALUE = 666', 'x', 'exec'))
    target.write_bytes(planted)
    for name in os.listdir(str(cache)):
        entry = cache / name
        entry.unlink()
        if damage == 'garbage':
            entry.write_bytes(b'\xe3\x00garbage')
        elif damage == 'not code':
            entry.write_bytes(marshal.dumps({'VALUE': 666}))
        elif damage == 'symlink':
            entry.symlink_to(target)
        else:
            # marshal reads one object and ignores what follows: only the size cap refuses it.
            entry.write_bytes(planted + b'\0' * (8 * 1024 * 1024))
    again = run(cache, payload(tmp_path, 'run2'))
    assert again['value'] == 1
    assert set(again['compiled']) == {'__init__.py', 'util.py'}
    assert target.read_bytes() == planted
    for name in os.listdir(str(cache)):
        assert not (cache / name).is_symlink()
    assert run(cache, payload(tmp_path, 'run3'))['compiled'] == []
