"""A day file's prefix leaf is hashed once for the seals and the checkpoints
(``seal.PrefixLeaves``), and never taken for another file's bytes."""

from __future__ import annotations

import pytest

from agentledger.bernstein import seal
from agentledger.bernstein.seal import PrefixLeaves, leaf_digest


def test_a_prefix_is_the_leaf_of_its_own_bytes() -> None:
    leaves = PrefixLeaves()
    day = b'{"a": 1}\n{"b": 2}\n'
    other = b'{"a": 9}\n{"b": 2}\n'  # the same length, other bytes: another file read
    assert leaves(day, 9) == leaf_digest(day[:9])
    assert leaves(other, 9) == leaf_digest(other[:9]) != leaves(day, 9)
    assert leaves(day, len(day)) == leaf_digest(day)
    assert leaves(day, 0) == leaf_digest(b"")


def test_each_prefix_is_hashed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed: list[bytes] = []

    def counting(data: bytes) -> str:
        hashed.append(bytes(data))
        return leaf_digest(data)

    monkeypatch.setattr(seal, "leaf_digest", counting)
    leaves = PrefixLeaves()
    day = b"x" * 100
    for _ in range(3):
        leaves(day, 40)
        leaves(day, 100)
    assert hashed == [day[:40], day]
