"""What every connection agentledger opens on a ledger is configured with, writable or not."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from agentledger import Ledger


@pytest.mark.parametrize("readonly", [False, True], ids=["writable", "read-only"])
def test_no_sql_of_the_file_reaches_outside_and_no_plan_follows_a_bound_value(
    ledger_path: Path, readonly: bool
) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {})
    with Ledger.open(ledger_path, readonly=readonly) as ledger:
        conn = ledger.db.conn
        assert conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, -1) == 1
        # With query-planner stability a cached statement is not re-prepared each time a
        # new key is bound to it (the SQLite apsw ships is built with STAT4).
        assert conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, -1) == 1
