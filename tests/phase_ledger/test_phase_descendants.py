"""Descendant runs compile with their parent's effective evidence and never exceed it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger, core
from agentledger.errors import ExitCode
from agentledger.phase import PHASE_NAMES
from agentledger.phase.descent import RELATIONS, exceeds
from agentledger.phase.journal import PhaseRefused

from .ledger_testkit import (
    blob_count,
    compiler_input,
    edit_blob,
    evidence,
    forge,
    move,
    narrowed_egress,
    phase_kinds,
    source,
    started,
    without_parent,
)


def child_input(run: Any) -> dict[str, Any]:
    body = next(run.entries(kind="phase.evidence")).body
    document: dict[str, Any] = json.loads(run.ledger.blobs.get(body["input_blob"]))
    return document


def wider_than_parent(child: Any, parent: Any) -> list[str]:
    return exceeds(effective(child)["effectiveAuthority"], effective(parent)["effectiveAuthority"])


def effective(run: Any) -> dict[str, Any]:
    state = run.phase_state()
    assert state.effective is not None
    result: dict[str, Any] = state.effective
    return result


@pytest.mark.parametrize("relation", RELATIONS)
def test_descendant_compiles_with_the_parents_effective_evidence(
    ledger: Ledger, relation: str
) -> None:
    parent = ledger.run("parent")
    parent.record_phase_evidence(None, compiler_input=narrowed_egress("implement", "pypi.org"))
    parent_evidence = effective(parent)
    child = parent.start_descendant(
        "child", relation=relation, compiler_input=without_parent(compiler_input("implement"))
    )
    assert phase_kinds(child) == ["phase.descent", "phase.evidence"]
    descent = next(child.entries()).body
    assert descent["relation"] == relation
    assert descent["parent_run"] == "parent"
    assert descent["parent_evidence_digest"] == parent_evidence["digest"]
    parent_source = child_input(child)["sources"]["parent"]
    assert parent_source["id"] == "parent-evidence:" + parent_evidence["digest"]
    assert parent_source["authority"] == parent_evidence["effectiveAuthority"]
    # The child asked for "*" egress; the parent only had pypi.org.
    assert effective(child)["effectiveAuthority"]["network.egress"] == ["pypi.org"]
    assert ledger.verify().code == 0


@pytest.mark.parametrize(("parent_phase", "child_phase"), itertools.product(PHASE_NAMES, repeat=2))
def test_a_descendant_never_exceeds_its_parent(
    ledger: Ledger, parent_phase: str, child_phase: str
) -> None:
    parent = started(
        ledger, "parent", parent_phase, sandbox=source("sandbox", {"credential.access": ["npm"]})
    )
    try:
        child = parent.start_descendant(
            "child", relation="fork", compiler_input=without_parent(compiler_input(child_phase))
        )
    except PhaseRefused as refused:
        # A child that would need more than its parent has is blocked, never widened.
        assert refused.code == "descendant-blocked"
        assert refused.exit_code == ExitCode.BLOCKED
        assert not ledger.has_run("child")
        return
    assert wider_than_parent(child, parent) == []


def test_a_descendant_with_a_narrower_optional_profile_is_narrowed_not_blocked(
    ledger: Ledger,
) -> None:
    parent = started(ledger, "parent", "explore")
    wide = compiler_input("publish")
    profile = wide["profile"]
    profile.update(id="team:wide", builtIn=False, requiredDimensions=["filesystem.read"])
    child = parent.start_descendant(
        "child", relation="handoff", compiler_input=without_parent(wide)
    )
    child_evidence = effective(child)
    assert child_evidence["status"] == "narrowed"
    assert child_evidence["effectiveAuthority"]["filesystem.write"] == []
    assert wider_than_parent(child, parent) == []


def test_with_no_phase_requested_the_descendant_inherits_the_parents_profile(
    ledger: Ledger,
) -> None:
    parent = started(ledger, "parent", "verify")
    child = parent.start_descendant("child", relation="retry")
    identity = effective(child)["identity"]
    assert (identity["phase"], identity["profileId"]) == ("verify", "builtin-verify")
    sandboxed = parent.start_descendant(
        "child-2",
        relation="retry",
        compiler_input={"sources": without_parent(narrowed_egress("verify", "x.org"))["sources"]},
    )
    assert effective(sandboxed)["identity"]["phase"] == "verify"
    assert effective(sandboxed)["effectiveAuthority"]["network.egress"] == ["x.org"]


def test_a_legacy_parent_has_legacy_descendants(ledger: Ledger) -> None:
    parent = started(ledger, "parent", None)
    child = parent.start_descendant("child", relation="resume")
    assert effective(child)["identity"] == {"mode": "legacy", "phase": "legacy"}
    grandchild = child.start_descendant("grandchild", relation="retry")
    assert effective(grandchild)["identity"]["mode"] == "legacy"
    assert ledger.verify().code == 0


def test_a_descendant_follows_the_parents_current_phase(ledger: Ledger) -> None:
    parent = started(ledger, "parent", "implement")
    move(parent, compiler_input("verify"), operation="narrow")
    child = parent.start_descendant("child", relation="fork")
    assert effective(child)["identity"]["phase"] == "verify"
    descent = next(child.entries()).body
    assert descent["parent_evidence_digest"] == effective(parent)["digest"]
    assert ledger.verify().code == 0


def test_a_blocked_parent_is_refused(ledger: Ledger) -> None:
    blocked = compiler_input(
        "implement", sandbox=source("sandbox", enforcement={"command.execute": "unenforceable"})
    )
    parent = ledger.run("parent")
    parent.record_phase_evidence(None, compiler_input=blocked)
    with pytest.raises(PhaseRefused) as refused:
        parent.start_descendant("child", relation="retry")
    assert refused.value.code == "parent-blocked"
    assert refused.value.exit_code == ExitCode.BLOCKED
    assert not ledger.has_run("child")


def test_a_tampered_parent_evidence_is_refused_and_nothing_written(ledger: Ledger) -> None:
    parent = started(ledger, "parent", "explore")
    body = next(parent.entries()).body
    edit_blob(ledger, body["evidence_blob"], b'"inspect"', b'"mutate"')
    blobs = blob_count(ledger)
    with pytest.raises(PhaseRefused) as refused:
        parent.start_descendant("child", relation="fork")
    assert refused.value.code == "parent-evidence-tampered"
    assert refused.value.exit_code == ExitCode.DIVERGED
    assert not ledger.has_run("child")
    assert blob_count(ledger) == blobs


@pytest.mark.parametrize("redigest", [True, False], ids=["valid-digest", "stale-digest"])
def test_a_forged_parent_evidence_is_refused(ledger: Ledger, redigest: bool) -> None:
    from agentledger import core
    from agentledger.phase import compile, evidence_digest

    document = compiler_input("explore")
    forged = compile(document)
    forged["effectiveAuthority"]["filesystem.write"] = ["*"]
    if redigest:
        forged["digest"] = evidence_digest(forged)
    parent = ledger.run("parent")
    forge(
        parent,
        "phase.evidence",
        {
            "evidence_digest": forged["digest"],
            "evidence_blob": ledger.blobs.put(core.canonicalize(forged)),
            "input_blob": ledger.blobs.put(core.canonicalize(document)),
            "status": forged["status"],
            "mode": "profile",
            "phase": "explore",
            "profile_id": "builtin-explore",
            "profile_version": 1,
        },
    )
    with pytest.raises(PhaseRefused) as refused:
        parent.start_descendant("child", relation="fork")
    assert refused.value.code == "parent-evidence-tampered"


def test_a_stale_parent_digest_is_refused(ledger: Ledger) -> None:
    parent = started(ledger, "parent", "implement")
    observed = effective(parent)["digest"]
    move(parent, compiler_input("verify"), operation="narrow")
    with pytest.raises(PhaseRefused) as refused:
        parent.start_descendant("child", relation="retry", expected_parent_evidence_digest=observed)
    assert refused.value.code == "stale-parent-evidence"
    assert not ledger.has_run("child")


def test_a_parent_without_evidence_is_not_found(ledger: Ledger) -> None:
    parent = ledger.run("parent")
    with pytest.raises(PhaseRefused) as refused:
        parent.start_descendant("child", relation="retry")
    assert refused.value.exit_code == ExitCode.NOT_FOUND
    assert not ledger.has_run("child")


def test_the_parent_source_cannot_be_supplied_by_the_caller(ledger: Ledger) -> None:
    parent = started(ledger, "parent", "explore")
    with pytest.raises(PhaseRefused) as refused:
        parent.start_descendant("child", relation="fork", compiler_input=compiler_input("explore"))
    assert refused.value.code == "parent-source-derived"


def test_an_existing_run_cannot_become_a_descendant(ledger: Ledger) -> None:
    parent = started(ledger, "parent", "explore")
    ledger.run("child").append("step", {})  # a run exists once it has an entry
    with pytest.raises(PhaseRefused) as refused:
        parent.start_descendant("child", relation="fork")
    assert refused.value.code == "run-exists"
    assert ledger.get_run("child").phase_state().effective is None


def test_a_descendants_transitions_stay_within_the_parent(ledger: Ledger) -> None:
    parent = started(
        ledger, "parent", "implement", sandbox=source("sandbox", {"network.egress": ["pypi.org"]})
    )
    child = parent.start_descendant(
        "child", relation="fork", compiler_input=without_parent(compiler_input("verify"))
    )
    result = move(
        child,
        without_parent(compiler_input("implement")),
        operation="widen",
        emergency_override={"justification": "Hotfix.", "expiresAt": "2026-07-25T13:00:00Z"},
        administrator=True,
    )
    assert result.status == "applied"
    assert wider_than_parent(child, parent) == []
    with pytest.raises(PhaseRefused) as refused:
        move(child, compiler_input("implement"), operation="other")
    assert refused.value.code == "parent-source-derived"
    assert ledger.verify().code == 0


def test_verify_reports_a_descent_that_names_another_evidence(ledger: Ledger) -> None:
    parent = started(ledger, "parent", "explore")
    parent.start_descendant("child", relation="fork")
    descent = next(ledger.run("child").entries()).body
    forged = ledger.run("forged")
    entry = forge(
        forged, "phase.descent", {**descent, "parent_evidence_digest": "sha256:" + "0" * 64}
    )
    found = ledger.verify_run("forged").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.descent", entry.seq)]


def plan_with_artifact(path: str) -> dict[str, Any]:
    document = compiler_input("plan")
    document["planArtifact"] = {
        "exactPath": path,
        "owner": "veritas-kanban",
        "transport": "harness-api",
    }
    return document


def test_a_plan_run_retries_with_exactly_its_parents_plan_artifact(ledger: Ledger) -> None:
    parent = ledger.run("parent")
    parent.record_phase_evidence(None, compiler_input=plan_with_artifact("plans/task-1.md"))
    child = parent.start_descendant("child", relation="retry")
    child_evidence = effective(child)
    assert child_evidence["status"] == "allowed"
    assert child_evidence["effectiveAuthority"]["artifact.plan.write"] == ["plans/task-1.md"]
    assert child_evidence["planArtifact"]["exactPath"] == "plans/task-1.md"
    assert wider_than_parent(child, parent) == []
    assert ledger.verify().code == 0


def test_a_plan_descendant_cannot_take_another_artifact_path(ledger: Ledger) -> None:
    parent = ledger.run("parent")
    parent.record_phase_evidence(None, compiler_input=plan_with_artifact("plans/task-1.md"))
    other = without_parent(plan_with_artifact("plans/other.md"))
    with pytest.raises(PhaseRefused) as refused:
        parent.start_descendant("child", relation="fork", compiler_input=other)
    assert refused.value.code == "descendant-blocked"
    assert not ledger.has_run("child")


def test_an_archive_of_the_child_alone_verifies_with_a_note(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    parent = started(ledger, "parent", "implement")
    parent.start_descendant("child", relation="handoff")
    out = tmp_path / "child.db"
    assert cli("archive", str(out), "child").code == ExitCode.OK
    with Ledger.open(out, readonly=True) as archive:
        report = archive.verify()
        assert report.code == ExitCode.OK
        assert any("descends from run parent" in note for note in report.notes)
    whole = tmp_path / "both.db"
    assert cli("archive", str(whole)).code == ExitCode.OK
    with Ledger.open(whole, readonly=True) as archive:
        report = archive.verify()
        assert report.code == ExitCode.OK and not any("descends" in n for n in report.notes)


def test_no_decision_is_taken_for_a_descendant_wider_than_its_parent(
    ledger: Ledger, cli: Any
) -> None:
    # A child whose descent names its parent's evidence but whose evidence was compiled
    # with a parent source of its own (egress anywhere, where the parent has pypi.org only)
    # is reported by verify; `phase show` lists it (exit 2) and no authority is granted on
    # it. Before, authorize() granted the child egress the parent never had.
    parent = started(
        ledger, "parent", "implement", sandbox=source("sandbox", {"network.egress": ["pypi.org"]})
    )
    parent.start_descendant("child", relation="fork")
    descent = next(ledger.run("child").entries()).body
    forged = ledger.run("forged")
    forge(forged, "phase.descent", descent)
    document = compiler_input("implement")
    document["sources"]["parent"] = {**child_input(ledger.run("child"))["sources"]["parent"]}
    document["sources"]["parent"]["authority"] = {
        **document["sources"]["parent"]["authority"],
        "network.egress": ["*"],
    }
    with pytest.raises(PhaseRefused) as refused:  # not through the API
        forged.record_phase_evidence(None, compiler_input=document)
    assert refused.value.code == "parent-source-derived"
    compiled = evidence(document)
    forge(
        forged, "phase.evidence",
        {"evidence_digest": compiled["digest"], "status": compiled["status"],
         "evidence_blob": ledger.blobs.put(core.canonicalize(compiled)),
         "input_blob": ledger.blobs.put(core.canonicalize(document)),
         "mode": "profile", "phase": "implement", "profile_id": "builtin-implement",
         "profile_version": 1},
    )  # fmt: skip
    assert effective(forged)["effectiveAuthority"]["network.egress"] == ["*"]
    found = ledger.verify_run("forged").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.evidence", 1)]
    shown = cli("phase", "show", "forged", "--json")
    assert shown.code == ExitCode.DIVERGED
    assert [p["seq"] for p in shown.json()["problems"]] == [1]
    length = len(forged)
    with pytest.raises(PhaseRefused) as refused:
        forged.authorize(
            "network.egress", ["evil.example"], evidence_digest=effective(forged)["digest"]
        )
    assert refused.value.code == "phase-state-tampered"
    assert len(forged) == length


@pytest.mark.parametrize(
    "edit",
    [{"parent_run": True}, {"relation": "adoption"}, {"parent_entry_hash": "blake3:00"}],
    ids=["parent-not-a-string", "relation", "hash"],
)
def test_a_forged_descent_alone_gets_one_verdict(
    ledger: Ledger, cli: Any, edit: dict[str, Any]
) -> None:
    # A descent naming its parent by a boolean read as a parent absent from the ledger
    # (verify clean, with a note); an unknown relation passed verify; a descent with no
    # evidence after it was judged by verify only (phase show exit 0).
    parent = started(ledger, "parent", "implement")
    parent.start_descendant("child", relation="fork")
    descent = next(ledger.run("child").entries()).body
    entry = forge(ledger.run("forged"), "phase.descent", {**descent, **edit})
    found = ledger.verify_run("forged").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.descent", entry.seq)]
    shown = cli("phase", "show", "forged", "--json")
    assert shown.code == ExitCode.DIVERGED
    assert [p["seq"] for p in shown.json()["problems"]] == [entry.seq]
