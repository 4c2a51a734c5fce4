"""A whole verify re-hashes every blob on a reader of its own while SQLite checks the
b-trees on the verify's connection (``blobs.rehash_beside``). The reference is the same
pass on the verify's connection, after the check (what ``AGENTLEDGER_PORTABLE=1``, or a
file no reader can be opened on, gives): both must find the same, blob by blob."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import Ledger, _core
from agentledger.cas import ALL_CHUNKS
from agentledger.storage import btree_check, native

from ..verify_process import verify_json
from .test_tamper import CASES, build

BLOB_CASES = sorted(case for case in CASES if case.startswith("blob"))


def _damaged(path: Path) -> None:
    """Every blob edit of the tamper cases at once: each blob finding kind is present."""
    build(path)
    for case in BLOB_CASES:
        edit, _ = CASES[case]
        if case != "blob_chunks.digest":  # it would move the chunk the others damage
            edit(path)


def test_the_pass_beside_finds_what_the_pass_on_the_connection_finds(ledger_path: Path) -> None:
    _damaged(ledger_path)
    with Ledger.open(ledger_path, readonly=True) as ledger, ledger.db.snapshot() as snap:
        mark = ledger.db.read_mark()
        blobs, problems = _core.verify_blobs_beside(
            native.handle(snap), ALL_CHUNKS, lambda: btree_check.btree_problems(snap), mark
        )
        assert problems == []
        assert blobs is not None, "a reader opens inside a read transaction, with its mark"
        assert blobs == _core.verify_blobs(native.handle(snap), ALL_CHUNKS, [()])
        checked, findings = blobs
        assert checked >= 3
        assert {check for _, check, _, _ in findings} >= {"blob.digest", "blob.size"}


def test_without_a_reader_nothing_is_rehashed_and_the_work_still_runs(ledger_path: Path) -> None:
    build(ledger_path)
    with Ledger.open(ledger_path, readonly=True) as ledger:
        conn = ledger.db.conn  # no read transaction: a reader could see another state
        assert _core.verify_blobs_beside(native.handle(conn), ALL_CHUNKS, lambda: 7) == (None, 7)
        with ledger.db.snapshot() as snap:  # no mark: nothing proves what a reader sees
            assert _core.verify_blobs_beside(native.handle(snap), ALL_CHUNKS, lambda: 8) == (
                None,
                8,
            )


def test_an_error_beside_stops_the_pass_and_is_raised(ledger_path: Path) -> None:
    build(ledger_path)
    with Ledger.open(ledger_path, readonly=True) as ledger, ledger.db.snapshot() as snap:
        with pytest.raises(ZeroDivisionError):
            _core.verify_blobs_beside(
                native.handle(snap), ALL_CHUNKS, lambda: 1 / 0, ledger.db.read_mark()
            )
        # The connection is free again, and the pass can be made.
        assert _core.verify_blobs(native.handle(snap), ALL_CHUNKS, [()])[0] >= 3


def _verify(path: Path, home: Path, portable: bool) -> tuple[int, dict[str, Any]]:
    return verify_json(path, home, portable=portable)


def test_whole_verify_reports_equal_the_reference(ledger_path: Path, tmp_path: Path) -> None:
    _damaged(ledger_path)
    beside = _verify(ledger_path, tmp_path / "home", portable=False)
    reference = _verify(ledger_path, tmp_path / "home", portable=True)
    assert beside == reference
    code, report = beside
    assert code == 2
    found = {d["check"] for d in report["workspace"]}
    assert found >= {"blob.digest", "blob.size", "blob.chunk_size"}


def test_a_page_the_pass_cannot_read_leaves_the_b_tree_finding_to_speak(
    ledger_path: Path, tmp_path: Path
) -> None:
    # A blob's overflow page pointing nowhere: reading the blob fails (SQLITE_CORRUPT), and
    # SQLite's check names the b-tree. The pass beside must not end the verify: the
    # report is the check's, as when the pass ran after it.
    import random

    import apsw

    data = random.Random(5).randbytes(300_000)
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {"n": 1})
        ledger.blobs.put(data)
    conn = apsw.Connection(str(ledger_path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = conn.execute("PRAGMA page_size").fetchall()[0][0]
    conn.close()
    raw = bytearray(ledger_path.read_bytes())
    start = raw.find(data[100_000:100_032])
    start -= start % page
    raw[start : start + 4] = (0x7FFFFF).to_bytes(4, "big")  # the next overflow page
    ledger_path.write_bytes(bytes(raw))
    beside = _verify(ledger_path, tmp_path / "home", portable=False)
    assert beside == _verify(ledger_path, tmp_path / "home", portable=True)
    code, report = beside
    assert code == 2
    assert {d["check"] for d in report["workspace"]} == {"schema.btree"}


@pytest.mark.parametrize("jobs", [1, 2])
def test_one_job_rehashes_on_the_verify_s_own_thread(
    ledger_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    # `--jobs 1` asks for one thread: the pass then runs after SQLite's check, on the
    # verify's connection, and finds the same.
    from agentledger.verify import VerifyOptions, blobs

    beside = blobs.rehash_beside
    calls: list[int] = []

    def counted(conn: Any, work: Any, mark: bytes | None) -> Any:
        calls.append(1)
        return beside(conn, work, mark)

    monkeypatch.setattr(blobs, "rehash_beside", counted)
    build(ledger_path)
    with Ledger.open(ledger_path, readonly=True) as ledger:
        report = ledger.verify(options=VerifyOptions(jobs=jobs))
    assert report.code == 0
    assert report.blobs_checked >= 3
    assert calls == ([] if jobs == 1 else [1])


# Commits another process may make while a verify's snapshot is open: none moves a row
# count or the log but the last, and the first two change bytes a re-hash would see.
_COMMITS = {
    "forge a chunk": "UPDATE blob_chunks SET data = CAST(x'00' || data AS BLOB)"
    " WHERE rowid = (SELECT min(rowid) FROM blob_chunks)",
    "forge another": "UPDATE blob_chunks SET data = CAST(data || x'00' AS BLOB)"
    " WHERE rowid = (SELECT max(rowid) FROM blob_chunks)",
    "touch the log": "UPDATE log_state SET size = size",
    "add a blob": "INSERT INTO blobs (digest, size, chunk_size)"
    " VALUES ('sha256:' || hex(randomblob(32)), 0, 1048576)",
}


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before_mark=st.lists(st.sampled_from(sorted(_COMMITS)), max_size=2),
    after_mark=st.lists(st.sampled_from(sorted(_COMMITS)), max_size=2),
)
def test_a_reader_that_opens_sees_exactly_the_snapshot_whatever_commits_meanwhile(
    tmp_path_factory: pytest.TempPathFactory, before_mark: list[str], after_mark: list[str]
) -> None:
    # The proof's soundness, from outside: whenever the pass beside gets a reader, what
    # it re-hashed is what the verify's own connection re-hashes in its snapshot, however
    # other connections committed before the mark was asked for or after.
    path = tmp_path_factory.mktemp("race") / "ledger.db"
    build(path)

    def commit(names: list[str]) -> None:
        for name in names:
            writer = apsw.Connection(str(path))
            writer.execute(_COMMITS[name])
            writer.close()

    with Ledger.open(path, readonly=True) as ledger, ledger.db.snapshot() as snap:
        snap.execute("SELECT count(*) FROM blobs").fetchall()  # the snapshot begins here
        commit(before_mark)
        mark = ledger.db.read_mark()
        commit(after_mark)
        beside, own = _core.verify_blobs_beside(
            native.handle(snap),
            ALL_CHUNKS,
            lambda: _core.verify_blobs(native.handle(snap), ALL_CHUNKS, [()]),
            mark,
        )
        if beside is not None:
            assert beside == own
        # Nothing committed: the reader is had, and agrees.
        if not before_mark and not after_mark:
            assert beside == own
