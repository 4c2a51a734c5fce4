"""The index check a verify folds into a read of the ``entries`` rows, against SQLite's own
(``PRAGMA integrity_check``, the reference).

A whole verify counts the ``entries`` rows as each index holds them while its journal pass
reads them, then scans each index in order (``btree_check.fold_plan``); a verify of named
runs or ``--incremental`` makes the same check from a read of the rows' keys of its own
(``btree_check.check_entries``). SQLite's check looks each row up in each index. Here an
index's b-tree is replaced by one built over a *changed copy* of the table (rows left out,
added, altered, or none), its SQL text kept: the two must agree on whether anything is
wrong, and a verify that finds it reports ``schema.btree`` alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import Ledger, _core
from agentledger.storage import btree_check
from agentledger.storage.btree_check import btree_problems, check_entries, fold_plan
from agentledger.verify import VerifyOptions
from agentledger.verify import log as verify_log
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


HOW = ("whole", "named", "incremental")
"""How the verify reads ``entries``: every row (the journal pass's fold), or some (a read
of the keys of its own): named runs, or ``--incremental`` after a clean whole verify."""


def _both(path: Path, how: str = "whole") -> tuple[list[str], list[str]]:
    """What each check finds: the verify's (its ``schema.btree`` findings) and SQLite's."""
    with Ledger.open(path) as ledger:
        if how == "named":
            report = ledger.verify(["run-1"])
        elif how == "incremental":
            report = ledger.verify(options=VerifyOptions(incremental=True))
        else:
            report = ledger.verify()
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
@given(index=st.sampled_from(INDEXES), edits=changes, how=st.sampled_from(HOW))
def test_the_folded_check_agrees_with_sqlites_on_a_grafted_index(
    tmp_path_factory: object, index: str, edits: list[Change], how: str
) -> None:
    path = tmp_path_factory.mktemp("graft") / "ledger.db"  # type: ignore[attr-defined]
    with Ledger.open(path) as ledger:
        build(ledger, runs=3, entries=5)
        if how == "incremental":
            assert ledger.verify().code == 0  # remembered clean: the next verify reads the tail
            ledger.run("run-1").append("step", {"n": 99})
    _graft_index(path, index, edits)
    fast, reference = _both(path, how)
    assert bool(fast) == bool(reference), (edits, fast, reference)
    assert all(problem.startswith(f"{index}:") for problem in fast), fast


@pytest.mark.parametrize("how", ["named", "incremental"])
def test_a_verify_reading_some_rows_checks_the_entries_indexes_from_a_read_of_its_own(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """SQLite's check (every row looked up in each index) is left for the other tables:
    ``entries`` is checked from the keys of its rows, read from its own b-tree in key order,
    and the log the verify proves is rebuilt from that same read."""
    build(ledger, runs=3, entries=4)
    assert ledger.verify().code == 0
    ledger.run("run-1").append("step", {"n": 99})
    by_sqlite: list[str] = []
    by_fold: list[list[str]] = []
    reference, shared = btree_check.btree_problems, btree_check.btree_problems_shared
    folded = btree_check.check_entries

    def sqlite_check(conn: Any, tables: list[str] | None = None) -> list[str]:
        by_sqlite.extend(tables or ["every table"])
        return reference(conn, tables)

    def shared_check(conn: Any, tables: list[str], mark: bytes | None) -> list[str]:
        by_sqlite.extend(tables)
        return shared(conn, tables, mark)

    def fold_check(conn: Any, specs: list[btree_check.IndexSpec], *args: Any, **kw: Any) -> Any:
        by_fold.append([name for name, _, _ in specs])
        return folded(conn, specs, *args, **kw)

    def second_read(*args: Any) -> Any:
        raise AssertionError("the log's proof read the table again")

    # Beside the blob pass (incremental), or shared with a reader (named runs).
    monkeypatch.setattr(btree_check, "btree_problems", sqlite_check)
    monkeypatch.setattr(btree_check, "btree_problems_shared", shared_check)
    monkeypatch.setattr(btree_check, "check_entries", fold_check)
    # The log's proof is rebuilt from the rows that read kept.
    monkeypatch.setattr(_core, "log_rebuild", second_read)
    options = VerifyOptions(incremental=True) if how == "incremental" else None
    report = ledger.verify(["run-1"] if how == "named" else None, options=options)
    assert report.code == 0
    assert [sorted(names) for names in by_fold] == [sorted(INDEXES)]
    assert btree_check.FOLDED_TABLE not in by_sqlite and by_sqlite
    with ledger.db.snapshot() as conn:
        plan = fold_plan(conn)
        assert plan is not None
        problems, rows = check_entries(conn, plan, keep_log=True)
        assert problems == [] and rows is not None and len(rows) == 13
        # The keys are read from the table's own b-tree in key order (no sort, no index).
        steps = [
            row[3]
            for row in conn.execute(
                'EXPLAIN QUERY PLAN SELECT "run_id", "seq", "kind", "leaf" FROM "entries" '
                'ORDER BY "run_id", "seq"'
            )
        ]
        assert steps == ["SCAN entries"]


def test_the_log_is_rebuilt_from_the_table_itself(ledger: Ledger) -> None:
    """The rows a verify of named runs rebuilds the signed log from are the table's, read in
    key order: no index the file could have rebuilt (``entries_by_leaf``) decides which."""
    build(ledger, runs=2, entries=3)
    with ledger.db.snapshot() as conn:
        steps = [
            row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {verify_log.LEAF_SCAN}", (0, 6))
        ]
    assert steps == ["SCAN entries"]


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
