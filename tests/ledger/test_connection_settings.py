"""What every connection agentledger opens on a ledger is configured with, writable or not."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger
from agentledger.errors import LedgerError
from agentledger.sqlite_files import companions
from agentledger.storage import connection


@pytest.mark.parametrize("readonly", [False, True], ids=["writable", "read-only"])
def test_no_sql_of_the_file_reaches_outside_and_no_plan_follows_a_bound_value(
    ledger_path: Path, readonly: bool
) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {})
    with Ledger.open(ledger_path, readonly=readonly) as ledger:
        conn = ledger.db.conn
        assert conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, -1) == 1
        # With query-planner stability a cached statement is not re-prepared each time a
        # new key is bound to it (the SQLite apsw ships is built with STAT4).
        assert conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, -1) == 1


@pytest.mark.parametrize("readonly", [False, True], ids=["writable", "read-only"])
def test_a_ledger_nobody_closed_lets_its_file_go_once_dropped(
    ledger_path: Path, readonly: bool
) -> None:
    """A program that drops a ledger without ``close()`` gets its connection (and the
    file's descriptors) back from the garbage collector, as with a Python file: a
    statement bound that held its connection strongly kept every such ledger open until
    the process ended."""
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {})

    def descriptors() -> int:
        # Where the system lists them (Linux); elsewhere the collected connections say it.
        fds = Path("/proc/self/fd")
        return sum(1 for fd in fds.iterdir() if _points_at(fd, ledger_path)) if fds.is_dir() else 0

    before = descriptors()
    dropped = []
    for n in range(5):
        ledger = Ledger.open(ledger_path, readonly=readonly)
        if not readonly:
            ledger.run(f"dropped-{n}").append("step", {"n": n})
        assert ledger.verify().code == 0
        dropped.append(weakref.ref(ledger.db.conn))
        assert descriptors() > before or not Path("/proc/self/fd").is_dir()
        del ledger
    gc.collect()
    assert [conn() for conn in dropped] == [None] * 5
    assert descriptors() == before
    with Ledger.open(ledger_path) as ledger:
        report = ledger.verify()
        assert report.code == 0
        assert len(report.runs) == (1 if readonly else 6)


def _points_at(fd: Path, path: Path) -> bool:
    try:
        return Path(os.readlink(fd)).resolve() == path.resolve()
    except OSError:
        return False


def test_a_ledger_with_a_second_name_on_disk_is_refused(tmp_path: Path) -> None:
    """A hard link (``cp -l``, a snapshot tool) gives the file a second write-ahead log:
    what is committed through one name is lost through the other (shown below). Every
    open but an immutable one refuses such a file, and leaves it as it was."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.run("r").append("step", {"n": 1})
    link = tmp_path / "backup.db"
    os.link(path, link)
    before = path.read_bytes()
    for name in (path, link):
        for readonly in (False, True):
            with pytest.raises(LedgerError) as refused:
                Ledger.open(name, readonly=readonly)
            assert refused.value.code == "ledger-hard-linked"
            assert "2 names on disk" in refused.value.message
    assert path.read_bytes() == before
    link.unlink()
    with Ledger.open(path) as ledger:  # one name again: opens, verifies clean
        assert ledger.verify().code == 0


WRITER = """
import apsw, sys
connection = apsw.Connection(sys.argv[1])
connection.execute("PRAGMA journal_mode = WAL").fetchall()
connection.execute(f"CREATE TABLE IF NOT EXISTS {sys.argv[2]} (x)")
for i in range(100):
    connection.execute(f"INSERT INTO {sys.argv[2]} VALUES (?)", (i,))
print("committed", flush=True)
if sys.argv[3] == "hold":
    sys.stdin.readline()  # keeps its WAL until told to close
connection.close()
"""


def test_sqlite_loses_commits_made_through_a_second_name(tmp_path: Path) -> None:
    """Why the rule above, with SQLite alone: two processes, one name each."""
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    setup = apsw.Connection(str(first))
    setup.execute("PRAGMA journal_mode = WAL").fetchall()
    setup.close()
    os.link(first, second)
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(first), "t", "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "committed\n"
        other = subprocess.run(
            [sys.executable, "-c", WRITER, str(second), "u", "close"],
            capture_output=True,
            text=True,
        )
        assert other.stdout == "committed\n"  # acknowledged
        holder.communicate("close\n")
        assert holder.returncode == 0
    after = apsw.Connection(str(first))
    tables = {row[0] for row in after.execute("SELECT name FROM sqlite_schema")}
    after.close()
    assert tables == {"t"}  # the second name's table and its 100 rows are gone


HOLDER = """
import apsw, sys
connection = apsw.Connection(sys.argv[1])
connection.execute("SELECT count(*) FROM t").fetchall()  # opens the WAL (still empty)
print("open", flush=True)
sys.stdin.readline()
with connection:
    for i in range(100):
        connection.execute("INSERT INTO t VALUES (?)", (i,))
print("committed", flush=True)
sys.stdin.readline()  # keeps the connection until told to close
connection.close()
"""


def test_a_refused_open_never_removes_files_another_connection_uses(tmp_path: Path) -> None:
    """A refused open removes the empty -wal/-shm SQLite made beside the file, but not
    those of a connection that opened them meanwhile (the creator of a new ledger, another
    application): a reader refusing a ledger still being created removed its writer's WAL,
    whose commits then went to a removed file (concurrent `init`s failed with I/O errors)."""
    path = tmp_path / "a.db"
    setup = apsw.Connection(str(path))
    setup.execute("PRAGMA journal_mode = WAL").fetchall()
    setup.execute("CREATE TABLE t (x)")
    setup.close()
    assert not Path(f"{path}-wal").exists()
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        assert holder.stdout.readline() == "open\n"
        assert Path(f"{path}-wal").stat().st_size == 0
        # What an open refused at this moment does with the companions it found absent.
        connection._remove_empty(path, companions(path))
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "committed\n"
        reader = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            rows = reader.execute("SELECT count(*) FROM t").fetchall()[0][0]
        except apsw.Error as exc:
            rows = repr(exc)
        reader.close()
        holder.communicate("close\n")
    assert rows == 100
