"""A run's signed receipt against its journal (docs/BERNSTEIN.md §17).

bernstein writes ``.sdd/runs/<run>/run-receipt.json`` at finalization: it embeds every
journal row (without the wall-clock fields) and signs a binding of the heads recomputed
from them. ``bernstein verify receipt`` checks the file alone and never looks at the
journal, so a journal cut back after the receipt (the chain stays intact) passes both
that and ``activity verify``. Strict compares the rows the receipt embeds with the
journal the ledger holds: fewer rows, or a different head at the receipt's length, is a
finding. The receipt's signature is not checked here.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass

from agentledger.limits import MAX_DOCUMENT_BYTES

RECEIPT_NAME = "run-receipt.json"


def receipt_path(journal: str) -> str:
    """Where a run's receipt sits: beside its journal."""
    return f"{posixpath.dirname(journal)}/{RECEIPT_NAME}"


@dataclass(frozen=True, slots=True)
class ReceiptClaim:
    """What a receipt's embedded rows say of the journal they were taken from."""

    run_id: str
    rows: int
    head: str


def read_claim(data: bytes) -> ReceiptClaim | str:
    """The claim, or why the receipt cannot be read (bernstein: malformed, exit 1)."""
    if len(data) > MAX_DOCUMENT_BYTES:
        return f"{len(data)} bytes, over the {MAX_DOCUMENT_BYTES} read"
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return f"not JSON ({type(exc).__name__})"
    journal = doc.get("journal") if isinstance(doc, dict) else None
    events = journal.get("events") if isinstance(journal, dict) else None
    if not isinstance(events, list) or not events or not isinstance(events[-1], dict):
        return "no embedded journal rows"
    return ReceiptClaim(str(doc.get("run_id", "")), len(events), str(events[-1].get("event_hash")))


def head_problem(claim: ReceiptClaim, run_id: str, rows: int, head: str | None) -> str | None:
    """How the journal (``rows`` kept rows ending at ``head``) departs from the claim;
    None when it holds the receipt's rows (rows appended since are not compared)."""
    if claim.run_id != run_id:
        return f"the receipt is run {claim.run_id!r}'s"
    if rows < claim.rows:
        return f"{rows} rows, head {head}: rows the receipt covers were cut"
    if rows == claim.rows and head != claim.head:
        return f"{rows} rows, head {head}: not the head the receipt covers"
    return None
