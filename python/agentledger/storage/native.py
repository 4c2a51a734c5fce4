"""Rust reading through an open apsw connection: same SQLite library, same transaction.

The Rust core cannot link its own SQLite and share apsw's connections, so it borrows
apsw's library instead: ``agentledger._core`` is loaded once as an SQLite extension (the
documented extension API), which hands it SQLite's function table. A connection is then
passed to Rust as the ``apsw.Connection`` itself, never as an integer: Rust checks that it
is one and open, and takes its mutex (``apsw.ThreadingViolationError`` when another thread
is using it). Failures come back as ``_core.SqliteError`` and are raised here as
the apsw exception of the same result code, so callers handle them exactly like apsw's own.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import apsw

from agentledger import _core
from agentledger.errors import LedgerError
from agentledger.storage import statement_bound

ENTRY_POINT = "sqlite3_agentledger_init"

_binding = threading.Lock()


def handle(conn: apsw.Connection) -> apsw.Connection:
    """``conn``, ready for a ``_core`` call: the library is bound first.

    The Python progress handler is lifted for the call (``statement_bound.py``): Rust
    notices Ctrl-C itself between its batches."""
    _bound(conn)
    statement_bound.suspend(conn)
    return conn


def wal_header(conn: apsw.Connection) -> bytes | None:
    """``_core.sqlite_wal_header`` of ``conn``, read at the start of every read transaction.
    Unlike ``handle``, the statement bound stays in place: the call steps no statement,
    and lifting the bound costs its reinstalling at the next one (a third of a blob read)."""
    _bound(conn)
    return _core.sqlite_wal_header(conn)


# Weak keys: a connection nobody closed is still collected, its cache first (apsw clears
# weak references before it closes a connection it frees, so SQLite is still open when
# the cache finalizes its statements).
_kept: weakref.WeakKeyDictionary[apsw.Connection, _core.StatementCache] = (
    weakref.WeakKeyDictionary()
)


def keep_statements(conn: apsw.Connection) -> None:
    """Keep the statements ``rows`` prepares on ``conn`` from call to call, as apsw keeps
    its own: ``forget_statements`` before closing it."""
    _bound(conn)
    _kept[conn] = _core.StatementCache(conn)


def forget_statements(conn: apsw.Connection) -> None:
    """Finalize the statements kept for ``conn``, before it is closed: SQLite does not
    close a connection under an unfinalized statement (apsw raises ``BusyError``)."""
    kept = _kept.pop(conn, None)
    if kept is not None:
        with contextlib.suppress(apsw.ConnectionClosedError):
            kept.clear(conn)
        # Closed already: dropping the cache finalizes them.


def _bound(conn: apsw.Connection) -> None:
    if not _core.sqlite_bound():
        with _binding:
            if not _core.sqlite_bound():
                _bind(conn)


def _bind(conn: apsw.Connection) -> None:
    # Extension loading is enabled only for this one call: a ledger's SQL never gets it.
    conn.enable_load_extension(True)
    try:
        conn.load_extension(_core.__file__, ENTRY_POINT)
    except apsw.Error as exc:
        raise LedgerError(
            f"cannot bind the Rust core to apsw's SQLite ({exc})", code="native-sqlite"
        ) from None
    finally:
        conn.enable_load_extension(False)
    if not _core.sqlite_bound():
        # The loader opened a second copy of the module (another path to the same file).
        raise LedgerError(
            f"SQLite loaded {_core.__file__} as a separate copy; the Rust core is not bound",
            code="native-sqlite",
        )


@contextlib.contextmanager
def sqlite_errors() -> Iterator[None]:
    """Raise a failure inside a ``_core`` SQLite call as apsw's exception for its code."""
    try:
        yield
    except _core.SqliteError as exc:
        raise as_apsw(exc) from None


def as_apsw(exc: _core.SqliteError) -> apsw.Error:
    """apsw's exception for the result code of a ``_core`` SQLite failure."""
    code, message = exc.args
    failure = apsw.exception_for(code)
    failure.args = (message,)
    return failure


def rows(conn: apsw.Connection, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    """Every row of ``sql`` on ``conn``, stepped by Rust with the GIL held: what apsw's
    ``execute(...).fetchall()`` returns, without letting the GIL go at each row (beside a
    busy Python thread, each such row waits for that thread's switch interval). For
    results the caller holds in memory anyway, or reads a page at a time. The statement
    runs under the connection's bound, as apsw's do (Ctrl-C, the step budget)."""
    _bound(conn)
    statement_bound.begin(conn)
    try:  # not `sqlite_errors()`: entering a context manager costs what a short statement does
        return _core.sqlite_rows(conn, sql, list(params), _kept.get(conn))
    except _core.SqliteError as exc:
        raise as_apsw(exc) from None


def execute(conn: apsw.Connection, sql: str, params: tuple[object, ...] = ()) -> None:
    """Run a statement that returns no rows as ``rows`` runs one: with the GIL held (the
    write path's statements: an append beside a busy thread waited at each one)."""
    rows(conn, sql, params)
