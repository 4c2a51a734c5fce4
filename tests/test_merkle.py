"""RFC 6962 Merkle trees (SHA-256 by default; BLAKE3 for the log before schema 6): roots,
inclusion and consistency proofs, their leaf ranges, incremental tree.

Oracles: the RFC 6962 reference tree and the transparency-dev/merkle probe files (SHA-256),
and a tiny recursive implementation of RFC 9162 §2.1.1 below.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core import (
    IncrementalMerkleTree,
    consistency_proof,
    consistency_proof_ranges,
    inclusion_proof,
    inclusion_proof_ranges,
    merkle_root,
    verify_consistency,
    verify_inclusion,
)

if TYPE_CHECKING:
    from agentledger._core import HashName

MERKLE_VECTORS = Path(__file__).parent / "vectors" / "rfc6962-merkle"
REFERENCE: dict[str, Any] = json.loads((MERKLE_VECTORS / "reference_tree.json").read_text())
REFERENCE_LEAVES = [bytes.fromhex(leaf) for leaf in REFERENCE["leaves_hex"]]
HASHES: tuple[HashName, ...] = ("blake3", "sha256")


def digest(name: HashName, data: bytes) -> bytes:
    if name == "sha256":
        return hashlib.sha256(data).digest()
    result: bytes = blake3.blake3(data).digest()
    return result


def oracle_root(name: HashName, leaves: Sequence[bytes]) -> bytes:
    """RFC 9162 §2.1.1, straight from the definition."""
    if not leaves:
        return digest(name, b"")
    if len(leaves) == 1:
        return digest(name, b"\x00" + leaves[0])
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    left, right = oracle_root(name, leaves[:split]), oracle_root(name, leaves[split:])
    return digest(name, b"\x01" + left + right)


def probes(kind: str) -> list[tuple[str, dict[str, Any]]]:
    found = sorted((MERKLE_VECTORS / "testdata" / kind).rglob("*.json"))
    return [(str(path.relative_to(MERKLE_VECTORS)), json.loads(path.read_text())) for path in found]


def b64(value: str) -> bytes:
    return base64.b64decode(value)


def b64_list(values: list[str] | None) -> list[bytes]:
    return [b64(v) for v in values or []]


# ---- fixed vectors ------------------------------------------------------------------------


def test_sha256_roots_match_rfc6962_reference_tree() -> None:
    assert merkle_root([], hash="sha256").hex() == REFERENCE["empty_root_hex"]
    roots = REFERENCE["roots_by_size_hex"]
    assert len(roots) == 8
    for size, expected in roots.items():
        assert merkle_root(REFERENCE_LEAVES[: int(size)], hash="sha256").hex() == expected


def test_default_hash_is_sha256_as_rfc6962() -> None:
    assert merkle_root([]) == hashlib.sha256(b"").digest()
    assert merkle_root([b"a"]) == hashlib.sha256(b"\x00a").digest()
    assert merkle_root([b"a", b"b"]) == oracle_root("sha256", [b"a", b"b"])
    assert IncrementalMerkleTree().root() == hashlib.sha256(b"").digest()


def test_tree_vectors_of_the_format_docs() -> None:
    # docs/HASHING.md lists these; a change here is a format change.
    abc = [b"a", b"b", b"c"]
    assert merkle_root([]).hex() == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert merkle_root([b"a"]).hex() == (
        "022a6979e6dab7aa5ae4c3e5e45f7e977112a7e63593820dbec1ec738a24f93c"
    )
    assert merkle_root(abc).hex() == (
        "36642e73c2540ab121e3a6bf9545b0a24982cd830eb13d3cd19de3ce6c021ec1"
    )
    assert [node.hex() for node in inclusion_proof(abc, 2)] == [
        "b137985ff484fb600db93107c77b0365c80d78f5b429ded0fd97361d077999eb"
    ]
    assert [node.hex() for node in consistency_proof(abc, 2)] == [
        "597fcb31282d34654c200d3418fca5705c648ebf326ec73d8ddef11841f876d8"
    ]


def test_blake3_tree_vectors_of_the_log_before_schema_6() -> None:
    abc = [b"a", b"b", b"c"]
    assert merkle_root([], hash="blake3").hex() == (
        "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    )
    assert merkle_root([b"a"], hash="blake3").hex() == (
        "1ff621ee3430890e869728995a6cee4f2b0b61271bfc19b0092b06d778750ae8"
    )
    assert merkle_root(abc, hash="blake3").hex() == (
        "6c62dd52a0971b7d00a7cead004e0c3f3c0766e3f5359a0f8297768d2b02d03c"
    )
    assert [node.hex() for node in inclusion_proof(abc, 2, hash="blake3")] == [
        "6564e87d8619ea09c801c567c641d47fe817ae3b2cf80685cde2eb6557247eca"
    ]
    assert [node.hex() for node in consistency_proof(abc, 2, hash="blake3")] == [
        "732874dc36c7e6c2cb61920dc5740c9bd14b0495c6933217631c0191559e3fa1"
    ]


def _oracle_path(index: int, start: int, stop: int) -> list[tuple[int, int]]:
    """RFC 9162 §2.1.3.1 PATH as leaf ranges, straight from the definition."""
    if stop - start <= 1:
        return []
    split = start + (1 << ((stop - start - 1).bit_length() - 1))
    if index < split:
        return [*_oracle_path(index, start, split), (split, stop)]
    return [*_oracle_path(index, split, stop), (start, split)]


def _oracle_subproof(m: int, start: int, stop: int, complete: bool) -> list[tuple[int, int]]:
    """RFC 9162 §2.1.4.1 SUBPROOF as leaf ranges."""
    if m == stop - start:
        return [] if complete else [(start, stop)]
    split = 1 << ((stop - start - 1).bit_length() - 1)
    if m <= split:
        return [*_oracle_subproof(m, start, start + split, complete), (start + split, stop)]
    return [*_oracle_subproof(m - split, start + split, stop, False), (start, start + split)]


def test_proof_ranges_are_the_rfc_definitions() -> None:
    for size in range(1, 70):
        for index in range(size):
            assert inclusion_proof_ranges(index, size) == _oracle_path(index, 0, size)
        for old in range(1, size):
            assert consistency_proof_ranges(old, size) == _oracle_subproof(old, 0, size, True)
        assert consistency_proof_ranges(0, size) == []
        assert consistency_proof_ranges(size, size) == []
    big = 2**63 + 12345
    assert len(inclusion_proof_ranges(0, big)) == 64
    assert inclusion_proof_ranges(big - 1, big) == _oracle_path(big - 1, 0, big)
    assert consistency_proof_ranges(big - 7, big) == _oracle_subproof(big - 7, 0, big, True)
    for bad in (lambda: inclusion_proof_ranges(3, 3), lambda: consistency_proof_ranges(4, 3)):
        with pytest.raises(ValueError, match=r"out of range|exceeds"):
            bad()


CONSISTENCY_PROBES = probes("consistency")


@pytest.mark.parametrize(
    ("path", "probe"), CONSISTENCY_PROBES, ids=[p for p, _ in CONSISTENCY_PROBES]
)
def test_consistency_probes(path: str, probe: dict[str, Any]) -> None:
    accepted = verify_consistency(
        probe["size1"],
        probe["size2"],
        b64(probe["root1"]),
        b64(probe["root2"]),
        b64_list(probe["proof"]),
        hash="sha256",
    )
    assert accepted == (not probe["wantErr"])


INCLUSION_PROBES = probes("inclusion")
# The probes carry leaf *hashes*; our API takes leaf data. Map each hash back to its leaf
# in the reference tree. A hash with no preimage there is either a "wrong leaf" probe (then
# data that hashes to something else keeps its intent), or the one-leaf tree whose root is
# its leaf hash (then we substitute a leaf we know, and its hash for both).
LEAF_BY_HASH = {hashlib.sha256(b"\x00" + leaf).digest(): leaf for leaf in REFERENCE_LEAVES}
NOT_A_REFERENCE_LEAF = b"not a leaf of the reference tree"


@pytest.mark.parametrize(("path", "probe"), INCLUSION_PROBES, ids=[p for p, _ in INCLUSION_PROBES])
def test_inclusion_probes(path: str, probe: dict[str, Any]) -> None:
    leaf_hash, root = b64(probe["leafHash"]), b64(probe["root"])
    leaf = LEAF_BY_HASH.get(leaf_hash)
    if leaf is None and not probe["wantErr"]:
        assert (probe["treeSize"], probe["proof"] or [], root) == (1, [], leaf_hash)
        leaf = NOT_A_REFERENCE_LEAF
        root = hashlib.sha256(b"\x00" + leaf).digest()
    elif leaf is None:
        leaf = NOT_A_REFERENCE_LEAF
    accepted = verify_inclusion(
        leaf,
        probe["leafIdx"],
        probe["treeSize"],
        b64_list(probe["proof"]),
        root,
        hash="sha256",
    )
    assert accepted == (not probe["wantErr"])


def test_probe_sets_are_complete() -> None:
    assert len(CONSISTENCY_PROBES) >= 90
    assert len(INCLUSION_PROBES) >= 95
    mapped = [p for _, p in INCLUSION_PROBES if b64(p["leafHash"]) in LEAF_BY_HASH]
    assert sum(not p["wantErr"] for p in mapped) == 5
    assert sum(not p["wantErr"] for _, p in INCLUSION_PROBES) == 6


def test_generated_proofs_equal_the_probe_proofs() -> None:
    for path, probe in INCLUSION_PROBES:
        if path.endswith("happy-path.json"):
            leaves = REFERENCE_LEAVES[: probe["treeSize"]]
            proof = inclusion_proof(leaves, probe["leafIdx"], hash="sha256")
            assert proof == b64_list(probe["proof"]), path
    for path, probe in CONSISTENCY_PROBES:
        if path.endswith("happy-path.json"):
            leaves = REFERENCE_LEAVES[: probe["size2"]]
            proof = consistency_proof(leaves, probe["size1"], hash="sha256")
            assert proof == b64_list(probe["proof"]), path


# ---- properties -----------------------------------------------------------------------------

leaf_lists = st.lists(st.binary(max_size=40), max_size=40)
hash_names = st.sampled_from(HASHES)


def flip_byte(data: bytes, position: int, mask: int) -> bytes:
    flipped = bytearray(data)
    flipped[position % len(flipped)] ^= mask
    return bytes(flipped)


@settings(max_examples=150, deadline=None)
@given(leaves=leaf_lists, name=hash_names)
def test_root_matches_the_recursive_definition(leaves: list[bytes], name: HashName) -> None:
    assert merkle_root(leaves, hash=name) == oracle_root(name, leaves)


@settings(max_examples=100, deadline=None)
@given(
    leaves=leaf_lists.filter(bool),
    name=hash_names,
    position=st.integers(min_value=0),
    mask=st.integers(min_value=1, max_value=255),
)
def test_every_inclusion_proof_verifies_and_any_flip_fails(
    leaves: list[bytes], name: HashName, position: int, mask: int
) -> None:
    size, root = len(leaves), merkle_root(leaves, hash=name)
    for index, leaf in enumerate(leaves):
        proof = inclusion_proof(leaves, index, hash=name)
        assert verify_inclusion(leaf, index, size, proof, root, hash=name)
        bad_root = flip_byte(root, position, mask)
        assert not verify_inclusion(leaf, index, size, proof, bad_root, hash=name)
        assert not verify_inclusion(leaf + b"\0", index, size, proof, root, hash=name)
        for k in range(len(proof)):
            tampered = [*proof]
            tampered[k] = flip_byte(proof[k], position, mask)
            assert not verify_inclusion(leaf, index, size, tampered, root, hash=name)
        if leaf:
            bad_leaf = flip_byte(leaf, position, mask)
            assert not verify_inclusion(bad_leaf, index, size, proof, root, hash=name)


@settings(max_examples=100, deadline=None)
@given(
    leaves=leaf_lists,
    name=hash_names,
    position=st.integers(min_value=0),
    mask=st.integers(min_value=1, max_value=255),
)
def test_every_consistency_proof_verifies_and_any_flip_fails(
    leaves: list[bytes], name: HashName, position: int, mask: int
) -> None:
    new_size, new_root = len(leaves), merkle_root(leaves, hash=name)
    for old_size in range(new_size + 1):
        old_root = merkle_root(leaves[:old_size], hash=name)
        proof = consistency_proof(leaves, old_size, hash=name)
        assert verify_consistency(old_size, new_size, old_root, new_root, proof, hash=name)
        bad_old = flip_byte(old_root, position, mask)
        assert not verify_consistency(old_size, new_size, bad_old, new_root, proof, hash=name)
        if old_size > 0 or new_size == 0:
            # From the empty tree nothing about the new root is checkable.
            bad_new = flip_byte(new_root, position, mask)
            assert not verify_consistency(old_size, new_size, old_root, bad_new, proof, hash=name)
        for k in range(len(proof)):
            tampered = [*proof]
            tampered[k] = flip_byte(proof[k], position, mask)
            assert not verify_consistency(
                old_size, new_size, old_root, new_root, tampered, hash=name
            )


@settings(max_examples=50, deadline=None)
@given(leaves=leaf_lists, extra=st.lists(st.binary(max_size=40), max_size=20), name=hash_names)
def test_a_rewritten_history_is_not_consistent(
    leaves: list[bytes], extra: list[bytes], name: HashName
) -> None:
    if not leaves:
        return
    old_root = merkle_root(leaves, hash=name)
    rewritten = [leaves[0] + b"!", *leaves[1:], *extra]
    proof = consistency_proof(rewritten, len(leaves), hash=name)
    assert not verify_consistency(
        len(leaves), len(rewritten), old_root, merkle_root(rewritten, hash=name), proof, hash=name
    )


# ---- edge cases -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", HASHES)
def test_index_out_of_range(name: HashName) -> None:
    leaves = [b"a", b"b", b"c"]
    root = merkle_root(leaves, hash=name)
    for index in (3, 4, 2**64, -1):
        with pytest.raises(ValueError):
            inclusion_proof(leaves, index, hash=name)
        assert not verify_inclusion(b"a", index, 3, [], root, hash=name)
    assert not verify_inclusion(b"a", 0, 2**64, [], root, hash=name)
    assert not verify_inclusion(b"a", 0, -3, [], root, hash=name)
    with pytest.raises(ValueError):
        inclusion_proof([], 0, hash=name)
    for old_size in (4, -1, 2**64):
        with pytest.raises(ValueError):
            consistency_proof(leaves, old_size, hash=name)
    assert not verify_consistency(-1, 3, root, root, [], hash=name)
    assert not verify_consistency(3, 2**64, root, root, [], hash=name)


@pytest.mark.parametrize("name", HASHES)
def test_malformed_proofs_are_rejected(name: HashName) -> None:
    leaves = [bytes([i]) for i in range(11)]
    root = merkle_root(leaves, hash=name)
    proof = inclusion_proof(leaves, 6, hash=name)
    assert verify_inclusion(leaves[6], 6, 11, proof, root, hash=name)
    assert not verify_inclusion(leaves[6], 6, 11, proof[:-1], root, hash=name)
    assert not verify_inclusion(leaves[6], 6, 11, [*proof, root], root, hash=name)
    assert not verify_inclusion(leaves[6], 6, 11, [proof[0][:31], *proof[1:]], root, hash=name)
    assert not verify_inclusion(leaves[6], 6, 11, [proof[0] + b"\0", *proof[1:]], root, hash=name)
    assert not verify_inclusion(leaves[6], 6, 11, proof, root[:31], hash=name)
    assert not verify_inclusion(leaves[6], 6, 11, [b""] * 64, root, hash=name)
    assert not verify_inclusion(leaves[6], 6, 11, [root] * 200, root, hash=name)
    old_root = merkle_root(leaves[:5], hash=name)
    proof = consistency_proof(leaves, 5, hash=name)
    assert verify_consistency(5, 11, old_root, root, proof, hash=name)
    assert not verify_consistency(5, 11, old_root, root, [], hash=name)
    assert not verify_consistency(5, 11, old_root, root, proof[:-1], hash=name)
    assert not verify_consistency(5, 11, old_root, root, [*proof, root], hash=name)
    assert not verify_consistency(5, 11, old_root, root, [proof[0][:1], *proof[1:]], hash=name)
    assert not verify_consistency(5, 11, old_root[:16], root, proof, hash=name)
    assert not verify_consistency(11, 5, root, old_root, proof, hash=name)


@pytest.mark.parametrize("name", HASHES)
def test_empty_and_equal_size_consistency(name: HashName) -> None:
    empty = merkle_root([], hash=name)
    one = merkle_root([b"x"], hash=name)
    assert verify_consistency(0, 0, empty, empty, [], hash=name)
    assert not verify_consistency(0, 0, one, one, [], hash=name)
    assert verify_consistency(0, 1, empty, one, [], hash=name)
    assert not verify_consistency(0, 1, one, one, [], hash=name)
    assert not verify_consistency(0, 1, empty, one, [empty], hash=name)
    assert verify_consistency(1, 1, one, one, [], hash=name)
    assert not verify_consistency(1, 1, one, empty, [], hash=name)
    assert not verify_consistency(1, 1, one, one, [one], hash=name)
    assert consistency_proof([b"x"], 0, hash=name) == []
    assert consistency_proof([b"x"], 1, hash=name) == []


def test_unknown_hash_names_are_value_errors() -> None:
    calls: list[Callable[[], object]] = [
        lambda: merkle_root([b"a"], hash="md5"),  # type: ignore[arg-type]
        lambda: inclusion_proof([b"a"], 0, hash="SHA256"),  # type: ignore[arg-type]
        lambda: verify_inclusion(b"a", 0, 1, [], b"", hash="blake2b"),  # type: ignore[arg-type]
        lambda: consistency_proof([b"a"], 0, hash=""),  # type: ignore[arg-type]
        lambda: verify_consistency(0, 0, b"", b"", [], hash="x"),  # type: ignore[arg-type]
        lambda: IncrementalMerkleTree(hash="sha512"),  # type: ignore[arg-type]
        lambda: IncrementalMerkleTree.from_state(0, [], hash="sha1"),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(ValueError, match="unknown Merkle hash"):
            call()


def test_a_single_bytes_object_is_not_a_list_of_leaves() -> None:
    with pytest.raises(TypeError):
        merkle_root(b"abc")  # type: ignore[arg-type]


# ---- incremental tree -------------------------------------------------------------------------


@pytest.mark.parametrize("name", HASHES)
def test_incremental_tree_agrees_with_merkle_root_for_every_size(name: HashName) -> None:
    leaves = [f"entry {i}".encode() for i in range(300)]
    tree = IncrementalMerkleTree(hash=name)
    for size in range(301):
        assert tree.size == size
        assert len(tree.frontier()) == size.bit_count()
        assert tree.root() == merkle_root(leaves[:size], hash=name)
        if size < 300:
            assert tree.append(leaves[size]) == size


@settings(max_examples=100, deadline=None)
@given(first=leaf_lists, second=leaf_lists, name=hash_names)
def test_restored_tree_continues_like_the_original(
    first: list[bytes], second: list[bytes], name: HashName
) -> None:
    tree = IncrementalMerkleTree(hash=name)
    for leaf in first:
        tree.append(leaf)
    restored = IncrementalMerkleTree.from_state(tree.size, tree.frontier(), hash=name)
    assert restored.size == len(first)
    assert restored.root() == tree.root()
    for leaf in second:
        assert restored.append(leaf) == tree.append(leaf)
    assert restored.root() == tree.root() == oracle_root(name, first + second)


def test_incremental_tree_defaults_to_blake3_and_takes_buffers() -> None:
    tree = IncrementalMerkleTree()
    tree.append(bytearray(b"a"))  # type: ignore[arg-type]
    tree.append(memoryview(b"b"))  # type: ignore[arg-type]
    assert tree.root() == merkle_root([b"a", b"b"])
    assert IncrementalMerkleTree().root() == merkle_root([])


def test_from_state_validates_the_frontier() -> None:
    node = bytes(32)
    assert IncrementalMerkleTree.from_state(0, []).size == 0
    assert IncrementalMerkleTree.from_state(5, [node, node]).size == 5
    assert IncrementalMerkleTree.from_state(2**64 - 1, [node] * 64).size == 2**64 - 1
    for size, frontier in [
        (0, [node]),
        (5, [node]),
        (5, [node] * 3),
        (4, []),
        (1, [node[:31]]),
        (1, [node + b"\0"]),
        (-1, []),
        (2**64, [node]),
    ]:
        with pytest.raises(ValueError):
            IncrementalMerkleTree.from_state(size, frontier)


def test_a_full_tree_refuses_to_grow() -> None:
    tree = IncrementalMerkleTree.from_state(2**64 - 1, [bytes(32)] * 64)
    with pytest.raises(ValueError):
        tree.append(b"one too many")
    assert tree.size == 2**64 - 1
