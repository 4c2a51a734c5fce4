"""The attacker's toolkit against the victim's routine operations (hypothesis).

Random tampering of the ledger file — entries edited, re-chained, deleted, added; the log's
tiles, state and checkpoints rewritten; the archive row; a blob deleted — then the victim's
append, ``checkpoint``, ``archive`` and ``gc`` (each may refuse). A fresh reviewer holding
only the victim's public key must never accept a forged run: whenever its verify of the
ledger or of the archive is clean, every entry there is one the victim wrote.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import apsw
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentledger import Ledger, tiles
from agentledger import archive as archives
from agentledger import gc as collector
from agentledger.checkpoint import take_checkpoint
from agentledger.errors import AgentLedgerError
from agentledger.notes import Checkpoint
from agentledger.verify import VerifyOptions

from .logkit import fix_head, raw, rechain, reforge_log

RUNS = ["run-0", "run-1", "run-2"]

TAMPERS = st.sampled_from(
    [
        "edit-bytes",
        "rechain",
        "rechain+reforge",
        "delete-last",
        "delete-last+fix-head",
        "junk-row",
        "junk-row-at-free-leaf",
        "tile-slot",
        "log-state",
        "delete-checkpoints",
        "archive-row",
        "delete-blob",
        "leaf-swap",
    ]
)


def _tamper(path: Path, action: str, run_id: str, seed: int) -> None:
    """One edit of the file; an edit whose row an earlier one removed does nothing."""
    with raw(path) as conn, contextlib.suppress(IndexError):
        last = conn.execute("SELECT head_seq FROM runs WHERE run_id = ?", (run_id,))
        head = last.fetchall()[0][0]
        seq = seed % (head + 1)
        if action == "edit-bytes":
            data = conn.execute(
                "SELECT bytes FROM entries WHERE run_id = ? AND seq = ?", (run_id, seq)
            ).fetchall()[0][0]
            conn.execute(
                "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = ?",
                (bytes(data).replace(b"step", b"stop"), run_id, seq),
            )
        elif action.startswith("rechain"):
            rechain(conn, run_id, seq, {"forged": seed})
            if action.endswith("reforge"):
                reforge_log(conn)
        elif action.startswith("delete-last"):
            conn.execute("DELETE FROM entries WHERE run_id = ? AND seq = ?", (run_id, head))
            if action.endswith("fix-head"):
                fix_head(conn, run_id)
        elif action.startswith("junk-row"):
            row = conn.execute(
                "SELECT kind, hash, bytes, leaf FROM entries WHERE run_id = ? AND seq = ?",
                (run_id, seq),
            ).fetchall()[0]
            leaf = row[3] if action == "junk-row" else 10_000 + seed
            conn.execute(
                "INSERT OR IGNORE INTO entries (run_id, seq, kind, hash, bytes, leaf) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, 1000 + seed, row[0], row[1], row[2], leaf),
            )
        elif action == "tile-slot":
            stored = bytearray(
                conn.execute("SELECT hashes FROM log_tiles WHERE level = 0 AND idx = 0").fetchall()[
                    0
                ][0]
            )
            slot = seed % 8
            stored[slot * 32 : slot * 32 + 32] = bytes([seed % 256]) * 32
            conn.execute(
                "UPDATE log_tiles SET hashes = ? WHERE level = 0 AND idx = 0", (bytes(stored),)
            )
        elif action == "log-state":
            size = conn.execute("SELECT size FROM log_state").fetchall()[0][0]
            frontier = b"".join(tiles.TileReader(conn).frontier(max(size - 1, 0)))
            conn.execute("UPDATE log_state SET size = ?, frontier = ?", (size - 1, frontier))
        elif action == "delete-checkpoints":
            if seed % 2:
                conn.execute("DELETE FROM checkpoints WHERE id % 3 = ?", (seed % 3,))
            else:
                conn.execute("DELETE FROM checkpoints")
        elif action == "archive-row":
            conn.execute("INSERT OR IGNORE INTO ledger_meta (key, value) VALUES ('archive', '{}')")
        elif action == "delete-blob":
            conn.execute("DELETE FROM blob_chunks")
            conn.execute("DELETE FROM blobs")
        elif action == "leaf-swap":
            a, b = conn.execute("SELECT run_id, seq FROM entries ORDER BY leaf LIMIT 2").fetchall()
            conn.execute("UPDATE entries SET leaf = -leaf - 1 WHERE run_id = ? AND seq = ?", a)
            conn.execute(
                "UPDATE entries SET leaf = (SELECT -leaf - 1 FROM entries WHERE run_id = ? "
                "AND seq = ?) WHERE run_id = ? AND seq = ?",
                (*a, *b),
            )


def _entries(path: Path) -> set[tuple[str, int, bytes]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {
            (run_id, seq, bytes(data))
            for run_id, seq, data in conn.execute("SELECT run_id, seq, bytes FROM entries")
        }
    finally:
        conn.close()


def _signed_roots(path: Path, key: str) -> dict[int, set[bytes]]:
    """Size -> roots of every workspace-log checkpoint in the file signed by ``key``."""
    found: dict[int, set[bytes]] = {}
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        notes = [row[0] for row in conn.execute("SELECT note FROM checkpoints")]
    finally:
        conn.close()
    for text in notes:
        with contextlib.suppress(AgentLedgerError):
            note = Checkpoint.parse(text)
            if not note.archive and note.signed_by([key]) is not None:
                found.setdefault(note.size, set()).add(note.root)
    return found


def _reviewer_accepts(path: Path, key: str, home: Path) -> bool:
    """A fresh reviewer: no memory of this ledger, the victim's key only."""
    with Ledger.open(path, readonly=True, key_dir=home) as ledger:
        return ledger.verify(options=VerifyOptions(trust=(key,))).code == 0


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# The review's own attacks, always tried; hypothesis explores around them.
@example(tampers=[("delete-checkpoints", "run-0", 0), ("tile-slot", "run-0", 1)])
@example(tampers=[("rechain+reforge", "run-1", 1), ("delete-checkpoints", "run-0", 0)])
@example(tampers=[("delete-last+fix-head", "run-2", 0), ("junk-row", "run-1", 3)])
@example(tampers=[("archive-row", "run-0", 0), ("delete-last+fix-head", "run-0", 0)])
@given(
    tampers=st.lists(
        st.tuples(TAMPERS, st.sampled_from(RUNS), st.integers(0, 255)), min_size=1, max_size=3
    )
)
def test_no_forged_run_is_ever_accepted_under_the_victims_key(
    tampers: list[tuple[str, str, int]],
) -> None:
    work = Path(tempfile.mkdtemp())
    try:
        home, reviewer = work / "victim-home", work / "reviewer-home"
        path = work / "ledger.db"
        with Ledger.open(path, key_dir=home) as ledger:
            evidence = ledger.blobs.put(b"evidence")
            for step in range(4):
                for run_id in RUNS:
                    ledger.run(run_id).append("step", {"n": step, "evidence": evidence})
            key = ledger.keys.install_public_key()
            assert key is not None
        genuine = _entries(path)
        with raw(path) as conn:
            reader = tiles.TileReader(conn)
            genuine_roots = {size: reader.root(size) for size in range(1, len(genuine) + 1)}
        for action, run_id, seed in tampers:
            _tamper(path, action, run_id, seed)
        archive = work / "review.db"
        with Ledger.open(path, key_dir=home) as victim:
            for act in (
                lambda: victim.run("victim").append("step", {"routine": True}),
                lambda: victim.run("run-1").append("step", {"routine": True}),
                lambda: take_checkpoint(victim),
                lambda: archives.write_archive(victim, archive, victim.runs()),
                lambda: collector.collect(victim, grace_s=0),
            ):
                with contextlib.suppress(AgentLedgerError):
                    act()
        written_by_victim = {
            entry for entry in _entries(path) if entry[0] == "victim" or b"routine" in entry[2]
        }
        allowed = genuine | written_by_victim
        # Never signs a forgery: every root the victim signed over the genuine sizes is
        # the genuine one (a forged history root is what a forged ledger is built on).
        for size, roots in _signed_roots(path, key).items():
            if size in genuine_roots:
                assert roots == {genuine_roots[size]}, (tampers, size)
        for candidate in (path, archive):
            if candidate.exists() and _reviewer_accepts(candidate, key, reviewer):
                forged = _entries(candidate) - allowed
                assert not forged, (tampers, candidate.name, sorted(forged)[:2])
    finally:
        shutil.rmtree(work, ignore_errors=True)
