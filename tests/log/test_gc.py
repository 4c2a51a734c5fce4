"""Garbage collection: unreachable blobs only, never young ones, with a signed receipt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentledger import Ledger
from agentledger import gc as collector

from ..raw_entries import pin_unvetted
from .logkit import checks, raw, retype_rows, verify


def _pin(ledger: Ledger, digest: str) -> None:
    pin_unvetted(ledger, "r", digest, "file")


def test_gc_removes_only_unreachable_blobs_and_signs_a_receipt(
    ledger: Ledger, ledger_path: Path
) -> None:
    kept = ledger.blobs.put(b"evidence")
    _pin(ledger, kept)
    garbage = ledger.blobs.put(b"garbage")
    result = collector.collect(ledger, grace_s=0)
    assert result.removed == [garbage]
    assert kept in ledger.blobs and garbage not in ledger.blobs
    assert result.receipt_id is not None
    trusted = set(ledger.keys.trusted())
    pruned = collector.pruned_digests(ledger.db.conn, trusted, ledger.id)
    assert pruned == {garbage: collector.Pruned(result.receipt_id, 1)}
    assert verify(ledger_path).code == 0


def test_a_prune_receipt_whose_signature_was_altered_names_nothing_pruned(
    ledger: Ledger, ledger_path: Path
) -> None:
    garbage = ledger.blobs.put(b"garbage")
    assert collector.collect(ledger, grace_s=0).removed == [garbage]
    trusted = set(ledger.keys.trusted())
    assert set(collector.pruned_digests(ledger.db.conn, trusted, ledger.id)) == {garbage}
    with raw(ledger_path) as conn:
        (signature,) = conn.execute("SELECT signature FROM prune_receipts").fetchone()
        altered = bytes([signature[0] ^ 1]) + bytes(signature[1:])
        conn.execute("UPDATE prune_receipts SET signature = ?", (altered,))
    assert collector.pruned_digests(ledger.db.conn, trusted, ledger.id) == {}


def test_a_blob_reachable_only_through_another_blob_is_kept(ledger: Ledger) -> None:
    inner = ledger.blobs.put(b"input bytes")
    receipt = ledger.blobs.put(f'{{"inputs":[{{"content_hash":"{inner}"}}]}}'.encode())
    _pin(ledger, receipt)
    assert collector.collect(ledger, grace_s=0).removed == []
    assert inner in ledger.blobs


def test_a_blob_just_written_by_a_writer_is_never_collected(ledger: Ledger) -> None:
    fresh = ledger.blobs.put(b"about to be referenced")
    result = collector.collect(ledger)  # default grace
    assert result.removed == []
    assert result.kept_young == [fresh]
    assert fresh in ledger.blobs


def test_gc_dry_run_changes_nothing(ledger: Ledger, ledger_path: Path, cli: Any) -> None:
    garbage = ledger.blobs.put(b"garbage")
    result = cli("gc", "--dry-run", "--grace", "0", "--json")
    assert result.code == 0
    assert result.json()["removed"] == [garbage]
    assert garbage in ledger.blobs
    with raw(ledger_path) as conn:
        assert conn.execute("SELECT count(*) FROM prune_receipts").fetchall()[0][0] == 0


def test_fsck_reports_orphans_and_runs_every_check(ledger: Ledger, cli: Any) -> None:
    ledger.run("r").append("step", {})
    orphan = ledger.blobs.put(b"orphan")
    result = cli("fsck", "--json")
    assert result.code == 0, result.out
    assert result.json()["orphan_blobs"] == [orphan]
    assert result.json()["sqlite"] == []
    assert result.json()["verify"]["code"] == 0


def test_fsck_fails_on_a_tampered_log(ledger: Ledger, ledger_path: Path, cli: Any) -> None:
    run = ledger.run("r")
    run.append_many([("step", {}), ("step", {})])
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE seq = 1")
        conn.execute("UPDATE runs SET head_seq = 0, head_hash = (SELECT hash FROM entries)")
    assert cli("fsck").code == 2


def test_a_receipt_excuses_nothing_an_entry_logged_after_it_references(
    ledger: Ledger, ledger_path: Path
) -> None:
    digest = ledger.blobs.put(b"collected before anyone pinned it")
    assert collector.collect(ledger, grace_s=0).removed == [digest]
    _pin(ledger, digest)  # a later entry names the collected bytes
    report = verify(ledger_path)
    assert report.code == 2
    assert "blob.missing" in checks(report)
    assert not any("pruned" in note for note in report.notes)


def test_fsck_checks_every_checkpoint_ever_taken(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    run = ledger.run("r")
    for i in range(4):
        run.append("step", {"i": i})
    assert cli("fsck", "--json").json()["checkpoints"] == []
    with raw(ledger_path) as conn:  # an old checkpoint's root forged, the newest left alone
        conn.execute("UPDATE checkpoints SET note = replace(note, '\n2\n', '\n1\n') WHERE size = 2")
    result = cli("fsck", "--json")
    assert result.code == 2
    assert any("checkpoint" in finding for finding in result.json()["checkpoints"])


def test_a_blob_stored_again_starts_its_grace_period_again(
    ledger: Ledger, ledger_path: Path, monkeypatch: Any
) -> None:
    # A writer storing bytes the store already held (unreachable, first seen by GC hours
    # ago) lost them to the next GC before its entry named them: the grace period counted
    # from the first sighting, and storing them again changed nothing GC could see.
    import time
    from types import SimpleNamespace

    page = ledger.blobs.put(b"a page fetched yesterday, never referenced")
    assert collector.collect(ledger).kept_young == [page]  # first seen unreachable now
    later = time.time() + 2 * collector.DEFAULT_GRACE_S
    monkeypatch.setattr(collector, "time", SimpleNamespace(time=lambda: later))
    assert ledger.blobs.put(b"a page fetched yesterday, never referenced") == page  # again
    result = collector.collect(ledger)  # between the writer's put and its reference
    assert result.removed == [] and result.kept_young == [page]
    _pin(ledger, page)
    assert verify(ledger_path).code == 0
    # Left unreferenced, it is collected one grace period after it was stored again.
    monkeypatch.setattr(
        collector, "time", SimpleNamespace(time=lambda: later + collector.DEFAULT_GRACE_S + 1)
    )
    orphan = ledger.blobs.put(b"stored, then abandoned")
    assert collector.collect(ledger).kept_young == [orphan]
    monkeypatch.setattr(
        collector, "time", SimpleNamespace(time=lambda: later + 3 * collector.DEFAULT_GRACE_S)
    )
    assert collector.collect(ledger).removed == [orphan]


def test_a_dry_run_on_a_ledger_whose_id_is_a_path_is_a_report_not_a_crash(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    # The install's sightings file was named after the id the file holds: "a/b" made
    # `gc --dry-run` (which verifies nothing first) exit 70 with a ValueError.
    garbage = ledger.blobs.put(b"garbage")
    with raw(ledger_path) as conn:
        conn.execute("UPDATE ledger_meta SET value = '../x/y' WHERE key = 'ledger_id'")
    result = cli("gc", "--dry-run", "--json")
    assert result.code == 0, result.err
    assert result.json()["kept_young"] == [garbage]
    collected = cli("gc", "--json")  # no sightings are kept for such an id: nothing goes
    assert collected.code == 0 and collected.json()["removed"] == []


def test_a_blob_row_of_the_wrong_types_is_reported_not_crashed_on(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """Damaged rows (a flipped serial type: a size that is NULL, a chunk that is text)
    under the schema's own SQL text: `gc --dry-run` and `fsck` exited 70 (comparing None
    with an int, joining text into bytes) where verify names them."""
    stage = ledger.run("r").research("s")
    stage.fetch("https://a.test", b"page a")
    stage.fetch("https://b.test", b"page b")
    stage.finish({"summary": "two pages"})
    sized, texted = ledger.blobs.put(b"page a"), ledger.blobs.put(b"page b")
    ledger.close()
    retype_rows(
        ledger_path,
        ("blobs", "blob_chunks"),
        ("UPDATE blobs SET size = NULL WHERE digest = ?", (sized,)),
        ("UPDATE blob_chunks SET data = 'text now' WHERE digest = ?", (texted,)),
    )
    dry = cli("gc", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert dry.json()["bytes_freed"] == 0
    checked = cli("fsck", "--json")
    assert checked.code == 2, checked.err
    assert "Traceback" not in dry.err + checked.err


def test_a_dry_run_leaves_a_file_in_rollback_journal_mode_byte_identical(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any
) -> None:
    """An archive (kept in rollback-journal mode) whose seal row was removed: `gc
    --dry-run` opened it for writing and switched it to WAL, changing the file a dry run
    promises to leave alone. It opens read-only now."""
    ledger.run("r").append("step", {})
    ledger.close()
    archived = tmp_path / "archive.db"
    assert cli("archive", str(archived)).code == 0
    with raw(archived) as conn:
        conn.execute("DELETE FROM ledger_meta WHERE key = 'archive'")
    before = archived.read_bytes()
    assert cli("gc", "--dry-run", "--json", ledger=archived).code == 0
    assert archived.read_bytes() == before
