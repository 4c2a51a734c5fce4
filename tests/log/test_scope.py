"""Every verdict says what it covers: the whole ledger, named runs, an incremental tail,
an archive of which ledger (and an archive checked against its source's exported
checkpoint is judged as an archive, not as a rolled-back copy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentledger import Ledger

from .logkit import build


def test_each_verdict_names_its_scope(ledger: Ledger, cli: Any) -> None:
    build(ledger, runs=2, entries=2)
    whole = cli("verify", "--all", "--json").json()
    assert whole["scope"] == "the whole ledger"
    named = cli("verify", "run-1", "--json").json()
    assert named["scope"] == "named runs run-1"
    ledger.run("run-0").append("step", {"more": True})
    incremental = cli("verify", "--incremental", "--json").json()
    assert incremental["scope"].startswith("what was appended since entry 4 in full")
    terminal = cli("verify", "--incremental")
    assert "verdict: clean (covers what was appended since entry 5" in terminal.out


def test_an_archive_checked_against_its_sources_checkpoint_is_judged_as_an_archive(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    build(ledger, runs=3, entries=2)
    exported = tmp_path / "cp.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0
    out = tmp_path / "review.db"
    assert cli("archive", str(out), "run-1").code == 0
    result = cli("verify", "--all", "--checkpoint", str(exported), "--json", ledger=out)
    assert result.code == 0, result.out
    document = result.json()
    assert "an archive" in document["scope"] and ledger.id in document["scope"]
    assert "holding 1 runs" in document["scope"]
    assert not any(d["check"] == "log.rollback" for d in document["workspace"])
