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

from agentledger import log_upgrade

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


def _drop_backfill(conn: apsw.Connection) -> None:
    """Schema 5: ``log_state.backfill`` dropped. Schema 5 also filled the tiles from the
    entries; schema 6 rebuilds them as a C2SP tree (``log_upgrade.rebuild_tree``), and
    every upgrade goes on to it, so they are not computed twice."""
    conn.execute("ALTER TABLE log_state DROP COLUMN backfill")


PYTHON_STEPS: dict[int, Callable[[apsw.Connection], None]] = {
    5: _drop_backfill,
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
