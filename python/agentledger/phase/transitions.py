"""The pure rules of the phase transition journal (no storage, no clock of its own).

A run's phase changes by appending transition records. Storage is the ledger's business;
this module decides, deterministically, what a transition request leads to:

- **compare-and-set** on (sequence, prior evidence digest, manifest digest): a request
  built against a state that has since moved is refused with the reason;
- **idempotency** per operation id: an exact retry returns the original record, a reused
  id with different content is refused;
- **classification** of the move by the *authority delta* between the two evidences:
  narrowing (or no change) applies at once; expansion needs an exact-action approval
  (a deterministic id bound to the exact from/to digests) or an administrator's emergency
  override that expires within 24 hours;
- **override expiry**: once an override's ``expiresAt`` has passed, the next read appends
  one ``override-expired`` record restoring the prior evidence. The record is a pure
  function of the expired record, so concurrent readers build byte-identical records and
  the store's compare-and-set keeps exactly one.

Every function takes the current time as an argument when it needs one. Records, approvals
and deltas are plain JSON objects; :class:`PhaseTransitionRecord` validates a record.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final, Literal, Self

from pydantic import AfterValidator, Field, StrictBool, StrictInt, StrictStr, model_validator
from pydantic_core import PydanticCustomError

from agentledger.errors import AgentLedgerError, ExitCode
from agentledger.phase.digest import sha256_digest, stable_stringify, verify_evidence_digest
from agentledger.phase.models import (
    DIMENSIONS,
    Digest,
    Dimension,
    Identifier,
    OffsetDateTime,
    PhaseCapabilityEvidence,
    SafeText,
    ScopeList,
    StrictModel,
    validate,
)

__all__ = [
    "APPROVAL_ID_PREFIX",
    "MAX_APPROVAL_TTL",
    "MAX_OVERRIDE_TTL",
    "TRANSITION_ID_PREFIX",
    "TRANSITION_RECORD_SCHEMA_VERSION",
    "AuthorityDelta",
    "PhaseTransitionRecord",
    "PhaseTransitionRequest",
    "TransitionOutcome",
    "TransitionRefused",
    "approval_id",
    "approval_misstated",
    "approval_problem",
    "approval_request",
    "authority_delta",
    "check_compare_and_set",
    "decide_approval",
    "effective_approval_status",
    "epoch_ms",
    "expiry_record",
    "is_expansion",
    "js_iso_timestamp",
    "override_has_expired",
    "plan_transition",
    "record_problem",
    "replay_of",
    "same_json",
    "transition_id",
    "verified_evidence",
]

TRANSITION_RECORD_SCHEMA_VERSION: Final = "phase-transition-record/v1"
TRANSITION_ID_PREFIX: Final = "phasetransition_"
APPROVAL_ID_PREFIX: Final = "runapproval_"
MAX_OVERRIDE_TTL: Final = timedelta(hours=24)
MIN_APPROVAL_TTL: Final = timedelta(seconds=1)
MAX_APPROVAL_TTL: Final = timedelta(hours=24)
DEFAULT_APPROVAL_TTL: Final = timedelta(minutes=5)
OVERRIDE_PERMISSION: Final = "admin:manage"

Classification = Literal["same", "narrowing", "expanding", "mixed"]
PolicyDecision = Literal["allow", "approved-expansion", "emergency-override", "override-expired"]
ApprovalStatus = Literal["pending", "approved", "rejected", "expired"]


class TransitionRefused(AgentLedgerError):
    """A transition that must not be applied; ``code`` says why (machine-readable).

    Codes: ``stale-sequence``, ``stale-phase-evidence``, ``stale-manifest``,
    ``operation-reused``, ``evidence-tampered``, ``target-blocked`` (exit 3),
    ``target-legacy``, ``initial-evidence-required``, ``override-not-expansion``,
    ``override-requires-administrator``, ``override-expiry-invalid``, ``approval-mismatch``,
    ``approval-not-approved``, ``approval-ttl-invalid``, ``approval-not-pending``.
    """

    exit_code = ExitCode.INVALID_INPUT
    code = "transition-refused"

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message, code=code)
        self.details = details
        if code == "target-blocked":
            self.exit_code = ExitCode.BLOCKED


# --------------------------------------------------------------------------- time


def epoch_ms(moment: datetime | str) -> int:
    """Milliseconds since the epoch, truncated like ``Date.parse`` (timezone required)."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("a timezone-aware time is required")
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def js_iso_timestamp(moment: datetime | int) -> str:
    """``Date.prototype.toISOString``: UTC, milliseconds, ``Z`` (``2026-07-25T00:00:00.000Z``)."""
    ms = moment if isinstance(moment, int) else epoch_ms(moment)
    utc = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _short_hash(value: Any, length: int) -> str:
    digest = hashlib.sha256(stable_stringify(value).encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")[:length]


# --------------------------------------------------------------------------- models


def _transition_id(value: str) -> str:
    rest = value.removeprefix(TRANSITION_ID_PREFIX)
    if rest == value or not 12 <= len(rest) <= 32 or not _is_id_alphabet(rest):
        raise PydanticCustomError(
            "transition_id", "expected phasetransition_ and 12..32 of [A-Za-z0-9_-]"
        )
    return value


def _approval_id(value: str) -> str:
    rest = value.removeprefix(APPROVAL_ID_PREFIX)
    if rest == value or not 12 <= len(rest) <= 32 or not _is_id_alphabet(rest):
        raise PydanticCustomError(
            "approval_id", "expected runapproval_ and 12..32 of [A-Za-z0-9_-]"
        )
    return value


def _is_id_alphabet(value: str) -> bool:
    return value.isascii() and all(ch.isalnum() or ch in "_-" for ch in value)


TransitionId = Annotated[StrictStr, AfterValidator(_transition_id)]
ApprovalId = Annotated[StrictStr, AfterValidator(_approval_id)]
Sequence = Annotated[StrictInt, Field(ge=1)]
ExpectedSequence = Annotated[StrictInt, Field(ge=0)]


class AuthorityDeltaEntry(StrictModel):
    dimension: Dimension
    addedScopes: ScopeList
    removedScopes: ScopeList


class AuthorityDelta(StrictModel):
    """What a transition adds and removes, per dimension that changes."""

    classification: Classification
    entries: Annotated[list[AuthorityDeltaEntry], Field(max_length=len(DIMENSIONS))]


class TransitionActor(StrictModel):
    id: Identifier
    type: Literal["user", "service", "agent"]


class EmergencyOverride(StrictModel):
    permission: Literal["admin:manage"]
    justification: SafeText
    expiresAt: OffsetDateTime


class EmergencyOverrideRequest(StrictModel):
    justification: SafeText
    expiresAt: OffsetDateTime


class PhaseTransitionRequest(StrictModel):
    """A request to move a run to ``targetEvidence``, built against an observed state."""

    operationId: Identifier
    expectedSequence: ExpectedSequence
    expectedPhaseEvidenceDigest: Digest
    expectedManifestDigest: Digest
    reason: SafeText
    fromEvidence: PhaseCapabilityEvidence | None = None
    targetEvidence: PhaseCapabilityEvidence
    approvalId: ApprovalId | None = None
    approvalTtlMs: Annotated[StrictInt, Field(ge=1_000, le=86_400_000)] | None = None
    emergencyOverride: EmergencyOverrideRequest | None = None


class PhaseTransitionRecord(StrictModel):
    """``phase-transition-record/v1``: one applied, append-only transition of a run."""

    schemaVersion: Literal["phase-transition-record/v1"]
    id: TransitionId
    runId: Identifier
    sequence: Sequence
    operationId: Identifier
    priorEvidence: PhaseCapabilityEvidence
    effectiveEvidence: PhaseCapabilityEvidence
    authorityDelta: AuthorityDelta
    actor: TransitionActor
    reason: SafeText
    policyDecision: PolicyDecision
    approvalId: ApprovalId | None = None
    emergencyOverride: EmergencyOverride | None = None
    manifestDigest: Digest
    eventReference: StrictStr
    createdAt: OffsetDateTime

    @model_validator(mode="after")
    def _decision_carries_its_evidence(self) -> Self:
        if self.policyDecision == "approved-expansion" and self.approvalId is None:
            raise PydanticCustomError(
                "approval_required", "approved expansions require the exact approval id"
            )
        if self.policyDecision == "emergency-override" and self.emergencyOverride is None:
            raise PydanticCustomError(
                "override_required", "emergency override transitions require override evidence"
            )
        if self.policyDecision != "emergency-override" and self.emergencyOverride is not None:
            raise PydanticCustomError(
                "override_unexpected", "only emergency override transitions carry an override"
            )
        return self


class ApprovalRecord(StrictModel):
    """An exact-action approval for one authority expansion."""

    id: ApprovalId
    runId: Identifier
    operationId: Identifier
    fromEvidenceDigest: Digest
    toEvidenceDigest: Digest
    manifestDigest: Digest
    actionHash: Digest
    authorityDelta: AuthorityDelta
    resourceScope: list[StrictStr]
    riskClass: Literal["high", "critical"]
    status: ApprovalStatus
    createdAt: OffsetDateTime
    expiresAt: OffsetDateTime
    decidedBy: TransitionActor | None = None
    decidedAt: OffsetDateTime | None = None
    note: SafeText | None = None
    administratorConfirmed: StrictBool | None = None


# --------------------------------------------------------------------------- delta


def _scope_delta(source: list[str], target: list[str]) -> tuple[list[str], list[str]]:
    if "*" in source and "*" in target:
        return [], []
    if "*" in source:
        return [], ["*"]
    if "*" in target:
        return ["*"], []
    source_set, target_set = set(source), set(target)
    added = [scope for scope in target if scope not in source_set]
    removed = [scope for scope in source if scope not in target_set]
    return added, removed


def authority_delta(
    source: Mapping[str, list[str]], target: Mapping[str, list[str]]
) -> dict[str, Any]:
    """The authority delta from one effective authority to another.

    ``*`` is compared as a token: ``*`` to exact scopes removes ``*`` (and adds nothing),
    exact scopes to ``*`` adds ``*``. Only dimensions that change have an entry.
    """
    entries: list[dict[str, Any]] = []
    for dimension in DIMENSIONS:
        added, removed = _scope_delta(list(source[dimension]), list(target[dimension]))
        if added or removed:
            entries.append({"dimension": dimension, "addedScopes": added, "removedScopes": removed})
    expanded = any(entry["addedScopes"] for entry in entries)
    narrowed = any(entry["removedScopes"] for entry in entries)
    classification: Classification
    if expanded and narrowed:
        classification = "mixed"
    elif expanded:
        classification = "expanding"
    elif narrowed:
        classification = "narrowing"
    else:
        classification = "same"
    return {"classification": classification, "entries": entries}


def is_expansion(delta: Mapping[str, Any]) -> bool:
    """True when the delta adds any scope (``expanding`` or ``mixed``)."""
    return any(entry["addedScopes"] for entry in delta["entries"])


# --------------------------------------------------------------------------- evidence


def verified_evidence(evidence: Mapping[str, Any], label: str) -> dict[str, Any]:
    """Schema-valid evidence whose digest matches its content, else ``evidence-tampered``."""
    validate(PhaseCapabilityEvidence, evidence, f"{label} evidence")
    if not verify_evidence_digest(evidence):
        raise TransitionRefused(
            "evidence-tampered", f"{label} evidence digest does not match its content"
        )
    return dict(evidence)


# --------------------------------------------------------------------------- ids


def transition_id(run_id: str, sequence: int, operation_id: str) -> str:
    """The record id: a pure function of where the record sits and which operation made it."""
    body = {"runId": run_id, "sequence": sequence, "operationId": operation_id}
    return TRANSITION_ID_PREFIX + _short_hash(body, 22)


def approval_id(
    run_id: str,
    operation_id: str,
    from_evidence_digest: str,
    to_evidence_digest: str,
    manifest_digest: str,
) -> str:
    """The approval id of one exact expansion: the same request always gets the same id,
    and approving it approves only the move between these two exact evidences."""
    body = {
        "runId": run_id,
        "operationId": operation_id,
        "fromEvidenceDigest": from_evidence_digest,
        "toEvidenceDigest": to_evidence_digest,
        "manifestDigest": manifest_digest,
    }
    return APPROVAL_ID_PREFIX + _short_hash(body, 24)


# --------------------------------------------------------------------------- approvals


def _derived_approval_fields(
    operation_id: str,
    from_digest: str,
    to_digest: str,
    manifest_digest: str,
    delta: Mapping[str, Any],
) -> dict[str, Any]:
    """What an approval states about the expansion it approves, derived from that expansion:
    its exact-action hash, the scopes it adds and its risk class (``critical`` when it adds
    credential access or external actions, which takes an administrator)."""
    exact_action = {
        "operationId": operation_id,
        "fromEvidenceDigest": from_digest,
        "toEvidenceDigest": to_digest,
        "manifestDigest": manifest_digest,
        "authorityDelta": dict(delta),
    }
    critical = any(
        entry["addedScopes"] and entry["dimension"] in ("credential.access", "external.action")
        for entry in delta["entries"]
    )
    return {
        "actionHash": sha256_digest(exact_action),
        "resourceScope": [
            f"{entry['dimension']}:{scope}"
            for entry in delta["entries"]
            for scope in entry["addedScopes"]
        ],
        "riskClass": "critical" if critical else "high",
    }


def approval_misstated(approval: Mapping[str, Any]) -> list[str]:
    """The fields of a schema-valid approval that do not derive from the expansion it names
    (an approval written below the API may call a critical expansion ``high``)."""
    derived = _derived_approval_fields(
        approval["operationId"],
        approval["fromEvidenceDigest"],
        approval["toEvidenceDigest"],
        approval["manifestDigest"],
        approval["authorityDelta"],
    )
    return [key for key, value in derived.items() if approval.get(key) != value]


def approval_problem(
    run_id: str, approval: Mapping[str, Any], previous: Mapping[str, Any] | None
) -> tuple[str, str] | None:
    """``(expected, found)`` when the schema-valid stored ``approval`` of ``run_id`` is not
    one these rules record after ``previous`` (the same approval's last record, if any):
    its id bound to the move, its statements derived from the expansion, ``pending``
    first and then one decision, taken in time and, when critical, by an administrator."""
    if approval["runId"] != run_id:
        return f"runId {run_id}", approval["runId"]
    expected_id = approval_id(
        approval["runId"],
        approval["operationId"],
        approval["fromEvidenceDigest"],
        approval["toEvidenceDigest"],
        approval["manifestDigest"],
    )
    if approval["id"] != expected_id:
        return f"approval id {expected_id} (bound to the exact move)", approval["id"]
    misstated = approval_misstated(approval)
    if misstated:
        return "an approval stating the expansion it names", "misstated " + ", ".join(misstated)
    if previous is None:
        if approval["status"] != "pending":
            return "a pending approval first", approval["status"]
        return None
    if previous["status"] != "pending":
        return f"no change after {previous['status']}", approval["status"]
    decided = ("status", "decidedBy", "decidedAt", "note", "administratorConfirmed")
    changed = sorted(
        key
        for key in approval.keys() | previous.keys()
        if key not in decided and approval.get(key) != previous.get(key)
    )
    if changed:
        return "only the decision changes", "changed " + ", ".join(changed)
    if (
        approval["status"] == "approved"
        and approval["riskClass"] == "critical"
        and approval.get("administratorConfirmed") is not True
    ):
        return "an administrator's approval (critical)", "not confirmed"
    decided_at = approval.get("decidedAt")
    if approval["status"] in ("approved", "rejected") and (
        decided_at is None or epoch_ms(decided_at) >= epoch_ms(approval["expiresAt"])
    ):
        return f"a decision before {approval['expiresAt']}", str(decided_at)
    return None


def approval_request(
    run_id: str,
    request: Mapping[str, Any],
    prior_evidence: Mapping[str, Any],
    delta: Mapping[str, Any],
    now: datetime,
) -> dict[str, Any]:
    """A pending approval for the expansion ``prior_evidence → request.targetEvidence``."""
    ttl_ms = request.get("approvalTtlMs")
    ttl = DEFAULT_APPROVAL_TTL if ttl_ms is None else timedelta(milliseconds=ttl_ms)
    if not MIN_APPROVAL_TTL <= ttl <= MAX_APPROVAL_TTL:
        raise TransitionRefused("approval-ttl-invalid", "approval TTL must be 1 s to 24 h")
    target_digest = request["targetEvidence"]["digest"]
    derived = _derived_approval_fields(
        request["operationId"],
        prior_evidence["digest"],
        target_digest,
        request["expectedManifestDigest"],
        delta,
    )
    created = epoch_ms(now)
    return {
        "id": approval_id(
            run_id,
            request["operationId"],
            prior_evidence["digest"],
            target_digest,
            request["expectedManifestDigest"],
        ),
        "runId": run_id,
        "operationId": request["operationId"],
        "fromEvidenceDigest": prior_evidence["digest"],
        "toEvidenceDigest": target_digest,
        "manifestDigest": request["expectedManifestDigest"],
        "actionHash": derived["actionHash"],
        "authorityDelta": dict(delta),
        "resourceScope": derived["resourceScope"],
        "riskClass": derived["riskClass"],
        "status": "pending",
        "createdAt": js_iso_timestamp(created),
        "expiresAt": js_iso_timestamp(created + ttl // timedelta(milliseconds=1)),
    }


def effective_approval_status(approval: Mapping[str, Any], now: datetime) -> ApprovalStatus:
    """The status as of ``now``: a pending approval past its expiry reads as ``expired``."""
    status: ApprovalStatus = approval["status"]
    if status == "pending" and epoch_ms(approval["expiresAt"]) <= epoch_ms(now):
        return "expired"
    return status


def decide_approval(
    approval: Mapping[str, Any],
    decision: Literal["approved", "rejected"],
    actor: Mapping[str, Any],
    now: datetime,
    note: str | None = None,
) -> dict[str, Any]:
    """Record a reviewer's decision; only a pending, unexpired approval can be decided."""
    status = effective_approval_status(approval, now)
    if status != "pending":
        raise TransitionRefused(
            "approval-not-pending", f"approval {approval['id']} is {status}", status=status
        )
    decided = dict(approval)
    decided.update(status=decision, decidedBy=dict(actor), decidedAt=js_iso_timestamp(now))
    if note is not None:
        decided["note"] = note
    validate(ApprovalRecord, decided, "approval")
    return decided


# --------------------------------------------------------------------------- compare-and-set


def check_compare_and_set(
    current: Mapping[str, Any] | None,
    prior_evidence_digest: str,
    request: Mapping[str, Any],
) -> None:
    """Refuse a request built against a state other than the current one.

    ``current`` is the run's latest record (``None`` before the first transition);
    ``prior_evidence_digest`` the digest of the evidence in force.
    """
    active_sequence = current["sequence"] if current is not None else 0
    if active_sequence != request["expectedSequence"]:
        raise TransitionRefused(
            "stale-sequence",
            "phase transition sequence is stale",
            expectedSequence=request["expectedSequence"],
            activeSequence=active_sequence,
        )
    if prior_evidence_digest != request["expectedPhaseEvidenceDigest"]:
        raise TransitionRefused(
            "stale-phase-evidence",
            "phase transition evidence is stale",
            expected=request["expectedPhaseEvidenceDigest"],
            active=prior_evidence_digest,
        )
    if current is not None and current["manifestDigest"] != request["expectedManifestDigest"]:
        raise TransitionRefused(
            "stale-manifest",
            "phase transition manifest reference is stale",
            expected=request["expectedManifestDigest"],
            active=current["manifestDigest"],
        )


def replay_of(existing: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """The original record when ``request`` retries it exactly; ``operation-reused`` if not."""
    same = (
        existing["priorEvidence"]["digest"] == request["expectedPhaseEvidenceDigest"]
        and existing["effectiveEvidence"]["digest"] == request["targetEvidence"]["digest"]
        and existing["manifestDigest"] == request["expectedManifestDigest"]
        and existing["sequence"] == request["expectedSequence"] + 1
    )
    if not same:
        raise TransitionRefused(
            "operation-reused",
            f"operation id {existing['operationId']} was already used for another transition",
            sequence=existing["sequence"],
        )
    return dict(existing)


# --------------------------------------------------------------------------- transitions


@dataclass(frozen=True)
class TransitionOutcome:
    """``applied`` (append ``record``; ``replayed`` when it already exists) or
    ``approval-required`` (store ``approval`` and ask a reviewer)."""

    status: Literal["applied", "approval-required"]
    record: dict[str, Any] | None = None
    approval: dict[str, Any] | None = None
    replayed: bool = False
    delta: dict[str, Any] = field(default_factory=dict)


def plan_transition(
    *,
    run_id: str,
    request: Mapping[str, Any],
    current: Mapping[str, Any] | None,
    existing: Mapping[str, Any] | None,
    actor: Mapping[str, Any],
    administrator: bool,
    approval: Mapping[str, Any] | None,
    now: datetime,
) -> TransitionOutcome:
    """Decide a transition request. Pure: the caller supplies every state and the time.

    ``current`` is the run's latest record, ``existing`` the record already made by this
    ``operationId`` (if any), ``approval`` the stored approval with the id this request's
    expansion would have (if any). The caller appends ``outcome.record`` with a
    compare-and-set on ``expectedSequence`` so that only one concurrent request wins.
    """
    validated = validate(PhaseTransitionRequest, request, "phase transition request")
    actor = validate(TransitionActor, actor, "transition actor").model_dump()
    # Work on the validated (trimmed) scalars; evidences stay the exact objects submitted.
    request = {
        **request,
        "operationId": validated.operationId,
        "reason": validated.reason,
    }
    target = verified_evidence(request["targetEvidence"], "target")
    if target["status"] == "blocked":
        raise TransitionRefused(
            "target-blocked",
            "blocked phase evidence cannot become active",
            blockers=[blocker["code"] for blocker in target["blockers"]],
        )
    if target["identity"]["mode"] != "profile":
        raise TransitionRefused("target-legacy", "a transition must target a phase profile")

    if existing is not None:
        return TransitionOutcome("applied", record=replay_of(existing, request), replayed=True)

    if current is not None:
        prior = dict(current["effectiveEvidence"])
    elif validated.fromEvidence is not None:
        prior = verified_evidence(request["fromEvidence"], "initial")
    else:
        raise TransitionRefused(
            "initial-evidence-required",
            "the first transition of a run requires its exact initial phase evidence",
        )
    check_compare_and_set(current, prior["digest"], request)

    delta = authority_delta(prior["effectiveAuthority"], target["effectiveAuthority"])
    decision: PolicyDecision = "allow"
    extra: dict[str, Any] = {}
    override = request.get("emergencyOverride")
    if override is not None:
        if not is_expansion(delta):
            raise TransitionRefused(
                "override-not-expansion", "emergency override is reserved for expansion"
            )
        if not administrator:
            raise TransitionRefused(
                "override-requires-administrator",
                f"emergency phase override requires {OVERRIDE_PERMISSION}",
            )
        expires, moment = epoch_ms(override["expiresAt"]), epoch_ms(now)
        if not moment < expires <= moment + MAX_OVERRIDE_TTL // timedelta(milliseconds=1):
            raise TransitionRefused(
                "override-expiry-invalid", "emergency phase override must expire within 24 hours"
            )
        decision = "emergency-override"
        assert validated.emergencyOverride is not None
        extra["emergencyOverride"] = {
            "permission": OVERRIDE_PERMISSION,
            "justification": validated.emergencyOverride.justification,
            "expiresAt": validated.emergencyOverride.expiresAt,
        }
    elif is_expansion(delta):
        expected_id = approval_id(
            run_id,
            request["operationId"],
            prior["digest"],
            target["digest"],
            request["expectedManifestDigest"],
        )
        if request.get("approvalId") is not None and request["approvalId"] != expected_id:
            raise TransitionRefused(
                "approval-mismatch",
                "the approval does not match the requested expansion",
                expectedApprovalId=expected_id,
                receivedApprovalId=request["approvalId"],
            )
        if approval is None:
            pending = approval_request(run_id, request, prior, delta, now)
            return TransitionOutcome("approval-required", approval=pending, delta=delta)
        if approval["id"] != expected_id:
            raise TransitionRefused(
                "approval-mismatch", "the supplied approval is for another expansion"
            )
        status = effective_approval_status(approval, now)
        if status == "pending":
            return TransitionOutcome("approval-required", approval=dict(approval), delta=delta)
        if status != "approved":
            raise TransitionRefused(
                "approval-not-approved", f"approval {expected_id} is {status}", status=status
            )
        if approval["authorityDelta"] != delta:
            # Its id names this move, but the reviewer approved another expansion.
            raise TransitionRefused(
                "approval-mismatch", "the approval was given for another authority delta"
            )
        decision = "approved-expansion"
        extra["approvalId"] = expected_id

    sequence = request["expectedSequence"] + 1
    record_id = transition_id(run_id, sequence, request["operationId"])
    record: dict[str, Any] = {
        "schemaVersion": TRANSITION_RECORD_SCHEMA_VERSION,
        "id": record_id,
        "runId": run_id,
        "sequence": sequence,
        "operationId": request["operationId"],
        "priorEvidence": prior,
        "effectiveEvidence": target,
        "authorityDelta": delta,
        "actor": actor,
        "reason": request["reason"],
        "policyDecision": decision,
        **extra,
        "manifestDigest": request["expectedManifestDigest"],
        "eventReference": f"phase:{record_id}",
        "createdAt": js_iso_timestamp(now),
    }
    validate(PhaseTransitionRecord, record, "phase transition record")
    return TransitionOutcome("applied", record=record, delta=delta)


# --------------------------------------------------------------------------- stored records


def same_json(left: Any, right: Any) -> bool:
    """Equality as JavaScript's ``JSON.stringify`` sees it (``1`` and ``1.0`` are one number)."""
    try:
        return stable_stringify(left) == stable_stringify(right)
    except (TypeError, ValueError):
        return False


def record_problem(
    run_id: str,
    record: Mapping[str, Any],
    prior: Mapping[str, Any] | None,
    records: list[dict[str, Any]],
    approvals: Mapping[str, Mapping[str, Any]],
) -> tuple[str, str] | None:
    """``(expected, found)`` when the schema-valid ``record`` is not one these rules apply
    after ``records``, with ``prior`` in force and ``approvals`` as recorded before it; else
    ``None``. Verify reports such a record, and no decision or move is taken on it (that
    its target recompiles from its recorded input is checked by the caller)."""
    if record["runId"] != run_id:
        return f"runId {run_id}", record["runId"]
    if record["sequence"] != len(records) + 1:
        return f"sequence {len(records) + 1}", str(record["sequence"])
    if prior is None:
        return "a verified evidence in force before a transition", "none"
    if not same_json(record["priorEvidence"], prior):
        return f"prior evidence {prior['digest']} (in force)", str(
            record["priorEvidence"]["digest"]
        )
    target = record["effectiveEvidence"]
    if target["status"] == "blocked" or target["identity"]["mode"] != "profile":
        return "unblocked profile evidence", f"{target['status']} evidence"
    delta = authority_delta(prior["effectiveAuthority"], target["effectiveAuthority"])
    if not same_json(delta, record["authorityDelta"]):
        return f"authority delta {delta['classification']}", "another delta"
    decision = record["policyDecision"]
    if decision == "override-expired":
        previous = records[-1] if records else None
        if previous is None or previous.get("policyDecision") != "emergency-override":
            return "override-expired right after an emergency override", "no"
        if not same_json(expiry_record(previous), record):
            return "the deterministic override-expired record", "another record"
        return None
    if decision == "emergency-override":
        if not is_expansion(delta):
            return "an expansion under emergency override", delta["classification"]
        created = epoch_ms(record["createdAt"])
        expires = epoch_ms(record["emergencyOverride"]["expiresAt"])
        if not created < expires <= created + MAX_OVERRIDE_TTL // timedelta(milliseconds=1):
            return (
                "an override expiring within 24 hours of its record",
                record["emergencyOverride"]["expiresAt"],
            )
        return None
    if decision == "approved-expansion":
        expected = approval_id(
            run_id,
            record["operationId"],
            prior["digest"],
            target["digest"],
            record["manifestDigest"],
        )
        approval = approvals.get(expected)
        if record.get("approvalId") != expected or approval is None:
            return f"approval {expected} recorded", str(record.get("approvalId"))
        if approval["status"] != "approved":
            return f"approval {expected} approved", approval["status"]
        if not same_json(approval["authorityDelta"], delta):
            return f"approval {expected} of this authority delta", "another authority delta"
        return None
    if is_expansion(delta):
        return "an approval or override for an expansion", decision
    return None


# --------------------------------------------------------------------------- override expiry


def override_has_expired(record: Mapping[str, Any], now: datetime) -> bool:
    """True when ``record`` is an emergency override whose ``expiresAt`` is not after ``now``."""
    override = record.get("emergencyOverride")
    return override is not None and epoch_ms(override["expiresAt"]) <= epoch_ms(now)


SYSTEM_ACTOR: Final = {"id": "phase-override-expiry", "type": "service"}


def expiry_record(current: Mapping[str, Any]) -> dict[str, Any]:
    """The one ``override-expired`` record that follows an expired override ``current``.

    It restores the evidence that was in force before the override. It depends on nothing
    but ``current`` — its time is the override's own expiry, its id derives from the
    operation ``override-expiry:<override id>`` — so any number of readers, in any process,
    at any later time, build the same record, and a compare-and-set append keeps one.
    """
    override = current.get("emergencyOverride")
    if current.get("policyDecision") != "emergency-override" or override is None:
        raise ValueError("only an emergency override record can expire")
    sequence = current["sequence"] + 1
    operation_id = f"override-expiry:{current['id']}"
    record_id = transition_id(current["runId"], sequence, operation_id)
    record = {
        "schemaVersion": TRANSITION_RECORD_SCHEMA_VERSION,
        "id": record_id,
        "runId": current["runId"],
        "sequence": sequence,
        "operationId": operation_id,
        "priorEvidence": dict(current["effectiveEvidence"]),
        "effectiveEvidence": dict(current["priorEvidence"]),
        "authorityDelta": authority_delta(
            current["effectiveEvidence"]["effectiveAuthority"],
            current["priorEvidence"]["effectiveAuthority"],
        ),
        "actor": dict(SYSTEM_ACTOR),
        "reason": f"Emergency phase override {current['id']} expired.",
        "policyDecision": "override-expired",
        "manifestDigest": current["manifestDigest"],
        "eventReference": f"phase:{record_id}",
        "createdAt": js_iso_timestamp(epoch_ms(override["expiresAt"])),
    }
    validate(PhaseTransitionRecord, record, "phase transition record")
    return record
