"""Extending a log state: where the rows stop being in leaf order."""

from __future__ import annotations

from agentledger import log as wslog


def test_log_extend_reports_the_first_leaf_out_of_sequence() -> None:
    rows = [(i, "r", i, bytes(32)) for i in range(6)]
    del rows[3]
    state, _, gap = wslog.extend(wslog.EMPTY, rows)
    assert gap == (3, 4)
    assert state.size == 3
