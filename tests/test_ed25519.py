"""Ed25519 verification must decide exactly as libsodium (PyNaCl) does, on every input.

A small pure-Python Ed25519 (below) builds the inputs no honest signer produces: small-order
and mixed-order points, non-canonical encodings, signatures valid only under the cofactored
equation. PyNaCl is the referee; the rule set is documented in rust/core/src/signature.rs.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import nacl.exceptions
import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import keys as keys_module
from agentledger._core import Ed25519Signer, ed25519_verify, ed25519_verify_batch
from agentledger.keys import InstallKey, sign_message

VECTORS = Path(__file__).parent / "vectors" / "ed25519-dalek-testvectors" / "TESTVECTORS"

# ---- a minimal Ed25519 oracle (extended coordinates), for building inputs -------------

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)

Point = tuple[int, int, int, int]
IDENTITY: Point = (0, 1, 1, 0)


def point_add(p: Point, q: Point) -> Point:
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % P
    b = (y1 + x1) * (y2 + x2) % P
    c = 2 * t1 * t2 * D % P
    d = 2 * z1 * z2 % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def point_neg(p: Point) -> Point:
    x, y, z, t = p
    return (-x % P, y, z, -t % P)


def scalar_mult(k: int, p: Point) -> Point:
    result = IDENTITY
    while k:
        if k & 1:
            result = point_add(result, p)
        p = point_add(p, p)
        k >>= 1
    return result


def recover_x(y: int, sign: int) -> int | None:
    """The x with parity `sign` on the curve at y (taken mod p); None if there is none."""
    y %= P
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P:
        return None
    return P - x if (x & 1) != sign and x else x


def decode(encoding: bytes) -> Point | None:
    """Decode as ref10 and dalek do: the low 255 bits are y (not required < p)."""
    value = int.from_bytes(encoding, "little")
    y, sign = value & (2**255 - 1), value >> 255
    x = recover_x(y, sign)
    return None if x is None else (x, y % P, 1, x * y % P)


def encode(p: Point) -> bytes:
    x, y, z, _ = p
    z_inv = pow(z, P - 2, P)
    x, y = x * z_inv % P, y * z_inv % P
    return (y | (x & 1) << 255).to_bytes(32, "little")


def encode_raw(y: int, sign: int) -> bytes:
    return (y | sign << 255).to_bytes(32, "little")


def is_small_order(p: Point) -> bool:
    return encode(scalar_mult(8, p)) == encode(IDENTITY)


_BASE_Y = 4 * pow(5, P - 2, P) % P
_BASE_X = recover_x(_BASE_Y, 0)
assert _BASE_X is not None
BASE: Point = (_BASE_X, _BASE_Y, 1, _BASE_X * _BASE_Y % P)
_ORDER_8 = decode(bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"))
assert _ORDER_8 is not None
TORSION: list[Point] = [scalar_mult(k, _ORDER_8) for k in range(8)]


def challenge(r_encoding: bytes, a_encoding: bytes, message: bytes) -> int:
    digest = hashlib.sha512(r_encoding + a_encoding + message).digest()
    return int.from_bytes(digest, "little") % L


def small_order_encodings() -> list[bytes]:
    """All 14 byte strings that decode to one of the 8 small-order points."""
    found = set()
    for point in TORSION:
        value = int.from_bytes(encode(point), "little")
        y = value & (2**255 - 1)
        for candidate_y in (y, y + P):
            for sign in (0, 1):
                if candidate_y < 2**255:
                    encoding = encode_raw(candidate_y, sign)
                    decoded = decode(encoding)
                    if decoded is not None and encode(decoded) == encode(point):
                        found.add(encoding)
    return sorted(found)


# ---- the referee ------------------------------------------------------------------------


def libsodium_accepts(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """PyNaCl's decision; lengths libsodium cannot even be called with count as rejections."""
    try:
        nacl.signing.VerifyKey(public_key).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError):
        return False
    return True


class Case(NamedTuple):
    kind: str
    public_key: bytes
    message: bytes
    signature: bytes


def dalek_testvectors() -> list[tuple[bytes, bytes, bytes]]:
    triples = []
    for line in VECTORS.read_text().splitlines():
        if not line:
            continue
        _, pk_hex, msg_hex, signed_hex, _ = line.split(":")
        signed = bytes.fromhex(signed_hex)
        assert signed[64:] == bytes.fromhex(msg_hex)
        triples.append((bytes.fromhex(pk_hex), bytes.fromhex(msg_hex), signed[:64]))
    return triples


def edge_cases(seed: int = 20240607) -> Iterator[Case]:
    """A few thousand deterministic inputs, each category aimed at one verifier rule."""
    rng = random.Random(seed)
    message = b"agentledger edge case"

    def scalar() -> int:
        return rng.randrange(1, L)

    def s_bytes(s: int) -> bytes:
        return s.to_bytes(32, "little")

    # Honest signatures and their corruptions.
    for _ in range(300):
        key = nacl.signing.SigningKey(rng.randbytes(32))
        msg = rng.randbytes(rng.randrange(0, 80))
        pk, sig = bytes(key.verify_key), key.sign(msg).signature
        yield Case("honest", pk, msg, sig)
        s = int.from_bytes(sig[32:], "little")
        for big_s in (s + L, s + 2 * L, s + 15 * L, s | 1 << 255, s + (1 << 253)):
            if big_s < 2**256:
                yield Case("s-not-reduced", pk, msg, sig[:32] + s_bytes(big_s))
        for _ in range(4):
            parts = [bytearray(pk), bytearray(msg), bytearray(sig)]
            target = parts[rng.randrange(3)] or parts[2]
            target[rng.randrange(len(target))] ^= 1 << rng.randrange(8)
            yield Case("bit-flip", bytes(parts[0]), bytes(parts[1]), bytes(parts[2]))
        yield Case("wrong-length", pk[:31], msg, sig)
        yield Case("wrong-length", pk + b"\0", msg, sig)
        yield Case("wrong-length", pk, msg, sig[:63])
        yield Case("wrong-length", pk, msg, sig + b"\0")

    # Every small-order encoding as A and as R, against each other and real points.
    small = small_order_encodings()
    assert len(small) == 14
    a = scalar()
    real_pk = encode(scalar_mult(a, BASE))
    for r_enc in small:
        for s in (0, 1, L - 1, challenge(r_enc, real_pk, message) * a % L):
            yield Case("small-order-R", real_pk, message, r_enc + s_bytes(s))
    for a_enc in small:
        for r_enc in [*small, encode(scalar_mult(scalar(), BASE))]:
            for s in (0, 1):
                yield Case("small-order-A", a_enc, message, r_enc + s_bytes(s))

    # Mixed-order A = aB + T and R = rB + T': some signatures hold only under the cofactored
    # equation, others are ground until the cofactorless equation holds too.
    for k in range(1, 8):
        for _ in range(12):
            a, r = scalar(), scalar()
            torsion_r = TORSION[rng.randrange(8)]
            point_a = point_add(scalar_mult(a, BASE), TORSION[k])
            point_r = point_add(scalar_mult(r, BASE), torsion_r)
            a_enc, r_enc = encode(point_a), encode(point_r)
            h = challenge(r_enc, a_enc, message)
            s = (r + h * a) % L
            cofactorless = encode(
                point_add(scalar_mult(s, BASE), point_neg(scalar_mult(h, point_a)))
            )
            kind = "mixed-order-valid" if cofactorless == r_enc else "mixed-order-cofactored-only"
            yield Case(kind, a_enc, message, r_enc + s_bytes(s))
        # Mixed-order R under an honest key: valid only under the cofactored equation.
        a, r = scalar(), scalar()
        a_enc = encode(scalar_mult(a, BASE))
        r_enc = encode(point_add(scalar_mult(r, BASE), TORSION[k]))
        s = (r + challenge(r_enc, a_enc, message) * a) % L
        yield Case("mixed-order-R", a_enc, message, r_enc + s_bytes(s))

    # Large-order points whose y < 19 have a second, non-canonical encoding y + p.
    for y in range(2, 19):
        for sign in (0, 1):
            x = recover_x(y, sign)
            if x is None or is_small_order((x, y, 1, x * y % P)):
                continue
            for enc in (encode_raw(y, sign), encode_raw(y + P, sign)):
                r_enc = encode(scalar_mult(scalar(), BASE))
                yield Case("non-canonical-A", enc, message, r_enc + s_bytes(scalar()))
                yield Case("non-canonical-R", real_pk, message, enc + s_bytes(scalar()))

    # Off-curve encodings and plain noise.
    for _ in range(200):
        while decode(noise := rng.randbytes(32)) is not None:
            pass
        yield Case("off-curve-A", noise, message, encode(scalar_mult(scalar(), BASE)) + bytes(32))
        yield Case("off-curve-R", real_pk, message, noise + s_bytes(scalar()))
    for _ in range(800):
        yield Case("random", rng.randbytes(32), rng.randbytes(8), rng.randbytes(64))


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return list(edge_cases())


# ---- tests ------------------------------------------------------------------------------


def test_dalek_testvectors_verify() -> None:
    triples = dalek_testvectors()
    assert len(triples) == 128
    for pk, msg, sig in triples:
        assert ed25519_verify(pk, msg, sig)
        assert libsodium_accepts(pk, msg, sig)


def test_dalek_testvectors_fail_after_any_single_bit_flip_of_the_signature() -> None:
    for pk, msg, sig in dalek_testvectors()[:16]:
        for bit in range(0, 512, 7):
            tampered = bytearray(sig)
            tampered[bit // 8] ^= 1 << (bit % 8)
            assert not ed25519_verify(pk, msg, bytes(tampered))


def test_decisions_match_libsodium_on_edge_cases(cases: list[Case]) -> None:
    assert len(cases) >= 3000
    decisions: Counter[tuple[str, bool]] = Counter()
    mismatches = []
    for case in cases:
        ours = ed25519_verify(case.public_key, case.message, case.signature)
        if ours != libsodium_accepts(case.public_key, case.message, case.signature):
            mismatches.append(case)
        decisions[case.kind, ours] += 1
    assert mismatches == []
    # The categories exercise what they claim to: honest and cofactorless-valid mixed-order
    # signatures are accepted; everything aimed at a rejection rule is rejected.
    assert decisions["honest", True] == 300
    assert decisions["mixed-order-valid", True] > 0
    accepted_kinds = {kind for kind, accepted in decisions if accepted}
    assert accepted_kinds == {"honest", "mixed-order-valid"}
    for kind in (
        "s-not-reduced",
        "small-order-A",
        "small-order-R",
        "mixed-order-cofactored-only",
        "mixed-order-R",
        "non-canonical-A",
        "non-canonical-R",
        "wrong-length",
    ):
        assert decisions[kind, False] > 0, kind


def test_a_key_verifying_many_signatures_decides_as_libsodium_throughout(
    cases: list[Case],
) -> None:
    # Past 64 verifications under one key on a thread, the core takes them from the key's
    # precomputed multiples instead of a double-base multiplication: each case aimed at the
    # equation is repeated well past that switch, and every decision must stay libsodium's.
    kinds = {
        "honest",
        "bit-flip",
        "mixed-order-valid",
        "mixed-order-cofactored-only",
        "mixed-order-R",
        "small-order-R",
        "non-canonical-R",
    }
    chosen = [case for case in cases if case.kind in kinds][::3]
    assert {case.kind for case in chosen} == kinds
    for case in chosen:
        expected = libsodium_accepts(case.public_key, case.message, case.signature)
        decisions = {
            ed25519_verify(case.public_key, case.message, case.signature) for _ in range(100)
        }
        assert decisions == {expected}, case


def test_batch_decisions_equal_single_decisions(cases: list[Case]) -> None:
    items = [(c.public_key, c.message, c.signature) for c in cases]
    batch = ed25519_verify_batch(items)
    assert batch == [ed25519_verify(*item) for item in items]
    assert any(batch)
    assert not all(batch)


def test_batch_of_nothing_is_empty() -> None:
    assert ed25519_verify_batch([]) == []


def test_wrong_lengths_are_rejections_not_errors() -> None:
    pk, msg, sig = dalek_testvectors()[3]
    for bad_pk, bad_sig in [(b"", sig), (pk[:31], sig), (pk, b""), (pk, sig[:63]), (pk, sig * 2)]:
        assert ed25519_verify(bad_pk, msg, bad_sig) is False
        assert ed25519_verify_batch([(bad_pk, msg, bad_sig)]) == [False]


def test_identity_key_signature_that_verifies_for_any_message_is_rejected() -> None:
    identity = encode(IDENTITY)
    signature = identity + bytes(32)
    assert not ed25519_verify(identity, b"anything", signature)
    assert not libsodium_accepts(identity, b"anything", signature)


def test_buffers_are_accepted_like_bytes() -> None:
    pk, msg, sig = dalek_testvectors()[5]
    # The stub promises bytes; any bytes-like object works at runtime.
    assert ed25519_verify(bytearray(pk), memoryview(msg), bytearray(sig))  # type: ignore[arg-type]
    batch = [(memoryview(pk), bytearray(msg), sig)]
    assert ed25519_verify_batch(batch) == [True]  # type: ignore[arg-type]
    long_message = bytes(100_000)
    key = nacl.signing.SigningKey(bytes(range(32)))
    long_sig = key.sign(long_message).signature
    assert ed25519_verify(bytes(key.verify_key), long_message, long_sig)
    assert ed25519_verify(bytes(key.verify_key), bytearray(long_message), long_sig)  # type: ignore[arg-type]


def test_malformed_arguments_raise() -> None:
    pk, msg, sig = dalek_testvectors()[0]
    with pytest.raises(TypeError):
        ed25519_verify(pk.hex(), msg, sig)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ed25519_verify_batch([pk + msg + sig])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="length 3"):
        ed25519_verify_batch([(pk, msg)])  # type: ignore[list-item]


@settings(max_examples=300, deadline=None)
@given(
    public_key=st.binary(min_size=32, max_size=32),
    message=st.binary(max_size=64),
    signature=st.binary(min_size=64, max_size=64),
)
def test_random_triples_match_libsodium(
    public_key: bytes, message: bytes, signature: bytes
) -> None:
    assert ed25519_verify(public_key, message, signature) == libsodium_accepts(
        public_key, message, signature
    )


@settings(max_examples=300, deadline=None)
@given(
    seed=st.binary(min_size=32, max_size=32),
    message=st.binary(max_size=64),
    flips=st.lists(st.integers(min_value=0, max_value=8 * 96 - 1), max_size=3),
)
def test_corrupted_honest_signatures_match_libsodium(
    seed: bytes, message: bytes, flips: list[int]
) -> None:
    key = nacl.signing.SigningKey(seed)
    blob = bytearray(bytes(key.verify_key) + key.sign(message).signature)
    for bit in flips:
        blob[bit // 8] ^= 1 << (bit % 8)
    pk, sig = bytes(blob[:32]), bytes(blob[32:])
    ours = ed25519_verify(pk, message, sig)
    assert ours == libsodium_accepts(pk, message, sig)
    assert ed25519_verify_batch([(pk, message, sig)]) == [ours]


# ---- signing --------------------------------------------------------------------------------


def test_dalek_testvectors_sign_to_their_signatures() -> None:
    for line in VECTORS.read_text().splitlines():
        if not line:
            continue
        secret_hex, _, msg_hex, signed_hex, _ = line.split(":")
        seed, message = bytes.fromhex(secret_hex)[:32], bytes.fromhex(msg_hex)
        signer = Ed25519Signer(seed)
        assert signer.sign(message) == bytes.fromhex(signed_hex)[:64]
        assert signer.public_key == bytes.fromhex(secret_hex)[32:]


@settings(max_examples=300, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), message=st.binary(max_size=3000))
def test_signatures_are_the_bytes_libsodium_makes(seed: bytes, message: bytes) -> None:
    key = nacl.signing.SigningKey(seed)
    expected = key.sign(message).signature
    signer = Ed25519Signer(seed)
    # The expanded key signs every message as a fresh one would.
    assert signer.sign(message) == expected
    assert signer.sign(message + b"!") == key.sign(message + b"!").signature
    assert ed25519_verify(bytes(key.verify_key), message, expected)


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_a_seed_of_another_length_is_refused(length: int) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        Ed25519Signer(bytes(length))


@settings(max_examples=100, deadline=None)
@given(seed=st.binary(min_size=32, max_size=32), message=st.binary(max_size=1000))
def test_the_install_key_is_pynacls_key_of_the_same_seed(seed: bytes, message: bytes) -> None:
    """``KeyStore.signing_key`` gives an ``InstallKey`` (no PyNaCl at start-up): the same
    public key, the same signatures, the seed as ``bytes(key)``, never in its repr."""
    ours, theirs = InstallKey(seed), nacl.signing.SigningKey(seed)
    assert ours.verify_key == bytes(theirs.verify_key)
    assert bytes(ours) == seed == bytes(theirs)
    assert sign_message(ours, message) == theirs.sign(message).signature
    assert seed.hex() not in repr(ours) and ours.verify_key.hex() in repr(ours)


def test_sign_message_signs_with_each_key_s_own_kept_expansion() -> None:
    keys = [nacl.signing.SigningKey(bytes([n]) * 32) for n in (1, 2)]
    for _ in range(2):  # the second round signs with the expansions kept from the first
        for key in keys:
            assert sign_message(key, b"message") == key.sign(b"message").signature


def test_sign_message_forgets_a_collected_key_before_its_id_names_another() -> None:
    # CPython reuses a freed object's memory at once: each new key may take the id of the
    # one just dropped, and must still sign with its own expansion.
    ids = set()
    for n in range(1, 40):
        key = nacl.signing.SigningKey(bytes([n]) * 32)
        ids.add(id(key))
        assert sign_message(key, b"message") == key.sign(b"message").signature
        del key
    assert len(ids) < 39  # ids were reused, so the test exercised what it names
    assert not ids & keys_module._signers.keys()  # every dropped key was forgotten
