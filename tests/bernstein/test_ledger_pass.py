"""The ledger pass (``verify_ledger_runs``: journals and receipts read from SQLite and
settled in Rust, clean runs returned as a few numbers) gives exactly the verdicts and
findings of ``verify_runs`` over the same imported workdir, whatever the damage; and the
blobs it leaves to re-hash are re-hashed from the ledger's own bytes."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest
from nacl.signing import SigningKey

from agentledger import Ledger, _core
from agentledger.bernstein import LedgerWorkdir, RunResult, import_workdir, verify_runs
from agentledger.bernstein.audit_chain import verify_audit
from agentledger.bernstein.format import acanon, content_hash
from agentledger.bernstein.verifier import verify_ledger_runs
from agentledger.bernstein.writer import public_key_pem, rechain
from agentledger.verify import VerifyOptions

from .bernstein_testkit import (
    SHAPES,
    SHAPES_SIGNERS,
    SMALL,
    SMALL_SIGNER,
    cas,
    copy_workdir,
    edit_row,
    lines,
    write_lines,
)
from .test_paths_agree import RECEIPT, TAMPERS

INPUT = "sha256:3806a73a800d66be92d02f2b582208bb9a0536be72585160c8d803e9e7cd6530"


def _restore_receipt(wd: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Store an edited receipt under its own name and rechain run-001 onto it."""
    receipt = json.loads(cas(wd, RECEIPT).read_bytes())
    change(receipt)
    edited = acanon(receipt)
    cas(wd, content_hash(edited)).write_bytes(edited)
    edit_row(wd, "run-001", 4, artifact_hash=content_hash(edited))
    write_lines(wd, "run-001", rechain(lines(wd, "run-001")))


def _flip_signature(receipt: dict[str, Any]) -> None:
    raw = bytearray(base64.urlsafe_b64decode(receipt["inputs"][0]["signature"] + "=="))
    raw[0] ^= 1
    receipt["inputs"][0]["signature"] = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _drop_unobserved_input(wd: Path) -> None:
    """The receipt still pins the input, the journal no longer observes it."""
    row = json.loads(lines(wd, "run-001")[4])
    observations = [o for o in row["observations"] if o["content_hash"] != INPUT]
    hashes = sorted({o["content_hash"] for o in observations})
    edit_row(
        wd,
        "run-001",
        4,
        observations=observations,
        evidence_set_hash=content_hash(acanon(hashes)),
    )
    write_lines(wd, "run-001", rechain(lines(wd, "run-001")))
    cas(wd, INPUT).unlink()


def _edit(path: Path) -> None:
    path.write_bytes(b"edited")


def _numeric_step(receipt: dict[str, Any]) -> None:
    receipt["plan"]["steps"].append(7)


RECEIPT_TAMPERS: dict[str, Callable[[Path], None]] = {
    "drop-receipt-input": lambda wd: cas(wd, INPUT).unlink(),
    "drop-unobserved-input": _drop_unobserved_input,
    "edit-receipt-input": lambda wd: _edit(cas(wd, INPUT)),
    "bad-signature": lambda wd: _restore_receipt(wd, _flip_signature),
    "numeric-step": lambda wd: _restore_receipt(wd, _numeric_step),
}


def _resign_receipt(receipt: dict[str, Any]) -> None:
    """Signed anew by another key: it settles, but the audit mirror disagrees."""
    attacker = SigningKey(b"attacker".ljust(32, b"!"))
    for artifact in receipt["inputs"] + receipt["outputs"]:
        message = acanon({k: artifact[k] for k in ("role", "ref", "content_hash")})
        signature = attacker.sign(message).signature
        artifact["signature"] = base64.urlsafe_b64encode(signature).rstrip(b"=").decode()
    receipt["signer_public_key_pem"] = public_key_pem(bytes(attacker.verify_key))


def _drop_stage(wd: Path) -> None:
    """Row 3 (an audited stage) cut out and the chain rebuilt: every later row moves."""
    rows = lines(wd, "run-001")
    write_lines(wd, "run-001", rechain(rows[:3] + rows[4:]))


AUDIT_TAMPERS: dict[str, Callable[[Path], None]] = {
    "resigned-receipt": lambda wd: _restore_receipt(wd, _resign_receipt),
    "dropped-stage": _drop_stage,
}
"""Runs that settle in Rust, yet disagree with the audit mirror."""


def summary(results: list[RunResult]) -> list[tuple[object, ...]]:
    return [
        (
            r.run_id,
            r.compat_code,
            r.strict_code,
            (r.found, r.ok, r.chain_ok, r.reason, r.crash, r.rows, r.activities),
            sorted((f.step or -1, f.check, f.field, f.expected, f.actual) for f in r.findings),
            None if r.journal is None else [r.journal[k] for k in ("file_sha256", "head", "count")],
            (r.unstored_reports, r.limits),
        )
        for r in results
    ]


def both_ways(
    workdir: Path, ledger_path: Path, trusted: frozenset[bytes], master: bytes | None
) -> tuple[list[RunResult], list[RunResult], int, int]:
    """``verify_runs`` and the ledger pass over every run, with the audit cross-check:
    their results, and how many digests each leaves to re-hash."""
    with Ledger.open(ledger_path) as ledger:
        import_workdir(ledger, workdir)
        with ledger.db.snapshot() as conn:
            ledger_workdir = LedgerWorkdir(conn, ledger.blobs)
            runs = [*sorted(ledger_workdir.runs), "no-such-run"]
            audit = verify_audit(ledger_workdir.audit_segments(), master)
            expected = verify_runs(ledger_workdir, runs, audit=audit, trusted=trusted)
            passed, digests = verify_ledger_runs(ledger_workdir, runs, audit=audit, trusted=trusted)
    referenced = set().union(*(r.referenced for r in expected))
    digests.update(sorted(set().union(*(r.referenced for r in passed))))
    return expected, passed, len(referenced), len(digests)


def _signer(text: str) -> bytes:
    return bytes.fromhex(text.split(":", 1)[1])


DAMAGE = {**TAMPERS, **RECEIPT_TAMPERS, **AUDIT_TAMPERS}


def _damaged(tmp_path: Path, tamper: Callable[[Path], None]) -> tuple[Path, bytes]:
    """A copy of the small workdir with `tamper` applied, and its audit master key."""
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    tamper(workdir)
    return workdir, (SMALL / "audit.key").read_bytes().strip()


@pytest.mark.parametrize("tamper", sorted(DAMAGE))
def test_the_ledger_pass_agrees_with_verify_runs_on_every_damage(
    tmp_path: Path, tamper: str
) -> None:
    workdir, master = _damaged(tmp_path, DAMAGE[tamper])
    for trusted in (frozenset(), frozenset({_signer(SMALL_SIGNER)})):
        ledger_path = tmp_path / f"ledger-{len(trusted)}.db"
        expected, passed, referenced, digests = both_ways(workdir, ledger_path, trusted, master)
        assert summary(passed) == summary(expected)
        assert digests == referenced


def test_the_ledger_pass_agrees_with_verify_runs_on_every_shape(tmp_path: Path) -> None:
    trusted = frozenset(_signer(s) for s in SHAPES_SIGNERS)
    expected, passed, referenced, digests = both_ways(SHAPES, tmp_path / "l.db", trusted, None)
    assert summary(passed) == summary(expected)
    assert digests == referenced
    # The shapes hold both kinds of run: settled in Rust, and finished in Python.
    assert {r.settled > 0 for r in passed} == {True, False}


@pytest.mark.parametrize("tamper", sorted(AUDIT_TAMPERS))
def test_a_run_settled_in_rust_is_cross_checked_with_the_audit_mirror(
    tmp_path: Path, tamper: str
) -> None:
    workdir, master = _damaged(tmp_path, AUDIT_TAMPERS[tamper])
    _, passed, _, _ = both_ways(workdir, tmp_path / "l.db", frozenset(), master)
    run = passed[0]
    assert (run.stages, run.settled > 0, run.compat_code, run.strict_code) == ([], True, 0, 2)
    assert "bernstein.audit.mismatch" in {f.check for f in run.findings}


def test_clean_runs_are_settled_in_rust_receipts_included(tmp_path: Path) -> None:
    _, passed, _, _ = both_ways(SMALL, tmp_path / "l.db", frozenset(), None)
    assert [(r.run_id, r.settled, len(r.stages)) for r in passed[:3]] == [
        (f"run-00{n}", 4, 0) for n in (1, 2, 3)
    ]
    assert {f.check for f in passed[0].findings} == {"bernstein.receipt.self_asserted"}


@pytest.mark.parametrize("tamper", sorted(RECEIPT_TAMPERS))
def test_a_receipt_rust_cannot_settle_is_finished_in_python(tmp_path: Path, tamper: str) -> None:
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    RECEIPT_TAMPERS[tamper](workdir)
    _, passed, _, _ = both_ways(workdir, tmp_path / "l.db", frozenset(), None)
    run = passed[0]
    assert (run.settled, run.compat_code) == (0, 2)
    assert [s.stage_id for s in run.stages if not s.ok] == ["data-0"]


@pytest.mark.parametrize(
    ("edit", "check"),
    [
        ("UPDATE blob_chunks SET data = x'00' WHERE digest = ?", "blob.digest"),
        ("DELETE FROM blob_chunks WHERE digest = ?", "blob.missing"),
    ],
)
@pytest.mark.parametrize("pinned_by", ["observation", "receipt"])
@pytest.mark.parametrize(
    "runs", [["run-001"], ["run-001", "run-002", "run-003"]], ids=["one-run", "every-run"]
)
def test_a_referenced_blob_edited_in_the_ledger_is_found(
    tmp_path: Path, edit: str, check: str, pinned_by: str, runs: list[str]
) -> None:
    # Every run: the pass reads the whole store while it verifies (see verify_ledger_runs).
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    page = json.loads(lines(SMALL, "run-001")[2])["observations"][0]["content_hash"]
    target = page if pinned_by == "observation" else INPUT
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(edit, (target,))
    conn.close()
    with Ledger.open(path) as ledger:
        report = ledger.verify(runs, options=VerifyOptions(compat="bernstein"))
    assert report.code == 2
    assert [(d.check, d.subject) for d in report.workspace] == [(check, target)]


def _assert_read_ahead_finds(path: Path, edited: str | None) -> None:
    """Verify every run (the store is read ahead): clean, or only blob ``edited`` differs."""
    with Ledger.open(path) as ledger:
        runs = ["run-001", "run-002", "run-003"]
        report = ledger.verify(runs, options=VerifyOptions(compat="bernstein"))
    if edited is not None:
        assert report.code == 2
        assert [(d.check, d.subject) for d in report.workspace] == [("blob.digest", edited)]
    else:
        assert report.code == 0, [d.to_json() for d in report.workspace]


@pytest.mark.parametrize("edited", [False, True], ids=["same-bytes", "edited"])
def test_a_blob_whose_chunks_are_stored_out_of_order_is_hashed_in_chunk_order(
    tmp_path: Path, edited: bool
) -> None:
    """A blob whose chunks are stored out of chunk order is hashed in chunk order by the
    read-ahead of the store: the verdict is the bytes', not the storage order's."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    page = json.loads(lines(SMALL, "run-001")[2])["observations"][0]["content_hash"]
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = OFF")
    query = "SELECT data FROM blob_chunks WHERE digest = ? AND idx = 0"
    data = bytes(conn.execute(query, (page,)).fetchall()[0][0])
    head, tail = data[:10], data[10:] + (b"!" if edited else b"")
    conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (page,))
    # The second chunk is stored first.
    insert = "INSERT INTO blob_chunks (digest, idx, data) VALUES (?, ?, ?)"
    conn.execute(insert, (page, 1, tail))
    conn.execute(insert, (page, 0, head))
    conn.close()
    _assert_read_ahead_finds(path, page if edited else None)


@pytest.mark.parametrize("edited", [False, True], ids=["same-bytes", "edited"])
def test_the_same_bytes_under_two_adjacent_names_are_hashed_as_two_blobs(
    tmp_path: Path, edited: bool
) -> None:
    """The store is read ahead in path order: a blob stored under two names that are next
    to each other comes twice in a row, and is hashed as itself both times (not as the two
    copies end to end)."""
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    page = json.loads(lines(workdir, "run-001")[2])["observations"][0]["content_hash"]
    cas(workdir, page + "x").write_bytes(cas(workdir, page).read_bytes())  # sorts next
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, workdir)
    if edited:
        conn = apsw.Connection(str(path))
        edit = "UPDATE blob_chunks SET data = CAST(data || x'21' AS BLOB) WHERE digest = ?"
        conn.execute(edit, (page,))
        conn.close()
    _assert_read_ahead_finds(path, page if edited else None)


def test_sha256_check_blobs_reports_each_digest_once_in_order(tmp_path: Path) -> None:
    from agentledger.storage import native

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, SMALL)
        with ledger.db.snapshot() as conn:
            stored = sorted(str(r[0]) for r in conn.execute("SELECT digest FROM blobs LIMIT 3"))
            absent = "sha256:" + "0" * 64
            digests = _core.DigestSet()
            digests.update([stored[2], absent, stored[0], stored[2], stored[1]])
            found, mismatches, missing = _core.sha256_check_blobs(
                native.handle(conn), LedgerWorkdir.LISTED_BLOBS, digests
            )
    assert (found, mismatches, missing, len(digests)) == (3, [], [absent], 4)


def test_the_store_is_read_ahead_only_when_its_blobs_will_be_re_hashed(tmp_path: Path) -> None:
    from unittest import mock

    seen: list[object] = []
    real = _core.bernstein_ledger_pass

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("store_blobs_sql"))
        return real(*args, **kwargs)

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, SMALL)
        runs = ["run-001", "run-002", "run-003"]
        with mock.patch.object(_core, "bernstein_ledger_pass", spy):
            for selection in (runs, runs[:1], None):  # every run, one run, the whole workspace
                assert ledger.verify(selection, options=VerifyOptions(compat="bernstein")).code == 0
    assert [sql is not None for sql in seen] == [True, False, False]


def test_pending_journals_are_verified_once_and_for_their_own_runs(tmp_path: Path) -> None:
    from agentledger.bernstein.verifier import pending_journals

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, SMALL)
        with ledger.db.snapshot() as conn:
            workdir = LedgerWorkdir(conn, ledger.blobs)
            runs = ["run-001", "run-002"]
            journals = pending_journals(conn, workdir.runs, runs)
            with pytest.raises(ValueError, match="not those of these runs"):
                verify_ledger_runs(workdir, runs[:1], journals=journals)
            results, _ = verify_ledger_runs(workdir, runs, journals=journals)
            assert [(r.run_id, r.compat_code) for r in results] == [(run, 0) for run in runs]
            with pytest.raises(RuntimeError, match="already verified"):
                verify_ledger_runs(workdir, runs, journals=journals)
