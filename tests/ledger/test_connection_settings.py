"""What every connection agentledger opens on a ledger is configured with, writable or not."""

from __future__ import annotations

import gc
import os
import weakref
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger


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
