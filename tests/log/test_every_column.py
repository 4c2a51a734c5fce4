"""Every column accounted for: a single-cell edit or a row deletion anywhere in the file is
detected by a whole verify (docs/FORMAT.md §4 says how, column by column)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger
from agentledger import gc as collector

from ..activity.activity_testkit import record_every_modality
from ..bernstein.bernstein_testkit import SMALL as BERNSTEIN_WORKDIR
from .logkit import build, raw, verify

TEAM = """
[[roles]]
role = "dev"
agent_kind = "coding"
"""


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A ledger with a row in every table: runs of every modality, a team, a bernstein
    import, a prune receipt and a sparse checkpoint history. Returns (ledger, key home)."""
    root = tmp_path_factory.mktemp("sample")
    home = root / "keys"
    path = root / "ledger.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTLEDGER_HOME", str(home))
        from agentledger.cli import main

        assert main(["--ledger", str(path), "import", "bernstein", str(BERNSTEIN_WORKDIR)]) == 0
        team = root / "team.toml"
        team.write_text(TEAM)
        assert main(["--ledger", str(path), "team", "load", str(team)]) == 0
        with Ledger.open(path) as ledger:
            build(ledger, runs=2, entries=3)
            record_every_modality(ledger)
            ledger.blobs.put(b"garbage nobody references")
            assert collector.collect(ledger, grace_s=0).removed
            ledger.run("run-0").append("step", {"after": "gc"})
            # The imported workdir's own verdicts (bernstein's checks) are what they are.
            assert {d.check for d in ledger.verify().workspace} == set(), (
                "the native records verify clean"
            )
    return path, home


def _findings(path: Path) -> set[tuple[object, ...]]:
    report = verify(path)
    found: set[tuple[object, ...]] = {
        (d.run_id, d.seq, d.check, d.expected, d.actual) for d in report.workspace
    }
    for run in report.runs:
        found |= {(d.run_id, d.seq, d.check, d.expected, d.actual) for d in run.divergences}
    return found


def _cells(path: Path) -> list[tuple[str, str, int]]:
    """``(table, column, rowid)`` of the first row of every table."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]
        cells = []
        for table in tables:
            without_rowid = (
                "WITHOUT ROWID"
                in conn.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (table,))
                .fetchall()[0][0]
                .upper()
            )
            if without_rowid:
                continue  # entries: its columns are covered by the journal tests
            first = conn.execute(f"SELECT rowid FROM {table} ORDER BY rowid LIMIT 1").fetchall()
            if not first:
                continue
            for column in conn.execute("SELECT name FROM pragma_table_info(?)", (table,)):
                if column[0] == "id":
                    continue  # a row's identity (its rowid), not data: FORMAT.md §4
                cells.append((table, column[0], first[0][0]))
        return cells
    finally:
        conn.close()


def _changed(value: Any) -> Any:
    if isinstance(value, bool | int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value[:-1] + ("0" if value[-1:] != "0" else "1") if value else "x"
    if isinstance(value, bytes):
        return value[:-1] + bytes([value[-1] ^ 1]) if value else b"\x00"
    return 0


def test_the_sample_has_a_row_in_every_table(sample: tuple[Path, Path]) -> None:
    path, _ = sample
    tables = {table for table, _, _ in _cells(path)}
    assert {"runs", "blobs", "blob_chunks", "audit_log", "team_roles", "checkpoints",
            "prune_receipts", "log_tiles", "log_state", "ledger_meta", "bernstein_files",
            "bernstein_imports", "bernstein_runs"} <= tables  # fmt: skip


def _detected(
    sample: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sql: str,
    params: tuple[Any, ...],
) -> bool | None:
    """Whether a whole verify of a copy edited by ``sql`` finds anything the untouched
    sample does not (None: SQLite refuses the edit itself)."""
    path, home = sample
    copy = tmp_path / "copy.db"
    shutil.copy(path, copy)
    monkeypatch.setenv("AGENTLEDGER_HOME", str(home))
    try:
        with raw(copy) as conn:
            conn.execute("PRAGMA foreign_keys = OFF")
            conn.execute(sql, params)
    except apsw.ConstraintError:
        return None  # SQLite itself refuses this edit
    return _findings(copy) != _findings(path)


def test_every_single_cell_edit_is_detected(
    sample: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = sample
    missed, tried = [], 0
    for table, column, rowid in _cells(path):
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        value = conn.execute(f'SELECT "{column}" FROM {table} WHERE rowid = ?', (rowid,))
        value = value.fetchall()[0][0]
        conn.close()
        detected = _detected(
            sample,
            tmp_path,
            monkeypatch,
            f'UPDATE {table} SET "{column}" = ? WHERE rowid = ?',
            (_changed(value), rowid),
        )
        if detected is None:
            continue
        tried += 1
        if not detected:
            missed.append(f"{table}.{column}")
    assert tried > 30
    assert missed == [], "\n".join(missed)


def test_every_row_deletion_is_detected(
    sample: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = sample
    missed = []
    for table in sorted({table for table, _, _ in _cells(path)}):
        rowid = next(r for t, _, r in _cells(path) if t == table)
        detected = _detected(
            sample, tmp_path, monkeypatch, f"DELETE FROM {table} WHERE rowid = ?", (rowid,)
        )
        if not detected:
            missed.append(table)
    assert missed == [], "\n".join(missed)
