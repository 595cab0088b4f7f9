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
import glob
import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils.files import read_text, root_path

ACTIVE_PROFILE_FILE = '/etc/tuned/active_profile'
PROFILE_MODE_FILE = '/etc/tuned/profile_mode'
MAIN_CONF = '/etc/tuned/tuned-main.conf'
PID_FILE = '/run/tuned/tuned.pid'
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


# Where tuned's Python package lies: site-packages of the interpreter tuned-adm runs with
# (RHEL 7 python2.7, RHEL 8 platform-python 3.6, RHEL 9 python3.9, RHEL 10 python3.12;
# tuned.spec installs into %{python3_sitelib}), or Debian's version-less dist-packages.
VERSION_FILE_GLOBS = ('/usr/lib/python*/site-packages/tuned/version.py',
                      '/usr/lib64/python*/site-packages/tuned/version.py',
                      '/usr/lib/python3/dist-packages/tuned/version.py')
_VERSION_PART = re.compile(r'^TUNED_VERSION_(MAJOR|MINOR|PATCH)\s*=\s*(\d+)\s*$', re.M)


def version_from_file(text):
    """The version tuple in tuned/version.py (TUNED_VERSION_MAJOR/MINOR/PATCH, as in v2.11.0 to v2.25.1), or None."""
    parts = dict(_VERSION_PART.findall(text or ''))
    if 'MAJOR' not in parts or 'MINOR' not in parts:
        return None
    return (int(parts['MAJOR']), int(parts['MINOR']), int(parts.get('PATCH', 0)))


def _interpreter(root, tuned_adm):
    """The interpreter in tuned-adm's #! line, resolved (``/usr/libexec/platform-python`` -> ``.../python3.6``)."""
    try:
        with open(root_path(root, tuned_adm), 'rb') as f:
            first = f.readline(256).decode('utf-8', 'replace')
    except (IOError, OSError):
        return None
    if not first.startswith('#!') or not first[2:].split():
        return None
    return os.path.basename(os.path.realpath(root_path(root, first[2:].split()[0])))


def version_file(root, tuned_adm):
    """The tuned/version.py that tuned-adm imports, or None when that cannot be told for sure."""
    found = []
    for pattern in VERSION_FILE_GLOBS:
        found.extend(sorted(glob.glob(root_path(root, pattern))))
    if len(found) <= 1:
        return found[0] if found else None
    interpreter = _interpreter(root, tuned_adm) or ''
    match = [f for f in found if '/%s/' % interpreter in f
             or (interpreter.startswith('python3') and '/python3/dist-packages/' in f)]
    return match[0] if len(match) == 1 else None


def installed_version(run, which, root=None):
    """(path of tuned-adm or None, version tuple or None).

    tuned-adm prints the version it imports from tuned/version.py (tuned-adm.py, v2.11.0 and
    later). With ``root``, that file is read directly, which spares a Python process per call
    (seconds on a small VM); ``tuned-adm --version`` is the fallback.
    """
    tuned_adm = which('tuned-adm')
    if not tuned_adm:
        return None, None
    if root is not None:
        path = version_file(root, tuned_adm)
        version = version_from_file(read_text(path)) if path else None
        if version:
            return tuned_adm, version
    rc, out, err = run([tuned_adm, '--version'])
    return tuned_adm, (parse_version(out + err) if rc == 0 else None)


def daemon_running(root):
    """Whether tuned's daemon runs: its pid file names a live process."""
    pid = (read_text(root_path(root, PID_FILE)) or '').strip()
    return bool(pid) and os.path.exists(root_path(root, '/proc/%s' % pid))


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
    """Merge profiles like tuned: an ordered list of units {name, type, options, profile, origins}.

    ``origins`` maps each option to the profile that set it, so a report can name where a
    value such as ``readahead=>4096`` comes from even when a child only narrowed the section.
    ``${name}`` references to ``[variables]`` are expanded as tuned does.
    """
    units = []
    by_name = {}
    variables = {}
    for profile in chain:
        for section, options in profile['sections']:
            if section == 'variables':
                variables.update((k, v) for k, v in options if k != 'include')
    for profile in chain:
        for section, options in profile['sections']:
            if section in ('main', 'variables'):
                continue
            opts = dict((k, _expand_variables(v, variables)) for k, v in options)
            replace = opts.pop('replace', '').lower() in ('1', 'true', 'yes', 'y')
            unit = by_name.get(section)
            if unit is None or replace:
                new = {'name': section, 'type': section, 'options': {}, 'profile': profile['name'], 'origins': {}}
                if unit is None:
                    units.append(new)
                else:
                    units[units.index(unit)] = new
                unit = by_name[section] = new
            # Like tuned's merger: a later same-named section resets type, enabled and devices to
            # its own values (or their defaults); devices_udev_regex only when it sets one.
            unit['type'] = opts.pop('type', section)
            unit['options']['enabled'] = opts.pop('enabled', 'true')
            unit['options']['devices'] = opts.pop('devices', '*')
            unit['options'].update(opts)
            unit['origins'].update((k, profile['name']) for k in opts)
            unit['profile'] = profile['name']
    return units


def _expand_variables(value, variables, _depth=0):
    if '${' not in value or _depth > 10:
        return value
    expanded = re.sub(r'\$\{([A-Za-z0-9_]+)\}', lambda m: variables.get(m.group(1), m.group(0)), value)
    return expanded if expanded == value else _expand_variables(expanded, variables, _depth + 1)


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
    """The disk instance that takes ``name`` and its readahead setting, or None if none applies.

    A value tuned cannot parse (an unexpanded ``${f:...}`` function, text) is reported as
    ``readahead: None`` with the raw text in ``unparsed``: tuned ignores such a value too.
    """
    for unit in disk_instances(units):
        if instance_matches(unit, name, props):
            value = unit['options'].get('readahead')
            result = {'instance': unit['name'],
                      'profile': unit.get('origins', {}).get('readahead', unit['profile']),
                      'readahead': None}
            if value:
                try:
                    result['readahead'] = parse_readahead(value)
                except TunedProfileError:
                    result['unparsed'] = value
            return result
    return None


# ---------------------------------------------------------------------------------------------
# The collection's child profile: the one writer.
#
# Layout of the file (every section is preceded by an "# owner: <module>" line, so each module
# rewrites only its own sections and leaves the others alone):
#
#   # Managed by aemops.os_tuning (tuned child profile). ...
#   # aemops-baseline {"active_profiles": [...], "profile_mode": "auto"}
#   [main]
#   summary=...
#   include=<the profiles that were active before us>
#   # owner: read_ahead
#   [disk]                                  <- the parent's disk instance, now excluding our devices
#   devices_udev_regex=\A(?![\s\S]*^(?:ID_SERIAL=...|DM_UUID=...)$)
#   # owner: read_ahead
#   [aemops_read_ahead_32]                  <- our devices, with our value
#   type=disk
#   devices_udev_regex=^(?:ID_SERIAL=...|DM_UUID=...)$
#   readahead=32
#   # owner: thp
#   [vm]
#   transparent_hugepages=never

CHILD_PROFILE = 'aemops-os-tuning'
OWNER_ORDER = ('read_ahead', 'thp')
_OWNER_PREFIX = '# owner: '


def user_profile_dir(root):
    """Where administrators' profiles go: ``/etc/tuned`` (tuned <= 2.22) or ``/etc/tuned/profiles``."""
    dirs = profile_dirs(root)
    if dirs != DEFAULT_PROFILE_DIRS:
        return dirs[-1]
    if os.path.isdir(root_path(root, '/usr/lib/tuned/profiles')):
        return '/etc/tuned/profiles'
    return '/etc/tuned'


def child_profile_path(root):
    return os.path.join(user_profile_dir(root), CHILD_PROFILE, 'tuned.conf')


def parse_child(text, path):
    """Our child profile as {'baseline': dict or None, 'include': [...], 'sections': [(owner, name, options)]}."""
    from ansible_collections.aemops.os_tuning.plugins.module_utils.files import parse_baselines
    records, errors = parse_baselines(text)
    if errors:
        raise TunedProfileError('%s has a damaged baseline record (%s); restore it or delete the profile.'
                                % (path, '; '.join(errors)))
    owners = []
    owner = None
    for line in (text or '').splitlines():
        if line.startswith(_OWNER_PREFIX):
            owner = line[len(_OWNER_PREFIX):].strip()
        elif line.startswith('['):
            owners.append(owner)
            owner = None
    result = {'baseline': records[0] if records else None, 'include': [], 'sections': []}
    for (name, options), section_owner in zip(parse_conf(text, path), owners):
        if name == 'main':
            result['include'] = split_includes(dict(options).get('include', ''))
            continue
        result['sections'].append((section_owner, name, options))
    return result


def render_child(baseline, include, sections):
    """Text of the child profile; ``sections`` is a list of (owner, name, [(key, value)])."""
    from ansible_collections.aemops.os_tuning.plugins.module_utils.files import baseline_line, managed_header
    lines = managed_header('tuned child profile',
                           'Includes the profiles that were active before and overrides only what '
                           'aemops.os_tuning manages. The baseline line is used for backout.')
    lines.append(baseline_line(baseline))
    lines += ['[main]', 'summary=aemops.os_tuning overrides (read-ahead, THP) on top of %s' % ', '.join(include),
              'include=%s' % ','.join(include)]
    for owner, name, options in sections:
        lines += ['', '%s%s' % (_OWNER_PREFIX, owner), '[%s]' % name]
        lines += ['%s=%s' % (k, v) for k, v in options]
    return '\n'.join(lines) + '\n'


def replace_owned(sections, owner, new_sections):
    """Sections of other owners, in place, followed by ``new_sections`` (owner, name, options)."""
    kept = [s for s in sections if s[0] != owner]
    taken = set(s[1] for s in kept)
    for section in new_sections:
        if section[1] in taken:
            other = [s[0] for s in kept if s[1] == section[1]][0]
            raise TunedProfileError('tuned section [%s] is wanted by both %s and %s. The profile is managed: remove '
                                    'hand-made sections from it, or delete it and run again.'
                                    % (section[1], owner, other or 'a hand-added section (no "# owner:" line)'))
    # A fixed order by owner, so that each module rewriting its own sections leaves the file
    # as the other module wrote it (otherwise the two would keep moving each other's sections).
    merged = kept + list(new_sections)
    return [s for _i, s in sorted(enumerate(merged), key=lambda item: (_owner_rank(item[1][0]), item[0]))]


def _owner_rank(owner):
    return (OWNER_ORDER.index(owner), '') if owner in OWNER_ORDER else (len(OWNER_ORDER), owner or '')


def child_state(root):
    """(path, text, parsed, baseline, parents) of our child profile.

    ``parents`` are the profiles our child includes: those recorded when it was first written,
    else the ones active now. Asking again while our profile is active keeps the recorded parents.
    """
    path = child_profile_path(root)
    before = read_text(root_path(root, path))
    current = parse_child(before, path) if before is not None else None
    active = active_profiles(root)
    if current is not None and current['baseline'] and (CHILD_PROFILE in active or not active):
        baseline = current['baseline']
    else:
        # First run, or an administrator switched profiles since: build on what is active now.
        baseline = {'active_profiles': [p for p in active if p != CHILD_PROFILE],
                    'profile_mode': profile_mode(root)}
    parents = [p for p in baseline.get('active_profiles') or [] if p != CHILD_PROFILE]
    return path, before, current, baseline, parents


def plan_child(root, owner, new_sections):
    """Plan our child profile after ``owner`` replaces its sections with ``new_sections``.

    Returns {path, before, after, parents, activate, restore}: ``after`` None means the file
    goes away (no owner has sections left); ``activate`` is the profile list to switch to
    (or None when nothing changes); ``restore`` the previous profile list on removal.
    """
    path, before, current, baseline, parents = child_state(root)
    active = active_profiles(root)
    try:
        sections = replace_owned(current['sections'] if current else [], owner, new_sections)
    except TunedProfileError as e:
        raise TunedProfileError('%s (in %s)' % (e, path))
    result = {'path': path, 'before': before, 'parents': parents, 'activate': None, 'restore': None,
              'baseline': baseline}
    if not sections:
        result['after'] = None
        if CHILD_PROFILE in active and parents:
            result['restore'] = parents
        return result
    if not parents:
        raise TunedProfileError('tuned has no active profile to build on (%s is empty). Activate one first, '
                                'for example: tuned-adm profile virtual-guest.' % ACTIVE_PROFILE_FILE)
    result['after'] = render_child(baseline, parents, sections)
    if active != [CHILD_PROFILE]:
        result['activate'] = [CHILD_PROFILE]
    return result


_REGEX_SPECIAL = frozenset('\\.^$*+?{}[]|()')


def regex_escape(text):
    """Escape regex metacharacters only, identically on every Python (re.escape differs by version)."""
    return ''.join('\\' + c if c in _REGEX_SPECIAL else c for c in text)


def udev_regex_alternatives(idents):
    """``KEY=value`` alternatives for udev properties, regex-escaped, sorted."""
    return '|'.join(sorted('%s=%s' % (k, regex_escape(v)) for k, v in idents))


def _glob_to_regex(glob):
    """A shell glob (``*``, ``?``, ``[...]``) as a regex fragment, the same on every Python."""
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == '*':
            out.append('.*')
        elif c == '?':
            out.append('.')
        elif c == '[' and ']' in glob[i + 1:]:
            end = glob.index(']', i + 1)
            body = glob[i + 1:end]
            out.append('[%s%s]' % ('^' if body.startswith('!') else '', body.lstrip('!').replace('\\', '\\\\')))
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return ''.join(out)


def _devices_to_regex(devices):
    """tuned's ``devices=`` glob list as lookaheads over the DEVNAME property."""
    rules = [r for r in re.split(r'[\s,]+', devices or '*') if r]
    positive = [r for r in rules if not r.startswith('!')]
    negative = [r[1:] for r in rules if r.startswith('!')]

    def alt(globs):
        return '|'.join(_glob_to_regex(g) for g in globs)

    regex = ''
    if positive and positive != ['*']:
        regex += r'(?=[\s\S]*?^DEVNAME=/dev/(?:%s)$)' % alt(positive)
    if negative:
        regex += r'(?![\s\S]*?^DEVNAME=/dev/(?:%s)$)' % alt(negative)
    return regex


def disk_sections(root, parents, groups):
    """Sections that make tuned set our read-ahead on our devices, for read_ahead to own.

    ``groups`` maps a KiB value to a list of (udev property, value) identities. Every disk
    instance of the parents gets a same-named section that keeps its own device selection
    but excludes our devices; one ``aemops_read_ahead_<kb>`` instance per value takes them.
    """
    if not groups:
        return []
    units, _chain = effective_units(root, parents)
    ours = udev_regex_alternatives([ident for kb in groups for ident in groups[kb]])
    sections = []
    for unit in units:
        if unit['type'] != 'disk' or not _enabled(unit):
            continue
        regex = r'\A'
        if unit['options'].get('devices_udev_regex'):
            regex += r'(?=[\s\S]*?(?:%s))' % unit['options']['devices_udev_regex']
        else:
            regex += _devices_to_regex(unit['options'].get('devices', '*'))
        regex += r'(?![\s\S]*^(?:%s)$)' % ours
        sections.append(('read_ahead', unit['name'], [('type', 'disk'), ('devices_udev_regex', regex)]))
    for kb in sorted(groups):
        sections.append(('read_ahead', 'aemops_read_ahead_%d' % kb, [
            ('type', 'disk'),
            ('devices_udev_regex', '^(?:%s)$' % udev_regex_alternatives(groups[kb])),
            ('readahead', str(kb)),
        ]))
    return sections


def switch_profile(run, tuned_adm, profiles):
    """``tuned-adm profile <names>``; returns (rc, message)."""
    rc, out, err = run([tuned_adm, 'profile'] + list(profiles))
    return rc, (err or out).strip()


def plan_changes(plan):
    """Whether a plan from :func:`plan_child` changes anything."""
    return bool(plan) and bool(plan['after'] != plan['before'] or plan['activate'] or plan['restore'])


def plan_summary(plan, changed):
    """What modules return about the child profile."""
    if not plan:
        return None
    return {'path': plan['path'], 'parents': plan['parents'], 'actions': plan.get('actions', []), 'changed': changed}


def apply_child(root, plan, run, tuned_adm, tuned_running, write, remove):
    """Carry out a plan from :func:`plan_child`; returns a list of what was done.

    ``write(path, text)`` and ``remove(path)`` take host paths. When tuned runs, profiles are
    switched with tuned-adm (which also re-applies a changed profile); when it does not, the
    state files tuned reads at start are written, as tuned-adm itself would.
    """
    done = []
    full = root_path(root, plan['path'])
    if plan['after'] is not None and plan['after'] != plan['before']:
        write(full, plan['after'])
        done.append('wrote %s' % plan['path'])
    target = plan['activate']
    if target is None and plan['after'] is not None and plan['after'] != plan['before']:
        target = [CHILD_PROFILE]  # already active: switch again so tuned reloads the changed file
    if plan['after'] is None and plan['restore'] is not None:
        target = plan['restore']
    if target:
        if tuned_running and tuned_adm:
            rc, msg = switch_profile(run, tuned_adm, target)
            if rc != 0:
                raise TunedProfileError('tuned-adm profile %s failed: %s' % (' '.join(target), msg))
        else:
            write(root_path(root, ACTIVE_PROFILE_FILE), ' '.join(target) + '\n')
        mode = 'manual'
        if target == plan['restore']:
            mode = (plan.get('baseline') or {}).get('profile_mode') or 'manual'
        if profile_mode(root) != mode:
            write(root_path(root, PROFILE_MODE_FILE), mode + '\n')
        done.append('activated %s' % ' '.join(target))
    if plan['after'] is None and plan['before'] is not None:
        remove(full)
        done.append('removed %s' % plan['path'])
    return done
