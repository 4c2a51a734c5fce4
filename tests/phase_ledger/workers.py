"""Process entry points for the concurrency tests (importable by spawned interpreters)."""

from __future__ import annotations

from datetime import datetime
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from agentledger import Ledger
from agentledger.errors import AgentLedgerError

from .ledger_testkit import MANIFEST, OPERATOR


def race_transition(
    path: str,
    run_id: str,
    operation: str,
    target: dict[str, Any],
    expected_sequence: int,
    expected_digest: str,
    now: str,
    barrier: Barrier,
    results: Queue[tuple[str, str, str | None]],
) -> None:
    """One contender: open the ledger, wait for the others, try the same compare-and-set."""
    with Ledger.open(path, create=False) as ledger:
        run = ledger.get_run(run_id)
        barrier.wait(timeout=60)
        try:
            result = run.transition_phase(
                target,
                operation_id=operation,
                reason=f"Race {operation}.",
                expected_sequence=expected_sequence,
                expected_evidence_digest=expected_digest,
                manifest_digest=MANIFEST,
                actor=OPERATOR,
                now=datetime.fromisoformat(now),
            )
        except AgentLedgerError as refused:
            results.put((operation, refused.code, None))
            return
        if result.record is None:
            results.put((operation, result.status, None))
            return
        outcome = "replayed" if result.replayed else "applied"
        results.put((operation, outcome, result.record["id"]))


def read_phase(
    path: str,
    run_id: str,
    now: str,
    barrier: Barrier,
    results: Queue[tuple[str, int]],
) -> None:
    """One reader: the first read after an override lapses must record it (once, overall)."""
    with Ledger.open(path, create=False) as ledger:
        run = ledger.get_run(run_id)
        barrier.wait(timeout=60)
        state = run.phase_state(datetime.fromisoformat(now))
        assert state.effective is not None
        results.put((str(state.effective["digest"]), state.sequence))
