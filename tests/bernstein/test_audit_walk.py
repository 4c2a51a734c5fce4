"""The audit chain's walk in Rust (``_core.bernstein_audit_walk``, behind
``audit_chain.verify_audit``) against the Python walk of ``reference.py``: the same record
count, the same problems in the same order, the same ``activity.result`` records, on
hand-made chains that hit every reason and on chains hypothesis damages at random."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from agentledger import _core
from agentledger.bernstein.audit_chain import (
    GENESIS,
    SCHEME2_PREFIX,
    AuditChain,
    hkdf_sha256,
    verify_audit,
)
from agentledger.bernstein.workdir import DirectoryWorkdir
from agentledger.verify.bernstein_runs import audit_findings

from . import reference
from .bernstein_testkit import SHAPES, SMALL

MASTER = b"m" * 32
REASONS = {
    "missing trailing newline",
    "undecodable bytes",
    "invalid JSON",
    "entry is not a JSON object",
    "unsupported audit scheme",
    "non-canonical line bytes",
    "prev_hmac mismatch",
    "HMAC mismatch",
    "prev_chain_digest does not match prev_hmac",
}
AUDITED = (*_core.AUDITED_FIELDS, "journal_event_hash")


def _value(value: object) -> tuple[str, str]:
    """A value compared by type and repr (NaN is not equal to itself)."""
    return type(value).__name__, repr(value)


def rust_shape(chain: AuditChain) -> tuple[Any, ...]:
    return (
        chain.records,
        [(p.segment, p.line, p.reason, p.run_id) for p in chain.problems],
        [
            (
                r.run_id,
                r.stage_id,
                _value(r.journal_index),
                r.segment,
                r.line,
                {n: str(v) for n, v in r.details.items()},
            )
            for r in chain.walked
        ],
        chain.mirrors_activities,
    )


def reference_shape(walk: reference.ReferenceWalk) -> tuple[Any, ...]:
    return (
        walk.records,
        [(p.segment, p.line, p.reason, p.run_id) for p in walk.problems],
        [
            (
                r.run_id,
                r.stage_id,
                _value(r.journal_index),
                r.segment,
                r.line,
                {n: str(r.details[n]) for n in AUDITED if n in r.details},
            )
            for r in walk.walked
        ],
        bool(walk.walked) or any(p.run_id is not None for p in walk.problems),
    )


def agree(segments: list[tuple[str, bytes]], master: bytes | None) -> reference.ReferenceWalk:
    """Assert both walks give the same; the reference's walk."""
    expected = reference.walk_audit(segments, master)
    got = verify_audit(segments, master)
    assert rust_shape(got) == reference_shape(expected)
    assert got.authenticated is (master is not None)
    # A record audits a journal row only through a 64-bit index: any other value, an
    # integer past either end included, leaves it unindexed.
    unindexed = [
        r.line
        for r in got.walked
        if type(r.journal_index) is not int or not -(2**63) <= r.journal_index < 2**63
    ]
    assert [r.line for r in got.unindexed] == unindexed
    return expected


# ---- writing chains -----------------------------------------------------------------------


def sign(record: dict[str, Any], head: str, master: bytes) -> str:
    """The record's line after ``head`` as bernstein's writer makes it (scheme from the
    record, 1 when absent)."""
    scheme = record.get("scheme", 1)
    key, prefix = (hkdf_sha256(master, b"audit"), SCHEME2_PREFIX) if scheme == 2 else (master, b"")
    body = {k: v for k, v in record.items() if k != "hmac"}
    body["prev_hmac"] = head
    text = json.dumps(body, sort_keys=True)
    mac = hmac.new(key, prefix + head.encode() + text.encode(), hashlib.sha256).hexdigest()
    return json.dumps({**body, "hmac": mac}, sort_keys=True)


def chain(records: list[dict[str, Any]], master: bytes = MASTER) -> list[str]:
    """Signed lines, each linked to the one before."""
    head, lines = GENESIS, []
    for record in records:
        line = sign(record, head, master)
        lines.append(line)
        head = json.loads(line)["hmac"]
    return lines


def activity(run_id: object, index: object, **details: object) -> dict[str, Any]:
    return {
        "actor": "orchestrator",
        "event_type": "activity.result",
        "scheme": 2,
        "details": {"run_id": run_id, "journal_index": index, "stage_id": "s", **details},
    }


def segment(lines: Sequence[str | bytes], newline: bool = True) -> bytes:
    data = b"\n".join(line.encode() if isinstance(line, str) else line for line in lines)
    return data + b"\n" if newline else data


# ---- hand-made chains ---------------------------------------------------------------------


def hand_made() -> dict[str, list[tuple[str, bytes]]]:
    a, b, c = chain(
        [
            activity("r1", 0, kind="data"),
            {"event_type": "task.done", "details": {"run_id": "r1"}},  # scheme 1
            activity("r1", 1, journal_event_hash="e"),
        ]
    )
    other = chain([activity("r2", 0)], b"another key")[0]
    record_b = json.loads(b)
    cases: dict[str, list[tuple[str, bytes]]] = {
        "clean": [("a.jsonl", segment([a, b, c]))],
        "empty segments": [("a.jsonl", b""), ("b.jsonl", segment([a])), ("c.jsonl", b"\n\n")],
        "missing trailing newline": [("a.jsonl", segment([a, b], newline=False))],
        "missing newline in the middle": [
            ("a.jsonl", segment([a], newline=False)),
            ("b.jsonl", segment([b, c])),
        ],
        "undecodable bytes": [("a.jsonl", segment([a, b"\xff\xfe\xfd{", b, c]))],
        "a surrogate encoded in UTF-8": [("a.jsonl", segment([a, b'"\xed\xa0\x80"', b]))],
        "UTF-16 without a BOM": [("a.jsonl", segment([a, '{"x": 1}'.encode("utf-16-le"), b]))],
        "UTF-16 with a BOM, odd length": [("a.jsonl", segment([b"\xff\xfe{\x00}", a]))],
        "UTF-32": [("a.jsonl", segment([a, "[1]".encode("utf-32-be"), b]))],
        "lone surrogates in UTF-16, UTF-32 and UTF-8": [
            (
                "a.jsonl",
                segment(
                    [
                        '"\ud800"'.encode("utf-16-le", "surrogatepass"),
                        b'\x00"\xd8\x00',  # a high surrogate that ends the data
                        '{"a": "\udc00x"}'.encode("utf-32-le", "surrogatepass"),
                        b'{"a": "\xed\xa0\xbd\xed\xb8\x80"}',  # a pair, encoded apart
                        b"\xf4\x90\x80\x80",  # beyond U+10FFFF
                        b"\xff\xfe\x00\x00",  # a BOM and nothing
                        a,
                    ]
                ),
            )
        ],
        "a UTF-8 BOM": [("a.jsonl", segment([a, b"\xef\xbb\xbf" + b.encode(), c]))],
        "invalid JSON": [("a.jsonl", segment([a, "{", "[1,]", "NaNx", b, c]))],
        "too deep": [("a.jsonl", segment([a, "[" * 5000 + "]" * 5000, b]))],
        "a huge int": [("a.jsonl", segment([a, "1" * 4301, "[" + "9" * 4300 + "]", b]))],
        "not an object": [("a.jsonl", segment([a, "[1]", '"x"', "NaN", "-Infinity", "null", b]))],
        "unsupported scheme": [
            ("a.jsonl", segment([a, json.dumps({**record_b, "scheme": s}, sort_keys=True), b]))
            for s in (3, True, 0, None, "2", [2])
        ],
        "scheme as a float": [
            ("a.jsonl", segment([a, json.dumps({**record_b, "scheme": 2.0}, sort_keys=True)]))
        ],
        "non-canonical": [("a.jsonl", segment([a, b.replace(", ", ",", 1), c]))],
        "non-canonical: a duplicate key": [
            ("a.jsonl", segment([a.replace('{"actor"', '{"actor": "x", "actor"', 1), b]))
        ],
        "non-canonical: NaN and a huge int kept": [
            ("a.jsonl", segment(chain([{"details": {"x": float("nan"), "y": 10**400}}])))
        ],
        "prev_hmac mismatch, the head moves": [("a.jsonl", segment([a, c, b, c]))],
        "HMAC mismatch": [("a.jsonl", segment([a, other, b]))],
        "stated predecessor": [
            ("a.jsonl", segment(chain([activity("r3", 0, prev_chain_digest="f" * 64)])))
        ],
        "stated predecessor, exempt": [
            (
                "a.jsonl",
                segment(
                    chain(
                        [
                            {
                                "event_type": "skill.catalog.install",
                                "details": {"prev_chain_digest": "f" * 64},
                            },
                            {"event_type": ["list"], "details": {"prev_chain_digest": "f" * 64}},
                        ]
                    )
                ),
            )
        ],
        "journal_index of every kind": [
            (
                "a.jsonl",
                segment(
                    chain(
                        [activity("r4", i) for i in ("4", True, 2**70, 1.5, None, [1], {"a": 1})]
                        + [{"event_type": "activity.result", "details": [1]}]
                        + [{"event_type": "activity.result"}]
                    )
                ),
            )
        ],
        "run_id of every kind": [
            (
                "a.jsonl",
                segment(
                    chain(
                        [
                            activity(r, 0)
                            for r in (5, None, "\ud800x", "caf\u00e9", {"b": [1.0, "q'"]})
                        ]
                    )
                ),
            )
        ],
        "lone surrogate in a head": [
            (
                "a.jsonl",
                segment(
                    [
                        json.dumps({"hmac": "\udc00", "prev_hmac": GENESIS}, sort_keys=True),
                        json.dumps({"hmac": "x", "prev_hmac": "\udc00"}, sort_keys=True),
                        json.dumps({"hmac": "\u00e9", "prev_hmac": "x"}, sort_keys=True),
                        json.dumps({"hmac": 5, "prev_hmac": "\u00e9"}, sort_keys=True),
                        json.dumps({"prev_hmac": "5"}, sort_keys=True),
                        json.dumps({"prev_hmac": ""}, sort_keys=True),
                    ]
                ),
            )
        ],
        "duplicate keys in details": [
            (
                "a.jsonl",
                segment(
                    [
                        '{"details": {"journal_index": 1, "journal_index": 2, "run_id": "r"}, '
                        '"event_type": "activity.result", "prev_hmac": "' + GENESIS + '"}'
                    ]
                ),
            )
        ],
    }
    return cases


CASES = hand_made()


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("master", [None, MASTER, b"wrong"], ids=["unkeyed", "keyed", "wrong-key"])
def test_the_rust_walk_is_the_python_walk_on_hand_made_chains(
    name: str, master: bytes | None
) -> None:
    agree(CASES[name], master)


def test_the_hand_made_chains_name_every_reason() -> None:
    seen = {
        p.reason for case in CASES.values() for p in reference.walk_audit(case, MASTER).problems
    }
    assert seen == REASONS
    # And the reference's answers where the old walk raised are the ones Rust gives.
    head = reference.walk_audit(CASES["lone surrogate in a head"], MASTER)
    assert [p.reason for p in head.problems] == ["HMAC mismatch"] * 6
    unkeyed = reference.walk_audit(CASES["lone surrogate in a head"], None)
    assert unkeyed.problems == []


def test_records_that_audit_no_row_are_verify_findings_of_their_run() -> None:
    chain_ = verify_audit(CASES["journal_index of every kind"], MASTER)
    found = audit_findings(chain_)
    named = {
        run: [(d.check, d.expected, d.actual, d.subject) for d in divergences]
        for run, divergences in found.items()
    }
    mismatch = "bernstein.audit.mismatch"
    assert named == {
        "r4": [
            (mismatch, "an integer", "'4'", "journal_index"),
            (mismatch, "an integer", "True", "journal_index"),
            (mismatch, "a 64-bit integer", repr(2**70), "journal_index"),
            (mismatch, "an integer", "1.5", "journal_index"),
            (mismatch, "an integer", "None", "journal_index"),
            (mismatch, "an integer", "[1]", "journal_index"),
            (mismatch, "an integer", "{'a': 1}", "journal_index"),
        ],
        "": [(mismatch, "an integer", "None", "journal_index")] * 2,
    }


@pytest.mark.parametrize("root", [SMALL, SHAPES], ids=["small", "shapes"])
def test_the_rust_walk_is_the_python_walk_on_the_fixtures(root: Any) -> None:
    segments = DirectoryWorkdir(root).audit_segments()
    assert segments
    master = (root / "audit.key").read_bytes().strip() if (root / "audit.key").exists() else None
    for key in (None, master, b"wrong"):
        walk = agree(segments, key)
        assert walk.walked


# ---- hypothesis ---------------------------------------------------------------------------

TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=6)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
RECORDS = st.fixed_dictionaries(
    {},
    optional={
        "event_type": st.sampled_from(
            ["activity.result", "activity.result", "task.done", "skill.catalog.upgrade"]
        )
        | VALUES,
        "scheme": st.sampled_from([1, 2, 2, 2.0, 3, True]),
        "actor": VALUES,
        "details": st.fixed_dictionaries(
            {},
            optional={
                "run_id": st.sampled_from(["r1", "r2"]) | VALUES,
                "journal_index": st.integers(0, 5) | VALUES,
                "stage_id": VALUES,
                "kind": VALUES,
                "journal_event_hash": VALUES,
                "prev_chain_digest": st.sampled_from(["", "f" * 64]) | VALUES,
            },
        )
        | VALUES,
    },
)
DAMAGE = st.sampled_from(
    [
        "none",
        "none",
        "none",
        "bytes",
        "hmac",
        "prev",
        "spaces",
        "duplicate",
        "drop",
        "swap",
        "utf16",
        "blank",
        "surrogate",
        "array",
    ]
)


def damage(lines: list[bytes], at: int, how: str, junk: bytes) -> list[bytes]:
    if not lines:
        return [junk]
    at %= len(lines)
    line = lines[at]
    changed: list[bytes]
    if how == "bytes":
        changed = [junk]
    elif how == "hmac":
        changed = [line.replace(b'"hmac": "', b'"hmac": "0', 1)]
    elif how == "prev":
        changed = [line.replace(b'"prev_hmac": "', b'"prev_hmac": "1', 1)]
    elif how == "spaces":
        changed = [line.replace(b": ", b":", 1)]
    elif how == "duplicate":
        changed = [line.replace(b"{", b'{"prev_hmac": 0, ', 1)]
    elif how == "drop":
        changed = []
    elif how == "swap":
        return [*lines[:at], *lines[at + 1 : at + 2], line, *lines[at + 2 :]]
    elif how == "utf16":
        # Bytes that are not UTF-8 become lone surrogates, which UTF-16 then holds.
        text = line.decode("utf-8", "surrogateescape")
        changed = [text.encode("utf-16-le", "surrogatepass")]
    elif how == "blank":
        changed = [b"", line, b""]
    elif how == "array":
        changed = [b"[" + line + b"]"]
    elif how == "surrogate":
        changed = [line.replace(b'"', b'"\xed\xb0\x80', 1)]
    else:
        changed = [line]
    return [*lines[:at], *changed, *lines[at + 1 :]]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(RECORDS, max_size=6),
    damages=st.lists(st.tuples(st.integers(0, 10), DAMAGE, st.binary(max_size=12)), max_size=3),
    cuts=st.lists(st.integers(0, 8), max_size=2),
    unterminated=st.booleans(),
    master=st.sampled_from([None, MASTER, b"wrong"]),
)
@example(  # an index one below the 64-bit range: unindexed, as one above it is
    records=[
        {"event_type": "activity.result", "details": {"journal_index": -(2**63) - 1}},
        {"event_type": "activity.result", "details": {"journal_index": -(2**63)}},
    ],
    damages=[],
    cuts=[],
    unterminated=False,
    master=None,
)
def test_the_rust_walk_is_the_python_walk_on_damaged_chains(
    records: list[dict[str, Any]],
    damages: list[tuple[int, str, bytes]],
    cuts: list[int],
    unterminated: bool,
    master: bytes | None,
) -> None:
    lines = [line.encode() for line in chain(records)]
    for at, how, junk in damages:
        lines = damage(lines, at, how, junk)
    # Cut the lines into segments (chain order), the last one maybe without its newline.
    bounds = sorted({min(c, len(lines)) for c in cuts} | {0, len(lines)})
    segments = [
        (f"s{i}.jsonl", segment(list(lines[start:end])))
        for i, (start, end) in enumerate(pairwise(bounds))
    ] or [("s0.jsonl", b"")]
    if unterminated and segments[-1][1]:
        name, data = segments[-1]
        segments[-1] = (name, data[:-1])
    walk = agree(segments, master)
    for problem in walk.problems:
        event(problem.reason)
