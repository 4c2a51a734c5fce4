"""Who signed an RFC 3161 token: its TSA authenticated against a trust bundle
(docs/BERNSTEIN.md §15).

bernstein (``--rfc3161-trusted-tsa-bundle``) takes a PEM bundle (or one DER certificate)
of TSA roots the operator trusts, never the system's store, and then requires of each
token: the signer certificate named by the SignerInfo is embedded; it chains, through the
other embedded certificates, to a bundled certificate at the token's own ``genTime`` (so a
TSA certificate that expired since still verifies); CA certificates carry basic
constraints; the SignedAttributes' ``message-digest`` is the digest of the TSTInfo; and
the signature over the SignedAttributes (or over the TSTInfo when there are none)
verifies under the signer's RSA or EC key. The ``id-kp-timeStamping`` extended key usage
is not required by bernstein: strict requires it (RFC 3161 §2.3), compat does not.

pyca/cryptography builds the path and checks the signatures; asn1crypto reads the CMS.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
    VerificationError,
)

from agentledger.bernstein.rfc3161_token import Token, parse_token

DIGESTS: dict[str, type[hashes.HashAlgorithm]] = {
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}
"""The SignerInfo digests a token may use (bernstein refuses SHA-1 and the rest)."""
PEM_MARKER = b"-----BEGIN CERTIFICATE-----"


def load_trust_bundle(data: bytes) -> list[x509.Certificate]:
    """The certificates of a trust bundle: PEM (one or more), else a single DER
    certificate. ``ValueError`` when it holds none that parse."""
    if not data.strip():
        raise ValueError("the trust bundle is empty")
    if PEM_MARKER in data:
        certificates = x509.load_pem_x509_certificates(data)
    else:
        certificates = [x509.load_der_x509_certificate(data)]
    if not certificates:
        raise ValueError("the trust bundle holds no certificate")
    return certificates


@dataclass
class TsaCheck:
    """What authenticating one token found: ``problems`` are what bernstein fails it on;
    ``timestamping_eku`` whether the signer certificate is marked for timestamping."""

    problems: list[str] = field(default_factory=list)
    timestamping_eku: bool = False
    signer: str | None = None
    """The signer certificate's subject (RFC 4514), when it was found."""


def authenticate_token(token: bytes, trusted: Sequence[x509.Certificate]) -> TsaCheck:
    """Check the token's TSA against ``trusted`` (a loaded, non-empty bundle). The
    imprint is the caller's to compare with what the token should cover."""
    check = TsaCheck()
    try:
        parsed = parse_token(token)
    except ValueError as exc:
        check.problems.append(f"token: {exc}")
        return check
    try:
        signer = _signer_certificate(parsed)
    except ValueError as exc:
        check.problems.append(f"signer: {exc}")
        return check
    check.signer = signer.subject.rfc4514_string()
    check.timestamping_eku = _marked_for_timestamping(signer)
    problem = _chain_problem(parsed, signer, trusted)
    if problem is not None:
        check.problems.append(f"chain: {problem}")
    problem = _signature_problem(parsed, signer)
    if problem is not None:
        check.problems.append(f"signature: {problem}")
    return check


def _signer_certificate(parsed: Token) -> x509.Certificate:
    """The embedded certificate the SignerInfo names (issuer and serial, or subject key
    identifier)."""
    sid = parsed.signer_info["sid"]
    if sid.name == "issuer_and_serial_number":
        issuer = bytes(sid.chosen["issuer"].dump())
        serial = int(sid.chosen["serial_number"].native)
        for certificate in parsed.certificates:
            if certificate.serial_number == serial and certificate.issuer.public_bytes() == issuer:
                return certificate
    elif sid.name == "subject_key_identifier":
        wanted = bytes(sid.chosen.native)
        for certificate in parsed.certificates:
            try:
                ski = certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
            except x509.ExtensionNotFound:
                continue
            if ski.value.digest == wanted:
                return certificate
    raise ValueError(
        f"no embedded certificate ({len(parsed.certificates)}) matches the SignerInfo's {sid.name}"
    )


def _marked_for_timestamping(certificate: x509.Certificate) -> bool:
    try:
        usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    except x509.ExtensionNotFound:
        return False
    return ExtendedKeyUsageOID.TIME_STAMPING in usage.value


def _chain_problem(
    parsed: Token, signer: x509.Certificate, trusted: Sequence[x509.Certificate]
) -> str | None:
    """A path from the signer to a bundled certificate, valid at the token's genTime.
    TSA certificates are CMS signers, not TLS servers: the leaf's extensions are not held
    to web PKI rules; a CA must carry basic constraints, critical or not."""
    try:
        gen_time: datetime = parsed.tst_info["gen_time"].native
    except (KeyError, AttributeError, ValueError) as exc:
        return f"no genTime: {exc}"
    leaf = signer.fingerprint(hashes.SHA256())
    others = [c for c in parsed.certificates if c.fingerprint(hashes.SHA256()) != leaf]
    ca_rules = ExtensionPolicy.permit_all().require_present(
        x509.BasicConstraints, Criticality.AGNOSTIC, None
    )
    try:
        verifier = (
            PolicyBuilder()
            .store(Store(list(trusted)))
            .time(gen_time)
            .extension_policies(ca_policy=ca_rules, ee_policy=ExtensionPolicy.permit_all())
            .build_client_verifier()
        )
        verifier.verify(signer, others)
    except VerificationError as exc:
        return f"no path to the trust bundle at {gen_time.isoformat()}: {exc}"
    except ValueError as exc:
        return str(exc)
    return None


def _signature_problem(parsed: Token, signer: x509.Certificate) -> str | None:
    info = parsed.signer_info
    try:
        digest_name = str(info["digest_algorithm"]["algorithm"].native).lower()
        algorithm = str(info["signature_algorithm"]["algorithm"].native).lower()
        signature = bytes(info["signature"].native)
        attributes = info["signed_attrs"]
        content = bytes(parsed.signed_data["encap_content_info"]["content"].contents)
    except (KeyError, AttributeError, TypeError, ValueError) as exc:
        return f"malformed SignerInfo: {exc}"
    digest = DIGESTS.get(digest_name)
    if digest is None:
        return f"unsupported digest algorithm {digest_name!r}"
    if attributes is not None and len(attributes):
        stated = next(
            (
                bytes(a["values"][0].native)
                for a in attributes
                if a["type"].native == "message_digest"
            ),
            None,
        )
        if stated is None:
            return "the signed attributes carry no message digest"
        if stated != hashlib.new(digest_name, content).digest():
            return "the signed message digest is not the TSTInfo's"
        # RFC 5652 §5.4: signed as a SET OF (tag 0x31), not with the [0] tag it carries.
        signed = b"\x31" + bytes(attributes.dump())[1:]
    else:
        signed = content
    key = signer.public_key()
    try:
        if isinstance(key, rsa.RSAPublicKey):
            pad: padding.AsymmetricPadding = (
                # bernstein verifies PSS with the maximum salt length only.
                padding.PSS(mgf=padding.MGF1(digest()), salt_length=padding.PSS.MAX_LENGTH)
                if "pss" in algorithm
                else padding.PKCS1v15()
            )
            key.verify(signature, signed, pad, digest())
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, signed, ec.ECDSA(digest()))
        else:
            return f"unsupported TSA key type {type(key).__name__}"
    except InvalidSignature:
        return "the TSA's signature does not verify"
    return None
