"""SQLite's own b-trees are untrusted: every index must hold exactly its table's rows.

The schema lock (``schema_lock.py``) compares each index's SQL text, not its b-tree. Whoever
writes the file can rebuild an index as a partial one (or over another table) and put the
original SQL back (``PRAGMA writable_schema``): SQLite then answers every query planned on
that index from rows the attacker chose. A forged run without a leaf vanishes from
``entries_by_leaf`` (and from ``count(*)``, which SQLite answers from the smallest index);
an entry left out of ``entries_by_kind`` hides the blob it references.

So verify, and every signer inside its write transaction, first runs SQLite's own
index-versus-table check (``PRAGMA integrity_check(table)``: every row of the table is
found in each of its indexes, each index holds as many entries as the table has rows, and
the pages of both are well formed) on the tables it reads, in the snapshot it decides from.
``quick_check`` is not enough: it skips exactly the index-versus-table comparison.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw

from agentledger.errors import Diverged
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
