"""Each deletion, truncation and rollback: undetected by the chains alone, caught by the log."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger, tiles
from agentledger.checkpoint import install_public_key
from agentledger.errors import Diverged
from agentledger.keys import KeyStore
from agentledger.verify import VerifyOptions

from ..raw_entries import pin_unvetted
from .logkit import build, checks, fix_head, raw, verify, without_log


def _delete_last_entry_of_a_run(conn: object) -> None:
    conn.execute("DELETE FROM entries WHERE run_id = 'run-0' AND seq = 3")  # type: ignore[attr-defined]
    fix_head(conn, "run-0")


def _delete_last_entry_of_the_workspace(conn: object) -> None:
    last = conn.execute(  # type: ignore[attr-defined]
        "SELECT run_id, seq FROM entries ORDER BY leaf DESC LIMIT 1"
    ).fetchall()[0]
    conn.execute("DELETE FROM entries WHERE run_id = ? AND seq = ?", last)  # type: ignore[attr-defined]
    fix_head(conn, last[0])


def _delete_a_whole_run(conn: object) -> None:
    conn.execute("DELETE FROM entries WHERE run_id = 'run-2'")  # type: ignore[attr-defined]
    conn.execute("DELETE FROM runs WHERE run_id = 'run-2'")  # type: ignore[attr-defined]


def _truncate_every_run(conn: object) -> None:
    conn.execute("DELETE FROM entries WHERE seq >= 2")  # type: ignore[attr-defined]
    for run_id in ("run-0", "run-1", "run-2"):
        fix_head(conn, run_id)


TAMPERINGS = {
    "last entry of a run": (_delete_last_entry_of_a_run, "log.leaf"),
    "last entry of the workspace": (_delete_last_entry_of_the_workspace, "log.size"),
    "a whole run": (_delete_a_whole_run, "log.leaf"),
    "the tail of every run": (_truncate_every_run, "log.size"),
}


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_a_deletion_the_chains_cannot_see_is_detected_by_the_log(
    name: str, ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger)
    tamper, expected_check = TAMPERINGS[name]
    with raw(ledger_path) as conn:
        tamper(conn)
    with without_log(monkeypatch):
        assert verify(ledger_path).code == 0, "the chains alone must not notice"
    report = verify(ledger_path)
    assert report.code == 2
    assert expected_check in checks(report)


def test_a_clean_ledger_verifies_with_its_log(ledger: Ledger, ledger_path: Path) -> None:
    build(ledger)
    report = verify(ledger_path)
    assert report.code == 0, report.to_json()


def test_an_entry_missing_from_the_log_is_named(ledger: Ledger, ledger_path: Path) -> None:
    build(ledger)
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET leaf = NULL WHERE run_id = 'run-1' AND seq = 0")
    report = verify(ledger_path)
    run = next(r for r in report.runs if r.run_id == "run-1")
    assert any(d.check == "log.unlogged" and d.seq == 0 for d in run.divergences)


def test_deleting_a_referenced_blob_is_detected(ledger: Ledger, ledger_path: Path) -> None:
    digest = ledger.blobs.put(b"page bytes")
    pin_unvetted(ledger, "r", digest, "page")
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
        conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
    report = verify(ledger_path)
    assert report.code == 2
    assert "blob.missing" in checks(report)


def test_a_checkpoint_signed_by_an_untrusted_key_does_not_verify(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger, runs=1, entries=2)
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "someone-else"))
    # Another install that trusts ours may extend the ledger, signing with its own key.
    KeyStore(tmp_path / "someone-else").add_trust(install_public_key(ledger))
    with Ledger.open(ledger_path) as other:
        other.run("run-x").append("step", {})  # signed by another install key
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "keys"))
    report = verify(ledger_path)
    assert "checkpoint.signature" in checks(report)
    # The actual side said "not (agentledger/v1/ledger/…)": the names, then what is wrong.
    found = next(d for d in report.workspace if d.check == "checkpoint.signature")
    assert found.actual == (
        f"its signature(s) by agentledger/v1/ledger/{ledger.id}: none verifies under a trusted key"
    )


def test_deleting_every_checkpoint_is_detected(ledger: Ledger, ledger_path: Path) -> None:
    build(ledger, runs=1, entries=2)
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM checkpoints")
    assert "checkpoint.missing" in checks(verify(ledger_path))


def test_rolling_the_file_back_is_detected_with_an_exported_checkpoint(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: object
) -> None:
    build(ledger, runs=2, entries=2)
    ledger.close()
    old_copy = tmp_path / "old.db"
    shutil.copy(ledger_path, old_copy)
    with Ledger.open(ledger_path) as reopened:
        reopened.run("run-0").append("step", {"late": True})
    exported = tmp_path / "checkpoint.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0  # type: ignore[operator]
    shutil.copy(old_copy, ledger_path)  # the whole file rolled back
    options = VerifyOptions(checkpoint_file=exported)
    with without_log(monkeypatch):
        assert verify(ledger_path, options).code == 0
    report = verify(ledger_path, options)
    assert report.code == 2
    assert "log.rollback" in checks(report)


def test_a_ledger_that_extends_its_exported_checkpoint_verifies(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: object
) -> None:
    build(ledger, runs=2, entries=3)
    exported = tmp_path / "checkpoint.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0  # type: ignore[operator]
    for i in range(5):
        ledger.run(f"late-{i}").append_many([("step", {"i": i}), ("step", {"i": -i})])
    result = cli("verify", "--checkpoint", str(exported), "--json")  # type: ignore[operator]
    assert result.code == 0, result.out


def test_a_forked_ledger_does_not_extend_the_exported_checkpoint(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger, runs=1, entries=2)
    key = install_public_key(ledger)
    ledger.close()
    before = tmp_path / "before.db"
    shutil.copy(ledger_path, before)
    with Ledger.open(ledger_path) as one:
        one.run("run-0").append("step", {"branch": "a"})
    exported = tmp_path / "checkpoint.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0  # type: ignore[operator]
    shutil.copy(before, ledger_path)
    with Ledger.open(ledger_path) as other, pytest.raises(Diverged):
        # This install signed the other branch: it refuses to sign a fork of it.
        other.run("run-0").append("step", {"branch": "b"})
    # A second install (trusting the first) forks the old copy; the export catches it.
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "second"))
    KeyStore(tmp_path / "second").add_trust(key)
    with Ledger.open(ledger_path) as other:
        other.run("run-0").append_many([("step", {"branch": "b"}), ("step", {})])
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "keys"))
    result = cli("verify", "--checkpoint", str(exported), "--json")  # type: ignore[operator]
    assert result.code == 2
    assert any(d["check"] == "log.rollback" for d in result.json()["workspace"])


def test_entries_removed_with_the_checkpoints_covering_them_are_caught_after_a_verify(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger, runs=2, entries=2)
    assert verify(ledger_path).code == 0  # records the verified checkpoint
    with raw(ledger_path) as conn:  # the last entry, and every checkpoint that covers it
        last = conn.execute("SELECT run_id, seq FROM entries ORDER BY leaf DESC LIMIT 1")
        run_id, seq = last.fetchall()[0]
        conn.execute("DELETE FROM entries WHERE run_id = ? AND seq = ?", (run_id, seq))
        fix_head(conn, str(run_id))
        conn.execute("DELETE FROM checkpoints WHERE size > 3")
        frontier = b"".join(tiles.TileReader(conn).frontier(3))
        conn.execute("UPDATE log_state SET size = 3, frontier = ?", (frontier,))
        conn.execute(  # the tiles cut back to 3 leaves too
            "UPDATE log_tiles SET hashes = CAST(substr(hashes, 1, 96) || zeroblob(8192 - 96) "
            "AS BLOB) WHERE level = 0"
        )
    with without_log(monkeypatch):
        assert verify(ledger_path).code == 0
    report = verify(ledger_path)
    assert report.code == 2
    assert "log.rollback" in checks(report)


@pytest.mark.parametrize("vouched_by", ["memory", "exported checkpoint"])
def test_a_rolled_back_file_certifies_no_run_complete(
    vouched_by: str, ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    """A whole file rolled back loses what was appended since, as a cut tail does: every
    run may have lost its last entries, so none is counted clean (as ``log.size`` does),
    and ``verify``, ``runs`` and ``activity verify`` agree."""
    build(ledger, runs=2, entries=2)
    key = install_public_key(ledger)
    ledger.close()
    old_copy = tmp_path / "old.db"
    shutil.copy(ledger_path, old_copy)
    with Ledger.open(ledger_path) as reopened:
        reopened.run("run-0").append("step", {"late": True})  # lost by the rollback
    exported = tmp_path / "checkpoint.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0
    shutil.copy(old_copy, ledger_path)
    home: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    if vouched_by == "exported checkpoint":  # a reviewer's machine: no memory of it
        home = ("--home", str(tmp_path / "reviewer"))
        options = ("--checkpoint", str(exported), "--trust", key)
    report = cli(*home, "verify", *options, "--json").json()
    assert report["code"] == 2
    assert {r["run"]: r["status"] for r in report["results"]} == {
        "run-0": "diverged",
        "run-1": "diverged",
    }
    for run in ("run-0", "run-1"):
        assert [d["check"] for d in _run_failures(report, run)] == ["log.incomplete"]
    statuses = {r["run"]: r["status"] for r in cli(*home, "runs", "--json").json()["runs"]}
    assert set(statuses.values()) == {"diverged"}, statuses
    if vouched_by == "memory":
        assert cli("activity", "verify", "run-0").code == 2


def _run_failures(report: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    return [d for run in report["failures"] if run["run"] == run_id for d in run["divergences"]]


def test_a_cut_tail_beside_a_run_with_no_logged_entry_is_reported_not_a_crash(
    ledger: Ledger, ledger_path: Path
) -> None:
    """A run none of whose entries has a leaf has no last leaf: its entries are named
    ``log.unlogged``, and the cut tail elsewhere is still ``log.size`` (was a TypeError)."""
    build(ledger, runs=2, entries=2)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET leaf = NULL WHERE run_id = 'run-1'")
        _delete_last_entry_of_the_workspace(conn)
    found = checks(verify(ledger_path))
    assert {"log.unlogged", "log.size"} <= found, found
