"""An archive's source proofs checked in one Rust call (``_core.verify_inclusions``) give
what the reference ``verify/log.py:_source_proof_holds`` gives for each, wherever Rust
answers; it leaves to the reference only proofs not in their plain form. Proofs a real
tree makes, then damaged in every way the seal's JSON can hold."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import _core
from agentledger.notes import Checkpoint
from agentledger.verify.log import _source_proof_holds

LEAVES = [f"leaf {n}".encode() for n in range(13)]
SIZE = len(LEAVES)
ROOT = _core.merkle_root(LEAVES)
SOURCE = Checkpoint(ledger_id="0" * 32, size=SIZE, root=ROOT)


def b64(node: bytes) -> str:
    return base64.b64encode(node).decode()


def proofs() -> list[list[Any]]:
    return [[i, [b64(n) for n in _core.inclusion_proof(LEAVES, i)]] for i in range(SIZE)]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=5,
)


def damage(item: Any, how: str, value: Any, at: int) -> Any:
    """``item`` changed by ``how``; unchanged when an earlier change left nothing to change."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
        return item
    index, path = item
    node = path[at % len(path)] if path else "A"
    if not (type(index) is int and isinstance(node, str) and len(node) == 44):
        return item
    changed = {
        "none": item,
        "index": [value, path],
        "shifted index": [index + 1, path],
        "huge index": [2**64 + index, path],
        "negative index": [-1, path],
        "bool index": [True, path],
        "float index": [float(index), path],
        "node": [index, [value if p is node else p for p in path]],
        "one bit": [
            index,
            [b64(bytes([1]) + base64.b64decode(node)[1:]) if p is node else p for p in path],
        ],
        "trailing bits": [index, [node[:42] + "B=" if p is node else p for p in path]],
        "unpadded": [index, [node.rstrip("=") if p is node else p for p in path]],
        "whitespace": [index, [node + "\n" if p is node else p for p in path]],
        "short node": [index, [b64(bytes(31)) if p is node else p for p in path]],
        "long node": [index, [b64(bytes(33)) if p is node else p for p in path]],
        "dropped node": [index, path[:-1]],
        "extra node": [index, [*path, node]],
        "not a pair": [index],
        "triple": [index, path, value],
        "path": [index, value],
        "item": value,
    }
    return json.loads(json.dumps(changed[how]))  # the seal's own types only


HOWS = (
    "none",
    "index",
    "shifted index",
    "huge index",
    "negative index",
    "bool index",
    "float index",
    "node",
    "one bit",
    "trailing bits",
    "unpadded",
    "whitespace",
    "short node",
    "long node",
    "dropped node",
    "extra node",
    "not a pair",
    "triple",
    "path",
    "item",
)


def agree(items: list[Any], leaves: list[bytes]) -> None:
    """Rust's answer is the reference's wherever Rust answers, and Rust answers every
    proof in the plain form."""
    held = _core.verify_inclusions(leaves, items, SIZE, ROOT)
    for leaf, item, holds in zip(leaves, items, held, strict=True):
        reference = _source_proof_holds(SOURCE, leaf, item)
        if holds is not None:
            assert holds is reference, item
        else:
            assert not plain(item), item


def plain(item: Any) -> bool:
    """A pair of an int in ``0..2**64`` and str nodes, each the canonical base64 of 32
    bytes: what Rust always answers."""
    return (
        isinstance(item, list)
        and len(item) == 2
        and type(item[0]) is int
        and 0 <= item[0] < 2**64
        and isinstance(item[1], list)
        and all(
            isinstance(n, str)
            and n.isascii()
            and len(n) == 44
            and n.endswith("=")
            and "=" not in n[:43]
            and b64(base64.b64decode(n)) == n
            for n in item[1]
        )
    )


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("where", [0, 1, 6, SIZE - 1])
def test_each_damage_is_judged_as_the_reference_judges_it(where: int, how: str) -> None:
    for value in (None, 1, 2, "x", b64(bytes(32)), [1], [[1]], 1.5, True):
        for at in (0, 2):
            items: list[Any] = proofs()
            items[where] = damage(items[where], how, value, at)
            agree(items, list(LEAVES))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(
        st.tuples(st.integers(0, SIZE - 1), st.sampled_from(HOWS), JSON, st.integers(0, 5)),
        max_size=4,
    ),
    swap=st.booleans(),
)
def test_each_proof_holds_in_rust_as_in_the_reference(
    changes: list[tuple[int, str, Any, int]], swap: bool
) -> None:
    items: list[Any] = proofs()
    for where, how, value, at in changes:
        items[where] = damage(items[where], how, value, at)
    leaves = list(LEAVES)
    if swap:
        leaves[0], leaves[1] = leaves[1], leaves[0]
    agree(items, leaves)


def test_a_real_archives_proofs_are_all_answered_in_rust_and_hold() -> None:
    assert _core.verify_inclusions(LEAVES, proofs(), SIZE, ROOT) == [True] * SIZE
    assert _core.verify_inclusions(LEAVES, proofs(), SIZE, bytes(32)) == [False] * SIZE
