"""Each run's last verify status: a cache outside the ledger (verify never writes the
ledger) and outside the key folder (verify never creates one).

``agentledger verify`` records, per run it verified, the run's status (the report's
``status_of``) and its head hash before verify started, in
``<cache>/verify-status/<ledger id>-<file key>.db``, where ``<cache>`` is
``$AGENTLEDGER_CACHE``, else ``$XDG_CACHE_HOME/agentledger``, else ``~/.cache/agentledger``,
and the file key names the ledger file (its resolved path): a backup or a copy elsewhere
has notes of its own. The notes also hold the workspace log's state (size and frontier,
hence its root) the file had when verified; ``agentledger runs`` shows a recorded status
only while the file's log still holds that log as its first leaves (the same state, or
appends since: its tiles give the recorded root at the recorded size) and the run's head
hash is the recorded one; otherwise, and when nothing was recorded, the run is
``unverified``. Two copies whose
contents differ never read each other's notes. It is a note of what the last verify said,
not evidence: deleting the cache loses nothing but the notes, and only a new verify says
what holds now.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from agentledger import tiles
from agentledger.errors import AgentLedgerError, ExitCode, LedgerError
from agentledger.ids import utc_timestamp
from agentledger.log import LogState, pack_frontier, read_state, unpack_frontier
from agentledger.signer_memory import LEDGER_ID

if TYPE_CHECKING:
    from agentledger.ledger import Ledger
    from agentledger.verify import VerifyReport

STATUSES = ("clean", "diverged", "unverified")

SCHEMA = """
CREATE TABLE IF NOT EXISTS verified_log (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    size        INTEGER NOT NULL,  -- the workspace log's size when verified
    frontier    BLOB NOT NULL      -- its frontier (which gives its root)
) STRICT;
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


def status_path(ledger_id: str, ledger_path: Path) -> Path | None:
    """The notes of one ledger file: its id and its resolved path (a copy has its own).
    None for an id ``init`` never makes: the id is read from the file, and one holding
    ``/`` or ``..`` would place the notes anywhere (verify would create them there)."""
    if not LEDGER_ID.fullmatch(ledger_id):
        return None
    where = hashlib.sha256(os.fsencode(ledger_path.resolve())).hexdigest()[:16]
    return cache_home() / "verify-status" / f"{ledger_id}-{where}.db"


@dataclass(frozen=True, slots=True)
class Before:
    """What the file held when verify started: each run's head, and the log's state."""

    heads: dict[str, bytes | None]
    log: LogState | None
    """None when the stored log state cannot be read (then nothing is recorded)."""


def record(
    path: Path,
    log: LogState,
    verdicts: Iterable[tuple[str, bytes | None, str]],
    verified_at: str,
    mode: str,
    extends: Callable[[LogState], bool],
) -> None:
    """Remember ``(run_id, head_hash, status)`` for each verified run (one transaction).

    Notes taken at a log that ``log`` does not extend (``extends``: whether the file's log
    holds that one as its first leaves) describe other contents, and are dropped."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    conn = apsw.Connection(str(path))
    try:
        os.chmod(path, 0o600)
        conn.execute("PRAGMA busy_timeout = 5000")
        with conn:
            conn.execute(SCHEMA)
            if not all(extends(known) for known in _verified_log(conn, "main")):
                conn.execute("DELETE FROM run_status")
            conn.execute(
                "INSERT OR REPLACE INTO verified_log (id, size, frontier) VALUES (1, ?, ?)",
                (log.size, pack_frontier(log.frontier)),
            )
            conn.executemany(
                "INSERT INTO run_status (run_id, head_hash, status, verified_at, mode) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                "head_hash = excluded.head_hash, status = excluded.status, "
                "verified_at = excluded.verified_at, mode = excluded.mode",
                ((run_id, head, status, verified_at, mode) for run_id, head, status in verdicts),
            )
    finally:
        conn.close()


def readable(path: Path | None) -> bool:
    return path is not None and path.is_file() and os.access(path, os.R_OK)


def current_log(conn: apsw.Connection) -> LogState | None:
    """The file's stored log state, or None when it cannot be read."""
    try:
        return read_state(conn)
    except (AgentLedgerError, apsw.Error):  # no log (an old schema) or a broken one
        return None


def before(ledger: Ledger) -> Before:
    """Every run's head hash and the log's state, read *before* verify: a run appended to
    while verify ran is then recorded with its older head (and the notes with the older
    log), so it reads as unverified (never wrongly clean)."""
    with ledger.db.snapshot() as conn:
        heads = dict(conn.execute("SELECT run_id, head_hash FROM runs").fetchall())
        return Before(heads, current_log(conn))


def remember(ledger: Ledger, report: VerifyReport, mode: str, seen: Before) -> str | None:
    """Record each verified run's status (found runs only); a note if it could not be."""
    found = [v.run_id for v in report.runs if v.code != ExitCode.NOT_FOUND]
    if not found or not ledger.id or seen.log is None:
        return None
    statuses = report.statuses()
    # A run created while verify ran is recorded with no head (its row's head differs: it
    # reads unverified); one whose row was removed has none either way (runs lists it).
    verdicts = ((run_id, seen.heads.get(run_id), statuses[run_id]) for run_id in found)
    log = seen.log

    def extends(known: LogState) -> bool:
        with ledger.db.snapshot() as conn:
            return log_extends(conn, log, known)

    path = status_path(ledger.id, ledger.path)
    if path is None:
        return None  # no notes for a file whose id is not one (verify reports it)
    try:
        record(path, log, verdicts, utc_timestamp(), mode, extends)
    except (OSError, apsw.Error) as exc:
        return f"could not record the runs' verify status: {exc}"
    return None


def _verified_log(conn: apsw.Connection, schema: str) -> list[LogState]:
    rows = conn.execute(f"SELECT size, frontier FROM {schema}.verified_log").fetchall()
    return [LogState(int(size), tuple(unpack_frontier(frontier))) for size, frontier in rows]


def log_extends(conn: apsw.Connection, log: LogState | None, known: LogState) -> bool:
    """Whether the file's log ``log`` holds the log ``known`` as its first leaves: the same
    state, or a longer log whose tree (its stored tiles) has ``known``'s root at its size."""
    if log is None or log.size < known.size:
        return False
    if log == known:
        return True
    try:
        return bool(tiles.TileReader(conn).root(known.size) == known.root)
    except (AgentLedgerError, apsw.Error, ValueError):
        return False


def notes_match(conn: apsw.Connection, log: LogState | None) -> bool:
    """Whether the notes attached to ``conn`` as ``run_status`` were taken at a log the
    file's log ``log`` extends (else they describe other contents: never shown)."""
    try:
        known = _verified_log(conn, "run_status")
    except (apsw.Error, LedgerError):  # notes from before they were keyed by the log
        return False
    return len(known) == 1 and log_extends(conn, log, known[0])


__all__ = [
    "STATUSES",
    "Before",
    "before",
    "cache_home",
    "current_log",
    "log_extends",
    "notes_match",
    "readable",
    "record",
    "remember",
    "status_path",
]
