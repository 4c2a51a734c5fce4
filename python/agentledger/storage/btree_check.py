"""SQLite's own b-trees are untrusted: every index must hold exactly its table's rows.

The schema lock (``schema_lock.py``) compares each index's SQL text, not its b-tree. Whoever
writes the file can rebuild an index as a partial one (or over another table) and put the
original SQL back (``PRAGMA writable_schema``): SQLite then answers every query planned on
that index from rows the attacker chose. A forged run without a leaf vanishes from
``entries_by_leaf`` (and from ``count(*)``, which SQLite answers from the smallest index);
an entry left out of ``entries_by_kind`` hides the blob it references.

So verify, and every signer inside its write transaction, checks that every index holds
exactly its table's rows, in the snapshot it decides from:

- SQLite's own index-versus-table check (``PRAGMA integrity_check(table)``: every row of the
  table is looked up in each of its indexes, each index holds as many entries as the table
  has rows, and the pages of both are well formed) is the reference, and checks every table
  but one case. ``quick_check`` is not enough: it skips exactly that comparison.
- A whole verify reads every row of ``entries`` anyway (the journal pass), so there the
  ``entries`` indexes are checked from that same read (``fold_plan``): the pass counts the
  table's rows as each index holds them, as keyed multisets (a key drawn for the call, so
  no arrangement of the file's rows can aim at a collision), and checks its keys come in
  strictly increasing order; then each index is scanned in its own order, which must be
  strictly increasing too, and its rows must be the table's. ``entries`` is a ``WITHOUT
  ROWID`` table: in it, as in every index, each key is a cell its scan visits (interior
  cells included), so sorted scans prove every seek goes the right way. A finding stops the
  verify as SQLite's would (``IndexesDisagree``): nothing else is reported from such a file.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw

from agentledger.errors import Diverged, LedgerError
from agentledger.storage.migrations import SCHEMA_VERSION
from agentledger.storage.schema_lock import expected_objects

CHECK = "schema.btree"
"""The verify check that reports a disagreement (docs/CHECKS.md)."""


def ledger_tables(version: int = SCHEMA_VERSION) -> list[str]:
    """Every table of a ledger of schema ``version``, as its migrations create them."""
    return sorted(name for kind, name in expected_objects(version) if kind == "table")


def btree_problems(conn: apsw.Connection, tables: Iterable[str] | None = None) -> list[str]:
    """What SQLite finds wrong with ``tables`` (default: every ledger table) and their
    indexes, in ``conn``'s current transaction; empty when every b-tree agrees.

    Call it only on a file whose schema the lock accepted (the names are ours).
    """
    problems: list[str] = []
    for table in ledger_tables() if tables is None else tables:
        for (line,) in conn.execute("SELECT * FROM pragma_integrity_check(?)", (table,)):
            if line != "ok":
                problems.append(f"{table}: {line}")
    return problems


class IndexesDisagree(LedgerError):
    """The folded index check (``fold_plan``) found an index that is not its table's."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"SQLite's b-trees disagree ({problems[0]})", code="btree-mismatch")
        self.problems = problems


FOLDED_TABLE = "entries"
PASS_COLUMNS = ("run_id", "seq", "kind", "hash", "bytes", "leaf")
"""The journal pass's row (``verify/journal_pass.py``), which the folded check reads."""

IndexSpec = tuple[str, str, list[int]]


def fold_plan(conn: apsw.Connection) -> list[IndexSpec] | None:
    """How a whole journal pass checks the ``entries`` indexes from its own read: for each
    index, its name, the SQL that scans it in its order, and where its columns are in the
    pass's row. None when only SQLite's check can (the table not ``WITHOUT ROWID`` keyed
    ``(run_id, seq)``, an index partial, descending, not BINARY, or over another column;
    a scan SQLite would sort rather than read straight from the b-tree: a sort would hide
    an index out of order)."""
    table = FOLDED_TABLE
    listed = conn.execute(
        "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?", (table,)
    ).fetchall()
    if not listed or not listed[0][0]:
        return None
    specs: list[IndexSpec] = []
    for name, origin, partial in conn.execute(
        "SELECT name, origin, partial FROM pragma_index_list(?)", (table,)
    ).fetchall():
        info = conn.execute(
            "SELECT name, desc, coll, key FROM pragma_index_xinfo(?) ORDER BY seqno", (name,)
        ).fetchall()
        plain = all(not desc and coll == "BINARY" for _, desc, coll, _ in info)
        columns = [column for column, *_ in info]
        if partial or not plain or not all(c in PASS_COLUMNS for c in columns):
            return None
        if origin == "pk":  # the table's own b-tree: the pass reads it in this order
            if [column for column, _, _, is_key in info if is_key] != ["run_id", "seq"]:
                return None
            continue
        names = ", ".join(f'"{c}"' for c in columns)
        sql = f'SELECT {names} FROM "{table}" INDEXED BY "{name}" ORDER BY {names}'
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
        if plan != [f"SCAN {table} USING COVERING INDEX {name}"]:
            return None
        specs.append((name, sql, [PASS_COLUMNS.index(c) for c in columns]))
    return specs


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


__all__ = [
    "CHECK",
    "FOLDED_TABLE",
    "IndexesDisagree",
    "btree_problems",
    "fold_plan",
    "ledger_tables",
    "require_btrees_agree",
]
