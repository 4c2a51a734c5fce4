"""A write transaction unwound after its connection was closed (Ctrl-C during a long
command, then its cleanup closing the ledger) ends quietly: no "Exception ignored"
traceback from the closing generator."""

from __future__ import annotations

import gc

import pytest

from agentledger import Ledger


def test_a_transaction_closed_after_its_connection_unwinds_quietly(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger.run("r").append("step", {})
    pending = ledger.db.write()
    pending.__enter__()
    ledger.db.close()
    del pending  # finalized as a generator left at its yield: closed with GeneratorExit
    gc.collect()
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_transaction_unwinding_a_ctrl_c_after_its_connection_closed_keeps_the_ctrl_c(
    ledger: Ledger,
) -> None:
    ledger.run("r").append("step", {})
    with pytest.raises(KeyboardInterrupt), ledger.db.write():
        ledger.db.close()
        raise KeyboardInterrupt


def test_a_ctrl_c_whose_transaction_sqlite_already_ended_stays_a_ctrl_c(
    ledger: Ledger,
) -> None:
    """SQLite can end a transaction itself as an interrupt lands (a statement interrupted
    mid-write rolls it back); the context manager's own rollback then fails. The Ctrl-C
    is what the command reports (exit 130), not that failure, and nothing was written."""
    ledger.run("r").append("step", {})
    with pytest.raises(KeyboardInterrupt), ledger.db.write() as conn:
        conn.execute("INSERT INTO ledger_meta (key, value) VALUES ('x', 'y')")
        conn.execute("ROLLBACK")
        raise KeyboardInterrupt
    assert not ledger.db.rows("SELECT 1 FROM ledger_meta WHERE key = 'x'")
