"""What ``runs`` and ``show`` say of an imported journal, read in Rust by the reader
verify's walk uses (``_core.bernstein_journal_summary`` behind ``view.summarize``,
``_core.bernstein_journal_lines`` behind ``view.read_imported_run``), against the plain
Python reference of bernstein's tolerant reader (``view.read_lines_reference``,
``view.summarize_reference``): the same lines kept and discarded under the same physical
numbers, the same events, activities and last event time, on the fixtures' journals,
single lines of every shape Python's ``json`` reads differently, and journals hypothesis
builds and damages. Then, through the commands, ``show`` names the lines ``verify`` names."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import _core
from agentledger.bernstein import view

from .bernstein_testkit import SHAPES, SMALL
from .test_canonical_records import LINES, deep

# The records test's lines with ``event`` for ``hmac``: the same reading traps. Nesting
# deeper than ``SURE_DEPTH`` (200) is left out: there Python's answer depends on its stack
# and its recursion limit (which hypothesis raises), and the reader's, as verify's, is its
# own limit (990 levels: ``test_nesting_past_the_readers_limit_is_discarded``).
PAST_SURE = [deep(n).replace(b"hmac", b"event") for n in (201, 995, 5000)]
EVENTS = [line.replace(b"hmac", b"event") for line in LINES]
EVENTS = [line for line in EVENTS if line not in PAST_SURE]
ACTIVITIES = [
    b'{"event": "activity.result"}',
    b'{"event": "activity\\u002eresult", "ts": 1767225600.5}',
    b'{"event": "activity.result", "event": "stage.completed"}',
    b'{"event": "stage.completed", "event": "activity.result"}',
    b'{"event": "activity.result "}',
    b'{"event": "Activity.result"}',
    b'{"event": ["activity.result"]}',
    b'{"Event": "activity.result"}',
    '{"event": "activity.result"}'.encode("utf-16"),
    b'\xef\xbb\xbf{"event": "activity.result"}',
    b'{"event": "activity.result", "x": "\\ud800"}',
    b'{"event": "activity.result", "x": "\xff"}',
    b'{"event": "activity.result", "x": "\xed\xa0\x80"}',
]
TIMES = [
    b'{"event": "e", "ts": 1767225600.038743}',
    b'{"event": "e", "ts": 1767225600}',
    b'{"event": "e", "ts": -1}',
    b'{"event": "e", "ts": 1e400}',
    b'{"event": "e", "ts": NaN}',
    b'{"event": "e", "ts": 1e20}',
    b'{"event": "e", "ts": true}',
    b'{"event": "e", "ts": "1767225600"}',
    b'{"event": "e", "ts": ' + b"9" * 400 + b"}",
    b'{"event": "e"}',
]
# What ``str.strip()`` strips (Unicode whitespace, in UTF-8), and what it does not.
SPACES = [b"", b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"\xc2\xa0", b"\xc2\x85", b"\xe2\x80\xa8"]
SPACES += [b"\xe3\x80\x80", b"\x00", b"\xef\xbb\xbf"]
PADDED = [space + b'{"event": "e"}' + space for space in SPACES]
ALL = EVENTS + ACTIVITIES + TIMES + SPACES + PADDED


def agree(data: bytes) -> None:
    """Assert Rust and the reference read ``data`` alike: its lines, and its counts."""
    lines = [(number, kept) for number, kept, _, _ in _core.bernstein_journal_lines(data)]
    assert lines == [(number, row is not None) for number, row in view.read_lines_reference(data)]
    assert view.summarize(data) == view.summarize_reference(data)


@pytest.mark.parametrize("root", [SMALL, SHAPES], ids=["small", "shapes"])
def test_the_fixtures_journals_are_read_as_the_reference_reads_them(root: Path) -> None:
    journals = sorted(root.glob(".sdd/runs/*/journal.jsonl"))
    assert journals
    for journal in journals:
        data = journal.read_bytes()
        agree(data)
        counted = view.summarize(data)
        assert counted.events > 0 and counted.last_ts is not None


@pytest.mark.parametrize("line", ALL, ids=range(len(ALL)))
def test_each_line_is_read_as_the_reference_reads_it(line: bytes) -> None:
    before = b'{"event": "activity.result", "ts": 1}'
    for newline in (b"\n", b"\r\n", b"\r"):
        for data in (line, line + newline, before + newline + line, line + newline + before):
            agree(data)


def test_nesting_past_the_readers_limit_is_discarded() -> None:
    # 200 and 201 levels are read, 995 and 5000 discarded: by verify's reader too.
    data = b"\n".join([deep(200).replace(b"hmac", b"event"), *PAST_SURE])
    assert [kept for _, kept, _, _ in _core.bernstein_journal_lines(data)] == [
        True,
        True,
        False,
        False,
    ]
    assert view.summarize(data) == view.JournalSummary(events=2, discarded=2)


def test_lines_are_numbered_as_physical_lines_and_blank_ones_skipped() -> None:
    data = b"".join(
        [
            ACTIVITIES[0] + b"\n",  # 0
            b"\n",  # 1: blank, skipped
            b"[1]\r",  # 2: ends at a lone carriage return; not an object
            b" \t\xc2\xa0\r\n",  # 3: blank once stripped
            TIMES[0] + b"\r\n",  # 4
            b"{\xff}\n",  # 5: not UTF-8
            b"{",  # 6: cut short, no newline
        ]
    )
    read = _core.bernstein_journal_lines(data)
    assert [(number, kept) for number, kept, _, _ in read] == [
        (0, True),
        (2, False),
        (4, True),
        (5, False),
        (6, False),
    ]
    assert [data[start:end] for _, _, start, end in read][1:3] == [b"[1]", TIMES[0]]
    assert view.summarize(data) == view.JournalSummary(
        events=2, activities=1, discarded=3, last_ts="2026-01-01T00:00:00.038Z"
    )
    agree(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(st.sampled_from(ALL) | st.binary(max_size=24), max_size=8),
    cuts=st.lists(st.tuples(st.integers(0, 400), st.binary(max_size=6)), max_size=3),
    newline=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    terminated=st.booleans(),
)
def test_built_and_damaged_journals_are_read_as_the_reference_reads_them(
    lines: list[bytes], cuts: list[tuple[int, bytes]], newline: bytes, terminated: bool
) -> None:
    data = newline.join(lines)
    data += newline if terminated else b""
    for at, junk in cuts:
        at = min(at, len(data))
        data = data[:at] + junk + data[at + len(junk) :]
    agree(data)
