"""The activity boundary: validate, refuse redundancy, pin, mirror — in one transaction.

``record_activity`` is the only way a result enters a run through the contract:

1. validate (result.py): kinds, states, reason, every hash recomputed; for data/ops the
   receipt re-verified (plan projection, every signature, trusted signer, its binding to
   this run and stage); the role's declared kind (team.py); the evidence bytes present
   and, when already stored, re-hashed as verify would (in the write transaction);
2. refuse redundancy: an earlier ``activity.result`` of the same run already pinned this
   evidence set hash. The refusal is itself journaled (``activity.refused``) and mirrored —
   the only refusal that writes anything, and it persists across processes;
3. pin: store the evidence and artifact bytes, append one ``activity.result`` entry;
4. mirror it into the HMAC audit chain.

Every other refusal is raised before anything is written; steps 2-4 share one write
transaction, so a crash leaves either all of them or none. The role, duplicate-stage and
redundancy decisions read the run's and the ``_team`` run's journals as their verified
bytes say, in that transaction (``journal_view.py``), never the ``kind`` column or the
``team_roles`` table; verify re-checks each decision (``verify/stages.py``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import apsw

from agentledger.activity import team
from agentledger.activity.receipts import check_receipt, verify_signatures
from agentledger.activity.result import (
    SIGNED_MODALITIES,
    ActivityRejected,
    ActivityResult,
    artifact_bytes,
    check_result,
    check_role,
    check_stage_id,
)
from agentledger.audit import append_record
from agentledger.bookkeeping import TEAM_RUN
from agentledger.cas import BlobStore
from agentledger.errors import Diverged
from agentledger.journal_view import RunView, read_run
from agentledger.keys import resolve_trust

if TYPE_CHECKING:
    from agentledger._core import Entry
    from agentledger.handle import RunHandle

RESULT_KIND = "activity.result"
REFUSED_KIND = "activity.refused"


class RedundantEvidence(ActivityRejected):
    """A stage whose evidence set an earlier stage of the run already contributed.

    ``entry`` is the ``activity.refused`` entry that records the refusal.
    """

    def __init__(self, message: str, entry: Entry, prior_stage_id: str, prior_seq: int) -> None:
        super().__init__("redundant-evidence", message)
        self.entry = entry
        self.prior_stage_id = prior_stage_id
        self.prior_seq = prior_seq


def record_activity(
    run: RunHandle, result: ActivityResult, *, stage_id: str, role: str | None = None
) -> Entry:
    """Validate, pin and mirror one activity result; refuse it with a typed code otherwise."""
    check_stage_id(stage_id)
    check_role(role)
    check_result(result)
    ledger = run.ledger
    if result.kind in SIGNED_MODALITIES:
        _check_signed_artifact(run, result, stage_id)
    artifact = artifact_bytes(result.artifact)
    body: dict[str, Any] = {
        "stage_id": stage_id,
        "role": role,
        "kind": result.kind,
        "terminal_state": result.terminal_state,
        "reason_code": result.reason_code,
        "artifact_hash": result.artifact_hash,
        "evidence_set_hash": result.evidence_set_hash,
        "observations": [o.to_json() for o in result.observations],
        "mirrored": True,
    }
    master = ledger.keys.audit_key(create=True)
    refusal: RedundantEvidence | None = None
    with ledger.db.write() as conn:
        manifest = _check_role(conn, run, role, result.kind)
        if manifest is not None:
            # The manifest that allowed this role's kind, pinned: verify re-checks it offline.
            body["team_manifest"] = manifest
        _ensure_run(conn, run.id)
        journal = read_run(conn, ledger.id, run.id).require()
        to_store = _evidence_to_store(conn, result, artifact)
        earlier = earlier_result(journal, "stage_id", stage_id)
        if earlier is not None:
            raise ActivityRejected(
                "duplicate-stage",
                f"run {run.id!r} already has a result for stage {stage_id!r} (step {earlier[0]})",
            )
        prior = (
            earlier_result(journal, "evidence_set_hash", result.evidence_set_hash)
            if result.observations
            else None
        )
        if prior is not None:
            refusal = _refuse_redundant(conn, run, body, master, prior)
        else:
            for digest, data in sorted(to_store.items()):
                ledger.blobs.put(data, digest.split(":", 1)[0])
            entry = run._append_locked(conn, [(RESULT_KIND, body)])[0]
            append_record(
                conn, master, ledger_id=ledger.id, event=RESULT_KIND, run_id=run.id,
                seq=entry.seq, entry_hash=entry.hash, body=body,
            )  # fmt: skip
    if refusal is not None:
        raise refusal
    return entry


def _evidence_to_store(
    conn: apsw.Connection, result: ActivityResult, artifact: bytes
) -> dict[str, bytes]:
    """The bytes the result pins that the store lacks, by name, to be stored with it.

    The rest are pinned as stored: in this transaction, each must be listed and its bytes
    must hash to its name as verify re-hashes them (``BlobStore.damage``), or nothing is
    written. A blob row says nothing of its chunks: pinning a damaged one would record a
    result that verify calls diverged the moment it is written.
    """
    held = {o.content_hash: o.data for o in result.observations if o.data is not None}
    held[result.artifact_hash] = artifact
    pinned = {o.content_hash for o in result.observations} | {result.artifact_hash}
    listed = {
        digest
        for (digest,) in conn.execute(
            "SELECT digest FROM blobs WHERE digest IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(pinned)),),
        )
    }
    missing = sorted(pinned - listed - held.keys())
    if missing:
        raise ActivityRejected(
            "missing-evidence",
            f"no bytes for observation hash(es) {', '.join(missing[:3])}: capture them with "
            "Observation.capture(...) or store them first (ledger.blobs.put)",
        )
    damaged = BlobStore.damage(conn, listed)
    if damaged:
        digest, (check, expected, actual) = min(damaged.items())
        raise Diverged(
            f"the stored bytes of {digest}, which this result pins, do not verify ({check}: "
            f"expected {expected}, found {actual}); nothing was written; "
            "`agentledger verify --all` shows what differs",
            code=check.replace(".", "-").replace("_", "-"),
        )
    return {digest: held[digest] for digest in sorted(pinned - listed)}


def _ensure_run(conn: apsw.Connection, run_id: str) -> None:
    """The run's row, created in this transaction if the caller only named the run."""
    conn.execute(
        "INSERT OR IGNORE INTO runs (run_id, ordinal) "
        "VALUES (?, (SELECT coalesce(max(ordinal), 0) + 1 FROM runs))",
        (run_id,),
    )


def earlier_result(journal: RunView, member: str, value: str) -> tuple[int, str] | None:
    """``(seq, stage id)`` of the first ``activity.result`` of ``journal`` whose body's
    ``member`` is ``value`` (verify asks the same of the journal before each stage)."""
    for entry in journal.of_kind(RESULT_KIND):
        if isinstance(entry.body, dict) and entry.body.get(member) == value:
            return entry.seq, str(entry.body.get("stage_id"))
    return None


def _check_role(conn: apsw.Connection, run: RunHandle, role: str | None, kind: str) -> str | None:
    """Refuse a kind the role was not declared with; the hash of the manifest that declares it.

    The team is the ``_team`` journal's, verified from its bytes up to its head, and that
    head is proven in the signed log (as an append to it would be).
    """
    if role is None:
        return None
    run.ledger.run(TEAM_RUN)._prove_head(conn)
    loaded = team.loaded_team(conn, run.ledger.id)
    if not loaded:
        return None
    declared = loaded.get(role)
    if declared is None:
        raise ActivityRejected(
            "unknown-role", f"role {role!r} is not declared by the loaded team manifest"
        )
    declared_kind, manifest_hash = declared
    if declared_kind != kind:
        raise ActivityRejected(
            "kind-mismatch",
            f"role {role!r} is declared as {declared_kind!r} (agent_kind) but the result "
            f"is {kind!r}",
        )
    team.confirm_manifest(conn, manifest_hash, role, declared_kind)
    return manifest_hash


def _refuse_redundant(
    conn: apsw.Connection,
    run: RunHandle,
    body: dict[str, Any],
    master: bytes,
    prior: tuple[int, str],
) -> RedundantEvidence:
    prior_seq, prior_stage = prior
    refused = {
        key: body[key]
        for key in (
            "stage_id", "role", "kind", "terminal_state", "reason_code", "artifact_hash",
            "evidence_set_hash", "mirrored",
        )
    }  # fmt: skip
    refused.update(refusal="redundant-evidence", prior_seq=prior_seq, prior_stage_id=prior_stage)
    entry = run._append_locked(conn, [(REFUSED_KIND, refused)])[0]
    append_record(
        conn, master, ledger_id=run.ledger.id, event=REFUSED_KIND, run_id=run.id,
        seq=entry.seq, entry_hash=entry.hash, body=refused, refusal="redundant-evidence",
    )  # fmt: skip
    return RedundantEvidence(
        f"stage {body['stage_id']!r} re-derives evidence set {body['evidence_set_hash']} "
        f"that stage {prior_stage!r} (step {prior_seq}) already contributed; "
        f"refusal recorded at step {entry.seq}",
        entry,
        prior_stage,
        prior_seq,
    )


def _check_signed_artifact(run: RunHandle, result: ActivityResult, stage_id: str) -> None:
    """A data/ops artifact must be a receipt that verifies, for this run and stage."""
    checked = check_receipt(result.artifact, kind=result.kind, run_id=run.id, stage_id=stage_id)
    for problem in checked.problems:
        code = (
            "plan-hash-mismatch" if problem.check.startswith("receipt.plan") else "invalid-receipt"
        )
        raise ActivityRejected(
            code,
            f"the {result.kind} receipt does not verify: {problem.check}: expected "
            f"{problem.expected}, got {problem.actual}",
        )
    for pending, ok in zip(checked.signatures, verify_signatures(checked.signatures), strict=True):
        if not ok:
            raise ActivityRejected(
                "bad-signature",
                f"the {result.kind} receipt's signature for {pending.label} does not verify",
            )
    trusted = resolve_trust((), run.ledger.keys)
    if checked.signer not in trusted:
        raise ActivityRejected(
            "untrusted-signer",
            f"the receipt is signed by {checked.signer}, which this install does not trust "
            "(agentledger keys trust KEY)",
        )
    observed = sorted(o.content_hash for o in result.observations)
    if sorted(checked.artifact_hashes or []) != observed:
        raise ActivityRejected(
            "receipt-evidence-mismatch",
            "the receipt's inputs and outputs are not exactly the result's observations",
        )


__all__ = ["REFUSED_KIND", "RESULT_KIND", "RedundantEvidence", "earlier_result", "record_activity"]
