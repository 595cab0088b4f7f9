# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Tests for scripts/failure-excerpt.py, which tells a failed CI phase's cause (controller side).

The logs are small inline copies of the shapes the phases print: molecule's default callback,
the upgrade scenario's steps (tasks/step.yml prints a nested run's output, then fails),
pytest's summary, a traceback, and the harness's own timeout message.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import subprocess
import sys

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, 'scripts')


def _load(name):
    spec = importlib.util.spec_from_file_location('aemops_' + name.replace('-', '_'), os.path.join(SCRIPTS, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


excerpt = _load('failure-excerpt')

STEP_FAILED = '''\
PLAY [Leg: upgrade to trixie] **************************************************

TASK [Step: upgrade to trixie] *************************************************
changed: [localhost]

TASK [Output of: upgrade to trixie] ********************************************
ok: [localhost] => {
    "msg": [
        "PLAY [Check] ***",
        "TASK [Read the state] ***",
        "fatal: [aemvm]: FAILED! => {\\"changed\\": false, \\"msg\\": \\"first, not the cause\\"}",
        "...ignoring",
        "TASK [Check the values] ***",
        "fatal: [aemvm]: FAILED! => {\\"changed\\": false, \\"msg\\": \\"NVMe read-ahead 4096, expected 32\\"}",
        "PLAY RECAP ***"
    ]
}

TASK [Fail if this failed: upgrade to trixie] **********************************
fatal: [localhost]: FAILED! => {"changed": false, "msg": "upgrade to trixie: exit code 2 (output above)"}

PLAY RECAP *********************************************************************
'''

HARNESS_FAILED = '''\
TASK [Output of: reboot on trixie] *********************************************
ok: [localhost] => {
    "msg": [
        "vm.sh: waiting for ssh",
        "vm.sh: timed out after 300 s waiting for: ssh answers; last seen: connection refused"
    ]
}

TASK [Fail if this failed: reboot on trixie] ***********************************
fatal: [localhost]: FAILED! => {"changed": false, "msg": "reboot on trixie: exit code 1 (output above)"}
'''

# The shape of a real failure (a clean-clone run of bf8ac95, 2026-12-03, molecule-upgrade): the
# step's output inside molecule's box, its error line wrapped over several lines.
HARNESS_WRAPPED = """\
  \u2502 TASK [Output of: backout on trixie, wait after its reboot]
  \u2502   *********************
  \u2502 ok: [localhost] => {
  \u2502     "msg": [
  \u2502         "[vm 08:29:49] guest is degraded, failed units: tuned.service",
  \u2502         "[vm 08:39:49] error: waiting for tuned's 'static tuning from
  \u2502   profile ... applied' after its last 'starting tuning': not seen after
  \u2502   600s; tuned is failed"
  \u2502     ]
  \u2502 }
  \u2502
  \u2502 TASK [Fail if this failed: backout on trixie, wait after its reboot]
  \u2502   ***
  \u2502 fatal: [localhost]: FAILED! => {"changed": false, "msg": "backout on
  \u2502   trixie, wait after its reboot: exit code 1 (output above)"}
"""

# vm.sh dies, then the step prints the serial log's last lines after its error line.
HARNESS_ERROR_THEN_TAIL = '''\
TASK [Output of: reboot on trixie] *********************************************
ok: [localhost] => {
    "msg": [
        "[vm 10:01:02] waiting for ssh",
        "[vm 10:06:02] error: the guest stopped booting: emergency mode",
        "serial log: [  OK  ] Reached target emergency.target",
        "serial log: You are in emergency mode."
    ]
}

TASK [Fail if this failed: reboot on trixie] ***********************************
fatal: [localhost]: FAILED! => {"changed": false, "msg": "reboot on trixie: exit code 1 (output above)"}
'''

IGNORED_ONLY_THEN_ASSERT = '''\
PLAY [Compare with the bullseye baseline] **************************************

TASK [Probe] *******************************************************************
fatal: [aemvm]: FAILED! => {"changed": false, "msg": "ignored one"}
...ignoring

TASK [Assert the host is back where bullseye started] **************************
\x1b[0;31mfatal: [aemvm]: FAILED! => {"assertion": "a == b", "changed": false, "evaluated_to": false, "msg": "bullseye baseline x"}\x1b[0m
'''


# molecule boxes a nested ansible-playbook's output and wraps it at its width: a long task or play name goes on
# the next line without its ']', and a failed result is printed one key a line, a long msg over several lines.
MOLECULE_WRAPPED = """\
  \u2502 PLAY [Verify read-ahead on the right layers, across reboot and tuned
  \u2502 restarts] ***
  \u2502 TASK [Io_opt disk (rebooted): the report written by converge] ***
  \u2502 ok: [aemvm]
  \u2502 TASK [Io_opt disk (rebooted): assert 32 KiB after the power cycle, and the
  \u2502 report names the kernel as the source before] ***
  \u2502 fatal: [aemvm]: FAILED! => {
  \u2502     "assertion": "(report | b64decode) is search('\\\\| '
  \u2502   ~ link ~ ' \\\\| 32 \\\\|')",
  \u2502     "changed": false,
  \u2502     "evaluated_to": false,
  \u2502     "msg": "after the reboot: {'name': 'vdd', 'read_ahead_kb': 32,
  \u2502   'optimal_io_size': 4194304} (before: 8192)"
  \u2502 }
  \u2502 PLAY RECAP ***
"""


def brief(text):
    return excerpt.brief([excerpt.ANSI.sub('', line) for line in text.splitlines()])


def test_brief_names_the_step_and_the_nested_cause():
    assert brief(STEP_FAILED) == [
        'task: Fail if this failed: upgrade to trixie',
        'play: Leg: upgrade to trixie',
        'said: upgrade to trixie: exit code 2 (output above)',
        'nested task: Check the values',
        'nested said: NVMe read-ahead 4096, expected 32',
    ]


def test_brief_ends_with_what_a_harness_step_printed_last():
    out = brief(HARNESS_FAILED)
    assert out[0] == 'task: Fail if this failed: reboot on trixie'
    assert out[-1] == ('its output ends: vm.sh: waiting for ssh / vm.sh: timed out after 300 s waiting for: '
                       'ssh answers; last seen: connection refused')


def test_brief_rejoins_a_harness_line_that_molecule_wrapped():
    out = brief(HARNESS_WRAPPED)
    assert out[0] == 'task: Fail if this failed: backout on trixie, wait after its reboot'
    assert out[-1] == ("its output ends: [vm 08:29:49] guest is degraded, failed units: tuned.service / "
                       "[vm 08:39:49] error: waiting for tuned's 'static tuning from profile ... applied' "
                       "after its last 'starting tuning': not seen after 600s; tuned is failed")


def test_brief_names_the_harness_error_above_the_tail_it_printed():
    out = brief(HARNESS_ERROR_THEN_TAIL)
    assert out[-2:] == [
        'its last error: [vm 10:06:02] error: the guest stopped booting: emergency mode',
        'its output ends: serial log: [ OK ] Reached target emergency.target / serial log: You are in emergency mode.',
    ]


def test_brief_skips_ignored_failures_and_colour():
    assert brief(IGNORED_ONLY_THEN_ASSERT) == [
        'task: Assert the host is back where bullseye started',
        'play: Compare with the bullseye baseline',
        'said: bullseye baseline x',
    ]


def test_brief_skips_an_ignored_failure_that_comes_after_the_cause():
    """molecule's destroy runs after a failed converge; its ignored failures are not the cause."""
    destroy = ('\nPLAY [Destroy] ***\n\nTASK [Collect the guest logs] ***\n'
               'fatal: [localhost]: FAILED! => {"changed": false, "msg": "no guest"}\n...ignoring\n')
    assert brief(IGNORED_ONLY_THEN_ASSERT + destroy)[-1] == 'said: bullseye baseline x'


def test_brief_takes_the_nested_cause_from_the_failed_steps_own_output_only():
    """An earlier step's output (a nested run that failed and was retried) is not this step's cause."""
    assert brief(STEP_FAILED + HARNESS_FAILED)[-2:] == [
        'said: reboot on trixie: exit code 1 (output above)',
        'its output ends: vm.sh: waiting for ssh / vm.sh: timed out after 300 s waiting for: '
        'ssh answers; last seen: connection refused',
    ]


def test_brief_reads_names_and_messages_that_molecule_wrapped():
    """From a real failure of the default scenario (the io_opt disk, its first run): the wrapped task and play
    names are whole, and the msg is joined from its lines, not the line 'fatal: ... => {'."""
    assert brief(MOLECULE_WRAPPED) == [
        'task: Io_opt disk (rebooted): assert 32 KiB after the power cycle, and the report names the kernel as the '
        'source before',
        'play: Verify read-ahead on the right layers, across reboot and tuned restarts',
        "said: after the reboot: {'name': 'vdd', 'read_ahead_kb': 32, 'optimal_io_size': 4194304} (before: 8192)",
    ]


def test_brief_joins_a_one_line_result_that_molecule_wrapped():
    text = (u'  \u2502 TASK [Refused: assert the message names the value and says nothing was\n'
            u'  \u2502   changed] ***\n'
            u'  \u2502 fatal: [aemvm]: FAILED! => {"changed": false, "msg": "Task failed:\n'
            u'  \u2502   Conditional expressions must be strings."}\n')
    assert brief(text)[-1] == 'said: Task failed: Conditional expressions must be strings.'


def test_brief_names_the_exception_of_a_traceback():
    text = 'start\nTraceback (most recent call last):\n  File "x.py", line 1, in <module>\n    f()\nValueError: bad value\nmore\n'
    assert brief(text) == ['line 5: ValueError: bad value']


def test_brief_lists_the_last_pytest_failures_with_their_lines():
    text = 'FAILED tests/a.py::one - assert 1\nFAILED tests/a.py::two - x\n= 2 failed in 3s =\n'
    assert brief(text) == ['line 1: FAILED tests/a.py::one - assert 1', 'line 2: FAILED tests/a.py::two - x']


def test_brief_names_ansible_tests_issues_not_makes_error():
    # scripts/sanity's shape (stop 25's CI showed only make's line for sanity-2.19).
    text = ('Running sanity test "pylint"\n'
            'ERROR: Found 2 pylint issue(s) which need to be resolved:\n'
            "ERROR: tests/tools/t.py:42:12: use-yield-from: Use 'yield from'\n"
            "ERROR: tests/tools/t.py:46:12: use-yield-from: Use 'yield from'\n"
            'Running sanity test "shebang"\n'
            'sanity[2.19]: FAILED (ansible-test exit code 1)\n'
            'make: *** [Makefile:157: sanity-2.19] Error 1\n')
    assert brief(text) == ['line 2: ERROR: Found 2 pylint issue(s) which need to be resolved:',
                           "line 3: ERROR: tests/tools/t.py:42:12: use-yield-from: Use 'yield from'",
                           "line 4: ERROR: tests/tools/t.py:46:12: use-yield-from: Use 'yield from'"]
    many = ''.join('ERROR: issue %d\n' % n for n in range(7))
    assert brief(many)[-1] == '(3 more ERROR lines)'


def test_brief_without_a_marker_shows_the_last_line():
    assert brief('one\ntwo\n') == ['no failure marker in the log; its last line: two']


def test_brief_shortens_long_messages():
    long_msg = 'x' * 1000
    out = brief('TASK [t] ***\nfatal: [h]: FAILED! => {"msg": "%s"}\n' % long_msg)
    assert len(out[-1]) <= len('said: ') + excerpt.BRIEF_WIDTH
    assert out[-1].endswith('[..]')


def test_command_line_brief_is_the_last_lines_of_a_failed_run(tmp_path):
    log = tmp_path / 'molecule-upgrade.log'
    log.write_text(STEP_FAILED)
    out = subprocess.check_output([sys.executable, os.path.join(SCRIPTS, 'failure-excerpt.py'), '--brief', str(log)])
    assert out.decode().splitlines()[-1] == '  | nested said: NVMe read-ahead 4096, expected 32'


def test_test_lanes_prints_the_cause_after_the_table(tmp_path):
    """A failing phase through test-lanes.py: the cause is below the table, just above the verdict."""
    makefile = tmp_path / 'Makefile'
    makefile.write_text('boom:\n\t@printf \'TASK [t] ***\\nfatal: [h]: FAILED! => {"msg": "the cause"}\\n\'; exit 2\nfine:\n\t@true\n')
    os.symlink(SCRIPTS, str(tmp_path / 'scripts'))
    env = dict(os.environ, AEMOPS_CI_LOGS=str(tmp_path / 'logs'), TEST_WORKERS='1')
    env.pop('AEMOPS_CI_START', None)
    proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, 'test-lanes.py'), 'fine', 'boom'], cwd=str(tmp_path),
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    lines = proc.stdout.decode().splitlines()
    assert proc.returncode == 1
    table = lines.index('==> phases (worker, result, start offset and length in seconds)')
    cause = [i for i, line in enumerate(lines) if line.startswith('==> cause of boom')]
    assert cause and cause[0] > table
    assert lines[-4:] == ['  | task: t', '  | said: the cause', 'FAILED phases: boom', 'phases: 1 passed, 1 failed']


def test_test_lanes_gives_each_phase_its_own_stdin(tmp_path):
    """A phase whose ssh leaves O_NONBLOCK on its stdin does not make the next phase's ansible refuse to start."""
    check = 'import fcntl, os, sys; sys.exit(1 if fcntl.fcntl(0, fcntl.F_GETFL) & os.O_NONBLOCK else 0)'
    poison = 'import fcntl, os; fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)'
    (tmp_path / 'Makefile').write_text('poison:\n\t@%s -c "%s"\ncheck:\n\t@%s -c "%s"\n' % (sys.executable, poison, sys.executable, check))
    os.symlink(SCRIPTS, str(tmp_path / 'scripts'))
    env = dict(os.environ, AEMOPS_CI_LOGS=str(tmp_path / 'logs'), TEST_WORKERS='1')
    env.pop('AEMOPS_CI_START', None)
    with open(os.devnull) as shared:
        proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, 'test-lanes.py'), 'poison', 'check'],
                              cwd=str(tmp_path), env=env, stdin=shared, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, check=False)
    assert proc.returncode == 0, proc.stdout.decode()
