"""An RFC 3161 timestamp token, read as bernstein reads it (docs/BERNSTEIN.md §15).

A token is a ``TimeStampResp`` whose status is granted (or granted with modifications),
else a bare CMS ``ContentInfo``; either way SignedData encapsulating a TSTInfo, with
exactly one SignerInfo and embedded certificates that parse as X.509. The message
imprint must be a SHA-2 digest. Parsing says what the token claims, not who signed it:
``tsa_trust.py`` checks that against a trust bundle.

The DER is parsed with asn1crypto and the certificates with pyca/cryptography, never by
hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asn1crypto import cms, tsp
from cryptography import x509

SHA2_OIDS = frozenset(
    {"2.16.840.1.101.3.4.2.1", "2.16.840.1.101.3.4.2.2", "2.16.840.1.101.3.4.2.3"}
)
"""SHA-256, SHA-384, SHA-512: the imprint digests bernstein accepts."""


@dataclass(frozen=True)
class Token:
    """The parts of a parsed token that its checks read (asn1crypto values)."""

    signed_data: Any
    tst_info: Any
    signer_info: Any
    certificates: list[x509.Certificate]


def parse_token(token: bytes) -> Token:
    """The token's SignedData, TSTInfo, sole SignerInfo and embedded certificates;
    ``ValueError`` when it does not parse as bernstein requires."""
    try:
        response = tsp.TimeStampResp.load(token)
        status = response["status"]["status"].native
    except (ValueError, KeyError, TypeError):
        try:
            info = cms.ContentInfo.load(token)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"could not parse the RFC 3161 token: {exc}") from None
    else:
        # A recognisable response that the TSA refused is not retried as a bare token.
        if status not in {"granted", "granted_with_mods"}:
            raise ValueError(f"the TSA returned the status {status!r}")
        info = response["time_stamp_token"]
    try:
        if info["content_type"].native != "signed_data":
            raise ValueError("the token is not CMS SignedData")
        signed = info["content"]
        encapsulated = signed["encap_content_info"]
        if encapsulated["content_type"].native != "tst_info":
            raise ValueError(f"unexpected content type {encapsulated['content_type'].native!r}")
        tst_info = encapsulated["content"].parsed
        certificates = [
            x509.load_der_x509_certificate(bytes(choice.chosen.dump()))
            for choice in (signed["certificates"] or [])
        ]
        signers = signed["signer_infos"]
        if len(signers) != 1:
            raise ValueError(f"{len(signers)} signer infos, not one")
        return Token(signed, tst_info, signers[0], certificates)
    except (KeyError, AttributeError, TypeError) as exc:
        raise ValueError(f"malformed token: {exc}") from None


def message_imprint(token: bytes) -> bytes:
    """The token's ``messageImprint.hashedMessage``; ``ValueError`` when the token does
    not parse or its imprint is not a SHA-2 digest."""
    parsed = parse_token(token)
    try:
        imprint = parsed.tst_info["message_imprint"]
        oid = imprint["hash_algorithm"]["algorithm"].dotted
        digest = bytes(imprint["hashed_message"].native)
    except (KeyError, AttributeError, TypeError) as exc:
        raise ValueError(f"malformed message imprint: {exc}") from None
    if oid not in SHA2_OIDS:
        raise ValueError(f"the imprint's hash ({oid}) is not SHA-256, -384 or -512")
    return digest
