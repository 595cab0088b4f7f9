#!/usr/bin/env python
"""Print read-ahead, THP and tuned state of the test VM as JSON, read straight from sysfs.

Usage: sysfs_report.py NVME_A_SERIAL NVME_B_SERIAL VG/LV   (values from tests/vm/vm.env)

The verify step uses this instead of the collection's own modules, so that a bug in them
cannot hide itself. Devices are found by stable identity (serial, LV name), not kernel name.
"""
import glob
import json
import os
import subprocess
import sys

if len(sys.argv) != 4 or sys.argv[3].count('/') != 1:
    sys.exit('usage: sysfs_report.py NVME_A_SERIAL NVME_B_SERIAL VG/LV')
NVME = {'nvme_a': sys.argv[1], 'nvme_b': sys.argv[2]}
VG_LV = sys.argv[3]
LV = '/dev/mapper/' + VG_LV.replace('/', '-')


def read(path):
    with open(path) as f:
        return f.read().strip()


def device(name):
    return {'name': name, 'read_ahead_kb': int(read('/sys/block/%s/queue/read_ahead_kb' % name))}


report = {}
for key, serial in NVME.items():
    for ctrl in glob.glob('/sys/class/nvme/nvme*'):
        if read(ctrl + '/serial') == serial:
            name = [n for n in os.listdir(ctrl) if n.startswith('nvme') and 'n' in n[4:]][0]
            report[key] = dict(device(name), serial=serial)
lv = os.path.basename(os.path.realpath(LV))
report['lv'] = dict(device(lv), dm_name=read('/sys/block/%s/dm/name' % lv),
                    pv=os.listdir('/sys/block/%s/slaves' % lv))
report['lvm_read_ahead'] = subprocess.check_output(
    ['lvs', '--noheadings', '-o', 'lv_read_ahead', VG_LV]).decode().strip()
report['thp'] = {k: read('/sys/kernel/mm/transparent_hugepage/' + k) for k in ('enabled', 'defrag')}
report['thp']['khugepaged_defrag'] = read('/sys/kernel/mm/transparent_hugepage/khugepaged/defrag')
report['tuned_active'] = subprocess.run(['tuned-adm', 'active'], stdout=subprocess.PIPE, check=False,
                                        universal_newlines=True).stdout.strip()
report['boot_id'] = read('/proc/sys/kernel/random/boot_id')
print(json.dumps(report, sort_keys=True))
