"""The transition journal, stored in the run's chain: every rule, through the ledger."""

from __future__ import annotations

import json
import multiprocessing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.errors import ExitCode
from agentledger.phase import evidence_digest
from agentledger.phase.journal import PhaseRefused
from agentledger.phase.transitions import TransitionRefused, js_iso_timestamp

from .ledger_testkit import (
    MANIFEST,
    OPERATOR,
    OTHER_MANIFEST,
    REVIEWER,
    T0,
    compiler_input,
    evidence,
    forge,
    move,
    narrowed_egress,
    phase_kinds,
    source,
    started,
)
from .workers import race_transition, read_phase

LATER = T0 + timedelta(minutes=1)
OVERRIDE_UNTIL = js_iso_timestamp(T0 + timedelta(hours=1))
AFTER_OVERRIDE = T0 + timedelta(hours=2)


def override(until: str = OVERRIDE_UNTIL) -> dict[str, Any]:
    return {"justification": "Production incident.", "expiresAt": until}


def prior_digest(result: Any) -> str:
    return str(result.record["priorEvidence"]["digest"])


def current(run: Any, now: Any = T0) -> dict[str, Any]:
    state = run.phase_state(now)
    assert state.effective is not None
    result: dict[str, Any] = state.effective
    return result


# --------------------------------------------------------------------------- narrowing


def test_narrowing_applies_at_once_and_is_anchored(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    initial = current(run)
    result = move(run, compiler_input("verify"), operation="to-verify")
    assert result.status == "applied" and not result.replayed
    record = result.record
    assert record["policyDecision"] == "allow"
    assert record["sequence"] == 1
    assert record["priorEvidence"]["digest"] == initial["digest"]
    assert record["authorityDelta"]["classification"] == "narrowing"
    assert current(run)["identity"]["phase"] == "verify"
    assert phase_kinds(run) == ["phase.evidence", "phase.transition"]
    assert result.entry is not None and result.entry.body["record_id"] == record["id"]
    assert ledger.verify_run("run-a").ok


def test_the_first_transition_needs_recorded_evidence(ledger: Ledger) -> None:
    run = ledger.run("run-a")
    with pytest.raises(PhaseRefused) as refused:
        run.transition_phase(
            compiler_input("verify"),
            operation_id="op",
            reason="No evidence yet.",
            expected_sequence=0,
            expected_evidence_digest="sha256:" + "0" * 64,
            manifest_digest=MANIFEST,
            actor={"id": "cli", "type": "user"},
        )
    assert refused.value.code == "initial-evidence-missing"
    assert len(run) == 0


# --------------------------------------------------------------------------- compare-and-set


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"sequence": 0}, "stale-sequence"),
        ({"digest": "sha256:" + "9" * 64}, "stale-phase-evidence"),
        ({"manifest": OTHER_MANIFEST}, "stale-manifest"),
    ],
)
def test_a_request_built_against_a_moved_state_is_refused(
    ledger: Ledger, change: dict[str, Any], code: str
) -> None:
    run = started(ledger, "run-a", "publish")
    assert move(run, compiler_input("verify"), operation="first").status == "applied"
    length = len(run)
    with pytest.raises(TransitionRefused) as refused:
        move(run, compiler_input("explore"), operation="second", **change)
    assert refused.value.code == code
    assert len(run) == length


# --------------------------------------------------------------------------- idempotency


def test_an_exact_retry_returns_the_original_record(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    first = move(run, compiler_input("verify"), operation="op-1")
    length = len(run)
    again = move(
        run,
        compiler_input("verify"),
        operation="op-1",
        sequence=0,
        digest=first.record["priorEvidence"]["digest"],
    )
    assert again.replayed and again.record == first.record
    assert len(run) == length


def test_a_reused_operation_id_with_other_content_is_refused(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    first = move(run, compiler_input("verify"), operation="op-1")
    with pytest.raises(TransitionRefused) as refused:
        move(
            run,
            compiler_input("explore"),
            operation="op-1",
            sequence=0,
            digest=prior_digest(first),
        )
    assert refused.value.code == "operation-reused"


# --------------------------------------------------------------------------- approvals


def test_an_expansion_waits_for_an_exact_approval(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    pending = move(run, compiler_input("verify"), operation="widen")
    assert pending.status == "approval-required"
    approval = pending.approval
    assert (approval["status"], approval["riskClass"]) == ("pending", "high")
    assert current(run)["identity"]["phase"] == "explore"
    assert phase_kinds(run) == ["phase.evidence", "phase.approval"]
    # Asking again does not record a second approval.
    assert move(run, compiler_input("verify"), operation="widen").status == "approval-required"
    assert phase_kinds(run).count("phase.approval") == 1

    decided = run.decide_phase_approval(approval["id"], "approved", actor=REVIEWER, now=LATER)
    assert decided["status"] == "approved"
    applied = move(run, compiler_input("verify"), operation="widen", now=LATER)
    assert applied.status == "applied"
    assert applied.record["policyDecision"] == "approved-expansion"
    assert applied.record["approvalId"] == approval["id"]
    assert current(run, LATER)["identity"]["phase"] == "verify"
    assert ledger.verify_run("run-a").ok


def test_an_approval_approves_only_the_exact_move(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    implement = move(run, compiler_input("implement"), operation="widen").approval
    run.decide_phase_approval(
        implement["id"], "approved", actor=REVIEWER, administrator=True, now=T0
    )
    other = move(run, compiler_input("publish"), operation="widen")
    assert other.status == "approval-required"
    assert other.approval["id"] != implement["id"]
    with pytest.raises(TransitionRefused) as refused:
        move(run, compiler_input("publish"), operation="widen", approval=implement["id"])
    assert refused.value.code == "approval-mismatch"


def test_a_rejected_approval_refuses_the_expansion(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    approval = move(run, compiler_input("implement"), operation="widen").approval
    run.decide_phase_approval(approval["id"], "rejected", actor=REVIEWER, note="No.", now=T0)
    with pytest.raises(TransitionRefused) as refused:
        move(run, compiler_input("implement"), operation="widen")
    assert refused.value.code == "approval-not-approved"
    with pytest.raises(TransitionRefused) as again:
        run.decide_phase_approval(approval["id"], "approved", actor=REVIEWER, now=T0)
    assert again.value.code == "approval-not-pending"
    assert ledger.verify_run("run-a").ok


def test_a_lapsed_approval_is_recorded_expired_once(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    approval = move(
        run, compiler_input("implement"), operation="widen", approval_ttl_ms=60_000
    ).approval
    later = T0 + timedelta(minutes=2)
    with pytest.raises(TransitionRefused) as refused:
        run.decide_phase_approval(approval["id"], "approved", actor=REVIEWER, now=later)
    assert refused.value.code == "approval-not-pending"
    with pytest.raises(TransitionRefused):
        move(run, compiler_input("implement"), operation="widen", now=later)
    statuses = [e.body["status"] for e in run.entries(kind="phase.approval")]
    assert statuses == ["pending", "expired"]
    assert ledger.verify_run("run-a").ok


def test_deciding_an_unknown_approval_is_not_found(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    with pytest.raises(PhaseRefused) as refused:
        run.decide_phase_approval("runapproval_" + "x" * 24, "approved", actor=REVIEWER)
    assert refused.value.exit_code == ExitCode.NOT_FOUND


# --------------------------------------------------------------------------- overrides


def test_an_emergency_override_requires_an_administrator(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    with pytest.raises(TransitionRefused) as refused:
        move(run, compiler_input("implement"), operation="hotfix", emergency_override=override())
    assert refused.value.code == "override-requires-administrator"
    assert phase_kinds(run) == ["phase.evidence"]


def test_an_emergency_override_must_expire_within_24_hours(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    too_late = js_iso_timestamp(T0 + timedelta(hours=24, milliseconds=1))
    with pytest.raises(TransitionRefused) as refused:
        move(
            run,
            compiler_input("implement"),
            operation="hotfix",
            emergency_override=override(too_late),
            administrator=True,
        )
    assert refused.value.code == "override-expiry-invalid"


def test_an_override_applies_until_it_expires_then_one_record_restores_the_prior(
    ledger: Ledger,
) -> None:
    run = started(ledger, "run-a", "explore")
    prior = current(run)
    applied = move(
        run,
        compiler_input("implement"),
        operation="hotfix",
        emergency_override=override(),
        administrator=True,
    )
    assert applied.record["policyDecision"] == "emergency-override"
    assert current(run, T0 + timedelta(minutes=59))["identity"]["phase"] == "implement"
    assert phase_kinds(run).count("phase.transition") == 1

    restored = current(run, AFTER_OVERRIDE)
    assert restored["digest"] == prior["digest"]
    for _ in range(3):
        current(run, AFTER_OVERRIDE + timedelta(hours=1))
    records = [e.body for e in run.entries(kind="phase.transition")]
    assert [r["policy_decision"] for r in records] == ["emergency-override", "override-expired"]
    assert records[1]["created_at"] == OVERRIDE_UNTIL
    assert ledger.verify_run("run-a").ok


def test_an_override_cannot_be_used_for_narrowing(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    with pytest.raises(TransitionRefused) as refused:
        move(
            run,
            compiler_input("verify"),
            operation="n",
            emergency_override=override(),
            administrator=True,
        )
    assert refused.value.code == "override-not-expansion"


# --------------------------------------------------------------------------- target evidence


def test_a_blocked_target_is_refused(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    blocked = compiler_input(
        "verify", sandbox=source("sandbox", enforcement={"filesystem.write": "unsupported"})
    )
    with pytest.raises(TransitionRefused) as refused:
        move(run, blocked, operation="blocked")
    assert refused.value.code == "target-blocked"
    assert refused.value.exit_code == ExitCode.BLOCKED
    assert phase_kinds(run) == ["phase.evidence"]


def test_tampered_target_evidence_is_refused(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    target = evidence(compiler_input("verify"))
    target["status"] = "allowed" if target["status"] != "allowed" else "narrowed"
    with pytest.raises(TransitionRefused) as refused:
        move(run, compiler_input("verify"), operation="t", target_evidence=target)
    assert refused.value.code == "evidence-tampered"


def test_hand_written_target_evidence_with_a_valid_digest_is_refused(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    document = narrowed_egress("verify", "pypi.org")
    target = evidence(document)
    target["effectiveAuthority"]["network.egress"] = ["*"]
    target["digest"] = evidence_digest(target)
    with pytest.raises(PhaseRefused) as refused:
        move(run, document, operation="t", target_evidence=target)
    assert refused.value.code == "evidence-not-reproducible"


def test_a_legacy_target_is_refused(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    with pytest.raises(TransitionRefused) as refused:
        move(run, compiler_input(None), operation="legacy")
    assert refused.value.code == "target-legacy"


def forged_copy(ledger: Ledger, run: Any, change: Any) -> tuple[Ledger, int]:
    """Copy ``run``'s evidence and last transition into run "forged", the record edited by
    ``change`` (as a forger with write access would); return the forged entry's seq."""
    from agentledger import core

    applied = list(run.entries(kind="phase.transition"))[-1]
    record = json.loads(ledger.blobs.get(applied.body["record_blob"]))
    record["runId"] = "forged"
    change(record)
    override = record.get("emergencyOverride")
    body = {
        **applied.body,
        "record_blob": ledger.blobs.put(core.canonicalize(record)),
        "policy_decision": record["policyDecision"],
        "override_expires_at": override["expiresAt"] if override else None,
    }
    forged = ledger.run("forged")
    forge(forged, "phase.evidence", next(run.entries(kind="phase.evidence")).body)
    return ledger, forge(forged, "phase.transition", body).seq


def test_verify_accepts_an_untouched_copy(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    move(run, compiler_input("verify"), operation="narrow")
    forged_copy(ledger, run, lambda record: None)
    assert ledger.verify_run("forged").ok


def test_verify_reports_an_expansion_without_approval(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    move(
        run, compiler_input("implement"), operation="hotfix",
        emergency_override=override(), administrator=True,
    )  # fmt: skip

    def as_plain_allow(record: dict[str, Any]) -> None:
        del record["emergencyOverride"]
        record["policyDecision"] = "allow"

    _, seq = forged_copy(ledger, run, as_plain_allow)
    found = ledger.verify_run("forged").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.transition", seq)]


def test_verify_reports_an_override_longer_than_24_hours(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    move(
        run, compiler_input("implement"), operation="hotfix",
        emergency_override=override(), administrator=True,
    )  # fmt: skip

    def lengthen(record: dict[str, Any]) -> None:
        record["emergencyOverride"]["expiresAt"] = "2026-07-30T00:00:00.000Z"

    _, seq = forged_copy(ledger, run, lengthen)
    found = ledger.verify_run("forged").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.transition", seq)]
    assert "24 hours" in found[0].expected


def test_verify_reports_a_target_the_compiler_would_not_produce(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    move(run, compiler_input("verify"), operation="narrow")

    def widen_target(record: dict[str, Any]) -> None:
        target = record["effectiveEvidence"]
        target["effectiveAuthority"]["credential.access"] = ["*"]
        target["digest"] = evidence_digest(target)

    _, seq = forged_copy(ledger, run, widen_target)
    assert [(d.check, d.seq) for d in ledger.verify_run("forged").divergences] == [
        ("phase.transition", seq)
    ]


def test_a_retry_is_recognised_after_javascript_trimming(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    first = move(run, compiler_input("verify"), operation="op-1")
    again = move(
        run,
        compiler_input("verify"),
        operation="\ufeffop-1 ",
        sequence=0,
        digest=prior_digest(first),
    )
    assert again.replayed and again.record["id"] == first.record["id"]


def test_a_read_only_ledger_shows_a_lapsed_override_without_writing(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        run = started(ledger, "run-a", "explore")
        prior = current(run)["digest"]
        move(
            run, compiler_input("implement"), operation="hotfix",
            emergency_override=override(), administrator=True,
        )  # fmt: skip
        length = len(run)
    with Ledger.open(ledger_path, readonly=True) as readonly:
        state = readonly.get_run("run-a").phase_state(AFTER_OVERRIDE)
        assert state.effective is not None and state.effective["digest"] == prior
        assert state.current is not None
        assert state.current["policyDecision"] == "override-expired"
        assert len(readonly.get_run("run-a")) == length


# --------------------------------------------------------------------------- processes


def _spawn(target: Any, args_for: list[tuple[Any, ...]]) -> list[Any]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(args_for))
    results = context.Queue()
    processes = [
        context.Process(target=target, args=(*args, barrier, results)) for args in args_for
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * len(processes)
    return [results.get(timeout=10) for _ in processes]


def test_concurrent_compare_and_set_has_exactly_one_winner(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        run = started(ledger, "run-a", "publish")
        digest = current(run)["digest"]
    targets = ["verify", "explore", "plan", "verify", "explore", "plan"]  # all narrowing
    results = _spawn(
        race_transition,
        [
            (str(ledger_path), "run-a", f"op-{i}", compiler_input(phase), 0, digest, T0.isoformat())
            for i, phase in enumerate(targets)
        ],
    )
    outcomes = sorted(outcome for _, outcome, _ in results)
    assert outcomes == ["applied"] + ["stale-sequence"] * (len(targets) - 1)
    with Ledger.open(ledger_path) as ledger:
        assert phase_kinds(ledger.get_run("run-a")).count("phase.transition") == 1
        assert ledger.verify().code == 0


def test_concurrent_retries_of_one_operation_apply_it_once(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        run = started(ledger, "run-a", "publish")
        digest = current(run)["digest"]
    results = _spawn(
        race_transition,
        [
            (
                str(ledger_path),
                "run-a",
                "same-op",
                compiler_input("verify"),
                0,
                digest,
                T0.isoformat(),
            )
            for _ in range(4)
        ],
    )
    assert sorted(outcome for _, outcome, _ in results) == ["applied"] + ["replayed"] * 3
    assert len({record_id for _, _, record_id in results}) == 1


def test_override_expiry_is_recorded_exactly_once_across_processes_and_restarts(
    ledger_path: Path,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        run = started(ledger, "run-a", "explore")
        prior = current(run)["digest"]
        move(
            run,
            compiler_input("implement"),
            operation="hotfix",
            emergency_override=override(),
            administrator=True,
        )
    readers = [(str(ledger_path), "run-a", AFTER_OVERRIDE.isoformat()) for _ in range(6)]
    results = _spawn(read_phase, readers)
    assert {digest for digest, _ in results} == {prior}
    assert {sequence for _, sequence in results} == {2}
    # A restart (fresh processes, later reads) finds the record and adds nothing.
    later = [(str(ledger_path), "run-a", (AFTER_OVERRIDE + timedelta(days=1)).isoformat())] * 3
    _spawn(read_phase, later)
    with Ledger.open(ledger_path) as ledger:
        run = ledger.get_run("run-a")
        decisions = [e.body["policy_decision"] for e in run.entries(kind="phase.transition")]
        assert decisions == ["emergency-override", "override-expired"]
        assert ledger.verify().code == 0


def test_no_decision_or_move_is_taken_against_forged_evidence_in_force(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    move(run, compiler_input("verify"), operation="narrow")

    def widen_target(record: dict[str, Any]) -> None:
        target = record["effectiveEvidence"]
        target["effectiveAuthority"]["credential.access"] = ["*"]
        target["digest"] = evidence_digest(target)

    forged_copy(ledger, run, widen_target)
    forged = ledger.get_run("forged")
    length = len(forged)
    digest = current(forged)["digest"]
    with pytest.raises(PhaseRefused) as refused:
        forged.authorize("credential.access", ["prod-db"], evidence_digest=digest)
    assert refused.value.code == "phase-state-tampered"
    assert refused.value.exit_code == ExitCode.DIVERGED
    with pytest.raises(PhaseRefused):
        move(forged, compiler_input("explore"), operation="after")
    assert len(forged) == length


@pytest.mark.parametrize(
    "edit",
    [
        {"status": "approved", "decidedAt": "2026-07-25T13:00:00.000Z"},  # after its expiry
        {"status": "approved", "decidedAt": "2026-07-25T12:01:00.000Z",
         "toEvidenceDigest": "sha256:" + "e" * 64},  # another move
        {"status": "approved", "decidedAt": "2026-07-25T12:01:00.000Z",
         "riskClass": "high", "resourceScope": []},  # the reviewed scope changed
    ],
    ids=["late", "other-move", "other-scope"],
)  # fmt: skip
def test_verify_reports_a_forged_approval_decision(ledger: Ledger, edit: dict[str, Any]) -> None:
    run = started(ledger, "run-a", "explore")
    pending = move(run, compiler_input("publish"), operation="widen").approval
    decided = {**pending, "decidedBy": REVIEWER, **edit}
    entry = forge(
        run, "phase.approval", {"approval_id": pending["id"], "status": "approved",
                                "approval": decided},
    )  # fmt: skip
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.approval", entry.seq)]


def test_a_critical_expansion_needs_an_administrators_approval(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    pending = move(run, compiler_input("publish"), operation="ship").approval
    assert pending["riskClass"] == "critical"  # adds external.action mutate
    with pytest.raises(PhaseRefused) as refused:
        run.decide_phase_approval(pending["id"], "approved", actor=REVIEWER, now=LATER)
    assert refused.value.code == "approval-requires-administrator"
    assert phase_kinds(run).count("phase.approval") == 1
    decided = run.decide_phase_approval(
        pending["id"], "approved", actor=REVIEWER, administrator=True, now=LATER
    )
    assert decided["administratorConfirmed"] is True
    applied = move(run, compiler_input("publish"), operation="ship", now=LATER)
    assert applied.record["policyDecision"] == "approved-expansion"
    assert ledger.verify_run("run-a").ok


@pytest.mark.parametrize(
    "change",
    [
        {"target": {"sources": {}}},
        {"actor": {"id": "bad id", "type": "user"}},
        {"actor": {"id": "ops", "type": "robot"}},
        {"sequence": -1},
        {"digest": "sha256:XYZ"},
        {"manifest": "blake3:" + "0" * 64},
        {"approval_ttl_ms": 10},
        {"emergency_override": {"justification": "x", "expiresAt": "tomorrow"},
         "administrator": True},
    ],
    ids=["target", "actor-id", "actor-type", "sequence", "digest", "manifest", "ttl", "expiry"],
)  # fmt: skip
def test_a_malformed_request_is_invalid_input_and_nothing_is_written(
    ledger: Ledger, change: dict[str, Any]
) -> None:
    from agentledger.errors import InvalidInput

    run = started(ledger, "run-a", "explore")
    target = change.pop("target", compiler_input("implement"))
    with pytest.raises(InvalidInput):
        move(run, target, operation="op", **change)
    assert phase_kinds(run) == ["phase.evidence"]


def test_a_descendant_with_a_malformed_input_is_not_started(ledger: Ledger) -> None:
    from agentledger.phase import PhaseInputError

    parent = started(ledger, "parent", "explore")
    with pytest.raises(PhaseInputError):
        parent.start_descendant(
            "child", relation="fork", compiler_input={"sources": {"sandbox": {"id": "x"}}}
        )
    assert not ledger.has_run("child")


def test_a_legacy_run_moves_into_a_phase_at_once(ledger: Ledger) -> None:
    run = started(ledger, "run-a", None)
    result = move(run, compiler_input("explore"), operation="adopt-phases")
    assert result.status == "applied"
    assert result.record["authorityDelta"]["classification"] == "narrowing"
    assert current(run)["identity"] == {
        "mode": "profile",
        "phase": "explore",
        "profileId": "builtin-explore",
        "profileVersion": 1,
    }
    assert ledger.verify_run("run-a").ok


def _pending_for(
    run: Any, target: dict[str, Any], operation: str, delta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The pending approval ``move`` would record for ``target`` (or for this move, stating
    ``delta`` as its expansion), without recording it."""
    from agentledger.phase.transitions import approval_request, authority_delta

    prior, compiled = current(run), evidence(target)
    request = {"operationId": operation, "expectedManifestDigest": MANIFEST,
               "targetEvidence": compiled}  # fmt: skip
    if delta is None:
        delta = authority_delta(prior["effectiveAuthority"], compiled["effectiveAuthority"])
    return approval_request(run.id, request, prior, delta, T0)


@pytest.mark.parametrize(
    "edit",
    [
        {"riskClass": "high"},
        {"resourceScope": ["network.egress:*"]},
        {"actionHash": "sha256:" + "a" * 64},
    ],
    ids=["risk", "scope", "hash"],
)  # fmt: skip
def test_a_pending_approval_that_misstates_its_expansion_is_never_decided_on(
    ledger: Ledger, edit: dict[str, Any]
) -> None:
    # implement -> publish adds external.action mutate: critical, an administrator's call.
    # A pending approval written below the API calling it "high" (or misstating the scopes
    # or hash a reviewer sees) must not let a reviewer approve it without --admin, nor the
    # move apply, nor verify pass it.
    run = started(ledger, "run-a", "implement")
    target = compiler_input("publish")
    pending = _pending_for(run, target, "ship")
    assert pending["riskClass"] == "critical"
    forged = forge(
        run, "phase.approval",
        {"approval_id": pending["id"], "status": "pending", "approval": {**pending, **edit}},
    )  # fmt: skip
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.approval", forged.seq)]
    length = len(run)
    with pytest.raises(PhaseRefused) as refused:
        run.decide_phase_approval(pending["id"], "approved", actor=REVIEWER, now=LATER)
    assert refused.value.code == "phase-state-tampered"
    with pytest.raises(PhaseRefused):
        move(run, target, operation="ship", now=LATER)
    assert len(run) == length


def test_an_approval_of_another_expansion_does_not_apply_this_one(ledger: Ledger) -> None:
    # A pending approval written below the API that names this move (its id) but another,
    # harmless expansion (consistently hashed and classed "high") is decided without an
    # administrator; it must not apply the critical move, and a record that applied it
    # anyway is a verify finding.
    from agentledger.phase.journal import append_transition, put_json
    from agentledger.phase.transitions import authority_delta, transition_id

    run = started(ledger, "run-a", "implement")
    target = compiler_input("publish")
    added = {"dimension": "network.egress", "addedScopes": ["pypi.org"], "removedScopes": []}
    harmless = {"classification": "expanding", "entries": [added]}
    claimed = _pending_for(run, target, "ship", harmless)
    assert claimed["riskClass"] == "high"
    assert claimed["id"] == _pending_for(run, target, "ship")["id"]
    forge(run, "phase.approval", {"approval_id": claimed["id"], "status": "pending",
                                  "approval": claimed})  # fmt: skip
    run.decide_phase_approval(claimed["id"], "approved", actor=REVIEWER, now=LATER)
    length = len(run)
    with pytest.raises(TransitionRefused) as refused:
        move(run, target, operation="ship", now=LATER)
    assert refused.value.code == "approval-mismatch"
    assert len(run) == length
    assert ledger.verify_run("run-a").ok  # nothing applied yet: the approval is only a claim

    prior, compiled = current(run, LATER), evidence(target)
    record_id = transition_id(run.id, 1, "ship")
    record = {
        "schemaVersion": "phase-transition-record/v1", "id": record_id, "runId": run.id,
        "sequence": 1, "operationId": "ship", "priorEvidence": prior,
        "effectiveEvidence": compiled,
        "authorityDelta": authority_delta(
            prior["effectiveAuthority"], compiled["effectiveAuthority"]
        ),
        "actor": OPERATOR, "reason": "Ship.", "policyDecision": "approved-expansion",
        "approvalId": claimed["id"], "manifestDigest": MANIFEST,
        "eventReference": f"phase:{record_id}", "createdAt": js_iso_timestamp(LATER),
    }  # fmt: skip
    with ledger.db.write() as conn:
        applied = append_transition(run, conn, record, put_json(run, target, "input"))
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.transition", applied.seq)]


def _forged_record(run: Any, target: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A schema-valid transition record of ``run`` to ``target``, as a forger writes one."""
    from agentledger.phase.transitions import authority_delta, transition_id

    prior, compiled = current(run), evidence(target)
    record_id = transition_id(run.id, 1, "sneak")
    return {
        "schemaVersion": "phase-transition-record/v1", "id": record_id, "runId": run.id,
        "sequence": 1, "operationId": "sneak", "priorEvidence": prior,
        "effectiveEvidence": compiled,
        "authorityDelta": authority_delta(
            prior["effectiveAuthority"], compiled["effectiveAuthority"]
        ),
        "actor": OPERATOR, "reason": "Sneak.", "policyDecision": "allow",
        "manifestDigest": MANIFEST, "eventReference": f"phase:{record_id}",
        "createdAt": js_iso_timestamp(T0), **fields,
    }  # fmt: skip


@pytest.mark.parametrize(
    "fields",
    [
        {},  # an expansion passed off as "allow"
        {"sequence": 2},
        {"authorityDelta": {"classification": "same", "entries": []}},
        {"policyDecision": "override-expired"},
    ],
    ids=["unapproved-expansion", "sequence", "delta", "expired-without-override"],
)
def test_no_decision_is_taken_on_a_transition_verify_rejects(
    ledger: Ledger, cli: Any, fields: dict[str, Any]
) -> None:
    # A transition record written below the API that no rule would have applied (here an
    # expansion of network egress to "*" without approval) is in force for nobody:
    # verify reports it, `phase show` lists it (exit 2), and no authorization is granted
    # or move taken on it. Before, authorize() granted egress anywhere against it.
    from agentledger.phase.journal import append_transition, put_json

    run = started(
        ledger, "run-a", "implement", sandbox=source("sandbox", {"network.egress": ["pypi.org"]})
    )
    target = compiler_input("implement")
    record = _forged_record(run, target, **fields)
    with ledger.db.write() as conn:
        forged = append_transition(run, conn, record, put_json(run, target, "input"))
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.transition", forged.seq)]
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == ExitCode.DIVERGED
    assert [p["seq"] for p in shown.json()["problems"]] == [forged.seq]
    length = len(run)
    with pytest.raises(PhaseRefused) as refused:
        run.authorize(
            "network.egress", ["evil.example"], evidence_digest=evidence(target)["digest"]
        )
    assert refused.value.code == "phase-state-tampered"
    assert len(run) == length


@pytest.mark.parametrize(
    "edit",
    [
        {"status": "approved", "decidedAt": "2026-07-25T12:01:00.000Z"},  # never pending
        {"runId": "run-b"},  # another run's
        {"id": "runapproval_" + "A" * 24},  # an id not bound to the move
    ],
    ids=["never-pending", "other-run", "unbound-id"],
)  # fmt: skip
def test_no_move_is_taken_on_an_approval_verify_rejects(
    ledger: Ledger, cli: Any, edit: dict[str, Any]
) -> None:
    # explore -> verify adds write and egress ("high"). An approval entry written below the
    # API that verify rejects (approved without ever being pending, another run's, an id
    # that names no move) does not apply the expansion: before, the move applied on the
    # directly "approved" one while verify reported it.
    run = started(ledger, "run-a", "explore")
    target = compiler_input("verify")
    approval = {**_pending_for(run, target, "widen"), "decidedBy": REVIEWER, **edit}
    forged = forge(run, "phase.approval",
                   {"approval_id": approval["id"], "status": approval["status"],
                    "approval": approval})  # fmt: skip
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.approval", forged.seq)]
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == ExitCode.DIVERGED
    assert [p["seq"] for p in shown.json()["problems"]] == [forged.seq]
    length = len(run)
    with pytest.raises(PhaseRefused) as refused:
        move(run, target, operation="widen", now=LATER)
    assert refused.value.code == "phase-state-tampered"
    assert len(run) == length


def test_a_transition_refused_while_writing_leaves_the_ledger_as_it_was(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    # A reason that cannot be written (a lone surrogate: what a non-UTF-8 byte in argv
    # becomes) is refused only when the record is stored, after the target's input blob
    # was: the refusal must take that blob back (it was committed, exit 65).
    from agentledger.errors import InvalidInput

    from .ledger_testkit import blob_count

    run = started(ledger, "run-a", "implement")
    blobs, length = blob_count(ledger), len(run)
    with pytest.raises(InvalidInput):
        run.transition_phase(
            narrowed_egress("implement", "fresh.example"), operation_id="op",
            reason="x\udcff", expected_sequence=0,
            expected_evidence_digest=current(run)["digest"], manifest_digest=MANIFEST,
            actor=OPERATOR, now=T0,
        )  # fmt: skip
    assert (blob_count(ledger), len(run)) == (blobs, length)
    target = tmp_path / "target.json"
    target.write_text(json.dumps(narrowed_egress("implement", "other.example")))
    refused = cli(
        "phase", "transition", "run-a", str(target), "--operation", "op",
        "--reason", "x\udcff", "--manifest", MANIFEST,
    )  # fmt: skip
    assert refused.code == ExitCode.INVALID_INPUT
    assert (blob_count(ledger), len(run)) == (blobs, length)


@pytest.mark.parametrize("run_id", [".dot", "_under", "-dash"])
def test_a_run_id_that_is_no_phase_identifier_takes_no_transition(
    ledger: Ledger, run_id: str
) -> None:
    # Record ids and approvals carry the run id as a phase identifier: a run named ".dot"
    # asked for an expansion wrote an approval that does not validate, which verify then
    # reported as tampering and which refused every later move on the run.
    from agentledger.errors import InvalidInput

    run = started(ledger, run_id, "implement", sandbox=source("sandbox", {"network.egress": ["a"]}))
    length = len(run)
    for target in (compiler_input("implement"), narrowed_egress("implement")):
        with pytest.raises(InvalidInput) as refused:
            move(run, target, operation="op")
        assert refused.value.code == "invalid-run-id"
    assert len(run) == length
    assert ledger.verify_run(run_id).ok
    assert run.authorize("network.egress", ["a"], evidence_digest=current(run)["digest"]).allowed
