"""Phase evidence and the transition journal (``phase_replay.py`` re-derives them): the
rows are found here, and the compiler, its models and the replay are loaded only when the
ledger holds a phase entry, so a verify of a ledger without any does not pay for them."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from agentledger.phase.kinds import PHASE_KINDS
from agentledger.verify.context import IN_SELECTED, VerifyContext

_KINDS = ", ".join("?" * len(PHASE_KINDS))
# ``+kind``: the table itself is scanned, never an index on the kind (an index is a hint).
_PHASE_ENTRIES = (
    f"SELECT run_id, seq, bytes FROM entries WHERE +kind IN ({_KINDS}) "
    'AND instr(bytes, CAST(\'"kind":"phase.\' AS BLOB)) > 0 {where} ORDER BY run_id, seq'
)
ALL_PHASE_ENTRIES = _PHASE_ENTRIES.format(where="")
SELECTED_PHASE_ENTRIES = _PHASE_ENTRIES.format(where=f"AND {IN_SELECTED}")


def check_phase(ctx: VerifyContext) -> None:
    entries: Iterable[Any]
    if ctx.whole:
        # The journal pass marked exactly the rows ALL_PHASE_ENTRIES selects.
        entries = ctx.marked_rows(("phase",), "run_id, seq, bytes", ALL_PHASE_ENTRIES, PHASE_KINDS)
    else:
        entries = ctx.conn.execute(SELECTED_PHASE_ENTRIES, (*PHASE_KINDS, ctx.selected_json))
    rows = iter(entries)
    first = next(rows, None)
    if first is None:
        return
    from agentledger.verify.phase_replay import replay_phase

    replay_phase(ctx, itertools.chain([first], rows))
