"""Every refusal at the boundary: a typed code, and nothing written (except redundancy)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentledger import ActivityRejected, ActivityResult, InvalidInput, Ledger, Observation
from agentledger.activity import RedundantEvidence
from agentledger.activity.result import artifact_bytes
from agentledger.activity.team import load_manifest_bytes
from agentledger.errors import Diverged, ExitCode

from .activity_testkit import PAGE, counts, research_result, sql

BAD_HASH = "blake3:" + "AB" * 32


def replace(**changes: Any) -> Callable[[Ledger], None]:
    def record(ledger: Ledger) -> None:
        result = dataclasses.replace(research_result(), **changes)
        ledger.run("r").record_activity(result, stage_id="s1")

    return record


def second_page(ledger: Ledger) -> None:
    run = ledger.run("r")
    obs = Observation.capture("page", "https://example.org/a", PAGE)
    result = ActivityResult.build(kind="research", artifact=None, observations=[obs])
    run.record_activity(result, stage_id="s1")


def team_then(kind: str, role: str) -> Callable[[Ledger], None]:
    def record(ledger: Ledger) -> None:
        load_manifest_bytes(ledger, b'[[roles]]\nrole = "scout"\nagent_kind = "research"\n')
        ledger.run("r").record_activity(research_result(kind=kind), stage_id="s1", role=role)

    return record


def input_after_plan(ledger: Ledger) -> None:
    stage = ledger.run("r").data("d")
    stage.add_input("a", b"1")
    stage.plan(["x"])
    stage.add_input("b", b"2")


def effect_before_plan(ledger: Ledger) -> None:
    stage = ledger.run("r").ops("o")
    stage.add_input("a", b"1")
    stage.add_output("b", b"2")


def second_plan(ledger: Ledger) -> None:
    stage = ledger.run("r").data("d")
    stage.plan(["x"])
    stage.plan(["y"])


def no_plan(ledger: Ledger) -> None:
    stage = ledger.run("r").data("d")
    stage.add_input("a", b"1")
    stage.finish()


def missing_evidence(ledger: Ledger) -> None:
    obs = Observation("page", "https://example.org/a", "blake3:" + "12" * 32)
    result = ActivityResult.build(kind="research", artifact=None, observations=[obs])
    ledger.run("r").record_activity(result, stage_id="s1")


def bytes_mismatch(ledger: Ledger) -> None:
    obs = Observation("page", "u", "blake3:" + "12" * 32, b"other bytes")
    result = ActivityResult.build(kind="research", artifact=None, observations=[obs])
    ledger.run("r").record_activity(result, stage_id="s1")


def duplicate_step(ledger: Ledger) -> None:
    stage = ledger.run("r").browser("b")
    stage.observe("s1", b"a")
    stage.observe("s1", b"b")


def artifact_not_canonical(ledger: Ledger) -> None:
    ActivityResult.build(kind="research", artifact={"x": float("nan")})


def data_without_receipt(ledger: Ledger) -> None:
    ledger.run("r").record_activity(research_result(kind="data"), stage_id="s1")


REFUSALS: dict[str, Callable[[Ledger], object]] = {
    "unknown-kind": replace(kind="poetry"),
    "unknown-terminal-state": replace(terminal_state="done"),
    "empty-reason-code": replace(reason_code="  "),
    "artifact-hash-mismatch": replace(artifact={"summary": "edited after hashing"}),
    "malformed-observation-hash": replace(
        observations=(Observation("page", "https://example.org/a", BAD_HASH),)
    ),
    "evidence-set-hash-mismatch": replace(evidence_set_hash="blake3:" + "00" * 32),
    "kind-mismatch": team_then("browser", "scout"),
    "unknown-role": team_then("research", "stranger"),
    "input-after-plan": input_after_plan,
    "effect-before-plan": effect_before_plan,
    "second-plan": second_plan,
    "no-plan": no_plan,
    "missing-evidence": missing_evidence,
    "observation-bytes-mismatch": bytes_mismatch,
    "duplicate-step": duplicate_step,
    "artifact-not-canonical": artifact_not_canonical,
    "invalid-receipt": data_without_receipt,
    "invalid-stage-id": lambda ledger: ledger.run("r").research("../etc"),
    "invalid-plan": lambda ledger: ledger.run("r").data("d").plan([float("nan")]),
    "invalid-role": lambda ledger: ledger.run("r").record_activity(
        research_result(), stage_id="s1", role="no spaces allowed"
    ),
}


@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_each_refusal_has_its_code_and_writes_nothing(
    ledger: Ledger, ledger_path: Path, code: str
) -> None:
    ledger.run("r")
    load = code in {"kind-mismatch", "unknown-role"}
    before = None if load else counts(ledger_path)
    with pytest.raises(ActivityRejected) as caught:
        REFUSALS[code](ledger)
    assert caught.value.code == code
    assert isinstance(caught.value, InvalidInput)
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    if before is not None:
        assert counts(ledger_path) == before
    else:  # only the manifest was loaded (a blob and its _team entry), nothing of the stage
        entries, _, records = counts(ledger_path)
        assert (entries, records) == (1, 0)
        assert sql(ledger_path, "SELECT run_id FROM entries") == [("_team",)]


def test_redundant_evidence_is_refused_and_the_refusal_is_journaled(
    ledger: Ledger, ledger_path: Path
) -> None:
    run = ledger.run("r")
    first = run.record_activity(research_result(), stage_id="s1")
    blobs_before = counts(ledger_path)[1]
    again = research_result(artifact={"summary": "a different conclusion, same evidence"})
    with pytest.raises(RedundantEvidence) as caught:
        run.record_activity(again, stage_id="s2")
    assert caught.value.code == "redundant-evidence"
    assert caught.value.prior_stage_id == "s1"
    refused = caught.value.entry
    assert refused.kind == "activity.refused"
    assert refused.seq == first.seq + 1
    assert refused.body["refusal"] == "redundant-evidence"
    assert refused.body["prior_stage_id"] == "s1"
    assert refused.body["evidence_set_hash"] == first.body["evidence_set_hash"]
    # The refused stage contributed nothing: no artifact blob, no activity.result.
    assert counts(ledger_path)[1] == blobs_before
    assert [e.kind for e in run.entries()] == ["activity.result", "activity.refused"]
    assert ledger.verify().code == 0


def test_redundancy_holds_across_processes_and_reopens(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as first:
        first.run("r").record_activity(research_result(), stage_id="s1")
    with Ledger.open(ledger_path) as reopened:
        with pytest.raises(ActivityRejected) as caught:
            reopened.run("r").record_activity(research_result(), stage_id="s2")
        assert caught.value.code == "redundant-evidence"
        # Another run may contribute the same evidence: the rule is per run.
        reopened.run("other").record_activity(research_result(), stage_id="s1")


def test_empty_evidence_sets_are_never_redundant(ledger: Ledger) -> None:
    run = ledger.run("r")
    for stage in ("s1", "s2"):
        result = ActivityResult.build(
            kind="coding", artifact=None, terminal_state="failed", reason_code="crashed"
        )
        run.record_activity(result, stage_id=stage)
    assert len(run) == 2


def test_a_stage_id_is_recorded_once_per_run(ledger: Ledger, ledger_path: Path) -> None:
    run = ledger.run("r")
    run.record_activity(research_result(), stage_id="s1")
    before = counts(ledger_path)
    with pytest.raises(ActivityRejected) as caught:
        run.record_activity(research_result(page=b"another page"), stage_id="s1")
    assert caught.value.code == "duplicate-stage"
    assert counts(ledger_path) == before


def test_a_finished_stage_takes_nothing_more(ledger: Ledger) -> None:
    stage = ledger.run("r").research("s1")
    stage.fetch("u", b"page")
    stage.finish()
    with pytest.raises(ActivityRejected) as caught:
        stage.fetch("u2", b"late page")
    assert caught.value.code == "already-finished"


def test_result_documents_with_unknown_fields_are_refused() -> None:
    doc = research_result().to_json()
    doc["extra"] = 1
    with pytest.raises(ActivityRejected) as caught:
        ActivityResult.from_json(doc)
    assert caught.value.code == "invalid-result"
    assert ActivityResult.from_json(research_result().to_json()) == research_result()


def test_concurrent_stages_with_the_same_evidence_record_exactly_one(ledger_path: Path) -> None:
    import multiprocessing

    from .workers import race_same_evidence

    Ledger.open(ledger_path).close()
    context = multiprocessing.get_context("spawn")
    contenders = 4
    barrier = context.Barrier(contenders)
    results = context.Queue()
    processes = [
        context.Process(
            target=race_same_evidence, args=(str(ledger_path), f"s{i}", barrier, results)
        )
        for i in range(contenders)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    outcomes = sorted(results.get(timeout=10) for _ in range(contenders))
    assert outcomes == ["recorded"] + ["redundant-evidence"] * (contenders - 1)
    with Ledger.open(ledger_path) as ledger:
        kinds = [e.kind for e in ledger.run("r").entries()]
        assert kinds == ["activity.result"] + ["activity.refused"] * (contenders - 1)
        assert ledger.verify().code == 0


@pytest.mark.parametrize("kind", ["activity.result", "activity.refused", "activity.anything"])
def test_a_generic_append_cannot_write_an_activity_entry(
    ledger: Ledger, ledger_path: Path, cli: Any, kind: str
) -> None:
    """``agentledger append RUN activity.result`` wrote a result the boundary never saw:
    a reused stage id, a state outside the four, an empty reason, unmirrored, and
    ``show`` listed it as a stage beside the real one, signed and verified clean."""
    ledger.run("r").record_activity(research_result(), stage_id="s1")
    before = counts(ledger_path), sql(ledger_path, "SELECT size, frontier FROM log_state")
    forged = {
        "stage_id": "s1",
        "kind": "research",
        "terminal_state": "exploded",
        "reason_code": "",
        "evidence_set_hash": "blake3:" + "0" * 64,
        "observations": [],
        "mirrored": False,
    }
    with pytest.raises(InvalidInput) as refused:
        ledger.run("r").append(kind, forged)
    assert refused.value.code == "reserved-kind"
    result = cli("append", "r", kind, json.dumps(forged))
    assert result.code == ExitCode.INVALID_INPUT
    assert "reserved" in result.err and "activity boundary" in result.err
    assert (counts(ledger_path), sql(ledger_path, "SELECT size, frontier FROM log_state")) == before
    assert [e.kind for e in ledger.run("r").entries()] == ["activity.result"]


@pytest.mark.parametrize(
    "damage",
    [
        "DELETE FROM blob_chunks WHERE digest = ?",
        "UPDATE blob_chunks SET data = X'00' WHERE digest = ?",
    ],
)
@pytest.mark.parametrize("pinned", ["observation", "artifact"])
def test_stored_bytes_that_do_not_verify_are_never_pinned(
    ledger: Ledger, ledger_path: Path, damage: str, pinned: str
) -> None:
    # The bytes were stored earlier, then damaged in the file: the result that pins them
    # by name alone (or the artifact the store already lists) is refused, as verify would
    # call it diverged the moment it was written.
    result = research_result()
    digest = result.observations[0].content_hash if pinned == "observation" else None
    digest = digest or result.artifact_hash
    stored = ledger.blobs.put(PAGE if pinned == "observation" else artifact_bytes(result.artifact))
    assert stored == digest
    sql(ledger_path, damage, (digest,))
    if pinned == "observation":  # named only: the store must hold it
        result = ActivityResult.build(
            kind="research",
            artifact=result.artifact,
            observations=[Observation("page", "https://example.org/a", digest)],
        )
    before = counts(ledger_path)
    with pytest.raises(Diverged) as caught:
        ledger.run("r").record_activity(result, stage_id="s1")
    assert caught.value.code == "blob-digest"  # verify's first finding, blob.digest
    assert caught.value.exit_code == ExitCode.DIVERGED
    assert digest in str(caught.value)
    assert counts(ledger_path) == before
    assert sql(ledger_path, "SELECT count(*) FROM runs WHERE run_id = 'r'") == [(0,)]


def test_stored_bytes_damaged_after_the_result_was_checked_are_never_pinned(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bytes change between the result's validation and the write: what is pinned is
    # re-hashed in the write transaction itself, so the change is seen there.
    from agentledger.activity import boundary
    from agentledger.activity.result import check_result as validate

    digest = ledger.blobs.put(PAGE)

    def validate_then_damage(result: object) -> ActivityResult:
        checked = validate(result)
        sql(ledger_path, "UPDATE blob_chunks SET data = X'00' WHERE digest = ?", (digest,))
        return checked

    monkeypatch.setattr(boundary, "check_result", validate_then_damage)
    result = ActivityResult.build(
        kind="research",
        artifact=None,
        observations=[Observation("page", "https://example.org/a", digest)],
    )
    before = counts(ledger_path)
    with pytest.raises(Diverged) as caught:
        ledger.run("r").record_activity(result, stage_id="s1")
    assert caught.value.code == "blob-digest"
    assert counts(ledger_path) == before
