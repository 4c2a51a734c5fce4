"""The SQLite handle Rust reads through is the apsw connection itself: an integer, a
closed connection, a subclass lying about its pointer and a connection another thread
is using are each refused with a typed error, never followed into memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger, _core
from agentledger.storage import native
from agentledger.verify.journal_pass import ALL_ROWS, COLUMNS

JOURNAL_SQL = ALL_ROWS.format(columns=COLUMNS)
BLOB_SQL = "SELECT digest, size, chunk_size, NULL, NULL FROM blobs"

# Every `_core` entry point that takes a connection, called with `CONN` as it.
CALLS = {
    "append_entries": "_core.append_entries(CONN, 'r', 0, 'p', 't', [], 0, [])",
    "verify_journal": "_core.verify_journal(CONN, 'id', 'SELECT 1', [((), None)])",
    "verify_blobs": "_core.verify_blobs(CONN, 'SELECT 1', [[]])",
    "bernstein_check": (
        "_core.bernstein_check(CONN, [], _core.BernsteinOptions(), files=('SELECT 1', 'f', 0))"
    ),
    "BernsteinStoreIndex": "_core.BernsteinStoreIndex(CONN, 'SELECT 1', 0)",
    "sqlite_rows": "_core.sqlite_rows(CONN, 'SELECT 1')",
}


def run_isolated(script: str) -> subprocess.CompletedProcess[str]:
    """`script` in a process of its own: a crash there fails the test, not the suite."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_integer_is_a_type_error_not_a_crash(tmp_path: Path) -> None:
    # The library is bound first, so an integer taken for a handle would be dereferenced.
    calls = "".join(
        f"""
        try:
            {call.replace("CONN", "0x1000")}
        except TypeError as exc:
            print({name!r}, "TypeError", exc)
        """
        for name, call in CALLS.items()
    )
    result = run_isolated(
        f"""
        import apsw
        from agentledger import _core
        from agentledger.storage import native
        native.handle(apsw.Connection({str(tmp_path / "x.db")!r}))
        {textwrap.indent(textwrap.dedent(calls), " " * 8).strip()}
        """
    )
    assert result.returncode == 0, result.stderr
    refused = [line.split()[0] for line in result.stdout.splitlines() if "TypeError" in line]
    assert refused == list(CALLS)
    assert "expected an apsw.Connection, not int" in result.stdout


def test_a_closed_connection_is_a_typed_error(ledger_path: Path) -> None:
    Ledger.open(ledger_path).close()
    conn = native.handle(apsw.Connection(str(ledger_path)))
    conn.close()
    for call in CALLS.values():
        with pytest.raises(apsw.ConnectionClosedError):
            eval(call, {"_core": _core, "CONN": conn})


def test_a_subclass_cannot_hand_over_another_pointer(tmp_path: Path) -> None:
    result = run_isolated(
        f"""
        import apsw
        from agentledger import Ledger, _core
        from agentledger.storage import native

        class Lying(apsw.Connection):
            def sqlite3_pointer(self):
                return 0x1000

        path = {str(tmp_path / "l.db")!r}
        with Ledger.open(path) as ledger:
            ledger.blobs.put(b"one blob")
        honest = _core.verify_blobs(native.handle(apsw.Connection(path)), {BLOB_SQL!r}, [[]])
        lying = _core.verify_blobs(native.handle(Lying(path)), {BLOB_SQL!r}, [[]])
        print(lying[0], lying == honest)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "True"]


def test_a_connection_another_thread_is_using_is_refused(ledger: Ledger) -> None:
    conn = native.handle(apsw.Connection(str(ledger.path)))
    inside, leave = threading.Event(), threading.Event()

    def hold_the_connection() -> int:
        # SQLite holds the connection's mutex while it steps, callbacks included.
        inside.set()
        leave.wait(30)
        return 1

    conn.create_scalar_function("hold_the_connection", hold_the_connection)
    holder = threading.Thread(target=lambda: conn.execute("SELECT hold_the_connection()").get)
    holder.start()
    try:
        assert inside.wait(30)
        with pytest.raises(apsw.ThreadingViolationError):
            _core.verify_blobs(conn, BLOB_SQL, [[]])
        with pytest.raises(apsw.ThreadingViolationError):
            _core.verify_journal(conn, ledger.id, JOURNAL_SQL, [((), None)])
    finally:
        leave.set()
        holder.join()
    checked, findings = _core.verify_blobs(conn, BLOB_SQL, [[]])
    assert (checked, findings) == (0, [])
