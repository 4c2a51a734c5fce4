"""The result contract's hashes: what they cover and what they deliberately do not."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import ActivityResult, Observation, _core

captured = st.lists(st.binary(max_size=64), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(captured, st.randoms(use_true_random=False))
def test_the_evidence_set_ignores_order_duplicates_and_refs(pages: list[bytes], rng) -> None:
    observations = [Observation.capture("page", f"u{i}", p) for i, p in enumerate(pages)]
    shuffled = [*observations, observations[0]]
    rng.shuffle(shuffled)
    renamed = [Observation(o.kind, "elsewhere", o.content_hash) for o in shuffled]
    first = ActivityResult.build(kind="research", artifact=None, observations=observations)
    second = ActivityResult.build(kind="research", artifact=None, observations=renamed)
    assert first.evidence_set_hash == second.evidence_set_hash
    expected = _core.evidence_set_hash(sorted({_core.blake3_hex(p) for p in pages}))
    assert first.evidence_set_hash == expected


@settings(max_examples=60, deadline=None)
@given(captured, st.binary(min_size=1, max_size=8))
def test_one_changed_byte_changes_the_evidence_set(pages: list[bytes], extra: bytes) -> None:
    observations = [Observation.capture("page", "u", p) for p in pages]
    changed = [Observation.capture("page", "u", pages[0] + extra), *observations[1:]]
    if _core.blake3_hex(pages[0] + extra) in {o.content_hash for o in observations}:
        return  # the changed page equals another captured page: the same set
    first = ActivityResult.build(kind="research", artifact=None, observations=observations)
    second = ActivityResult.build(kind="research", artifact=None, observations=changed)
    assert first.evidence_set_hash != second.evidence_set_hash


def test_the_artifact_hash_is_over_canonical_bytes() -> None:
    one = ActivityResult.build(kind="coding", artifact={"b": 1, "a": [1.0, "é"]})
    two = ActivityResult.build(kind="coding", artifact={"a": [1, "é"], "b": 1.0})
    assert one.artifact_hash == two.artifact_hash
    assert one.artifact_hash == _core.blake3_hex('{"a":[1,"é"],"b":1}'.encode())
