"""Sealed bernstein workdirs, written by bernstein 3.23.0's own code.

    python sealed_workdirs.py make OUT
    python sealed_workdirs.py receipt-status RECEIPT[,PUBLIC_KEY_PEM]...
    python sealed_workdirs.py spine-status WORKDIR RUN...

Run as a child process: the wheel (fetched into the bench cache by
``benches/bernstein_peer.py``) is imported through that script's shim, which must not
leak into the test process. Verdicts come from the same script's ``audit`` command
(bernstein's ``audit verify`` pillars).

``make`` writes a small workdir with bernstein's writers, sealed as the orchestrator's
shutdown seals it (``bernstein_peer.generate``: ``compute_seal``, ``save_seal``,
``record_checkpoint``), and a witness co-signs that checkpoint (``cosign_checkpoint``,
``record_cosignature``). One more audit record is then logged (``AuditLog.log``), and a
second seal and checkpoint are written (with hash tiles, ``generate_tiles``), co-signed, and
anchored (``record_anchor``) with
an RFC 3161 token over it (``timestamp_token``: a TSTInfo in CMS SignedData whose
signature is not a real TSA's; bernstein checks only the imprint without a trust
bundle). ``OUT/first-audit`` keeps a copy of
``.sdd/audit`` as it was after the first seal (a rollback target); ``OUT/witness.pub`` is
the witness's raw public key and ``OUT/stranger.pub`` another key. The first run gets a
signed run receipt (``build_run_receipt``, its key ``OUT/receipt.key``, whose public half
is ``OUT/receipt.pem``; ``OUT/stranger.pem`` is another key). Every run's
journal is sealed into its lineage spine, as ``seal_journal_into_spine`` seals it at
finalization (``LineageSpine.record_entry``: the journal's bytes, step
``replay-journal-head:<head>``, keyed by the audit key).

``receipt-status`` prints, per receipt file (pinned to the key that follows it), the
``{"status", "tier"}`` bernstein's ``verify_run_receipt`` gives it, as ``bernstein verify
receipt [--public-key PEM]`` reports them; ``spine-status`` the status
``LineageSpine.verify`` gives each run's spine. The third run's sealed head is anchored
(``build_rfc3161_anchor``, ``write_anchor``: ``seal_anchor.json`` beside its journal).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib
import json
import shutil
import sys
import time
import types
from datetime import UTC
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

BENCHES = Path(__file__).resolve().parents[3] / "benches"
WITNESS_SEED = hashlib.sha256(b"witness").digest()
STRANGER_SEED = hashlib.sha256(b"stranger").digest()
RUNS, ROWS, SEED = 6, 12, 20261202


def _load(name: str) -> Any:
    """A module of the wheel (or of the benches), imported by name: none is installed in
    this virtualenv, so none is known to the type checker."""
    return importlib.import_module(name)


def _raw_public(seed: bytes) -> bytes:
    return bytes(SigningKey(seed).verify_key)


def _cosign(audit: Path, witness_state: Path) -> None:
    """The witness co-signs the newest checkpoint; the log host records it."""
    witness = _load("bernstein.core.persistence.checkpoint_witness")
    signers = _load("bernstein.core.persistence.lineage_signer")
    checkpoint = json.loads((audit / "checkpoints" / "latest.json").read_bytes())["payload"]
    private = SigningKey(WITNESS_SEED)
    signer = types.SimpleNamespace(sign=lambda payload: private.sign(payload).signature)
    result = witness.cosign_checkpoint(witness_state, checkpoint, signer, witness_id="test-witness")
    verifier = signers.Ed25519PublicKeyVerifier.from_raw(_raw_public(WITNESS_SEED))
    witness.record_cosignature(audit, result.cosignature, verifier)


def timestamp_token(digest: bytes) -> bytes:
    """A DER TimeStampToken whose message imprint is ``digest`` (SHA-256)."""
    from datetime import datetime

    from asn1crypto import algos, cms, core, tsp

    sha256 = algos.DigestAlgorithm({"algorithm": "sha256"})
    info = tsp.TSTInfo(
        {
            "version": "v1",
            "policy": "1.2.3.4",
            "message_imprint": {"hash_algorithm": sha256, "hashed_message": digest},
            "serial_number": 1,
            "gen_time": datetime(2026, 1, 2, tzinfo=UTC),
        }
    )
    signer = cms.SignerInfo(
        {
            "version": "v1",
            "sid": cms.SignerIdentifier(
                "issuer_and_serial_number",
                {"issuer": {"": {}}, "serial_number": 1},
            ),
            "digest_algorithm": sha256,
            "signature_algorithm": {"algorithm": "sha256_rsa"},
            "signature": b"\x00" * 64,
        }
    )
    signed = cms.SignedData(
        {
            "version": "v3",
            "digest_algorithms": [sha256],
            "encap_content_info": {
                "content_type": "tst_info",
                "content": core.ParsableOctetString(info.dump()),
            },
            "signer_infos": [signer],
        }
    )
    return bytes(cms.ContentInfo({"content_type": "signed_data", "content": signed}).dump())


def _tiles(audit: Path) -> None:
    """Hash tiles of the newest seal, as ``bernstein audit seal`` writes them."""
    newest = sorted((audit / "merkle").glob("seal-*.json"))[-1]
    _load("bernstein.core.persistence.tiles").generate_tiles(audit, json.loads(newest.read_bytes()))


def _anchor(audit: Path) -> None:
    anchors = _load("bernstein.core.persistence.checkpoint_anchor")
    checkpoint = json.loads((audit / "checkpoints" / "latest.json").read_bytes())["payload"]
    token = timestamp_token(anchors.checkpoint_digest(checkpoint))
    anchors.record_anchor(audit, checkpoint, token, tsa_url="https://tsa.invalid")


def pem(raw: bytes) -> bytes:
    """An Ed25519 SubjectPublicKeyInfo PEM of a raw public key."""
    body = base64.b64encode(bytes.fromhex("302a300506032b6570032100") + raw).decode()
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n".encode()


def _receipt(out: Path) -> None:
    kms = _load("bernstein.core.security.lineage_kms")
    receipts = _load("bernstein.core.replay.run_receipt")
    key = out / "receipt.key"
    seed = hashlib.sha256(b"receipt").digest()
    key.write_bytes(seed)
    (out / "receipt.pem").write_bytes(pem(_raw_public(seed)))
    (out / "stranger.pem").write_bytes(pem(_raw_public(STRANGER_SEED)))
    run_id = sorted(p.name for p in (out / ".sdd" / "runs").iterdir())[0]
    receipts.build_run_receipt(run_id, out / ".sdd", kms.FileBasedKMSAdapter(key))


def _seal_journals(out: Path, key: bytes) -> None:
    spine = _load("bernstein.core.lineage.spine")
    for run in sorted((out / ".sdd" / "runs").iterdir()):
        journal = (run / "journal.jsonl").read_bytes()
        head = json.loads(journal.splitlines()[-1])["event_hash"]
        spine.LineageSpine(out / ".sdd" / "lineage", run_id=run.name, hmac_key=key).record_entry(
            artifact_path=f".sdd/runs/{run.name}/journal.jsonl",
            content=journal,
            actor="orchestrator",
            step_id=f"{spine.JOURNAL_SEAL_STEP_PREFIX}{head}",
            model="",
            timestamp=1767225600,
        )


def _seal_anchor(out: Path) -> None:
    """The third run's sealed head anchored with an RFC 3161 token over it."""
    seal_anchor = _load("bernstein.core.security.seal_anchor")
    run = sorted((out / ".sdd" / "runs").iterdir())[2]
    head = json.loads((run / "journal.jsonl").read_bytes().splitlines()[-1])["event_hash"]
    anchor = seal_anchor.build_rfc3161_anchor(
        run_id=run.name,
        head_sha256=head,
        token_der=timestamp_token(bytes.fromhex(head)),
        tsa_url="https://tsa.invalid",
    )
    seal_anchor.write_anchor(run / seal_anchor.ANCHOR_FILENAME, anchor)


def make(out: Path) -> None:
    sys.path.insert(0, str(BENCHES))
    peer = _load("bernstein_peer")
    peer.generate(out, RUNS, ROWS, SEED, "wheel", peer.DEFAULT_CACHE)  # sealed once
    audit = out / ".sdd" / "audit"
    key = (out / "audit.key").read_bytes().strip()
    witness_state = out / "witness-state"
    _cosign(audit, witness_state)
    shutil.copytree(audit, out / "first-audit")
    audit_log = _load("bernstein.core.security.audit").AuditLog
    audit_log(audit, key=key).log("run.closed", "orchestrator", "run", "r-extra", {"n": 1})
    time.sleep(1.1)  # seal files are named to the second
    peer.seal_workdir(out)
    _tiles(audit)
    _cosign(audit, witness_state)
    _anchor(audit)
    _seal_journals(out, key)  # then the receipt, which embeds the spine, as at finalization
    _receipt(out)
    _seal_anchor(out)
    (out / "witness.pub").write_bytes(_raw_public(WITNESS_SEED))
    (out / "stranger.pub").write_bytes(_raw_public(STRANGER_SEED))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("make").add_argument("out", type=Path)
    sub.add_parser("receipt-status").add_argument("receipts", nargs="+")
    spines = sub.add_parser("spine-status")
    spines.add_argument("workdir", type=Path)
    spines.add_argument("runs", nargs="+")
    args = parser.parse_args()
    if args.command == "make":
        make(args.out)
        return
    sys.path.insert(0, str(BENCHES))
    peer = _load("bernstein_peer")
    peer.install_shim(peer.peer_dirs(peer.DEFAULT_CACHE))
    if args.command == "receipt-status":
        verify = _load("bernstein.core.replay.run_receipt").verify_run_receipt
        for spec in args.receipts:
            path, _, key = str(spec).partition(",")
            pinned = Path(key).read_bytes() if key else None
            try:
                status = verify(Path(path).read_bytes(), public_key_pem=pinned).status
            except Exception:  # the command dies on it: exit 1
                status = "raises"
            tier = ("provenance" if pinned else "integrity-only") if status == "ok" else None
            print(json.dumps({"status": status, "tier": tier}))
        return
    spine = _load("bernstein.core.lineage.spine").LineageSpine
    key = (args.workdir / "audit.key").read_bytes().strip()
    for run_id in args.runs:
        lineage = args.workdir / ".sdd" / "lineage"
        print(spine(lineage, run_id=run_id, hmac_key=key).verify().status.value)


if __name__ == "__main__":
    main()
