"""Reachability garbage collection of blobs, with a signed prune receipt; and fsck.

A blob is reachable when any row of any table other than the blob store names its digest
(``blake3:<hex>`` / ``sha256:<hex>`` anywhere in a text or blob column: journal entries,
receipts, audit records, phase evidence, imports), or when a reachable blob's bytes name it
(a data/ops receipt names its inputs and outputs). Scanning every column is deliberately
conservative: a table added later is covered without teaching GC about it.

A blob stored less than ``grace_s`` seconds ago is never collected, reachable or not: a
writer stores a blob first and references it in a later transaction, and GC must not win
that race. GC itself runs in one write transaction, so no writer commits in the middle.

Every collection that removes something records a prune receipt (docs/FORMAT.md, "Prune
receipts") signed with the install key; verify reports a referenced blob that a trusted
receipt removed as pruned, not missing.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import apsw

from agentledger import _core
from agentledger import checkpoint as checkpoints
from agentledger import log as wslog
from agentledger.errors import InvalidInput
from agentledger.ids import utc_timestamp
from agentledger.keys import public_key_text
from agentledger.log import fetch
from agentledger.storage import quote_identifier

if TYPE_CHECKING:
    from agentledger.ledger import Ledger

DEFAULT_GRACE_S = 3600.0
BATCH = 16_384
DIGEST_BYTES = re.compile(rb"(?:blake3|sha256):[0-9a-f]{64}")
MAX_SCANNED_BLOB = 64 << 20
PRUNE_DOMAIN = b"agentledger/v1/prune-receipt\n"
NOT_REFERENCES = {"blobs", "blob_chunks", "blob_births", "prune_receipts", "sqlite_sequence"}


@dataclass
class GcResult:
    reachable: int = 0
    unreachable: list[str] = field(default_factory=list)
    kept_young: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    bytes_freed: int = 0
    receipt_id: int | None = None
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "reachable": self.reachable,
            "unreachable": len(self.unreachable),
            "kept_young": self.kept_young,
            "removed": self.removed,
            "bytes_freed": self.bytes_freed,
            "receipt": self.receipt_id,
        }


def _digests_in(values: Iterable[object]) -> set[str]:
    found: set[str] = set()
    for value in values:
        if isinstance(value, str):
            value = value.encode()
        if isinstance(value, bytes) and b":" in value:
            found.update(d.decode() for d in DIGEST_BYTES.findall(value))
    return found


def referenced_digests(conn: apsw.Connection) -> set[str]:
    """Every digest named by a row outside the blob store (not yet following blobs)."""
    named: set[str] = set()
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for table in tables:
        if table in NOT_REFERENCES:
            continue
        columns = [
            row[1]
            for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))
            if row[2].upper() in {"TEXT", "BLOB", "ANY", ""}
        ]
        if not columns:
            continue
        # Names read from the file are quoted, never pasted: a hostile table name is data.
        quoted = ", ".join(quote_identifier(c) for c in columns)
        for row in conn.execute(f"SELECT {quoted} FROM {quote_identifier(table)}"):
            named |= _digests_in(row)
    return named


def reachable_blobs(conn: apsw.Connection) -> set[str]:
    """Digests of stored blobs that some row names, directly or through other blobs."""
    stored = {row[0]: row[1] for row in conn.execute("SELECT digest, size FROM blobs")}
    queue = [d for d in referenced_digests(conn) if d in stored]
    reachable: set[str] = set()
    while queue:
        digest = queue.pop()
        if digest in reachable:
            continue
        reachable.add(digest)
        if stored[digest] <= MAX_SCANNED_BLOB:
            data = b"".join(
                chunk
                for (chunk,) in conn.execute(
                    "SELECT data FROM blob_chunks WHERE digest = ? ORDER BY idx", (digest,)
                )
            )
            queue.extend(d for d in _digests_in([data]) if d in stored and d not in reachable)
    return reachable


def collect(ledger: Ledger, *, dry_run: bool = False, grace_s: float = DEFAULT_GRACE_S) -> GcResult:
    """Remove unreachable blobs older than ``grace_s``; sign a receipt of what went."""
    result = GcResult(dry_run=dry_run)
    context = ledger.db.snapshot() if dry_run else ledger.db.write()
    with context as conn:
        reachable = reachable_blobs(conn)
        result.reachable = len(reachable)
        births: dict[str, float] = dict(fetch(conn, "SELECT digest, stored_at FROM blob_births"))
        sizes: dict[str, int] = dict(fetch(conn, "SELECT digest, size FROM blobs"))
        cutoff = time.time() - grace_s
        for digest in sorted(sizes):
            if digest in reachable:
                continue
            result.unreachable.append(digest)
            if births.get(digest, 0.0) > cutoff:
                result.kept_young.append(digest)
            else:
                result.removed.append(digest)
        result.bytes_freed = sum(sizes[d] for d in result.removed)
        if dry_run or not result.removed:
            return result
        for digest in result.removed:
            conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
            conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
            conn.execute("DELETE FROM blob_births WHERE digest = ?", (digest,))
        result.receipt_id = _record_receipt(conn, ledger, result, sizes)
    return result


def _record_receipt(
    conn: apsw.Connection, ledger: Ledger, result: GcResult, sizes: dict[str, int]
) -> int:
    state = wslog.read_state(conn)
    receipt = _core.canonicalize(
        {
            "v": 1,
            "ledger": ledger.id,
            "time": utc_timestamp(),
            "log_size": state.size,
            "log_root": "blake3:" + state.root.hex(),
            "removed": [{"digest": d, "size": sizes[d]} for d in result.removed],
            "reason": "unreachable",
        }
    )
    key = checkpoints.signing_key(ledger)
    signature = key.sign(PRUNE_DOMAIN + receipt).signature
    conn.execute(
        "INSERT INTO prune_receipts (receipt, signer, signature) VALUES (?, ?, ?)",
        (receipt.decode(), public_key_text(bytes(key.verify_key)), signature),
    )
    return int(conn.last_insert_rowid())


def pruned_digests(conn: apsw.Connection, trusted: set[str]) -> dict[str, int]:
    """Digest -> receipt id, for every blob a trusted prune receipt says it removed."""
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    from agentledger.keys import parse_public_key

    pruned: dict[str, int] = {}
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'prune_receipts'"
    ).fetchall()
    if not has_table:
        return pruned
    for receipt_id, receipt, signer, signature in conn.execute(
        "SELECT id, receipt, signer, signature FROM prune_receipts ORDER BY id"
    ):
        if signer not in trusted:
            continue
        try:
            VerifyKey(parse_public_key(signer)).verify(
                PRUNE_DOMAIN + receipt.encode(), bytes(signature)
            )
        except (BadSignatureError, ValueError):
            continue
        import json

        for item in json.loads(receipt).get("removed", []):
            if isinstance(item, dict) and isinstance(item.get("digest"), str):
                pruned[item["digest"]] = int(receipt_id)
    return pruned


def storage_checks(ledger: Ledger) -> list[str]:
    """SQLite's own checks: page and index integrity, then foreign keys. Empty when sound."""
    with ledger.db.snapshot() as conn:
        integrity = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
        findings = [] if integrity == ["ok"] else [f"integrity: {line}" for line in integrity]
        for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check"):
            findings.append(f"foreign key: {table} row {rowid} names a missing {parent}")
    return findings


def checkpoint_history(ledger: Ledger, trusted: set[str]) -> list[str]:
    """Every stored checkpoint, not only the newest: signed by a trusted key, and its root
    that of the log's first ``size`` leaves as they are now. One pass over the log in leaf
    order, stopping at each checkpoint's size. Empty when the whole history holds."""
    from agentledger.checkpoint import Checkpoint

    findings: list[str] = []
    with ledger.db.snapshot() as conn:
        rows = fetch(conn, "SELECT id, size, note FROM checkpoints ORDER BY size, id")
        state = wslog.EMPTY
        cursor = iter(conn.execute(wslog.LEAF_ROWS, (0,)))
        for checkpoint_id, size, note in rows:
            try:
                parsed = Checkpoint.parse(note)
            except InvalidInput as exc:
                findings.append(f"checkpoint {checkpoint_id}: {exc.message}")
                continue
            if parsed.signed_by(sorted(trusted)) is None:
                findings.append(f"checkpoint {checkpoint_id}: not signed by a trusted key")
            if parsed.size != size:
                findings.append(
                    f"checkpoint {checkpoint_id}: size column {size}, note {parsed.size}"
                )
            while state.size < parsed.size:
                batch = list(itertools.islice(cursor, min(BATCH, parsed.size - state.size)))
                if not batch:
                    break
                state, _, gap = wslog.extend(state, batch)
                if gap is not None:
                    findings.append(f"log: leaf {gap[0]} out of place (found {gap[1]})")
                    return findings
            if state.size < parsed.size:
                findings.append(
                    f"checkpoint {checkpoint_id}: commits to {parsed.size} leaves, "
                    f"the log holds {state.size}"
                )
                break
            if state.root != parsed.root:
                findings.append(
                    f"checkpoint {checkpoint_id}: the log's first {parsed.size} leaves "
                    "no longer hash to its root (history rewritten)"
                )
    return findings
