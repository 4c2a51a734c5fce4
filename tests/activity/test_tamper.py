"""Each tampering with an activity is caught: exit 2, with the stage, the check and the reason.

Edits are made the way an attacker with write access to the ledger file (but not to the
keys kept outside it) would: plain SQL, and where it helps the attacker, every hash
recomputed and the run's chain rebuilt.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger, _core

from .activity_testkit import PAGE, checks_found, record_every_modality, sql

RUN = "run-1"
Edit = Callable[[Path], object]


def entry_body(path: Path, modality: str) -> tuple[int, dict[str, Any]]:
    rows = sql(path, "SELECT seq, bytes FROM entries WHERE run_id = ? ORDER BY seq", (RUN,))
    for seq, raw in rows:
        body: dict[str, Any] = json.loads(raw)["body"]
        if body["kind"] == modality:
            return seq, body
    raise AssertionError(modality)


def read_blob(path: Path, digest: str) -> bytes:
    rows = sql(path, "SELECT data FROM blob_chunks WHERE digest = ? ORDER BY idx", (digest,))
    return b"".join(row[0] for row in rows)


def put_blob(conn: apsw.Connection, data: bytes) -> str:
    digest = _core.blake3_hex(data)
    conn.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?, ?)", (digest, len(data), 1 << 20))
    conn.execute("INSERT OR IGNORE INTO blob_chunks VALUES (?, 0, ?)", (digest, data))
    return digest


def rewrite_and_rechain(path: Path, seq: int, change: Callable[[dict[str, Any]], None]) -> None:
    """Change one entry's body, then recompute its hash and every later link and hash."""
    conn = apsw.Connection(str(path))
    rows = conn.execute(
        "SELECT seq, bytes FROM entries WHERE run_id = ? AND seq >= ? ORDER BY seq", (RUN, seq)
    ).fetchall()
    prev = ""
    for n, raw in rows:
        assert isinstance(raw, bytes)
        doc = json.loads(raw)
        if n == seq:
            change(doc["body"])
        if prev:
            doc["prev"] = prev
        new = _core.canonicalize(doc)
        digest = _core.entry_hash(new)
        conn.execute(
            "UPDATE entries SET bytes = ?, hash = ? WHERE run_id = ? AND seq = ?",
            (new, digest, RUN, n),
        )
        prev = "blake3:" + digest.hex()
    conn.execute("UPDATE runs SET head_hash = ? WHERE run_id = ?", (bytes.fromhex(prev[7:]), RUN))
    conn.close()


def rewrite_receipt(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit the data receipt, store it under its new hash, re-pin it, rebuild the chain."""
    seq, body = entry_body(path, "data")
    receipt = json.loads(read_blob(path, body["artifact_hash"]))
    change(receipt)
    conn = apsw.Connection(str(path))
    digest = put_blob(conn, _core.canonicalize(receipt))
    conn.close()
    rewrite_and_rechain(path, seq, lambda b: b.update(artifact_hash=digest))


def remove_blob(digest_of: Callable[[Path], str]) -> Edit:
    def edit(path: Path) -> None:
        digest = digest_of(path)
        sql(path, "DELETE FROM blob_chunks WHERE digest = ?", (digest,))
        sql(path, "DELETE FROM blobs WHERE digest = ?", (digest,))

    return edit


def page_digest(path: Path) -> str:
    return _core.blake3_hex(PAGE)


def receipt_digest(path: Path) -> str:
    return str(entry_body(path, "data")[1]["artifact_hash"])


def edit_blob(path: Path) -> None:
    sql(
        path,
        "UPDATE blob_chunks SET data = CAST('<html>defaced</html>' AS BLOB) WHERE digest = ?",
        (page_digest(path),),
    )


def edit_receipt_in_place(path: Path) -> None:
    digest = receipt_digest(path)
    data = read_blob(path, digest).replace(b'"sum amount by id"', b'"drop all rows"')
    sql(path, "UPDATE blob_chunks SET data = ? WHERE digest = ?", (data, digest))


def swap_signatures(receipt: dict[str, Any]) -> None:
    first, second = receipt["inputs"][0], receipt["outputs"][0]
    first["signature"], second["signature"] = second["signature"], first["signature"]


def rewrite_steps_recomputing_hashes(receipt: dict[str, Any]) -> None:
    from agentledger.activity.receipts import plan_hash

    steps = ["exfiltrate in.csv"]
    receipt["plan"]["steps"] = steps
    receipt["plan"]["plan_hash"] = plan_hash(receipt["plan"]["input_hashes"], steps)


def edit_mirror_record(path: Path) -> None:
    record = sql(path, "SELECT record FROM audit_log WHERE pos = 1")[0][0]
    edited = record.replace(b'"reason_code":"ok"', b'"reason_code":"all-good"')
    assert edited != record
    sql(path, "UPDATE audit_log SET record = ? WHERE pos = 1", (edited,))


def swap_evidence_recomputing_everything(path: Path) -> None:
    """Point the research stage at forged bytes, recomputing evidence and chain hashes."""
    seq, _ = entry_body(path, "research")
    conn = apsw.Connection(str(path))
    forged = put_blob(conn, b"<html>a page the agent never saw</html>")
    conn.close()

    def change(body: dict[str, Any]) -> None:
        body["observations"][0]["content_hash"] = forged
        body["evidence_set_hash"] = _core.evidence_set_hash([forged])

    rewrite_and_rechain(path, seq, change)


TAMPERS: dict[str, tuple[Edit, str]] = {
    "blob removed": (remove_blob(page_digest), "blob.missing"),
    "blob edited": (edit_blob, "blob.digest"),
    "receipt removed": (remove_blob(receipt_digest), "receipt.missing"),
    "receipt edited": (edit_receipt_in_place, "receipt.artifact_hash"),
    "signature swapped (hashes recomputed)": (
        lambda p: rewrite_receipt(p, swap_signatures),
        "receipt.signature",
    ),
    "plan steps rewritten (every hash recomputed)": (
        lambda p: rewrite_receipt(p, rewrite_steps_recomputing_hashes),
        "receipt.signature",
    ),
    "mirror record edited": (edit_mirror_record, "audit.mac"),
    "mirror record missing": (
        lambda p: sql(p, "DELETE FROM audit_log WHERE pos = 2"),
        "audit.missing",
    ),
    "mirror tail record missing": (
        lambda p: sql(p, "DELETE FROM audit_log WHERE pos = (SELECT max(pos) FROM audit_log)"),
        "audit.missing",
    ),
    "last activity stripped from the journal": (
        lambda p: sql(p, "DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)"),
        "audit.orphan",
    ),
    "mirror records swapped (with their MACs)": (
        lambda p: sql(
            p,
            "UPDATE audit_log SET pos = CASE pos WHEN 1 THEN -2 ELSE -1 END WHERE pos IN (1, 2);"
            "UPDATE audit_log SET pos = -pos WHERE pos < 0",
        ),
        "audit.record",
    ),
    "mirror record moved to another step": (
        lambda p: sql(p, "UPDATE audit_log SET seq = seq + 100 WHERE pos = 0"),
        "audit.record",
    ),
    "data stage relabelled to skip its receipt (every hash recomputed)": (
        lambda p: rewrite_and_rechain(
            p, entry_body(p, "data")[0], lambda body: body.update(kind="coding")
        ),
        "audit.entry",
    ),
    "evidence swapped (every hash recomputed)": (
        swap_evidence_recomputing_everything,
        "audit.entry",
    ),
}


@pytest.fixture
def recorded(ledger_path: Path) -> Path:
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
        assert ledger.verify().code == 0
    return ledger_path


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_each_tampering_is_caught_through_the_api(recorded: Path, case: str) -> None:
    edit, check = TAMPERS[case]
    edit(recorded)
    with Ledger.open(recorded) as ledger:
        whole = ledger.verify()
        one = ledger.verify(runs=[RUN])
    for report in (whole, one):
        assert report.code == 2, case
        assert check in checks_found(report), (case, checks_found(report))


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_each_tampering_makes_activity_verify_exit_2_naming_the_check(
    recorded: Path, cli: Any, case: str
) -> None:
    edit, check = TAMPERS[case]
    edit(recorded)
    result = cli("activity", "verify", RUN, "--json")
    assert result.code == 2, result.err
    doc = result.json()
    named = [d["check"] for d in doc["workspace"]] + [
        d["check"] for run in doc["failures"] for d in run["divergences"]
    ]
    assert check in named


def test_a_receipt_divergence_names_the_stage(recorded: Path) -> None:
    rewrite_receipt(recorded, rewrite_steps_recomputing_hashes)
    with Ledger.open(recorded) as ledger:
        verdict = ledger.verify_run(RUN)
    signature = [d for d in verdict.divergences if d.check == "receipt.signature"]
    assert signature and all(d.subject == "data-0" for d in signature)
    seq, _ = entry_body(recorded, "data")
    assert {d.seq for d in signature} == {seq}


def test_a_receipt_signature_finding_gives_the_signature_it_holds(recorded: Path) -> None:
    """Its actual said "does not verify for input 'in.csv'" (the signature held not named)
    and, for a signature that is not hex, a repr cut at 40 characters with no mark."""
    rewrite_receipt(recorded, swap_signatures)
    with Ledger.open(recorded) as ledger:
        verdict = ledger.verify_run(RUN)
    found = [d for d in verdict.divergences if d.check == "receipt.signature"]
    receipt = json.loads(read_blob(recorded, receipt_digest(recorded)))
    held = receipt["inputs"][0]["signature"]
    assert any(d.actual == f"{held}, which does not verify for input 'in.csv'" for d in found)
    forged = "Z" + "0" * 127

    def not_hex(doc: dict[str, Any]) -> None:
        doc["inputs"][0]["signature"] = forged

    rewrite_receipt(recorded, not_hex)
    with Ledger.open(recorded) as ledger:
        verdict = ledger.verify_run(RUN)
    actual = next(d.actual for d in verdict.divergences if d.expected == "128 hex characters")
    assert actual.startswith("'Z000") and actual.endswith("000'") and "…" in actual


def test_a_mirror_edit_is_caught_even_without_the_audit_key(recorded: Path, tmp_path: Path) -> None:
    edit_mirror_record(recorded)
    with Ledger.open(recorded, key_dir=tmp_path / "another-machine") as ledger:
        report = ledger.verify()
    assert report.code == 2
    assert "audit.entry" in checks_found(report)
    assert "audit.mac" not in checks_found(report)
    assert any("NOT checked: no audit key" in note for note in report.notes)


def test_a_receipt_from_an_untrusted_key_does_not_verify_and_names_the_signer(
    recorded: Path, key_home: Path, tmp_path: Path, cli: Any
) -> None:
    signer = (key_home / "install.key").read_text().strip()
    public = Ledger.open(recorded).keys.install_public_key()
    assert public is not None and signer not in public
    elsewhere = tmp_path / "reviewer-keys"
    untrusted = cli("--home", str(elsewhere), "activity", "verify", RUN, "--json")
    assert untrusted.code == 2
    divergences = [d for run in untrusted.json()["failures"] for d in run["divergences"]]
    assert {d["check"] for d in divergences} == {"receipt.untrusted_signer"}
    assert {d["actual"] for d in divergences} == {public}
    # Mathematically valid signatures are not enough; an explicit trust is.
    trusted = cli("--home", str(elsewhere), "activity", "verify", RUN, "--trust", public)
    assert trusted.code == 0, trusted.out
    key_file = tmp_path / "signer.pub"
    key_file.write_text(public + "\n")
    from_file = cli("--home", str(elsewhere), "verify", "--trust", str(key_file), "--json")
    assert from_file.code == 0
    # Verify never creates a key, on any machine.
    assert not elsewhere.exists()


def test_an_archive_of_some_runs_verifies_offline_with_its_mirror_records(
    ledger_path: Path, key_home: Path, tmp_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger, "run-1")
        record_every_modality(ledger, "run-2")
        public = ledger.keys.install_public_key()
    assert public is not None
    out = tmp_path / "review" / "archive.db"
    assert cli("archive", str(out), "run-2").code == 0
    records = sql(out, "SELECT pos FROM audit_log ORDER BY pos")
    assert [r[0] for r in records] == [5, 6, 7, 8, 9]  # only run-2's records
    reviewer = [
        "--home", str(tmp_path / "reviewer"), "--ledger", str(out), "verify", "--json",
        "--trust", public, "--audit-key", str(key_home / "audit.key"),
    ]  # fmt: skip
    clean = cli(*reviewer)
    assert clean.code == 0, clean.out
    assert clean.json()["audit_records"] == 5
    assert clean.json()["receipts_checked"] == 2
    # A record edited inside the archive is still caught by its own MAC.
    conn = apsw.Connection(str(out))
    record = conn.execute("SELECT record FROM audit_log WHERE pos = 6").fetchall()[0][0]
    conn.execute(
        "UPDATE audit_log SET record = ? WHERE pos = 6",
        (record.replace(b'"terminal_state":"completed"', b'"terminal_state":"failed"'),),
    )
    conn.close()
    tampered = cli(*reviewer)
    assert tampered.code == 2
    checks = {d["check"] for run in tampered.json()["failures"] for d in run["divergences"]}
    assert "audit.mac" in checks
