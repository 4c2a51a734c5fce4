"""A straightforward pure-Python verifier of the native journal format: the baseline.

It checks exactly what the Rust verifier checks (hash, canonical form, fields, chain links,
evidence set hashes), one row at a time, with apsw, ``json`` as the JCS serializer and the
``blake3`` package. It is what someone would write from docs/FORMAT.md in an afternoon.
"""

from __future__ import annotations

import json
from typing import Any

import apsw
import blake3


def domain_hash(domain: str, data: bytes) -> bytes:
    return blake3.blake3(data, derive_key_context="agentledger/v1/" + domain).digest()


def jcs(value: Any) -> bytes:
    # Exact JCS for the values these benches write (ints, ASCII keys, plain strings).
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def genesis(ledger_id: str, run_id: str) -> str:
    return "blake3:" + domain_hash("run-genesis", jcs({"ledger": ledger_id, "run": run_id})).hex()


def evidence_set_hash(hashes: list[str]) -> str:
    return "blake3:" + domain_hash("evidence-set", jcs(sorted(set(hashes)))).hex()


def verify(path: str) -> tuple[int, int]:
    """Return ``(entries, divergences)``."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    ledger_id = conn.execute("SELECT value FROM ledger_meta WHERE key = 'ledger_id'").fetchall()[0][
        0
    ]
    entries = divergences = 0
    run = None
    prev = ""
    expected_seq = 0
    for run_id, seq, kind, stored, raw in conn.execute(
        "SELECT run_id, seq, kind, hash, bytes FROM entries ORDER BY run_id, seq"
    ):
        entries += 1
        if run_id != run:
            run, prev, expected_seq = run_id, genesis(ledger_id, run_id), 0
        digest = domain_hash("entry", raw)
        doc = json.loads(raw)
        ok = (
            digest == stored
            and jcs(doc) == raw
            and doc["v"] == 1
            and doc["run"] == run_id
            and doc["seq"] == seq == expected_seq
            and doc["kind"] == kind
            and doc["prev"] == prev
        )
        if ok and kind == "activity.result":
            body = doc["body"]
            hashes = [o["content_hash"] for o in body["observations"]]
            ok = evidence_set_hash(hashes) == body["evidence_set_hash"]
        divergences += not ok
        prev = "blake3:" + digest.hex()
        expected_seq = seq + 1
    conn.close()
    return entries, divergences
