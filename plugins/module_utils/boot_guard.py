# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""AEM's start guard: a systemd drop-in for AEM's unit whose ``ExecStartPre`` puts every device of the
collection's udev rules at its persisted read-ahead before AEM starts, and writes this boot's readers record.

Why: the kernel copies a device's read-ahead into each file when it is opened. A unit that sets the repository's
device to 4096 KiB at boot (tuned's ``throughput-performance`` before the child profile is back, the first boot
after an upgrade) makes AEM open its tar files at 4096, and a value that comes back to 32 later does not reach
them. The guard runs in AEM's own start, after udev and tuned, so AEM opens its files at the persisted value on
every boot, with no Ansible on the host.

What is installed (owned by read_ahead, backed out by ``state=absent``):
- ``/etc/systemd/system/<unit>.d/90-aemops-read-ahead.conf``: ``After=`` udev and tuned, and
  ``ExecStartPre=-+/bin/sh -c ...``: ``-`` so that AEM starts even when the guard fails (the audit then names
  AEM, measured), ``+`` so that it runs as root outside the unit's sandbox whatever ``User=`` AEM runs as.
  The shell finds a Python at each start (platform-python, python3, python2, python), so a major upgrade
  that replaces the interpreter does not break it.
- ``/usr/local/lib/aemops-os-tuning/<hash>/``: a copy of the few module_utils this needs (:data:`MODULES`, plain
  Python without Ansible) and the launcher ``pre-start.py``, in a directory named by the hash of its content:
  written whole under a temporary name and renamed, then the drop-in is switched to it, then the old one removed.

The rule at AEM's start (:func:`settle`): for every device whose stable identity matches a rule of the rules file
(the same match read_ahead decides with, ``blockdev.stable_id_report``), a value that differs is set, under the
device's read-ahead lock, and the record (readers_record) gets a new entry for it: since now, at the value, with
every process alive then listed as possibly stale (their files may have been opened at the old value); AEM,
started after, is fresh. A device already at its value is left to the record and the boot rule as they are.

systemd: the ``+`` prefix is read from systemd 231 on (systemd NEWS, "CHANGES WITH 231"); older systemd (RHEL 7's
219) logs such a line as "not absolute" and ignores it, and its ``PermissionsStartOnly=`` would also run the unit's
other ExecStartPre/Post, ExecReload and ExecStop lines as root. The guard is not installed there (a warning says so).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import importlib
import os
import re
import shutil
import sys
import time

from ansible_collections.aemops.os_tuning.plugins.module_utils import (
    blockdev, compliance, files, readers_record, readers_scan, runstate, udev_rules)

UNIT_DIR = '/etc/systemd/system'
DROPIN_NAME = '90-aemops-read-ahead.conf'
LIB_DIR = '/usr/local/lib/aemops-os-tuning'
LAUNCHER = 'pre-start.py'
PACKAGE = 'ansible_collections.aemops.os_tuning.plugins.module_utils'
# What the launcher imports, with everything they import: test_boot_guard checks that this is the closure.
MODULES = ('aem', 'blockdev', 'boot_guard', 'compliance', 'ebs', 'files', 'readers_record', 'readers_scan',
           'runstate', 'udev_rules')
# Tried in this order at each start: RHEL 8's platform-python first, then what RHEL 7, 9 and 10 have.
INTERPRETERS = ('/usr/libexec/platform-python', '/usr/bin/python3', '/usr/bin/python2', '/usr/bin/python')
# systemd NEWS, CHANGES WITH 231: ExecStart= and friends accept the "+" prefix (full privileges).
PLUS_PREFIX_SINCE = 231
# At AEM's start, the seconds to wait for a device's read-ahead lock (a sweep or a run holding it) before going on.
LOCK_TIMEOUT = 10
_UNIT_RE = re.compile(r'^[A-Za-z0-9:_.\\@-]+\Z')


def unit_name(unit):
    """The unit's full name, as systemctl completes it: ``aem`` is ``aem.service``."""
    return unit if not unit or unit.endswith('.service') else unit + '.service'


def unit_problem(unit):
    """Why ``unit`` cannot be guarded, or None."""
    text = isinstance(unit, (str, type(u'')))
    full = unit_name(unit) if text else unit
    if not text or not _UNIT_RE.match(unit) or len(full) > 255 or not full.endswith('.service'):
        return ('aem_service %r is not the name of a systemd service unit (letters, digits and ":_.\\@-", as aem or '
                'aem.service)' % (unit,))
    if not unit.endswith('.service') and '.' in unit:
        return 'aem_service %s is not a service unit; give the .service AEM runs as' % unit
    if full.endswith('@.service'):
        return 'aem_service %s is a template; give the instance AEM runs as (for example aem@author.service)' % unit
    return None


def dropin_path(unit):
    return '%s/%s.d/%s' % (UNIT_DIR, unit_name(unit), DROPIN_NAME)


# -- what is installed ---------------------------------------------------------------------------

def sources():
    """{module name: its source text}, read from the collection this runs from: through each module's loader
    (a zip under Ansible), else from its file."""
    out = {}
    for name in MODULES:
        full = PACKAGE + '.' + name
        module = sys.modules.get(full) or importlib.import_module(full)
        loader = getattr(module, '__loader__', None)
        text = loader.get_source(full) if loader is not None and hasattr(loader, 'get_source') else None
        if text is None:
            path = module.__file__[:-1] if module.__file__.endswith('.pyc') else module.__file__
            with open(path, 'rb') as f:
                text = f.read()
        out[name] = text.decode('utf-8') if isinstance(text, bytes) else text
    return out


def launcher_text(unit):
    lines = files.managed_header('read_ahead', 'Run by the ExecStartPre of %s (%s): it sets the persisted '
                                 'read-ahead before AEM opens its files.' % (unit, dropin_path(unit)))
    return '\n'.join(lines + [
        'import sys',
        'from %s import boot_guard' % PACKAGE,
        'sys.exit(boot_guard.main(sys.argv[1:]))', ''])


def tree(unit, texts):
    """{path relative to the library directory: text} of everything installed beside the drop-in."""
    out = {LAUNCHER: launcher_text(unit)}
    parts = PACKAGE.split('.')
    for depth in range(1, len(parts) + 1):
        out['/'.join(parts[:depth] + ['__init__.py'])] = ''
    for name, text in texts.items():
        out['/'.join(parts + [name + '.py'])] = text
    return out


def tree_hash(files_by_path):
    digest = hashlib.sha256()
    for path in sorted(files_by_path):
        digest.update(('%s\0%s\0' % (path, files_by_path[path])).encode('utf-8'))
    return digest.hexdigest()[:16]


def dropin_text(unit, lib):
    """The drop-in: ordered after udev and tuned; the shell finds a Python at each start ($$ is systemd's "$")."""
    finds = ' '.join(INTERPRETERS)
    script = ('for p in %s; do if [ -x "$$p" ]; then exec "$$p" -E -s -B %s/%s; fi; done; '
              'echo "aemops-os-tuning: no Python found (%s): the read-ahead was not set before this start" >&2; '
              'exit 1' % (finds, lib, LAUNCHER, finds))
    return '\n'.join(files.managed_header('read_ahead', 'AEM opens its files at the persisted read-ahead after '
                                          'every boot (rules: %s).' % udev_rules.RULES_FILE) + [
        '[Unit]',
        'After=systemd-udev-trigger.service systemd-udev-settle.service tuned.service local-fs.target',
        '',
        '[Service]',
        "ExecStartPre=-+/bin/sh -c '%s'" % script, ''])


# -- on the host: what is there, the plan, the change --------------------------------------------

def _safe(st, kind):
    """Why a directory (``kind`` 'dir') or file of the guard cannot be trusted by root (runstate's one rule of each),
    or None."""
    found = runstate.dir_problem(st) if kind == 'dir' else runstate.file_problem(st)
    return found[1] if found else None


def lib_problem(root, lib, wanted):
    """Why the library directory ``lib`` (a host path) is not exactly ``wanted`` ({relative path: text}), or None."""
    full = files.root_path(root, lib)
    seen = set()
    for top, dirs, names in os.walk(full):
        problem = _safe(os.lstat(top), 'dir')
        if problem:
            return '%s/%s %s' % (lib, os.path.relpath(top, full), problem)
        names = names + [d for d in dirs if os.path.islink(os.path.join(top, d))]  # a link is never descended
        for name in names:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, full)
            st = os.lstat(path)
            problem = _safe(st, 'file') or (None if rel in wanted else 'is not one the collection installs')
            if problem is None and files.read_bytes(path).decode('utf-8', 'replace') != wanted[rel]:
                problem = 'differs from what this version of the collection installs'
            if problem:
                return '%s/%s %s' % (lib, rel, problem)
            seen.add(rel)
    missing = sorted(set(wanted) - seen)
    return ('%s/%s is missing' % (lib, missing[0])) if missing else None


def installed(root):
    """({unit: drop-in text} of the collection's drop-ins, [names in LIB_DIR])."""
    dropins = {}
    base = files.root_path(root, UNIT_DIR)
    for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = os.path.join(base, entry, DROPIN_NAME)
        if entry.endswith('.d') and os.path.isfile(path) and not os.path.islink(path):
            text = files.read_owned(path, dropin_path(entry[:-2]))
            if files.is_managed(text):
                dropins[entry[:-2]] = text
    lib = files.root_path(root, LIB_DIR)
    return dropins, sorted(os.listdir(lib)) if os.path.isdir(lib) and not os.path.islink(lib) else []


def plan(root, unit, present, version, texts=None):
    """What the run does to the guard: None when ``unit`` is None (left as it is). Raises files.FileError when a
    path on the way cannot be trusted. ``version``: systemd's major version (None: unknown)."""
    if unit is None:
        return None
    unit = unit_name(unit)
    dropins, libs = installed(root)
    out = {'unit': unit, 'path': dropin_path(unit), 'before': dropins.get(unit), 'after': None, 'lib': None,
           'files': {}, 'write_lib': False, 'remove': sorted(u for u in dropins if u != unit or not present),
           'remove_libs': list(libs), 'warning': None}
    if present and unit and (version is None or version < PLUS_PREFIX_SINCE):
        out['warning'] = ('systemd %s has no "+" prefix for ExecStartPre (from %d): the start guard for %s is not '
                          'installed; a boot that leaves AEM at another read-ahead is named by the audit, measured.'
                          % (version or '(version unknown)', PLUS_PREFIX_SINCE, unit))
    elif present and unit:
        wanted = tree(unit, texts or sources())
        name = tree_hash(wanted)
        out.update(lib=LIB_DIR + '/' + name, files=wanted, remove_libs=[n for n in libs if n != name])
        out['after'] = dropin_text(unit, out['lib'])
        out['write_lib'] = name not in libs or lib_problem(root, out['lib'], wanted) is not None
        out['remove'] = sorted(u for u in dropins if u != unit)
        runstate.check_above(root, out['lib'] + '/' + LAUNCHER)
        for top, _dirs, _names in os.walk(files.root_path(root, out['lib'])):
            problem = _safe(os.lstat(top), 'dir')
            if problem:
                raise files.FileError('%s/%s %s: it was not left so by aemops.os_tuning, so nothing in it is used or '
                                      'replaced. Check who changed it, then remove %s and run again.'
                                      % (out['lib'], os.path.relpath(top, files.root_path(root, out['lib'])),
                                         problem, out['lib']))
        runstate.check_above(root, out['path'])
        if os.path.isdir(os.path.dirname(files.root_path(root, out['path']))):
            files.check_owned_target(files.root_path(root, out['path']), out['path'], check_only=True)
    out['changed'] = bool(out['before'] != out['after'] or out['write_lib'] or out['remove'] or out['remove_libs'])
    return out


def _write_lib(root, lib, wanted):
    """The library directory whole: written under a temporary name, then renamed into place (a damaged one of
    the same name is moved aside first and removed)."""
    full = files.root_path(root, lib)
    base = os.path.dirname(full)
    for missing in runstate.check_above(root, lib + '/' + LAUNCHER):
        os.mkdir(files.root_path(root, missing), 0o755)
    tmp = '%s.tmp-%d' % (full, os.getpid())
    if os.path.lexists(tmp):
        shutil.rmtree(tmp)
    for rel, text in sorted(wanted.items()):
        path = os.path.join(tmp, rel)
        if not os.path.isdir(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path), 0o755)
        files.atomic_write(path, text, mode=0o644)
    for top, _dirs, _names in os.walk(tmp):
        os.chmod(top, 0o755)
    if os.path.lexists(full):
        aside = '%s.old-%d' % (full, os.getpid())
        os.rename(full, aside)
        shutil.rmtree(aside)
    os.rename(tmp, full)
    return base


def apply(root, guard, write, run, systemctl):
    """Carry out :func:`plan`'s ``guard``: the library, then the drop-in (which switches to it), then what is no
    longer used; ``systemctl daemon-reload`` when a drop-in changed. Returns the paths changed."""
    changed = []
    if guard['write_lib']:
        _write_lib(root, guard['lib'], guard['files'])
        changed.append(guard['lib'])
    if guard['after'] is not None and guard['after'] != guard['before']:
        for missing in runstate.check_above(root, guard['path']):
            os.mkdir(files.root_path(root, missing), 0o755)
        write(files.root_path(root, guard['path']), guard['after'])
        changed.append(guard['path'])
    for unit in guard['remove'] + ([guard['unit']] if guard['after'] is None and guard['before'] else []):
        if files.remove_file(files.root_path(root, dropin_path(unit)), prune_parent=True):
            changed.append(dropin_path(unit))
    for name in guard['remove_libs']:
        shutil.rmtree(files.root_path(root, LIB_DIR + '/' + name))
        changed.append(LIB_DIR + '/' + name)
    if guard['after'] is None:
        try:
            os.rmdir(files.root_path(root, LIB_DIR))
        except OSError:
            pass  # absent, or not empty: something else is in it, and it stays
    if any(p.endswith(DROPIN_NAME) for p in changed) and systemctl:
        run([systemctl, 'daemon-reload'], check_rc=True)
    return changed


def state(root, unit):
    """The guard as ``tuning_facts`` reports it: {'unit', 'path', 'state': ok | missing | changed | absent,
    'problem'}. ``absent``: no unit given and none of ours installed."""
    unit = unit_name(unit)
    try:
        dropins, libs = installed(root)
    except (files.FileError, IOError, OSError) as e:
        return {'unit': unit, 'path': dropin_path(unit) if unit else None, 'state': 'changed', 'problem': str(e)}
    if not unit:
        others = sorted(dropins)
        return {'unit': None, 'path': None, 'state': 'absent' if not others else 'changed',
                'problem': ('drop-ins for %s are installed but no AEM unit was given' % ', '.join(others))
                if others else None}
    out = {'unit': unit, 'path': dropin_path(unit), 'state': 'ok', 'problem': None}
    wanted = tree(unit, sources())
    lib = LIB_DIR + '/' + tree_hash(wanted)
    if dropins.get(unit) is None:
        out.update(state='missing', problem='%s is not installed' % out['path'])
    elif dropins[unit] != dropin_text(unit, lib):
        out.update(state='changed', problem='%s differs from what this version of the collection installs'
                   % out['path'])
    else:
        problem = lib_problem(root, lib, wanted) if lib.rsplit('/', 1)[1] in libs else '%s is missing' % lib
        if problem:
            out.update(state='changed', problem=problem)
    return out


def facts(root, unit, version):
    """tuning_facts' ``start_guard``: :func:`state`, with ``systemd`` (the version); ``unsupported`` where systemd is
    older than PLUS_PREFIX_SINCE (read_ahead installs none there)."""
    out = state(root, unit)
    out['systemd'] = version
    if unit and (version is None or version < PLUS_PREFIX_SINCE):
        out.update(state='unsupported', problem='systemd %s has no "+" prefix for ExecStartPre' % (version or '?'))
    return out


def misses(guard):
    """The compliance misses of tuning_facts' ``start_guard``: a guard of AEM's unit that is missing or changed."""
    if not guard or not guard['unit'] or guard['state'] not in ('missing', 'changed'):
        return []
    return [compliance.miss(guard['unit'], 'start_guard', '%s: AEM can start at another read-ahead after a boot. '
                            'An apply run of the role (or read_ahead with aem_service=%s) installs it again.'
                            % (guard['problem'], guard['unit']), unit=guard['unit'])]


# -- at AEM's start ------------------------------------------------------------------------------

def persisted(root, rules_path=udev_rules.RULES_FILE):
    """{kernel name: KiB} of every device that matches a rule of the rules file, by the identity read_ahead uses.
    Raises files.FileError (a file root must not trust) or udev_rules.RulesFileError (a damaged file)."""
    full = files.root_path(root, rules_path)
    try:
        problem = _safe(os.lstat(full), 'file')
    except OSError:
        return {}  # no rules file: nothing is persisted
    if problem:
        raise files.FileError('%s %s: it is not obeyed' % (rules_path, problem))
    text = files.read_owned(full, rules_path)
    rules = udev_rules.parse(text, rules_path)[0]
    out = {}
    for name in blockdev.whole_disks(root):
        match = udev_rules.match_clause(blockdev.stable_id_report(root, name)[0])
        if match in rules and blockdev.read_ahead_kb(root, name) is not None:
            out[name] = rules[match]
    return out


def alive(root):
    """[[pid, start ticks, UNSCANNED, 0]] for every process now: what it holds may have been opened at the old
    value. Reads only /proc/PID/stat (no link is followed)."""
    proc = files.root_path(root, readers_scan.PROC)
    out = []
    for name in sorted(os.listdir(proc)):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            text = readers_scan.proc_text(os.path.join(proc, name, 'stat'))
            start = readers_scan.parse_stat(text)[1] if text else None
        except (IOError, OSError, ValueError, IndexError):
            start = None
        out.append([int(name), readers_record.ANY_START if start is None else start, readers_record.UNSCANNED, 0])
    return out


def settle(root='/', rules_path=udev_rules.RULES_FILE, now=None):
    """Set every persisted device that differs, each under its read-ahead lock; then record what changed.
    Returns {'set': [{name, before_kb, kb}], 'problems': [text]}. Never raises for one device."""
    report = {'set': [], 'problems': []}
    try:
        wanted = persisted(root, rules_path)
    except (files.FileError, udev_rules.RulesFileError, IOError, OSError) as e:
        report['problems'].append('%s: %s' % (rules_path, e))
        return report
    for name, kb in sorted(wanted.items()):
        problem = _set_one(root, name, kb, report)
        if problem:
            report['problems'].append(problem)
    if report['set']:
        problem = _record(root, report['set'], time.time() if now is None else now)
        if problem:
            report['problems'].append(problem)
    return report


def _set_one(root, name, kb, report):
    majmin = blockdev.majmin(root, name)
    try:
        with runstate.locked(root, runstate.device_lock_name(majmin), 'the read-ahead of block device %s' % majmin,
                             timeout=LOCK_TIMEOUT):
            before = blockdev.read_ahead_kb(root, name)
            if before == kb:
                return None
            after = blockdev.write_read_ahead_kb(root, name, kb)
    except (runstate.FileError, blockdev.BlockDeviceError, IOError, OSError) as e:
        return '%s: %s' % (name, e)
    report['set'].append({'name': name, 'majmin': majmin, 'before_kb': before, 'kb': after})
    return None if after == kb else '%s reads %s KiB after writing %d' % (name, after, kb)


def _record(root, changed, now):
    """This boot's record: a new entry for each device set now; the entries of other devices on this boot kept."""
    boot_id = readers_record.read_boot_id(root)
    stale = alive(root)

    def change(record):
        record = readers_record.this_boot(record, boot_id)
        for dev in changed:
            record['devices'][dev['majmin']] = {'name': dev['name'], 'kb': dev['kb'], 'since': now, 'stale': stale,
                                                'seq': readers_scan.disk_sequence(root, dev['name'])}
        return record
    try:
        readers_record.update_record(root, change)
    except (runstate.FileError, IOError, OSError) as e:
        return 'the readers record was not written (%s): the next audit judges by the boot rule and measures' % e
    return None


def main(argv, out=None):
    """The launcher's entry: one line per device set, one per problem (the journal keeps them). 0, or 1 on a
    problem (the drop-in's "-" lets AEM start anyway). ``--root DIR`` reads and writes a host tree under DIR."""
    out = out or sys.stdout
    root = argv[1] if argv[:1] == ['--root'] and len(argv) > 1 else '/'
    report = settle(root)
    for dev in report['set']:
        out.write('aemops-os-tuning: %s read-ahead %s -> %s KiB (persisted in %s), before the service starts\n'
                  % (dev['name'], dev['before_kb'], dev['kb'], udev_rules.RULES_FILE))
    for problem in report['problems']:
        out.write('aemops-os-tuning: %s\n' % problem)
    out.flush()
    return 1 if report['problems'] else 0
