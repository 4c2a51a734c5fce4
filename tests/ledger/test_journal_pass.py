"""The journal pass reads through the ledger's own connection: batch boundaries, progress,
the read snapshot and SQLite failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger, _core
from agentledger.storage import native
from agentledger.verify.journal_pass import ALL_ROWS, COLUMNS

SQL = ALL_ROWS.format(columns=COLUMNS)


def build(path: Path) -> None:
    with Ledger.open(path) as ledger:
        for name in ["a", "b", "c"]:
            ledger.run(name).append_many([("step", {"n": i}) for i in range(40)])
    conn = apsw.Connection(str(path))
    # Stored hashes wrong on many rows of one run (past the per-run cap) and a body edited
    # in another: findings on both sides of every batch boundary tried below.
    conn.execute("UPDATE entries SET hash = zeroblob(32) WHERE run_id = 'a' AND seq >= 3")
    conn.execute(
        "UPDATE entries SET bytes = CAST(replace(bytes, '\"n\":7', '\"n\":8') AS BLOB) "
        "WHERE run_id = 'b' AND seq = 7"
    )
    conn.close()


def journal(ledger: Ledger, batch_rows: int, **kwargs: Any) -> Any:
    """``(findings, runs, referenced)`` of one pass."""
    with ledger.db.snapshot() as conn:
        done = _core.verify_journal(
            native.handle(conn), ledger.id, SQL, [((), None)], batch_rows=batch_rows, **kwargs
        )
    return done.findings, done.runs, done.referenced


def test_batch_boundaries_do_not_change_the_findings(tmp_path: Path) -> None:
    build(tmp_path / "l.db")
    with Ledger.open(tmp_path / "l.db") as ledger:
        reference = journal(ledger, 1_000_000)  # every row in one batch
        findings, runs, _ = reference
        assert {f[2] for f in findings} >= {"entry.hash", "chain.prev"}
        assert runs[0][3] > _core.MAX_FINDINGS_PER_RUN  # run a: counted past the cap
        for batch_rows in [1, 2, 7, 39, 40, 41, 119, 120]:
            assert journal(ledger, batch_rows) == reference, batch_rows


def test_progress_counts_every_entry_once(tmp_path: Path) -> None:
    build(tmp_path / "l.db")
    seen: list[int] = []
    with Ledger.open(tmp_path / "l.db") as ledger:
        journal(ledger, 16, progress=seen.append)
    assert sum(seen) == 120 and all(n > 0 for n in seen)


def test_an_error_in_the_progress_callback_stops_the_pass(tmp_path: Path) -> None:
    build(tmp_path / "l.db")
    calls: list[int] = []

    def fail_once(n: int) -> None:
        calls.append(n)
        if len(calls) == 1:  # as Ctrl-C does: raised once, then gone
            raise KeyError("stop")

    with Ledger.open(tmp_path / "l.db") as ledger, pytest.raises(KeyError):
        journal(ledger, 16, progress=fail_once)
    assert len(calls) == 1


def test_rows_come_from_the_callers_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        ledger.run("a").append_many([("step", {"n": i}) for i in range(5)])
        with ledger.db.snapshot() as conn:
            conn.execute("SELECT count(*) FROM entries").fetchall()  # the snapshot starts
            with Ledger.open(path) as writer:
                writer.run("a").append_many([("step", {"n": i}) for i in range(5)])
            runs = _core.verify_journal(native.handle(conn), ledger.id, SQL, [((), None)]).runs
        assert [(run_id, entries) for run_id, entries, *_ in runs] == [("a", 5)]
        assert ledger.verify().entries == 10


def test_a_sqlite_failure_is_raised_as_the_apsw_error_of_its_code(tmp_path: Path) -> None:
    with (
        Ledger.open(tmp_path / "l.db") as ledger,
        ledger.db.snapshot() as conn,
        pytest.raises(apsw.SQLError, match="no such table"),
        native.sqlite_errors(),
    ):
        _core.verify_journal(native.handle(conn), ledger.id, "SELECT * FROM nowhere", [((), None)])
