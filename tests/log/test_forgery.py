"""The security review's attacks (docs/RELIABILITY.md, "Never sign a forgery").

The attacker can write the ledger file, never ``$AGENTLEDGER_HOME``. Each attack ends in a
refusal (exit 2, nothing written or signed) or a finding of verify, never in a signature
over the forgery or a clean verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger, _core
from agentledger import gc as collector
from agentledger.errors import Diverged, InvalidInput
from agentledger.verify import VerifyOptions

from ..raw_entries import pin_unvetted
from .logkit import build, checks, fix_head, raw, rechain, reforge_log, verify


def _forge(path: Path) -> None:
    """Rewrite run-0's entry 1, re-chain the run, recompute the log, delete the checkpoints."""
    with raw(path) as conn:
        rechain(conn, "run-0", 1, {"forged": True})
        reforge_log(conn)
        conn.execute("DELETE FROM checkpoints")


def _count(path: Path, table: str) -> int:
    with raw(path) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])


def _failing_checks(result: Any) -> set[str]:
    return {d["check"] for run in result.json()["failures"] for d in run["divergences"]}


def _pin(ledger: Ledger, run_id: str, digest: str) -> None:
    pin_unvetted(ledger, run_id, digest, "file")


# ---- the signing oracle -------------------------------------------------------------------


def test_the_victims_next_append_does_not_sign_a_forged_log(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=3)
    _forge(ledger_path)
    entries = _count(ledger_path, "entries")
    with pytest.raises(Diverged, match="refusing to sign"):
        ledger.run("run-1").append("step", {"routine": True})
    assert cli("checkpoint").code == 2  # the command verify used to advise
    assert _count(ledger_path, "entries") == entries
    assert _count(ledger_path, "checkpoints") == 0
    report = verify(ledger_path)
    assert report.code == 2
    assert {"log.rollback", "checkpoint.missing"} <= checks(report)
    assert cli("fsck").code == 2


def test_the_advice_for_a_missing_checkpoint_is_not_to_sign(ledger: Ledger, cli: Any) -> None:
    build(ledger, runs=1, entries=2)
    with raw(ledger.path) as conn:
        conn.execute("DELETE FROM checkpoints")
    result = cli("verify", "--json")
    missing = [d for d in result.json()["workspace"] if d["check"] == "checkpoint.missing"]
    assert missing and "agentledger checkpoint" not in missing[0]["actual"]


def test_a_file_lowered_to_an_old_schema_is_not_migrated_by_verify_nor_signed(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=2)
    ledger.close()
    with raw(ledger_path) as conn:  # back to exactly schema 2, an entry rewritten
        rechain(conn, "run-0", 1, {"forged": True})
        for table in ("bernstein_runs", "bernstein_files", "bernstein_imports", "log_tiles",
                      "checkpoints", "log_state", "prune_receipts"):  # fmt: skip
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DROP INDEX entries_by_leaf")
        conn.execute("ALTER TABLE entries DROP COLUMN leaf")
        conn.execute("PRAGMA user_version = 2")
    before = ledger_path.read_bytes()
    assert cli("verify").code == 65  # refused with a message, the file untouched
    assert ledger_path.read_bytes() == before
    with Ledger.open(ledger_path) as writer, pytest.raises(Diverged):
        writer.run("run-1").append("step", {})  # migrated, but this install signed another log
    assert _count(ledger_path, "checkpoints") == 0


def test_dropping_the_log_tables_is_a_finding_and_blocks_writing(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=1, entries=2)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("DROP TABLE checkpoints")
        conn.execute("DROP TABLE log_tiles")
        conn.execute("PRAGMA user_version = 2")
    before = ledger_path.read_bytes()
    result = cli("verify", "--json")
    assert result.code == 2
    assert {d["check"] for d in result.json()["workspace"]} == {"schema.altered"}
    assert ledger_path.read_bytes() == before  # verify neither migrated nor wrote
    with Ledger.open(ledger_path) as writer, pytest.raises(Diverged, match="schema"):
        writer.run("run-0").append("step", {})


# ---- triggers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "trigger",
    [
        "CREATE TRIGGER rewrite AFTER INSERT ON entries BEGIN "
        "UPDATE entries SET kind = 'forged' WHERE run_id = new.run_id AND seq = new.seq; END",
        "CREATE TRIGGER swallow BEFORE INSERT ON entries BEGIN SELECT RAISE(IGNORE); END",
        "CREATE TRIGGER state AFTER UPDATE ON log_state BEGIN SELECT 1; END",
    ],
    ids=["rewrites appends", "drops appends", "on log_state"],
)
def test_a_planted_trigger_is_a_finding_and_no_append_goes_through_it(
    ledger: Ledger, ledger_path: Path, trigger: str
) -> None:
    build(ledger, runs=1, entries=2)
    with raw(ledger_path) as conn:
        conn.execute(trigger)
    entries = _count(ledger_path, "entries")
    # The handle opened before the trigger was planted notices it too.
    with pytest.raises(Diverged, match="schema"):
        ledger.run("run-0").append("step", {"after": "trigger"})
    with Ledger.open(ledger_path) as fresh, pytest.raises(Diverged, match="schema"):
        fresh.run("run-0").append("step", {})
    assert _count(ledger_path, "entries") == entries
    report = verify(ledger_path)
    assert report.code == 2
    assert checks(report) == {"schema.altered"}


def test_the_row_count_of_an_append_is_checked_even_past_the_schema_check(
    ledger: Ledger, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger, runs=1, entries=1)
    with raw(ledger_path) as conn:
        conn.execute(
            "CREATE TRIGGER swallow BEFORE INSERT ON entries BEGIN SELECT RAISE(IGNORE); END"
        )
    monkeypatch.setattr(type(ledger.db), "check_writable", lambda self: None)
    # Past the refusal to run any SQL on an altered schema too.
    monkeypatch.setattr("agentledger.storage.connection._schema_only", lambda *_: None)
    with pytest.raises(Diverged, match="changed 0 rows"):
        ledger.run("run-0").append("step", {})
    assert _count(ledger_path, "entries") == 1


def test_dropping_the_audit_mirror_is_a_finding(ledger: Ledger, ledger_path: Path) -> None:
    build(ledger, runs=1, entries=1)
    with raw(ledger_path) as conn:
        conn.execute("DROP TABLE audit_log")
    report = verify(ledger_path)
    assert report.code == 2
    assert any("audit_log" in d.actual for d in report.workspace)


# ---- archive, gc and prune receipts --------------------------------------------------------


def test_archive_refuses_to_sign_a_tampered_source(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=2)
    with raw(ledger_path) as conn:
        rechain(conn, "run-0", 0, {"forged": True})
    out = tmp_path / "review.db"
    result = cli("archive", str(out))
    assert result.code == 2
    assert "refusing" in result.err
    assert not out.exists()


def test_gc_refuses_a_ledger_that_does_not_verify_and_keeps_the_evidence(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    original = ledger.blobs.put(b"the page as captured")
    _pin(ledger, "r", original)
    swapped = ledger.blobs.put(b"the attacker's page")
    with raw(ledger_path) as conn:  # the reference moved to the attacker's blob
        row = conn.execute("SELECT bytes FROM entries WHERE run_id = 'r'").fetchall()[0][0]
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = 'r'",
            (bytes(row).replace(original.encode(), swapped.encode()),),
        )
    fsck = cli("fsck")
    assert fsck.code == 2
    assert "agentledger gc" not in fsck.out
    result = cli("gc", "--grace", "0")
    assert result.code == 2
    assert original in ledger.blobs
    assert _count(ledger_path, "prune_receipts") == 0


def test_a_prune_receipt_of_another_ledger_excuses_nothing(
    ledger: Ledger, ledger_path: Path, tmp_path: Path
) -> None:
    digest = ledger.blobs.put(b"evidence")
    _pin(ledger, "r", digest)
    with Ledger.open(tmp_path / "other.db") as other:
        other.blobs.put(b"evidence")
        assert collector.collect(other, grace_s=0).removed == [digest]
        receipt = other.db.rows("SELECT receipt, signer, signature FROM prune_receipts")[0]
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
        conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
        conn.execute(
            "INSERT INTO prune_receipts (receipt, signer, signature) VALUES (?, ?, ?)", receipt
        )
    report = verify(ledger_path)
    assert "blob.missing" in checks(report)


# ---- exported checkpoints, named runs, incremental -----------------------------------------


def test_an_exported_checkpoint_fails_a_wiped_or_brand_new_ledger(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=2)
    exported = tmp_path / "cp.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0
    with raw(ledger_path) as conn:
        for table in ("entries", "runs", "checkpoints", "log_tiles"):
            conn.execute(f"DELETE FROM {table}")
        conn.execute("UPDATE log_state SET size = 0, frontier = x''")
    result = cli("verify", "--checkpoint", str(exported), "--json")
    assert result.code == 2
    assert "log.rollback" in {d["check"] for d in result.json()["workspace"]}
    fresh = tmp_path / "fresh.db"
    assert cli("init", ledger=fresh).code == 0
    result = cli("verify", "--checkpoint", str(exported), "--json", ledger=fresh)
    assert result.code == 2
    assert "checkpoint.origin" in {d["check"] for d in result.json()["workspace"]}


def test_a_named_run_rechained_by_hand_fails_against_the_signed_log(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=3)
    exported = tmp_path / "cp.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0
    with raw(ledger_path) as conn:
        rechain(conn, "run-0", 1, {"forged": True})
    for extra in [(), ("--checkpoint", str(exported)), ("--incremental",)]:
        result = cli("verify", "run-0", *extra, "--json")
        assert result.code == 2, extra
        found = _failing_checks(result)
        assert "log.inclusion" in found, extra
    assert cli("activity", "verify", "run-0").code in (1, 2)
    # run-1's own entries are intact, but while other signed positions hold other entries
    # than the signed ones, no run can be certified complete (one of them may be run-1's).
    result = cli("verify", "run-1", "--json")
    assert result.code == 2
    assert _failing_checks(result) == {"log.incomplete"}


def test_a_forged_extra_entry_in_a_named_run_is_not_certified(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=2)
    with raw(ledger_path) as conn:  # one more entry, chained and logged, never signed
        head = conn.execute("SELECT head_seq, head_hash FROM runs WHERE run_id = 'run-0'")
        seq, digest = head.fetchall()[0]
        raw_entry, entry_hash = _core.encode_entries(
            "run-0", seq + 1, "blake3:" + bytes(digest).hex(), "2026-01-01T00:00:00Z",
            [("step", {"forged": True})],
        )[0]  # fmt: skip
        size = conn.execute("SELECT count(*) FROM entries").fetchall()[0][0]
        conn.execute(
            "INSERT INTO entries (run_id, seq, kind, hash, bytes, leaf) VALUES (?, ?, ?, ?, ?, ?)",
            ("run-0", seq + 1, "step", entry_hash, raw_entry, size),
        )
        conn.execute(
            "UPDATE runs SET head_seq = ?, head_hash = ? WHERE run_id = 'run-0'",
            (seq + 1, entry_hash),
        )
        reforge_log(conn)
    result = cli("verify", "run-0", "--json")
    assert result.code == 2
    found = _failing_checks(result)
    assert "log.unsigned" in found


def test_a_named_run_with_its_tail_cut_is_not_certified_complete(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=3)
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE run_id = 'run-1' AND seq = 2")
        fix_head(conn, "run-1")
    result = cli("verify", "run-1", "--json")
    assert result.code == 2
    found = _failing_checks(result)
    assert "log.incomplete" in found


def test_a_deleted_entry_is_named_by_its_leaf_and_neighbours_in_verify_and_fsck(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=2, entries=3)  # leaves: run-0 0, run-1 0, run-0 1, run-1 1, ...
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE run_id = 'run-1' AND seq = 1")
    result = cli("verify", "--json")
    assert result.code == 2
    gap = [d for d in result.json()["workspace"] if d["check"] == "log.leaf"]
    assert gap[0]["expected"] == "leaf 3"
    assert gap[0]["actual"].startswith(
        "leaf 3 missing: between run-0 seq 1 (leaf 2) and run-0 seq 2 (leaf 4)"
    )
    assert gap[0]["actual"].endswith("run run-1 skips step 1 there)")
    diverged = {run["run"] for run in result.json()["failures"]}
    assert diverged == {"run-1"}  # its chain lost a link; the gap is explained by it
    fsck = cli("fsck", "--json").json()
    fsck_gap = [d for d in fsck["verify"]["workspace"] if d["check"] == "log.leaf"]
    assert fsck_gap == gap


def test_incremental_verify_does_not_trust_the_file_for_what_was_verified(
    ledger: Ledger, ledger_path: Path
) -> None:
    build(ledger, runs=2, entries=2)
    assert verify(ledger_path).code == 0  # remembered (outside the file) as verified
    ledger.run("run-0").append_many([("step", {"late": i}) for i in range(2)])
    with raw(ledger_path) as conn:  # the tail cut, its checkpoints deleted, the log re-forged
        conn.execute("DELETE FROM entries WHERE run_id = 'run-0' AND seq >= 2")
        fix_head(conn, "run-0")
        conn.execute("DELETE FROM checkpoints WHERE size > 4")
        reforge_log(conn)
    report = verify(ledger_path, VerifyOptions(incremental=True))
    assert report.code == 2
    assert "log.rollback" in checks(report)


# ---- bounded input ---------------------------------------------------------------------------


def test_a_huge_proof_file_is_refused_without_reading_it(tmp_path: Path, cli: Any) -> None:
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as handle:
        handle.truncate(200 << 20)  # sparse: 200 MB of zeros, costs no disk
    result = cli("verify-proof", str(huge))
    assert result.code == 65
    assert "too large" in result.err


@pytest.mark.parametrize(
    "change",
    [{"seq": 1 << 63}, {"leaf_index": 1 << 64}, {"run": "\ud800"}, {"tree_size": float("nan")}],
    ids=["seq 2^63", "leaf 2^64", "lone surrogate", "NaN"],
)
def test_a_hostile_proof_gets_a_typed_error(
    ledger: Ledger, tmp_path: Path, cli: Any, change: dict[str, Any]
) -> None:
    build(ledger, runs=1, entries=2)
    bundle = json.loads(cli("prove", "run-0", "1", "--json").out)
    bundle.update(change)
    proof = tmp_path / "proof.json"
    proof.write_text(json.dumps(bundle), "utf-8", errors="surrogatepass")
    result = cli("verify-proof", str(proof))
    assert result.code == 65, result.err
    assert "Traceback" not in result.err


def test_out_of_range_numbers_are_typed_errors(ledger: Ledger, cli: Any) -> None:
    build(ledger, runs=1, entries=1)
    assert cli("prove", "run-0", "9223372036854775808").code == 64
    with pytest.raises(InvalidInput):
        list(ledger.run("run-0").entries(start=2**70))
    assert cli("gc", "--grace", "nan").code == 64
    assert cli("gc", "--grace", "inf").code == 64


def test_verify_opens_read_only_and_writes_nothing(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=1, entries=2)
    ledger.close()
    with apsw.Connection(str(ledger_path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = ledger_path.read_bytes()
    assert cli("verify").code == 0
    assert cli("verify", "run-0").code == 0
    assert ledger_path.read_bytes() == before
