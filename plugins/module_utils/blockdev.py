# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Block-device topology from sysfs, /proc/self/mountinfo and the udev database.

Every function takes ``root`` (``/`` on a real host) so that tests can run them on a fake
tree. Nothing here writes except :func:`write_read_ahead_kb`.

Terms used throughout:

* *kernel name*: ``nvme1n1``, ``sda2``, ``dm-3``, ``md127``, ``loop0``.
* *governing device*: the device whose ``queue/read_ahead_kb`` decides how much the page
  cache reads ahead for a filesystem. For a filesystem on a partition it is the whole disk
  (partitions have no ``queue/``); for one on LVM, dm-crypt, multipath or md RAID it is the
  ``dm-N``/``mdN`` device itself, not the disks beneath it.
* *stable id*: a udev match that names the same device after a reboot, when ``nvme1n1``
  may have become ``nvme2n1``: the NVMe serial (the EBS volume id on AWS), ``ID_SERIAL`` or
  ``ID_WWN``, ``DM_UUID``/``DM_NAME``, ``MD_UUID``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import stat

from ansible_collections.aemops.os_tuning.plugins.module_utils.files import (
    describe_os_error, read_bytes, read_text, root_path, to_native_text,
)
from ansible_collections.aemops.os_tuning.plugins.module_utils.udev_rules import value_problem

# Filesystems that have no block device behind them. A path on one of them cannot be tuned.
NON_BLOCK_FSTYPES = frozenset((
    'tmpfs', 'ramfs', 'devtmpfs', 'proc', 'sysfs', 'cgroup', 'cgroup2', 'overlay', 'aufs',
    'nfs', 'nfs4', 'cifs', 'smb3', 'smbfs', '9p', 'virtiofs', 'ceph', 'glusterfs', 'autofs',
    'fuse', 'efivarfs', 'securityfs', 'debugfs', 'tracefs', 'mqueue', 'hugetlbfs', 'pstore',
    'bpf', 'configfs', 'binfmt_misc', 'rpc_pipefs', 'nsfs', 'devpts', 'lustre', 'gpfs',
))

MAX_SYMLINK_HOPS = 40


class BlockDeviceError(Exception):
    """A target cannot be resolved or tuned. The message names the target and the fix."""


class NotBlockBackedError(BlockDeviceError):
    """A path lives on a filesystem with no block device (tmpfs, NFS, overlayfs, ...)."""


class NoSuchDeviceError(BlockDeviceError):
    """The device or path does not exist."""


class LvsFailed(BlockDeviceError):
    """lvs exited with an error (lvs_read_ahead)."""


def _once(root, key, read):
    """``read()``, remembered in ``root`` when it keeps a memo (the run's host.Host, the one model of the host):
    udev_db, mounts, stable_id_report, dm_info and majmin read their source once per run through it. A plain root
    path reads every time."""
    memo = getattr(root, 'memo', None)
    if memo is None:
        return read()
    if key not in memo:
        memo[key] = read()
    return memo[key]


def device_path(root, name):
    """The device path the modules report: ``/dev/mapper/<name>`` for a named dm device, else ``/dev/<name>``."""
    dm = dm_info(root, name)
    return '/dev/mapper/%s' % dm['name'] if dm is not None and dm['name'] else '/dev/%s' % name


def _sys(root, *parts):
    return root_path(root, os.path.join('/sys', *parts))


def _read_attr(path):
    """A sysfs attribute as stripped text, or None when it is missing or unreadable (never an exception)."""
    try:
        text = read_text(path)
    except (IOError, OSError):
        return None
    return None if text is None else text.strip()


def read_attr_checked(path):
    """(value, problem) for a sysfs attribute whose exact bytes matter (a udev match value).

    ``value`` is the attribute without its trailing newline, as native text, or None;
    ``problem`` says why it cannot be used: unreadable (the kernel returns ENAMETOOLONG for a
    loop backing file longer than PATH_MAX), or not UTF-8.
    """
    try:
        data = read_bytes(path)
    except (IOError, OSError) as e:
        return None, 'it cannot be read (%s)' % describe_os_error(e)
    if data is None:
        return None, None
    if data.endswith(b'\n'):
        data = data[:-1]
    try:
        data.decode('utf-8')
    except UnicodeDecodeError:
        return to_native_text(data), 'it is not valid UTF-8'
    return to_native_text(data), None


def _names(path):
    """(sorted entries of directory ``path`` that are UTF-8, [raw names that are not]): listed as bytes."""
    try:
        raw = os.listdir(path.encode('utf-8') if not isinstance(path, bytes) else path)
    except (OSError, UnicodeError):
        return [], []
    good, bad = [], []
    for entry in sorted(raw):
        try:
            text = entry.decode('utf-8')
        except UnicodeDecodeError:
            bad.append(entry)
            continue
        good.append(text if str is not bytes else entry)
    return good, bad


def printable(raw):
    """A printable, ASCII rendering of a raw name (bytes) for messages and facts."""
    out = []
    for byte in bytearray(raw):
        out.append(chr(byte) if 32 <= byte < 127 and byte != 92 else '\\x%02x' % byte)
    return ''.join(out)


def exists(root, name):
    return os.path.isdir(_sys(root, 'class/block', name))


def device_dir(root, name):
    """The device's real sysfs directory (partitions sit inside their disk's)."""
    return os.path.realpath(_sys(root, 'class/block', name))


def majmin(root, name):
    return _once(root, ('majmin', name), lambda: _read_attr(os.path.join(device_dir(root, name), 'dev')))


def is_partition(root, name):
    return os.path.exists(os.path.join(device_dir(root, name), 'partition'))


def parent_disk(root, name):
    """The whole disk that holds partition ``name``."""
    return os.path.basename(os.path.dirname(device_dir(root, name)))


def whole_disk(root, name):
    return parent_disk(root, name) if is_partition(root, name) else name


def _list(path):
    return _names(path)[0]


def slaves(root, name):
    return _list(os.path.join(device_dir(root, name), 'slaves'))


def holders(root, name):
    return _list(os.path.join(device_dir(root, name), 'holders'))


def partitions(root, name):
    """Partitions of disk ``name`` (sub-directories that carry a ``partition`` file)."""
    base = device_dir(root, name)
    return [p for p in _list(base) if os.path.exists(os.path.join(base, p, 'partition'))]


def dm_info(root, name):
    info = _once(root, ('dm_info', name), lambda: _read_dm_info(root, name))
    return dict(info) if info is not None else None


def _read_dm_info(root, name):
    base = os.path.join(device_dir(root, name), 'dm')
    if not os.path.isdir(base):
        return None
    return {'name': _read_attr(os.path.join(base, 'name')) or '',
            'uuid': _read_attr(os.path.join(base, 'uuid')) or ''}


def udev_db(root, name):
    """Properties (``E:``) and symlinks (``S:``) of a device from the udev database."""
    props, links, _usec = _once(root, ('udev_db', name), lambda: _read_udev_db(root, name))
    return dict(props), list(links)


def udev_initialized(root, name):
    """When udev first handled the device on this boot (the database's ``I:`` line, USEC_INITIALIZED:
    CLOCK_MONOTONIC microseconds, so seconds since boot here), or None."""
    return _once(root, ('udev_db', name), lambda: _read_udev_db(root, name))[2]


def tuned_properties(root, name):
    """The properties tuned searches ``devices_udev_regex`` in: pyudev's ``Device.properties``
    (tuned/hardware/device_matcher_udev.py, sorted from v2.16.0), which libudev builds from the kernel's
    uevent values (``DEVPATH`` and ``SUBSYSTEM`` from the sysfs path, and the ``uevent`` file: ``MAJOR``,
    ``MINOR``, ``DEVNAME`` as ``/dev/<name>``, ``DEVTYPE``) and the udev database's properties. The database
    alone lacks the uevent values (a Xen vbd on RHEL 7 has nothing else)."""
    devdir = device_dir(root, name)
    props = {'DEVPATH': '/' + os.path.relpath(devdir, os.path.realpath(_sys(root))), 'SUBSYSTEM': 'block'}
    for line in (_read_attr(os.path.join(devdir, 'uevent')) or '').splitlines():
        if '=' in line:
            key, value = line.split('=', 1)
            props[key] = '/dev/' + value if key == 'DEVNAME' else value
    props.update(udev_db(root, name)[0])
    return props


def _read_udev_db(root, name):
    props, links, usec = {}, [], None
    mm = majmin(root, name)
    text = read_text(root_path(root, '/run/udev/data/b%s' % mm)) if mm else None
    for line in (text or '').splitlines():
        if line.startswith('E:') and '=' in line:
            key, value = line[2:].split('=', 1)
            props[key] = value
        elif line.startswith('S:'):
            links.append(line[2:])
        elif line.startswith('I:') and line[2:].strip().isdigit():
            usec = int(line[2:].strip()) / 1e6
    return props, links, usec


def device_type(root, name):
    """One of ``part``, ``lvm``, ``crypt``, ``mpath``, ``dm``, ``md``, ``loop``, ``nvme``, ``disk``."""
    if is_partition(root, name):
        return 'part'
    dm = dm_info(root, name)
    if dm is not None:
        uuid = dm['uuid']
        if uuid.startswith('LVM-'):
            return 'lvm'
        if uuid.startswith('CRYPT-'):
            return 'crypt'
        if uuid.startswith('mpath-'):
            return 'mpath'
        return 'dm'
    if os.path.isdir(os.path.join(device_dir(root, name), 'md')):
        return 'md'
    if name.startswith('loop'):
        return 'loop'
    if re.match(r'^nvme\d+n\d+$', name):
        return 'nvme'
    return 'disk'


def nvme_attr(root, name, attr):
    """An attribute of the NVMe controller behind namespace ``name`` (``serial``, ``model``), read once per run."""
    return _once(root, ('nvme_attr', name, attr),
                 lambda: _read_attr(os.path.join(device_dir(root, name), 'device', attr)))


def lvm_names(root, name):
    """(vg, lv) of an LVM logical volume, from the udev database or the dm name."""
    props, _links = udev_db(root, name)
    if props.get('DM_VG_NAME') and props.get('DM_LV_NAME'):
        return props['DM_VG_NAME'], props['DM_LV_NAME']
    dm = dm_info(root, name) or {'name': ''}
    # dm names are "<vg>-<lv>" with every "-" inside either name doubled: read left to right,
    # skipping "--" pairs, and split at the first single "-" (as LVM does).
    text = dm['name']
    i = 0
    while i < len(text):
        if text[i] == '-':
            if text[i + 1:i + 2] == '-':
                i += 2
                continue
            vg, lv = text[:i], text[i + 1:]
            if vg and lv:
                return vg.replace('--', '-'), lv.replace('--', '-')
            break
        i += 1
    return None, None


def xen_vbd(root, name):
    """The xenbus node of a Xen virtual block device (``device/vbd/51712`` for xvda), or None.

    blkfront disks (``xvd*``, Xen-based EC2: m4, c4, r4, t2) sit under a ``vbd-N`` device on
    the ``xen`` bus, which carries ``nodename``; N is the virtual device number from the
    domain configuration (202 * 256 + 16 * disk for xvdX), so it is stable across boots.
    """
    device = os.path.join(device_dir(root, name), 'device')
    subsystem = os.path.join(device, 'subsystem')
    if not os.path.islink(subsystem) or os.path.basename(os.readlink(subsystem)) != 'xen':
        return None
    node = _read_attr(os.path.join(device, 'nodename'))
    return node if node and node.startswith('device/vbd/') else None


def stable_id_candidates(root, name):
    """Every udev identity of ``name``, best first: a list of (ident dict or None, problem or None)."""
    kind = device_type(root, name)
    props, _links = udev_db(root, name)
    out = []

    def add(key, value, serial=None, problem=None):
        if value is None and problem is None:
            return
        ident = {'key': key, 'value': value, 'serial': serial}
        out.append((ident, problem or (value_problem(value) if value is not None else None)))

    if kind in ('lvm', 'crypt', 'mpath', 'dm'):
        dm = dm_info(root, name)
        add('ENV{DM_UUID}', props.get('DM_UUID') or dm['uuid'] or None)
        add('ENV{DM_NAME}', props.get('DM_NAME') or dm['name'] or None)
        return out
    if kind == 'md':
        add('ENV{MD_UUID}', props.get('MD_UUID') or None)
        return out
    if kind == 'loop':
        backing, problem = read_attr_checked(os.path.join(device_dir(root, name), 'loop', 'backing_file'))
        if backing is not None or problem is not None:
            add('ATTR{loop/backing_file}', backing, problem=problem)
        return out
    serial = props.get('ID_SERIAL_SHORT')
    if kind == 'nvme':
        # The controller's serial (the EBS volume id on AWS), matched as a sysfs attribute: the
        # udev properties built from it differ between releases (upstream systemd appends the
        # namespace to NVMe ID_SERIAL from v254, PR #26814; whether RHEL 9's 252 backports it is
        # not verified), and a rule written on RHEL 7 must still match on RHEL 8, 9 or 10.
        # Only when the controller has a serial file (upstream Linux exports it from commit 779ff7561709,
        # 2016; RHEL 7 and 8 kernels not verified here): ATTRS{serial} cannot match without one, so the
        # next identity is used then, never ID_SERIAL_SHORT in its place.
        nvme_serial = nvme_attr(root, name, 'serial')
        if nvme_serial:
            add('ATTRS{serial}', nvme_serial, nvme_serial)
    add('ENV{ID_SERIAL}', props.get('ID_SERIAL') or None, serial)
    add('ENV{ID_WWN}', props.get('ID_WWN') or None, serial)
    own_serial = _read_attr(os.path.join(device_dir(root, name), 'serial'))
    if own_serial:
        add('ATTR{serial}', own_serial, own_serial)
    # Xen blkfront (xvd*): no serial, no ID_SERIAL or ID_WWN. systemd's path_id gives no ID_PATH
    # for them either: v219 (RHEL 7) src/udev/udev-builtin-path_id.c prepends "xen-<sysname>"
    # (xen-vbd-51712) in its xen branch and sets supported_parent, but not supported_transport,
    # so the block-device check at its end drops the path; Amazon Linux 2 adds ID_PATH back with
    # its own 51-ec2-xen-vbd-devices.rules (amazon-ec2-utils PR #3). The xenbus node name is in
    # sysfs on every release, with or without those rules, so the rule matches that.
    node = xen_vbd(root, name)
    if node:
        add('ATTRS{nodename}', node)
    return out


def stable_id_report(root, name):
    """(the first usable identity or None, [reasons the others were refused])."""
    ident, reasons = _once(root, ('stable_id', name), lambda: _stable_id_report(root, name))
    return (dict(ident) if ident is not None else None), list(reasons)


def _stable_id_report(root, name):
    reasons = []
    for ident, problem in stable_id_candidates(root, name):
        if problem is None:
            return ident, reasons
        reasons.append('%s %s' % (ident['key'], problem))
    return None, reasons


def stable_id(root, name):
    """A udev match for ``name`` that survives a reboot, or None.

    Returns a dict with ``key`` (the udev match key, e.g. ``ENV{ID_SERIAL}``), ``value`` and
    ``serial`` (the bare serial where there is one: the EBS volume id on AWS NVMe). Values
    udev cannot compare literally (udev_rules.value_problem) are skipped for the next identity.
    """
    return stable_id_report(root, name)[0]


TUNED_ID_PROPERTIES = ('DM_UUID', 'MD_UUID', 'ID_SERIAL_SHORT', 'ID_SERIAL', 'ID_WWN', 'DM_NAME', 'ID_PATH')


def tuned_identity(root, name):
    """(udev property, value) by which tuned's ``devices_udev_regex`` can select ``name``, or None.

    tuned matches udev properties only, not sysfs attributes, so this is chosen from the
    device's current udev database entry: the profile is rewritten on every run.
    """
    props = udev_db(root, name)[0]
    for key in TUNED_ID_PROPERTIES:
        if props.get(key):
            return key, props[key]
    if xen_vbd(root, name):
        # tuned matches devices_udev_regex against all of pyudev's properties, DEVPATH included
        # (it comes with every uevent); a Xen vbd's DEVPATH is as stable as its node name.
        real = os.path.realpath(_sys(root, 'class/block', name))
        return 'DEVPATH', '/' + os.path.relpath(real, os.path.realpath(_sys(root)))
    return None


def whole_disks(root):
    """Kernel names of all devices that are not partitions (names that are not UTF-8 are left out)."""
    return whole_disks_checked(root)[0]


def whole_disks_checked(root):
    """(kernel names of the devices that are not partitions, [errors: the entries that cannot be used]).

    /sys/class/block is listed as bytes: a name that is not UTF-8 is reported, never raised,
    and the other devices are still returned.
    """
    good, bad = _names(_sys(root, 'class/block'))
    errors = ['block device %s: its kernel name is not UTF-8; it is left out.' % printable(raw) for raw in bad]
    names = []
    for name in good:
        try:
            if not is_partition(root, name):
                names.append(name)
        except (IOError, OSError, ValueError) as e:
            errors.append('block device %s: %s' % (name, e))
    return names, errors


def read_ahead_kb(root, name):
    """The device's read_ahead_kb now; once per run only in a run that changes nothing (a read-only host.Host),
    because the modules that set it read it again after each write."""
    path = os.path.join(device_dir(root, name), 'queue', 'read_ahead_kb')
    if getattr(root, 'read_only', False):
        value = _once(root, ('read_ahead_kb', name), lambda: _read_attr(path))
    else:
        value = _read_attr(path)
    return int(value) if value and re.match(r'^[0-9]+$', value) else None


def read_ahead_path(root, name):
    return os.path.join(device_dir(root, name), 'queue', 'read_ahead_kb')


def check_writable(root, name):
    """Raise a BlockDeviceError with the fix when ``read_ahead_kb`` of ``name`` cannot be written."""
    path = read_ahead_path(root, name)
    if not os.path.exists(path):
        raise BlockDeviceError('%s has no queue/read_ahead_kb (%s): only whole disks and dm/md devices '
                               'have one.' % (name, path))
    if os.access(path, os.W_OK):
        return
    mount = find_mount(root, '/sys', strict=False)
    if mount and 'ro' in mount['options'].split(','):
        raise BlockDeviceError('cannot set read-ahead inside a container: /sys is mounted read-only, so '
                               '%s cannot be changed. Run this on the host (or a VM), not in a container.'
                               % path)
    if hasattr(os, 'geteuid') and os.geteuid() != 0:
        raise BlockDeviceError('permission denied writing %s: changing read-ahead needs root. '
                               'Use become: true.' % path)
    raise BlockDeviceError('%s is not writable.' % path)


def write_read_ahead_kb(root, name, kb):
    """Set ``read_ahead_kb`` of ``name`` and return the value read back."""
    path = read_ahead_path(root, name)
    try:
        with open(path, 'w') as f:
            f.write('%d\n' % kb)
    except (IOError, OSError) as e:
        if e.errno == errno.EROFS:
            raise BlockDeviceError('cannot set read-ahead inside a container: %s is on a read-only /sys. '
                                   'Run this on the host (or a VM).' % path)
        if e.errno in (errno.EACCES, errno.EPERM):
            raise BlockDeviceError('permission denied writing %s: changing read-ahead needs root. '
                                   'Use become: true.' % path)
        raise BlockDeviceError('writing %d to %s failed: %s' % (kb, path, e))
    return read_ahead_kb(root, name)


# ---------------------------------------------------------------------------------------------
# Mounts and path resolution

def unescape_mount(field):
    return re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), field)


def mounts(root):
    """Parsed /proc/self/mountinfo entries, in mount order."""
    return [dict(e) for e in _once(root, 'mountinfo', lambda: _read_mounts(root))]


def _read_mounts(root):
    return [entry for _id, entry in parse_mountinfo(read_text(root_path(root, '/proc/self/mountinfo')))]


def parse_mountinfo(text):
    """[(mount id, as fdinfo's ``mnt_id`` names it; entry)] of a mountinfo (/proc/self/ or /proc/PID/), in order; an
    entry has ``majmin``, ``mountpoint``, ``options``, ``fstype`` and ``source``."""
    entries = []
    for line in (text or '').splitlines():
        fields = line.split()
        if '-' not in fields or len(fields) < 7 or not fields[0].isdigit():
            continue
        sep = fields.index('-')
        if len(fields) < sep + 3:
            continue
        entries.append((int(fields[0]), {
            'majmin': fields[2],
            'mountpoint': unescape_mount(fields[4]),
            'options': fields[5],
            'fstype': fields[sep + 1],
            'source': unescape_mount(fields[sep + 2]),
        }))
    return entries


def within(path, mountpoint):
    if mountpoint == '/':
        return True
    return path == mountpoint or path.startswith(mountpoint.rstrip('/') + '/')


def _stat_majmin(root, path):
    """``major:minor`` of the filesystem that holds ``path``, on a real host only (None in a fake tree)."""
    if root not in ('/', ''):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return '%d:%d' % (os.major(st.st_dev), os.minor(st.st_dev))


def find_mount(root, path, strict=True):
    """The mount that holds absolute target path ``path``.

    On a real host the filesystem is identified by ``stat(path).st_dev``, which also sees
    through stacked and hidden mounts. Otherwise (fake trees) the longest mount point that
    contains the path wins, the last listed on ties (mountinfo is not in mount order).
    """
    entries = [e for e in mounts(root) if within(path, e['mountpoint'])]
    majmin = _stat_majmin(root, path)
    if majmin is not None and any(e['majmin'] == majmin for e in entries):
        entries = [e for e in entries if e['majmin'] == majmin]
    best = None
    for entry in entries:
        if best is None or len(entry['mountpoint']) >= len(best['mountpoint']):
            best = entry
    if best is None and strict:
        raise BlockDeviceError('no mount found for %s in /proc/self/mountinfo.' % path)
    return best


def mount_points(root, name):
    """Mount points of filesystems on ``name`` itself or on one of its partitions."""
    wanted = set([majmin(root, name)] + [majmin(root, p) for p in partitions(root, name)])
    return sorted(set(e['mountpoint'] for e in mounts(root) if e['majmin'] in wanted))


def real_target_path(root, path):
    """Resolve symlinks in target path ``path``; raise NoSuchDeviceError if it does not exist."""
    full = root_path(root, path)
    try:
        os.stat(full)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise NoSuchDeviceError('path %s does not exist. Create it, or name the device with devices=.' % path)
        raise BlockDeviceError('path %s cannot be resolved: %s.' % (path, describe_os_error(e)))
    real = os.path.realpath(full)
    base = os.path.realpath(root)
    if base != '/':
        real = real[len(base):] or '/'
    return real


def mount_device(root, mount):
    """The kernel name of the block device behind mountinfo entry ``mount``, or None.

    The entry's major:minor when it names a block device; else (btrfs and others report an
    anonymous 0:N device) its /dev source, unless the filesystem has no block device at all.
    """
    if mount['majmin'] and not mount['majmin'].startswith('0:'):
        link = _sys(root, 'dev/block', mount['majmin'])
        if os.path.exists(link):
            return os.path.basename(os.path.realpath(link))
    if mount['source'].startswith('/dev/') and mount['fstype'] not in NON_BLOCK_FSTYPES:
        try:
            return resolve_device(root, mount['source'])
        except BlockDeviceError:
            return None
    return None


def device_for_path(root, path):
    """Return (kernel name, mount entry) of the block device that backs ``path``'s filesystem."""
    real = real_target_path(root, path)
    mount = find_mount(root, real)
    name = mount_device(root, mount)
    if name is None:
        raise NotBlockBackedError(
            '%s is on %s (%s, mounted at %s), which has no block device to tune. Point paths= at the '
            'filesystem that holds the data, or set ignore_missing=true to skip it.'
            % (path, mount['fstype'], mount['source'], mount['mountpoint']))
    return name, mount


def _follow(root, path):
    """Follow symlinks of a target path inside ``root`` (absolute targets are re-rooted)."""
    for _hop in range(MAX_SYMLINK_HOPS):
        full = root_path(root, path)
        if not os.path.islink(full):
            return path
        target = os.readlink(full)
        if not target.startswith('/'):
            target = os.path.normpath(os.path.join(os.path.dirname(path), target))
        path = target
    return path


def _by_dm_name(root, dmname):
    for name in _list(_sys(root, 'class/block')):
        dm = dm_info(root, name)
        if dm is not None and dm['name'] == dmname:
            return name
    return None


def _by_udev_link(root, link):
    for name in _list(_sys(root, 'class/block')):
        if link in udev_db(root, name)[1]:
            return name
    return None


def resolve_device(root, spec):
    """Kernel name for a device given as a kernel name or a /dev path.

    Accepts ``nvme1n1``, ``/dev/sdb``, ``/dev/mapper/vg-lv``, ``/dev/vg/lv`` and
    ``/dev/disk/by-id/...`` links. Raises NoSuchDeviceError with a hint when nothing matches.
    """
    spec = spec.strip()
    if not spec:
        raise NoSuchDeviceError('an empty device name was given.')
    if '/' not in spec:
        if exists(root, spec):
            return spec
        raise NoSuchDeviceError('no such block device: %s (not in /sys/class/block). Check the name with '
                                'lsblk.' % spec)
    if not spec.startswith('/dev/'):
        raise NoSuchDeviceError('device %s must be a kernel name (nvme1n1) or a /dev path; use paths= for '
                                'a filesystem path.' % spec)
    path = os.path.normpath(_follow(root, os.path.normpath(spec)))
    full = root_path(root, path)
    try:
        st = os.stat(full)
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise BlockDeviceError('device %s cannot be resolved: %s.' % (spec, describe_os_error(e)))
        st = None
    if st is not None and stat.S_ISBLK(st.st_mode):
        link = _sys(root, 'dev/block', '%d:%d' % (os.major(st.st_rdev), os.minor(st.st_rdev)))
        if os.path.exists(link):
            return os.path.basename(os.path.realpath(link))
    # Fake trees and hosts without the /dev node: fall back to names and udev links.
    rel = spec[len('/dev/'):]
    candidates = []
    if path.startswith('/dev/') and path.count('/') == 2:
        candidates.append(os.path.basename(path))
    for candidate in candidates:
        if exists(root, candidate):
            return candidate
    if rel.startswith('mapper/'):
        found = _by_dm_name(root, rel[len('mapper/'):])
    else:
        found = _by_udev_link(root, rel)  # disk/by-*, md/<name>, <vg>/<lv>: udev keeps them all
        if not found and rel.count('/') == 1 and not rel.startswith('disk/'):
            vg, lv = rel.split('/')
            found = _by_dm_name(root, '%s-%s' % (vg.replace('-', '--'), lv.replace('-', '--')))
    if found:
        return found
    raise NoSuchDeviceError('no such block device: %s. Check it with lsblk or ls -l %s.' % (spec, spec))


def underlying_disks(root, name):
    """The whole disks beneath a dm/md device (partitions mapped to their disks), in order."""
    result = []
    seen = set()

    def walk(dev):
        below = slaves(root, dev)
        if not below:
            disk = whole_disk(root, dev)
            if disk != name and disk not in seen:
                seen.add(disk)
                result.append(disk)
            return
        for child in below:
            walk(child)

    if slaves(root, name):
        walk(name)
    return result


def describe(root, name):
    """Facts about one device, as returned by the modules."""
    kind = device_type(root, name)
    info = {
        'name': name,
        'path': '/dev/%s' % name,
        'type': kind,
        'majmin': majmin(root, name),
        'read_ahead_kb': read_ahead_kb(root, name) if kind != 'part' else None,
        'mount_points': mount_points(root, name),
        'holders': holders(root, name),
        'slaves': slaves(root, name),
        'stable_id': None,
    }
    ident, refused = stable_id_report(root, name)
    info['stable_id'] = ident
    if refused:
        info['stable_id_refused'] = refused
    if kind == 'loop':
        info['loop_bound'] = os.path.isdir(os.path.join(device_dir(root, name), 'loop'))
    dm = dm_info(root, name)
    if dm is not None:
        info['dm_name'] = dm['name']
        info['dm_uuid'] = dm['uuid']
        info['path'] = '/dev/mapper/%s' % dm['name'] if dm['name'] else info['path']
    if kind == 'lvm':
        vg, lv = lvm_names(root, name)
        info['lvm'] = {'vg': vg, 'lv': lv}
    if kind == 'nvme':
        info['model'] = nvme_attr(root, name, 'model')
    if kind == 'part':
        info['disk'] = parent_disk(root, name)
    return info


# ---------------------------------------------------------------------------------------------
# LVM: the read-ahead stored in VG metadata, applied at every activation.

SECTORS_PER_KB = 2


def kb_to_sectors(kb):
    """KiB to the 512-byte sectors that ``blockdev --setra`` and ``lvchange -r`` take."""
    return kb * SECTORS_PER_KB


def lvs_read_ahead_args(lvs, vg, lv):
    return [lvs, '--noheadings', '--nosuffix', '--units', 's', '-o', 'lv_read_ahead', '%s/%s' % (vg, lv)]


def parse_lvs_read_ahead(output):
    """``auto`` or an int number of sectors from ``lvs -o lv_read_ahead --units s`` output."""
    text = (output or '').strip().lower()
    if text.startswith('auto'):
        return 'auto'
    m = re.match(r'^(\d+)(?:\.\d+)?', text)
    if not m:
        raise BlockDeviceError('cannot parse the LVM read-ahead from lvs output %r.' % output)
    return int(m.group(1))


def lvs_read_ahead(run, lvs, vg, lv, name):
    """The LV's read-ahead in its VG metadata, ``auto`` or sectors, from ``lvs`` (the binary), which is read-only;
    ``run`` is a module's run_command, ``name`` the LV's dm device, for the message. Raises LvsFailed when lvs
    fails, BlockDeviceError when its answer cannot be parsed. The one reader of it: read_ahead plans from it,
    tuning_facts reports it."""
    rc, out, err = run(lvs_read_ahead_args(lvs, vg, lv))
    if rc != 0:
        raise LvsFailed('lvs failed for %s/%s (%s): %s' % (vg, lv, name, err.strip() or out.strip()))
    return parse_lvs_read_ahead(out)


def lvchange_read_ahead_args(lvchange, vg, lv, value):
    """``lvchange --readahead <sectors|auto> vg/lv``."""
    return [lvchange, '--readahead', str(value), '%s/%s' % (vg, lv)]
