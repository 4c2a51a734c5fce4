"""`agentledger bernstein audit-verify`: its inputs and bernstein's exit codes (the
verdicts themselves are held to bernstein's own in test_sealed.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .bernstein_testkit import SMALL, copy_workdir

KEY = SMALL / "audit.key"


def _imported(tmp_path: Path, cli: Any) -> Path:
    ledger = tmp_path / "ledger.db"
    workdir = copy_workdir(SMALL, tmp_path / "workdir")
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    return ledger


def test_an_unsealed_chain_fails_like_bernstein(tmp_path: Path, cli: Any) -> None:
    """bernstein's Merkle pillar fails without a seal: exit 1, the chain itself passing."""
    result = cli(
        "bernstein",
        "audit-verify",
        "--audit-key",
        str(KEY),
        "--json",
        ledger=_imported(tmp_path, cli),
    )
    assert result.code == 1
    pillars = {p["name"]: p["ok"] for p in result.json()["pillars"]}
    assert pillars == {
        "HMAC Chain": True,
        "Merkle Tree": False,
        "Checkpoints": True,
        "External Anchors": True,
        "Witness Co-signatures": True,
        "Lineage Activity": True,
    }


def test_no_audit_folder_imported_is_bernsteins_exit_1(tmp_path: Path, cli: Any) -> None:
    ledger = tmp_path / "ledger.db"
    assert cli("init", ledger=ledger).code == 0
    result = cli("bernstein", "audit-verify", "--json", ledger=ledger)
    assert result.code == 1
    assert result.json()["audit_dir"] is False


def test_a_witness_key_that_is_not_one_is_refused(tmp_path: Path, cli: Any) -> None:
    ledger = _imported(tmp_path, cli)
    bad = tmp_path / "w.pub"
    bad.write_bytes(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    result = cli("bernstein", "audit-verify", "--witness-key", str(bad), ledger=ledger)
    assert result.code == 65
    assert "--witness-key" in result.err
    missing = cli("bernstein", "audit-verify", "--witness-key", str(tmp_path / "no"), ledger=ledger)
    assert missing.code == 64


def test_a_witness_state_that_is_not_a_folder_is_refused(tmp_path: Path, cli: Any) -> None:
    ledger = _imported(tmp_path, cli)
    for state in (tmp_path / "absent", KEY):
        result = cli("bernstein", "audit-verify", "--witness-state", str(state), ledger=ledger)
        assert result.code == 64, result.err
        assert "--witness-state" in result.err


def test_the_chain_is_walked_once(tmp_path: Path, cli: Any, monkeypatch: Any) -> None:
    """The HMAC pillar takes the walk the other pillars read (the same segments, the same
    key): on a long chain a second walk was a quarter of the command's time."""
    from agentledger.bernstein.audit_chain import verify_audit

    walks: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        walks.append(1)
        return verify_audit(*args, **kwargs)

    ledger = _imported(tmp_path, cli)
    monkeypatch.setattr("agentledger.bernstein.audit_verdict.verify_audit", counted)
    result = cli("bernstein", "audit-verify", "--audit-key", str(KEY), "--json", ledger=ledger)
    assert result.code == 1  # unsealed (see above): the HMAC chain itself passes
    assert {p["name"]: p["ok"] for p in result.json()["pillars"]}["HMAC Chain"] is True
    assert len(walks) == 1


def test_bernstein_evidence_given_to_a_ledger_without_an_import_is_said_to_do_nothing(
    tmp_path: Path, cli: Any
) -> None:
    ledger = tmp_path / "ledger.db"
    assert cli("init", ledger=ledger).code == 0
    state = tmp_path / "witness-state"
    state.mkdir()
    result = cli("verify", "--witness-state", str(state), "--json", ledger=ledger)
    assert result.code == 0
    notes = [n for n in result.json()["notes"] if "no bernstein import" in n]
    assert notes == ["--witness-state not used: the ledger holds no bernstein import"]
    imported = cli(
        "verify", "--witness-state", str(state), "--json", ledger=_imported(tmp_path, cli)
    )
    assert not [n for n in imported.json()["notes"] if "no bernstein import" in n]
