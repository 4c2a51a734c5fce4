"""Each run's last verify status: a cache outside the ledger (verify never writes the
ledger) and outside the key folder (verify never creates one).

``agentledger verify`` records, per run it verified, the verdict and the run's head hash
before it started in ``<cache>/verify-status/<ledger id>.db``, where ``<cache>`` is
``$AGENTLEDGER_CACHE``, else ``$XDG_CACHE_HOME/agentledger``, else
``~/.cache/agentledger``. ``agentledger runs`` shows a recorded status only while the
run's head hash is still the recorded one; otherwise, and when nothing was recorded, the
run is ``unverified``. It is a note of what the last verify said, not evidence: deleting
the cache loses nothing but the notes, and only a new verify says what holds now.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from agentledger.errors import ExitCode
from agentledger.ids import utc_timestamp

if TYPE_CHECKING:
    from agentledger.ledger import Ledger
    from agentledger.verify import VerifyReport

STATUSES = ("clean", "diverged", "unverified")

SCHEMA = """
CREATE TABLE IF NOT EXISTS run_status (
    run_id      TEXT PRIMARY KEY,
    head_hash   BLOB,           -- the run's head hash when it was verified
    status      TEXT NOT NULL,  -- 'clean' or 'diverged'
    verified_at TEXT NOT NULL,  -- UTC, when verify finished
    mode        TEXT NOT NULL   -- 'strict' or 'compat-bernstein'
) STRICT, WITHOUT ROWID;
"""


def cache_home() -> Path:
    if os.environ.get("AGENTLEDGER_CACHE"):
        return Path(os.environ["AGENTLEDGER_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "agentledger"
    return Path.home() / ".cache" / "agentledger"


def status_path(ledger_id: str) -> Path:
    return cache_home() / "verify-status" / f"{ledger_id}.db"


def record(
    path: Path, verdicts: Iterable[tuple[str, bytes | None, str]], verified_at: str, mode: str
) -> None:
    """Remember ``(run_id, head_hash, status)`` for each verified run (one transaction)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    conn = apsw.Connection(str(path))
    try:
        os.chmod(path, 0o600)
        conn.execute("PRAGMA busy_timeout = 5000")
        with conn:
            conn.execute(SCHEMA)
            conn.executemany(
                "INSERT INTO run_status (run_id, head_hash, status, verified_at, mode) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                "head_hash = excluded.head_hash, status = excluded.status, "
                "verified_at = excluded.verified_at, mode = excluded.mode",
                ((run_id, head, status, verified_at, mode) for run_id, head, status in verdicts),
            )
    finally:
        conn.close()


def readable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.R_OK)


def heads(ledger: Ledger) -> dict[str, bytes | None]:
    """Every run's head hash, read *before* verify: a run appended to while verify ran is
    then recorded with its older head, so it reads as unverified (never wrongly clean)."""
    return dict(ledger.db.rows("SELECT run_id, head_hash FROM runs"))


def remember(
    ledger: Ledger, report: VerifyReport, mode: str, heads: dict[str, bytes | None]
) -> str | None:
    """Record each verified run's verdict (found runs only); a note if it could not be."""
    found = {v.run_id: v for v in report.runs if v.code != ExitCode.NOT_FOUND}
    if not found or not ledger.id:
        return None
    verdicts = (
        (run_id, heads.get(run_id), "clean" if verdict.ok else "diverged")
        for run_id, verdict in found.items()
        if run_id in heads
    )
    try:
        record(status_path(ledger.id), verdicts, utc_timestamp(), mode)
    except (OSError, apsw.Error) as exc:
        return f"could not record the runs' verify status: {exc}"
    return None


__all__ = ["STATUSES", "cache_home", "heads", "readable", "record", "remember", "status_path"]
