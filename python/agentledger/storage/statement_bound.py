"""Every statement on a ledger runs under a bound: Ctrl-C ends it, and so does a step budget.

Whoever writes a ledger file can make a query of it run forever (a recursive view in place
of a table). The schema lock refuses such a file before any other SQL runs on it, but a
schema can change under a handle between two statements, and SQLite runs a statement
without returning to Python: Ctrl-C would wait for it. So SQLite calls back every
``PROGRESS_STEPS`` instructions of its virtual machine. Python raises ``KeyboardInterrupt``
there (the command exits 130, the transaction rolled back), and a statement that has run
more instructions than any of agentledger's can need on a file this size is stopped with a
typed error. Measured: the heaviest statements (SQLite's integrity check, the journal
scan) take about 100 instructions per page of the file; the budget is a thousand times
that, and never under ``MIN_STEPS``.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from pathlib import Path

import apsw

from agentledger.errors import LedgerError

PROGRESS_STEPS = 100_000
"""Instructions between two calls of the handler (well under a millisecond)."""
STEPS_PER_PAGE = 100_000
MIN_STEPS = 1_000_000_000
HANDLER_ID = "agentledger-statement-bound"


class StatementBound:
    """The progress handler of one connection; counts instructions per statement.

    The passes the Rust core runs on the connection without the GIL (``native.handle``)
    run without it: Rust notices Ctrl-C itself, and an exception raised by a Python
    callback inside SQLite would reach Rust, not apsw. The handler comes back with the
    next statement Python runs. ``native.rows``, which Rust steps with the GIL held, runs
    under it (``begin``) and raises what it raises.
    """

    def __init__(self, conn: apsw.Connection, path: Path) -> None:
        # Weak: the connection holds its handler, and ``_bounds`` holds this, so a strong
        # reference back would keep a connection nobody closed open until the process ends.
        self._conn = weakref.ref(conn)
        self.path = path
        self.steps = 0
        self.installed = False
        self.page_size = int(conn.execute("PRAGMA page_size").fetchall()[0][0]) or 4096
        self.budget = self._budget()
        conn.exec_trace = self._statement_begins
        _bounds[conn] = self
        self._install()

    def _install(self) -> None:
        conn = self._conn()
        if conn is not None:
            conn.set_progress_handler(self._progress, PROGRESS_STEPS, id=HANDLER_ID)
            self.installed = True

    def suspend(self) -> None:
        """Before a Rust call steps statements on this connection."""
        conn = self._conn()
        if self.installed and conn is not None:
            conn.set_progress_handler(None, id=HANDLER_ID)
            self.installed = False

    def _budget(self) -> int:
        pages = 0
        for part in (self.path, Path(f"{self.path}-wal")):
            with contextlib.suppress(OSError):
                pages += os.stat(part).st_size // self.page_size
        return max(MIN_STEPS, STEPS_PER_PAGE * pages)

    def begin(self) -> None:
        """A statement starts: its count afresh, under the handler."""
        self.steps = 0
        if not self.installed:
            self._install()

    def _statement_begins(self, cursor: object, sql: str, bindings: object) -> bool:
        self.begin()  # each statement Python runs through apsw
        return True

    def _progress(self) -> bool:
        # A pending Ctrl-C is raised by Python on entering this function: SQLite stops the
        # statement and apsw re-raises the KeyboardInterrupt to the caller.
        self.steps += PROGRESS_STEPS
        if self.steps > self.budget:
            self.budget = self._budget()  # the file may have grown since the last look
            if self.steps > self.budget:
                raise LedgerError(
                    f"{self.path}: a statement ran past {self.budget:,} SQLite instructions, "
                    "more than any of agentledger's needs on a file this size; stopped "
                    "(the file's schema or contents make it loop: `agentledger verify`)",
                    code="statement-bound",
                )
        return False


_bounds: weakref.WeakKeyDictionary[apsw.Connection, StatementBound] = weakref.WeakKeyDictionary()


def begin(conn: apsw.Connection) -> None:
    """A statement Rust steps with the GIL held (``native.rows``) runs under ``conn``'s
    bound, its count afresh, as one Python runs does: what the handler raises (Ctrl-C,
    the budget's error) is raised by that call."""
    bound = _bounds.get(conn)
    if bound is not None:
        bound.begin()


def suspend(conn: apsw.Connection) -> None:
    """Lift ``conn``'s bound until Python runs its next statement (a Rust call steps now)."""
    bound = _bounds.get(conn)
    if bound is not None:
        bound.suspend()
