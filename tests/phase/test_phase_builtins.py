"""The five built-in profiles, and what each compiles to when no source narrows it."""

from __future__ import annotations

import pytest

from agentledger.phase import (
    DIMENSIONS,
    PHASE_NAMES,
    PhaseCapabilityProfile,
    builtin_profile,
    builtin_profiles,
    compile,
    validate,
)

from .phase_testkit import compiler_input

WS = ["<workspace>"]

# PHASE-NOTES.md's table, restated independently of the implementation.
EXPECTED_AUTHORITY: dict[str, dict[str, list[str]]] = {
    "explore": {
        "filesystem.read": WS,
        "filesystem.write": [],
        "command.execute": ["inspect"],
        "network.egress": [],
        "credential.access": [],
        "external.action": ["read"],
        "artifact.plan.write": [],
    },
    "plan": {
        "filesystem.read": WS,
        "filesystem.write": [],
        "command.execute": ["inspect"],
        "network.egress": [],
        "credential.access": [],
        "external.action": ["read"],
        "artifact.plan.write": ["harness-exact-path"],
    },
    "implement": {
        "filesystem.read": WS,
        "filesystem.write": WS,
        "command.execute": ["inspect", "build", "test", "format", "mutate"],
        "network.egress": ["*"],
        "credential.access": ["*"],
        "external.action": ["read"],
        "artifact.plan.write": [],
    },
    "verify": {
        "filesystem.read": WS,
        "filesystem.write": WS,
        "command.execute": ["inspect", "build", "test"],
        "network.egress": ["*"],
        "credential.access": [],
        "external.action": ["read"],
        "artifact.plan.write": [],
    },
    "publish": {
        "filesystem.read": WS,
        "filesystem.write": WS,
        "command.execute": ["inspect", "build", "test", "publish"],
        "network.egress": ["*"],
        "credential.access": ["*"],
        "external.action": ["read", "mutate"],
        "artifact.plan.write": [],
    },
}


def test_builtins_are_listed_in_phase_order() -> None:
    assert [p["phase"] for p in builtin_profiles()] == [
        "explore",
        "plan",
        "implement",
        "verify",
        "publish",
    ]
    assert PHASE_NAMES == ("explore", "plan", "implement", "verify", "publish")


@pytest.mark.parametrize("phase", list(EXPECTED_AUTHORITY))
def test_builtin_profile_matches_the_contract(phase: str) -> None:
    profile = builtin_profile(phase)
    validate(PhaseCapabilityProfile, profile)
    assert profile["schemaVersion"] == "phase-capability-profile/v1"
    assert profile["id"] == f"builtin-{phase}"
    assert profile["name"] == phase.capitalize()
    assert profile["version"] == 1
    assert profile["builtIn"] is True
    assert profile["authority"] == EXPECTED_AUTHORITY[phase]
    assert profile["requiredDimensions"] == list(DIMENSIONS)
    expected_approval = ["credential.access", "external.action"] if phase == "publish" else []
    assert profile["approvalRequiredDimensions"] == expected_approval
    policy = profile["planArtifactPolicy"]
    assert policy["mode"] == ("harness-exact-path" if phase == "plan" else "disabled")
    assert policy["maximumPaths"] == (1 if phase == "plan" else 0)
    assert policy["shellRedirection"] is False and policy["indirectWrites"] is False


def test_builtin_profiles_are_fresh_copies() -> None:
    first = builtin_profile("implement")
    first["authority"]["command.execute"].append("anything")
    assert "anything" not in builtin_profile("implement")["authority"]["command.execute"]


def test_unknown_builtin_phase_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        builtin_profile("legacy")


@pytest.mark.parametrize("phase", list(EXPECTED_AUTHORITY))
def test_each_builtin_phase_compiles_to_its_own_authority_under_wildcard_sources(
    phase: str,
) -> None:
    evidence = compile(compiler_input(phase))
    expected = dict(EXPECTED_AUTHORITY[phase])
    expected["artifact.plan.write"] = []  # no plan artifact requested, even for plan
    assert evidence["status"] == "allowed"
    assert evidence["identity"] == {
        "mode": "profile",
        "phase": phase,
        "profileId": f"builtin-{phase}",
        "profileVersion": 1,
    }
    assert evidence["requestedAuthority"] == expected
    assert evidence["effectiveAuthority"] == expected
    assert evidence["requiredDimensions"] == list(DIMENSIONS)
    assert evidence["blockers"] == []
    assert evidence["warnings"] == []
    assert "planArtifact" not in evidence
    assert all(e["limitingSourceIds"] == [] for e in evidence["evaluations"])


@pytest.mark.parametrize("phase", ["explore", "plan"])
def test_explore_and_plan_grant_no_write_credentials_or_mutation(phase: str) -> None:
    effective = compile(compiler_input(phase))["effectiveAuthority"]
    assert effective["filesystem.write"] == []
    assert effective["credential.access"] == []
    assert "mutate" not in effective["external.action"]
    assert effective["artifact.plan.write"] == []


def test_only_publish_mutates_externally_and_needs_approval() -> None:
    for phase in ("implement", "verify"):
        assert (
            "mutate" not in compile(compiler_input(phase))["effectiveAuthority"]["external.action"]
        )
    publish = compile(compiler_input("publish"))
    assert publish["effectiveAuthority"]["external.action"] == ["read", "mutate"]
    assert publish["approvalRequiredDimensions"] == ["credential.access", "external.action"]
    assert compile(compiler_input("verify"))["effectiveAuthority"]["credential.access"] == []
