"""Phase evidence in the ledger: recording it, descendants, and active authority.

- :func:`record_evidence` stores a run's compiler input and evidence as blobs and anchors a
  ``phase.evidence`` entry in the run's chain, after checking that the evidence is exactly
  what the compiler produces for that input (a valid digest alone is not enough).
- :func:`start_descendant` starts a run from another one (retry, fork, resume, handoff):
  the child compiles with the parent's effective evidence as its ``parent`` source, so it
  can never exceed its parent.
- :func:`authorize` checks an action against the run's active evidence and journals the
  decision, allowed or denied.

Every write happens in one ``BEGIN IMMEDIATE`` transaction (blobs and entries together).
The transition journal itself is :mod:`agentledger.phase.journal`.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from agentledger.errors import InvalidInput, NotFound
from agentledger.ids import check_run_id
from agentledger.phase.compiler import compile
from agentledger.phase.descent import RELATIONS, parent_source
from agentledger.phase.digest import verify_evidence_digest
from agentledger.phase.journal import (
    AUTHORIZE_KIND,
    DESCENT_KIND,
    DESCENT_SHOWN,
    EVIDENCE_KIND,
    PhaseRefused,
    PhaseState,
    StoredEvidence,
    evidence_problems,
    evidence_summary,
    load_state,
    maintain,
    now_or_utc,
    put_json,
    refuse_unreadable,
    reproduces,
)
from agentledger.phase.jscompat import has_control_characters, utf16_length
from agentledger.phase.models import DIMENSIONS, PhaseCapabilityEvidence, validate
from agentledger.phase.transitions import authority_delta, same_json

if TYPE_CHECKING:
    from agentledger._core import Entry
    from agentledger.handle import RunHandle


__all__ = [
    "RELATIONS",
    "AuthorizationDecision",
    "authorize",
    "check_authorization",
    "check_request",
    "decision_problem",
    "decision_problems",
    "parent_source",
    "phase_summary",
    "record_evidence",
    "start_descendant",
]


def _evidence_body(stored_evidence: Mapping[str, Any], evidence_blob: str, input_blob: str) -> Any:
    return {
        **evidence_summary(stored_evidence),
        "evidence_blob": evidence_blob,
        "input_blob": input_blob,
    }


def _checked_evidence(
    evidence: Mapping[str, Any] | None, compiler_input: Mapping[str, Any]
) -> dict[str, Any]:
    """The compiler's evidence for ``compiler_input``; ``evidence``, if given, must equal it."""
    compiled = compile(compiler_input)
    if evidence is None:
        return compiled
    validate(PhaseCapabilityEvidence, evidence, "phase evidence")
    if not verify_evidence_digest(evidence):
        raise PhaseRefused("evidence-tampered", "the evidence digest does not match its content")
    if not same_json(evidence, compiled):
        raise PhaseRefused(
            "evidence-not-reproducible",
            "the evidence is not what the compiler produces for this input "
            f"(recorded {evidence['digest']}, compiled {compiled['digest']})",
        )
    return compiled


def record_evidence(
    run: RunHandle,
    evidence: Mapping[str, Any] | None,
    *,
    compiler_input: Mapping[str, Any],
    create_run: bool = False,
) -> Entry:
    """Anchor the run's phase evidence (and the input it compiles from) in its chain.

    A run has one initial evidence; later changes are transitions. Recording the same
    evidence again returns the existing entry. Blocked evidence is recorded as it is: it is
    the truth of what the run may do (nothing), and its descendants are refused. With
    ``create_run`` a missing run is created in the same transaction (so a refusal leaves
    no empty run behind).
    """
    check_run_id(run.id)
    compiled = _checked_evidence(evidence, compiler_input)
    with run.ledger.db.write() as conn:
        if create_run:
            _insert_run(conn, run.id)
        state = load_state(conn, run.ledger.id, run.id)
        refuse_unreadable(state)  # never a second initial evidence beside a forged journal
        if state.descent is not None and state.initial is None:
            raise PhaseRefused(
                "parent-source-derived",
                f"run {run.id!r} descends from run {state.descent['parent_run']!r}: its "
                "evidence is compiled from its parent's when it starts (start_descendant)",
            )
        if state.initial is not None:
            if state.initial.digest == compiled["digest"] and same_json(
                state.initial.compiler_input, compiler_input
            ):
                return next(run.entries(start=state.initial.seq))
            raise PhaseRefused(
                "phase-evidence-exists",
                f"run {run.id!r} already has phase evidence {state.initial.digest}; "
                "change it with a transition",
            )
        input_blob = put_json(run, compiler_input, "the compiler input")
        evidence_blob = put_json(run, compiled, "the phase evidence")
        body = _evidence_body(compiled, evidence_blob, input_blob)
        return run._append_locked(conn, [(EVIDENCE_KIND, body)])[0]


def _insert_run(conn: Any, run_id: str) -> None:
    """Create the run inside the caller's transaction (as ``Ledger.run`` does), if missing."""
    conn.execute(
        "INSERT OR IGNORE INTO runs (run_id, ordinal) "
        "VALUES (?, (SELECT coalesce(max(ordinal), 0) + 1 FROM runs))",
        (run_id,),
    )


# --------------------------------------------------------------------------- descendants


def _trusted_parent(state: PhaseState, parent_id: str) -> StoredEvidence:
    """The parent's effective evidence, re-verified: digest and recompilation."""
    if state.problems:
        seq, problem = state.problems[0]
        raise PhaseRefused(
            "parent-evidence-tampered", f"parent run {parent_id!r} step {seq}: {problem}"
        )
    stored = state.effective_stored
    if stored is None:
        raise PhaseRefused(
            "parent-evidence-missing", f"parent run {parent_id!r} has no phase evidence"
        )
    if not reproduces(stored):
        raise PhaseRefused(
            "parent-evidence-tampered",
            f"parent run {parent_id!r}: its evidence does not match its digest or is not "
            "what the compiler produces for its recorded input",
        )
    if stored.evidence["status"] == "blocked":
        raise PhaseRefused(
            "parent-blocked",
            f"parent run {parent_id!r} has blocked phase evidence; no descendant can start",
            blockers=[blocker["code"] for blocker in stored.evidence["blockers"]],
        )
    return stored


def _descendant_input(
    parent: StoredEvidence, compiler_input: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The child's input: the caller's, with what it leaves out taken from the parent.

    No ``profile`` → the parent's profile (and plan artifact), so legacy stays legacy; no
    ``sources`` → the parent's agent, sandbox, tool and launch sources. The ``parent``
    source is always derived from the parent's evidence.
    """
    given = dict(compiler_input or {})
    inherited = parent.compiler_input
    document: dict[str, Any] = {}
    if "profile" in given:
        document["profile"] = given["profile"]
        if "planArtifact" in given:
            document["planArtifact"] = given["planArtifact"]
    else:
        if "profile" in inherited:
            document["profile"] = inherited["profile"]
        artifact = given.get("planArtifact", inherited.get("planArtifact"))
        if artifact is not None:
            document["planArtifact"] = artifact
    sources = given.get("sources", inherited["sources"])
    if not isinstance(sources, Mapping):
        raise InvalidInput("sources must be a JSON object", code="invalid-phase-input")
    if "sources" in given and "parent" in sources:
        raise PhaseRefused(
            "parent-source-derived",
            "a descendant's parent source is derived from its parent's evidence; leave it out",
        )
    document["sources"] = {
        **sources,
        "parent": parent_source(parent.evidence, document.get("planArtifact")),
    }
    extra = set(given) - {"profile", "sources", "planArtifact"}
    for key in sorted(extra):
        document[key] = given[key]  # the compiler rejects unknown keys with their path
    return document


def start_descendant(
    parent: RunHandle,
    child_id: str,
    *,
    relation: str,
    compiler_input: Mapping[str, Any] | None = None,
    expected_parent_evidence_digest: str | None = None,
    now: datetime | None = None,
) -> RunHandle:
    """Start run ``child_id`` from ``parent`` and record its evidence, in one transaction.

    The child's first entries are ``phase.descent`` (relation, parent run, the parent
    evidence digest and the entry that put it in force) and ``phase.evidence`` (compiled
    with that evidence as the ``parent`` source). Refused, writing nothing: a parent whose
    evidence is missing, tampered or blocked; a parent whose evidence is no longer
    ``expected_parent_evidence_digest``; a child that already exists; blocked child evidence.
    """
    moment = now_or_utc(now)
    check_run_id(child_id)
    if relation not in RELATIONS:
        raise InvalidInput(
            f"relation must be one of {', '.join(RELATIONS)}, not {relation!r}",
            code="invalid-relation",
        )
    if compiler_input is not None and not isinstance(compiler_input, Mapping):
        raise InvalidInput("the compiler input must be a JSON object", code="invalid-phase-input")
    ledger = parent.ledger
    if child_id == parent.id:
        raise PhaseRefused("run-exists", "a run cannot descend from itself")
    with ledger.db.write() as conn:
        if not conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (parent.id,)).fetchall():
            raise PhaseRefused("parent-run-missing", f"no run {parent.id!r}")
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (child_id,)).fetchall():
            raise PhaseRefused("run-exists", f"run {child_id!r} already exists")
        parent_state = maintain(parent, conn, moment)
        parent._prove_head(conn)  # the journal read is the one the log recorded
        stored = _trusted_parent(parent_state, parent.id)
        if (
            expected_parent_evidence_digest is not None
            and expected_parent_evidence_digest != stored.digest
        ):
            raise PhaseRefused(
                "stale-parent-evidence",
                f"parent run {parent.id!r} is now at {stored.digest}",
                expected=expected_parent_evidence_digest,
                active=stored.digest,
            )
        child_input = _descendant_input(stored, compiler_input)
        evidence = compile(child_input)
        if evidence["status"] == "blocked":
            raise PhaseRefused(
                "descendant-blocked",
                f"run {child_id!r} would start with blocked phase evidence",
                blockers=[blocker["code"] for blocker in evidence["blockers"]],
            )
        _insert_run(conn, child_id)
        child = ledger.get_run(child_id)  # the row just inserted, in this transaction
        input_blob = put_json(child, child_input, "the compiler input")
        evidence_blob = put_json(child, evidence, "the phase evidence")
        descent = {
            "relation": relation,
            "parent_run": parent.id,
            "parent_evidence_digest": stored.digest,
            "parent_entry_seq": stored.seq,
            "parent_entry_hash": stored.entry_hash,
            "parent_source_id": child_input["sources"]["parent"]["id"],
        }
        child._append_locked(
            conn,
            [
                (DESCENT_KIND, descent),
                (EVIDENCE_KIND, _evidence_body(evidence, evidence_blob, input_blob)),
            ],
        )
    return child


# --------------------------------------------------------------------------- authorization

Reason = Literal[
    "granted",
    "empty-request",
    "stale-evidence",
    "no-phase-evidence",
    "evidence-blocked",
    "scope-not-granted",
]


@dataclass(frozen=True)
class AuthorizationDecision:
    """One journaled decision: ``allowed`` and why (``reason``), against which evidence."""

    allowed: bool
    reason: Reason
    dimension: str
    scopes: list[str]
    missing: list[str]
    active_evidence_digest: str | None
    entry: Entry

    def to_json(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "reason": self.reason,
            "dimension": self.dimension,
            "scopes": list(self.scopes),
            "missing": list(self.missing),
            "active_evidence_digest": self.active_evidence_digest,
            "seq": self.entry.seq,
        }


def check_request(dimension: object, scopes: object, evidence_digest: object) -> list[str]:
    """The requested scopes of a well-formed request; ``InvalidInput`` for any other
    (verify holds a journaled decision to the same rule: it was never written otherwise)."""
    if not isinstance(dimension, str) or dimension not in DIMENSIONS:
        raise InvalidInput(
            f"unknown dimension {dimension!r}: expected one of {', '.join(DIMENSIONS)}",
            code="invalid-phase-input",
        )
    if isinstance(scopes, str) or not isinstance(scopes, Sequence):
        raise InvalidInput("scopes must be a list of strings", code="invalid-phase-input")
    checked: list[str] = []
    for index, scope in enumerate(scopes):
        if (
            not isinstance(scope, str)
            or not 1 <= utf16_length(scope) <= 1024
            or has_control_characters(scope)
        ):
            raise InvalidInput(
                f"scopes[{index}]: expected 1..1024 characters without control characters",
                code="invalid-phase-input",
            )
        if scope in checked:
            raise InvalidInput(f"scopes[{index}]: duplicate scope", code="invalid-phase-input")
        checked.append(scope)
    if not isinstance(evidence_digest, str) or not (
        evidence_digest.startswith("sha256:")
        and len(evidence_digest) == 71
        and all(ch in "0123456789abcdef" for ch in evidence_digest[7:])
    ):
        raise InvalidInput(
            "evidence_digest must be sha256:<64 lowercase hex>", code="invalid-phase-input"
        )
    return checked


def check_authorization(
    evidence: Mapping[str, Any] | None, dimension: str, scopes: list[str], bound_digest: str
) -> tuple[Reason, list[str]]:
    """The decision for a request against ``evidence`` (pure; verify re-derives with it)."""
    if evidence is None:
        return "no-phase-evidence", list(scopes)
    if bound_digest != evidence["digest"]:
        return "stale-evidence", list(scopes)
    if evidence["status"] == "blocked":
        return "evidence-blocked", list(scopes)
    if not scopes:
        return "empty-request", []
    effective = evidence["effectiveAuthority"][dimension]
    if effective == ["*"]:
        return "granted", []
    missing = [scope for scope in scopes if scope not in effective]
    return ("scope-not-granted", missing) if missing else ("granted", [])


def decision_problem(
    evidence: Mapping[str, Any] | None, body: Mapping[str, Any]
) -> tuple[str, str] | None:
    """``(expected, found)`` when a journaled ``phase.authorize`` body is not the decision
    :func:`authorize` takes on its request against ``evidence``, the evidence in force at
    its step (a request it refuses is never journaled)."""
    try:
        scopes = check_request(body["dimension"], body["scopes"], body["bound_evidence_digest"])
    except InvalidInput as exc:
        return "a well-formed authorization request", exc.message
    reason, missing = check_authorization(
        evidence, body["dimension"], scopes, body["bound_evidence_digest"]
    )
    expected = {
        "decision": "allowed" if reason == "granted" else "denied",
        "reason": reason,
        "missing": missing,
        "active_evidence_digest": evidence["digest"] if evidence is not None else None,
    }
    for name, value in expected.items():
        if body.get(name) != value:
            return f"{name} {value!r}", repr(body.get(name))
    return None


def decision_problems(state: PhaseState) -> list[tuple[int, str]]:
    """The journaled decisions of ``state``'s run that do not re-derive from the evidence
    in force at their step (what verify reports; ``phase show`` lists them)."""
    problems: list[tuple[int, str]] = []
    steps = [stored.seq for stored in state.in_force]
    for entry in state.journal.of_kind(AUTHORIZE_KIND) if state.journal else ():
        before = bisect.bisect_left(steps, entry.seq)
        evidence = state.in_force[before - 1].evidence if before else None
        try:
            problem = decision_problem(evidence, entry.body)
        except (AttributeError, KeyError, TypeError, ValueError):
            problem = ("a well-formed phase.authorize entry", "malformed")
        if problem is not None:
            expected, found = problem
            problems.append(
                (entry.seq, f"the decision does not re-derive: {expected} expected, {found} found")
            )
    return problems


def authorize(
    run: RunHandle,
    dimension: str,
    scopes: Sequence[str],
    *,
    evidence_digest: str,
    now: datetime | None = None,
) -> AuthorizationDecision:
    """Check an action against the run's active phase authority and journal the decision.

    Allowed when the active evidence (the one ``evidence_digest`` names — a stale digest is
    denied) is not blocked and its effective scopes for ``dimension`` are ``*`` or include
    every requested scope; an empty request is denied. Malformed requests raise
    ``InvalidInput`` and write nothing; every well-formed request is journaled.
    """
    moment = now_or_utc(now)
    requested = check_request(dimension, scopes, evidence_digest)
    with run.ledger.db.write() as conn:
        if not conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.id,)).fetchall():
            if run._must_exist:
                raise NotFound(f"no run {run.id!r}")
            _insert_run(conn, run.id)  # a named run's first entry (a denial) creates it
        state = maintain(run, conn, moment)
        refuse_unreadable(state)
        active = state.effective
        reason, missing = check_authorization(active, dimension, requested, evidence_digest)
        active_digest = str(active["digest"]) if active is not None else None
        body = {
            "dimension": dimension,
            "scopes": requested,
            "bound_evidence_digest": evidence_digest,
            "active_evidence_digest": active_digest,
            "decision": "allowed" if reason == "granted" else "denied",
            "reason": reason,
            "missing": missing,
        }
        entry = run._append_locked(conn, [(AUTHORIZE_KIND, body)])[0]
    return AuthorizationDecision(
        reason == "granted",
        reason,
        dimension,
        requested,
        missing,
        active_digest,
        entry,
    )


# --------------------------------------------------------------------------- show


def phase_summary(state: PhaseState, decisions: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The ``phase show`` object: current phase, history with authority deltas, approvals,
    and (given ``decision_counts``) how many authorization decisions were journaled."""
    effective = state.effective
    initial = state.initial
    current: dict[str, Any] | None = None
    if effective is not None:
        identity = effective["identity"]
        current = {
            "phase": identity["phase"],
            "mode": identity["mode"],
            "profile_id": identity.get("profileId"),
            "status": effective["status"],
            "evidence_digest": effective["digest"],
            "effective_authority": effective["effectiveAuthority"],
        }
    history: list[dict[str, Any]] = []
    if initial is not None:
        history.append(
            {
                "sequence": 0,
                "seq": initial.seq,
                "policy_decision": "initial",
                "phase": initial.evidence["identity"]["phase"],
                "evidence_digest": initial.digest,
                "authority_delta": None,
            }
        )
    for record in state.records:
        history.append(
            {
                "sequence": record["sequence"],
                "record_id": record["id"],
                "operation_id": record["operationId"],
                "policy_decision": record["policyDecision"],
                "phase": record["effectiveEvidence"]["identity"]["phase"],
                "evidence_digest": record["effectiveEvidence"]["digest"],
                "prior_evidence_digest": record["priorEvidence"]["digest"],
                "authority_delta": record["authorityDelta"],
                "actor": record["actor"],
                "reason": record["reason"],
                "created_at": record["createdAt"],
                "approval_id": record.get("approvalId"),
                "override_expires_at": (record.get("emergencyOverride") or {}).get("expiresAt"),
            }
        )
    delta = None
    if initial is not None and effective is not None:
        delta = authority_delta(
            initial.evidence["effectiveAuthority"], effective["effectiveAuthority"]
        )
    descent = None
    if state.descent is not None:
        descent = {key: state.descent[key] for key in DESCENT_SHOWN}
    current_record = state.current
    return {
        "run": state.run_id,
        "current": current,
        "sequence": state.sequence,
        "manifest_digest": current_record["manifestDigest"] if current_record else None,
        "descent": descent,
        "authority_delta_since_initial": delta,
        "authorizations": dict(decisions or {"allowed": 0, "denied": 0}),
        "problems": [
            {"seq": seq, "problem": problem}
            for seq, problem in sorted(
                {*state.problems, *evidence_problems(state), *decision_problems(state)}
            )
        ],
        "history": history,
        "approvals": [
            {
                "id": approval["id"],
                "status": approval["status"],
                "operation_id": approval["operationId"],
                "expires_at": approval["expiresAt"],
                "authority_delta": approval["authorityDelta"],
            }
            for approval in state.approvals.values()
        ],
    }
