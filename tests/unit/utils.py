# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Helpers for unit tests of modules (plugins/modules/*.py): running a module's ``main()``.

Runs on every interpreter the tests run on: Python 2.7 and 3.6 (``make compat``, with
ansible-core 2.16's module_utils) and Python 3.11 with ansible-core 2.16 and 2.19
(``make unit``). So: no f-strings, no annotations, no keyword-only arguments.

Module tests build an :class:`Env` (fakehost.FakeHost + fakehost.FakeTools, attached with
``monkeypatch``) and call :meth:`Env.run`/:meth:`Env.fail`; for a one-off run without a fake
host, ``run_module`` does. Typical use (``module_exit`` is registered by tests/unit/conftest.py)::

    @pytest.fixture
    def env(tmpdir, monkeypatch, module_exit):
        host = nitro_host(tmpdir.join('root'))
        return Env(read_ahead, host, nitro_tools(host, str(tmpdir.join('bin')))).attach(monkeypatch)

    def test_check_mode(env):
        result = env.run({'paths': ['/'], 'read_ahead_kb': 32}, check=True)
        assert result['changed'] is True and env.tools.mutations() == []

    from ansible_collections.aemops.os_tuning.plugins.modules import read_ahead
    from ansible_collections.aemops.os_tuning.tests.unit.utils import (
        AnsibleExitJson, AnsibleFailJson, run_module, set_module_args)

    def test_check_mode(module_exit):
        result = run_module(read_ahead.main, {'paths': ['/'], 'read_ahead_kb': 32, '_ansible_check_mode': True})
        assert result['changed'] is False

    def test_bad_args(module_exit):
        with set_module_args({'paths': []}):
            with pytest.raises(AnsibleFailJson) as exc:
                read_ahead.main()
        assert 'read_ahead_kb' in exc.value.result['msg']

How module arguments reach ``AnsibleModule`` changed in ansible-core 2.19: it reads
``basic._ANSIBLE_ARGS`` *and* a serialization profile, and ships
``ansible.module_utils.testing.patch_module_args`` to set both. ``set_module_args`` uses
that when it exists and patches ``basic._ANSIBLE_ARGS`` itself on older releases. Either
way it is a context manager: the arguments apply to ``AnsibleModule`` objects created
inside the ``with`` block only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

try:
    from ansible.module_utils.testing import patch_module_args as _patch_module_args  # ansible-core >= 2.19
except ImportError:
    _patch_module_args = None

# Internal arguments the controller always sends; modules that create temp files need them.
DEFAULT_INTERNAL_ARGS = {
    '_ansible_remote_tmp': '/tmp',
    '_ansible_keep_remote_files': False,
}


class AnsibleExitJson(Exception):
    """Raised in place of ``AnsibleModule.exit_json``; ``result`` holds its keyword arguments."""

    def __init__(self, result):
        super(AnsibleExitJson, self).__init__(result)
        self.result = result


class AnsibleFailJson(Exception):
    """Raised in place of ``AnsibleModule.fail_json``; ``result`` holds its keyword arguments."""

    def __init__(self, result):
        super(AnsibleFailJson, self).__init__(result)
        self.result = result


def exit_json(*args, **kwargs):
    """Replacement for ``AnsibleModule.exit_json`` (patched onto the class)."""
    kwargs.setdefault('changed', False)
    raise AnsibleExitJson(kwargs)


def fail_json(*args, **kwargs):
    """Replacement for ``AnsibleModule.fail_json`` (patched onto the class).

    ``msg`` may be passed by keyword or as the first positional argument after ``self``.
    """
    if len(args) > 1 and 'msg' not in kwargs:
        kwargs['msg'] = args[1]
    kwargs['failed'] = True
    raise AnsibleFailJson(kwargs)


def _with_defaults(args):
    result = dict(DEFAULT_INTERNAL_ARGS)
    result.update(args or {})
    return result


@contextlib.contextmanager
def _patch_ansible_args(args):
    """ansible-core < 2.19: AnsibleModule reads its arguments from ``basic._ANSIBLE_ARGS``."""
    saved = basic._ANSIBLE_ARGS
    basic._ANSIBLE_ARGS = to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args}))
    try:
        yield
    finally:
        basic._ANSIBLE_ARGS = saved


def set_module_args(args=None):
    """Context manager: ``AnsibleModule`` objects created inside see ``args`` as module arguments.

    ``_ansible_*`` keys such as ``_ansible_check_mode`` or ``_ansible_diff`` may be given too.
    """
    if args is not None and not isinstance(args, dict):
        raise TypeError('set_module_args() takes a dict, not %s' % type(args).__name__)
    args = _with_defaults(args)
    if _patch_module_args is not None:
        return _patch_module_args(args)
    return _patch_ansible_args(args)


@contextlib.contextmanager
def patch_exit_fail():
    """Context manager: ``exit_json``/``fail_json`` raise ``AnsibleExitJson``/``AnsibleFailJson``."""
    saved = basic.AnsibleModule.exit_json, basic.AnsibleModule.fail_json
    basic.AnsibleModule.exit_json = exit_json
    basic.AnsibleModule.fail_json = fail_json
    try:
        yield
    finally:
        basic.AnsibleModule.exit_json, basic.AnsibleModule.fail_json = saved


@pytest.fixture
def module_exit(monkeypatch):
    """pytest fixture: ``exit_json``/``fail_json`` raise ``AnsibleExitJson``/``AnsibleFailJson``."""
    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', fail_json)


def run_module(main, args=None, failed=False):
    """Run a module's ``main()`` with ``args``; return the dict it passed to exit_json/fail_json.

    Expects ``exit_json`` (or ``fail_json`` when ``failed`` is true) and raises
    ``AssertionError`` with the result when the module ends the other way or not at all.
    Works with or without the ``module_exit`` fixture.
    """
    with patch_exit_fail():
        with set_module_args(args):
            try:
                main()
            except AnsibleExitJson as exc:
                if failed:
                    raise AssertionError('module succeeded, expected failure: %r' % (exc.result,))
                return exc.result
            except AnsibleFailJson as exc:
                if not failed:
                    raise AssertionError('module failed: %r' % (exc.result,))
                return exc.result
    raise AssertionError('module returned without calling exit_json or fail_json')


class Env(object):
    """A module's ``main()`` run against a fake host (fakehost.FakeHost) and its tools (fakehost.FakeTools).

    :meth:`attach` points the module's ``ROOT`` at the host's tree and ``AnsibleModule``'s
    ``get_bin_path``, ``run_command`` and ``warn`` at the tools and at :attr:`warnings`; then
    :meth:`run` expects ``exit_json`` and :meth:`fail` ``fail_json``, each returning the result.
    Test files subclass it only for their own host layouts and state readers.
    """

    def __init__(self, module, host, tools):
        self.module = module
        self.host = host
        self.tools = tools
        self.warnings = []
        self.result = None

    @property
    def root(self):
        return self.host.root

    def attach(self, monkeypatch):
        env = self
        monkeypatch.setattr(self.module, 'ROOT', self.host.root)
        monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                            lambda module, arg, required=False, opt_dirs=None: env.tools.get_bin_path(module, arg, required))
        monkeypatch.setattr(basic.AnsibleModule, 'run_command',
                            lambda module, args, check_rc=False, **kw: env.tools.run_command(module, args, check_rc, **kw))
        monkeypatch.setattr(basic.AnsibleModule, 'warn', lambda module, msg: env.warnings.append(msg))
        return self

    def _call(self, args, check, diff):
        args = dict(args or {})
        if check:
            args['_ansible_check_mode'] = True
        if diff:
            args['_ansible_diff'] = True
        del self.warnings[:]
        with set_module_args(args):
            self.module.main()

    def run(self, args=None, check=False, diff=False):
        """Run the module, expecting exit_json; return (and keep in :attr:`result`) what it reported."""
        with pytest.raises(AnsibleExitJson) as info:
            self._call(args, check, diff)
        self.result = info.value.result
        return self.result

    def fail(self, args=None, check=False):
        """Run the module, expecting fail_json; return what it reported."""
        with pytest.raises(AnsibleFailJson) as info:
            self._call(args, check, False)
        self.result = info.value.result
        return self.result

    def ran(self, tool, *words):
        return self.tools.ran(tool, *words)
