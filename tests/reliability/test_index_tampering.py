"""SQLite's own structures are untrusted: an index rebuilt to hide rows, its SQL put back.

``sqlite_schema`` holds an index's SQL text, which the schema lock compares; the index's
b-tree holds what SQLite answers from it, which nothing compared. An attacker who writes
the file rebuilds ``entries_by_leaf`` (or ``entries_by_kind``) as a partial index, then
writes the original SQL text back (``PRAGMA writable_schema``): SQLite parses a full index
and answers from the partial b-tree. Verify and every signer must notice that the b-trees
they read disagree before any decision is taken from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger, _core
from agentledger.errors import Diverged
from agentledger.signing import require_clean
from agentledger.storage import native
from agentledger.storage.btree_check import btree_problems, btree_problems_shared, ledger_tables
from tests.log.logkit import build, checks, raw, rebuild_index, verify

from ..raw_entries import pin_unvetted


def _rebuild_partial(conn: apsw.Connection, index: str, where: str) -> None:
    """Rebuild ``index`` with a WHERE clause and put its original SQL text back."""
    sql = conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (index,)).fetchall()[0][0]
    rebuild_index(conn, index, f"{sql} WHERE {where}")


def _forge_unlogged_run(path: Path, run_id: str) -> None:
    """A run no signed log vouches for: chained entries with no leaf, hidden from the index."""
    with raw(path) as conn:
        ledger_id = conn.execute("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
        ledger_id = ledger_id.fetchall()[0][0]
        encoded = _core.encode_entries(
            run_id,
            0,
            _core.genesis_prev(ledger_id, run_id),
            "2026-01-01T00:00:00.000000Z",
            [("step", {"forged": True}), ("step", {"paid": 1_000_000})],
        )
        ordinal = conn.execute("SELECT max(ordinal) + 1 FROM runs").fetchall()[0][0]
        conn.execute(
            "INSERT INTO runs (run_id, ordinal, head_seq, head_hash) VALUES (?, ?, ?, ?)",
            (run_id, ordinal, len(encoded) - 1, encoded[-1][1]),
        )
        for seq, (data, digest) in enumerate(encoded):
            conn.execute(
                "INSERT INTO entries (run_id, seq, kind, hash, bytes, leaf) "
                "VALUES (?, ?, 'step', ?, ?, NULL)",
                (run_id, seq, digest, data),
            )
    with raw(path) as conn:
        _rebuild_partial(conn, "entries_by_leaf", "leaf IS NOT NULL")


def test_a_forged_unlogged_run_hidden_from_the_leaf_index_fails_verify(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=3)
    ledger.close()
    _forge_unlogged_run(ledger_path, "forged")
    before = ledger_path.read_bytes()
    report = verify(ledger_path)
    assert report.code == 2
    assert "schema.btree" in checks(report)
    result = cli("verify", "--all", "--json")
    assert result.code == 2
    assert ledger_path.read_bytes() == before


def test_archive_does_not_sign_a_run_hidden_from_the_leaf_index(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=3)
    ledger.close()
    _forge_unlogged_run(ledger_path, "forged")
    out = tmp_path / "review.db"
    assert cli("archive", str(out)).code == 2
    assert not out.exists()


def test_a_deleted_evidence_blob_hidden_by_the_kind_index_is_found(
    ledger: Ledger, ledger_path: Path
) -> None:
    digest = ledger.blobs.put(b"the page as captured")
    pin_unvetted(ledger, "r", digest, "file")
    ledger.close()
    assert verify(ledger_path).code == 0
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
        conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
    with raw(ledger_path) as conn:
        _rebuild_partial(conn, "entries_by_kind", "run_id <> 'r'")
    report = verify(ledger_path)
    assert report.code == 2
    assert "schema.btree" in checks(report)


@pytest.mark.parametrize("index", ["entries_by_leaf", "entries_by_kind"])
def test_the_btree_check_names_every_index_that_disagrees_with_its_table(
    ledger: Ledger, ledger_path: Path, index: str
) -> None:
    build(ledger, runs=2, entries=3)
    ledger.close()
    with raw(ledger_path) as conn:
        _rebuild_partial(conn, index, "0")
    with Ledger.open(ledger_path, readonly=True) as opened, opened.db.snapshot() as conn:
        problems = btree_problems(conn)
    assert problems and all(index in problem for problem in problems), problems
    # A signer that stands on a whole verify (export, adopt, upgrade, a first signature)
    # refuses such a file.
    with (
        Ledger.open(ledger_path) as writer,
        pytest.raises(Diverged, match=r"does not verify clean \(schema\.btree\)"),
    ):
        require_clean(writer, "sign it")


def test_the_btree_check_is_quiet_on_an_honest_ledger(ledger: Ledger) -> None:
    build(ledger, runs=3, entries=4)
    ledger.blobs.put(b"x" * 300_000)
    with ledger.db.snapshot() as conn:
        assert btree_problems(conn) == []


@pytest.mark.parametrize(
    "damaged", [[], ["entries_by_leaf"], ["audit_by_entry"], ["entries_by_kind", "audit_by_entry"]]
)
def test_the_check_shared_with_a_reader_finds_what_the_check_on_one_connection_finds(
    ledger: Ledger, ledger_path: Path, damaged: list[str]
) -> None:
    # A named-run verify checks the tables on its connection and a reader at once
    # (`btree_problems_shared`); the reference checks them one after another on one
    # connection. Same lines, same order, with the reader and without one.
    build(ledger, runs=3, entries=4)
    ledger.blobs.put(b"y" * 300_000)
    ledger.close()
    with raw(ledger_path) as conn:
        # Rows for the audit mirror's index (their MACs do not matter to SQLite's check).
        for pos in range(3):
            conn.execute(
                "INSERT INTO audit_log (pos, run_id, seq, record, mac)"
                " VALUES (?, 'r0', ?, x'00', x'00')",
                (pos, pos),
            )
    with raw(ledger_path) as conn:
        for index in damaged:
            _rebuild_partial(conn, index, "0")
    tables = ledger_tables()
    with Ledger.open(ledger_path, readonly=True) as opened, opened.db.snapshot() as conn:
        mark = opened.db.read_mark()
        assert _core.sqlite_readers(native.handle(conn), 1, mark) == 1
        reference = btree_problems(conn, tables)
        assert btree_problems_shared(conn, tables, mark) == reference
        assert btree_problems_shared(conn, tables, None) == reference
    assert bool(reference) == bool(damaged)
    assert {index for index in damaged if any(index in line for line in reference)} == set(damaged)
