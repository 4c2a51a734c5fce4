"""RFC 3161 tokens of a test TSA, authenticated against a trust bundle (``tsa_trust.py``).

The tokens come from ``data/tsa_tokens.py`` (pyca/cryptography and asn1crypto); the same
kinds of token are judged by bernstein's own verifier in ``test_sealed.py``.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from agentledger.bernstein.rfc3161_token import message_imprint
from agentledger.bernstein.tsa_trust import authenticate_token, load_trust_bundle

DATA = Path(__file__).resolve().parent / "data"
DIGEST = hashlib.sha256(b"a checkpoint payload").digest()


def _data_module(name: str) -> Any:
    sys.path.insert(0, str(DATA))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(DATA))


tsa: Any = _data_module("tsa_tokens")


@pytest.fixture(scope="module")
def root() -> Any:
    return tsa.root_ca("unit test root")


def test_a_token_of_a_bundled_tsa_authenticates(root: Any) -> None:
    token = tsa.token(tsa.issue(root, "unit TSA"), DIGEST)
    check = authenticate_token(token, [root.certificate])
    assert check.problems == []
    assert check.timestamping_eku
    assert check.signer == "CN=unit TSA"
    assert message_imprint(token) == DIGEST


def test_an_ec_tsa_under_an_embedded_intermediate_authenticates(root: Any) -> None:
    intermediate = tsa.issue(root, "unit intermediate", ca=True, rsa_key=False)
    signer = tsa.issue(intermediate, "unit EC TSA", rsa_key=False)
    assert (
        authenticate_token(
            tsa.token(signer, DIGEST, chain=(intermediate,)), [root.certificate]
        ).problems
        == []
    )
    # Without the intermediate in the token there is no path to the root.
    lone = authenticate_token(tsa.token(signer, DIGEST), [root.certificate])
    assert [p.split(":")[0] for p in lone.problems] == ["chain"]


def test_a_tsa_under_another_root_is_not_authenticated(root: Any) -> None:
    stranger = tsa.root_ca("unit stranger")
    check = authenticate_token(
        tsa.token(tsa.issue(stranger, "stranger TSA"), DIGEST), [root.certificate]
    )
    assert len(check.problems) == 1
    assert check.problems[0].startswith("chain: no path to the trust bundle at 2026-01-02")


def test_validity_is_judged_at_the_tokens_time(root: Any) -> None:
    expired = tsa.issue(
        root,
        "expired TSA",
        not_before=tsa.GEN_TIME.replace(year=2020),
        not_after=tsa.GEN_TIME.replace(year=2021),
    )
    assert authenticate_token(tsa.token(expired, DIGEST), [root.certificate]).problems
    retired = tsa.issue(root, "retired TSA", not_after=tsa.GEN_TIME.replace(month=6))
    assert authenticate_token(tsa.token(retired, DIGEST), [root.certificate]).problems == []
    # The same certificate, a token dated after it expired: no path.
    late = tsa.token(retired, DIGEST, gen_time=tsa.GEN_TIME.replace(month=7))
    assert authenticate_token(late, [root.certificate]).problems


def test_a_tampered_imprint_breaks_the_signed_digest(root: Any) -> None:
    other = hashlib.sha256(b"other").digest()
    token = tsa.token(tsa.issue(root, "unit TSA"), DIGEST, imprint_after_signing=other)
    assert message_imprint(token) == other  # the token claims the other digest…
    check = authenticate_token(token, [root.certificate])
    assert check.problems == ["signature: the signed message digest is not the TSTInfo's"]


def test_a_flipped_signature_does_not_verify(root: Any) -> None:
    token = bytearray(tsa.token(tsa.issue(root, "unit TSA"), DIGEST))
    token[-5] ^= 0x01  # the signature is the SignerInfo's last field
    check = authenticate_token(bytes(token), [root.certificate])
    assert check.problems == ["signature: the TSA's signature does not verify"]


def test_a_token_without_its_certificate_names_no_signer(root: Any) -> None:
    bare = _data_module("sealed_workdirs").timestamp_token(DIGEST)
    check = authenticate_token(bare, [root.certificate])
    assert [p.split(":")[0] for p in check.problems] == ["signer"]


def test_a_certificate_without_the_timestamping_usage_is_reported(root: Any) -> None:
    check = authenticate_token(
        tsa.token(tsa.issue(root, "plain", timestamping=False), DIGEST), [root.certificate]
    )
    assert check.problems == []  # bernstein does not require it
    assert not check.timestamping_eku


def test_trust_bundles(root: Any) -> None:
    pem = root.pem() + tsa.root_ca("second").pem()
    assert len(load_trust_bundle(pem)) == 2
    der = root.certificate.public_bytes(serialization.Encoding.DER)
    assert load_trust_bundle(der) == [root.certificate]
    for bad in (b"", b"  \n", b"not a certificate", b"-----BEGIN CERTIFICATE-----\nAAAA\n"):
        with pytest.raises(ValueError):
            load_trust_bundle(bad)
