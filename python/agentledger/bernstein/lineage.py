"""A run's journal as sealed into bernstein's lineage spine (docs/BERNSTEIN.md §18).

At finalization bernstein appends to ``.sdd/lineage/<run>/spine.jsonl`` an entry whose
``artifact_path`` is the run's journal, whose ``content_hash`` is ``sha256:`` of the
journal's bytes and whose ``step_id`` is ``replay-journal-head:<head>``. Nothing writes
the journal after that, so strict compares the newest such entry with the journal the
ledger holds: other bytes (a cut tail, an edited envelope field) are a finding. The
spine's own hash chain and HMAC tags are not checked here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agentledger.bernstein.format import LINEAGE_DIR
from agentledger.limits import MAX_DOCUMENT_BYTES

SEAL_STEP = "replay-journal-head:"


def spine_path(run_id: str) -> str:
    return f"{LINEAGE_DIR}/{run_id}/spine.jsonl"


@dataclass(frozen=True, slots=True)
class SealedJournal:
    """The newest journal seal of a spine: its line (1-based) and what it pins."""

    line: int
    content_hash: str
    head: str


def sealed_journal(spine: bytes, journal: str) -> SealedJournal | None:
    """The newest entry sealing ``journal`` (a workdir path); None when there is none.
    Lines that do not parse are skipped (they seal nothing)."""
    if len(spine) > MAX_DOCUMENT_BYTES:
        return None
    found = None
    for number, line in enumerate(spine.split(b"\n"), start=1):
        if SEAL_STEP.encode() not in line:
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        step = row.get("step_id") if isinstance(row, dict) else None
        sealed_here = isinstance(step, str) and step.startswith(SEAL_STEP)
        if sealed_here and isinstance(step, str) and row.get("artifact_path") == journal:
            found = SealedJournal(number, str(row.get("content_hash")), step[len(SEAL_STEP) :])
    return found


def journal_problem(
    sealed: SealedJournal, journal_sha256: str | None, head: str | None
) -> str | None:
    """How the journal held now departs from the sealed one, None when it is the same."""
    if sealed.content_hash == journal_sha256:
        return None
    if head != sealed.head:
        return f"{journal_sha256}, head {head}: its rows changed or were cut since the seal"
    return f"{journal_sha256}, head {head}: its bytes changed since the seal (same head)"
