"""The replay behind ``verify/phase.py``: each run's phase entries re-derived in chain
order (the checks that module's docstring lists), loaded only when a run has any."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentledger.errors import InvalidInput
from agentledger.limits import entry_document
from agentledger.phase.compiler import compile
from agentledger.phase.digest import verify_evidence_digest
from agentledger.phase.journal import (
    APPROVAL_KIND,
    AUTHORIZE_KIND,
    DESCENT_KIND,
    EVIDENCE_KIND,
    TRANSITION_KIND,
    DescentUnverified,
    blob_problem,
    check_approval,
    descended_evidence,
    descent_problem,
    read_json_blob,
    summary_problem,
)
from agentledger.phase.ledger import decision_problem
from agentledger.phase.models import PhaseCapabilityEvidence, validate
from agentledger.phase.transitions import (
    PhaseTransitionRecord,
    approval_problem,
    record_problem,
    same_json,
)
from agentledger.verify.context import VerifyContext
from agentledger.verify.results import Divergence


class _Diverged(Exception):
    """Stop checking one entry: it has been reported."""


@dataclass
class _Replay:
    ctx: VerifyContext
    run_id: str
    seq: int = -1
    kind: str = ""
    effective: dict[str, Any] | None = None
    initial_input: dict[str, Any] | None = None
    parent_evidence: dict[str, Any] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    descended: bool = False
    parent_absent: bool = False
    broken: bool = False
    """A record or evidence did not re-derive: later steps are not judged against it."""

    def diverge(self, expected: str, actual: str, subject: str | None = None) -> _Diverged:
        self.ctx.diverged(
            self.run_id, Divergence(self.run_id, self.seq, self.kind, expected, actual, subject)
        )
        return _Diverged()

    def blob(self, digest: object, what: str) -> dict[str, Any]:
        value = read_json_blob(self.ctx.conn, digest)
        if not isinstance(value, dict):
            raise self.diverge(f"{what} blob {digest}", blob_problem(self.ctx.conn, digest))
        return value

    def evidence_of(self, compiler_input: dict[str, Any], evidence: Any, what: str) -> None:
        """``evidence`` must be valid, digest-consistent and exactly the compiler's output."""
        try:
            validate(PhaseCapabilityEvidence, evidence, f"{what} evidence")
        except InvalidInput as exc:
            raise self.diverge(f"valid {what} evidence", exc.message) from None
        if not verify_evidence_digest(evidence):
            raise self.diverge(
                f"{what} evidence digest matching its content", str(evidence["digest"])
            )
        try:
            compiled = compile(compiler_input)
        except InvalidInput as exc:
            raise self.diverge(f"a valid recorded {what} compiler input", exc.message) from None
        if not same_json(compiled, evidence):
            raise self.diverge(
                f"the compiler's evidence {compiled['digest']}",
                f"recorded {what} evidence {evidence['digest']} (not what the compiler produces)",
            )


def replay_run(ctx: VerifyContext, run_id: str, rows: Iterable[tuple[int, bytes]]) -> None:
    """Check one run's phase entries, ``(seq, bytes)`` in chain order."""
    replay = _Replay(ctx, run_id)
    for seq, raw in rows:
        # Judged by the kind its bytes name (the journal pass reports a column that differs).
        kind = _kind_of(raw)
        if kind not in _CHECKS:
            continue
        replay.seq, replay.kind = seq, kind
        try:
            body = entry_document(raw)["body"]
            if not isinstance(body, dict):
                raise replay.diverge("an object body", type(body).__name__)
            _CHECKS[kind](replay, body)
        except _Diverged:
            continue
        except (KeyError, TypeError, ValueError) as exc:
            replay.diverge(f"a well-formed {kind} entry", f"malformed ({exc!r})")


def _kind_of(raw: bytes) -> str:
    """The kind an entry's bytes name ("" when they name none)."""
    try:
        doc = entry_document(raw)
    except (ValueError, RecursionError):
        return ""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    return kind if isinstance(kind, str) else ""


def _check_evidence(replay: _Replay, body: dict[str, Any]) -> None:
    if replay.initial_input is not None or replay.broken:
        raise replay.diverge("one initial phase evidence per run", "a second phase.evidence")
    replay.broken = True
    compiler_input = replay.blob(body["input_blob"], "compiler input")
    evidence = replay.blob(body["evidence_blob"], "phase evidence")
    replay.evidence_of(compiler_input, evidence, "phase")
    misstated = summary_problem(body, evidence)
    if misstated is not None:
        raise replay.diverge(*misstated)
    if replay.descended and not replay.parent_absent:
        parent = replay.parent_evidence
        if parent is None:
            raise replay.diverge("the parent evidence named by phase.descent", "unreadable")
        problem = descent_problem(parent, compiler_input, evidence)
        if problem is not None:
            raise replay.diverge(*problem)
    replay.initial_input = compiler_input
    replay.effective = evidence
    replay.broken = False


def _check_descent(replay: _Replay, body: dict[str, Any]) -> None:
    if replay.initial_input is not None or replay.descended:
        raise replay.diverge("phase.descent before the run's evidence", "after it")
    replay.descended = True
    try:
        replay.parent_evidence = descended_evidence(replay.ctx.conn, body)
    except DescentUnverified as exc:
        raise replay.diverge(exc.expected, exc.found) from None
    if replay.parent_evidence is None:
        # An archive of the child alone: the bound cannot be checked here, only reported.
        replay.parent_absent = True
        note = (
            f"phase: run {replay.run_id} descends from run {body['parent_run']}, which is not "
            "in this ledger; its parent bound was not checked"
        )
        if note not in replay.ctx.report.notes:
            replay.ctx.report.notes.append(note)


def _check_transition(replay: _Replay, body: dict[str, Any]) -> None:
    if replay.broken or replay.effective is None:
        raise replay.diverge("a verified evidence in force before a transition", "none")
    replay.broken = True
    record = replay.blob(body["record_blob"], "transition record")
    compiler_input = replay.blob(body["effective_input_blob"], "target compiler input")
    try:
        validate(PhaseTransitionRecord, record, "phase transition record")
    except InvalidInput as exc:
        raise replay.diverge("a valid phase-transition-record/v1", exc.message) from None
    if record["runId"] != replay.run_id:
        raise replay.diverge(f"runId {replay.run_id}", record["runId"])
    summary = {
        "record_id": record["id"],
        "sequence": record["sequence"],
        "operation_id": record["operationId"],
        "policy_decision": record["policyDecision"],
        "prior_evidence_digest": record["priorEvidence"]["digest"],
        "effective_evidence_digest": record["effectiveEvidence"]["digest"],
        "manifest_digest": record["manifestDigest"],
    }
    for name, value in summary.items():
        if body.get(name) != value:
            raise replay.diverge(f"{name} {value!r} (from the record)", repr(body.get(name)))
    target = record["effectiveEvidence"]
    replay.evidence_of(compiler_input, target, "target")
    if replay.descended:
        assert replay.initial_input is not None
        if not same_json(
            compiler_input["sources"]["parent"], replay.initial_input["sources"]["parent"]
        ):
            raise replay.diverge("the parent source the run descended with", "another source")
    # The rules every writer holds a stored record to (sequence, prior, delta, policy).
    problem = record_problem(
        replay.run_id, record, replay.effective, replay.records, replay.approvals
    )
    if problem is not None:
        raise replay.diverge(*problem)
    replay.records.append(record)
    replay.effective = target
    replay.broken = False


def _check_approval(replay: _Replay, body: dict[str, Any]) -> None:
    approval = body["approval"]
    try:
        check_approval(approval)
    except InvalidInput as exc:
        raise replay.diverge("a valid approval", exc.message) from None
    if body.get("approval_id") != approval["id"] or body.get("status") != approval["status"]:
        raise replay.diverge("id and status of the approval", "different")
    problem = approval_problem(replay.run_id, approval, replay.approvals.get(approval["id"]))
    if problem is not None:
        raise replay.diverge(*problem)
    replay.approvals[approval["id"]] = approval


def _check_authorize(replay: _Replay, body: dict[str, Any]) -> None:
    if replay.broken:
        raise replay.diverge("a verified evidence in force", "one that did not verify")
    problem = decision_problem(replay.effective, body)
    if problem is not None:
        raise replay.diverge(*problem, body["dimension"])


_CHECKS = {
    EVIDENCE_KIND: _check_evidence,
    DESCENT_KIND: _check_descent,
    TRANSITION_KIND: _check_transition,
    APPROVAL_KIND: _check_approval,
    AUTHORIZE_KIND: _check_authorize,
}
