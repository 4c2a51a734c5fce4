"""The records a checkpoint counts, counted in Rust (``_core.bernstein_canonical_records``,
behind ``checkpoints.origin_and_count``) against the reference ``checkpoints.
canonical_records``: the same count and the same first record, on the audit walk's
hand-made chains, the fixtures, chains hypothesis damages, single lines of every shape
Python's ``json`` reads differently, and lines nested past what Rust answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import _core
from agentledger.bernstein import checkpoints as cp
from agentledger.bernstein.workdir import DirectoryWorkdir

from .bernstein_testkit import SHAPES, SMALL
from .test_audit_walk import CASES, DAMAGE, RECORDS, VALUES, chain, damage, segment


def first_line(raw: bytes) -> int | None:
    """The reference's first record, as a line number."""
    lines = raw.split(b"\n")
    return next((n for n, line in enumerate(lines) if cp.canonical_records(line)), None)


def agree(raw: bytes) -> tuple[int, tuple[int, int] | None] | None:
    """Assert Rust counts ``raw``'s records as the reference does, and finds the same
    first one, unless it declines; ``origin_and_count`` agrees either way."""
    records = cp.canonical_records(raw)
    counted = _core.bernstein_canonical_records(raw)
    if counted is not None:
        found, span = counted
        assert found == len(records)
        first = first_line(raw)
        if span is None:
            assert first is None
        else:
            assert raw.count(b"\n", 0, span[0]) == first
            assert raw[span[0] : span[1]] == raw.split(b"\n")[first]
            assert raw[span[0] : span[1]] + b"\n" in raw + b"\n"
    origin = str(records[0]["hmac"]) if records else None
    assert cp.origin_and_count([("s", raw)]) == (origin, len(records))
    return counted


def test_the_audit_walks_chains_are_counted_as_the_reference_counts_them() -> None:
    counts = {name: [agree(data) for _, data in case] for name, case in CASES.items()}
    assert len(counts) > 20
    declined = sorted(name for name, counted in counts.items() if None in counted)
    assert declined == ["too deep"]
    assert any(c is not None and c[0] > 1 for counted in counts.values() for c in counted)


@pytest.mark.parametrize("root", [SMALL, SHAPES], ids=["small", "shapes"])
def test_the_fixtures_chains_are_counted_as_the_reference_counts_them(root: Any) -> None:
    segments = DirectoryWorkdir(root).audit_segments()
    assert segments
    for _name, data in segments:
        assert agree(data) is not None
    assert cp.origin_and_count(segments)[1] > 0


def deep(depth: int) -> bytes:
    return b'{"hmac": ' + b"[" * (depth - 1) + b"1" + b"]" * (depth - 1) + b"}"


# Each line is read by Python's json in a way a hand-written parser could get wrong.
LINES = [
    b'{"hmac": "a"}',
    b'{"hmac":"a"}',
    b'{"hmac": "a"} ',
    b' {"hmac": "a"}',
    b'{"hmac": "a"}\r',
    b'{"a": 1, "hmac": "a"}',
    b'{"hmac": "a", "a": 1}',
    b'{"hmac": "a", "hmac": "a"}',
    b'{"a": 1, "a": 2, "hmac": "b"}',
    b'{"hmac": NaN}',
    b'{"hmac": Infinity, "x": -Infinity}',
    b'{"hmac": 1e400}',
    b'{"hmac": 1e5}',
    b'{"hmac": 100000.0}',
    b'{"hmac": 1E+2}',
    b'{"hmac": -0}',
    b'{"hmac": -0.0}',
    b'{"hmac": 1.0}',
    b'{"hmac": 0.1}',
    b'{"hmac": 1.5e-07}',
    b'{"hmac": 5e-324}',
    b'{"hmac": 1.7976931348623157e+308}',
    b'{"hmac": 00}',
    b'{"hmac": ' + b"9" * 4300 + b"}",
    b'{"hmac": ' + b"9" * 4301 + b"}",
    b'{"hmac": -' + b"9" * 4300 + b"}",
    b'{"hmac": "\\u00e9"}',
    b'{"hmac": "\\u00E9"}',
    '{"hmac": "\u00e9"}'.encode(),
    b'{"hmac": "\\ud800"}',
    b'{"hmac": "\\ud83d\\ude00"}',
    b'{"hmac": "\\/"}',
    b'{"hmac": "/"}',
    b'{"hmac": "\\u007f"}',
    b'{"hmac": "\x7f"}',
    b'{"hmac": "\\u001f"}',
    b'{"hmac": "\x1f"}',
    b'{"hmac": "\\t\\n\\r\\b\\f\\"\\\\"}',
    b'{"hmac": "a\x00"}',
    b'\xef\xbb\xbf{"hmac": "a"}',
    '{"hmac": "a"}'.encode("utf-16-le"),
    '{"hmac": "a"}'.encode("utf-32"),
    b'{"hmac": true, "t": false, "n": null}',
    b'{"hmac": [1, {"b": 2, "a": [3]}]}',
    b'{"hmac": {"b": 1, "a": 2}}',
    b'{"hmac": {"a": 2, "b": 1}}',
    b'{"hmac": []}',
    b'{"hmac": {}}',
    b'{"hmac": [1,2]}',
    b'{"\\u00e9": 1, "hmac": "x", "z": 2}',
    b'{"B": 1, "a": 2, "hmac": 3}',
    b'{"hmac": "x", "\\ud800": 1, "\\ud83d\\ude00": 2, "\\uffff": 3}',
    b'{"hmac": "x", "\\ud83d\\ude00": 2, "\\ud800": 1, "\\uffff": 3}',
    b'[{"hmac": "a"}]',
    b'"hmac"',
    b"{}",
    b'{"hmac"}',
    b"{",
    b"",
    deep(150),
    deep(200),
    deep(201),
    deep(995),
    deep(5000),
]


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_each_line_is_a_record_exactly_when_the_reference_says(line: bytes) -> None:
    agree(line)
    agree(b'{"hmac": "before"}\n' + line + b"\n")
    agree(line + b'\n{"hmac": "after"}\n')


def test_rust_declines_only_nesting_near_pythons_recursion_limit() -> None:
    declined = [line for line in LINES if _core.bernstein_canonical_records(line) is None]
    assert declined == [deep(201), deep(995), deep(5000)]
    # Declined, the whole segment is the reference's: its other records still count.
    segment_ = b'{"hmac": "first"}\n' + deep(995) + b'\n{"hmac": "x"}\n'
    assert cp.origin_and_count([("a", segment_), ("b", b'{"hmac": "y"}\n')]) == ("first", 3)


@st.composite
def styled_lines(draw: st.DrawFn) -> bytes:
    """A value written by ``json.dumps`` with any of its options, an ``hmac`` most times:
    records, and lines one option away from being one."""
    value: Any = draw(st.dictionaries(st.text(max_size=4), VALUES, max_size=4))
    if draw(st.booleans()):
        value["hmac"] = draw(VALUES)
    text = json.dumps(
        value,
        sort_keys=draw(st.sampled_from([True, True, False])),
        ensure_ascii=draw(st.sampled_from([True, True, False])),
        separators=draw(st.sampled_from([None, None, (",", ":"), (", ", ":")])),
    )
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(RECORDS, max_size=5),
    styled=st.lists(styled_lines(), max_size=4),
    damages=st.lists(st.tuples(st.integers(0, 10), DAMAGE, st.binary(max_size=12)), max_size=3),
    unterminated=st.booleans(),
)
def test_rust_counts_damaged_chains_as_the_reference_does(
    records: list[dict[str, Any]],
    styled: list[bytes],
    damages: list[tuple[int, str, bytes]],
    unterminated: bool,
) -> None:
    lines = [line.encode() for line in chain(records)] + styled
    for at, how, junk in damages:
        lines = damage(lines, at, how, junk)
    assert agree(segment(lines, newline=not unterminated)) is not None
