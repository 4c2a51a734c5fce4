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
