"""An imported bernstein run as bernstein wrote it: its journal rows and stages, read back
from the ledger for ``runs`` and ``show`` (nothing here verifies; ``verify`` does).

The journal is the imported blob, byte for byte, read as verify reads it (bernstein's
tolerant reader, in Rust: ``rust/bernstein/src/journal/lines.rs``): lines end as Python's
universal newlines end them, blank ones are skipped, and a line the reader discards (not
UTF-8, not JSON, not an object) is shown as such, under the physical line number (from 0)
that verify's ``bernstein.line.discarded`` finding names. A stage's stored report (the
artifact in ``.sdd/cas``) and its observations are *present* when the imported store
holds their bytes.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentledger import _core
from agentledger.bernstein.format import ACTIVITY_EVENT, cas_path

CHAIN_FIELDS = ("ts", "elapsed_s", "index", "event", "prev_hash", "payload_hash", "event_hash")

JOURNAL_OF_RUN = (
    "SELECT r.path, f.digest, CAST(c.data AS BLOB) FROM bernstein_runs AS r "
    "JOIN bernstein_files AS f ON f.path = r.path "
    "LEFT JOIN blob_chunks AS c ON c.digest = f.digest "
    "WHERE r.run_id = ? ORDER BY c.idx"
)
STORED = (
    "SELECT 1 FROM bernstein_files AS f JOIN blobs AS b ON b.digest = f.digest WHERE f.path = ?"
)


@dataclass
class JournalSummary:
    """What ``runs`` lists for an imported run."""

    events: int = 0
    activities: int = 0
    discarded: int = 0
    last_ts: str | None = None


@dataclass
class ImportedRun:
    run_id: str
    path: str
    journal_digest: str | None
    held: bool
    """Whether the ledger holds the journal's bytes."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "source": "bernstein",
            "path": self.path,
            "journal": self.journal_digest,
            "journal_held": self.held,
            "events": sum(1 for row in self.rows if row["parsed"]),
            "discarded_lines": [row["line"] for row in self.rows if not row["parsed"]],
            "rows": self.rows,
            "stages": self.stages,
        }


def unix_time_text(value: object) -> str | None:
    """bernstein's ``ts`` (unix seconds) as ISO 8601 UTC; ``None`` if it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        moment = datetime.fromtimestamp(float(value), tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse(text: str) -> dict[str, Any] | None:
    try:
        row = json.loads(text)
    except ValueError:  # bernstein's reader discards the line (and so do we, visibly)
        return None
    except RecursionError:  # nested past Python's stack: no row either, not a crash
        return None
    return row if isinstance(row, dict) else None


def _kept_row(data: bytes, start: int, end: int) -> dict[str, Any] | None:
    """The object on a line the reader kept (its bytes are UTF-8); ``None`` only where
    Python's own stack cannot hold its nesting."""
    return _parse(data[start:end].decode("utf-8").strip())


def summarize(data: bytes) -> JournalSummary:
    """Event and activity counts and the last event's time, counted in Rust
    (``_core.bernstein_journal_summary``) as verify's reader reads the lines."""
    events, activities, discarded, last = _core.bernstein_journal_summary(data)
    summary = JournalSummary(events=events, activities=activities, discarded=discarded)
    if last is not None:
        row = _kept_row(data, *last)
        summary.last_ts = unix_time_text(row.get("ts")) if row is not None else None
    return summary


def read_lines_reference(data: bytes) -> list[tuple[int, dict[str, Any] | None]]:
    """bernstein's tolerant reader (``load_events``) in plain Python, as its code reads a
    journal: ``(physical line, its object or None if discarded)`` for every line but the
    blank ones. The reference of the Rust reader behind ``summarize`` and ``show``."""
    read: list[tuple[int, dict[str, Any] | None]] = []
    with io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape") as text:
        for number, raw in enumerate(text):
            line = raw.strip()
            if not line:
                continue
            try:
                line.encode("utf-8")
            except UnicodeEncodeError:  # bytes that are not UTF-8 came back as surrogates
                read.append((number, None))
                continue
            read.append((number, _parse(line)))
    return read


def summarize_reference(data: bytes) -> JournalSummary:
    """``summarize`` in plain Python, on ``read_lines_reference``."""
    summary = JournalSummary()
    last: dict[str, Any] | None = None
    for _, row in read_lines_reference(data):
        if row is None:
            summary.discarded += 1
            continue
        summary.events += 1
        last = row
        if row.get("event") == ACTIVITY_EVENT:
            summary.activities += 1
    if last is not None:
        summary.last_ts = unix_time_text(last.get("ts"))
    return summary


def journal_of(conn: Any, run_id: str) -> tuple[str, str | None, bytes | None] | None:
    """``(path, digest, bytes or None if not held)``; ``None`` if not an imported run."""
    rows = conn.execute(JOURNAL_OF_RUN, (run_id,)).fetchall()
    if not rows:
        return None
    path, digest = str(rows[0][0]), rows[0][1]
    if digest is not None and not isinstance(digest, str):
        return path, None, None  # a name that is not text names no blob (a damaged row)
    chunks = [bytes(row[2]) for row in rows if row[2] is not None]
    return path, digest, b"".join(chunks) if chunks or digest is None else None


def _stored(conn: Any, content_hash: object) -> bool:
    if not isinstance(content_hash, str):
        return False
    path = cas_path(content_hash)
    return path is not None and bool(conn.execute(STORED, (path,)).fetchall())


def _stage(conn: Any, line: int, row: dict[str, Any]) -> dict[str, Any]:
    observations = row.get("observations")
    observations = observations if isinstance(observations, list) else []
    hashes = [o.get("content_hash") for o in observations if isinstance(o, dict)]
    return {
        "line": line,
        "index": row.get("index"),
        "stage_id": row.get("stage_id"),
        "kind": row.get("kind"),
        "terminal_state": row.get("terminal_state"),
        "reason_code": row.get("reason_code"),
        "artifact_hash": row.get("artifact_hash"),
        "report": "present" if _stored(conn, row.get("artifact_hash")) else "absent",
        "evidence_set_hash": row.get("evidence_set_hash"),
        "evidence": {
            "observations": len(observations),
            "present": sum(1 for h in hashes if _stored(conn, h)),
        },
    }


def read_imported_run(conn: Any, run_id: str) -> ImportedRun | None:
    """Every journal row (chain fields, then the payload) and every stage of the run."""
    found = journal_of(conn, run_id)
    if found is None:
        return None
    path, digest, data = found
    run = ImportedRun(run_id, path, digest, data is not None)
    journal = data or b""
    for number, kept, start, end in _core.bernstein_journal_lines(journal):
        row = _kept_row(journal, start, end) if kept else None
        if row is None:
            text = journal[start:end].decode("utf-8", "replace").strip()[:200]
            if kept:  # an event, nested too deeply for Python's stack: its fields unread
                fields = ("index", "event", "ts", "prev_hash", "payload_hash", "event_hash")
                unread = dict.fromkeys((*fields, "payload"))
                run.rows.append({"line": number, "parsed": True, **unread, "text": text})
            else:
                run.rows.append({"line": number, "parsed": False, "text": text})
            continue
        payload = {k: v for k, v in row.items() if k not in CHAIN_FIELDS}
        run.rows.append(
            {
                "line": number,
                "parsed": True,
                "index": row.get("index"),
                "event": row.get("event"),
                "ts": unix_time_text(row.get("ts")),
                "prev_hash": row.get("prev_hash"),
                "payload_hash": row.get("payload_hash"),
                "event_hash": row.get("event_hash"),
                "payload": payload,
            }
        )
        if row.get("event") == ACTIVITY_EVENT:
            run.stages.append(_stage(conn, number, row))
    return run


__all__ = [
    "ImportedRun",
    "JournalSummary",
    "read_imported_run",
    "read_lines_reference",
    "summarize",
    "summarize_reference",
    "unix_time_text",
]
