"""The bernstein verify's pool threads read the store through reader connections of their
own (``rust/python/src/sqlite/reader.rs``), kept only when they see the snapshot of the
caller's read transaction. The reference is every read through the caller's connection,
one at a time (what ``AGENTLEDGER_PORTABLE=1`` forces): both must give the same verdicts,
on a clean ledger and on one whose stored blobs were damaged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger, _core
from agentledger.bernstein import import_workdir
from agentledger.storage import native

from ..verify_process import verify_json
from .bernstein_testkit import SHAPES, SHAPES_SIGNERS, copy_workdir, private_key_file


def _imported(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, copy_workdir(SHAPES, tmp_path / "wd"))
    return path


def _readers(ledger: Ledger, conn: apsw.Connection, mark: bytes | None) -> int:
    return _core.sqlite_readers(native.handle(conn), 2, mark)


def _forge_in_place(path: Path) -> None:
    """Another connection commits new bytes for a stored blob in place: no row count, row
    id or log entry changes."""
    writer = apsw.Connection(str(path))
    writer.execute(
        "UPDATE blob_chunks SET data = CAST(x'00' || data AS BLOB)"
        " WHERE rowid = (SELECT min(rowid) FROM blob_chunks)"
    )
    writer.close()


def test_readers_open_only_while_the_mark_of_the_snapshot_holds(tmp_path: Path) -> None:
    path = _imported(tmp_path)
    with Ledger.open(path, readonly=True) as ledger:
        conn = ledger.db.conn
        assert _core.sqlite_readers(native.handle(conn), 2, b"") == 0  # no transaction
        assert ledger.db.read_mark() is None
        with ledger.db.snapshot() as snap:
            mark = ledger.db.read_mark()
            assert mark is not None
            assert _readers(ledger, snap, mark) == 2
            assert _readers(ledger, snap, None) == 0  # nothing proves what they would see
            # Another process's commit after the snapshot began: a reader would see it.
            writer = apsw.Connection(str(path))
            writer.execute("UPDATE log_state SET size = size + 1")
            writer.close()
            assert _readers(ledger, snap, mark) == 0
        with ledger.db.snapshot() as snap:
            mark = ledger.db.read_mark()
            assert _core.sqlite_readers(native.handle(snap), 3, mark) == 3
            # A commit that rewrites a blob in place moves no count, row id or log entry.
            _forge_in_place(path)
            assert _readers(ledger, snap, mark) == 0
        with ledger.db.snapshot() as snap:
            snap.execute("SELECT count(*) FROM entries").fetchall()
            _forge_in_place(path)
            # Asked for after a commit: the snapshot may be either side of it.
            assert ledger.db.read_mark() is None
    memory = apsw.Connection(":memory:")
    memory.execute("BEGIN; CREATE TABLE t (x)")
    assert _core.sqlite_readers(native.handle(memory), 2, b"") == 0


class _Undo(Exception):
    """Raised to roll a write transaction back."""


def test_a_write_transaction_has_readers_only_until_it_changes_something(
    tmp_path: Path,
) -> None:
    path = _imported(tmp_path)
    change = "UPDATE blobs SET chunk_size = chunk_size WHERE rowid = 1"
    with Ledger.open(path) as ledger:
        with pytest.raises(_Undo), ledger.db.write() as conn:
            mark = ledger.db.read_mark()
            assert mark is not None
            assert _readers(ledger, conn, mark) == 2
            conn.execute(change)
            # Its own change, not committed: a reader would not see it.
            assert _readers(ledger, conn, mark) == 0
            raise _Undo
        with pytest.raises(_Undo), ledger.db.write() as conn:
            conn.execute(change)
            assert ledger.db.read_mark() is None
            raise _Undo
        with pytest.raises(_Undo), ledger.db.write() as conn:
            # A schema change of its own (no row counted): a reader sees another cookie.
            conn.execute("CREATE INDEX blobs_by_size ON blobs (size)")
            assert _readers(ledger, conn, ledger.db.read_mark()) == 0
            raise _Undo
        with ledger.db.write() as conn:
            assert _readers(ledger, conn, ledger.db.read_mark()) == 2


def test_in_rollback_journal_mode_the_snapshots_lock_keeps_writers_out(tmp_path: Path) -> None:
    path = _imported(tmp_path)
    conn = apsw.Connection(str(path))
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchall() == [("delete",)]
    conn.close()
    with Ledger.open(path, readonly=True) as ledger, ledger.db.snapshot() as snap:
        mark = ledger.db.read_mark()
        assert _readers(ledger, snap, mark) == 2
        # No -shm to compare: the snapshot's shared lock is what keeps the state still.
        writer = apsw.Connection(str(path))
        with pytest.raises(apsw.BusyError):
            writer.execute("UPDATE blob_chunks SET data = data WHERE rowid = 1")
        writer.close()
        assert _readers(ledger, snap, mark) == 2


def test_a_verify_reads_beside_its_connection_when_nothing_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the test below relies on: with no commit meanwhile, the whole verify's blob
    # pass and its bernstein check both get a mark that opens readers.
    from agentledger.bernstein import verifier
    from agentledger.verify import VerifyOptions, bernstein_runs, blobs

    path = _imported(tmp_path)
    seen: dict[str, object] = {}
    rehash, check = blobs.rehash_beside, verifier.check_ledger

    def rehash_spy(conn: apsw.Connection, work: Any, mark: bytes | None) -> Any:
        rehashed, found = rehash(conn, work, mark)
        seen["rehashed beside"] = rehashed is not None
        return rehashed, found

    def check_spy(conn: apsw.Connection, *args: Any, mark: bytes | None, **kw: Any) -> Any:
        seen["readers"] = _core.sqlite_readers(native.handle(conn), 2, mark)
        return check(conn, *args, mark=mark, **kw)

    monkeypatch.setattr(blobs, "rehash_beside", rehash_spy)
    monkeypatch.setattr(bernstein_runs, "check_ledger", check_spy)
    _report(path, VerifyOptions(jobs=2))
    assert seen == {"rehashed beside": True, "readers": 2}


def test_a_commit_during_a_verify_leaves_its_verdicts_those_of_its_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between the b-tree check and the bernstein check, another process rewrites the
    # stored reports and pages in place. The verify must judge the snapshot it began
    # with: its readers, opened after that commit, are refused, and every read goes
    # through its own connection.
    from agentledger.verify import VerifyOptions, bernstein, engine

    path = _imported(tmp_path)
    clean = _report(path, VerifyOptions(jobs=2))

    def forge(ctx: Any) -> None:
        writer = apsw.Connection(str(path))
        writer.execute(
            "UPDATE blob_chunks SET data = CAST(x'7b' || data AS BLOB) WHERE digest IN"
            " (SELECT digest FROM bernstein_files WHERE kind = 'cas')"
        )
        assert writer.changes() > 0
        writer.close()

    at = engine.CHECKS.index(bernstein.check_bernstein)
    monkeypatch.setattr(engine, "CHECKS", [*engine.CHECKS[:at], forge, *engine.CHECKS[at:]])
    assert _report(path, VerifyOptions(jobs=2)) == clean


def _report(path: Path, options: Any) -> list[tuple[str, list[tuple[str, str, str]]]]:
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify(options=options)
    found = [(d.check, str(d.expected), str(d.actual)) for d in report.workspace]
    runs = [
        (run.run_id, [(d.check, str(d.expected), str(d.actual)) for d in run.divergences])
        for run in report.runs
    ]
    return [("workspace", found), *runs]


def _verify(
    path: Path, tmp_path: Path, *, portable: bool, strict: bool
) -> tuple[int, dict[str, Any]]:
    args = ["--jobs", "2"]
    if strict:
        key = private_key_file(SHAPES, tmp_path / "audit.key")
        args += ["--audit-key", str(key)]
        args += [arg for signer in SHAPES_SIGNERS for arg in ("--trust", signer)]
    else:
        args += ["--compat", "bernstein"]
    return verify_json(path, tmp_path / "home", *args, portable=portable)


def test_verdicts_with_readers_equal_the_one_connection_reference(tmp_path: Path) -> None:
    path = _imported(tmp_path)
    clean: dict[bool, tuple[int, dict[str, Any]]] = {}
    for strict in (False, True):
        clean[strict] = _verify(path, tmp_path, portable=False, strict=strict)
        assert clean[strict] == _verify(path, tmp_path, portable=True, strict=strict)
    # Damage: one stored blob's bytes changed, another's chunks gone.
    with apsw.Connection(str(path)) as conn:
        digests = [
            str(d)
            for (d,) in conn.execute(
                "SELECT b.digest FROM blobs AS b JOIN bernstein_files AS f ON f.digest = b.digest"
                " WHERE f.kind = 'cas' AND b.size > 0 ORDER BY b.digest LIMIT 40"
            )
        ]
        assert len(digests) == 40
        for digest in digests[::4]:
            conn.execute(
                "UPDATE blob_chunks SET data = CAST(x'00' || data AS BLOB)"
                " WHERE digest = ? AND idx = 0",
                (digest,),
            )
        for digest in digests[2::4]:
            conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
    for strict in (False, True):
        fast = _verify(path, tmp_path, portable=False, strict=strict)
        assert fast[1]["findings"] > clean[strict][1]["findings"], "the damage must be seen"
        assert fast == _verify(path, tmp_path, portable=True, strict=strict)
