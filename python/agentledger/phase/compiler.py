"""The pure phase-capability compiler.

``compile(input) -> evidence`` computes a phase's effective authority as the exact
intersection of the parent, the phase profile, the agent profile, the sandbox, the tool
catalog and the launch policy. It is pure: no I/O, no clock, no randomness, and the input
is never mutated, so the ledger can re-run it on a recorded input and compare the result
with the recorded evidence for equality, field for field and digest for digest.

The behaviour is the reference's (veritas-kanban ``compilePhaseCapabilityAuthority``);
docs/PHASE.md explains every rule and where the two languages had to be reconciled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentledger.phase.digest import sha256_digest
from agentledger.phase.jscompat import locale_sort_key, utf16_sort_key
from agentledger.phase.models import (
    DIMENSIONS,
    EVIDENCE_SCHEMA_VERSION,
    Dimension,
    PhaseCapabilityEvidence,
    PhaseCompilerInput,
    validate,
)
from agentledger.phase.plan_artifact import is_safe_plan_artifact_path

__all__ = [
    "HARNESS_EXACT_PATH_SCOPE",
    "LEGACY_WARNING",
    "PHASE_COMPILER_SOURCE_ID",
    "compile",
    "compile_validated",
    "intersect_scopes",
    "optional_removed_warning",
]

ARTIFACT_DIMENSION: Final[Dimension] = "artifact.plan.write"
HARNESS_EXACT_PATH_SCOPE: Final = "harness-exact-path"
#: The limiting source recorded when the compiler itself drops a requested plan artifact.
PHASE_COMPILER_SOURCE_ID: Final = "phase-compiler"
LEGACY_WARNING: Final = (
    "Legacy mode applies no phase profile; existing parent, agent, sandbox, tool, and "
    "launch policies remain authoritative."
)
PLAN_ARTIFACT_NOT_ALLOWED_MESSAGE: Final = (
    "The selected phase profile does not allow a plan-artifact exception."
)
PLAN_ARTIFACT_PATH_INVALID_MESSAGE: Final = (
    "The plan artifact must be one normalized repository-relative path without traversal, "
    "control characters, backslashes, or shell syntax."
)


def optional_removed_warning(dimension: str) -> str:
    return f"Optional {dimension} authority was removed by the effective intersection."


def intersect_scopes(left: list[str], right: list[str]) -> list[str]:
    """Exact intersection; ``*`` on one side yields the other side; never a union."""
    if not left or not right:
        return []
    if left[0] == "*":
        return list(right)
    if right[0] == "*":
        return list(left)
    allowed = set(right)
    return [scope for scope in left if scope in allowed]


def _blocker(
    code: str, dimension: Dimension, message: str, source_id: str | None = None
) -> dict[str, Any]:
    blocker: dict[str, Any] = {"code": code, "message": message, "dimension": dimension}
    if source_id is not None:
        blocker["sourceId"] = source_id
    return blocker


def _enforcement_blocker(state: str, dimension: Dimension, source_id: str) -> dict[str, Any]:
    if state == "unsupported":
        return _blocker(
            "required-authority-unsupported",
            dimension,
            f"{source_id} does not support required {dimension} enforcement.",
            source_id,
        )
    return _blocker(
        "required-authority-unenforceable",
        dimension,
        f"{source_id} cannot enforce required {dimension} authority.",
        source_id,
    )


def _blocker_sort_key(blocker: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    # The reference orders blockers with localeCompare (ICU root collation), not code units.
    return (
        locale_sort_key(blocker.get("dimension") or ""),
        locale_sort_key(blocker.get("sourceId") or ""),
        locale_sort_key(blocker["code"]),
    )


def compile(compiler_input: Mapping[str, Any]) -> dict[str, Any]:
    """Compile ``phase-capability-evidence/v1`` from a compiler input (a JSON-like mapping).

    Raises :class:`~agentledger.phase.errors.PhaseInputError` (exit code 65 in the CLI)
    when the input violates the strict contract; a well-formed input whose authority cannot
    be granted is not an error but ``blocked`` evidence with typed blockers.
    """
    parsed = validate(PhaseCompilerInput, compiler_input, "phase compiler input")
    return compile_validated(parsed)


def compile_validated(parsed: PhaseCompilerInput) -> dict[str, Any]:
    """:func:`compile` for an input that is already a validated model."""
    profile = parsed.profile
    sources = parsed.sources.in_order()

    identity: dict[str, Any]
    requested: dict[Dimension, list[str]]
    if profile is not None:
        identity = {
            "mode": "profile",
            "phase": profile.phase,
            "profileId": profile.id,
            "profileVersion": profile.version,
        }
        requested = {dimension: profile.authority.scopes(dimension) for dimension in DIMENSIONS}
        required: list[Dimension] = list(profile.requiredDimensions)
        approval_required: list[Dimension] = list(profile.approvalRequiredDimensions)
    else:
        identity = {"mode": "legacy", "phase": "legacy"}
        requested = {
            dimension: ([] if dimension == ARTIFACT_DIMENSION else ["*"])
            for dimension in DIMENSIONS
        }
        required = []
        approval_required = []

    blockers: list[dict[str, Any]] = []
    warnings: list[str] = []

    # Plan-artifact pre-pass: decide whether the one exact-path exception is in play.
    plan_artifact: dict[str, Any] | None = None
    request = parsed.planArtifact
    if request is None:
        requested[ARTIFACT_DIMENSION] = []
    elif profile is None or profile.planArtifactPolicy.mode != "harness-exact-path":
        requested[ARTIFACT_DIMENSION] = []
        blockers.append(
            _blocker(
                "plan-artifact-not-allowed", ARTIFACT_DIMENSION, PLAN_ARTIFACT_NOT_ALLOWED_MESSAGE
            )
        )
    elif not is_safe_plan_artifact_path(request.exactPath):
        blockers.append(
            _blocker(
                "plan-artifact-path-invalid",
                ARTIFACT_DIMENSION,
                PLAN_ARTIFACT_PATH_INVALID_MESSAGE,
            )
        )
    else:
        plan_artifact = {
            "exactPath": request.exactPath,
            "owner": "veritas-kanban",
            "transport": "harness-api",
            "shellRedirection": False,
            "indirectWrites": False,
        }
        if ARTIFACT_DIMENSION not in required:
            required.append(ARTIFACT_DIMENSION)

    # Fold the five sources, in their fixed order, dimension by dimension.
    effective: dict[Dimension, list[str]] = {}
    evaluations: list[dict[str, Any]] = []
    for dimension in DIMENSIONS:
        requested_scopes = requested[dimension]
        scopes = list(requested_scopes)
        limiting: list[str] = []
        is_required = dimension in required
        enforcement_blocked = False
        for source in sources:
            state = source.enforcement.state(dimension)
            if state != "enforced":
                scopes = []
                limiting.append(source.id)
                if is_required:
                    enforcement_blocked = True
                    blockers.append(_enforcement_blocker(state, dimension, source.id))
                continue
            narrowed = intersect_scopes(scopes, source.authority.scopes(dimension))
            if narrowed != scopes:
                limiting.append(source.id)
            scopes = narrowed

        if is_required and requested_scopes and not scopes and not enforcement_blocked:
            blockers.append(
                _blocker(
                    "required-authority-denied",
                    dimension,
                    f"The authority intersection denies every requested {dimension} scope.",
                )
            )
        if not is_required and requested_scopes and not scopes:
            warnings.append(optional_removed_warning(dimension))

        effective[dimension] = scopes
        evaluations.append(
            {
                "dimension": dimension,
                "requestedScopes": list(requested_scopes),
                "effectiveScopes": list(scopes),
                "required": is_required,
                "limitingSourceIds": sorted(set(limiting), key=utf16_sort_key),
            }
        )

    # Plan-artifact post-pass: the exception survives only if the fold left it authority,
    # and then it is exactly the one requested path, never the placeholder scope.
    artifact_evaluation = evaluations[DIMENSIONS.index(ARTIFACT_DIMENSION)]
    if plan_artifact is not None:
        if not effective[ARTIFACT_DIMENSION]:
            plan_artifact = None
        else:
            effective[ARTIFACT_DIMENSION] = [plan_artifact["exactPath"]]
            artifact_evaluation["effectiveScopes"] = [plan_artifact["exactPath"]]
    if request is not None and plan_artifact is None:
        effective[ARTIFACT_DIMENSION] = []
        artifact_evaluation["effectiveScopes"] = []
        artifact_evaluation["limitingSourceIds"] = sorted(
            {*artifact_evaluation["limitingSourceIds"], PHASE_COMPILER_SOURCE_ID},
            key=utf16_sort_key,
        )

    if profile is None:
        warnings.append(LEGACY_WARNING)

    def differs(evaluation: Mapping[str, Any]) -> bool:
        if (
            evaluation["dimension"] == ARTIFACT_DIMENSION
            and plan_artifact is not None
            and evaluation["requestedScopes"] == [HARNESS_EXACT_PATH_SCOPE]
            and evaluation["effectiveScopes"] == [plan_artifact["exactPath"]]
        ):
            return False  # the accepted substitution is the exception working, not narrowing
        return bool(evaluation["requestedScopes"] != evaluation["effectiveScopes"])

    if blockers:
        status = "blocked"
    elif any(differs(evaluation) for evaluation in evaluations):
        status = "narrowed"
    else:
        status = "allowed"

    required_set = set(required)
    approval_set = set(approval_required)
    payload: dict[str, Any] = {
        "schemaVersion": EVIDENCE_SCHEMA_VERSION,
        "status": status,
        "identity": identity,
        "requestedAuthority": {dimension: requested[dimension] for dimension in DIMENSIONS},
        "effectiveAuthority": {dimension: effective[dimension] for dimension in DIMENSIONS},
        "requiredDimensions": [d for d in DIMENSIONS if d in required_set],
        "approvalRequiredDimensions": [d for d in DIMENSIONS if d in approval_set],
        "evaluations": evaluations,
        "blockers": sorted(blockers, key=_blocker_sort_key),
        "warnings": sorted(set(warnings), key=utf16_sort_key),
    }
    if plan_artifact is not None:
        payload["planArtifact"] = plan_artifact

    evidence = {"schemaVersion": EVIDENCE_SCHEMA_VERSION, "digest": sha256_digest(payload)}
    evidence.update(payload)
    # The reference parses its own output with the evidence schema; so do we.
    validate(PhaseCapabilityEvidence, evidence, "compiled phase evidence")
    return evidence
