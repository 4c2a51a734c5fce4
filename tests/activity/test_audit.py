"""The audit mirror: hashes and labels only, HMAC-chained, cross-checked with the journal."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger, _core
from agentledger.activity import RedundantEvidence
from agentledger.audit import RECORD_FIELDS

from ..log.logkit import verify as verify_file
from ..memory import traced_peak
from ..raw_entries import append_unvetted
from .activity_testkit import (
    ARTIFACT_SECRET,
    CAPTURED,
    record_every_modality,
    research_result,
    sql,
)


def hkdf_sha256(ikm: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 with no salt: an independent oracle for the key derivation."""
    prk = hmac.new(bytes(32), ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def test_no_captured_byte_sequence_appears_in_the_audit_table(
    ledger: Ledger, ledger_path: Path
) -> None:
    record_every_modality(ledger)
    run = ledger.run("run-1")
    with pytest.raises(RedundantEvidence):
        run.record_activity(research_result(), stage_id="again")
    rows = sql(ledger_path, "SELECT * FROM audit_log")
    assert len(rows) == 6
    dump = b"".join(
        value if isinstance(value, bytes) else str(value).encode() for row in rows for value in row
    )
    secrets = [*CAPTURED, ARTIFACT_SECRET.encode(), b"https://example.org/a", b"in.csv"]
    for captured in secrets:
        assert captured not in dump
        for line in captured.splitlines():
            if len(line) >= 8:
                assert line not in dump
    for marker in (b"SECRET-", b"example.org"):
        assert marker not in dump


def test_records_carry_only_hashes_kind_state_reason_and_position(
    ledger: Ledger, ledger_path: Path
) -> None:
    entries = record_every_modality(ledger)
    records = [
        json.loads(r[0]) for r in sql(ledger_path, "SELECT record FROM audit_log ORDER BY pos")
    ]
    assert [set(r) for r in records] == [set(RECORD_FIELDS)] * 5
    for record, entry in zip(records, entries.values(), strict=True):
        assert record["run"] == "run-1"
        assert record["seq"] == entry.seq
        assert record["entry_hash"] == entry.hash
        assert record["event"] == "activity.result"
        for name in ("kind", "terminal_state", "reason_code", "artifact_hash", "evidence_set_hash"):
            assert record[name] == entry.body[name]


def test_the_mirror_is_an_hmac_chain_any_verifier_can_recompute(
    ledger: Ledger, ledger_path: Path, key_home: Path
) -> None:
    record_every_modality(ledger)
    master = (key_home / "audit.key").read_bytes().strip()
    key = hkdf_sha256(master, b"agentledger/v1/audit", 32)
    prev = bytes(32)
    for record, mac in sql(ledger_path, "SELECT record, mac FROM audit_log ORDER BY pos"):
        assert json.loads(record)["prev"] == prev.hex()
        assert hmac.new(key, record, hashlib.sha256).digest() == mac
        prev = mac


def test_an_edited_record_names_the_stored_and_the_recomputed_hmac(
    ledger_path: Path, key_home: Path, cli: object
) -> None:
    """``audit.mac`` said expected "the record's HMAC", actual "does not recompute", though
    both HMACs are known: it gives them, the stored one and the one of the bytes now."""
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    pos, record, mac = sql(ledger_path, "SELECT pos, record, mac FROM audit_log LIMIT 1")[0]
    edited = record.replace(b'"completed"', b'"failed"', 1)
    assert edited != record
    sql(ledger_path, "UPDATE audit_log SET record = ? WHERE pos = ?", (edited, pos))
    master = (key_home / "audit.key").read_bytes().strip()
    now = hmac.new(hkdf_sha256(master, b"agentledger/v1/audit", 32), edited, hashlib.sha256)
    result = cli("verify", "--json")  # type: ignore[operator]
    assert result.code == 2
    found = [d for run in result.json()["failures"] for d in run["divergences"]]
    assert [(d["check"], d["expected"], d["actual"]) for d in found] == [
        ("audit.mac", bytes(mac).hex(), now.hexdigest())
    ]


def test_a_record_filed_under_another_run_is_misfiled_not_an_orphan_of_a_phantom_run(
    ledger_path: Path, cli: object
) -> None:
    """A record's run_id column edited to a run that never was: it was reported misfiled
    (audit.record) on that phantom run, an orphan there (audit.orphan) and missing from
    its own entry (audit.missing); the phantom counted diverged, so "4 diverged" of 3 runs.
    It is the named entry's record, misfiled: one finding, on that entry's run."""
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    pos, seq = sql(ledger_path, "SELECT pos, seq FROM audit_log LIMIT 1")[0]
    sql(ledger_path, "UPDATE audit_log SET run_id = 'ghost' WHERE pos = ?", (pos,))
    for with_key in (True, False):
        args = () if with_key else ("--home", str(ledger_path.parent / "elsewhere"))
        result = cli(*args, "verify", "--json")  # type: ignore[operator]
        assert result.code == 2
        report = result.json()
        found = [d for run in report["failures"] for d in run["divergences"]]
        found += report["workspace"]
        picked = [(d["run"], d["seq"], d["check"]) for d in found if d["check"][:6] == "audit."]
        assert picked == [("run-1", seq, "audit.record")], (with_key, found)
        assert report["diverged"] == 1 and report["runs"] == 1


def test_a_gap_before_a_misfiled_record_is_said_at_the_entry_it_names(
    ledger_path: Path, cli: object
) -> None:
    """A record deleted and the next one's seq column edited: the gap was said at the
    edited column's step (a step holding no activity), its misfiling at the named one."""
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    (seq,) = sql(ledger_path, "SELECT seq FROM audit_log WHERE pos = 2")[0]
    sql(ledger_path, "DELETE FROM audit_log WHERE pos = 1")
    sql(ledger_path, "UPDATE audit_log SET seq = 0 WHERE pos = 2")
    result = cli("verify", "--json")  # type: ignore[operator]
    found = [d for run in result.json()["failures"] for d in run["divergences"]]
    at = {(d["check"], d["seq"]) for d in found if d["subject"] == "audit record 2"}
    assert at == {("audit.gap", seq), ("audit.record", seq)}


def test_a_refusal_is_mirrored_too(ledger: Ledger, ledger_path: Path) -> None:
    run = ledger.run("r")
    run.record_activity(research_result(), stage_id="s1")
    with pytest.raises(RedundantEvidence):
        run.record_activity(research_result(), stage_id="s2")
    last = json.loads(sql(ledger_path, "SELECT record FROM audit_log WHERE pos = 1")[0][0])
    assert (last["event"], last["refusal"], last["stage_id"]) == (
        "activity.refused",
        "redundant-evidence",
        "s2",
    )
    assert ledger.verify().code == 0


def test_verify_says_plainly_when_it_has_no_audit_key(ledger_path: Path, tmp_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    with Ledger.open(ledger_path, key_dir=tmp_path / "elsewhere") as ledger:
        report = ledger.verify(runs=["run-1"])
    # Receipts are untrusted there, but the missing audit key is a note, not a divergence.
    assert {d.check for d in report.runs[0].divergences} == {"receipt.untrusted_signer"}
    assert any("no audit key" in note for note in report.notes)
    assert "no audit key" in " ".join(report.to_json()["notes"])


def test_the_audit_key_can_be_given_explicitly(
    ledger_path: Path, key_home: Path, tmp_path: Path, cli: object
) -> None:
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    public = Ledger.open(ledger_path).keys.install_public_key()
    assert public is not None
    run = cli(  # type: ignore[operator]
        "--home", str(tmp_path / "elsewhere"), "verify", "--json",
        "--audit-key", str(key_home / "audit.key"), "--trust", public,
    )  # fmt: skip
    assert run.code == 0, run.out
    assert run.json()["notes"] == []
    assert run.json()["audit_records"] == 5


def test_entries_appended_outside_the_boundary_need_no_mirror(ledger: Ledger) -> None:
    # Raw appends (imports, the demo) are journal entries, not boundary crossings.
    body = {
        "stage_id": "s",
        "kind": "research",
        "evidence_set_hash": _core.evidence_set_hash([]),
        "observations": [],
    }
    append_unvetted(ledger, "raw", [("activity.result", body)])
    report = ledger.verify()
    assert report.code == 0, report.to_json()
    assert report.audit_records == 0


def test_an_empty_mirror_reads_no_audit_key(ledger: Ledger, cli: object, tmp_path: Path) -> None:
    # --audit-key may be meant for an imported workdir's chain: with no native record,
    # this check does not touch it (not even to refuse its mode).
    ledger.run("raw").append("step", {"n": 1})
    foreign = tmp_path / "bernstein-audit.key"
    foreign.write_bytes(b"0" * 64)
    foreign.chmod(0o444)
    result = cli("verify", "--audit-key", str(foreign), "--json")  # type: ignore[operator]
    assert result.code == 0, result.out


def test_a_key_that_does_not_authenticate_the_mirror(
    ledger_path: Path, tmp_path: Path, cli: object
) -> None:
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    wrong = tmp_path / "wrong.key"
    wrong.write_bytes(b"1" * 64)
    wrong.chmod(0o600)
    # The install's own key still authenticates it: clean, and the report says which key.
    here = cli("verify", "--audit-key", str(wrong), "--json")  # type: ignore[operator]
    assert here.code == 0
    assert any("does not authenticate" in note for note in here.json()["notes"])
    # Elsewhere, with only the wrong key, every MAC fails.
    public = Ledger.open(ledger_path).keys.install_public_key()
    assert public is not None
    elsewhere = cli(  # type: ignore[operator]
        "--home", str(tmp_path / "elsewhere"), "verify", "--audit-key", str(wrong),
        "--trust", public, "--json",
    )  # fmt: skip
    assert elsewhere.code == 2
    checks = {d["check"] for run in elsewhere.json()["failures"] for d in run["divergences"]}
    assert checks == {"audit.mac"}


def test_a_record_of_a_run_the_ledger_does_not_hold_is_an_orphan_without_the_key(
    ledger_path: Path, tmp_path: Path
) -> None:
    """Without the key the cross-check is all there is: a record added at the tail that
    names a run the journal never held has no entry, and a whole verify says so."""
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    pos, record, mac = sql(
        ledger_path, "SELECT pos, record, mac FROM audit_log ORDER BY pos DESC LIMIT 1"
    )[0]
    forged = json.loads(record) | {"pos": pos + 1, "prev": mac.hex(), "run": "ghost", "seq": 0}
    sql(
        ledger_path,
        "INSERT INTO audit_log (pos, run_id, seq, record, mac) VALUES (?, 'ghost', 0, ?, ?)",
        (pos + 1, _core.canonicalize(forged), bytes(32)),
    )
    with Ledger.open(ledger_path, key_dir=tmp_path / "elsewhere") as ledger:
        report = ledger.verify()
    orphans = [d for d in report.workspace if d.check == "audit.orphan"]
    assert [(d.run_id, d.seq) for d in orphans] == [("ghost", 0)], report.to_json()


def test_a_record_longer_than_any_record_is_a_finding_not_parsed(ledger_path: Path) -> None:
    """A record is hashes and labels: 8 MB of tiny JSON items in one cost 200 MB of Python
    objects when parsed (a 1 GB cell, more memory than the machine has)."""
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").record_activity(research_result(), stage_id="s1")
    huge = b'{"padding": [' + b",".join([b"[0,[]]"] * 1_200_000) + b"]}"
    sql(ledger_path, "UPDATE audit_log SET record = ? WHERE pos = 0", (huge,))
    report, peak = traced_peak(lambda: verify_file(ledger_path))
    found = [(d.check, d.run_id, d.seq) for run in report.runs for d in run.divergences]
    assert ("audit.record", "r", 0) in found, report.to_json()
    assert peak < 60_000_000, peak


def test_a_second_record_of_one_crossing_is_a_finding_without_the_key(
    ledger_path: Path, tmp_path: Path
) -> None:
    """One record per boundary crossing: a copy of a record re-filed at the tail (its
    position and link rewritten, which only the key could tell) mirrors an entry twice."""
    with Ledger.open(ledger_path) as ledger:
        record_every_modality(ledger)
    pos, run_id, seq, record, mac = sql(
        ledger_path, "SELECT pos, run_id, seq, record, mac FROM audit_log ORDER BY pos DESC"
    )[0]
    copy = json.loads(record) | {"pos": pos + 1, "prev": mac.hex()}
    sql(
        ledger_path,
        "INSERT INTO audit_log (pos, run_id, seq, record, mac) VALUES (?, ?, ?, ?, ?)",
        (pos + 1, run_id, seq, _core.canonicalize(copy), bytes(32)),
    )
    with Ledger.open(ledger_path, key_dir=tmp_path / "elsewhere") as ledger:
        report = ledger.verify()
    twice = [d for run in report.runs for d in run.divergences if d.check == "audit.entry"]
    assert [(d.run_id, d.seq, d.subject) for d in twice] == [
        (run_id, seq, f"audit record {pos + 1}")
    ], report.to_json()


def test_an_edited_kind_column_is_entry_kind_not_an_orphaned_audit_record(
    ledger_path: Path,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        research = ledger.run("r").research("research-0")
        research.fetch("https://example.org/", b"<html>page</html>")
        research.finish(artifact={"summary": "s"})
    conn = apsw.Connection(str(ledger_path))  # the cached column only: the bytes are intact
    conn.execute("UPDATE entries SET kind = 'step' WHERE run_id = 'r' AND seq = 0")
    conn.close()
    with Ledger.open(ledger_path) as ledger:
        report = ledger.verify()
    checks = {(d.seq, d.check) for run in report.runs for d in run.divergences}
    checks |= {(d.seq, d.check) for d in report.workspace}
    assert checks == {(0, "entry.kind")}  # the entry is there: its record names it
