"""The activity vectors in docs/vectors/activity-v1.json are exactly what the code produces.

Run ``python tests/activity/test_activity_vectors.py --write`` to regenerate them (format
changes only). They are also re-derived independently (the ``blake3`` package, PyNaCl,
``hmac``/``hashlib``) so that FORMAT.md §6 describes what the code does: a plan hash, the
exact signed statements and their signatures, a sealed receipt and its artifact hash, and
one audit record with its MAC.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from pathlib import Path
from typing import Any

import blake3
from nacl.signing import SigningKey, VerifyKey

from agentledger import _core
from agentledger.activity.receipts import (
    SignedArtifact,
    artifact_statement,
    build_receipt,
    plan_hash,
    seal_statement,
    sign,
)
from agentledger.audit import build_record, mac_key, record_mac

VECTORS = Path(__file__).parent.parent.parent / "docs" / "vectors" / "activity-v1.json"
SEED = bytes(range(32))
AUDIT_MASTER = b"0" * 64
LEDGER_ID = "000102030405060708090a0b0c0d0e0f"
RUN_ID, STAGE_ID, KIND = "run-7", "data-0", "data"
INPUTS = [("in.csv", b"a,b\n1,2\n")]
STEPS: list[Any] = ["sum b", {"write": "out.csv"}]
OUTPUTS = [("out.csv", b"sum\n2\n")]


def generate() -> dict[str, Any]:
    key = SigningKey(SEED)
    input_hashes = [_core.blake3_hex(data) for _, data in INPUTS]
    plan = plan_hash(input_hashes, STEPS)
    statements = []
    signed: dict[str, list[SignedArtifact]] = {"input": [], "output": []}
    for role, items in (("input", INPUTS), ("output", OUTPUTS)):
        for ref, data in items:
            statement = artifact_statement(
                kind=KIND, run_id=RUN_ID, stage_id=STAGE_ID, plan_hash=plan, role=role,
                ref=ref, content_hash=_core.blake3_hex(data),
            )  # fmt: skip
            signature = sign(key, statement)
            statements.append({"statement": statement.decode(), "signature": signature})
            signed[role].append(SignedArtifact(role, ref, _core.blake3_hex(data), signature))
    receipt = build_receipt(
        key, kind=KIND, run_id=RUN_ID, stage_id=STAGE_ID, steps=STEPS, plan_hash_value=plan,
        input_hashes=input_hashes, inputs=signed["input"], outputs=signed["output"],
    )  # fmt: skip
    receipt_bytes = _core.canonicalize(receipt)
    observations = [_core.blake3_hex(d) for _, d in INPUTS + OUTPUTS]
    body = {
        "stage_id": STAGE_ID,
        "kind": KIND,
        "terminal_state": "completed",
        "reason_code": "ok",
        "artifact_hash": _core.blake3_hex(receipt_bytes),
        "evidence_set_hash": _core.evidence_set_hash(observations),
    }
    entry_hash = "blake3:" + "ee" * 32
    record = build_record(
        ledger_id=LEDGER_ID, pos=0, event="activity.result", run_id=RUN_ID, seq=3,
        entry_hash=entry_hash, body=body, refusal=None, prev_mac=bytes(32),
    )  # fmt: skip
    return {
        "signing_seed": SEED.hex(),
        "public_key": "ed25519:" + bytes(key.verify_key).hex(),
        "run": RUN_ID,
        "stage_id": STAGE_ID,
        "kind": KIND,
        "inputs": [{"ref": r, "bytes": d.decode()} for r, d in INPUTS],
        "outputs": [{"ref": r, "bytes": d.decode()} for r, d in OUTPUTS],
        "steps": STEPS,
        "plan_projection": _core.canonicalize(
            {"input_hashes": sorted(set(input_hashes)), "steps": STEPS}
        ).decode(),
        "plan_hash": plan,
        "signed_statements": statements,
        "seal_statement": seal_statement(receipt).decode(),
        "receipt": receipt_bytes.decode(),
        "artifact_hash": body["artifact_hash"],
        "evidence_set_hash": body["evidence_set_hash"],
        "audit": {
            "master_key": AUDIT_MASTER.decode(),
            "mac_key": mac_key(AUDIT_MASTER).hex(),
            "record": record.decode(),
            "mac": record_mac(mac_key(AUDIT_MASTER), record).hex(),
        },
    }


def test_vectors_file_matches_the_code() -> None:
    assert json.loads(VECTORS.read_text(encoding="utf-8")) == generate()


def test_vectors_recompute_independently() -> None:
    v = json.loads(VECTORS.read_text(encoding="utf-8"))
    plan = blake3.blake3(
        v["plan_projection"].encode(), derive_key_context="agentledger/v1/data-ops-plan"
    ).hexdigest()
    assert v["plan_hash"] == "blake3:" + plan
    verify_key = VerifyKey(bytes.fromhex(v["public_key"].removeprefix("ed25519:")))
    for item in v["signed_statements"]:
        statement = json.loads(item["statement"])
        assert statement["plan_hash"] == v["plan_hash"]
        assert statement["domain"] == "agentledger/v1/data-ops-artifact"
        verify_key.verify(item["statement"].encode(), bytes.fromhex(item["signature"]))
    receipt = json.loads(v["receipt"])
    verify_key.verify(v["seal_statement"].encode(), bytes.fromhex(receipt["seal"]))
    assert json.loads(v["seal_statement"])["receipt"] == {
        k: val for k, val in receipt.items() if k != "seal"
    }
    assert v["artifact_hash"] == "blake3:" + blake3.blake3(v["receipt"].encode()).hexdigest()
    audit = v["audit"]
    prk = hmac.new(bytes(32), audit["master_key"].encode(), hashlib.sha256).digest()
    okm = hmac.new(prk, b"agentledger/v1/audit\x01", hashlib.sha256).digest()
    assert audit["mac_key"] == okm.hex()
    assert json.loads(audit["record"])["prev"] == "00" * 32  # the first record of a chain
    mac = hmac.new(okm, audit["record"].encode(), hashlib.sha256).hexdigest()
    assert audit["mac"] == mac


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    VECTORS.write_text(json.dumps(generate(), indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {VECTORS}")
