"""An archive of a run with phase evidence and transitions verifies with only the public key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.checkpoint import install_public_key

from ..phase_ledger.ledger_testkit import compiler_input, move, started


def test_an_archive_of_a_phased_run_verifies_elsewhere(
    ledger: Ledger, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = started(ledger, "run-a", "implement")
    assert move(run, compiler_input("verify"), operation="to-verify").status == "applied"
    started(ledger, "run-b", "plan")
    key = install_public_key(ledger)
    out = tmp_path / "archive.db"
    assert cli("archive", str(out), "run-a").code == 0
    ledger.close()
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "reviewer"))
    result = cli("verify", "--all", "--trust", key, "--json", ledger=out)
    assert result.code == 0, result.out
    assert [r["run"] for r in result.json()["results"]] == ["run-a"]
