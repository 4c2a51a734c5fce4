"""Each refusal branch of the signer (proven.py, signing.py) has a test that a one-line
mutation of that branch breaks: the legitimate case is signed, the tampered one refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentledger import Ledger, signing
from agentledger import archive as archives
from agentledger.errors import Diverged
from agentledger.keys import KeyStore

from .logkit import build, raw, rechain


def _memory_file(ledger: Ledger) -> Path:
    return signing.memory_of(ledger).path


def test_growth_signed_only_by_an_untrusted_key_is_refused(
    ledger: Ledger, ledger_path: Path, tmp_path: Path
) -> None:
    build(ledger, runs=1, entries=2)
    # Someone else's install (its own key, its own memory, trusting ours) appends to it.
    stranger_home = tmp_path / "stranger"
    stranger_home.mkdir(mode=0o700)
    trust = KeyStore(stranger_home).trust_path
    trust.write_text(f"{ledger.keys.install_public_key()}\n")
    trust.chmod(0o600)
    with Ledger.open(ledger_path, key_dir=stranger_home) as stranger:
        stranger.run("theirs").append("step", {"not": "ours"})
    with pytest.raises(Diverged, match="no trusted checkpoint covers them"):
        ledger.run("run-0").append("step", {"ours": True})


def test_growth_under_our_own_checkpoint_is_signed_and_edited_growth_is_refused(
    ledger: Ledger, ledger_path: Path, tmp_path: Path
) -> None:
    build(ledger, runs=2, entries=2)
    lagging = tmp_path / "memory.json"
    shutil.copy(_memory_file(ledger), lagging)
    ledger.run("run-0").append_many([("step", {"n": n}) for n in range(3)])
    # A crash between the commit and the memory's update: the memory lags the file.
    shutil.copy(lagging, _memory_file(ledger))
    ledger.run("run-1").append("step", {"after": "the crash"})  # our checkpoint covers it
    shutil.copy(lagging, _memory_file(ledger))
    with raw(ledger_path) as conn:  # now the grown part is edited (chain kept)
        rechain(conn, "run-1", 2, {"edited": True})
    with pytest.raises(Diverged, match="no trusted checkpoint covers them"):
        ledger.run("run-0").append("step", {"refused": True})


def test_a_file_behind_what_this_install_signed_is_refused(
    ledger: Ledger, ledger_path: Path, tmp_path: Path
) -> None:
    build(ledger, runs=1, entries=2)
    ledger.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    older = tmp_path / "older.db"
    shutil.copy(ledger_path, older)
    ledger.run("run-0").append("step", {"later": True})
    ledger.close()
    shutil.copy(older, ledger_path)
    with Ledger.open(ledger_path) as again, pytest.raises(Diverged, match="rolled back"):
        again.run("run-0").append("step", {})


def test_a_stored_frontier_unlike_the_proven_one_is_refused(
    ledger: Ledger, ledger_path: Path
) -> None:
    build(ledger, runs=1, entries=3)
    ledger.run("run-0").append("step", {"fine": True})  # the same size and frontier: signed
    with raw(ledger_path) as conn:
        conn.execute("UPDATE log_state SET frontier = zeroblob(length(frontier))")
    with pytest.raises(Diverged, match="entries rewritten"):
        ledger.run("run-0").append("step", {})


def test_a_proven_state_of_another_ledger_is_refused(ledger: Ledger, tmp_path: Path) -> None:
    build(ledger, runs=1, entries=1)
    with Ledger.open(tmp_path / "other.db") as other:
        other.run("x").append("step", {})
        with other.db.write() as conn:
            theirs = signing.current_proven(other)
            signing.require_current(conn, other.id, theirs)  # its own: accepted
            with pytest.raises(Diverged, match="another ledger"):
                signing.require_current(conn, ledger.id, theirs)


def test_an_archive_holds_blobs_reachable_only_through_another_blob(
    ledger: Ledger, tmp_path: Path
) -> None:
    inner = ledger.blobs.put(b"an input named only by the receipt")
    outer = ledger.blobs.put(f'{{"inputs": [{{"content_hash": "{inner}"}}]}}'.encode())
    ledger.run("r").append("step", {"receipt": outer})
    out = tmp_path / "review.db"
    archives.write_archive(ledger, out, ["r"])
    with Ledger.open(out) as archive:
        assert outer in archive.blobs and inner in archive.blobs


def test_an_archive_carries_only_proofs_that_hold_in_its_verified_source(
    ledger: Ledger,
) -> None:
    """``_prove_copies`` checks the very proofs it returns: each copied entry, as copied,
    against the proven source root; one copy that is not its source leaf refuses all."""
    build(ledger, runs=2, entries=3)
    with ledger.db.snapshot() as source:
        state = signing.verify_before_signing(ledger, "test")
        copied = [
            (leaf, run_id, seq, bytes(digest))
            for leaf, run_id, seq, digest in source.execute(
                "SELECT leaf, run_id, seq, hash FROM entries ORDER BY leaf"
            )
        ]
        proofs = archives._prove_copies(ledger, source, state, copied)
        assert [leaf for leaf, _ in proofs] == [leaf for leaf, _, _, _ in copied]
        leaf, run_id, seq, digest = copied[4]
        for wrong in (
            (leaf, run_id, seq, bytes(32)),  # another entry's hash
            (leaf + 1, run_id, seq, digest),  # another position
            (state.size, run_id, seq, digest),  # past the proven log
            (None, run_id, seq, digest),  # never logged
        ):
            with pytest.raises(Diverged, match=f"entry {seq} of run '{run_id}'"):
                archives._prove_copies(ledger, source, state, [*copied[:4], wrong])  # type: ignore[list-item]


def test_growth_with_a_hole_is_refused(ledger: Ledger, ledger_path: Path, tmp_path: Path) -> None:
    build(ledger, runs=2, entries=2)
    lagging = tmp_path / "memory.json"
    shutil.copy(_memory_file(ledger), lagging)
    ledger.run("run-0").append_many([("step", {"n": n}) for n in range(3)])
    shutil.copy(lagging, _memory_file(ledger))  # the memory lags the file
    with raw(ledger_path) as conn:  # one of the entries past the memory is gone
        conn.execute("DELETE FROM entries WHERE run_id = 'run-0' AND seq = 3")
    with pytest.raises(Diverged, match="no trusted checkpoint covers them"):
        ledger.run("run-1").append("step", {"refused": True})


def test_growth_under_an_archive_checkpoint_is_refused(ledger: Ledger, tmp_path: Path) -> None:
    """An archive's checkpoint (signed by this install, same ledger id, its own origin)
    commits to the archive's log, not the ledger's: it proves no growth of the ledger.
    Taken for one, the signer signed under the ledger's origin a log that forks it."""
    ledger.run("a").append("step", {"n": 0})
    lagging = tmp_path / "memory.json"
    shutil.copy(_memory_file(ledger), lagging)
    with ledger.db.write():  # one transaction, leaves a0 b0 a1 b1
        ledger.run("b").append("step", {"n": 0})
        ledger.run("a").append("step", {"n": 1})
        ledger.run("b").append("step", {"n": 1})
    out = tmp_path / "review.db"
    archives.write_archive(ledger, out, ["a", "b"])  # its log in run order: a0 a1 b0 b1
    with raw(out) as conn:  # the seal row removed: the file now claims to be the ledger
        conn.execute("DELETE FROM ledger_meta WHERE key = 'archive'")
    shutil.copy(lagging, _memory_file(ledger))  # a crash: the memory lags the file
    with Ledger.open(out) as forked, pytest.raises(Diverged, match="no trusted checkpoint"):
        forked.run("a").append("step", {"forked": True})
