"""Builders for compiler inputs, shared by the phase tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from agentledger.phase import DIMENSIONS, builtin_profile

FIXTURES = Path(__file__).parent / "fixtures"

SOURCE_KINDS: dict[str, str] = {
    "parent": "parent",
    "agentProfile": "agent-profile",
    "sandbox": "sandbox",
    "toolCatalog": "tool-catalog",
    "launchPolicy": "launch-policy",
}
# Distinct ids per source, so a limiting source is identifiable in assertions.
SOURCE_IDS: dict[str, str] = {
    "parent": "run:parent",
    "agentProfile": "agent:coder",
    "sandbox": "sandbox:local",
    "toolCatalog": "tools:standard",
    "launchPolicy": "launch:default",
}


def source(
    key: str,
    scopes: dict[str, list[str]] | None = None,
    enforcement: dict[str, str] | None = None,
    source_id: str | None = None,
) -> dict[str, Any]:
    """A source that allows ``*`` and enforces everything unless told otherwise."""
    scopes = scopes or {}
    enforcement = enforcement or {}
    return {
        "id": source_id if source_id is not None else SOURCE_IDS[key],
        "kind": SOURCE_KINDS[key],
        "authority": {d: list(scopes.get(d, ["*"])) for d in DIMENSIONS},
        "enforcement": {d: enforcement.get(d, "enforced") for d in DIMENSIONS},
    }


def compiler_input(
    phase: str | None = None,
    *,
    profile: dict[str, Any] | None = None,
    plan_artifact: str | None = None,
    **sources: Any,
) -> dict[str, Any]:
    """A compiler input: a built-in ``phase`` (or ``profile``; neither means legacy)."""
    document: dict[str, Any] = {}
    if profile is not None:
        document["profile"] = copy.deepcopy(profile)
    elif phase is not None:
        document["profile"] = builtin_profile(phase)
    document["sources"] = {key: sources.get(key) or source(key) for key in SOURCE_KINDS}
    if plan_artifact is not None:
        document["planArtifact"] = {
            "exactPath": plan_artifact,
            "owner": "veritas-kanban",
            "transport": "harness-api",
        }
    return document


def custom_profile(
    authority: dict[str, list[str]],
    *,
    required: list[str],
    approval: list[str] | None = None,
    exact_path_policy: bool = False,
    phase: str = "implement",
) -> dict[str, Any]:
    """A workspace-defined profile (not built-in) with chosen required dimensions."""
    full = {d: list(authority.get(d, [])) for d in DIMENSIONS}
    if exact_path_policy:
        full["artifact.plan.write"] = ["harness-exact-path"]
    return {
        "schemaVersion": "phase-capability-profile/v1",
        "id": "team:custom",
        "version": 2,
        "phase": phase,
        "name": "Custom",
        "description": "A workspace-defined profile for tests.",
        "authority": full,
        "requiredDimensions": required,
        "approvalRequiredDimensions": approval or [],
        "planArtifactPolicy": {
            "mode": "harness-exact-path" if exact_path_policy else "disabled",
            "owner": "veritas-kanban",
            "maximumPaths": 1 if exact_path_policy else 0,
            "transport": "harness-api",
            "shellRedirection": False,
            "indirectWrites": False,
        },
    }


def evaluation(evidence: dict[str, Any], dimension: str) -> dict[str, Any]:
    matches = [e for e in evidence["evaluations"] if e["dimension"] == dimension]
    assert len(matches) == 1
    result: dict[str, Any] = matches[0]
    return result


def load_fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))
