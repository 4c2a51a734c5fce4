"""Numbered schema migrations, applied in order inside one write transaction.

The schema version is SQLite's ``user_version``; ``application_id`` marks the file as a
ledger, so a foreign SQLite file is refused before anything is written to it.
"""

from __future__ import annotations

from importlib import resources

import apsw

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


def migrate(conn: apsw.Connection, current: int) -> None:
    """Bring a ledger from schema ``current`` to ``SCHEMA_VERSION`` (caller holds the lock)."""
    for version, sql in migration_scripts():
        if version > current:
            conn.execute(sql)
            conn.execute(f"PRAGMA user_version = {int(version)}")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
