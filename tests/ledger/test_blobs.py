"""The content-addressed blob store."""

from __future__ import annotations

import hashlib
from pathlib import Path

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Ledger
from agentledger.cas import CHUNK_SIZE, names_in, names_in_reference, reachable
from agentledger.errors import InvalidInput

from ..bernstein.bernstein_testkit import SHAPES


def test_put_names_bytes_by_their_blake3_and_is_idempotent(ledger: Ledger) -> None:
    digest = ledger.blobs.put(b"page bytes")
    assert digest == "blake3:" + blake3.blake3(b"page bytes").hexdigest()
    assert ledger.blobs.put(b"page bytes") == digest
    assert ledger.blobs.get(digest) == b"page bytes"
    assert ledger.blobs.digests() == [digest]


def test_sha256_names_are_accepted_for_imported_data(ledger: Ledger) -> None:
    digest = ledger.blobs.put(b"imported", algorithm="sha256")
    assert digest == "sha256:" + hashlib.sha256(b"imported").hexdigest()
    assert ledger.blobs.get(digest) == b"imported"


def test_get_of_an_absent_blob_is_a_key_error(ledger: Ledger) -> None:
    with pytest.raises(KeyError):
        ledger.blobs.get("blake3:" + "0" * 64)


def test_malformed_digests_are_refused(ledger: Ledger) -> None:
    with pytest.raises(InvalidInput):
        ledger.blobs.get("md5:abc")


def test_empty_blob_round_trips(ledger: Ledger) -> None:
    digest = ledger.blobs.put(b"")
    assert ledger.blobs.get(digest) == b""
    assert ledger.verify().code == 0


def test_large_files_are_streamed_in_chunks(ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    pattern = bytes(range(256)) * 4096  # 1 MiB
    with path.open("wb") as handle:
        for i in range(5):
            handle.write(pattern[i:] + pattern[:i])
        handle.write(b"tail")
    digest = ledger.blobs.put_file(path)
    assert digest == "blake3:" + blake3.blake3(path.read_bytes()).hexdigest()
    chunks = list(ledger.blobs.iter_chunks(digest))
    assert len(chunks) == 6 and all(len(c) == CHUNK_SIZE for c in chunks[:-1])
    assert ledger.blobs.size(digest) == path.stat().st_size
    assert ledger.verify().code == 0


def test_put_many_stores_each_blob_once_and_names_them_in_the_order_given(
    ledger: Ledger,
) -> None:
    big = bytes(range(256)) * (CHUNK_SIZE // 128) + b"tail"  # two chunks and a tail
    already = ledger.blobs.put(b"stored before", algorithm="sha256")
    items = [b"a page", b"", big, b"stored before", b"a page", b"view"]
    names = ledger.blobs.put_many(items, algorithm="sha256")
    assert names == ["sha256:" + hashlib.sha256(bytes(item)).hexdigest() for item in items]
    assert names[3] == already
    for name, item in zip(names, items, strict=True):
        assert ledger.blobs.get(name) == bytes(item)
        assert ledger.blobs.size(name) == len(item)
    chunks = list(ledger.blobs.iter_chunks(names[2]))
    assert [len(c) for c in chunks] == [CHUNK_SIZE, CHUNK_SIZE, 4]
    assert sorted(ledger.blobs.digests()) == sorted(set(names))
    rows = ledger.db.rows("SELECT count(*) FROM blob_chunks")[0][0]
    assert rows == 1 + 1 + 3 + 1 + 1  # each blob's chunks once: the empty one has one
    assert ledger.verify().code == 0


def test_put_many_of_bytes_a_file_holds_chunks_them_as_put_file_does(
    ledger: Ledger, tmp_path: Path
) -> None:
    data = bytes(range(7, 250)) * (3 * CHUNK_SIZE // 243)
    path = tmp_path / "whole.bin"
    path.write_bytes(data)
    streamed = ledger.blobs.put_file(path)
    chunks = list(ledger.blobs.iter_chunks(streamed))
    with Ledger.open(tmp_path / "other.db") as other:
        [held] = other.blobs.put_many([data])
        assert held == streamed
        assert list(other.blobs.iter_chunks(held)) == chunks


HEX = st.binary(min_size=60, max_size=68).map(
    lambda b: bytes(b"0123456789abcdef"[x % 16] for x in b)
)
# The digits from some point on in upper case: a near miss.
SHOUTED = st.tuples(HEX, st.integers(0, 59)).map(
    lambda pair: pair[0][: pair[1]] + pair[0][pair[1] :].upper()
)
NAME_PARTS = st.sampled_from(
    [b"blake3:", b"sha256:", b"sha256", b"blake3", b"sha257:", b":", b"\x00", b"xblake3:"]
) | st.tuples(
    st.sampled_from([b"blake3:", b"sha256:", b"sha256-", b"sha256:blake3:"]), HEX | SHOUTED
).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(st.lists(NAME_PARTS | st.binary(max_size=8), max_size=12), st.integers(0, 3000))
def test_the_names_a_blob_holds_are_the_patterns_matches(parts: list[bytes], pad: int) -> None:
    """``names_in`` (Rust) finds exactly what ``names_in_reference`` (the pattern's
    matches) finds, in short bytes and in bytes long enough to be scanned without the GIL."""
    data = b"".join(parts)
    for held in (data, b"." * pad + data + b"-" * pad):
        assert names_in(held) == names_in_reference(held)


def test_the_names_the_fixtures_blobs_hold_are_the_patterns_matches() -> None:
    """Real stored bytes (bernstein's reports, receipts, manifests, journals)."""
    files = [p for p in sorted(SHAPES.glob(".sdd/**/*")) if p.is_file()]
    assert len(files) > 50
    named = 0
    for path in files:
        data = path.read_bytes()
        assert names_in(data) == names_in_reference(data)
        named += len(names_in(data))
    assert named > 100


def test_blobs_are_reached_through_the_names_other_blobs_hold(ledger: Ledger) -> None:
    """``reachable``: the stored seeds, what they name, transitively; an absent or unnamed
    blob is not reached, and a blob naming itself or a reached one ends the walk."""
    leaf = ledger.blobs.put(b"no names here")
    middle = ledger.blobs.put(f"-> {leaf} and {'sha256:' + '0' * 64}".encode())
    top = ledger.blobs.put(f"{middle}{middle}".encode())
    ledger.blobs.put(b"never named")
    absent = "blake3:" + "1" * 64
    with ledger.db.snapshot() as conn:
        assert reachable(conn, [top, absent]) == {top, middle, leaf}
        assert reachable(conn, [leaf]) == {leaf}
        assert reachable(conn, []) == set()


def test_a_blob_is_never_stored_from_a_file_of_an_open_ledger(tmp_path: Path) -> None:
    """Opening and closing it would drop the process's SQLite locks (sqlite_files.py)."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.run("r").append("step", {"n": 1})
        for given in (path, Path(f"{path}-wal")):
            with pytest.raises(InvalidInput, match="a file of a ledger this process has open"):
                ledger.blobs.put_file(given)
        assert ledger.db.scalar("SELECT count(*) FROM blobs") == 0
    elsewhere = tmp_path / "copy.db"
    elsewhere.write_bytes(path.read_bytes())
    with Ledger.open(path) as ledger:
        assert ledger.blobs.put_file(elsewhere).startswith("blake3:")  # not open: stored
