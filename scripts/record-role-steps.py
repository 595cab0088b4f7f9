# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn the role's records from a VM run into the result builder's fixtures:
python3 scripts/record-role-steps.py RECORDS [FIXTURES].

Each run of the aem_tuning role writes what its result was built from, and what was built, where a scenario names a
directory (``__aem_tuning_record_dir``; molecule controllers takes it from AEMOPS_RECORD_STEPS: role_result.py's
gather_record, verify.yml). Record them from the scenario that has every case, on the newest controller:

    mkdir -p /tmp/records
    AEMOPS_RECORD_STEPS=/tmp/records AEMOPS_CONTROLLER_VENV=.cache/venv-2.21 AEMOPS_CONTROLLER_FULL=true \\
        molecule test -s controllers
    python3 scripts/record-role-steps.py /tmp/records

This keeps the first run of each case below (by the run's start) as FIXTURES/<case>.json (default
tests/unit/fixtures/role_steps), with where it was recorded (the commit, the controller, the date), and without the
facts of the verdict (they are the facts after, which the variables carry). tests/unit/plugins/plugin_utils/
test_role_result_recorded.py rebuilds each result from its variables and checks it against the one the VM run
published and against docs/result.md. It fails naming a case no record matched, and writes nothing then.
Run on the controller's Python 3; no dependencies.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
FIXTURES = os.path.join(HERE, os.pardir, 'tests', 'unit', 'fixtures', 'role_steps')
# A record is the role's own output, written by the controller; still, read at most this much of each.
MAX_BYTES = 8 * 1024 * 1024


def _r(record):
    return record['verified']['result']


def _readers(record):
    return _r(record).get('readers') or {}


def _kinds(record):
    return set(m.get('kind') for m in _r(record).get('misses') or [])


# Each case: (name, what it is, whether a record is one). The first that matches names a record.
CASES = (
    ('refused', 'a value refused before any change (tuning_facts), nothing changed',
     lambda c: _r(c).get('failed_before_change')),
    ('lost_at_reboot', 'the reboot the host did not come back from: a result for a lost host',
     lambda c: (_r(c).get('lost') or {}).get('step') == 'reboot'),
    ('audit_no_pidfd_getfd', "an audit on a kernel without pidfd_getfd: AEM named as needing a restart",
     lambda c: _r(c)['mode'] == 'audit' and _readers(c).get('kernel_refresh') is False),
    ('apply_no_pidfd_getfd_restart', "apply on a kernel without pidfd_getfd with the opt-in restart of AEM",
     lambda c: _r(c)['mode'] == 'apply' and _readers(c).get('kernel_refresh') is False
     and _readers(c).get('aem_restarted')),
    ('apply_reboot_with_aem', 'apply with a reboot, AEM stopped before it and started after it',
     lambda c: _r(c)['mode'] == 'apply' and (_r(c).get('reboot') or {}).get('done') and _r(c).get('aem')),
    ('first_apply', "the first apply on the untuned host: the first run's snapshot, read-ahead and THP",
     lambda c: _r(c)['mode'] == 'apply' and 'snapshot' in [x.get('kind') for x in _r(c)['changes']]),
    ('apply_refresh_and_restart_needed', 'apply without a reboot: one reader refreshed in place, one named for a '
     'restart (its mapping cannot be refreshed)',
     lambda c: _r(c)['mode'] == 'apply' and _readers(c).get('refreshed') and _readers(c).get('needs_restart')),
    ('audit_drift', 'an audit after a device was set back by hand: not compliant, naming the device',
     lambda c: _r(c)['mode'] == 'audit' and 'read_ahead' in _kinds(c)),
    ('audit_compliant', 'an audit of the tuned host',
     lambda c: _r(c)['mode'] == 'audit' and _r(c)['compliant']),
)


def load(path):
    with open(path, 'rb') as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError('%s: over %d bytes' % (path, MAX_BYTES))
    record = json.loads(data.decode('utf-8'))
    if not (isinstance(record, dict) and isinstance(record.get('variables'), dict)
            and isinstance((record.get('verified') or {}).get('result'), dict)):
        raise ValueError('%s: not a record of the role (variables, verified.result)' % path)
    return record


def case_of(record):
    for name, _what, matches in CASES:
        if matches(record):
            return name
    return None


def provenance():
    def git(*args):
        return subprocess.check_output(('git', '-C', HERE) + args).decode('utf-8').strip()
    dirty = '-dirty' if git('status', '--porcelain', '--untracked-files=no') else ''
    return {'commit': git('rev-parse', 'HEAD') + dirty,
            'date': datetime.datetime.utcnow().strftime('%Y-%m-%d'),
            'scenario': 'molecule controllers (AEMOPS_CONTROLLER_FULL=true)'}


def fixtures(records, where):
    chosen = {}
    for path in sorted(records):
        record = load(path)
        name = case_of(record)
        if name and name not in chosen:
            chosen[name] = (os.path.basename(path), record)
    out = {}
    for name, what, _matches in CASES:
        if name in chosen:
            source, record = chosen[name]
            verified = dict((k, v) for k, v in record['verified'].items() if k != 'facts')
            recorded = dict(where, case=name, what=what, source=source, controller=record.get('controller'))
            out[name] = {'recorded': recorded, 'variables': record['variables'], 'verified': verified}
    return out


def main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    directory = argv[1]
    target = argv[2] if len(argv) == 3 else FIXTURES
    records = [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith('.json')]
    found = fixtures(records, provenance())
    missing = [case[0] for case in CASES if case[0] not in found]
    if missing:
        sys.stderr.write('no record of %d runs is %s: nothing written (is it the full controllers scenario?)\n'
                         % (len(records), ', '.join(missing)))
        return 1
    if not os.path.isdir(target):
        os.makedirs(target)
    for name, fixture in sorted(found.items()):
        with open(os.path.join(target, name + '.json'), 'w') as f:
            json.dump(fixture, f, sort_keys=True)
            f.write('\n')
        print('%s: %s' % (name, fixture['recorded']['source']))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
