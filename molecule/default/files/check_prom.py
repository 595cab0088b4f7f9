#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Validate a Prometheus textfile-collector file strictly and print it as JSON.

Usage: check_prom.py FILE

Runs on the test VM (its python3, 3.6 on RHEL 8; Python 2.7 works too), independent of the collection's own code:
it reads the text exposition format 0.0.4 as node_exporter's parser does and lints the names as
``promtool check metrics`` does (client_golang promlint: HELP present, base units, no abbreviated unit, no type in
the name, no ':', snake_case, counters end in _total). On success it prints
``{"families": {name: {"help", "type", "samples": [[labels, value], ...]}}, "series": {'name{a="x",b="y"}': value}}``
(series keys: labels sorted by name, values escaped as in the file; a sample without labels is its bare name) and
exits 0; on the first problem it
prints it to stderr and exits 1. tests/tools/test_textfile_metrics.py runs it against the module's output and
against broken files.
"""

from __future__ import absolute_import, division, print_function

import io
import json
import re
import sys

NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
SAMPLE = re.compile(r'^(%s)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+(-?[0-9]+))?$' % NAME)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
VALUE = re.compile(r'^(?:[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN)$')
TYPES = ('counter', 'gauge', 'histogram', 'summary', 'untyped')
BASE_UNITS = ('amperes', 'bytes', 'celsius', 'grams', 'joules', 'kelvin', 'meters', 'metres', 'seconds', 'volts')
NON_BASE_UNITS = {'minutes': 'seconds', 'hours': 'seconds', 'days': 'seconds', 'weeks': 'seconds',
                  'kelvins': 'kelvin', 'fahrenheit': 'celsius', 'rankine': 'celsius', 'inches': 'meters',
                  'yards': 'meters', 'miles': 'meters', 'bits': 'bytes', 'calories': 'joules', 'pounds': 'grams',
                  'ounces': 'grams'}
PREFIXES = ('pico', 'nano', 'micro', 'milli', 'centi', 'deci', 'deca', 'hecto', 'kilo', 'kibi', 'mega', 'mibi',
            'giga', 'gibi', 'tera', 'tebi', 'peta', 'pebi')
ABBREVIATIONS = ('s', 'ms', 'us', 'ns', 'sec', 'b', 'kb', 'mb', 'gb', 'tb', 'pb', 'm', 'h', 'd')


class Invalid(Exception):
    pass


def unescape(value):
    return re.sub(r'\\([\\"n])', lambda m: {'\\': '\\', '"': '"', 'n': '\n'}[m.group(1)], value)


def labels_of(body, line):
    labels, pos = {}, 0
    while pos < len(body):
        m = LABEL.match(body, pos)
        if not m:
            raise Invalid('bad label syntax at character %d: %r' % (pos, line))
        if m.group(1) in labels:
            raise Invalid('label %s repeated: %r' % (m.group(1), line))
        labels[m.group(1)] = unescape(m.group(2))
        pos = m.end()
        if pos < len(body):
            if body[pos] != ',':
                raise Invalid('expected "," after a label: %r' % line)
            pos += 1
    return labels


def parse(content):
    if not content.endswith('\n'):
        raise Invalid('the file does not end with a newline')
    families, order, current = {}, [], None
    for number, line in enumerate(content[:-1].split('\n'), 1):
        where = 'line %d' % number
        if line.startswith('# HELP ') or line.startswith('# TYPE '):
            parts = line.split(' ', 3)
            if len(parts) < 4 or not re.match('^%s$' % NAME, parts[2]):
                raise Invalid('%s: bad %s line: %r' % (where, parts[1], line))
            keyword, name, rest = parts[1].lower(), parts[2], parts[3]
            family = families.get(name)
            if family is None:
                family = families[name] = {'help': None, 'type': None, 'samples': []}
                order.append(name)
            elif current != name:
                raise Invalid('%s: %s appears again after other families' % (where, name))
            if family[keyword] is not None:
                raise Invalid('%s: second %s line for %s' % (where, parts[1], name))
            if family['samples']:
                raise Invalid('%s: %s line for %s after its samples' % (where, parts[1], name))
            if keyword == 'type' and rest not in TYPES:
                raise Invalid('%s: unknown type %r' % (where, rest))
            family[keyword] = unescape(rest) if keyword == 'help' else rest
            current = name
            continue
        if not line.strip() or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise Invalid('%s: not a sample: %r' % (where, line))
        name, body, value, timestamp = m.groups()
        if timestamp is not None:
            raise Invalid('%s: a timestamp on a sample (node_exporter\'s textfile collector refuses it)' % where)
        if not VALUE.match(value):
            raise Invalid('%s: bad value %r' % (where, value))
        if name not in families:
            families[name] = {'help': None, 'type': None, 'samples': []}
            order.append(name)
        elif current != name:
            raise Invalid('%s: samples of %s are not together' % (where, name))
        current = name
        labels = labels_of(body or '', line)
        if labels in [s[0] for s in families[name]['samples']]:
            raise Invalid('%s: a second sample with the same labels: %r' % (where, line))
        families[name]['samples'].append([labels, float(value)])
    return families, order


def lint(families):
    problems = []
    for name, family in sorted(families.items()):
        tokens = name.lower().split('_')
        if family['help'] is None:
            problems.append('%s: no help text' % name)
        for token in tokens:
            base = NON_BASE_UNITS.get(token)
            for prefix in PREFIXES:
                if token.startswith(prefix) and token[len(prefix):] in BASE_UNITS + tuple(NON_BASE_UNITS):
                    base = token[len(prefix):]
            if base:
                problems.append('%s: use base unit "%s" instead of "%s"' % (name, NON_BASE_UNITS.get(base, base), token))
            if token in ABBREVIATIONS:
                problems.append('%s: metric names should not contain abbreviated units' % name)
            if token in ('counter', 'gauge', 'histogram', 'summary'):
                problems.append('%s: metric name should not include type %s' % (name, token))
        if ':' in name:
            problems.append('%s: metric names should not contain ":"' % name)
        if re.search('[a-z][A-Z]', name) or any(re.search('[a-z][A-Z]', k) for s in family['samples'] for k in s[0]):
            problems.append('%s: names should be written in snake_case' % name)
        if family['type'] == 'counter' and not name.endswith('_total'):
            problems.append('%s: counter metrics should have "_total" suffix' % name)
        if family['type'] != 'counter' and name.endswith('_total'):
            problems.append('%s: non-counter metrics should not have "_total" suffix' % name)
        if name.endswith('_timestamp_seconds') and family['type'] not in ('gauge', 'untyped'):
            problems.append('%s: non-gauge metrics should not have "_timestamp_seconds" suffix' % name)
        if name.endswith('_info') and any(s[1] != 1 for s in family['samples']):
            problems.append('%s: an _info metric has the value 1' % name)
    return problems


def series(families):
    out = {}
    for name, family in families.items():
        for labels, value in family['samples']:
            body = ','.join('%s="%s"' % (k, labels[k].replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n'))
                            for k in sorted(labels))
            out[name + ('{%s}' % body if body else '')] = value
    return out


def main(argv):
    if len(argv) != 2:
        sys.stderr.write('usage: check_prom.py FILE\n')
        return 2
    try:
        with io.open(argv[1], encoding='utf-8') as f:
            content = f.read()
        families, _order = parse(content)
    except (IOError, OSError, UnicodeDecodeError, Invalid) as e:
        sys.stderr.write('%s: %s\n' % (argv[1], e))
        return 1
    problems = lint(families)
    if problems:
        sys.stderr.write('%s:\n  %s\n' % (argv[1], '\n  '.join(problems)))
        return 1
    print(json.dumps({'families': families, 'series': series(families)}, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
