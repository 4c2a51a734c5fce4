"""The bernstein verify's pool threads read the store through reader connections of their
own (``rust/python/src/sqlite/reader.rs``), kept only when they see the snapshot of the
caller's read transaction. The reference is every read through the caller's connection,
one at a time (what ``AGENTLEDGER_PORTABLE=1`` forces): both must give the same verdicts,
on a clean ledger and on one whose stored blobs were damaged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

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


def test_readers_open_only_inside_a_read_transaction_that_nothing_wrote_after(
    tmp_path: Path,
) -> None:
    path = _imported(tmp_path)
    with Ledger.open(path, readonly=True) as ledger:
        conn = ledger.db.conn
        assert _core.sqlite_readers(native.handle(conn), 2) == 0  # no transaction
        with ledger.db.snapshot() as snap:
            snap.execute("SELECT count(*) FROM entries").fetchall()
            assert _core.sqlite_readers(native.handle(snap), 2) == 2
            # Another process's commit after the snapshot began: a reader would see it.
            writer = apsw.Connection(str(path))
            writer.execute("PRAGMA journal_mode = WAL")
            writer.execute("UPDATE log_state SET size = size + 1")
            writer.close()
            assert _core.sqlite_readers(native.handle(snap), 2) == 0
        with ledger.db.snapshot() as snap:
            snap.execute("SELECT count(*) FROM entries").fetchall()
            assert _core.sqlite_readers(native.handle(snap), 3) == 3
    memory = apsw.Connection(":memory:")
    memory.execute("BEGIN; CREATE TABLE t (x)")
    assert _core.sqlite_readers(native.handle(memory), 2) == 0


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
