"""The phase transition journal of a run, stored in the run's own hash chain.

The rules are the pure functions of :mod:`agentledger.phase.transitions`; this module gives
them storage. Everything is a journal entry of the run (plus content-addressed blobs for
the large objects), so every phase change is anchored in the same chain as the work it
governs and is re-checked by ``agentledger verify``:

``phase.evidence``
    the run's initial evidence (blobs: the compiler input and the evidence);
``phase.descent``
    the run was started from another run (retry, fork, resume, handoff);
``phase.transition``
    one applied ``phase-transition-record/v1`` (blob: the record; the entry repeats its
    key fields and names the blob of the compiler input of the new evidence);
``phase.approval``
    an exact-action approval changing status (pending, approved, rejected, expired);
``phase.authorize``
    one authorization decision against the active evidence.

The state is replayed from the run's journal as its verified bytes say
(``journal_view.py``: every row re-hashed and chained in the same transaction), never from
the ``kind`` column: a row that does not verify is a problem of the state, and no decision
or move is taken on it.

Concurrency: every state change reads the run's phase entries and appends inside one
``BEGIN IMMEDIATE`` transaction (``ledger.db.write()``), so the compare-and-set on the
transition sequence is atomic across threads and processes. Maintenance that a read may
owe (appending the ``override-expired`` record once an emergency override has lapsed,
recording a lapsed approval as ``expired``) is done the same way: the state is re-read
under the write lock, so however many readers race, exactly one appends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

import apsw

from agentledger import _core
from agentledger.cas import digest_of
from agentledger.errors import AgentLedgerError, ExitCode, InvalidInput
from agentledger.journal_view import RunView, read_run
from agentledger.phase.compiler import compile
from agentledger.phase.descent import RELATIONS, exceeds, parent_source
from agentledger.phase.digest import verify_evidence_digest
from agentledger.phase.jscompat import js_trim, to_js_string
from agentledger.phase.kinds import (
    APPROVAL_KIND,
    AUTHORIZE_KIND,
    DESCENT_KIND,
    EVIDENCE_KIND,
    PHASE_KINDS,
    TRANSITION_KIND,
)
from agentledger.phase.models import PhaseCapabilityEvidence, is_identifier, validate
from agentledger.phase.transitions import (
    ApprovalRecord,
    PhaseTransitionRecord,
    TransitionRefused,
    approval_id,
    approval_problem,
    decide_approval,
    effective_approval_status,
    expiry_record,
    override_has_expired,
    plan_transition,
    record_problem,
    same_json,
)

if TYPE_CHECKING:
    from agentledger._core import Entry
    from agentledger.handle import RunHandle


DESCENT_SHOWN: Final = ("relation", "parent_run", "parent_evidence_digest")
"""The fields of a ``phase.descent`` body that ``phase show`` reports."""

STATE_KINDS: Final = (EVIDENCE_KIND, DESCENT_KIND, TRANSITION_KIND, APPROVAL_KIND)
"""What the phase state is replayed from; decisions (``phase.authorize``) change nothing.
Every row of the run is verified all the same (a chain is checked from its start; the rows
this process verified before are reused, so a decision costs the same however many came
before)."""

__all__ = [
    "APPROVAL_KIND",
    "AUTHORIZE_KIND",
    "DESCENT_KIND",
    "EVIDENCE_KIND",
    "PHASE_KINDS",
    "TRANSITION_KIND",
    "PhaseRefused",
    "PhaseState",
    "StoredEvidence",
    "TransitionResult",
    "decide",
    "load_state",
    "transition",
]


class PhaseRefused(AgentLedgerError):
    """A phase operation on the ledger that must not happen; ``code`` says why.

    Exit codes follow the CLI contract: ``*-blocked`` is 3 (blocked evidence), stored
    evidence that no longer verifies (a parent's, or a run's own) is 2 (tampering), missing
    evidence is 1, and everything else is invalid input (65). Nothing is written when it
    is raised.
    """

    exit_code = ExitCode.INVALID_INPUT
    code = "phase-refused"

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message, code=code)
        self.details = details
        if code.endswith("-blocked"):
            self.exit_code = ExitCode.BLOCKED
        elif code in ("parent-evidence-tampered", "phase-state-tampered"):
            self.exit_code = ExitCode.DIVERGED
        elif code.endswith("-missing"):
            self.exit_code = ExitCode.NOT_FOUND


# --------------------------------------------------------------------------- blobs


def canonical_bytes(value: Any, what: str) -> bytes:
    """RFC 8785 bytes of ``value`` (what blobs hold); refuses values with no canonical form."""
    try:
        return _core.canonicalize(value)
    except ValueError as exc:
        raise InvalidInput(
            f"{what} has no canonical JSON form: {exc}", code="invalid-body"
        ) from None


def put_json(run: RunHandle, value: Any, what: str) -> str:
    """Store ``value`` as a JCS blob; inside a caller's write transaction it joins it."""
    return run.ledger.blobs.put(canonical_bytes(value, what))


def read_blob(conn: apsw.Connection, digest: object) -> bytes | None:
    """The blob's bytes if present *and* they still hash to its name; else ``None``."""
    if not isinstance(digest, str):
        return None
    if not conn.execute("SELECT 1 FROM blobs WHERE digest = ?", (digest,)).fetchall():
        return None
    data = _stored_bytes(conn, digest)
    algorithm = digest.split(":", 1)[0]
    if algorithm not in ("blake3", "sha256") or digest_of([data], algorithm) != digest:
        return None
    return data


def _stored_bytes(conn: apsw.Connection, digest: str) -> bytes:
    """A blob's chunks as stored (CAST: an edited chunk of another type, a number or NULL,
    is never taken for a length to allocate)."""
    rows = conn.execute(
        "SELECT CAST(data AS BLOB) FROM blob_chunks WHERE digest = ? ORDER BY idx", (digest,)
    )
    return b"".join(row[0] or b"" for row in rows)


def blob_problem(conn: apsw.Connection, digest: object) -> str:
    """Why ``read_json_blob`` gave nothing for ``digest``, with what the store holds: the
    actual side of a finding."""
    if not isinstance(digest, str):
        return f"no blob name: {digest!r}"
    if not conn.execute("SELECT 1 FROM blobs WHERE digest = ?", (digest,)).fetchall():
        return "absent from the blob store"
    data = _stored_bytes(conn, digest)
    algorithm = digest.split(":", 1)[0]
    if algorithm not in ("blake3", "sha256"):
        return "a name that is not a blake3:/sha256: digest"
    now = digest_of([data], algorithm)
    if now != digest:
        return f"bytes hashing to {now} (changed)"
    return "bytes that are not a JSON object"


def read_json_blob(conn: apsw.Connection, digest: object) -> Any:
    data = read_blob(conn, digest)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


# --------------------------------------------------------------------------- state


def evidence_summary(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """What a ``phase.evidence`` entry repeats of the evidence it anchors."""
    identity = evidence["identity"]
    return {
        "evidence_digest": evidence["digest"],
        "status": evidence["status"],
        "mode": identity["mode"],
        "phase": identity["phase"],
        "profile_id": identity.get("profileId"),
        "profile_version": identity.get("profileVersion"),
    }


def summary_problem(body: Mapping[str, Any], evidence: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(expected, found)`` when a ``phase.evidence`` entry misstates its evidence."""
    for name, value in evidence_summary(evidence).items():
        if body.get(name) != value:
            return f"{name} {value!r} (from the evidence)", repr(body.get(name))
    return None


@dataclass(frozen=True)
class StoredEvidence:
    """Evidence as the ledger holds it: the object, the input it compiles from, its blobs."""

    evidence: dict[str, Any]
    compiler_input: dict[str, Any]
    source_blob: str | None
    """The blob the evidence was read from: the evidence blob, or the transition record's."""
    input_blob: str
    seq: int
    entry_hash: str

    @property
    def digest(self) -> str:
        return str(self.evidence["digest"])


@dataclass
class PhaseState:
    """A run's phase state, replayed from its chain (entries of the ``phase.*`` kinds)."""

    run_id: str
    initial: StoredEvidence | None = None
    descent: dict[str, Any] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    effective_stored: StoredEvidence | None = None
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_operation: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)
    """Entries that do not verify or whose blobs could not be read back (verify reports
    them; writers refuse)."""
    journal: RunView | None = None
    """The verified journal the state was replayed from."""
    in_force: list[StoredEvidence] = field(default_factory=list)
    """Each evidence put in force, in chain order (its ``seq`` is where)."""
    parent_evidence: dict[str, Any] | None = None
    """The parent evidence the descent names, read back (None: no descent, or the parent
    run is not in this ledger)."""

    @property
    def current(self) -> dict[str, Any] | None:
        """The latest transition record (``None`` before the first transition)."""
        return self.records[-1] if self.records else None

    @property
    def effective(self) -> dict[str, Any] | None:
        """The evidence in force: the latest transition's, else the initial evidence."""
        return self.effective_stored.evidence if self.effective_stored is not None else None

    @property
    def sequence(self) -> int:
        return len(self.records)

    def pending_approvals(self) -> list[dict[str, Any]]:
        return [a for a in self.approvals.values() if a["status"] == "pending"]


def load_state(conn: apsw.Connection, ledger_id: str, run_id: str) -> PhaseState:
    """Replay the run's phase entries from its verified journal; blobs are re-hashed and
    records checked as read.

    A row of the run that does not verify (its hash, its chain, its bytes) or an entry that
    does not read back (a blob missing or edited, a malformed body or record) is listed in
    ``problems``: writers refuse to act on such a state, verify reports it.
    """
    journal = read_run(conn, ledger_id, run_id)
    state = PhaseState(run_id, journal=journal)
    if journal.problem is not None:
        state.problems.append(journal.problem)
    evidence_seen = False
    for entry in journal.of_kind(*STATE_KINDS):
        # A run starts with at most one descent, then one initial evidence (verify's rule).
        if entry.kind == EVIDENCE_KIND and evidence_seen:
            state.problems.append((entry.seq, "a second phase.evidence (a run has one)"))
            continue
        if entry.kind == DESCENT_KIND and (evidence_seen or state.descent is not None):
            state.problems.append((entry.seq, "a phase.descent after the run's start"))
            continue
        evidence_seen = evidence_seen or entry.kind == EVIDENCE_KIND
        try:
            _apply(conn, state, entry.seq, entry.kind, entry.hash, entry.body)
        except (AttributeError, KeyError, TypeError, ValueError):
            state.problems.append((entry.seq, f"malformed {entry.kind} entry"))
    return state


_VALID_EVIDENCE: dict[str, bool] = {}
"""Whether the evidence of each blob read so far validates, by the blob's digest: its bytes
were re-hashed to that digest as they were read (``read_blob``), and validity is a function
of the bytes. Each decision loads its run's phase state, and the pydantic validation cost
more than the rest of the load."""
_VALID_EVIDENCE_KEPT = 1024


def _valid_evidence(digest: str, evidence: dict[str, Any]) -> bool:
    """``validate`` of ``evidence`` (the bytes of blob ``digest``), remembered."""
    known = _VALID_EVIDENCE.get(digest)
    if known is None:
        known = valid_evidence(evidence)
        if len(_VALID_EVIDENCE) >= _VALID_EVIDENCE_KEPT:
            _VALID_EVIDENCE.clear()
        _VALID_EVIDENCE[digest] = known
    return known


def valid_evidence(evidence: dict[str, Any]) -> bool:
    """Whether ``evidence`` is valid phase evidence (the reference the memory is held to)."""
    try:
        validate(PhaseCapabilityEvidence, evidence, "phase evidence")
    except InvalidInput:
        return False
    return True


def _apply(
    conn: apsw.Connection, state: PhaseState, seq: int, kind: str, entry_hash: str, body: Any
) -> None:
    if kind == EVIDENCE_KIND:
        evidence = read_json_blob(conn, body.get("evidence_blob"))
        compiler_input = read_json_blob(conn, body.get("input_blob"))
        if not isinstance(evidence, dict) or not isinstance(compiler_input, dict):
            state.problems.append((seq, "phase evidence blobs are missing or corrupt"))
            return
        if not _valid_evidence(body["evidence_blob"], evidence):
            state.problems.append((seq, "the phase evidence is not valid"))
            return
        state.initial = StoredEvidence(
            evidence, compiler_input, body["evidence_blob"], body["input_blob"], seq, entry_hash
        )
        state.effective_stored = state.initial
        state.in_force.append(state.initial)
        misstated = summary_problem(body, evidence)
        if misstated is not None:
            expected, found = misstated
            state.problems.append(
                (seq, f"the entry misstates its evidence: {expected} expected, {found} found")
            )
        if state.parent_evidence is not None:
            # A descendant is bound by its parent's evidence (verify checks the same).
            problem = descent_problem(state.parent_evidence, compiler_input, evidence)
            if problem is not None:
                expected, found = problem
                state.problems.append(
                    (seq, f"the phase descent does not hold: {expected} expected, {found} found")
                )
    elif kind == DESCENT_KIND:
        if not all(isinstance(body.get(key), str) for key in DESCENT_SHOWN):
            state.problems.append((seq, "malformed phase.descent entry"))
            return
        state.descent = {**body, "seq": seq, "entry_hash": entry_hash}
        try:
            state.parent_evidence = descended_evidence(conn, body)
        except DescentUnverified as exc:
            state.problems.append(
                (
                    seq,
                    f"the phase descent does not hold: {exc.expected} expected, {exc.found} found",
                )
            )
    elif kind == TRANSITION_KIND:
        record = read_json_blob(conn, body.get("record_blob"))
        compiler_input = read_json_blob(conn, body.get("effective_input_blob"))
        if not isinstance(record, dict) or not isinstance(compiler_input, dict):
            state.problems.append((seq, "phase transition blobs are missing or corrupt"))
            return
        try:
            validate(PhaseTransitionRecord, record, "phase transition record")
        except InvalidInput:
            state.problems.append((seq, "the phase transition record is not valid"))
            return
        problem = record_problem(
            state.run_id, record, state.effective, state.records, state.approvals
        )
        if problem is not None:
            # No rule applies such a record (verify reports it): nothing is decided on it.
            expected, found = problem
            state.problems.append(
                (seq, f"the phase transition breaks the rules: {expected} expected, {found} found")
            )
            return
        if state.descent is not None and state.initial is not None:
            kept = state.initial.compiler_input["sources"]["parent"]
            if not same_json(compiler_input["sources"]["parent"], kept):
                state.problems.append((seq, "the phase transition replaces the parent source"))
                return
        state.records.append(record)
        state.by_operation.setdefault(record["operationId"], record)
        state.effective_stored = StoredEvidence(
            record["effectiveEvidence"],
            compiler_input,
            body["record_blob"],
            body["effective_input_blob"],
            seq,
            entry_hash,
        )
        state.in_force.append(state.effective_stored)
    elif kind == APPROVAL_KIND:
        approval = body.get("approval")
        try:
            check_approval(approval)
        except InvalidInput:
            state.problems.append((seq, "the phase approval is not valid"))
            return
        if body.get("approval_id") != approval["id"] or body.get("status") != approval["status"]:
            state.problems.append((seq, "the entry misstates its approval's id or status"))
            return
        # What a reviewer decides on (its risk class above all: a critical expansion takes
        # an administrator) and what a move applies on: the approval verify accepts.
        problem = approval_problem(state.run_id, approval, state.approvals.get(approval["id"]))
        if problem is not None:
            expected, found = problem
            state.problems.append(
                (seq, f"the phase approval breaks the rules: {expected} expected, {found} found")
            )
            return
        state.approvals[approval["id"]] = approval


class DescentUnverified(Exception):
    """A ``phase.descent`` whose parent bound does not read back: ``(expected, found)``."""

    def __init__(self, expected: str, found: str) -> None:
        super().__init__(expected, found)
        self.expected, self.found = expected, found


_ENTRY_AT: Final = "SELECT hash, bytes FROM entries WHERE run_id = ? AND seq = ?"


def descended_evidence(conn: apsw.Connection, descent: Mapping[str, Any]) -> dict[str, Any] | None:
    """The parent evidence a ``phase.descent`` names, read back: the parent's entry at the
    named step with the named hash, a ``phase.evidence`` or ``phase.transition`` whose blob
    holds unblocked evidence with the named digest, which names the parent source. ``None``
    when the parent run is not in this ledger (an archive of the child alone: the bound
    cannot be checked there). Raises :class:`DescentUnverified`."""
    if descent.get("relation") not in RELATIONS:
        raise DescentUnverified(
            f"a relation of {', '.join(RELATIONS)}", repr(descent.get("relation"))
        )
    parent_run, seq = descent["parent_run"], descent["parent_entry_seq"]
    if not isinstance(parent_run, str) or not isinstance(descent["parent_evidence_digest"], str):
        # Else a parent named by a number would read as one absent from this ledger.
        raise DescentUnverified("a parent run id and evidence digest", repr(parent_run))
    if not conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (parent_run,)).fetchall():
        return None
    rows: list[Any] = conn.execute(_ENTRY_AT, (parent_run, seq)).fetchall()
    if not rows:
        raise DescentUnverified(f"parent entry {parent_run}#{seq}", "absent")
    digest, raw = rows[0]
    entry_hash = "blake3:" + bytes(digest).hex()
    if entry_hash != descent["parent_entry_hash"]:
        raise DescentUnverified(f"parent entry hash {descent['parent_entry_hash']}", entry_hash)
    document = json.loads(raw)
    kind, body = document.get("kind"), document["body"]
    if kind == EVIDENCE_KIND:
        blob = body["evidence_blob"]
        evidence = read_json_blob(conn, blob)
    elif kind == TRANSITION_KIND:
        blob = body["record_blob"]
        record = read_json_blob(conn, blob)
        evidence = record.get("effectiveEvidence") if isinstance(record, dict) else None
    else:
        raise DescentUnverified("a parent phase.evidence or phase.transition entry", str(kind))
    if not isinstance(evidence, dict):
        raise DescentUnverified(f"parent evidence blob {blob}", blob_problem(conn, blob))
    if evidence.get("digest") != descent["parent_evidence_digest"]:
        raise DescentUnverified(
            f"parent evidence {descent['parent_evidence_digest']}", str(evidence.get("digest"))
        )
    if not verify_evidence_digest(evidence) or evidence.get("status") == "blocked":
        raise DescentUnverified("verified, unblocked parent evidence", str(evidence.get("status")))
    expected_id = parent_source(evidence)["id"]
    if descent.get("parent_source_id") != expected_id:
        raise DescentUnverified(expected_id, repr(descent.get("parent_source_id")))
    return dict(evidence)


def descent_problem(
    parent: Mapping[str, Any], compiler_input: Mapping[str, Any], evidence: Mapping[str, Any]
) -> tuple[str, str] | None:
    """``(expected, found)`` when a descendant's evidence was not compiled with exactly the
    parent source its parent's evidence gives, or is wider than the parent's."""
    expected_source = parent_source(parent, compiler_input.get("planArtifact"))
    if not same_json(compiler_input["sources"]["parent"], expected_source):
        return (
            f"parent source {expected_source['id']} (the parent's effective authority)",
            f"parent source {compiler_input['sources']['parent'].get('id')!r}",
        )
    wider = exceeds(evidence["effectiveAuthority"], parent["effectiveAuthority"])
    if wider:
        return "authority within the parent's", "wider on " + ", ".join(wider)
    return None


def decision_counts(state: PhaseState) -> dict[str, int]:
    """How many authorization decisions the run journaled, by outcome (from the verified
    journal the state was replayed from)."""
    counts = {"allowed": 0, "denied": 0}
    for entry in state.journal.of_kind(AUTHORIZE_KIND) if state.journal else ():
        outcome = entry.body.get("decision") if isinstance(entry.body, dict) else None
        if isinstance(outcome, str) and outcome in counts:  # an edited entry may hold a dict
            counts[outcome] += 1
    return counts


_REPRODUCED: dict[tuple[str, str], bool] = {}
"""(input blob, source blob) pairs already re-derived in this process. Blob names are the
hashes of their bytes, re-checked on every read, so a pair names one exact input and one
exact evidence: re-deriving it once per process is enough."""
_REPRODUCED_MAX: Final = 4096


def reproduces(stored: StoredEvidence) -> bool:
    """True when the evidence's digest matches its content and the compiler produces exactly
    it from the recorded input. (Equal verified digests mean equal content: the digest is
    SHA-256 of the content as ``JSON.stringify`` writes it.)"""
    key = (stored.input_blob, stored.source_blob) if stored.source_blob else None
    if key is not None and key in _REPRODUCED:
        return True
    try:
        compiled = compile(stored.compiler_input)
    except InvalidInput:
        return False
    evidence = stored.evidence
    if not verify_evidence_digest(evidence) or compiled["digest"] != evidence.get("digest"):
        return False
    if key is not None:
        if len(_REPRODUCED) >= _REPRODUCED_MAX:
            _REPRODUCED.clear()
        _REPRODUCED[key] = True
    return True


def evidence_problems(state: PhaseState) -> list[tuple[int, str]]:
    """Each evidence the run put in force that does not re-derive from its recorded input
    (what verify reports at its step; writers refuse the one in force, ``phase show`` lists
    them all)."""
    return [
        (stored.seq, "the evidence is not what the compiler produces for its recorded input")
        for stored in state.in_force
        if not reproduces(stored)
    ]


def refuse_unreadable(state: PhaseState) -> None:
    """Refuse to act on a phase state whose blobs or evidence in force do not re-derive.

    The evidence in force must match its digest and be exactly what the compiler produces
    for its recorded input: a decision is never taken against forged evidence.
    """
    if state.problems:
        seq, problem = state.problems[0]
        raise PhaseRefused(
            "phase-state-tampered",
            f"run {state.run_id!r} step {seq}: {problem}; run `agentledger verify`",
        )
    stored = state.effective_stored
    if stored is None:
        return
    if not reproduces(stored):
        raise PhaseRefused(
            "phase-state-tampered",
            f"run {state.run_id!r} step {stored.seq}: the evidence in force is not what the "
            "compiler produces for its recorded input; run `agentledger verify`",
        )


def now_or_utc(now: datetime | None) -> datetime:
    """``now`` (timezone-aware, for replays and tests), else the current UTC time."""
    if now is None:
        return datetime.now(UTC)
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInput("now must be a timezone-aware datetime", code="invalid-time")
    return now


# --------------------------------------------------------------------------- appends


def append_transition(
    run: RunHandle, conn: apsw.Connection, record: Mapping[str, Any], input_blob: str
) -> Entry:
    """Store a validated record and anchor it (caller holds the write transaction)."""
    record_blob = put_json(run, record, "the phase transition record")
    override = record.get("emergencyOverride")
    body = {
        "record_id": record["id"],
        "record_blob": record_blob,
        "sequence": record["sequence"],
        "operation_id": record["operationId"],
        "policy_decision": record["policyDecision"],
        "prior_evidence_digest": record["priorEvidence"]["digest"],
        "effective_evidence_digest": record["effectiveEvidence"]["digest"],
        "effective_input_blob": input_blob,
        "manifest_digest": record["manifestDigest"],
        "approval_id": record.get("approvalId"),
        "override_expires_at": override["expiresAt"] if override else None,
        "created_at": record["createdAt"],
    }
    return run._append_locked(conn, [(TRANSITION_KIND, body)])[0]


def append_approval(run: RunHandle, conn: apsw.Connection, approval: Mapping[str, Any]) -> Entry:
    body = {"approval_id": approval["id"], "status": approval["status"], "approval": approval}
    return run._append_locked(conn, [(APPROVAL_KIND, body)])[0]


def maintain(run: RunHandle, conn: apsw.Connection, now: datetime) -> PhaseState:
    """The run's state after appending what lapsed by ``now`` (caller holds the write lock).

    An emergency override whose ``expiresAt`` is not after ``now`` gets its one
    ``override-expired`` record, restoring the prior evidence; a pending approval past its
    expiry is recorded ``expired``. Both records are pure functions of what lapsed, and the
    state is read under the write lock, so a racing reader finds them already written.
    """
    state = load_state(conn, run.ledger.id, run.id)
    if state.problems:
        return state  # nothing is appended on top of a state that does not read back
    current = state.current
    if current is not None and override_has_expired(current, now):
        record = expiry_record(current)
        # The override's prior evidence is the evidence before it: the one before in force.
        prior_input = _input_blob_before(state, current["sequence"])
        append_transition(run, conn, record, prior_input)
        state = load_state(conn, run.ledger.id, run.id)
    for approval in state.pending_approvals():
        if effective_approval_status(approval, now) == "expired":
            append_approval(run, conn, {**approval, "status": "expired"})
            state.approvals[approval["id"]] = {**approval, "status": "expired"}
    return state


def _input_blob_before(state: PhaseState, sequence: int) -> str:
    """The compiler-input blob of the evidence in force before transition ``sequence``."""
    blob: str | None = None
    entries = state.journal.of_kind(EVIDENCE_KIND, TRANSITION_KIND) if state.journal else ()
    for entry in entries:
        body = entry.body
        if entry.kind == EVIDENCE_KIND and blob is None:
            blob = body["input_blob"]
        elif entry.kind == TRANSITION_KIND:
            if body["sequence"] >= sequence:
                break
            blob = body["effective_input_blob"]
    if blob is None:
        raise PhaseRefused(
            "phase-state-tampered", f"run {state.run_id!r}: no evidence before override"
        )
    return blob


def current_state(run: RunHandle, now: datetime | None = None) -> PhaseState:
    """The run's phase state as of ``now`` — the first read after a lapse records it."""
    moment = now_or_utc(now)
    with run.ledger.db.snapshot() as conn:
        state = load_state(conn, run.ledger.id, run.id)
    current = state.current
    lapsed = (current is not None and override_has_expired(current, moment)) or any(
        effective_approval_status(a, moment) == "expired" for a in state.pending_approvals()
    )
    if not lapsed:
        return state
    if run.ledger.db.readonly:
        return _as_if_maintained(run, state, moment)
    with run.ledger.db.write() as conn:
        return maintain(run, conn, moment)


def _as_if_maintained(run: RunHandle, state: PhaseState, now: datetime) -> PhaseState:
    """A read-only view of what :func:`maintain` would append (nothing is written)."""
    current = state.current
    if current is not None and override_has_expired(current, now):
        record = expiry_record(current)
        input_blob = _input_blob_before(state, current["sequence"])
        with run.ledger.db.snapshot() as conn:
            compiler_input = read_json_blob(conn, input_blob)
        state.records.append(record)
        state.by_operation.setdefault(record["operationId"], record)
        state.effective_stored = StoredEvidence(
            record["effectiveEvidence"], compiler_input or {}, None, input_blob, -1, ""
        )
    for approval in state.pending_approvals():
        if effective_approval_status(approval, now) == "expired":
            state.approvals[approval["id"]] = {**approval, "status": "expired"}
    return state


# --------------------------------------------------------------------------- transitions


@dataclass(frozen=True)
class TransitionResult:
    """What a transition request led to.

    ``status`` is ``applied`` (``record`` is in force; ``replayed`` when this exact
    request had already been applied) or ``approval-required`` (nothing moved; ``approval``
    is pending until a reviewer approves it, then retry the same request).
    """

    status: Literal["applied", "approval-required"]
    record: dict[str, Any] | None
    approval: dict[str, Any] | None
    replayed: bool
    delta: dict[str, Any]
    entry: Entry | None


def target_input_for(state: PhaseState, target_input: Mapping[str, Any]) -> dict[str, Any]:
    """A descendant's target keeps the parent source it was started with (never exceeds it)."""
    document = dict(target_input)
    if state.descent is None or state.initial is None:
        return document
    recorded = state.initial.compiler_input["sources"]["parent"]
    sources = document.get("sources")
    if not isinstance(sources, Mapping):
        return document  # the compiler reports the malformed input
    given = sources.get("parent")
    if given is not None and not same_json(given, recorded):
        raise PhaseRefused(
            "parent-source-derived",
            "a descendant's parent source is its parent's evidence; it cannot be replaced",
        )
    document["sources"] = {**sources, "parent": recorded}
    return document


def transition(
    run: RunHandle,
    target_input: Mapping[str, Any],
    *,
    operation_id: str,
    reason: str,
    expected_sequence: int,
    expected_evidence_digest: str,
    manifest_digest: str,
    actor: Mapping[str, Any],
    administrator: bool = False,
    approval: str | None = None,
    approval_ttl_ms: int | None = None,
    emergency_override: Mapping[str, Any] | None = None,
    target_evidence: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> TransitionResult:
    """Move ``run`` to the evidence compiled from ``target_input``, by the journal's rules.

    Compare-and-set on (``expected_sequence``, ``expected_evidence_digest``,
    ``manifest_digest``); idempotent per ``operation_id``. ``target_evidence``, if given,
    must be exactly what the compiler produces for ``target_input``.
    """
    moment = now_or_utc(now)
    if not is_identifier(run.id):
        # Records and approvals name the run as a phase identifier: they would not validate.
        raise InvalidInput(
            f"run {run.id!r} cannot take phase transitions: its id is not a phase identifier "
            "([A-Za-z0-9][A-Za-z0-9._:/-]*)",
            code="invalid-run-id",
        )
    if not isinstance(target_input, Mapping):
        raise InvalidInput("the target compiler input must be a JSON object")
    refusal: AgentLedgerError | None = None
    result: TransitionResult | None = None
    with run.ledger.db.write() as conn:
        state = maintain(run, conn, moment)
        try:
            # A savepoint: a refusal takes back what this request wrote (a target input
            # blob before its record failed to store), never the maintenance.
            with run.ledger.db.write():
                result = _transition_locked(
                    run, conn, state, target_input, moment,
                    operation_id=operation_id, reason=reason,
                    expected_sequence=expected_sequence,
                    expected_evidence_digest=expected_evidence_digest,
                    manifest_digest=manifest_digest, actor=actor, administrator=administrator,
                    approval=approval, approval_ttl_ms=approval_ttl_ms,
                    emergency_override=emergency_override, target_evidence=target_evidence,
                )  # fmt: skip
        except AgentLedgerError as exc:
            refusal = exc  # commit what maintenance appended, nothing else
    if refusal is not None:
        raise refusal
    assert result is not None
    return result


def _transition_locked(
    run: RunHandle,
    conn: apsw.Connection,
    state: PhaseState,
    target_input: Mapping[str, Any],
    now: datetime,
    *,
    operation_id: str,
    reason: str,
    expected_sequence: int,
    expected_evidence_digest: str,
    manifest_digest: str,
    actor: Mapping[str, Any],
    administrator: bool,
    approval: str | None,
    approval_ttl_ms: int | None,
    emergency_override: Mapping[str, Any] | None,
    target_evidence: Mapping[str, Any] | None,
) -> TransitionResult:
    refuse_unreadable(state)
    if state.initial is None:
        raise PhaseRefused(
            "initial-evidence-missing",
            f"run {run.id!r} has no phase evidence; record it before any transition",
        )
    compiler_input = target_input_for(state, target_input)
    compiled = compile(compiler_input)
    if target_evidence is not None:
        if not verify_evidence_digest(target_evidence):
            raise TransitionRefused(
                "evidence-tampered", "target evidence digest does not match its content"
            )
        if not same_json(target_evidence, compiled):
            raise PhaseRefused(
                "evidence-not-reproducible",
                "the target evidence is not what the compiler produces for the target input "
                f"(compiled digest {compiled['digest']})",
            )
    request: dict[str, Any] = {
        "operationId": operation_id,
        "expectedSequence": expected_sequence,
        "expectedPhaseEvidenceDigest": expected_evidence_digest,
        "expectedManifestDigest": manifest_digest,
        "reason": reason,
        "targetEvidence": compiled,
    }
    if state.current is None:
        request["fromEvidence"] = state.initial.evidence
    if approval is not None:
        request["approvalId"] = approval
    if approval_ttl_ms is not None:
        request["approvalTtlMs"] = approval_ttl_ms
    if emergency_override is not None:
        request["emergencyOverride"] = dict(emergency_override)
    operation = js_trim(to_js_string(operation_id)) if isinstance(operation_id, str) else None
    existing = state.by_operation.get(operation) if operation is not None else None
    stored_approval = None
    prior = state.effective
    if prior is not None and operation is not None and isinstance(manifest_digest, str):
        target = compiled["digest"]
        wanted = approval_id(run.id, operation, prior["digest"], target, manifest_digest)
        stored_approval = state.approvals.get(wanted)
    outcome = plan_transition(
        run_id=run.id,
        request=request,
        current=state.current,
        existing=existing,
        actor=actor,
        administrator=administrator,
        approval=stored_approval,
        now=now,
    )
    if outcome.status == "approval-required":
        assert outcome.approval is not None
        entry = None
        if outcome.approval["id"] not in state.approvals:
            entry = append_approval(run, conn, outcome.approval)
        return TransitionResult(
            "approval-required", None, outcome.approval, False, outcome.delta, entry
        )
    assert outcome.record is not None
    if outcome.replayed:
        return TransitionResult("applied", outcome.record, None, True, outcome.delta, None)
    input_blob = put_json(run, compiler_input, "the target compiler input")
    entry = append_transition(run, conn, outcome.record, input_blob)
    return TransitionResult("applied", outcome.record, None, False, outcome.delta, entry)


def decide(
    run: RunHandle,
    approval: str,
    decision: Literal["approved", "rejected"],
    *,
    actor: Mapping[str, Any],
    note: str | None = None,
    administrator: bool = False,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Record a reviewer's decision on a pending approval of this run.

    Approving a ``critical`` expansion (one that adds credential access or external
    actions) takes an administrator, and the record says so (``administratorConfirmed``).
    """
    moment = now_or_utc(now)
    if decision not in ("approved", "rejected"):
        raise InvalidInput(f"decision must be approved or rejected, not {decision!r}")
    refusal: AgentLedgerError | None = None
    decided: dict[str, Any] | None = None
    with run.ledger.db.write() as conn:
        state = maintain(run, conn, moment)
        refuse_unreadable(state)  # an approval's history is the verified journal's
        stored = state.approvals.get(approval)
        try:
            if stored is None:
                raise PhaseRefused(
                    "approval-missing", f"run {run.id!r} has no approval {approval!r}"
                )
            decided = decide_approval(stored, decision, actor, moment, note)
            if decision == "approved" and stored["riskClass"] == "critical":
                if not administrator:
                    raise PhaseRefused(
                        "approval-requires-administrator",
                        f"approval {approval} adds credential access or external actions "
                        "(critical): an administrator must approve it",
                    )
                decided["administratorConfirmed"] = True
            append_approval(run, conn, decided)
        except AgentLedgerError as exc:
            refusal = exc
    if refusal is not None:
        raise refusal
    assert decided is not None
    return decided


def check_approval(approval: Mapping[str, Any]) -> None:
    """Schema-check a stored approval (verify uses it)."""
    validate(ApprovalRecord, approval, "approval")
