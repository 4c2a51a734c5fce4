"""What ``bernstein verify receipt`` says of a run receipt (docs/BERNSTEIN.md §17).

The receipt is verified from its own bytes: the embedded journal rows must chain (the
§2 walk), the embedded spine entries must chain (keyless entry hashes), the heads and
counts it states must be those recomputed, the signed subject must be the digest of the
binding block rebuilt from the recomputed heads, and the Ed25519 signature over the DSSE
pre-authentication encoding of that block must verify under the embedded JWK (which must
be the pinned key when one is given). Statuses and exit codes are bernstein's: ``ok`` 0
(tier ``integrity-only``, or ``provenance`` with a pinned key; 3 when provenance is
required and not reached), ``malformed`` 1, ``tampered`` 2.

Receipts with an embedded audit range, a ``loaded_extension_set`` row or the ``jcs-v2``
profile are not redone here: their verdict is ``not_reproduced``, never guessed. Where
bernstein's own code raises on a receipt, its command exits 1: so does this verdict.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from agentledger import _core
from agentledger.bernstein.format import SPKI_ED25519_PREFIX
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


@dataclass
class ReceiptVerdict:
    """``status``: ``ok``, ``malformed``, ``tampered`` or ``not_reproduced``."""

    status: str
    tier: str | None = None
    errors: list[str] = field(default_factory=list)
    divergent_step: int | None = None

    def code(self, require_provenance: bool = False) -> int | None:
        """``bernstein verify receipt``'s exit code (None: not reproduced)."""
        if self.status == "ok":
            return 3 if require_provenance and self.tier != "provenance" else 0
        return {"malformed": 1, "tampered": 2}.get(self.status)


class _Verdict(Exception):
    def __init__(self, verdict: ReceiptVerdict) -> None:
        self.verdict = verdict


def _stop(status: str, reason: str, step: int | None = None) -> _Verdict:
    return _Verdict(ReceiptVerdict(status, None, [reason], step))


def verify_receipt(data: bytes, pinned: bytes | None = None) -> ReceiptVerdict:
    """Verify ``data`` (a ``run-receipt.json``); ``pinned``: a raw Ed25519 public key the
    embedded one must be (``--public-key``)."""
    if len(data) > MAX_DOCUMENT_BYTES:
        return ReceiptVerdict("malformed", errors=["receipt too large to read here"])
    try:
        return _verify(data, pinned)
    except _Verdict as stop:
        return stop.verdict
    except (AttributeError, TypeError, ValueError, KeyError, RecursionError) as exc:
        # bernstein's own code raises on this receipt: its command exits 1.
        return ReceiptVerdict("malformed", errors=[f"bernstein raises {type(exc).__name__}"])


def _verify(data: bytes, pinned: bytes | None) -> ReceiptVerdict:
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
    if receipt.get("audit_range") is not None:
        raise _stop("not_reproduced", "an embedded audit range is not redone here")
    if profile != LEGACY_PROFILE:
        raise _stop("not_reproduced", f"the {profile} binding profile is not redone here")
    if any(e.get("event") == EXTENSION_SET_EVENT for e in events):
        raise _stop("not_reproduced", "a loaded extension set is not redone here")
    binding = _binding(run_id, head, len(events), spine_head, len(entries), events)
    binding_bytes = json.dumps(binding, sort_keys=True, separators=(",", ":")).encode("utf-8")
    stated = str(((receipt.get("subject") or {}).get("digest") or {}).get("sha256", ""))
    if stated != hashlib.sha256(binding_bytes).hexdigest():
        raise _stop("tampered", "the signed subject is not the digest of the rebuilt binding")
    key = _embedded_key(signing.get("public_key_jwk"))
    if pinned is not None and pinned != key:
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
    return ReceiptVerdict("ok", "provenance" if pinned is not None else "integrity-only")


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


def pem_public_key(data: bytes) -> bytes:
    """The raw key of an Ed25519 SubjectPublicKeyInfo PEM (``--public-key``);
    ``ValueError`` for anything else (bernstein calls the receipt malformed then)."""
    lines = data.decode("ascii", "replace").splitlines()
    body = "".join(line.strip() for line in lines if line.strip() and "-----" not in line)
    try:
        der = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        der = b""
    if not data.lstrip().startswith(b"-----BEGIN PUBLIC KEY-----"):
        raise ValueError("not a PEM public key")
    if len(der) != 44 or not der.startswith(SPKI_ED25519_PREFIX):
        raise ValueError("not an Ed25519 public key")
    return der[12:]
