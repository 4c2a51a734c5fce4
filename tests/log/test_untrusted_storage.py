"""The second security review's attacks on the signer (docs/RELIABILITY.md, "The file is
untrusted storage"): each read derived state from the file (tiles, counts, the archive
row) or checked one snapshot and wrote from another. Each test failed before the signer
took only ``Proven`` states.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger, _core, proven, signing, tiles
from agentledger import archive as archives
from agentledger import gc as collector
from agentledger.errors import Diverged
from agentledger.notes import Checkpoint

from .logkit import build, fix_head, raw, rechain, reforge_log, verify


def _signed_checkpoints(path: Path, key: str) -> list[Checkpoint]:
    with raw(path) as conn:
        notes = [Checkpoint.parse(row[0]) for row in conn.execute("SELECT note FROM checkpoints")]
    return [note for note in notes if note.signed_by([key]) is not None]


def _overwrite_tile(conn: apsw.Connection, leaf: int, hashes: bytes) -> None:
    """Overwrite leaf hashes in level 0 from ``leaf`` on (within one tile)."""
    index, slot = divmod(leaf, tiles.TILE_WIDTH)
    stored = bytearray(
        conn.execute(
            "SELECT hashes FROM log_tiles WHERE level = 0 AND idx = ?", (index,)
        ).fetchall()[0][0]
    )
    stored[slot * 32 : slot * 32 + len(hashes)] = hashes
    conn.execute(
        "UPDATE log_tiles SET hashes = ? WHERE level = 0 AND idx = ?", (bytes(stored), index)
    )


def _install_key(ledger: Ledger) -> str:
    key = ledger.keys.install_public_key()
    assert key is not None
    return key


# ---- 1. history checkpoints are no signing oracle ------------------------------------------


@pytest.mark.parametrize("victim", ["checkpoint", "append"])
def test_history_checkpoints_are_signed_only_over_proven_roots(
    ledger: Ledger, ledger_path: Path, cli: Any, victim: str
) -> None:
    build(ledger, runs=2, entries=5)  # 10 entries: history at 1, 2, 4, 8
    reader_roots = {}
    with raw(ledger_path) as conn:
        reader = tiles.TileReader(conn)
        reader_roots = {size: reader.root(size) for size in (1, 2, 4, 8, 10)}
    key = _install_key(ledger)
    with raw(ledger_path) as conn:  # checkpoints gone; leaf hashes of tile 0 forged
        conn.execute("DELETE FROM checkpoints")
        _overwrite_tile(conn, 0, os.urandom(8 * 32))
    if victim == "checkpoint":
        assert cli("checkpoint").code == 0  # the log itself is the one the install signed
    else:
        ledger.run("fresh").append("step", {"routine": True})  # no head to prove
    signed = _signed_checkpoints(ledger_path, key)
    assert {note.size for note in signed} >= {10 if victim == "checkpoint" else 11}
    for note in signed:
        if note.size in reader_roots:
            assert note.root == reader_roots[note.size], f"signed a forged root at {note.size}"


# ---- 2. one ledger_meta row does not switch rollback protection off ------------------------


def test_an_archive_row_does_not_switch_rollback_protection_off(
    ledger: Ledger, ledger_path: Path, cli: Any, tmp_path: Path
) -> None:
    build(ledger, runs=2, entries=3)
    older = tmp_path / "older.db"
    ledger.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(ledger_path, older)
    ledger.run("run-0").append("step", {"later": True})
    assert verify(ledger_path).code == 0  # the install now vouches for the larger log
    ledger.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{ledger_path}{suffix}").unlink(missing_ok=True)
    shutil.copy(older, ledger_path)
    with raw(ledger_path) as conn:
        conn.execute(
            "INSERT INTO ledger_meta (key, value) VALUES ('archive', ?)",
            (json.dumps({"runs": 2, "size": 6}),),
        )
    result = cli("verify", "--all", "--json")
    assert result.code == 2
    found = {d["check"] for d in result.json()["workspace"]}
    assert "log.rollback" in found
    assert cli("fsck").code == 2
    exported = tmp_path / "cp.txt"
    assert cli("checkpoint", "--export", str(exported)).code != 0
    out = tmp_path / "review.db"
    assert cli("archive", str(out)).code != 0
    assert not out.exists()


# ---- 4. archive verifies, copies and signs from one snapshot -------------------------------


def test_archive_verifies_and_copies_in_one_snapshot(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger, runs=2, entries=3)
    genuine = _entry_bytes(ledger_path, "run-0", 1)
    real = signing.verify_before_signing

    def verify_then_forge(*args: Any, **kwargs: Any) -> Any:
        state = real(*args, **kwargs)
        with raw(ledger_path) as conn:  # a second writer forges between verify and copy
            rechain(conn, "run-0", 1, {"forged": True})
            reforge_log(conn)
        return state

    monkeypatch.setattr(signing, "verify_before_signing", verify_then_forge)
    out = tmp_path / "review.db"
    try:
        archives.write_archive(ledger, out, ["run-0", "run-1"])
    except Diverged:
        assert not out.exists()
        return
    assert _entry_bytes(out, "run-0", 1) == genuine, "the archive holds the forged entry"
    assert verify(out).code == 0


def _entry_bytes(path: Path, run_id: str, seq: int) -> bytes:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = ? AND seq = ?", (run_id, seq)
        ).fetchall()
    finally:
        conn.close()
    return bytes(rows[0][0])


# ---- 5. gc verifies and collects in one transaction ----------------------------------------


def test_gc_decides_reachability_in_the_transaction_it_verified(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evidence = ledger.blobs.put(b"the only copy of the evidence")
    ledger.run("r").append("step", {"evidence": evidence})
    real = signing.verify_before_signing
    hidden: list[bool] = []

    def verify_then_hide(*args: Any, **kwargs: Any) -> Any:
        state = real(*args, **kwargs)
        conn = apsw.Connection(str(ledger_path))  # no busy timeout: fails if locked
        try:
            with conn:
                stored = conn.execute(
                    "SELECT bytes FROM entries WHERE run_id = 'r' AND seq = 0"
                ).fetchall()[0][0]
                conn.execute(
                    "UPDATE entries SET bytes = ? WHERE run_id = 'r' AND seq = 0",
                    (bytes(stored).replace(evidence.encode(), b"x" * len(evidence)),),
                )
            hidden.append(True)
        except apsw.BusyError:
            hidden.append(False)  # the window is closed: gc holds the write lock
        finally:
            conn.close()
        return state

    monkeypatch.setattr(signing, "verify_before_signing", verify_then_hide)
    with contextlib.suppress(Diverged):  # refusing is as good as keeping it
        collector.collect(ledger, grace_s=0)
    assert hidden, "the hook ran"
    assert evidence in ledger.blobs, "gc deleted evidence whose reference was hidden meanwhile"


# ---- 6. a named run's completeness is proven, not counted ----------------------------------


@pytest.mark.parametrize("junk_leaf", ["the deleted one", "a repeated one"])
def test_a_named_run_missing_its_last_entry_is_not_certified_despite_a_junk_row(
    ledger: Ledger, ledger_path: Path, cli: Any, junk_leaf: str
) -> None:
    build(ledger, runs=3, entries=4)
    ledger.close()
    with raw(ledger_path) as conn:
        leaf = conn.execute(
            "SELECT leaf FROM entries WHERE run_id = 'run-0' AND seq = 3"
        ).fetchall()[0][0]
        conn.execute("DELETE FROM entries WHERE run_id = 'run-0' AND seq = 3")
        fix_head(conn, "run-0")
        # One junk row elsewhere pads every count back.
        row = conn.execute(
            "SELECT kind, hash, bytes FROM entries WHERE run_id = 'run-2' AND seq = 0"
        ).fetchall()[0]
        junk = leaf if junk_leaf == "the deleted one" else 0
        conn.execute(
            "INSERT INTO entries (run_id, seq, kind, hash, bytes, leaf) "
            "VALUES ('run-2', 99, ?, ?, ?, ?)",
            (*row, junk),
        )
    for command in (("verify", "run-0"), ("show", "run-0"), ("activity", "verify", "run-0")):
        result = cli(*command)
        assert result.code == 2, f"{' '.join(command)} certified run-0 complete"
    report = verify(ledger_path)
    assert report.code == 2


# ---- 16. incremental verify proves the verified prefix, not its count ----------------------


def test_incremental_verify_finds_a_deleted_verified_entry_padded_by_a_junk_row(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=3, entries=3)
    assert cli("verify", "--all").code == 0  # remembered clean at 9 entries
    ledger.run("run-2").append("step", {"after": True})
    ledger.close()
    with raw(ledger_path) as conn:
        leaf = conn.execute(
            "SELECT leaf FROM entries WHERE run_id = 'run-0' AND seq = 2"
        ).fetchall()[0][0]
        conn.execute("DELETE FROM entries WHERE run_id = 'run-0' AND seq = 2")
        fix_head(conn, "run-0")
        row = conn.execute(
            "SELECT kind, hash, bytes FROM entries WHERE run_id = 'run-1' AND seq = 0"
        ).fetchall()[0]
        conn.execute(
            "INSERT INTO entries (run_id, seq, kind, hash, bytes, leaf) "
            "VALUES ('run-1', 77, ?, ?, ?, ?)",
            (*row, leaf),
        )
    result = cli("verify", "--incremental", "--json")
    assert result.code == 2
    assert cli("verify", "--all").code == 2


# ---- 11. an archive is never its source ----------------------------------------------------


def test_an_archive_without_its_row_does_not_pass_as_the_workspace(
    ledger: Ledger, ledger_path: Path, cli: Any, tmp_path: Path
) -> None:
    build(ledger, runs=2, entries=3)
    out = tmp_path / "review.db"
    assert cli("archive", str(out), "run-0").code == 0
    assert cli("verify", "--all", ledger=out).code == 0
    with raw(out) as conn:
        conn.execute("DELETE FROM ledger_meta WHERE key = 'archive'")
    result = cli("verify", "--all", "--json", ledger=out)
    assert result.code == 2
    assert "checkpoint.origin" in {d["check"] for d in result.json()["workspace"]}
    # The reviewer's failed verify of the unsealed archive left the genuine ledger alone.
    assert verify(ledger_path).code == 0


def test_archive_checkpoints_name_the_archive(ledger: Ledger, tmp_path: Path) -> None:
    build(ledger, runs=2, entries=2)
    out = tmp_path / "review.db"
    archives.write_archive(ledger, out, ["run-1"])
    notes = _signed_checkpoints(out, _install_key(ledger))
    assert notes and all(note.archive for note in notes)
    assert all(note.origin != Checkpoint(ledger.id, 0, b"", "").origin for note in notes)


# ---- 15. an append proves its run's head --------------------------------------------------


def test_an_append_does_not_chain_from_a_head_forged_in_the_tiles(
    ledger: Ledger, ledger_path: Path
) -> None:
    build(ledger, runs=2, entries=3)
    with raw(ledger_path) as conn:
        rechain(conn, "run-0", 2, {"forged": True})
        digest, leaf = conn.execute(
            "SELECT hash, leaf FROM entries WHERE run_id = 'run-0' AND seq = 2"
        ).fetchall()[0]
        forged = tiles.leaf_hash(_core.log_leaf("run-0", 2, bytes(digest)))
        _overwrite_tile(conn, leaf, forged)
    with pytest.raises(Diverged, match="refusing to append"):
        ledger.run("run-0").append("step", {"routine": True})


# ---- the Proven value -------------------------------------------------------------------


def test_a_proven_state_is_made_only_by_its_doors_and_only_for_its_transaction(
    ledger: Ledger,
) -> None:
    build(ledger, runs=1, entries=2)
    with pytest.raises(TypeError):
        proven.Proven(ledger.id, 0, (), "forged", ledger.db, 0)
    with ledger.db.write():
        state = signing.current_proven(ledger)
        assert state.size == 2
    with ledger.db.write() as conn, pytest.raises(Diverged, match="not proven in this"):
        signing.require_current(conn, ledger.id, state)  # proven in another transaction
    keys = ledger.keys
    with ledger.db.write() as conn:
        fresh = proven.prove(ledger.db, ledger.id, signing.memory_of(ledger), keys)
        assert fresh is not None and fresh.root == state.root
        signing.require_current(conn, ledger.id, fresh)


# ---- the head check's fast path agrees with its proof --------------------------------------


def _head_verdict(ledger: Ledger, run_id: str, *, cached: bool) -> str:
    """``check_head`` on ``run_id`` as an append would run it: "ok" or the refusal."""
    saved = dict(signing._own_heads(ledger))
    if not cached:
        signing._own_heads(ledger).clear()
    try:
        with ledger.db.write() as conn:
            state = signing.current_proven(ledger)
            head_seq, head_hash = conn.execute(
                "SELECT head_seq, head_hash FROM runs WHERE run_id = ?", (run_id,)
            ).fetchall()[0]
            signing.check_head(conn, ledger, state, run_id, head_seq, head_hash)
            return "ok"
    except Diverged as exc:
        return "refused" if "refusing to append" in exc.message else exc.message
    finally:
        signing._own_heads(ledger).update(saved)


@pytest.mark.parametrize("seed", range(12))
def test_the_head_checks_cache_and_its_inclusion_proof_agree(
    ledger: Ledger, ledger_path: Path, seed: int
) -> None:
    import random

    rng = random.Random(seed)
    runs = [f"run-{i}" for i in range(4)]
    for _ in range(rng.randint(5, 40)):
        ledger.run(rng.choice(runs)).append_many(
            [("step", {"n": rng.random()})] * rng.randint(1, 3)
        )
    victim = rng.choice(ledger.runs())
    tamper = rng.choice(["none", "rechain", "rechain+tile", "tile"])
    with raw(ledger_path) as conn:
        seq, leaf = conn.execute(
            "SELECT head_seq, (SELECT leaf FROM entries WHERE run_id = ? AND seq = head_seq) "
            "FROM runs WHERE run_id = ?",
            (victim, victim),
        ).fetchall()[0]
        if "rechain" in tamper:
            rechain(conn, victim, seq, {"forged": seed})
        if "tile" in tamper:
            digest = conn.execute(
                "SELECT hash FROM entries WHERE run_id = ? AND seq = ?", (victim, seq)
            ).fetchall()[0][0]
            _overwrite_tile(conn, leaf, tiles.leaf_hash(_core.log_leaf(victim, seq, bytes(digest))))
    fast = _head_verdict(ledger, victim, cached=True)
    reference = _head_verdict(ledger, victim, cached=False)
    assert fast == reference, tamper
    assert (fast == "ok") == (tamper in ("none", "tile")), tamper
