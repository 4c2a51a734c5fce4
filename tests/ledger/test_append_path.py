"""The append path: one Rust call (``_core.append_entries``) encodes, chains, logs and
inserts a batch through the ledger's own connection. It writes exactly the rows the format
defines (what ``encode_entries`` makes, numbered as the next log leaves), returns the stored
entries, and a failure anywhere in it leaves the ledger as it was."""

from __future__ import annotations

import dataclasses
from typing import Any

import apsw
import pytest

from agentledger import Entry, Ledger, _core
from agentledger.errors import InvalidInput, LedgerError

BODIES: list[dict[str, Any]] = [
    {"n": 1},
    {"b": [1, "é", None, True], "a": {"z": 1.5, "y": -2}},
    {"s": 'quote " backslash \\ newline \n tab \t nul \x00'},
    {},
    {"emoji": "\U0001f602", "deep": [[[]]], "big": 2**53 - 1},
]


def snapshot(ledger: Ledger) -> tuple[list[Any], ...]:
    """Everything an append writes: entries, run heads, the log state, checkpoints."""
    with ledger.db.snapshot() as conn:
        return tuple(
            conn.execute(sql).fetchall()
            for sql in (
                "SELECT run_id, seq, kind, hash, bytes, leaf FROM entries ORDER BY run_id, seq",
                "SELECT run_id, head_seq, head_hash FROM runs ORDER BY run_id",
                "SELECT size, frontier FROM log_state",
                "SELECT id, size, root, note FROM checkpoints ORDER BY id",
            )
        )


def log_size(ledger: Ledger) -> int:
    return int(ledger.db.scalar("SELECT size FROM log_state"))


def test_rows_are_the_encoded_entries_numbered_as_the_next_leaves(ledger: Ledger) -> None:
    a, b = ledger.run("a"), ledger.run("b")
    batches = [
        (a, [("first", {"x": 0})]),
        (b, [("step", body) for body in BODIES]),
        (a, [(f"kind.{i}:x-y_z", body) for i, body in enumerate(BODIES)]),
        (b, [("step", {"i": i}) for i in range(300)]),
    ]
    heads = {"a": _core.genesis_prev(ledger.id, "a"), "b": _core.genesis_prev(ledger.id, "b")}
    for run, items in batches:
        leaf = log_size(ledger)
        entries = run.append_many(items)
        first = entries[0]
        assert first.prev == heads[run.id]
        encoded = _core.encode_entries(run.id, first.seq, first.prev, first.ts, items)
        expected = [
            (run.id, first.seq + i, kind, digest, raw, leaf + i)
            for i, ((kind, _), (raw, digest)) in enumerate(zip(items, encoded, strict=True))
        ]
        stored = ledger.db.rows(
            "SELECT run_id, seq, kind, hash, bytes, leaf FROM entries "
            "WHERE run_id = ? AND seq >= ? ORDER BY seq",
            (run.id, first.seq),
        )
        assert stored == expected
        assert log_size(ledger) == leaf + len(items)
        # What append returns is what reading the run back gives, field for field.
        assert entries == [Entry.from_row(*row[:5]) for row in stored]
        assert [e.body for e in entries] == [body for _, body in items]
        heads[run.id] = entries[-1].hash
    assert ledger.verify().code == 0


def test_append_returns_a_list_of_frozen_entries(ledger: Ledger) -> None:
    entries = ledger.run("r").append_many([("step", {"n": 1}), ("step", {"n": 2})])
    assert type(entries) is list
    assert all(type(entry) is Entry for entry in entries)
    assert entries[1].prev == entries[0].hash
    with pytest.raises(dataclasses.FrozenInstanceError):
        entries[0].seq = 5  # type: ignore[misc]


@pytest.mark.parametrize("size", [1, 2, 63, 64, 65, 1000])
def test_batches_of_every_size_verify_clean(ledger: Ledger, size: int) -> None:
    ledger.run("other").append("step", {"before": True})
    run = ledger.run("r")
    run.append_many([("step", {"i": i, "text": "x" * (i % 300)}) for i in range(size)])
    run.append("step", {"after": True})
    report = ledger.verify()
    assert report.code == 0, report.to_json()
    assert report.entries == size + 2


def test_a_failing_insert_mid_batch_leaves_the_ledger_unchanged(ledger: Ledger) -> None:
    run = ledger.run("r")
    run.append_many([("step", {"i": i}) for i in range(3)])
    # SQLite refuses the batch's fifth row, after it has inserted four.
    ledger.db.conn.execute(
        "CREATE TEMP TRIGGER refuse BEFORE INSERT ON main.entries WHEN new.seq = 7 "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
    )
    before = snapshot(ledger)
    with pytest.raises(LedgerError) as info:
        run.append_many([("step", {"i": i}) for i in range(3, 10)])
    # The same typed error as any SQLite failure of a write: apsw's, translated.
    assert info.value.code == "ledger-error"
    assert "refused by the test" in str(info.value)
    assert isinstance(info.value.__context__, apsw.ConstraintError)
    assert snapshot(ledger) == before
    ledger.db.conn.execute("DROP TRIGGER refuse")
    assert [e.seq for e in run.append_many([("step", {})])] == [3]
    assert ledger.verify().code == 0


def test_a_body_without_canonical_form_mid_batch_writes_nothing(ledger: Ledger) -> None:
    run = ledger.run("r")
    run.append("step", {"i": 0})
    before = snapshot(ledger)
    with pytest.raises(InvalidInput) as info:
        run.append_many([("step", {"i": 1}), ("step", {"i": 2}), ("step", {"x": float("nan")})])
    assert info.value.code == "invalid-body"
    assert snapshot(ledger) == before


def test_the_rows_table_is_empty_without_a_batch_bound_by_rust(ledger: Ledger) -> None:
    ledger.run("r").append("step", {})  # registers agentledger_rows on this connection
    conn = ledger.db.conn
    assert conn.execute("SELECT * FROM agentledger_rows('not a pointer')").fetchall() == []
    assert conn.execute("SELECT * FROM agentledger_rows(x'00000000')").fetchall() == []
    # Never reachable from a ledger file's own schema (a view or a trigger in it).
    conn.execute("CREATE VIEW rows_view AS SELECT * FROM agentledger_rows(1)")
    with pytest.raises(apsw.SQLError, match="unsafe use"):
        conn.execute("SELECT * FROM rows_view").fetchall()
