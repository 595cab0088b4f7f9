# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""pytest setup shared by all unit tests.

``make unit`` and ``make compat`` run the tests from a shadow tree
``$TMP/ansible_collections/aemops/os_tuning`` (scripts/run-unit), where the collection is
importable as ``ansible_collections.aemops.os_tuning`` on every Python. When pytest is run
straight from the checkout instead (``.venv/bin/pytest tests/unit/...``, Python 3 only),
this file puts ``.collections`` (the link made by ``make venv``) on ``sys.path`` for the
same effect.

Either way ``tests/unit`` itself is put on ``sys.path``, so plain helper modules there
(``fakehost.py``) import as ``from fakehost import ...``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


def _collection_importable():
    try:
        import ansible_collections.aemops.os_tuning.plugins  # noqa: F401
    except ImportError:
        return False
    return True


if not _collection_importable():
    # <checkout>/tests/unit/conftest.py -> <checkout>/.collections
    _LINK_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, os.pardir, '.collections'))
    if not os.path.isdir(os.path.join(_LINK_ROOT, 'ansible_collections', 'aemops', 'os_tuning')):
        raise ImportError('ansible_collections.aemops.os_tuning is not importable and %s is missing: '
                          'run "make venv" (or use "make unit")' % _LINK_ROOT)
    sys.path.insert(0, _LINK_ROOT)

# Fixtures from the helper modules, available to every test below tests/unit.
from ansible_collections.aemops.os_tuning.tests.unit.utils import module_exit  # noqa: E402,F401 pylint: disable=unused-import


class _NoWait(object):
    """readers_measure's clock with a window that takes no time: the modules measure their mapping readers over
    measure_readers seconds (3 by default), which the unit tests would otherwise sleep through. Tests of the
    measurement inject their own sleep and clock."""
    time = staticmethod(__import__('time').time)
    monotonic = staticmethod(getattr(__import__('time'), 'monotonic', __import__('time').time))

    @staticmethod
    def sleep(_seconds):
        return None


@pytest.fixture(autouse=True)
def _measurement_windows_take_no_time(monkeypatch):
    from ansible_collections.aemops.os_tuning.plugins.module_utils import readers_measure
    monkeypatch.setattr(readers_measure, 'time', _NoWait)
