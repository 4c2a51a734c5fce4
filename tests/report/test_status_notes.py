"""The `runs` status notes belong to one file's contents: a copy that differs never reads
another's notes, and the demo's own verify fills them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from agentledger import Ledger


def _statuses(cli: Any, path: Path) -> dict[str, str]:
    listed = cli("runs", "--jsonl", ledger=path)
    assert listed.code == 0, listed.err
    return {item["run"]: item["status"] for item in map(json.loads, listed.out.splitlines())}


def _edit_step(path: Path, run_id: str, seq: int) -> None:
    """Change an entry's bytes in place, as an attacker with the file would (heads kept)."""
    with Ledger.open(path) as ledger, ledger.db.write() as conn:
        raw = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = ? AND seq = ?", (run_id, seq)
        ).fetchall()[0][0]
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = ?",
            (raw.replace(b'"n":1', b'"n":7'), run_id, seq),
        )


def test_verifying_a_clean_backup_never_marks_the_tampered_original_clean(
    tmp_path: Path, cli: Any
) -> None:
    original, backup = tmp_path / "ws" / "ledger.db", tmp_path / "backup" / "ledger.db"
    with Ledger.open(original) as ledger:
        ledger.run("r").append_many([("step", {"n": n}) for n in range(3)])
    backup.parent.mkdir()
    shutil.copyfile(original, backup)
    _edit_step(original, "r", 1)
    assert cli("verify", ledger=original).code == 2
    assert _statuses(cli, original) == {"r": "diverged"}
    assert cli("verify", ledger=backup).code == 0
    assert _statuses(cli, backup) == {"r": "clean"}
    assert _statuses(cli, original) == {"r": "diverged"}


def test_notes_of_other_contents_at_the_same_path_are_not_shown(tmp_path: Path, cli: Any) -> None:
    path, older = tmp_path / "ws" / "ledger.db", tmp_path / "older.db"
    with Ledger.open(path) as ledger:
        ledger.run("a").append_many([("step", {"n": n}) for n in range(3)])
    shutil.copyfile(path, older)
    with Ledger.open(path) as ledger:
        ledger.run("b").append("step", {"n": 0})
    assert cli("verify", ledger=path).code == 0
    assert _statuses(cli, path) == {"a": "clean", "b": "clean"}
    shutil.copyfile(older, path)  # run a's head is the same; the file's contents are not
    assert _statuses(cli, path) == {"a": "unverified"}


def test_the_demos_verify_fills_the_notes(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "demo" / "ledger.db"
    done = cli("demo", "--runs", "10", "--json", ledger=path)
    assert done.code == 0, done.err
    demo = done.json()
    statuses = _statuses(cli, path)
    assert "unverified" not in statuses.values()
    diverged = {run for run, status in statuses.items() if status == "diverged"}
    assert diverged == {run["run"] for run in demo["report"]["failures"]}


def test_a_ledger_id_that_is_a_path_never_places_the_notes(tmp_path: Path, cli: Any) -> None:
    # The notes file was named after the id the file holds: an id of "../../x" made
    # `verify` (which writes nothing of the ledger's) create a folder and an SQLite file
    # outside the cache, wherever the id pointed, and `runs` attach it.
    path = tmp_path / "ws" / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.run("r").append("step", {"n": 1})
    with Ledger.open(path) as ledger, ledger.db.write() as conn:
        conn.execute("UPDATE ledger_meta SET value = '../../escaped/notes' WHERE key = 'ledger_id'")
    assert cli("verify", ledger=path).code == 2
    assert not (tmp_path / "escaped").exists()
    assert _statuses(cli, path) == {"r": "unverified"}
