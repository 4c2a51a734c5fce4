"""Offline proofs: checked with nothing but the bundle and the public key."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.checkpoint import install_public_key
from agentledger.proofs import parse_bundle, prove, verify_bundle

from .logkit import build


@pytest.fixture
def bundle_and_key(ledger: Ledger) -> tuple[dict[str, Any], str]:
    build(ledger, runs=3, entries=5)
    return prove(ledger, "run-1", 3), install_public_key(ledger)


def test_a_proof_verifies_with_only_the_public_key(
    bundle_and_key: tuple[dict[str, Any], str],
) -> None:
    bundle, key = bundle_and_key
    verdict = verify_bundle(parse_bundle(json.dumps(bundle).encode()), [key])
    assert verdict.ok, verdict.problems
    assert verdict.signer == key
    assert (verdict.tree_size, verdict.leaf_index) == (15, 3 * 3 + 1)


def test_a_proof_with_edited_entry_bytes_fails(bundle_and_key: tuple[dict[str, Any], str]) -> None:
    bundle, key = bundle_and_key
    raw = base64.b64decode(bundle["entry"]).replace(b'"n":3', b'"n":4')
    bundle["entry"] = base64.b64encode(raw).decode()
    assert not verify_bundle(bundle, [key]).ok


def test_a_proof_for_another_position_fails(bundle_and_key: tuple[dict[str, Any], str]) -> None:
    bundle, key = bundle_and_key
    bundle["leaf_index"] += 1
    assert not verify_bundle(bundle, [key]).ok


def test_a_proof_against_an_untrusted_key_fails(
    bundle_and_key: tuple[dict[str, Any], str],
) -> None:
    bundle, _ = bundle_and_key
    verdict = verify_bundle(bundle, ["ed25519:" + "11" * 32])
    assert not verdict.ok
    assert verdict.signer is None


def test_verify_proof_cli_needs_no_ledger(
    ledger: Ledger, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger, runs=1, entries=3)
    result = cli("prove", "run-0", "2")
    assert result.code == 0
    proof = tmp_path / "proof.json"
    proof.write_text(result.out)
    key = install_public_key(ledger)
    ledger.close()
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "elsewhere"))  # no keys at all
    missing_ledger = tmp_path / "none.db"
    assert cli("verify-proof", str(proof), "--trust", key, ledger=missing_ledger).code == 0
    assert cli("verify-proof", str(proof), ledger=missing_ledger).code == 2
    assert not missing_ledger.exists()
    proof.write_text("{not json")
    assert cli("verify-proof", str(proof), "--trust", key).code == 65
    assert cli("verify-proof", str(tmp_path / "absent.json"), "--trust", key).code == 64


def test_prove_a_missing_entry_is_not_found(ledger: Ledger, cli: Any) -> None:
    build(ledger, runs=1, entries=1)
    assert cli("prove", "run-0", "7").code == 1
    assert cli("prove", "nope", "0").code == 1
