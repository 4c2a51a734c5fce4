"""Hostile seal, checkpoint, co-signature, anchor and receipt files: each is a named
finding (strict) and bernstein's exit 1 (audit-verify), never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .bernstein_testkit import SMALL, SMALL_SIGNER, copy_workdir

KEY = SMALL / "audit.key"
CHECKPOINTS = Path(".sdd/audit/checkpoints")
DEEP = b"[" * 100_000 + b"]" * 100_000

HOSTILE: dict[str, tuple[str, bytes, str]] = {
    "seal not json": (
        ".sdd/audit/merkle/seal-20260101T000000Z.json",
        b"\xff{",
        "bernstein.seal.unreadable",
    ),
    "seal leaves a string": (
        ".sdd/audit/merkle/seal-20260101T000000Z.json",
        json.dumps({"root_hash": "x", "leaves": "abc", "scheme": 2}).encode(),
        "bernstein.seal.unreadable",
    ),
    "seal nested deep": (
        ".sdd/audit/merkle/seal-20260101T000000Z.json",
        DEEP,
        "bernstein.seal.unreadable",
    ),
    "seal byte_len huge": (
        ".sdd/audit/merkle/seal-20260101T000000Z.json",
        json.dumps(
            {
                "root_hash": "x",
                "scheme": 2,
                "leaves": [{"file": "2026-11-29.jsonl", "hash": "h", "byte_len": 10**30}],
            }
        ).encode(),
        "bernstein.seal.truncated",
    ),
    "checkpoint line garbage": (
        str(CHECKPOINTS / "checkpoints.jsonl"),
        b"{}\n[1]\n",
        "bernstein.checkpoint.line",
    ),
    "checkpoint nested deep": (
        str(CHECKPOINTS / "checkpoints.jsonl"),
        DEEP + b"\n{}\n",
        "bernstein.checkpoint.line",
    ),
    "checkpoint hmac not ascii": (
        str(CHECKPOINTS / "checkpoints.jsonl"),
        json.dumps({"hmac": "é", "payload": {"version": 1}}).encode() + b"\n",
        "bernstein.checkpoint.line",
    ),
    "cosignatures garbage": (
        str(CHECKPOINTS / "cosignatures.jsonl"),
        b"nope\n{}\n",
        "bernstein.witness.file",
    ),
    "anchors wrong kind": (
        str(CHECKPOINTS / "anchors.jsonl"),
        json.dumps({"version": 1, "kind": "x"}).encode() + b"\n",
        "bernstein.rfc3161.file",
    ),
    "anchor token not der": (
        str(CHECKPOINTS / "anchors.jsonl"),
        json.dumps(
            {
                "version": 1,
                "kind": "rfc3161",
                "origin": "o",
                "entry_count": 1,
                "checkpoint_root": "r",
                "payload_sha256": "00" * 32,
                "token_b64": "AAAA",
            }
        ).encode()
        + b"\n",
        "bernstein.rfc3161.token",
    ),
    "seal anchor garbage": (
        ".sdd/runs/run-001/seal_anchor.json",
        b"[[[",
        "bernstein.seal_anchor.unreadable",
    ),
    "seal anchor token garbage": (
        ".sdd/runs/run-001/seal_anchor.json",
        json.dumps(
            {"head_sha256": "ab" * 32, "anchor_kind": "rfc3161", "rfc3161_token_b64": "AAAA"}
        ).encode(),
        "bernstein.seal_anchor.token",
    ),
    "receipt garbage": (
        ".sdd/runs/run-001/run-receipt.json",
        b"\x00" * 10,
        "bernstein.run_receipt.unreadable",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_evidence_is_a_finding(name: str, tmp_path: Path, cli: Any) -> None:
    path, data, check = HOSTILE[name]
    workdir = copy_workdir(SMALL, tmp_path / "workdir")
    target = workdir / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    strict = cli(
        "verify", "--all", "--audit-key", str(KEY), "--trust", SMALL_SIGNER, "--json", ledger=ledger
    )
    assert strict.code == 2, strict.err[-2000:]
    found = set(strict.json()["findings_by_check"])
    family = check.rsplit(".", 1)[0] + "."
    assert check in found, found
    assert all(c.startswith(family) for c in found), found
    compat = cli("bernstein", "audit-verify", "--audit-key", str(KEY), "--json", ledger=ledger)
    assert compat.code in (0, 1), compat.err[-2000:]
    if "/runs/" not in path:
        assert compat.code == 1


LINEAGE_LOGS = {
    "nested deep": DEEP + b"\n",
    "not utf-8": b"\xff\xfe\n",
    "not an object": b"[1]\n",
    "a field missing": json.dumps({"v": 1}).encode() + b"\n",
    "parents not iterable": json.dumps(
        {
            "v": 1,
            "artefact_path": "a",
            "artefact_kind": "file",
            "content_hash": "sha256:x",
            "parent_hashes": 5,
            "agent_id": "a",
            "agent_card_kid": "k",
            "tool_call_id": "t",
            "span_id": "s",
            "ts_ns": 1,
            "operator_hmac": "",
        }
    ).encode()
    + b"\n",
    "count not a number": json.dumps({"v": "one"}).encode() + b"\n",
}


@pytest.mark.parametrize("name", sorted(LINEAGE_LOGS))
def test_a_hostile_lineage_log_fails_its_pillar(name: str, tmp_path: Path, cli: Any) -> None:
    """bernstein's lineage pillar raises on these (exit 1); ours fails, never crashes."""
    workdir = copy_workdir(SMALL, tmp_path / "workdir")
    (workdir / ".sdd" / "lineage").mkdir(parents=True, exist_ok=True)
    (workdir / ".sdd" / "lineage" / "log.jsonl").write_bytes(LINEAGE_LOGS[name])
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    result = cli("bernstein", "audit-verify", "--audit-key", str(KEY), "--json", ledger=ledger)
    assert result.code == 1, result.err[-2000:]
    lineage = next(p for p in result.json()["pillars"] if p["name"] == "Lineage Activity")
    assert lineage["ok"] is False
    assert lineage["problems"][0].startswith("bernstein's verifier raises on log.jsonl")


HOSTILE_CHAINS = {
    "empty": b"",
    "nested deep": DEEP,
    "not utf-8": b"\xff",
    "root kid not a string": json.dumps(
        {
            "chain_type": "https://bernstein.run/attestations/key-succession/v1",
            "root": {"kid": 1, "public_key_jwk": {"kid": 1}},
            "entries": [],
        }
    ).encode(),
    "x not base64": json.dumps(
        {
            "chain_type": "https://bernstein.run/attestations/key-succession/v1",
            "root": {
                "kid": "k",
                "public_key_jwk": {"kid": "k", "kty": "OKP", "crv": "Ed25519", "x": "é"},
            },
            "entries": [],
        }
    ).encode(),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CHAINS))
def test_a_hostile_key_chain_trusts_nothing(name: str) -> None:
    from agentledger.bernstein.key_succession import Untrusted, key_trust

    pem = (SMALL.parent / "bernstein-3.23.0" / "audit.key").read_bytes()  # not a key either
    with pytest.raises(Untrusted):
        key_trust(HOSTILE_CHAINS[name], pem, "k", b"\x00" * 32, None)


@pytest.mark.parametrize(
    "token",
    [b"", b"\x30\x03\x02\x01\x01", DEEP, b"\x30" + b"\x84\xff\xff\xff\xff"],
    ids=["empty", "an integer", "nested deep", "a length past the end"],
)
def test_a_hostile_token_is_not_authenticated(token: bytes) -> None:
    from agentledger.bernstein.rfc3161_token import message_imprint
    from agentledger.bernstein.tsa_trust import authenticate_token

    from .test_tsa_trust import tsa

    root = tsa.root_ca("hostile root")
    check = authenticate_token(token, [root.certificate])
    assert check.problems and check.problems[0].startswith("token:")
    with pytest.raises(ValueError):
        message_imprint(token)
