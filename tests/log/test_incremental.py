"""Incremental verify: only the tail since the last clean checkpoint, proven consistent."""

from __future__ import annotations

from pathlib import Path

from agentledger import Ledger
from agentledger.verify import VerifyOptions

from .logkit import build, checks, raw, verify

INCREMENTAL = VerifyOptions(incremental=True)


def test_incremental_verify_rechecks_only_the_new_tail(ledger: Ledger, ledger_path: Path) -> None:
    build(ledger, runs=4, entries=5)
    assert verify(ledger_path).code == 0  # records the verified checkpoint
    ledger.run("run-1").append_many([("step", {"late": 1}), ("step", {"late": 2})])
    ledger.run("new").append("step", {})
    report = verify(ledger_path, INCREMENTAL)
    assert report.code == 0, report.to_json()
    assert {run.run_id for run in report.runs} == {"run-1", "new"}
    assert report.entries == 3
    assert any("incremental" in note for note in report.notes)


def test_without_a_verified_checkpoint_incremental_verifies_everything(
    ledger: Ledger, ledger_path: Path
) -> None:
    build(ledger, runs=2, entries=2)
    report = verify(ledger_path, INCREMENTAL)
    assert report.code == 0
    assert report.entries == 4
    assert verify(ledger_path, INCREMENTAL).entries == 0  # now nothing is new


def test_an_edited_tail_entry_is_caught_incrementally(ledger: Ledger, ledger_path: Path) -> None:
    build(ledger, runs=2, entries=2)
    assert verify(ledger_path).code == 0
    ledger.run("run-0").append("step", {"amount": 10})
    with raw(ledger_path) as conn:
        conn.execute(
            "UPDATE entries SET bytes = CAST(replace(bytes, '\"amount\":10', '\"amount\":99') "
            "AS BLOB) WHERE run_id = 'run-0' AND seq = 2"
        )
    report = verify(ledger_path, INCREMENTAL)
    assert report.code == 2
    assert "entry.hash" in checks(report)


def test_an_entry_deleted_from_the_verified_prefix_is_caught_incrementally(
    ledger: Ledger, ledger_path: Path
) -> None:
    build(ledger, runs=2, entries=3)
    assert verify(ledger_path).code == 0
    ledger.run("run-0").append("step", {})
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE run_id = 'run-1' AND seq = 1")
    report = verify(ledger_path, INCREMENTAL)
    assert report.code == 2
    assert "log.size" in checks(report)


def test_a_rewritten_prefix_fails_the_consistency_proof(ledger: Ledger, ledger_path: Path) -> None:
    build(ledger, runs=1, entries=3)
    assert verify(ledger_path).code == 0
    ledger.run("run-0").append("step", {})
    with raw(ledger_path) as conn:  # the tiles under the state verified clean, forged
        conn.execute(
            "UPDATE log_tiles SET hashes = CAST(zeroblob(32) || substr(hashes, 33) AS BLOB) "
            "WHERE level = 0 AND idx = 0"
        )
    report = verify(ledger_path, INCREMENTAL)
    assert report.code == 2
    assert any("verifying everything" in note for note in report.notes)
    assert "log.tiles" in checks(report)
