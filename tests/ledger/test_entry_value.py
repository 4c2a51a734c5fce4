"""An Entry is an immutable value: it shares no object with its caller, equal by content."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from agentledger import Entry, Ledger


def test_mutating_the_appended_body_leaves_the_entry_unchanged(ledger: Ledger) -> None:
    body: dict[str, Any] = {"n": 1, "items": [1, 2]}
    entry = ledger.run("r").append("step", body)
    raw = entry.raw
    body["n"] = 2
    body["items"].append(3)
    body["new"] = True
    assert entry.body == {"n": 1, "items": [1, 2]}
    assert entry.raw == raw


def test_mutating_a_batch_body_leaves_every_entry_unchanged(ledger: Ledger) -> None:
    bodies: list[dict[str, Any]] = [{"i": i} for i in range(3)]
    entries = ledger.run("r").append_many(("step", body) for body in bodies)
    for body in bodies:
        body.clear()
    assert [entry.body for entry in entries] == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_mutating_the_returned_body_changes_no_entry(ledger: Ledger) -> None:
    entry = ledger.run("r").append("step", {"n": 1})
    entry.body["n"] = 99
    assert entry.body == {"n": 1}


def test_an_appended_entry_equals_the_same_entry_read_back(ledger: Ledger) -> None:
    appended = ledger.run("r").append_many([("step", {"n": 1}), ("note", {"text": "é"})])
    read_back = list(ledger.run("r").entries())
    assert appended == read_back
    assert [hash(e) for e in appended] == [hash(e) for e in read_back]
    assert appended[0] != appended[1]


def test_an_entry_is_frozen(ledger: Ledger) -> None:
    entry = ledger.run("r").append("step", {"n": 1})
    for name in ("run_id", "seq", "kind", "hash", "prev", "ts", "body", "raw"):
        with pytest.raises(AttributeError):
            setattr(entry, name, None)


def test_an_entry_keeps_its_public_fields(ledger: Ledger) -> None:
    first, second = ledger.run("r").append_many([("step", {"n": 1}), ("step", {"n": 2})])
    assert (second.run_id, second.seq, second.kind, second.prev) == ("r", 1, "step", first.hash)
    assert second.hash.startswith("blake3:") and len(second.hash) == 71
    assert second.ts == first.ts
    assert second.raw.startswith(b'{"body":{"n":2}')
    assert "Entry(run_id='r', seq=1" in repr(second)


def test_an_entry_copies_and_pickles_to_an_equal_entry(ledger: Ledger) -> None:
    entry = ledger.run("r").append("step", {"n": [1]})
    assert copy.copy(entry) == entry
    assert copy.deepcopy(entry) == entry
    assert pickle.loads(pickle.dumps(entry)) == entry


def test_a_constructed_entry_copies_its_body() -> None:
    body: dict[str, Any] = {"n": [1]}
    entry = Entry("r", 0, "step", "blake3:00", "", "", body, b"{}")
    body["n"].append(2)
    assert entry.body == {"n": [1]}
    entry.body["n"].append(3)
    assert entry.body == {"n": [1]}


def test_bytes_that_are_not_an_entry_do_not_make_one() -> None:
    with pytest.raises(ValueError):
        Entry.from_row("r", 0, "step", bytes(32), b"not json")
    with pytest.raises(KeyError):
        Entry.from_row("r", 0, "step", bytes(32), b'{"prev": "", "ts": ""}')
    with pytest.raises(TypeError):
        Entry.from_row("r", 0, "step", bytes(32), b"[1]")
