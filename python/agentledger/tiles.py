"""The workspace log's tree, stored as tiles exactly as C2SP tlog-tiles cuts it (RFC 6962,
SHA-256, tile height 8).

Level 0 holds the leaf hashes, level ``L`` the roots of the perfect subtrees of ``256**L``
leaves. Each level is cut into tiles of 256 hashes; the right-most tile of a level is
partial (1..255 hashes) and grows in place, in the same transaction as the entries. A
stored hash is never changed, only appended after, so the prefix of a tile is that tile
at an earlier size: the tree at *every* earlier size is in the tiles, and any node,
root, inclusion or consistency proof is O(log n) tile reads (``TileReader``).

This module writes and checks the tiles; the roots and proofs read from them are the Rust
core's (``_core.StoredTree``, which asks ``TileReader`` for each tile it has not read yet),
so the tree's arithmetic is written once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import apsw

from agentledger import _core
from agentledger.errors import LedgerError

HASH_LEN = 32
TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
TILE_BYTES = TILE_WIDTH * HASH_LEN
EMPTY_SLOT = bytes(HASH_LEN)
"""A free slot of an edge tile (no hash is 32 zero bytes)."""

_Read = TypeVar("_Read")

_READ = "SELECT hashes FROM log_tiles WHERE level = ? AND idx = ?"


def leaf_hash(leaf: bytes) -> bytes:
    """``H(0x00 || leaf)``: a tree of one leaf has its leaf hash as root."""
    return _core.merkle_root([leaf])


def hashes_at(size: int, level: int) -> int:
    """How many hashes level ``level`` holds in a tree of ``size`` leaves."""
    return size >> (TILE_HEIGHT * level)


def _broken(why: str) -> LedgerError:
    return LedgerError(f"the workspace log's tiles are damaged: {why}", code="log-broken")


class TileReader:
    """The stored tree, read through one connection (tiles and nodes cached per reader:
    keep one only while the tiles do not change). Damaged tiles raise
    ``LedgerError(code="log-broken")``."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._tree = _core.StoredTree()

    def hashes(self, level: int, start: int, count: int) -> bytes:
        """``count`` consecutive level-``level`` hashes from ``start`` (within one tile)."""
        return self._read(self._tree.hashes, level, start, count)

    def frontier(self, size: int) -> list[bytes]:
        """The perfect subtrees' roots of the tree of ``size`` leaves, largest first."""
        return self._read(self._tree.frontier, size)

    def root(self, size: int) -> bytes:
        return self._read(self._tree.root, size)

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """RFC 9162 §2.1.3.1 PATH(index, D[0:size]), lowest level first."""
        if not 0 <= index < size:
            raise ValueError(f"leaf {index} is not in a tree of {size}")
        return self._read(self._tree.inclusion_proof, index, size)

    def inclusion_proofs_base64(self, indices: list[int], size: int) -> list[list[str]]:
        """``inclusion_proof`` of each leaf of ``indices``, each node in standard base64."""
        if not all(0 <= index < size for index in indices):
            raise ValueError(f"a leaf is not in a tree of {size}")
        try:
            return self._tree.inclusion_proofs_base64(self._tile, indices, size)
        except _core.LogDamagedError as exc:
            raise _broken(str(exc)) from None

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        """RFC 9162 §2.1.4.1 PROOF(old_size, D[0:new_size])."""
        if not 0 <= old_size <= new_size:
            raise ValueError(f"no consistency proof from {old_size} to {new_size}")
        return self._read(self._tree.consistency_proof, old_size, new_size)

    def _read(self, read: Callable[..., _Read], *args: int) -> _Read:
        try:
            return read(self._tile, *args)
        except _core.LogDamagedError as exc:
            raise _broken(str(exc)) from None

    def _tile(self, level: int, index: int) -> bytes | None:
        """A stored tile's bytes, as Rust asks for them (once per tile and reader)."""
        rows = self.conn.execute(_READ, (level, index)).fetchall()
        return bytes(rows[0][0]) if rows and isinstance(rows[0][0], bytes) else None


def append(conn: apsw.Connection, size: int, leaf_hashes: bytes) -> None:
    """Add leaves ``size..`` (their hashes, concatenated) to the tiles of a tree of ``size``.

    Runs inside the write transaction that adds the entries. A tile is stored at its full
    length, its free slots zero, so that a new hash is written into the edge tile in place
    (SQLite's incremental blob I/O: one page, no row rewritten); whole tiles are inserted.
    Every tile a level fills hands its root up to the next level.
    """
    level, start, new = 0, size, leaf_hashes
    while new:
        first_tile, offset = divmod(start, TILE_WIDTH)
        roots = []
        rest, number = new, first_tile
        if offset:
            room = TILE_BYTES - offset * HASH_LEN
            full = _write_into(conn, level, first_tile, offset, new[:room])
            if full is not None:  # the edge tile is full now: its root goes up a level
                roots.append(_core.merkle_root_of_hashes(full))
            rest, number = new[room:], first_tile + 1
        for at in range(0, len(rest), TILE_BYTES):
            tile = rest[at : at + TILE_BYTES]
            before = conn.total_changes()
            conn.execute(_INSERT, (level, number, tile.ljust(TILE_BYTES, b"\0")))
            if conn.total_changes() - before != 1:
                raise _broken(f"tile {level}/{number} was not stored")
            if len(tile) == TILE_BYTES:
                roots.append(_core.merkle_root_of_hashes(tile))
            number += 1
        # Hash k of the level above is the root of tile k of this one.
        level, start, new = level + 1, first_tile, b"".join(roots)


_INSERT = "INSERT INTO log_tiles (level, idx, hashes) VALUES (?, ?, ?)"


def _write_into(
    conn: apsw.Connection, level: int, index: int, offset: int, hashes: bytes
) -> bytes | None:
    """Write ``hashes`` into slots ``offset..`` of a stored tile; the whole tile when it is
    full then. The tile must end exactly where the log's state says (slot ``offset - 1``
    used, slot ``offset`` free)."""
    rows = conn.execute(_ROWID, (level, index)).fetchall()
    if not rows:
        raise _broken(f"tile {level}/{index} is missing")
    blob = conn.blob_open("main", "log_tiles", "hashes", rows[0][0], True)
    try:
        if blob.length() != TILE_BYTES:
            raise _broken(f"tile {level}/{index} is {blob.length()} bytes, not {TILE_BYTES}")
        blob.seek((offset - 1) * HASH_LEN)
        around = blob.read(2 * HASH_LEN)
        if around[:HASH_LEN] == EMPTY_SLOT or around[HASH_LEN:] != EMPTY_SLOT:
            raise _broken(f"tile {level}/{index} does not end at slot {offset}")
        blob.seek(offset * HASH_LEN)
        blob.write(hashes)
        if offset * HASH_LEN + len(hashes) < TILE_BYTES:
            return None
        blob.seek(0)
        return bytes(blob.read(TILE_BYTES))
    finally:
        blob.close()


_ROWID = "SELECT rowid FROM log_tiles WHERE level = ? AND idx = ?"
_PAGE = (
    "SELECT level, idx, hashes FROM log_tiles WHERE (level, idx) > (?, ?) "
    "ORDER BY level, idx LIMIT ?"
)


Rows = Callable[[apsw.Connection, str, tuple[int, ...]], list[tuple[Any, ...]]]
"""How a query's rows are read: apsw's ``fetchall`` (``apsw_rows``), or verify's
``storage.native.rows``, the same rows stepped with the GIL held (``storage`` sits above
this module)."""


def apsw_rows(conn: apsw.Connection, sql: str, params: tuple[int, ...]) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = conn.execute(sql, params).fetchall()
    return found


def stored(
    conn: apsw.Connection, rows: Rows = apsw_rows, page_rows: int = 256
) -> Iterator[tuple[int, int, bytes]]:
    """Every stored tile as ``(level, index, hashes)``, in (level, index) order, read
    ``page_rows`` tiles at a time by ``rows``: never all at once, nor one call per tile."""
    after = (-1, -1)
    while True:
        page = rows(conn, _PAGE, (*after, page_rows))
        yield from page
        if len(page) < page_rows:
            return
        after = (page[-1][0], page[-1][1])


def check(conn: apsw.Connection, size: int, rows: Rows = apsw_rows) -> list[str]:
    """Whether the stored tiles are exactly those of a tree of ``size`` leaves: each level
    holds the right number of hashes in consecutive full-length tiles, the free slots of
    its edge tile zero, and each hash above level 0 is the root of the full tile below it.
    Then the tiles' root is the root of the level-0 hashes, so a tiles' root equal to the
    entries' root means level 0 holds the entries' leaf hashes. One pass in (level, index)
    order, keeping only a level's tile roots, the tiles read by ``rows``. Empty when they
    are."""
    problems: list[str] = []
    by_level = itertools.groupby(stored(conn, rows), key=lambda row: int(row[0]))
    roots_below: list[bytes] = []
    want_level = 0
    for level, level_tiles in by_level:
        # Levels in order from 0: a level out of place (a negative one sorts first) has
        # no count of hashes to hold.
        want = hashes_at(size, level) if level == want_level else 0
        if not want:
            problems.append(
                f"level {level} of the tiles should not exist (or {want_level} is missing)"
            )
            return problems
        roots: list[bytes] = []
        expected_index = 0
        for _, index, data in level_tiles:
            data = bytes(data) if isinstance(data, bytes) else b""
            used = min(TILE_WIDTH, want - index * TILE_WIDTH) * HASH_LEN
            if index != expected_index or used <= 0:
                problems.append(f"tile {level}/{index} is out of place")
                return problems
            if len(data) != TILE_BYTES or any(data[used:]):
                problems.append(f"tile {level}/{index} is not {used // HASH_LEN} hashes and zeros")
                return problems
            if level and data[:used] != b"".join(
                roots_below[index * TILE_WIDTH : index * TILE_WIDTH + used // HASH_LEN]
            ):
                problems.append(f"a hash of tile {level}/{index} is not the root of its tile below")
                return problems
            if used == TILE_BYTES:
                roots.append(_core.merkle_root_of_hashes(data))
            expected_index += 1
        if expected_index * TILE_WIDTH < want:
            problems.append(
                f"level {level} holds fewer than the {want} hashes of a log of {size:,}"
            )
            return problems
        roots_below = roots
        want_level += 1
    if hashes_at(size, want_level):
        problems.append(f"level {want_level} of the tiles is missing")
    return problems
