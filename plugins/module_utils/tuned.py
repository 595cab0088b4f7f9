# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reading tuned profiles the way tuned does, from files only.

tuned is never imported as a library (its internals change between releases, and it may
run under a different Python). Profiles are plain INI-like files; this module resolves the
active profile list (and the post-loaded profile), each profile's ``include=`` chain, merges
them (later wins, same-named sections merge, ``replace=1`` drops the inherited section,
``enabled=false`` disables an instance) and answers: which ``[disk]`` instance takes a device,
and what read-ahead it sets. Where tuned's loader differs between releases (include splitting,
a profile loaded twice, booleans, the profile parser, post_loaded_profile, NVMe), the rules of the
installed version apply; ``version=None`` means the newest rules. See the ``*_SINCE`` constants.

Facts encoded here (sources in docs/ and the research notes):

* ``readahead`` is KiB; ``"N s"`` (space, then ``s``) is 512-byte sectors.
* ``>N`` only raises, ``<N`` only lowers; ``tuned-adm verify`` applies the same test.
* Devices go to instances in ascending ``priority`` order (stable, default 0); the first
  matching instance takes a device. With ``devices_udev_regex`` the regex is searched in
  the device's sorted ``KEY=value`` udev properties, one per line, and ``devices`` is ignored.
* The disk plugin tunes whole disks that are not removable and whose parent is none (dm,
  md, loop) or of subsystem scsi, virtio, xen, mmc, and nvme from tuned 2.18 on.
* Profiles live in ``/usr/lib/tuned/<name>`` and ``/etc/tuned/<name>`` up to tuned 2.22, and
  upstream in ``.../tuned/profiles/<name>`` from 2.23 (tuned/consts.py at v2.23.0). RHEL builds before
  RHEL 10 keep the old directories: tuned.spec chooses them with macros for ``rhel < 10`` from v2.24.1
  (commit 7a41949); RHEL 10 and Fedora move them. So the directories found on the host decide, never the
  version; ``profile_dirs`` in tuned-main.conf overrides.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import glob
import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils.compliance import CHILD_PROFILE
from ansible_collections.aemops.os_tuning.plugins.module_utils.files import host_text, read_text, root_path

ACTIVE_PROFILE_FILE = '/etc/tuned/active_profile'
PROFILE_MODE_FILE = '/etc/tuned/profile_mode'
POST_LOADED_PROFILE_FILE = '/etc/tuned/post_loaded_profile'
MAIN_CONF = '/etc/tuned/tuned-main.conf'
PID_FILE = '/run/tuned/tuned.pid'
DEFAULT_PROFILE_DIRS = ('/usr/lib/tuned', '/usr/lib/tuned/profiles', '/etc/tuned', '/etc/tuned/profiles')
MAX_INCLUDE_DEPTH = 20
NVME_SINCE = (2, 18)

# Version boundaries of tuned's profile loader (redhat-performance/tuned, at the tags named).
# ``version=None`` (tuned-adm not found or unreadable) means the newest rules.
INCLUDE_LIST_SINCE = (2, 13)        # tuned/profiles/loader.py: include= split on , and ; (commit feb6e8b)
INCLUDE_SPLIT_NO_B_SINCE = (2, 18)  # the split regex loses its leading \b
SKIP_LOADED_SINCE = (2, 16)         # locator returns "" for an already-loaded profile: skipped (commit bd6697f)
POST_LOADED_SINCE = (2, 14)         # /etc/tuned/post_loaded_profile (commit 4f5f358)
BOOL_TITLE_SINCE = (2, 13)          # tuned/profiles/unit.py accepts "True" (commit d6f0a09)
DROP_SINCE = (2, 13)                # drop= option of a unit (commit 598c506)
CONFIGPARSER_SINCE = (2, 17)        # configobj replaced by configparser (commit 063277a)
CONDITIONAL_INCLUDE_SINCE = (2, 17)  # tuned/profiles/locator.py get_config: "-name" loads only if found (2cc251c)
INLINE_COMMENT_SINCE = (2, 19)      # ConfigParser(inline_comment_prefixes=('#')) (commit 910ff51)
MMC_SINCE = (2, 26)                 # plugin_disk accepts parents of subsystem mmc
# A unit's priority: an option, merged like any other, before 2.23; from 2.23 an attribute of the unit
# (tuned/profiles/unit.py, commit b10bafc) that merger.py did not copy, so a later profile re-declaring a unit
# without replace kept the first one's priority; merged again from 2.26 (commit 94be52a, RHEL-94842; whether RHEL's
# 2.24/2.25 builds carry that fix is not verified: the upstream version decides here).
PRIORITY_NOT_MERGED = ((2, 23), (2, 26))
DISK_PARENT_SUBSYSTEMS = ('scsi', 'virtio', 'xen')


class TunedProfileError(Exception):
    """A profile is missing, malformed or cannot be loaded; the message names the file."""


def _since(version, boundary):
    return version is None or tuple(version[:2]) >= boundary


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
    pid = (host_text(root, PID_FILE) or '').strip()
    return bool(pid) and os.path.exists(root_path(root, '/proc/%s' % pid))


# The tuned unit (tuned.spec installs it; [Install] WantedBy=multi-user.target) and its enablement link.
UNIT_FILES = ('/usr/lib/systemd/system/tuned.service', '/lib/systemd/system/tuned.service')
UNIT_WANTS = '/etc/systemd/system/multi-user.target.wants/tuned.service'
NO_PROFILE = 'tuned runs no profile: the child profile is written but not activated'


def no_profile_reason(root):
    """Why tuned applies no profile now, by the administrator's live decision, or None when it does.

    * ``tuned-adm off``: redhat-performance/tuned ``tuned/daemon/controller.py`` ``disable()`` (the
      D-Bus call tuned-adm off makes) stops the tuning and saves no profile in manual mode
      (``set_profile(None, None, save_instantly=True)``; ``set_all_profiles(None, True, None, ...)`` in
      later releases), so active_profile exists and is empty, and the daemon keeps running;
    * tuned stopped and disabled: the daemon does not run and its unit is installed but not enabled
      (no multi-user.target.wants link), so it does not start at boot either.

    A tuned that is stopped but enabled still applies its active profiles at the next start (at boot,
    after udev): the child is activated for it as before. No active_profile file: tuned was never set up.
    """
    active = host_text(root, ACTIVE_PROFILE_FILE)
    if active is not None and not active.split():
        return 'tuned runs no profile (tuned-adm off: %s is empty)' % ACTIVE_PROFILE_FILE
    if active is not None and not daemon_running(root) \
            and any(os.path.exists(root_path(root, u)) for u in UNIT_FILES) \
            and not os.path.lexists(root_path(root, UNIT_WANTS)):
        return 'tuned runs no profile (tuned is stopped and disabled)'
    return None


# How tuned's loader parses a profile, by version (tuned/profiles/loader.py ``_load_config_data`` at the tags named):
#
# * before 2.17 configobj (``raise_errors=True, list_values=False, interpolation=False``; python-configobj 4.7.2
#   on RHEL 7, 5.0.6 on Debian 11, same parser): ``=`` is the only delimiter, only ``#`` starts a comment line,
#   indentation means nothing, a repeated section or key is an error (DuplicateError), a value may be
#   triple-quoted over several lines, an unquoted value ends at a ``#`` after its first character;
# * 2.17 and 2.18 Python's ``ConfigParser()`` with its defaults: ``=`` and ``:`` delimit (the first of either),
#   ``#`` and ``;`` start comment lines, no inline comments, strict (a repeated section or key in the file is an
#   error), a line indented deeper than the key line before it continues that value, ``[DEFAULT]`` options
#   appear in every section;
# * 2.19 ``delimiters=('='), inline_comment_prefixes=('#')`` (commit 910ff51): ``:`` is no delimiter, and a
#   ``#`` at the start of the line or after whitespace starts a comment; still strict (its errors are not even
#   caught by the loader until 69e46a3 in 2.20: the load fails with a traceback);
# * from 2.20 ``strict=False`` (commit 11e9929): a repeated section merges, a repeated key's last value wins.
EQUALS_ONLY_SINCE = (2, 19)         # ConfigParser(delimiters=('=')) (commit 910ff51)
DUPLICATES_MERGE_SINCE = (2, 20)    # ConfigParser(strict=False) (commit 11e9929)
# Versions that stand for each parser above, for checks that the child reads the same everywhere.
PARSER_ERAS = ((2, 11, 0), (2, 17, 0), (2, 19, 0), (2, 20, 0))

_COBJ_SECTION = re.compile(r'''^(\s*)((?:\[\s*)+)((?:"\s*\S.*?\s*")|(?:'\s*\S.*?\s*')|(?:[^'"\s].*?))((?:\s*\])+)\s*(\#.*)?$''')
_COBJ_KEYWORD = re.compile(r'''^(\s*)((?:".*?")|(?:'.*?')|(?:[^'"=].*?))\s*=\s*(.*)$''')
_COBJ_VALUE = re.compile(r'''^((?:".*?")|(?:'.*?')|(?:[^'"\#].*?)|(?:))\s*(\#.*)?$''')
_CP_SECTION = re.compile(r'\[(?P<header>[^]]+)\]')  # Python <= 3.9 (RHEL 8, 9); 3.10+ allows ']' inside


def _error(path, number, raw, what, why):
    return TunedProfileError('%s line %d: %s, got %r (%s).' % (path, number, what, raw, why))


def _unquote(text):
    return text[1:-1] if len(text) > 1 and text[0] == text[-1] and text[0] in ('"', "'") else text


def _parse_configobj(lines, path):
    """tuned before 2.17: configobj as its loader calls it (described above)."""
    sections = []
    current = None
    index = 0
    while index < len(lines):
        raw = lines[index]
        index += 1
        number = index
        if not raw.strip() or raw.strip().startswith('#'):
            continue
        m = _COBJ_SECTION.match(raw)
        if m:
            depth = m.group(2).count('[')
            if depth != m.group(4).count(']') or depth != 1:
                # a [[subsection]] is a dict where tuned's loader expects text: the load fails
                raise _error(path, number, raw, 'malformed section header',
                             'nested or unbalanced brackets: tuned before 2.17 fails to load it')
            name = _unquote(m.group(3))
            if any(name == s[0] for s in sections):
                raise _error(path, number, raw, 'section [%s] given twice' % name,
                             'tuned before 2.17 rejects that: configobj DuplicateError')
            current = (name, [])
            sections.append(current)
            continue
        m = _COBJ_KEYWORD.match(raw)
        if not m:
            what = 'malformed section header' if raw.strip().startswith('[') else 'expected key=value'
            raise _error(path, number, raw, what, 'tuned before 2.17 rejects it: only "=" delimits, and only "#" '
                         'starts a comment line')
        key, value = _unquote(m.group(2)), m.group(3)
        if value[:3] in ('"""', "'''"):
            quote = value[:3]
            single = re.match(r'^%s(.*?)%s\s*(#.*)?$' % (quote, quote), value)
            if single:
                value = single.group(1)
            elif quote in value[3:]:
                raise _error(path, number, raw, 'malformed triple-quoted value', 'tuned before 2.17 rejects it')
            else:
                text = value[3:]
                while index < len(lines) and quote not in lines[index]:
                    text += '\n' + lines[index]
                    index += 1
                last = re.match(r'^(.*?)%s\s*(#.*)?$' % quote, lines[index]) if index < len(lines) else None
                if last is None:
                    raise _error(path, number, raw, 'unterminated triple-quoted value', 'tuned before 2.17 rejects it')
                value = text + '\n' + last.group(1)
                index += 1
        else:
            m = _COBJ_VALUE.match(value)
            if not m:
                raise _error(path, number, raw, 'malformed quoted value', 'tuned before 2.17 rejects it')
            value = m.group(1)
        if current is None:
            raise _error(path, number, raw, 'key=value outside any [section]', 'tuned before 2.17 rejects it')
        if any(key == k for k, _v in current[1]):
            raise _error(path, number, raw, 'key %s given twice in [%s]' % (key, current[0]),
                         'tuned before 2.17 rejects that: configobj DuplicateError')
        current[1].append((key, value))
    return sections


def _cp_comment_start(raw, inline):
    """Where Python's configparser cuts a line: a full-line ``#``/``;`` comment, or (``inline``) a ``#`` at the
    start or after whitespace; None when nothing is cut."""
    if raw.strip()[:1] in ('#', ';'):
        return 0
    if inline:
        for m in re.finditer('#', raw):
            if m.start() == 0 or raw[m.start() - 1].isspace():
                return m.start()
    return None


def _parse_configparser(lines, path, version):
    """tuned 2.17 and later: Python 3's ``configparser.ConfigParser`` with the arguments of ``version`` (above).

    Returns the sections as ``sections()`` and ``options(s)``/``get(s, o, raw=True)`` give them: in first-seen
    order, continuation lines joined with newlines, ``[DEFAULT]`` options appended to every other section.
    """
    era = 'tuned %s' % _vtext(version)
    equals_only = _since(version, EQUALS_ONLY_SINCE)
    inline = _since(version, INLINE_COMMENT_SINCE)
    option = re.compile(r'(?P<option>.*?)\s*(?P<vi>%s)\s*(?P<value>.*)$' % ('=' if equals_only else '=|:'))
    # sections: [name, [[key, [value lines]], ...]]; current: the section being read; key: its last option.
    st = {'sections': [], 'by_name': {}, 'defaults': ['DEFAULT', []], 'seen': set(), 'current': None, 'key': None,
          'strict': not _since(version, DUPLICATES_MERGE_SINCE), 'era': era}
    indent_level = 0
    for number, raw in enumerate(lines, 1):
        start = _cp_comment_start(raw, inline)
        value = raw[:start].strip()
        if not value:
            if start is None and st['current'] is not None and st['key'] is not None:
                st['key'][1].append('')   # an empty line inside a value is kept (empty_lines_in_values)
            continue
        indent = len(raw) - len(raw.lstrip())
        if st['current'] is not None and st['key'] is not None and indent > indent_level:
            st['key'][1].append(value)   # a continuation line
            continue
        indent_level = indent
        m = _CP_SECTION.match(value)
        if m:
            _cp_section(st, m.group('header'), path, number, raw)
            continue
        what = 'malformed section header' if value.startswith('[') else 'key=value outside any [section]'
        if st['current'] is None:
            raise _error(path, number, raw, what, '%s rejects it: configparser MissingSectionHeaderError' % era)
        m = option.match(value)
        if not m or not m.group('option'):
            what = 'malformed section header' if value.startswith('[') else 'expected key=value'
            raise _error(path, number, raw, what, '%s rejects it: configparser ParsingError%s'
                         % (era, '' if equals_only else '; "=" or ":" delimits'))
        _cp_option(st, m.group('option').rstrip(), m.group('value').strip(), path, number, raw)
    result = []
    for name, options in st['sections']:
        own = [(k, '\n'.join(v).rstrip()) for k, v in options]
        names = set(k for k, _v in own)
        result.append((name, own + [(k, '\n'.join(v).rstrip()) for k, v in st['defaults'][1] if k not in names]))
    return result


def _cp_section(st, name, path, number, raw):
    """_parse_configparser: a section header; the section it names becomes the current one."""
    if name == 'DEFAULT':
        st['current'] = st['defaults']
    elif name in st['by_name']:
        if st['strict'] and name in st['seen']:
            raise _error(path, number, raw, 'section [%s] given twice' % name,
                         '%s rejects that: strict configparser; from 2.20 the sections merge' % st['era'])
        st['current'] = st['by_name'][name]
    else:
        st['current'] = st['by_name'][name] = [name, []]
        st['sections'].append(st['current'])
    st['seen'].add(name)
    st['key'] = None


def _cp_option(st, name, value, path, number, raw):
    """_parse_configparser: ``name = value`` in the current section (a later one replaces it where allowed)."""
    current = st['current']
    if st['strict'] and (current[0], name) in st['seen']:
        raise _error(path, number, raw, 'key %s given twice in [%s]' % (name, current[0]),
                     '%s rejects that: strict configparser; from 2.20 the last value wins' % st['era'])
    st['seen'].add((current[0], name))
    st['key'] = [name, [value]]
    for i, (existing, _lines) in enumerate(current[1]):
        if existing == name:
            current[1][i] = st['key']
            break
    else:
        current[1].append(st['key'])


def parse_conf(text, path='tuned.conf', version=None):
    """Parse tuned.conf text into an ordered list of (section, [(key, value), ...]) as tuned ``version`` does.

    The parser of that version (configobj before 2.17, then configparser with the arguments of each release;
    see above) decides what is a comment, a delimiter, a continued value, and whether a repeated section or key
    is an error. A file that version rejects raises :class:`TunedProfileError`: tuned then loads no profile.
    """
    lines = (text or '').splitlines()
    if not _since(version, CONFIGPARSER_SINCE):
        return _parse_configobj(lines, path)
    return _parse_configparser(lines, path, version)


def check_every_parser(text, path):
    """Raise :class:`TunedProfileError` unless every tuned parser (:data:`PARSER_ERAS`) reads ``text`` the same.

    The collection writes its child once for whatever tuned the host has now or after an upgrade (RHEL 7 to 10).
    """
    first = None
    for era in PARSER_ERAS:
        try:
            sections = parse_conf(text, path, era)
        except TunedProfileError as e:
            raise TunedProfileError('the profile would be rejected by tuned %s: %s' % (_vtext(era), e))
        if first is not None and sections != first[1]:
            raise TunedProfileError('%s would be read differently by tuned %s and tuned %s.'
                                    % (path, _vtext(first[0]), _vtext(era)))
        first = first or (era, sections)


def profile_dirs(root):
    """Profile directories, lowest precedence first."""
    text = host_text(root, MAIN_CONF, static=True) or ''  # the collection never writes it
    for line in text.splitlines():
        m = re.match(r'^\s*profile_dirs\s*=\s*(.+?)\s*$', line)
        if m:
            return tuple(d.strip() for d in m.group(1).split(',') if d.strip())
    return DEFAULT_PROFILE_DIRS


def _locate(root, name, skip=(), texts=None):
    """tuned's ``Locator.get_config(name, skip_files)`` (tuned/profiles/locator.py).

    Returns (path or None, whether a candidate was skipped because it is already loaded).
    The highest-precedence directory first; files already loaded in this merge are passed
    over, so ``/etc/tuned/X`` with ``include=X`` reaches ``/usr/lib/tuned/X``.
    """
    skipped = False
    for directory in reversed(profile_dirs(root)):
        path = os.path.normpath(os.path.join(directory, os.path.basename(name), 'tuned.conf'))
        if path in skip:
            skipped = True
            continue
        if (texts and path in texts) or os.path.isfile(root_path(root, path)):
            return path, skipped
    return None, skipped


def find_profile(root, name):
    """Target path of ``<dir>/<name>/tuned.conf`` with the highest precedence, or None."""
    return _locate(root, name)[0]


def active_profiles(root):
    """The active profile names (tuned merges a space-separated list, last wins)."""
    text = host_text(root, ACTIVE_PROFILE_FILE) or ''
    return text.split()


def profile_mode(root):
    text = host_text(root, PROFILE_MODE_FILE)
    return text.strip() if text else None


def post_loaded_profile(root):
    """The post-loaded profile (tuned >= 2.14), or None; tuned merges it after the active list."""
    text = (host_text(root, POST_LOADED_PROFILE_FILE) or '').strip()
    return text or None


def loaded_profiles(root, version=None, profiles=None):
    """The list tuned loads: the active profiles (or ``profiles``), then the post-loaded one.

    tuned/daemon/daemon.py ``_load_profiles`` appends the post-loaded profile from 2.14 on.
    """
    names = list(active_profiles(root) if profiles is None else profiles)
    post = post_loaded_profile(root)
    if post and _since(version, POST_LOADED_SINCE):
        names.append(post)
    return names


def split_includes(value, version=None):
    """The profile names of an ``include=`` value as tuned ``version`` reads them.

    tuned/profiles/loader.py: before 2.13 the whole value is one name; 2.13 to 2.17 split
    on ``\\b\\s*[,;]\\s*``; from 2.18 on ``\\s*[,;]\\s*``. Spaces alone never separate names.
    """
    value = (value or '').strip()
    if not value:
        return []
    if not _since(version, INCLUDE_LIST_SINCE):
        return [value]
    if not _since(version, INCLUDE_SPLIT_NO_B_SINCE):
        return re.split(r'\b\s*[,;]\s*', value)
    return re.split(r'\s*[,;]\s*', value)


def load_profiles(root, names, version=None, texts=None):
    """Profiles in merge order, loaded as tuned ``version`` loads the list ``names``.

    Models tuned/profiles/loader.py ``_load_profile``: one list of processed files for the
    whole merge; each profile's includes are loaded (recursively) before it. From 2.17 a name
    starting with ``-`` is a conditional include: loaded when found, else skipped (before 2.17 it is
    looked up literally, and not found). A profile whose file is already loaded is skipped from tuned 2.16 on; before, it is an error (tuned says
    "Cannot find profile" and applies no tuning at all). ``texts`` maps profile paths to
    planned contents that replace the files. Returns a list of dicts {name, path, sections}.
    """
    chain = []
    processed = []

    def load(name, depth, stack):
        if depth > MAX_INCLUDE_DEPTH:
            raise TunedProfileError('tuned profile include chain is deeper than %d at %s.' % (MAX_INCLUDE_DEPTH, name))
        conditional = name.startswith('-') and _since(version, CONDITIONAL_INCLUDE_SINCE)
        path, skipped = _locate(root, name[1:] if conditional else name, processed, texts)
        if path is None:
            where = ' -> '.join(stack + [name])
            if conditional or (skipped and _since(version, SKIP_LOADED_SINCE)):
                return  # a conditional include that is not there, or a profile already loaded: skipped
            if skipped:
                raise TunedProfileError(
                    'tuned %s cannot load profile %s twice in one merge (%s): tuned before 2.16 then fails with '
                    '"Cannot find profile" and applies no tuning at all. Remove the repeated include.'
                    % (_vtext(version), name, where))
            hint = ''
            if ',' in name or ';' in name:
                hint = ' (tuned before 2.13 reads include= as one profile name)'
            raise TunedProfileError('tuned profile %s was not found in %s%s.'
                                    % (name, ', '.join(profile_dirs(root)), hint))
        processed.append(path)
        # A stock profile (outside /etc) is never written by the collection: read once per run.
        text = texts[path] if texts and path in texts else host_text(root, path, static=not path.startswith('/etc/'))
        sections = parse_conf(text, path, version)
        skipped_includes = []
        for section, options in sections:
            if section == 'main':
                for key, value in options:
                    if key == 'include':
                        for parent in split_includes(value, version):
                            if '${' in parent:
                                # a variable or function (${f:virt_check:...} runs virt-what on the host):
                                # tuned evaluates it when it loads the profile; this model does not
                                skipped_includes.append(parent)
                                continue
                            load(parent, depth + 1, stack + [name])
        entry = {'name': name, 'path': path, 'sections': sections}
        if skipped_includes:
            entry['not_evaluated'] = skipped_includes
        chain.append(entry)

    for name in names:
        load(name, 0, [])
    return chain


def _vtext(version):
    return '.'.join(str(v) for v in version[:2]) if version else '(newest rules)'


def not_evaluated(chain):
    """Messages for the includes of ``chain`` the model did not follow (``${...}`` variables and functions): the
    profiles tuned loads there, and their [disk] instances, are not seen, so not narrowed by the child profile."""
    return ['tuned profile %s (%s) includes %s, which tuned evaluates on the host and this collection does not: '
            'the [disk] instances of the profile it names are not seen, so not narrowed. Name the profile in '
            'include= instead, or check the devices\' read-ahead after tuned applies it.'
            % (p['name'], p['path'], ', '.join(p['not_evaluated'])) for p in chain if p.get('not_evaluated')]


def load_chain(root, name, version=None):
    """Profiles in merge order (deepest include first) as a list of dicts {name, path, sections}."""
    return load_profiles(root, [name], version)


def tuned_bool(value, default, version=None):
    """A unit boolean (``enabled``, ``replace``) as tuned/profiles/unit.py reads it.

    Only ``true`` and ``1`` are true (``True`` too from 2.13); ``yes``, ``on`` are false.
    """
    if value is None:
        return default
    accepted = ('true', '1', 'True') if _since(version, BOOL_TITLE_SINCE) else ('true', '1')
    return value in accepted


def merge(chain, version=None):
    """Merge profiles like tuned: an ordered list of units {name, type, options, profile, origins}.

    tuned/profiles/merger.py (the same from 2.11 to 2.25): a unit whose name is new, or that
    has a true ``replace``, replaces; otherwise ``type``, ``enabled`` and ``devices`` are reset
    to the later unit's values (or their defaults), ``devices_udev_regex`` only when it sets
    one, ``drop`` (2.13+) removes inherited options, and options update; ``priority`` updates too,
    except from 2.23 to 2.25, which keep the first declaration's (see :data:`PRIORITY_NOT_MERGED`).
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
            replace = tuned_bool(opts.pop('replace', None), False, version)
            drop = opts.pop('drop', None) if _since(version, DROP_SINCE) else None
            unit = by_name.get(section)
            if unit is None or replace:
                new = {'name': section, 'type': section, 'options': {}, 'profile': profile['name'], 'origins': {}}
                if unit is None:
                    units.append(new)
                else:
                    units[units.index(unit)] = new
                unit = by_name[section] = new
            else:
                if _priority_not_merged(version):
                    opts.pop('priority', None)  # the first declaration's priority stays (2.23 to 2.25)
                for option in re.split(r'\b\s*[,;]\s*', drop) if drop else ():
                    if option == 'priority' and _since(version, PRIORITY_NOT_MERGED[0]):
                        continue  # not an option from 2.23 on: drop= cannot remove it
                    unit['options'].pop(option, None)
                    unit['origins'].pop(option, None)
            unit['type'] = opts.pop('type', section)
            raw_enabled = opts.pop('enabled', None)
            unit['options']['enabled'] = raw_enabled if raw_enabled is not None else 'true'
            unit['enabled'] = tuned_bool(raw_enabled, True, version)
            unit['options']['devices'] = opts.pop('devices', '*')
            unit['options'].update(opts)
            unit['origins'].update((k, profile['name']) for k in opts)
            unit['profile'] = profile['name']
    return units


def _priority_not_merged(version):
    return _since(version, PRIORITY_NOT_MERGED[0]) and not _since(version, PRIORITY_NOT_MERGED[1])


def _expand_variables(value, variables, _depth=0):
    if '${' not in value or _depth > 10:
        return value
    expanded = re.sub(r'\$\{([A-Za-z0-9_]+)\}', lambda m: variables.get(m.group(1), m.group(0)), value)
    return expanded if expanded == value else _expand_variables(expanded, variables, _depth + 1)


def effective_units(root, profiles=None, version=None, texts=None):
    """Merged units of what tuned loads (the active list and the post-loaded profile, or
    ``profiles`` then the post-loaded profile) with the chain that built them."""
    chain = load_profiles(root, loaded_profiles(root, version, profiles), version, texts)
    return merge(chain, version), chain


def _enabled(unit):
    if 'enabled' in unit:
        return unit['enabled']
    return tuned_bool(unit['options'].get('enabled'), True)


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


def device_parent_subsystem(root, name):
    """The subsystem of the parent device of block device ``name``, as pyudev's ``parent`` sees it.

    The nearest ancestor sysfs directory that is a device (has a ``subsystem`` link): ``scsi``,
    ``virtio``, ``xen``, ``nvme``, or ``nvme-subsystem`` for a namespace under native NVMe
    multipath. ``''`` when there is no parent device (dm, md, loop: /sys/devices/virtual/block),
    None when the tree does not say (no subsystem links).
    """
    real = os.path.realpath(root_path(root, '/sys/class/block/%s' % name))
    top = os.path.realpath(root_path(root, '/sys/devices'))
    current = os.path.dirname(real)
    while current.startswith(top + os.sep):
        link = os.path.join(current, 'subsystem')
        if os.path.islink(link):
            return os.path.basename(os.path.realpath(link))
        current = os.path.dirname(current)
    if real.startswith(os.path.join(top, 'virtual', 'block') + os.sep):
        return ''
    return None


def disk_parent_subsystems(version=None):
    """Parent subsystems plugin_disk ``_device_is_supported`` accepts at tuned ``version``."""
    subsystems = list(DISK_PARENT_SUBSYSTEMS)
    if _since(version, NVME_SINCE):
        subsystems.append('nvme')  # tuned 2.18.0, commit e6dda32
    if version is not None and tuple(version[:2]) >= MMC_SINCE:
        subsystems.append('mmc')
    return tuple(subsystems)


def disk_plugin_covers(kind, removable=False, version=None, parent_subsystem=None):
    """Whether tuned's disk plugin tunes a device of blockdev type ``kind`` at all.

    tuned/plugins/plugin_disk.py ``_device_is_supported``: a whole disk, not removable, with
    no parent device or a parent in :func:`disk_parent_subsystems`. ``parent_subsystem``
    (from :func:`device_parent_subsystem`) decides when known: a namespace under native NVMe
    multipath (parent ``nvme-subsystem``) is never tuned, on any version.
    """
    if removable or kind == 'part':
        return False
    if parent_subsystem is not None:
        return parent_subsystem == '' or parent_subsystem in disk_parent_subsystems(version)
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
# The child has no include=. It is activated as the LAST of the active profiles, after the ones
# that were active (``tuned-adm profile virtual-guest kernel_settings aemops-os-tuning``): tuned
# loads and merges the list in order (loader.py, merger.py), so its same-named sections merge
# into the parents' as an include would, and the list loads on every tuned from 2.11 (no comma
# list in include=, which 2.11 cannot read; no profile loaded twice, which is an error before
# 2.16). Layout of the file (each section preceded by an "# owner: <module>" line, so each
# module rewrites only its own sections):
#
#   # Managed by aemops.os_tuning (tuned child profile). ...
#   # aemops-baseline {"active_profiles": [...], "profile_mode": "auto"}
#   [main]
#   summary=...
#   # owner: read_ahead
#   [disk]                                  <- the parents' disk instance, now excluding our devices
#   devices_udev_regex=\A(?![\s\S]*^(?:ID_SERIAL=...|DM_UUID=...)$)
#   # owner: read_ahead
#   [aemops_read_ahead_32]                  <- our devices, with our value
#   type=disk
#   devices_udev_regex=^(?:ID_SERIAL=...|DM_UUID=...)$
#   readahead=32
#   # owner: thp
#   [vm]
#   transparent_hugepages=never

# The child's name is the rulebook's, compliance.CHILD_PROFILE (imported above).
OWNER_ORDER = ('read_ahead', 'thp')
_OWNER_PREFIX = '# owner: '


def user_profile_dir(root):
    """Where administrators' profiles go: ``/etc/tuned``, or ``/etc/tuned/profiles`` where the system profiles are
    in ``/usr/lib/tuned/profiles`` (upstream 2.23+, RHEL 10; RHEL 9 builds keep the old directories)."""
    dirs = profile_dirs(root)
    if dirs != DEFAULT_PROFILE_DIRS:
        return dirs[-1]
    if os.path.isdir(root_path(root, '/usr/lib/tuned/profiles')):
        return '/etc/tuned/profiles'
    return '/etc/tuned'


def child_profile_path(root):
    return os.path.join(user_profile_dir(root), CHILD_PROFILE, 'tuned.conf')


def parse_child(text, path):
    """Our child profile as {'baseline': dict or None, 'include': [...], 'sections': [(owner, name, options)]}.

    ``include`` is only ever set in a child written by 0.1.0 (which included its parents).
    """
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


def render_child(baseline, sections):
    """Text of the child profile; ``sections`` is a list of (owner, name, [(key, value)]).

    No ``include=``: the child is activated after its parents in the active profile list
    (:func:`desired_active`), so the text does not name them.
    """
    from ansible_collections.aemops.os_tuning.plugins.module_utils.files import baseline_line, managed_header
    lines = managed_header('tuned child profile',
                           'Activated as the last of the active profiles; overrides only what '
                           'aemops.os_tuning manages. The baseline line is used for backout.')
    lines.append(baseline_line(baseline))
    # The summary does not name the parents: the file must not change when another tool (the
    # kernel_settings role) adds a profile to the list.
    lines += ['[main]', 'summary=aemops.os_tuning overrides (read-ahead, THP), last in the active profile list']
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

    ``parents`` are the other active profiles, in their order: the child is activated after
    them. When ours is the only active profile (a 0.1.0 child that included its parents, or
    ``tuned-adm profile aemops-os-tuning`` by hand), the recorded baseline supplies them.
    The baseline (the active list and profile_mode before our first write) is kept once written.
    """
    path = child_profile_path(root)
    before = host_text(root, path)
    current = parse_child(before, path) if before is not None else None
    active = active_profiles(root)
    others = [p for p in active if p != CHILD_PROFILE]
    if current is not None and current['baseline']:
        baseline = current['baseline']
    else:
        baseline = {'active_profiles': others, 'profile_mode': profile_mode(root)}
    parents = others
    if not parents:
        parents = [p for p in (baseline.get('active_profiles') or current and current['include'] or [])
                   if p != CHILD_PROFILE]
    return path, before, current, baseline, parents


def desired_active(parents):
    """The active profile list with our child: the others in their order, ours last."""
    return [p for p in parents if p != CHILD_PROFILE] + [CHILD_PROFILE]


def plan_child(root, owner, new_sections, version=None, state=None):
    """Plan our child profile after ``owner`` replaces its sections with ``new_sections``.

    Returns {path, before, after, parents, activate, restore, baseline, conflicts}: ``after``
    None means the file goes away (no owner has sections left); ``activate`` is the profile
    list to switch to (or None when it is already active as planned); ``restore`` the list
    without ours on removal. ``conflicts`` lists where another loaded profile sets what we set
    (see :func:`child_conflicts`). A planned list that tuned ``version`` cannot load is an error, and so is a
    child that some tuned parser (:data:`PARSER_ERAS`) would reject or read differently.

    Coexistence with linux-system-roles kernel_settings (library/kernel_settings.py,
    ``update_current_profile_and_mode``: appends ``kernel_settings`` when it is missing and sets
    profile_mode manual): when it was appended after ours, ours moves back to the end; the role
    then finds its name present and changes nothing, so both converge.

    ``state`` is :func:`child_state` when the caller has read it already.
    """
    path, before, current, baseline, parents = state if state is not None else child_state(root)
    active = active_profiles(root)
    try:
        sections = replace_owned(current['sections'] if current else [], owner, new_sections)
    except TunedProfileError as e:
        raise TunedProfileError('%s (in %s)' % (e, path))
    result = {'path': path, 'before': before, 'parents': parents, 'activate': None, 'restore': None,
              'baseline': baseline, 'conflicts': []}
    if not sections:
        result['after'] = None
        if CHILD_PROFILE in active:
            result['restore'] = [p for p in active if p != CHILD_PROFILE] or parents
        return result
    if not parents:
        raise TunedProfileError('tuned has no active profile to build on (%s is empty). Activate one first, '
                                'for example: tuned-adm profile virtual-guest.' % ACTIVE_PROFILE_FILE)
    result['after'] = render_child(baseline, sections)
    return _plan_activation(root, result, sections, new_sections, version, active)


def _plan_activation(root, result, sections, new_sections, version, active):
    """plan_child with the child rendered: every tuned parser must read it alike; then what to activate, whether
    tuned ``version`` can load that list, and the conflicts. A failure is an error where the owner adds sections,
    else ``load_error`` (an owner that only removes its sections is not blocked)."""
    path, parents = result['path'], result['parents']
    try:
        # Written once, read by whatever tuned the host has now or after an upgrade: every parser must agree.
        check_every_parser(result['after'], path)
    except TunedProfileError as e:
        message = 'the planned child profile is not valid for every tuned version: %s' % e
        if new_sections:
            raise TunedProfileError(message)
        result['load_error'] = message
        return result
    target = desired_active(parents)
    off = no_profile_reason(root)
    if off:
        # Live state wins over the parents recorded in the child: nothing is activated or started.
        result['not_activated'] = off
    elif active != target:
        result['activate'] = target
    try:
        units, chain = effective_units(root, target, version, {path: result['after']})
    except TunedProfileError as e:
        message = ('tuned %s could not load the planned profile list "%s", so it would apply no tuning at all: %s'
                   % (_vtext(version), ' '.join(target), e))
        if new_sections:
            raise TunedProfileError(message)
        result['load_error'] = message  # this owner only removes its sections: do not block that
        return result
    result['conflicts'] = child_conflicts(chain, units, sections)
    return result


# What other profiles may set that collides with ours: [vm] options (plugin_vm.py, 2.11+; the
# ``transparent_hugepage`` alias) and [sysfs] paths (plugin_sysfs.py: keys are globs).
_VM_ALIASES = {'transparent_hugepage': 'transparent_hugepages'}
_SYSFS_WATCH = (
    ('/sys/kernel/mm/transparent_hugepage/enabled', 'transparent_hugepages'),
    ('/sys/kernel/mm/transparent_hugepage/defrag', 'transparent_hugepage.defrag'),
    ('/sys/kernel/mm/transparent_hugepage/khugepaged/defrag', 'khugepaged/defrag'),
    ('/sys/block/x/queue/read_ahead_kb', 'readahead'),
    ('/sys/devices/virtual/block/x/queue/read_ahead_kb', 'readahead'),
    ('/sys/class/block/x/queue/read_ahead_kb', 'readahead'),
)


def _sysfs_topic(key):
    """What a [sysfs] key touches that we manage, or None (keys are globs, as tuned reads them)."""
    for path, topic in _SYSFS_WATCH:
        if fnmatch.fnmatchcase(path, key) or (topic == 'readahead' and key.endswith('/queue/read_ahead_kb')):
            return topic
    return None


def child_conflicts(chain, units, sections):
    """Where another loaded profile sets THP or read-ahead differently from our child.

    ``chain`` is what tuned loads (ours and the post-loaded profile included), ``units`` their
    merge, ``sections`` our child's sections. Each item names the other profile, its section,
    option and value, ours, and ``winner``: the profile whose value tuned ends with (ours when
    our child merges later; the other when it merges after ours, like a post-loaded profile,
    or writes through another plugin, like [sysfs], whose result depends on plugin order).
    """
    ours_vm, ours_disk, ours_sysfs, ours_read_ahead = _child_settings(sections)
    conflicts = []
    our_names = set(name for _owner, name, _options in sections)
    final = dict((u['name'], u) for u in units)
    for profile in chain:
        if profile['name'] == CHILD_PROFILE:
            continue
        for section, options in profile['sections']:
            if section in ('main', 'variables'):
                continue
            opts = dict(options)
            kind = opts.get('type', section)
            if kind == 'vm':
                for raw_key, value in options:
                    key = _VM_ALIASES.get(raw_key, raw_key)
                    if key in ours_vm and value != ours_vm[key][1]:
                        # Ours wins only where tuned ends with our value under the very key the
                        # other profile used, in the same unit; an alias or a second vm unit
                        # is also applied by plugin_vm, so the other profile is named the winner.
                        unit = final.get(section)
                        got = unit['options'].get(raw_key) if unit else None
                        ours_wins = section == ours_vm[key][0] and got == ours_vm[key][1]
                        conflicts.append(_conflict(profile['name'], section, raw_key, value, ours_vm[key][1],
                                                   CHILD_PROFILE if ours_wins else profile['name'], opts))
            elif kind == 'sysfs':
                for key, value in options:
                    topic = _sysfs_topic(key)
                    if topic and (topic == 'readahead' and ours_read_ahead or topic in ours_vm or topic in ours_sysfs):
                        ours = ours_sysfs.get(topic) or (ours_vm[topic][1] if topic in ours_vm else None) \
                            or ','.join(ours_read_ahead)
                        if value != ours:
                            # Ours wins only for the same key in the same-named unit, merged later.
                            unit = final.get(section)
                            ours_wins = (section in our_names and unit is not None
                                         and unit['origins'].get(key) == CHILD_PROFILE)
                            conflicts.append(_conflict(profile['name'], section, key, value, ours,
                                                       CHILD_PROFILE if ours_wins else profile['name'], opts))
            elif kind == 'disk' and section in ours_disk and opts.get('readahead') and ours_read_ahead:
                unit = final.get(section)
                winner = CHILD_PROFILE
                if unit is not None and unit['origins'].get('devices_udev_regex') != CHILD_PROFILE:
                    winner = profile['name']  # a later profile re-widened the narrowed instance
                conflicts.append(_conflict(profile['name'], section, 'readahead', opts['readahead'],
                                           ','.join(ours_read_ahead), winner, opts))
    return conflicts


def _child_settings(sections):
    """(vm options by canonical key: (section, value), disk section names, sysfs values by topic, read-ahead values)."""
    ours_vm = {}
    ours_disk = set()
    ours_sysfs = {}
    for _owner, name, options in sections:
        opts = dict(options)
        if opts.get('type', name) == 'vm':
            for k, v in options:
                ours_vm[_VM_ALIASES.get(k, k)] = (name, v)
        elif opts.get('type', name) == 'disk':
            ours_disk.add(name)
        elif opts.get('type', name) == 'sysfs':
            for k, v in options:
                if k != 'type' and _sysfs_topic(k):
                    ours_sysfs[_sysfs_topic(k)] = v
    ours_read_ahead = sorted(set(dict(o).get('readahead') for _w, n, o in sections
                                 if n.startswith('aemops_read_ahead_') and dict(o).get('readahead')))
    return ours_vm, ours_disk, ours_sysfs, ours_read_ahead


def _conflict(profile, section, option, value, ours, winner, opts):
    item = {'profile': profile, 'section': section, 'option': option, 'value': value, 'ours': ours,
            'winner': winner}
    # A unit with uname_regex/cpuinfo_regex (2.13+) applies only on matching machines, such as
    # throughput-performance's [vm.thunderx] (aarch64): say so rather than guess the machine.
    condition = ', '.join('%s=%s' % (k, opts[k]) for k in ('uname_regex', 'cpuinfo_regex') if opts.get(k))
    if condition:
        item['condition'] = condition
    return item


# '#' is written as \x23: before tuned 2.17 (configobj) it would start a comment anywhere in the
# value, and from 2.19 after whitespace (tuned/profiles/loader.py at those tags).
_REGEX_SPECIAL = frozenset('\\.^$*+?{}[]|()')


def regex_escape(text):
    """Escape regex metacharacters only, identically on every Python (re.escape differs by version).

    ``#`` becomes ``\\x23`` so that no tuned parser reads it as a comment.
    """
    return ''.join('\\x23' if c == '#' else '\\' + c if c in _REGEX_SPECIAL else c for c in text)


def hash_free_regex(regex):
    """``regex`` with every ``#`` (or ``\\#``) written as ``\\x23``: the same pattern, no comment."""
    out = []
    i = 0
    while i < len(regex):
        c = regex[i]
        if c == '\\' and i + 1 < len(regex):
            out.append('\\x23' if regex[i + 1] == '#' else regex[i:i + 2])
            i += 2
            continue
        out.append('\\x23' if c == '#' else c)
        i += 1
    return ''.join(out)


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
            out.append(regex_escape(c))
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


# A dm device's "add" uevent, when it is not a coldplug, runs lvm2's udev/10-dm.rules.in down to
# its "dm_disable" label: DM_NAME and DM_UUID are not set yet (they come with the "change" event
# after the table is loaded and resumed). tuned assigns hotplugged devices on "add" only
# (tuned/plugins/hotplug.py), reading the udev database then (plugin_disk ``_get_device_objects``),
# so a narrowed parent instance would take an LV activated later. This lookahead keeps a dm
# device that has no DM_NAME yet out of the parents' instances: no instance takes it until tuned
# reloads, and then the full properties place it.
UNIDENTIFIED_DM = r'(?!(?=[\s\S]*?^DEVNAME=/dev/dm-[0-9]+$)(?![\s\S]*?^DM_NAME=))'
_DM_KEYS = ('DM_UUID', 'DM_NAME')


def disk_sections(root, parents, groups, version=None):
    """Sections that make tuned set our read-ahead on our devices, for read_ahead to own.

    ``groups`` maps a KiB value to a list of (udev property, value) identities. Every disk
    instance of the parents gets a same-named section that keeps its own device selection
    but excludes our devices (and, when one of ours is a dm device, dm devices not identified
    yet: see :data:`UNIDENTIFIED_DM`); one ``aemops_read_ahead_<kb>`` instance per value takes ours.
    tuned merges a later profile's same-named section into the earlier one (merger.py), so
    this works with the child last in the active list, without include=.
    """
    if not groups:
        return []
    # The parents only: a post-loaded profile merges after our child, so narrowing it here would
    # be undone (its conflicts are reported by child_conflicts and per device).
    units = merge(load_profiles(root, parents, version), version)
    idents = [ident for kb in groups for ident in groups[kb]]
    ours = udev_regex_alternatives(idents)
    dm = any(key in _DM_KEYS for key, _value in idents)
    sections = []
    for unit in units:
        if unit['type'] != 'disk' or not _enabled(unit):
            continue
        if unit['name'].startswith('aemops_read_ahead_'):
            continue  # our own instance, from a post-loaded copy of an older child
        regex = r'\A'
        if unit['options'].get('devices_udev_regex'):
            regex += r'(?=[\s\S]*?(?:%s))' % hash_free_regex(unit['options']['devices_udev_regex'])
        else:
            regex += _devices_to_regex(unit['options'].get('devices', '*'))
        regex += r'(?![\s\S]*^(?:%s)$)' % ours
        if dm:
            regex += UNIDENTIFIED_DM
        sections.append(('read_ahead', unit['name'], [('type', 'disk'), ('devices_udev_regex', regex)]))
    for kb in sorted(groups):
        sections.append(('read_ahead', 'aemops_read_ahead_%d' % kb, [
            ('type', 'disk'),
            ('devices_udev_regex', '^(?:%s)$' % udev_regex_alternatives(groups[kb])),
            ('readahead', str(kb)),
        ]))
    return sections


def hotplug_instance(units, name, props):
    """The disk instance tuned gives a device on its "add" event, or None (a free device).

    tuned/plugins/hotplug.py ``_add_device``: the first instance, in priority order, whose
    selection matches the device's udev properties at that moment. A free device is not
    tuned, and not checked by ``tuned-adm verify``, until tuned reloads its profile.
    """
    for unit in disk_instances(units):
        if instance_matches(unit, name, props):
            return unit['name']
    return None


def switch_profile(run, tuned_adm, profiles):
    """``tuned-adm profile <names>``; returns (rc, message)."""
    rc, out, err = run([tuned_adm, 'profile'] + list(profiles))
    return rc, (err or out).strip()


def plan_changes(plan):
    """Whether a plan from :func:`plan_child` changes anything."""
    return bool(plan) and bool(plan['after'] != plan['before'] or plan['activate'] or plan['restore'])


def plan_summary(plan, changed, actions=()):
    """What modules return about the child profile: what ``plan`` holds, whether it ``changed``, and the
    ``actions`` :func:`apply_child` returned (none in check mode)."""
    if not plan:
        return None
    summary = {'path': plan['path'], 'parents': plan['parents'], 'actions': list(actions),
               'changed': changed, 'conflicts': plan.get('conflicts', []),
               'not_activated': plan.get('not_activated')}
    if plan.get('load_error'):
        summary['load_error'] = plan['load_error']
    return summary


def conflict_warnings(plan):
    """One warning per setting another loaded profile wins over ours: never lose silently. First, when tuned
    runs no profile, the one line that says the child is not activated."""
    off = ['%s (%s); the settings persist through udev, LVM and the kernel command line.'
           % (NO_PROFILE, plan['not_activated'])] if (plan or {}).get('not_activated') else []
    return off + ['tuned profile %s [%s] %s=%s wins over the collection\'s %s%s: change or remove it there, or '
                  'stop loading it after %s.' % (c['profile'], c['section'], c['option'], c['value'], c['ours'],
                                                 ' (where %s)' % c['condition'] if c.get('condition') else '',
                                                 CHILD_PROFILE)
                  for c in (plan or {}).get('conflicts', []) if c.get('winner') != CHILD_PROFILE]


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
    if target is None and plan['after'] is not None and plan['after'] != plan['before'] \
            and not plan.get('not_activated'):
        target = active_profiles(root)  # already active as planned: switch again so tuned reloads the file
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
        baseline = plan.get('baseline') or {}
        if target == plan['restore'] and target == baseline.get('active_profiles'):
            # Back to the list we found: its mode too. A list another tool changed since (the
            # kernel_settings role sets manual so that tuned keeps its profile) stays manual.
            mode = baseline.get('profile_mode') or 'manual'
        if profile_mode(root) != mode:
            write(root_path(root, PROFILE_MODE_FILE), mode + '\n')
        done.append('activated %s' % ' '.join(target))
    if plan['after'] is None and plan['before'] is not None:
        remove(full)
        done.append('removed %s' % plan['path'])
    return done
