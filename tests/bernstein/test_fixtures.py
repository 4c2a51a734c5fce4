"""Both workdirs bernstein 3.23.0 wrote: import, bernstein's own verdicts in compat mode,
the strict verdict, byte-identical export, idempotent re-import, and the CLI."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.bernstein import (
    DirectoryWorkdir,
    LedgerWorkdir,
    export_workdir,
    import_workdir,
    verify_ledger_runs,
)
from agentledger.bernstein.audit_chain import verify_audit
from agentledger.keys import KeyStore
from agentledger.verify import VerifyOptions

from .bernstein_testkit import (
    SHAPES,
    SHAPES_SIGNERS,
    SMALL,
    SMALL_SIGNER,
    copy_workdir,
    edit_row,
    private_key_file,
)
from .conftest import Verifier

VERDICTS = json.loads((SHAPES / "verdicts.json").read_text("utf-8"))["runs"]
SHAPE_RUNS = sorted(VERDICTS)


def same_tree(left: Path, right: Path) -> bool:
    """Every file and folder in both, with identical bytes (not only stat signatures)."""
    comparison = filecmp.dircmp(left, right)
    if comparison.left_only or comparison.right_only or comparison.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(left, right, comparison.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(same_tree(left / d, right / d) for d in comparison.common_dirs)


@pytest.fixture(scope="module")
def shapes_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shapes") / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SHAPES)
    return path


@pytest.mark.parametrize("run_id", SHAPE_RUNS)
def test_compat_mode_reproduces_bernsteins_exit_code_for_every_shape(
    shapes_ledger: Path, run_id: str
) -> None:
    with Ledger.open(shapes_ledger) as ledger:
        verdict = ledger.verify_run(run_id, VerifyOptions(compat="bernstein"))
    assert verdict.code == VERDICTS[run_id]["exit_code"]


@pytest.mark.parametrize("run_id", SHAPE_RUNS)
def test_stage_flags_claims_and_browser_verdicts_match_bernsteins_json(
    shapes_ledger: Path, run_id: str
) -> None:
    expected = VERDICTS[run_id]
    with Ledger.open(shapes_ledger) as ledger, ledger.db.snapshot() as conn:
        workdir = LedgerWorkdir(conn, ledger.blobs)
        (result,) = verify_ledger_runs(conn, {run_id: workdir.runs[run_id]}, stages=True)
    assert result.head == expected["journal"]["head"]
    assert result.rows == expected["journal"]["count"]
    ours = result.compat_json()
    theirs: dict[str, Any] = expected["cli_json"]
    assert (ours["found"], ours["ok"], ours["chain_ok"]) == (
        theirs["found"],
        theirs["ok"],
        theirs["chain_ok"],
    )
    assert len(ours["stages"]) == len(theirs["stages"])
    for mine, bernsteins in zip(ours["stages"], theirs["stages"], strict=True):
        for key in ("stage_id", "kind", "ok", "evidence_reattached", "signed_receipt_verified"):
            assert mine[key] == bernsteins[key], (mine["stage_id"], key)
        assert len(mine["claim_verdicts"]) == len(bernsteins["claim_verdicts"])
        assert [c["citations_checked"] for c in mine["claim_verdicts"]] == [
            c["citations_checked"] for c in bernsteins["claim_verdicts"]
        ]
        if bernsteins["browser_verdict"] is None:
            assert mine["browser_verdict"] is None
        else:
            mine_bv, theirs_bv = mine["browser_verdict"], bernsteins["browser_verdict"]
            assert mine_bv["ok"] == theirs_bv["ok"]
            assert [s["ok"] for s in mine_bv["steps"]] == [s["ok"] for s in theirs_bv["steps"]]
            assert [(c["check_id"], c["ok"], c["passed"]) for c in mine_bv["checks"]] == [
                (c["check_id"], c["ok"], c["passed"]) for c in theirs_bv["checks"]
            ]


def test_the_audit_chains_of_both_fixtures_verify_with_their_key() -> None:
    for workdir, records in ((SHAPES, 68), (SMALL, 12)):
        master = (workdir / "audit.key").read_bytes().strip()
        chain = verify_audit(DirectoryWorkdir(workdir).audit_segments(), master)
        assert chain.ok and chain.records == records


def test_the_audit_chain_does_not_verify_with_another_key() -> None:
    chain = verify_audit(DirectoryWorkdir(SMALL).audit_segments(), b"1" * 64)
    assert not chain.ok
    assert {p.reason for p in chain.problems} == {"HMAC mismatch"}


def test_strict_mode_is_clean_on_untampered_fixtures_with_their_keys(
    imported: Verifier, tmp_path: Path
) -> None:
    small = imported(SMALL, key=private_key_file(SMALL, tmp_path / "k1"), trust=(SMALL_SIGNER,))
    assert set(small.strict.values()) == {0}
    shapes = imported(SHAPES, key=private_key_file(SHAPES, tmp_path / "k2"), trust=SHAPES_SIGNERS)
    assert set(shapes.strict.values()) == {0}
    assert shapes.compat == {r: VERDICTS[r]["exit_code"] for r in SHAPE_RUNS}


def test_receipts_signed_only_by_their_embedded_key_are_strict_findings(
    imported: Verifier, tmp_path: Path
) -> None:
    outcome = imported(SMALL, key=private_key_file(SMALL, tmp_path / "k"))
    assert outcome.compat["run-001"] == 0
    assert outcome.strict["run-001"] == 2
    assert outcome.findings["run-001"] == {"bernstein.receipt.self_asserted"}
    assert {(seq, subject) for seq, _, subject in outcome.fields["run-001"]} == {
        (4, "signer_public_key_pem"),
        (5, "signer_public_key_pem"),
    }


def test_a_receipt_signer_this_install_trusts_is_trusted_as_with_trust(
    imported: Verifier, tmp_path: Path
) -> None:
    """`keys trust` (the install's trust file) counts for bernstein receipts as for native
    ones: only `--trust` had, so the report listed the key as trusted and still called its
    receipts self-asserted."""
    KeyStore().add_trust(SMALL_SIGNER)
    outcome = imported(SMALL, key=private_key_file(SMALL, tmp_path / "k"))
    assert outcome.strict["run-001"] == 0, outcome.findings["run-001"]


@pytest.mark.parametrize("source", [SMALL, SHAPES], ids=["small", "shapes"])
def test_export_gives_back_a_byte_identical_workdir(source: Path, tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, source)
        export_workdir(ledger, tmp_path / "out")
    assert same_tree(source / ".sdd", tmp_path / "out" / ".sdd")


def test_export_gives_back_what_runs_holds_besides_runs(tmp_path: Path) -> None:
    """A file directly in ``.sdd/runs`` and a run folder without a journal are imported
    and pinned; a whole export wrote neither back (it kept only paths of imported runs)."""
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    (workdir / ".sdd/runs/notes.txt").write_bytes(b"kept\n")
    (workdir / ".sdd/runs/run-004").mkdir()
    (workdir / ".sdd/runs/run-005").mkdir()
    (workdir / ".sdd/runs/run-005/run-receipt.json").write_bytes(b"{}")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, workdir)
        export_workdir(ledger, tmp_path / "out")
        export_workdir(ledger, tmp_path / "some", ["run-002"])
    assert same_tree(workdir / ".sdd", tmp_path / "out" / ".sdd")
    assert sorted(p.name for p in (tmp_path / "some/.sdd/runs").iterdir()) == ["run-002"]


def test_export_of_some_runs_writes_only_their_journals(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, SMALL)
        export_workdir(ledger, tmp_path / "out", ["run-002"])
    assert sorted(p.name for p in (tmp_path / "out/.sdd/runs").iterdir()) == ["run-002"]
    assert same_tree(SMALL / ".sdd/cas", tmp_path / "out/.sdd/cas")


def test_reimport_is_idempotent(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        first = import_workdir(ledger, SMALL)
        entries = ledger.db.scalar("SELECT count(*) FROM entries")
        second = import_workdir(ledger, SMALL)
        assert ledger.db.scalar("SELECT count(*) FROM entries") == entries
    assert first.runs_imported == ["run-001", "run-002", "run-003"]
    assert second.runs_imported == [] and second.files_added == 0
    assert sorted(second.runs_unchanged) == ["run-001", "run-002", "run-003"]
    assert second.code == 0


def test_journals_checked_in_groups_import_what_one_group_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import reads its new journals back and checks them a group of about
    ``JOURNAL_GROUP_BYTES`` at a time (its memory does not grow with the workdir's
    journals): each group within the budget or one journal alone, and the same entries,
    byte for byte, as when every journal is checked in one group."""
    from agentledger import _core
    from agentledger.bernstein import importer
    from agentledger.bernstein.kinds import IMPORT_KIND

    calls: list[list[int]] = []
    check = _core.bernstein_verify_journals

    def counted(journals: list[bytes], *args: Any) -> Any:
        calls.append([len(data) for data in journals])
        return check(journals, *args)

    monkeypatch.setattr(_core, "bernstein_verify_journals", counted)
    imported: list[list[Any]] = []
    budgets = (1 << 40, max(p.stat().st_size for p in (SHAPES / ".sdd" / "runs").glob("*/*")))
    for budget in budgets:
        calls.clear()
        monkeypatch.setattr(importer, "JOURNAL_GROUP_BYTES", budget)
        with Ledger.open(tmp_path / f"{budget}.db") as ledger:
            summary = import_workdir(ledger, SHAPES)
            rows = ledger.db.rows(
                "SELECT run_id, bytes FROM entries WHERE kind = ? ORDER BY run_id, seq",
                (IMPORT_KIND,),
            )
            # Each entry's body (its envelope holds the time it was written).
            imported.append([(run_id, json.loads(data)["body"]) for run_id, data in rows])
        assert sorted(summary.runs_imported) == SHAPE_RUNS
        assert sum(map(len, calls)) == len(SHAPE_RUNS)
        assert all(sum(sizes) <= budget or len(sizes) == 1 for sizes in calls)
    assert len(calls) > 2  # the smaller budget made groups
    assert len(imported[0]) == len(SHAPE_RUNS) and imported[0] == imported[1]


def test_a_run_changed_since_import_is_reported_not_merged(tmp_path: Path) -> None:
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, workdir)
        original = ledger.blobs.get(
            str(
                ledger.db.scalar(
                    "SELECT digest FROM bernstein_files WHERE path LIKE '%run-002/journal.jsonl'"
                )
            )
        )
        edit_row(workdir, "run-002", 6, status="changed")
        again = import_workdir(ledger, workdir)
        kept = ledger.blobs.get(
            str(
                ledger.db.scalar(
                    "SELECT digest FROM bernstein_files WHERE path LIKE '%run-002/journal.jsonl'"
                )
            )
        )
    assert again.runs_changed == ["run-002"]
    assert again.code == 2
    assert kept == original


def test_new_runs_and_blobs_are_added_on_reimport_and_stay_anchored(tmp_path: Path) -> None:
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    moved = tmp_path / "run-003"
    (workdir / ".sdd/runs/run-003").rename(moved)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        assert import_workdir(ledger, workdir).runs_imported == ["run-001", "run-002"]
        moved.rename(workdir / ".sdd/runs/run-003")
        assert import_workdir(ledger, workdir).runs_imported == ["run-003"]
        report = ledger.verify(options=VerifyOptions(compat="bernstein"))
    assert report.code == 0, [d.to_json() for r in report.runs for d in r.divergences]


def test_cli_import_verify_activity_verify_and_export(cli: Any, tmp_path: Path) -> None:
    result = cli("import", "bernstein", str(SHAPES), "--json")
    assert result.code == 0
    assert len(result.json()["runs_imported"]) == 13
    compat = cli("verify", "--compat", "bernstein", "--json")
    assert compat.code == 1  # bernstein answers 1 for the two runs without activity rows
    assert compat.json()["diverged"] == 0
    assert cli("activity", "verify", "r0003-dataops", "--compat", "bernstein").code == 0
    assert cli("activity", "verify", "r0010-plain-long", "--compat", "bernstein").code == 1
    assert cli("activity", "verify", "r0010-plain-long").code == 1  # clean, no activity
    trust = [arg for signer in SHAPES_SIGNERS for arg in ("--trust", signer)]
    key = private_key_file(SHAPES, tmp_path / "audit.key")
    assert cli("activity", "verify", "r0003-dataops", "--audit-key", str(key), *trust).code == 0
    assert cli("activity", "verify", "r0003-dataops").code == 2  # self-asserted signer
    assert cli("export", "bernstein", str(tmp_path / "out")).code == 0
    assert same_tree(SHAPES / ".sdd", tmp_path / "out" / ".sdd")
    assert cli("export", "bernstein", str(tmp_path / "out")).code == 64  # not empty
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")  # was an internal error (exit 70)
    refused = cli("export", "bernstein", str(dangling))
    assert refused.code == 64 and "symbolic link to nothing" in refused.err, refused.err
    assert not (tmp_path / "nowhere").exists()


def test_cli_import_checks_the_audit_chain_with_the_given_key(cli: Any, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(b"1" * 64)
    result = cli("import", "bernstein", str(SMALL), "--audit-key", str(wrong), "--json")
    assert result.code == 2
    assert result.json()["audit_ok"] is False


def test_a_run_bernstein_answers_1_says_why_and_receipts_are_counted(shapes_ledger: Path) -> None:
    with Ledger.open(shapes_ledger) as ledger:
        report = ledger.verify(options=VerifyOptions(compat="bernstein"))
    plain = next(v for v in report.runs if v.run_id == "r0000-plain")
    assert plain.code == 1
    assert plain.not_found == "run journal holds no activity.result entries (bernstein exits 1)"
    assert plain.to_json()["not_found"] == plain.not_found
    # Every stored receipt of the fixture is re-checked, and its signatures counted.
    stored = [s for v in VERDICTS.values() for s in v["cli_json"].get("stages", [])]
    verified = [s for s in stored if s["signed_receipt_verified"]]
    assert report.receipts_checked == len(verified) > 0
    assert report.signatures_checked >= report.receipts_checked
