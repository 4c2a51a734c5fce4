"""What ``runs`` lists of an imported journal, counted in Rust (``_core.
bernstein_journal_summary``, behind ``view.summarize``) against the reference ``view.
summarize_reference``: the same events, activities, discarded lines and last event time,
on the fixtures' journals, single lines of every shape Python's ``json`` reads
differently, and journals hypothesis builds and damages."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import _core
from agentledger.bernstein import view

from .bernstein_testkit import SHAPES, SMALL
from .test_canonical_records import LINES, deep

# The records test's lines with ``event`` for ``hmac``: the same reading traps.
EVENTS = [line.replace(b"hmac", b"event") for line in LINES]
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
SPACES = [b"", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\xc2\xa0", b"\x00"]
ALL = EVENTS + ACTIVITIES + TIMES + SPACES
DECLINED = [line.replace(b"hmac", b"event") for line in (deep(201), deep(995), deep(5000))]


def agree(data: bytes) -> bool:
    """Assert the two count ``data`` alike; whether Rust answered."""
    assert view.summarize(data) == view.summarize_reference(data)
    return _core.bernstein_journal_summary(data) is not None


@pytest.mark.parametrize("root", [SMALL, SHAPES], ids=["small", "shapes"])
def test_the_fixtures_journals_are_counted_as_the_reference_counts_them(root: Path) -> None:
    journals = sorted(root.glob(".sdd/runs/*/journal.jsonl"))
    assert journals
    for journal in journals:
        data = journal.read_bytes()
        assert agree(data)
        counted = view.summarize(data)
        assert counted.events > 0 and counted.last_ts is not None


@pytest.mark.parametrize("line", ALL, ids=range(len(ALL)))
def test_each_line_counts_as_the_reference_counts_it(line: bytes) -> None:
    before = b'{"event": "activity.result", "ts": 1}\n'
    for data in (line, line + b"\n", before + line + b"\n", line + b"\n" + before):
        answered = agree(data)
        assert answered or line in DECLINED


def test_rust_declines_only_nesting_near_pythons_recursion_limit() -> None:
    declined = [line for line in EVENTS if _core.bernstein_journal_summary(line) is None]
    assert declined == DECLINED
    # Declined, the journal is the reference's: its other lines still count, and a line
    # Python's own stack cannot read is discarded, not a crash.
    data = b'{"event": "activity.result"}\n' + DECLINED[1] + b'\n{"event": "x"}\n'
    assert view.summarize(data) == view.JournalSummary(events=2, activities=1, discarded=1)


def test_the_counts_say_what_each_line_is() -> None:
    data = b"\n".join([ACTIVITIES[0], ACTIVITIES[1], b"[1]", b"", TIMES[0], b"{"]) + b"\n"
    assert view.summarize(data) == view.JournalSummary(
        events=3, activities=2, discarded=3, last_ts="2026-01-01T00:00:00.038Z"
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(st.sampled_from(ALL) | st.binary(max_size=24), max_size=8),
    cuts=st.lists(st.tuples(st.integers(0, 400), st.binary(max_size=6)), max_size=3),
    newline=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    terminated=st.booleans(),
)
def test_built_and_damaged_journals_count_as_the_reference_counts_them(
    lines: list[bytes], cuts: list[tuple[int, bytes]], newline: bytes, terminated: bool
) -> None:
    data = newline.join(lines)
    data += newline if terminated else b""
    for at, junk in cuts:
        at = min(at, len(data))
        data = data[:at] + junk + data[at + len(junk) :]
    agree(data)
