"""`show` verifies what it shows: tampered data is never presented as normal."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import apsw
import pytest
from rich.console import Console

from agentledger import Ledger
from agentledger.activity.stages import stage_summaries
from agentledger.cli.journal import stages_tree
from agentledger.verify.marks import mark_run
from tests.report.conftest import Demo, as_json


def test_show_marks_an_edited_body_and_exits_2(demo: Demo, demo_cli: Any) -> None:
    run = demo.run("entry.hash")
    code, out, _ = demo_cli("show", run)
    assert code == 2
    step3 = next(line for line in out.splitlines() if " 3 step " in line)
    assert "edited" in step3 and "clean" not in step3
    assert "edited (entry.hash)" in out
    assert "DIVERGED" in out.splitlines()[0]
    code, out, _ = demo_cli("show", run, "--json")
    assert code == 2
    shown = as_json(out)
    assert shown["code"] == 2 and shown["status"] == "diverged"
    by_seq = {e["seq"]: e for e in shown["entries"]}
    assert [m["mark"] for m in by_seq[3]["marks"]] == ["edited"]
    assert by_seq[3]["marks"][0]["check"] == "entry.hash"
    assert by_seq[2]["status"] == "clean" and by_seq[2]["marks"] == []


def test_show_gives_each_finding_its_expected_and_actual_as_verify_does(
    demo: Demo, demo_cli: Any
) -> None:
    """A step's mark said only the finding's words ("edited (entry.hash): the bytes
    changed…", "chain.prev: …"): the hashes `verify RUN` gives as expected and actual were
    in `show --json` alone. The terminal shows them under the mark, as verify does."""
    for check in ("entry.hash", "chain.gap", "run.head_seq"):
        run = demo.run(check)
        _, out, _ = demo_cli("verify", run, "--json")
        found = [d for f in as_json(out)["failures"] for d in f["divergences"]]
        assert check in {d["check"] for d in found}
        code, shown, _ = demo_cli("show", run)
        assert code == 2
        lines = [line.split("── ", 1)[-1] for line in shown.splitlines()]
        for divergence in found:
            assert f"expected {divergence['expected']}" in lines or (
                f"expected {divergence['expected']}," in shown
            ), (check, divergence)
            assert f"actual   {divergence['actual']}" in lines or (
                f"actual {divergence['actual']}" in shown
            ), (check, divergence)


def test_show_names_a_deleted_step(demo: Demo, demo_cli: Any) -> None:
    run = demo.run("chain.gap")
    code, out, _ = demo_cli("show", run)
    assert code == 2
    assert "step 5 missing: deleted from the chain" in out
    step6 = next(line for line in out.splitlines() if " 6 step " in line)
    assert "gap before it" in step6
    code, out, _ = demo_cli("show", run, "--json")
    assert code == 2
    by_seq = {e["seq"]: e for e in as_json(out)["entries"]}
    assert 5 not in by_seq
    assert by_seq[6]["missing_before"] == [5, 5]


def test_show_says_when_the_runs_cached_head_was_edited(demo: Demo, demo_cli: Any) -> None:
    code, out, _ = demo_cli("show", demo.run("run.head_seq"))
    assert code == 2
    assert "run.head_seq" in out


def test_a_clean_run_is_shown_clean_and_exits_0(ledger: Ledger, cli: Any) -> None:
    ledger.run("r").append_many([("step", {"n": n}) for n in range(3)])
    shown = cli("show", "r")
    assert shown.code == 0
    assert "verified clean" in shown.out.splitlines()[0]
    assert "✗" not in shown.out
    assert cli("show", "r", "--json").json()["code"] == 0


def _research_of_three_pages(path: Path) -> str:
    """Run ``r``: one research stage over three stored pages; the second page's digest."""
    with Ledger.open(path) as ledger:
        research = ledger.run("r").research("research-0")
        pages = [research.fetch(f"https://example.org/{n}", f"page {n}".encode()) for n in range(3)]
        research.finish(artifact={"summary": "three pages"})
    return pages[1].content_hash


def _research_with_a_lost_blob(path: Path) -> str:
    lost = _research_of_three_pages(path)
    conn = apsw.Connection(str(path))
    conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (lost,))
    conn.execute("DELETE FROM blobs WHERE digest = ?", (lost,))
    conn.close()
    return lost


def test_a_stage_with_2_of_3_blobs_is_incomplete_never_green(ledger_path: Path, cli: Any) -> None:
    _research_with_a_lost_blob(ledger_path)
    shown = cli("show", "r")
    assert shown.code == 2
    stage_line = next(line for line in shown.out.splitlines() if "research-0  research" in line)
    assert "stage incomplete" in stage_line
    assert "2/3 blobs" in shown.out
    # In colour, "completed" is not green: the stage's state is shown with what is wrong.
    with Ledger.open(ledger_path) as ledger:
        stages = stage_summaries(ledger, list(ledger.run("r").entries()))
        verdict = ledger.verify(["r"]).runs[0]
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="standard", width=200)
    console.print(stages_tree(stages, mark_run(verdict, [], stages)))
    coloured = buffer.getvalue()
    assert "\x1b[32mcompleted" not in coloured
    assert "\x1b[31mcompleted" in coloured
    result = cli("show", "r", "--json").json()
    assert result["code"] == 2
    activity = next(e for e in result["entries"] if e["kind"] == "activity.result")
    assert "stage incomplete" in [m["mark"] for m in activity["marks"]]


@pytest.mark.parametrize(
    "damage",
    [
        "DELETE FROM blob_chunks WHERE digest = ?",
        "UPDATE blob_chunks SET data = CAST('changed' AS BLOB) WHERE digest = ?",
    ],
    ids=["chunks-removed", "chunk-edited"],
)
def test_a_listed_blob_whose_bytes_are_gone_is_not_evidence_present(
    ledger_path: Path, cli: Any, damage: str
) -> None:
    """The blob row is left: only its bytes changed. Verify finds the blob damaged, so
    show must not count it present (it had said 3/3 blobs beside verify's finding)."""
    lost = _research_of_three_pages(ledger_path)
    conn = apsw.Connection(str(ledger_path))
    conn.execute(damage, (lost,))
    conn.close()
    shown = cli("show", "r")
    assert shown.code == 2
    assert "2/3 blobs" in shown.out
    stage_line = next(line for line in shown.out.splitlines() if "research-0  research" in line)
    assert "stage incomplete" in stage_line
    stage = cli("show", "r", "--json").json()["stages"][0]
    assert stage["evidence"] == {"observations": 3, "present": 2}


def test_show_trust_reaches_the_stages_receipt_as_it_reaches_the_verdict(
    ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger:
        _data_stage(ledger)
        public = ledger.keys.install_public_key()
    assert public is not None
    elsewhere = str(tmp_path / "elsewhere")  # another machine: trusts the key by --trust only
    shown = cli("--home", elsewhere, "show", "r", "--trust", public, "--json")
    assert shown.code == 0 and shown.json()["run_status"] == "clean"
    assert shown.json()["stages"][0]["receipt"] == "verified"
    text = cli("--home", elsewhere, "show", "r", "--trust", public)
    assert "receipt verified" in text.out and "untrusted" not in text.out
    untrusted = cli("--home", elsewhere, "show", "r", "--json")  # without it: both say so
    assert untrusted.code == 2 and untrusted.json()["stages"][0]["receipt"] == "untrusted signer"


def test_show_lists_a_finding_at_a_step_the_file_no_longer_holds(
    ledger_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger:
        run = ledger.run("r")
        run.append("step", {"n": 0})
        research = run.research("research-0")
        research.fetch("https://example.org/", b"<html>page</html>")
        research.finish(artifact={"summary": "s"})
        run.append("step", {"n": 2})
    conn = apsw.Connection(str(ledger_path))
    conn.execute("DELETE FROM entries WHERE run_id = 'r' AND seq = 1")  # the activity's entry
    conn.close()
    verified = cli("verify", "r", "--json").json()
    found = {(d["seq"], d["check"]) for f in verified["failures"] for d in f["divergences"]}
    assert (1, "audit.orphan") in found
    shown = cli("show", "r", "--json")
    assert shown.code == 2
    listed = {m["check"] for m in shown.json()["run_findings"]}
    listed |= {m["check"] for e in shown.json()["entries"] for m in e["marks"]}
    assert {check for _, check in found} <= listed  # every finding, none dropped
    text = cli("show", "r").out
    assert "step 1: audit.orphan" in text


def test_show_of_a_receipt_nested_too_deep_lists_it_as_verify_does(
    ledger_path: Path, cli: Any
) -> None:
    from agentledger import _core
    from tests.raw_entries import append_unvetted

    with Ledger.open(ledger_path) as ledger:
        with ledger.db.write():
            digest = ledger.blobs.put(b"[" * 100_000 + b"]" * 100_000)
        body = {
            "kind": "data", "stage_id": "s", "artifact_hash": digest,
            "evidence_set_hash": _core.evidence_set_hash([]), "observations": [],
        }  # fmt: skip
        append_unvetted(ledger, "r", [("activity.result", body)])
    verified = cli("verify", "r", "--json")
    assert verified.code == 2
    checks = {d["check"] for f in verified.json()["failures"] for d in f["divergences"]}
    assert "receipt.json" in checks
    shown = cli("show", "r", "--json")
    assert shown.code == 2, shown.err
    assert shown.json()["stages"][0]["receipt"] == "invalid: receipt.json"


def test_show_draws_a_stage_whose_evidence_hash_is_not_a_string(
    ledger_path: Path, cli: Any
) -> None:
    from tests.raw_entries import append_unvetted

    with Ledger.open(ledger_path) as ledger:
        body = {"kind": "research", "stage_id": "s", "evidence_set_hash": 7, "observations": []}
        append_unvetted(ledger, "r", [("activity.result", body)])
    shown = cli("show", "r")
    assert shown.code == 2, shown.err  # as `verify r`: the stage is not a valid result
    assert cli("verify", "r").code == 2
    assert "evidence 7" in shown.out


def test_show_calls_a_receipt_without_chunks_missing_as_verify_does(
    ledger_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger:
        receipt = _data_stage(ledger).body["artifact_hash"]
    conn = apsw.Connection(str(ledger_path))  # its row stays, its bytes go
    conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (receipt,))
    conn.close()
    verified = cli("verify", "r", "--json").json()
    checks = {d["check"] for f in verified["failures"] for d in f["divergences"]}
    assert "receipt.missing" in checks
    shown = cli("show", "r", "--json")
    assert shown.code == 2 and shown.json()["stages"][0]["receipt"] == "missing"


def _data_stage(ledger: Ledger) -> Any:
    """Run ``r``'s data stage ``data-0`` (one input, one step, one output): its entry."""
    data = ledger.run("r").data("data-0")
    data.add_input("in.csv", b"a,b\n1,2\n")
    data.plan(["sum b"])
    data.add_output("out.csv", b"2\n")
    return data.finish()
