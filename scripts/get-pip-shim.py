# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Offline stand-in for the get-pip.py bootstrap script that ansible-test downloads.

ansible-test bootstraps pip into each sanity/target virtual environment by
running ``~/.ansible/test/cache/get_pip_<X_Y_Z>.py`` and downloads that file
from a host that is not reachable here (only PyPI is).  ``scripts/seed-ansible-test-cache``
installs a copy of this file under each of those names next to an unpacked pip
wheel (``pip-<X.Y.Z>/``, fetched from PyPI), so the bootstrap runs pip from the
unpacked wheel exactly like the real get-pip.py does:
``pip install --upgrade --force-reinstall <arguments>``.

Must stay Python 2.7 compatible: it runs with every interpreter ansible-test uses.
"""
from __future__ import absolute_import, division, print_function

import os
import runpy
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    name = os.path.splitext(os.path.basename(__file__))[0]  # get_pip_20_3_4
    version = name[len('get_pip_'):].replace('_', '.')
    pip_dir = os.path.join(here, 'pip-%s' % version)
    if not os.path.isdir(os.path.join(pip_dir, 'pip')):
        sys.stderr.write('get-pip shim: %s is missing; run "make venv" (scripts/seed-ansible-test-cache)\n' % pip_dir)
        sys.exit(1)
    sys.path.insert(0, pip_dir)
    args = [arg for arg in sys.argv[1:] if arg not in ('--no-setuptools', '--no-wheel')]
    sys.argv = ['pip', 'install', '--upgrade', '--force-reinstall'] + args
    runpy.run_module('pip', run_name='__main__', alter_sys=True)


main()
