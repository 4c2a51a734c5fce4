"""The blob store: every blob hashes to its name, and every referenced blob is present."""

from __future__ import annotations

import re

from agentledger.cas import DIGEST, new_hasher
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
    lost = [digest for digest in missing if digest not in pruned]
    for digest in missing:
        if digest in pruned:
            ctx.report.notes.append(
                f"blob {digest} was pruned by signed prune receipt {pruned[digest]}, not lost"
            )
    for run_id, seq, digest in _referencing_entries(ctx, lost):
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


def _referencing_entries(ctx: VerifyContext, digests: list[str]) -> list[tuple[str, int, str]]:
    """``(run_id, seq, digest)`` of the activity results whose bytes contain each digest.

    A few digests are searched for by SQLite, one scan each; many are matched in one pass
    over the activity results (the names found in each entry against the set), so the cost
    does not grow with their number. A digest that is not name-shaped (never found that
    way) is always searched for on its own.
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
                names = {m.decode() for m in _NAME.findall(raw)}
                found.extend((run_id, seq, d) for d in sorted(names & many))
    for digest in one_by_one:
        for run_id, seq in ctx.conn.execute(
            "SELECT run_id, seq FROM entries WHERE kind = 'activity.result' "
            "AND instr(bytes, CAST(? AS BLOB)) > 0 ORDER BY run_id, seq",
            (digest,),
        ):
            if run_id in selected:
                found.append((run_id, seq, digest))
    found.sort(key=lambda item: (item[2], item[0], item[1]))
    return found


FEW_MISSING = 16
_NAME = re.compile(rb"(?:blake3|sha256):[0-9a-f]{64}")


def check_all_blobs(ctx: VerifyContext) -> None:
    """Whole-workspace verify re-hashes every stored blob and looks for stray chunks.

    One query streams every blob's chunks in order (at most one chunk in memory), rather
    than a few queries per blob.
    """
    if not ctx.whole:
        return
    current: _Blob | None = None
    for digest, size, chunk_size, idx, data in ctx.conn.execute(ALL_CHUNKS):
        if current is None or current.digest != digest:
            if current is not None:
                current.finish(ctx)
            current = _Blob(digest, size, chunk_size)
        if idx is not None:
            current.add(idx, data)
    if current is not None:
        current.finish(ctx)
    orphans = ctx.conn.execute(
        "SELECT DISTINCT digest FROM blob_chunks WHERE digest NOT IN (SELECT digest FROM blobs)"
    ).fetchall()
    for (digest,) in orphans:
        ctx.diverged(
            None, Divergence(None, None, "blob.orphan_chunks", "no chunks", "chunks", str(digest))
        )


# Every blob with its chunks in order; a blob without chunks comes once with idx NULL.
ALL_CHUNKS = (
    "SELECT b.digest, b.size, b.chunk_size, c.idx, c.data FROM blobs AS b "
    "LEFT JOIN blob_chunks AS c ON c.digest = b.digest ORDER BY b.digest, c.idx"
)


class _Blob:
    """One blob's chunks as they stream past: its hash, sizes and indexes."""

    def __init__(self, digest: str, size: int, chunk_size: int) -> None:
        self.digest = digest
        self.size = size
        self.chunk_size = chunk_size
        self.named = isinstance(digest, str) and DIGEST.fullmatch(digest) is not None
        self.hasher = new_hasher(digest.split(":", 1)[0]) if self.named else None
        self.sizes: list[int] = []
        self.indexes: list[int] = []

    def add(self, idx: int, data: bytes) -> None:
        self.indexes.append(idx)
        self.sizes.append(len(data))
        if self.hasher is not None:
            self.hasher.update(data)

    def finish(self, ctx: VerifyContext) -> None:
        digest, size, chunk_size, sizes, indexes = (
            self.digest, self.size, self.chunk_size, self.sizes, self.indexes,
        )  # fmt: skip
        ctx.report.blobs_checked += 1
        if self.hasher is None:
            ctx.diverged(
                None,
                Divergence(
                    None, None, "blob.name", "blake3:/sha256:<hex>", repr(digest), str(digest)
                ),
            )
            return
        actual = self.hasher.hex_digest()
        if actual != digest:
            ctx.diverged(None, Divergence(None, None, "blob.digest", digest, actual, digest))
        if sum(sizes) != size:
            ctx.diverged(
                None, Divergence(None, None, "blob.size", str(size), str(sum(sizes)), digest)
            )
        if any(n != chunk_size for n in sizes[:-1]) or (sizes and sizes[-1] > chunk_size):
            ctx.diverged(
                None,
                Divergence(None, None, "blob.chunk_size", str(chunk_size), str(sizes[:4]), digest),
            )
        if indexes != list(range(len(indexes))):
            ctx.diverged(
                None, Divergence(None, None, "blob.chunks", "0..n-1", str(indexes[:20]), digest)
            )


def _check_blob(ctx: VerifyContext, digest: str) -> None:
    conn = ctx.conn
    row = conn.execute("SELECT size, chunk_size FROM blobs WHERE digest = ?", (digest,)).fetchall()
    size, chunk_size = row[0]
    blob = _Blob(digest, size, chunk_size)
    if blob.named:
        last = -1
        while rows := conn.execute(CHUNKS, (digest, last)).fetchall():
            for idx, data in rows:
                last = idx
                blob.add(idx, data)
    blob.finish(ctx)
