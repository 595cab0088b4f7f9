# -*- coding: utf-8 -*-
# Copyright (c) aemops.os_tuning contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One source per figure (issue 42). A measured figure lives in one file (SOURCES), with the date and the commit it
was measured on; README.md, docs/effect.md and docs/aap.md quote it from there, and the paragraph that quotes it links that file.

A figure is a number with a unit of measure (``428.72x``, ``16.9 s``, ``113.6 MiB/s``, ``5%``, ``11.95 ms``), and in a
paragraph that links a source, also any decimal number (``294.4``, a table cell). Code (fenced blocks and backtick
spans) is not prose and is skipped. A table takes the sources of the paragraph before it in the same section. Every
figure must be in one of the sources its paragraph links, as written (bold markers aside); a figure with a unit in a
paragraph that links no source has no source.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
SOURCES = ('bench/RESULTS.md', 'bench/READERS.md', 'docs/testing.md')
QUOTING = ('README.md', 'docs/effect.md', 'docs/aap.md')

UNITS = r'(?:x\b|%|\s?ms\b|\s?s\b|\s?min\b|\s?minutes\b|\s?MiB/s\b|\s?reads/s\b)'
WITH_UNIT = re.compile(r'(?<![\w.+-])(\d[\d,]*(?:\.\d+)?)(' + UNITS + ')')
DECIMAL = re.compile(r'(?<![\w.+-])(\d+\.\d+)(?![\w.])')
LINK = re.compile(r'\]\(([^)#\s]+)(?:#[^)]*)?\)')
DATE = re.compile(r'\b20\d\d-\d\d-\d\d')
COMMIT = re.compile(r'\b[0-9a-f]{7,40}\b')


def prose(text):
    """The text without fenced code blocks, backtick spans and bold markers."""
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    text = re.sub(r'`[^`\n]*`', '', text)
    return text.replace('**', '')


def blocks(text):
    """(sources, block) per blank-line separated block; a table inherits the sources of the block before it."""
    out = []
    inherited = ()
    for block in re.split(r'\n\s*\n', prose(text)):
        if block.lstrip().startswith('#'):
            inherited = ()
        linked = tuple(link for link in LINK.findall(block) if link.endswith('.md'))
        if linked:
            inherited = linked
        elif not block.lstrip().startswith('|'):
            inherited = ()
        out.append((linked or (inherited if block.lstrip().startswith('|') else ()), block))
    return out


def figures(block, sourced):
    found = [(number, number + unit) for number, unit in WITH_UNIT.findall(block)]
    if sourced:
        found += [(number, number) for number in DECIMAL.findall(WITH_UNIT.sub(' ', block))]
    return found


def in_source(number, written, source_text):
    """Whether source_text has the figure as written: the number, then its unit (a space between them or not)."""
    unit = written[len(number):].strip()
    after = r'\s?' + re.escape(unit) + r'(?!\w)' if unit else r'(?![\w]|\.\d)'
    return re.search(r'(?<![\w.])' + re.escape(number) + after, source_text) is not None


def resolve(quoting_path, link):
    return os.path.normpath(os.path.join(os.path.dirname(quoting_path), link))


def problems(quoting_path, text, read):
    """Every figure of text (the file quoting_path) that differs from its source or has none; read(path) -> text."""
    found = []
    for linked, block in blocks(text):
        sources = [resolve(quoting_path, link) for link in linked]
        sources = [path for path in sources if path in SOURCES]
        for number, written in figures(block, bool(sources)):
            if not sources:
                found.append('%s: %r has no source (link one of %s in its paragraph)'
                             % (quoting_path, written, ', '.join(SOURCES)))
            elif not any(in_source(number, written, prose(read(path))) for path in sources):
                found.append('%s: %r is not in %s' % (quoting_path, written, ' or '.join(sources)))
    return found


def read_top(path):
    with open(os.path.join(TOP, path)) as f:
        return f.read()


def test_every_quoted_figure_is_in_its_source():
    found = []
    for path in QUOTING:
        found += problems(path, read_top(path), read_top)
    assert not found, '\n'.join(found)


def test_every_source_has_a_date_and_a_commit():
    for path in SOURCES:
        text = read_top(path)
        assert DATE.search(text), '%s: no date of measurement' % path
        assert COMMIT.search(text), '%s: no commit' % path


def test_the_readme_quotes_a_figure_at_all():
    # Guards the checker itself: README.md quotes the readers' figures from bench/READERS.md.
    assert [f for linked, block in blocks(read_top('README.md')) if linked for f in figures(block, True)]


FAKE_SOURCE = 'Measured 2026-12-06 on commit `4482e98`.\n\n| before | **428.72x** |\n| cost | 16.9 s |\n'


def fake_read(path):
    return FAKE_SOURCE


def test_a_figure_that_differs_from_its_source_fails():
    text = 'It read 426.7x before ([bench/READERS.md](bench/READERS.md)).\n'
    assert problems('README.md', text, fake_read) == ["README.md: '426.7x' is not in bench/READERS.md"]


def test_a_figure_without_a_source_fails():
    text = 'It read 428.72x before.\n'
    assert problems('README.md', text, fake_read)[0].startswith("README.md: '428.72x' has no source")


def test_a_figure_linked_to_a_file_that_is_no_source_fails():
    text = 'It read 428.72x before ([docs/design.md](docs/design.md)).\n'
    assert 'has no source' in problems('README.md', text, fake_read)[0]


def test_a_quoted_figure_passes_and_a_table_takes_the_paragraph_before_it():
    text = ('Measured ([bench/READERS.md](bench/READERS.md)): 428.72x.\n\n| a | 428.72x |\n| b | 16.9 s |\n\n'
            '`1200 s` in code is no figure; ansible-core 2.16 in prose with no source is none either.\n')
    assert problems('README.md', text, fake_read) == []
    assert problems('README.md', text.replace('| b | 16.9 s |', '| b | 17.9 s |'), fake_read) == [
        "README.md: '17.9 s' is not in bench/READERS.md"]


def test_a_link_from_docs_resolves_against_docs():
    text = 'It read 428.72x ([READERS](../bench/READERS.md)).\n'
    assert problems('docs/effect.md', text, fake_read) == []
