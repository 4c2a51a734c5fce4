"""A ledger written before the workspace log is numbered by the migration, then signed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from agentledger import Ledger, _core, tiles
from agentledger.storage.migrations import APPLICATION_ID, migration_scripts

from .logkit import fix_head

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


def test_an_old_ledger_is_upgraded_by_a_writer_and_signed_only_when_adopted(
    ledger_path: Path, cli: Any
) -> None:
    _schema_2_ledger(ledger_path)
    before = ledger_path.read_bytes()
    refused = cli("verify", "--json")
    assert refused.code == 65  # verify never migrates: an old schema is refused, untouched
    assert "schema 2" in refused.err
    assert ledger_path.read_bytes() == before
    assert cli("checkpoint").code == 2  # nothing vouches for its entries: never signed
    first = cli("verify", "--json")  # the refused writer still upgraded the file
    assert first.code == 2
    assert {d["check"] for d in first.json()["workspace"]} == {"checkpoint.missing"}
    assert cli("checkpoint", "--adopt").code == 0
    assert cli("verify").code == 0
    with Ledger.open(ledger_path) as ledger:
        leaves = ledger.db.conn.execute("SELECT run_id, seq FROM entries ORDER BY leaf").fetchall()
        assert leaves[0] == ("b-run", 0)  # numbered in run order (ordinal), then seq
        ledger.run("a-run").append("step", {"late": True})
    assert cli("verify").code == 0


def test_adopting_is_refused_once_this_install_vouched_for_the_ledger(
    ledger_path: Path, cli: Any
) -> None:
    _schema_2_ledger(ledger_path)
    cli("checkpoint")
    assert cli("checkpoint", "--adopt").code == 0
    with apsw.Connection(str(ledger_path)) as conn:  # an entry cut, the whole log re-forged
        conn.execute("DELETE FROM entries WHERE run_id = 'a-run' AND seq = 2")
        fix_head(conn, "a-run")
        leaves = [
            tiles.leaf_hash(_core.log_leaf(run, seq, h))
            for run, seq, h in conn.execute("SELECT run_id, seq, hash FROM entries ORDER BY leaf")
        ]
        conn.execute("DELETE FROM log_tiles")
        tiles.append(conn, 0, b"".join(leaves))
        frontier = b"".join(tiles.TileReader(conn).frontier(len(leaves)))
        conn.execute("UPDATE log_state SET size = ?, frontier = ?", (len(leaves), frontier))
        conn.execute("DELETE FROM checkpoints")
    assert cli("checkpoint", "--adopt").code == 2  # this install signed 6 entries, not these
    assert cli("checkpoint").code == 2
    report = cli("verify", "--json")
    assert report.code == 2
    assert "log.rollback" in {d["check"] for d in report.json()["workspace"]}
