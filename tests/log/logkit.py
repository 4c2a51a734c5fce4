"""Helpers for the workspace-log tests: small ledgers, raw SQL tampering, verify without the log."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger, _core, tiles
from agentledger.verify import CHECKS, VerifyOptions, VerifyReport
from agentledger.verify import log as verify_log


def build(ledger: Ledger, runs: int = 3, entries: int = 4) -> list[str]:
    """``runs`` runs of ``entries`` entries, appended interleaved (one transaction each)."""
    names = [f"run-{i}" for i in range(runs)]
    handles = [ledger.run(name) for name in names]
    for step in range(entries):
        for run in handles:
            run.append("step", {"n": step, "run": run.id})
    return names


@contextmanager
def raw(path: Path) -> Iterator[apsw.Connection]:
    """A plain SQLite connection, as someone editing the file would use (one transaction)."""
    conn = apsw.Connection(str(path))
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def edit_newest_note(conn: apsw.Connection, edit: Callable[[list[str]], None]) -> None:
    """``edit`` the lines of the newest stored note, in place (its columns unchanged)."""
    ident, note = conn.execute(
        "SELECT id, note FROM checkpoints ORDER BY size DESC, id DESC LIMIT 1"
    ).fetchall()[0]
    lines = note.split("\n")
    edit(lines)
    conn.execute("UPDATE checkpoints SET note = ? WHERE id = ?", ("\n".join(lines), ident))


def break_newest_signature(path: Path) -> None:
    """Flip a bit of the newest stored note's first signature: the note still parses, its
    text and columns unchanged, but no key's signature verifies over it any more."""

    def flip(lines: list[str]) -> None:
        marker, name, signature = lines[4].split(" ")
        flipped = bytearray(base64.b64decode(signature))
        flipped[-1] ^= 1
        lines[4] = f"{marker} {name} {base64.b64encode(bytes(flipped)).decode()}"

    with raw(path) as conn:
        edit_newest_note(conn, flip)


def grow_newest_note(lines: list[str]) -> None:
    """The note's size one past what it says (its signature then verifies no more)."""
    lines[1] = str(int(lines[1]) + 1)


def rebuild_index(conn: apsw.Connection, index: str, create: str) -> None:
    """Rebuild ``index`` as ``create`` makes it, then put its original SQL text back
    (``PRAGMA writable_schema``): SQLite parses the original and answers from the new b-tree."""
    sql = conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (index,)).fetchall()[0][0]
    conn.execute(f"DROP INDEX {index}")
    conn.execute(create)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_schema SET sql = ? WHERE name = ?", (sql, index))
    conn.execute("PRAGMA writable_schema = OFF")


def verify(path: Path, options: VerifyOptions | None = None) -> VerifyReport:
    with Ledger.open(path) as ledger:
        return ledger.verify(options=options)


def checks(report: VerifyReport) -> set[str]:
    found = {d.check for d in report.workspace}
    for run in report.runs:
        found.update(d.check for d in run.divergences)
    return found


@contextmanager
def without_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Verify as it was before the workspace log: the log's checks removed."""
    with monkeypatch.context() as patch:
        kept = [c for c in CHECKS if c not in (verify_log.plan_log, verify_log.check_log)]
        patch.setattr("agentledger.verify.engine.CHECKS", kept)
        yield


def rechain(conn: apsw.Connection, run_id: str, seq: int, body: dict[str, object]) -> None:
    """What an attacker with the file can do: replace entry ``seq`` of a run with ``body``
    and re-chain every later entry, so that the run's own chain verifies."""
    ledger_id = conn.execute("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
    ledger_id = ledger_id.fetchall()[0][0]
    rows = conn.execute(
        "SELECT seq, kind, bytes, leaf FROM entries WHERE run_id = ? AND seq >= ? ORDER BY seq",
        (run_id, seq),
    ).fetchall()
    before = conn.execute(
        "SELECT hash FROM entries WHERE run_id = ? AND seq = ?", (run_id, seq - 1)
    ).fetchall()
    prev = "blake3:" + before[0][0].hex() if before else _core.genesis_prev(ledger_id, run_id)
    items = [(kind, json.loads(raw)["body"]) for _, kind, raw, _ in rows]
    items[0] = (items[0][0], body)
    encoded = _core.encode_entries(run_id, seq, prev, "2026-01-01T00:00:00.000000Z", items)
    for (number, _, _, _), (raw, digest) in zip(rows, encoded, strict=True):
        conn.execute(
            "UPDATE entries SET bytes = ?, hash = ? WHERE run_id = ? AND seq = ?",
            (raw, digest, run_id, number),
        )
    conn.execute("UPDATE runs SET head_hash = ? WHERE run_id = ?", (encoded[-1][1], run_id))


def reforge_log(conn: apsw.Connection) -> None:
    """Recompute the whole log (tiles and state) from the entries as they are now."""
    rows = conn.execute("SELECT run_id, seq, hash FROM entries ORDER BY leaf").fetchall()
    for leaf, (run_id, seq, _) in enumerate(rows):
        conn.execute(
            "UPDATE entries SET leaf = ? WHERE run_id = ? AND seq = ?", (leaf, run_id, seq)
        )
    leaves = [tiles.leaf_hash(_core.log_leaf(r, s, h)) for r, s, h in rows]
    conn.execute("DELETE FROM log_tiles")
    tiles.append(conn, 0, b"".join(leaves))
    frontier = b"".join(tiles.TileReader(conn).frontier(len(leaves)))
    conn.execute("UPDATE log_state SET size = ?, frontier = ?", (len(leaves), frontier))


def fix_head(conn: apsw.Connection, run_id: str) -> None:
    """Make the runs table agree with the entries left, as a careful tamperer would."""
    conn.execute(
        "UPDATE runs SET head_seq = (SELECT coalesce(max(seq), -1) FROM entries e "
        "WHERE e.run_id = runs.run_id), head_hash = (SELECT hash FROM entries e "
        "WHERE e.run_id = runs.run_id ORDER BY seq DESC LIMIT 1) WHERE run_id = ?",
        (run_id,),
    )


def retype_rows(
    path: Path, tables: tuple[str, ...], *edits: tuple[str, tuple[object, ...]]
) -> None:
    """Apply ``edits`` to ``tables`` as a damaged file holds them (a NULL size, a text
    hash: a flipped serial type): their schema loosened for the edits (no types, not
    STRICT), then its own SQL text put back, so that the schema lock sees nothing."""
    import re

    with raw(path) as conn:
        defined = dict(
            conn.execute(
                "SELECT name, sql FROM sqlite_schema "
                "WHERE name IN (SELECT value FROM json_each(?))",
                (json.dumps(list(tables)),),
            )
        )
        conn.execute("PRAGMA writable_schema = ON")
        for name, sql in defined.items():
            loose = re.sub(r"\b(?:TEXT|INTEGER|BLOB)(\s+)NOT NULL", r"ANY\1", sql)
            loose = loose.replace(") STRICT, WITHOUT ROWID", ") WITHOUT ROWID")
            loose = loose.replace(") STRICT", ")")
            conn.execute("UPDATE sqlite_schema SET sql = ? WHERE name = ?", (loose, name))
    with raw(path) as conn:
        for statement, params in edits:
            conn.execute(statement, params)
        conn.execute("PRAGMA writable_schema = ON")
        for name, sql in defined.items():
            conn.execute("UPDATE sqlite_schema SET sql = ? WHERE name = ?", (sql, name))
