"""Single-file audit archives: selected runs with everything needed to verify them offline.

An archive is a fresh ledger file holding copies of the selected runs' rows (entries byte
for byte, the blobs they reach, and the rows of other tables that belong to those runs),
its own workspace log over those entries and its own checkpoint signed with the install
key. It keeps the source ledger's id, because each run's genesis binds the run to it.

``ledger_meta`` key ``archive`` seals it: ``Ledger.open`` opens an archive read-only
unless asked otherwise, appends to an archive are refused, and verify reports an archive
whose log grew past the checkpoint it was sealed with. A reviewer needs only the file and
the public key: ``agentledger --ledger OUT.db verify --all --trust KEY``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from agentledger import _core, cas, notes, proven, signing, tiles
from agentledger import checkpoint as checkpoints
from agentledger import log as wslog
from agentledger.bookkeeping import BERNSTEIN_RUN
from agentledger.errors import AgentLedgerError, Diverged, InvalidInput, NotFound
from agentledger.ids import check_run_id, utc_timestamp
from agentledger.log import fetch
from agentledger.sqlite_files import companions
from agentledger.storage import Database, quote_identifier

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle
    from agentledger.proven import Proven

ARCHIVE_META = "archive"
# Tables the archive writes itself rather than copying.
OWN_TABLES = {
    "ledger_meta",
    "runs",
    "entries",
    "blobs",
    "blob_chunks",
    "log_state",
    "checkpoints",
    "log_tiles",
    "prune_receipts",
}


@dataclass(frozen=True, slots=True)
class ArchiveSummary:
    path: Path
    runs: list[str]
    entries: int
    blobs: int
    checkpoint: str

    def to_json(self) -> dict[str, Any]:
        return {
            "archive": str(self.path),
            "runs": self.runs,
            "entries": self.entries,
            "blobs": self.blobs,
            "checkpoint": self.checkpoint,
        }


def is_archive_file(path: Path) -> bool:
    """Whether ``path`` is a sealed archive, looked at read-only and only once its schema
    is known to be agentledger's (no SQL of the file runs before that)."""
    try:
        probe = Database.open(path, create=False, readonly=True)
    except AgentLedgerError:
        return False
    try:
        return not probe.schema_findings and bool(
            probe.rows("SELECT 1 FROM ledger_meta WHERE key = ?", (ARCHIVE_META,))
        )
    except AgentLedgerError:
        return False
    finally:
        # The real open that follows reports what is wrong with the file.
        with contextlib.suppress(AgentLedgerError):
            probe.close()


def _active_since(conn: apsw.Connection, run_id: str, threshold: datetime) -> bool:
    """Whether the run's last entry was written at or after ``threshold``. Read before the
    source is verified, from bytes anyone may have edited: a last entry whose time cannot
    be read (not JSON, no time, not an ISO time with its zone) keeps the run selected, so
    that the verify before anything is signed judges it (never a crash, never a run left
    out of the archive on the strength of a time nothing checked)."""
    rows = fetch(
        conn, "SELECT bytes FROM entries WHERE run_id = ? ORDER BY seq DESC LIMIT 1", (run_id,)
    )
    if not rows:
        return False
    try:
        body = json.loads(rows[0][0])
        ts = body.get("ts") if isinstance(body, dict) else None
        written = (
            None if not isinstance(ts, str) else datetime.fromisoformat(ts.replace("Z", "+00:00"))
        )
    except (ValueError, RecursionError, TypeError):
        written = None
    if written is None or written.tzinfo is None:
        return True
    return written >= threshold


def _parse_since(since: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"--since {since!r} is not an ISO date", code="invalid-date") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.now().astimezone().tzinfo)
    return parsed


def select_runs(ledger: LedgerHandle, run_ids: Iterable[str], since: str | None) -> list[str]:
    """The runs to archive, in the source's order: named ones (all exist), else every run;
    with ``since``, only runs with an entry at or after it."""
    wanted = [check_run_id(run_id) for run_id in dict.fromkeys(run_ids)]
    everything = ledger.runs()
    missing = [run_id for run_id in wanted if run_id not in set(everything)]
    if missing:
        raise NotFound(f"no run {missing[0]!r} in {ledger.path}")
    chosen = [run_id for run_id in everything if not wanted or run_id in set(wanted)]
    with ledger.db.snapshot() as conn:
        anchors = _anchoring_runs(conn, chosen)
    chosen += [run_id for run_id in everything if run_id in anchors and run_id not in chosen]
    if since is not None:
        threshold = _parse_since(since)
        with ledger.db.snapshot() as conn:
            chosen = [run_id for run_id in chosen if _active_since(conn, run_id, threshold)]
    return chosen


def _anchoring_runs(conn: apsw.Connection, runs: list[str]) -> set[str]:
    """Runs the selected ones cannot be verified without: the bookkeeping run that pins
    the manifests of imported bernstein runs."""
    imported = fetch(
        conn,
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'bernstein_runs'",
    )
    if not imported or BERNSTEIN_RUN in runs:
        return set()
    rows = fetch(
        conn,
        "SELECT 1 FROM bernstein_runs WHERE run_id IN (SELECT value FROM json_each(?)) LIMIT 1",
        (json.dumps(runs),),
    )
    return {BERNSTEIN_RUN} if rows else set()


def _columns(conn: apsw.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))]


def _copy_related_tables(
    source: apsw.Connection, target: apsw.Connection, runs: list[str]
) -> set[str]:
    """Copy the rows of every other table: those of the selected runs when the table has a
    ``run_id`` column, else all of it. Returns the digests those rows name."""
    named: set[str] = set()
    selected = json.dumps(runs)
    target_tables = {
        row[0] for row in target.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
    }
    for (table,) in fetch(
        source,
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name",
    ):
        if table in OWN_TABLES or table not in target_tables:
            continue
        columns = _columns(source, table)
        # Names read from the file are quoted, never pasted: a hostile table name is data.
        quoted = ", ".join(quote_identifier(c) for c in columns)
        sql = f"SELECT {quoted} FROM {quote_identifier(table)}"
        params: tuple[object, ...] = ()
        if "run_id" in columns:
            sql += " WHERE run_id IN (SELECT value FROM json_each(?))"
            params = (selected,)
        insert = (
            f"INSERT INTO {quote_identifier(table)} ({quoted}) "
            f"VALUES ({', '.join('?' for _ in columns)})"
        )
        rows = source.execute(sql, params).fetchall()
        target.executemany(insert, rows)
        for row in rows:
            for value in row:
                if isinstance(value, str | bytes):
                    raw = value.encode() if isinstance(value, str) else value
                    named |= cas.names_in(raw)
    return named


def write_archive(
    ledger: LedgerHandle, out: str | os.PathLike[str], runs: list[str]
) -> ArchiveSummary:
    """Write the archive of ``runs`` to ``out`` (which must not exist).

    Verify what you sign, in one snapshot: the source is verified whole and copied in the
    same read snapshot; every copied entry is then proven (an inclusion proof) in the log
    that verify rebuilt; the archive's own log is rebuilt from the archive file's entries;
    only that is signed, under the archive's own origin.
    """
    out = Path(out)
    if out.exists():
        raise InvalidInput(f"{out} already exists; an archive is always a new file", code="exists")
    if not runs:
        raise NotFound("no run to archive")
    # Written under a temporary name and linked to ``out`` only once sealed and closed: a
    # crash never leaves at ``out`` a partial file, which would open as an empty ledger.
    partial = out.with_name(f".{out.name}.{secrets.token_hex(6)}.partial")
    # Folders the open below creates for ``out``: a refused archive leaves none behind.
    made = [folder for folder in (out.parent, *out.parent.parents) if not folder.exists()]
    target_db = Database.open(partial, create=True)
    # An archive is read with a rollback journal; written in that mode from the start, its
    # pages go to the file once (through a WAL they were written twice: the log, then the
    # checkpoint into the file). Pages past a fresh file's end need no journal.
    target_db.conn.execute("PRAGMA journal_mode = DELETE")
    try:
        with ledger.db.snapshot() as source:
            source_state = signing.verify_before_signing(ledger, "archive (and sign) it")
            entries, blob_count, copied = _fill(source, ledger, target_db, runs)
            proofs = _prove_copies(ledger, source, source_state, copied)
            source_note = _source_checkpoint(ledger, source, source_state)
        archive_id = secrets.token_hex(16)
        with target_db.write() as target:
            state = _rebuilt(target_db, ledger.id, len(copied))
            signed = checkpoints.sign_archive(target, ledger, state, archive_id).checkpoint
            seal = {"archive": archive_id, "runs": len(runs), "sealed_at": utc_timestamp(),
                    "size": state.size, "source": str(ledger.path),
                    "source_checkpoint": source_note, "source_proofs": proofs,
                    "source_size": source_state.size}  # fmt: skip
            target.execute(
                "INSERT INTO ledger_meta (key, value) VALUES (?, ?)",
                (ARCHIVE_META, json.dumps(seal, sort_keys=True)),
            )
        target_db.close()
        try:
            os.link(partial, out)  # never replaces a file that appeared meanwhile
        except FileExistsError:
            raise InvalidInput(
                f"{out} already exists; an archive is always a new file", code="exists"
            ) from None
        _sync_folder(out.parent)
    except BaseException:
        target_db.close()
        for leftover in (partial, *companions(partial)):
            leftover.unlink(missing_ok=True)
        for folder in made:  # deepest first
            try:
                folder.rmdir()
            except OSError:  # something else was put there meanwhile: kept
                break
        raise
    partial.unlink()
    return ArchiveSummary(out, runs, entries, blob_count, signed.text())


def _prove_copies(
    ledger: LedgerHandle, source: apsw.Connection, state: Proven, copied: list[wslog.LeafRow]
) -> list[list[object]]:
    """Every copied entry is the leaf its source position holds in the proven source log;
    returns, in the archive's leaf order, each one's ``[source leaf, [base64 proof]]``,
    which the archive carries so a reviewer proves it in the source's checkpoint. The
    proofs are read from the tiles and checked against the proven root exactly as they
    are written (``_core.verify_inclusions``, all at once)."""
    # Only a position in the proven log has a proof; any other copy is refused below.
    logged = [
        (n, leaf)
        for n, (leaf, _, _, _) in enumerate(copied)
        if type(leaf) is int and 0 <= leaf < state.size
    ]
    try:
        paths = tiles.TileReader(source).inclusion_proofs_base64(
            [leaf for _, leaf in logged], state.size
        )
    except AgentLedgerError as exc:
        raise Diverged(
            f"{ledger.path}: refusing to archive: {exc.message}; nothing was written",
            code="signing-refused",
        ) from None
    proofs: list[list[object]] = [
        [leaf, path] for (_, leaf), path in zip(logged, paths, strict=True)
    ]
    data = [_core.log_leaf(*copied[n][1:]) for n, _ in logged]
    held = [False] * len(copied)
    for (n, _), holds in zip(
        logged, _core.verify_inclusions(data, proofs, state.size, state.root), strict=True
    ):
        held[n] = holds is True
    for (_, run_id, seq, _), holds in zip(copied, held, strict=True):
        if not holds:
            raise Diverged(
                f"{ledger.path}: refusing to archive: entry {seq} of run {run_id!r} is not "
                "the one the verified log holds; nothing was written",
                code="signing-refused",
            )
    return proofs


def _source_checkpoint(ledger: LedgerHandle, source: apsw.Connection, state: Proven) -> str:
    """The source's signed checkpoint of exactly the proven log the copies come from."""
    newest = notes.newest_checkpoint(source)
    if newest is not None and newest.checkpoint.archive:
        # Its entries are proven in its own source's checkpoint, which a second archive
        # could not carry: it would never verify.
        raise InvalidInput(
            f"{ledger.path} is an archive: archive the runs from its source ledger, or "
            "copy the file; nothing was written",
            code="archive-of-archive",
        )
    if newest is None or (newest.checkpoint.size, newest.checkpoint.root) != (
        state.size,
        state.root,
    ):
        raise Diverged(
            f"{ledger.path}: refusing to archive: its newest checkpoint is not the log that "
            "verify rebuilt; nothing was written",
            code="signing-refused",
        )
    return newest.checkpoint.text()


def _rebuilt(target_db: Database, ledger_id: str, size: int) -> Proven:
    """The archive's log, recomputed from the entries the archive file holds."""
    state, gap = wslog.state_at(target_db.conn, size)
    if gap is not None or state != wslog.read_state(target_db.conn):
        raise Diverged(
            "the archive's log does not rebuild from its entries", code="signing-refused"
        )
    return proven.archived(target_db, ledger_id, state.size, state.frontier)


def _sync_folder(folder: Path) -> None:
    """Make the new name durable (the file's own bytes were synced by SQLite)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fill(
    source: apsw.Connection, ledger: LedgerHandle, target_db: Database, runs: list[str]
) -> tuple[int, int, list[wslog.LeafRow]]:
    """Copy the runs from the ``source`` snapshot; returns the entries' and blobs' counts
    and each copied entry as the source logged it ``(source leaf, run, seq, hash)``."""
    state = wslog.EMPTY
    entries = 0
    copied: list[wslog.LeafRow] = []
    with target_db.write() as target:
        # Rows are copied table by table in name order: foreign keys are checked at commit.
        target.execute("PRAGMA defer_foreign_keys = ON")
        target.execute("UPDATE ledger_meta SET value = ? WHERE key = 'ledger_id'", (ledger.id,))
        seeds: set[str] = set()
        for ordinal, run_id in enumerate(runs, 1):
            head_seq, head_hash = source.execute(
                "SELECT head_seq, head_hash FROM runs WHERE run_id = ?", (run_id,)
            ).fetchall()[0]
            target.execute(
                "INSERT INTO runs (run_id, ordinal, head_seq, head_hash) VALUES (?, ?, ?, ?)",
                (run_id, ordinal, head_seq, head_hash),
            )
            rows = fetch(
                source,
                "SELECT run_id, seq, kind, hash, bytes, leaf FROM entries WHERE run_id = ? "
                "ORDER BY seq",
                (run_id,),
            )
            leaf_rows = [(state.size + i, row[0], row[1], row[3]) for i, row in enumerate(rows)]
            copied += [(row[5], row[0], row[1], row[3]) for row in rows]
            target.executemany(
                "INSERT INTO entries (run_id, seq, kind, hash, bytes, leaf) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(*row[:5], state.size + i) for i, row in enumerate(rows)],
            )
            hashes = b"".join(tiles.leaf_hash(leaf) for leaf in wslog.leaf_data(leaf_rows))
            tiles.append(target, state.size, hashes)
            state, _, _ = wslog.extend(state, leaf_rows)
            entries += len(rows)
            for row in rows:
                seeds |= cas.names_in(row[4])
        seeds |= _copy_related_tables(source, target, runs)
        blobs = sorted(cas.reachable(source, seeds))
        # Each blob, then its chunks, copied in digest order by two streamed queries.
        listed = (json.dumps(blobs),)
        target.executemany(
            "INSERT INTO blobs (digest, size, chunk_size) VALUES (?, ?, ?)",
            source.execute(
                "SELECT digest, size, chunk_size FROM blobs WHERE digest IN "
                "(SELECT value FROM json_each(?)) ORDER BY digest",
                listed,
            ),
        )
        target.executemany(
            "INSERT INTO blob_chunks (digest, idx, data) VALUES (?, ?, ?)",
            source.execute(
                "SELECT digest, idx, data FROM blob_chunks WHERE digest IN "
                "(SELECT value FROM json_each(?)) ORDER BY digest, idx",
                listed,
            ),
        )
        target.execute(
            "UPDATE log_state SET size = ?, frontier = ? WHERE id = 1",
            (state.size, wslog.pack_frontier(state.frontier)),
        )
    return entries, len(blobs), copied


SEAL_BASE_BYTES = 1 << 20
"""What a seal holds besides its source proofs, at most: its fields, the source's path and
its checkpoint note, with room to spare."""
SEAL_BYTES_PER_ENTRY = 4096
"""One entry's source proof in the seal, at most: ``[leaf, [node, ...]]``, at most 64
base64 nodes of 48 bytes each as ``json.dumps`` writes them."""


def archive_seal(conn: apsw.Connection, refused: list[str] | None = None) -> dict[str, Any] | None:
    """The file's seal (None: no seal row; ``{}``: one that is not an archive's). A seal
    longer than any archive of the file's entries has is not read: parsed, its JSON would
    cost some twenty times its length in memory. Why it was not read is added to
    ``refused``."""
    rows = fetch(
        conn,
        "SELECT length(CAST(value AS BLOB)) FROM ledger_meta WHERE key = ?",
        (ARCHIVE_META,),
    )
    if not rows:
        return None
    entries = int(fetch(conn, "SELECT count(*) FROM entries")[0][0])
    limit = SEAL_BASE_BYTES + SEAL_BYTES_PER_ENTRY * entries
    if not isinstance(rows[0][0], int) or rows[0][0] > limit:
        if refused is not None:
            refused.append(
                f"a seal of {rows[0][0]:,} bytes, longer than any archive of {entries:,} "
                f"entries has ({limit:,}): not read"
            )
        return {}
    rows = fetch(conn, "SELECT value FROM ledger_meta WHERE key = ?", (ARCHIVE_META,))
    try:
        seal = json.loads(rows[0][0])
    except (ValueError, RecursionError):  # not JSON, a 5,000-digit number, deep nesting
        return {}
    return seal if isinstance(seal, dict) else {}
