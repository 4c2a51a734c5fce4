"""Keys live outside the ledger, private to their owner; verify never creates one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.keys import KeyFileError, KeyStore, parse_public_key

from .activity_testkit import record_every_modality


def test_keys_init_creates_private_files_and_export_prints_the_public_key(
    cli: Any, key_home: Path
) -> None:
    created = cli("keys", "init", "--json")
    assert created.code == 0
    assert created.json()["created"] == {"install_key": True, "audit_key": True}
    for name in ("install.key", "audit.key"):
        assert (key_home / name).stat().st_mode & 0o777 == 0o600
    exported = cli("keys", "export")
    assert exported.code == 0
    public = exported.out.strip()
    assert public == created.json()["public_key"]
    assert len(parse_public_key(public)) == 32
    again = cli("keys", "init", "--json")
    assert again.json()["created"] == {"install_key": False, "audit_key": False}
    assert again.json()["public_key"] == public


def test_keys_export_without_a_key_is_not_found_and_creates_nothing(
    cli: Any, key_home: Path
) -> None:
    result = cli("keys", "export")
    assert result.code == 1
    assert "no install key" in result.err
    assert not key_home.exists()


def test_keys_show_lists_home_key_and_trusted_signers(cli: Any, key_home: Path) -> None:
    assert cli("keys", "show", "--json").json()["public_key"] is None
    cli("keys", "init")
    other = "ed25519:" + "ab" * 32
    trusted = cli("keys", "trust", other, "--json")
    assert trusted.code == 0 and trusted.json()["added"] == [other]
    shown = cli("keys", "show", "--json").json()
    assert shown["home"] == str(key_home)
    assert shown["trusted"] == [shown["public_key"], other]
    assert cli("keys", "trust", other, "--json").json()["added"] == []
    assert "ed25519:" in cli("keys", "show").out


def test_trusting_a_malformed_key_is_a_usage_error(cli: Any) -> None:
    result = cli("keys", "trust", "ed25519:xyz")
    assert result.code == 64  # a malformed key argument, like --trust garbage
    assert "bad-argument" in result.err and "KEY ed25519:" in result.err


@pytest.mark.parametrize("name", ["install.key", "audit.key"])
def test_a_key_file_readable_by_others_is_refused(
    ledger: Ledger, key_home: Path, name: str
) -> None:
    record_every_modality(ledger)
    (key_home / name).chmod(0o640)
    stage = ledger.run("run-2").data("d")
    with pytest.raises(KeyFileError, match="group or others"):
        stage.plan(["x"])
        stage.finish()


def test_a_key_file_owned_by_someone_else_is_refused(
    key_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = KeyStore()
    store.signing_key(create=True)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)
    with pytest.raises(KeyFileError, match="not by this user"):
        store.signing_key()


def test_verify_refuses_a_group_readable_audit_key(
    ledger: Ledger, cli: Any, key_home: Path, tmp_path: Path
) -> None:
    record_every_modality(ledger)
    leaked = tmp_path / "leaked.key"
    leaked.write_bytes((key_home / "audit.key").read_bytes())
    leaked.chmod(0o644)
    result = cli("verify", "--audit-key", str(leaked))
    assert result.code == 65
    assert "group or others" in result.err


def test_a_world_writable_trust_file_is_refused(ledger: Ledger, cli: Any, tmp_path: Path) -> None:
    record_every_modality(ledger)
    trust = tmp_path / "trust.keys"
    trust.write_text("ed25519:" + "cd" * 32 + "\n")
    trust.chmod(0o666)
    result = cli("verify", "--trust", str(trust))
    assert result.code == 64  # a trust file argument that must not be used
    assert "writable only by us" in result.err
    trust.chmod(0o644)
    assert cli("verify", "--trust", str(trust)).code == 0


def test_verify_never_creates_keys(ledger_path: Path, tmp_path: Path, cli: Any) -> None:
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    elsewhere = tmp_path / "fresh-home"
    for args in (["verify"], ["activity", "verify", "run-1"], ["show", "run-1"], ["keys", "show"]):
        cli("--home", str(elsewhere), *args)
    assert not elsewhere.exists()


def test_keys_are_never_stored_in_the_ledger(ledger_path: Path, key_home: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    stored = b"".join(
        p.read_bytes() for p in ledger_path.parent.iterdir() if p.name.startswith("ledger.db")
    )
    for name in ("install.key", "audit.key"):
        secret = (key_home / name).read_bytes().strip()
        assert secret not in stored
        assert bytes.fromhex(secret.decode()) not in stored


def test_trust_accepts_an_ed25519_spki_pem_file(ledger: Ledger, cli: Any, tmp_path: Path) -> None:
    import base64

    record_every_modality(ledger)
    public = ledger.keys.install_public_key()
    assert public is not None
    der = bytes.fromhex("302a300506032b6570032100") + parse_public_key(public)
    pem = tmp_path / "signer.pem"
    pem.write_text(
        "-----BEGIN PUBLIC KEY-----\n" + base64.b64encode(der).decode() + "\n"
        "-----END PUBLIC KEY-----\n"
    )
    elsewhere = ["--home", str(tmp_path / "elsewhere")]
    assert cli(*elsewhere, "activity", "verify", "run-1").code == 2
    assert cli(*elsewhere, "activity", "verify", "run-1", "--trust", str(pem)).code == 0
    pem.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    assert cli(*elsewhere, "activity", "verify", "run-1", "--trust", str(pem)).code == 64


def test_show_still_shows_stages_when_a_key_file_must_be_refused(
    ledger: Ledger, cli: Any, key_home: Path
) -> None:
    record_every_modality(ledger)
    # Verification reads only install.pub (never the seed): a trust anchor others may write
    # is refused.
    (key_home / "install.pub").chmod(0o666)
    shown = cli("show", "run-1", "--json")
    assert shown.code == 0
    receipts = {s["stage_id"]: s["receipt"] for s in shown.json()["stages"]}
    assert receipts["data-0"] == "not checked: key-file"
    assert receipts["research-0"] is None


def test_a_seed_that_is_not_the_key_install_pub_names_signs_nothing(
    ledger: Ledger, ledger_path: Path, cli: Any, key_home: Path
) -> None:
    """Verify trusts ``install.pub``; the signer used ``install.key`` whatever it held. A
    seed replaced by hand (another machine's, a backup's) signed checkpoints this install's
    own verify then refused (``checkpoint.signature``, exit 2). The mismatch is refused
    before anything is signed, and nothing is written."""
    ledger.run("r").append("step", {"n": 1})
    ledger.close()
    (key_home / "install.key").write_text(os.urandom(32).hex() + "\n")
    refused = cli("append", "r", "step", '{"n": 2}')
    assert refused.code == 65 and "[key-file]" in refused.err, refused.err
    assert "install.pub" in refused.err
    assert cli("keys", "init").code == 65
    assert cli("verify").code == 0
    with Ledger.open(ledger_path) as reopened:
        assert [e.seq for e in reopened.run("r").entries()] == [0]
    # The seed lost, install.pub kept: no new seed is made in its place.
    (key_home / "install.key").unlink()
    refused = cli("append", "r", "step", '{"n": 3}')
    assert refused.code == 65 and "install.pub" in refused.err, refused.err
    assert not (key_home / "install.key").exists()
