# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""``unittest.mock`` on Python 3, the ``mock`` backport on Python 2.7 (``make compat``).

Usage in tests::

    from ansible_collections.aemops.os_tuning.tests.unit.compat.mock import MagicMock, patch
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# pylint: disable=unused-import
try:
    from unittest.mock import (  # noqa: F401
        ANY,
        DEFAULT,
        MagicMock,
        Mock,
        NonCallableMagicMock,
        NonCallableMock,
        PropertyMock,
        call,
        create_autospec,
        mock_open,
        patch,
        sentinel,
    )
except ImportError:  # Python 2.7: pip package "mock" (requirements/py2.7.txt)
    from mock import (  # noqa: F401
        ANY,
        DEFAULT,
        MagicMock,
        Mock,
        NonCallableMagicMock,
        NonCallableMock,
        PropertyMock,
        call,
        create_autospec,
        mock_open,
        patch,
        sentinel,
    )
