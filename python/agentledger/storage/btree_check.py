"""SQLite's own b-trees are untrusted: every index must hold exactly its table's rows.

The schema lock (``schema_lock.py``) compares each index's SQL text, not its b-tree. Whoever
writes the file can rebuild an index as a partial one (or over another table) and put the
original SQL back (``PRAGMA writable_schema``): SQLite then answers every query planned on
that index from rows the attacker chose. A forged run without a leaf vanishes from
``entries_by_leaf`` (and from ``count(*)``, which SQLite answers from the smallest index);
an entry left out of ``entries_by_kind`` hides the blob it references.

So verify checks that every index holds exactly its table's rows, in the snapshot it
decides from, before any other SQL's answer is used; a signer that reads through an index
stands on such a verify (``signing.require_clean``), in its write transaction:

- SQLite's own index-versus-table check (``PRAGMA integrity_check(table)``: every row of the
  table is looked up in each of its indexes, each index holds as many entries as the table
  has rows, and the pages of both are well formed) is the reference, and checks every table
  but ``entries``. ``quick_check`` is not enough: it skips exactly that comparison. When
  nothing else keeps the second core busy, the tables are shared between the verify's
  connection and a reader proven to read its snapshot (``btree_problems_shared``).
- A whole verify reads every row of ``entries`` anyway (the journal pass), so there the
  ``entries`` indexes are checked from that same read (``fold_plan``): the pass counts the
  table's rows as each index holds them, as keyed multisets (a key drawn for the call, so
  no arrangement of the file's rows can aim at a collision), and checks its keys come in
  strictly increasing order; then each index is scanned in its own order, which must be
  strictly increasing too, and its rows must be the table's. ``entries`` is a ``WITHOUT
  ROWID`` table: in it, as in every index, each key is a cell its scan visits (interior
  cells included), so sorted scans prove every seek goes the right way. A finding stops the
  verify as SQLite's would (``IndexesDisagree``): nothing else is reported from such a file.
- A verify that reads only some rows (named runs, ``--incremental``) makes the same check
  from a read of its own (``check_entries``): the key columns of every row, from the
  table's own b-tree in key order. On a million entries that took 0.7 s against 1.33 s
  for SQLite's check, which looks every row up in each index.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

import apsw

from agentledger import _core
from agentledger.errors import LedgerError
from agentledger.storage import native
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


def btree_problems_shared(
    conn: apsw.Connection, tables: Iterable[str], mark: bytes | None
) -> list[str]:
    """``btree_problems``, the tables checked on ``conn`` and on a reader at once
    (``_core.btree_check_tables``: each takes the next table, largest first), the reader
    proven by ``mark`` (``Database.read_mark``) to read ``conn``'s snapshot; without a
    reader, every table on ``conn``. The same lines in the same order as
    ``btree_problems``."""
    tables = list(tables)
    # Largest first, so that the two finish together. A size the file claims only orders
    # the work: every table is checked whatever it says.
    sizes = {table: _rows_claimed(conn, table) for table in tables}
    ordered = sorted(tables, key=lambda table: -sizes[table])
    with native.sqlite_errors():
        checked = _core.btree_check_tables(native.handle(conn), ordered, mark)
    lines = dict(zip(ordered, checked, strict=True))
    return [f"{table}: {line}" for table in tables for line in lines[table] if line != "ok"]


def _rows_claimed(conn: apsw.Connection, table: str) -> int:
    """The table's highest row id (0 for a table without one, or an empty one)."""
    try:
        (size,) = conn.execute(f'SELECT max(rowid) FROM "{table}"').fetchall()[0]
    except apsw.SQLError:  # WITHOUT ROWID
        return 0
    return size if isinstance(size, int) else 0


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


def check_entries(
    conn: apsw.Connection, specs: list[IndexSpec], jobs: int = 0, *, keep_log: bool = False
) -> tuple[list[str], _core.LoggedRows | None]:
    """The folded check of ``entries`` (``specs``, from ``fold_plan``) on a read of its
    own, in ``conn``'s current transaction: every row's key columns, read from the table's
    own b-tree in key order; SQLite's check when SQLite would read them otherwise. With
    ``keep_log``, the same read also keeps each logged row (``verify/log.rebuilt_log``
    rebuilds the log from them rather than read the table again)."""
    read = sorted({0, 1}.union(*(projection for _, _, projection in specs)))
    if keep_log:
        read = sorted({*read, PASS_COLUMNS.index("hash"), PASS_COLUMNS.index("leaf")})
    names = ", ".join(f'"{PASS_COLUMNS[c]}"' for c in read)
    sql = f'SELECT {names} FROM "{FOLDED_TABLE}" ORDER BY "run_id", "seq"'
    # A covering index sorted, or the table read through an index, would not prove the
    # table's own b-tree: only its plain scan in key order does.
    plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    if plan != [f"SCAN {FOLDED_TABLE}"]:
        return btree_problems(conn, [FOLDED_TABLE]), None
    # Drawn after the file was written: no arrangement of its rows aims at it.
    key = secrets.token_bytes(32)
    with native.sqlite_errors():
        return _core.check_indexes(
            native.handle(conn), sql, read, key, FOLDED_TABLE, specs, jobs, logged=keep_log
        )


__all__ = [
    "CHECK",
    "FOLDED_TABLE",
    "IndexesDisagree",
    "btree_problems",
    "check_entries",
    "fold_plan",
    "ledger_tables",
]
