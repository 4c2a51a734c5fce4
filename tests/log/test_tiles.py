"""The tiles against the tree computed straight from the leaf hashes, for appends of every
batch shape: roots at every earlier size, proofs, and the tiles' own check."""

from __future__ import annotations

import random

import apsw
import pytest

from agentledger import _core, tiles
from agentledger.errors import LedgerError
from agentledger.storage import native
from agentledger.storage.migrations import migrate

LEAVES = 66_000  # past 256 * 256: three levels


def _fresh() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    with conn:
        migrate(conn, 0)
    return conn


@pytest.fixture(scope="module")
def grown() -> tuple[apsw.Connection, bytes]:
    """Tiles grown by appends of random batch sizes (1, a few, a tile, more than a tile)."""
    rnd = random.Random(7)
    hashes = b"".join(rnd.randbytes(32) for _ in range(LEAVES))
    conn = _fresh()
    size = 0
    while size < LEAVES:
        count = min(LEAVES - size, rnd.choice([1, 1, 2, 3, 255, 256, 257, 700]))
        with conn:
            tiles.append(conn, size, hashes[size * 32 : (size + count) * 32])
        size += count
    return conn, hashes


def test_appends_in_any_batches_store_the_same_tiles_as_one_append(
    grown: tuple[apsw.Connection, bytes],
) -> None:
    conn, hashes = grown
    whole = _fresh()
    tiles.append(whole, 0, hashes)
    query = "SELECT level, idx, hashes FROM log_tiles ORDER BY level, idx"
    assert list(conn.execute(query)) == list(whole.execute(query))
    assert tiles.check(conn, LEAVES) == []


@pytest.mark.parametrize("rows", [tiles.apsw_rows, native.rows])
@pytest.mark.parametrize("page_rows", [1, 2, 3, 260, 261, 262, None])
def test_the_tiles_read_a_page_at_a_time_are_all_the_tiles_in_order(
    grown: tuple[apsw.Connection, bytes], page_rows: int | None, rows: tiles.Rows
) -> None:
    conn, _ = grown
    query = "SELECT level, idx, hashes FROM log_tiles ORDER BY level, idx"
    everything = conn.execute(query).fetchall()
    assert len(everything) == 261  # 258 + 2 + 1: past one default page
    pages = {} if page_rows is None else {"page_rows": page_rows}
    assert list(tiles.stored(conn, rows, **pages)) == everything


@pytest.mark.parametrize("size", [1, 2, 255, 256, 257, 65_535, 65_536, 65_537, LEAVES])
def test_roots_and_proofs_at_every_size_match_the_tree_of_the_leaf_hashes(
    grown: tuple[apsw.Connection, bytes], size: int
) -> None:
    conn, hashes = grown
    reader = tiles.TileReader(conn)
    root = _core.merkle_root_of_hashes(hashes[: size * 32])
    assert reader.root(size) == root
    for old in (1, size // 3, size - 1):
        if 0 < old < size:
            proof = reader.consistency_proof(old, size)
            old_root = _core.merkle_root_of_hashes(hashes[: old * 32])
            assert _core.verify_consistency(old, size, old_root, root, proof)
    for index in {0, size // 2, size - 1}:
        proof = reader.inclusion_proof(index, size)
        leaf = hashes[index * 32 : index * 32 + 32]
        assert _climb(leaf, index, size, proof) == root


def _climb(leaf_hash: bytes, index: int, size: int, proof: list[bytes]) -> bytes | None:
    """RFC 9162 §2.1.3.2: the root an inclusion proof leads to from a leaf hash."""
    fn, sn, node = index, size - 1, leaf_hash
    for sibling in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            node = _core.merkle_root_of_hashes(sibling + node)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            node = _core.merkle_root_of_hashes(node + sibling)
        fn, sn = fn >> 1, sn >> 1
    return node if sn == 0 else None


def test_the_check_finds_a_changed_hash_a_cut_tile_and_a_stray_level(
    grown: tuple[apsw.Connection, bytes],
) -> None:
    conn, _ = grown
    assert tiles.check(conn, LEAVES - 1) != []  # one hash too many for that size
    copy = _fresh()
    copy.execute("DELETE FROM log_tiles")
    for level, index, data in conn.execute("SELECT level, idx, hashes FROM log_tiles"):
        copy.execute("INSERT INTO log_tiles VALUES (?, ?, ?)", (level, index, data))
    copy.execute(
        "UPDATE log_tiles SET hashes = CAST(zeroblob(1) || substr(hashes, 2) AS BLOB) "
        "WHERE level = 1 AND idx = 0"
    )
    assert tiles.check(copy, LEAVES) != []
    with pytest.raises(LedgerError):
        tiles.append(copy, LEAVES + 5, b"\x01" * 32)  # not where the tiles end


def test_a_tile_at_a_negative_level_is_a_problem_of_the_check_not_a_crash() -> None:
    """A row added at level -1 (it sorts before level 0): the check shifted by a negative
    count and verify --all, fsck and archive exited 70."""
    conn = _fresh()
    with conn:
        tiles.append(conn, 0, random.Random(1).randbytes(3 * 32))
        conn.execute("INSERT INTO log_tiles SELECT -1, idx, hashes FROM log_tiles")
    assert tiles.check(conn, 3) == ["level -1 of the tiles should not exist (or 0 is missing)"]


def test_a_damaged_tile_is_log_broken_and_names_what_is_wrong(
    grown: tuple[apsw.Connection, bytes],
) -> None:
    conn, _ = grown
    copy = _fresh()
    for level, index, data in conn.execute("SELECT level, idx, hashes FROM log_tiles"):
        copy.execute("INSERT INTO log_tiles VALUES (?, ?, ?)", (level, index, data))
    copy.execute("UPDATE log_tiles SET hashes = substr(hashes, 1, 100) WHERE level = 1 AND idx = 0")
    with pytest.raises(LedgerError) as cut:
        tiles.TileReader(copy).root(65_535)  # its largest subtree is half of tile 1/0
    assert (cut.value.code, cut.value.message) == (
        "log-broken",
        "the workspace log's tiles are damaged: tile 1/0 is 100 bytes, not 8192",
    )
    with pytest.raises(LedgerError) as past:
        tiles.TileReader(copy).inclusion_proof(LEAVES - 1, LEAVES + 1)
    assert past.value.message.endswith(f"level 0 has no hash {LEAVES}")
    copy.execute("DELETE FROM log_tiles WHERE level = 2")
    with pytest.raises(LedgerError, match="tile 2/0 is 0 bytes"):
        tiles.TileReader(copy).frontier(LEAVES)
    assert tiles.TileReader(copy).frontier(255) == tiles.TileReader(conn).frontier(255)


def test_what_reading_a_tile_raises_reaches_the_caller_unchanged() -> None:
    conn = _fresh()
    tiles.append(conn, 0, b"\x01" * 32 * 3)
    reader = tiles.TileReader(conn)
    conn.close()
    with pytest.raises(apsw.ConnectionClosedError):
        reader.root(3)
