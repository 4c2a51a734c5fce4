"""The blob store: every blob hashes to its name, and every referenced blob is present."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

import apsw

from agentledger import _core
from agentledger.cas import ALL_CHUNKS, CHUNK_SIZE, DIGEST, ONE_BLOB, names_in
from agentledger.gc import Pruned, pruned_digests
from agentledger.keys import resolve_trust
from agentledger.storage import native
from agentledger.verify.context import IN_SELECTED, Rehashed, VerifyContext
from agentledger.verify.results import Divergence


def check_referenced_blobs(ctx: VerifyContext) -> None:
    """Every observation and artifact an activity pins must be in the store (then re-hashed)."""
    named = set() if ctx.whole else _named_by_results(ctx)
    if not ctx.referenced and not named:
        return
    present = {
        row[0]
        for row in native.rows(
            ctx.conn,
            "SELECT digest FROM blobs WHERE digest IN (SELECT value FROM json_each(?))",
            (_json_list(sorted(ctx.referenced | named)),),
        )
    }
    missing = sorted(ctx.referenced - present)
    pruned = _pruned(ctx) if missing else {}
    for run_id, seq, digest in _referencing_entries(ctx, missing):
        receipt = pruned.get(digest)
        if receipt is not None and _logged_before(ctx, run_id, seq, receipt.log_size):
            ctx.report.notes.append(
                f"blob {digest} was pruned by signed prune receipt {receipt.receipt_id}, not lost"
            )
            continue
        ctx.diverged(run_id, Divergence(run_id, seq, "blob.missing", digest, "absent", digest))
    if not ctx.whole and present:
        _check_blobs(ctx, ONE_BLOB, [(digest,) for digest in sorted(present)])


def _named_by_results(ctx: VerifyContext) -> set[str]:
    """Every blob the named runs' activity results name (a team manifest, beside what they
    pin): a whole verify re-hashes every blob and gives a damaged one to each result naming
    it, so a verify of those runs re-hashes these too, and says the same of them."""
    named: set[str] = set()
    for (raw,) in ctx.conn.execute(
        f"SELECT bytes FROM entries WHERE kind = 'activity.result' AND {IN_SELECTED}",
        (ctx.selected_json,),
    ):
        if isinstance(raw, bytes):
            named |= names_in(raw)
    return named


def _pruned(ctx: VerifyContext) -> dict[str, Pruned]:
    """Blobs a trusted prune receipt of this ledger's log says garbage collection removed."""
    trusted = resolve_trust(ctx.options.trust, ctx.ledger.keys)
    return pruned_digests(ctx.conn, trusted, ctx.ledger.id)


def _logged_before(ctx: VerifyContext, run_id: str, seq: int, log_size: int) -> bool:
    """Whether the entry was in the log when the receipt was signed: one appended after
    it references the blob anew, and the receipt excuses nothing there."""
    rows = ctx.conn.execute(
        "SELECT leaf FROM entries WHERE run_id = ? AND seq = ?", (run_id, seq)
    ).fetchall()
    return bool(rows) and isinstance(rows[0][0], int) and 0 <= rows[0][0] < log_size


def _json_list(items: list[str]) -> str:
    return json.dumps(items)


def _referencing_entries(ctx: VerifyContext, digests: list[str]) -> list[tuple[str, int, str]]:
    """``(run_id, seq, digest)`` of the activity results whose bytes contain each digest.

    A few digests are searched for by SQLite, one scan each; many are matched in one pass
    over the activity results (the names found in each entry against the set), so the cost
    does not grow with their number. A digest that is not name-shaped (never found that
    way) is always searched for on its own. Each is searched for as the JSON string an
    entry pins it as: a bare substring (an empty name, a name of one letter) would be
    found in results that do not pin it, and make their runs diverged.
    """
    selected = set(ctx.selected_runs)
    found: list[tuple[str, int, str]] = []
    one_by_one = digests if len(digests) <= FEW_MISSING else []
    many = set() if one_by_one else {d for d in digests if DIGEST.fullmatch(d)}
    one_by_one = one_by_one or [d for d in digests if d not in many]
    if many:
        for run_id, seq, raw in ctx.conn.execute(
            "SELECT run_id, seq, bytes FROM entries WHERE kind = 'activity.result' "
            "ORDER BY run_id, seq"
        ):
            if run_id in selected:
                names = names_in(raw)
                found.extend((run_id, seq, d) for d in sorted(names & many))
    for digest in one_by_one:
        for run_id, seq in ctx.conn.execute(
            "SELECT run_id, seq FROM entries WHERE kind = 'activity.result' "
            "AND instr(bytes, CAST(? AS BLOB)) > 0 ORDER BY run_id, seq",
            (json.dumps(digest, ensure_ascii=False),),
        ):
            if run_id in selected:
                found.append((run_id, seq, digest))
    found.sort(key=lambda item: (item[2], item[0], item[1]))
    return found


FEW_MISSING = 16


def check_all_blobs(ctx: VerifyContext) -> None:
    """Whole-workspace verify re-hashes every stored blob and looks for stray chunks.

    One query streams every blob's chunks in order through Rust (at most one chunk in
    memory), rather than a few queries per blob.
    """
    if not ctx.whole:
        return
    if ctx.rehashed is None:
        _check_blobs(ctx, ALL_CHUNKS, [()])
    else:
        _report_blobs(ctx, *ctx.rehashed)
    # Every writer cuts blobs into chunks of the same length: a single-chunk blob's
    # chunk_size would otherwise be a value nothing checks. One the re-hash already found
    # is reported once, where it put it (on the runs pinning it).
    found = {
        d.subject
        for d in [*ctx.report.workspace, *(d for v in ctx.verdicts.values() for d in v.divergences)]
        if d.check == "blob.chunk_size"
    }
    for digest, chunk_size in ctx.conn.execute(
        "SELECT digest, chunk_size FROM blobs WHERE chunk_size IS NOT ?", (CHUNK_SIZE,)
    ):
        if digest in found:
            continue
        ctx.diverged(
            None,
            Divergence(
                None, None, "blob.chunk_size", str(CHUNK_SIZE), str(chunk_size), str(digest)
            ),
        )
    orphans = ctx.conn.execute(
        "SELECT DISTINCT digest FROM blob_chunks WHERE digest NOT IN (SELECT digest FROM blobs)"
    ).fetchall()
    for (digest,) in orphans:
        ctx.diverged(
            None, Divergence(None, None, "blob.orphan_chunks", "no chunks", "chunks", str(digest))
        )


T = TypeVar("T")


def rehash_beside(
    conn: apsw.Connection, work: Callable[[], T], mark: bytes | None
) -> tuple[Rehashed | None, T]:
    """``check_all_blobs``'s pass on a reader of its own (proven by ``mark``, the mark of
    ``conn``'s transaction, to read its snapshot: ``Database.read_mark``) while ``work()``
    reads on ``conn``: the two take a core each. The blobs are None when no reader could be
    had (``check_all_blobs`` then re-hashes on ``conn``)."""
    with native.sqlite_errors():
        return _core.verify_blobs_beside(native.handle(conn), ALL_CHUNKS, work, mark)


def _check_blobs(ctx: VerifyContext, sql: str, queries: list[tuple[str, ...]]) -> None:
    """Re-hash the blobs ``sql`` yields (name, hash, size, chunking) in Rust."""
    with native.sqlite_errors():
        checked, findings = _core.verify_blobs(native.handle(ctx.conn), sql, queries)
    _report_blobs(ctx, checked, findings)


def _report_blobs(
    ctx: VerifyContext, checked: int, findings: list[tuple[str, str, str, str]]
) -> None:
    ctx.report.blobs_checked += checked
    if not findings:
        return
    # A damaged blob is a finding of every result that pins it, as a missing one is: its
    # run is not clean. One that no result of the verified runs pins is the workspace's.
    pinned: dict[str, list[tuple[str | None, int | None]]] = {}
    for run_id, seq, digest in _referencing_entries(ctx, sorted({f[0] for f in findings})):
        pinned.setdefault(digest, []).append((run_id, seq))
    for digest, check, expected, actual in findings:
        for owner, step in pinned.get(digest, [(None, None)]):
            ctx.diverged(owner, Divergence(owner, step, check, expected, actual, digest))
