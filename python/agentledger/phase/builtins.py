"""The five built-in phase profiles (version 1, every dimension required).

``<workspace>`` is an opaque literal scope token, never resolved to a path: only a source
that lists the same token (or ``*``) lets it through.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from agentledger.phase.models import (
    DIMENSIONS,
    PHASE_NAMES,
    PROFILE_SCHEMA_VERSION,
    Dimension,
    PhaseCapabilityProfile,
    PhaseName,
    validate,
)

__all__ = ["WORKSPACE_SCOPE", "builtin_profile", "builtin_profiles"]

WORKSPACE_SCOPE: Final = "<workspace>"


def _policy(mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "owner": "veritas-kanban",
        "maximumPaths": 1 if mode == "harness-exact-path" else 0,
        "transport": "harness-api",
        "shellRedirection": False,
        "indirectWrites": False,
    }


def _profile(
    phase: PhaseName,
    description: str,
    authority: dict[Dimension, list[str]],
    *,
    approval_required: tuple[Dimension, ...] = (),
    plan_artifact_mode: str = "disabled",
) -> dict[str, Any]:
    return {
        "schemaVersion": PROFILE_SCHEMA_VERSION,
        "id": f"builtin-{phase}",
        "version": 1,
        "phase": phase,
        "name": phase.capitalize(),
        "description": description,
        "builtIn": True,
        "authority": {dimension: list(authority.get(dimension, [])) for dimension in DIMENSIONS},
        "requiredDimensions": list(DIMENSIONS),
        "approvalRequiredDimensions": list(approval_required),
        "planArtifactPolicy": _policy(plan_artifact_mode),
    }


_WS = [WORKSPACE_SCOPE]

_PROFILES: Final[dict[PhaseName, dict[str, Any]]] = {
    "explore": _profile(
        "explore",
        "Inspect the workspace without mutation, task credentials, or external changes.",
        {
            "filesystem.read": _WS,
            "command.execute": ["inspect"],
            "external.action": ["read"],
        },
    ),
    "plan": _profile(
        "plan",
        "Inspect and plan without general workspace mutation; an optional plan artifact uses "
        "one harness-owned path.",
        {
            "filesystem.read": _WS,
            "command.execute": ["inspect"],
            "external.action": ["read"],
            "artifact.plan.write": ["harness-exact-path"],
        },
        plan_artifact_mode="harness-exact-path",
    ),
    "implement": _profile(
        "implement",
        "Modify the workspace and run implementation commands without publishing external changes.",
        {
            "filesystem.read": _WS,
            "filesystem.write": _WS,
            "command.execute": ["inspect", "build", "test", "format", "mutate"],
            "network.egress": ["*"],
            "credential.access": ["*"],
            "external.action": ["read"],
        },
    ),
    "verify": _profile(
        "verify",
        "Run bounded build and test commands while keeping credentials and external mutations "
        "disabled.",
        {
            "filesystem.read": _WS,
            "filesystem.write": _WS,
            "command.execute": ["inspect", "build", "test"],
            "network.egress": ["*"],
            "external.action": ["read"],
        },
    ),
    "publish": _profile(
        "publish",
        "Allow separately bounded workspace, command, network, credential, and external "
        "publication authority.",
        {
            "filesystem.read": _WS,
            "filesystem.write": _WS,
            "command.execute": ["inspect", "build", "test", "publish"],
            "network.egress": ["*"],
            "credential.access": ["*"],
            "external.action": ["read", "mutate"],
        },
        approval_required=("credential.access", "external.action"),
    ),
}

# The built-ins are contracts like any other: fail at import if one is not.
for _profile_document in _PROFILES.values():
    validate(PhaseCapabilityProfile, _profile_document, "built-in profile")
assert tuple(_PROFILES) == PHASE_NAMES


def builtin_profiles() -> list[dict[str, Any]]:
    """Every built-in profile, in phase order (explore, plan, implement, verify, publish)."""
    return [copy.deepcopy(profile) for profile in _PROFILES.values()]


def builtin_profile(phase: str) -> dict[str, Any]:
    """The built-in profile of ``phase`` (a fresh copy); ``KeyError`` for an unknown phase."""
    for name, profile in _PROFILES.items():
        if name == phase:
            return copy.deepcopy(profile)
    raise KeyError(f"unknown built-in phase {phase!r}; expected one of {', '.join(_PROFILES)}")
