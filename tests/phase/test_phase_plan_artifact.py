"""The plan-artifact exception: one exact path, for a harness-exact-path profile only."""

from __future__ import annotations

import pytest

from agentledger.phase import DIMENSIONS, PhaseInputError, compile, is_safe_plan_artifact_path
from agentledger.phase.plan_artifact import unsafe_plan_artifact_reason

from .phase_testkit import compiler_input, custom_profile, evaluation, source

PATH = ".agentledger/plans/task-5.md"

UNSAFE_PATHS = [
    # leading/trailing whitespace, as JavaScript's trim sees it
    (" plans/a.md", "leading or trailing whitespace"),
    ("plans/a.md ", "leading or trailing whitespace"),
    ("\ufeffplans/a.md", "leading or trailing whitespace"),
    ("plans/a.md\u2028", "leading or trailing whitespace"),
    ("\u00a0plans/a.md", "leading or trailing whitespace"),
    ("\tplans/a.md", "leading or trailing whitespace"),
    # absolute
    ("/tmp/plan.md", "absolute path"),
    ("//server/share/plan.md", "absolute path"),
    # drive letter, and any letter followed by a colon
    ("C:/tmp/plan.md", "drive-letter prefix"),
    ("c:plan.md", "drive-letter prefix"),
    ("a:b", "drive-letter prefix"),
    # backslash
    ("plans\\plan.md", "backslash"),
    # control characters (C0 and DEL)
    ("plans/a\u0001.md", "control character"),
    ("plans/a\u007f.md", "control character"),
    ("plans/a\n.md", "control character"),
    # shell syntax
    ("plans/plan.md;touch-pwned", "shell syntax"),
    ("plans/$OUTPUT", "shell syntax"),
    ("plans/a|b.md", "shell syntax"),
    ("plans/a&b.md", "shell syntax"),
    ("plans/a>b.md", "shell syntax"),
    ("plans/a<b.md", "shell syntax"),
    ("plans/`id`.md", "shell syntax"),
    # empty, "." and ".." segments; never normalised into something acceptable
    ("plans//plan.md", "empty segment"),
    ("plans/", "empty segment"),
    ("../plan.md", "dot segment"),
    ("plans/../plan.md", "dot segment"),
    ("./plan.md", "dot segment"),
    ("plans/./plan.md", "dot segment"),
    (".", "dot segment"),
    ("..", "dot segment"),
]

SAFE_PATHS = [
    PATH,
    "plan.md",
    "plans/a b.md",  # inner spaces are not trimmed away and are allowed
    "plans/ä/ü.md",
    "plans/1:2.md",  # a colon after a non-letter or later in the path is fine
    "1:plan.md",
    "ſ:plan.md",  # not an ASCII letter, so not a drive prefix under /^[a-z]:/i
    "plans/a\u0085.md",  # U+0085 is neither JS whitespace nor a C0 control
    "...md",
    ".hidden/plan.md",
    "plans/😀.md",
]


@pytest.mark.parametrize(("path", "reason"), UNSAFE_PATHS)
def test_unsafe_plan_artifact_path_blocks(path: str, reason: str) -> None:
    assert unsafe_plan_artifact_reason(path) == reason
    assert not is_safe_plan_artifact_path(path)
    evidence = compile(compiler_input("plan", plan_artifact=path))
    assert evidence["status"] == "blocked"
    assert evidence["blockers"] == [
        {
            "code": "plan-artifact-path-invalid",
            "message": (
                "The plan artifact must be one normalized repository-relative path without "
                "traversal, control characters, backslashes, or shell syntax."
            ),
            "dimension": "artifact.plan.write",
        }
    ]
    assert "planArtifact" not in evidence
    artifact = evaluation(evidence, "artifact.plan.write")
    assert artifact["requestedScopes"] == ["harness-exact-path"]
    assert artifact["effectiveScopes"] == []
    assert artifact["limitingSourceIds"] == ["phase-compiler"]
    assert evidence["effectiveAuthority"]["artifact.plan.write"] == []


@pytest.mark.parametrize("path", SAFE_PATHS)
def test_safe_plan_artifact_path_is_bound_exactly(path: str) -> None:
    assert unsafe_plan_artifact_reason(path) is None
    evidence = compile(compiler_input("plan", plan_artifact=path))
    assert evidence["status"] == "allowed"
    assert evidence["effectiveAuthority"]["artifact.plan.write"] == [path]
    assert evidence["planArtifact"] == {
        "exactPath": path,
        "owner": "veritas-kanban",
        "transport": "harness-api",
        "shellRedirection": False,
        "indirectWrites": False,
    }


def test_accepted_plan_artifact_never_grants_general_write() -> None:
    evidence = compile(compiler_input("plan", plan_artifact=PATH))
    assert evidence["effectiveAuthority"]["filesystem.write"] == []
    assert evidence["requestedAuthority"]["artifact.plan.write"] == ["harness-exact-path"]
    artifact = evaluation(evidence, "artifact.plan.write")
    assert artifact["effectiveScopes"] == [PATH]
    assert artifact["limitingSourceIds"] == []
    # the placeholder-to-path substitution is the exception working, not narrowing
    assert evidence["status"] == "allowed"


def test_plan_without_a_request_asks_for_no_artifact() -> None:
    evidence = compile(compiler_input("plan"))
    assert evidence["requestedAuthority"]["artifact.plan.write"] == []
    assert evidence["effectiveAuthority"]["artifact.plan.write"] == []
    assert evaluation(evidence, "artifact.plan.write")["limitingSourceIds"] == []
    assert evidence["status"] == "allowed"


@pytest.mark.parametrize("phase", ["explore", "implement", "verify", "publish"])
def test_other_phases_cannot_request_a_plan_artifact(phase: str) -> None:
    evidence = compile(compiler_input(phase, plan_artifact=PATH))
    assert evidence["status"] == "blocked"
    assert [b["code"] for b in evidence["blockers"]] == ["plan-artifact-not-allowed"]
    assert evidence["requestedAuthority"]["artifact.plan.write"] == []
    assert evidence["effectiveAuthority"]["artifact.plan.write"] == []
    assert evaluation(evidence, "artifact.plan.write")["limitingSourceIds"] == ["phase-compiler"]
    assert "planArtifact" not in evidence


def test_an_unsafe_path_for_a_phase_that_cannot_have_one_is_only_not_allowed() -> None:
    evidence = compile(compiler_input("implement", plan_artifact="../../etc/passwd"))
    assert [b["code"] for b in evidence["blockers"]] == ["plan-artifact-not-allowed"]


def test_accepted_artifact_denied_by_a_source_is_dropped_and_blocks() -> None:
    document = compiler_input(
        "plan",
        plan_artifact=PATH,
        toolCatalog=source("toolCatalog", {"artifact.plan.write": []}),
    )
    evidence = compile(document)
    assert evidence["status"] == "blocked"
    assert [(b["code"], b["dimension"]) for b in evidence["blockers"]] == [
        ("required-authority-denied", "artifact.plan.write")
    ]
    assert "planArtifact" not in evidence
    assert evaluation(evidence, "artifact.plan.write")["limitingSourceIds"] == [
        "phase-compiler",
        "tools:standard",
    ]


def test_accepted_artifact_needs_an_enforcing_source_chain() -> None:
    document = compiler_input(
        "plan",
        plan_artifact=PATH,
        sandbox=source("sandbox", enforcement={"artifact.plan.write": "unenforceable"}),
    )
    evidence = compile(document)
    assert [(b["code"], b.get("sourceId")) for b in evidence["blockers"]] == [
        ("required-authority-unenforceable", "sandbox:local")
    ]
    assert "planArtifact" not in evidence


def test_source_must_allow_the_placeholder_scope_or_wildcard() -> None:
    # sources speak in the profile's placeholder scope, not in concrete paths
    by_path = source("sandbox", {"artifact.plan.write": [PATH]})
    evidence = compile(compiler_input("plan", plan_artifact=PATH, sandbox=by_path))
    assert evidence["status"] == "blocked"
    by_placeholder = source("sandbox", {"artifact.plan.write": ["harness-exact-path"]})
    evidence = compile(compiler_input("plan", plan_artifact=PATH, sandbox=by_placeholder))
    assert evidence["status"] == "allowed"
    assert evidence["planArtifact"]["exactPath"] == PATH


def test_accepted_artifact_becomes_required_for_a_custom_profile() -> None:
    profile = custom_profile(
        {"filesystem.read": ["<workspace>"]},
        required=["filesystem.read"],
        exact_path_policy=True,
        phase="plan",
    )
    evidence = compile(compiler_input(profile=profile, plan_artifact=PATH))
    assert evidence["requiredDimensions"] == ["filesystem.read", "artifact.plan.write"]
    assert evaluation(evidence, "artifact.plan.write")["required"] is True
    assert evidence["status"] == "allowed"
    without = compile(compiler_input(profile=profile))
    assert without["requiredDimensions"] == ["filesystem.read"]


def test_rejected_artifact_on_an_optional_dimension_is_dropped_without_a_warning() -> None:
    profile = custom_profile(
        {"filesystem.read": ["<workspace>"]},
        required=["filesystem.read"],
        exact_path_policy=True,
        phase="plan",
    )
    evidence = compile(compiler_input(profile=profile, plan_artifact="a//b"))
    # the fold left ['harness-exact-path'] in place; the post-pass empties it silently
    assert [b["code"] for b in evidence["blockers"]] == ["plan-artifact-path-invalid"]
    assert evidence["warnings"] == []
    assert evidence["requiredDimensions"] == ["filesystem.read"]
    assert evidence["effectiveAuthority"]["artifact.plan.write"] == []


def test_plan_artifact_path_is_never_trimmed_but_must_not_be_empty() -> None:
    with pytest.raises(PhaseInputError) as raised:
        compile(compiler_input("plan", plan_artifact=""))
    assert raised.value.path == "planArtifact.exactPath"
    assert compile(compiler_input("plan", plan_artifact=" "))["status"] == "blocked"


def test_every_dimension_still_evaluated_with_an_artifact() -> None:
    evidence = compile(compiler_input("plan", plan_artifact=PATH))
    assert [e["dimension"] for e in evidence["evaluations"]] == list(DIMENSIONS)
