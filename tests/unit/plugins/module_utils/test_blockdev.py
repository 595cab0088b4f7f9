# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Unit tests for module_utils/blockdev.py on fake sysfs / udev / mountinfo trees."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat

import pytest

from ansible_collections.aemops.os_tuning.plugins.module_utils import blockdev
from fakehost import FakeHost, nitro_host

LVM_UUID = 'LVM-' + 'x' * 64
CRYPT_UUID = 'CRYPT-LUKS2-0b9c2a4ef1d54a2b9a1f3c1e0d9e8f7a-luks-0b9c2a4e'
MPATH_UUID = 'mpath-3600a098038304437415d4b6a59684a52'
MD_UUID = '3f2c1a4b:5d6e7f80:91a2b3c4:d5e6f708'
EBS_SERIAL = 'vol0123456789abcdef0'
EBS_ID_SERIAL = 'Amazon Elastic Block Store_vol0123456789abcdef0'


# ---------------------------------------------------------------------------------------------
# Small builders: one fake host per topology

@pytest.fixture
def host(tmpdir):
    return FakeHost(tmpdir)


@pytest.fixture
def nitro(tmpdir):
    """Root on nvme0n1p1, LV vg_aem/lv_repo (dm-0) on nvme1n1, mounted at /opt/aem."""
    return nitro_host(tmpdir)


def sata_host(host):
    """sda with sda1 (/boot) and sda2 holding LV vg_data/lv_data (dm-0) at /data."""
    host.add_disk('sda', '8:0', read_ahead_kb=256, udev={'ID_SERIAL': 'QEMU_HARDDISK_QM00001',
                                                         'ID_SERIAL_SHORT': 'QM00001'})
    host.add_partition('sda', 'sda1', '8:1', number=1)
    host.add_partition('sda', 'sda2', '8:2', number=2)
    host.add_lv('dm-0', '253:0', 'vg_data', 'lv_data', slaves=['sda2'], read_ahead_kb=4096)
    host.mount('8:1', '/boot', 'xfs', '/dev/sda1')
    host.mount('253:0', '/data', 'xfs', '/dev/mapper/vg_data-lv_data')
    return host


def raid_host(host):
    """md127 (RAID1) over sdb and sdc."""
    host.add_disk('sdb', '8:16', udev={'ID_SERIAL': 'disk-b'})
    host.add_disk('sdc', '8:32', udev={'ID_SERIAL': 'disk-c'})
    host.add_md('md127', '9:127', MD_UUID, slaves=['sdb', 'sdc'], read_ahead_kb=256)
    host.mount('9:127', '/srv', 'ext4', '/dev/md127')
    return host


def _chmod_ro(path):
    os.chmod(path, 0o444)


def _access_honouring_modes(monkeypatch):
    """Make os.access answer W_OK from the mode bits, as it does for a non-root user.

    Tests may run as root, where os.access ignores modes; this keeps them meaningful there.
    """
    real = os.access

    def access(path, mode):
        if mode & os.W_OK and os.path.exists(path):
            if not os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
                return False
        return real(path, mode)

    monkeypatch.setattr(os, 'access', access)


# ---------------------------------------------------------------------------------------------
# Whole disks and partitions

def test_whole_disk_basics(host):
    host.add_disk('vdb', '252:16', read_ahead_kb=512)
    assert blockdev.exists(host.root, 'vdb')
    assert blockdev.majmin(host.root, 'vdb') == '252:16'
    assert not blockdev.is_partition(host.root, 'vdb')
    assert blockdev.whole_disk(host.root, 'vdb') == 'vdb'
    assert blockdev.device_type(host.root, 'vdb') == 'disk'
    assert blockdev.read_ahead_kb(host.root, 'vdb') == 512


def test_partition_maps_to_parent_disk(nitro):
    assert blockdev.is_partition(nitro.root, 'nvme0n1p1')
    assert blockdev.parent_disk(nitro.root, 'nvme0n1p1') == 'nvme0n1'
    assert blockdev.whole_disk(nitro.root, 'nvme0n1p1') == 'nvme0n1'
    assert blockdev.device_type(nitro.root, 'nvme0n1p1') == 'part'


def test_partition_has_no_queue(nitro):
    assert blockdev.read_ahead_kb(nitro.root, 'nvme0n1p1') is None
    assert not os.path.exists(blockdev.read_ahead_path(nitro.root, 'nvme0n1p1'))


def test_partitions_of_disk(host):
    sata_host(host)
    assert blockdev.partitions(host.root, 'sda') == ['sda1', 'sda2']
    assert blockdev.partitions(host.root, 'dm-0') == []


def test_mount_points_include_partitions(host):
    sata_host(host)
    assert blockdev.mount_points(host.root, 'sda') == ['/boot']
    assert blockdev.mount_points(host.root, 'dm-0') == ['/data']


def test_missing_device(host):
    host.add_disk('sda', '8:0')
    assert not blockdev.exists(host.root, 'sdz')
    assert blockdev.read_ahead_kb(host.root, 'sdz') is None
    assert blockdev.majmin(host.root, 'sdz') is None
    assert blockdev.udev_db(host.root, 'sdz') == ({}, [])
    assert blockdev.slaves(host.root, 'sdz') == []


def test_describe_partition_names_its_disk(nitro):
    info = blockdev.describe(nitro.root, 'nvme0n1p1')
    assert info['type'] == 'part'
    assert info['disk'] == 'nvme0n1'
    assert info['read_ahead_kb'] is None
    assert info['mount_points'] == ['/']


# ---------------------------------------------------------------------------------------------
# LVM, dm-crypt, multipath, md, loop

def test_lvm_on_partition_is_governing_device(host):
    sata_host(host)
    assert blockdev.device_type(host.root, 'dm-0') == 'lvm'
    assert blockdev.slaves(host.root, 'dm-0') == ['sda2']
    assert blockdev.holders(host.root, 'sda2') == ['dm-0']
    assert blockdev.read_ahead_kb(host.root, 'dm-0') == 4096


def test_underlying_disks_of_lv_on_partition_is_the_whole_disk(host):
    sata_host(host)
    assert blockdev.underlying_disks(host.root, 'dm-0') == ['sda']


def test_underlying_disks_of_whole_disk_is_empty(host):
    sata_host(host)
    assert blockdev.underlying_disks(host.root, 'sda') == []


def test_underlying_disks_through_a_stack(host):
    """LV over dm-crypt over a partition: only the whole disk at the bottom."""
    host.add_disk('sdb', '8:16')
    host.add_partition('sdb', 'sdb1', '8:17')
    host.add_dm('dm-1', '253:1', 'luks-data', CRYPT_UUID, slaves=['sdb1'])
    host.add_lv('dm-2', '253:2', 'vg', 'lv', slaves=['dm-1'])
    assert blockdev.underlying_disks(host.root, 'dm-2') == ['sdb']


def test_describe_lv(host):
    sata_host(host)
    info = blockdev.describe(host.root, 'dm-0')
    assert info['type'] == 'lvm'
    assert info['path'] == '/dev/mapper/vg_data-lv_data'
    assert info['dm_name'] == 'vg_data-lv_data'
    assert info['dm_uuid'] == LVM_UUID
    assert info['lvm'] == {'vg': 'vg_data', 'lv': 'lv_data'}
    assert info['slaves'] == ['sda2']
    assert info['read_ahead_kb'] == 4096
    assert info['stable_id'] == {'key': 'ENV{DM_UUID}', 'value': LVM_UUID, 'serial': None}


def test_dm_crypt(host):
    host.add_disk('sdb', '8:16')
    host.add_dm('dm-1', '253:1', 'luks-data', CRYPT_UUID, slaves=['sdb'])
    assert blockdev.device_type(host.root, 'dm-1') == 'crypt'
    assert blockdev.stable_id(host.root, 'dm-1') == {'key': 'ENV{DM_UUID}', 'value': CRYPT_UUID, 'serial': None}
    assert blockdev.underlying_disks(host.root, 'dm-1') == ['sdb']


def test_multipath(host):
    host.add_disk('sdc', '8:32')
    host.add_disk('sdd', '8:48')
    host.add_dm('dm-2', '253:2', 'mpatha', MPATH_UUID, slaves=['sdc', 'sdd'])
    assert blockdev.device_type(host.root, 'dm-2') == 'mpath'
    assert blockdev.stable_id(host.root, 'dm-2')['value'] == MPATH_UUID
    assert blockdev.underlying_disks(host.root, 'dm-2') == ['sdc', 'sdd']
    assert blockdev.lvm_names(host.root, 'dm-2') == (None, None)


def test_plain_dm_without_uuid_is_matched_by_name(host):
    host.add_dm('dm-3', '253:3', 'cache0', '')
    assert blockdev.device_type(host.root, 'dm-3') == 'dm'
    assert blockdev.stable_id(host.root, 'dm-3') == {'key': 'ENV{DM_NAME}', 'value': 'cache0', 'serial': None}


def test_md_raid1_over_two_disks(host):
    raid_host(host)
    assert blockdev.device_type(host.root, 'md127') == 'md'
    assert blockdev.slaves(host.root, 'md127') == ['sdb', 'sdc']
    assert blockdev.underlying_disks(host.root, 'md127') == ['sdb', 'sdc']
    assert blockdev.stable_id(host.root, 'md127') == {'key': 'ENV{MD_UUID}', 'value': MD_UUID, 'serial': None}
    assert blockdev.read_ahead_kb(host.root, 'md127') == 256


def test_md_over_partitions_gives_whole_disks(host):
    host.add_disk('sdb', '8:16')
    host.add_partition('sdb', 'sdb1', '8:17')
    host.add_disk('sdc', '8:32')
    host.add_partition('sdc', 'sdc1', '8:33')
    host.add_md('md0', '9:0', MD_UUID, slaves=['sdb1', 'sdc1'])
    assert blockdev.underlying_disks(host.root, 'md0') == ['sdb', 'sdc']


def test_md_without_udev_has_no_stable_id(host):
    raid_host(host)
    os.unlink(host.path('/run/udev/data/b9:127'))
    assert blockdev.stable_id(host.root, 'md127') is None


def test_loop_device_matched_by_backing_file(host):
    host.add_loop('loop0', '7:0', '/var/lib/images/data.img', read_ahead_kb=128)
    assert blockdev.device_type(host.root, 'loop0') == 'loop'
    assert blockdev.stable_id(host.root, 'loop0') == {
        'key': 'ATTR{loop/backing_file}', 'value': '/var/lib/images/data.img', 'serial': None}


def test_unbound_loop_device_has_no_stable_id(host):
    host.add_loop('loop1', '7:1', '/x')
    os.unlink(host.path(host._devdir('loop1') + '/loop/backing_file'))
    assert blockdev.stable_id(host.root, 'loop1') is None


# ---------------------------------------------------------------------------------------------
# NVMe and stable ids of disks

def test_nvme_stable_id_is_the_controller_serial_even_with_udev_id_serial(nitro):
    # ID_SERIAL's format differs between systemd releases (v254 appends "_1", PR #26814); the serial does not.
    assert blockdev.device_type(nitro.root, 'nvme1n1') == 'nvme'
    assert blockdev.stable_id(nitro.root, 'nvme1n1') == {
        'key': 'ATTRS{serial}', 'value': EBS_SERIAL, 'serial': EBS_SERIAL}


def test_nvme_tuned_identity_uses_udev_properties(nitro):
    assert blockdev.tuned_identity(nitro.root, 'nvme1n1') == ('ID_SERIAL_SHORT', EBS_SERIAL)
    assert blockdev.tuned_identity(nitro.root, 'dm-0')[0] == 'DM_UUID'


def test_tuned_identity_none_without_udev_db(host):
    host.add_nvme('nvme4n1', '259:8', 'vol0xyz', udev=False)
    assert blockdev.tuned_identity(host.root, 'nvme4n1') is None


def test_nvme_without_udev_db_falls_back_to_controller_serial(host):
    host.add_nvme('nvme2n1', '259:4', 'vol0abc', udev=False)
    # The controller pads the serial to 20 characters with spaces.
    raw = host.read(host._devdir('nvme2n1') + '/device/serial')
    assert raw.startswith('vol0abc ')
    assert blockdev.stable_id(host.root, 'nvme2n1') == {'key': 'ATTRS{serial}', 'value': 'vol0abc', 'serial': 'vol0abc'}


def test_nvme_model_is_stripped(nitro):
    assert blockdev.nvme_attr(nitro.root, 'nvme1n1', 'model') == 'Amazon Elastic Block Store'
    assert blockdev.describe(nitro.root, 'nvme1n1')['model'] == 'Amazon Elastic Block Store'


def test_nvme_udev_without_serial_short_uses_controller_serial(host):
    host.add_nvme('nvme3n1', '259:6', 'vol0def', udev=False)
    host.udev('259:6', {'DEVTYPE': 'disk', 'ID_SERIAL': 'Amazon Elastic Block Store_vol0def'})
    assert blockdev.stable_id(host.root, 'nvme3n1') == {
        'key': 'ATTRS{serial}', 'value': 'vol0def', 'serial': 'vol0def'}
    assert blockdev.tuned_identity(host.root, 'nvme3n1') == ('ID_SERIAL', 'Amazon Elastic Block Store_vol0def')


def test_nvme_without_a_serial_file_uses_the_next_identity(host):
    # udev matches ATTRS{serial} against sysfs files only (systemd src/udev/udev-rules.c, ATTRS walks the parents'
    # attributes): with no controller serial file, a rule ATTRS{serial}=="<ID_SERIAL_SHORT>" can never match.
    host.add_nvme('nvme3n1', '259:6', 'vol0def')
    os.unlink(host.path(host._devdir('nvme3n1') + '/device/serial'))
    assert blockdev.stable_id(host.root, 'nvme3n1') == {
        'key': 'ENV{ID_SERIAL}', 'value': 'Amazon Elastic Block Store_vol0def', 'serial': 'vol0def'}


def test_disk_stable_id_from_id_serial(host):
    host.add_disk('sdb', '8:16', udev={'ID_SERIAL': 'QEMU_HARDDISK_QM00002', 'ID_SERIAL_SHORT': 'QM00002'})
    assert blockdev.stable_id(host.root, 'sdb') == {
        'key': 'ENV{ID_SERIAL}', 'value': 'QEMU_HARDDISK_QM00002', 'serial': 'QM00002'}


def test_disk_stable_id_from_wwn(host):
    host.add_disk('sdb', '8:16', udev={'ID_WWN': '0x5000c500a1b2c3d4'})
    assert blockdev.stable_id(host.root, 'sdb') == {'key': 'ENV{ID_WWN}', 'value': '0x5000c500a1b2c3d4', 'serial': None}


def test_disk_stable_id_from_own_serial_attribute(host):
    host.add_disk('vdb', '252:16', attrs={'serial': 'VIRTIO-SER-1  \n'})
    assert blockdev.stable_id(host.root, 'vdb') == {
        'key': 'ATTR{serial}', 'value': 'VIRTIO-SER-1', 'serial': 'VIRTIO-SER-1'}


def test_disk_without_udev_or_serial_has_no_stable_id(host):
    host.add_disk('vdb', '252:16')
    assert blockdev.stable_id(host.root, 'vdb') is None


def test_udev_db_properties_and_links(nitro):
    props, links = blockdev.udev_db(nitro.root, 'nvme1n1')
    assert props['ID_SERIAL_SHORT'] == EBS_SERIAL
    assert 'DEVTYPE' not in props  # a uevent value: not in the database (see tuned_properties)
    assert links == ['disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0']


def test_tuned_properties_are_the_uevent_values_and_the_database(nitro):
    # pyudev's Device.properties, which tuned's devices_udev_regex is searched in
    # (tuned/hardware/device_matcher_udev.py at v2.16.0 and later: sorted KEY=value lines).
    assert blockdev.tuned_properties(nitro.root, 'nvme1n1') == {
        'DEVPATH': '/devices/pci0000:00/0000:00:1f.0/nvme/nvme1/nvme1n1', 'SUBSYSTEM': 'block',
        'MAJOR': '259', 'MINOR': '2', 'DEVNAME': '/dev/nvme1n1', 'DEVTYPE': 'disk',
        'ID_MODEL': 'Amazon Elastic Block Store', 'ID_SERIAL': 'Amazon Elastic Block Store_vol0123456789abcdef0',
        'ID_SERIAL_SHORT': EBS_SERIAL}


def test_udev_db_value_may_contain_equals_sign(host):
    host.add_disk('sdb', '8:16')
    host.write('/run/udev/data/b8:16', 'E:ID_PATH=pci-0000:00:04.0\nE:WEIRD=a=b\nL:0\nG:systemd\n')
    props, links = blockdev.udev_db(host.root, 'sdb')
    assert props == {'ID_PATH': 'pci-0000:00:04.0', 'WEIRD': 'a=b'}
    assert links == []


# ---------------------------------------------------------------------------------------------
# lvm_names

def test_lvm_names_from_udev(nitro):
    assert blockdev.lvm_names(nitro.root, 'dm-0') == ('vg_aem', 'lv_repo')


def test_lvm_names_from_dm_name_when_udev_lacks_them(host):
    host.add_dm('dm-0', '253:0', 'my--vg-lv--data', LVM_UUID)
    assert blockdev.lvm_names(host.root, 'dm-0') == ('my-vg', 'lv-data')


def test_lvm_names_from_dm_name_without_udev_db(host):
    host.add_dm('dm-0', '253:0', 'vg_aem-lv_repo', LVM_UUID)
    os.unlink(host.path('/run/udev/data/b253:0'))
    assert blockdev.lvm_names(host.root, 'dm-0') == ('vg_aem', 'lv_repo')


def test_lvm_names_unparseable_dm_name(host):
    host.add_dm('dm-0', '253:0', 'nohyphen', LVM_UUID)
    assert blockdev.lvm_names(host.root, 'dm-0') == (None, None)


def test_lvm_names_vg_ending_in_hyphen(host):
    # VG "data-" and LV "lv": LVM doubles the hyphen, giving dm name "data---lv".
    host.add_dm('dm-0', '253:0', 'data---lv', LVM_UUID)
    assert blockdev.lvm_names(host.root, 'dm-0') == ('data-', 'lv')


# ---------------------------------------------------------------------------------------------
# Mounts and paths

def test_mounts_parse_fields(nitro):
    entries = blockdev.mounts(nitro.root)
    assert [e['mountpoint'] for e in entries] == ['/', '/sys', '/tmp', '/opt/aem']
    assert entries[3] == {'majmin': '253:0', 'mountpoint': '/opt/aem', 'options': 'rw,relatime',
                          'fstype': 'xfs', 'source': '/dev/mapper/vg_aem-lv_repo'}


def test_mounts_handle_optional_fields_and_skip_garbage(host):
    host.write('/proc/self/mountinfo', '\n'.join([
        '22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw',
        '23 22 8:2 / /a rw shared:1 master:2 - xfs /dev/sda2 rw',
        'garbage line',
        '24 22 8:3 / /b rw - xfs',
        '',
    ]))
    entries = blockdev.mounts(host.root)
    assert [(e['mountpoint'], e['fstype'], e['source']) for e in entries] == [
        ('/', 'ext4', '/dev/sda1'), ('/a', 'xfs', '/dev/sda2')]


def test_mounts_without_mountinfo_is_empty(host):
    os.unlink(host.path('/proc/self/mountinfo'))
    assert blockdev.mounts(host.root) == []


def test_device_for_path_on_lv(nitro):
    name, mount = blockdev.device_for_path(nitro.root, '/opt/aem/crx-quickstart/repository/segmentstore')
    assert name == 'dm-0'
    assert mount['mountpoint'] == '/opt/aem'


def test_device_for_path_on_root_partition(nitro):
    nitro.mkdir('/etc')
    name, mount = blockdev.device_for_path(nitro.root, '/etc')
    assert name == 'nvme0n1p1'
    assert mount['mountpoint'] == '/'
    assert blockdev.whole_disk(nitro.root, name) == 'nvme0n1'


def test_device_for_path_mountpoint_prefix_is_not_a_match(nitro):
    nitro.mkdir('/opt/aemx')
    name, _mount = blockdev.device_for_path(nitro.root, '/opt/aemx')
    assert name == 'nvme0n1p1'


def test_device_for_path_follows_relative_symlink(nitro):
    nitro.symlink('/srv/repo', '../opt/aem/crx-quickstart')
    name, _mount = blockdev.device_for_path(nitro.root, '/srv/repo')
    assert name == 'dm-0'


def test_device_for_path_on_tmpfs_is_not_block_backed(nitro):
    with pytest.raises(blockdev.NotBlockBackedError) as info:
        blockdev.device_for_path(nitro.root, '/tmp')
    msg = str(info.value)
    assert '/tmp is on tmpfs' in msg
    assert 'no block device' in msg
    assert 'ignore_missing' in msg


def test_device_for_path_on_nfs_is_not_block_backed(nitro):
    nitro.mount('0:50', '/mnt/share', 'nfs4', 'filer:/export/aem')
    with pytest.raises(blockdev.NotBlockBackedError) as info:
        blockdev.device_for_path(nitro.root, '/mnt/share')
    assert 'nfs4' in str(info.value)
    assert 'filer:/export/aem' in str(info.value)


def test_not_block_backed_is_a_block_device_error():
    assert issubclass(blockdev.NotBlockBackedError, blockdev.BlockDeviceError)
    assert issubclass(blockdev.NoSuchDeviceError, blockdev.BlockDeviceError)


def test_device_for_path_btrfs_anonymous_majmin_uses_source(host):
    host.add_disk('sdb', '8:16')
    host.mount('0:45', '/var/lib/data', 'btrfs', '/dev/sdb')
    name, _mount = blockdev.device_for_path(host.root, '/var/lib/data')
    assert name == 'sdb'


def test_device_for_path_that_does_not_exist(nitro):
    with pytest.raises(blockdev.NoSuchDeviceError) as info:
        blockdev.device_for_path(nitro.root, '/opt/aem/no/such/dir')
    assert 'path /opt/aem/no/such/dir does not exist' in str(info.value)


def test_device_for_path_without_any_mount(host):
    host.mkdir('/data')
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.device_for_path(host.root, '/data')
    assert 'no mount found for /data' in str(info.value)


def test_mount_with_escaped_space(host):
    host.add_disk('sdb', '8:16')
    host.mount('8:16', '/srv/aem data', 'xfs', '/dev/sdb')
    assert '\\040' in host.read('/proc/self/mountinfo')
    host.mkdir('/srv/aem data/repo')
    name, mount = blockdev.device_for_path(host.root, '/srv/aem data/repo')
    assert name == 'sdb'
    assert mount['mountpoint'] == '/srv/aem data'
    assert blockdev.mount_points(host.root, 'sdb') == ['/srv/aem data']


def test_stacked_mounts_last_wins(host):
    host.add_disk('sdb', '8:16')
    host.add_disk('sdc', '8:32')
    host.mount('8:16', '/data', 'xfs', '/dev/sdb')
    host.mount('8:32', '/data', 'xfs', '/dev/sdc')
    assert blockdev.find_mount(host.root, '/data')['source'] == '/dev/sdc'
    assert blockdev.device_for_path(host.root, '/data')[0] == 'sdc'


def test_later_mount_on_parent_hides_earlier_child_mount(host, monkeypatch):
    # On a real host stat(path).st_dev says which filesystem is visible at the path.
    host.add_disk('sdb', '8:16')
    host.add_disk('sdc', '8:32')
    host.mount('8:16', '/opt/aem', 'xfs', '/dev/sdb')
    host.mount('8:32', '/opt', 'xfs', '/dev/sdc')
    monkeypatch.setattr(blockdev, '_stat_majmin', lambda root, path: '8:32')
    assert blockdev.find_mount(host.root, '/opt/aem')['source'] == '/dev/sdc'


def test_mountinfo_is_not_in_mount_order_longest_mount_point_wins(host):
    # /proc can be listed before / (parent ids, not order, give the tree): /proc/self is on proc.
    host.add_disk('sdb', '8:16')
    host.mount('0:21', '/proc', 'proc', 'proc')
    host.mount('8:16', '/', 'ext4', '/dev/sdb')
    assert blockdev.find_mount(host.root, '/proc/self')['fstype'] == 'proc'
    assert blockdev.find_mount(host.root, '/etc')['source'] == '/dev/sdb'


def test_find_mount_not_strict_returns_none(host):
    assert blockdev.find_mount(host.root, '/sys', strict=False) is None


def test_find_mount_strict_raises(host):
    with pytest.raises(blockdev.BlockDeviceError):
        blockdev.find_mount(host.root, '/sys')


def test_real_target_path_strips_root(nitro):
    assert blockdev.real_target_path(nitro.root, '/opt/aem/crx-quickstart') == '/opt/aem/crx-quickstart'
    assert blockdev.real_target_path(nitro.root, '/') == '/'


# ---------------------------------------------------------------------------------------------
# resolve_device

def test_resolve_kernel_name(nitro):
    assert blockdev.resolve_device(nitro.root, 'nvme1n1') == 'nvme1n1'
    assert blockdev.resolve_device(nitro.root, ' dm-0 ') == 'dm-0'


def test_resolve_dev_path(nitro):
    assert blockdev.resolve_device(nitro.root, '/dev/nvme1n1') == 'nvme1n1'


def test_resolve_partition_returns_the_partition(nitro):
    assert blockdev.resolve_device(nitro.root, '/dev/nvme0n1p1') == 'nvme0n1p1'


def test_resolve_dev_mapper(nitro):
    assert blockdev.resolve_device(nitro.root, '/dev/mapper/vg_aem-lv_repo') == 'dm-0'


def test_resolve_dev_vg_lv(nitro):
    assert blockdev.resolve_device(nitro.root, '/dev/vg_aem/lv_repo') == 'dm-0'


def test_resolve_dev_vg_lv_with_hyphens_doubled_in_dm_name(host):
    host.add_lv('dm-4', '253:4', 'vg-aem', 'lv-repo-1')
    assert blockdev.dm_info(host.root, 'dm-4')['name'] == 'vg--aem-lv--repo--1'
    assert blockdev.resolve_device(host.root, '/dev/vg-aem/lv-repo-1') == 'dm-4'
    assert blockdev.resolve_device(host.root, '/dev/mapper/vg--aem-lv--repo--1') == 'dm-4'
    assert blockdev.lvm_names(host.root, 'dm-4') == ('vg-aem', 'lv-repo-1')


def test_resolve_by_id_link_from_udev(nitro):
    spec = '/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0'
    assert blockdev.resolve_device(nitro.root, spec) == 'nvme1n1'


def test_resolve_by_uuid_link_of_a_partition(nitro):
    nitro.udev('259:1', {'DEVTYPE': 'partition'}, ['disk/by-uuid/0f3c-11aa'])
    assert blockdev.resolve_device(nitro.root, '/dev/disk/by-uuid/0f3c-11aa') == 'nvme0n1p1'


def test_resolve_follows_symlink_in_dev(nitro):
    nitro.symlink('/dev/disk/by-label/aemdata', '../../nvme1n1')
    assert blockdev.resolve_device(nitro.root, '/dev/disk/by-label/aemdata') == 'nvme1n1'


def test_resolve_md_by_id_link(host):
    raid_host(host)
    host.udev('9:127', {'DEVTYPE': 'disk', 'MD_UUID': MD_UUID}, ['md/data', 'disk/by-id/md-name-host:data'])
    assert blockdev.resolve_device(host.root, '/dev/disk/by-id/md-name-host:data') == 'md127'


def test_resolve_md_named_array_from_udev_link(host):
    raid_host(host)
    host.udev('9:127', {'DEVTYPE': 'disk', 'MD_UUID': MD_UUID}, ['md/data'])
    assert blockdev.resolve_device(host.root, '/dev/md/data') == 'md127'


@pytest.mark.parametrize('spec, fragment', [
    ('', 'empty device name'),
    ('   ', 'empty device name'),
    ('sdz', 'no such block device: sdz'),
    ('/dev/sdz', 'no such block device: /dev/sdz'),
    ('/dev/mapper/vg_aem-nope', 'no such block device: /dev/mapper/vg_aem-nope'),
    ('/dev/vg_aem/nope', 'no such block device: /dev/vg_aem/nope'),
    ('/dev/disk/by-id/nvme-nope', 'no such block device: /dev/disk/by-id/nvme-nope'),
    ('dev/nvme1n1', 'must be a kernel name'),
    ('/opt/aem', 'use paths= for a filesystem path'),
])
def test_resolve_bad_specs(nitro, spec, fragment):
    with pytest.raises(blockdev.NoSuchDeviceError) as info:
        blockdev.resolve_device(nitro.root, spec)
    assert fragment in str(info.value)


# ---------------------------------------------------------------------------------------------
# LVM read-ahead helpers

@pytest.mark.parametrize('kb, sectors', [(0, 0), (32, 64), (128, 256), (4096, 8192)])
def test_kb_to_sectors(kb, sectors):
    assert blockdev.kb_to_sectors(kb) == sectors


@pytest.mark.parametrize('output, expected', [
    ('  auto\n', 'auto'),
    ('  Auto', 'auto'),
    ('  64.00\n', 64),
    ('  8192\n', 8192),
    ('0', 0),
])
def test_parse_lvs_read_ahead(output, expected):
    assert blockdev.parse_lvs_read_ahead(output) == expected


@pytest.mark.parametrize('output', ['', None, '  garbage\n', '  -1\n', 'n/a'])
def test_parse_lvs_read_ahead_garbage(output):
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.parse_lvs_read_ahead(output)
    assert 'cannot parse the LVM read-ahead' in str(info.value)


def test_lvs_and_lvchange_args():
    assert blockdev.lvs_read_ahead_args('/sbin/lvs', 'vg', 'lv') == [
        '/sbin/lvs', '--noheadings', '--nosuffix', '--units', 's', '-o', 'lv_read_ahead', 'vg/lv']
    assert blockdev.lvchange_read_ahead_args('/sbin/lvchange', 'vg', 'lv', 64) == [
        '/sbin/lvchange', '--readahead', '64', 'vg/lv']
    assert blockdev.lvchange_read_ahead_args('/sbin/lvchange', 'vg', 'lv', 'auto')[2] == 'auto'


# ---------------------------------------------------------------------------------------------
# Writing read_ahead_kb

def test_write_read_ahead_kb_roundtrip(nitro):
    assert blockdev.write_read_ahead_kb(nitro.root, 'dm-0', 32) == 32
    assert nitro.read_ahead('dm-0') == 32
    assert blockdev.read_ahead_kb(nitro.root, 'dm-0') == 32
    assert nitro.read(nitro._devdir('dm-0') + '/queue/read_ahead_kb') == '32\n'


def test_write_read_ahead_kb_only_touches_that_device(nitro):
    blockdev.write_read_ahead_kb(nitro.root, 'dm-0', 32)
    assert nitro.read_ahead('nvme1n1') == 4096
    assert nitro.read_ahead('nvme0n1') == 4096


def _failing_open(err):
    def fake_open(path, mode='r'):
        if 'w' in mode:
            raise IOError(err, os.strerror(err), path)
        return open(path, mode)
    return fake_open


def test_write_read_ahead_kb_read_only_sysfs_message(nitro, monkeypatch):
    monkeypatch.setattr(blockdev, 'open', _failing_open(errno.EROFS), raising=False)
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.write_read_ahead_kb(nitro.root, 'dm-0', 32)
    assert 'inside a container' in str(info.value)
    assert 'read_ahead_kb' in str(info.value)


@pytest.mark.parametrize('err', [errno.EACCES, errno.EPERM])
def test_write_read_ahead_kb_permission_message(nitro, monkeypatch, err):
    monkeypatch.setattr(blockdev, 'open', _failing_open(err), raising=False)
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.write_read_ahead_kb(nitro.root, 'dm-0', 32)
    assert 'needs root' in str(info.value)
    assert 'become: true' in str(info.value)


def test_write_read_ahead_kb_other_error_names_value_and_path(nitro, monkeypatch):
    monkeypatch.setattr(blockdev, 'open', _failing_open(errno.EINVAL), raising=False)
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.write_read_ahead_kb(nitro.root, 'dm-0', 32)
    assert 'writing 32 to ' in str(info.value)
    assert 'queue/read_ahead_kb' in str(info.value)
    assert os.strerror(errno.EINVAL) in str(info.value)


# ---------------------------------------------------------------------------------------------
# check_writable

def _container_host(tmpdir):
    host = FakeHost(tmpdir)
    host.add_disk('vdb', '252:16', udev={'ID_SERIAL': 'vdb-serial'})
    host.mount('0:22', '/sys', 'sysfs', 'sysfs', 'ro,nosuid,nodev,noexec,relatime')
    return host


def test_check_writable_passes_for_writable_file(nitro):
    blockdev.check_writable(nitro.root, 'dm-0')


def test_check_writable_read_only_sysfs_gives_container_message(tmpdir, monkeypatch):
    host = _container_host(tmpdir)
    _chmod_ro(blockdev.read_ahead_path(host.root, 'vdb'))
    _access_honouring_modes(monkeypatch)
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.check_writable(host.root, 'vdb')
    msg = str(info.value)
    assert 'inside a container' in msg
    assert '/sys is mounted read-only' in msg
    assert blockdev.read_ahead_path(host.root, 'vdb') in msg


def test_check_writable_non_root_message(nitro, monkeypatch):
    _chmod_ro(blockdev.read_ahead_path(nitro.root, 'dm-0'))
    _access_honouring_modes(monkeypatch)
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.check_writable(nitro.root, 'dm-0')
    assert 'permission denied' in str(info.value)
    assert 'needs root' in str(info.value)


def test_check_writable_root_but_not_writable(nitro, monkeypatch):
    _chmod_ro(blockdev.read_ahead_path(nitro.root, 'dm-0'))
    _access_honouring_modes(monkeypatch)
    monkeypatch.setattr(os, 'geteuid', lambda: 0)
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.check_writable(nitro.root, 'dm-0')
    assert 'is not writable' in str(info.value)


def test_check_writable_partition_has_no_queue(nitro):
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.check_writable(nitro.root, 'nvme0n1p1')
    assert 'nvme0n1p1 has no queue/read_ahead_kb' in str(info.value)


# ---------------------------------------------------------------------------------------------
# Xen-based EC2 (issue 10 item 11): xvd* disks on m4, c4, r4, t2 under RHEL 7.

def add_xen_vbd(host, name='xvda', majmin='202:0', vdev=51712, udev_props=None):
    """A blkfront disk as Linux 3.10 (RHEL 7) shows it on a Xen HVM guest: /sys/block/xvda ->
    ../devices/vbd-51712/block/xvda; the xenbus device vbd-51712 (drivers/xen/xenbus/xenbus_probe.c
    attributes nodename, devtype, modalias) with subsystem -> bus/xen. Its udev record under
    systemd 219 has no ID_SERIAL, ID_WWN or ID_PATH: 60-persistent-storage.rules finds no serial,
    and src/udev/udev-builtin-path_id.c at v219 drops the "xen-vbd-51712" path of a block device
    because the xen branch sets supported_parent but not supported_transport."""
    parent = '/sys/devices/vbd-%d' % vdev
    host.write(parent + '/nodename', 'device/vbd/%d\n' % vdev)
    host.write(parent + '/devtype', 'vbd\n')
    host.write(parent + '/modalias', 'xen:vbd\n')
    host.mkdir('/sys/bus/xen/drivers/vbd')
    host.symlink(parent + '/subsystem', '../../bus/xen')
    host.symlink(parent + '/driver', '../../bus/xen/drivers/vbd')
    # The udev database holds what the rules added (nothing here); DEVNAME, MAJOR, MINOR and SUBSYSTEM come from
    # the kernel's uevent (the fake host's uevent file), as pyudev reads them.
    devdir = host.add_disk(name, majmin, read_ahead_kb=128, parent=parent, udev=dict(udev_props or {}))
    host.symlink(devdir + '/device', '../../../vbd-%d' % vdev)
    return devdir


def test_xen_vbd_gets_the_xenbus_node_as_identity(host):
    add_xen_vbd(host)
    add_xen_vbd(host, 'xvdb', '202:16', 51728)
    assert blockdev.device_type(host.root, 'xvda') == 'disk'
    assert blockdev.xen_vbd(host.root, 'xvda') == 'device/vbd/51712'
    assert blockdev.stable_id(host.root, 'xvda') == {'key': 'ATTRS{nodename}', 'value': 'device/vbd/51712',
                                                     'serial': None}
    assert blockdev.stable_id(host.root, 'xvdb')['value'] == 'device/vbd/51728'


def test_xen_vbd_tuned_identity_is_id_path_or_devpath(host):
    add_xen_vbd(host)
    assert blockdev.tuned_identity(host.root, 'xvda') == ('DEVPATH', '/devices/vbd-51712/block/xvda')
    # Amazon Linux 2's 51-ec2-xen-vbd-devices.rules (amazon-ec2-utils PR #3) sets ID_PATH=xen-vbd-51712.
    add_xen_vbd(host, 'xvdf', '202:80', 51792, udev_props={'ID_PATH': 'xen-vbd-51792'})
    assert blockdev.tuned_identity(host.root, 'xvdf') == ('ID_PATH', 'xen-vbd-51792')
    assert blockdev.stable_id(host.root, 'xvdf')['key'] == 'ATTRS{nodename}'  # the same rule with or without


def test_xen_vbd_serial_still_wins(host):
    add_xen_vbd(host, udev_props={'ID_SERIAL': 'vbd-serial-1'})
    assert blockdev.stable_id(host.root, 'xvda')['key'] == 'ENV{ID_SERIAL}'


def test_a_virtio_disk_is_not_taken_for_xen(host):
    host.add_disk('vdb', '252:16')
    assert blockdev.xen_vbd(host.root, 'vdb') is None
    assert blockdev.stable_id(host.root, 'vdb') is None


# ---------------------------------------------------------------------------------------------
# Hostile identities and names from the kernel (issue 12): never a traceback.

@pytest.mark.parametrize('backing, words', [
    ('/img/a*.img', "contains '*'"),
    ('/img/a|b.img', "contains '|'"),
    ('/img/a.img (deleted)', '(deleted)'),
    ('/img/a.img ', 'whitespace'),
    ('/' + 'd' * 600, 'bytes long'),
])
def test_loop_with_a_hostile_backing_file_has_no_identity(host, backing, words):
    host.add_loop('loop3', '7:3', backing)
    assert blockdev.stable_id(host.root, 'loop3') is None
    ident, refused = blockdev.stable_id_report(host.root, 'loop3')
    assert ident is None
    assert len(refused) == 1 and refused[0].startswith('ATTR{loop/backing_file} ') and words in refused[0]


def test_loop_with_a_non_utf8_backing_file(host):
    devdir = host.add_loop('loop4', '7:4', '/img/x')
    with open(host.path(devdir + '/loop/backing_file'), 'wb') as f:
        f.write(b'/img/\xff\xfe.img\n')
    ident, refused = blockdev.stable_id_report(host.root, 'loop4')
    assert ident is None and 'not valid UTF-8' in refused[0]
    info = blockdev.describe(host.root, 'loop4')  # facts still work
    assert info['stable_id'] is None and info['loop_bound'] is True
    assert info['stable_id_refused'] == refused


def test_loop_whose_backing_file_cannot_be_read(host, monkeypatch):
    host.add_loop('loop5', '7:5', '/img/x')
    real = blockdev.read_bytes

    def fake(path):
        if path.endswith('loop/backing_file'):
            raise IOError(errno.ENAMETOOLONG, 'File name too long', path)  # longer than PATH_MAX
        return real(path)

    monkeypatch.setattr(blockdev, 'read_bytes', fake)
    ident, refused = blockdev.stable_id_report(host.root, 'loop5')
    assert ident is None and 'cannot be read (the name is too long' in refused[0]


def test_nvme_serial_with_a_glob_falls_back_to_id_serial(host):
    host.add_nvme('nvme1n1', '259:2', 'vol*bad', udev=False)
    # udev's ID_SERIAL is made of allowed characters only (util_replace_chars: '*' becomes '_').
    host.udev('259:2', {'DEVTYPE': 'disk', 'ID_SERIAL': 'Amazon_Elastic_Block_Store_vol_bad'})
    ident = blockdev.stable_id(host.root, 'nvme1n1')
    assert ident == {'key': 'ENV{ID_SERIAL}', 'value': 'Amazon_Elastic_Block_Store_vol_bad', 'serial': None}
    assert blockdev.stable_id_report(host.root, 'nvme1n1')[1] == [
        "ATTRS{serial} it contains '*', which udev reads as a glob in a match, so the rule could hit other devices"]


def test_whole_disks_lists_the_others_when_a_name_is_not_utf8(host):
    host.add_disk('vdb', '252:16')
    os.symlink(b'../../devices/virtual/block/odd', os.path.join(host.root, 'sys/class/block').encode() + b'/odd\xff')
    names, errors = blockdev.whole_disks_checked(host.root)
    assert names == ['vdb']
    assert errors == ['block device odd\\xff: its kernel name is not UTF-8; it is left out.']
    assert blockdev.whole_disks(host.root) == ['vdb']


def test_read_ahead_kb_garbage_is_none(host):
    devdir = host.add_disk('vdb', '252:16')
    host.write(devdir + '/queue/read_ahead_kb', '\u0663\u0662\n')
    assert blockdev.read_ahead_kb(host.root, 'vdb') is None


def test_path_errors_tell_symlink_loops_from_missing(host):
    host.symlink('/data/a', 'b')
    host.symlink('/data/b', 'a')
    with pytest.raises(blockdev.BlockDeviceError) as info:
        blockdev.real_target_path(host.root, '/data/a')
    assert 'symlink loop' in str(info.value) and 'does not exist' not in str(info.value)
    with pytest.raises(blockdev.NoSuchDeviceError):
        blockdev.real_target_path(host.root, '/data/missing')
