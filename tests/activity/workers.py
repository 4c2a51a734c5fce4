"""Process entry points for the activity concurrency test (importable by spawned interpreters)."""

from __future__ import annotations

from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from agentledger import ActivityRejected, Ledger

from .activity_testkit import research_result


def race_same_evidence(path: str, stage_id: str, barrier: Barrier, results: Queue[str]) -> None:
    """One contender: record the same evidence as every other contender, under its own stage."""
    with Ledger.open(path, create=False) as ledger:
        barrier.wait(timeout=60)
        try:
            ledger.run("r").record_activity(research_result(), stage_id=stage_id)
            results.put("recorded")
        except ActivityRejected as exc:
            results.put(exc.code)
