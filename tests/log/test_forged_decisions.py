"""Decisions from unanchored rows (docs/RELIABILITY.md, "Never sign a forgery").

The activity boundary and the phase code decide from earlier entries: the team's roles, a
stage id or evidence set already used, the phase evidence in force. The attacker edits
the cells those decisions used to read (``team_roles``, the ``kind`` column); the victim's
next decision must not be fooled into a stage or an authorization it then signs, and a
decision the boundary got wrong must be found by verify at its step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentledger import ActivityRejected, Ledger, _core, journal_view
from agentledger.activity import boundary
from agentledger.activity.team import load_manifest_bytes
from agentledger.errors import AgentLedgerError, Diverged, ExitCode
from agentledger.phase import compile

from ..activity.activity_testkit import counts, research_result
from ..phase_ledger.ledger_testkit import REVIEWER, T0, compiler_input, move, started
from ..raw_entries import append_unvetted
from .logkit import checks, raw, rechain, reforge_log, verify

MANIFEST = b'[[roles]]\nrole = "scout"\nagent_kind = "research"\n'
FORGED_MANIFEST = b'[[roles]]\nrole = "scout"\nagent_kind = "coding"\n'


def _coding_stage(ledger: Ledger, stage: str = "s1", page: bytes = b"p1") -> Any:
    """A coding stage run by ``scout``, a research role: the team forbids it."""
    return ledger.run("r").record_activity(
        research_result(page=page, kind="coding"), stage_id=stage, role="scout"
    )


def _fresh_process() -> None:
    """Forget the rows this process verified (``journal_view``), as a new command would."""
    journal_view._VERIFIED.clear()


def _plant_forged_manifest(ledger: Ledger) -> str:
    """The attacker's own manifest in the blob store (declaring scout a coding role)."""
    return ledger.blobs.put(FORGED_MANIFEST)


# ---- the team: roles are the journal's, never the team_roles table's --------------------


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE team_roles SET agent_kind = 'coding'",
        "DELETE FROM team_roles",
        "UPDATE team_roles SET agent_kind = 'coding', manifest_hash = :forged",
    ],
    ids=["re-roled", "deleted", "forged-manifest"],
)
def test_an_edited_team_roles_table_does_not_let_a_forbidden_stage_in(
    ledger: Ledger, ledger_path: Path, edit: str
) -> None:
    load_manifest_bytes(ledger, MANIFEST)
    forged = _plant_forged_manifest(ledger)
    with raw(ledger_path) as conn:
        conn.execute(edit, {"forged": forged} if ":forged" in edit else {})
    before = counts(ledger_path)
    with pytest.raises(ActivityRejected) as caught:
        _coding_stage(ledger)
    assert caught.value.code == "kind-mismatch"
    assert counts(ledger_path) == before
    ledger.run("r").record_activity(research_result(page=b"p2"), stage_id="s2", role="scout")


@pytest.mark.parametrize("log", ["kept", "reforged"])
def test_a_forged_team_load_is_refused_not_obeyed(
    ledger: Ledger, ledger_path: Path, log: str
) -> None:
    """The ``team.loaded`` entry re-chained by hand to declare scout a coding role under the
    attacker's manifest (and the log recomputed over it, or not): its journal verifies on
    its own, but its head is not the one the log (or this install) recorded."""
    load_manifest_bytes(ledger, MANIFEST)
    forged = _plant_forged_manifest(ledger)
    with raw(ledger_path) as conn:
        body: dict[str, object] = {"manifest": forged, "roles": [["scout", "coding"]]}
        rechain(conn, "_team", 0, body)
        conn.execute("UPDATE team_roles SET agent_kind = 'coding', manifest_hash = ?", (forged,))
        if log == "reforged":
            reforge_log(conn)
    before = counts(ledger_path)
    with pytest.raises(Diverged) as caught:
        _coding_stage(ledger)
    assert caught.value.exit_code == ExitCode.DIVERGED
    assert counts(ledger_path) == before


def test_a_team_manifest_that_does_not_read_back_decides_nothing(
    ledger: Ledger, ledger_path: Path
) -> None:
    """The manifest blob a load pins is edited: no role is decided against it."""
    load_manifest_bytes(ledger, MANIFEST)
    with raw(ledger_path) as conn:
        conn.execute("UPDATE blob_chunks SET data = ? WHERE data = ?", (FORGED_MANIFEST, MANIFEST))
    before = counts(ledger_path)
    with pytest.raises(Diverged) as caught:
        ledger.run("r").record_activity(research_result(), stage_id="s1", role="scout")
    assert caught.value.code == "journal-tampered"
    assert "do not hash" in caught.value.message
    assert counts(ledger_path) == before


def _fooled_boundary(monkeypatch: pytest.MonkeyPatch, manifest: str | None) -> None:
    """The boundary as an edited table fooled it: the role decision returns ``manifest``."""
    monkeypatch.setattr(boundary, "_check_role", lambda *args: manifest)


@pytest.mark.parametrize("pinned", ["none", "forged"])
def test_verify_finds_a_stage_the_team_did_not_allow(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch, pinned: str
) -> None:
    """Recorded while the table was forged (no team, or the attacker's manifest), then the
    table put back: every row agrees again, and verify still re-checks the decision."""
    load_manifest_bytes(ledger, MANIFEST)
    forged = _plant_forged_manifest(ledger)
    with monkeypatch.context() as patch:
        _fooled_boundary(patch, forged if pinned == "forged" else None)
        entry = _coding_stage(ledger)
    report = verify(ledger_path)
    assert "activity.role_decision" in checks(report)
    (finding,) = [d for run in report.runs for d in run.divergences]
    assert (finding.run_id, finding.seq, finding.subject) == ("r", entry.seq, "s1")
    assert "role 'scout' as 'research'" in finding.expected
    assert "'coding' stage" in finding.actual


def _unsigned_seal(ledger: Ledger, ledger_path: Path) -> None:
    """Close the ledger and add an archive seal row, as anyone who writes the file can: its
    size the log's, so that no ``archive.extended`` shows; no checkpoint of an archive."""
    size = ledger.db.conn.execute("SELECT count(*) FROM entries").fetchall()[0][0]
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute(
            "INSERT INTO ledger_meta (key, value) VALUES ('archive', ?)",
            (json.dumps({"size": size}),),
        )


def test_a_seal_row_alone_does_not_unorder_the_team_loads(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stage pins a manifest only a later load declares; an unsigned seal row made verify
    judge team loads as an archive's (unordered): the finding went, exit 0."""
    load_manifest_bytes(ledger, MANIFEST)
    forged = _plant_forged_manifest(ledger)
    with monkeypatch.context() as patch:
        _fooled_boundary(patch, forged)
        _coding_stage(ledger)
    load_manifest_bytes(ledger, FORGED_MANIFEST)  # declares scout coding, after the stage
    assert checks(verify(ledger_path)) == {"activity.role_decision"}
    _unsigned_seal(ledger, ledger_path)
    assert "activity.role_decision" in checks(verify(ledger_path))


def test_a_seal_row_alone_does_not_let_audit_positions_skip(
    ledger: Ledger, ledger_path: Path
) -> None:
    for stage in ("s1", "s2"):
        ledger.run("r").record_activity(
            research_result(page=stage.encode()), stage_id=stage, role="scout"
        )
    _unsigned_seal(ledger, ledger_path)
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM audit_log WHERE pos = 0")
    assert "audit.gap" in checks(verify(ledger_path))


def test_verify_finds_an_undeclared_role(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_manifest_bytes(ledger, MANIFEST)
    with monkeypatch.context() as patch:
        _fooled_boundary(patch, None)
        ledger.run("r").record_activity(research_result(), stage_id="s1", role="stranger")
    report = verify(ledger_path)
    assert checks(report) == {"activity.role_decision"}
    (finding,) = [d for run in report.runs for d in run.divergences]
    assert "'stranger' is not one" in finding.expected


def test_a_stage_before_any_team_load_is_not_a_finding(ledger: Ledger, ledger_path: Path) -> None:
    """The team in force is the one loaded before the stage in the log, not today's."""
    _coding_stage(ledger)
    load_manifest_bytes(ledger, MANIFEST)
    assert checks(verify(ledger_path)) == set()


# ---- stage uniqueness and redundancy: the run's journal, never its kind column ----------


@pytest.mark.parametrize("process", ["fresh", "warm"])
@pytest.mark.parametrize("second", ["same stage id", "same evidence"])
def test_an_edited_kind_cell_does_not_hide_an_earlier_stage(
    ledger: Ledger, ledger_path: Path, second: str, process: str
) -> None:
    """A fresh process refuses the journal; one that verified the earlier stage before
    still sees it, as its bytes said, and refuses the second stage for what it is."""
    run = ledger.run("r")
    first = run.record_activity(research_result(), stage_id="s1")
    with ledger.db.snapshot() as conn:
        journal_view.read_run(conn, ledger.id, "r")
    with raw(ledger_path) as conn:
        conn.execute(
            "UPDATE entries SET kind = 'step' WHERE run_id = 'r' AND seq = ?", (first.seq,)
        )
    if process == "fresh":
        _fresh_process()
    before = counts(ledger_path)
    with pytest.raises(ActivityRejected if process == "warm" else Diverged) as caught:
        if second == "same stage id":
            run.record_activity(research_result(page=b"other"), stage_id="s1")
        else:
            run.record_activity(research_result(), stage_id="s2")
    if process == "fresh":
        assert caught.value.code == "journal-tampered"
        assert counts(ledger_path) == before
    elif second == "same stage id":
        assert caught.value.code == "duplicate-stage"
        assert counts(ledger_path) == before
    else:
        assert caught.value.code == "redundant-evidence"  # the one refusal journaled


@pytest.mark.parametrize("marked_limit", [200_000, 5, 0])
def test_verify_finds_a_duplicate_and_a_redundant_stage(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch, marked_limit: int
) -> None:
    """Let in by a fooled boundary (the earlier stage hidden from it), then the cell put
    back: verify re-derives both decisions from the journal, whether the journal pass
    marked the stages (fetched by key) or there were more than it keeps (scanned)."""
    monkeypatch.setattr("agentledger.verify.journal_pass.MARKED_LIMIT", marked_limit)
    # Results the boundary never decided (not mirrored): with a limit of 5, more stages than
    # the pass keeps but not more decisions, so the decided runs are scanned one by one.
    empty = {"evidence_set_hash": _core.evidence_set_hash([]), "observations": []}
    plain = [("activity.result", {"stage_id": f"p{n}", **empty}) for n in range(6)]
    append_unvetted(ledger, "plain", plain)
    run = ledger.run("r")
    run.record_activity(research_result(), stage_id="s1")
    with monkeypatch.context() as patch:
        patch.setattr(boundary, "earlier_result", lambda *args: None, raising=False)
        patch.setattr(boundary, "_earlier", lambda *args: None, raising=False)
        duplicate = run.record_activity(research_result(page=b"other"), stage_id="s1")
        redundant = run.record_activity(research_result(), stage_id="s2")
    report = verify(ledger_path)
    found = {(d.seq, d.check) for run in report.runs for d in run.divergences}
    assert found == {
        (duplicate.seq, "activity.stage_unique"),
        (redundant.seq, "activity.redundant"),
    }


def _ghost_prior(journal: object, member: str, value: str) -> tuple[int, str] | None:
    return (0, "ghost") if member == "evidence_set_hash" else None


def test_a_refusal_naming_no_earlier_result_is_a_finding(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fooled boundary refuses a stage as redundant with a prior that is not there."""
    run = ledger.run("r")
    with monkeypatch.context() as patch:
        patch.setattr(boundary, "earlier_result", _ghost_prior, raising=False)
        patch.setattr(boundary, "_earlier", lambda *args: None, raising=False)
        with pytest.raises(ActivityRejected) as caught:
            run.record_activity(research_result(), stage_id="s1")
    assert caught.value.code == "redundant-evidence"
    assert "activity.refusal" in checks(verify(ledger_path))


# ---- phase authority: the run's journal, never its kind column --------------------------


@pytest.mark.parametrize("process", ["fresh", "warm"])
def test_a_hidden_narrowing_does_not_widen_phase_authority(
    ledger: Ledger, ledger_path: Path, process: str
) -> None:
    """The kind cell of a narrowing transition edited: read by the column, the wider
    evidence before it would be in force, and the victim would sign an allowed decision.
    A fresh process refuses the journal; one that verified the transition before decides
    from what its bytes said (a stale digest: denied)."""
    run = started(ledger, "run-a", "implement")
    wide = run.phase_state().effective
    assert wide is not None
    move(run, compiler_input("verify"), operation="narrow")
    run.phase_state()  # this process verifies the run up to the transition
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET kind = 'step' WHERE kind = 'phase.transition'")
    if process == "fresh":
        _fresh_process()
        before = counts(ledger_path)
        with pytest.raises(AgentLedgerError) as caught:
            run.authorize("credential.access", ["vault:prod"], evidence_digest=wide["digest"])
        assert caught.value.code == "phase-state-tampered"
        assert caught.value.exit_code == ExitCode.DIVERGED
        assert counts(ledger_path) == before
    else:
        decision = run.authorize(
            "credential.access", ["vault:prod"], evidence_digest=wide["digest"]
        )
        assert (decision.allowed, decision.reason) == (False, "stale-evidence")


def test_a_hidden_rejection_does_not_let_an_approval_be_approved(
    ledger: Ledger, ledger_path: Path
) -> None:
    """The kind cell of the entry that rejected an approval edited: read by the column, the
    approval would still be pending, and the victim would sign its approval."""
    run = started(ledger, "run-a", "explore")
    approval = move(run, compiler_input("implement"), operation="widen").approval
    run.decide_phase_approval(approval["id"], "rejected", actor=REVIEWER, note="No.", now=T0)
    with raw(ledger_path) as conn:
        conn.execute(
            "UPDATE entries SET kind = 'step' WHERE run_id = 'run-a' AND seq = "
            "(SELECT max(seq) FROM entries WHERE run_id = 'run-a')"
        )
    _fresh_process()
    before = counts(ledger_path)
    with pytest.raises(AgentLedgerError) as caught:
        run.decide_phase_approval(approval["id"], "approved", actor=REVIEWER, now=T0)
    assert caught.value.code == "phase-state-tampered"
    assert counts(ledger_path) == before


def test_a_relabelled_entry_grants_no_phase_authority(ledger: Ledger, ledger_path: Path) -> None:
    """An ordinary entry shaped like phase evidence (wide, reproducible), relabelled
    ``phase.evidence`` in the kind column only: it is not the run's evidence."""
    document = compiler_input("implement")
    evidence = compile(document)
    run = ledger.run("run-a")
    run.append(
        "note",
        {
            "input_blob": ledger.blobs.put(_core.canonicalize(document)),
            "evidence_blob": ledger.blobs.put(_core.canonicalize(evidence)),
        },
    )
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET kind = 'phase.evidence' WHERE run_id = 'run-a'")
    before = counts(ledger_path)
    with pytest.raises(AgentLedgerError) as caught:
        run.authorize("credential.access", ["vault:prod"], evidence_digest=evidence["digest"])
    assert caught.value.code == "phase-state-tampered"
    assert counts(ledger_path) == before
    with raw(ledger_path) as conn:  # put back: the run has no phase evidence at all
        conn.execute("UPDATE entries SET kind = 'note' WHERE run_id = 'run-a'")
    decision = run.authorize(
        "credential.access", ["vault:prod"], evidence_digest=evidence["digest"]
    )
    assert (decision.allowed, decision.reason) == (False, "no-phase-evidence")


# ---- the command line: a refusal is exit 2, one line, nothing written ---------------------


def test_the_commands_refuse_a_tampered_journal_with_exit_2(
    ledger: Ledger, ledger_path: Path, cli: Any, tmp_path: Path
) -> None:
    run = started(ledger, "run-a", "implement")
    wide = run.phase_state().effective
    assert wide is not None
    move(run, compiler_input("verify"), operation="narrow")
    run.record_activity(research_result(), stage_id="s1")
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET kind = 'step' WHERE kind = 'phase.transition'")
    _fresh_process()
    before = counts(ledger_path)
    page = tmp_path / "page.html"
    page.write_bytes(b"<html>another page</html>")
    research = cli("activity", "research", "run-a", "s2", "--page", f"https://e.org={page}")
    assert research.code == 2
    assert research.err.startswith("error [journal-tampered]:")
    authorize = cli(
        "phase",
        "authorize",
        "run-a",
        "credential.access",
        "vault:prod",
        "--evidence",
        wide["digest"],
    )
    assert authorize.code == 2
    assert authorize.err.startswith("error [phase-state-tampered]:")
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == 2
    assert "kind column" in shown.json()["problems"][0]["problem"]
    assert counts(ledger_path) == before


@pytest.mark.parametrize(
    "roles",
    [[["scout", "coding"]], [["scout", "research"], ["spy", "ops"]], []],
    ids=["re-roled", "added", "none"],
)
def test_verify_finds_a_team_load_its_manifest_does_not_declare(
    ledger: Ledger, ledger_path: Path, cli: Any, roles: list[list[str]]
) -> None:
    """A ``team.loaded`` entry appended below ``team load`` that pins the real manifest
    but records other roles (the table kept in step): the boundary refuses to decide on it
    (``confirm_manifest``), so verify must not call the ledger clean (it did)."""
    load_manifest_bytes(ledger, MANIFEST)
    body = {"manifest": _core.blake3_hex(MANIFEST), "roles": roles, "loaded_at": "2026-01-01"}
    (entry,) = append_unvetted(ledger, "_team", [("team.loaded", body)])
    with raw(ledger_path) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO team_roles (role, agent_kind, manifest_hash, loaded_at) "
            "VALUES (?, ?, ?, ?)",
            [(role, kind, body["manifest"], body["loaded_at"]) for role, kind in roles],
        )
    report = verify(ledger_path)
    findings = [(d.check, d.run_id, d.seq) for run in report.runs for d in run.divergences]
    findings += [(d.check, d.run_id, d.seq) for d in report.workspace]
    assert ("team.load", "_team", entry.seq) in findings
    assert cli("verify", "--all").code == ExitCode.DIVERGED


def test_a_team_load_whose_manifest_was_defaced_is_a_finding_of_verify_team_too(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """The manifest a team load pins defaced in the store: `verify --all` called _team
    diverged (team.load), `verify _team` called it clean (the load was checked only by a
    whole verify)."""
    load_manifest_bytes(ledger, MANIFEST)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute(
            "UPDATE blob_chunks SET data = x'00' WHERE digest = ?", (_core.blake3_hex(MANIFEST),)
        )
    for args in (["verify", "--all", "--json"], ["verify", "_team", "--json"]):
        document = cli(*args).json()
        found = [
            (d["check"], d["seq"])
            for run in document["failures"]
            if run["run"] == "_team"
            for d in run["divergences"]
        ]
        assert ("team.load", 0) in found, (args, found)


def test_a_stage_whose_team_manifest_was_defaced_reads_the_same_in_both_verdicts(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """The team manifest a stage pins defaced in the store: `verify --all` named the blob
    on the stage (blob.digest, blob.size: it re-hashes every blob and gives a damaged one
    to each result naming it), `verify r` only team.manifest (it re-hashed the pinned
    observations and artifact alone)."""
    load_manifest_bytes(ledger, MANIFEST)
    ledger.run("r").record_activity(research_result(), stage_id="s1", role="scout")
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute(
            "UPDATE blob_chunks SET data = x'00' WHERE digest = ?", (_core.blake3_hex(MANIFEST),)
        )

    def findings(*args: str) -> list[tuple[str, int]]:
        document = cli(*args).json()
        return sorted(
            (d["check"], d["seq"])
            for run in document["failures"]
            if run["run"] == "r"
            for d in run["divergences"]
        )

    whole = findings("verify", "--all", "--json")
    assert ("blob.digest", 0) in whole
    assert findings("verify", "r", "--json") == whole


@pytest.mark.parametrize("field", ["team_manifest", "kind"])
def test_an_archived_stage_pinning_a_list_is_a_finding_not_a_crash(
    ledger: Ledger, cli: Any, tmp_path: Path, field: str
) -> None:
    """In an archive (team loads unordered) a stage whose pinned manifest or kind is not a
    string made verify fail with TypeError (exit 70)."""
    load_manifest_bytes(ledger, MANIFEST)
    entry = ledger.run("r").record_activity(research_result(), stage_id="s1", role="scout")
    out = tmp_path / "out.db"
    assert cli("archive", str(out)).code == ExitCode.OK
    with raw(out) as conn:
        ((data,),) = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = 'r' AND seq = ?", (entry.seq,)
        ).fetchall()
        document = json.loads(data)
        document["body"][field] = [1]
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = 'r' AND seq = ?",
            (_core.canonicalize(document), entry.seq),
        )
    result = cli("verify", "--all", "--json", ledger=out)
    assert result.code == ExitCode.DIVERGED, result.err
    assert "activity.role_decision" in result.json()["findings_by_check"]
