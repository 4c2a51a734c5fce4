"""The Rust verifier (``_core.bernstein_verify``: every stage decided in Rust) gives exactly
the verdicts and findings of the plain Python reference (``reference.py``), whatever the
damage: over every shape bernstein 3.23.0 writes, the catalogue of tampering below, and
randomly damaged copies; read from the ledger or from the workdir on disk."""

from __future__ import annotations

import base64
import json
import random
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import apsw
import pytest
from nacl.signing import SigningKey

from agentledger import Ledger, _core, signature_memo
from agentledger.bernstein import DirectoryWorkdir, LedgerWorkdir, import_workdir
from agentledger.bernstein import verifier as rust
from agentledger.bernstein.audit_chain import AuditChain, verify_audit
from agentledger.bernstein.format import acanon, content_hash
from agentledger.bernstein.importer import FORMAT
from agentledger.bernstein.writer import public_key_pem, rechain
from agentledger.storage import native
from agentledger.verify import VerifyOptions
from agentledger.verify.bernstein_runs import audit_findings

from . import reference
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

PAGE = "sha256:ccd60aceaca4c2af81d38c52fb6867d86b28406627248d9b7d52cc66ab12b351"
RECEIPT = "sha256:67748cc06cb345a525a63b2ad4fb96a351b85675b46e5ca056de77ce79061090"
INPUT = "sha256:3806a73a800d66be92d02f2b582208bb9a0536be72585160c8d803e9e7cd6530"

Tamper = Callable[[Path], None]


def _escape_name(wd: Path) -> None:
    row = json.loads(lines(wd, "run-002")[2])
    row["observations"][0]["content_hash"] = "sha256:../cas/" + PAGE.split(":")[1]
    rows = lines(wd, "run-002")
    rows[2] = json.dumps(row) + "\n"
    write_lines(wd, "run-002", rows)


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


def _resign_receipt(receipt: dict[str, Any]) -> None:
    """Signed anew by another key: it verifies, but the audit mirror disagrees."""
    attacker = SigningKey(b"attacker".ljust(32, b"!"))
    for artifact in receipt["inputs"] + receipt["outputs"]:
        message = acanon({k: artifact[k] for k in ("role", "ref", "content_hash")})
        signature = attacker.sign(message).signature
        artifact["signature"] = base64.urlsafe_b64encode(signature).rstrip(b"=").decode()
    receipt["signer_public_key_pem"] = public_key_pem(bytes(attacker.verify_key))


def _drop_unobserved_input(wd: Path) -> None:
    """The receipt still pins the input, the journal no longer observes it."""
    row = json.loads(lines(wd, "run-001")[4])
    observations = [o for o in row["observations"] if o["content_hash"] != INPUT]
    hashes = sorted({o["content_hash"] for o in observations})
    evidence = content_hash(acanon(hashes))
    edit_row(wd, "run-001", 4, observations=observations, evidence_set_hash=evidence)
    write_lines(wd, "run-001", rechain(lines(wd, "run-001")))
    cas(wd, INPUT).unlink()


def _drop_stage(wd: Path) -> None:
    """Row 3 (an audited stage) cut out and the chain rebuilt: every later row moves."""
    rows = lines(wd, "run-001")
    write_lines(wd, "run-001", rechain(rows[:3] + rows[4:]))


def _numeric_step(receipt: dict[str, Any]) -> None:
    receipt["plan"]["steps"].append(7)


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


TAMPERS: dict[str, Tamper] = {
    "none": lambda wd: None,
    "drop-page": lambda wd: cas(wd, PAGE).unlink(),
    "edit-page": lambda wd: _write(cas(wd, PAGE), b"edited"),
    "drop-receipt": lambda wd: cas(wd, RECEIPT).unlink(),
    "drop-store": lambda wd: shutil.rmtree(wd / ".sdd" / "cas"),
    "edit-row": lambda wd: edit_row(wd, "run-001", 3, reason_code="forged"),
    "escaping-name": _escape_name,
    "drop-receipt-input": lambda wd: cas(wd, INPUT).unlink(),
    "drop-unobserved-input": _drop_unobserved_input,
    "edit-receipt-input": lambda wd: _write(cas(wd, INPUT), b"edited"),
    "bad-signature": lambda wd: _restore_receipt(wd, _flip_signature),
    "numeric-step": lambda wd: _restore_receipt(wd, _numeric_step),
    "resigned-receipt": lambda wd: _restore_receipt(wd, _resign_receipt),
    "dropped-stage": _drop_stage,
}


# ---- what is compared ------------------------------------------------------------------


Compared = tuple[int, str, str, str, str]


def _finding(step: int | None, check: str, field: str, expected: str, actual: str) -> Compared:
    return (-1 if step is None else step, check, field, expected, actual)


def rust_summary(
    results: list[_core.BernsteinRun], audit: AuditChain | None
) -> list[tuple[object, ...]]:
    """The Rust verdicts, with the audit chain's own findings as ``verify`` adds them."""
    extra = audit_findings(audit)
    out: list[tuple[object, ...]] = []
    for r in results:
        findings = [
            _finding(f.step, f.check, f.field, f.expected, f.actual) for f in r.findings
        ] + [
            _finding(d.seq, d.check, d.subject or "", d.expected, d.actual)
            for d in extra.get(r.run_id, ())
        ]
        strict_code = 1 if not r.has_journal else (2 if findings else 0)
        out.append(
            (
                r.run_id,
                r.compat_code,
                strict_code,
                (r.found, r.ok, r.chain_ok, r.reason, r.crash, r.rows, r.activities),
                sorted(findings),
                None if not r.has_journal else (r.file_sha256, r.head, r.rows),
                (r.unstored_reports, r.limits),
                [s.to_json() for s in r.stages],
            )
        )
    return out


def reference_summary(results: list[reference.RunResult]) -> list[tuple[object, ...]]:
    return [
        (
            r.run_id,
            r.compat_code,
            r.strict_code,
            (r.found, r.ok, r.chain_ok, r.reason, r.crash, r.rows, r.activities),
            sorted(_finding(f.step, f.check, f.field, f.expected, f.actual) for f in r.findings),
            None
            if r.journal is None
            else tuple(r.journal[k] for k in ("file_sha256", "head", "count")),
            (r.unstored_reports, r.limits),
            [s.to_json() for s in r.stages],
        )
        for r in results
    ]


def both_ways(
    workdir: Path, ledger_path: Path, trusted: frozenset[bytes], master: bytes | None
) -> list[_core.BernsteinRun]:
    """Every run of ``workdir`` (and one that does not exist), verified by the reference
    and by Rust, from the ledger it is imported into and from the disk: all must agree,
    down to the content hashes left to re-hash. Returns Rust's verdicts in the ledger."""
    with Ledger.open(ledger_path) as ledger:
        import_workdir(ledger, workdir)
        with ledger.db.snapshot() as conn:
            in_ledger = LedgerWorkdir(conn, ledger.blobs)
            runs = [*sorted(in_ledger.runs), "no-such-run"]
            segments = in_ledger.audit_segments()
            audit = verify_audit(segments, master)
            # The reference walks the chain in Python; Rust walks it inside the one call.
            walked = reference.walk_audit(segments, master) if segments else None
            expected = reference.verify_runs(in_ledger, runs, audit=walked, trusted=trusted)
            check = rust.check_ledger(
                conn,
                {run_id: in_ledger.runs.get(run_id, "") for run_id in runs},
                segments=segments or None,
                master=master,
                trusted=trusted,
                stages=True,
                rehash=True,
            )
            got = check.runs
    assert rust_summary(got, audit) == reference_summary(expected)
    assert {h for r in got for h in r.referenced} == set().union(*(r.referenced for r in expected))
    on_disk = DirectoryWorkdir(workdir)
    disk_segments = on_disk.audit_segments()
    disk_audit = verify_audit(disk_segments, master)
    disk_walk = reference.walk_audit(disk_segments, master) if disk_segments else None
    expected = reference.verify_runs(on_disk, runs, audit=disk_walk, trusted=trusted)
    from_disk = rust.verify_runs(on_disk, runs, audit=disk_audit, trusted=trusted)
    assert rust_summary(from_disk, disk_audit) == reference_summary(expected)
    return got


def _signer(text: str) -> bytes:
    return bytes.fromhex(text.split(":", 1)[1])


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_rust_agrees_with_the_reference_on_every_tamper(tmp_path: Path, tamper: str) -> None:
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    TAMPERS[tamper](workdir)
    master = (SMALL / "audit.key").read_bytes().strip()
    for trusted in (frozenset(), frozenset({_signer(SMALL_SIGNER)})):
        both_ways(workdir, tmp_path / f"ledger-{len(trusted)}.db", trusted, master)


def test_rust_agrees_with_the_reference_on_every_shape(tmp_path: Path) -> None:
    trusted = frozenset(_signer(s) for s in SHAPES_SIGNERS)
    master = (SHAPES / "audit.key").read_bytes().strip()
    both_ways(SHAPES, tmp_path / "l.db", trusted, master)


# ---- random damage ---------------------------------------------------------------------


def _files(workdir: Path, part: str) -> list[Path]:
    return sorted(p for p in (workdir / ".sdd" / part).rglob("*") if p.is_file())


def _reanchor(workdir: Path, rng: random.Random) -> None:
    """A stored report or receipt with one JSON value replaced, stored under its new
    content hash, its stage's row re-anchored on it and the journal rechained: what
    bernstein's checks of the artifact itself (not its hash) must then decide."""
    stages = []
    for path in _files(workdir, "runs"):
        for n, line in enumerate(path.read_bytes().splitlines()):
            try:
                row = json.loads(line)
                artifact = row["artifact_hash"] if row["event"] == "activity.result" else None
            except (ValueError, KeyError, TypeError):
                continue  # a line an earlier edit broke
            if isinstance(artifact, str) and cas(workdir, artifact).is_file():
                stages.append((path, n, artifact))
    if not stages:
        return
    path, n, artifact = rng.choice(stages)
    edited = _edit_json(json.loads(cas(workdir, artifact).read_bytes()), rng)
    cas(workdir, content_hash(edited)).write_bytes(edited)
    run_id = path.parent.name
    edit_row(workdir, run_id, n, artifact_hash=content_hash(edited))
    write_lines(workdir, run_id, rechain(lines(workdir, run_id)))


def _damage(workdir: Path, rng: random.Random) -> None:
    """One to three random edits: a byte of a journal line or a stored blob flipped, a
    JSON value of a stored report or receipt replaced (under its old name, or re-anchored),
    a line, an audit record or a blob deleted."""
    for _ in range(rng.randint(1, 3)):
        kinds = ["journal", "blob", "json", "reanchor", "delete-blob", "delete-line", "audit"]
        kind = rng.choice(kinds)
        if kind == "reanchor":
            _reanchor(workdir, rng)
        elif kind in ("journal", "delete-line"):
            path = rng.choice(_files(workdir, "runs"))
            rows = path.read_bytes().splitlines(keepends=True)
            n = rng.randrange(len(rows))
            if kind == "delete-line":
                del rows[n]
            else:
                row = bytearray(rows[n])
                row[rng.randrange(len(row) - 1)] = rng.choice(b'{}[]",:0123abcdef \\')
                rows[n] = bytes(row)
            path.write_bytes(b"".join(rows))
        elif kind == "audit":
            audit = _files(workdir, "audit")
            if audit:
                path = rng.choice(audit)
                rows = path.read_bytes().splitlines(keepends=True)
                if rows:
                    del rows[rng.randrange(len(rows))]
                    path.write_bytes(b"".join(rows))
        else:
            path = rng.choice(_files(workdir, "cas"))
            data = path.read_bytes()
            if kind == "delete-blob":
                path.unlink()
            elif kind == "json" and data.startswith(b"{"):
                path.write_bytes(_edit_json(json.loads(data), rng))
            elif data:
                edited = bytearray(data)
                edited[rng.randrange(len(edited))] ^= 1 << rng.randrange(8)
                path.write_bytes(bytes(edited))


def _edit_json(doc: Any, rng: random.Random) -> bytes:
    """``doc`` with one value somewhere replaced by another of any JSON type, written as
    bernstein's ``acanon`` writes."""
    replacements: list[Any] = [None, True, 0, -1, 1.5, "", "x", [], {}, 10**20, float("nan")]

    def walk(value: Any) -> Iterable[tuple[Any, Any]]:
        if isinstance(value, dict):
            for key in value:
                yield value, key
                yield from walk(value[key])
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield value, i
                yield from walk(item)

    spots = list(walk(doc))
    if spots:
        parent, key = rng.choice(spots)
        parent[key] = rng.choice(replacements)
    return json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize("seed", range(40))
def test_rust_agrees_with_the_reference_on_random_damage(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    source = SHAPES if seed % 2 else SMALL
    workdir = copy_workdir(source, tmp_path / "wd")
    _damage(workdir, rng)
    master = (source / "audit.key").read_bytes().strip()
    trusted = frozenset(_signer(s) for s in (*SHAPES_SIGNERS, SMALL_SIGNER))
    both_ways(workdir, tmp_path / "l.db", trusted, master)


# ---- the bytes behind trusted digests --------------------------------------------------


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


@pytest.mark.parametrize("edited", [False, True], ids=["same-bytes", "edited"])
def test_a_blob_whose_chunks_are_stored_out_of_order_is_hashed_in_chunk_order(
    tmp_path: Path, edited: bool
) -> None:
    """The verdict is the bytes', not the storage order's."""
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
    insert = "INSERT INTO blob_chunks (digest, idx, data) VALUES (?, ?, ?)"
    conn.execute(insert, (page, 1, tail))  # the second chunk is stored first
    conn.execute(insert, (page, 0, head))
    conn.close()
    with Ledger.open(path) as ledger:
        runs = ["run-001", "run-002", "run-003"]
        report = ledger.verify(runs, options=VerifyOptions(compat="bernstein"))
    if edited:
        assert report.code == 2
        assert [(d.check, d.subject) for d in report.workspace] == [("blob.digest", page)]
    else:
        assert report.code == 0, [d.to_json() for d in report.workspace]


def test_the_referenced_blobs_are_rehashed_each_once_in_order(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, SMALL)
        with ledger.db.snapshot() as conn:
            workdir = LedgerWorkdir(conn, ledger.blobs)
            check = rust.check_ledger(conn, workdir.runs, segments=None, rehash=True)
    referenced = sorted({h for r in check.runs for h in r.referenced})
    assert len(referenced) >= 3
    assert check.rehashed == (len(referenced), [], [])
    conn = apsw.Connection(str(tmp_path / "ledger.db"))
    conn.execute("PRAGMA foreign_keys = OFF")
    for digest in (referenced[2], referenced[0]):
        conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
    conn.execute("UPDATE blob_chunks SET data = x'00' WHERE digest = ?", (referenced[1],))
    conn.close()
    with Ledger.open(tmp_path / "ledger.db") as ledger, ledger.db.snapshot() as conn:
        workdir = LedgerWorkdir(conn, ledger.blobs)
        check = rust.check_ledger(conn, workdir.runs, segments=None, rehash=True)
        unasked = rust.check_ledger(conn, workdir.runs, segments=None)
    assert check.rehashed == (
        len(referenced) - 2,
        [(referenced[1], content_hash(b"\x00"))],
        [referenced[0], referenced[2]],
    )
    assert unasked.rehashed is None


def test_ctrl_c_stops_the_verify_between_journals(tmp_path: Path) -> None:
    """SIGINT during the one Rust call ends in KeyboardInterrupt, with nothing left
    running: the next call on the same pool works. (That the reading stops at the next
    journal is the pipeline's own test, ``an_error_between_journals_stops_the_reading``.)"""
    import signal
    import threading

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, SMALL)
        with ledger.db.snapshot() as conn:
            workdir = LedgerWorkdir(conn, ledger.blobs)
            journals = [("run-001", workdir.runs["run-001"])] * 50_000
            options = rust.options(trusted=(), jobs=1)
            files = (LedgerWorkdir.FILES, FORMAT, LedgerWorkdir.NAME_FROM)
            timer = threading.Timer(0.1, signal.raise_signal, (signal.SIGINT,))
            timer.start()
            try:
                with pytest.raises(KeyboardInterrupt):
                    _core.bernstein_check(native.handle(conn), journals, options, files=files)
            finally:
                timer.cancel()
            again = _core.bernstein_check(
                native.handle(conn), journals[:3], options, files=files
            ).runs
    assert [r.compat_code for r in again] == [0, 0, 0]


# ---- signatures accepted before ----------------------------------------------------------


def _verified_both_ways(ledger_path: Path, source: Path, trust: tuple[str, ...]) -> list[Any]:
    """The compat and strict reports of the ledger, each with the memo and rechecked."""
    reports = []
    strict = VerifyOptions(audit_key_file=source / "audit.key", trust=trust)
    with Ledger.open(ledger_path, readonly=True) as ledger:
        for options in (VerifyOptions(compat="bernstein"), strict):
            for recheck in (False, True):
                options.recheck_signatures = recheck
                report = ledger.verify(options=options)
                reports.append(
                    [
                        (d.run_id, d.seq, d.check, d.expected, d.actual, d.subject)
                        for d in [
                            *report.workspace,
                            *(d for r in report.runs for d in r.divergences),
                        ]
                    ]
                    + [(r.run_id, r.code) for r in report.runs]
                )
    return reports


@pytest.mark.parametrize(
    "damage", [*(f"tamper-{name}" for name in sorted(TAMPERS)), *(f"seed-{n}" for n in range(8))]
)
def test_signatures_accepted_before_change_no_verdict(tmp_path: Path, damage: str) -> None:
    """Every signature of the untampered workdir is in the memo (a clean import of it,
    verified in the same key folder); the damaged one's verdicts, compat and strict, are
    those of a verify that checks every signature in full."""
    kind, _, name = damage.partition("-")
    source = SHAPES if kind == "seed" and int(name) % 2 else SMALL
    trust = (*SHAPES_SIGNERS, SMALL_SIGNER)
    clean = tmp_path / "clean.db"
    with Ledger.open(clean) as ledger:
        import_workdir(ledger, source)
        ledger.verify(options=VerifyOptions(compat="bernstein"))
        memo = signature_memo.memo_path(ledger.keys.home, ledger.id)
    assert memo is not None and len(signature_memo.read_digests(memo)) >= 32
    workdir = copy_workdir(source, tmp_path / "wd")
    if kind == "tamper":
        TAMPERS[name](workdir)
    else:
        _damage(workdir, random.Random(int(name)))
    damaged = tmp_path / "damaged.db"
    with Ledger.open(damaged) as ledger:
        import_workdir(ledger, workdir)
        theirs = signature_memo.memo_path(ledger.keys.home, ledger.id)
    assert theirs is not None
    shutil.copyfile(memo, theirs)
    compat, compat_rechecked, strict, strict_rechecked = _verified_both_ways(damaged, source, trust)
    assert compat == compat_rechecked
    assert strict == strict_rechecked
