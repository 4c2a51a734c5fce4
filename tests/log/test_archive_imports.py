"""An archive of some imported bernstein runs reproduces the source's verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.checkpoint import install_public_key

from ..bernstein.bernstein_testkit import SMALL as FIXTURE


def test_an_archive_of_one_imported_run_keeps_its_anchoring_and_verdicts(
    ledger: Ledger, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("import", "bernstein", str(FIXTURE)).code == 0
    key = install_public_key(ledger)
    source = {
        compat: cli("verify", "run-002", *compat, "--json").code
        for compat in [(), ("--compat", "bernstein")]
    }
    out = tmp_path / "archive.db"
    result = cli("archive", str(out), "run-002", "--json")
    assert result.code == 0
    assert result.json()["runs"] == ["run-002", "_bernstein"]
    ledger.close()
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "reviewer"))
    for compat, code in source.items():
        verified = cli("verify", "--all", "--trust", key, *compat, "--json", ledger=out)
        assert verified.code == code, verified.out
        assert verified.json()["workspace"] == []
