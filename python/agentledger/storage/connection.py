"""One SQLite connection to a ledger file: opening safely, pragmas, transactions, errors.

Opening never changes a file that is not already a ledger: the identity (application_id)
and schema version are read before any pragma that writes (WAL) is set.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw

from agentledger.errors import LedgerError, NotFound
from agentledger.storage.migrations import APPLICATION_ID, SCHEMA_VERSION, migrate

BUSY_TIMEOUT_MS = 10_000
"""How long a writer waits for another writer before giving up with a clear error."""

BUSY_POLL_S = (0.0002, 0.002)
"""A waiting writer retries the lock after a random pause in this range (seconds)."""


def _busy_handler(timeout_ms: int) -> Callable[[int], bool]:
    """Wait for the write lock up to ``timeout_ms``, retrying every 0.2-2 ms at random.

    SQLite's own busy timeout backs off to 100 ms sleeps, so under sustained contention a
    writer that has waited a while keeps missing the moments the lock is free while fresher
    waiters take it: in the concurrency bench one of four writers waited 7 s and some hit
    the 10 s timeout. Short random pauses give every waiter the same chance at each release.
    """
    deadline = 0.0

    def handler(prior_calls: int) -> bool:
        nonlocal deadline
        now = time.monotonic()
        if prior_calls == 0:
            deadline = now + timeout_ms / 1000
        if now >= deadline:
            return False
        time.sleep(random.uniform(*BUSY_POLL_S))
        return True

    return handler


def _cause(exc: apsw.Error) -> apsw.Error:
    """The failure that started it: an I/O error inside a transaction makes SQLite roll it
    back itself, and the rollback that closing the transaction then tries fails with
    "no transaction is active", hiding the real error (seen with injected disk faults)."""
    while isinstance(exc, apsw.SQLError) and isinstance(exc.__context__, apsw.Error):
        exc = exc.__context__
    return exc


def _translate(exc: apsw.Error, path: Path) -> LedgerError:
    """Turn a SQLite failure into a typed, one-line ledger error."""
    exc = _cause(exc)
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return LedgerError(
            f"{path}: the ledger is locked by another writer "
            f"(waited {BUSY_TIMEOUT_MS / 1000:.0f}s)",
            code="ledger-locked",
        )
    if isinstance(exc, apsw.NotADBError):
        return LedgerError(f"{path}: not a ledger (not an SQLite database)", code="not-a-ledger")
    if isinstance(exc, apsw.CorruptError):
        return LedgerError(f"{path}: the database file is corrupt", code="ledger-corrupt")
    if isinstance(exc, apsw.FullError):
        return LedgerError(f"{path}: no space left to write the ledger", code="disk-full")
    if isinstance(exc, apsw.ReadOnlyError):
        return LedgerError(f"{path}: the ledger is read-only", code="ledger-read-only")
    if isinstance(exc, apsw.CantOpenError | apsw.PermissionsError):
        return LedgerError(
            f"{path}: cannot open the ledger file (it must be readable and its folder "
            "writable: SQLite keeps its -wal/-shm files beside it; for read-only media "
            "use `agentledger archive`)",
            code="ledger-unopenable",
        )
    if isinstance(exc, apsw.IOError):
        return LedgerError(f"{path}: I/O error on the ledger file ({exc})", code="io-error")
    return LedgerError(f"{path}: {exc}", code="ledger-error")


def quote_identifier(name: str) -> str:
    """An SQL identifier (a table or column name read from a ledger file) as a quoted
    literal: the name can never end the identifier and add SQL of its own."""
    if "\x00" in name:
        raise LedgerError(f"an SQL identifier holds a NUL byte: {name[:40]!r}", code="bad-schema")
    return '"' + name.replace('"', '""') + '"'


class Database:
    """A ledger's SQLite connection. Writers take ``BEGIN IMMEDIATE``; readers see snapshots."""

    def __init__(self, conn: apsw.Connection, path: Path, readonly: bool) -> None:
        self.conn = conn
        self.path = path
        self.readonly = readonly
        self.before_commit: list[Callable[[apsw.Connection], None]] = []
        """Run once at the end of the outermost write transaction, inside it (the workspace
        log's checkpoint); dropped if the transaction fails."""

    @classmethod
    def open(
        cls, path: Path, *, create: bool = True, readonly: bool = False, vfs: str | None = None
    ) -> Database:
        """Open (or create, 0600) the ledger file. ``vfs`` names a registered SQLite VFS
        (the fault-injection tests use one); the default is the operating system's."""
        path = Path(path)
        fresh = not path.exists()
        if fresh:
            if not create or readonly:
                raise NotFound(f"{path}: no ledger here (run `agentledger init`)")
            path.parent.mkdir(parents=True, exist_ok=True)
            # Created 0600 before SQLite touches it: the ledger is nobody else's to read.
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
        elif path.is_dir():
            raise LedgerError(f"{path}: is a directory, not a ledger", code="not-a-ledger")
        flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
        try:
            conn = apsw.Connection(str(path), flags=flags, vfs=vfs)
            conn.set_busy_handler(_busy_handler(BUSY_TIMEOUT_MS))
            db = cls(conn, path, readonly)
            db._check_identity(fresh, create)
        except apsw.Error as exc:
            raise _translate(exc, path) from None
        return db

    def _check_identity(self, fresh: bool, create: bool = True) -> None:
        conn = self.conn
        app_id = conn.execute("PRAGMA application_id").fetchall()[0][0]
        version = conn.execute("PRAGMA user_version").fetchall()[0][0]
        tables = conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()[0][0]
        empty = app_id == 0 and version == 0 and tables == 0
        if not empty and app_id != APPLICATION_ID:
            raise LedgerError(
                f"{self.path}: not a ledger (an SQLite file of another application)",
                code="not-a-ledger",
            )
        if version > SCHEMA_VERSION:
            raise LedgerError(
                f"{self.path}: written by a newer agentledger (schema {version}; "
                f"this version reads up to {SCHEMA_VERSION}); upgrade agentledger",
                code="ledger-too-new",
            )
        # An empty file becomes a ledger only when asked to create one (a writer, `init`):
        # a reading command must not turn someone's empty file into a ledger.
        if empty and not fresh and (self.readonly or not create):
            raise LedgerError(
                f"{self.path}: empty file, not a ledger (`agentledger init` makes it one)",
                code="not-a-ledger",
            )
        if not self.readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        # A ledger file may have been written by someone else: views and triggers in its
        # schema must not call functions with side effects (docs/RELIABILITY.md).
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.transaction_mode = "IMMEDIATE"
        if not self.readonly and version < SCHEMA_VERSION:
            with conn:
                # Re-read under the write lock: another process may have migrated meanwhile.
                current = conn.execute("PRAGMA user_version").fetchall()[0][0]
                if current < SCHEMA_VERSION:
                    migrate(conn, current)
                    if current == 0:
                        conn.execute(
                            "INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', ?)",
                            (secrets.token_hex(16),),
                        )

    @contextlib.contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """One write transaction (BEGIN IMMEDIATE): all of it commits, or none of it."""
        if self.readonly:
            raise LedgerError(f"{self.path}: opened read-only", code="ledger-read-only")
        outermost = not self.conn.in_transaction
        try:
            with self.conn:
                yield self.conn
                while outermost and self.before_commit:
                    self.before_commit.pop(0)(self.conn)
        except apsw.Error as exc:
            raise _translate(exc, self.path) from None
        finally:
            if outermost:
                self.before_commit.clear()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[apsw.Connection]:
        """A read transaction: every query inside sees the same committed state."""
        if self.conn.in_transaction:
            yield self.conn
            return
        try:
            self.conn.execute("BEGIN DEFERRED")
            try:
                yield self.conn
            finally:
                self.conn.execute("COMMIT")
        except apsw.Error as exc:
            raise _translate(exc, self.path) from None

    def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        """Every row of one read, with a SQLite failure turned into a typed ``LedgerError``."""
        try:
            return list(self.conn.execute(sql, params).fetchall())
        except apsw.Error as exc:
            raise _translate(exc, self.path) from None

    def scalar(self, sql: str, params: tuple[object, ...] = ()) -> Any:
        rows = self.rows(sql, params)
        return rows[0][0] if rows else None

    def close(self) -> None:
        self.conn.close()
