"""Sealed bernstein workdirs, written by bernstein 3.23.0's own code.

    python sealed_workdirs.py make OUT
    python sealed_workdirs.py receipt-status RECEIPT[,PUBLIC_KEY_PEM]...
    python sealed_workdirs.py spine-status WORKDIR RUN...
    python sealed_workdirs.py audit SPEC_JSON...

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

``OUT/tsa/`` holds a test TSA's trust bundle (``bundle.pem``: a root CA made by
``tsa_tokens.py``) and, per variant in ``TSA_VARIANTS``, an ``anchors.jsonl`` anchoring the
newest checkpoint with a token that TSA (or another) signed, recorded by bernstein's
``record_anchor`` (the tampered one, which it refuses, is written in its format).

``audit`` is ``bernstein audit verify``'s audit-folder pillars, like the bench's ``audit``
command, with the options it cannot pass: each SPEC_JSON is ``{"workdir", "witness_key",
"tsa_bundle", "witness_state"}`` (all but the first optional); one ``AUDIT {json}`` line
each.

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


RECEIPT_VARIANTS = ("jcs", "audit_range", "extensions", "everything")


def _receipt_variants(out: Path, key: bytes) -> None:
    """``OUT/receipts/<variant>.json``: receipts bernstein's ``build_run_receipt`` signs
    (key ``OUT/receipt.key``) over a copy of the first run, its spine and the audit
    folder: the ``jcs-v2`` profile, an embedded audit range (the whole chain), a
    ``loaded_extension_set`` row appended to the journal (``EventJournal.record``), and
    all three at once."""
    kms = _load("bernstein.core.security.lineage_kms")
    receipts = _load("bernstein.core.replay.run_receipt")
    journal_module = _load("bernstein.core.replay.journal")
    sdd = out / "receipts" / "scratch" / ".sdd"
    run_id = sorted(p.name for p in (out / ".sdd" / "runs").iterdir())[0]
    shutil.copytree(out / ".sdd" / "runs" / run_id, sdd / "runs" / run_id)
    shutil.copytree(out / ".sdd" / "lineage" / run_id, sdd / "lineage" / run_id)
    shutil.copytree(out / ".sdd" / "audit", sdd / "audit")
    (sdd / "runs" / run_id / "run-receipt.json").unlink()
    adapter = kms.FileBasedKMSAdapter(out / "receipt.key")
    window = {
        "include_audit_range": True,
        "audit_hmac_key": key,
        "audit_since": "2026-01-01T00:00:00Z",
        "audit_until": "2027-01-01T00:00:00Z",
    }

    def build(name: str, **options: Any) -> None:
        target = out / "receipts" / f"{name}.json"
        receipts.build_run_receipt(run_id, sdd, adapter, output_path=target, **options)

    build("jcs", hash_profile="jcs-v2")
    build("audit_range", **window)
    journal = journal_module.EventJournal.resume(run_id, sdd)
    extensions = [
        {
            "kind": "skill",
            "name": "review",
            "source": "templates",
            "origin": "/skills/review",
            "version": "1.2.0",
            "content_digest": "sha256:" + "ab" * 32,
        },
        {
            "kind": "plugin",
            "name": "näive",
            "source": "config",
            "origin": "pkg:mod",
            "version": "0.1",
            "content_digest": "sha256:" + "cd" * 32,
        },
    ]
    journal.record(
        "loaded_extension_set",
        extension_set_digest="sha256:stated",
        extension_set_schema_version="1.0.0",
        extension_count=2,
        extensions=extensions,
    )
    build("extensions")
    build("everything", hash_profile="jcs-v2", **window)


KEY_CHAINS = ("root", "rotated_in", "rotated_out", "revoked", "unrelated")
REVOKED_AT = "2026-06-01T00:00:00+00:00"


def _key_chains(out: Path) -> None:
    """``OUT/key-chains/<name>.json``: key-succession chains bernstein's own functions
    build and sign (``new_key_chain``, ``append_succession``, ``append_revocation``),
    around the receipt key (``OUT/receipt.key``, kid ``receipt.key``) and another
    (``OUT/stranger.key``): rooted at the receipt key; rooted at the other, which hands
    over to the receipt key; rooted at the receipt key, which hands over to the other;
    the same, the receipt key then revoked at ``REVOKED_AT``; rooted at the other alone."""
    kms = _load("bernstein.core.security.lineage_kms")
    chains = _load("bernstein.core.security.receipt_key_chain")
    (out / "stranger.key").write_bytes(STRANGER_SEED)
    mine = kms.FileBasedKMSAdapter(out / "receipt.key")
    other = kms.FileBasedKMSAdapter(out / "stranger.key")
    when = "2026-03-01T00:00:00+00:00"
    rooted = chains.new_key_chain(mine.public_key_jwk())
    rotated_out = chains.append_succession(
        rooted, public_key_jwk=other.public_key_jwk(), issued_at=when, signer=mine
    )
    made = {
        "root": rooted,
        "rotated_in": chains.append_succession(
            chains.new_key_chain(other.public_key_jwk()),
            public_key_jwk=mine.public_key_jwk(),
            issued_at=when,
            signer=other,
        ),
        "rotated_out": rotated_out,
        "revoked": chains.append_revocation(
            rotated_out, kid="receipt.key", revoked_at=REVOKED_AT, reason="lost", signer=other
        ),
        "unrelated": chains.new_key_chain(other.public_key_jwk()),
    }
    (out / "key-chains").mkdir()
    for name, chain in made.items():
        (out / "key-chains" / f"{name}.json").write_bytes(chains.serialize_key_chain(chain))


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


TSA_VARIANTS = (
    "good",
    "intermediate_ec",
    "untrusted",
    "expired",
    "expired_since",
    "no_timestamping_usage",
    "tampered_imprint",
)
"""The anchors files of ``OUT/tsa``: what each token is is in ``_tsa_anchors``."""


def _tsa_anchors(out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    tsa = _load("tsa_tokens")
    anchors = _load("bernstein.core.persistence.checkpoint_anchor")
    audit = out / ".sdd" / "audit"
    checkpoint = json.loads((audit / "checkpoints" / "latest.json").read_bytes())["payload"]
    digest = anchors.checkpoint_digest(checkpoint)
    root, stranger = tsa.root_ca("test TSA root"), tsa.root_ca("stranger root")
    intermediate = tsa.issue(root, "test TSA intermediate", ca=True, rsa_key=False)
    early, late = tsa.GEN_TIME.replace(year=2020), tsa.GEN_TIME.replace(year=2021)
    tokens = {
        "good": tsa.token(tsa.issue(root, "test TSA"), digest),
        "intermediate_ec": tsa.token(
            tsa.issue(intermediate, "test TSA (EC)", rsa_key=False),
            digest,
            chain=(intermediate,),
        ),
        "untrusted": tsa.token(tsa.issue(stranger, "stranger TSA"), digest),
        # expired before it signed: no valid path at the token's time
        "expired": tsa.token(tsa.issue(root, "old TSA", not_before=early, not_after=late), digest),
        # valid when it signed, expired since (both verifiers judge at genTime)
        "expired_since": tsa.token(
            tsa.issue(root, "retired TSA", not_after=tsa.GEN_TIME.replace(month=6)), digest
        ),
        "no_timestamping_usage": tsa.token(tsa.issue(root, "plain", timestamping=False), digest),
    }
    folder = out / "tsa"
    folder.mkdir()
    (folder / "bundle.pem").write_bytes(root.pem())
    for name, token in tokens.items():
        scratch = folder / name
        anchors.record_anchor(scratch, checkpoint, token, tsa_url="https://tsa.invalid")
        (scratch / "checkpoints" / "anchors.jsonl").rename(folder / f"{name}.jsonl")
        shutil.rmtree(scratch)
    # Seal anchors of the third run's head (its journal as sealed), by the same TSAs.
    seal_anchor = _load("bernstein.core.security.seal_anchor")
    run = sorted((out / ".sdd" / "runs").iterdir())[2]
    head = json.loads((run / "journal.jsonl").read_bytes().splitlines()[-1])["event_hash"]
    for name, signer in (
        ("good", tsa.issue(root, "test TSA")),
        ("untrusted", tsa.issue(stranger, "s")),
    ):
        anchor = seal_anchor.build_rfc3161_anchor(
            run_id=run.name,
            head_sha256=head,
            token_der=tsa.token(signer, bytes.fromhex(head)),
            tsa_url="https://tsa.invalid",
        )
        seal_anchor.write_anchor(folder / f"seal-{name}.json", anchor)
    other = hashlib.sha256(b"another checkpoint").digest()
    tampered = tsa.token(tsa.issue(root, "test TSA"), digest, imprint_after_signing=other)
    doc = json.loads((folder / "good.jsonl").read_bytes())
    doc.update(payload_sha256=other.hex(), token_b64=base64.b64encode(tampered).decode())
    line = json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"
    (folder / "tampered_imprint.jsonl").write_text(line)


def _lineage_store(out: Path, key: bytes) -> None:
    """``OUT/lineage-store``: lineage store logs (``log.jsonl``) written by bernstein's
    ``LineageStore.append``: ``active.jsonl`` (an entry and one derived from it),
    ``orphan.jsonl`` (an entry whose parent the log lacks); and ``revoked-audit``, the
    audit folder with one more record revoking the first entry (``AuditLog.log``)."""
    entries = _load("bernstein.core.lineage.entry")
    store_class = _load("bernstein.core.lineage.store").LineageStore
    folder = out / "lineage-store"

    def entry(name: str, parents: list[str], **extra: Any) -> Any:
        return entries.LineageEntry(
            v=1,
            artefact_path=f"src/{name}.py",
            artefact_kind="file",
            content_hash="sha256:" + hashlib.sha256(name.encode()).hexdigest(),
            parent_hashes=parents,
            agent_id="agent-1",
            agent_card_kid="kid-1",
            tool_call_id=f"call-{name}",
            span_id=f"span-{name}",
            ts_ns=1767225600000000000,
            operator_hmac="",
            **extra,
        )

    def write(name: str, *items: Any) -> list[str]:
        store = store_class(folder / name)
        hashes = [store.append(item, jws="") for item in items]
        (folder / name / "log.jsonl").rename(folder / f"{name}.jsonl")
        shutil.rmtree(folder / name)
        return hashes

    first = entry("first", [])
    hashes = write(
        "active", first, entry("second", [entries.entry_hash(first)], trust_class="workspace")
    )
    write("orphan", entry("orphan", ["sha256:" + "0" * 64]))
    shutil.copytree(out / ".sdd" / "audit", folder / "revoked-audit")
    _load("bernstein.core.security.audit").AuditLog(folder / "revoked-audit", key=key).log(
        "mandate.revocation", "operator", "mandate", "m-1", {"lineage_entry_hash": hashes[0]}
    )


TEAR_VARIANTS = ("torn", "torn_sealed", "torn_acknowledged", "torn_acknowledged_elsewhere")


LONG_TORN = b'{"actor": "' + b"9" * 5_000
"""A partial record as long as one holding a 5,000-digit integer: a test rewrites it in
place into one, which bernstein's own code cannot write."""


def _tears(out: Path, key: bytes) -> None:
    """``OUT/tears/<variant>``: audit folders whose last day file was torn (a partial
    record, as a crash leaves it), then, with bernstein's ``AuditLog``: sealed by the next
    append (its ``chain.torn_record``), acknowledged as ``bernstein audit ack-tear``
    records it (``chain.tear_acknowledged`` naming the tear verify printed), or
    acknowledged at another offset. ``OUT/tears/torn_long_acknowledged`` is
    ``torn_acknowledged`` with ``LONG_TORN`` for the partial record."""
    for variant in TEAR_VARIANTS:
        _tear(out, key, variant, b'{"actor": "orchestr')
    _tear(out, key, "torn_long_acknowledged", LONG_TORN)


def _tear(out: Path, key: bytes, variant: str, torn: bytes) -> None:
    audit_module = _load("bernstein.core.security.audit")
    folder = out / "tears" / variant
    shutil.copytree(out / ".sdd" / "audit", folder)
    day = sorted(folder.glob("*.jsonl"))[-1]
    with day.open("ab") as handle:
        handle.write(torn)
    log = audit_module.AuditLog(folder, key=key)
    if variant == "torn_sealed":
        log.log("run.closed", "orchestrator", "run", "r-after", {"n": 2})
    elif variant != "torn":
        tear = log.verify_detailed().tears[0]
        offset = tear.byte_offset + (variant == "torn_acknowledged_elsewhere")
        details = {"segment": tear.segment, "byte_offset": offset, "reason": "crash"}
        log.log(
            audit_module.EVENT_CHAIN_TEAR_ACKNOWLEDGED,
            "operator",
            "audit_segment",
            tear.segment,
            details,
        )


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
    _receipt_variants(out, key)
    _key_chains(out)
    _seal_anchor(out)
    _tsa_anchors(out)
    _lineage_store(out, key)
    _tears(out, key)
    (out / "witness.pub").write_bytes(_raw_public(WITNESS_SEED))
    (out / "stranger.pub").write_bytes(_raw_public(STRANGER_SEED))


def _replay_status(spec: dict[str, Any]) -> dict[str, Any]:
    """``bernstein replay RUN --verify``, step by step with its own functions (its command
    module needs packages absent here): the spine's seal (``read_sealed_journal_head``,
    which reads the audit key from ``$BERNSTEIN_AUDIT_KEY_PATH``), ``verify_journal`` with
    it, ``verify_provider_state``; exit 0 only on an intact chain that does not
    contradict the seal."""
    import os

    journal = _load("bernstein.core.replay.journal")
    provider = _load("bernstein.core.replay.provider_state")
    workdir = Path(spec["workdir"]).resolve()
    key = workdir / "audit.key"
    key.chmod(0o600)
    os.environ["BERNSTEIN_AUDIT_KEY_PATH"] = str(key if spec.get("keyed") else workdir / "none")
    path = workdir / ".sdd" / "runs" / spec["run"] / "journal.jsonl"
    if not path.exists():
        return {"status": "missing", "code": 1}
    sealed = journal.read_sealed_journal_head(run_id=spec["run"], sdd_dir=workdir / ".sdd")
    seal = None
    if sealed is not None:
        seal = journal.JournalSeal(head=sealed, event_count=journal.verify_journal(path).count)
    result = journal.verify_journal(path, seal=seal)
    if not result.chain_consistent or result.discarded_line_indices:
        return {"status": "diverged", "code": 1}
    if not provider.verify_provider_state(path).ok:
        return {"status": "provider_state", "code": 1}
    status = str(result.identity.value)
    return {"status": status, "code": 1 if status == "mismatched" else 0}


def _seal_status(spec: dict[str, str]) -> dict[str, Any]:
    """``bernstein seal verify RUN [--rfc3161-trusted-tsa-bundle B]``, step by step with
    its own functions (the command's module needs packages absent here): the anchor
    loaded, the journal's head, the bundle, ``verify_anchor``; exit 0 only if verified."""
    seal_anchor = _load("bernstein.core.security.seal_anchor")
    journal = _load("bernstein.core.replay.journal")
    run = Path(spec["workdir"]) / ".sdd" / "runs" / spec["run"]
    if not (run / "seal_anchor.json").is_file():
        return {"status": "missing", "code": 1}
    head = journal.verify_journal(run / "journal.jsonl").head
    try:
        anchor = seal_anchor.load_anchor(run / "seal_anchor.json")
    except seal_anchor.SealAnchorError:
        return {"status": "unreadable", "code": 1}
    trusted = []
    if spec.get("tsa_bundle"):
        verifier = _load("bernstein.core.security.rfc3161_verifier")
        trusted = verifier.load_trusted_tsa_certs(Path(spec["tsa_bundle"]))
    result = seal_anchor.verify_anchor(anchor, sealed_head=head, trusted_tsa_certs=trusted)
    status = str(result.status.value)
    return {"status": status, "code": 0 if status == "verified" else 1}


def bernstein_audit(peer: Any, spec: dict[str, str]) -> dict[str, Any]:
    """``bernstein audit verify [--witness-key K] [--rfc3161-trusted-tsa-bundle B]
    [--witness-state S]`` in ``spec["workdir"]``: its audit-folder pillars, run with
    bernstein's own functions (as the bench's ``peer_audit`` runs them), and the command's
    exit code."""
    import contextlib
    import io
    import os

    workdir = Path(spec["workdir"]).resolve()
    key_file = workdir / "audit.key"
    key_file.chmod(0o600)  # bernstein refuses a key others can read
    os.environ["BERNSTEIN_AUDIT_KEY_PATH"] = str(key_file)
    os.chdir(workdir)  # the command reads .sdd/audit from the working directory
    audit_cmd = _load("bernstein.cli.commands.audit_cmd")
    arguments: dict[str, tuple[Any, ...]] = {
        "_verify_anchors": (spec.get("tsa_bundle"),),
        "_verify_witness": (spec.get("witness_key"), spec.get("witness_state")),
    }
    pillars: dict[str, bool | str] = {}
    for name in peer.AUDIT_PILLARS:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                pillars[name] = bool(getattr(audit_cmd, name)(*arguments.get(name, ())))
        except Exception as exc:  # the command dies on it: exit 1
            pillars[name] = f"raises {type(exc).__name__}"
    code = 0 if all(value is True for value in pillars.values()) else 1
    return {"code": code, "pillars": pillars}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("make").add_argument("out", type=Path)
    sub.add_parser("receipt-status").add_argument("receipts", nargs="+")
    sub.add_parser("audit").add_argument("specs", nargs="+")
    sub.add_parser("receipt-chain-status").add_argument("specs", nargs="+")
    sub.add_parser("seal-status").add_argument("specs", nargs="+")
    sub.add_parser("replay-status").add_argument("specs", nargs="+")
    spines = sub.add_parser("spine-status")
    spines.add_argument("workdir", type=Path)
    spines.add_argument("runs", nargs="+")
    args = parser.parse_args()
    if args.command == "make":
        make(args.out)
        return
    sys.path.insert(0, str(BENCHES))
    peer = _load("bernstein_peer")
    if args.command == "audit":
        peer.install_cli_shim(peer.peer_dirs(peer.DEFAULT_CACHE))
        for spec in args.specs:
            print("AUDIT " + json.dumps(bernstein_audit(peer, json.loads(spec))), flush=True)
        return
    peer.install_shim(peer.peer_dirs(peer.DEFAULT_CACHE))
    if args.command == "replay-status":
        # {"workdir", "run", "keyed"}: bernstein replay RUN --verify's status and exit code.
        for raw in args.specs:
            print(json.dumps(_replay_status(json.loads(raw))), flush=True)
        return
    if args.command == "seal-status":
        # {"workdir", "run", "tsa_bundle"}: bernstein seal verify's status and exit code.
        for raw in args.specs:
            print(json.dumps(_seal_status(json.loads(raw))), flush=True)
        return
    if args.command == "receipt-chain-status":
        # {"receipt", "pin", "chain", "signed_at"}: verify receipt --key-chain's status.
        verify = _load("bernstein.core.replay.run_receipt").verify_run_receipt
        for raw in args.specs:
            spec = json.loads(raw)
            try:
                status = verify(
                    Path(spec["receipt"]).read_bytes(),
                    public_key_pem=Path(spec["pin"]).read_bytes() if spec.get("pin") else None,
                    key_chain_bytes=Path(spec["chain"]).read_bytes(),
                    attested_signed_at=spec.get("signed_at"),
                ).status
            except Exception:  # the command dies on it: exit 1
                status = "raises"
            print(json.dumps({"status": status}))
        return
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
