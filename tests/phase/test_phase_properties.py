"""Properties that hold for every valid input: nothing is ever widened, and the evidence is
self-consistent and deterministic."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.phase import (
    DIMENSIONS,
    PhaseCapabilityEvidence,
    builtin_profile,
    compile,
    validate,
    verify_evidence_digest,
)
from agentledger.phase.jscompat import utf16_sort_key

from .phase_testkit import SOURCE_KINDS

SCOPE_POOL = ["<workspace>", "inspect", "build", "test", "mutate", "read", "a.example", "é", "😀"]
IDS = ["p", "Agent-1", "sandbox:x", "sandbox_x", "tools.v2", "launch/policy"]

scope_lists = st.one_of(
    st.just(["*"]),
    st.lists(st.sampled_from(SCOPE_POOL), unique=True, max_size=4),
)
states = st.sampled_from(["enforced"] * 6 + ["unsupported", "unenforceable"])


@st.composite
def sources(draw: st.DrawFn, key: str) -> dict[str, Any]:
    return {
        "id": draw(st.sampled_from(IDS)),
        "kind": SOURCE_KINDS[key],
        "authority": {d: draw(scope_lists) for d in DIMENSIONS},
        "enforcement": {d: draw(states) for d in DIMENSIONS},
    }


@st.composite
def compiler_inputs(draw: st.DrawFn) -> dict[str, Any]:
    document: dict[str, Any] = {}
    phase = draw(st.sampled_from([None, "explore", "plan", "implement", "verify", "publish"]))
    if phase is not None:
        document["profile"] = builtin_profile(phase)
        required = draw(st.lists(st.sampled_from(DIMENSIONS), unique=True))
        document["profile"]["requiredDimensions"] = required
    document["sources"] = {key: draw(sources(key)) for key in SOURCE_KINDS}
    if draw(st.booleans()):
        path = draw(st.sampled_from(["plans/a.md", "../a.md", "a//b", "plans/b.md", " x"]))
        document["planArtifact"] = {
            "exactPath": path,
            "owner": "veritas-kanban",
            "transport": "harness-api",
        }
    return document


def _within(scopes: list[str], ceiling: list[str]) -> bool:
    return ceiling == ["*"] or set(scopes) <= set(ceiling)


@settings(max_examples=120, deadline=None)
@given(compiler_inputs())
def test_effective_authority_never_exceeds_any_source(document: dict[str, Any]) -> None:
    evidence = compile(document)
    plan_artifact = evidence.get("planArtifact")
    for dimension in DIMENSIONS:
        effective = evidence["effectiveAuthority"][dimension]
        if dimension == "artifact.plan.write" and plan_artifact is not None:
            assert effective == [plan_artifact["exactPath"]]
            continue
        assert _within(effective, evidence["requestedAuthority"][dimension])
        for source in document["sources"].values():
            if source["enforcement"][dimension] != "enforced":
                assert effective == []
            else:
                assert _within(effective, source["authority"][dimension])


@settings(max_examples=120, deadline=None)
@given(compiler_inputs())
def test_evidence_is_consistent_and_deterministic(document: dict[str, Any]) -> None:
    evidence = compile(document)
    validate(PhaseCapabilityEvidence, evidence)
    assert verify_evidence_digest(evidence)
    assert (evidence["status"] == "blocked") == bool(evidence["blockers"])
    reordered = {**document, "sources": dict(reversed(list(document["sources"].items())))}
    assert compile(reordered) == evidence
    for item in evidence["evaluations"]:
        ids = item["limitingSourceIds"]
        assert ids == sorted(set(ids), key=utf16_sort_key)
        assert evidence["effectiveAuthority"][item["dimension"]] == item["effectiveScopes"]
        assert item["required"] == (item["dimension"] in evidence["requiredDimensions"])
    for dimension in evidence["requiredDimensions"]:
        for source in document["sources"].values():
            state = source["enforcement"][dimension]
            if state != "enforced":
                assert {
                    "code": f"required-authority-{state}",
                    "dimension": dimension,
                    "sourceId": source["id"],
                } in [
                    {k: b.get(k) for k in ("code", "dimension", "sourceId")}
                    for b in evidence["blockers"]
                ]
    if document.get("profile") is None:
        assert evidence["identity"] == {"mode": "legacy", "phase": "legacy"}
        assert evidence["requiredDimensions"] == []
