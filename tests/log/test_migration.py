"""Ledgers of older schemas: numbered by the migration, their log rebuilt as a C2SP tree
(schema 6), and signed only under the install's memory rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger, _core, tiles
from agentledger import log as wslog
from agentledger.keys import KeyStore
from agentledger.notes import Checkpoint, sign
from agentledger.signer_memory import SignerMemory
from agentledger.storage.migrations import APPLICATION_ID, migrate, migration_scripts

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


OLD_TIME = "2026-06-01T00:00:00.000000Z"


def _schema_5_ledger(path: Path, home: Path) -> tuple[str, bytes]:
    """What agentledger wrote at schema 5: two runs appended interleaved into a BLAKE3 log,
    its checkpoint signed by this install (which remembers it). Returns the exported old
    note and the old root."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(path))
    order = [("b-run", 0), ("a-run", 0), ("b-run", 1), ("a-run", 1), ("b-run", 2), ("a-run", 2)]
    with conn:
        migrate(conn, 0, 5)
        conn.execute("PRAGMA user_version = 5")
        conn.execute("INSERT INTO ledger_meta VALUES ('ledger_id', ?)", (LEDGER_ID,))
        chains = {
            run: _core.encode_entries(
                run,
                0,
                _core.genesis_prev(LEDGER_ID, run),
                OLD_TIME,
                [("step", {"i": i}) for i in range(3)],
            )
            for run in ("b-run", "a-run")
        }
        old_tree = _core.IncrementalMerkleTree(hash="blake3")
        hashes = []
        for leaf, (run, seq) in enumerate(order):
            raw, digest = chains[run][seq]
            conn.execute(
                "INSERT INTO entries (run_id, seq, kind, hash, bytes, leaf) "
                "VALUES (?, ?, 'step', ?, ?, ?)",
                (run, seq, digest, raw, leaf),
            )
            old_leaf = _core.legacy_log_leaf(run, seq, digest)
            old_tree.append(old_leaf)
            hashes.append(_core.merkle_root([old_leaf], hash="blake3"))
        for ordinal, run in enumerate(("b-run", "a-run"), 1):
            conn.execute(
                "INSERT INTO runs (run_id, ordinal, head_seq, head_hash) VALUES (?, ?, 2, ?)",
                (run, ordinal, chains[run][2][1]),
            )
        conn.execute(
            "INSERT INTO log_tiles (level, idx, hashes) VALUES (0, 0, ?)",
            (b"".join(hashes).ljust(tiles.TILE_BYTES, b"\0"),),
        )
        conn.execute(
            "UPDATE log_state SET size = 6, frontier = ? WHERE id = 1",
            (b"".join(old_tree.frontier()),),
        )
        key = KeyStore(home).signing_key(create=True)
        note = sign(Checkpoint(LEDGER_ID, 6, old_tree.root(), OLD_TIME, legacy=True), key)
        conn.execute(
            "INSERT INTO checkpoints (size, root, note) VALUES (6, ?, ?)",
            (old_tree.root(), note.text()),
        )
    conn.close()
    SignerMemory(home, LEDGER_ID).record(
        "signed", 6, old_tree.root(), tuple(old_tree.frontier()), OLD_TIME
    )
    return note.text(), old_tree.root()


def test_a_schema_5_ledger_gets_a_c2sp_tree_signed_and_its_old_checkpoint_still_verifies(
    ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    home = tmp_path / "keys"
    old_note, old_root = _schema_5_ledger(ledger_path, home)
    assert Checkpoint.parse(old_note).legacy
    exported = tmp_path / "old.checkpoint"
    exported.write_text(old_note)
    upgraded = cli("checkpoint")  # a writer upgrades the file, then signs the new tree
    assert upgraded.code == 0
    assert "rebuilt from the entries" in upgraded.err
    assert "signed the new tree: 6 entries" in upgraded.err
    note = Checkpoint.parse(upgraded.out)
    assert not note.legacy and note.size == 6
    with Ledger.open(ledger_path, readonly=True) as ledger:
        rows = ledger.db.conn.execute("SELECT run_id, seq, hash FROM entries ORDER BY leaf")
        leaves = [_core.log_leaf(run, seq, digest) for run, seq, digest in rows]
    assert note.root == _core.merkle_root(leaves) != old_root
    remembered = SignerMemory(home, LEDGER_ID).read()["signed"]
    assert (remembered.size, remembered.root) == (6, note.root)
    assert cli("verify").code == 0
    assert cli("verify", "--checkpoint", str(exported)).code == 0
    with Ledger.open(ledger_path) as ledger:  # appends go on under the new tree
        ledger.run("a-run").append("step", {"late": True})
    assert cli("verify", "--checkpoint", str(exported)).code == 0


def test_an_old_checkpoint_the_entries_do_not_extend_fails_verify(
    ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    home = tmp_path / "keys"
    _schema_5_ledger(ledger_path, home)
    assert cli("checkpoint").code == 0
    forged = sign(
        Checkpoint(LEDGER_ID, 4, bytes(32), OLD_TIME, legacy=True),
        KeyStore(home).signing_key(),
    )
    exported = tmp_path / "forged.checkpoint"
    exported.write_text(forged.text())
    report = cli("verify", "--json", "--checkpoint", str(exported))
    assert report.code == 2
    assert "log.rollback" in {d["check"] for d in report.json()["workspace"]}


def test_a_schema_5_ledger_rewritten_behind_the_installs_back_is_upgraded_but_not_signed(
    ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    home = tmp_path / "keys"
    _schema_5_ledger(ledger_path, home)
    with apsw.Connection(str(ledger_path)) as conn:  # an entry rewritten, its run re-chained
        conn.execute("DELETE FROM entries WHERE run_id = 'a-run' AND seq = 2")
        conn.execute("UPDATE entries SET leaf = 4 WHERE run_id = 'b-run' AND seq = 2")
        fix_head(conn, "a-run")
    upgraded = cli("checkpoint")
    assert upgraded.code == 2
    assert "not the old tree recomputed from the entries" in upgraded.err
    assert "the new tree was not signed" in upgraded.err
    remembered = SignerMemory(home, LEDGER_ID).read()["signed"]
    assert remembered.size == 6  # the install's memory is kept as it was
    assert cli("verify").code == 2


def test_a_record_signed_over_the_old_tree_still_names_the_upgraded_log(
    ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    _, old_root = _schema_5_ledger(ledger_path, tmp_path / "keys")
    assert cli("checkpoint").code == 0
    with Ledger.open(ledger_path, readonly=True) as ledger:
        conn = ledger.db.conn
        new_root = tiles.TileReader(conn).root(6)
        assert wslog.legacy_root(conn, 6) == old_root
        assert wslog.names_root(conn, 6, new_root, "blake3:" + old_root.hex())  # a receipt
        assert wslog.names_root(conn, 6, new_root, "sha256:" + new_root.hex())
        assert not wslog.names_root(
            conn, 5, tiles.TileReader(conn).root(5), "blake3:" + old_root.hex()
        )
        assert not wslog.names_root(conn, 6, new_root, "sha256:" + old_root.hex())
        assert wslog.legacy_root(conn, 7) is None  # no seventh entry


def test_an_upgraded_ledger_that_does_not_verify_clean_is_not_signed_by_the_upgrade(
    ledger_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _schema_5_ledger(ledger_path, tmp_path / "keys")
    with apsw.Connection(str(ledger_path)) as conn:  # outside the log: the runs' listing
        conn.execute("UPDATE runs SET ordinal = 7 WHERE run_id = 'a-run'")
    with Ledger.open(ledger_path, key_dir=tmp_path / "keys") as ledger:  # a writer upgrades
        assert not ledger.db.conn.execute("SELECT 1 FROM checkpoints").fetchall()
    said = capsys.readouterr().err
    assert "the new tree was not signed" in said and "(runs.ordinal)" in said
    assert "carried over to the new tree" in said  # the log itself was vouched for


@pytest.mark.parametrize(
    "args",
    [
        ["runs"],
        ["show", "a-run"],
        ["prove", "a-run", "0"],
        ["export", "bernstein", "OUT"],
        ["log", "export", "OUT"],
    ],
)
def test_a_reading_command_names_an_old_schema_and_leaves_the_file_as_it_was(
    ledger_path: Path, cli: Any, tmp_path: Path, args: list[str]
) -> None:
    # Read-only commands queried tables the old schema lacks: "no such table: bernstein_runs".
    _schema_2_ledger(ledger_path)
    before = ledger_path.read_bytes()
    result = cli(*[str(tmp_path / "out") if a == "OUT" else a for a in args])
    assert result.code == 65
    assert result.err.startswith("error [ledger-old]:") and "schema 2" in result.err
    assert result.err.count("\n") == 1
    assert ledger_path.read_bytes() == before


def test_an_old_ledger_whose_log_was_altered_is_refused_without_a_dead_end(
    ledger_path: Path, cli: Any, tmp_path: Path
) -> None:
    # The refusal said "`agentledger verify --all` shows why", and verify refuses an old
    # schema ("any writing command upgrades it"): each command sent the user to the other.
    _schema_5_ledger(ledger_path, tmp_path / "keys")
    conn = apsw.Connection(str(ledger_path))
    conn.execute("UPDATE entries SET leaf = leaf + 10 WHERE leaf = 5")
    conn.close()
    refused = cli("append", "a-run", "step")
    assert refused.code == 65
    assert (
        refused.err.startswith("error [log-broken]:") and "leaf 15 where 5 was due" in refused.err
    )
    assert "verify" not in refused.err
    assert "altered" in refused.err
