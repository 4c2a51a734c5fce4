"""A test timestamping authority: a root CA, TSA certificates under it, and RFC 3161
tokens they sign.

pyca/cryptography makes the keys and certificates and signs; asn1crypto assembles the
TSTInfo, the CMS SignedData (with signed attributes: content type and message digest) and
the ``TimeStampResp``. Nothing here is bernstein's: its verifier judges these tokens in
the differential tests, and agentledger's must judge them alike.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from asn1crypto import algos, cms, core, tsp
from asn1crypto import x509 as asn1_x509
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

GEN_TIME = datetime(2026, 1, 2, tzinfo=UTC)
"""When the test TSA says it saw the digest."""
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class Authority:
    """A certificate and its private key."""

    certificate: x509.Certificate
    key: PrivateKey

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


def root_ca(name: str) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime(2020, 1, 1, tzinfo=UTC))
        .not_valid_after(datetime(2040, 1, 1, tzinfo=UTC))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return Authority(certificate, key)


def issue(
    issuer: Authority,
    name: str,
    *,
    ca: bool = False,
    rsa_key: bool = True,
    timestamping: bool = True,
    not_before: datetime = datetime(2025, 1, 1, tzinfo=UTC),
    not_after: datetime = datetime(2030, 1, 1, tzinfo=UTC),
) -> Authority:
    """A certificate ``issuer`` signs: an intermediate CA, or a TSA (RSA or EC key, with
    the critical ``id-kp-timeStamping`` usage unless ``timestamping`` is false)."""
    key: PrivateKey = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if rsa_key
        else ec.generate_private_key(ec.SECP256R1())
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(issuer.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()), False
        )
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
    elif timestamping:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True
        )
    return Authority(builder.sign(issuer.key, hashes.SHA256()), key)


def _asn1_certificate(certificate: x509.Certificate) -> asn1_x509.Certificate:
    return asn1_x509.Certificate.load(certificate.public_bytes(serialization.Encoding.DER))


def token(
    tsa: Authority,
    digest: bytes,
    *,
    chain: tuple[Authority, ...] = (),
    gen_time: datetime = GEN_TIME,
    imprint_after_signing: bytes | None = None,
) -> bytes:
    """A granted ``TimeStampResp`` whose TSTInfo's imprint is ``digest`` (SHA-256),
    signed by ``tsa`` over signed attributes, embedding its certificate and ``chain``.
    ``imprint_after_signing`` swaps the imprint once signed (a tampered token)."""
    sha256 = algos.DigestAlgorithm({"algorithm": "sha256"})

    def tst_info(imprint: bytes) -> bytes:
        info = tsp.TSTInfo(
            {
                "version": "v1",
                "policy": "1.2.3.4.1",
                "message_imprint": {"hash_algorithm": sha256, "hashed_message": imprint},
                "serial_number": 7,
                "gen_time": gen_time,
            }
        )
        return bytes(info.dump())

    content = tst_info(digest)
    attributes = cms.CMSAttributes(
        [
            {"type": "content_type", "values": ["tst_info"]},
            {"type": "message_digest", "values": [hashlib.sha256(content).digest()]},
        ]
    )
    signed = bytes(attributes.dump())  # the SET OF encoding the signature covers
    if isinstance(tsa.key, rsa.RSAPrivateKey):
        signature = tsa.key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
        algorithm = "sha256_rsa"
    else:
        signature = tsa.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        algorithm = "sha256_ecdsa"
    if imprint_after_signing is not None:
        content = tst_info(imprint_after_signing)
    certificate = _asn1_certificate(tsa.certificate)
    signer = cms.SignerInfo(
        {
            "version": "v1",
            "sid": cms.SignerIdentifier(
                "issuer_and_serial_number",
                {
                    "issuer": certificate.issuer,
                    "serial_number": certificate.serial_number,
                },
            ),
            "digest_algorithm": sha256,
            "signed_attrs": attributes,
            "signature_algorithm": {"algorithm": algorithm},
            "signature": signature,
        }
    )
    signed_data = cms.SignedData(
        {
            "version": "v3",
            "digest_algorithms": [sha256],
            "encap_content_info": {
                "content_type": "tst_info",
                "content": core.ParsableOctetString(content),
            },
            "certificates": [certificate] + [_asn1_certificate(a.certificate) for a in chain],
            "signer_infos": [signer],
        }
    )
    response = tsp.TimeStampResp(
        {
            "status": {"status": "granted"},
            "time_stamp_token": {"content_type": "signed_data", "content": signed_data},
        }
    )
    return bytes(response.dump())
