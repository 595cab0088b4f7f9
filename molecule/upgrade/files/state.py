#!/usr/bin/env python
"""Print the test VM's read-ahead, THP, tuned and release as JSON, read from sysfs, /proc and dpkg.

Usage: state.py NVME_A_SERIAL NVME_B_SERIAL VG/LV VIRTIO_DATA_SERIAL   (values from tests/vm/vm.env)

The upgrade scenario records this on every release instead of asking the collection's own
modules, so that a bug in them cannot hide itself. Devices are found by stable identity: the
NVMe controller's serial, the LV's dm name, the virtio disk's serial; never a kernel name.
"""
import glob
import json
import os
import subprocess
import sys


def read(path):
    with open(path) as f:
        return f.read().strip()


def run(*argv):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    out = p.communicate()[0]
    return p.returncode, out.strip()


def device(name, **extra):
    extra.update(name=name, read_ahead_kb=int(read('/sys/block/%s/queue/read_ahead_kb' % name)))
    return extra


nvme_a, nvme_b, vg_lv, data_serial = sys.argv[1:5]
report = {}
for key, serial in (('nvme_a', nvme_a), ('nvme_b', nvme_b)):
    for ctrl in glob.glob('/sys/class/nvme/nvme*'):
        if read(ctrl + '/serial') == serial:
            names = sorted(n for n in os.listdir(ctrl) if n.startswith('nvme') and 'n' in n[4:])
            report[key] = device(names[0], serial=serial)
for disk in glob.glob('/sys/block/vd*'):
    if os.path.exists(disk + '/serial') and read(disk + '/serial') == data_serial:
        report['data'] = device(os.path.basename(disk), serial=data_serial)
lv = os.path.basename(os.path.realpath('/dev/' + vg_lv))
report['lv'] = device(lv, dm_name=read('/sys/block/%s/dm/name' % lv))
report['lvm_read_ahead'] = run('lvs', '--noheadings', '-o', 'lv_read_ahead', vg_lv)[1]
thp = '/sys/kernel/mm/transparent_hugepage/'
report['thp'] = {'enabled': read(thp + 'enabled'), 'defrag': read(thp + 'defrag'),
                 'khugepaged_defrag': read(thp + 'khugepaged/defrag')}
report['tuned'] = {
    'version': run('dpkg-query', '-W', '-f=${Version}', 'tuned')[1],
    'active': run('tuned-adm', 'active')[1],
    'profile_mode': read('/etc/tuned/profile_mode') if os.path.exists('/etc/tuned/profile_mode') else '',
    'running': run('systemctl', 'is-active', 'tuned')[1],
}
os_release = dict(line.split('=', 1) for line in read('/etc/os-release').splitlines() if '=' in line)
report['release'] = os_release.get('VERSION_CODENAME', '').strip('"')
report['kernel'] = os.uname()[2]
report['cmdline'] = read('/proc/cmdline')
report['thp_arg'] = [a for a in report['cmdline'].split() if a.startswith('transparent_hugepage=')]
report['boot_id'] = read('/proc/sys/kernel/random/boot_id')
print(json.dumps(report, sort_keys=True))
