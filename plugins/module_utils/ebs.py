# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The limits of the EBS volume types: the one table, the names, and the checks on it (range_errors, missing).

Used by ``sweep.volume_caps`` (the caps the recommendation names, and the ``read_ahead_sweep``
module's argument check and choices) and by ``compliance`` (the role's check before its first change).
Pure: no I/O, Python 2.7, 3.6 and later.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type


CUSTOM = 'custom'

# Per volume type: the range a volume of the type can have, as (min, max); a min of None means
# "more than 0" (the type's IOPS or MiB/s is not provisioned on its own, only bounded).
# Sources, read 2026-12-02:
# - gp3 IOPS 3,000-80,000: AWS re:Invent 2025 session STG320 ("Optimizing price performance with
#   enhanced Amazon EBS gp3 volumes"; transcript on dev.to): gp3 raised to 64 TiB and 80,000 IOPS.
#   NOT verified against an AWS API reference here: the stored ModifyVolume/CreateVolume Iops pages
#   (AWS SDK for Kotlin, ec2 ModifyVolumeRequest.iops) still say 3,000-16,000.
# - gp3 MiB/s 125-2,000: AWS SDK for Kotlin, ec2 ModifyVolumeRequest.throughput ("Minimum value of 125.
#   Maximum value of 2,000") and CreateVolumeRequest.throughput ("Valid Range: 125 - 2000 MiB/s").
# - gp2 100-16,000 IOPS (3 per GiB, burst 3,000 below 1,000 GiB), 128-250 MiB/s by size: AWS
#   Prescriptive Guidance, "Appendix: Amazon EBS SSD storage types" (sql-server-ec2-ha-dr), and the
#   Amazon EBS User Guide, "Amazon EBS volume types".
# - io1 100-64,000 IOPS (50 per GiB), up to 1,000 MiB/s: ModifyVolumeRequest.iops (as above) and
#   the Prescriptive Guidance appendix.
# - io2 (Block Express) 100-256,000 IOPS (1,000 per GiB), up to 4,000 MiB/s: ModifyVolumeRequest.iops
#   ("io2: 100 - 256,000 IOPS") and the Prescriptive Guidance appendix ("io2 Block Express ... 4,000 MiB/s").
# - st1 up to 500 IOPS (1 MiB I/O) and 500 MiB/s, burst 250 MiB/s per TiB; sc1 up to 250 IOPS and
#   250 MiB/s, burst 80 MiB/s per TiB; 125 GiB to 16 TiB: Amazon EBS User Guide, "Throughput Optimized
#   HDD and Cold HDD volumes" (hdd-vols), and aws.amazon.com/ebs/throughput-optimized.
_TABLE = (
    ('gp2', {'iops': (100, 16000), 'mib_s': (128, 250), 'iops_per_gib': 3, 'burst_iops': 3000,
             'burst_below_gib': 1000, 'small_mib_s': 128, 'small_max_gib': 170, 'large_mib_s': 250}),
    ('gp3', {'iops': (3000, 80000), 'mib_s': (125, 2000), 'default_iops': 3000, 'default_mib_s': 125}),
    ('io1', {'iops': (100, 64000), 'mib_s': (None, 1000), 'iops_per_gib': 50, 'provisioned': True}),
    ('io2', {'iops': (100, 256000), 'mib_s': (None, 4000), 'iops_per_gib': 1000, 'provisioned': True}),
    ('st1', {'iops': (None, 500), 'mib_s': (None, 500), 'burst_mib_s_per_tib': 250}),
    ('sc1', {'iops': (None, 250), 'mib_s': (None, 250), 'burst_mib_s_per_tib': 80}),
)
VOLUME_TYPES = dict(_TABLE)
# The volume types in the order the messages and the read_ahead_sweep module's choices list them, and with custom
# (a device that is not EBS, or an emulated one: its caps are given) the values volume_type takes.
TYPE_NAMES = tuple(name for name, _spec in _TABLE)
CHOICES = TYPE_NAMES + (CUSTOM,)
# The type assumed when none is given.
DEFAULT_TYPE = 'gp3'
CAPS_SOURCE = ('AWS: Amazon EBS User Guide, "Amazon EBS volume types"; EC2 API ModifyVolume limits; '
               're:Invent 2025 STG320 for gp3 80,000 IOPS')


def _range_text(low, high):
    if low is None:
        return 'at most {0:,}'.format(high)
    return '{0:,} to {1:,}'.format(low, high)


def range_errors(volume_type, iops=None, mib_s=None, names=('iops', 'throughput_mibps', 'volume_type')):
    """The messages for ``iops``/``mib_s`` outside what a volume of ``volume_type`` can have ([] when
    in range, or for ``custom`` and unknown types). ``names`` are the option names for the IOPS, the MiB/s
    and the type, as the caller's user knows them."""
    spec = VOLUME_TYPES.get(volume_type)
    if spec is None:
        return []
    errors = []
    for value, key, name, unit in ((iops, 'iops', names[0], 'IOPS'), (mib_s, 'mib_s', names[1], 'MiB/s')):
        if value is None or isinstance(value, bool):
            continue
        low, high = spec[key]
        if value > high or (low is not None and value < low) or value <= 0:
            errors.append('%s=%s is outside what an EBS %s volume can have (%s %s): give a value in that range, '
                          'or %s=%s for an emulated or other device.'
                          % (name, value, volume_type, _range_text(low, high), unit, names[2], CUSTOM))
    return errors


def missing(volume_type, size_gib=None, iops=None, mib_s=None):
    """What a volume of ``volume_type`` needs for its caps and was not given, or None: ``'caps'`` (custom: both
    ``iops`` and ``mib_s``), ``'iops'`` (io1 and io2 are provisioned) or ``'size'`` (gp2 derives its caps from the
    size, unless both ``iops`` and ``mib_s`` are given). Each caller words it with its own option names."""
    if volume_type == CUSTOM and (iops is None or mib_s is None):
        return 'caps'
    if VOLUME_TYPES.get(volume_type, {}).get('provisioned') and iops is None:
        return 'iops'
    if volume_type == 'gp2' and size_gib is None and (iops is None or mib_s is None):
        return 'size'
    return None
