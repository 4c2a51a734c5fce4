"""One SQLite connection to a ledger file: opening safely, pragmas, transactions, errors.

Opening never changes a file that is not already a ledger: the identity (application_id)
and schema version are read before any pragma that writes (WAL) is set. The file's schema
is compared with the one its migrations create (``schema_lock.py``); a file whose schema
was altered is never migrated or written. A read-only open never writes at all: on media
that cannot be written, and without a ``-wal`` file, it opens the file as immutable.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw

from agentledger import _core, sqlite_files
from agentledger.errors import Diverged, InvalidInput, LedgerError, NotFound
from agentledger.storage import native
from agentledger.storage.migrations import APPLICATION_ID, SCHEMA_VERSION, migrate
from agentledger.storage.schema_lock import schema_drift
from agentledger.storage.statement_bound import StatementBound

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


def _text_error(exc: UnicodeError, path: Path) -> LedgerError | InvalidInput:
    """A string SQLite cannot take (a lone surrogate asked about), or text in the file
    that is not UTF-8 (written by someone else): a typed error, not a crash."""
    if isinstance(exc, UnicodeEncodeError):
        return InvalidInput(
            f"a string that cannot be UTF-8 encoded (a lone surrogate at {exc.start})",
            code="invalid-text",
        )
    return LedgerError(f"{path}: the ledger holds text that is not UTF-8", code="ledger-corrupt")


READONLY_MMAP_BYTES = 1 << 30
"""How much of a ledger opened read-only SQLite maps into memory, per connection."""


def _cannot_create(path: Path, exc: OSError) -> LedgerError:
    where = f" ({exc.filename})" if exc.filename else ""
    return LedgerError(
        f"{path}: cannot create the ledger: {exc.strerror or exc}{where}",
        code="ledger-unopenable",
    )


def _remove_empty(path: Path, created: list[Path]) -> None:
    """A file that is refused is left as it was: SQLite may have created an empty -wal or
    -shm beside it while reading its header. Not while another connection uses them (the
    writer creating the ledger meanwhile, another application): its commits would go to a
    removed WAL, lost to every later reader."""
    if not created or sqlite_files.in_use(path):
        return
    for companion in created:
        with contextlib.suppress(OSError):
            if companion.stat().st_size == 0:
                companion.unlink()


def _needs_immutable(path: Path) -> bool:
    """Whether a read-only open must skip SQLite's locks and ``-shm`` file: the ledger or
    its folder cannot be written (read-only media, a reviewer's mount, no permission) and
    no ``-wal`` file holds commits the main file lacks."""
    if Path(f"{path}-wal").exists():
        return False
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    return not writable or (Path(f"{path}-shm").exists() and not os.access(f"{path}-shm", os.W_OK))


_SCHEMA_TABLES = frozenset({"sqlite_schema", "sqlite_master", "sqlite_temp_master"})
_HARMLESS = frozenset(
    {apsw.SQLITE_SELECT, apsw.SQLITE_PRAGMA, apsw.SQLITE_TRANSACTION, apsw.SQLITE_FUNCTION}
)


def _schema_only(path: Path, findings: list[str]) -> Callable[..., int]:
    """An authorizer refusing every statement that reads a table or view of a file whose
    schema is not agentledger's: the refusal happens when SQLite prepares the statement,
    so none of the file's SQL ever runs."""

    def authorize(action: int, name: str | None, *_: object) -> int:
        if action in _HARMLESS or (action == apsw.SQLITE_READ and name in _SCHEMA_TABLES):
            return int(apsw.SQLITE_OK)
        raise Diverged(
            f"{path}: the ledger's schema is not the one agentledger creates "
            f"({findings[0]}); refusing to read it "
            "(`agentledger verify` lists every difference)",
            code="schema-altered",
        )

    return authorize


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
        self.immutable = False
        """Opened with SQLite's ``immutable`` flag: read-only media, no locks, no -shm."""
        self.version = SCHEMA_VERSION
        self.schema_findings: list[str] = []
        """How the file's schema differs from the one agentledger creates (verify reports
        each; a writer refuses the file)."""
        self.before_commit: list[Callable[[apsw.Connection], None]] = []
        """Run once at the end of the outermost write transaction, inside it (the workspace
        log's checkpoint); dropped if the transaction fails."""
        self.after_commit: list[Callable[[], None]] = []
        """Run once the outermost write transaction has committed (the signer's memory)."""
        self._schema_cookie = -1
        self.upgraded_from: int | None = None
        """The schema this handle migrated the file from (None: it did not migrate it)."""
        self.transaction_scope: dict[str, object] = {}
        """What the current write transaction has established (cleared at its end)."""
        self.transaction_serial = 0
        """Counts the outermost transactions begun, read or write: a value proven in one
        (``proven.Proven``) names it, and is refused in any other."""
        self.wal = False
        """In WAL mode as opened (no connection can leave it while this one is open)."""
        self._mark_base: tuple[bytes | None, int] | None = None
        """The current transaction's WAL-index header before it began (None: a write
        transaction, which needs none) and this connection's change count then."""
        self._mark: bytes | None = None
        sqlite_files.hold(self, path)

    @classmethod
    def open(
        cls, path: Path, *, create: bool = True, readonly: bool = False, vfs: str | None = None
    ) -> Database:
        """Open (or create, 0600) the ledger file. ``vfs`` names a registered SQLite VFS
        (the fault-injection tests use one); the default is the operating system's."""
        path = Path(path)
        try:
            # SQLite takes a file name as UTF-8 text: a name of other bytes (Python holds
            # them as lone surrogates) cannot be given to it, nor its -wal beside it.
            str(path).encode("utf-8")
        except UnicodeEncodeError:
            shown = str(path).encode("utf-8", "backslashreplace").decode("utf-8")
            raise LedgerError(
                f"{shown}: the file's name is not UTF-8 text, which SQLite cannot open; "
                "rename it (or link it under a UTF-8 name)",
                code="ledger-unopenable",
            ) from None
        main = sqlite_files.companion_of(path)
        if main is not None:
            raise LedgerError(
                f"{path}: a file SQLite keeps beside the database {main}, not a ledger",
                code="not-a-ledger",
            )
        fresh = not path.exists()
        if fresh:
            if not create or readonly:
                raise NotFound(f"{path}: no ledger here (run `agentledger init`)")
            if path.is_symlink():
                # A link to a missing file: O_EXCL refuses to follow it (EEXIST), and a
                # ledger is never created somewhere a link, not the user, chose.
                raise LedgerError(
                    f"{path}: a symbolic link to {os.readlink(path)}, which does not exist; "
                    "no ledger created (create it at the link's target, or remove the link)",
                    code="not-a-ledger",
                )
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a parent that is a file, no permission, read-only media
                raise _cannot_create(path, exc) from None
            try:
                # Created 0600 before SQLite touches it: the ledger is nobody else's to read.
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                fresh = False  # another process created it meanwhile: opened as theirs
            except OSError as exc:
                raise _cannot_create(path, exc) from None
            else:
                os.close(fd)
        elif path.is_dir():
            raise LedgerError(f"{path}: is a directory, not a ledger", code="not-a-ledger")
        elif not path.is_file():
            # A FIFO or a device would block SQLite's open, or feed it endless bytes.
            raise LedgerError(f"{path}: not a regular file, not a ledger", code="not-a-ledger")
        for companion in sqlite_files.companions(path):
            # SQLite opens these by name too: a FIFO there (a -journal whose size it reads to
            # look for a hot journal) blocks every command, Ctrl-C included.
            if os.path.lexists(companion) and not companion.is_file():
                raise LedgerError(
                    f"{companion}: beside the ledger, and not a regular file; refusing to "
                    "open the ledger (SQLite would read or write it)",
                    code="ledger-unopenable",
                )
        flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
        immutable = readonly and _needs_immutable(path)
        names = os.stat(path).st_nlink
        if not immutable and names > 1:
            # SQLite keeps a WAL per name: a commit through one name is lost to the other,
            # and checkpoints through both write one file.
            raise LedgerError(
                f"{path}: the file has {names} names on disk (hard links); "
                "what is committed through one is lost to the others. Keep one name, and "
                "back up with a copy (cp, or `agentledger archive`), never a hard link",
                code="ledger-hard-linked",
            )
        absent = [file for file in sqlite_files.companions(path) if not file.exists()]
        conn: apsw.Connection | None = None
        db: Database | None = None
        try:
            if immutable:
                uri = "file:" + urllib.parse.quote(str(path.absolute())) + "?immutable=1"
                flags |= apsw.SQLITE_OPEN_URI
                conn = apsw.Connection(uri, flags=flags, vfs=vfs)
            else:
                conn = apsw.Connection(str(path), flags=flags, vfs=vfs)
            # No SQL of the file may change its own schema or reach outside it.
            conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
            # A statement's plan never depends on the values bound to it: apsw's SQLite
            # (built with STAT4) otherwise re-prepares a cached statement at each new key.
            conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
            conn.set_busy_handler(_busy_handler(BUSY_TIMEOUT_MS))
            if readonly:
                # Reads map the file instead of copying each page (the bernstein verify's
                # reader connections copy this size too): at most this much of the file is
                # mapped per connection, and counts in the process's resident set once read.
                conn.execute(f"PRAGMA mmap_size = {READONLY_MMAP_BYTES}")
            StatementBound(conn, path)
            native.keep_statements(conn)
            db = cls(conn, path, readonly)
            db.immutable = immutable
            db._check_identity(fresh, create)
        except BaseException as exc:
            if conn is not None:
                native.forget_statements(conn)
                conn.close()
            if db is not None:
                sqlite_files.release(db)  # closed: no longer this process's to hold
            _remove_empty(path, absent)
            if isinstance(exc, apsw.Error):
                raise _translate(exc, path) from None
            raise
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
        self.wal = conn.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
        self.version = version
        self._set_schema_findings(schema_drift(conn, version))
        self._schema_cookie = self._cookie()
        if not self.readonly and version < SCHEMA_VERSION and not self.schema_findings:
            with conn:
                # Re-read under the write lock: another process may have migrated meanwhile.
                current = conn.execute("PRAGMA user_version").fetchall()[0][0]
                if current < SCHEMA_VERSION:
                    migrate(conn, current)
                    self.upgraded_from = current
                    if current == 0:
                        conn.execute(
                            "INSERT INTO ledger_meta (key, value) VALUES ('ledger_id', ?)",
                            (secrets.token_hex(16),),
                        )
            self.version = SCHEMA_VERSION
            self._set_schema_findings(schema_drift(conn, SCHEMA_VERSION))
            self._schema_cookie = self._cookie()

    def check_current(self, does: str = "reads") -> None:
        """Refuse (``ledger-old``) a file of an older schema this handle did not upgrade: a
        reader never migrates, and this version's queries know only its own schema. A file
        whose schema was altered is not refused here: verify reports how it differs."""
        if self.version < SCHEMA_VERSION and not self.schema_findings:
            raise LedgerError(
                f"{self.path}: schema {self.version}, written by an older agentledger; "
                f"this version {does} schema {SCHEMA_VERSION}. Any writing command upgrades "
                "it (its entries are then verified before anything is signed)",
                code="ledger-old",
            )

    def check_writable(self) -> None:
        """Refuse to write a read-only handle, or a file whose schema was altered."""
        if self.readonly:
            raise LedgerError(f"{self.path}: opened read-only", code="ledger-read-only")
        if self.schema_findings:
            raise Diverged(
                f"{self.path}: the ledger's schema is not the one agentledger creates "
                f"({self.schema_findings[0]}); refusing to write to it "
                "(`agentledger verify` lists every difference)",
                code="schema-altered",
            )
        if self.version < SCHEMA_VERSION:
            raise LedgerError(
                f"{self.path}: schema {self.version} could not be upgraded", code="ledger-old"
            )

    def _cookie(self) -> int:
        return int(native.rows(self.conn, "PRAGMA schema_version")[0][0])

    def recheck_schema(self) -> None:
        """Inside a transaction: another process may have changed the schema since this
        handle opened (SQLite bumps its cookie on every change); compare it again then."""
        cookie = self._cookie()
        if cookie != self._schema_cookie:
            self._set_schema_findings(schema_drift(self.conn, self.version))
            self._schema_cookie = cookie

    def _set_schema_findings(self, findings: list[str]) -> None:
        """Record how the schema differs; while it does, no SQL but reading
        ``sqlite_schema`` runs on the file (a view there could loop or lie)."""
        self.schema_findings = findings
        self.conn.authorizer = _schema_only(self.path, findings) if findings else None

    def _recheck_schema(self) -> None:
        """Inside a write transaction: refuse a schema changed since this handle opened."""
        self.recheck_schema()
        self.check_writable()

    @contextlib.contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """One write transaction (BEGIN IMMEDIATE): all of it commits, or none of it."""
        self.check_writable()
        outermost = not self.conn.in_transaction
        committed = False
        if outermost:
            self.transaction_serial += 1
        try:
            with self.conn:
                if outermost:
                    self._mark_base = (None, self.conn.total_changes())
                    self._recheck_schema()
                yield self.conn
                while outermost and self.before_commit:
                    self.before_commit.pop(0)(self.conn)
            committed = outermost
        except apsw.Error as exc:
            unwinding = exc.__context__
            if isinstance(unwinding, KeyboardInterrupt) or (
                isinstance(exc, apsw.ConnectionClosedError) and isinstance(unwinding, GeneratorExit)
            ):
                # The transaction failed to end while it unwound: a Ctrl-C (SQLite may have
                # rolled it back itself as the interrupt landed), or the handle closed by the
                # command's cleanup. Nothing was committed; let the unwinding go on.
                raise unwinding from None
            raise _translate(exc, self.path) from None
        finally:
            if outermost:
                self._mark_base = self._mark = None
                self.before_commit.clear()
                self.transaction_scope.clear()
                after, self.after_commit = self.after_commit, []
                if committed:
                    for action in after:
                        action()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[apsw.Connection]:
        """A read transaction: every query inside sees the same committed state."""
        if self.conn.in_transaction:
            yield self.conn
            return
        self.transaction_serial += 1
        try:
            before = self._wal_header()
            self.conn.execute("BEGIN DEFERRED")
            self._mark_base = (before, self.conn.total_changes())
            try:
                yield self.conn
            finally:
                self._mark_base = self._mark = None
                self.conn.execute("COMMIT")
        except apsw.Error as exc:
            raise _translate(exc, self.path) from None
        except UnicodeError as exc:
            raise _text_error(exc, self.path) from None

    def read_mark(self) -> bytes | None:
        """What proves that a reader opened beside this connection reads the snapshot of its
        current transaction (``rust/python/src/sqlite/read_mark.rs``): the WAL-index header
        unmoved since the transaction began, and none of its own changes pending. None outside a
        transaction, for a file opened immutable, or when that cannot be proven: then nothing
        is read beside it (an immutable file's readers are compared with it otherwise)."""
        if self._mark is None and self._mark_base is not None and not self.immutable:
            before, changes = self._mark_base
            if self.conn.total_changes() == changes:
                self._mark = _core.sqlite_read_mark(native.handle(self.conn), before)
        return self._mark

    def _wal_header(self) -> bytes | None:
        """The WAL-index header now, read as a read transaction is about to begin."""
        if not self.wal or self.immutable:
            return None
        return native.wal_header(self.conn)

    def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[Any]:
        """Every row of one read (stepped with the GIL held: ``native.rows``), with a SQLite
        failure turned into a typed ``LedgerError``."""
        try:
            return native.rows(self.conn, sql, params)
        except apsw.Error as exc:
            raise _translate(exc, self.path) from None
        except UnicodeError as exc:
            raise _text_error(exc, self.path) from None

    def scalar(self, sql: str, params: tuple[object, ...] = ()) -> Any:
        rows = self.rows(sql, params)
        return rows[0][0] if rows else None

    def close(self) -> None:
        try:
            native.forget_statements(self.conn)
            self.conn.close()
        except apsw.Error as exc:
            raise _translate(exc, self.path) from None
        sqlite_files.release(self)
