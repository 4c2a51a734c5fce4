"""The pure transition-journal rules: delta, compare-and-set, idempotency, approvals, overrides."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from agentledger.errors import ExitCode
from agentledger.phase import DIMENSIONS, PhaseInputError, compile, validate
from agentledger.phase.transitions import (
    PhaseTransitionRecord,
    TransitionRefused,
    approval_id,
    authority_delta,
    check_compare_and_set,
    decide_approval,
    effective_approval_status,
    epoch_ms,
    expiry_record,
    is_expansion,
    js_iso_timestamp,
    override_has_expired,
    plan_transition,
    transition_id,
)

from .phase_testkit import compiler_input, source

RUN = "run-0042"
MANIFEST = "sha256:" + "a" * 64
OTHER_MANIFEST = "sha256:" + "b" * 64
NOW = datetime(2026, 7, 25, 12, 0, 0, tzinfo=UTC)
OPERATOR = {"id": "operator:alice", "type": "user"}
REVIEWER = {"id": "operator:bob", "type": "user"}


def evidence(phase: str, **sources: Any) -> dict[str, Any]:
    return compile(compiler_input(phase, **sources))


def authority(**scopes: list[str]) -> dict[str, list[str]]:
    return {d: list(scopes.get(d.replace(".", "_"), [])) for d in DIMENSIONS}


def request(
    target: dict[str, Any],
    prior: dict[str, Any],
    *,
    operation: str = "op-1",
    sequence: int = 0,
    first: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "operationId": operation,
        "expectedSequence": sequence,
        "expectedPhaseEvidenceDigest": prior["digest"],
        "expectedManifestDigest": MANIFEST,
        "reason": f"Transition for {operation}.",
        "targetEvidence": target,
    }
    if first:
        document["fromEvidence"] = prior
    document.update(extra)
    return document


def plan(
    req: dict[str, Any],
    *,
    current: dict[str, Any] | None = None,
    existing: dict[str, Any] | None = None,
    approval: dict[str, Any] | None = None,
    administrator: bool = False,
    now: datetime = NOW,
) -> Any:
    return plan_transition(
        run_id=RUN,
        request=req,
        current=current,
        existing=existing,
        actor=OPERATOR,
        administrator=administrator,
        approval=approval,
        now=now,
    )


# --------------------------------------------------------------------------- delta


def test_delta_compares_wildcards_as_tokens() -> None:
    delta = authority_delta(
        authority(network_egress=["*"], credential_access=["*"], filesystem_read=["a"]),
        authority(network_egress=["*"], credential_access=["npm"], filesystem_read=["*"]),
    )
    assert delta == {
        "classification": "mixed",
        "entries": [
            {"dimension": "filesystem.read", "addedScopes": ["*"], "removedScopes": []},
            {"dimension": "credential.access", "addedScopes": [], "removedScopes": ["*"]},
        ],
    }


def test_delta_keeps_each_sides_order() -> None:
    delta = authority_delta(
        authority(command_execute=["c", "b", "a"]), authority(command_execute=["e", "a", "d"])
    )
    assert delta["entries"] == [
        {"dimension": "command.execute", "addedScopes": ["e", "d"], "removedScopes": ["c", "b"]}
    ]


@pytest.mark.parametrize(
    ("source_phase", "target_phase", "classification"),
    [
        ("implement", "implement", "same"),
        ("implement", "verify", "narrowing"),
        ("verify", "explore", "narrowing"),
        ("plan", "implement", "expanding"),
        ("explore", "publish", "expanding"),
    ],
)
def test_builtin_phase_moves_are_classified(
    source_phase: str, target_phase: str, classification: str
) -> None:
    delta = authority_delta(
        evidence(source_phase)["effectiveAuthority"], evidence(target_phase)["effectiveAuthority"]
    )
    assert delta["classification"] == classification
    assert is_expansion(delta) == (classification in ("expanding", "mixed"))


def test_delta_of_a_mixed_move() -> None:
    narrowed = evidence("implement", sandbox=source("sandbox", {"network.egress": ["pypi.org"]}))
    publish = evidence("publish")
    delta = authority_delta(narrowed["effectiveAuthority"], publish["effectiveAuthority"])
    assert delta["classification"] == "mixed"
    entries = {entry["dimension"]: entry for entry in delta["entries"]}
    assert entries["command.execute"]["addedScopes"] == ["publish"]
    assert entries["command.execute"]["removedScopes"] == ["format", "mutate"]
    assert entries["network.egress"]["addedScopes"] == ["*"]


# --------------------------------------------------------------------------- ids and time


def test_ids_are_deterministic_and_bound_to_their_inputs() -> None:
    first = approval_id(RUN, "op-1", "sha256:" + "1" * 64, "sha256:" + "2" * 64, MANIFEST)
    assert first == approval_id(RUN, "op-1", "sha256:" + "1" * 64, "sha256:" + "2" * 64, MANIFEST)
    assert first.startswith("runapproval_") and len(first) == len("runapproval_") + 24
    assert first != approval_id(RUN, "op-1", "sha256:" + "1" * 64, "sha256:" + "3" * 64, MANIFEST)
    assert first != approval_id(RUN, "op-2", "sha256:" + "1" * 64, "sha256:" + "2" * 64, MANIFEST)
    assert transition_id(RUN, 1, "op-1") == transition_id(RUN, 1, "op-1")
    assert transition_id(RUN, 1, "op-1") != transition_id(RUN, 2, "op-1")


def test_timestamps_follow_javascript() -> None:
    assert js_iso_timestamp(NOW) == "2026-07-25T12:00:00.000Z"
    shifted = datetime(2026, 7, 25, 14, 0, 0, 123999, tzinfo=timezone(timedelta(hours=2)))
    assert js_iso_timestamp(shifted) == "2026-07-25T12:00:00.123Z"
    assert epoch_ms("2026-07-25T12:00:00.1239Z") == epoch_ms(NOW) + 123
    assert epoch_ms("2026-07-25T17:30:00+0530") == epoch_ms(NOW)
    with pytest.raises(ValueError):
        epoch_ms(datetime(2026, 7, 25))


# --------------------------------------------------------------------------- narrowing


def test_first_transition_requires_the_initial_evidence() -> None:
    with pytest.raises(TransitionRefused) as raised:
        plan(request(evidence("verify"), evidence("implement"), first=False))
    assert raised.value.code == "initial-evidence-required"


def test_narrowing_applies_at_once() -> None:
    implement, verify = evidence("implement"), evidence("verify")
    outcome = plan(request(verify, implement))
    assert outcome.status == "applied" and not outcome.replayed
    record = outcome.record
    validate(PhaseTransitionRecord, record)
    assert record["sequence"] == 1
    assert record["policyDecision"] == "allow"
    assert record["priorEvidence"] == implement
    assert record["effectiveEvidence"] == verify
    assert record["authorityDelta"]["classification"] == "narrowing"
    assert record["id"] == transition_id(RUN, 1, "op-1")
    assert record["eventReference"] == f"phase:{record['id']}"
    assert record["createdAt"] == "2026-07-25T12:00:00.000Z"
    assert record["actor"] == OPERATOR
    assert "approvalId" not in record and "emergencyOverride" not in record


def test_next_transition_starts_from_the_current_record() -> None:
    implement, verify, explore = evidence("implement"), evidence("verify"), evidence("explore")
    first = plan(request(verify, implement)).record
    second = plan(
        request(explore, verify, operation="op-2", sequence=1, first=False), current=first
    ).record
    assert second["sequence"] == 2
    assert second["priorEvidence"] == verify


# --------------------------------------------------------------------------- compare-and-set


def test_stale_sequence_is_refused() -> None:
    implement, verify = evidence("implement"), evidence("verify")
    first = plan(request(verify, implement)).record
    # a concurrent writer that also observed sequence 0 loses
    loser = request(evidence("explore"), implement, operation="op-2", sequence=0)
    with pytest.raises(TransitionRefused) as raised:
        plan(loser, current=first)
    assert raised.value.code == "stale-sequence"


def test_stale_evidence_digest_is_refused() -> None:
    implement, verify = evidence("implement"), evidence("verify")
    first = plan(request(verify, implement)).record
    stale = request(evidence("explore"), implement, operation="op-2", sequence=1, first=False)
    with pytest.raises(TransitionRefused) as raised:
        plan(stale, current=first)
    assert raised.value.code == "stale-phase-evidence"


def test_stale_manifest_is_refused() -> None:
    implement, verify = evidence("implement"), evidence("verify")
    first = plan(request(verify, implement)).record
    stale = request(
        evidence("explore"),
        verify,
        operation="op-2",
        sequence=1,
        first=False,
        expectedManifestDigest=OTHER_MANIFEST,
    )
    with pytest.raises(TransitionRefused) as raised:
        plan(stale, current=first)
    assert raised.value.code == "stale-manifest"


def test_compare_and_set_on_an_empty_journal() -> None:
    implement = evidence("implement")
    check_compare_and_set(None, implement["digest"], request(evidence("verify"), implement))
    with pytest.raises(TransitionRefused) as raised:
        check_compare_and_set(
            None, implement["digest"], request(evidence("verify"), implement, sequence=1)
        )
    assert raised.value.code == "stale-sequence"


# --------------------------------------------------------------------------- idempotency


def test_exact_retry_returns_the_original_record() -> None:
    implement, verify = evidence("implement"), evidence("verify")
    req = request(verify, implement)
    original = plan(req).record
    retry = plan(req, current=original, existing=original, now=NOW + timedelta(hours=1))
    assert retry.replayed and retry.record == original


def test_reused_operation_id_with_other_content_is_refused() -> None:
    implement, verify = evidence("implement"), evidence("verify")
    original = plan(request(verify, implement)).record
    other = request(evidence("explore"), implement)
    with pytest.raises(TransitionRefused) as raised:
        plan(other, current=original, existing=original)
    assert raised.value.code == "operation-reused"


# --------------------------------------------------------------------------- target evidence


def test_blocked_target_is_refused_with_exit_code_3() -> None:
    blocked = evidence("verify", sandbox=source("sandbox", {"command.execute": []}))
    assert blocked["status"] == "blocked"
    with pytest.raises(TransitionRefused) as raised:
        plan(request(blocked, evidence("implement")))
    assert raised.value.code == "target-blocked"
    assert raised.value.exit_code == ExitCode.BLOCKED


def test_tampered_target_is_refused() -> None:
    target = evidence("verify")
    target["effectiveAuthority"]["credential.access"] = ["*"]
    with pytest.raises(TransitionRefused) as raised:
        plan(request(target, evidence("implement")))
    assert raised.value.code == "evidence-tampered"


def test_tampered_initial_evidence_is_refused() -> None:
    prior = evidence("implement")
    forged = copy.deepcopy(prior)
    forged["status"] = "narrowed"
    req = request(evidence("verify"), prior)
    req["fromEvidence"] = forged
    with pytest.raises(TransitionRefused) as raised:
        plan(req)
    assert raised.value.code == "evidence-tampered"


def test_legacy_target_is_refused() -> None:
    with pytest.raises(TransitionRefused) as raised:
        plan(request(compile(compiler_input()), evidence("implement")))
    assert raised.value.code == "target-legacy"


def test_malformed_request_is_invalid_input() -> None:
    req = request(evidence("verify"), evidence("implement"))
    req["expectedSequence"] = -1
    with pytest.raises(PhaseInputError) as raised:
        plan(req)
    assert raised.value.path == "expectedSequence"


# --------------------------------------------------------------------------- approvals


def test_expansion_needs_an_exact_action_approval() -> None:
    plan_evidence, implement = evidence("plan"), evidence("implement")
    outcome = plan(request(implement, plan_evidence))
    assert outcome.status == "approval-required" and outcome.record is None
    approval = outcome.approval
    assert approval["id"] == approval_id(
        RUN, "op-1", plan_evidence["digest"], implement["digest"], MANIFEST
    )
    assert approval["status"] == "pending"
    assert approval["fromEvidenceDigest"] == plan_evidence["digest"]
    assert approval["toEvidenceDigest"] == implement["digest"]
    assert approval["riskClass"] == "critical"  # credential.access is added
    assert "credential.access:*" in approval["resourceScope"]
    assert approval["expiresAt"] == "2026-07-25T12:05:00.000Z"


def test_approved_expansion_applies_with_the_approval_id() -> None:
    explore, verify = evidence("explore"), evidence("verify")
    pending = plan(request(verify, explore)).approval
    assert pending["riskClass"] == "high"
    approved = decide_approval(pending, "approved", REVIEWER, NOW + timedelta(minutes=1))
    outcome = plan(
        request(verify, explore, approvalId=pending["id"]),
        approval=approved,
        now=NOW + timedelta(minutes=2),
    )
    assert outcome.status == "applied"
    assert outcome.record["policyDecision"] == "approved-expansion"
    assert outcome.record["approvalId"] == pending["id"]


def test_pending_approval_keeps_waiting() -> None:
    explore, verify = evidence("explore"), evidence("verify")
    pending = plan(request(verify, explore)).approval
    outcome = plan(request(verify, explore), approval=pending, now=NOW + timedelta(minutes=1))
    assert outcome.status == "approval-required" and outcome.approval == pending


@pytest.mark.parametrize("decision", ["rejected", "expired"])
def test_rejected_or_expired_approval_refuses(decision: str) -> None:
    explore, verify = evidence("explore"), evidence("verify")
    pending = plan(request(verify, explore)).approval
    later = NOW + timedelta(minutes=10)
    if decision == "rejected":
        stored = decide_approval(pending, "rejected", REVIEWER, NOW + timedelta(minutes=1))
    else:
        stored = pending
        assert effective_approval_status(pending, later) == "expired"
        with pytest.raises(TransitionRefused) as late:
            decide_approval(pending, "approved", REVIEWER, later)
        assert late.value.code == "approval-not-pending"
    with pytest.raises(TransitionRefused) as raised:
        plan(request(verify, explore), approval=stored, now=later)
    assert raised.value.code == "approval-not-approved"


def test_approval_for_another_target_does_not_apply() -> None:
    explore = evidence("explore")
    pending = plan(request(evidence("verify"), explore)).approval
    approved = decide_approval(pending, "approved", REVIEWER, NOW)
    implement = evidence("implement")
    with pytest.raises(TransitionRefused) as raised:
        plan(request(implement, explore), approval=approved)
    assert raised.value.code == "approval-mismatch"
    with pytest.raises(TransitionRefused) as raised:
        plan(request(implement, explore, approvalId=pending["id"]))
    assert raised.value.code == "approval-mismatch"


def test_approval_ttl_is_bounded() -> None:
    explore, verify = evidence("explore"), evidence("verify")
    outcome = plan(request(verify, explore, approvalTtlMs=86_400_000))
    assert outcome.approval["expiresAt"] == "2026-07-26T12:00:00.000Z"
    with pytest.raises(PhaseInputError):
        plan(request(verify, explore, approvalTtlMs=86_400_001))


# --------------------------------------------------------------------------- overrides


def override(expires: datetime | str, justification: str = "Incident 7: hotfix") -> Any:
    expires_at = expires if isinstance(expires, str) else js_iso_timestamp(expires)
    return {"justification": justification, "expiresAt": expires_at}


def test_emergency_override_needs_an_administrator() -> None:
    req = request(
        evidence("implement"),
        evidence("plan"),
        emergencyOverride=override(NOW + timedelta(hours=1)),
    )
    with pytest.raises(TransitionRefused) as raised:
        plan(req)
    assert raised.value.code == "override-requires-administrator"
    outcome = plan(req, administrator=True)
    assert outcome.status == "applied"
    assert outcome.record["policyDecision"] == "emergency-override"
    assert outcome.record["emergencyOverride"] == {
        "permission": "admin:manage",
        "justification": "Incident 7: hotfix",
        "expiresAt": "2026-07-25T13:00:00.000Z",
    }


def test_emergency_override_is_only_for_expansion() -> None:
    req = request(
        evidence("verify"),
        evidence("implement"),
        emergencyOverride=override(NOW + timedelta(hours=1)),
    )
    with pytest.raises(TransitionRefused) as raised:
        plan(req, administrator=True)
    assert raised.value.code == "override-not-expansion"


@pytest.mark.parametrize(
    ("expires", "accepted"),
    [
        (NOW + timedelta(hours=24), True),
        (NOW + timedelta(milliseconds=1), True),
        (NOW + timedelta(hours=24, milliseconds=1), False),
        (NOW, False),
        (NOW - timedelta(minutes=1), False),
        ("2026-07-26T17:29:59.999+05:30", True),  # 23:59:59.999 later, written with an offset
    ],
)
def test_emergency_override_expires_within_24_hours(
    expires: datetime | str, accepted: bool
) -> None:
    req = request(evidence("implement"), evidence("plan"), emergencyOverride=override(expires))
    if accepted:
        assert plan(req, administrator=True).status == "applied"
    else:
        with pytest.raises(TransitionRefused) as raised:
            plan(req, administrator=True)
        assert raised.value.code == "override-expiry-invalid"


def test_override_expiry_restores_the_prior_evidence_exactly_once() -> None:
    plan_evidence, implement = evidence("plan"), evidence("implement")
    expires = NOW + timedelta(hours=2)
    overridden = plan(
        request(implement, plan_evidence, emergencyOverride=override(expires)), administrator=True
    ).record
    assert not override_has_expired(overridden, expires - timedelta(milliseconds=1))
    assert override_has_expired(overridden, expires)
    assert override_has_expired(overridden, expires + timedelta(days=3))

    restored = expiry_record(overridden)
    validate(PhaseTransitionRecord, restored)
    assert restored["sequence"] == overridden["sequence"] + 1
    assert restored["policyDecision"] == "override-expired"
    assert restored["operationId"] == f"override-expiry:{overridden['id']}"
    assert restored["priorEvidence"] == implement
    assert restored["effectiveEvidence"] == plan_evidence
    assert restored["authorityDelta"]["classification"] == "narrowing"
    assert restored["createdAt"] == js_iso_timestamp(expires)
    assert restored["reason"] == f"Emergency phase override {overridden['id']} expired."
    assert "emergencyOverride" not in restored
    # every reader, whenever it reads, builds the same record: one compare-and-set wins
    assert expiry_record(copy.deepcopy(overridden)) == restored
    # and the restored state is not an override, so it never expires again
    assert not override_has_expired(restored, expires + timedelta(days=30))
    with pytest.raises(ValueError):
        expiry_record(restored)


def test_record_model_ties_the_decision_to_its_evidence() -> None:
    explore, verify = evidence("explore"), evidence("verify")
    pending = plan(request(verify, explore)).approval
    approved = decide_approval(pending, "approved", REVIEWER, NOW)
    record = plan(request(verify, explore), approval=approved).record
    without_approval = {k: v for k, v in record.items() if k != "approvalId"}
    with pytest.raises(PhaseInputError):
        validate(PhaseTransitionRecord, without_approval)
    with_override = {
        **record,
        "emergencyOverride": {
            "permission": "admin:manage",
            "justification": "x",
            "expiresAt": "2026-07-25T13:00:00Z",
        },
    }
    with pytest.raises(PhaseInputError):
        validate(PhaseTransitionRecord, with_override)
