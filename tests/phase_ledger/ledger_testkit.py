"""Builders shared by the phase-ledger tests: compiler inputs and transition requests."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from agentledger import Entry, Ledger, Run
from agentledger.phase import DIMENSIONS, builtin_profile, compile

SOURCE_KINDS: dict[str, str] = {
    "parent": "parent",
    "agentProfile": "agent-profile",
    "sandbox": "sandbox",
    "toolCatalog": "tool-catalog",
    "launchPolicy": "launch-policy",
}
MANIFEST = "sha256:" + "c" * 64
OTHER_MANIFEST = "sha256:" + "d" * 64
T0 = datetime(2026, 7, 25, 12, 0, 0, tzinfo=UTC)
OPERATOR = {"id": "operator:alice", "type": "user"}
REVIEWER = {"id": "operator:bob", "type": "user"}


def source(
    key: str, scopes: dict[str, list[str]] | None = None, enforcement: dict[str, str] | None = None
) -> dict[str, Any]:
    """A source that allows ``*`` and enforces every dimension unless told otherwise."""
    scopes = scopes or {}
    enforcement = enforcement or {}
    return {
        "id": f"{SOURCE_KINDS[key]}:test",
        "kind": SOURCE_KINDS[key],
        "authority": {d: list(scopes.get(d, ["*"])) for d in DIMENSIONS},
        "enforcement": {d: enforcement.get(d, "enforced") for d in DIMENSIONS},
    }


def compiler_input(phase: str | None = None, **sources: Any) -> dict[str, Any]:
    """A built-in ``phase`` (None: legacy) with permissive sources unless given."""
    document: dict[str, Any] = {}
    if phase is not None:
        document["profile"] = builtin_profile(phase)
    document["sources"] = {key: sources.get(key) or source(key) for key in SOURCE_KINDS}
    return document


def narrowed_egress(phase: str, *hosts: str) -> dict[str, Any]:
    """``phase`` with the sandbox limiting network egress to ``hosts``."""
    return compiler_input(phase, sandbox=source("sandbox", {"network.egress": list(hosts)}))


def without_parent(document: dict[str, Any]) -> dict[str, Any]:
    """The same input minus its parent source (what a descendant's caller supplies)."""
    trimmed = copy.deepcopy(document)
    del trimmed["sources"]["parent"]
    return trimmed


def started(ledger: Ledger, run_id: str, phase: str | None = "implement", **sources: Any) -> Run:
    run = ledger.run(run_id)
    run.record_phase_evidence(None, compiler_input=compiler_input(phase, **sources))
    return run


def evidence(document: dict[str, Any]) -> dict[str, Any]:
    return compile(document)


def move(
    run: Run,
    target: dict[str, Any],
    *,
    operation: str,
    now: datetime = T0,
    manifest: str = MANIFEST,
    sequence: int | None = None,
    digest: str | None = None,
    **extra: Any,
) -> Any:
    """A transition request against the run's current state (or the given expectations)."""
    state = run.phase_state(now)
    assert state.effective is not None
    return run.transition_phase(
        target,
        operation_id=operation,
        reason=f"Test move {operation}.",
        expected_sequence=state.sequence if sequence is None else sequence,
        expected_evidence_digest=digest or state.effective["digest"],
        manifest_digest=manifest,
        actor=extra.pop("actor", OPERATOR),
        now=now,
        **extra,
    )


def phase_kinds(run: Run) -> list[str]:
    return [entry.kind for entry in run.entries() if entry.kind.startswith("phase.")]


def blob_count(ledger: Ledger) -> int:
    return len(ledger.blobs.digests())


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def edit_blob(ledger: Ledger, digest: str, old: bytes, new: bytes) -> None:
    """Change a stored blob's bytes in place (as an attacker with the file could)."""
    with ledger.db.write() as conn:
        rows: list[Any] = conn.execute(
            "SELECT data FROM blob_chunks WHERE digest = ?", (digest,)
        ).fetchall()
        data = bytes(rows[0][0])
        edited = data.replace(old, new, 1)
        assert edited != data
        conn.execute("UPDATE blob_chunks SET data = ? WHERE digest = ?", (edited, digest))


def forge(run: Run, kind: str, body: dict[str, Any]) -> Entry:
    """Append a phase entry past the API's checks, as someone with write access could."""
    with run.ledger.db.write() as conn:
        entry: Entry = run._append_locked(conn, [(kind, body)])[0]
    return entry
