"""A proof file checked by a second verifier we did not write: tlog-scales (PyPI, a test
dependency only) verifies the checkpoint with the vkey and the RFC 6962 inclusion of the
leaf that the proof's `extra` line (the entry) makes."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import blake3
import pytest
from tlog_scales.signing import Vkey
from tlog_scales.tlog import Checkpoint, InclusionProof, InclusionProofInvalid

from agentledger import Ledger


def _read_tlog_proof(text: str) -> tuple[bytes, int, list[bytes], str]:
    """The fields of a c2sp.org/tlog-proof@v1 file, as its spec lays them out."""
    head, _, checkpoint = text.partition("\n\n")
    lines = head.split("\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1"
    assert lines[1].startswith("extra ") and lines[2].startswith("index ")
    extra = base64.b64decode(lines[1].removeprefix("extra "))
    nodes = [base64.b64decode(line) for line in lines[3:]]
    return extra, int(lines[2].removeprefix("index ")), nodes, checkpoint


def _leaf_hash(entry: bytes) -> bytes:
    """The record hash a C2SP client checks: SHA-256(0x00 || log-leaf document), the
    document named by the entry's BLAKE3 domain hash (docs/FORMAT.md §3, §7)."""
    parsed = json.loads(entry)
    digest = blake3.blake3(entry, derive_key_context="agentledger/v1/entry").hexdigest()
    leaf = json.dumps(
        {"entry": "blake3:" + digest, "run": parsed["run"], "seq": parsed["seq"]},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    return hashlib.sha256(b"\x00" + leaf).digest()


def test_tlog_scales_verifies_our_proof_file(ledger: Ledger, tmp_path: Path, cli: Any) -> None:
    for run in ("run-a", "run-b", "run-c"):
        ledger.run(run).append_many([("step", {"i": i}) for i in range(90)])
    vkey = Vkey.from_string(cli("keys", "export", "--vkey").out.strip())
    text = cli("prove", "run-b", "44").out
    entry, index, nodes, note = _read_tlog_proof(text)
    checkpoint = Checkpoint.from_text(note)
    checkpoint.verify(vkey)  # raises unless our key signed it under the origin's name
    assert checkpoint.origin == f"agentledger/v1/ledger/{ledger.id}" == vkey.name
    proof = InclusionProof(index, checkpoint.size, nodes)
    proof.check(_leaf_hash(entry), checkpoint.root_hash)
    with pytest.raises(InclusionProofInvalid):
        proof.check(_leaf_hash(entry.replace(b'"i":44', b'"i":45')), checkpoint.root_hash)
    with pytest.raises(InclusionProofInvalid):
        InclusionProof(index + 1, checkpoint.size, nodes).check(
            _leaf_hash(entry), checkpoint.root_hash
        )
