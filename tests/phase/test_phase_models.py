"""Strict contracts: what is rejected, and the path each rejection names."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agentledger.errors import ExitCode, InvalidInput
from agentledger.phase import (
    PhaseCapabilityEvidence,
    PhaseInputError,
    PhaseTransitionIntent,
    compile,
    validate,
)

from .phase_testkit import compiler_input, custom_profile

Mutation = Callable[[dict[str, Any]], None]


def _set(path: Sequence[str | int], value: Any) -> Mutation:
    def mutate(document: dict[str, Any]) -> None:
        node: Any = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def _delete(path: Sequence[str | int]) -> Mutation:
    def mutate(document: dict[str, Any]) -> None:
        node: Any = document
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return mutate


EGRESS = ["sources", "sandbox", "authority", "network.egress"]

REJECTED_INPUTS: list[tuple[str, Mutation, str]] = [
    ("unknown top-level key", _set(["extra"], True), "extra"),
    ("unknown source key", _set(["sources", "sandbox", "note"], "x"), "sources.sandbox.note"),
    ("unknown source", _set(["sources", "network"], {}), "sources.network"),
    ("missing source", _delete(["sources", "toolCatalog"]), "sources.toolCatalog"),
    (
        "unknown dimension",
        _set(["sources", "parent", "authority", "future.unenforced"], ["*"]),
        "sources.parent.authority.future.unenforced",
    ),
    (
        "missing dimension",
        _delete(["sources", "parent", "authority", "network.egress"]),
        "sources.parent.authority.network.egress",
    ),
    (
        "unknown enforcement dimension",
        _set(["sources", "sandbox", "enforcement", "gpu.use"], "enforced"),
        "sources.sandbox.enforcement.gpu.use",
    ),
    (
        "unknown enforcement state",
        _set(["sources", "sandbox", "enforcement", "network.egress"], "partial"),
        "sources.sandbox.enforcement.network.egress",
    ),
    ("wildcard mixed with scopes", _set(EGRESS, ["a.example", "*"]), f"{'.'.join(EGRESS)}[1]"),
    ("duplicate scope", _set(EGRESS, ["a", "b", "a"]), f"{'.'.join(EGRESS)}[2]"),
    ("duplicate after trimming", _set(EGRESS, ["a", " a "]), f"{'.'.join(EGRESS)}[1]"),
    ("control character", _set(EGRESS, ["a", "b", "c\u0007"]), f"{'.'.join(EGRESS)}[2]"),
    ("DEL character", _set(EGRESS, ["c\u007f"]), f"{'.'.join(EGRESS)}[0]"),
    (
        "Python-only whitespace is a control character",
        _set(EGRESS, ["x\u001c"]),
        f"{'.'.join(EGRESS)}[0]",
    ),
    ("empty scope", _set(EGRESS, ["ok", ""]), f"{'.'.join(EGRESS)}[1]"),
    ("blank scope", _set(EGRESS, ["\ufeff \u3000"]), f"{'.'.join(EGRESS)}[0]"),
    ("scope too long", _set(EGRESS, ["x" * 1025]), f"{'.'.join(EGRESS)}[0]"),
    (
        "scope too long in UTF-16 units",
        _set(EGRESS, ["😀" * 513]),
        f"{'.'.join(EGRESS)}[0]",
    ),
    ("too many scopes", _set(EGRESS, [f"s{i}" for i in range(257)]), ".".join(EGRESS)),
    ("scope not a string", _set(EGRESS, [1]), f"{'.'.join(EGRESS)}[0]"),
    ("scopes not a list", _set(EGRESS, "*"), ".".join(EGRESS)),
    ("null scopes", _set(EGRESS, None), ".".join(EGRESS)),
    ("bad identifier", _set(["sources", "sandbox", "id"], "-sandbox"), "sources.sandbox.id"),
    ("identifier with space", _set(["sources", "sandbox", "id"], "a b"), "sources.sandbox.id"),
    ("empty identifier", _set(["sources", "sandbox", "id"], "  "), "sources.sandbox.id"),
    ("identifier too long", _set(["sources", "sandbox", "id"], "a" * 161), "sources.sandbox.id"),
    (
        "non-ASCII letter in identifier",
        _set(["sources", "sandbox", "id"], "ſandbox"),
        "sources.sandbox.id",
    ),
    (
        "U+0085 is not trimmed from an identifier",
        _set(["sources", "sandbox", "id"], "sandbox\u0085"),
        "sources.sandbox.id",
    ),
    (
        "identifier with trailing newline",
        _set(["sources", "sandbox", "id"], "sand\nbox"),
        "sources.sandbox.id",
    ),
    ("wrong kind", _set(["sources", "sandbox", "kind"], "parent"), "sources.sandbox.kind"),
    ("null plan artifact", _set(["planArtifact"], None), "planArtifact"),
    (
        "plan artifact owner",
        _set(["planArtifact"], {"exactPath": "a.md", "owner": "me", "transport": "harness-api"}),
        "planArtifact.owner",
    ),
    (
        "plan artifact extra key",
        _set(
            ["planArtifact"],
            {
                "exactPath": "a.md",
                "owner": "veritas-kanban",
                "transport": "harness-api",
                "shellRedirection": True,
            },
        ),
        "planArtifact.shellRedirection",
    ),
    ("null profile", _set(["profile"], None), "profile"),
    ("profile version as string", _set(["profile", "version"], "1"), "profile.version"),
    ("profile version as boolean", _set(["profile", "version"], True), "profile.version"),
    ("profile version zero", _set(["profile", "version"], 0), "profile.version"),
    ("profile version too big", _set(["profile", "version"], 10001), "profile.version"),
    ("profile version fractional", _set(["profile", "version"], 1.5), "profile.version"),
    ("unknown phase", _set(["profile", "phase"], "deploy"), "profile.phase"),
    ("legacy is not a profile phase", _set(["profile", "phase"], "legacy"), "profile.phase"),
    ("schema version", _set(["profile", "schemaVersion"], "v2"), "profile.schemaVersion"),
    ("blank name", _set(["profile", "name"], " \t "), "profile.name"),
    ("builtIn as string", _set(["profile", "builtIn"], "true"), "profile.builtIn"),
    ("builtIn null", _set(["profile", "builtIn"], None), "profile.builtIn"),
    (
        "unknown required dimension",
        _set(["profile", "requiredDimensions"], ["filesystem.read", "gpu"]),
        "profile.requiredDimensions[1]",
    ),
    (
        "duplicate required dimension",
        _set(["profile", "requiredDimensions"], ["network.egress", "network.egress"]),
        "profile.requiredDimensions[1]",
    ),
    (
        "duplicate approval dimension",
        _set(["profile", "approvalRequiredDimensions"], ["external.action"] * 2),
        "profile.approvalRequiredDimensions[1]",
    ),
    (
        "policy maximumPaths false is not 1",
        _set(["profile", "planArtifactPolicy", "maximumPaths"], False),
        "profile.planArtifactPolicy.maximumPaths",
    ),
    (
        "policy shellRedirection 0 is not false",
        _set(["profile", "planArtifactPolicy", "shellRedirection"], 0),
        "profile.planArtifactPolicy.shellRedirection",
    ),
    (
        "unknown policy mode",
        _set(["profile", "planArtifactPolicy", "mode"], "any-path"),
        "profile.planArtifactPolicy",
    ),
    (
        "exact-path policy without the placeholder scope",
        _set(["profile", "authority", "artifact.plan.write"], ["plans/a.md"]),
        "profile.authority.artifact.plan.write",
    ),
    (
        "exact-path policy with an empty artifact authority",
        _set(["profile", "authority", "artifact.plan.write"], []),
        "profile.authority.artifact.plan.write",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "path"),
    [pytest.param(mutate, path, id=name) for name, mutate, path in REJECTED_INPUTS],
)
def test_invalid_compiler_input_is_rejected_with_its_path(mutate: Mutation, path: str) -> None:
    document = compiler_input("plan", plan_artifact="plans/a.md")
    mutate(document)
    with pytest.raises(PhaseInputError) as raised:
        compile(document)
    assert raised.value.path == path, raised.value.issues
    assert path in str(raised.value) or path == ""
    assert "\n" not in str(raised.value)


def test_phase_input_error_is_invalid_input_with_exit_code_65() -> None:
    with pytest.raises(InvalidInput) as raised:
        compile({"sources": {}})
    assert raised.value.exit_code is ExitCode.INVALID_INPUT
    assert int(raised.value.exit_code) == 65
    assert raised.value.code == "invalid-phase-input"


@pytest.mark.parametrize("document", [[], "input", None, 3])
def test_input_must_be_an_object(document: Any) -> None:
    with pytest.raises(PhaseInputError) as raised:
        compile(document)
    assert raised.value.path == ""


def test_disabled_policy_cannot_grant_artifact_authority() -> None:
    profile = custom_profile({"filesystem.read": ["r"]}, required=[])
    profile["authority"]["artifact.plan.write"] = ["harness-exact-path"]
    with pytest.raises(PhaseInputError) as raised:
        compile(compiler_input(profile=profile))
    assert raised.value.path == "profile.authority.artifact.plan.write"


def test_policy_with_wrong_maximum_paths_for_disabled_mode() -> None:
    profile = custom_profile({"filesystem.read": ["r"]}, required=[])
    profile["planArtifactPolicy"]["maximumPaths"] = 1
    with pytest.raises(PhaseInputError) as raised:
        compile(compiler_input(profile=profile))
    assert raised.value.path == "profile.planArtifactPolicy.maximumPaths"


def test_every_issue_is_reported() -> None:
    document = compiler_input("implement")
    document["sources"]["parent"]["id"] = "!"
    document["sources"]["sandbox"]["authority"]["network.egress"] = ["*", "x"]
    with pytest.raises(PhaseInputError) as raised:
        compile(document)
    paths = {issue.path for issue in raised.value.issues}
    assert paths == {"sources.parent.id", "sources.sandbox.authority.network.egress[0]"}
    assert "(and 1 more)" in str(raised.value)


# --------------------------------------------------------------------------- accepted


def test_integral_number_is_a_javascript_integer() -> None:
    # JSON.parse makes no difference between 2 and 2.0; neither do we.
    profile = custom_profile({"filesystem.read": ["r"]}, required=[])
    profile["version"] = 2.0
    evidence = compile(compiler_input(profile=profile))
    assert evidence["identity"]["profileVersion"] == 2
    assert type(evidence["identity"]["profileVersion"]) is int


def test_scope_limits_count_utf16_units() -> None:
    document = compiler_input("implement")
    document["sources"]["sandbox"]["authority"]["network.egress"] = ["😀" * 512, "x" * 1024]
    evidence = compile(document)
    assert evidence["effectiveAuthority"]["network.egress"] == ["😀" * 512, "x" * 1024]


def test_max_scope_count_is_accepted() -> None:
    document = compiler_input("implement")
    scopes = [f"s{i}" for i in range(256)]
    document["sources"]["sandbox"]["authority"]["network.egress"] = scopes
    assert compile(document)["effectiveAuthority"]["network.egress"] == scopes


def test_identifier_allows_its_whole_alphabet_in_any_case() -> None:
    document = compiler_input("implement")
    document["sources"]["sandbox"]["id"] = " Sandbox.Docker_1:eu/west-2 "
    evidence = compile(document)
    assert evidence["status"] == "allowed"
    document["sources"]["sandbox"]["enforcement"]["network.egress"] = "unsupported"
    evidence = compile(document)
    assert evidence["blockers"][0]["sourceId"] == "Sandbox.Docker_1:eu/west-2"


def test_c1_control_characters_are_allowed_in_scopes() -> None:
    document = compiler_input("implement")
    document["sources"]["sandbox"]["authority"]["network.egress"] = ["nel\u0085", "\u0085"]
    evidence = compile(document)
    assert evidence["effectiveAuthority"]["network.egress"] == ["nel\u0085", "\u0085"]


def test_model_validation_does_not_mutate_the_document() -> None:
    document = compiler_input("plan")
    document["sources"]["sandbox"]["id"] = "  spaced  "
    snapshot = copy.deepcopy(document)
    compile(document)
    assert document == snapshot


# --------------------------------------------------------------------------- intent, evidence


def _intent(**overrides: Any) -> dict[str, Any]:
    intent: dict[str, Any] = {
        "schemaVersion": "phase-transition-intent/v1",
        "from": {
            "mode": "profile",
            "phase": "plan",
            "profileId": "builtin-plan",
            "profileVersion": 1,
        },
        "to": {"mode": "legacy", "phase": "legacy"},
        "actor": " operator:alice ",
        "reason": "The approved plan is ready for implementation.",
        "requestedAt": "2026-07-25T00:00:00.000Z",
    }
    intent.update(overrides)
    return intent


def test_transition_intent_is_accepted_and_trimmed() -> None:
    intent = validate(PhaseTransitionIntent, _intent(parentEvidenceDigest="sha256:" + "0" * 64))
    assert intent.actor == "operator:alice"
    assert intent.from_.phase == "plan"
    assert intent.to.mode == "legacy"


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({"requestedAt": "2026-07-25 00:00:00Z"}, "requestedAt"),
        ({"requestedAt": "2026-07-25T00:00:00"}, "requestedAt"),
        ({"requestedAt": "2026-02-30T00:00:00Z"}, "requestedAt"),
        ({"requestedAt": "2026-07-25T24:00:00Z"}, "requestedAt"),
        ({"parentEvidenceDigest": "sha256:ABC"}, "parentEvidenceDigest"),
        ({"parentEvidenceDigest": None}, "parentEvidenceDigest"),
        ({"to": {"mode": "legacy", "phase": "plan"}}, "to.phase"),
        ({"to": {"mode": "legacy", "phase": "legacy", "profileId": "x"}}, "to.profileId"),
        ({"from": {"mode": "profile", "phase": "plan"}}, "from.profileId"),
        ({"actor": " "}, "actor"),
        ({"actor": "a" * 241}, "actor"),
        ({"note": "x"}, "note"),
    ],
)
def test_invalid_transition_intent_names_its_path(overrides: dict[str, Any], path: str) -> None:
    with pytest.raises(PhaseInputError) as raised:
        validate(PhaseTransitionIntent, _intent(**overrides))
    assert raised.value.path == path


@pytest.mark.parametrize(
    "timestamp",
    ["2026-07-25T00:00:00Z", "2026-07-25T00:00:00.123456+02:00", "2028-02-29T23:59:59-0530"],
)
def test_transition_intent_accepts_offset_datetimes(timestamp: str) -> None:
    validate(PhaseTransitionIntent, _intent(requestedAt=timestamp))


def test_compiled_evidence_validates_and_tampering_is_caught() -> None:
    evidence = compile(compiler_input("plan", plan_artifact="plans/a.md"))
    validate(PhaseCapabilityEvidence, evidence)
    for key, value, path in [
        ("status", "granted", "status"),
        ("digest", "sha256:xyz", "digest"),
        ("planArtifact", {**evidence["planArtifact"], "exactPath": "../a.md"}, "planArtifact"),
        ("surprise", 1, "surprise"),
    ]:
        tampered = copy.deepcopy(evidence)
        tampered[key] = value
        with pytest.raises(PhaseInputError) as raised:
            validate(PhaseCapabilityEvidence, tampered)
        assert raised.value.path.startswith(path)


def test_json_schemas_state_the_limits_and_no_nulls() -> None:
    from agentledger.phase import json_schema

    profile = json_schema("profile")
    assert profile["properties"]["version"] == {
        "maximum": 10000,
        "minimum": 1,
        "title": "Version",
        "type": "integer",
    }
    assert profile["properties"]["builtIn"]["type"] == "boolean"
    assert "anyOf" not in profile["properties"]["builtIn"]
    compiler = json_schema("input")
    assert compiler["properties"]["planArtifact"] == {"$ref": "#/$defs/PlanArtifactRequest"}
    assert compiler["required"] == ["sources"]
    scopes = compiler["$defs"]["PhaseAuthority"]["properties"]["network.egress"]
    assert scopes["maxItems"] == 256 and scopes["uniqueItems"] is True
    assert scopes["items"]["maxLength"] == 1024
