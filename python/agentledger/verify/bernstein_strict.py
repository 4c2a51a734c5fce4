"""Imported bernstein runs, the strict verdict's own evidence: the audit chain as the one
call walked it, its seals, checkpoints, anchors and co-signatures, the lineage store's
activity, and each run's signed receipt, lineage-spine seal and seal anchor. Loaded by
``bernstein_runs.py`` only without ``--compat bernstein`` (bernstein's own verdict reads
none of it): X.509, RFC 3161 and the seals' machinery stay unloaded for it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentledger import _core
from agentledger.bernstein.audit_chain import AuditChain, from_walk, read_master_key
from agentledger.bernstein.audit_verdict import read_folder
from agentledger.bernstein.format import AUDIT_DIR, LINEAGE_DIR, LINEAGE_LOG, RUNS_DIR
from agentledger.bernstein.lineage import (
    journal_problem,
    sealed_journal,
    spine_head_path,
    spine_path,
    spine_problems,
)
from agentledger.bernstein.lineage_activity import (
    NotReproduced,
    lineage_activity,
    sidecar_check,
    store_problem,
)
from agentledger.bernstein.run_receipts import RECEIPT_NAME, head_problem, read_claim, receipt_path
from agentledger.bernstein.seal_anchors import ANCHOR_NAME, seal_anchor_path, seal_anchor_problems
from agentledger.bernstein.sealed_history import sealed_history
from agentledger.bernstein.witness_state import folder_reader
from agentledger.bernstein.workdir import LedgerWorkdir
from agentledger.errors import BadArgument, InvalidInput
from agentledger.limits import MAX_DOCUMENT_BYTES, MAX_KEY_FILE_BYTES, read_capped
from agentledger.verify.context import VerifyContext
from agentledger.verify.results import Divergence

FILES_NAMED = (
    "SELECT path FROM bernstein_files WHERE path > ? AND path < ? AND path LIKE ? "
    "AND kind = 'other'"
)
"""Files under a folder (a path range, so the store's rows are not scanned) whose path
matches a LIKE pattern."""


def master_key(ctx: VerifyContext) -> bytes | None:
    if ctx.options.audit_key_file is None:
        return None
    try:
        return read_master_key(
            read_capped(Path(ctx.options.audit_key_file), MAX_KEY_FILE_BYTES, "a key")
        )
    except OSError as exc:
        raise InvalidInput(f"cannot read the audit key: {exc}", code="audit-key") from None


def walked_chain(
    ctx: VerifyContext,
    segments: list[tuple[str, bytes]],
    master: bytes | None,
    walk: _core.BernsteinAuditWalk | None,
) -> AuditChain | None:
    """The chain as the one call walked it; its problems that name no run are findings
    here (those that do go with their run, ``audit_findings``)."""
    if not segments or walk is None:
        return None
    audit = from_walk(walk, segments, master is not None)
    ctx.report.audit_records = getattr(ctx.report, "audit_records", 0) + audit.records
    for problem in audit.problems:
        if problem.run_id is None:
            ctx.diverged(
                None,
                Divergence(
                    None,
                    None,
                    "bernstein.audit.chain",
                    "a verifying record",
                    problem.reason,
                    f"{problem.segment} line {problem.line}",
                ),
            )
    return audit


def check_sealed_history(
    ctx: VerifyContext,
    workdir: LedgerWorkdir,
    master: bytes | None,
    segments: list[tuple[str, bytes]],
    chain: AuditChain | None,
    trusted: frozenset[bytes],
) -> None:
    """The audit chain's seals, checkpoints, anchors and co-signatures
    (``sealed_history.py``), from the segments the chain's walk read."""
    folder = read_folder(workdir, segments, chain)
    notes: list[str] | None = getattr(ctx.report, "notes", None)
    state_dir = ctx.options.witness_state_dir
    unsealed = not folder.sealed and folder.cosignatures is None and folder.anchors is None
    if unsealed and not folder.unreadable:
        if folder.segments and notes is not None:
            notes.append(
                "bernstein: the audit chain is not sealed (no .sdd/audit/merkle/seal-*.json, "
                "no .sdd/audit/checkpoints/checkpoints.jsonl): a cut audit tail is "
                + (
                    "undetectable here but by the witness state"
                    if state_dir
                    else "undetectable here"
                )
            )
        if state_dir is None:
            return
    state = None if state_dir is None else folder_reader(Path(state_dir))
    history = sealed_history(workdir, folder, master, trusted, _tsa_bundle(ctx), state)
    for finding in history.findings:
        ctx.diverged(
            None,
            Divergence(
                None, None, finding.check, finding.expected, finding.actual, finding.subject
            ),
        )
    if notes is not None:
        notes.extend(history.notes)


def check_lineage_activity(
    ctx: VerifyContext, workdir: LedgerWorkdir, segments: list[tuple[str, bytes]]
) -> None:
    """The lineage store's log as bernstein's lineage activity pillar reads it
    (``lineage_activity.py``): an entry revoked, deriving from one the log lacks, or one
    bernstein cannot read is a finding. Revocations are read without the audit key, as
    bernstein reads them."""
    blocked = store_problem(workdir) if workdir.has_dir(LINEAGE_DIR) else None
    if workdir.digest(LINEAGE_LOG) is None and blocked is None:
        return
    data = workdir.read(LINEAGE_LOG) or b""
    notes: list[str] | None = getattr(ctx.report, "notes", None)
    if blocked is not None:
        problems = [blocked]
    elif len(data) > MAX_DOCUMENT_BYTES:
        problems = [f"{len(data)} bytes, over the {MAX_DOCUMENT_BYTES} read"]
    else:
        days = [d for path, d in segments if posixpath.dirname(path) == AUDIT_DIR]
        try:
            problems = lineage_activity(data, days, True, sidecar_check(workdir)).problems
        except NotReproduced as exc:
            if notes is not None:
                notes.append(f"bernstein: the lineage store's activity is not checked: {exc}")
            return
    for problem in problems:
        ctx.diverged(
            None,
            Divergence(
                None, None, "bernstein.lineage.activity", "an active entry", problem, LINEAGE_LOG
            ),
        )


def check_run_receipts(
    ctx: VerifyContext,
    workdir: LedgerWorkdir,
    results: list[_core.BernsteinRun],
    imported: dict[str, str],
) -> set[str]:
    """Each run's signed receipt, where it has one, against its journal
    (``run_receipts.py``): a cut or changed tail. Returns the runs with a receipt."""
    held = _held_per_run(
        ctx, results, lambda r: receipt_path(imported[r.run_id]), RUNS_DIR, f"%/{RECEIPT_NAME}"
    )
    workdir.prefetch(list(held))
    for path, result in held.items():
        claim = read_claim(workdir.read(path) or b"")
        if isinstance(claim, str):
            ctx.diverged(
                result.run_id,
                Divergence(result.run_id, None, "bernstein.run_receipt.unreadable", "a run receipt",
                     claim, path),
            )  # fmt: skip
            continue
        problem = head_problem(claim, result.run_id, result.rows, result.head)
        if problem is not None:
            ctx.diverged(
                result.run_id,
                Divergence(result.run_id, None, "bernstein.run_receipt.head",
                     f"{claim.rows} rows, head {claim.head}", problem, path),
            )  # fmt: skip
    notes: list[str] | None = getattr(ctx.report, "notes", None)
    if held and notes is not None:
        notes.append(
            f"bernstein: {len(held)} run receipt(s) compared with their journals (rows "
            "and head); their signatures are not checked here"
        )
    return {result.run_id for result in held.values()}


def check_lineage(
    ctx: VerifyContext,
    workdir: LedgerWorkdir,
    results: list[_core.BernsteinRun],
    imported: dict[str, str],
    master: bytes | None,
) -> set[str]:
    """Each run's lineage spine as bernstein verifies it, and the run's journal as the
    spine sealed it (``lineage.py``): other bytes since are a finding. Returns the runs
    whose journal a spine seals."""
    held = _held_per_run(
        ctx, results, lambda r: spine_path(r.run_id), LINEAGE_DIR, f"{LINEAGE_DIR}/%/spine.jsonl"
    )
    workdir.prefetch([*held, *(spine_head_path(r.run_id) for r in held.values())])
    sealed_runs = set()
    for path, result in held.items():
        spine = workdir.read(path) or b""
        head_file = workdir.read(spine_head_path(result.run_id))
        for reason in spine_problems(spine, head_file, master):
            ctx.diverged(
                result.run_id,
                Divergence(result.run_id, None, "bernstein.lineage.chain",
                     "an entry bernstein's spine verify accepts", reason, path),
            )  # fmt: skip
        sealed = sealed_journal(spine, imported[result.run_id])
        if sealed is None:
            continue
        sealed_runs.add(result.run_id)
        problem = journal_problem(sealed, result.file_sha256, result.head)
        if problem is not None:
            ctx.diverged(
                result.run_id,
                Divergence(result.run_id, None, "bernstein.lineage.journal",
                     f"{sealed.content_hash}, head {sealed.head}", problem,
                     f"{path} line {sealed.line}"),
            )  # fmt: skip
    notes: list[str] | None = getattr(ctx.report, "notes", None)
    if sealed_runs and notes is not None:
        notes.append(
            f"bernstein: {len(sealed_runs)} journal(s) compared with their lineage-spine "
            "seal" + ("" if master is not None else "; the spines' HMAC tags need --audit-key")
        )
    return sealed_runs


def check_seal_anchors(
    ctx: VerifyContext,
    workdir: LedgerWorkdir,
    results: list[_core.BernsteinRun],
    imported: dict[str, str],
) -> set[str]:
    """Each run's seal anchor against its journal head (``seal_anchors.py``). Returns the
    runs with one."""
    held = _held_per_run(
        ctx, results, lambda r: seal_anchor_path(imported[r.run_id]), RUNS_DIR, f"%/{ANCHOR_NAME}"
    )
    trusted = _tsa_bundle(ctx) if held else None
    workdir.prefetch(list(held))
    for path, result in held.items():
        for problem in seal_anchor_problems(workdir.read(path) or b"", result.head, trusted):
            ctx.diverged(
                result.run_id,
                Divergence(
                    result.run_id, None, problem.check, problem.expected, problem.actual, path
                ),
            )
    notes: list[str] | None = getattr(ctx.report, "notes", None)
    if held and notes is not None:
        checked = (
            "their RFC 3161 TSAs against the trust bundle, log proofs not checked here"
            if trusted
            else "their TSA signatures (give --tsa-bundle) and log proofs not checked here"
        )
        notes.append(
            f"bernstein: {len(held)} seal anchor(s) compared with their journals' heads; " + checked
        )
    return {result.run_id for result in held.values()}


def _tsa_bundle(ctx: VerifyContext) -> list[Any] | None:
    """``--tsa-bundle``'s certificates; a bundle that holds none is a usage error."""
    path = ctx.options.tsa_bundle_file
    if path is None:
        return None
    from agentledger.bernstein.tsa_trust import load_trust_bundle  # X.509: with a bundle only

    try:
        return load_trust_bundle(read_capped(Path(path), MAX_DOCUMENT_BYTES, "a trust bundle"))
    except (OSError, ValueError) as exc:
        raise BadArgument(f"--tsa-bundle {path}: {exc}", code="bad-tsa-bundle") from None


def _held_per_run(
    ctx: VerifyContext,
    results: list[_core.BernsteinRun],
    path_of: Callable[[_core.BernsteinRun], str],
    folder: str,
    pattern: str,
) -> dict[str, _core.BernsteinRun]:
    """Each run's file at ``path_of(run)`` (runs with a journal) that the import holds, in
    path order: the files under ``folder`` whose path matches the LIKE ``pattern``."""
    rows = ctx.conn.execute(FILES_NAMED, (f"{folder}/", f"{folder}0", pattern))
    named = {str(path) for (path,) in rows}
    wanted = {path_of(r): r for r in results if r.has_journal}
    return {path: wanted[path] for path in sorted(set(wanted) & named)}
