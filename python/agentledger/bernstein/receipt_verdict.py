"""What ``bernstein verify receipt`` says of a run receipt (docs/BERNSTEIN.md §17).

The receipt is verified from its own bytes: the embedded journal rows must chain (the
§2 walk), the embedded spine entries must chain (keyless entry hashes), the heads and
counts it states must be those recomputed, the signed subject must be the digest of the
binding block rebuilt from the recomputed heads, and the Ed25519 signature over the DSSE
pre-authentication encoding of that block must verify under the embedded JWK (which must
be the pinned key when one is given). Statuses and exit codes are bernstein's: ``ok`` 0
(tier ``integrity-only``, or ``provenance`` with a pinned key; 3 when provenance is
required and not reached), ``malformed`` 1, ``tampered`` 2.

The binding also carries what the receipt embeds beyond the journal and spine: the
``jcs-v2`` profile's name (its bytes are then RFC 8785), the digest of the last loaded
extension set, and an audit range's recomputed head with its declared window. A ``jcs-v2``
binding holding an integer beyond 2**53 (bernstein writes it exactly, agentledger's RFC
8785 does not) is ``not_reproduced``, never guessed. Where bernstein's own code raises on
a receipt, its command exits 1: so does this verdict.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from agentledger import _core
from agentledger.bernstein.key_succession import Untrusted, key_trust
from agentledger.limits import MAX_DOCUMENT_BYTES

RECEIPT_TYPE = "https://bernstein.run/attestations/run-receipt/v1"
PAYLOAD_TYPE = "application/vnd.bernstein.run-receipt+json"
SCHEMAS = ("1.0.0", "1.1.0")
LEGACY_PROFILE = "py-json-v1"
PROFILES = (LEGACY_PROFILE, "jcs-v2")
SPINE_FIELDS = (
    "v",
    "prev_hash",
    "artifact_path",
    "content_hash",
    "actor",
    "step_id",
    "model",
    "timestamp",
    "entry_hash",
)
LINEAGE_V2_TAG = "bernstein:lineage:v2"
EXTENSION_SET_EVENT = "loaded_extension_set"
EXTENSION_SET_SCHEMA = "1.0.0"


@dataclass
class ReceiptVerdict:
    """``status``: ``ok``, ``malformed``, ``tampered``, ``untrusted_key`` or
    ``not_reproduced``."""

    status: str
    tier: str | None = None
    errors: list[str] = field(default_factory=list)
    divergent_step: int | None = None
    key_verdict: str | None = None
    """With a key chain: why it trusts the key (``active``, ``superseded``...)."""

    def code(self, require_provenance: bool = False) -> int | None:
        """``bernstein verify receipt``'s exit code (None: not reproduced)."""
        if self.status == "ok":
            return 3 if require_provenance and self.tier != "provenance" else 0
        return {"malformed": 1, "tampered": 2, "untrusted_key": 4}.get(self.status)


@dataclass(frozen=True)
class KeyChain:
    """``--key-chain``: the chain's bytes, the root key pinned for it (``--public-key``'s
    PEM, None when not given) and the attested signing time (``--signed-at``)."""

    chain: bytes
    root_pem: bytes | None
    signed_at: str | None = None


class _Verdict(Exception):
    def __init__(self, verdict: ReceiptVerdict) -> None:
        self.verdict = verdict


def _stop(status: str, reason: str, step: int | None = None) -> _Verdict:
    return _Verdict(ReceiptVerdict(status, None, [reason], step))


def verify_receipt(
    data: bytes, pinned_pem: bytes | None = None, key_chain: KeyChain | None = None
) -> ReceiptVerdict:
    """Verify ``data`` (a ``run-receipt.json``); ``pinned_pem``: the PEM public key the
    embedded one must be (``--public-key`` without a chain; read where bernstein reads
    it, so a bad one is malformed only once the receipt itself holds up); ``key_chain``:
    the chain the receipt's key must be trusted by, from its pinned root."""
    if len(data) > MAX_DOCUMENT_BYTES:
        return ReceiptVerdict("malformed", errors=["receipt too large to read here"])
    try:
        return _verify(data, None if key_chain is not None else pinned_pem, key_chain)
    except _Verdict as stop:
        return stop.verdict
    except (AttributeError, TypeError, ValueError, KeyError, RecursionError) as exc:
        # bernstein's own code raises on this receipt: its command exits 1.
        return ReceiptVerdict("malformed", errors=[f"bernstein raises {type(exc).__name__}"])


def _verify(data: bytes, pinned_pem: bytes | None, key_chain: KeyChain | None) -> ReceiptVerdict:
    try:
        receipt = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _stop("malformed", f"receipt is not valid JSON: {exc}") from None
    if not isinstance(receipt, dict):
        raise _stop("malformed", "receipt is not a JSON object")
    run_id = str(receipt.get("run_id", ""))
    if not run_id:
        raise _stop("malformed", "receipt.run_id missing")
    if receipt.get("receipt_type") != RECEIPT_TYPE:
        raise _stop("malformed", f"unexpected receipt_type {receipt.get('receipt_type')!r}")
    schema = receipt.get("schema_version")
    if schema not in SCHEMAS:
        raise _stop("malformed", f"unsupported schema_version {schema!r}")
    profile = receipt.get("hash_profile", LEGACY_PROFILE)
    if profile not in PROFILES:
        raise _stop("malformed", f"unsupported hash_profile {profile!r}")
    journal, spine, signing = receipt.get("journal"), receipt.get("spine"), receipt.get("signing")
    if not isinstance(journal, dict) or not isinstance(journal.get("events"), list):
        raise _stop("malformed", "receipt.journal.events missing or not a list")
    if not isinstance(spine, dict) or not isinstance(spine.get("entries"), list):
        raise _stop("malformed", "receipt.spine.entries missing or not a list")
    if not isinstance(signing, dict):
        raise _stop("malformed", "receipt.signing missing")
    if signing.get("payload_type") != PAYLOAD_TYPE:
        raise _stop("malformed", f"unexpected signing.payload_type {signing.get('payload_type')!r}")
    events: list[Any] = journal["events"]
    if not all(isinstance(e, dict) for e in events):
        raise _stop("malformed", "receipt.journal.events contains a non-object row")
    if not events:
        raise _stop("malformed", "receipt embeds no journal events")
    entries: list[Any] = spine["entries"]
    if not all(isinstance(e, dict) for e in entries):
        raise _stop("malformed", "receipt.spine.entries contains a non-object row")
    head = _journal_head(events)
    if str(journal.get("head_hash", "")) != head:
        raise _stop("tampered", "journal.head_hash is not the head recomputed from the rows")
    if journal.get("event_count") != len(events):
        raise _stop("tampered", "journal.event_count does not match the embedded rows")
    spine_head = _spine_head(entries)
    if str(spine.get("head_hash", "")) != spine_head:
        raise _stop("tampered", "spine.head_hash is not the head recomputed from the entries")
    if spine.get("entry_count") != len(entries):
        raise _stop("tampered", "spine.entry_count does not match the embedded entries")
    audit = _audit_range(receipt.get("audit_range"), str(schema))
    binding = _binding(run_id, head, len(events), spine_head, len(entries), events)
    if profile != LEGACY_PROFILE:
        binding["hash_profile"] = profile
    digest = extension_set_digest(events)
    if digest is not None:
        binding["extension_set_digest"] = digest
    binding.update(audit)
    binding_bytes = _binding_bytes(binding, str(profile))
    stated = str(((receipt.get("subject") or {}).get("digest") or {}).get("sha256", ""))
    if stated != hashlib.sha256(binding_bytes).hexdigest():
        raise _stop("tampered", "the signed subject is not the digest of the rebuilt binding")
    key = _embedded_key(signing.get("public_key_jwk"))
    if pinned_pem is not None and _pinned_key(pinned_pem) != key:
        raise _stop("tampered", "embedded receipt key does not match the pinned public key")
    signature_b64 = signing.get("signature_b64")
    if not isinstance(signature_b64, str):
        raise _stop("malformed", "receipt.signing.signature_b64 missing")
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError):
        raise _stop("malformed", "receipt.signing.signature_b64 is not valid base64") from None
    if len(signature) != 64 or not _core.ed25519_verify(key, _pae(binding_bytes), signature):
        raise _stop("tampered", "the signature does not verify over the rebuilt binding")
    if key_chain is None:
        return ReceiptVerdict("ok", "provenance" if pinned_pem is not None else "integrity-only")
    if key_chain.root_pem is None:
        raise _stop("malformed", "a key chain needs the pinned root key (--public-key)")
    kid = str(signing.get("key_id", ""))
    try:
        verdict = key_trust(key_chain.chain, key_chain.root_pem, kid, key, key_chain.signed_at)
    except Untrusted as exc:
        raise _stop("untrusted_key", str(exc)) from None
    return ReceiptVerdict("ok", "provenance", key_verdict=verdict)


def _audit_range(block: object, schema: str) -> dict[str, Any]:
    """The binding fields of an embedded audit range (none without one): its head is
    ``H`` of its events as sorted, compact JSON lines, recomputed; under schema 1.1.0 the
    declared window (``since``, ``until``, ``event_count``, ``head_hmac``, which no one can
    recompute without the audit key) is bound as the receipt states it."""
    if block is None:
        return {}
    if not isinstance(block, dict) or not isinstance(block.get("events"), list):
        raise _stop("malformed", "receipt.audit_range.events missing or not a list")
    events: list[Any] = block["events"]
    lines = "".join(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n" for e in events)
    head = hashlib.sha256(lines.encode("utf-8")).hexdigest()
    if str(block.get("head_sha256", "")) != head:
        raise _stop("tampered", "audit_range.head_sha256 is not the head of the embedded events")
    if block.get("event_count") != len(events):
        raise _stop("tampered", "audit_range.event_count does not match the embedded events")
    if schema == "1.0.0":
        return {"audit_range_head_sha256": head}
    fields = {
        "audit_range_event_count": block.get("event_count"),
        "audit_range_head_hmac": block.get("head_hmac"),
        "audit_range_head_sha256": head,
        "audit_range_since": block.get("since"),
        "audit_range_until": block.get("until"),
    }
    return {name: value for name, value in fields.items() if value is not None}


def extension_set_digest(events: list[dict[str, Any]]) -> str | None:
    """The digest of the extension set the run last loaded: the newest
    ``loaded_extension_set`` row whose ``extensions`` is a list of objects, recomputed
    (the row's own digest is not read)."""
    for event in reversed(events):
        extensions = event.get("extensions")
        if event.get("event") != EXTENSION_SET_EVENT or not isinstance(extensions, list):
            continue
        if not all(isinstance(row, dict) for row in extensions):
            continue
        preimage = {"schema_version": EXTENSION_SET_SCHEMA, "entries": extensions}
        text = json.dumps(preimage, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return None


def _binding_bytes(binding: dict[str, Any], profile: str) -> bytes:
    """The signed bytes: sorted, compact, ASCII JSON (``py-json-v1``) or RFC 8785
    (``jcs-v2``, whose integers bernstein writes exactly, unbounded)."""
    if profile == LEGACY_PROFILE:
        return json.dumps(binding, sort_keys=True, separators=(",", ":")).encode("utf-8")
    if _unsafe_integer(binding):
        raise _stop("not_reproduced", "an integer beyond 2**53 in a jcs-v2 binding")
    return _core.canonicalize(binding)


def _unsafe_integer(value: object) -> bool:
    if isinstance(value, dict):
        return any(_unsafe_integer(v) for v in value.values())
    if isinstance(value, list):
        return any(_unsafe_integer(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1 << 53


def _journal_head(events: list[dict[str, Any]]) -> str:
    """The §2 walk over the embedded rows (in Rust, on the rows written back as lines)."""
    lines = b"".join(json.dumps(event).encode() + b"\n" for event in events)
    report = _core.bernstein_verify_journals([lines])[0]
    if report["crash"]:
        raise ValueError(report["crash"])  # bernstein's walk raises too
    if not report["chain_consistent"]:
        step = report["divergent_index"]
        raise _stop("tampered", f"journal diverges at step {step}: {report['error']}", step)
    return str(events[-1].get("event_hash", ""))


def _spine_head(entries: list[dict[str, Any]]) -> str:
    """The spine's keyless chain: each entry's hash recomputed, each link followed."""
    previous = ""
    for index, row in enumerate(entries):
        missing = [name for name in SPINE_FIELDS if name not in row]
        if missing:
            raise _stop("tampered", f"spine entry {index}: missing fields {sorted(missing)}")
        if str(row["prev_hash"]) != previous:
            raise _stop("tampered", f"spine entry {index}: prev_hash break")
        version = row.get("v")
        if version not in (None, 1, 2):
            raise _stop("tampered", f"spine entry {index}: unsupported scheme version")
        try:
            expected = entry_hash(row, LINEAGE_V2_TAG if version == 2 else "")
        except (TypeError, ValueError):
            raise _stop("tampered", f"spine entry {index}: unhashable field types") from None
        if str(row["entry_hash"]) != expected:
            raise _stop("tampered", f"spine entry {index}: entry_hash mismatch")
        previous = str(row["entry_hash"])
    return previous


def entry_hash(row: dict[str, Any], prefix: str) -> str:
    """A spine entry's ``entry_hash``, recomputed (keyless)."""
    fields: dict[str, Any] = {
        "prev_hash": str(row["prev_hash"]),
        "artifact_path": str(row["artifact_path"]),
        "content_hash": str(row["content_hash"]),
        "actor": str(row["actor"]),
        "step_id": str(row["step_id"]),
        "model": str(row["model"]),
        "timestamp": int(row["timestamp"]),
    }
    for name in ("traceparent", "tracestate", "baggage"):
        if row.get(name) is not None:
            fields[name] = row[name]
    text = json.dumps(fields, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return "sha256:" + hashlib.sha256(prefix.encode() + text.encode("utf-8")).hexdigest()


def _binding(
    run_id: str,
    head: str,
    rows: int,
    spine_head: str,
    entries: int,
    events: list[dict[str, Any]],
) -> dict[str, Any]:
    block: dict[str, Any] = {
        "journal_event_count": rows,
        "journal_head": head,
        "run_id": run_id,
        "spine_entry_count": entries,
        "spine_head": spine_head,
    }
    endpoints = _endpoints(events)
    if endpoints:
        block["endpoints"] = endpoints
    return block


def _endpoints(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The distinct endpoint identities of ``agent_spawned`` rows, sorted."""
    seen: set[tuple[str, str, str, str]] = set()
    for event in events:
        if event.get("event") != "agent_spawned":
            continue
        adapter = str(event.get("endpoint_adapter_name") or "")
        if adapter:
            seen.add(
                (
                    adapter,
                    str(event.get("endpoint_model") or ""),
                    str(event.get("endpoint_base_url") or ""),
                    str(event.get("endpoint_profile_name") or ""),
                )
            )
    return [{"adapter": a, "model": m, "base_url": b, "profile": p} for a, m, b, p in sorted(seen)]


def _embedded_key(jwk: object) -> bytes:
    if not isinstance(jwk, dict):
        raise _stop("malformed", "receipt.signing.public_key_jwk missing or not an object")
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise _stop("malformed", "embedded JWK is not an Ed25519 key")
    x = jwk.get("x")
    if not isinstance(x, str):
        raise _stop("malformed", "embedded JWK 'x' missing or not a string")
    try:
        raw = base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
    except (binascii.Error, ValueError):
        raise _stop("malformed", "embedded JWK 'x' is not base64url") from None
    if len(raw) != 32:
        raise _stop("malformed", f"an Ed25519 public key is 32 bytes, not {len(raw)}")
    return raw


def _pae(payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding of the binding under the receipt's type."""
    kind = PAYLOAD_TYPE.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _pinned_key(pem: bytes) -> bytes:
    """The raw key of the pinned PEM (``--public-key``), read as bernstein reads it (any
    PEM public key pyca/cryptography loads, then Ed25519 only); malformed otherwise."""
    # Loaded for a pinned PEM only: cryptography takes 0.05 s to import.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise _stop("malformed", f"pinned public key is not valid PEM: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise _stop("malformed", f"pinned public key is not Ed25519 ({type(key).__name__})")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
