"""The ordered-scan index check against SQLite's own (``PRAGMA integrity_check``).

``btree_problems`` checks a ``WITHOUT ROWID`` table by scanning the table and each index
in order and comparing their rows as keyed multisets (``_core.index_problems``); SQLite's
check, which looks each row up in each index, is the reference. Here an index's b-tree is
replaced by one built over a *changed copy* of the table (rows left out, added, altered,
or none), its SQL text kept: the two checks must agree on whether anything is wrong.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import Ledger
from agentledger.storage.btree_check import (
    btree_problems,
    integrity_check_problems,
    ledger_tables,
    scan_plan,
)
from tests.log.logkit import build, raw

INDEXES = ("entries_by_kind", "entries_by_leaf")

Change = tuple[str, int, str]
changes = st.lists(
    st.tuples(
        st.sampled_from(["drop", "kind", "leaf", "null-leaf", "add", "run"]),
        st.integers(0, 1_000),
        st.sampled_from(["step", "a", "zz", "", "é"]),
    ),
    max_size=3,
)


def _graft_index(path: Path, index: str, edits: list[Change]) -> None:
    """Replace ``index``'s b-tree by the same index over a copy of ``entries`` with
    ``edits`` applied; every SQL text stays as it was."""
    with raw(path) as conn:
        conn.execute("CREATE TABLE copy AS SELECT * FROM entries")
        keys = conn.execute("SELECT run_id, seq FROM copy ORDER BY run_id, seq").fetchall()
        for how, at, text in edits:
            run_id, seq = keys[at % len(keys)]
            where = ("WHERE run_id = ? AND seq = ?", (run_id, seq))
            if how == "drop":
                conn.execute(f"DELETE FROM copy {where[0]}", where[1])
            elif how == "kind":
                conn.execute(f"UPDATE copy SET kind = ? {where[0]}", (text, *where[1]))
            elif how == "leaf":
                conn.execute(f"UPDATE copy SET leaf = leaf + 1 {where[0]}", where[1])
            elif how == "null-leaf":
                conn.execute(f"UPDATE copy SET leaf = NULL {where[0]}", where[1])
            elif how == "run":
                conn.execute(f"UPDATE copy SET run_id = run_id || ? {where[0]}", (text, *where[1]))
            else:
                conn.execute(
                    "INSERT INTO copy SELECT run_id, seq + 1000, ?, hash, bytes, leaf FROM copy "
                    + where[0],
                    (text, *where[1]),
                )
        columns = {"entries_by_kind": "kind, run_id, seq", "entries_by_leaf": "leaf, run_id, seq"}
        conn.execute(f"CREATE INDEX grafted ON copy ({columns[index]})")
        root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'grafted'")
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute(
            "UPDATE sqlite_schema SET rootpage = ? WHERE name = ?", (root.fetchall()[0][0], index)
        )
        # The copy's own pages are left orphaned, as an attacker would leave them.
        conn.execute("DELETE FROM sqlite_schema WHERE name IN ('copy', 'grafted')")
        conn.execute("PRAGMA writable_schema = OFF")


def _both(path: Path) -> tuple[list[str], list[str]]:
    """What each check finds, in one snapshot of a ledger opened read-only."""
    with Ledger.open(path, readonly=True) as ledger, ledger.db.snapshot() as conn:
        return btree_problems(conn), integrity_check_problems(conn, ledger_tables())


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(index=st.sampled_from(INDEXES), edits=changes)
def test_the_scan_check_agrees_with_sqlites_on_a_grafted_index(
    tmp_path_factory: object, index: str, edits: list[Change]
) -> None:
    path = tmp_path_factory.mktemp("graft") / "ledger.db"  # type: ignore[attr-defined]
    with Ledger.open(path) as ledger:
        build(ledger, runs=3, entries=5)
    _graft_index(path, index, edits)
    fast, reference = _both(path)
    assert bool(fast) == bool(reference), (edits, fast, reference)
    assert all(problem.startswith(f"{index}:") for problem in fast), fast


def test_the_entries_table_is_checked_by_scans_and_the_rowid_tables_by_sqlite(
    ledger: Ledger,
) -> None:
    build(ledger, runs=2, entries=3)
    with ledger.db.snapshot() as conn:
        plan = scan_plan(conn, "entries")
        assert plan is not None
        _, key_columns, indexes = plan
        assert key_columns == 2
        assert sorted(name for name, _, _ in indexes) == sorted(INDEXES)
        # A rowid table's interior keys are not in its scan: SQLite's check it is.
        assert scan_plan(conn, "blob_chunks") is None
        assert scan_plan(conn, "runs") is None


def test_an_index_out_of_order_is_found_though_its_rows_are_the_tables(
    ledger: Ledger, ledger_path: Path
) -> None:
    """An index over the right rows in another order (its columns swapped, its SQL text
    put back): every row is there, and the scan's order gives it away."""
    build(ledger, runs=3, entries=4)
    ledger.close()
    with raw(ledger_path) as conn:
        sql = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'entries_by_kind'")
        sql = sql.fetchall()[0][0]
        conn.execute("DROP INDEX entries_by_kind")
        conn.execute("CREATE INDEX entries_by_kind ON entries (run_id, kind)")
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_schema SET sql = ? WHERE name = 'entries_by_kind'", (sql,))
        conn.execute("PRAGMA writable_schema = OFF")
    fast, reference = _both(ledger_path)
    assert fast and reference
    assert "entries_by_kind" in fast[0]
