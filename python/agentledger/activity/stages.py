"""A run's stages as people want to see them: modality, state, evidence, receipt status."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentledger import _core
from agentledger.activity.boundary import REFUSED_KIND, RESULT_KIND
from agentledger.activity.receipts import check_receipt, verify_signatures
from agentledger.activity.result import SIGNED_MODALITIES
from agentledger.cas import BlobStore
from agentledger.errors import AgentLedgerError
from agentledger.keys import resolve_trust

if TYPE_CHECKING:
    from agentledger._core import Entry
    from agentledger.handle import LedgerHandle


def stage_summaries(
    ledger: LedgerHandle, entries: Iterable[Entry], trust: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """One summary per ``activity.result`` / ``activity.refused`` entry, in journal order.

    ``receipt`` is None for modalities without one, else ``verified``, ``missing``,
    ``untrusted signer``, or ``invalid: <check>`` (checked with this install's trust and
    ``trust``, the keys the verify of the same command trusts: one answer for both).
    """
    trusted: set[str] | str | None = None
    staged = [
        entry
        for entry in entries
        if entry.kind in (RESULT_KIND, REFUSED_KIND) and isinstance(entry.body, dict)
    ]
    pinned = {
        o["content_hash"]
        for entry in staged
        for o in _observations(entry.body)
        if isinstance(o, dict) and isinstance(o.get("content_hash"), str)
    }
    whole = _stored_whole(ledger, pinned)
    out = []
    for entry in staged:
        body = entry.body
        observations = _observations(body)
        present = sum(
            1 for o in observations if isinstance(o, dict) and o.get("content_hash") in whole
        )
        receipt = None
        if entry.kind == RESULT_KIND and body.get("kind") in SIGNED_MODALITIES:
            if trusted is None:
                try:
                    trusted = resolve_trust(trust, ledger.keys)
                except AgentLedgerError as exc:  # a key file to refuse: say so, show the rest
                    trusted = f"not checked: {exc.code}"
            receipt = (
                trusted if isinstance(trusted, str) else receipt_status(ledger, entry, trusted)
            )
        out.append(
            {
                "seq": entry.seq,
                "entry": entry.kind,
                "stage_id": body.get("stage_id"),
                "role": body.get("role"),
                "kind": body.get("kind"),
                "terminal_state": body.get("terminal_state"),
                "reason_code": body.get("reason_code"),
                "refusal": body.get("refusal"),
                "evidence_set_hash": body.get("evidence_set_hash"),
                "artifact_hash": body.get("artifact_hash"),
                "evidence": {"observations": len(observations), "present": present},
                "receipt": receipt,
            }
        )
    return out


def _observations(body: dict[str, Any]) -> list[Any]:
    observations = body.get("observations")
    return observations if isinstance(observations, list) else []


def _stored_whole(ledger: LedgerHandle, digests: set[str]) -> set[str]:
    """The ``digests`` the store lists whose bytes re-hash as verify re-hashes them (one
    snapshot): a listed blob whose chunks were removed or edited is not evidence present."""
    if not digests:
        return set()
    with ledger.db.snapshot() as conn:
        listed = {
            digest
            for (digest,) in conn.execute(
                "SELECT digest FROM blobs WHERE digest IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(digests)),),
            )
        }
        return listed - BlobStore.damage(conn, listed).keys()


def receipt_status(ledger: LedgerHandle, entry: Entry, trusted: set[str]) -> str:
    body = entry.body
    digest = body.get("artifact_hash")
    if not isinstance(digest, str) or digest not in ledger.blobs:
        return "missing"
    # A row with no chunks holds no bytes: missing, as verify says (receipt.missing).
    chunks = list(ledger.blobs.iter_chunks(digest))
    if not chunks:
        return "missing"
    data = b"".join(chunks)
    if _core.blake3_hex(data) != digest:
        return "invalid: receipt.artifact_hash"
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # nested past the parser's depth: not a receipt
        return "invalid: receipt.json"
    checked = check_receipt(
        doc, kind=str(body.get("kind")), run_id=entry.run_id, stage_id=str(body.get("stage_id"))
    )
    if checked.problems:
        return f"invalid: {checked.problems[0].check}"
    if not all(verify_signatures(checked.signatures)):
        return "invalid: receipt.signature"
    if checked.signer not in trusted:
        return "untrusted signer"
    return "verified"
