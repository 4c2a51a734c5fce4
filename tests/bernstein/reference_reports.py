"""The reference (plain Python) re-check of the artifacts bernstein stores: research
reports (§5), browser flow reports (§6) and DataOps receipts (§7), with bernstein's
parsing quirks and reason strings."""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json.encoder
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentledger import _core
from agentledger.bernstein.format import acanon, cas_path, content_hash

_quote: Callable[[str], str] = json.encoder.encode_basestring

Reader = Callable[[str], bytes | None]
"""Bytes of a content hash from the store (``None``: missing)."""

ACTION_KINDS = frozenset(
    ["navigate", "click", "type", "scroll", "key", "select", "submit", "wait", "screenshot"]
)
CHECK_KINDS = frozenset({"dom_contains", "dom_not_contains", "screenshot_hash_equals"})
ASCII_WS = re.compile(rb"[ \t\n\r\x0b\x0c]+")
SPKI_ED25519_PREFIX = bytes.fromhex("302a300506032b6570032100")


def lookup_raises(digest: str) -> None:
    """Raise what ``ContentStore.get`` raises before it reads (it catches only ``OSError``):
    the name after the first ``:`` is encoded for the file system (``surrogateescape``
    refuses a lone surrogate outside U+DC80..U+DCFF) and may not hold a NUL."""
    name = digest.split(":", 1)[-1]
    name.encode("utf-8", "surrogateescape")
    if "\x00" in name:
        raise ValueError("embedded null byte")


def store_reader(read: Callable[[str], bytes | None]) -> Reader:
    """Look a content hash up the way ``ContentStore`` does (unvalidated name)."""

    def lookup(digest: str) -> bytes | None:
        lookup_raises(digest)
        path = cas_path(digest)
        return None if path is None else read(path)

    return lookup


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# ---- research (§5) --------------------------------------------------------------------


def verify_research_report(report: object, read: Reader) -> tuple[bool, str, list[dict[str, Any]]]:
    """``(ok, reason, claim_verdicts)`` for a parsed research report."""
    claims = [c for c in _list(_dict(report).get("claims")) if isinstance(c, dict)]
    if not claims:
        verdict = {
            "claim_id": "",
            "ok": False,
            "citations_checked": 0,
            "reason": "report holds no claims",
        }
        return False, "research report holds no claims", [verdict]
    verdicts: list[dict[str, Any]] = []
    for claim in claims:
        claim_id = str(claim.get("claim_id", ""))
        citations = [c for c in _list(claim.get("citations")) if isinstance(c, dict)]
        checked, reason = 0, ""
        if not citations:
            reason = f"claim {claim_id!r} has no citations"
        for citation in citations:
            page_hash = str(citation.get("page_content_hash", ""))
            page = read(page_hash)
            if page is None:
                reason = f"cited page bytes missing from store for {page_hash!r}"
            elif content_hash(page) != page_hash:
                reason = f"cited page content hash mismatch for {page_hash!r}"
            # strict UTF-8, as bernstein encodes the quote: a lone surrogate raises
            elif str(citation.get("quote", "")).encode("utf-8") not in page:
                reason = f"quote not found in cited page {page_hash!r}"
            if reason:
                break
            checked += 1
        verdicts.append(
            {"claim_id": claim_id, "ok": not reason, "citations_checked": checked, "reason": reason}
        )
    failing = next((v["reason"] for v in verdicts if not v["ok"]), "")
    return not failing, failing, verdicts


# ---- browser (§6) ---------------------------------------------------------------------


def norm(data: bytes) -> bytes:
    return b" ".join(piece for piece in ASCII_WS.split(data) if piece)


@dataclass
class BrowserVerdict:
    ok: bool = False
    head_anchor_ok: bool = False
    reason: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "head_anchor_ok": self.head_anchor_ok,
            "reason": self.reason,
            "steps": self.steps,
            "checks": self.checks,
        }


def _parse_flow(report: object) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """Parse like ``BrowserFlowReport.from_json``: raises ValueError/TypeError as it does."""
    doc = _dict(report)
    steps = []
    for raw in _list(doc.get("steps")):
        if not isinstance(raw, dict):
            continue
        step: dict[str, Any] = {
            key: str(raw.get(key, ""))
            for key in (
                "action_kind",
                "action_target",
                "action_value_digest",
                "screenshot_content_hash",
                "dom_content_hash",
                "dom_digest",
                "observation_hash",
                "prev_anchor",
                "anchor",
            )
        }
        step["index"] = int(raw.get("index", -1))
        steps.append(step)
    checks = []
    for raw in _list(doc.get("checks")):
        if not isinstance(raw, dict):
            continue
        # `CheckKind(str(row.get("kind", CheckKind.DOM_CONTAINS)))`: a StrEnum, so a
        # check without a kind is a `dom_contains` one.
        kind = str(raw.get("kind", "dom_contains"))
        if kind not in CHECK_KINDS:
            raise ValueError(f"unknown check kind {kind!r}")
        checks.append(
            {
                "check_id": str(raw.get("check_id", "")),
                "kind": kind,
                "operand": str(raw.get("operand", "")),
                "step_index": int(raw.get("step_index", -1)),
                "passed": bool(raw.get("passed")),
            }
        )
    return str(doc.get("head_anchor", "")), steps, checks


def verify_browser_report(report: object, read: Reader) -> BrowserVerdict:
    verdict = BrowserVerdict()
    try:
        head_anchor, steps, checks = _parse_flow(report)
    except (ValueError, TypeError) as exc:
        verdict.reason = f"stored flow report is not valid JSON: {type(exc).__name__}"
        return verdict
    prev = ""
    doms: dict[int, bytes] = {}
    steps_ok = True
    for n, step in enumerate(steps):
        reason = _replay_step(n, step, prev, read, doms)
        verdict.steps.append({"index": step["index"], "ok": not reason, "reason": reason})
        if reason:
            steps_ok = False
            verdict.reason = reason
            break
        prev = step["anchor"]
    verdict.head_anchor_ok = steps_ok and head_anchor == prev
    if steps_ok and not verdict.head_anchor_ok:
        verdict.reason = f"head_anchor mismatch: recorded {head_anchor!r}, replayed {prev!r}"
    checks_ok = True
    for check in checks:
        dom = doms.get(check["step_index"])
        reason = ""
        if dom is None:
            reason = (
                f"check {check['check_id']!r}: step {check['step_index']} "
                "did not resolve from the store"
            )
        else:
            step = steps[check["step_index"]]
            if check["kind"] == "screenshot_hash_equals":
                result = step["screenshot_content_hash"] == check["operand"]
            else:
                # strict UTF-8, as bernstein encodes the operand: a lone surrogate raises
                found = norm(check["operand"].encode("utf-8")) in norm(dom)
                result = found if check["kind"] == "dom_contains" else not found
            if result != check["passed"]:
                reason = (
                    f"check {check['check_id']!r} recomputes {result}, recorded {check['passed']}"
                )
        verdict.checks.append(
            {
                "check_id": check["check_id"],
                "ok": not reason,
                "passed": check["passed"],
                "reason": reason,
            }
        )
        if reason:
            checks_ok = False
            if not verdict.reason:
                verdict.reason = reason
    verdict.ok = steps_ok and verdict.head_anchor_ok and checks_ok
    return verdict


def _replay_step(
    n: int, step: dict[str, Any], prev: str, read: Reader, doms: dict[int, bytes]
) -> str:
    if step["prev_anchor"] != prev:
        return f"step {n}: broken chain link"
    blobs: dict[str, bytes] = {}
    for label, key in (("screenshot", "screenshot_content_hash"), ("dom", "dom_content_hash")):
        data = read(step[key])
        if data is None:
            return f"step {n}: {label} bytes missing from store for {step[key]!r}"
        if content_hash(data) != step[key]:
            return f"step {n}: {label} content hash mismatch"
        blobs[label] = data
    dom_digest = hashlib.sha256(norm(blobs["dom"])).hexdigest()
    if dom_digest != step["dom_digest"]:
        return f"step {n}: dom digest mismatch"
    observation = hashlib.sha256(blobs["screenshot"] + dom_digest.encode("ascii")).hexdigest()
    if observation != step["observation_hash"]:
        return f"step {n}: observation hash mismatch"
    if step["action_kind"] not in ACTION_KINDS:
        return f"step {n}: unknown action kind {step['action_kind']!r}"
    anchor_doc = {
        "action": {
            "kind": step["action_kind"],
            "target": step["action_target"],
            "value_digest": step["action_value_digest"],
        },
        "observation_hash": observation,
        "prev_anchor": prev,
    }
    if hashlib.sha256(acanon(anchor_doc)).hexdigest() != step["anchor"]:
        return f"step {n}: anchor mismatch"
    doms[step["index"]] = blobs["dom"]
    return ""


# ---- data/ops receipts (§7) -----------------------------------------------------------


@dataclass
class ReceiptVerdict:
    ok: bool
    reason: str
    signer_public_key: bytes | None
    """The raw 32-byte Ed25519 key embedded in the receipt, when it parses."""
    references: list[str]
    """Every content hash the receipt's inputs and outputs pin."""


PEM_BLOCK = re.compile(
    r"-----BEGIN PUBLIC KEY-----\s*([A-Za-z0-9+/=\s]*?)\s*-----END PUBLIC KEY-----"
)


@functools.lru_cache(maxsize=256)
def _public_key_der(pem: str) -> bytes | None:
    match = PEM_BLOCK.search(pem)
    if match is None:
        return None
    try:
        return base64.b64decode("".join(match.group(1).split()), validate=True)
    except (binascii.Error, ValueError):
        return None


def _public_key_raw(pem: str) -> bytes | None:
    der = _public_key_der(pem)
    if der is not None and len(der) == 44 and der.startswith(SPKI_ED25519_PREFIX):
        return der[12:]
    return None


Verified = Mapping[tuple[bytes, bytes, bytes], bool]
"""Ed25519 decisions already taken, by ``(public key, payload, signature)``."""


def _decode_signature(signature: str) -> bytes:
    return base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))


def _artifact_payload(artifact: dict[str, Any]) -> tuple[str, str, bytes]:
    """``acanon({"role", "ref", "content_hash"})`` of three strings, written out: the keys
    in sorted order, each value quoted by the encoder ``json.dumps(ensure_ascii=False)``
    uses (so a lone surrogate raises on ``encode`` exactly as there)."""
    role, ref = str(artifact.get("role", "")), str(artifact.get("ref", ""))
    content = str(artifact.get("content_hash", ""))
    payload = (
        f'{{"content_hash":{_quote(content)},"ref":{_quote(ref)},"role":{_quote(role)}}}'
    ).encode()
    return role, ref, payload


def _artifacts(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    inputs = [a for a in _list(doc.get("inputs")) if isinstance(a, dict)]
    outputs = [a for a in _list(doc.get("outputs")) if isinstance(a, dict)]
    return inputs, outputs


def verify_signatures(receipts: Iterable[object]) -> dict[tuple[bytes, bytes, bytes], bool]:
    """Every signature these receipts carry, decided in one Rust batch (GIL released):
    the ``verified`` argument of ``verify_receipt``, which still decides anything absent."""
    triples: dict[tuple[bytes, bytes, bytes], None] = {}
    for receipt in receipts:
        doc = _dict(receipt)
        key = _public_key_raw(str(doc.get("signer_public_key_pem", "")))
        if key is None:
            continue
        inputs, outputs = _artifacts(doc)
        for artifact in inputs + outputs:
            try:
                raw = _decode_signature(str(artifact.get("signature", "")))
                payload = _artifact_payload(artifact)[2]
            except (binascii.Error, ValueError):  # UnicodeEncodeError too: left to the check
                continue
            triples[(key, payload, raw)] = None
    items = list(triples)
    return dict(zip(items, _core.ed25519_verify_batch(items), strict=True))


def _check_signature(pem: str, payload: bytes, signature: str, verified: Verified) -> str:
    """bernstein's check (cryptography/OpenSSL there; libsodium's rules here, which agree
    on every signature an honest signer makes; see FORMAT.md for the edge cases)."""
    if not pem:
        return "catalog has no signer_pubkey"
    der = _public_key_der(pem)
    if der is None or not der.startswith(b"\x30"):
        return "cannot load public key: unable to load PEM"
    key = _public_key_raw(pem)
    if key is None:
        return "public key must be Ed25519"
    try:
        raw = _decode_signature(signature)
    except (binascii.Error, ValueError) as exc:
        return f"signature is not valid base64url: {exc}"
    ok = verified.get((key, payload, raw))
    if ok is None:
        ok = _core.ed25519_verify(key, payload, raw)
    if not ok:
        return "signature does not verify"
    return ""


def verify_receipt(
    receipt: object,
    stored_digest: Callable[[str], str | None] | None,
    verified: Verified | None = None,
) -> ReceiptVerdict:
    """Plan projection, then every signature, then reattachment (when ``stored_digest``,
    the digest of the bytes the store holds for a content hash, is given). ``verified``:
    signatures already decided (``verify_signatures``)."""
    doc = _dict(receipt)
    inputs, outputs = _artifacts(doc)
    plan = _dict(doc.get("plan"))
    pem = str(doc.get("signer_public_key_pem", ""))
    references = [str(a.get("content_hash", "")) for a in inputs + outputs]
    key = _public_key_raw(pem)
    recomputed_inputs = sorted({str(a.get("content_hash", "")) for a in inputs})
    projection = {
        "input_hashes": recomputed_inputs,
        "steps": [str(step) for step in _list(plan.get("steps"))],
    }
    recomputed = content_hash(acanon(projection))
    anchored = str(plan.get("plan_hash", ""))
    listed = sorted({str(h) for h in _list(plan.get("input_hashes"))})
    if recomputed != anchored or listed != recomputed_inputs:
        reason = f"plan_hash mismatch: anchored {anchored!r}, recomputed {recomputed!r}"
        return ReceiptVerdict(False, reason, key, references)
    for artifact in inputs + outputs:
        role, ref, payload = _artifact_payload(artifact)
        why = _check_signature(pem, payload, str(artifact.get("signature", "")), verified or {})
        if why:
            return ReceiptVerdict(
                False, f"signature does not verify for {role} {ref!r}: {why}", key, references
            )
    if stored_digest is not None:
        for artifact in inputs + outputs:
            ref, digest = str(artifact.get("ref", "")), str(artifact.get("content_hash", ""))
            lookup_raises(digest)
            stored = stored_digest(digest)
            if stored is None:
                return ReceiptVerdict(
                    False, f"artifact bytes missing from store for {ref!r}", key, references
                )
            if stored != digest:
                return ReceiptVerdict(
                    False, f"content hash mismatch reattaching {ref!r}", key, references
                )
    return ReceiptVerdict(True, "", key, references)
