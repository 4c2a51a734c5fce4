"""Numbered schema migrations, applied in order inside one write transaction.

The schema version is SQLite's ``user_version``; ``application_id`` marks the file as a
ledger, so a foreign SQLite file is refused before anything is written to it. A version
may also have a Python step (``PYTHON_STEPS``), run after its SQL in the same transaction,
for what SQL cannot compute (the log's tiles are hashes of the entries).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

import apsw

from agentledger import _core, log_upgrade, tiles
from agentledger.errors import LedgerError

APPLICATION_ID = 0x41474C44  # "AGLD"


def migration_scripts() -> list[tuple[int, str]]:
    """``(version, sql)`` for every ``schema/NNN_*.sql`` file, in order."""
    folder = resources.files("agentledger.storage") / "schema"
    scripts = []
    for item in folder.iterdir():
        if item.name.endswith(".sql"):
            scripts.append((int(item.name.split("_", 1)[0]), item.read_text("utf-8")))
    return sorted(scripts)


SCHEMA_VERSION = max(version for version, _ in migration_scripts())
"""The newest schema this version of agentledger knows: the highest numbered script."""


def _tiles_from_entries(conn: apsw.Connection) -> None:
    """Schema 5: the tiles of the log as the entries number it, then ``backfill`` dropped.

    The leaves schema 3 numbered and every later one are folded in, in leaf order; they
    must be 0..n-1. What this rebuilds is checked like any log: the signed checkpoints
    must still match it, and this install signs nothing before verifying it.
    """
    size, frontier, hashes = 0, [], []
    for leaf, run_id, seq, digest in conn.execute(
        "SELECT leaf, run_id, seq, hash FROM entries WHERE leaf IS NOT NULL ORDER BY leaf"
    ):
        if leaf != size:
            raise LedgerError(
                f"cannot upgrade the ledger: its entries are not leaves 0..n-1 of the log "
                f"(leaf {leaf} where {size} was due); `agentledger verify --all` shows why",
                code="log-broken",
            )
        data = _core.log_leaf(run_id, seq, digest)
        hashes.append(_core.merkle_root([data]))
        size += 1
    if hashes:
        tiles.append(conn, 0, b"".join(hashes))
        frontier = tiles.TileReader(conn).frontier(size)
    conn.execute(
        "UPDATE log_state SET size = ?, frontier = ? WHERE id = 1", (size, b"".join(frontier))
    )
    conn.execute("ALTER TABLE log_state DROP COLUMN backfill")


PYTHON_STEPS: dict[int, Callable[[apsw.Connection], None]] = {
    5: _tiles_from_entries,
    log_upgrade.C2SP_SCHEMA: log_upgrade.rebuild_tree,
}


def migrate(conn: apsw.Connection, current: int, target: int = SCHEMA_VERSION) -> None:
    """Bring a ledger from schema ``current`` to ``target`` (caller holds the lock)."""
    for version, sql in migration_scripts():
        if current < version <= target:
            conn.execute(sql)
            step = PYTHON_STEPS.get(version)
            if step is not None:
                step(conn)
            conn.execute(f"PRAGMA user_version = {int(version)}")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
