"""The result contract every activity returns, and the typed refusal of one that breaks it.

An :class:`ActivityResult` is what crosses the boundary: the modality (``kind``), the
artifact and the hash of its canonical bytes, the observations (each the content hash of
exact captured bytes) and the hash of their de-duplicated set, a terminal state and a
reason code. ``ActivityResult.build`` computes the two hashes; ``check_result`` recomputes
them and refuses, with a machine-readable code, anything that does not hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentledger import _core
from agentledger.cas import DIGEST
from agentledger.errors import InvalidInput

MODALITIES = ("coding", "research", "browser", "data", "ops")
"""The kinds of activity the boundary accepts."""
SIGNED_MODALITIES = ("data", "ops")
"""Modalities that change the world: their artifact is a signed DataOpsReceipt."""
TERMINAL_STATES = ("completed", "refused", "failed", "timed_out")

STAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
MAX_LABEL = 256


class ActivityRejected(InvalidInput):
    """A result refused at the boundary. ``code`` says why, for machines; nothing was written
    (except, for ``redundant-evidence``, the journal entry that records the refusal)."""

    code = "activity-rejected"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)


@dataclass(frozen=True, slots=True)
class Observation:
    """Bytes an agent saw behind a decision, named by the hash of exactly those bytes.

    ``ref`` (a URL, a step label) is provenance only: it is not part of any hash. ``data``
    optionally carries the captured bytes so the boundary can store them; it is never part
    of equality or of what is journaled.
    """

    kind: str
    ref: str
    content_hash: str
    data: bytes | None = field(default=None, compare=False, repr=False)

    @classmethod
    def capture(cls, kind: str, ref: str, data: bytes) -> Observation:
        """Content-address ``data`` now, at capture time, and keep the bytes to store."""
        data = bytes(data)
        return cls(kind, ref, _core.blake3_hex(data), data)

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "ref": self.ref, "content_hash": self.content_hash}


def evidence_set_hash(observations: Iterable[Observation]) -> str:
    """The hash of the sorted, de-duplicated observation hashes (computed in Rust)."""
    digest: str = _core.evidence_set_hash([o.content_hash for o in observations])
    return digest


def artifact_bytes(artifact: Any) -> bytes:
    """The canonical (RFC 8785) bytes of an artifact: what is hashed and stored."""
    try:
        return _core.canonicalize(artifact)
    except (ValueError, TypeError) as exc:
        raise ActivityRejected(
            "artifact-not-canonical", f"the artifact has no canonical JSON form: {exc}"
        ) from None


@dataclass(frozen=True, slots=True)
class ActivityResult:
    """What one activity returns: artifact, hashes to replay it, terminal state and reason."""

    kind: str
    artifact: Any
    artifact_hash: str
    evidence_set_hash: str
    terminal_state: str
    reason_code: str
    observations: tuple[Observation, ...] = ()

    @classmethod
    def build(
        cls,
        *,
        kind: str,
        artifact: Any,
        observations: Iterable[Observation] = (),
        terminal_state: str = "completed",
        reason_code: str = "ok",
    ) -> ActivityResult:
        """A result whose two hashes are computed here (the boundary still re-checks them)."""
        observed = tuple(observations)
        for observation in observed:
            _check_observation(observation)
        return cls(
            kind=kind,
            artifact=artifact,
            artifact_hash=_core.blake3_hex(artifact_bytes(artifact)),
            evidence_set_hash=evidence_set_hash(observed),
            terminal_state=terminal_state,
            reason_code=reason_code,
            observations=observed,
        )

    @classmethod
    def from_json(cls, doc: object) -> ActivityResult:
        """A result from its JSON document (as ``to_json`` writes it); hashes taken as given."""
        if not isinstance(doc, Mapping):
            raise ActivityRejected("invalid-result", "an activity result must be a JSON object")
        allowed = {
            "kind", "artifact", "artifact_hash", "evidence_set_hash", "terminal_state",
            "reason_code", "observations",
        }  # fmt: skip
        unknown = sorted(set(doc) - allowed)
        if unknown:
            raise ActivityRejected("invalid-result", f"unknown result fields: {unknown}")
        missing = sorted(allowed - set(doc))
        if missing:
            raise ActivityRejected("invalid-result", f"missing result fields: {missing}")
        raw_observations = doc["observations"]
        if not isinstance(raw_observations, list):
            raise ActivityRejected("invalid-observation", "observations must be a list")
        observations = []
        for item in raw_observations:
            if not isinstance(item, Mapping) or set(item) != {"kind", "ref", "content_hash"}:
                raise ActivityRejected(
                    "invalid-observation",
                    f"an observation is exactly {{kind, ref, content_hash}}, not {item!r}",
                )
            observations.append(Observation(item["kind"], item["ref"], item["content_hash"]))
        return cls(
            kind=doc["kind"],
            artifact=doc["artifact"],
            artifact_hash=doc["artifact_hash"],
            evidence_set_hash=doc["evidence_set_hash"],
            terminal_state=doc["terminal_state"],
            reason_code=doc["reason_code"],
            observations=tuple(observations),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "artifact": self.artifact,
            "artifact_hash": self.artifact_hash,
            "evidence_set_hash": self.evidence_set_hash,
            "terminal_state": self.terminal_state,
            "reason_code": self.reason_code,
            "observations": [o.to_json() for o in self.observations],
        }


def _check_label(value: object, what: str, code: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_LABEL:
        raise ActivityRejected(code, f"{what} must be a string of at most {MAX_LABEL} characters")
    return value


def _check_observation(observation: object) -> Observation:
    if not isinstance(observation, Observation):
        raise ActivityRejected(
            "invalid-observation", f"expected an Observation, not {type(observation).__name__}"
        )
    kind = _check_label(observation.kind, "an observation's kind", "invalid-observation")
    if not kind:
        raise ActivityRejected("invalid-observation", "an observation's kind must not be empty")
    if not isinstance(observation.ref, str):
        raise ActivityRejected("invalid-observation", "an observation's ref must be a string")
    digest = observation.content_hash
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise ActivityRejected(
            "malformed-observation-hash",
            f"observation {observation.ref!r}: content hash {digest!r} is not "
            "blake3:<64 lowercase hex> (or sha256:<64 lowercase hex>)",
        )
    if observation.data is not None and digest != _content_hash(digest, observation.data):
        raise ActivityRejected(
            "observation-bytes-mismatch",
            f"observation {observation.ref!r}: the attached bytes do not hash to {digest}",
        )
    return observation


def _content_hash(like: str, data: bytes) -> str:
    """The content hash of ``data`` in the algorithm ``like`` names."""
    return _core.sha256_hex(data) if like.startswith("sha256:") else _core.blake3_hex(data)


def check_stage_id(stage_id: object) -> str:
    if not isinstance(stage_id, str) or not STAGE_ID.fullmatch(stage_id):
        raise ActivityRejected(
            "invalid-stage-id",
            f"invalid stage id {stage_id!r}: 1-128 characters from A-Z a-z 0-9 _ . : -, "
            "starting with a letter or digit",
        )
    return stage_id


def check_role(role: object) -> str | None:
    """A role name is spelled as a stage id is (it is checked against the team later)."""
    if role is not None and (not isinstance(role, str) or not STAGE_ID.fullmatch(role)):
        raise ActivityRejected("invalid-role", f"invalid role name {role!r}")
    return role


def check_outcome(terminal_state: object, reason_code: object) -> None:
    """How a stage ended: a known terminal state and a reason code."""
    if terminal_state not in TERMINAL_STATES:
        raise ActivityRejected(
            "unknown-terminal-state",
            f"unknown terminal state {terminal_state!r}; known: {', '.join(TERMINAL_STATES)}",
        )
    if not isinstance(reason_code, str) or not reason_code.strip():
        raise ActivityRejected("empty-reason-code", "the reason code must be a non-empty string")
    _check_label(reason_code, "the reason code", "invalid-reason-code")


def check_result(result: object) -> ActivityResult:
    """Re-derive everything a result claims; refuse it with a typed code if anything fails.

    Order matters only for which code a result with several faults gets: cheap structural
    checks first, then the hashes.
    """
    if not isinstance(result, ActivityResult):
        raise ActivityRejected(
            "invalid-result", f"expected an ActivityResult, not {type(result).__name__}"
        )
    if result.kind not in MODALITIES:
        raise ActivityRejected(
            "unknown-kind", f"unknown activity kind {result.kind!r}; known: {', '.join(MODALITIES)}"
        )
    check_outcome(result.terminal_state, result.reason_code)
    for observation in result.observations:
        _check_observation(observation)
    if not isinstance(result.artifact_hash, str) or not DIGEST.fullmatch(result.artifact_hash):
        raise ActivityRejected(
            "artifact-hash-mismatch",
            f"artifact hash {result.artifact_hash!r} is not blake3:<64 lowercase hex>",
        )
    recomputed = _core.blake3_hex(artifact_bytes(result.artifact))
    if recomputed != result.artifact_hash:
        raise ActivityRejected(
            "artifact-hash-mismatch",
            f"artifact hash does not recompute: claimed {result.artifact_hash}, "
            f"canonical bytes hash to {recomputed}",
        )
    recomputed = evidence_set_hash(result.observations)
    if recomputed != result.evidence_set_hash:
        raise ActivityRejected(
            "evidence-set-hash-mismatch",
            f"evidence set hash does not recompute: claimed {result.evidence_set_hash!r}, "
            f"the observations give {recomputed}",
        )
    return result
