"""Reachability garbage collection of blobs, with a signed prune receipt; and fsck.

A blob is reachable when any row of any table other than the blob store names its digest
(``blake3:<hex>`` / ``sha256:<hex>`` anywhere in a text or blob column: journal entries,
receipts, audit records, phase evidence, imports), or when a reachable blob's bytes name it
(a data/ops receipt names its inputs and outputs). Scanning every column is deliberately
conservative: a table added later is covered without teaching GC about it.

A blob is collected only once garbage collection has seen it unreachable for ``grace_s``
seconds: a writer stores a blob first and references it in a later transaction, and GC
must not win that race. When each blob was first seen unreachable is remembered by the
install, next to its signer's memory (``$AGENTLEDGER_HOME/ledgers/<id>.unreachable.json``),
not in the ledger: a time in the file is one nothing could check, and an attacker could
age a blob into collection by editing it. A sighting holds the blob row's rowid too: bytes
stored again take a new one (``cas.py``), and their grace period starts again. GC itself
runs in one write transaction, so no writer commits in the middle.

Every collection that removes something records a prune receipt (docs/FORMAT.md, "Prune
receipts") signed with the install key; verify reports a referenced blob that a trusted
receipt removed as pruned, not missing.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import apsw

from agentledger import _core, cas, signing, tiles
from agentledger import checkpoint as checkpoints
from agentledger import log as wslog
from agentledger.bookkeeping import GC_PRUNED, GC_RUN
from agentledger.errors import AgentLedgerError, InvalidInput
from agentledger.ids import utc_timestamp
from agentledger.keys import parse_public_key, public_key_text, sign_message
from agentledger.log import fetch
from agentledger.storage import quote_identifier

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle
    from agentledger.proven import Proven

DEFAULT_GRACE_S = 3600.0
BATCH = 16_384
PRUNE_DOMAIN = b"agentledger/v1/prune-receipt\n"
NOT_REFERENCES = {"blobs", "blob_chunks", "prune_receipts", "log_tiles", "sqlite_sequence"}
MAX_SIGHTINGS_BYTES = 64 << 20


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


Sighting = tuple[float, int]
"""When GC first saw a blob unreachable (unix seconds), and the blob's rowid then: storing
bytes the store holds gives their row a new rowid (``cas.py``), and a blob whose rowid
changed counts as just stored, its grace period starting again."""


class Sightings:
    """When this install's GC first saw each blob of a ledger unreachable, and its rowid."""

    def __init__(self, ledger: LedgerHandle) -> None:
        memory = signing.memory_of(ledger)
        self.usable = memory.usable
        # Named after the id only when it is one ``init`` makes (the file's id is data).
        name = f"{ledger.id}.unreachable.json" if memory.usable else "unusable.unreachable.json"
        self.path = memory.path.with_name(name)

    def read(self) -> dict[str, Sighting]:
        if not self.usable:
            return {}
        try:
            with open(self.path, "rb") as handle:
                data = handle.read(MAX_SIGHTINGS_BYTES + 1)
            document = json.loads(data) if len(data) <= MAX_SIGHTINGS_BYTES else {}
        except (OSError, ValueError):
            return {}
        if not isinstance(document, dict):
            return {}
        # A sighting of another shape (a bare time, from before rowids were kept) is
        # dropped: that blob's grace period starts again, it is never shortened.
        return {
            digest: (float(seen[0]), seen[1])
            for digest, seen in document.items()
            if isinstance(seen, list)
            and len(seen) == 2
            and isinstance(seen[0], int | float)
            and math.isfinite(seen[0])
            and type(seen[1]) is int
        }

    def write(self, seen: dict[str, Sighting]) -> None:
        if not self.usable:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(seen, handle, sort_keys=True)
        os.replace(temp, self.path)


def _digests_in(values: Iterable[object]) -> set[str]:
    found: set[str] = set()
    for value in values:
        if isinstance(value, str):
            value = value.encode()
        if isinstance(value, bytes):
            found |= cas.names_in(value)
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
    return cas.reachable(conn, referenced_digests(conn))


def collect(
    ledger: LedgerHandle, *, dry_run: bool = False, grace_s: float = DEFAULT_GRACE_S
) -> GcResult:
    """Remove unreachable blobs older than ``grace_s``; sign a receipt of what went.

    A ledger that does not verify clean is refused (``Diverged``), nothing removed: a blob
    an attacker swapped or whose reference was hidden is evidence, and a prune receipt is
    a signature.
    """
    if not math.isfinite(grace_s) or grace_s < 0:
        raise InvalidInput(f"the grace period must be a number of seconds ≥ 0, not {grace_s}")
    result = GcResult(dry_run=dry_run)
    context = ledger.db.snapshot() if dry_run else ledger.db.write()
    with context as conn:
        # Verified and collected in one write transaction: no writer can hide a reference
        # between the verify and the deletion. The receipt is signed over the log the
        # verify rebuilt.
        state = (
            None
            if dry_run
            else signing.verify_before_signing(ledger, "collect blobs (and sign a prune receipt)")
        )
        reachable = reachable_blobs(conn)
        result.reachable = len(reachable)
        # A name that is not text names no blob gc could collect, and a size that is no
        # integer frees no known bytes (damaged rows; verify names them).
        rows = fetch(conn, "SELECT digest, size, rowid FROM blobs WHERE typeof(digest) = 'text'")
        sizes: dict[str, int] = {
            digest: size if isinstance(size, int) else 0 for digest, size, _ in rows
        }
        rowids: dict[str, int] = {digest: rowid for digest, _, rowid in rows}
        sightings = Sightings(ledger)
        # A sighting counts only for the row it saw: bytes stored again since are young.
        seen = {d: (when, r) for d, (when, r) in sightings.read().items() if rowids.get(d) == r}
        now = time.time()
        for digest in sorted(sizes):
            if digest in reachable:
                continue
            result.unreachable.append(digest)
            first = seen[digest][0] if digest in seen else now
            if now - first < grace_s or (dry_run and digest not in seen and grace_s > 0):
                result.kept_young.append(digest)
            else:
                result.removed.append(digest)
        if not dry_run:
            sightings.write(
                {d: (seen[d][0] if d in seen else now, rowids[d]) for d in result.kept_young}
            )
        result.bytes_freed = sum(sizes[d] for d in result.removed)
        if state is None or not result.removed:
            return result
        for digest in result.removed:
            conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
            conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
        result.receipt_id = _record_receipt(conn, ledger, result, sizes, state)
    return result


def _record_receipt(
    conn: apsw.Connection,
    ledger: LedgerHandle,
    result: GcResult,
    sizes: dict[str, int],
    state: Proven,
) -> int:
    signing.require_current(conn, ledger.id, state)
    receipt = _core.canonicalize(
        {
            "v": 1,
            "ledger": ledger.id,
            "time": utc_timestamp(),
            "log_size": state.size,
            "log_root": "sha256:" + state.root.hex(),
            "removed": [{"digest": d, "size": sizes[d]} for d in result.removed],
            "reason": "unreachable",
        }
    )
    key = checkpoints.signing_key(ledger)
    signature = sign_message(key, PRUNE_DOMAIN + receipt)
    conn.execute(
        "INSERT INTO prune_receipts (receipt, signer, signature) VALUES (?, ?, ?)",
        (receipt.decode(), public_key_text(bytes(key.verify_key)), signature),
    )
    receipt_id = int(conn.last_insert_rowid())
    # The receipt is in the signed log too: a receipt row deleted or added later shows.
    ledger.run(GC_RUN)._append_locked(conn, [(GC_PRUNED, {"receipt": receipt_hash(receipt)})])
    return receipt_id


def receipt_hash(receipt: bytes) -> str:
    """What a ``gc.pruned`` entry pins: the BLAKE3 name of the receipt's canonical bytes."""
    return _core.blake3_hex(receipt)


@dataclass(frozen=True, slots=True)
class Pruned:
    """A blob a trusted receipt of this ledger says GC removed, when the log had ``log_size``
    entries: it excuses only references from entries logged before that."""

    receipt_id: int
    log_size: int


def pruned_digests(conn: apsw.Connection, trusted: set[str], ledger_id: str) -> dict[str, Pruned]:
    """Digest -> the receipt that removed it, for receipts that bind to this ledger's log:
    signed by a trusted key, naming this ledger, and whose log size and root are those of
    the log's first entries now (the tiles' root at that size)."""
    pruned: dict[str, Pruned] = {}
    reader = tiles.TileReader(conn)
    size = wslog.read_state(conn).size
    for receipt_id, receipt, signer, signature in conn.execute(
        "SELECT id, receipt, signer, signature FROM prune_receipts ORDER BY id"
    ):
        if signer not in trusted:
            continue
        try:
            signed = _core.ed25519_verify(
                parse_public_key(signer), PRUNE_DOMAIN + receipt.encode(), bytes(signature)
            )
            document = json.loads(receipt) if signed else None
        except ValueError:
            continue
        if not isinstance(document, dict) or document.get("ledger") != ledger_id:
            continue
        log_size, log_root = document.get("log_size"), document.get("log_root")
        if not isinstance(log_size, int) or not 0 <= log_size <= size:
            continue
        try:
            root = reader.root(log_size)
        except AgentLedgerError:
            continue
        if not wslog.names_root(conn, log_size, root, log_root):
            continue
        for item in document.get("removed", []):
            if isinstance(item, dict) and isinstance(item.get("digest"), str):
                pruned[item["digest"]] = Pruned(int(receipt_id), log_size)
    return pruned


def storage_checks(ledger: LedgerHandle) -> list[str]:
    """SQLite's own checks: page and index integrity, then foreign keys. Empty when sound."""
    with ledger.db.snapshot() as conn:
        integrity = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
        findings = [] if integrity == ["ok"] else [f"integrity: {line}" for line in integrity]
        for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check"):
            findings.append(f"foreign key: {table} row {rowid} names a missing {parent}")
    return findings
