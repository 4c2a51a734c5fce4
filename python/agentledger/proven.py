"""Proven log states: the one thing the signer signs.

The ledger file is untrusted storage (docs/RELIABILITY.md, "The rule"): its tiles,
``log_state``, counts and indexes are hints that make honest work fast, never evidence.
A ``Proven`` is a workspace log state (size, frontier, root) this install can vouch for
*inside one transaction*, and it comes from exactly three doors:

- ``prove``, the proof checker: the state this install's memory holds (signed or verified
  clean, kept outside the file: ``signer_memory.py``), its frontier as remembered or read
  from the tiles and checked to hash to the remembered root; or that state extended by
  leaves recomputed from the entries the file holds past it, when a checkpoint signed by
  a trusted key commits to exactly the result (the memory lags the file after a crash,
  or when another process of this install has just appended);
- ``verified``, the verifier's door: the log a whole verify rebuilt from every entry in
  this transaction and found clean;
- ``Proven.extended``: a proven state extended by leaves this process computed itself
  (an append's own entries); ``archived``, likewise, for an archive this process builds
  from entries each proven in its source's proven log.

Every door names the transaction (``Database.transaction_serial``) it was proven in, and
the signer (``signing.py``) refuses a ``Proven`` of any other: nothing is signed from one
snapshot that was checked in another. Whatever the file's tiles say, a root signed is the
root of a frontier this install trusted, extended by leaves it recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import apsw

from agentledger import _core, tiles
from agentledger import log as wslog
from agentledger.errors import AgentLedgerError, Diverged
from agentledger.keys import KeyStore, resolve_trust
from agentledger.notes import newest_checkpoint
from agentledger.signer_memory import Remembered, SignerMemory
from agentledger.storage import Database

_MINT = object()
"""Held by this module's doors only: a ``Proven`` built anywhere else is refused."""


@dataclass(frozen=True, slots=True, eq=False)
class Proven:
    """A log state proven in one transaction of one ledger handle."""

    ledger_id: str
    size: int
    frontier: tuple[bytes, ...]
    how: str
    """Which door: "memory", "checkpoint", "verify" or "append" (for messages)."""
    db: Database = field(repr=False)
    serial: int = field(repr=False)
    mint: object = field(repr=False, default=None)

    def __post_init__(self) -> None:
        if self.mint is not _MINT:
            raise TypeError("a Proven is made only by proven.py's doors")

    @property
    def root(self) -> bytes:
        return wslog.LogState(self.size, self.frontier).root

    def current(self, db: Database) -> bool:
        """Whether it was proven in the transaction ``db`` is in now."""
        return db is self.db and db.conn.in_transaction and db.transaction_serial == self.serial

    def extended(self, size: int, frontier: tuple[bytes, ...]) -> Proven:
        """This state with leaves this process computed appended (``append_entries``)."""
        if size < self.size:
            raise ValueError("a log only grows")
        return _mint(self.db, self.ledger_id, size, frontier, "append")


def _mint(db: Database, ledger_id: str, size: int, frontier: tuple[bytes, ...], how: str) -> Proven:
    if not db.conn.in_transaction:
        raise ValueError("a state is proven inside a transaction")
    return Proven(ledger_id, size, tuple(frontier), how, db, db.transaction_serial, _MINT)


def empty(db: Database, ledger_id: str) -> Proven:
    """The empty log: nothing to vouch for (a ledger without entries)."""
    return _mint(db, ledger_id, 0, (), "memory")


def archived(db: Database, ledger_id: str, size: int, frontier: tuple[bytes, ...]) -> Proven:
    """An archive's door: the log of an archive this process is writing, rebuilt from the
    archive's own entries, each of which was proven (``includes``) in its source's proven
    log in the snapshot it was copied from (archive.py only)."""
    return _mint(db, ledger_id, size, frontier, "archive")


def verified(db: Database, ledger_id: str, size: int, frontier: tuple[bytes, ...]) -> Proven:
    """The verifier's door: the log a clean whole verify rebuilt in this transaction from
    every entry (verify/log.py only)."""
    return _mint(db, ledger_id, size, frontier, "verify")


class Unproven(Diverged):
    """The file's log cannot be proven to extend what this install vouched for."""

    def __init__(self, path: object, why: str) -> None:
        super().__init__(
            f"{path}: refusing to sign: {why}. Nothing was written; "
            "`agentledger verify --all` shows what differs",
            code="signing-refused",
        )


def remembered_frontier(conn: apsw.Connection, base: Remembered) -> tuple[bytes, ...] | None:
    """The frontier of a remembered state: its own, or the tiles' if it hashes to its root."""
    if base.frontier is not None:
        if wslog.LogState(base.size, base.frontier).root == base.root:
            return base.frontier
        return None
    try:
        frontier = tuple(tiles.TileReader(conn).frontier(base.size))
    except (AgentLedgerError, ValueError):
        return None
    return frontier if wslog.LogState(base.size, frontier).root == base.root else None


def prove(db: Database, ledger_id: str, memory: SignerMemory, keys: KeyStore) -> Proven | None:
    """The proof checker: the log state this install vouches for in this transaction.

    ``None`` when this install never vouched for the ledger (the caller then needs a
    clean whole verify: ``verified``). Raises ``Unproven`` when the file cannot be shown
    to extend what it vouched for (rolled back, rewritten, grown without a signature).
    """
    conn = db.conn
    path = db.path
    if not memory.usable:
        raise Unproven(path, f"the ledger id {ledger_id[:40]!r} is not one agentledger makes")
    base = memory.base()
    if base is None:
        if not conn.execute("SELECT 1 FROM entries LIMIT 1").fetchall():
            return empty(db, ledger_id)
        return None
    frontier = remembered_frontier(conn, base)
    if frontier is None:
        return None  # a record from before frontiers were kept, and tiles that disagree
    # How far the file says the log goes, and its frontier: hints, never signed, but one
    # that disagrees with what is proven means the file was edited: refuse early.
    stored = wslog.read_state(conn)
    hint = stored.size
    if hint < base.size:
        raise Unproven(
            path,
            f"its log holds {hint:,} entries, but this install signed or verified "
            f"{base.size:,} (the file was rolled back or entries deleted)",
        )
    if hint == base.size:
        state = _mint(db, ledger_id, base.size, frontier, "memory")
    else:
        state = _prove_growth(db, ledger_id, keys, base, frontier, hint)
    if stored.frontier != state.frontier:
        raise Unproven(
            path,
            f"its log of {state.size:,} entries is not the one this install signed or "
            "verified (entries rewritten)",
        )
    return state


def _prove_growth(
    db: Database,
    ledger_id: str,
    keys: KeyStore,
    base: Remembered,
    frontier: tuple[bytes, ...],
    hint: int,
) -> Proven:
    """Entries past ``base``: their leaves recomputed from the entries, and a trusted
    checkpoint committing to exactly the result."""
    conn = db.conn
    unsigned = Unproven(
        db.path,
        f"{hint - base.size:,} entries were added after the {base.size:,} this install "
        "vouched for, and no trusted checkpoint covers them",
    )
    state = wslog.LogState(base.size, frontier)
    while state.size < hint:
        rows = wslog.fetch(
            conn, wslog.LEAF_RANGE + " LIMIT ?", (state.size, hint, wslog.BATCH_ROWS)
        )
        if not rows:
            raise unsigned
        state, _, gap = wslog.extend(state, rows)
        if gap is not None:
            raise unsigned
    try:
        newest = newest_checkpoint(conn)
    except AgentLedgerError:  # a malformed note vouches for nothing
        raise unsigned from None
    if newest is None:
        raise unsigned
    note = newest.checkpoint
    # Of this ledger's own log: an archive's checkpoint keeps the ledger id but commits
    # to the archive's log (its entries in run order), which may fork the ledger's.
    expected = (ledger_id, "", state.size, state.root)
    if (note.ledger_id, note.archive, note.size, note.root) != expected:
        raise unsigned
    if note.signed_by(sorted(resolve_trust((), keys))) is None:
        raise unsigned
    return _mint(db, ledger_id, state.size, state.frontier, "checkpoint")


def root_at(conn: apsw.Connection, proven: Proven, size: int) -> bytes | None:
    """The root of the log's first ``size`` leaves, proven: read from the tiles and shown
    by an RFC 9162 consistency proof (from the tiles too) to lead to ``proven``'s root;
    None when the tiles cannot prove it."""
    if size == proven.size:
        return proven.root
    if not 0 < size < proven.size:
        return None
    try:
        reader = tiles.TileReader(conn)
        candidate = reader.root(size)
        proof = reader.consistency_proof(size, proven.size)
    except (AgentLedgerError, ValueError):
        return None
    if _core.verify_consistency(size, proven.size, candidate, proven.root, proof):
        return candidate
    return None


def includes(
    conn: apsw.Connection,
    proven: Proven,
    leaf: int,
    data: bytes,
    reader: tiles.TileReader | None = None,
) -> bool:
    """Whether leaf ``leaf`` of the proven log is ``data`` (an inclusion proof from the
    tiles, checked against the proven root; ``reader`` caches tiles across calls)."""
    if not isinstance(leaf, int) or not 0 <= leaf < proven.size:
        return False
    try:
        proof = (reader or tiles.TileReader(conn)).inclusion_proof(leaf, proven.size)
    except (AgentLedgerError, ValueError):
        return False
    return bool(_core.verify_inclusion(data, leaf, proven.size, proof, proven.root))
