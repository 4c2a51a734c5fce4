"""The Rust py-json serializer against Python's own ``json`` (hypothesis) and ``repr``."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import _core
from agentledger.bernstein.writer import row_line

KEYS = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=6)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12)
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=20,
)


ENVELOPE = ("ts", "elapsed_s", "index", "event", "prev_hash", "payload_hash", "event_hash")
# A first row's `hash_profile` names the journal's profile (hypothesis found one).
NOT_PAYLOAD = (*ENVELOPE, "hash_profile")
# Mostly rows as bernstein writes them (plain keys and event names, finite numbers, any
# text), which the Rust walk reads without a value tree; sometimes anything at all.
PLAIN_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_ABC0", min_size=1, max_size=12)
PLAIN_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(PLAIN_KEYS, children, max_size=4),
    max_leaves=12,
)
EVENTS = st.one_of(
    st.sampled_from(["tool_call", "activity.result", "run.started"]),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=8),
)
PAYLOADS = st.one_of(
    st.dictionaries(PLAIN_KEYS, PLAIN_VALUES, max_size=6),
    st.dictionaries(KEYS, VALUES, max_size=4),
).map(lambda payload: {k: v for k, v in payload.items() if k not in NOT_PAYLOAD})


def python_form(value: Any, ensure_ascii: bool = True) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii)
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_py_json_v1_is_python_json_dumps_of_what_json_loads_returns(value: Any) -> None:
    written = json.dumps(value)  # how bernstein's writer puts it on disk (ASCII)
    expected = python_form(json.loads(written))
    assert _core.pyjson_dumps(written.encode("ascii"), "py-json-v1") == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(EVENTS, PAYLOADS), min_size=2, max_size=5))
def test_a_journal_bernsteins_writer_chains_verifies_row_after_row(
    rows: list[tuple[str, dict[str, Any]]],
) -> None:
    """Written and hashed by Python's ``json`` (as bernstein's writer does), a journal's
    chain verifies: rows after the first are canonicalized straight from their text
    wherever the Rust walk can (lean_row.rs), the others through the value tree."""
    lines, head = [], ""
    for index, (event, payload) in enumerate(rows):
        line, head = row_line(event, payload, index, head, 1.5 + index)
        lines.append(line)
    (report,) = _core.bernstein_verify_journals(["".join(lines).encode("ascii")])
    assert report["chain_consistent"] and report["crash"] is None, report["error"]
    assert (report["head"], report["count"], report["row_finding_count"]) == (head, len(rows), 0)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_reading_raw_utf8_gives_the_same_form_as_reading_escapes(value: Any) -> None:
    raw = json.dumps(value, ensure_ascii=False)
    try:
        data = raw.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form; the escape test covers it
        return
    assert _core.pyjson_dumps(data, "py-json-v1") == python_form(json.loads(raw))


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_activity_form_matches_ensure_ascii_false_or_refuses_lone_surrogates(value: Any) -> None:
    written = json.dumps(value)
    try:
        expected = python_form(json.loads(written), ensure_ascii=False)
        expected.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(ValueError):
            _core.pyjson_dumps(written.encode("ascii"), "py-json-unicode")
        return
    assert _core.pyjson_dumps(written.encode("ascii"), "py-json-unicode") == expected


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_repr_is_pythons(x: float) -> None:
    assert _core.pyjson_float_repr(x) == repr(x)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_float_repr_is_pythons_over_raw_bit_patterns(bits: int) -> None:
    x = struct.unpack("<d", struct.pack("<Q", bits))[0]
    if math.isfinite(x):
        assert _core.pyjson_float_repr(x) == repr(x)


JSONISH = st.text(alphabet=list('{}[]",:0123456789.eE+-truefalsnNIiy \\u\t\n"abx'), max_size=24)


@settings(max_examples=600, deadline=None)
@given(JSONISH)
def test_the_parser_accepts_exactly_what_json_loads_accepts(text: str) -> None:
    try:
        expected: bytes | None = python_form(json.loads(text))
    except (ValueError, RecursionError):
        expected = None
    try:
        actual: bytes | None = _core.pyjson_dumps(text.encode("utf-8"), "py-json-v1")
    except ValueError:
        actual = None
    assert actual == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1, "a": 2}', b'{"a":2}'),
        ("[1, 1.0, -0, -0.0, 1E-7, 1e400]", b"[1,1.0,0,-0.0,1e-07,Infinity]"),
        ('["\\ud83d\\ude00", "\\ud800", "\\u2028"]', b'["\\ud83d\\ude00","\\ud800","\\u2028"]'),
        ("[9007199254740993, -18446744073709551617]", b"[9007199254740993,-18446744073709551617]"),
        ("[NaN, -Infinity]", b"[NaN,-Infinity]"),
    ],
)
def test_python_quirks_are_kept(text: str, expected: bytes) -> None:
    assert _core.pyjson_dumps(text.encode(), "py-json-v1") == expected


def test_integers_beyond_pythons_digit_limit_are_refused_like_json_loads() -> None:
    with pytest.raises(ValueError):
        _core.pyjson_dumps(b"1" * 4301, "py-json-v1")
    assert _core.pyjson_dumps(b"7" * 4300, "py-json-v1") == b"7" * 4300


def test_jcs_profile_sorts_by_utf16_and_writes_ecmascript_numbers() -> None:
    text = b'{"\\uffff": 1.0, "\\ud83d\\ude00": 1e-07, "n": 9007199254740993}'
    assert (
        _core.pyjson_dumps(text, "jcs-v2") == '{"n":9007199254740993,"😀":1e-7,"\uffff":1}'.encode()
    )
    with pytest.raises(ValueError):
        _core.pyjson_dumps(b"[NaN]", "jcs-v2")
