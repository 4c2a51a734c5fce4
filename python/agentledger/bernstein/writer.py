"""A writer of bernstein-format workdirs, from the format description alone.

Used by the benchmark (to generate thousands of runs) and by tests (to forge
chain-consistent tampering). It writes what bernstein 3.23.0's writers write: journal
rows hashed with ``py-json-v1``, the flat store, signed DataOps receipts and the scheme-2
HMAC audit mirror. It is not used to import or verify anything.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentledger.bernstein.audit_chain import GENESIS, SCHEME2_PREFIX, hkdf_sha256
from agentledger.bernstein.format import ACTIVITY_EVENT, acanon, content_hash
from agentledger.keys import sign_message

SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


def py_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def hash_row(event: str, payload: dict[str, Any], index: int, prev: str) -> tuple[str, str]:
    """``(payload_hash, event_hash)`` of a row, profile ``py-json-v1``."""
    payload_hash = hashlib.sha256(py_json({**payload, "event": event})).hexdigest()
    preimage = {
        "prev_hash": prev,
        "event_type": event,
        "payload_hash": payload_hash,
        "index": index,
    }
    return payload_hash, hashlib.sha256(py_json(preimage)).hexdigest()


def row_line(
    event: str, payload: dict[str, Any], index: int, prev: str, ts: float
) -> tuple[str, str]:
    """One journal line (with its newline) and its event hash."""
    payload_hash, event_hash = hash_row(event, payload, index, prev)
    entry = {
        "ts": ts,
        "elapsed_s": round(index * 0.001, 3),
        "index": index,
        "event": event,
        "prev_hash": prev,
        "payload_hash": payload_hash,
        "event_hash": event_hash,
        **payload,
    }
    return json.dumps(entry, default=str) + "\n", event_hash


def rechain(lines: Sequence[str]) -> list[str]:
    """Re-hash parsed rows as a forger would: bernstein's chain has no key."""
    out, prev = [], ""
    for index, line in enumerate(lines):
        row = json.loads(line)
        envelope = ("ts", "elapsed_s", "index", "event", "prev_hash", "payload_hash", "event_hash")
        payload = {k: v for k, v in row.items() if k not in envelope}
        text, prev = row_line(str(row.get("event", "")), payload, index, prev, row.get("ts", 0.0))
        out.append(text)
    return out


def public_key_pem(raw: bytes) -> str:
    body = base64.b64encode(SPKI_PREFIX + raw).decode()
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n"


def sign_receipt(
    kind: str,
    inputs: Sequence[tuple[str, bytes]],
    outputs: Sequence[tuple[str, bytes]],
    steps: Sequence[str],
    seed: bytes,
) -> dict[str, Any]:
    """A DataOpsReceipt signed with the Ed25519 key of ``seed`` (32 bytes)."""
    from nacl.signing import SigningKey

    key = SigningKey(seed)

    def artifact(role: str, ref: str, data: bytes) -> dict[str, Any]:
        digest = content_hash(data)
        message = acanon({"role": role, "ref": ref, "content_hash": digest})
        signature = base64.urlsafe_b64encode(sign_message(key, message)).rstrip(b"=").decode()
        return {"role": role, "ref": ref, "content_hash": digest, "signature": signature}

    input_hashes = sorted({content_hash(data) for _, data in inputs})
    plan_hash = content_hash(acanon({"input_hashes": input_hashes, "steps": list(steps)}))
    return {
        "kind": kind,
        "plan": {"input_hashes": input_hashes, "steps": list(steps), "plan_hash": plan_hash},
        "inputs": [artifact("input", ref, data) for ref, data in inputs],
        "outputs": [artifact("output", ref, data) for ref, data in outputs],
        "signer_public_key_pem": public_key_pem(bytes(key.verify_key)),
    }


@dataclass
class AuditWriter:
    """The scheme-2 HMAC chain, one file per UTC day."""

    folder: Path
    master: bytes
    head: str = GENESIS
    key: bytes = b""

    def __post_init__(self) -> None:
        self.key = hkdf_sha256(self.master, b"audit")
        self.folder.mkdir(parents=True, exist_ok=True)

    def append(
        self, event_type: str, resource_id: str, details: dict[str, Any], when: float
    ) -> None:
        stamp = datetime.fromtimestamp(when, UTC)
        record: dict[str, Any] = {
            "actor": "activity",
            "details": {**details, "prev_chain_digest": self.head},
            "event_type": event_type,
            "prev_hmac": self.head,
            "resource_id": resource_id,
            "resource_type": "activity_result",
            "scheme": 2,
            "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        message = SCHEME2_PREFIX + self.head.encode() + json.dumps(record, sort_keys=True).encode()
        record["hmac"] = hmac.new(self.key, message, hashlib.sha256).hexdigest()
        with (self.folder / f"{stamp:%Y-%m-%d}.jsonl").open("a", encoding="ascii") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
        self.head = record["hmac"]


@dataclass
class RunWriter:
    """Appends rows to one run journal, hashing them the way ``EventJournal`` does."""

    workdir: WorkdirWriter
    run_id: str
    lines: list[str] = field(default_factory=list)
    prev: str = ""

    def record(self, event: str, **payload: Any) -> str:
        index = len(self.lines)
        line, self.prev = row_line(event, payload, index, self.prev, self.workdir.tick())
        self.lines.append(line)
        return self.prev

    def activity(
        self,
        stage_id: str,
        kind: str,
        artifact: Any,
        observations: Sequence[tuple[str, str, bytes]],
        terminal_state: str = "completed",
        reason_code: str = "ok",
        store_artifact: bool = False,
    ) -> None:
        store = self.workdir.store
        for _, _, data in observations:
            store(data)
        artifact_bytes = acanon(artifact)
        if store_artifact:
            store(artifact_bytes)
        hashes = sorted({content_hash(data) for _, _, data in observations})
        payload = {
            "stage_id": stage_id,
            "kind": kind,
            "artifact_hash": content_hash(artifact_bytes),
            "evidence_set_hash": content_hash(acanon(hashes)),
            "terminal_state": terminal_state,
            "reason_code": reason_code,
            "observations": [
                {"kind": okind, "ref": ref, "content_hash": content_hash(data)}
                for okind, ref, data in observations
            ],
        }
        index = len(self.lines)
        event_hash = self.record(ACTIVITY_EVENT, **payload)
        audit = self.workdir.audit
        if audit is not None:
            details = {
                "run_id": self.run_id,
                "stage_id": stage_id,
                "kind": kind,
                "artifact_hash": payload["artifact_hash"],
                "evidence_set_hash": payload["evidence_set_hash"],
                "terminal_state": terminal_state,
                "reason_code": reason_code,
                "journal_index": index,
                "journal_event_hash": event_hash,
            }
            audit.append(ACTIVITY_EVENT, stage_id, details, self.workdir.clock)

    def close(self) -> None:
        folder = self.workdir.root / ".sdd" / "runs" / self.run_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "journal.jsonl").write_text("".join(self.lines), encoding="ascii")


@dataclass
class WorkdirWriter:
    root: Path
    audit_master: bytes | None = None
    clock: float = 1767225600.0
    audit: AuditWriter | None = None

    def __post_init__(self) -> None:
        (self.root / ".sdd" / "cas").mkdir(parents=True, exist_ok=True)
        (self.root / ".sdd" / "runs").mkdir(parents=True, exist_ok=True)
        if self.audit_master is not None:
            self.audit = AuditWriter(self.root / ".sdd" / "audit", self.audit_master)

    def tick(self) -> float:
        self.clock += 0.000731
        return round(self.clock, 6)

    def store(self, data: bytes) -> str:
        digest = content_hash(data)
        path = self.root / ".sdd" / "cas" / digest.split(":", 1)[1]
        if not path.exists():
            path.write_bytes(data)
        return digest

    def run(self, run_id: str) -> RunWriter:
        return RunWriter(self, run_id)
