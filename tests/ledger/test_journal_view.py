"""The journal view decisions read: every row re-hashed, chained and matched to its run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger, _core, journal_view
from agentledger.errors import Diverged, ExitCode
from agentledger.journal_view import RunView, read_run


def _ledger(path: Path) -> str:
    with Ledger.open(path) as ledger:
        ledger.run("r").append_many([("a", {"n": 0}), ("b", {"n": 1}), ("c", {"n": 2})])
        ledger.run("s").append("a", {"n": 0})
        return ledger.id


def _edit(path: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    conn = apsw.Connection(str(path))
    try:
        with conn:
            for sql, params in statements:
                conn.execute(sql, params)
    finally:
        conn.close()


def read_run_of(path: Path, ledger_id: str, run_id: str = "r") -> RunView:
    conn = apsw.Connection(str(path))
    try:
        return read_run(conn, ledger_id, run_id)
    finally:
        conn.close()


def _bytes(path: Path, run_id: str, seq: int) -> bytes:
    conn = apsw.Connection(str(path))
    try:
        rows = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = ? AND seq = ?", (run_id, seq)
        ).fetchall()
        return bytes(rows[0][0])
    finally:
        conn.close()


def test_an_intact_run_reads_as_its_bytes_say(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger_id = _ledger(path)
    view = read_run_of(path, ledger_id)
    assert view.problem is None
    assert [(e.seq, e.kind, e.body) for e in view.entries] == [
        (0, "a", {"n": 0}),
        (1, "b", {"n": 1}),
        (2, "c", {"n": 2}),
    ]
    assert [e.seq for e in view.of_kind("b", "c")] == [1, 2]
    assert view.require() is view


def _rehashed(raw: bytes) -> tuple[bytes, bytes]:
    return raw, _core.entry_hash(raw)


TAMPERS: dict[str, tuple[str, int]] = {
    "hash column": ("its stored hash is not the hash of its bytes", 1),
    "bytes re-hashed": ("it does not chain to the entry before it", 2),
    "not canonical": ("its bytes are not a canonical entry", 1),
    "another run's entry": ("its bytes name another run or position", 0),
    "entry deleted": ("expected entry 1 here", 1),
    "kind column": ("its kind column is not its kind", 1),
    "head": ("the run records step 1 as its head", 2),
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_row_that_does_not_verify_stops_the_view_there(tmp_path: Path, tamper: str) -> None:
    path = tmp_path / "l.db"
    ledger_id = _ledger(path)
    where = "WHERE run_id = 'r' AND seq = ?"
    if tamper == "hash column":
        _edit(path, (f"UPDATE entries SET hash = zeroblob(32) {where}", (1,)))
    elif tamper == "bytes re-hashed":
        raw = _bytes(path, "r", 1).replace(b'"n":1', b'"n":7')
        _edit(path, (f"UPDATE entries SET bytes = ?, hash = ? {where}", (*_rehashed(raw), 1)))
    elif tamper == "not canonical":
        raw = _bytes(path, "r", 1).replace(b'"n":1', b'"n": 1')
        _edit(path, (f"UPDATE entries SET bytes = ?, hash = ? {where}", (*_rehashed(raw), 1)))
    elif tamper == "another run's entry":
        raw = _bytes(path, "s", 0)
        _edit(path, (f"UPDATE entries SET bytes = ?, hash = ? {where}", (*_rehashed(raw), 0)))
    elif tamper == "entry deleted":
        _edit(path, (f"DELETE FROM entries {where}", (1,)))
    elif tamper == "kind column":
        _edit(path, (f"UPDATE entries SET kind = 'x' {where}", (1,)))
    else:
        _edit(path, ("UPDATE runs SET head_seq = 1 WHERE run_id = 'r'", ()))
    why, seq = TAMPERS[tamper]
    view = read_run_of(path, ledger_id)
    assert view.problem is not None
    assert view.problem[0] == seq
    assert why in view.problem[1]
    # The entries before the problem are kept; a head that is not the last entry stops
    # nothing but the verdict.
    assert [e.seq for e in view.entries] == list(range(3 if tamper == "head" else seq))
    with pytest.raises(Diverged) as caught:
        view.require()
    assert (caught.value.code, caught.value.exit_code) == ("journal-tampered", ExitCode.DIVERGED)


def test_another_ledgers_run_does_not_chain_here(tmp_path: Path) -> None:
    """Entry 0 chains from the run's genesis, which binds this ledger's id."""
    path = tmp_path / "l.db"
    _ledger(path)
    view = read_run_of(path, "0" * 32)
    assert view.problem == (0, "it does not chain to the entry before it")


def test_rows_this_process_verified_are_read_as_they_were(tmp_path: Path) -> None:
    """Verified once, a row's kind and body are those its bytes had: a cell edited since
    misleads no decision (verify reports the edit)."""
    path = tmp_path / "l.db"
    ledger_id = _ledger(path)
    assert read_run_of(path, ledger_id).problem is None
    _edit(path, ("UPDATE entries SET kind = 'x' WHERE run_id = 'r' AND seq = 1", ()))
    view = read_run_of(path, ledger_id)
    assert view.problem is None
    assert [e.kind for e in view.entries] == ["a", "b", "c"]


def test_a_file_rolled_back_under_the_process_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger_id = _ledger(path)
    older = tmp_path / "older.db"
    shutil.copyfile(path, older)
    with Ledger.open(path) as ledger:
        ledger.run("r").append_many([("d", {"n": 3}), ("e", {"n": 4})])
    assert len(read_run_of(path, ledger_id).entries) == 5
    os.replace(older, path)
    view = read_run_of(path, ledger_id)
    assert view.problem is None
    assert [e.kind for e in view.entries] == ["a", "b", "c"]


def test_the_verified_entries_kept_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.db"
    ledger_id = _ledger(path)  # r: 3 entries, s: 1
    monkeypatch.setattr(journal_view._VERIFIED, "limit", 3)
    journal_view._VERIFIED.clear()
    read_run_of(path, ledger_id, "s")
    read_run_of(path, ledger_id, "r")  # 4 in all: s, read first, is forgotten
    keys = [key[2] for key in journal_view._VERIFIED.views]
    assert (keys, journal_view._VERIFIED.entries) == (["r"], 3)
    with Ledger.open(path) as ledger:
        ledger.run("r").append("d", {"n": 3})
    assert len(read_run_of(path, ledger_id, "r").entries) == 4  # too long to keep: read whole
    assert journal_view._VERIFIED.entries == 0
