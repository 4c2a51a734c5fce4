"""Read access to a bernstein workdir: on disk, or as imported into a ledger.

The verifier sees both through one small interface, so ``--compat bernstein`` inside the
ledger and bernstein on the exported directory read exactly the same bytes.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import os
import posixpath
import stat
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentledger import _core, limits
from agentledger.bernstein.format import (
    AUDIT_DIR,
    CAS_DIR,
    RUNS_DIR,
    SDD,
    TOP_DIRS,
    cas_path,
    content_hash,
    journal_path,
    valid_run_id,
)
from agentledger.cas import DIGEST
from agentledger.sqlite_files import held_by_this_process
from agentledger.storage import native

if TYPE_CHECKING:
    import apsw

    from agentledger.cas import BlobStore


class Workdir(Protocol):
    """What bernstein's verifiers read. Paths are workdir-relative and ``/``-separated."""

    def run_ids(self) -> list[str]: ...

    def journal(self, run_id: str) -> bytes | None: ...

    def has_store(self) -> bool:
        """Whether ``.sdd/cas`` exists (bernstein skips every byte check without it)."""
        ...

    def read(self, path: str) -> bytes | None: ...

    def digest(self, path: str) -> str | None:
        """``sha256:<hex>`` of the file's bytes, ``None`` if there is no such file."""
        ...

    def stored_digest(self, content_hash: str) -> str | None:
        """``digest`` of the store file bernstein looks up for ``content_hash``."""
        ...

    def journals(self, run_ids: list[str]) -> list[bytes | None]: ...

    def store_index(self) -> _core.BernsteinStoreIndex | None:
        """``content hash -> stored digest`` for the plain names, if known without reading."""
        ...

    def audit_segments(self) -> list[tuple[str, bytes]]:
        """Audit chain files in chain order: archives (decompressed), then day files."""
        ...

    def prefetch(self, paths: list[str]) -> None:
        """A hint: ``read`` will be asked for these paths (fetch them in bulk)."""
        ...

    def audit_files(self) -> list[str]:
        """Every file under ``.sdd/audit`` (seals, checkpoints... too), sorted."""
        ...

    def audit_folders(self) -> list[str]:
        """Every folder under ``.sdd/audit``, sorted: bernstein's globs list folders too."""
        ...

    def has_dir(self, path: str) -> bool:
        """Whether the workdir has this folder."""
        ...


ARCHIVE_DIR = f"{AUDIT_DIR}/archive"
UNDECODABLE_ARCHIVE = b"\x00undecodable archive\n"
"""What an archive that does not inflate reads as, and a folder named like one (bernstein's
glob lists it, its read fails): a line no verifier accepts."""
OVERSIZED_ARCHIVE = b"\x00archive inflating past the read limit\n"
"""What an archive reads as once the archives have inflated to ``MAX_INFLATED_BYTES``."""
UNREAD_ARCHIVES = (UNDECODABLE_ARCHIVE, OVERSIZED_ARCHIVE)
UNREADABLE_DAY_FILE = b"\x00unreadable day file\n"
"""What a folder named like a day file reads as: bernstein's ``*.jsonl`` glob lists it, its
read fails (the walk reports the segment gone, the seal an unsealed name); here, a line no
verifier accepts."""


def read_fails(workdir: Workdir, path: str) -> str | None:
    """Why bernstein's read of ``path`` raises an ``OSError`` other than
    ``FileNotFoundError``: a folder there, or a file where a folder above it should be.
    Its checkpoint, anchor and co-signature readers fail their pillar on one, where no
    file at all is no record. None when the read works or finds no file."""
    if workdir.has_dir(path):
        return "is a folder"
    folder = posixpath.dirname(path)
    while folder.startswith(f"{SDD}/") and folder not in TOP_DIRS:
        if workdir.digest(folder) is not None:  # NotADirectoryError
            return f"is under {posixpath.basename(folder)}, a file"
        folder = posixpath.dirname(folder)
    return None


def _inflate(data: bytes, limit: int) -> bytes:
    """The archive's bytes, at most ``limit`` of them (a marker past it, or when the
    archive is not gzip)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as archive:
            inflated = archive.read(limit + 1)
    except (OSError, EOFError, zlib.error):
        return UNDECODABLE_ARCHIVE
    return OVERSIZED_ARCHIVE if len(inflated) > limit else inflated


def _day_file_folders(folders: Iterable[str]) -> list[str]:
    """The folders directly in ``.sdd/audit`` whose names end ``.jsonl``."""
    return [f for f in folders if posixpath.dirname(f) == AUDIT_DIR and f.endswith(".jsonl")]


def _order_segments(
    names: list[str], read: Callable[[str], bytes | None], folders: Iterable[str] = ()
) -> list[tuple[str, bytes]]:
    folders = list(folders)
    # bernstein's archive glob does not recurse: only names directly in the archive folder.
    archive_folders = {
        f for f in folders if posixpath.dirname(f) == ARCHIVE_DIR and f.endswith(".jsonl.gz")
    }
    archives = sorted(
        archive_folders
        | {n for n in names if posixpath.dirname(n) == ARCHIVE_DIR and n.endswith(".jsonl.gz")}
    )
    unreadable = set(_day_file_folders(folders))
    day_files = {n for n in names if posixpath.dirname(n) == AUDIT_DIR and n.endswith(".jsonl")}
    live = sorted(day_files | unreadable)
    segments: list[tuple[str, bytes]] = []
    budget = limits.MAX_INFLATED_BYTES
    for name in archives:
        if name in archive_folders:
            segments.append((name, UNDECODABLE_ARCHIVE))
            continue
        data = read(name)
        if data is not None:
            inflated = _inflate(data, budget)
            if inflated not in UNREAD_ARCHIVES:
                budget -= len(inflated)
            segments.append((name, inflated))
    for name in live:
        data = UNREADABLE_DAY_FILE if name in unreadable else read(name)
        if data is not None:
            segments.append((name, data))
    return segments


class DirectoryWorkdir:
    """A workdir on disk, read the way bernstein reads it (symlinks followed, errors = absent)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def run_ids(self) -> list[str]:
        runs = self.root / RUNS_DIR
        return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []

    def journal(self, run_id: str) -> bytes | None:
        if not valid_run_id(run_id):
            return None
        runs = (self.root / RUNS_DIR).resolve()
        path = (self.root / journal_path(run_id)).resolve()
        if runs not in path.parents:
            return None
        return self.read(journal_path(run_id))

    def has_store(self) -> bool:
        return (self.root / CAS_DIR).is_dir()

    def read(self, path: str) -> bytes | None:
        """The bytes of a regular file of the workdir; ``None`` for anything else (a FIFO
        there would block the open: it is opened without blocking, then looked at). A file
        of a ledger this process has open is never opened (``sqlite_files``): ``None``."""
        if held_by_this_process(self.root / path):
            return None
        try:
            fd = os.open(self.root / path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        # Looked at before a file object is made: ``fdopen`` refuses a folder (raising).
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        with os.fdopen(fd, "rb") as handle:
            try:
                return handle.read()
            except OSError:
                return None

    def digest(self, path: str) -> str | None:
        data = self.read(path)
        return None if data is None else content_hash(data)

    def stored_digest(self, content_hash: str) -> str | None:
        path = cas_path(content_hash)
        return None if path is None else self.digest(path)

    def journals(self, run_ids: list[str]) -> list[bytes | None]:
        return [self.journal(run_id) for run_id in run_ids]

    def store_index(self) -> _core.BernsteinStoreIndex | None:
        return None

    def prefetch(self, paths: list[str]) -> None:
        pass

    def audit_segments(self) -> list[tuple[str, bytes]]:
        return _order_segments(self.audit_files(), self.read, self.audit_folders())

    def audit_files(self) -> list[str]:
        audit = self.root / AUDIT_DIR
        if not audit.is_dir():
            return []
        return sorted(p.relative_to(self.root).as_posix() for p in audit.rglob("*") if p.is_file())

    def audit_folders(self) -> list[str]:
        audit = self.root / AUDIT_DIR
        if not audit.is_dir():
            return []
        return sorted(p.relative_to(self.root).as_posix() for p in audit.rglob("*") if p.is_dir())

    def has_dir(self, path: str) -> bool:
        return (self.root / path).is_dir()


class LedgerWorkdir:
    """The imported workdir, as the ledger's ``bernstein_files`` table lists it."""

    NAME_FROM = len(CAS_DIR) + 1
    """Characters before a store name in a ``cas`` path: the store index holds the files
    whose name has no ``/``, keyed ``sha256:<name>`` (worked out in Rust, ``store_key``)."""
    STORE_INDEX = "SELECT path, kind, digest FROM bernstein_files WHERE kind = 'cas'"
    FILES = (
        "SELECT f.path, f.kind, f.digest, f.import_id, f.digest IS NOT NULL AND b.digest IS NULL"
        " FROM bernstein_files AS f LEFT JOIN blobs AS b ON b.digest = f.digest ORDER BY f.path"
    )
    """Every file in path order, for ``_core.bernstein_check``: whether its blob is absent."""
    JOURNAL_CHUNKS = (
        "SELECT c.data FROM bernstein_files AS f JOIN blob_chunks AS c ON c.digest = f.digest "
        "WHERE f.path = ? AND f.kind = 'journal' ORDER BY c.idx"
    )
    """A journal's bytes by path, as ``journals`` reads them (for Rust readers)."""
    BLOB_CHUNKS = "SELECT data FROM blob_chunks WHERE digest = ? ORDER BY idx"
    STORE_BLOBS = (
        "SELECT f.digest, c.data, c.idx FROM bernstein_files AS f JOIN blob_chunks AS c "
        "ON c.digest = f.digest WHERE f.kind = 'cas' ORDER BY f.path, c.idx"
    )
    """Every blob of the store, in one ordered scan (for Rust readers): in path order, so
    rows stream from the first one on (an ``IN`` list of the store's digests would be
    built first, and spilled to a temporary file). Two names for the same bytes give
    their blob twice: each starts at chunk ``idx`` 0."""
    LISTED_BLOBS = (
        "SELECT digest, data, idx FROM blob_chunks WHERE digest IN "
        "(SELECT value FROM json_each(?)) ORDER BY digest, idx"
    )
    """The chunks of the digests in a JSON array (``_core.bernstein_check``'s re-hash)."""

    def __init__(self, conn: apsw.Connection, blobs: BlobStore) -> None:
        self.conn = conn
        self.blobs = blobs
        self.runs: dict[str, str] = dict(
            native.rows(conn, "SELECT run_id, path FROM bernstein_runs")
        )
        self.cache: dict[str, bytes] = {}
        """Bytes by path, from ``prefetch``."""

    @functools.cached_property
    def by_content_hash(self) -> _core.BernsteinStoreIndex:
        """The common lookup, ``sha256:<name>`` -> stored digest, without path handling;
        read when first asked for (verify's own reads go by path)."""
        with native.sqlite_errors():
            return _core.BernsteinStoreIndex(
                native.handle(self.conn), self.STORE_INDEX, self.NAME_FROM
            )

    def run_ids(self) -> list[str]:
        return sorted(self.runs)

    def store_index(self) -> _core.BernsteinStoreIndex | None:
        return self.by_content_hash

    def stored_digest(self, content_hash: str) -> str | None:
        stored = self.by_content_hash.get(content_hash)
        if stored is not None:
            return stored
        path = cas_path(content_hash)
        return None if path is None else self.digest(path)

    def journals(self, run_ids: list[str]) -> list[bytes | None]:
        """Every journal in one query (chunks concatenated in order)."""
        wanted = {self.runs[r]: r for r in run_ids if r in self.runs and valid_run_id(r)}
        found: dict[str, list[bytes]] = {}
        rows = self.conn.execute(
            "SELECT f.path, c.data FROM bernstein_files AS f "
            "JOIN blob_chunks AS c ON c.digest = f.digest "
            "WHERE f.kind = 'journal' ORDER BY f.path, c.idx"
        )
        for path, data in rows:
            if path in wanted:
                found.setdefault(str(path), []).append(bytes(data))
        return [
            b"".join(found[self.runs[r]]) if r in self.runs and self.runs[r] in found else None
            for r in run_ids
        ]

    def journal(self, run_id: str) -> bytes | None:
        if not valid_run_id(run_id):
            return None
        return self.read(self.runs.get(run_id, journal_path(run_id)))

    def has_store(self) -> bool:
        return self._row(CAS_DIR)[0] == "dir"

    def _row(self, path: str) -> tuple[str, str | None]:
        rows = self.conn.execute(
            "SELECT kind, digest FROM bernstein_files WHERE path = ?", (path,)
        ).fetchall()
        return (
            (str(rows[0][0]), None if rows[0][1] is None else str(rows[0][1]))
            if rows
            else ("", None)
        )

    def prefetch(self, paths: list[str]) -> None:
        """Every listed file whose blob is held, in one query (chunks joined in order); a
        path left out (absent, or a digest the store would refuse) is read as before."""
        found: dict[str, list[bytes]] = {}
        rows = self.conn.execute(
            "SELECT f.path, f.digest, c.data FROM bernstein_files AS f "
            "JOIN blobs AS b ON b.digest = f.digest "
            "LEFT JOIN blob_chunks AS c ON c.digest = b.digest "
            "WHERE f.path IN (SELECT value FROM json_each(?)) ORDER BY f.path, c.idx",
            (json.dumps(sorted(set(paths))),),
        )
        for path, digest, data in rows:
            if DIGEST.fullmatch(str(digest)):
                chunks = found.setdefault(str(path), [])
                if data is not None:
                    chunks.append(bytes(data))
        self.cache.update((path, b"".join(chunks)) for path, chunks in found.items())

    def read(self, path: str) -> bytes | None:
        cached = self.cache.get(path)
        if cached is not None:
            return cached
        digest = self.digest(path)
        if digest is None:
            return None
        try:
            return self.blobs.get(digest)
        except KeyError:
            return None

    def digest(self, path: str) -> str | None:
        return self._row(path)[1]

    def audit_segments(self) -> list[tuple[str, bytes]]:
        return _order_segments(self.audit_files(), self.read, self.audit_folders())

    def audit_files(self) -> list[str]:
        return list(self._audit_listing[0])

    def audit_folders(self) -> list[str]:
        return list(self._audit_listing[1])

    @functools.cached_property
    def _audit_listing(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The audit files and the folders under ``.sdd/audit``, read once in one scan of
        every row (76 ms on 333,799): the folder, the seals and the segments all list them,
        in the one transaction this reader lives in."""
        files: list[str] = []
        folders: list[str] = []
        for path, kind in self.conn.execute(
            "SELECT path, kind FROM bernstein_files WHERE kind IN ('audit', 'dir') ORDER BY path"
        ):
            if kind == "audit":
                files.append(str(path))
            elif str(path).startswith(f"{AUDIT_DIR}/"):
                folders.append(str(path))
        return tuple(files), tuple(folders)

    def has_dir(self, path: str) -> bool:
        return self._row(path)[0] == "dir"
