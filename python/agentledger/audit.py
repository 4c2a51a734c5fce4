"""The audit mirror: every crossing of the activity boundary, in an HMAC-SHA256 chain.

Each record is the canonical JSON of hashes and labels only (run, seq, entry hash, stage,
kind, terminal state, reason code, artifact and evidence set hashes): never artifact or
evidence bytes, never a ref. Each record names the MAC of the one before it (``prev``), and
its own MAC covers its bytes:

    K      = HKDF-SHA256(ikm = audit master key, salt = none, info = "agentledger/v1/audit", 32)
    mac(n) = HMAC-SHA256(K, record(n))        record(n).prev = hex(mac(n-1)), "0"*64 for n = 0

so without the key nobody can add, edit, remove (except at the tail) or reorder a record
unnoticed, and each record still verifies on its own in an archive that holds only some
runs' records. Verify cross-checks the mirror and the journal both ways (verify/audit.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import apsw

from agentledger import _core

AUDIT_INFO = b"agentledger/v1/audit"
GENESIS_MAC = bytes(32)
RECORD_VERSION = 1
RECORD_FIELDS = (
    "artifact_hash", "entry_hash", "event", "evidence_set_hash", "kind", "ledger", "pos",
    "prev", "reason_code", "refusal", "run", "seq", "stage_id", "terminal_state", "v",
)  # fmt: skip
"""Exactly the members of a record. Every one is a hash, a label or a position."""


def mac_key(master: bytes) -> bytes:
    """The HMAC key derived from the audit master key (domain-separated)."""
    return _core.hkdf_sha256(master, None, AUDIT_INFO, 32)


def record_mac(key: bytes, record: bytes) -> bytes:
    """The MAC of one record's bytes (which name the previous record's MAC)."""
    return _core.hmac_sha256(key, record)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    pos: int
    run_id: str
    seq: int
    record: bytes
    mac: bytes

    def fields(self) -> dict[str, Any]:
        doc = json.loads(self.record)
        if not isinstance(doc, dict):
            raise ValueError("an audit record is a JSON object")
        return doc


def build_record(
    *,
    ledger_id: str,
    pos: int,
    event: str,
    run_id: str,
    seq: int,
    entry_hash: str,
    body: dict[str, Any],
    refusal: str | None,
    prev_mac: bytes,
) -> bytes:
    """The canonical bytes of one record, taken from the journal entry it mirrors."""
    doc = {
        "v": RECORD_VERSION,
        "ledger": ledger_id,
        "pos": pos,
        "prev": prev_mac.hex(),
        "event": event,
        "run": run_id,
        "seq": seq,
        "entry_hash": entry_hash,
        "stage_id": body.get("stage_id"),
        "kind": body.get("kind"),
        "terminal_state": body.get("terminal_state"),
        "reason_code": body.get("reason_code"),
        "artifact_hash": body.get("artifact_hash"),
        "evidence_set_hash": body.get("evidence_set_hash"),
        "refusal": refusal,
    }
    return _core.canonicalize(doc)


def append_record(
    conn: apsw.Connection,
    master: bytes,
    *,
    ledger_id: str,
    event: str,
    run_id: str,
    seq: int,
    entry_hash: str,
    body: dict[str, Any],
    refusal: str | None = None,
) -> AuditRecord:
    """Append one record inside the caller's write transaction."""
    rows = conn.execute("SELECT pos, mac FROM audit_log ORDER BY pos DESC LIMIT 1").fetchall()
    pos, prev = 0, GENESIS_MAC
    if rows:
        last_pos, last_mac = rows[0]
        assert isinstance(last_pos, int) and isinstance(last_mac, bytes)
        pos, prev = last_pos + 1, last_mac
    record = build_record(
        ledger_id=ledger_id, pos=pos, event=event, run_id=run_id, seq=seq,
        entry_hash=entry_hash, body=body, refusal=refusal, prev_mac=prev,
    )  # fmt: skip
    mac = record_mac(mac_key(master), record)
    conn.execute(
        "INSERT INTO audit_log (pos, run_id, seq, record, mac) VALUES (?, ?, ?, ?, ?)",
        (pos, run_id, seq, record, mac),
    )
    return AuditRecord(pos, run_id, seq, record, mac)


def read_records(conn: apsw.Connection) -> list[AuditRecord]:
    return [
        AuditRecord(int(pos), str(run_id), int(seq), bytes(record), bytes(mac))
        for pos, run_id, seq, record, mac in conn.execute(
            "SELECT pos, run_id, seq, record, mac FROM audit_log ORDER BY pos"
        )
    ]
