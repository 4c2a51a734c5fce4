"""The verify report: one meaning for expected/actual, counts by check, full width, what was
verified at the top (terminal and JSON)."""

from __future__ import annotations

import io
import json
import re
from html import escape as html_escape
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import agentledger
from agentledger import Ledger, _core
from agentledger.checks import explain
from agentledger.cli.console import human_console
from agentledger.report import report_renderable
from agentledger.report_html import render_html
from agentledger.verify import Divergence, RunVerdict, VerifyReport
from tests.activity.activity_testkit import research_result
from tests.log.logkit import raw
from tests.log.logkit import verify as verify_file
from tests.memory import traced_peak
from tests.report.conftest import Demo, as_json

DIGEST = re.compile(r"blake3:[0-9a-f]{64}")


def _finding(report: dict[str, Any], run: str, check: str) -> dict[str, Any]:
    failure = next(f for f in report["failures"] if f["run"] == run)
    return next(d for d in failure["divergences"] if d["check"] == check)


def test_expected_is_the_anchored_record_and_actual_what_the_file_holds(
    demo: Demo, demo_cli: Any
) -> None:
    code, out, _ = demo_cli("verify", "--json")
    assert code == 2
    report = as_json(out)
    head = _finding(report, demo.run("run.head_seq"), "run.head_seq")
    # The chain ends at step 23; the runs table's cache was edited to 22.
    assert (head["expected"], head["actual"]) == ("23", "22")
    edited = demo.run("entry.hash")
    entry = _finding(report, edited, "entry.hash")
    with Ledger.open(demo.path, readonly=True) as ledger:
        stored, raw = ledger.db.rows(
            "SELECT hash, bytes FROM entries WHERE run_id = ? AND seq = 3", (edited,)
        )[0]
    assert entry["expected"] == "blake3:" + bytes(stored).hex()  # the recorded hash
    assert entry["actual"] == "blake3:" + _core.entry_hash(bytes(raw)).hex()  # the bytes now


def test_a_broken_link_reads_with_the_sides_of_the_edit_that_broke_it(
    demo: Demo, demo_cli: Any
) -> None:
    """An entry's bytes edited: its entry.hash read expected = the recorded hash, actual =
    the hash of the bytes now, and the next step's chain.prev the other way round (expected
    = the hash of the edited bytes, actual = the untouched link): one hash was expected in
    one finding and actual in the next. The link is the anchored record: expected."""
    _, out, _ = demo_cli("verify", "--json")
    report = as_json(out)
    edited = demo.run("entry.hash")
    entry = _finding(report, edited, "entry.hash")
    link = _finding(report, edited, "chain.prev")
    assert (entry["seq"], link["seq"]) == (3, 4)
    assert (link["expected"], link["actual"]) == (entry["expected"], entry["actual"])
    with Ledger.open(demo.path, readonly=True) as ledger:
        raw = ledger.db.rows("SELECT bytes FROM entries WHERE run_id = ? AND seq = 4", (edited,))
    assert json.loads(bytes(raw[0][0]))["prev"] == link["expected"]  # what step 4 holds


def test_expected_is_neutral_and_actual_red_on_every_line(demo: Demo, demo_cli: Any) -> None:
    with Ledger.open(demo.path, readonly=True) as ledger:
        report = ledger.verify()
    buffer = io.StringIO()
    Console(file=buffer, force_terminal=True, color_system="standard", width=300).print(
        report_renderable(report)
    )
    lines = buffer.getvalue().splitlines()
    expected = [line for line in lines if "expected" in line and DIGEST.search(line)]
    actual = [line for line in lines if "actual" in line and DIGEST.search(line)]
    assert expected and actual
    assert all("\x1b[32m" not in line for line in expected)  # never green
    assert all("\x1b[31m" not in line for line in expected)
    assert all("\x1b[31m" in line for line in actual)


def test_every_check_found_is_explained_and_an_edit_shows_what_the_file_holds(
    demo: Demo, demo_cli: Any
) -> None:
    code, out, _ = demo_cli("verify")
    assert code == 2
    for check in ("entry.hash", "chain.gap", "run.head_seq", "blob.digest"):
        assert explain(check).means in out
    assert 'step {"n": 3, "tool": "rm -rf /;' in out  # the edited body, not only two hashes
    code, out, _ = demo_cli("verify", "--json")
    entry = _finding(as_json(out), demo.run("entry.hash"), "entry.hash")
    assert entry["detail"].startswith('step {"n": 3, "tool": "rm -rf /;')


def test_the_summary_counts_workspace_findings_by_check(demo: Demo, demo_cli: Any) -> None:
    code, out, _ = demo_cli("verify", "--json")
    assert code == 2
    report = as_json(out)
    by_check = report["findings_by_check"]
    assert by_check["blob.digest"]["runs"] == 1  # the run whose stage pins the page
    assert by_check["entry.hash"]["runs"] == 1
    assert report["findings"] >= sum(row["findings"] for row in by_check.values())
    _, out, _ = demo_cli("verify")
    assert re.search(r"blob\.digest +1 run", out)
    assert re.search(r"entry\.hash +1 run", out)


def test_a_damaged_blob_is_a_finding_of_the_runs_that_pin_it_else_of_the_workspace(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """A defaced page left the run whose stage pins it "clean" (the finding sat on the
    workspace alone), while ``show`` of that run said diverged. Now the run is diverged
    everywhere, at the pinning step; a damaged blob nothing pins stays the workspace's."""
    import apsw

    ledger.run("r").record_activity(research_result(), stage_id="s1")
    ledger.run("other").append("step", {"n": 1})
    stray = ledger.blobs.put(b"a blob no result pins")
    pinned = next(iter(ledger.run("r").entries())).body["observations"][0]["content_hash"]
    conn = apsw.Connection(str(ledger_path))
    for digest in (pinned, stray):
        conn.execute(
            "UPDATE blob_chunks SET data = CAST('defaced' AS BLOB) WHERE digest = ?", (digest,)
        )
    conn.close()
    whole = cli("verify", "--all", "--json")
    assert whole.code == 2
    report = whole.json()
    by_run = {
        f["run"]: {(d["check"], d["seq"]) for d in f["divergences"]} for f in report["failures"]
    }
    damaged = {("blob.digest", 0), ("blob.size", 0)}  # "defaced" is shorter too
    assert by_run == {"r": damaged}
    assert {(d["check"], d["subject"]) for d in report["workspace"]} == {
        ("blob.digest", stray),
        ("blob.size", stray),
    }
    row = report["findings_by_check"]["blob.digest"]
    assert (row["runs"], row["workspace"]) == (1, 1)
    assert (report["clean"], report["diverged"]) == (1, 1)
    named = cli("verify", "r", "--json").json()
    assert (named["clean"], named["diverged"]) == (0, 1)
    assert cli("show", "r", "--json").json()["run_status"] == "diverged"
    statuses = cli("runs", "--json").json()
    assert {row["run"]: row["status"] for row in statuses["runs"]}["r"] == "diverged"
    out = cli("verify").out
    summary = out[: out.index("\nworkspace ")]
    assert re.search(r"blob\.digest +1 run, workspace", summary), summary


def test_a_run_named_only_by_a_workspace_finding_is_counted_diverged() -> None:
    report = VerifyReport(runs=[RunVerdict("a"), RunVerdict("b")])
    report.workspace.append(Divergence("b", 3, "audit.orphan", "an activity entry", "none"))
    assert report.diverged_runs == {"b"}
    assert report.to_json()["diverged"] == 1 and report.to_json()["clean"] == 1
    out = io.StringIO()
    human_console(file=out).print(report_renderable(report))
    assert "1 clean  1 diverged" in out.getvalue()
    assert "diverged 0" not in out.getvalue()


def test_the_verdict_says_where_findings_of_the_workspace_alone_are() -> None:
    """With no run diverged, the verdict read "diverged — 1 finding and the workspace"."""
    report = VerifyReport(runs=[RunVerdict("a")])
    report.workspace.append(Divergence(None, None, "log.tiles", "a tree", "another", "log"))
    out = io.StringIO()
    human_console(file=out).print(report_renderable(report))
    assert "verdict: diverged — 1 finding in the workspace (covers" in out.getvalue()
    report.runs[0].add(Divergence("a", 1, "entry.hash", "blake3:" + "a" * 64, "blake3:b"))
    out = io.StringIO()
    human_console(file=out).print(report_renderable(report))
    assert "— 2 findings in 1 run and the workspace (covers" in out.getvalue()


def test_findings_past_the_per_run_cap_are_said_beside_the_counts_by_check() -> None:
    """A run with more findings than a run keeps: "40 findings by check:" headed rows
    that summed to the 32 kept, in the terminal, the HTML and --json, the other 8 said
    nowhere near them."""
    report = VerifyReport(runs=[RunVerdict("a"), RunVerdict("b")])
    for seq in range(40):
        report.runs[0].add(Divergence("a", seq, "entry.hash", "blake3:" + "a" * 64, "blake3:b"))
    report.runs[1].add(Divergence("b", 1, "chain.prev", "blake3:" + "c" * 64, "blake3:d"))
    shown = report.to_json()
    counted = sum(row["findings"] for row in shown["findings_by_check"].values())
    assert shown["findings"] == 41 and counted == 33
    assert shown["findings_not_kept"] == 8
    words = "… and 8 findings in 1 run past the 32 a run keeps: counted, their checks not kept"
    out = io.StringIO()
    human_console(file=out).print(report_renderable(report))
    lines = out.getvalue().splitlines()
    at = lines.index("41 findings by check:")
    assert lines[at + 3] == "  " + words
    assert html_escape(words) in render_html(report)


def _many_runs(n: int) -> VerifyReport:
    report = VerifyReport(runs=[RunVerdict(f"run-{i:06d}", entries=24) for i in range(n)])
    report.elapsed_s = 1.5
    for verdict in report.runs[:201]:
        verdict.add(Divergence(verdict.run_id, 3, "entry.hash", "blake3:" + "a" * 64,
                               "blake3:" + "b" * 64))  # fmt: skip
    return report


def test_piped_output_is_never_wrapped_a_digest_never_split_a_number_never_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    report = _many_runs(150_000)
    out = io.StringIO()  # not a terminal
    human_console(file=out).print(report_renderable(report))
    text = out.getvalue()
    assert "3,600,000 entries" in text
    assert "149,799 clean" in text
    assert "entry.hash  201 runs" in text
    assert "…" not in text.split("what the checks mean")[0].replace("… 151 more", "")
    assert text.count("blake3:" + "a" * 64) == 50  # every digest shown is whole


def test_columns_and_width_are_honoured(
    demo: Demo, demo_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out, _ = demo_cli("verify", "--width", "100")
    assert max(len(line) for line in out.splitlines()) <= 100
    monkeypatch.setenv("COLUMNS", "90")
    _, out, _ = demo_cli("show", demo.run("entry.hash"))
    assert max(len(line) for line in out.splitlines()) <= 90
    monkeypatch.delenv("COLUMNS")
    _, out, _ = demo_cli("verify")
    assert max(len(line) for line in out.splitlines()) > 100  # unwrapped when piped


def test_what_was_verified_is_at_the_top_and_in_the_json(ledger_path: Path, cli: Any) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append_many([("step", {"n": n}) for n in range(5)])
        install_key = ledger.keys.install_public_key()
        ledger_id = ledger.id
    result = cli("verify", "--json")
    assert result.code == 0
    report = result.json()
    assert report["ledger"] == {"path": str(ledger_path), "id": ledger_id}
    assert report["version"] == agentledger.__version__
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["verified_at"])
    assert report["trusted_keys"][0]["key"] == install_key
    assert "install" in report["trusted_keys"][0]["source"]
    checkpoint = report["checkpoint"]
    assert checkpoint["size"] == 5 and checkpoint["trusted_signer"] == install_key
    assert checkpoint["root"] and checkpoint["signers"]
    assert report["findings_by_check"] == {} and report["findings"] == 0
    top = cli("verify").out.splitlines()[:5]
    assert top[0].startswith("ledger") and str(ledger_path) in top[0] and ledger_id in top[0]
    assert agentledger.__version__ in top[1]
    assert install_key is not None and install_key in top[2]
    assert top[3].startswith("checkpoint") and "5 entries" in top[3]
    assert f"signed by {install_key}" in top[3]


def test_the_html_holds_every_failing_run_and_what_was_verified() -> None:
    report = _many_runs(300)
    report.ledger_path, report.ledger_id, report.version = "/x/ledger.db", "abc", "9.9"
    html = render_html(report)
    assert "<title>agentledger verify: diverged — /x/ledger.db</title>" in html
    assert all(f'id="run-run-{i:06d}"' in html for i in range(201))
    assert 'id="run-run-000003:step-3"' in html
    assert "see --json" not in html
    assert "<svg" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert html_escape(explain("entry.hash").means) in html


def test_every_anchor_of_the_html_is_unique_whatever_the_run_ids() -> None:
    """Run ``x``'s step 1 and the run named ``x-step-1`` shared ``id="run-x-step-1"``: a
    link to one opened the other. Ids are spelled one-to-one, and ``:`` separates parts."""
    ids = ["x", "x-step-1", "x_2d_step", "x-step", "a_b", "a_5f_b", "r:1"]
    report = VerifyReport(runs=[RunVerdict(run_id, entries=2) for run_id in ids])
    for verdict in report.runs:
        verdict.add(Divergence(verdict.run_id, 1, "entry.hash", "e", "a"))
        verdict.add(Divergence(verdict.run_id, None, "run.head_seq", "1", "0"))
    html = render_html(report)
    found = re.findall(r'\bid="([^"]*)"', html)
    assert len(found) == len(set(found)), sorted(f for f in found if found.count(f) > 1)
    assert 'id="run-x:step-1"' in html and 'id="run-x-step-1"' in html
    for link in re.findall(r'href="#([^"]*)"', html):
        assert link in found, link


def test_a_huge_edited_entry_is_shown_as_its_bytes_begin_not_parsed(
    ledger: Ledger, ledger_path: Path
) -> None:
    """The detail of an edited entry parsed the whole entry to show 240 characters: 8 MB
    of tiny JSON items cost 200 MB of Python objects (a 1 GB cell, more than the machine)."""
    ledger.run("r").append("step", {"n": 0})
    huge = b'{"body":{"pad":[' + b",".join([b"[0,[]]"] * 1_200_000) + b"]}}"
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET bytes = ? WHERE run_id = 'r'", (huge,))
    report, peak = traced_peak(lambda: verify_file(ledger_path))
    assert peak < 60_000_000, peak
    (edited,) = [d for run in report.runs for d in run.divergences if d.check == "entry.hash"]
    assert (edited.detail or "").startswith('step {"body":{"pad":[[0,[]],'), edited.detail
