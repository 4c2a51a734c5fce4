"""Phase evidence and the transition journal, re-derived from the run's chain and blobs.

For every run with ``phase.*`` entries, in chain order:

- ``phase.evidence``: both blobs present and hashing to their names; the evidence is
  schema-valid, its digest matches, and **re-running the compiler on the recorded input
  gives exactly the recorded evidence** (a hand-written evidence with a fresh digest fails);
- ``phase.descent``: the parent entry it names exists with that hash and put exactly that
  evidence in force; the child's ``parent`` source is that evidence's effective authority,
  and the child's effective authority is within it;
- ``phase.transition``: the record is schema-valid, continues the sequence from the evidence
  in force, its target recompiles from its recorded input, is not blocked, its authority
  delta recomputes, and an expansion carries an approved approval, an emergency override,
  or is the one ``override-expired`` record of the override before it;
- ``phase.approval``: a schema-valid approval whose status moves only from ``pending``,
  whose risk class, resource scope and action hash derive from the expansion it states,
  and, for an approved expansion, states exactly that transition's authority delta;
- ``phase.authorize``: the decision re-derives from the evidence in force at that step.
"""

from __future__ import annotations

import itertools
import operator
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
    # Streamed, a run at a time (the replay's own reads use other cursors meanwhile).
    for run_id, run_rows in itertools.groupby(entries, key=operator.itemgetter(0)):
        # The compiler, its models and the transition rules load only for a ledger that
        # has phase entries (a tenth of a second of start-up the others do not pay).
        from agentledger.verify.phase_replay import replay_run

        replay_run(ctx, run_id, ((seq, raw) for _, seq, raw in run_rows))
