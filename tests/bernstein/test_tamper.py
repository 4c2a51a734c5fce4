"""Every kind of damage to a bernstein workdir: bernstein's verdict (compat) and ours (strict).

The workdir is ``bernstein-3.23.0`` (bernstein's own output). ``run-001`` holds rows
0 run_started, 1 task_claimed, 2 research-0, 3 browser-0, 4 data-0 (signed receipt),
5 ops-0 (signed receipt), 6 run_finished; the audit chain mirrors rows 2-5 of each run.
Compat expectations follow bernstein's algorithm (docs/BERNSTEIN.md §2, §8).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import apsw
import pytest
from nacl.signing import SigningKey

from agentledger import Ledger
from agentledger.bernstein import import_workdir, importer
from agentledger.bernstein.format import acanon, content_hash
from agentledger.bernstein.writer import public_key_pem, rechain
from agentledger.errors import InvalidInput
from agentledger.verify import VerifyOptions

from ..log.logkit import retype_rows
from .bernstein_testkit import (
    SHAPES,
    SMALL,
    SMALL_SIGNER,
    Outcome,
    cas,
    copy_workdir,
    edit_row,
    import_and_verify,
    lines,
    private_key_file,
    write_lines,
)

RUN = "run-001"
PAGE = "sha256:ccd60aceaca4c2af81d38c52fb6867d86b28406627248d9b7d52cc66ab12b351"
DATA_RECEIPT = "sha256:67748cc06cb345a525a63b2ad4fb96a351b85675b46e5ca056de77ce79061090"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return copy_workdir(SMALL, tmp_path / "wd")


def verify(workdir: Path, tmp_path: Path) -> Outcome:
    key = private_key_file(SMALL, tmp_path / "audit.key")
    return import_and_verify(workdir, tmp_path / "ledger.db", key=key, trust=(SMALL_SIGNER,))


def test_the_untampered_copy_is_clean_in_both_modes(workdir: Path, tmp_path: Path) -> None:
    outcome = verify(workdir, tmp_path)
    assert outcome.compat[RUN] == 0 and outcome.strict[RUN] == 0


def test_an_anchored_field_edit_breaks_the_chain_at_its_step_in_both_modes(
    workdir: Path, tmp_path: Path
) -> None:
    edit_row(workdir, RUN, 4, reason_code="forged")
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (2, 2)
    assert (4, "bernstein.chain", "payload") in outcome.compat_fields[RUN]
    assert (4, "bernstein.chain", "payload") in outcome.fields[RUN]
    assert (4, "bernstein.audit.mismatch", "reason_code") in outcome.fields[RUN]
    assert (4, "bernstein.payload_hash", "payload_hash") in outcome.fields[RUN]


def test_a_removed_first_row_shows_the_empty_genesis_link_it_expected(
    workdir: Path, tmp_path: Path, cli: Any
) -> None:
    """The finding's expected ``prev_hash`` is the empty string: the report printed
    ``expected`` followed by nothing, as if the value were missing."""
    write_lines(workdir, RUN, lines(workdir, RUN)[1:])
    path = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=path).code == 0
    result = cli("verify", RUN, "--compat", "bernstein", ledger=path)
    assert result.code == 2
    assert 'expected ""' in result.out, result.out
    found = cli("verify", RUN, "--compat", "bernstein", "--json", ledger=path).json()
    assert found["failures"][0]["divergences"][0]["expected"] == ""  # --json: as it is


def test_an_edited_ts_is_invisible_and_stated_as_a_limit(workdir: Path, tmp_path: Path) -> None:
    edit_row(workdir, RUN, 3, ts=1.0)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 0)
    assert any("ts and elapsed_s" in note for note in outcome.notes)


@pytest.mark.parametrize(
    ("field", "value", "check"),
    [("index", 9, "bernstein.index"), ("payload_hash", "0" * 64, "bernstein.payload_hash")],
)
def test_unanchored_index_and_payload_hash_edits_pass_bernstein_but_not_strict(
    workdir: Path, tmp_path: Path, field: str, value: object, check: str
) -> None:
    edit_row(workdir, RUN, 2, **{field: value})
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 2)
    assert (2, check, field) in outcome.fields[RUN]


def test_reordered_lines_break_the_link(workdir: Path, tmp_path: Path) -> None:
    rows = lines(workdir, RUN)
    rows[1], rows[2] = rows[2], rows[1]
    write_lines(workdir, RUN, rows)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (2, 2)
    assert (1, "bernstein.chain", "prev_hash") in outcome.compat_fields[RUN]


def test_a_deleted_line_breaks_the_link_of_the_next(workdir: Path, tmp_path: Path) -> None:
    rows = lines(workdir, RUN)
    del rows[1]
    write_lines(workdir, RUN, rows)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (2, 2)
    assert (1, "bernstein.chain", "prev_hash") in outcome.fields[RUN]


@pytest.mark.parametrize("garbage", ["not json\n", "[1, 2]\n", '{"a": 1} trailing\n'])
def test_an_inserted_unparsable_line_is_kept_reported_and_fails_the_run(
    workdir: Path, tmp_path: Path, garbage: str
) -> None:
    rows = lines(workdir, RUN)
    rows.insert(3, garbage)
    write_lines(workdir, RUN, rows)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (2, 2)
    assert (None, "bernstein.line.discarded", "line 3") in outcome.fields[RUN]


def test_a_corrupted_line_is_discarded_and_its_audit_record_has_no_row(
    workdir: Path, tmp_path: Path
) -> None:
    rows = lines(workdir, RUN)
    rows[5] = rows[5][:40] + "\n"
    write_lines(workdir, RUN, rows)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (2, 2)
    assert {"bernstein.line.discarded", "bernstein.audit.missing_from_journal"} <= outcome.findings[
        RUN
    ]


def test_an_appended_chain_consistent_row_passes_both_and_is_stated(
    workdir: Path, tmp_path: Path
) -> None:
    rows = lines(workdir, RUN)
    extra = json.loads(rows[6])
    extra["status"] = "appended"
    write_lines(workdir, RUN, rechain([*rows, json.dumps(extra) + "\n"]))
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 0)
    assert any("no audit record covers" in note for note in outcome.notes)


def test_a_cut_tail_after_the_last_audited_row_is_undetectable_and_stated(
    workdir: Path, tmp_path: Path
) -> None:
    write_lines(workdir, RUN, lines(workdir, RUN)[:6])
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 0)


def test_a_cut_tail_with_an_audited_activity_passes_bernstein_but_not_strict(
    workdir: Path, tmp_path: Path
) -> None:
    write_lines(workdir, RUN, lines(workdir, RUN)[:5])
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 2)
    assert (5, "bernstein.audit.missing_from_journal", "stage 'ops-0'") in outcome.fields[RUN]


def test_a_removed_observation_blob_fails_both(workdir: Path, tmp_path: Path) -> None:
    cas(workdir, PAGE).unlink()
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (2, 2)
    assert {"bernstein.stage", "bernstein.blob.missing"} <= outcome.findings[RUN]


def test_an_edited_observation_blob_fails_both(workdir: Path, tmp_path: Path) -> None:
    cas(workdir, PAGE).write_bytes(b"edited page")
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (2, 2)


def test_a_removed_receipt_is_skipped_by_bernstein_and_found_by_strict(
    workdir: Path, tmp_path: Path
) -> None:
    cas(workdir, DATA_RECEIPT).unlink()
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 2)
    assert (4, "bernstein.blob.missing", "receipt") in outcome.fields[RUN]


def test_a_removed_store_is_skipped_by_bernstein_and_found_by_strict(
    workdir: Path, tmp_path: Path
) -> None:
    shutil.rmtree(workdir / ".sdd" / "cas")
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 2)
    assert "bernstein.blob.missing" in outcome.findings[RUN]


def test_an_edited_receipt_no_longer_matches_its_anchored_hash(
    workdir: Path, tmp_path: Path
) -> None:
    path = cas(workdir, DATA_RECEIPT)
    receipt = json.loads(path.read_bytes())
    receipt["plan"]["steps"].append("drop table")
    path.write_bytes(acanon(receipt))
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (2, 2)


def test_a_resigned_receipt_with_a_rechained_journal_fools_bernstein_but_not_strict(
    workdir: Path, tmp_path: Path
) -> None:
    attacker = SigningKey(b"attacker".ljust(32, b"!"))
    receipt = json.loads(cas(workdir, DATA_RECEIPT).read_bytes())
    for artifact in receipt["outputs"]:
        artifact["ref"] = "exfiltrated/" + artifact["ref"]
    for artifact in receipt["inputs"] + receipt["outputs"]:
        message = acanon({k: artifact[k] for k in ("role", "ref", "content_hash")})
        signature = attacker.sign(message).signature
        import base64

        artifact["signature"] = base64.urlsafe_b64encode(signature).rstrip(b"=").decode()
    receipt["signer_public_key_pem"] = public_key_pem(bytes(attacker.verify_key))
    forged = acanon(receipt)
    cas(workdir, content_hash(forged)).write_bytes(forged)
    edit_row(workdir, RUN, 4, artifact_hash=content_hash(forged))
    write_lines(workdir, RUN, rechain(lines(workdir, RUN)))
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 2)
    assert (4, "bernstein.audit.mismatch", "artifact_hash") in outcome.fields[RUN]
    assert (4, "bernstein.receipt.self_asserted", "signer_public_key_pem") in outcome.fields[RUN]


def test_an_edited_audit_record_passes_bernstein_but_fails_the_hmac_and_cross_check(
    workdir: Path, tmp_path: Path
) -> None:
    segment = next((workdir / ".sdd" / "audit").glob("*.jsonl"))
    records = segment.read_text("ascii").splitlines(keepends=True)
    for number, line in enumerate(records):
        record = json.loads(line)
        if record["details"]["run_id"] == RUN and record["details"]["journal_index"] == 4:
            record["details"]["reason_code"] = "forged"
            records[number] = json.dumps(record, sort_keys=True) + "\n"
    segment.write_text("".join(records), "ascii")
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 2)
    assert {"bernstein.audit.chain", "bernstein.audit.mismatch"} <= outcome.findings[RUN]


def test_a_wrong_audit_key_fails_strict_only(workdir: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(b"1" * 64)
    wrong.chmod(0o600)
    outcome = import_and_verify(workdir, tmp_path / "l.db", key=wrong, trust=(SMALL_SIGNER,))
    assert outcome.compat[RUN] == 0 and outcome.strict[RUN] == 2
    assert "bernstein.audit.chain" in outcome.findings[RUN]


def test_a_duplicate_key_hides_a_forged_value_from_bernstein_not_from_strict(
    workdir: Path, tmp_path: Path
) -> None:
    rows = lines(workdir, RUN)
    rows[4] = rows[4].replace(
        '"stage_id": "data-0"', '"reason_code": "forged", "stage_id": "data-0"'
    )
    write_lines(workdir, RUN, rows)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RUN], outcome.strict[RUN]) == (0, 2)
    assert (4, "bernstein.duplicate_key", "duplicate_key") in outcome.fields[RUN]


def test_a_tampered_run_without_activity_rows_is_1_for_bernstein_and_2_strict(
    tmp_path: Path,
) -> None:
    workdir = copy_workdir(SHAPES, tmp_path / "wd")
    edit_row(workdir, "r0000-plain", 3, forged=True)
    outcome = import_and_verify(workdir, tmp_path / "l.db")
    assert (outcome.compat["r0000-plain"], outcome.strict["r0000-plain"]) == (1, 2)
    assert (3, "bernstein.chain", "payload") in outcome.fields["r0000-plain"]


# ---- edits inside the ledger after import: the native chain anchors the bytes -------


def tamper_ledger(path: Path, sql: str, params: tuple[object, ...] = ()) -> None:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(sql, params)
    conn.close()


@pytest.mark.parametrize(
    ("sql", "check"),
    [
        (
            "UPDATE blob_chunks SET data = CAST(replace(CAST(data AS TEXT), 'task_claimed', "
            "'task_claimeD') AS BLOB) WHERE digest = (SELECT digest FROM bernstein_files "
            "WHERE path = '.sdd/runs/run-001/journal.jsonl')",
            "bernstein.anchor.journal",
        ),
        (
            "UPDATE bernstein_files SET digest = (SELECT digest FROM bernstein_files WHERE "
            "path = '.sdd/runs/run-002/journal.jsonl') "
            "WHERE path = '.sdd/runs/run-001/journal.jsonl'",
            "bernstein.anchor.journal",
        ),
        ("DELETE FROM bernstein_files WHERE path LIKE '.sdd/cas/ccd6%'", "bernstein.anchor.file"),
        (
            "INSERT INTO bernstein_files (path, kind, digest, import_id) "
            "VALUES ('.sdd/cas/extra', 'cas', NULL, 1)",
            "bernstein.anchor.file",
        ),
        (
            "INSERT INTO bernstein_files (path, kind, digest, import_id) "
            "VALUES ('.sdd/cas/extra', 'cas', NULL, 99)",
            "bernstein.anchor.file",
        ),
        (
            "DELETE FROM blobs WHERE digest = "
            "(SELECT digest FROM bernstein_files WHERE path LIKE '.sdd/cas/ccd6%')",
            "bernstein.anchor.blob_missing",
        ),
        ("UPDATE bernstein_imports SET manifest = 'sha256:0'", "bernstein.anchor.import"),
    ],
    ids=[
        "journal-bytes",
        "journal-row",
        "deleted-file",
        "inserted-file",
        "unpinned-import",
        "deleted-blob",
        "import-row",
    ],
)
def test_edits_inside_the_ledger_are_found_by_the_native_verify(
    tmp_path: Path, sql: str, check: str
) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    tamper_ledger(path, sql)
    with Ledger.open(path) as ledger:
        report = ledger.verify()
    found = {d.check for d in report.workspace} | {
        d.check for run in report.runs for d in run.divergences
    }
    assert report.code == 2
    assert check in found


# ---- paths ------------------------------------------------------------------------


def test_symlinks_and_bad_run_ids_are_refused_and_reported(workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_bytes(b"not yours")
    (workdir / ".sdd" / "cas" / ("ab" * 32)).symlink_to(outside)
    (workdir / ".sdd" / "runs" / "escape").symlink_to(tmp_path, target_is_directory=True)
    (workdir / ".sdd" / "runs" / "bad id").mkdir()
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        summary = import_workdir(ledger, workdir)
        stored = {row[0] for row in ledger.db.conn.execute("SELECT path FROM bernstein_files")}
        assert ledger.runs() == []
    refused = dict(summary.refused)
    assert refused[".sdd/cas/" + "ab" * 32] == "symlink"
    assert refused[".sdd/runs/escape"] == "symlink"
    assert refused[".sdd/runs/bad id"] == "invalid run id"
    assert summary.code == 65
    # Nothing is imported from a workdir with anything refused (it had imported the rest).
    assert stored == set()
    assert summary.runs_imported == [] and summary.files_added == 0


def test_a_journal_whose_run_id_a_native_run_holds_refuses_the_whole_import(
    workdir: Path, tmp_path: Path
) -> None:
    """The conflict is found in the write transaction, before any file is stored: the
    ledger keeps only its native run (the rest of the workdir had been imported)."""
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        ledger.run("run-002").append("step", {"n": 1})
        summary = import_workdir(ledger, workdir)
        stored = ledger.db.conn.execute("SELECT count(*) FROM bernstein_files").fetchall()
        assert ledger.runs() == ["run-002"]
        assert ledger.verify().code == 0
    assert summary.refused == [
        (".sdd/runs/run-002/journal.jsonl", "a native run already has this id")
    ]
    assert summary.code == 65 and stored == [(0,)]


def test_special_files_and_unlisted_folders_are_refused_by_name(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cas = workdir / ".sdd" / "cas"
    (cas / "dangling").symlink_to(tmp_path / "nowhere")
    (workdir / ".sdd" / "runs" / "run-001" / "linked.json").symlink_to(
        workdir / ".sdd" / "runs" / "run-001" / "journal.jsonl"
    )
    os.mkfifo(cas / "pipe")
    (workdir / ".sdd" / "runs" / "run-002" / "locked").mkdir()
    (workdir / ".sdd" / "runs" / "run-002" / "locked" / "hidden.json").write_text("{}")
    listing = os.scandir

    def scandir(path: Any) -> Any:
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied")
        return listing(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        summary = import_workdir(ledger, workdir)
        stored = {row[0] for row in ledger.db.conn.execute("SELECT path FROM bernstein_files")}
    assert dict(summary.refused) == {
        ".sdd/cas/dangling": "symlink",
        ".sdd/cas/pipe": "not a regular file",
        ".sdd/runs/run-001/linked.json": "symlink",
        ".sdd/runs/run-002/locked": "cannot be listed (Permission denied)",
    }
    assert summary.code == 65
    assert stored == set() and summary.files_added == summary.bytes_added == 0


def test_a_blob_forged_before_the_import_is_not_taken_for_the_workdirs_bytes(
    workdir: Path, tmp_path: Path
) -> None:
    """The store skips bytes the file says it holds: a row forged under a workdir file's
    name before the import keeps its bytes, and every verify after names it."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path):
        pass
    victim = sorted((workdir / ".sdd" / "cas").iterdir())[0]
    name = "sha256:" + hashlib.sha256(victim.read_bytes()).hexdigest()
    tamper_ledger(
        path, "INSERT INTO blobs (digest, size, chunk_size) VALUES (?, 6, 1048576)", (name,)
    )
    tamper_ledger(
        path, "INSERT INTO blob_chunks (digest, idx, data) VALUES (?, 0, ?)", (name, b"forged")
    )
    with Ledger.open(path) as ledger:
        summary = import_workdir(ledger, workdir)
        assert ledger.blobs.get(name) == b"forged"
        report = ledger.verify()
    assert summary.files_added > 0
    assert report.code == 2
    named = [d for d in report.workspace if d.check == "blob.digest"]
    assert [d.subject for d in named] == [name]


def test_a_symlinked_sdd_folder_is_refused_whole(tmp_path: Path) -> None:
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd" / ".sdd").symlink_to(SMALL / ".sdd", target_is_directory=True)
    with Ledger.open(tmp_path / "ledger.db") as ledger, pytest.raises(Exception, match="symlink"):
        import_workdir(ledger, tmp_path / "wd")


def test_export_refuses_a_path_that_would_leave_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    tamper_ledger(
        path,
        "UPDATE bernstein_files SET path = '.sdd/../../escaped' WHERE path LIKE '.sdd/cas/ccd6%'",
    )
    with Ledger.open(path) as ledger, pytest.raises(Exception, match="unsafe path"):
        from agentledger.bernstein import export_workdir

        export_workdir(ledger, tmp_path / "out")
    assert not (tmp_path / "escaped").exists()


def test_compat_verdicts_need_no_keys(workdir: Path, tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        import_workdir(ledger, workdir)
        report = ledger.verify(["run-001"], options=VerifyOptions(compat="bernstein"))
    assert report.code == 0


def test_each_file_is_read_to_its_end_and_a_large_one_streamed_whole(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes stored are the file's to its end: one that grew after it was checked
    (``_read_to_end`` asked for fewer), and one over ``LARGE_FILE``, streamed."""
    big = workdir / ".sdd" / "runs" / "run-001" / "big.bin"
    big.write_bytes(bytes(range(256)) * 40)
    grown = workdir / ".sdd" / "runs" / "run-002" / "grown.json"
    grown.write_bytes(b"{}" * 3000)
    fd = os.open(grown, os.O_RDONLY)
    try:
        assert importer._read_to_end(fd, 10) == grown.read_bytes()
    finally:
        os.close(fd)
    monkeypatch.setattr(importer, "LARGE_FILE", 5000)
    monkeypatch.setattr(importer, "READ_BYTES", 7)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        summary = import_workdir(ledger, workdir)
        stored = dict(ledger.db.conn.execute("SELECT path, digest FROM bernstein_files"))
        for path in (big, grown):
            digest = stored[path.relative_to(workdir).as_posix()]
            assert digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
            assert ledger.blobs.get(digest) == path.read_bytes()
    assert summary.code == 0 and summary.bytes_added >= big.stat().st_size + 6000


def test_an_import_that_ran_just_before_the_write_is_seen_as_unchanged(
    workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two imports of one workdir at once (two processes): the second read what was
    imported before its write transaction began, then inserted every file again and
    died on the files table's unique path (exit 65, `UNIQUE constraint failed`)."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        write = ledger.db.write

        def race_then_write() -> Any:
            monkeypatch.setattr(ledger.db, "write", write)
            with Ledger.open(path) as other:  # the other process's import, done meanwhile
                assert import_workdir(other, workdir).code == 0
            return write()

        monkeypatch.setattr(ledger.db, "write", race_then_write)
        summary = import_workdir(ledger, workdir)
        paths = [row[0] for row in ledger.db.conn.execute("SELECT path FROM bernstein_files")]
        raced = {run.run_id: run.code for run in ledger.verify().runs}
    with Ledger.open(tmp_path / "alone.db") as alone:
        import_workdir(alone, workdir)
        assert raced == {run.run_id: run.code for run in alone.verify().runs}
    assert summary.code == 0
    assert summary.files_added == 0 and summary.files_unchanged > 0
    assert summary.runs_unchanged == ["run-001", "run-002", "run-003"]
    assert len(paths) == len(set(paths))


def test_a_ledger_kept_inside_the_workdir_is_never_read_by_its_own_import(
    workdir: Path,
) -> None:
    """Reading its own files by path would drop the process's SQLite locks on them
    (sqlite_files.py): the scan refuses them by inode, and the rest imports."""
    path = workdir / ".sdd" / "runs" / "run-001" / "agentledger.db"
    with Ledger.open(path) as ledger:
        ledger.run("native").append("step", {"n": 1})
        summary = import_workdir(ledger, workdir)
        stored = {row[0] for row in ledger.db.conn.execute("SELECT path FROM bernstein_files")}
        report = ledger.verify(options=VerifyOptions(compat="bernstein"))
    assert {run.run_id: run.code for run in report.runs}["native"] == 0
    assert report.workspace == []
    # Skipped, not refused: they are no fault of the workdir.
    skipped = dict(summary.skipped)
    own = ".sdd/runs/run-001/agentledger.db"
    assert skipped[own] == skipped[own + "-wal"] == "a file of the ledger importing it"
    assert summary.refused == [] and summary.code == 0
    assert not any(p.startswith(own) for p in stored)
    assert summary.runs_imported == ["run-001", "run-002", "run-003"]


def test_a_run_folder_deleted_before_the_import_is_found_by_its_audit_records(
    workdir: Path, tmp_path: Path
) -> None:
    """The chain mirrors activities: deleting a whole run (or its journal) before the
    import left its audit records with no journal, and strict said clean (exit 0). The
    import pins the run folders the workdir held; a whole strict verify names the run."""
    shutil.rmtree(workdir / ".sdd" / "runs" / "run-002")
    key = private_key_file(SMALL, tmp_path / "audit.key")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, workdir)
        strict = ledger.verify(options=VerifyOptions(audit_key_file=key, trust=(SMALL_SIGNER,)))
        compat = ledger.verify(options=VerifyOptions(compat="bernstein"))
    found = [(d.check, d.subject) for d in strict.workspace]
    assert ("bernstein.audit.missing_from_journal", "run run-002") in found, found
    assert strict.code == 2
    assert "4 activity.result record(s)" in next(
        d.expected for d in strict.workspace if d.subject == "run run-002"
    )
    assert compat.code == 0  # bernstein's own verify reads no audit chain


def test_a_run_left_out_of_an_import_on_purpose_is_not_called_deleted(
    workdir: Path, tmp_path: Path
) -> None:
    key = private_key_file(SMALL, tmp_path / "audit.key")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, workdir, runs=["run-001", "run-003"])
        strict = ledger.verify(options=VerifyOptions(audit_key_file=key, trust=(SMALL_SIGNER,)))
    assert [d for d in strict.workspace if d.check == "bernstein.audit.missing_from_journal"] == []


@pytest.mark.parametrize(
    ("line", "raised"),
    [
        ('{"x": ' + "9" * 5000 + "}", "ValueError"),
        ("[" * 100_000 + "]" * 100_000, "RecursionError"),
    ],
)
def test_a_journal_line_bernsteins_reader_raises_on_gets_no_verdict(
    workdir: Path, tmp_path: Path, line: str, raised: str
) -> None:
    """bernstein's ``load_events`` catches only ``JSONDecodeError``: on these lines it
    raises and answers nothing (its CLI exits 1). Compat said 2 (a discarded line), strict
    ``bernstein.line.discarded``; now compat answers 1 and strict names the crash."""
    with (workdir / ".sdd" / "runs" / RUN / "journal.jsonl").open("a") as journal:
        journal.write(line + "\n")
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, workdir)
        compat = ledger.verify([RUN], options=VerifyOptions(compat="bernstein"))
        strict = ledger.verify([RUN], options=VerifyOptions(trust=(SMALL_SIGNER,)))
    assert compat.runs[0].code == 1
    assert raised in (compat.runs[0].not_found or "")
    checks = {d.check: d for d in strict.runs[0].divergences}
    assert "bernstein.crash" in checks and "bernstein.line.discarded" not in checks
    assert checks["bernstein.crash"].actual.startswith(raised)


CAS_BLOB = (
    "(SELECT digest FROM bernstein_files WHERE path LIKE '.sdd/cas/%' ORDER BY path DESC LIMIT 1)"
)


@pytest.mark.parametrize(
    ("sql", "code", "says"),
    [
        (f"DELETE FROM blob_chunks WHERE digest = {CAS_BLOB}", 2, "blob-missing"),
        (f"UPDATE blob_chunks SET data = x'00' WHERE digest = {CAS_BLOB}", 2, "blob-digest"),
        # a chunk that holds no bytes at all (a flipped serial type): was exit 70
        (f"UPDATE blob_chunks SET data = NULL WHERE digest = {CAS_BLOB}", 2, "blob-digest"),
        (
            "INSERT INTO bernstein_files VALUES ('.sdd/runs/run-001/journal.jsonl/x', 'other', "
            f"{CAS_BLOB}, 1)",
            65,
            "export-failed",
        ),
    ],
)
def test_export_of_a_damaged_store_is_refused_and_writes_nothing(
    tmp_path: Path, cli: Any, sql: str, code: int, says: str
) -> None:
    # Export wrote what the rows said unchecked: a missing blob was exit 70 (KeyError), a
    # path under a file exit 70 (FileExistsError), both with half a workdir written; an
    # altered blob was exported under its old name, exit 0.
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    if "DELETE" in sql:
        tamper_ledger(path, sql.replace("blob_chunks", "blobs"))
    if "NULL" in sql:
        retype_rows(path, ("blob_chunks",), (sql, ()))
    else:
        tamper_ledger(path, sql)
    out = tmp_path / "out"
    out.mkdir()  # an empty folder given: it stays empty
    result = cli("export", "bernstein", str(out), ledger=path)
    assert result.code == code, result.err
    assert result.err.startswith(f"error [{says}]:") and result.err.count("\n") == 1
    assert list(out.iterdir()) == []
    missing = tmp_path / "absent" / "out"  # a folder export creates is removed again
    assert cli("export", "bernstein", str(missing), ledger=path).code == code
    assert not missing.exists()


def test_export_of_files_rows_other_than_the_import_pins_is_refused(
    tmp_path: Path, cli: Any
) -> None:
    """run-001's journal digest copied onto run-002's row of bernstein_files: every blob
    still hashes to its name, so export wrote run-001's journal as run-002's (exit 0),
    a workdir other than the one imported. The rows must re-serialize to the manifest the
    import pins; otherwise nothing is exported."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    tamper_ledger(
        path,
        "UPDATE bernstein_files SET digest = (SELECT digest FROM bernstein_files "
        "WHERE path = '.sdd/runs/run-001/journal.jsonl') "
        "WHERE path = '.sdd/runs/run-002/journal.jsonl'",
    )
    out = tmp_path / "out"
    result = cli("export", "bernstein", str(out), ledger=path)
    assert result.code == 2, result.err
    assert result.err.startswith("error [bernstein-anchor]:")
    assert not out.exists()


def _small_imported(tmp_path: Path) -> Path:
    """A ledger with the small fixture imported."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    return path


@pytest.mark.parametrize("value", [b"run-002", None], ids=["blob", "null"])
def test_export_of_a_run_row_whose_id_is_not_text_is_not_a_crash(
    tmp_path: Path, cli: Any, value: object
) -> None:
    """A bernstein_runs row whose run id is a blob or NULL: export sorted it with the text
    ids and exited 70. It names no run; the workdir is written whole, as imported."""
    path = _small_imported(tmp_path)
    retype_rows(
        path,
        ("bernstein_runs",),
        ("UPDATE bernstein_runs SET run_id = ? WHERE run_id = 'run-002'", (value,)),
    )
    result = cli("export", "bernstein", str(tmp_path / "out"), ledger=path)
    assert result.code == 0, result.err
    assert (tmp_path / "out" / ".sdd" / "runs" / "run-002" / "journal.jsonl").read_bytes() == (
        SMALL / ".sdd" / "runs" / "run-002" / "journal.jsonl"
    ).read_bytes()


def test_show_of_a_run_whose_journal_name_is_not_text_is_not_a_crash(
    tmp_path: Path, cli: Any
) -> None:
    """The run's journal row in bernstein_files named by a blob: `show RUN --json` put the
    bytes into its JSON and exited 70. A name that is not text names no blob: the journal
    is shown as not held, and verify's findings decide the exit code."""
    path = _small_imported(tmp_path)
    retype_rows(
        path,
        ("bernstein_files",),
        (
            "UPDATE bernstein_files SET digest = ? WHERE path = '.sdd/runs/run-003/journal.jsonl'",
            (b"\x00\xff",),
        ),
    )
    for args in (["show", "run-003", "--json"], ["show", "run-003"]):
        result = cli(*args, ledger=path)
        assert result.code == 2, result.err
        assert "Traceback" not in result.err and "[internal]" not in result.err


@pytest.mark.parametrize(
    ("run_id", "kind"),
    [
        ("_bernstein", "import.bernstein.workdir"),
        ("run-001", "import.bernstein"),
        ("r", "import.x"),
    ],
)
def test_an_import_anchor_cannot_be_appended_by_hand(
    tmp_path: Path, cli: Any, run_id: str, kind: str
) -> None:
    # `append` wrote the importer's own kinds: verify then read a hand-made entry as an
    # import's anchor (41 bernstein.anchor.file findings), and every signature was refused.
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
        before = ledger.verify().to_json()["findings_by_check"]
    body = {"format": "bernstein-3.23.0", "import_id": 2, "runs": [], "present": []}
    with Ledger.open(path) as ledger, pytest.raises(InvalidInput) as refused:
        ledger.run(run_id).append(kind, body)
    assert refused.value.code == "reserved-kind"
    result = cli("append", run_id, kind, json.dumps(body), ledger=path)
    assert result.code == 65 and "reserved" in result.err
    with Ledger.open(path) as ledger:
        assert ledger.verify().to_json()["findings_by_check"] == before


def test_an_export_killed_while_writing_leaves_no_partial_workdir(tmp_path: Path) -> None:
    """Export wrote straight into OUTDIR: killed half-way (SIGKILL, a power cut), it left
    a partial workdir there that reads as a complete one. It now writes beside OUTDIR and
    renames the whole over it."""
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    out = tmp_path / "out"
    out.mkdir()
    # A slow writer: each file takes a while, so the kill lands mid-export.
    script = (
        "import sys, time\n"
        "from agentledger.bernstein import exporter\n"
        "slow = exporter._export_one\n"
        "def one(*args, **kwargs):\n"
        "    slow(*args, **kwargs); time.sleep(0.05)\n"
        "exporter._export_one = one\n"
        "from agentledger.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    args = ["--ledger", str(path), "export", "bernstein", str(out)]
    process = subprocess.Popen([sys.executable, "-c", script, *args])
    deadline = time.monotonic() + 60
    while not any(p.is_file() for p in tmp_path.glob(".out.export-*/**/*")):
        assert process.poll() is None and time.monotonic() < deadline, "never started writing"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert list(out.iterdir()) == []  # a leftover staging folder is hidden beside it
    cli = Path(sys.executable).parent / "agentledger"
    again = subprocess.run([str(cli), *args], capture_output=True, text=True)  # reruns well
    assert again.returncode == 0, again.stderr
    assert (out / ".sdd").is_dir()


def test_an_export_into_a_folder_whose_parent_is_read_only_is_a_typed_refusal(
    tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workdir is written next to OUTDIR and renamed into it: where OUTDIR's own folder
    cannot be written, that is a refusal naming why (exit 65), not a crash (exit 70)."""
    import tempfile

    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    out = tmp_path / "shared" / "out"

    def read_only_folder(*args: Any, **kwargs: Any) -> str:
        raise PermissionError(13, "Permission denied")  # as for a user not allowed there

    monkeypatch.setattr(tempfile, "mkdtemp", read_only_folder)
    result = cli("export", "bernstein", str(out), ledger=path)
    assert result.code == 65, result.err
    assert result.err.startswith("error [export-failed]:") and "beside" in result.err
    assert not out.exists()  # the folder it made for the export is removed again


def test_an_export_through_a_link_to_an_empty_folder_fills_that_folder(
    tmp_path: Path, cli: Any
) -> None:
    """The workdir is renamed into place: given a symlink to the output folder, the rename
    would have replaced the link and left the folder it names empty."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    result = cli("export", "bernstein", str(link), ledger=path)
    assert result.code == 0, result.err
    assert link.is_symlink() and (real / ".sdd").is_dir()
