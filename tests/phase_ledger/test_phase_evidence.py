"""Phase evidence in the ledger: stored, anchored, and re-derived by verify."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agentledger import Ledger, core
from agentledger.errors import ExitCode
from agentledger.phase import PhaseInputError, evidence_digest
from agentledger.phase.journal import PhaseRefused

from .ledger_testkit import (
    blob_count,
    compiler_input,
    edit_blob,
    evidence,
    forge,
    narrowed_egress,
    started,
)


def divergences(ledger: Ledger, run_id: str) -> list[tuple[str, int | None]]:
    verdict = ledger.verify_run(run_id)
    return [(d.check, d.seq) for d in verdict.divergences]


def hand_written(document: dict[str, Any]) -> dict[str, Any]:
    """Evidence the compiler would not produce for ``document``, with a valid digest."""
    forged = copy.deepcopy(evidence(document))
    forged["effectiveAuthority"]["network.egress"] = ["*"]
    for item in forged["evaluations"]:
        if item["dimension"] == "network.egress":
            item["effectiveScopes"] = ["*"]
    forged["digest"] = evidence_digest(forged)
    return forged


def test_recorded_evidence_is_anchored_with_its_input_and_verifies(ledger: Ledger) -> None:
    document = narrowed_egress("implement", "pypi.org")
    run = ledger.run("run-a")
    entry = run.record_phase_evidence(evidence(document), compiler_input=document)
    assert entry.kind == "phase.evidence"
    body = entry.body
    assert body["evidence_digest"] == evidence(document)["digest"]
    assert body["status"] == "narrowed"
    assert (body["phase"], body["profile_id"], body["mode"]) == (
        "implement",
        "builtin-implement",
        "profile",
    )
    assert ledger.blobs.get(body["input_blob"]) == core.canonicalize(document)
    assert ledger.blobs.get(body["evidence_blob"]) == core.canonicalize(evidence(document))
    assert ledger.verify_run("run-a").ok


def test_evidence_is_compiled_when_only_the_input_is_given(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "plan")
    assert next(run.entries()).body["evidence_digest"] == evidence(compiler_input("plan"))["digest"]


def test_hand_written_evidence_with_a_valid_digest_is_refused_and_nothing_written(
    ledger: Ledger,
) -> None:
    document = narrowed_egress("implement", "pypi.org")
    run = ledger.run("run-a")
    blobs = blob_count(ledger)
    with pytest.raises(PhaseRefused) as refused:
        run.record_phase_evidence(hand_written(document), compiler_input=document)
    assert refused.value.code == "evidence-not-reproducible"
    assert len(run) == 0
    assert blob_count(ledger) == blobs


def test_evidence_whose_digest_does_not_match_is_refused(ledger: Ledger) -> None:
    document = compiler_input("explore")
    edited = evidence(document)
    edited["warnings"] = ["edited"]
    with pytest.raises(PhaseRefused) as refused:
        ledger.run("run-a").record_phase_evidence(edited, compiler_input=document)
    assert refused.value.code == "evidence-tampered"
    assert len(ledger.run("run-a")) == 0


def test_an_invalid_compiler_input_is_refused_with_its_path(ledger: Ledger) -> None:
    document = compiler_input("explore")
    document["sources"]["sandbox"]["authority"]["network.egress"] = ["a", "a"]
    with pytest.raises(PhaseInputError) as refused:
        ledger.run("run-a").record_phase_evidence(None, compiler_input=document)
    assert refused.value.exit_code == ExitCode.INVALID_INPUT
    assert "network.egress" in refused.value.path
    assert len(ledger.run("run-a")) == 0


def test_a_run_has_one_initial_evidence(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    again = run.record_phase_evidence(None, compiler_input=compiler_input("explore"))
    assert again.seq == 0 and len(run) == 1
    with pytest.raises(PhaseRefused) as refused:
        run.record_phase_evidence(None, compiler_input=compiler_input("publish"))
    assert refused.value.code == "phase-evidence-exists"
    assert len(run) == 1


def test_blocked_evidence_is_recorded_as_it_is(ledger: Ledger) -> None:
    document = compiler_input("implement", sandbox={**_sandbox_unsupported("filesystem.write")})
    entry = ledger.run("run-a").record_phase_evidence(None, compiler_input=document)
    assert entry.body["status"] == "blocked"
    assert ledger.verify_run("run-a").ok


def _sandbox_unsupported(dimension: str) -> dict[str, Any]:
    from .ledger_testkit import source

    return source("sandbox", enforcement={dimension: "unsupported"})


def _forge_entry(
    ledger: Ledger, run_id: str, document: dict[str, Any], forged: Any, **override: Any
) -> int:
    """Write a phase.evidence entry directly, bypassing the checks (as a forger would)."""
    run = ledger.run(run_id)
    input_blob = ledger.blobs.put(core.canonicalize(document))
    evidence_blob = ledger.blobs.put(core.canonicalize(forged))
    identity = forged["identity"]
    entry = forge(
        run,
        "phase.evidence",
        {
            "evidence_digest": forged["digest"],
            "evidence_blob": evidence_blob,
            "input_blob": input_blob,
            "status": forged["status"],
            "mode": identity["mode"],
            "phase": identity["phase"],
            "profile_id": identity.get("profileId"),
            "profile_version": identity.get("profileVersion"),
            **override,
        },
    )
    return entry.seq


def test_verify_rejects_hand_written_evidence_with_a_valid_digest(ledger: Ledger, cli: Any) -> None:
    ledger.run("run-0").append("note", {"text": "work before the phase"})
    document = narrowed_egress("implement", "pypi.org")
    seq = _forge_entry(ledger, "run-0", document, hand_written(document))
    assert divergences(ledger, "run-0") == [("phase.evidence", seq)]
    result = cli("verify", "run-0", "--json")
    assert result.code == ExitCode.DIVERGED
    failure = result.json()["failures"][0]
    assert failure["run"] == "run-0"
    assert failure["divergences"][0]["check"] == "phase.evidence"
    assert failure["divergences"][0]["seq"] == seq


def test_verify_reports_an_entry_that_misstates_its_evidence(ledger: Ledger) -> None:
    document = compiler_input("explore")
    _forge_entry(ledger, "run-ok", document, evidence(document))
    assert ledger.verify_run("run-ok").ok
    seq = _forge_entry(ledger, "run-a", document, evidence(document), phase="publish")
    assert divergences(ledger, "run-a") == [("phase.evidence", seq)]


def test_missing_evidence_blobs_are_a_divergence(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "verify")
    body = next(run.entries()).body
    with ledger.db.write() as conn:
        for digest in (body["input_blob"],):
            conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
            conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.evidence", 0)]
    assert body["input_blob"] in found[0].expected
    # Its actual said "missing or not hashing to its name": which of the two, and the hash.
    assert found[0].actual == "absent from the blob store"


def test_an_edited_input_blob_is_a_divergence(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "verify")
    digest = next(run.entries()).body["input_blob"]
    edit_blob(ledger, digest, b'"inspect"', b'"publish"')
    assert ("phase.evidence", 0) in divergences(ledger, "run-a")
    data = ledger.blobs.get(digest)
    found = next(d for d in ledger.verify_run("run-a").divergences if d.seq == 0)
    assert found.actual == f"bytes hashing to {core.blake3_hex(data)} (changed)"


def test_whole_workspace_verify_checks_phase_evidence(ledger: Ledger) -> None:
    started(ledger, "run-good", "explore")
    document = compiler_input("explore")
    _forge_entry(ledger, "run-bad", document, hand_written(document))
    report = ledger.verify()
    assert {run.run_id: run.code for run in report.runs} == {"run-good": 0, "run-bad": 2}
    assert json.dumps(report.to_json())  # the report stays serialisable


@pytest.mark.parametrize(
    "kind", ["phase.evidence", "phase.transition", "phase.authorize", "phase.anything"]
)
def test_generic_appends_cannot_write_phase_entries(ledger: Ledger, kind: str) -> None:
    from agentledger.errors import InvalidInput

    run = ledger.run("run-a")
    with pytest.raises(InvalidInput) as refused:
        run.append(kind, {"evidence_digest": "sha256:" + "0" * 64})
    assert refused.value.code == "reserved-kind"
    assert len(run) == 0


@pytest.mark.parametrize(
    "forged",
    ["second-evidence", "late-descent", "empty-descent"],
)
def test_a_phase_entry_verify_reports_is_a_problem_of_the_state_too(
    ledger: Ledger, cli: Any, forged: str
) -> None:
    # Verify, `phase show` and every writer give one verdict on a forged phase entry: a
    # second initial evidence (a copy of the first), a descent after the evidence, a descent
    # without its fields. Before, show exited 0 (or 70 on the empty descent) and decisions
    # were journaled on top of it.
    run = started(ledger, "run-a", "implement")
    first = next(run.entries())
    digest = run.phase_state().effective["digest"]  # type: ignore[index]
    if forged == "second-evidence":
        entry = forge(run, "phase.evidence", dict(first.body))
    elif forged == "late-descent":
        body = {"relation": "retry", "parent_run": "run-p", "parent_evidence_digest": digest,
                "parent_entry_seq": 0, "parent_entry_hash": first.hash,
                "parent_source_id": "parent-evidence:" + digest}  # fmt: skip
        entry = forge(run, "phase.descent", body)
    else:
        entry = forge(run, "phase.descent", {})
    assert [seq for _, seq in divergences(ledger, "run-a")] == [entry.seq]
    assert [seq for seq, _ in run.phase_state().problems] == [entry.seq]
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == ExitCode.DIVERGED, shown.err
    assert [p["seq"] for p in shown.json()["problems"]] == [entry.seq]
    length = len(run)
    with pytest.raises(PhaseRefused) as refused:
        run.authorize("network.egress", ["pypi.org"], evidence_digest=digest)
    assert refused.value.code == "phase-state-tampered"
    assert len(run) == length


def test_phase_show_reports_an_entry_that_misstates_its_evidence(ledger: Ledger, cli: Any) -> None:
    # The entry says publish, its evidence is explore's: verify reports it, and so does
    # `phase show` (exit 2, not 0), and no decision is taken on it.
    document = compiler_input("explore")
    seq = _forge_entry(ledger, "run-a", document, evidence(document), phase="publish")
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == ExitCode.DIVERGED
    assert [p["seq"] for p in shown.json()["problems"]] == [seq]
    with pytest.raises(PhaseRefused) as refused:
        ledger.run("run-a").authorize(
            "filesystem.read", ["<workspace>"], evidence_digest=evidence(document)["digest"]
        )
    assert refused.value.code == "phase-state-tampered"


@pytest.mark.parametrize("forged", ["hand-written", "no-identity", "input-invalid"])
def test_phase_show_reports_evidence_that_does_not_re_derive(
    ledger: Ledger, cli: Any, forged: str
) -> None:
    # Evidence written by hand with a fresh digest, evidence without its identity, an
    # input the compiler refuses: verify reports each at its step; `phase show` exited 0
    # (or 70, KeyError 'phase', for the evidence without identity).
    document = compiler_input("explore")
    written = hand_written(document) if forged == "hand-written" else evidence(document)
    run_id = "run-a"
    if forged == "no-identity":
        without = {key: value for key, value in written.items() if key != "identity"}
        seq = _forge_entry(ledger, "run-a", document, written)  # its summary and blobs
        body = next(ledger.run("run-a").entries()).body
        evidence_blob = ledger.blobs.put(core.canonicalize(without))
        run_id = "run-b"
        seq = forge(
            ledger.run(run_id), "phase.evidence", {**body, "evidence_blob": evidence_blob}
        ).seq
    elif forged == "input-invalid":
        seq = _forge_entry(ledger, "run-a", {**document, "sources": {}}, written)
    else:
        seq = _forge_entry(ledger, "run-a", document, written)
    assert [s for _, s in divergences(ledger, run_id)] == [seq]
    shown = cli("phase", "show", run_id, "--json")
    assert shown.code == ExitCode.DIVERGED, shown.err
    assert [p["seq"] for p in shown.json()["problems"]] == [seq]
    human = cli("phase", "show", run_id)
    assert human.code == ExitCode.DIVERGED, human.err


@pytest.mark.parametrize("forged", ["valid", "no-identity", "wrong-type"])
def test_remembered_evidence_validity_is_the_reference_validation(
    ledger: Ledger, forged: str
) -> None:
    """Each decision loads its run's phase state, and the state validates the evidence:
    the answer is remembered by the evidence blob's digest (its bytes re-hashed as they are
    read). Cold or warm, the memory answers as the plain validation does, and a run's
    state lists the same problems either way."""
    from agentledger.phase import journal

    written = evidence(compiler_input("explore"))
    if forged == "no-identity":
        written = {key: value for key, value in written.items() if key != "identity"}
    elif forged == "wrong-type":
        written = {**written, "status": 7}
    digest = ledger.blobs.put(core.canonicalize(written))
    journal._VALID_EVIDENCE.clear()
    cold = journal._valid_evidence(digest, written)
    warm = journal._valid_evidence(digest, written)
    assert cold == warm == journal.valid_evidence(written) == (forged == "valid")
    document = compiler_input("explore")
    _forge_entry(ledger, "run-a", document, evidence(document))  # its summary and blobs
    body = next(ledger.run("run-a").entries()).body
    seq = forge(ledger.run("run-b"), "phase.evidence", {**body, "evidence_blob": digest}).seq
    journal._VALID_EVIDENCE.clear()
    states = []
    for _ in range(2):  # the first load fills the memory, the second reads it
        with ledger.db.snapshot() as conn:
            states.append(journal.load_state(conn, ledger.id, "run-b").problems)
    invalid = [(seq, "the phase evidence is not valid")]
    assert states[0] == states[1] and (states[0] == invalid) == (forged != "valid")
