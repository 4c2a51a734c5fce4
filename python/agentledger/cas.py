"""The content-addressed blob store: bytes named by the hash of exactly those bytes.

Blobs are stored in chunks so that blobs of hundreds of MB are written and read without
ever being held whole in memory. Native names are ``blake3:<hex>``; ``sha256:<hex>`` names
are accepted for imported data (bernstein's store is SHA-256).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import apsw

from agentledger import _core
from agentledger.errors import InvalidInput
from agentledger.limits import MAX_SQLITE_INT
from agentledger.sqlite_files import held_by_this_process
from agentledger.storage import native

if TYPE_CHECKING:
    from agentledger.storage import Database

CHUNK_SIZE = 1 << 20
CONTENT_HASH = r"(?:blake3|sha256):[0-9a-f]{64}"
"""A content hash, the name of a blob: ``blake3:`` or ``sha256:`` then 64 lower-case hex
digits (docs/FORMAT.md). The one pattern: ``DIGEST`` checks a name, ``DIGEST_BYTES``
finds the names held in stored bytes (a receipt names the blobs it covers)."""
DIGEST = re.compile(CONTENT_HASH)
DIGEST_BYTES = re.compile(CONTENT_HASH.encode())
Hasher = _core.Blake3Hasher | _core.Sha256Hasher


# What verify re-hashes (``_core.verify_blobs``): blobs with their chunks in order; a blob
# without chunks comes once with idx NULL.
ALL_CHUNKS = (
    "SELECT b.digest, b.size, b.chunk_size, c.idx, c.data FROM blobs AS b "
    "LEFT JOIN blob_chunks AS c ON c.digest = b.digest ORDER BY b.digest, c.idx"
)
ONE_BLOB = (
    "SELECT b.digest, b.size, b.chunk_size, c.idx, c.data FROM blobs AS b "
    "LEFT JOIN blob_chunks AS c ON c.digest = b.digest WHERE b.digest = ? ORDER BY c.idx"
)

MAX_SCANNED_BLOB = 64 << 20
"""Blobs up to this size are scanned for the names of further blobs (receipts name theirs)."""


def names_in(data: bytes) -> set[str]:
    """The content hashes ``data`` holds, found in Rust (``_core.content_names_in``) as
    ``names_in_reference`` finds them: garbage collection keeps what stored bytes name,
    and the regex took half of ``gc``'s time on an imported bernstein store."""
    return _core.content_names_in(data)


def names_in_reference(data: bytes) -> set[str]:
    """``names_in`` in plain Python: ``DIGEST_BYTES``'s matches."""
    return {name.decode() for name in DIGEST_BYTES.findall(data)}


def reachable(conn: apsw.Connection, seeds: Iterable[str]) -> set[str]:
    """The stored blobs among ``seeds``, and every stored blob their bytes name,
    transitively (a blob over ``MAX_SCANNED_BLOB`` is reached, not scanned). A round at a
    time: its digests in one query, their chunks in one ordered query (an imported
    bernstein store names hundreds of thousands)."""
    present: set[str] = set()
    frontier = set(seeds)
    while frontier:
        found = native.rows(
            conn,
            "SELECT digest, size FROM blobs WHERE digest IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(frontier)),),
        )
        present.update(str(digest) for digest, _ in found)
        # A size that is no integer (a damaged row): reached, not scanned, as a large one.
        scanned = sorted(
            str(digest)
            for digest, size in found
            if isinstance(size, int) and size <= MAX_SCANNED_BLOB
        )
        chunks = conn.execute(
            "SELECT digest, data FROM blob_chunks WHERE digest IN "
            "(SELECT value FROM json_each(?)) ORDER BY digest, idx",
            (json.dumps(scanned),),
        )
        named: set[str] = set()
        for _digest, rows in itertools.groupby(chunks, key=lambda row: row[0]):
            # A chunk that holds no bytes (a damaged row; verify names it) names nothing.
            named |= names_in(b"".join(data for _, data in rows if isinstance(data, bytes)))
        frontier = named - present
    return present


def check_digest(digest: object) -> str:
    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
        raise InvalidInput(
            f"malformed content hash {_shown(digest)}: expected blake3:<64 hex> or sha256:<64 hex>",
            code="malformed-hash",
        )
    return digest


def _shown(value: object, limit: int = 80) -> str:
    """``repr`` cut to ``limit`` characters: an error message never echoes megabytes."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def new_hasher(algorithm: str) -> Hasher:
    if algorithm == "blake3":
        return _core.Blake3Hasher()
    if algorithm == "sha256":
        return _core.Sha256Hasher()
    raise InvalidInput(f"unknown hash algorithm {algorithm!r}", code="unknown-algorithm")


def digest_of(chunks: Iterable[bytes], algorithm: str = "blake3") -> str:
    hasher = new_hasher(algorithm)
    for chunk in chunks:
        hasher.update(chunk)
    return hasher.hex_digest()


def _file_chunks(handle: BinaryIO) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK_SIZE):
        yield chunk


def _stored_again(conn: apsw.Connection, digests: list[str]) -> None:
    """Bytes the store holds, stored again: their row takes a new rowid, which tells garbage
    collection they were just stored (``gc.Sightings``), so a writer that stores them and
    names them in a later transaction is not raced by a GC that saw them unreachable before."""
    conn.executemany(
        "UPDATE blobs SET rowid = (SELECT max(rowid) FROM blobs) + 1 WHERE digest = ? "
        f"AND (SELECT max(rowid) FROM blobs) < {MAX_SQLITE_INT}",  # no overflow at the top
        [(digest,) for digest in digests],
    )


class BlobStore:
    """``put``/``get`` bytes by content hash inside the ledger file."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, data: bytes, algorithm: str = "blake3") -> str:
        """Store bytes; return their name. Idempotent: the same bytes are stored once."""
        return self.put_many([data], algorithm)[0]

    def put_many(self, items: Iterable[bytes], algorithm: str = "blake3") -> list[str]:
        """Store each of ``items``, in one transaction; their names, in order. The blobs
        the store lacks are inserted by one statement per table (an import stores tens of
        thousands of small files)."""
        blobs = [bytes(data) for data in items]
        names = [digest_of([data], algorithm) for data in blobs]
        held = dict(zip(names, blobs, strict=True))
        with self.db.write() as conn:
            stored = native.rows(
                conn,
                "SELECT digest FROM blobs WHERE digest IN (SELECT value FROM json_each(?))",
                (json.dumps(list(held)),),
            )
            for (digest,) in stored:
                held.pop(digest, None)
            _stored_again(conn, [str(digest) for (digest,) in stored])
            conn.executemany(
                "INSERT INTO blobs (digest, size, chunk_size) VALUES (?, ?, ?)",
                [(digest, len(data), CHUNK_SIZE) for digest, data in held.items()],
            )
            conn.executemany(
                "INSERT INTO blob_chunks (digest, idx, data) VALUES (?, ?, ?)",
                [
                    (digest, idx, data[start : start + CHUNK_SIZE])
                    for digest, data in held.items()
                    for idx, start in enumerate(range(0, len(data) or 1, CHUNK_SIZE))
                ],
            )
        return names

    def put_file(self, path: str | os.PathLike[str], algorithm: str = "blake3") -> str:
        """Store a file's bytes, streaming: it is never read into memory whole."""
        path = Path(path)
        if held_by_this_process(path):
            raise InvalidInput(
                f"{path}: a file of a ledger this process has open; not stored",
                code="own-ledger-file",
            )
        with path.open("rb") as handle:
            digest = digest_of(_file_chunks(handle), algorithm)
        with path.open("rb") as handle, self.db.write() as conn:
            if self._exists(conn, digest):
                _stored_again(conn, [digest])
                return digest
            size = self._insert(conn, digest, None, _file_chunks(handle))
            # The file may have changed between the two passes: what was stored must match.
            stored = digest_of(self._chunks(conn, digest), algorithm)
            if stored != digest:
                raise InvalidInput(f"{path} changed while it was being stored", code="unstable")
            conn.execute("UPDATE blobs SET size = ? WHERE digest = ?", (size, digest))
        return digest

    def _insert(
        self, conn: apsw.Connection, digest: str, size: int | None, chunks: Iterable[bytes]
    ) -> int:
        if self._exists(conn, digest):
            return size or 0
        execute = conn.execute
        execute(
            "INSERT INTO blobs (digest, size, chunk_size) VALUES (?, ?, ?)",
            (digest, size or 0, CHUNK_SIZE),
        )
        total = 0
        for idx, chunk in enumerate(chunks):
            execute(
                "INSERT INTO blob_chunks (digest, idx, data) VALUES (?, ?, ?)", (digest, idx, chunk)
            )
            total += len(chunk)
        return total

    @staticmethod
    def _exists(conn: apsw.Connection, digest: str) -> bool:
        rows = conn.execute("SELECT 1 FROM blobs WHERE digest = ?", (digest,)).fetchall()
        return bool(rows)

    @staticmethod
    def _chunks(conn: apsw.Connection, digest: str) -> Iterator[bytes]:
        last = -1
        while True:
            rows = conn.execute(
                "SELECT idx, data FROM blob_chunks WHERE digest = ? AND idx > ? "
                "ORDER BY idx LIMIT 8",
                (digest, last),
            ).fetchall()
            if not rows:
                return
            for idx, data in rows:
                last = idx
                # A chunk that holds no bytes (a damaged row: verify names the blob) holds
                # none of the blob's: whoever re-hashes what is read finds it changed.
                yield data if isinstance(data, bytes) else b""

    @staticmethod
    def damage(conn: apsw.Connection, digests: Iterable[str]) -> dict[str, tuple[str, str, str]]:
        """What verify would find wrong with the stored bytes of each of ``digests`` the
        store lists, re-hashed in ``conn``'s transaction: ``{digest: (check, expected,
        actual)}`` (its first finding); a digest absent from the result is intact or not
        listed. Whoever pins a blob it did not just store asks this first."""
        with native.sqlite_errors():
            _, findings = _core.verify_blobs(
                native.handle(conn), ONE_BLOB, [(digest,) for digest in sorted(set(digests))]
            )
        damaged: dict[str, tuple[str, str, str]] = {}
        for digest, check, expected, actual in findings:
            damaged.setdefault(digest, (check, expected, actual))
        return damaged

    def __contains__(self, digest: object) -> bool:
        return isinstance(digest, str) and bool(
            self.db.rows("SELECT 1 FROM blobs WHERE digest = ?", (digest,))
        )

    def get(self, digest: str) -> bytes:
        """The blob's bytes; ``KeyError`` if the store does not hold it."""
        return b"".join(self.iter_chunks(digest))

    def iter_chunks(self, digest: str) -> Iterator[bytes]:
        """The blob's bytes in chunks, for blobs too large to hold whole."""
        check_digest(digest)
        with self.db.snapshot() as conn:
            if not self._exists(conn, digest):
                raise KeyError(digest)
            yield from self._chunks(conn, digest)

    def size(self, digest: str) -> int:
        rows = self.db.rows("SELECT size FROM blobs WHERE digest = ?", (digest,))
        if not rows:
            raise KeyError(digest)
        return int(rows[0][0])

    def digests(self) -> list[str]:
        return [row[0] for row in self.db.rows("SELECT digest FROM blobs ORDER BY digest")]
