# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Runs in the bench VM (bench/caps.sh feeds it to ``vm.sh ssh python3 -``): the sequential readers.

  setup STORE_DIR STORE_MB FILE_PATH FILE_MB
      An Oak-like segment store in STORE_DIR (tar files of at most 256 MiB, as TarMK rolls them,
      the last one partly written, beside journal.log, manifest, gc.log and repo.lock) of STORE_MB
      MiB, and one large file FILE_PATH of FILE_MB MiB (a datastore blob, a restore's archive).
      Real data blocks (not fallocated: an unwritten extent reads without any device I/O), synced.
  run JOB DEVICE READ_AHEAD_KB INTERVAL SOURCE
      JOB is tar (``tar -cf /dev/zero -C PARENT NAME``: tar's default 10 KiB records, so that the
      read-ahead makes the device's requests; /dev/zero because GNU tar reads no file when its
      archive is /dev/null, and a pipe to ``cat`` made the job CPU-bound in the emulated guest, at
      23 MiB/s) or cp (``cp SOURCE /dev/null``: 128 KiB reads). DEVICE's read_ahead_kb
      is set to READ_AHEAD_KB, the page cache dropped, the job run while /proc/diskstats is sampled
      every INTERVAL s; the device's value is put back. Prints one JSON document: the job's bytes
      and seconds, and the device's read counters before, after and at each sample.
"""

import json
import os
import subprocess
import sys
import time

MIB = 1048576
SEGMENT_MB = 256


def store_files(store_mb):
    """(name, MiB) of an Oak-like segment store of about store_mb MiB."""
    files = []
    left = store_mb
    n = 0
    while left > 0:
        size = min(SEGMENT_MB, left)
        files.append(('data%05da.tar' % n, size))
        left -= size
        n += 1
    return files


def write_file(path, mib):
    block = (b'oak-segment-' * (MIB // 12 + 1))[:MIB]
    with open(path, 'wb') as f:
        for _mib in range(mib):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def cmd_setup(store_dir, store_mb, file_path, file_mb):
    os.makedirs(store_dir)
    for name, mib in store_files(int(store_mb)):
        write_file(os.path.join(store_dir, name), mib)
    for name, text in (('journal.log', 'r0-0:1 root 0\n' * 2000), ('manifest', 'store.version=2\n'),
                       ('gc.log', ''), ('repo.lock', '')):
        with open(os.path.join(store_dir, name), 'w') as f:
            f.write(text)
    parent = os.path.dirname(file_path)
    if not os.path.isdir(parent):
        os.makedirs(parent)
    write_file(file_path, int(file_mb))
    subprocess.check_call(['sync'])
    print(json.dumps({'store_files': len(os.listdir(store_dir)), 'store_bytes': tree_bytes(store_dir),
                      'file_bytes': os.path.getsize(file_path)}))


def tree_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, n)) for d, _dirs, names in os.walk(path) for n in names)


def diskstats(device):
    """The device's read counters from /proc/diskstats, and the weighted time in queue (ms)."""
    with open('/proc/diskstats') as f:
        for line in f:
            fields = line.split()
            if fields[2] == device:
                v = [int(x) for x in fields[3:14]]
                return {'read_ios': v[0], 'read_merges': v[1], 'read_sectors': v[2], 'read_ticks': v[3],
                        'in_flight': v[8], 'io_ticks': v[9], 'time_in_queue': v[10]}
    raise SystemExit('seq_guest: no %s in /proc/diskstats' % device)


def read_int(path):
    with open(path) as f:
        return int(f.read())


def set_read_ahead(device, kb):
    path = '/sys/block/%s/queue/read_ahead_kb' % device
    before = read_int(path)
    with open(path, 'w') as f:
        f.write('%d\n' % kb)
    now = read_int(path)
    if now != kb:
        raise SystemExit('seq_guest: %s is at %d KiB, not %d' % (device, now, kb))
    return before


def job_command(job, source):
    if job == 'tar':
        parent, name = os.path.split(source.rstrip('/'))
        return 'tar -cf /dev/zero -C %s %s' % (parent, name)
    if job == 'cp':
        return 'cp %s /dev/null' % source
    raise SystemExit('seq_guest: unknown job %r' % job)


def cmd_run(job, device, read_ahead_kb, interval, source):
    kb, interval = int(read_ahead_kb), float(interval)
    command = job_command(job, source)
    original = set_read_ahead(device, kb)
    try:
        subprocess.check_call(['sync'])
        with open('/proc/sys/vm/drop_caches', 'w') as f:
            f.write('3\n')
        before = diskstats(device)
        start = time.time()
        proc = subprocess.Popen(command, shell=True)
        samples = []
        while proc.poll() is None:
            time.sleep(interval)
            samples.append([round(time.time() - start, 3), diskstats(device)])
        seconds = time.time() - start
        after = diskstats(device)
    finally:
        set_read_ahead(device, original)
    if proc.returncode != 0:
        raise SystemExit('seq_guest: %r exited %d' % (command, proc.returncode))
    print(json.dumps({'job': job, 'command': command, 'device': device, 'read_ahead_kb': kb,
                      'restored_kb': original, 'bytes': tree_bytes(source), 'seconds': round(seconds, 3),
                      'interval': interval, 'before': before, 'after': after, 'samples': samples,
                      'max_sectors_kb': read_int('/sys/block/%s/queue/max_sectors_kb' % device)}))


def main(argv):
    if argv[:1] == ['setup'] and len(argv) == 5:
        cmd_setup(*argv[1:])
    elif argv[:1] == ['run'] and len(argv) == 6:
        cmd_run(*argv[1:])
    else:
        raise SystemExit(__doc__)


if __name__ == '__main__':
    main(sys.argv[1:])
