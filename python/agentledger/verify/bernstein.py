"""Imported bernstein runs, when the ledger holds any (``bernstein_runs.py`` checks them).

Most ledgers hold no import: for those, the bernstein machinery (its verifier, the audit
chain, X.509 and RFC 3161 parsing) is not loaded, a tenth of a second of every verify's
start-up. A ledger holds an import when any of the tables an import fills has a row, or
its chain holds an import's entry: then every check runs, and any of those alone (a row
no entry pins, an entry whose rows were deleted) is a finding there.
"""

from __future__ import annotations

import apsw

from agentledger.bernstein.kinds import IMPORT_KIND, WORKDIR_KIND
from agentledger.verify.context import VerifyContext

IMPORT_TABLES = ("bernstein_runs", "bernstein_imports", "bernstein_files")


def check_bernstein(ctx: VerifyContext) -> None:
    if not holds_an_import(ctx.conn):
        given = [
            option
            for option, value in (
                ("--tsa-bundle", ctx.options.tsa_bundle_file),
                ("--witness-state", ctx.options.witness_state_dir),
            )
            if value is not None
        ]
        if given:
            ctx.report.notes.append(
                f"{' and '.join(given)} not used: the ledger holds no bernstein import"
            )
        return
    from agentledger.verify.bernstein_runs import check_imported

    check_imported(ctx)


def holds_an_import(conn: apsw.Connection) -> bool:
    """Whether anything of a bernstein import is in the file: a row of its tables, or an
    import's entry in the chain."""
    for table in IMPORT_TABLES:
        if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchall():
            return True
    found = conn.execute(
        "SELECT 1 FROM entries WHERE kind IN (?, ?) LIMIT 1", (IMPORT_KIND, WORKDIR_KIND)
    ).fetchall()
    return bool(found)
