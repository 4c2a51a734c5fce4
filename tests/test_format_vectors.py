"""The native-format vectors in docs/vectors/ are exactly what the code produces.

Run ``python tests/test_format_vectors.py --write`` to regenerate them (format changes only).
The vectors are also checked against an independent recomputation with the ``blake3``
package, so docs/FORMAT.md describes what the code does, not just what it did once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import blake3

from agentledger import _core

VECTORS = Path(__file__).parent.parent / "docs" / "vectors" / "journal-v1.json"
LEDGER_ID = "000102030405060708090a0b0c0d0e0f"
RUN_ID = "run-001"
TS = "2026-01-01T00:00:00.000000Z"
PAGES = [b"<html>first page</html>", b"<html>second page</html>"]


def generate() -> dict[str, Any]:
    observations = [
        {"kind": "page", "ref": f"https://example.org/{i}", "content_hash": _core.blake3_hex(p)}
        for i, p in enumerate(PAGES)
    ]
    evidence = _core.evidence_set_hash([o["content_hash"] for o in observations])
    items = [
        ("task_claimed", {"task": "t-1"}),
        ("activity.result", {"evidence_set_hash": evidence, "observations": observations}),
    ]
    genesis = _core.genesis_prev(LEDGER_ID, RUN_ID)
    encoded = _core.encode_entries(RUN_ID, 0, genesis, TS, items)
    return {
        "ledger_id": LEDGER_ID,
        "run": RUN_ID,
        "ts": TS,
        "genesis_prev": genesis,
        "pages": [p.decode() for p in PAGES],
        "evidence_set_hash": evidence,
        "entries": [{"bytes": raw.decode(), "hash": "blake3:" + h.hex()} for raw, h in encoded],
    }


def d(domain: str, data: bytes) -> str:
    return (
        "blake3:" + blake3.blake3(data, derive_key_context="agentledger/v1/" + domain).hexdigest()
    )


def test_vectors_file_matches_the_code() -> None:
    assert json.loads(VECTORS.read_text(encoding="utf-8")) == generate()


def test_vectors_recompute_independently_with_the_blake3_package() -> None:
    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    genesis = json.dumps({"ledger": LEDGER_ID, "run": RUN_ID}, separators=(",", ":")).encode()
    assert vectors["genesis_prev"] == d("run-genesis", genesis)
    hashes = sorted("blake3:" + blake3.blake3(p.encode()).hexdigest() for p in vectors["pages"])
    assert vectors["evidence_set_hash"] == d(
        "evidence-set", json.dumps(hashes, separators=(",", ":")).encode()
    )
    prev = vectors["genesis_prev"]
    for seq, entry in enumerate(vectors["entries"]):
        doc = json.loads(entry["bytes"])
        assert (doc["run"], doc["seq"], doc["prev"], doc["v"]) == (RUN_ID, seq, prev, 1)
        assert entry["hash"] == d("entry", entry["bytes"].encode())
        prev = entry["hash"]


if __name__ == "__main__" and "--write" in sys.argv:
    VECTORS.write_text(
        json.dumps(generate(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
