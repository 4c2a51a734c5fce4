"""A ledger written before the workspace log is numbered by the migration, then signed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from agentledger import Ledger, _core
from agentledger.storage.migrations import APPLICATION_ID, migration_scripts

LEDGER_ID = "00112233445566778899aabbccddeeff"


def _schema_2_ledger(path: Path) -> None:
    """What agentledger wrote before schema 3: two runs, no leaves, no checkpoints."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(path))
    with conn:
        for version, sql in migration_scripts():
            if version <= 2:
                conn.execute(sql)
        conn.execute("PRAGMA user_version = 2")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("INSERT INTO ledger_meta VALUES ('ledger_id', ?)", (LEDGER_ID,))
        for ordinal, run_id in enumerate(["b-run", "a-run"], 1):
            prev = _core.genesis_prev(LEDGER_ID, run_id)
            encoded = _core.encode_entries(
                run_id,
                0,
                prev,
                "2026-01-01T00:00:00.000000Z",
                [("step", {"i": i}) for i in range(3)],
            )
            for seq, (raw, digest) in enumerate(encoded):
                conn.execute(
                    "INSERT INTO entries (run_id, seq, kind, hash, bytes) "
                    "VALUES (?, ?, 'step', ?, ?)",
                    (run_id, seq, digest, raw),
                )
            conn.execute(
                "INSERT INTO runs (run_id, ordinal, head_seq, head_hash) VALUES (?, ?, 2, ?)",
                (run_id, ordinal, encoded[-1][1]),
            )
    conn.close()


def test_an_old_ledger_gets_its_log_and_verifies_after_a_checkpoint(
    ledger_path: Path, cli: Any
) -> None:
    _schema_2_ledger(ledger_path)
    first = cli("verify", "--json")
    assert first.code == 2  # numbered, but nothing signed yet
    assert any(d["check"] == "checkpoint.missing" for d in first.json()["workspace"])
    assert cli("checkpoint").code == 0
    assert cli("verify").code == 0
    with Ledger.open(ledger_path) as ledger:
        leaves = ledger.db.conn.execute("SELECT run_id, seq FROM entries ORDER BY leaf").fetchall()
        assert leaves[0] == ("b-run", 0)  # numbered in run order (ordinal), then seq
        ledger.run("a-run").append("step", {"late": True})
    assert cli("verify").code == 0


def test_an_entry_slipped_in_after_the_migration_is_never_adopted(
    ledger_path: Path, cli: Any
) -> None:
    _schema_2_ledger(ledger_path)
    with Ledger.open(ledger_path) as ledger:  # migrates; the log will fold in 6 leaves
        ledger.db.conn.execute("UPDATE entries SET leaf = 6 WHERE run_id = 'a-run' AND seq = 2")
        ledger.db.conn.execute("UPDATE log_state SET backfill = 5")
    assert cli("checkpoint").code == 0
    assert cli("verify").code == 2
