"""The workspace log: every journal entry of every run is a leaf of one append-only Merkle log.

A run's hash chain shows that a run was not edited; it cannot show that a run, or a run's
last entries, were deleted. The log can: leaf ``i`` is the ``i``-th entry appended to the
workspace, whatever its run, its leaf the log-leaf document ``log_leaf(run, seq, entry
hash)`` (docs/FORMAT.md, "The workspace log"), in an RFC 6962 tree with SHA-256 (a C2SP
log). Signed checkpoints (checkpoint.py) commit to its size and root, so deleting any
entry changes what the log recomputes to.

The state kept is the tree's frontier: one 32-byte root per set bit of the size, so an
append costs O(log n) whatever the log's size. It lives in ``log_state`` and is updated in
the same transaction as the entries it covers; the entry's ``leaf`` column says where it is.
The whole tree is kept too, as tiles (``tiles.py``), for proofs and earlier roots.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from agentledger import _core, tiles
from agentledger.errors import LedgerError
from agentledger.storage import native

HASH_LEN = 32
# A row whose key is not of its column's type (an edited file) is no leaf: read as a
# gap (the b-tree check names the cell). Its hash is read as stored, as the journal pass
# reads it, so an edited one is another leaf, never a crash.
_LEAF_COLUMNS = (
    "SELECT leaf, run_id, seq, coalesce(CAST(hash AS BLOB), x'') FROM entries "
    "WHERE typeof(leaf) = 'integer' AND typeof(run_id) = 'text' AND typeof(seq) = 'integer' "
)
LEAF_ROWS = _LEAF_COLUMNS + "AND leaf >= ? ORDER BY leaf"
LEAF_RANGE = _LEAF_COLUMNS + "AND leaf >= ? AND leaf < ? ORDER BY leaf"
BATCH_ROWS = 16_384

LeafRow = tuple[int, str, int, bytes]
"""``(leaf, run_id, seq, entry hash)``, as the log reads an entry."""


def fetch(conn: apsw.Connection, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
    """Every row of a query, typed loosely: the callers know their columns. Stepped with
    the GIL held (``native.rows``)."""
    return native.rows(conn, sql, params)


@dataclass(frozen=True, slots=True)
class LogState:
    """A log of ``size`` leaves, restorable from its frontier."""

    size: int
    frontier: tuple[bytes, ...]

    @property
    def root(self) -> bytes:
        return _core.IncrementalMerkleTree.from_state(self.size, list(self.frontier)).root()


EMPTY = LogState(0, ())


def pack_frontier(frontier: Iterable[bytes]) -> bytes:
    return b"".join(frontier)


def unpack_frontier(blob: bytes) -> list[bytes]:
    if len(blob) % HASH_LEN:
        raise LedgerError("the stored log frontier is not a list of hashes", code="log-broken")
    return [bytes(blob[i : i + HASH_LEN]) for i in range(0, len(blob), HASH_LEN)]


def extend(
    state: LogState, rows: Sequence[LeafRow], jobs: int = 0
) -> tuple[LogState, bytes, tuple[int, int] | None]:
    """``state`` with ``rows`` appended (leaf order): ``(new state, root, gap)``.

    ``gap`` is ``(expected leaf, found leaf)`` at the first row out of sequence; the state
    then stops before that row.
    """
    size, frontier, root, gap = _core.log_extend(state.size, list(state.frontier), rows, jobs)
    return LogState(size, tuple(frontier)), root, gap


def read_state(conn: apsw.Connection) -> LogState:
    """The stored log state (the frontier as the last write left it)."""
    rows = fetch(conn, "SELECT size, frontier FROM log_state WHERE id = 1")
    if not rows:
        raise LedgerError("the workspace log's state row is missing", code="log-broken")
    size, frontier = rows[0]
    # An edited file can hold any type in any cell: a hint that does not read as one is
    # a broken log, never a crash (the b-tree check names the cell for verify).
    if type(size) is not int or size < 0 or not isinstance(frontier, bytes):
        raise LedgerError(
            "the workspace log's state row holds no size and frontier", code="log-broken"
        )
    return LogState(size, tuple(unpack_frontier(frontier)))


def _write_state(conn: apsw.Connection, state: LogState) -> None:
    native.execute(
        conn,
        "UPDATE log_state SET size = ?, frontier = ? WHERE id = 1",
        (state.size, pack_frontier(state.frontier)),
    )


def current_state(conn: apsw.Connection) -> LogState:
    """The log state as the last write left it (its frontier; the tiles hold the rest)."""
    return read_state(conn)


def is_archive(conn: apsw.Connection) -> bool:
    return bool(fetch(conn, "SELECT 1 FROM ledger_meta WHERE key = 'archive'"))


MAX_LEAVES = 1 << 63
"""The ``leaf`` column is a signed 64-bit integer."""


def check_room(size: int, count: int) -> None:
    """``count`` more leaves fit after ``size`` (the ``leaf`` column is a signed int64)."""
    if size + count > MAX_LEAVES:
        raise LedgerError(
            f"the workspace log cannot grow past leaf {MAX_LEAVES - 1}", code="log-full"
        )


def finish_append(
    conn: apsw.Connection, old_size: int, state: LogState, leaf_hashes: bytes
) -> None:
    """Store the state the appended entries made and their tiles, inside the write
    transaction that inserted them. Both are hints for later readers: what is signed is
    the proven state the caller extended (``proven.py``)."""
    tiles.append(conn, old_size, leaf_hashes)
    _write_state(conn, state)


def leaf_data(rows: Iterable[LeafRow]) -> list[bytes]:
    """The leaves (log-leaf documents) of rows, in the order given."""
    return [_core.log_leaf(run_id, seq, digest) for _, run_id, seq, digest in rows]


def state_at(conn: apsw.Connection, size: int) -> tuple[LogState, tuple[int, int] | None]:
    """Recompute the log state of the first ``size`` leaves from the entries."""
    state = EMPTY
    while state.size < size:
        rows = fetch(conn, LEAF_RANGE + " LIMIT ?", (state.size, size, BATCH_ROWS))
        if not rows:
            return state, (state.size, -1)
        state, _, gap = extend(state, rows)
        if gap is not None:
            return state, gap
    return state, None


def legacy_root(conn: apsw.Connection, size: int) -> bytes | None:
    """The root of the BLAKE3 tree (the log before schema 6) over the first ``size``
    entries in leaf order, or None when the entries are not leaves ``0..size-1``.
    O(size): it is read only to check what vouched for the old tree."""
    state = EMPTY
    root = _core.merkle_root([], hash="blake3")
    while state.size < size:
        rows = fetch(conn, LEAF_RANGE + " LIMIT ?", (state.size, size, BATCH_ROWS))
        if not rows:
            return None
        size_now, frontier, root, gap = _core.log_extend(
            state.size, list(state.frontier), rows, legacy=True
        )
        if gap is not None:
            return None
        state = LogState(size_now, tuple(frontier))
    return root


def names_root(conn: apsw.Connection, size: int, root: bytes, named: object) -> bool:
    """Whether ``named``, the ``log_root`` a signed record states (a prune receipt), names
    the log's first ``size`` entries, whose root is ``root``: ``sha256:<hex>``; or
    ``blake3:<hex>`` of the BLAKE3 tree for a record signed before schema 6, recomputed
    from the entries. (``blake3:`` + the SHA-256 root is accepted as well: the label GC's
    receipts kept after schema 6 until they say ``sha256:``.)"""
    if named in ("sha256:" + root.hex(), "blake3:" + root.hex()):
        return True
    if not isinstance(named, str) or not named.startswith("blake3:"):
        return False
    old = legacy_root(conn, size)
    return old is not None and named == "blake3:" + old.hex()
