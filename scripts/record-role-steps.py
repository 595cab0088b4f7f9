# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn the role's records from a VM run into the result builder's fixtures:
python3 scripts/record-role-steps.py SCENARIO RECORDS [FIXTURES].

Each run of the aem_tuning role writes what its result was built from, and what was built, where a scenario names a
directory (``__aem_tuning_record_dir``; molecule controllers and default take it from AEMOPS_RECORD_STEPS:
role_result.py's gather_record, verify.yml). Record them from the two scenarios that have every case: controllers on
the newest controller, and default on the oldest (ansible-core 2.16, which templates the records differently):

    mkdir -p /tmp/records /tmp/records-216
    AEMOPS_RECORD_STEPS=/tmp/records AEMOPS_CONTROLLER_VENV=.cache/venv-2.21 AEMOPS_CONTROLLER_FULL=true \\
        molecule test -s controllers
    python3 scripts/record-role-steps.py controllers /tmp/records
    AEMOPS_RECORD_STEPS=/tmp/records-216 molecule test -s default
    python3 scripts/record-role-steps.py default /tmp/records-216

This keeps the first run of each of the scenario's cases below (by the run's start) as FIXTURES/<case>.json (default
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


# Each case of a scenario: (name, what it is, whether a record is one). The first that matches names a record.
CONTROLLERS = (
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
DEFAULT = (
    ('core216_check_mode', 'check mode on the untuned host (ansible-core 2.16): what the first apply would change',
     lambda c: _r(c)['check_mode']),
    ('core216_backout', 'a backout (state absent, ansible-core 2.16): the snapshot restored, with a reboot',
     lambda c: _r(c)['state'] == 'absent'),
    ('core216_first_apply_probe', "the first apply with io_probe before and after (ansible-core 2.16)",
     lambda c: _r(c)['mode'] == 'apply' and _r(c)['probe'] and 'snapshot' in [x.get('kind') for x in _r(c)['changes']]),
    ('core216_second_apply', 'the second apply (ansible-core 2.16): nothing changed',
     lambda c: _r(c)['mode'] == 'apply' and not _r(c)['changes'] and _r(c)['compliant']),
)
SCENARIOS = {'controllers': ('molecule controllers (AEMOPS_CONTROLLER_FULL=true)', CONTROLLERS),
             'default': ('molecule default', DEFAULT)}


def scenario_of(fixture):
    """The scenario key of a fixture, by its ``recorded.scenario``."""
    where = fixture['recorded']['scenario']
    return [key for key, (text, _cases) in SCENARIOS.items() if where == text][0]


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


def case_of(record, cases):
    for name, _what, matches in cases:
        if matches(record):
            return name
    return None


def provenance(scenario):
    def git(*args):
        return subprocess.check_output(('git', '-C', HERE) + args).decode('utf-8').strip()
    dirty = '-dirty' if git('status', '--porcelain', '--untracked-files=no') else ''
    return {'commit': git('rev-parse', 'HEAD') + dirty,
            'date': datetime.datetime.utcnow().strftime('%Y-%m-%d'),
            'scenario': SCENARIOS[scenario][0]}


def fixtures(records, where, cases):
    chosen = {}
    for path in sorted(records):
        record = load(path)
        name = case_of(record, cases)
        if name and name not in chosen:
            chosen[name] = (os.path.basename(path), record)
    out = {}
    for name, what, _matches in cases:
        if name in chosen:
            source, record = chosen[name]
            verified = dict((k, v) for k, v in record['verified'].items() if k != 'facts')
            recorded = dict(where, case=name, what=what, source=source, controller=record.get('controller'))
            out[name] = {'recorded': recorded, 'variables': record['variables'], 'verified': verified}
    return out


def main(argv):
    if len(argv) not in (3, 4) or argv[1] not in SCENARIOS:
        sys.stderr.write(__doc__)
        return 2
    scenario, directory = argv[1], argv[2]
    target = argv[3] if len(argv) == 4 else FIXTURES
    cases = SCENARIOS[scenario][1]
    records = [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith('.json')]
    found = fixtures(records, provenance(scenario), cases)
    missing = [case[0] for case in cases if case[0] not in found]
    if missing:
        sys.stderr.write('no record of %d runs is %s: nothing written (is it the whole %s scenario?)\n'
                         % (len(records), ', '.join(missing), scenario))
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
