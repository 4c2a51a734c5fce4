"""A run's seal anchor against its journal (docs/BERNSTEIN.md §16).

``.sdd/runs/<run>/seal_anchor.json`` names the run's sealed journal head
(``head_sha256``) and an external proof that it existed: an RFC 3161 token whose message
imprint is the head's 32 bytes, or a transparency-log inclusion proof. Strict compares
the head with the journal the ledger holds (a cut or changed tail moves it) and, for a
token, its imprint with the head (``rfc3161_token.message_imprint``) and, with a trust
bundle, its TSA (``tsa_trust.py``, the timestamping usage required). The log's proof is
not checked here.
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentledger.limits import MAX_DOCUMENT_BYTES

if TYPE_CHECKING:
    from cryptography import x509  # annotations only

ANCHOR_NAME = "seal_anchor.json"
RFC3161 = "rfc3161"


def seal_anchor_path(journal: str) -> str:
    """Where a run's seal anchor sits: beside its journal."""
    return f"{posixpath.dirname(journal)}/{ANCHOR_NAME}"


@dataclass(frozen=True, slots=True)
class AnchorProblem:
    """``check``: ``bernstein.seal_anchor.<head|token|unreadable>``."""

    check: str
    expected: str
    actual: str


def seal_anchor_problems(
    data: bytes, head: str | None, trusted: list[x509.Certificate] | None = None
) -> list[AnchorProblem]:
    """How the anchor fails to bind the journal ending at ``head``; with a trust bundle
    (``trusted``), also how its RFC 3161 token's TSA fails to be authenticated."""
    doc = None
    if len(data) <= MAX_DOCUMENT_BYTES:
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError):
            doc = None
    sealed = doc.get("head_sha256") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(sealed, str):
        return [AnchorProblem("bernstein.seal_anchor.unreadable", "a seal anchor", "unreadable")]
    problems = []
    if sealed != head:
        problems.append(
            AnchorProblem("bernstein.seal_anchor.head", f"head {sealed}", f"head {head}")
        )
    if doc.get("anchor_kind") == RFC3161:
        reason = _token_problem(doc.get("rfc3161_token_b64"), sealed)
        if reason is not None:
            problems.append(
                AnchorProblem("bernstein.seal_anchor.token", f"a token over {sealed}", reason)
            )
        elif trusted:
            # X.509: loaded for a trust bundle only (cryptography takes 0.06 s to import).
            from agentledger.bernstein.tsa_trust import authenticate_token

            token = base64.b64decode(str(doc["rfc3161_token_b64"]), validate=True)
            check = authenticate_token(token, trusted)
            if not check.problems and not check.timestamping_eku:
                check.problems.append(
                    f"the TSA certificate ({check.signer}) is not for timestamping"
                )
            if check.problems:
                problems.append(
                    AnchorProblem(
                        "bernstein.seal_anchor.tsa",
                        "a TSA the trust bundle vouches for",
                        "; ".join(check.problems),
                    )
                )
    return problems


def _token_problem(token_b64: object, head: str) -> str | None:
    # Loaded for a token only: asn1crypto and cryptography take 0.06 s to import.
    from agentledger.bernstein.rfc3161_token import message_imprint

    if not isinstance(token_b64, str):
        return "no token"
    try:
        token = base64.b64decode(token_b64, validate=True)
        expected = bytes.fromhex(head)
    except (binascii.Error, ValueError) as exc:
        return f"not base64 or not hex: {exc}"
    try:
        imprint = message_imprint(token)
    except ValueError as exc:
        return f"token: {exc}"
    return None if imprint == expected else "the token's imprint is another digest"
