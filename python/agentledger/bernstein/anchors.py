"""bernstein's RFC 3161 anchors of its checkpoints (docs/BERNSTEIN.md §15).

``checkpoints/anchors.jsonl`` holds, per line, a TSA's timestamp token over
``H(C(checkpoint payload))`` with the checkpoint's origin, record count and root. Each
token must parse (``rfc3161_token.py``) with a message imprint equal to the anchor's
``payload_sha256``; and the history must not contradict the strongest anchor. The TSA's
own signature and certificate chain are checked only against a trust bundle the user
gives (``tsa_trust.py``), as bernstein does; without one the anchor is named as not
authenticated.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentledger.bernstein.format import UncaughtJson, loads_as_bernstein

if TYPE_CHECKING:
    from cryptography import x509  # annotations only

VERSION = 1
KIND = "rfc3161"


@dataclass(frozen=True, slots=True)
class Anchor:
    line: int
    origin: str
    entry_count: int
    checkpoint_root: str
    payload_sha256: str
    token_b64: str


def committed_records(
    raw: bytes | None, name: str, problem: Callable[[dict[str, Any]], str | None]
) -> tuple[list[tuple[int, dict[str, Any]]], str | None]:
    """Each committed line of one of bernstein's append-only JSONL files, numbered from 1,
    and the first reason the file fails to read (``problem`` judges each record; bernstein
    then fails the pillar, or its reader raises); a torn last line (no final newline) is
    skipped, as bernstein does."""
    if not raw:
        return [], None
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    found: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, start=1):
        try:
            doc = loads_as_bernstein(line)
        except UncaughtJson as exc:  # raised whatever the line's place: never a torn one
            return found, f"{name}:{number}: bernstein's reader raises: {exc}"
        except ValueError:
            if number == len(lines) and not raw.endswith(b"\n"):
                break
            return found, f"{name}:{number}: unparsable committed line"
        if not isinstance(doc, dict):
            return found, f"{name}:{number}: not a JSON object"
        reason = problem(doc)
        if reason is not None:
            return found, f"{name}:{number}: {reason}"
        found.append((number, doc))
    return found, None


def read_anchors(raw: bytes | None) -> tuple[list[Anchor], str | None]:
    """The anchors and the first reason the file fails to read."""
    records, reason = committed_records(raw, "anchors.jsonl", _anchor_problem)
    anchors = [
        Anchor(
            number,
            doc["origin"],
            doc["entry_count"],
            doc["checkpoint_root"],
            doc["payload_sha256"],
            doc["token_b64"],
        )
        for number, doc in records
    ]
    return anchors, reason


def _anchor_problem(doc: dict[str, Any]) -> str | None:
    if doc.get("version") != VERSION:
        return f"unsupported anchor version {doc.get('version')!r}"
    if str(doc.get("kind", "")) != KIND:
        return f"unsupported anchor kind {str(doc.get('kind', ''))!r}"
    for name in ("origin", "checkpoint_root", "payload_sha256", "token_b64"):
        value = doc.get(name)
        if not isinstance(value, str) or not value:
            return f"missing or empty {name}"
    count = doc.get("entry_count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return f"entry_count must be a non-negative integer, got {count!r}"
    return None


def token_problem(anchor: Anchor, trusted: list[x509.Certificate] | None = None) -> str | None:
    """Why the token does not bind the anchored checkpoint, None when it does; with a
    trust bundle (``trusted``), as bernstein's, also why its TSA is not authenticated."""
    return imprint_problem(anchor) or (
        tsa_problem(anchor, trusted, require_timestamping=False) if trusted else None
    )


def imprint_problem(anchor: Anchor) -> str | None:
    """Why the token does not cover the anchored checkpoint payload (no trust decided)."""
    # Loaded for a token only: asn1crypto and cryptography take 0.06 s to import.
    from agentledger.bernstein.rfc3161_token import message_imprint

    try:
        token = base64.b64decode(anchor.token_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        return f"anchor token is not valid base64: {exc}"
    try:
        expected = bytes.fromhex(anchor.payload_sha256)
    except ValueError as exc:
        return f"anchor payload_sha256 is not valid hex: {exc}"
    try:
        digest = message_imprint(token)
    except ValueError as exc:
        return f"token: {exc}"
    if digest != expected:
        return "token messageImprint does not cover the anchored checkpoint payload"
    return None


def tsa_problem(
    anchor: Anchor, trusted: list[x509.Certificate], *, require_timestamping: bool
) -> str | None:
    """Why the token's TSA is not authenticated by ``trusted`` (``tsa_trust.py``); with
    ``require_timestamping`` (strict, RFC 3161 §2.3) also a signer certificate not marked
    for timestamping."""
    # Loaded for a token only: asn1crypto and cryptography take 0.06 s to import.
    from agentledger.bernstein.tsa_trust import authenticate_token

    try:
        token = base64.b64decode(anchor.token_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        return f"anchor token is not valid base64: {exc}"
    check = authenticate_token(token, trusted)
    if check.problems:
        return "TSA not authenticated: " + "; ".join(check.problems)
    if require_timestamping and not check.timestamping_eku:
        return f"the TSA certificate ({check.signer}) is not marked for timestamping"
    return None


def anchor_contradictions(
    anchors: list[Anchor], origin_count: tuple[str | None, int], roots: set[str] | None
) -> list[str]:
    """How the history (its origin and record count) contradicts the anchors: fewer
    records than the strongest anchor, another origin, or (``roots``: the checkpoints on
    record) an anchored root gone."""
    if not anchors:
        return []
    found = []
    strongest = max(anchors, key=lambda a: a.entry_count)
    origin, count = origin_count
    if count < strongest.entry_count:
        found.append(
            f"chain holds {count} records; an anchor records that {strongest.entry_count} "
            f"existed (anchors.jsonl:{strongest.line})"
        )
    if origin is not None and strongest.origin and origin != strongest.origin:
        found.append(f"chain origin {origin[:16]}… is not the anchored {strongest.origin[:16]}…")
    if roots is not None:
        found.extend(
            f"anchored checkpoint root {a.checkpoint_root[:16]}… is no longer on record "
            f"(anchors.jsonl:{a.line})"
            for a in anchors
            if a.checkpoint_root not in roots
        )
    return found
