"""What ``bernstein seal verify RUN`` says of a run's seal anchor (docs/BERNSTEIN.md §16).

The anchor (``.sdd/runs/<run>/seal_anchor.json``) is checked against the journal's head
now (the §2 walk's ``head``): it is ``verified`` — the only verdict that exits 0 — when
the head is the one it names and, for an RFC 3161 anchor, its token was signed over
exactly that head by a TSA the trust bundle vouches for (``tsa_trust.py``). Otherwise:
no anchor or an unreadable one (exit 1), ``mismatched`` (another head), ``unverifiable``
(no trust bundle), ``invalid`` (a token that does not hold up). Transparency-log anchors
(an inclusion proof under a pinned log key) are not redone here: ``not_reproduced``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentledger.limits import MAX_DOCUMENT_BYTES

if TYPE_CHECKING:
    from cryptography import x509  # annotations only

HEAD = re.compile(r"[0-9a-f]{64}")
RFC3161 = "rfc3161"
TRANSPARENCY_LOG = "transparency-log"


@dataclass
class SealVerdict:
    """``status``: ``missing``, ``unreadable``, ``mismatched``, ``unverifiable``,
    ``invalid``, ``verified`` or ``not_reproduced``."""

    status: str
    errors: list[str] = field(default_factory=list)
    anchored_head: str | None = None
    tsa_subject: str | None = None

    @property
    def code(self) -> int | None:
        """``bernstein seal verify``'s exit code (None: not reproduced)."""
        if self.status == "not_reproduced":
            return None
        return 0 if self.status == "verified" else 1


def seal_verdict(
    data: bytes | None, head: str, trusted: list[x509.Certificate] | None
) -> SealVerdict:
    """The anchor's bytes (None: no anchor) against the journal's ``head``, with the
    trust bundle's certificates (``--tsa-bundle``) when given."""
    if data is None:
        return SealVerdict("missing", ["no seal anchor for this run"])
    doc = None
    if len(data) <= MAX_DOCUMENT_BYTES:
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            doc = None
    if not isinstance(doc, dict):
        return SealVerdict("unreadable", ["the anchor is not a JSON object"])
    kind = doc.get("anchor_kind")
    if kind == TRANSPARENCY_LOG:
        return SealVerdict("not_reproduced", ["transparency-log anchors are not redone here"])
    if kind != RFC3161:
        return SealVerdict("unreadable", [f"unsupported anchor_kind {kind!r}"])
    anchored, token_b64 = doc.get("head_sha256"), doc.get("rfc3161_token_b64")
    if (
        not isinstance(doc.get("run_id"), str)
        or not isinstance(anchored, str)
        or not HEAD.fullmatch(anchored)
        or not isinstance(token_b64, str)
        or not isinstance(doc.get("rfc3161_tsa_url", ""), str)
    ):
        return SealVerdict("unreadable", ["the anchor lacks a field bernstein requires"])
    if anchored != head:
        return SealVerdict(
            "mismatched", [f"anchored head {anchored}, journal head {head}"], anchored
        )
    if not trusted:
        return SealVerdict("unverifiable", ["no trust bundle: the token was not checked"], anchored)
    # Loaded for a token only: asn1crypto and cryptography take 0.06 s to import.
    from agentledger.bernstein.rfc3161_token import message_imprint
    from agentledger.bernstein.tsa_trust import authenticate_token

    try:
        token = base64.b64decode(token_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        return SealVerdict("invalid", [f"the token is not base64: {exc}"], anchored)
    try:
        covers = message_imprint(token) == bytes.fromhex(anchored)
    except ValueError as exc:
        return SealVerdict("invalid", [f"token: {exc}"], anchored)
    check = authenticate_token(token, trusted)
    errors = check.problems + ([] if covers else ["the token's imprint is not the head"])
    if errors:
        return SealVerdict("invalid", errors, anchored, check.signer)
    return SealVerdict("verified", [], anchored, check.signer)
