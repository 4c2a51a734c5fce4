"""Data/ops receipts: reattached, re-hashed, re-projected, and every signature re-checked.

For each data/ops ``activity.result`` of the selected runs, the receipt is read back from
the blob store by its anchored ``artifact_hash``; its bytes must hash to that value, its
plan hash must recompute from its input hashes and steps, its inputs and outputs must be
exactly the entry's observations, it must be bound to this run and stage, and its signer
must be trusted (keys from outside the ledger). Signatures of many receipts are checked
together in one Rust batch (``_core.ed25519_verify_batch``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from agentledger import _core
from agentledger.activity.receipts import PendingSignature, check_receipt, verify_signatures
from agentledger.activity.result import SIGNED_MODALITIES
from agentledger.keys import resolve_trust
from agentledger.limits import entry_document
from agentledger.verify.context import IN_SELECTED, VerifyContext
from agentledger.verify.results import Divergence

SIGNATURE_BATCH = 8_192
# A byte search picks the candidates (canonical JSON writes the body's kind exactly so);
# each candidate's body is then parsed and checked exactly, so a false positive costs a parse.
_SIGNED = (
    "SELECT run_id, seq, bytes FROM entries WHERE kind = 'activity.result' {where} "
    'AND (instr(bytes, CAST(\'"kind":"data"\' AS BLOB)) > 0 '
    'OR instr(bytes, CAST(\'"kind":"ops"\' AS BLOB)) > 0) ORDER BY run_id, seq'
)
ALL_SIGNED = _SIGNED.format(where="")
RUN_SIGNED = _SIGNED.format(where=f"AND {IN_SELECTED}")
CHUNKS = "SELECT data FROM blob_chunks WHERE digest = ? ORDER BY idx"


@dataclass(frozen=True, slots=True)
class _Pending:
    run_id: str
    seq: int
    stage_id: str
    signature: PendingSignature


def _rows(ctx: VerifyContext) -> Iterator[tuple[str, int, bytes]]:
    if ctx.whole:
        # The journal pass marked exactly the rows ALL_SIGNED selects.
        marks = ("receipt_data", "receipt_ops")
        yield from ctx.marked_rows(marks, "run_id, seq, bytes", ALL_SIGNED)
        return
    yield from ctx.conn.execute(RUN_SIGNED, (ctx.selected_json,))


def _blob(ctx: VerifyContext, digest: str) -> bytes | None:
    """The blob's bytes; None when it has no chunks (every stored blob has at least one)."""
    chunks = [row[0] for row in ctx.conn.execute(CHUNKS, (digest,))]
    return b"".join(chunks) if chunks else None


def check_receipts(ctx: VerifyContext) -> None:
    """Reattach and re-verify every data/ops receipt of the selected runs."""
    trusted: set[str] | None = None  # resolved at the first receipt: none, no key read
    pending: list[_Pending] = []
    untrusted: set[str] = set()
    for run_id, seq, raw in _rows(ctx):
        if trusted is None:
            trusted = resolve_trust(ctx.options.trust, ctx.ledger.keys)
        pending.extend(_check_one(ctx, run_id, seq, raw, trusted, untrusted))
        if len(pending) >= SIGNATURE_BATCH:
            _flush(ctx, pending)
            pending = []
    _flush(ctx, pending)
    if untrusted:
        ctx.report.notes.append(
            "receipts signed by untrusted key(s): "
            + ", ".join(sorted(untrusted))
            + " (trust one with --trust KEY or `agentledger keys trust KEY`)"
        )


def _check_one(
    ctx: VerifyContext, run_id: str, seq: int, raw: bytes, trusted: set[str], untrusted: set[str]
) -> list[_Pending]:
    def diverged(check: str, expected: str, actual: str, subject: str | None = None) -> None:
        ctx.diverged(run_id, Divergence(run_id, seq, check, expected, actual, subject))

    try:
        body = entry_document(raw)["body"]
        kind, stage_id, artifact_hash = body["kind"], body["stage_id"], body["artifact_hash"]
        observations = body["observations"]
        observed = sorted(o["content_hash"] for o in observations)
    except (ValueError, KeyError, TypeError, RecursionError):
        diverged("receipt.entry", "a data/ops result body", "malformed")
        return []
    if kind not in SIGNED_MODALITIES or not isinstance(artifact_hash, str):
        return []
    ctx.report.receipts_checked += 1
    data = _blob(ctx, artifact_hash)
    if data is None:
        diverged("receipt.missing", artifact_hash, "absent from the blob store", stage_id)
        return []
    actual = (_core.sha256_hex if artifact_hash.startswith("sha256:") else _core.blake3_hex)(data)
    if actual != artifact_hash:
        diverged("receipt.artifact_hash", artifact_hash, actual, stage_id)
        return []
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        diverged("receipt.json", "a JSON receipt", str(exc), stage_id)
        return []
    checked = check_receipt(doc, kind=kind, run_id=run_id, stage_id=stage_id)
    for problem in checked.problems:
        diverged(problem.check, problem.expected, problem.actual, problem.subject or stage_id)
    if checked.artifact_hashes is not None and sorted(checked.artifact_hashes) != observed:
        diverged(
            "receipt.observations",
            f"{len(observed)} observation hash(es) of the entry",
            f"{len(checked.artifact_hashes)} receipt input/output hash(es), differing",
            stage_id,
        )
    if checked.signer is not None and checked.signer not in trusted:
        untrusted.add(checked.signer)
        diverged("receipt.untrusted_signer", "a trusted signer", checked.signer, stage_id)
    return [_Pending(run_id, seq, stage_id, sig) for sig in checked.signatures]


def _flush(ctx: VerifyContext, pending: Iterable[_Pending]) -> None:
    items = list(pending)
    verdicts = verify_signatures([item.signature for item in items])
    ctx.report.signatures_checked += len(items)
    for item, ok in zip(items, verdicts, strict=True):
        if not ok:
            ctx.diverged(
                item.run_id,
                Divergence(
                    item.run_id, item.seq, "receipt.signature", "a valid Ed25519 signature",
                    f"{item.signature.signature.hex()}, which does not verify for "
                    f"{item.signature.label}", item.stage_id,
                ),
            )  # fmt: skip
