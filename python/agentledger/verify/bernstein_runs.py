"""Imported bernstein runs: anchoring in the native chain, then bernstein's verdict
(``--compat bernstein``) or the strict one (the default). Loaded by ``verify/bernstein.py``
only for a ledger that holds an import.

Anchoring is always checked: each imported run's ``import.bernstein`` entry must pin the
digest of the journal bytes the ledger holds, and the manifests pinned by the bookkeeping
run must list exactly the rows of ``bernstein_files``. So an edit of an imported byte,
or of the tables that place it, is a divergence even though bernstein's own format
leaves most of those bytes unhashed. The strict verdict's own evidence (the audit chain,
its seals, receipts, lineage and seal anchors) is checked in ``bernstein_strict.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentledger import _core
from agentledger.bernstein.audit_chain import AuditChain
from agentledger.bernstein.format import (
    BOOKKEEPING_RUN,
    SPKI_ED25519_PREFIX,
    content_hash,
    journal_path,
    valid_run_id,
)
from agentledger.bernstein.importer import manifest_of
from agentledger.bernstein.kinds import IMPORT_KIND, WORKDIR_KIND
from agentledger.bernstein.verifier import check_ledger
from agentledger.bernstein.workdir import LedgerWorkdir
from agentledger.errors import AgentLedgerError, ExitCode, InvalidInput
from agentledger.limits import MAX_KEY_FILE_BYTES, entry_document, read_capped
from agentledger.storage import native
from agentledger.verify.context import VerifyContext
from agentledger.verify.results import Divergence

COMPAT = "bernstein"
RECEIPT_FILES = (
    "a signed run receipt (.sdd/runs/<run>/run-receipt.json), a seal anchor "
    "(.sdd/runs/<run>/seal_anchor.json) or the journal's seal in the lineage spine "
    "(.sdd/lineage/<run>/spine.jsonl)"
)
IMPORT_FILES = "SELECT path, kind, digest FROM bernstein_files WHERE import_id = ? ORDER BY path"


def check_imported(ctx: VerifyContext) -> None:
    pins = _journal_pins(ctx)
    imported, rows = _imported_runs(ctx, pins)
    if not imported and not ctx.whole:
        return
    selected = [
        run_id
        for run_id, verdict in ctx.verdicts.items()
        if run_id in imported and verdict.code != ExitCode.NOT_FOUND
    ]
    if not (ctx.whole or selected or BOOKKEEPING_RUN in ctx.verdicts):
        return
    compat = ctx.options.compat == COMPAT
    if not compat:
        # X.509, RFC 3161 and the seals' machinery: loaded for the strict verdict only.
        from agentledger.verify import bernstein_strict
    workdir = LedgerWorkdir(ctx.conn, ctx.ledger.blobs)
    # bernstein's activity verify never reads the audit chain; strict mode walks it, and
    # checks its seals and checkpoints. Reading and ordering its files is the workdir's.
    master = None if compat or not selected else bernstein_strict.master_key(ctx)
    segments = workdir.audit_segments() if selected and not compat else []
    # The one call into Rust: the files table (manifests, absent blobs), the chain's walk,
    # the runs cross-checked with it, the blobs they referenced re-hashed (a whole-workspace
    # verify re-hashes every blob anyway, verify/blobs.py).
    check = check_ledger(
        ctx.conn,
        {run_id: imported[run_id] for run_id in selected},
        segments=segments or None,
        master=master,
        trusted=trusted_signers(ctx) if selected else (),
        jobs=ctx.options.jobs,
        rehash=bool(selected) and not ctx.whole,
        mark=ctx.ledger.db.read_mark(),
    )
    _check_manifests(ctx, check)
    if not selected:
        return
    for run_id in selected:
        if run_id not in rows:
            ctx.diverged(
                run_id,
                _div(run_id, None, "bernstein.anchor.run_row", imported[run_id], "absent",
                     "bernstein_runs"),
            )  # fmt: skip
    audit = None
    if not compat:
        audit = bernstein_strict.walked_chain(ctx, segments, master, check.audit)
        bernstein_strict.check_sealed_history(
            ctx, workdir, master, segments, audit, trusted_signers(ctx)
        )
        bernstein_strict.check_lineage_activity(ctx, workdir, segments)
    results = check.runs
    _check_journal_anchors(ctx, results, imported, pins)
    _rehash_referenced(ctx, check.rehashed)
    from_chain = audit_findings(audit)
    if ctx.whole:
        _check_runs_gone_before_import(ctx, audit, imported)
    for result in results:
        _apply(ctx, result, compat, from_chain.get(result.run_id, ()))
    bound: set[str] = set()
    if not compat:
        bound = bernstein_strict.check_run_receipts(ctx, workdir, results, imported)
        bound |= bernstein_strict.check_lineage(ctx, workdir, results, imported, master)
        bound |= bernstein_strict.check_seal_anchors(ctx, workdir, results, imported)
    _notes(ctx, results, audit, compat, bound)


def _check_runs_gone_before_import(
    ctx: VerifyContext, audit: AuditChain | None, imported: dict[str, str]
) -> None:
    """A run the audit chain mirrors activities of, but whose folder no import saw (each
    ``import.bernstein.workdir`` entry pins the run folders the workdir held): its journal
    was deleted before the import, and nothing else would say so. Imports made before
    entries pinned the folders say nothing either way: then this check is not made."""
    if audit is None or not audit.mirrors_activities:
        return
    imports = _bodies(ctx, WORKDIR_KIND)
    if not imports:
        return  # no import says what the workdir held
    present: set[str] = set()
    for run_id, _seq, body in imports:
        listed = body.get("present") if run_id == BOOKKEEPING_RUN else None
        if not isinstance(listed, list):
            return
        present.update(name for name in listed if isinstance(name, str))
    gone = {
        run_id: count
        for run_id, count in audit.walked_per_run.items()
        if run_id not in imported and run_id not in present
    }
    for run_id, count in sorted(gone.items()):
        ctx.diverged(
            None,
            _div(None, None, "bernstein.audit.missing_from_journal",
                 f"the journal of run {run_id!r}, whose {count} activity.result record(s) the "
                 "audit chain holds",
                 "none: the workdir held no such run folder when it was imported (deleted)",
                 f"run {run_id}"),
        )  # fmt: skip


def _imported_runs(
    ctx: VerifyContext, pins: dict[str, tuple[int, dict[str, Any]]]
) -> tuple[dict[str, str], dict[str, str]]:
    """Every imported run and its journal path, and the ``bernstein_runs`` rows: the runs
    the native chain says were imported (each run's ``import.bernstein`` entry, the runs
    each ``import.bernstein.workdir`` entry lists) and those the side table lists. A run
    the chain pins is verified even when its row was deleted (the missing row is itself a
    finding); a row the chain does not pin is ``bernstein.anchor.missing``."""
    rows = {
        str(run_id): str(path)
        for run_id, path in native.rows(ctx.conn, "SELECT run_id, path FROM bernstein_runs")
    }
    pinned: dict[str, str] = {}
    for run_id, (_seq, body) in pins.items():
        path = body.get("path")
        pinned[run_id] = path if isinstance(path, str) else journal_path(run_id)
    for run_id, _seq, body in _bodies(ctx, WORKDIR_KIND):
        listed = body.get("runs") if run_id == BOOKKEEPING_RUN else None
        for name in listed if isinstance(listed, list) else ():
            if isinstance(name, str) and valid_run_id(name):
                pinned.setdefault(name, journal_path(name))
    return {**pinned, **rows}, rows


def _rehash_referenced(
    ctx: VerifyContext, rehashed: tuple[int, list[tuple[str, str]], list[str]] | None
) -> None:
    """Reattachment compared stored digests; the bytes behind them were re-hashed, in
    Rust (``rehashed``), unless whole-workspace verify re-hashes every blob anyway."""
    if rehashed is None:
        return
    found, mismatches, missing = rehashed
    ctx.report.blobs_checked += found
    for name, got in mismatches:
        ctx.diverged(None, _div(None, None, "blob.digest", name, got, name))
    for name in missing:
        ctx.diverged(None, _div(None, None, "blob.missing", name, "absent", name))


def _div(
    run_id: str | None, step: int | None, check: str, expected: str, actual: str, subject: str
) -> Divergence:
    return Divergence(run_id, step, check, expected, actual, subject)


def audit_findings(audit: AuditChain | None) -> dict[str, list[Divergence]]:
    """By run, what the audit chain's own walk found: its records that do not verify, and
    records whose ``journal_index`` is not an integer of 64 bits (they audit no row; a
    larger one names no step the cross-check can hold, so it is named here)."""
    by_run: dict[str, list[Divergence]] = {}
    if audit is None or not audit.mirrors_activities:
        return by_run
    for problem in audit.problems:
        if problem.run_id is not None:
            where = f"{problem.segment} line {problem.line}"
            by_run.setdefault(problem.run_id, []).append(
                _div(problem.run_id, None, "bernstein.audit.chain", "a verifying record",
                     problem.reason, where)
            )  # fmt: skip
    for record in audit.unindexed:
        index = record.journal_index
        wanted = "a 64-bit integer" if type(index) is int else "an integer"
        by_run.setdefault(record.run_id, []).append(
            _div(record.run_id, None, "bernstein.audit.mismatch", wanted, repr(index),
                 "journal_index")
        )  # fmt: skip
    return by_run


def _apply(
    ctx: VerifyContext,
    result: _core.BernsteinRun,
    compat: bool,
    audit_findings: Iterable[Divergence],
) -> None:
    run_id = result.run_id
    verdict = ctx.verdict(run_id)
    verdict.entries += result.rows
    verdict.activities += result.activities
    if not result.has_journal:
        ctx.diverged(
            run_id,
            _div(run_id, None, "bernstein.journal", "the imported journal", "absent", "journal"),
        )
        return
    ctx.report.receipts_checked += result.receipts
    ctx.report.signatures_checked += result.signatures
    if compat:
        code = result.compat_code
        if code == ExitCode.NOT_FOUND:
            if verdict.code == ExitCode.OK:
                verdict.code = ExitCode.NOT_FOUND
                verdict.not_found = f"{result.crash or result.reason} (bernstein exits 1)"
            return
        if code == ExitCode.OK:
            return
    for finding in result.findings:
        if compat and finding.strict_only:
            continue
        ctx.diverged(
            run_id,
            _div(
                run_id, finding.step, finding.check, finding.expected, finding.actual, finding.field
            ),
        )
    for divergence in audit_findings:
        ctx.diverged(run_id, divergence)


def _notes(
    ctx: VerifyContext,
    results: list[_core.BernsteinRun],
    audit: AuditChain | None,
    compat: bool,
    bound: set[str],
) -> None:
    notes: list[str] | None = getattr(ctx.report, "notes", None)
    if notes is None:
        return
    if compat:
        return  # a run bernstein answers 1 says why itself (``RunVerdict.not_found``)
    if audit is None:
        notes.append(
            "bernstein: no audit chain imported; journals cannot be cross-checked against it"
        )
    elif not audit.mirrors_activities:
        notes.append(
            "bernstein: the audit chain holds no activity.result record (its writer did not "
            "mirror activities); journals cannot be cross-checked against it"
        )
    elif not audit.authenticated:
        notes.append("bernstein: audit chain read but not authenticated (give --audit-key)")
    if len(results) == 1 and results[0].run_id in bound:
        notes.append(
            f"bernstein run {results[0].run_id}: its run receipt, seal anchor or lineage "
            "seal binds its rows"
        )
    elif len(results) == 1:
        notes.extend(f"bernstein run {results[0].run_id}: {limit}" for limit in results[0].limits)
    else:
        notes.append(
            "bernstein: ts and elapsed_s are outside every hash in bernstein's format; "
            "edits to them cannot be detected"
        )
        unaudited = sum(
            1
            for r in results
            if r.run_id not in bound
            and any("after the last audited" in x or "no audit record" in x for x in r.limits)
        )
        if unaudited:
            notes.append(
                f"bernstein: {unaudited} run(s) end with rows no audit record covers, and "
                f"have no run receipt, seal anchor or lineage seal (a cut tail there is "
                "undetectable: "
                f"{RECEIPT_FILES} would bind each run's rows)"
            )


def trusted_signers(ctx: VerifyContext) -> frozenset[bytes]:
    """The signers strict trusts, as for native receipts: this install's (its own key and
    its trust file, ``keys trust``) and ``--trust``'s."""
    return trusted_keys((*ctx.ledger.keys.trusted(), *ctx.options.trust))


def trusted_keys(trust: tuple[str, ...]) -> frozenset[bytes]:
    """Raw Ed25519 keys from ``--trust``: ``ed25519:<hex>``, or a file holding that or a PEM."""
    keys = set()
    for item in trust:
        text = item
        if not item.startswith("ed25519:"):
            try:
                text = read_capped(Path(item), MAX_KEY_FILE_BYTES, "a key").decode("utf-8").strip()
            except (OSError, UnicodeDecodeError, AgentLedgerError):
                raise InvalidInput(
                    f"--trust {item!r}: not ed25519:<hex> nor a readable file", code="bad-trust"
                ) from None
        keys.add(_parse_key(text, item))
    return frozenset(keys)


def _parse_key(text: str, label: str) -> bytes:
    import base64
    import binascii

    if text.startswith("ed25519:"):
        try:
            raw = bytes.fromhex(text[len("ed25519:") :])
        except ValueError:
            raw = b""
    else:
        body = "".join(line for line in text.splitlines() if not line.startswith("-----"))
        try:
            der = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            der = b""
        raw = der[12:] if len(der) == 44 and der.startswith(SPKI_ED25519_PREFIX) else b""
    if len(raw) != 32:
        raise InvalidInput(f"--trust {label!r}: not an Ed25519 public key", code="bad-trust")
    return raw


def _bodies(ctx: VerifyContext, kind: str) -> list[tuple[str, int, dict[str, Any]]]:
    rows = native.rows(
        ctx.conn,
        # As stored: an edited row's bytes may be a number, never a length to allocate.
        "SELECT run_id, seq, CAST(bytes AS BLOB) FROM entries WHERE kind = ? ORDER BY run_id, seq",
        (kind,),
    )
    out = []
    for run_id, seq, raw in rows:
        try:
            body = entry_document(raw or b"")["body"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue  # the journal pass reports entries that do not decode
        if isinstance(body, dict):
            out.append((str(run_id), int(seq), body))
    return out


def _journal_pins(ctx: VerifyContext) -> dict[str, tuple[int, dict[str, Any]]]:
    """Each imported run's first ``import.bernstein`` entry: its seq and body."""
    pins: dict[str, tuple[int, dict[str, Any]]] = {}
    for run_id, seq, body in _bodies(ctx, IMPORT_KIND):
        pins.setdefault(run_id, (seq, body))
    return pins


def _check_journal_anchors(
    ctx: VerifyContext,
    results: list[_core.BernsteinRun],
    imported: dict[str, str],
    pins: dict[str, tuple[int, dict[str, Any]]],
) -> None:
    """Each run's ``import.bernstein`` entry (``pins``) pins the digest of the journal
    bytes held."""
    held_imports = dict(native.rows(ctx.conn, "SELECT run_id, import_id FROM bernstein_runs"))
    for result in results:
        run_id = result.run_id
        path = imported[run_id]
        if run_id not in pins:
            ctx.diverged(
                run_id,
                _div(run_id, None, "bernstein.anchor.missing", IMPORT_KIND, "no entry", path),
            )
            continue
        seq, body = pins[run_id]
        if run_id in held_imports and body.get("import_id") != held_imports[run_id]:
            ctx.diverged(
                run_id,
                _div(run_id, seq, "bernstein.anchor.import", str(body.get("import_id")),
                     str(held_imports[run_id]), "import_id"),
            )  # fmt: skip
        if body.get("path") != path:
            ctx.diverged(
                run_id,
                _div(run_id, seq, "bernstein.anchor.path", str(body.get("path")), path, "path"),
            )
        actual = result.file_sha256 or "absent"
        if body.get("journal") != actual:
            ctx.diverged(
                run_id,
                _div(
                    run_id,
                    seq,
                    "bernstein.anchor.journal",
                    str(body.get("journal")),
                    str(actual),
                    path,
                ),
            )


def _check_manifests(ctx: VerifyContext, files: _core.BernsteinCheck) -> None:
    """Each import's rows of ``bernstein_files`` re-serialize to the manifest its
    ``import.bernstein.workdir`` entry pins; only on a mismatch are the rows compared one
    by one, to name the file."""
    pinned: dict[int, tuple[str, str, int]] = {}
    details: dict[int, dict[str, Any]] = {}
    for run_id, seq, body in _bodies(ctx, WORKDIR_KIND):
        if run_id == BOOKKEEPING_RUN and isinstance(body.get("import_id"), int):
            pinned[body["import_id"]] = (str(body.get("manifest")), run_id, seq)
            details[body["import_id"]] = body
    rows = ctx.conn.execute(
        "SELECT import_id, manifest, source, imported_at FROM bernstein_imports"
    ).fetchall()
    for import_id in sorted(set(pinned) - {int(row[0]) for row in rows}):
        ctx.diverged(
            None,
            _div(None, None, "bernstein.anchor.import", pinned[import_id][0], "absent",
                 f"bernstein_imports {import_id}"),
        )  # fmt: skip
    for import_id, recorded, source, imported_at in rows:
        body = details.get(int(import_id), {})
        # Imports made before these were pinned carry neither (then they are only notes).
        for field, held in (("source", source), ("imported_at", imported_at)):
            if field in body and body[field] != held:
                ctx.diverged(
                    None,
                    _div(None, None, "bernstein.anchor.import", str(body[field]), str(held),
                         f"bernstein_imports {import_id} {field}"),
                )  # fmt: skip
        if pinned.get(int(import_id), ("",))[0] != recorded:
            ctx.diverged(
                None,
                _div(
                    None,
                    None,
                    "bernstein.anchor.import",
                    "a pinned manifest",
                    str(recorded),
                    f"bernstein_imports {import_id}",
                ),
            )
    for import_id in sorted(set(files.import_ids) - set(pinned)):
        for path, kind, digest in _files_of(ctx, import_id):
            _file_differs(ctx, "a file of a pinned import", repr((kind, digest)), path)
    for import_id, (manifest, run_id, seq) in sorted(pinned.items()):
        # Serialized in Rust as the rows were read (path order is ``sorted``'s: paths are
        # unique, and SQLite's BINARY order is code point order).
        if files.manifest_hash(import_id) == manifest:
            continue
        # Only Python's own serialization of the rows decides a mismatch.
        held = _files_of(ctx, import_id)
        if content_hash(manifest_of(held)) != manifest:
            _name_differences(ctx, manifest, held, run_id, seq)
    for path, digest in files.absent:
        ctx.diverged(
            None, _div(None, None, "bernstein.anchor.blob_missing", digest, "absent", path)
        )


def _files_of(ctx: VerifyContext, import_id: int) -> list[tuple[str, str, str | None]]:
    return [
        (str(path), str(kind), None if digest is None else str(digest))
        for path, kind, digest in ctx.conn.execute(IMPORT_FILES, (import_id,))
    ]


def _name_differences(
    ctx: VerifyContext,
    manifest: str,
    held: list[tuple[str, str, str | None]],
    run_id: str,
    seq: int,
) -> None:
    try:
        data = ctx.ledger.blobs.get(manifest)
    except (KeyError, ValueError):
        data = b""
    if content_hash(data) != manifest:
        ctx.diverged(
            run_id,
            _div(
                run_id, seq, "bernstein.anchor.manifest", manifest, content_hash(data), "manifest"
            ),
        )
        return
    listed = {path: (kind, digest) for path, kind, digest in json.loads(data)["files"]}
    have = {path: (kind, digest) for path, kind, digest in held}
    for path in sorted(set(listed) | set(have)):
        if listed.get(path) != have.get(path):
            _file_differs(ctx, repr(listed.get(path)), repr(have.get(path)), path)


def _file_differs(ctx: VerifyContext, expected: str, actual: str, path: str) -> None:
    """A row of ``bernstein_files`` that is not the pinned manifest's."""
    ctx.diverged(None, _div(None, None, "bernstein.anchor.file", expected, actual, path))
