"""The blob store: every blob hashes to its name, and every referenced blob is present."""

from __future__ import annotations

from collections.abc import Iterator

from agentledger.cas import DIGEST, digest_of
from agentledger.verify.context import VerifyContext
from agentledger.verify.results import Divergence

CHUNKS = "SELECT idx, data FROM blob_chunks WHERE digest = ? AND idx > ? ORDER BY idx LIMIT 8"


def check_referenced_blobs(ctx: VerifyContext) -> None:
    """Every observation and artifact an activity pins must be in the store (then re-hashed)."""
    if not ctx.referenced:
        return
    present = {
        row[0]
        for row in ctx.conn.execute(
            "SELECT digest FROM blobs WHERE digest IN (SELECT value FROM json_each(?))",
            (_json_list(sorted(ctx.referenced)),),
        )
    }
    missing = sorted(ctx.referenced - present)
    pruned = _pruned(ctx) if missing else {}
    for digest in missing:
        if digest in pruned:
            ctx.report.notes.append(
                f"blob {digest} was pruned by signed prune receipt {pruned[digest]}, not lost"
            )
            continue
        for run_id, seq in _referencing_entries(ctx, digest):
            ctx.diverged(run_id, Divergence(run_id, seq, "blob.missing", digest, "absent", digest))
    if not ctx.whole:
        for digest in sorted(present):
            _check_blob(ctx, digest)


def _pruned(ctx: VerifyContext) -> dict[str, int]:
    """Blobs a prune receipt signed by a trusted key says garbage collection removed."""
    from agentledger.gc import pruned_digests
    from agentledger.keys import resolve_trust

    return pruned_digests(ctx.conn, resolve_trust(ctx.options.trust, ctx.ledger.keys))


def _json_list(items: list[str]) -> str:
    import json

    return json.dumps(items)


def _referencing_entries(ctx: VerifyContext, digest: str) -> list[tuple[str, int]]:
    rows = ctx.conn.execute(
        "SELECT run_id, seq FROM entries WHERE kind = 'activity.result' "
        "AND instr(bytes, CAST(? AS BLOB)) > 0 ORDER BY run_id, seq",
        (digest,),
    ).fetchall()
    selected = set(ctx.selected_runs)
    return [(run_id, seq) for run_id, seq in rows if run_id in selected]


def check_all_blobs(ctx: VerifyContext) -> None:
    """Whole-workspace verify re-hashes every stored blob and looks for stray chunks."""
    if not ctx.whole:
        return
    for (digest,) in ctx.conn.execute("SELECT digest FROM blobs ORDER BY digest").fetchall():
        _check_blob(ctx, digest)
    orphans = ctx.conn.execute(
        "SELECT DISTINCT digest FROM blob_chunks WHERE digest NOT IN (SELECT digest FROM blobs)"
    ).fetchall()
    for (digest,) in orphans:
        ctx.diverged(
            None, Divergence(None, None, "blob.orphan_chunks", "no chunks", "chunks", str(digest))
        )


def _check_blob(ctx: VerifyContext, digest: str) -> None:
    conn = ctx.conn
    ctx.report.blobs_checked += 1
    row = conn.execute("SELECT size, chunk_size FROM blobs WHERE digest = ?", (digest,)).fetchall()
    size, chunk_size = row[0]
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        ctx.diverged(
            None,
            Divergence(None, None, "blob.name", "blake3:/sha256:<hex>", repr(digest), str(digest)),
        )
        return
    sizes: list[int] = []
    indexes: list[int] = []

    def chunks() -> Iterator[bytes]:
        last = -1
        while rows := conn.execute(CHUNKS, (digest, last)).fetchall():
            for idx, data in rows:
                last = idx
                indexes.append(idx)
                sizes.append(len(data))
                yield data

    actual = digest_of(chunks(), digest.split(":", 1)[0])
    if actual != digest:
        ctx.diverged(None, Divergence(None, None, "blob.digest", digest, actual, digest))
    if sum(sizes) != size:
        ctx.diverged(None, Divergence(None, None, "blob.size", str(size), str(sum(sizes)), digest))
    if any(n != chunk_size for n in sizes[:-1]) or (sizes and sizes[-1] > chunk_size):
        ctx.diverged(
            None,
            Divergence(None, None, "blob.chunk_size", str(chunk_size), str(sizes[:4]), digest),
        )
    if indexes != list(range(len(indexes))):
        ctx.diverged(
            None, Divergence(None, None, "blob.chunks", "0..n-1", str(indexes[:20]), digest)
        )
