"""An archive of runs with activities keeps their receipts, blobs and audit records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.checkpoint import install_public_key

from ..activity.activity_testkit import record_every_modality


def test_an_archive_of_activity_runs_verifies_with_only_the_public_key(
    ledger: Ledger, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_every_modality(ledger, "run-1")
    record_every_modality(ledger, "run-2")
    ledger.run("plain").append("step", {})
    key = install_public_key(ledger)
    out = tmp_path / "archive.db"
    assert cli("archive", str(out), "run-2").code == 0
    ledger.close()
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "reviewer"))
    result = cli("verify", "--all", "--trust", key, "--json", ledger=out)
    assert result.code == 0, result.out
    assert result.json()["results"] == [
        {"run": "run-2", "code": 0, "status": "clean", "entries": result.json()["entries"]}
    ]


def test_an_archive_keeps_the_whole_audit_mirror_verifiable_with_its_key(
    ledger: Ledger, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_every_modality(ledger, "run-1")
    record_every_modality(ledger, "run-2")
    key = install_public_key(ledger)
    audit_key = ledger.keys.audit_key_path
    out = tmp_path / "archive.db"
    assert cli("archive", str(out), "run-2").code == 0
    ledger.close()
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "reviewer"))
    result = cli(
        "verify", "--all", "--trust", key, "--audit-key", str(audit_key), "--json", ledger=out
    )
    assert result.code == 0, result.out
