"""The workspace-log vectors in docs/vectors/log-v2.json are exactly what the code produces.

Run ``python -m tests.log.test_log_vectors --write`` to regenerate them (format changes only).
They are also recomputed independently here with ``hashlib`` and PyNaCl: leaves (log-leaf
documents), the RFC 6962 SHA-256 tree, the proofs, the checkpoint's signed bytes, signature
and verifier key, as docs/FORMAT.md sections 7, 8 and 10 describe them; and the root of the
BLAKE3 tree the log had before schema 6 with the ``blake3`` package.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
from nacl.signing import SigningKey

from agentledger import _core
from agentledger import log as wslog
from agentledger.notes import Checkpoint, sign, vkey

VECTORS = Path(__file__).parent.parent.parent / "docs" / "vectors" / "log-v2.json"
LEDGER_ID = "000102030405060708090a0b0c0d0e0f"
TS = "2026-01-01T00:00:00.000000Z"
SEED = bytes(range(32))
RUNS = ["run-a", "run-b"]


def _entries() -> list[tuple[str, int, bytes, bytes]]:
    """Two runs appended interleaved: a0, b0, a1, b1, a2 (leaf order)."""
    chains = {
        run: _core.encode_entries(
            run, 0, _core.genesis_prev(LEDGER_ID, run), TS, [("step", {"i": i}) for i in range(3)]
        )
        for run in RUNS
    }
    order = [("run-a", 0), ("run-b", 0), ("run-a", 1), ("run-b", 1), ("run-a", 2)]
    return [(run, seq, *chains[run][seq]) for run, seq in order]


def generate() -> dict[str, Any]:
    entries = _entries()
    leaves = [_core.log_leaf(run, seq, digest) for run, seq, _, digest in entries]
    state, root, _ = wslog.extend(
        wslog.EMPTY, [(i, run, seq, digest) for i, (run, seq, _, digest) in enumerate(entries)]
    )
    key = SigningKey(SEED)
    note = sign(Checkpoint(LEDGER_ID, len(leaves), root), key)
    legacy = _core.merkle_root(
        [_core.legacy_log_leaf(run, seq, digest) for run, seq, _, digest in entries], hash="blake3"
    )
    return {
        "ledger_id": LEDGER_ID,
        "signing_key_seed": SEED.hex(),
        "entries": [
            {"run": run, "seq": seq, "bytes": raw.decode(), "hash": "blake3:" + digest.hex()}
            for run, seq, raw, digest in entries
        ],
        "leaves": [leaf.decode() for leaf in leaves],
        "leaf_hashes": [_core.merkle_root([leaf]).hex() for leaf in leaves],
        "root": root.hex(),
        "frontier": [node.hex() for node in state.frontier],
        "inclusion_proof_leaf_2": [n.hex() for n in _core.inclusion_proof(leaves, 2)],
        "consistency_proof_3_to_5": [n.hex() for n in _core.consistency_proof(leaves, 3)],
        "checkpoint": note.text(),
        "vkey": vkey(note.origin, bytes(key.verify_key)),
        "legacy_blake3_root": legacy.hex(),
    }


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _mth(leaves: list[bytes], h: Callable[[bytes], bytes] = _h) -> bytes:
    if len(leaves) == 1:
        return h(b"\x00" + leaves[0])
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return h(b"\x01" + _mth(leaves[:k], h) + _mth(leaves[k:], h))


def test_log_vectors_file_matches_the_code() -> None:
    assert json.loads(VECTORS.read_text(encoding="utf-8")) == generate()


def test_log_vectors_recompute_independently() -> None:
    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    leaves = []
    for entry in vectors["entries"]:
        assert _core.domain_hash("entry", entry["bytes"].encode()).hex() == entry["hash"][7:]
        text = json.dumps(
            {"entry": entry["hash"], "run": entry["run"], "seq": entry["seq"]},
            separators=(",", ":"),
        ).encode()
        leaves.append(text)
    assert [leaf.decode() for leaf in leaves] == vectors["leaves"]
    assert [_h(b"\x00" + leaf).hex() for leaf in leaves] == vectors["leaf_hashes"]
    root = _mth(leaves)
    assert root.hex() == vectors["root"]
    origin = f"agentledger/v1/ledger/{LEDGER_ID}"
    body, _, signature_line = vectors["checkpoint"].partition("\n\n")
    assert body == f"{origin}\n5\n{base64.b64encode(root).decode()}"
    key = SigningKey(bytes.fromhex(vectors["signing_key_seed"]))
    public = bytes(key.verify_key)
    key_id = hashlib.sha256(origin.encode() + b"\n\x01" + public).digest()[:4]
    signature = key.sign((body + "\n").encode()).signature
    assert signature_line == f"\u2014 {origin} {base64.b64encode(key_id + signature).decode()}\n"
    encoded_key = base64.b64encode(b"\x01" + public).decode()
    assert vectors["vkey"] == f"{origin}+{key_id.hex()}+{encoded_key}"
    proof = [bytes.fromhex(n) for n in vectors["inclusion_proof_leaf_2"]]
    assert _core.verify_inclusion(leaves[2], 2, 5, proof, root)
    assert proof == [_mth(leaves[3:4]), _mth(leaves[0:2]), _mth(leaves[4:5])]
    consistency = [bytes.fromhex(n) for n in vectors["consistency_proof_3_to_5"]]
    assert _core.verify_consistency(3, 5, _mth(leaves[:3]), root, consistency)
    assert consistency == [
        _mth(leaves[2:3]),
        _mth(leaves[3:4]),
        _mth(leaves[0:2]),
        _mth(leaves[4:5]),
    ]


def test_the_blake3_root_before_schema_6_recomputes_from_the_same_entries() -> None:
    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    old_leaves = [
        blake3.blake3(leaf.encode(), derive_key_context="agentledger/v1/log-leaf").digest()
        for leaf in vectors["leaves"]
    ]

    def b3(data: bytes) -> bytes:
        digest: bytes = blake3.blake3(data).digest()
        return digest

    assert _mth(old_leaves, b3).hex() == vectors["legacy_blake3_root"]


if __name__ == "__main__" and "--write" in sys.argv:
    VECTORS.write_text(json.dumps(generate(), indent=2) + "\n", encoding="utf-8")
