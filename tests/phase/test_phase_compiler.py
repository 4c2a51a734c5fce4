"""The compiler's rules: intersection, enforcement, blockers, warnings, status, ordering, purity."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agentledger.phase import (
    DIMENSIONS,
    LEGACY_WARNING,
    compile,
    evidence_digest,
    intersect_scopes,
)

from .phase_testkit import (
    SOURCE_IDS,
    SOURCE_KINDS,
    compiler_input,
    custom_profile,
    evaluation,
    source,
)


def optional_warning(dimension: str) -> str:
    return f"Optional {dimension} authority was removed by the effective intersection."


# --------------------------------------------------------------------------- intersection


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ([], ["*"], []),
        (["*"], [], []),
        (["*"], ["*"], ["*"]),
        (["*"], ["b", "a"], ["b", "a"]),
        (["b", "a"], ["*"], ["b", "a"]),
        (["c", "b", "a"], ["a", "c"], ["c", "a"]),  # left's order is kept
        (["a"], ["b"], []),
        (["A"], ["a"], []),  # exact strings: no case folding
        (["src"], ["src/"], []),  # no path ancestry
    ],
)
def test_intersection_is_exact_and_never_widens(
    left: list[str], right: list[str], expected: list[str]
) -> None:
    assert intersect_scopes(left, right) == expected


# --------------------------------------------------------------------------- legacy


def test_legacy_mode_requests_wildcards_and_warns() -> None:
    evidence = compile(compiler_input())
    assert evidence["identity"] == {"mode": "legacy", "phase": "legacy"}
    assert evidence["requestedAuthority"] == {
        d: ([] if d == "artifact.plan.write" else ["*"]) for d in DIMENSIONS
    }
    assert evidence["effectiveAuthority"] == evidence["requestedAuthority"]
    assert evidence["requiredDimensions"] == []
    assert evidence["approvalRequiredDimensions"] == []
    assert evidence["warnings"] == [LEGACY_WARNING]
    assert evidence["status"] == "allowed"


def test_legacy_mode_keeps_existing_policies_authoritative() -> None:
    document = compiler_input(
        parent=source("parent", {"filesystem.write": ["<workspace>"]}),
        launchPolicy=source("launchPolicy", {"filesystem.write": ["<workspace>", "/tmp"]}),
    )
    evidence = compile(document)
    assert evidence["effectiveAuthority"]["filesystem.write"] == ["<workspace>"]
    assert evaluation(evidence, "filesystem.write")["limitingSourceIds"] == ["run:parent"]
    assert evidence["status"] == "narrowed"
    assert LEGACY_WARNING in evidence["warnings"]


def test_legacy_unenforced_dimension_is_removed_with_a_warning_not_a_blocker() -> None:
    document = compiler_input(
        sandbox=source("sandbox", enforcement={"network.egress": "unsupported"}),
    )
    evidence = compile(document)
    assert evidence["blockers"] == []
    assert evidence["effectiveAuthority"]["network.egress"] == []
    assert evidence["warnings"] == [LEGACY_WARNING, optional_warning("network.egress")]
    assert evidence["status"] == "narrowed"


def test_legacy_mode_cannot_request_a_plan_artifact() -> None:
    evidence = compile(compiler_input(plan_artifact="plans/task.md"))
    assert evidence["status"] == "blocked"
    assert evidence["blockers"] == [
        {
            "code": "plan-artifact-not-allowed",
            "message": "The selected phase profile does not allow a plan-artifact exception.",
            "dimension": "artifact.plan.write",
        }
    ]
    artifact = evaluation(evidence, "artifact.plan.write")
    assert artifact["requestedScopes"] == [] and artifact["effectiveScopes"] == []
    assert artifact["limitingSourceIds"] == ["phase-compiler"]


# --------------------------------------------------------------------------- narrowing


@pytest.mark.parametrize("source_key", list(SOURCE_KINDS))
def test_each_source_narrows_and_is_recorded_as_limiting(source_key: str) -> None:
    narrowing = source(source_key, {"command.execute": ["test", "inspect", "deploy"]})
    overrides: dict[str, Any] = {source_key: narrowing}
    evidence = compile(compiler_input("implement", **overrides))
    assert evidence["status"] == "narrowed"
    # the profile's order survives: inspect before test
    assert evidence["effectiveAuthority"]["command.execute"] == ["inspect", "test"]
    assert evaluation(evidence, "command.execute")["limitingSourceIds"] == [SOURCE_IDS[source_key]]
    assert evidence["blockers"] == []


def test_every_source_narrows_monotonically() -> None:
    document = compiler_input(
        "implement",
        parent=source("parent", {"command.execute": ["inspect", "test", "build"]}),
        agentProfile=source("agentProfile", {"command.execute": ["test", "inspect"]}),
        sandbox=source("sandbox", {"network.egress": ["registry.npmjs.org"]}),
        toolCatalog=source("toolCatalog", {"command.execute": ["inspect", "test"]}),
        launchPolicy=source("launchPolicy", {"credential.access": ["npm-publish"]}),
    )
    evidence = compile(document)
    assert evidence["effectiveAuthority"]["command.execute"] == ["inspect", "test"]
    assert evidence["effectiveAuthority"]["network.egress"] == ["registry.npmjs.org"]
    assert evidence["effectiveAuthority"]["credential.access"] == ["npm-publish"]
    # toolCatalog changed nothing (already narrowed to inspect, test): not limiting
    assert evaluation(evidence, "command.execute")["limitingSourceIds"] == [
        "agent:coder",
        "run:parent",
    ]
    for dimension in DIMENSIONS:
        parent_scopes = document["sources"]["parent"]["authority"][dimension]
        effective = evidence["effectiveAuthority"][dimension]
        assert parent_scopes == ["*"] or set(effective) <= set(parent_scopes)


def test_a_wildcard_request_takes_the_sources_exact_scopes() -> None:
    document = compiler_input(
        "implement", sandbox=source("sandbox", {"network.egress": ["b.example", "a.example"]})
    )
    evidence = compile(document)
    assert evidence["effectiveAuthority"]["network.egress"] == ["b.example", "a.example"]
    assert evidence["requestedAuthority"]["network.egress"] == ["*"]
    assert evidence["status"] == "narrowed"


def test_limiting_source_ids_are_unique_and_sorted_by_code_unit() -> None:
    document = compiler_input(
        "implement",
        parent=source(
            "parent", {"command.execute": ["inspect", "test", "build"]}, source_id="b-src"
        ),
        sandbox=source("sandbox", {"command.execute": ["inspect", "test"]}, source_id="B-src"),
        launchPolicy=source("launchPolicy", {"command.execute": ["inspect"]}, source_id="b-src"),
        toolCatalog=source(
            "toolCatalog", enforcement={"network.egress": "unsupported"}, source_id="a.src"
        ),
    )
    evidence = compile(document)
    assert evidence["effectiveAuthority"]["command.execute"] == ["inspect"]
    assert evaluation(evidence, "command.execute")["limitingSourceIds"] == ["B-src", "b-src"]
    # after an unenforced source empties the dimension, later sources change nothing
    assert evaluation(evidence, "network.egress")["limitingSourceIds"] == ["a.src"]


# --------------------------------------------------------------------------- enforcement


@pytest.mark.parametrize(
    ("state", "code", "message"),
    [
        (
            "unsupported",
            "required-authority-unsupported",
            "tools:standard does not support required external.action enforcement.",
        ),
        (
            "unenforceable",
            "required-authority-unenforceable",
            "tools:standard cannot enforce required external.action authority.",
        ),
    ],
)
def test_required_dimension_that_a_source_cannot_enforce_blocks(
    state: str, code: str, message: str
) -> None:
    document = compiler_input(
        "explore", toolCatalog=source("toolCatalog", enforcement={"external.action": state})
    )
    evidence = compile(document)
    assert evidence["status"] == "blocked"
    assert evidence["blockers"] == [
        {
            "code": code,
            "message": message,
            "dimension": "external.action",
            "sourceId": "tools:standard",
        }
    ]
    assert evidence["effectiveAuthority"]["external.action"] == []
    assert evaluation(evidence, "external.action")["limitingSourceIds"] == ["tools:standard"]
    assert evidence["warnings"] == []


@pytest.mark.parametrize("state", ["unsupported", "unenforceable"])
def test_required_dimension_blocks_even_when_nothing_was_requested(state: str) -> None:
    # explore requests nothing for filesystem.write, but requires it to be enforceable
    document = compiler_input(
        "explore", sandbox=source("sandbox", enforcement={"filesystem.write": state})
    )
    evidence = compile(document)
    assert evidence["status"] == "blocked"
    assert [(b["code"], b["dimension"], b["sourceId"]) for b in evidence["blockers"]] == [
        (f"required-authority-{state}", "filesystem.write", "sandbox:local")
    ]


@pytest.mark.parametrize("state", ["unsupported", "unenforceable"])
def test_optional_dimension_that_a_source_cannot_enforce_is_removed_with_a_warning(
    state: str,
) -> None:
    profile = custom_profile(
        {"filesystem.read": ["<workspace>"], "network.egress": ["api.example"]},
        required=["filesystem.read"],
    )
    document = compiler_input(
        profile=profile, launchPolicy=source("launchPolicy", enforcement={"network.egress": state})
    )
    evidence = compile(document)
    assert evidence["blockers"] == []
    assert evidence["effectiveAuthority"]["network.egress"] == []
    assert evaluation(evidence, "network.egress")["limitingSourceIds"] == ["launch:default"]
    assert evidence["warnings"] == [optional_warning("network.egress")]
    assert evidence["status"] == "narrowed"


def test_optional_unenforced_dimension_with_nothing_requested_is_silent() -> None:
    profile = custom_profile({"filesystem.read": ["<workspace>"]}, required=["filesystem.read"])
    document = compiler_input(
        profile=profile, sandbox=source("sandbox", enforcement={"credential.access": "unsupported"})
    )
    evidence = compile(document)
    assert evidence["warnings"] == []
    assert evidence["blockers"] == []
    assert evaluation(evidence, "credential.access")["limitingSourceIds"] == ["sandbox:local"]
    assert evidence["status"] == "allowed"


def test_an_unenforced_source_empties_the_dimension_for_every_later_source() -> None:
    document = compiler_input(
        "implement",
        agentProfile=source("agentProfile", enforcement={"network.egress": "unsupported"}),
        sandbox=source("sandbox", {"network.egress": ["*"]}),
    )
    evidence = compile(document)
    assert evidence["effectiveAuthority"]["network.egress"] == []
    # the later sources leave [] as it is, so only the unenforced source is limiting
    assert evaluation(evidence, "network.egress")["limitingSourceIds"] == ["agent:coder"]


# --------------------------------------------------------------------------- denial


def test_required_dimension_denied_by_an_enforced_source_blocks_without_source_id() -> None:
    document = compiler_input("implement", parent=source("parent", {"filesystem.write": []}))
    evidence = compile(document)
    assert evidence["status"] == "blocked"
    assert evidence["blockers"] == [
        {
            "code": "required-authority-denied",
            "message": "The authority intersection denies every requested filesystem.write scope.",
            "dimension": "filesystem.write",
        }
    ]
    assert "sourceId" not in evidence["blockers"][0]


def test_required_dimension_denied_by_disjoint_scopes_blocks() -> None:
    document = compiler_input(
        "verify", toolCatalog=source("toolCatalog", {"command.execute": ["deploy"]})
    )
    evidence = compile(document)
    assert [b["code"] for b in evidence["blockers"]] == ["required-authority-denied"]
    assert evidence["blockers"][0]["dimension"] == "command.execute"


def test_enforcement_blocker_replaces_the_denied_blocker_on_the_same_dimension() -> None:
    document = compiler_input(
        "implement",
        parent=source("parent", {"filesystem.write": []}),
        sandbox=source("sandbox", enforcement={"filesystem.write": "unenforceable"}),
    )
    evidence = compile(document)
    assert [b["code"] for b in evidence["blockers"]] == ["required-authority-unenforceable"]


def test_optional_dimension_denied_is_a_warning() -> None:
    profile = custom_profile(
        {"filesystem.read": ["<workspace>"], "external.action": ["read"]},
        required=["filesystem.read"],
    )
    document = compiler_input(
        profile=profile, parent=source("parent", {"external.action": ["write"]})
    )
    evidence = compile(document)
    assert evidence["status"] == "narrowed"
    assert evidence["blockers"] == []
    assert evidence["warnings"] == [optional_warning("external.action")]


def test_required_dimension_with_nothing_requested_is_not_denied() -> None:
    # explore requires credential.access but asks for nothing: [] -> [] is not a denial
    document = compiler_input("explore", parent=source("parent", {"credential.access": []}))
    evidence = compile(document)
    assert evidence["status"] == "allowed"
    assert evidence["blockers"] == []


# --------------------------------------------------------------------------- ordering


def test_blockers_sort_by_dimension_then_source_with_locale_collation() -> None:
    ids = ["sandbox.x", "Sandbox-X", "sandbox:x", "sandbox_x", "sandbox-x"]
    sources: dict[str, Any] = {
        key: source(key, enforcement={"command.execute": "unsupported"}, source_id=source_id)
        for key, source_id in zip(SOURCE_KINDS, ids, strict=True)
    }
    sources["parent"]["enforcement"]["filesystem.read"] = "unenforceable"
    evidence = compile(compiler_input("explore", **sources))
    order = [(b["dimension"], b["sourceId"]) for b in evidence["blockers"]]
    # Dimensions compare by localeCompare too: command.execute < filesystem.read.
    assert order == [
        ("command.execute", "sandbox_x"),
        ("command.execute", "sandbox-x"),
        ("command.execute", "Sandbox-X"),
        ("command.execute", "sandbox:x"),
        ("command.execute", "sandbox.x"),
        ("filesystem.read", "sandbox.x"),
    ]
    # ...while limiting sources are in code-unit order.
    assert evaluation(evidence, "command.execute")["limitingSourceIds"] == [
        "Sandbox-X",
        "sandbox-x",
        "sandbox.x",
        "sandbox:x",
        "sandbox_x",
    ]


def test_blockers_without_source_sort_before_those_with_one_on_the_same_dimension() -> None:
    ids = ["a-b", "ab", "Ab", "a.b", "aB"]
    sources: dict[str, Any] = {
        key: source(key, enforcement={"command.execute": "unsupported"}, source_id=source_id)
        for key, source_id in zip(SOURCE_KINDS, ids, strict=True)
    }
    evidence = compile(compiler_input("plan", plan_artifact="../escape.md", **sources))
    assert [(b["dimension"], b.get("sourceId"), b["code"]) for b in evidence["blockers"]] == [
        ("artifact.plan.write", None, "plan-artifact-path-invalid"),
        ("command.execute", "a-b", "required-authority-unsupported"),
        ("command.execute", "a.b", "required-authority-unsupported"),
        ("command.execute", "ab", "required-authority-unsupported"),
        ("command.execute", "aB", "required-authority-unsupported"),
        ("command.execute", "Ab", "required-authority-unsupported"),
    ]


def test_warnings_are_unique_and_sorted_by_code_unit() -> None:
    profile = custom_profile(
        {"network.egress": ["a"], "credential.access": ["k"], "external.action": ["read"]},
        required=[],
    )
    document = compiler_input(
        profile=profile,
        parent=source("parent", {"network.egress": [], "credential.access": []}),
        sandbox=source("sandbox", enforcement={"external.action": "unsupported"}),
    )
    evidence = compile(document)
    assert evidence["warnings"] == [
        optional_warning("credential.access"),
        optional_warning("external.action"),
        optional_warning("network.egress"),
    ]


def test_output_lists_follow_the_canonical_dimension_order() -> None:
    profile = custom_profile(
        {"filesystem.read": ["r"], "network.egress": ["n"]},
        required=["network.egress", "filesystem.read"],
        approval=["external.action", "filesystem.write"],
    )
    evidence = compile(compiler_input(profile=profile))
    assert [e["dimension"] for e in evidence["evaluations"]] == list(DIMENSIONS)
    assert evidence["requiredDimensions"] == ["filesystem.read", "network.egress"]
    assert evidence["approvalRequiredDimensions"] == ["filesystem.write", "external.action"]
    assert list(evidence["requestedAuthority"]) == list(DIMENSIONS)
    assert list(evidence["effectiveAuthority"]) == list(DIMENSIONS)


def test_sources_fold_in_fixed_order_whatever_order_the_input_lists_them() -> None:
    document = compiler_input(
        "implement",
        parent=source("parent", {"command.execute": ["inspect", "test"]}),
        launchPolicy=source("launchPolicy", {"command.execute": ["test"]}),
    )
    reordered = dict(document)
    reordered["sources"] = dict(reversed(list(document["sources"].items())))
    assert compile(reordered) == compile(document)


# --------------------------------------------------------------------------- purity


def test_compile_is_pure_and_does_not_touch_its_input() -> None:
    document = compiler_input(
        "plan",
        plan_artifact="plans/task.md",
        sandbox=source("sandbox", {"command.execute": ["inspect"]}, source_id="  padded-id  "),
    )
    snapshot = copy.deepcopy(document)
    first = compile(document)
    second = compile(document)
    assert document == snapshot
    assert first == second
    assert first is not second
    first["effectiveAuthority"]["command.execute"].append("mutate")
    assert compile(document) == second


def test_compile_output_is_plain_json() -> None:
    evidence = compile(compiler_input("plan", plan_artifact="plans/task.md"))
    assert json.loads(json.dumps(evidence)) == evidence


def test_trimmed_values_are_what_the_evidence_records() -> None:
    document = compiler_input(
        "implement",
        sandbox=source(
            "sandbox",
            {"command.execute": ["\ufeffinspect", " test\u2028", "build\u0085"]},
            source_id="\u00a0sandbox:local\ufeff",
        ),
    )
    evidence = compile(document)
    # U+FEFF, NBSP and U+2028 are JavaScript whitespace; U+0085 is not.
    assert evidence["effectiveAuthority"]["command.execute"] == ["inspect", "test"]
    assert evaluation(evidence, "command.execute")["limitingSourceIds"] == ["sandbox:local"]


def test_digest_covers_the_evidence() -> None:
    evidence = compile(compiler_input("verify"))
    assert evidence["digest"] == evidence_digest(evidence)
    narrowed = compile(compiler_input("verify", parent=source("parent", {"network.egress": []})))
    assert narrowed["digest"] != evidence["digest"]


def _status(document: dict[str, Any]) -> str:
    status: str = compile(document)["status"]
    return status


def test_status_is_blocked_over_narrowed_over_allowed() -> None:
    assert _status(compiler_input("implement")) == "allowed"
    narrowing = source("sandbox", {"network.egress": ["pypi.org"]})
    assert _status(compiler_input("implement", sandbox=narrowing)) == "narrowed"
    denying = source("parent", {"filesystem.read": []})
    assert _status(compiler_input("implement", sandbox=narrowing, parent=denying)) == "blocked"
