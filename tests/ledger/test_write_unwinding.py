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
