# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Persist one kernel command-line argument, the way each release expects it.

This is the one place that knows how a release sets the kernel command line:

* **RHEL 7 family** (RHEL, CentOS, Rocky, Alma, Oracle Linux 7; no BLS entries):
  ``GRUB_CMDLINE_LINUX`` in ``/etc/default/grub``, then ``grub2-mkconfig -o <grub.cfg>``
  where grub.cfg is ``/boot/grub2/grub.cfg`` on BIOS and ``/boot/efi/EFI/<vendor>/grub.cfg``
  on UEFI. grub.cfg is regenerated only when ``/etc/default/grub`` changes or the kernel
  lines of the current grub.cfg do not carry the value.
* **RHEL 8** (BLS entries in ``/boot/loader/entries``): ``grubby --update-kernel=ALL`` for
  the existing kernels, the grubenv ``kernelopts`` variable for new kernels (RHEL 8.0's
  grubby did not update it), and ``GRUB_CMDLINE_LINUX`` in ``/etc/default/grub`` kept in
  step because Leapp and grub2-mkconfig read it.
* **RHEL 9**: grubby as on 8, ``/etc/kernel/cmdline`` (what kernel-install gives new
  kernels) and ``/etc/default/grub`` in step. grub2-mkconfig is never run: since 9.3 it
  only rewrites the options of BLS entries when given ``--update-bls-cmdline``, so a caller
  that regenerates grub.cfg on 9 itself must pass that flag or the entries keep their old
  arguments.
* **Debian/Ubuntu**: ``GRUB_CMDLINE_LINUX`` in ``/etc/default/grub`` (and the drop-ins in
  ``/etc/default/grub.d``), then ``update-grub``, only where GRUB is installed. A host booted
  without a boot loader (direct kernel boot, as in this project's test VM) gets the method
  ``none`` with a reason; callers report it rather than fail.

Nothing here writes a file or runs a mutating command: :func:`plan` returns the files to
write and the commands to run, and the caller applies them (files first, then the commands
in order) only outside check mode. Every function takes ``root`` (``/`` on a real host, a
fake tree in tests) and, where commands are read, an injected ``run(argv) -> (rc, stdout,
stderr)``; :func:`detect` takes ``which(name) -> path or None``.

The plan is computed from the persisted configuration only, never from ``/proc/cmdline``:
deciding from the running command line reports a change on every run until the next reboot.
``/proc/cmdline`` only decides ``reboot_required``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

from ansible_collections.aemops.os_tuning.plugins.module_utils.files import host_text, root_path


class BootloaderError(Exception):
    """The boot configuration cannot be read or planned. The message names the file and the fix."""


GRUB_DEFAULT = '/etc/default/grub'
GRUB_DEFAULT_D = '/etc/default/grub.d'
KERNEL_CMDLINE = '/etc/kernel/cmdline'
BLS_DIR = '/boot/loader/entries'

# /boot/efi/EFI/<vendor> per os-release ID, tried first; other directories that hold a grub.cfg
# are taken next (a host converted from CentOS to Rocky keeps /boot/efi/EFI/centos).
EFI_VENDORS = (
    ('rhel', 'redhat'), ('centos', 'centos'), ('rocky', 'rocky'), ('almalinux', 'almalinux'),
    ('ol', 'redhat'), ('scientific', 'redhat'),
)
EL_IDS = frozenset(('rhel', 'centos', 'rocky', 'almalinux', 'ol', 'scientific', 'eurolinux',
                    'virtuozzo', 'cloudlinux', 'navy'))
DEBIAN_IDS = frozenset(('debian', 'ubuntu'))

_SPACE = ' \t\n\r'


# -- kernel command-line arguments -----------------------------------------------------------
#
# The kernel splits its command line on white space, except inside double quotes
# (``foo="a b"`` is one argument), and the last occurrence of a parameter wins. Parameter
# names treat ``-`` and ``_`` alike. The editing below works on *units* ``[char, raw, seg]``:
# the character the kernel sees, its spelling in the source (a shell escape such as ``\\"``
# in /etc/default/grub) and the quoted segment it sits in, so that an edit keeps every other
# byte of the value as written.

def _spans(chars):
    """Start/end indexes of each argument in ``chars`` (a string or a list of characters)."""
    spans = []
    i, n = 0, len(chars)
    while i < n:
        while i < n and chars[i] in _SPACE:
            i += 1
        if i >= n:
            break
        start, quoted = i, False
        while i < n and (quoted or chars[i] not in _SPACE):
            if chars[i] == '"':
                quoted = not quoted
            i += 1
        spans.append((start, i))
    return spans


def _split_param(arg):
    """``(name, value)`` of one argument as the kernel parses it; value None for a bare flag."""
    if arg.startswith('"'):
        arg = arg[1:]
        if arg.endswith('"'):
            arg = arg[:-1]
    if '=' not in arg:
        return arg, None
    name, value = arg.split('=', 1)
    if value.startswith('"'):
        value = value[1:]
        if value.endswith('"'):
            value = value[:-1]
    return name, value


def _same_name(name, key):
    return name.replace('-', '_') == key.replace('-', '_')


def format_arg(key, value):
    """``key=value``, with the value in double quotes when it holds white space or is empty."""
    if value == '' or any(c in _SPACE for c in value):
        return '%s="%s"' % (key, value)
    return '%s=%s' % (key, value)


def split_args(cmdline):
    """The arguments of ``cmdline`` as a list, quoting kept (``foo="a b"`` stays one item)."""
    cmdline = cmdline or ''
    return [cmdline[s:e] for s, e in _spans(cmdline)]


def get_arg(cmdline, key):
    """The effective (last) value of ``key`` in ``cmdline``, or None when it is absent.

    A bare ``key`` without ``=`` gives ``''``; surrounding double quotes are removed the way
    the kernel removes them.
    """
    found = None
    for arg in split_args(cmdline):
        name, value = _split_param(arg)
        if _same_name(name, key):
            found = '' if value is None else value
    return found


def _names(cmdline, key):
    """Every spelling of ``key`` used in ``cmdline`` (``transparent-hugepage`` and ``_``)."""
    names = []
    for arg in split_args(cmdline):
        name = _split_param(arg)[0]
        if _same_name(name, key) and name not in names:
            names.append(name)
    return names


def _edit_units(units, key, value, encode, default_seg=0):
    """Set (or with ``value`` None remove) ``key`` in a list of units; returns a new list.

    An existing argument is replaced in place at its first occurrence and every later
    occurrence is removed with the white space before it (after it for the first argument);
    a missing one is appended after the last argument. ``encode(text, seg)`` spells new text
    as units for segment ``seg``.
    """
    chars = [u[0] for u in units]
    spans = _spans(chars)
    hits = [i for i, (s, e) in enumerate(spans)
            if _same_name(_split_param(''.join(chars[s:e]))[0], key)]
    if not hits:
        if value is None:
            return list(units)
        if spans:
            pos = spans[-1][1]
            new = encode(' ' + format_arg(key, value), units[pos - 1][2])
        else:
            pos = len(units)
            new = encode(format_arg(key, value), units[-1][2] if units else default_seg)
        return list(units[:pos]) + new + list(units[pos:])
    keep_first = value is not None
    kept = [i not in hits for i in range(len(spans))]
    if keep_first:
        kept[hits[0]] = True
    removed = [False] * len(units)
    insert = {}
    for n, idx in enumerate(hits):
        s, e = spans[idx]
        for k in range(s, e):
            removed[k] = True
        if n == 0 and keep_first:
            insert[s] = encode(format_arg(key, value), units[s][2])
            continue
        if any(kept[:idx]):
            ws = range(spans[idx - 1][1], s)
        elif idx + 1 < len(spans):
            ws = range(e, spans[idx + 1][0])
        else:
            ws = range(e, len(units))
        for k in ws:
            removed[k] = True
    result = []
    for k, unit in enumerate(units):
        result.extend(insert.get(k, ()))
        if not removed[k]:
            result.append(unit)
    return result


def _plain_units(text):
    return [[c, c, 0] for c in text]


def set_arg(cmdline, key, value):
    """``cmdline`` with ``key=value`` set (or with ``value`` None, every ``key`` removed).

    An existing ``key=...`` is replaced at its first position and its other occurrences are
    dropped; a missing one is appended. Every other argument, its quoting and the white space
    around it are kept.
    """
    units = _edit_units(_plain_units(cmdline or ''), key, value, lambda text, seg: _plain_units(text))
    return ''.join(u[0] for u in units)


# -- /etc/default/grub -------------------------------------------------------------------------
#
# The file is a shell fragment. Each ``NAME=word`` line is parsed into quoted segments
# (``"..."``, ``'...'`` or unquoted) and units; ``$NAME``/``${NAME}`` refer to an earlier
# assignment in the file when there is one and stay as written otherwise.

_ASSIGN_RE = re.compile(r'^(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_]*)=')
_NAME_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'
_SAFE_UNQUOTED = re.compile(r'^[A-Za-z0-9_./:=,+@%^-]$')
_WORD_END = ' \t;&|<>()'


class _Unbalanced(Exception):
    pass


class _NeedQuotes(Exception):
    pass


class _Assignment(object):
    """One ``NAME=word`` line of a shell fragment."""

    def __init__(self, number, line):
        body = line.rstrip('\r\n')
        self.number = number          # 1-based line number
        self.eol = line[len(body):]
        m = _ASSIGN_RE.match(body)
        self.name = m.group(2)
        self.head = body[:m.end()]
        self.error = None
        try:
            self.segs, self.units, end = _parse_word(body, m.end())
            self.tail = body[end:]
        except _Unbalanced as e:
            self.segs, self.units, self.tail = [], [], ''
            self.error = str(e)
        self.body = body

    def render(self, segs, units):
        word = ''.join(q + ''.join(u[1] for u in units if u[2] == k) + q for k, q in enumerate(segs))
        return self.head + word + self.tail + self.eol


def _parse_word(line, i):
    """Parse the shell word starting at ``line[i]`` into ``(segments, units, end)``."""
    segs, units, n = [], [], len(line)
    while i < n:
        c = line[i]
        if c == '"':
            seg = len(segs)
            segs.append('"')
            i += 1
            while True:
                if i >= n:
                    raise _Unbalanced('unbalanced double quote')
                c = line[i]
                if c == '"':
                    i += 1
                    break
                if c == '\\' and i + 1 < n and line[i + 1] in '"\\$`':
                    units.append([line[i + 1], line[i:i + 2], seg])
                    i += 2
                    continue
                units.append([c, c, seg])
                i += 1
        elif c == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise _Unbalanced('unbalanced single quote')
            seg = len(segs)
            segs.append("'")
            units.extend([ch, ch, seg] for ch in line[i + 1:end])
            i = end + 1
        elif c in _WORD_END:
            break
        else:
            if not segs or segs[-1] != '':
                segs.append('')
            seg = len(segs) - 1
            if c == '\\':
                if i + 1 >= n:
                    raise _Unbalanced('line continuation (backslash at the end of the line)')
                units.append([line[i + 1], line[i:i + 2], seg])
                i += 2
            else:
                units.append([c, c, seg])
                i += 1
    return segs, units, i


def _encode(text, quote, seg):
    """Units spelling ``text`` inside a segment quoted with ``quote``."""
    units = []
    for c in text:
        if quote == '"':
            raw = '\\' + c if c in '"\\$`' else c
        elif quote == "'":
            raw = "'\\''" if c == "'" else c
        elif _SAFE_UNQUOTED.match(c):
            raw = c
        else:
            raise _NeedQuotes()
        units.append([c, raw, seg])
    return units


def _to_double_quotes(segs, units):
    """The same word as a single double-quoted segment (for an unquoted value that grows a space)."""
    new = []
    for c, raw, seg in units:
        quote = segs[seg]
        if quote == '"' or (quote == '' and not raw.startswith('\\')):
            new.append([c, raw, 0])
        else:
            new.append([c, '\\' + c if c in '"\\$`' else c, 0])
    return ['"'], new


def _edit_assignment(rec, key, value):
    """The new line for ``rec`` with ``key`` set or removed."""
    segs, units = list(rec.segs), rec.units
    if value is not None and not segs:
        segs = ['"']
    default_seg = len(segs) - 1
    try:
        new_units = _edit_units(units, key, value, lambda t, s: _encode(t, segs[s], s), default_seg)
    except _NeedQuotes:
        segs, units = _to_double_quotes(segs, units)
        new_units = _edit_units(units, key, value, lambda t, s: _encode(t, '"', s), 0)
    if [u[0] for u in new_units] == [u[0] for u in rec.units]:
        return rec.body + rec.eol
    return rec.render(segs, new_units)


def _references(rec):
    """``(name, literal)`` for each ``$NAME``/``${NAME}`` expansion in ``rec``, in order, with
    the unit range it covers: ``[(start, end, name)]``."""
    refs = []
    units, k, n = rec.units, 0, len(rec.units)
    while k < n:
        c, raw, seg = units[k]
        if c == '$' and raw == '$' and rec.segs[seg] != "'" and k + 1 < n:
            if units[k + 1][0] == '{':
                j = k + 2
                while j < n and units[j][0] != '}':
                    j += 1
                name = ''.join(u[0] for u in units[k + 2:j])
                if j < n and name and all(ch in _NAME_CHARS for ch in name):
                    refs.append((k, j + 1, name))
                    k = j + 1
                    continue
            elif units[k + 1][0] in _NAME_CHARS and not units[k + 1][0].isdigit():
                j = k + 1
                while j < n and units[j][0] in _NAME_CHARS:
                    j += 1
                refs.append((k, j, ''.join(u[0] for u in units[k + 1:j])))
                k = j
                continue
        k += 1
    return refs


class _ShellFile(object):
    """The assignments of a shell fragment such as /etc/default/grub."""

    def __init__(self, text, path):
        self.path = path
        self.lines = (text or '').splitlines(True)
        self.records = {}
        for index, line in enumerate(self.lines):
            if _ASSIGN_RE.match(line):
                self.records[index] = _Assignment(index + 1, line)

    def last(self, name, before=None):
        """Line index of the last assignment to ``name`` (before line index ``before``)."""
        found = None
        for index in sorted(self.records):
            if before is not None and index >= before:
                break
            if self.records[index].name == name:
                found = index
        return found

    def check(self, index):
        rec = self.records[index]
        if rec.error:
            raise BootloaderError(
                '%s line %d: %s in the %s assignment: %s. Nothing was changed. Fix the line '
                '(keep the whole value on one line with balanced quotes), then run again.'
                % (self.path, rec.number, rec.error, rec.name, rec.body.strip()))
        return rec

    def contributors(self, index):
        """Line indexes whose values end up in the assignment at ``index`` (itself first)."""
        order, todo = [], [index]
        while todo:
            current = todo.pop(0)
            if current in order:
                continue
            order.append(current)
            for _start, _end, name in _references(self.check(current)):
                earlier = self.last(name, before=current)
                if earlier is not None:
                    todo.append(earlier)
        return order

    def value(self, index):
        """The expanded value of the assignment at ``index``; unknown ``$NAME`` stay as written."""
        rec = self.check(index)
        starts = dict((s, (e, name)) for s, e, name in _references(rec))
        out, k = [], 0
        while k < len(rec.units):
            if k in starts:
                end, name = starts[k]
                earlier = self.last(name, before=index)
                if earlier is not None:
                    out.append(self.value(earlier))
                else:
                    out.append(''.join(u[0] for u in rec.units[k:end]))
                k = end
                continue
            out.append(rec.units[k][0])
            k += 1
        return ''.join(out)


def read_grub_default(root):
    """The text of /etc/default/grub under ``root``, or None when it does not exist."""
    return host_text(root, GRUB_DEFAULT)


def grub_cmdline_linux(text, var='GRUB_CMDLINE_LINUX', path=GRUB_DEFAULT):
    """The unquoted value of the effective (last) ``var`` assignment in ``text``; '' if absent.

    ``$NAME`` references to variables assigned earlier in the same text (including the
    variable itself, ``GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX ..."``) are expanded; others
    stay as written. Raises BootloaderError when the line is malformed.
    """
    shell = _ShellFile(text, path)
    index = shell.last(var)
    return '' if index is None else shell.value(index)


def edit_grub_default(text, key, value, var='GRUB_CMDLINE_LINUX', path=GRUB_DEFAULT):
    """``text`` with ``key`` set to ``value`` in the effective ``var`` (``value`` None removes it).

    Only the last assignment to ``var`` is edited, in its own quoting style (an unquoted value
    that needs a space becomes double-quoted). The key is also removed from the assignments
    that feed it through ``$NAME`` references, so that the result is unambiguous. Every other
    line is kept byte for byte. A missing assignment is appended. Raises BootloaderError,
    naming ``path`` and the line, when a line involved has unbalanced quotes.
    """
    shell = _ShellFile(text, path)
    index = shell.last(var)
    if index is None:
        if value is None:
            return text
        line = '%s="%s"\n' % (var, ''.join(u[1] for u in _encode(format_arg(key, value), '"', 0)))
        text = text or ''
        if text and not text.endswith('\n'):
            text += '\n'
        return text + line
    lines = list(shell.lines)
    for n, current in enumerate(shell.contributors(index)):
        lines[current] = _edit_assignment(shell.records[current], key, value if n == 0 else None)
    new = ''.join(lines)
    return text if new == text else new


# -- detection -----------------------------------------------------------------------------------

def _os_release(root):
    text = host_text(root, '/etc/os-release', static=True)
    if text is None:
        text = host_text(root, '/usr/lib/os-release', static=True)
    values = {}
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        name, raw = line.split('=', 1)
        raw = raw.strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in '"\'':
            raw = raw[1:-1]
        values[name.strip()] = raw.replace('\\"', '"').replace('\\\\', '\\')
    return values


def _major(version_id):
    m = re.match(r'^(\d+)', version_id or '')
    return int(m.group(1)) if m else None


def _family(os_id, id_like, major):
    like = id_like.split()
    if os_id in EL_IDS or 'rhel' in like or 'centos' in like:
        if major == 10:
            return 'el9'  # RHEL 10 boots as 9 does: grubby-bls, BLS entries and /etc/kernel/cmdline
        return 'el%d' % major if major in (7, 8, 9) else 'unknown'
    if os_id in DEBIAN_IDS or 'debian' in like or 'ubuntu' in like:
        return 'debian'
    return 'unknown'


def _bls_entries(root):
    return sorted(glob.glob(os.path.join(root_path(root, BLS_DIR), '*.conf')))


def _blscfg_enabled(text):
    """What ``GRUB_ENABLE_BLSCFG`` says in /etc/default/grub: True, False, or None when unset.

    Read as leapp-repository reads it (``libraries/grub.py``, ``is_blscfg_enabled_in_defaultgrub``,
    over the name/value pairs of ``systemfacts.py``): the last assignment, double quotes
    stripped, compared with ``true``. grub2-mkconfig's 10_linux writes a ``blscfg`` menu
    only for that value.
    """
    if text is None:
        return None
    found = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        name, value = line.split('=', 1)
        if name.strip() == 'GRUB_ENABLE_BLSCFG':
            found = value.strip().strip('"\'') == 'true'
    return found


def _cfg_loads_bls(text):
    """True when a grub.cfg runs ``blscfg`` (GRUB then reads /boot/loader/entries).

    leapp-repository (``systemfacts.py``, ``get_bios_grubcfg_details``) looks for
    ``insmod blscfg``; the menu loads the module and then runs the ``blscfg`` command.
    Either line, not commented out, counts.
    """
    for line in (text or '').splitlines():
        if re.match(r'^\s*(?:insmod\s+)?blscfg(?:\s|$)', line):
            return True
    return False


def _efi_grub_cfg(root, os_id):
    """The grub.cfg under /boot/efi/EFI: the vendor directory holding one, else the ID's."""
    base = root_path(root, '/boot/efi/EFI')
    preferred = []
    for _ident, vendor in sorted(EFI_VENDORS, key=lambda pair: pair[0] != os_id):
        if vendor not in preferred:
            preferred.append(vendor)
    try:
        present = sorted(os.listdir(base))
    except OSError:
        present = []
    candidates = preferred + [d for d in present if d not in preferred and d.upper() != 'BOOT']
    for vendor in candidates:
        if os.path.isfile(os.path.join(base, vendor, 'grub.cfg')):
            return '/boot/efi/EFI/%s/grub.cfg' % vendor
    vendor = preferred[0] if os_id in [ident for ident, _v in EFI_VENDORS] else os_id
    return '/boot/efi/EFI/%s/grub.cfg' % vendor


def detect(root, which):
    """Facts about the release and the boot loader, and the method :func:`plan` will use.

    Returns a dict: ``os_id``, ``version_id``, ``major`` (int or None), ``family`` (``el7``,
    ``el8``, ``el9``, ``debian`` or ``unknown``), ``efi`` (``/sys/firmware/efi`` exists),
    ``bls`` (``/boot/loader/entries`` has ``*.conf``), ``bls_enabled`` (GRUB_ENABLE_BLSCFG:
    True, False or None when unset), ``method`` (``grub2-mkconfig``, ``grubby``, ``update-grub``
    or ``none``), ``reason`` (why this method, or why none), ``error`` (None, or why nothing
    can be planned: :func:`plan` and :func:`configured` raise it), ``tools`` (paths of grubby,
    grub2-editenv, grub2-mkconfig, update-grub, rpm or None) and ``grub_cfg`` (the grub.cfg a
    regeneration writes, or None). A missing tool does not raise here; :func:`plan` and
    :func:`configured` do, naming the package.

    BLS entries alone do not make the method ``grubby``: GRUB reads them only when the grub.cfg
    it loads runs ``blscfg``, and grub2-mkconfig writes that only with GRUB_ENABLE_BLSCFG=true
    (the two checks leapp-repository makes, ``systemfacts.py`` and ``libraries/grub.py``).
    With BLS switched off the kernel lines of grub.cfg are what boots, so the method is
    ``grub2-mkconfig``. GRUB_ENABLE_BLSCFG=true with a grub.cfg without ``blscfg`` (not
    regenerated since) is an ``error``: neither way would reach the kernel.
    """
    release = _os_release(root)
    os_id = release.get('ID', '').lower()
    version_id = release.get('VERSION_ID', '')
    major = _major(version_id)
    family = _family(os_id, release.get('ID_LIKE', '').lower(), major)
    efi = os.path.isdir(root_path(root, '/sys/firmware/efi'))
    bls = bool(_bls_entries(root))
    tools = {
        'grubby': which('grubby'),
        'grub2_editenv': which('grub2-editenv'),
        'grub2_mkconfig': which('grub2-mkconfig'),
        'update_grub': which('update-grub'),
        'rpm': which('rpm'),
    }
    facts = {
        'os_id': os_id, 'version_id': version_id, 'major': major, 'family': family,
        'efi': efi, 'bls': bls, 'bls_enabled': None, 'tools': tools, 'grub_cfg': None, 'method': 'none',
        'reason': '', 'error': None,
    }
    release_name = '%s %s' % (os_id or 'unknown', version_id or '(no VERSION_ID)')
    if family.startswith('el'):
        return _detect_el(root, facts, release_name)
    if family == 'debian':
        return _detect_debian(root, facts, release_name)
    facts['reason'] = ('release %s is not supported: the boot loader is not managed here '
                       '(supported: RHEL 7/8/9 and rebuilds, Debian, Ubuntu)' % release_name)
    return facts


def _detect_el(root, facts, release_name):
    """:func:`detect` on RHEL and rebuilds: grubby where GRUB reads the BLS entries, else grub2-mkconfig."""
    family, efi, bls = facts['family'], facts['efi'], facts['bls']
    grub2_cfg = '/boot/grub2/grub.cfg'
    # RHEL 9's EFI grub.cfg is a stub that loads /boot/grub2/grub.cfg; RHEL 7's and 8's is real.
    target = _efi_grub_cfg(root, facts['os_id']) if efi and family != 'el9' else grub2_cfg
    cfg_text = host_text(root, target)
    enabled = _blscfg_enabled(read_grub_default(root))
    facts['bls_enabled'] = enabled
    reads_bls = _cfg_loads_bls(cfg_text)
    if bls and ((cfg_text is not None and reads_bls and enabled is not False)
                or (cfg_text is None and enabled)):
        facts['grub_cfg'] = target if cfg_text is not None else None
        facts['method'] = 'grubby'
        extra = {'el8': ', the grubenv kernelopts (new kernels)',
                 'el9': ', /etc/kernel/cmdline (new kernels)'}.get(family, '')
        facts['reason'] = ('%s with BLS entries in %s that GRUB reads (%s): grubby --update-kernel=ALL%s '
                           'and GRUB_CMDLINE_LINUX in %s'
                           % (release_name, BLS_DIR, 'blscfg in %s' % target if cfg_text is not None
                              else 'GRUB_ENABLE_BLSCFG=true', extra, GRUB_DEFAULT))
        if not facts['tools']['grubby']:
            facts['reason'] += '; grubby is not installed (package grubby)'
        return facts
    if bls and cfg_text is not None and not reads_bls and enabled:
        facts['reason'] = ('%s has GRUB_ENABLE_BLSCFG=true, but %s has no blscfg: GRUB boots the menu '
                           'entries of %s, not the BLS entries in %s' % (GRUB_DEFAULT, target, target, BLS_DIR))
        facts['error'] = (
            '%s. grub.cfg was not regenerated after BLS was switched on, so neither grubby nor '
            'grub2-mkconfig alone would reach the kernel. Regenerate it (grub2-mkconfig -o %s) to boot the BLS '
            'entries, or set GRUB_ENABLE_BLSCFG=false in %s to keep the menu, then run again.'
            % (facts['reason'], target, GRUB_DEFAULT))
        facts['method'] = 'grub2-mkconfig'
        facts['grub_cfg'] = target
        return facts
    return _detect_el_mkconfig(root, facts, release_name, target, cfg_text, reads_bls)


def _detect_el_mkconfig(root, facts, release_name, target, cfg_text, reads_bls):
    """:func:`detect` on RHEL without BLS entries GRUB reads: grub2-mkconfig, or none without a grub.cfg."""
    efi = facts['efi']
    usable = cfg_text is not None or (efi and os.path.isdir(os.path.dirname(root_path(root, target))))
    if not usable:
        facts['reason'] = ('the boot loader is not managed here: no %s (%s boot; direct kernel '
                           'boot or another boot loader?)' % (target, 'UEFI' if efi else 'BIOS'))
        return facts
    facts['grub_cfg'] = target
    facts['method'] = 'grub2-mkconfig'
    if facts['bls']:
        why = ('its BLS entries are not read: %s has no blscfg' % target if not reads_bls else
               'GRUB_ENABLE_BLSCFG=false, so %s is regenerated as a menu without the BLS entries' % target)
        facts['reason'] = ('%s with %s: GRUB_CMDLINE_LINUX in %s, then grub2-mkconfig -o %s (%s)'
                           % (release_name, why, GRUB_DEFAULT, target, 'UEFI' if efi else 'BIOS'))
    else:
        facts['reason'] = ('%s without BLS entries: GRUB_CMDLINE_LINUX in %s, then grub2-mkconfig '
                           '-o %s (%s)' % (release_name, GRUB_DEFAULT, target, 'UEFI' if efi else 'BIOS'))
    return facts


def _detect_debian(root, facts, release_name):
    """:func:`detect` on Debian and Ubuntu: update-grub."""
    target = '/boot/grub/grub.cfg'
    if not os.path.exists(root_path(root, target)):
        facts['reason'] = ('the boot loader is not managed here: no %s (direct kernel boot?)' % target)
    elif not facts['tools']['update_grub']:
        facts['reason'] = ('the boot loader is not managed here: %s exists but update-grub was not '
                           'found (install grub2-common with grub-pc or grub-efi)' % target)
    else:
        facts['grub_cfg'] = target
        facts['method'] = 'update-grub'
        facts['reason'] = ('%s: GRUB_CMDLINE_LINUX in %s, then update-grub (writes %s)'
                           % (release_name, GRUB_DEFAULT, target))
    return facts


# -- grubby, as each release's package behaves ---------------------------------------------------
#
# /usr/sbin/grubby on RHEL 8 and 9 is the grubby-bls shell script (Source1 of the grubby
# package; its history is Fedora dist-git, mirrored as fedora-riscv/grubby, and the RHEL 8
# grubby.spec changelog names what each el8 release took). It has no --version option (its
# getopt call rejects it), so the version comes from ``rpm -q grubby``. With
# ``--update-kernel=ALL`` and ``--args``/``--remove-args`` (function update_bls_fragment):
#
# * every release: each entry's ``options`` line is rewritten with the edited arguments, its
#   ``$kernelopts`` expanded; up to 8.40-41 every ``$var`` is expanded (commit 290786e,
#   el8 8.40-34), from 8.40-42 only ``$kernelopts`` (commit 2b59d13), so tuned's
#   ``$tuned_params`` survives. The expansion takes grubenv's value, or keeps ``$var`` when empty.
# * 8.40-37 (RHEL 8.1, commit 6abeb6f): grubenv ``kernelopts`` is edited too, and entries
#   whose options hold ``$kernelopts`` are meant to be left alone; 8.40-37's test for that is
#   always true, so it rewrites them all (fixed in 8.40-38, commit 08153fc). An entry whose new
#   options equal the new kernelopts is set back to ``$kernelopts``; Fedora dropped that
#   (commit 12e62c4, 8.40-45) but no el8 changelog entry does, so el8 keeps it here.
# * 8.40-39 (commits 8c7d866, f24781c): GRUB_CMDLINE_LINUX in /etc/default/grub is replaced by
#   a sed on every line that starts with GRUB_CMDLINE_LINUX (GRUB_CMDLINE_LINUX_DEFAULT too),
#   with the value as the shell sources it: quoting, comments and ``$VAR`` references are lost.
#   ``--no-etc-grub-update`` skips it. The option handler shifts twice, so the option must be
#   the last one given (then the extra shift takes getopt's ``--``; anywhere else it swallows
#   the next option and grubby fails).
# * 8.40-41 (commit 770392f): /etc/default/grub and kernelopts only when they hold a value.
# * 8.40-47 (RHEL 8.7, "Backport fedora/rhel9 initial cmdline population"; commits 1faea2d and
#   0da23ad) and RHEL 9: /etc/kernel/cmdline is rewritten, and created from the oldest entry's
#   options when missing. 8.40-43 to -46 wrote it in ways that were reverted; not modelled.
#
# The argument editing (update_args) removes ``name`` and ``name=...`` words with sed, one pass
# per argument, and joins the words with single spaces (an unquoted echo).

GRUBBY_SOURCE = 'grubby-bls (Fedora dist-git grubby, fedora-riscv/grubby; RHEL 8 grubby.spec changelog)'


def _natural_key(name):
    return [(0, int(part), '') if part.isdigit() else (1, 0, part) for part in re.findall(r'\d+|\D+', name)]


def _bls_files(root):
    """``(target path, text)`` of each BLS entry, in grubby's order (``sort -Vr`` of the names)."""
    found = []
    for full in _bls_entries(root):
        path = BLS_DIR + '/' + os.path.basename(full)
        found.append((path, host_text(root, path) or ''))
    found.sort(key=lambda item: _natural_key(os.path.basename(item[0])[:-len('.conf')]), reverse=True)
    return found


def bls_options(text):
    """The ``options`` value of a BLS entry (the first such line), or ''."""
    for line in (text or '').splitlines():
        m = re.match(r'^options[ \t]+(.*)$', line)
        if m:
            return m.group(1).strip()
        if line.strip() == 'options':
            return ''
    return ''


def _replace_lines(text, prefix, replacement):
    """``text`` with every line that starts with ``prefix`` replaced (its line ending kept), as grubby's sed does."""
    out = []
    for line in (text or '').splitlines(True):
        if line.startswith(prefix):
            line = replacement + line[len(line.rstrip('\r\n')):]
        out.append(line)
    return ''.join(out)


def _set_bls_options(text, value):
    """The entry with every line that starts with ``options`` replaced, as grubby's sed does."""
    return _replace_lines(text, 'options', 'options %s' % value)


def grubby_version(facts, run):
    """``VERSION-RELEASE`` of the installed grubby package (``8.40-42.el8``), or None."""
    rpm = facts['tools'].get('rpm')
    if not rpm:
        return None
    rc, out, _err = run([rpm, '-q', '--qf', '%{VERSION}-%{RELEASE}\\n', 'grubby'])
    out = (out or '').strip()
    if rc != 0 or not re.match(r'^\d+(\.\d+)*-\d+', out):
        return None
    return out.splitlines()[0]


def grubby_model(version, family):
    """What ``grubby --update-kernel=ALL --args`` edits at ``version`` (see the notes above).

    Returns a dict: ``version``, ``known`` (False: not a modelled release, the newest model of
    the family is assumed), ``expand_all``, ``kernelopts``, ``kernelopts_if_set``,
    ``skip_kernelopts_entries``, ``reset_to_kernelopts``, ``etc_default_grub``,
    ``no_etc_grub_update`` (the option exists) and ``kernel_cmdline``.
    """
    m = re.match(r'^(\d+)\.(\d+)-(\d+)(?:\.(el\d+))?', version or '')
    dist = m.group(4) if m and m.group(4) else family
    release = int(m.group(3)) if m else None
    if dist == 'el9' or (release is None and family == 'el9'):
        return {'version': version, 'known': release is not None, 'expand_all': False, 'kernelopts': True,
                'kernelopts_if_set': True, 'skip_kernelopts_entries': True, 'reset_to_kernelopts': False,
                'etc_default_grub': True, 'no_etc_grub_update': True, 'kernel_cmdline': True}
    if release is None:
        release = 48
    known = m is not None and m.group(1, 2) == ('8', '40') and not 43 <= release <= 46
    return {'version': version, 'known': known, 'expand_all': release < 42, 'kernelopts': release >= 37,
            'kernelopts_if_set': release >= 41, 'skip_kernelopts_entries': release >= 38,
            'reset_to_kernelopts': release >= 37, 'etc_default_grub': release >= 39,
            'no_etc_grub_update': release >= 39, 'kernel_cmdline': release >= 47}


def _strip_words(words, name, exact):
    """One sed pass of update_args: drop ``name`` (and ``name=...`` unless ``exact``) words.

    The pattern needs a blank (or the start) before the word. A bare ``name`` match takes the
    blank after it too, so the word right after it cannot match in the same pass (sed goes on
    after the match): of two adjacent bare ``name`` words the second stays. A ``name=value``
    match ends at the value and leaves the blank. With ``exact`` (an argument with ``=``) only
    the first match goes.
    """
    out, blocked, done = [], False, False
    for word in words:
        bare = word == name
        hit = bare or (not exact and word.startswith(name + '='))
        if hit and not blocked and not done:
            blocked = bare
            done = exact
            continue
        out.append(word)
        blocked = False
    return out


def grubby_update_args(args, remove, add):
    """The argument string grubby's update_args makes of ``args``; ``remove``/``add`` are lists."""
    words = (args or '').split()
    for arg in remove:
        words = _strip_words(words, arg, '=' in arg)
    for arg in add:
        words = _strip_words(words, arg.split('=', 1)[0], False)
    return ' '.join(words + list(add))


def grubby_expand(options, env, expand_all):
    """An entry's options as grubby reads them: ``$kernelopts`` (or, with ``expand_all``, every
    ``$name`` word) replaced by its grubenv value when that is not empty; words joined by one space."""
    out = []
    for word in (options or '').split():
        if word.startswith('$') and (expand_all or word == '$kernelopts') and env.get(word[1:]):
            out.append(' '.join(env[word[1:]].split()))
        else:
            out.append(word)
    return ' '.join(out)


def grub_expand(options, env):
    """An entry's options as GRUB boots them: every whole-word ``$name``/``${name}`` replaced by its
    grubenv value ('' when unset). Returns ``(expanded, [(name, value)])``."""
    out, refs = [], []
    for word in split_args(options):
        m = re.match(r'^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$', word)
        if m:
            name = m.group(1) or m.group(2)
            refs.append((name, env.get(name, '')))
            if env.get(name, '').strip():
                out.append(env[name].strip())
        else:
            out.append(word)
    return ' '.join(out), refs


def grubby_predict(model, state, remove, add):
    """The files and grubenv ``kernelopts`` after ``grubby --update-kernel=ALL`` at ``model``.

    ``state``: ``entries`` ([(path, text)] in grubby's order), ``env`` (grubenv dict),
    ``grub_default`` (text or None), ``kernel_cmdline`` (text or None), ``no_etc`` (the option
    is passed). Returns a new dict of the same keys, ``kernelopts`` (new value, or None when
    grubby leaves it) and ``grub_default_value`` (what the shell sources, for information).
    """
    env = state['env']
    new = dict(state)
    new['kernelopts'] = None
    if model['etc_default_grub'] and not state.get('no_etc') and state.get('grub_default') is not None:
        old = ' '.join(grub_cmdline_linux(state['grub_default']).split())
        if old or not model['kernelopts_if_set']:
            value = grubby_update_args(old, remove, add)
            new['grub_default'] = _replace_lines(state['grub_default'], 'GRUB_CMDLINE_LINUX',
                                                 'GRUB_CMDLINE_LINUX="%s"' % value)
    new_kernelopts = None
    if model['kernelopts']:
        old = env.get('kernelopts', '')
        if old or not model['kernelopts_if_set']:
            new_kernelopts = grubby_update_args(old, remove, add)
            new['kernelopts'] = new_kernelopts
    entries = []
    for path, text in state['entries']:
        options = bls_options(text)
        has_kernelopts = '$kernelopts' in options.split()
        if has_kernelopts and model['skip_kernelopts_entries']:
            entries.append((path, text))
            continue
        args = grubby_update_args(grubby_expand(options, env, model['expand_all']), remove, add)
        if model['reset_to_kernelopts'] and new_kernelopts is not None and args == new_kernelopts:
            args = '$kernelopts'
        entries.append((path, _set_bls_options(text, args)))
    new['entries'] = entries
    if model['kernel_cmdline']:
        text = state.get('kernel_cmdline')
        if text is None and state['entries']:
            text = grubby_expand(bls_options(state['entries'][-1][1]), env, model['expand_all']) + '\n'
        if text is not None:
            first = (text.splitlines() or [''])[0]
            first = re.sub(r'\\(.)', r'\1', first)      # read without -r drops the backslashes
            new['kernel_cmdline'] = grubby_update_args(first, remove, add) + '\n'
    return new


# -- reading the persisted configuration ------------------------------------------------------

def _run(run, argv):
    rc, out, err = run(argv)
    if rc != 0:
        raise BootloaderError('%s failed (rc=%s): %s' % (' '.join(argv), rc, (err or out or '').strip()))
    return out or ''


def _require(facts, tool, command, package):
    path = facts['tools'].get(tool)
    if not path:
        raise BootloaderError(
            '%s is not installed, but this host (%s %s, BLS=%s) needs it to set the kernel command '
            'line. Install the %s package (yum/dnf install %s), then run again.'
            % (command, facts.get('os_id'), facts.get('version_id'), facts.get('bls'), package, package))
    return path


def _grubenv(facts, run):
    """The grubenv variables (``grub2-editenv - list``) as a dict; {} without grub2-editenv."""
    if facts['family'] == 'el8':
        _require(facts, 'grub2_editenv', 'grub2-editenv', 'grub2-tools-minimal')
    tool = facts['tools'].get('grub2_editenv')
    if not tool:
        return {}
    env = {}
    for line in _run(run, [tool, '-', 'list']).splitlines():
        if '=' in line and not line.startswith('#'):
            name, value = line.split('=', 1)
            env[name.strip()] = value
    return env


def _grubby_entries(facts, run):
    """The entries of ``grubby --info=ALL``: dicts with index, kernel, args (as printed), root."""
    grubby = _require(facts, 'grubby', 'grubby', 'grubby')
    entries, current = [], None
    for line in _run(run, [grubby, '--info=ALL']).splitlines():
        if '=' not in line:
            continue
        name, value = line.split('=', 1)
        name = name.strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if name == 'index':
            current = {'index': value}
            entries.append(current)
        elif current is not None:
            current[name] = value
    return [e for e in entries if 'kernel' in e and 'args' in e]


def _expand(args, env):
    """``args`` with whole-argument ``$name``/``${name}`` grubenv references expanded.

    Returns ``(expanded, refs)`` where refs lists the ``(name, value)`` of each expansion.
    """
    out, refs = [], []
    for arg in split_args(args):
        m = re.match(r'^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$', arg)
        name = m and (m.group(1) or m.group(2))
        if name and name in env:
            out.append(env[name])
            refs.append((name, env[name]))
        else:
            out.append(arg)
    return ' '.join(out), refs


def _entry_label(entry, seen):
    label = 'grubby:%s' % entry['kernel']
    if label in seen:
        label = '%s (index %s)' % (label, entry['index'])
    seen.add(label)
    return label


def _boot_entries(root, facts, run, env):
    """The kernels grubby lists, each with what GRUB boots it with.

    Dicts: ``label``, ``path`` (the BLS file, or None), ``options`` (its raw options line,
    or grubby's printed args without a file), ``expanded`` (the options with grubenv
    variables expanded as GRUB expands them) and ``refs`` (``[(name, value)]`` of the
    variables). The raw file is read because ``grubby --info`` prints the options expanded
    differently per release (every ``$var`` up to 8.40-41, only ``$kernelopts`` from 8.40-42),
    which would hide tuned's ``$tuned_params`` on RHEL 8.0 to 8.4.
    """
    found, seen = [], set()
    for entry in _grubby_entries(facts, run):
        path = None
        ident = entry.get('id')
        if ident and '/' not in ident and os.path.isfile(root_path(root, '%s/%s.conf' % (BLS_DIR, ident))):
            path = '%s/%s.conf' % (BLS_DIR, ident)
        if path:
            options = bls_options(host_text(root, path))
            expanded, refs = grub_expand(options, env)
        else:
            options = entry['args']
            expanded, refs = _expand(options, env)
        found.append({'label': _entry_label(entry, seen), 'path': path, 'options': options,
                      'expanded': expanded, 'refs': refs})
    return found


def _grub_cfg_entries(text):
    """``(kernel, args)`` of the linux/linux16/linuxefi lines of a grub.cfg.

    When the file has the ``10_linux`` section markers only that section is read, so a
    hand-written entry in 40_custom does not force a regeneration on every run.
    """
    lines = (text or '').splitlines()
    begin = '### BEGIN /etc/grub.d/10_linux ###'
    if begin in [line.strip() for line in lines]:
        picked, inside = [], False
        for line in lines:
            if line.strip() == begin:
                inside = True
            elif line.strip().startswith('### END /etc/grub.d/10_linux'):
                inside = False
            elif inside:
                picked.append(line)
        lines = picked
    found = []
    for line in lines:
        m = re.match(r'^\s*(?:linux|linux16|linuxefi)\s+(\S+)(.*)$', line)
        if m:
            found.append((m.group(1), m.group(2).strip()))
    return found


def _cfg_value(entries, key):
    values = set(get_arg(args, key) for _kernel, args in entries)
    return values.pop() if len(values) == 1 else None


def _default_grub_value(text, key):
    """The value grub-mkconfig puts on normal entries: GRUB_CMDLINE_LINUX then _DEFAULT."""
    combined = '%s %s' % (grub_cmdline_linux(text), grub_cmdline_linux(text, 'GRUB_CMDLINE_LINUX_DEFAULT'))
    return get_arg(combined, key), combined


def _dropins(root):
    """``(target path, text)`` of each /etc/default/grub.d/*.cfg in the order grub sources them."""
    found = []
    for path in sorted(glob.glob(os.path.join(root_path(root, GRUB_DEFAULT_D), '*.cfg'))):
        target = '%s/%s' % (GRUB_DEFAULT_D, os.path.basename(path))
        found.append((target, host_text(root, target) or ''))
    return found


def configured(root, facts, key, run):
    """The persisted value of ``key`` in each place the method uses: ``{source: value or None}``.

    Sources: ``/etc/default/grub`` (GRUB_CMDLINE_LINUX with _DEFAULT after it), for
    ``grubby`` one ``grubby:<kernel>`` per entry (grubenv references expanded), ``kernelopts``
    when grubenv has it and ``/etc/kernel/cmdline`` when it exists; for the grub.cfg methods
    the grub.cfg (the value when every kernel line agrees, else None) and the grub.d
    drop-ins that mention the key. ``{}`` for the method ``none``.
    """
    result = {}
    method = facts['method']
    if method == 'none':
        return result
    if facts.get('error'):
        raise BootloaderError(facts['error'])
    text = read_grub_default(root)
    if text is not None:
        result[GRUB_DEFAULT] = _default_grub_value(text, key)[0]
    if method == 'grubby':
        env = _grubenv(facts, run)
        for entry in _boot_entries(root, facts, run, env):
            result[entry['label']] = get_arg(entry['expanded'], key)
        if 'kernelopts' in env:
            result['kernelopts'] = get_arg(env['kernelopts'], key)
        cmdline = host_text(root, KERNEL_CMDLINE)
        if cmdline is not None:
            result[KERNEL_CMDLINE] = get_arg(cmdline, key)
        return result
    if method == 'update-grub':
        for path, dtext in _dropins(root):
            combined = '%s %s' % (grub_cmdline_linux(dtext, path=path),
                                  grub_cmdline_linux(dtext, 'GRUB_CMDLINE_LINUX_DEFAULT', path=path))
            if _names(combined, key):
                result[path] = get_arg(combined, key)
    cfg = facts.get('grub_cfg')
    if cfg:
        cfg_text = host_text(root, cfg)
        result[cfg] = _cfg_value(_grub_cfg_entries(cfg_text), key) if cfg_text is not None else None
    return result


def running(root, key):
    """The value of ``key`` on the running kernel's command line (/proc/cmdline), or None."""
    return get_arg(host_text(root, '/proc/cmdline', static=True) or '', key)  # the running kernel's: fixed until it reboots


# -- planning -----------------------------------------------------------------------------------

def _new_plan(facts):
    return {
        'method': facts['method'], 'reason': facts['reason'], 'files': [], 'commands': [],
        'changed': False, 'args_before': {}, 'args_after': {}, 'reboot_required': False,
        'warnings': [], 'predicted': [], 'grubby': None,
    }


def _add_file(result, path, before, after, args_before=None, args_after=None):
    if after == before:
        return
    result['files'].append({'path': path, 'before': before, 'after': after, 'after_commands': False})
    if args_before is not None:
        result['args_before'][path] = split_args(args_before)
        result['args_after'][path] = split_args(args_after)


def _plan_grub_default(root, key, value, result, required, tool_name):
    text = read_grub_default(root)
    if text is None:
        if required:
            raise BootloaderError(
                '%s does not exist, so %s would rebuild every kernel line from defaults and drop '
                'the current arguments. Restore %s (GRUB_CMDLINE_LINUX with the arguments of the '
                'current kernel lines), then run again.' % (GRUB_DEFAULT, tool_name, GRUB_DEFAULT))
        return False
    new = edit_grub_default(text, key, value)
    # GRUB_CMDLINE_LINUX_DEFAULT comes after GRUB_CMDLINE_LINUX on the kernel line and would win.
    new = edit_grub_default(new, key, None, var='GRUB_CMDLINE_LINUX_DEFAULT')
    _add_file(result, GRUB_DEFAULT, text, new,
              _default_grub_value(text, key)[1], _default_grub_value(new, key)[1])
    return new != text


def _plan_dropins(root, key, value, result):
    changed = False
    for path, text in _dropins(root):
        shell = _ShellFile(text, path)
        index = shell.last('GRUB_CMDLINE_LINUX')
        if index is not None and value is not None:
            refs = [name for _s, _e, name in _references(shell.check(index))]
            if 'GRUB_CMDLINE_LINUX' not in refs:
                raise BootloaderError(
                    '%s line %d sets GRUB_CMDLINE_LINUX without $GRUB_CMDLINE_LINUX, so it replaces '
                    'the value from %s and %s cannot persist there. Make it '
                    'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX ..." or move its arguments to %s, '
                    'then run again.' % (path, shell.records[index].number, GRUB_DEFAULT,
                                         format_arg(key, value), GRUB_DEFAULT))
        new = edit_grub_default(text, key, None, path=path)
        new = edit_grub_default(new, key, None, var='GRUB_CMDLINE_LINUX_DEFAULT', path=path)
        if new != text:
            _add_file(result, path, text, new)
            changed = True
    return changed


def _plan_grub_cfg(root, facts, key, value, result, tool_argv, edited):
    cfg = facts['grub_cfg']
    cfg_text = host_text(root, cfg)
    entries = _grub_cfg_entries(cfg_text)
    stale = [(kernel, args) for kernel, args in entries if get_arg(args, key) != value]
    if edited or cfg_text is None or stale:
        result['commands'].append(tool_argv)
        for kernel, args in stale:
            label = '%s:%s' % (cfg, kernel)
            result['args_before'][label] = split_args(args)
            result['args_after'][label] = split_args(set_arg(args, key, value))


def _foreign_vars(label, refs, key, value):
    """Messages for grubenv variables other than kernelopts that carry ``key`` (tuned's
    ``$tuned_params``) with a value other than ``value``."""
    messages = []
    for name, var_value in refs:
        if name == 'kernelopts' or not _names(var_value, key):
            continue
        current = get_arg(var_value, key)
        if value is None or current != value:
            messages.append(
                'the grubenv variable $%s used by %s sets %s=%s, which overrides the argument this '
                'module manages. It usually comes from the cmdline option of a tuned [bootloader] '
                'section: remove %s from the tuned profile%s.'
                % (name, label, key, current, key, '' if value is None else ' (or make it %s)' % format_arg(key, value)))
    return messages


def _plan_grubby(root, facts, key, value, run, result):
    """grubby for the entries, then what grubby does besides, planned around (see grubby_model).

    grubby runs only when an entry does not boot with the value. Its other edits are taken
    into account instead of fought: ``--no-etc-grub-update`` (last, see the notes) where the
    release has it, so /etc/default/grub keeps its quoting and this module edits it alone;
    grubenv ``kernelopts`` and /etc/kernel/cmdline are set to this module's exact text after
    grubby ran (only when grubby's result differs), so that a backout restores them byte for
    byte. The entry files grubby rewrites are predicted in ``predicted``.
    """
    env = _grubenv(facts, run)
    entries = _boot_entries(root, facts, run, env)
    grubby = facts['tools']['grubby']
    version = grubby_version(facts, run)
    model = grubby_model(version, facts['family'])
    result['grubby'] = {'version': version, 'modelled': model['known'], 'source': GRUBBY_SOURCE}
    if not model['known']:
        result['warnings'].append(
            'the grubby package version %s is not one this module models (rpm -q grubby); it plans as for '
            'the newest %s grubby and rewrites /etc/default/grub and /etc/kernel/cmdline after grubby runs.'
            % (version or '(unknown)', facts['family']))
    spellings, needs_update = _grubby_spellings(entries, env, key, value, result)
    other_spellings = [name for name in spellings if name != key]
    remove, add = [], []
    if value is None and spellings:
        remove = spellings
    elif value is not None and (needs_update or other_spellings):
        remove, add = other_spellings, [format_arg(key, value)]
    runs = bool(remove or add)
    no_etc = model['known'] and model['no_etc_grub_update']
    if runs:
        argv = [grubby, '--update-kernel=ALL']
        if remove:
            argv.append('--remove-args=%s' % ' '.join(remove))
        if add:
            argv.append('--args=%s' % ' '.join(add))
        if no_etc:
            argv.append('--no-etc-grub-update')
        result['commands'].append(argv)

    cmdline = host_text(root, KERNEL_CMDLINE)
    bls = _bls_files(root)
    state = {'entries': bls, 'env': env, 'grub_default': read_grub_default(root), 'kernel_cmdline': cmdline,
             'no_etc': no_etc}
    after = grubby_predict(model, state, remove, add) if runs else dict(state, kernelopts=None)
    _grubby_entries_after(facts, entries, bls, env, after, key, value, result)
    _grubby_kernel_cmdline(facts, model, bls, env, after, cmdline, runs, key, value, result)
    _plan_grub_default(root, key, value, result, required=False, tool_name='grub2-mkconfig')
    _grubby_grub_default(root, model, runs, no_etc, after, result)


def _grubby_grub_default(root, model, runs, no_etc, after, result):
    """/etc/default/grub written after grubby where grubby rewrites it too."""
    grub_default = read_grub_default(root)
    if runs and not no_etc and model['etc_default_grub'] and grub_default is not None:
        # Without --no-etc-grub-update grubby rewrites the file too: write this module's text after it.
        wanted = grub_default
        for change in result['files']:
            if change['path'] == GRUB_DEFAULT:
                wanted = change['after']
                change['after_commands'] = True
                break
        else:
            if after['grub_default'] != grub_default:
                result['files'].append({'path': GRUB_DEFAULT, 'before': grub_default, 'after': wanted,
                                        'after_commands': True})


def _grubby_spellings(entries, env, key, value, result):
    """(spellings of ``key`` in the entries, whether an entry does not boot with ``value``)."""
    spellings, needs_update = [], False
    own_env = dict((name, env[name]) for name in ('kernelopts',) if name in env)
    for entry in entries:
        label = entry['label']
        expanded = entry['expanded']
        foreign = _foreign_vars(label, entry['refs'], key, value)
        if foreign and value is not None:
            raise BootloaderError(foreign[0] + ' Then run again.')
        if foreign:
            # Removing: what tuned sets is not ours to remove; plan from the entry's own args.
            result['warnings'].extend(foreign)
            expanded = (grub_expand(entry['options'], own_env) if entry['path']
                        else _expand(entry['options'], own_env))[0]
        for name in _names(expanded, key):
            if name not in spellings:
                spellings.append(name)
        # Only the effective value counts: a duplicate with the same value is left alone, or no
        # run would converge.
        if get_arg(expanded, key) != value:
            needs_update = True
    return spellings, needs_update


def _grubby_entries_after(facts, entries, bls, env, after, key, value, result):
    """The entry files grubby rewrites, what GRUB boots each kernel with afterwards, and grubenv kernelopts."""
    new_texts = dict(after['entries'])
    env_after = dict(env)
    wanted_kernelopts = set_arg(env['kernelopts'], key, value) if 'kernelopts' in env else None
    if wanted_kernelopts is not None:
        env_after['kernelopts'] = wanted_kernelopts
    for path, text in bls:
        if new_texts.get(path, text) != text:
            result['predicted'].append({'path': path, 'before': text, 'after': new_texts[path]})
    for entry in entries:
        if entry['path']:
            new_options = bls_options(new_texts.get(entry['path']))
            new_expanded = grub_expand(new_options, env_after)[0]
        else:
            new_expanded = set_arg(entry['expanded'], key, value)
        if new_expanded != entry['expanded']:
            result['args_before'][entry['label']] = split_args(entry['expanded'])
            result['args_after'][entry['label']] = split_args(new_expanded)

    if wanted_kernelopts is not None:
        current = after['kernelopts'] if after['kernelopts'] is not None else env['kernelopts']
        if current != wanted_kernelopts:
            result['commands'].append([facts['tools']['grub2_editenv'], '-', 'set',
                                       'kernelopts=%s' % wanted_kernelopts])
        if wanted_kernelopts != env['kernelopts']:
            result['args_before']['kernelopts'] = split_args(env['kernelopts'])
            result['args_after']['kernelopts'] = split_args(wanted_kernelopts)


def _grubby_kernel_cmdline(facts, model, bls, env, after, cmdline, runs, key, value, result):
    """/etc/kernel/cmdline set to this module's exact text (after grubby, which may rewrite it)."""
    base = cmdline
    if base is None and model['kernel_cmdline'] and (runs or value is not None) and bls:
        # grubby creates it from the oldest entry; this module writes the same when grubby does not run.
        base = grubby_expand(bls_options(bls[-1][1]), env, model['expand_all']) + '\n'
    if base is not None:
        wanted = set_arg(base, key, value)
        rewritten = runs and model['kernel_cmdline'] and after['kernel_cmdline'] != wanted
        if wanted != cmdline or rewritten:
            result['files'].append({'path': KERNEL_CMDLINE, 'before': cmdline, 'after': wanted,
                                    'after_commands': True})
            if wanted != cmdline:
                result['args_before'][KERNEL_CMDLINE] = split_args(cmdline)
                result['args_after'][KERNEL_CMDLINE] = split_args(wanted)
    elif facts['family'] == 'el9' and value is not None:
        result['warnings'].append(
            '%s does not exist: kernels installed from now on take their arguments from the '
            'running command line, which lacks %s until the next reboot. Reboot before installing '
            'a kernel, or create %s with the full command line.' % (KERNEL_CMDLINE, format_arg(key, value),
                                                                    KERNEL_CMDLINE))


def plan(root, facts, key, value, run):
    """What to change so that ``key=value`` (``value`` None: no ``key``) persists across reboots.

    Returns a dict: ``files`` (``[{path, before, after, after_commands}]``: target paths,
    ``before`` None for a file that does not exist; the files without ``after_commands`` are
    written first, then the commands run in order, then the files with it), ``commands`` (argv
    lists), ``predicted`` (``[{path, before, after}]``: the files the commands rewrite, as they
    will read afterwards; for the diff, not to write), ``changed``, ``method``, ``reason``,
    ``args_before`` and ``args_after`` (``{source: [args]}`` for each place whose arguments
    change: a file, a ``grubby:<kernel>`` entry, ``kernelopts`` or ``<grub.cfg>:<kernel>``),
    ``reboot_required`` (the value after the plan differs from /proc/cmdline), ``grubby``
    (None, or the grubby package version and whether it is modelled) and ``warnings``.

    After the files and commands, every file in ``files`` and ``predicted`` reads as its
    ``after``. The plan is derived from the persisted configuration only. Raises
    BootloaderError, with nothing planned, when a needed tool is missing, a file cannot be
    parsed or the boot configuration is inconsistent (``facts['error']``).
    """
    result = _new_plan(facts)
    method = facts['method']
    if method == 'none':
        return result
    if facts.get('error'):
        raise BootloaderError(facts['error'])
    if method == 'grubby':
        _plan_grubby(root, facts, key, value, run, result)
    elif method == 'grub2-mkconfig':
        tool = _require(facts, 'grub2_mkconfig', 'grub2-mkconfig', 'grub2-tools')
        edited = _plan_grub_default(root, key, value, result, required=True, tool_name='grub2-mkconfig')
        _plan_grub_cfg(root, facts, key, value, result, [tool, '-o', facts['grub_cfg']], edited)
    elif method == 'update-grub':
        tool = facts['tools'].get('update_grub')
        if not tool:
            raise BootloaderError('update-grub was not found. Install grub2-common, then run again.')
        edited = _plan_grub_default(root, key, value, result, required=True, tool_name='update-grub')
        edited = _plan_dropins(root, key, value, result) or edited
        _plan_grub_cfg(root, facts, key, value, result, [tool], edited)
    else:
        raise BootloaderError('unknown boot loader method %r' % method)
    result['changed'] = bool(result['files'] or result['commands'])
    result['reboot_required'] = running(root, key) != value
    return result
