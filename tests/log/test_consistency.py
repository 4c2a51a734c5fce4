"""Consistency proofs built from a stored frontier equal RFC 9162 proofs over every leaf."""

from __future__ import annotations

from agentledger import _core
from agentledger import log as wslog


def _state(leaves: list[bytes]) -> wslog.LogState:
    tree = _core.IncrementalMerkleTree()
    for leaf in leaves:
        tree.append(leaf)
    return wslog.LogState(tree.size, tuple(tree.frontier()))


def test_a_frontier_proof_equals_the_full_proof_for_every_size_pair() -> None:
    leaves = [f"leaf {i}".encode() for i in range(40)]
    for new_size in range(1, 41):
        for old_size in range(0, new_size + 1):
            old = _state(leaves[:old_size])
            proof = wslog.consistency_proof(old, leaves[old_size:new_size])
            assert proof == _core.consistency_proof(leaves[:new_size], old_size), (
                old_size,
                new_size,
            )
            assert _core.verify_consistency(
                old_size,
                new_size,
                _core.merkle_root(leaves[:old_size]),
                _core.merkle_root(leaves[:new_size]),
                proof,
            )


def test_log_extend_reports_the_first_leaf_out_of_sequence() -> None:
    rows = [(i, "r", i, bytes(32)) for i in range(6)]
    del rows[3]
    state, _, gap = wslog.extend(wslog.EMPTY, rows)
    assert gap == (3, 4)
    assert state.size == 3
