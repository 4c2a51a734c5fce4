"""SQLite's own b-trees are untrusted: every index must hold exactly its table's rows.

The schema lock (``schema_lock.py``) compares each index's SQL text, not its b-tree. Whoever
writes the file can rebuild an index as a partial one (or over another table) and put the
original SQL back (``PRAGMA writable_schema``): SQLite then answers every query planned on
that index from rows the attacker chose. A forged run without a leaf vanishes from
``entries_by_leaf`` (and from ``count(*)``, which SQLite answers from the smallest index);
an entry left out of ``entries_by_kind`` hides the blob it references.

So verify, and every signer inside its write transaction, first checks that every index
holds exactly its table's rows, in the snapshot it decides from:

- SQLite's own index-versus-table check (``PRAGMA integrity_check(table)``: every row of the
  table is looked up in each of its indexes, each index holds as many entries as the table
  has rows, and the pages of both are well formed) is the reference, and what checks a
  rowid table. ``quick_check`` is not enough: it skips exactly that comparison.
- A ``WITHOUT ROWID`` table (``entries``, the big one) is checked by ordered scans instead
  (``_core.index_problems``): one of the table, one of each index, each required to come
  out strictly increasing, their rows compared as keyed multisets. In such a table, as in
  every index, each key is a cell the scan visits (interior cells included), so a sorted
  scan proves every seek goes the right way; a rowid table's interior keys are not in its
  scan, which is why those tables keep SQLite's check. Sequential reads instead of a
  lookup per row per index: about a quarter of the time.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

import apsw

from agentledger import _core
from agentledger.errors import Diverged
from agentledger.storage import native
from agentledger.storage.migrations import SCHEMA_VERSION
from agentledger.storage.schema_lock import expected_objects

CHECK = "schema.btree"
"""The verify check that reports a disagreement (docs/CHECKS.md)."""


def ledger_tables(version: int = SCHEMA_VERSION) -> list[str]:
    """Every table of a ledger of schema ``version``, as its migrations create them."""
    return sorted(name for kind, name in expected_objects(version) if kind == "table")


def btree_problems(conn: apsw.Connection, tables: Iterable[str] | None = None) -> list[str]:
    """What is wrong with ``tables`` (default: every ledger table) and their indexes, in
    ``conn``'s current transaction; empty when every b-tree agrees. ``WITHOUT ROWID``
    tables by ordered scans, the others by SQLite's own check.

    Call it only on a file whose schema the lock accepted (the names are ours).
    """
    problems: list[str] = []
    for table in ledger_tables() if tables is None else tables:
        plan = scan_plan(conn, table)
        if plan is None:
            problems += integrity_check_problems(conn, [table])
        else:
            table_sql, key_columns, indexes = plan
            # Drawn after the file was written: no arrangement of its rows aims at it.
            key = secrets.token_bytes(32)
            with native.sqlite_errors():
                problems += _core.index_problems(
                    native.handle(conn), key, table, table_sql, key_columns, indexes
                )
    return problems


def integrity_check_problems(conn: apsw.Connection, tables: Iterable[str]) -> list[str]:
    """What SQLite's ``PRAGMA integrity_check`` finds wrong with ``tables`` and their
    indexes (the reference of ``btree_problems``)."""
    problems: list[str] = []
    for table in tables:
        for (line,) in conn.execute("SELECT * FROM pragma_integrity_check(?)", (table,)):
            if line != "ok":
                problems.append(f"{table}: {line}")
    return problems


ScanPlan = tuple[str, int, list[tuple[str, str, list[int]]]]
"""The table's scan (in primary-key order), how many of its first columns are that key,
and each index's scan with where its columns are in the table's."""


def scan_plan(conn: apsw.Connection, table: str) -> ScanPlan | None:
    """How to check ``table`` by ordered scans, or None when only SQLite's check can: a
    rowid table, an index that is partial, descending or not under the BINARY collation,
    or a scan SQLite would not answer straight from the b-tree (a sort would hide an
    out-of-order b-tree)."""
    listed = conn.execute(
        "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?", (table,)
    ).fetchall()
    if not listed or not listed[0][0]:
        return None
    key: list[str] = []
    columns: list[str] = []
    indexes: list[tuple[str, list[str]]] = []
    for name, origin, partial in conn.execute(
        "SELECT name, origin, partial FROM pragma_index_list(?)", (table,)
    ).fetchall():
        info = conn.execute(
            "SELECT name, desc, coll, key FROM pragma_index_xinfo(?) ORDER BY seqno", (name,)
        ).fetchall()
        if partial or any(
            desc or coll != "BINARY" or column is None for column, desc, coll, _ in info
        ):
            return None
        if origin == "pk":  # the table's own b-tree
            key = [column for column, _, _, is_key in info if is_key]
        else:
            indexes.append((name, [column for column, *_ in info]))
    for _, index_columns in indexes:
        columns += [c for c in index_columns if c not in columns]
    if not key:
        return None
    selected = key + [c for c in columns if c not in key]
    table_sql = f"SELECT {_names(selected)} FROM {_quote(table)} ORDER BY {_names(key)}"
    if not _straight_from_btree(conn, table_sql, f"SCAN {table}"):
        return None
    scans = []
    for name, index_columns in indexes:
        sql = (
            f"SELECT {_names(index_columns)} FROM {_quote(table)} INDEXED BY {_quote(name)} "
            f"ORDER BY {_names(index_columns)}"
        )
        if not _straight_from_btree(conn, sql, f"SCAN {table} USING COVERING INDEX {name}"):
            return None
        scans.append((name, sql, [selected.index(c) for c in index_columns]))
    return table_sql, len(key), scans


def _straight_from_btree(conn: apsw.Connection, sql: str, plan: str) -> bool:
    steps = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    return steps == [plan]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _names(columns: list[str]) -> str:
    return ", ".join(_quote(c) for c in columns)


def require_btrees_agree(
    conn: apsw.Connection, tables: Iterable[str] | None = None, *, what: str = "the ledger"
) -> None:
    """Raise ``Diverged`` (code ``btree-mismatch``, exit 2) unless every b-tree of
    ``tables`` (default: every ledger table) agrees with its indexes, in ``conn``'s current
    transaction: what a signer calls inside its write transaction before it decides.

    It reads every row of those tables (about as long again as the journal pass): call it
    where a whole pass is paid anyway (archive, gc, adopting a ledger), naming the tables
    the decision reads; a decision that reads rows only by primary key needs no index.
    """
    problems = btree_problems(conn, tables)
    if problems:
        raise Diverged(
            f"{what}: SQLite's b-trees disagree ({problems[0]}; {len(problems)} problem(s)): "
            "an index was rebuilt or the file is damaged; refusing to decide from it "
            "(`agentledger verify` names each)",
            code="btree-mismatch",
        )


__all__ = ["CHECK", "btree_problems", "ledger_tables", "require_btrees_agree"]
