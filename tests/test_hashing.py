"""Hash primitives: BLAKE3 and SHA-256 content addresses, the domain hash, HMAC and HKDF.

Oracles: the official BLAKE3 vectors, RFC 4231, RFC 5869, `hashlib`/`hmac` and the
`blake3` package (itself checked against the official vectors below).
"""

from __future__ import annotations

import array
import hashlib
import hmac
import json
import threading
from pathlib import Path
from typing import Any

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core import (
    Blake3Hasher,
    Sha256Hasher,
    blake3_hex,
    domain_hash,
    hkdf_sha256,
    hmac_sha256,
    sha256_hex,
)

VECTORS = Path(__file__).parent / "vectors"
BLAKE3_VECTORS: dict[str, Any] = json.loads((VECTORS / "blake3" / "test_vectors.json").read_text())
RFC4231: dict[str, Any] = json.loads(
    (VECTORS / "rfc4231-hmac" / "rfc4231_hmac_sha256.json").read_text()
)


def blake3_vector_input(length: int) -> bytes:
    return bytes(i % 251 for i in range(length))


def blake3_oracle(data: bytes, context: str | None = None) -> bytes:
    hasher = blake3.blake3(derive_key_context=context) if context is not None else blake3.blake3()
    hasher.update(data)
    digest: bytes = hasher.digest()
    return digest


BLAKE3_CASES = BLAKE3_VECTORS["cases"]


# ---- BLAKE3 -----------------------------------------------------------------------------


def test_blake3_vector_file_is_complete() -> None:
    assert len(BLAKE3_CASES) >= 30
    assert {case["input_len"] for case in BLAKE3_CASES} >= {0, 1, 1024, 1025, 102400}


@pytest.mark.parametrize("case", BLAKE3_CASES, ids=lambda case: f"len{case['input_len']}")
def test_blake3_hex_matches_official_vectors(case: dict[str, Any]) -> None:
    data = blake3_vector_input(case["input_len"])
    expected = "blake3:" + case["hash"][:64]
    assert blake3_hex(data) == expected
    assert blake3_hex(bytearray(data)) == expected
    assert blake3_hex(memoryview(data)) == expected
    hasher = Blake3Hasher()
    for start in range(0, len(data), 1000):
        hasher.update(data[start : start + 1000])
    assert hasher.hex_digest() == expected


@pytest.mark.parametrize("case", BLAKE3_CASES, ids=lambda case: f"len{case['input_len']}")
def test_domain_hash_is_derive_key_mode(case: dict[str, Any]) -> None:
    data = blake3_vector_input(case["input_len"])
    # The official derive-key vectors pin the oracle's derive-key mode ...
    context = BLAKE3_VECTORS["context_string"]
    assert blake3_oracle(data, context).hex() == case["derive_key"][:64]
    # ... and the oracle, with our versioned context, pins domain_hash.
    assert domain_hash("entry", data) == blake3_oracle(data, "agentledger/v1/entry")


def test_domain_hash_separates_domains_and_is_not_the_content_hash() -> None:
    data = b'{"run":"r1"}'
    assert len(domain_hash("entry", data)) == 32
    assert domain_hash("entry", data) != domain_hash("evidence", data)
    assert domain_hash("entry", data).hex() != blake3_hex(data).removeprefix("blake3:")
    assert domain_hash("", data) == blake3_oracle(data, "agentledger/v1/")


def test_domain_hash_vectors_of_the_format_docs() -> None:
    # docs/HASHING.md lists these; a change here is a format change.
    assert domain_hash("entry", b'{"a":1}').hex() == (
        "77337381accb08edaa06eb3de44503206a764dc92e470ad42f0519869936d1c5"
    )
    assert domain_hash("evidence", b"").hex() == (
        "4a16ce09785d8d597fd384facc28d4ab99cbbfdbc645c7c34dd2474b8097492c"
    )
    assert blake3_hex(b"abc") == (
        "blake3:6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
    )


# ---- SHA-256 ----------------------------------------------------------------------------


def test_sha256_hex_matches_fips_180_examples() -> None:
    assert sha256_hex(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert sha256_hex(b"abc") == (
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


@settings(max_examples=200)
@given(data=st.binary(max_size=5000))
def test_content_addresses_match_reference_implementations(data: bytes) -> None:
    assert blake3_hex(data) == "blake3:" + blake3_oracle(data).hex()
    assert sha256_hex(data) == "sha256:" + hashlib.sha256(data).hexdigest()
    assert blake3_hex(bytearray(data)) == blake3_hex(data)
    assert sha256_hex(memoryview(data)) == sha256_hex(data)


def test_large_mutable_buffers_are_hashed_across_copy_chunks() -> None:
    # Larger than the 1 MiB copy chunk, and not a multiple of it.
    data = bytes(range(256)) * (3 * 4096 + 7)
    assert blake3_hex(bytearray(data)) == "blake3:" + blake3_oracle(data).hex()
    assert sha256_hex(bytearray(data)) == "sha256:" + hashlib.sha256(data).hexdigest()
    assert blake3_hex(memoryview(data)) == blake3_hex(data)
    hasher = Sha256Hasher()
    hasher.update(bytearray(data))
    hasher.update(data)
    assert hasher.hex_digest() == "sha256:" + hashlib.sha256(data + data).hexdigest()


def test_buffers_with_other_item_formats_are_hashed_as_raw_bytes() -> None:
    words = array.array("I", range(1000))
    assert blake3_hex(words) == blake3_hex(words.tobytes())
    assert sha256_hex(array.array("b", [-1, 2, -3])) == sha256_hex(bytes([255, 2, 253]))


def test_non_contiguous_buffers_are_refused() -> None:
    with pytest.raises(BufferError):
        blake3_hex(memoryview(b"abcdef")[::2])


def test_str_is_not_bytes() -> None:
    with pytest.raises(TypeError):
        blake3_hex("abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sha256_hex("abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        domain_hash("entry", "abc")  # type: ignore[arg-type]


# ---- streaming ---------------------------------------------------------------------------


@settings(max_examples=100)
@given(chunks=st.lists(st.binary(max_size=3000), max_size=12))
def test_streaming_hashers_equal_one_shot(chunks: list[bytes]) -> None:
    whole = b"".join(chunks)
    blake, sha = Blake3Hasher(), Sha256Hasher()
    for chunk in chunks:
        blake.update(chunk)
        sha.update(bytearray(chunk))
    assert blake.hex_digest() == blake3_hex(whole)
    assert sha.hex_digest() == sha256_hex(whole)


def test_hex_digest_does_not_end_the_stream() -> None:
    hasher = Blake3Hasher()
    hasher.update(b"ab")
    assert hasher.hex_digest() == blake3_hex(b"ab")
    hasher.update(b"c")
    assert hasher.hex_digest() == blake3_hex(b"abc")
    assert Sha256Hasher().hex_digest() == sha256_hex(b"")


def test_concurrent_updates_to_one_hasher_are_all_counted() -> None:
    # Every thread feeds identical chunks, so any interleaving gives the same digest; a lost
    # or torn update would not.
    chunk = bytes(range(256)) * 4096 * 2  # 2 MiB: released-GIL path
    threads_count, updates = 4, 5
    for hasher_type, one_shot in ((Blake3Hasher, blake3_hex), (Sha256Hasher, sha256_hex)):
        hasher = hasher_type()

        def feed(hasher: Blake3Hasher | Sha256Hasher = hasher) -> None:
            for _ in range(updates):
                hasher.update(chunk)
                hasher.update(bytearray(chunk[:4096]))

        threads = [threading.Thread(target=feed) for _ in range(threads_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        expected = one_shot((chunk + chunk[:4096]) * (threads_count * updates))
        assert hasher.hex_digest() == expected


# ---- HMAC and HKDF -----------------------------------------------------------------------


@pytest.mark.parametrize("case", RFC4231["cases"], ids=lambda case: f"case{case['test_case']}")
def test_hmac_sha256_matches_rfc4231(case: dict[str, Any]) -> None:
    key, data = bytes.fromhex(case["key_hex"]), bytes.fromhex(case["data_hex"])
    expected = bytes.fromhex(case["hmac_sha256_hex"])
    mac = hmac_sha256(key, data)
    assert len(mac) == 32
    # Case 5 is published truncated to 128 bits.
    assert mac[: len(expected)] == expected
    assert hmac_sha256(bytearray(key), memoryview(data)) == mac


def test_rfc4231_file_has_all_seven_cases() -> None:
    assert [case["test_case"] for case in RFC4231["cases"]] == [1, 2, 3, 4, 5, 6, 7]


@settings(max_examples=100)
@given(key=st.binary(max_size=200), data=st.binary(max_size=5000))
def test_hmac_sha256_matches_stdlib(key: bytes, data: bytes) -> None:
    assert hmac_sha256(key, data) == hmac.new(key, data, hashlib.sha256).digest()


# RFC 5869 appendix A, test cases 1-3 (SHA-256).
RFC5869 = [
    (
        "0b" * 22,
        "000102030405060708090a0b0c",
        "f0f1f2f3f4f5f6f7f8f9",
        42,
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
    ),
    (
        bytes(range(0x00, 0x50)).hex(),
        bytes(range(0x60, 0xB0)).hex(),
        bytes(range(0xB0, 0x100)).hex(),
        82,
        "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
        "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
        "cc30c58179ec3e87c14c01d5c1f3434f1d87",
    ),
    (
        "0b" * 22,
        "",
        "",
        42,
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8",
    ),
]


@pytest.mark.parametrize(("ikm", "salt", "info", "length", "okm"), RFC5869)
def test_hkdf_sha256_matches_rfc5869(ikm: str, salt: str, info: str, length: int, okm: str) -> None:
    result = hkdf_sha256(bytes.fromhex(ikm), bytes.fromhex(salt), bytes.fromhex(info), length)
    assert result.hex() == okm


def test_hkdf_without_salt_uses_the_zero_salt() -> None:
    ikm = bytes.fromhex("0b" * 22)
    # RFC 5869 test case 3 has an empty salt, which HMAC pads to the same zero block.
    assert hkdf_sha256(ikm, None, b"", 42).hex() == RFC5869[2][4]
    assert hkdf_sha256(ikm, None, b"ctx", 42) == hkdf_sha256(ikm, bytes(32), b"ctx", 42)


def test_hkdf_lengths() -> None:
    assert hkdf_sha256(b"k", None, b"", 0) == b""
    assert len(hkdf_sha256(b"k", None, b"", 8160)) == 8160
    with pytest.raises(ValueError):
        hkdf_sha256(b"k", None, b"", 8161)
    with pytest.raises(ValueError):
        hkdf_sha256(b"k", None, b"", -1)
