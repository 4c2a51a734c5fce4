"""The index check a whole verify folds into its journal pass, against SQLite's own
(``PRAGMA integrity_check``, the reference).

A whole verify counts the ``entries`` rows as each index holds them while it reads them,
then scans each index in order (``btree_check.fold_plan``); SQLite's check looks each row up
in each index. Here an index's b-tree is replaced by one built over a *changed copy* of the
table (rows left out, added, altered, or none), its SQL text kept: the two must agree on
whether anything is wrong, and a verify that finds it reports ``schema.btree`` alone.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import Ledger
from agentledger.storage.btree_check import btree_problems, fold_plan
from tests.log.logkit import build, checks, raw, rebuild_index, verify

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
    """What each check finds: the verify's (its ``schema.btree`` findings) and SQLite's."""
    report = verify(path)
    folded = [d.actual for d in report.workspace if d.check == "schema.btree"]
    if folded:
        assert checks(report) == {"schema.btree"}  # nothing else reported from such a file
    with Ledger.open(path, readonly=True) as ledger, ledger.db.snapshot() as conn:
        return folded, btree_problems(conn)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(index=st.sampled_from(INDEXES), edits=changes)
def test_the_folded_check_agrees_with_sqlites_on_a_grafted_index(
    tmp_path_factory: object, index: str, edits: list[Change]
) -> None:
    path = tmp_path_factory.mktemp("graft") / "ledger.db"  # type: ignore[attr-defined]
    with Ledger.open(path) as ledger:
        build(ledger, runs=3, entries=5)
    _graft_index(path, index, edits)
    fast, reference = _both(path)
    assert bool(fast) == bool(reference), (edits, fast, reference)
    assert all(problem.startswith(f"{index}:") for problem in fast), fast


def test_a_whole_verify_checks_the_entries_indexes_from_its_own_read(ledger: Ledger) -> None:
    build(ledger, runs=2, entries=3)
    with ledger.db.snapshot() as conn:
        plan = fold_plan(conn)
        assert plan is not None
        assert sorted(name for name, _, _ in plan) == sorted(INDEXES)
        # The journal pass reads the table's own b-tree, in its key order (no sort, no index).
        steps = [
            row[3]
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT run_id, seq, kind, hash, bytes, leaf FROM entries "
                "ORDER BY run_id, seq"
            )
        ]
        assert steps == ["SCAN entries"]


def test_an_index_out_of_order_is_found_though_its_rows_are_the_tables(
    ledger: Ledger, ledger_path: Path
) -> None:
    """An index over the right rows in another order (its columns swapped, its SQL text
    put back): every row is there, and the scan's order gives it away."""
    build(ledger, runs=3, entries=4)
    ledger.close()
    with raw(ledger_path) as conn:
        rebuild_index(
            conn, "entries_by_kind", "CREATE INDEX entries_by_kind ON entries (run_id, kind)"
        )
    fast, reference = _both(ledger_path)
    assert fast and reference
    assert "entries_by_kind" in fast[0]


def test_an_index_holding_the_tables_rows_in_another_order_is_found(
    ledger: Ledger, ledger_path: Path
) -> None:
    """Every row is in the index, exactly the table's, but its b-tree is sorted the other
    way (built descending, its ascending SQL text put back): a seek for a kind goes the
    wrong way and finds nothing. Only the scan's order gives it away."""
    build(ledger, runs=3, entries=4)
    ledger.run("run-0").append("note", {"n": 1})  # a second kind, so the order matters
    ledger.close()
    with raw(ledger_path) as conn:
        rebuild_index(
            conn,
            "entries_by_kind",
            "CREATE INDEX entries_by_kind ON entries (kind DESC, run_id DESC)",
        )
    fast, reference = _both(ledger_path)
    assert reference, "SQLite's own check finds it too"
    assert fast and "out of order" in fast[0], fast


def test_text_that_is_not_utf8_is_compared_as_stored(ledger: Ledger, ledger_path: Path) -> None:
    """A kind cell edited to bytes that are not UTF-8 (its indexes rebuilt with it): the
    b-trees agree, as SQLite's check says, and what is wrong is the entry's, not an index."""
    build(ledger, runs=2, entries=3)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute(
            "UPDATE entries SET kind = CAST(x'73746570ff' AS TEXT) "
            "WHERE run_id = 'run-0' AND seq = 1"
        )
    fast, reference = _both(ledger_path)
    assert fast == [] and reference == []
    report = verify(ledger_path)
    assert "schema.btree" not in checks(report) and "entry.kind" in checks(report)
