"""The lesser items of the report issue: a tampered import is announced, a checkpoint of a
ledger that does not verify is never exported, and runs bernstein answers 1 are not
called missing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentledger import Ledger
from tests.bernstein.bernstein_testkit import SHAPES, SMALL

AGENTLEDGER = Path(sys.executable).parent / "agentledger"


def _tampered_copy(tmp_path: Path) -> Path:
    workdir = tmp_path / "workdir"
    shutil.copytree(SMALL, workdir)
    journal = workdir / ".sdd" / "runs" / "run-002" / "journal.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    row = json.loads(lines[1])
    row["task"] = "a task it never claimed"  # outside the stored hashes: they no longer match
    lines[1] = json.dumps(row) + "\n"
    journal.write_text("".join(lines), encoding="utf-8")
    return workdir


def test_importing_a_tampered_workdir_warns_naming_the_run(tmp_path: Path, cli: Any) -> None:
    done = cli("import", "bernstein", str(_tampered_copy(tmp_path)))
    assert done.code == 0  # imported as it is: the bytes are the evidence
    warning = [line for line in done.err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, done.err
    assert "run-002" in warning[0] and "run-001" not in warning[0]
    assert "agentledger verify --compat bernstein" in warning[0]
    listed = cli("import", "bernstein", str(_tampered_copy(tmp_path / "again")), "--json")
    assert [item["run"] for item in listed.json()["not_verifying"]] == []  # unchanged re-import


def test_importing_a_genuine_workdir_says_nothing_more(cli: Any) -> None:
    done = cli("import", "bernstein", str(SMALL))
    assert done.code == 0 and "warning" not in done.err


def test_checkpoint_export_refuses_a_ledger_that_does_not_verify(
    ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append_many([("step", {"n": n}) for n in range(3)])
    exported = tmp_path / "cp.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0
    exported.unlink()
    with Ledger.open(ledger_path) as ledger, ledger.db.write() as conn:
        raw = conn.execute("SELECT bytes FROM entries WHERE run_id = 'r' AND seq = 1").fetchall()
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = 'r' AND seq = 1",
            (raw[0][0].replace(b'"n":1', b'"n":9'),),
        )
    refused = cli("checkpoint", "--export", str(exported))
    assert refused.code == 2
    assert refused.err.startswith("error [signing-refused]")
    assert "entry.hash" in refused.err and "agentledger verify --all" in refused.err
    assert not exported.exists() and refused.out == ""


def test_compat_does_not_call_runs_without_activity_missing(cli: Any) -> None:
    assert cli("import", "bernstein", str(SHAPES)).code == 0
    verified = cli("verify", "--compat", "bernstein", "--json")
    assert verified.code == 1  # bernstein's own verdict on a run with no activity
    report = verified.json()
    assert report["missing"] == 0 and report["no_verdict"] == 2
    assert report["status"] == "no-verdict"
    statuses = {row["run"]: row["status"] for row in report["results"]}
    assert sorted(run for run, status in statuses.items() if status == "no-verdict") == [
        "r0000-plain",
        "r0010-plain-long",
    ]
    text = cli("verify", "--compat", "bernstein").out
    assert "0 missing" in text and "2 without a verdict" in text
    assert "no activity.result entries" in text  # why, for each run
    assert cli("verify", "nope", "--json").json()["missing"] == 1  # a run that does not exist


def _restored_backup(ledger_path: Path, tmp_path: Path) -> None:
    """The ledger as a backup held it: older than what this install signed since."""
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append_many([("step", {"n": n}) for n in range(3)])
    backup = tmp_path / "backup.db"
    shutil.copyfile(ledger_path, backup)
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {"n": 3})
    shutil.copyfile(backup, ledger_path)


def test_a_restored_backup_is_refused_then_adopted_by_the_command_named(
    ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    _restored_backup(ledger_path, tmp_path)

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        # One process per command, as from a shell (this install's memory read afresh).
        return subprocess.run(
            [str(AGENTLEDGER), "--ledger", str(ledger_path), *args],
            capture_output=True,
            text=True,
            check=False,
        )

    refused = command("append", "r", "step")
    assert refused.returncode == 2
    assert "`agentledger checkpoint --adopt-restored`" in refused.stderr
    adopted = command("checkpoint", "--adopt-restored")
    assert adopted.returncode == 0, adopted.stderr
    assert "restored backup adopted" in adopted.stderr
    assert command("append", "r", "step").returncode == 0
    assert command("verify").returncode == 0


def test_a_restored_backup_that_does_not_verify_is_never_adopted(
    ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    _restored_backup(ledger_path, tmp_path)
    with Ledger.open(ledger_path, readonly=True) as ledger:
        checkpoints = ledger.db.scalar("SELECT count(*) FROM checkpoints")
    with Ledger.open(ledger_path) as ledger, ledger.db.write() as conn:
        raw = conn.execute("SELECT bytes FROM entries WHERE run_id = 'r' AND seq = 1").fetchall()
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = 'r' AND seq = 1",
            (raw[0][0].replace(b'"n":1', b'"n":9'),),
        )
    refused = cli("checkpoint", "--adopt-restored")
    assert refused.code == 2
    assert "does not verify clean" in refused.err and "entry.hash" in refused.err
    assert "restored backup" in refused.err
    with Ledger.open(ledger_path, readonly=True) as ledger:
        assert ledger.db.scalar("SELECT count(*) FROM checkpoints") == checkpoints
    # What this install vouched for is back: the rollback is still refused.
    assert cli("append", "r", "step").code == 2
    verified = cli("verify", "--json").json()
    assert "log.rollback" in {d["check"] for d in verified["workspace"]}


def test_the_html_report_gives_the_no_verdict_verify_gives(cli: Any, tmp_path: Path) -> None:
    assert cli("import", "bernstein", str(SHAPES)).code == 0
    page = tmp_path / "report.html"
    written = cli("verify", "--compat", "bernstein", "--html", str(page))
    assert written.code == 1 and "verdict: no-verdict" in written.out
    text = page.read_text(encoding="utf-8")
    assert "<title>agentledger verify: no-verdict — " in text
    assert "class='verdict no-verdict'>no-verdict</span>" in text
    assert "<title>missing: " not in text  # runs without a verdict are not drawn as missing
    assert "<title>no verdict: 2</title>" in text
