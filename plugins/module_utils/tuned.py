# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reading tuned profiles the way tuned does, from files only.

tuned is never imported as a library (its internals change between releases, and it may
run under a different Python). Profiles are plain INI-like files; this module resolves the
active profile list, each profile's ``include=`` chain, merges them (later wins, same-named
sections merge, ``replace=1`` drops the inherited section, ``enabled=false`` disables an
instance) and answers: which ``[disk]`` instance takes a device, and what read-ahead it sets.

Facts encoded here (sources in docs/ and the research notes):

* ``readahead`` is KiB; ``"N s"`` (space, then ``s``) is 512-byte sectors.
* ``>N`` only raises, ``<N`` only lowers; ``tuned-adm verify`` applies the same test.
* Devices go to instances in ascending ``priority`` order (stable, default 0); the first
  matching instance takes a device. With ``devices_udev_regex`` the regex is searched in
  the device's sorted ``KEY=value`` udev properties, one per line, and ``devices`` is ignored.
* The disk plugin tunes whole disks that are not removable and whose parent is none (dm,
  md, loop) or of subsystem scsi, virtio, xen, mmc, and nvme from tuned 2.18 on.
* Profiles live in ``/usr/lib/tuned/<name>`` and ``/etc/tuned/<name>`` up to tuned 2.22, and
  in ``.../tuned/profiles/<name>`` from 2.23; ``profile_dirs`` in tuned-main.conf overrides.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils.files import read_text, root_path

ACTIVE_PROFILE_FILE = '/etc/tuned/active_profile'
PROFILE_MODE_FILE = '/etc/tuned/profile_mode'
MAIN_CONF = '/etc/tuned/tuned-main.conf'
DEFAULT_PROFILE_DIRS = ('/usr/lib/tuned', '/usr/lib/tuned/profiles', '/etc/tuned', '/etc/tuned/profiles')
MAX_INCLUDE_DEPTH = 20
NVME_SINCE = (2, 18)


class TunedProfileError(Exception):
    """A profile is missing, malformed or includes itself; the message names the file."""


def parse_version(text):
    """(major, minor, patch) from ``tuned-adm --version`` output or an RPM version; None if absent."""
    m = re.search(r'(\d+)\.(\d+)(?:\.(\d+))?', text or '')
    if not m:
        return None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def parse_conf(text, path='tuned.conf'):
    """Parse tuned.conf text into an ordered list of (section, [(key, value), ...])."""
    sections = []
    current = None
    for number, raw in enumerate((text or '').splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith('#') or line.startswith(';'):
            continue
        if line.startswith('['):
            if not line.endswith(']') or len(line) < 3:
                raise TunedProfileError('%s line %d: malformed section header %r.' % (path, number, raw))
            current = (line[1:-1].strip(), [])
            sections.append(current)
            continue
        if '=' not in line:
            raise TunedProfileError('%s line %d: expected key=value, got %r.' % (path, number, raw))
        if current is None:
            raise TunedProfileError('%s line %d: %r is outside any [section].' % (path, number, raw))
        key, value = line.split('=', 1)
        current[1].append((key.strip(), value.strip()))
    return sections


def profile_dirs(root):
    """Profile directories, lowest precedence first."""
    text = read_text(root_path(root, MAIN_CONF)) or ''
    for line in text.splitlines():
        m = re.match(r'^\s*profile_dirs\s*=\s*(.+?)\s*$', line)
        if m:
            return tuple(d.strip() for d in m.group(1).split(',') if d.strip())
    return DEFAULT_PROFILE_DIRS


def find_profile(root, name):
    """Target path of ``<dir>/<name>/tuned.conf`` with the highest precedence, or None."""
    for directory in reversed(profile_dirs(root)):
        path = os.path.join(directory, name, 'tuned.conf')
        if os.path.isfile(root_path(root, path)):
            return path
    return None


def active_profiles(root):
    """The active profile names (tuned merges a space-separated list, last wins)."""
    text = read_text(root_path(root, ACTIVE_PROFILE_FILE)) or ''
    return text.split()


def profile_mode(root):
    text = read_text(root_path(root, PROFILE_MODE_FILE))
    return text.strip() if text else None


def split_includes(value):
    return [p for p in re.split(r'[,;\s]+', value or '') if p]


def load_chain(root, name, _depth=0, _stack=None):
    """Profiles in merge order (deepest include first) as a list of dicts {name, path, sections}."""
    stack = list(_stack or [])
    if name in stack:
        raise TunedProfileError('tuned profile %s includes itself (%s).' % (name, ' -> '.join(stack + [name])))
    if _depth > MAX_INCLUDE_DEPTH:
        raise TunedProfileError('tuned profile include chain is deeper than %d at %s.' % (MAX_INCLUDE_DEPTH, name))
    path = find_profile(root, name)
    if path is None:
        raise TunedProfileError('tuned profile %s was not found in %s.' % (name, ', '.join(profile_dirs(root))))
    sections = parse_conf(read_text(root_path(root, path)), path)
    chain = []
    for section, options in sections:
        if section == 'main':
            for key, value in options:
                if key == 'include':
                    for parent in split_includes(value):
                        if '${' in parent:
                            continue  # a variable or function include: cannot be resolved from files
                        chain.extend(load_chain(root, parent, _depth + 1, stack + [name]))
    chain.append({'name': name, 'path': path, 'sections': sections})
    return chain


def merge(chain):
    """Merge profiles like tuned: an ordered list of units {name, type, options, profile}."""
    units = []
    by_name = {}
    for profile in chain:
        for section, options in profile['sections']:
            if section in ('main', 'variables'):
                continue
            opts = dict(options)
            replace = opts.pop('replace', '').lower() in ('1', 'true', 'yes', 'y')
            unit = by_name.get(section)
            if unit is None or replace:
                new = {'name': section, 'type': section, 'options': {}, 'profile': profile['name']}
                if unit is None:
                    units.append(new)
                else:
                    units[units.index(unit)] = new
                unit = by_name[section] = new
            if 'type' in opts:
                unit['type'] = opts.pop('type')
            unit['options'].update(opts)
            unit['profile'] = profile['name']
    return units


def effective_units(root, profiles=None):
    """Merged units of the active profile list (or ``profiles``) with the chain that built them."""
    names = active_profiles(root) if profiles is None else profiles
    chain = []
    for name in names:
        chain.extend(load_chain(root, name))
    return merge(chain), chain


def _enabled(unit):
    return unit['options'].get('enabled', 'true').lower() not in ('0', 'false', 'no', 'n', 'off')


def disk_instances(units):
    """Enabled disk-plugin instances in the order tuned assigns devices to them."""
    disks = [u for u in units if u['type'] == 'disk' and _enabled(u)]
    indexed = list(enumerate(disks))

    def priority(item):
        try:
            return (int(item[1]['options'].get('priority', 0)), item[0])
        except ValueError:
            return (0, item[0])

    return [u for _i, u in sorted(indexed, key=priority)]


def udev_properties_text(props):
    return ''.join('%s=%s\n' % (k, props[k]) for k in sorted(props))


def instance_matches(unit, name, props):
    """Whether a disk instance would take device ``name`` (with udev properties ``props``)."""
    regex = unit['options'].get('devices_udev_regex')
    if regex:
        try:
            return re.search(regex, udev_properties_text(props), re.MULTILINE) is not None
        except re.error:
            return False
    rules = [r for r in re.split(r'[\s,]+', unit['options'].get('devices', '*')) if r]
    positive = [r for r in rules if not r.startswith('!')] or ['*']
    negative = [r[1:] for r in rules if r.startswith('!')]
    return (any(fnmatch.fnmatchcase(name, r) for r in positive)
            and not any(fnmatch.fnmatchcase(name, r) for r in negative))


def parse_readahead(value):
    """Parse a tuned readahead value into {'kb': int, 'modifier': '', '>' or '<', 'raw': str}."""
    raw = (value or '').strip()
    modifier = ''
    text = raw
    if text[:1] in ('>', '<'):
        modifier, text = text[0], text[1:].strip()
    parts = text.split(None, 1)
    if not parts or not re.match(r'^\d+$', parts[0]):
        raise TunedProfileError('tuned readahead value %r is not a number of KiB (or "N s" for sectors).' % raw)
    kb = int(parts[0])
    if len(parts) > 1 and parts[1].startswith('s'):
        kb //= 2
    return {'kb': kb, 'modifier': modifier, 'raw': raw}


def expected_read_ahead(setting, current_kb):
    """The value tuned would leave, given the current value: ``>`` only raises, ``<`` only lowers."""
    if setting['modifier'] == '>':
        return max(setting['kb'], current_kb)
    if setting['modifier'] == '<':
        return min(setting['kb'], current_kb)
    return setting['kb']


def disk_plugin_covers(kind, removable=False, version=None):
    """Whether tuned's disk plugin tunes a device of blockdev type ``kind`` at all."""
    if removable or kind == 'part':
        return False
    if kind == 'nvme':
        return version is None or tuple(version[:2]) >= NVME_SINCE
    return True


def read_ahead_for_device(units, name, props):
    """The disk instance that takes ``name`` and its readahead setting, or None if none applies."""
    for unit in disk_instances(units):
        if instance_matches(unit, name, props):
            value = unit['options'].get('readahead')
            return {
                'instance': unit['name'],
                'profile': unit['profile'],
                'readahead': parse_readahead(value) if value else None,
            }
    return None
