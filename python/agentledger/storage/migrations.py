"""Numbered schema migrations, applied in order inside one write transaction.

The schema version is SQLite's ``user_version``; ``application_id`` marks the file as a
ledger, so a foreign SQLite file is refused before anything is written to it. A version
may also have a Python step (``PYTHON_STEPS``), run after its SQL in the same transaction,
for what SQL cannot compute (the log's tiles are hashes of the entries).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw

from agentledger import _core, tiles
from agentledger.errors import LedgerError

APPLICATION_ID = 0x41474C44  # "AGLD"


def migration_scripts() -> list[tuple[int, str]]:
    """``(version, sql)`` for every ``schema/NNN_*.sql`` file, in order."""
    # The package is installed as files (never zipped): importlib.resources, and the
    # zipfile and tempfile machinery it loads, would cost every command's start-up.
    folder = Path(__file__).parent / "schema"
    scripts = []
    for item in folder.iterdir():
        if item.name.endswith(".sql"):
            scripts.append((int(item.name.split("_", 1)[0]), item.read_text("utf-8")))
    return sorted(scripts)


SCHEMA_VERSION = max(version for version, _ in migration_scripts())
"""The newest schema this version of agentledger knows: the highest numbered script."""


def _drop_backfill(conn: apsw.Connection) -> None:
    """Schema 5: ``log_state.backfill`` dropped. Schema 5 also filled the tiles from the
    entries; schema 6 rebuilds them as a C2SP tree (``rebuild_c2sp_tree``), and
    every upgrade goes on to it, so they are not computed twice."""
    conn.execute("ALTER TABLE log_state DROP COLUMN backfill")


C2SP_SCHEMA = 6
"""The first schema whose workspace log is a C2SP log (RFC 6962 with SHA-256)."""

_LEAVES_FROM = "SELECT leaf, run_id, seq, hash FROM entries WHERE leaf >= ? ORDER BY leaf LIMIT ?"
_BATCH_ROWS = 16_384

DROPPED_CHECKPOINTS: dict[str, list[str]] = {}
"""The notes a migration dropped, per file, until ``sign_upgraded`` of this process reads
them (a trusted one may vouch for entries past this install's memory)."""


ALTERED = (
    "the file was altered after it was written, and this version verifies only its own "
    "schema (the agentledger that wrote the file can say what differs)"
)
"""Why an old ledger whose log does not rebuild stays as it is: verify, which would name
what differs, refuses an old schema (it never migrates), so the refusal must not send the
user there."""


def rebuild_c2sp_tree(conn: apsw.Connection) -> None:
    """Schema 6's Python step: the tiles and state of the SHA-256 tree, from the entries.

    The leaves must be 0..n-1 (as every earlier schema numbered them); the checkpoints of
    the old tree are kept aside for ``log_upgrade.sign_upgraded`` and removed from the file.
    """
    notes = [str(row[0]) for row in conn.execute("SELECT note FROM checkpoints ORDER BY id")]
    if notes:
        DROPPED_CHECKPOINTS[conn.filename] = notes
    conn.execute("DELETE FROM checkpoints")
    conn.execute("DELETE FROM log_tiles")
    size = 0
    while True:
        rows = conn.execute(_LEAVES_FROM, (size, _BATCH_ROWS)).fetchall()
        if not rows:
            break
        hashes = []
        for leaf, run_id, seq, digest in rows:
            if leaf != size:
                raise LedgerError(
                    f"cannot upgrade the ledger: its entries are not leaves 0..n-1 of the log "
                    f"(leaf {leaf} where {size} was due): {ALTERED}",
                    code="log-broken",
                )
            hashes.append(tiles.leaf_hash(_core.log_leaf(run_id, seq, bytes(digest))))
            size += 1
        tiles.append(conn, size - len(hashes), b"".join(hashes))
    unlogged = conn.execute("SELECT count(*) FROM entries WHERE leaf IS NULL").fetchall()[0][0]
    if unlogged:
        raise LedgerError(
            f"cannot upgrade the ledger: {unlogged} entries are in no leaf of the log: {ALTERED}",
            code="log-broken",
        )
    frontier = tiles.TileReader(conn).frontier(size) if size else []
    conn.execute(
        "UPDATE log_state SET size = ?, frontier = ? WHERE id = 1", (size, b"".join(frontier))
    )


PYTHON_STEPS: dict[int, Callable[[apsw.Connection], None]] = {
    5: _drop_backfill,
    C2SP_SCHEMA: rebuild_c2sp_tree,
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
