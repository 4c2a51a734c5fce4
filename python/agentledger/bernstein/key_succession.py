"""bernstein's signed key-succession chain for receipt-signing keys, as ``bernstein verify
receipt --key-chain`` reads it (docs/BERNSTEIN.md §17).

The chain document names a root key (the one the auditor pins, ``--public-key``) and a
list of entries, each linked to its predecessor (``prev_entry_hash``: ``H(C(previous
entry))``, the first linked to ``H(C({"chain_type", "root", "schema_version"}))``),
numbered from 1, and signed (Ed25519, DSSE PAE under a payload type per kind) by the key
at the head of the chain when it was written: a *succession* introduces the next head
key, a *revocation* marks a key untrusted from an instant. A receipt's key (its
``signing.key_id`` and embedded key) is trusted when it is the head, or was superseded
and never revoked, or was revoked after an attested signing time (``--signed-at``).
Anything else — a chain that does not verify from the pinned root, an unknown kid,
another key under a known kid, a revoked key with no or a later signing time — is
``untrusted_key`` (exit 4).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from datetime import datetime
from typing import Any

from agentledger import _core

CHAIN_TYPE = "https://bernstein.run/attestations/key-succession/v1"
SCHEMA_VERSION = "1.0.0"
PAYLOAD_TYPES = {
    "succession": "application/vnd.bernstein.key-succession+json",
    "revocation": "application/vnd.bernstein.key-revocation+json",
}


class Untrusted(Exception):
    """The chain does not vouch for the receipt's key; the message says why."""


def _canonical(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _pae(kind: str, body: bytes) -> bytes:
    payload_type = PAYLOAD_TYPES.get(kind, PAYLOAD_TYPES["revocation"]).encode()
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(body), body)


def _raw_key(jwk: Any) -> bytes:
    """The 32 bytes of an OKP/Ed25519 JWK."""
    if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise Untrusted("a chain key is not an OKP/Ed25519 JWK")
    x = jwk.get("x")
    if not isinstance(x, str):
        raise Untrusted("a chain key's 'x' is missing")
    try:
        raw = base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
    except (binascii.Error, ValueError) as exc:
        raise Untrusted(f"a chain key's 'x' is not base64url: {exc}") from None
    if len(raw) != 32:
        raise Untrusted(f"an Ed25519 public key is 32 bytes, not {len(raw)}")
    return raw


def _instant(value: str, name: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError) as exc:
        raise Untrusted(f"{name} {value!r} is not an ISO-8601 instant: {exc}") from None
    if parsed.tzinfo is None:
        raise Untrusted(f"{name} {value!r} has no UTC offset")
    return parsed


def _pinned_root(pem: bytes) -> bytes:
    # Loaded for a pinned PEM only: cryptography takes 0.05 s to import.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise Untrusted(f"the pinned root key is not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise Untrusted(f"the pinned root key is not Ed25519 ({type(key).__name__})")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _walk(data: bytes, root_pem: bytes) -> dict[str, dict[str, Any]]:
    """Every key the chain introduces, by kid: ``{"raw", "superseded", "revoked_at"}``."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Untrusted(f"the key chain is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("chain_type") != CHAIN_TYPE:
        raise Untrusted("not a key-succession chain")
    root = document.get("root")
    jwk = root.get("public_key_jwk") if isinstance(root, dict) else None
    if not isinstance(root, dict) or not isinstance(jwk, dict):
        raise Untrusted("the chain's root carries no public_key_jwk")
    root_kid = jwk.get("kid")
    if not isinstance(root_kid, str) or not root_kid or str(root.get("kid", "")) != root_kid:
        raise Untrusted("the chain's root kid is missing or not its JWK's")
    if _pinned_root(root_pem) != _raw_key(jwk):
        raise Untrusted("the chain's root is not the pinned root key")
    entries = document.get("entries")
    if not isinstance(entries, list):
        raise Untrusted("the chain's entries are not a list")
    keys: dict[str, dict[str, Any]] = {
        root_kid: {"raw": _raw_key(jwk), "superseded": False, "revoked_at": None}
    }
    head = root_kid
    link = hashlib.sha256(
        _canonical({"chain_type": CHAIN_TYPE, "root": root, "schema_version": SCHEMA_VERSION})
    ).hexdigest()
    for position, entry in enumerate(entries, start=1):
        _check_entry(entry, position, link, keys[head]["raw"])
        kid = str(entry.get("kid", ""))
        if entry.get("kind") == "succession":
            if str(entry.get("prev_kid", "")) != head or kid in keys:
                raise Untrusted(f"entry {position} does not succeed the head with a new kid")
            raw = _raw_key(entry.get("public_key_jwk"))
            _instant(str(entry.get("issued_at", "")), f"entry {position} issued_at")
            keys[head]["superseded"] = True
            keys[kid] = {"raw": raw, "superseded": False, "revoked_at": None}
            head = kid
        elif entry.get("kind") == "revocation":
            if kid not in keys or keys[kid]["revoked_at"] is not None:
                raise Untrusted(f"entry {position} revokes an unknown or revoked kid {kid!r}")
            revoked_at = str(entry.get("revoked_at", ""))
            _instant(revoked_at, f"entry {position} revoked_at")
            keys[kid]["revoked_at"] = revoked_at
        else:
            raise Untrusted(f"entry {position} has an unknown kind {entry.get('kind')!r}")
        link = hashlib.sha256(_canonical(entry)).hexdigest()
    return keys


def _check_entry(entry: Any, position: int, link: str, signer: bytes) -> None:
    """Its place, its link, and its signature by the head key."""
    if not isinstance(entry, dict):
        raise Untrusted(f"entry {position} is not an object")
    if entry.get("seq") != position:
        raise Untrusted(f"entry {position} claims seq {entry.get('seq')!r}")
    if str(entry.get("prev_entry_hash", "")) != link:
        raise Untrusted(f"entry {position} does not link to its predecessor")
    signature_b64 = entry.get("signature_b64")
    if not isinstance(signature_b64, str):
        raise Untrusted(f"entry {position} carries no signature")
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Untrusted(f"entry {position}'s signature is not base64: {exc}") from None
    body = {k: v for k, v in entry.items() if k != "signature_b64"}
    preimage = _pae(str(body.get("kind", "")), _canonical(body))
    if len(signature) != 64 or not _core.ed25519_verify(signer, preimage, signature):
        raise Untrusted(f"entry {position}'s signature is not the head key's")


def key_trust(
    chain: bytes, root_pem: bytes, kid: str, embedded: bytes, signed_at: str | None
) -> str:
    """Why the chain trusts the receipt's key (``kid`` with the raw ``embedded`` key);
    ``Untrusted`` when it does not."""
    keys = _walk(chain, root_pem)
    record = keys.get(kid)
    if record is None:
        raise Untrusted(f"kid {kid!r} is not introduced in the chain")
    if record["raw"] != embedded:
        raise Untrusted(f"the receipt's key is not the chain's key for kid {kid!r}")
    if record["revoked_at"] is None:
        return "superseded" if record["superseded"] else "active"
    if signed_at is None:
        raise Untrusted(f"kid {kid!r} was revoked at {record['revoked_at']}; no signing time")
    revoked = _instant(record["revoked_at"], "revoked_at")
    if _instant(signed_at, "attested_signed_at") < revoked:
        return "signed-before-revocation"
    raise Untrusted(f"kid {kid!r} was revoked at {record['revoked_at']}, before {signed_at}")
