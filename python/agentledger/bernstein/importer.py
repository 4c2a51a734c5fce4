"""``import bernstein``: bring a workdir's journals, store, audit chain (with its seals and
checkpoints) and lineage spine into the ledger.

Every file is kept byte for byte (a ``sha256:`` blob) under its workdir-relative path.
Each import writes a manifest of the files it added, pins it in the native chain (one
``import.bernstein.workdir`` entry in the bookkeeping run) and gives each imported run a
native run whose ``import.bernstein`` entry pins its journal's digest. Re-importing is
idempotent; a file that changed since is reported, never merged. Symlinks, special
files, names that are not UTF-8 and run ids bernstein would refuse are refused, and a
workdir with anything refused is not imported at all: the ledger is left as it was (a
part imported would verify as if the refused files had never been there).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentledger import _core
from agentledger.bernstein.format import (
    AUDIT_DIR,
    BOOKKEEPING_RUN,
    CAS_DIR,
    JOURNAL_NAME,
    RUNS_DIR,
    SDD,
    TOP_DIRS,
    content_hash,
    valid_run_id,
)
from agentledger.bernstein.kinds import IMPORT_KIND, WORKDIR_KIND
from agentledger.errors import ExitCode, InvalidInput
from agentledger.ids import utc_timestamp
from agentledger.journal import ensure_run_row
from agentledger.sqlite_files import held_identities

FORMAT = "bernstein-3.23.0"
LARGE_FILE = 16 << 20
"""Files above this are streamed into the store instead of read whole."""
BATCH_BYTES = 16 << 20
"""Smaller files are read, then stored, about this many bytes at a time."""
READ_BYTES = 1 << 20
"""What each further read asks for, when a file grew after the import checked it."""
JOURNAL_GROUP_BYTES = 64 << 20
"""New journals are read back and checked about this many bytes at a time (a larger one on
its own): the import's memory then does not grow with the workdir's journals."""

Progress = Callable[[int], None]

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle


@dataclass
class ImportSummary:
    source: str
    import_id: int | None = None
    manifest: str | None = None
    runs_imported: list[str] = field(default_factory=list)
    runs_unchanged: list[str] = field(default_factory=list)
    runs_changed: list[str] = field(default_factory=list)
    runs_missing: list[str] = field(default_factory=list)
    files_added: int = 0
    files_unchanged: int = 0
    files_changed: list[str] = field(default_factory=list)
    bytes_added: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """Paths not imported that are no fault of the workdir (the importing ledger's files)."""
    discarded_lines: dict[str, list[int]] = field(default_factory=dict)

    @property
    def code(self) -> int:
        """65 something was refused, 2 something changed (not merged), 1 a named run is
        missing, 0 otherwise."""
        if self.refused:
            return ExitCode.INVALID_INPUT
        if self.runs_changed or self.files_changed:
            return ExitCode.DIVERGED
        if self.runs_missing:
            return ExitCode.NOT_FOUND
        return ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "code": int(self.code),
            "source": self.source,
            "import_id": self.import_id,
            "manifest": self.manifest,
            "runs_imported": self.runs_imported,
            "runs_unchanged": self.runs_unchanged,
            "runs_changed": self.runs_changed,
            "runs_missing": self.runs_missing,
            "files_added": self.files_added,
            "files_unchanged": self.files_unchanged,
            "files_changed": self.files_changed,
            "bytes_added": self.bytes_added,
            "refused": [{"path": path, "reason": reason} for path, reason in self.refused],
            "skipped": [{"path": path, "reason": reason} for path, reason in self.skipped],
            "discarded_lines": self.discarded_lines,
        }


@dataclass(frozen=True, slots=True)
class _File:
    rel: str
    kind: str
    path: str
    """Where the scan found it (the workdir's path joined with ``rel``)."""
    identity: tuple[int, int] = (0, 0)
    """``(st_dev, st_ino)`` when the scan vetted it: what is read later must be this file."""


@dataclass
class _Scan:
    dirs: list[str] = field(default_factory=list)
    files: list[_File] = field(default_factory=list)
    runs_seen: set[str] = field(default_factory=set)
    runs_present: set[str] = field(default_factory=set)
    """Every run folder in the workdir, imported or not (``--runs``): an audit record of a
    run not among them had lost its journal before the import (verify's strict check)."""


def _kind(rel: str) -> str:
    parts = rel.split("/")
    if rel.startswith(RUNS_DIR + "/") and len(parts) == 4 and parts[3] == JOURNAL_NAME:
        return "journal"
    if rel.startswith(CAS_DIR + "/"):
        return "cas"
    if rel.startswith(AUDIT_DIR + "/"):
        return "audit"
    return "other"  # the lineage spine, a run's receipt...: kept and pinned, not read


def _utf8_name(rel: str) -> bool:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scan_workdir(root: Path, runs: set[str] | None, summary: ImportSummary) -> _Scan:
    """List what to import; refuse (and report) whatever could lead outside the workdir."""
    sdd = root / SDD
    if sdd.is_symlink():
        raise InvalidInput(f"{sdd}: is a symlink; refused", code="bernstein-symlink")
    if not sdd.is_dir():
        raise InvalidInput(
            f"{root}: not a bernstein workdir (no .sdd folder)", code="not-a-workdir"
        )
    scan = _Scan()
    # The ledger may sit in the workdir: its files are never read by path (sqlite_files).
    own = held_identities()
    for top in TOP_DIRS:
        base = root / top
        if base.is_symlink():
            summary.refused.append((top, "symlink"))
            continue
        if not base.exists():
            continue
        if not base.is_dir():
            summary.refused.append((top, "not a directory"))
            continue
        scan.dirs.append(top)
        _scan_folder(root, top, runs, scan, summary, own)
    return scan


def _scan_folder(
    root: Path,
    rel_dir: str,
    runs: set[str] | None,
    scan: _Scan,
    summary: ImportSummary,
    own: set[tuple[int, int]],
) -> None:
    """One folder of the scan, then the folders it admitted, each in name order. The
    listing says which entries are symlinks or folders; a file is stat-ed once (its
    identity, without following a symlink)."""
    try:
        with os.scandir(root / rel_dir) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        summary.refused.append((rel_dir, f"cannot be listed ({exc.strerror})"))
        return
    admitted: list[str] = []
    files: list[os.DirEntry[str]] = []
    for entry in entries:
        rel = f"{rel_dir}/{entry.name}"
        if not _utf8_name(rel):
            summary.refused.append(
                (
                    rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
                    "name is not UTF-8",
                )
            )
        elif entry.is_symlink():
            summary.refused.append((rel, "symlink"))
        elif entry.is_dir(follow_symlinks=False):
            if _admit_dir(rel, rel_dir, entry.name, runs, scan, summary):
                admitted.append(rel)
        else:
            files.append(entry)
    for entry in files:
        rel = f"{rel_dir}/{entry.name}"
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError as exc:
            summary.refused.append((rel, f"cannot be read ({exc.strerror})"))
            continue
        if not stat.S_ISREG(info.st_mode):
            summary.refused.append((rel, "not a regular file"))
            continue
        identity = (info.st_dev, info.st_ino)
        if identity in own:  # the importing ledger's own files: never read, not input
            summary.skipped.append((rel, "a file of the ledger importing it"))
            continue
        scan.files.append(_File(rel, _kind(rel), entry.path, identity))
    for rel in admitted:
        _scan_folder(root, rel, runs, scan, summary, own)


def _admit_dir(
    rel: str,
    rel_dir: str,
    name: str,
    runs: set[str] | None,
    scan: _Scan,
    summary: ImportSummary,
) -> bool:
    if rel_dir == RUNS_DIR:
        if valid_run_id(name) and name != BOOKKEEPING_RUN:
            scan.runs_present.add(name)
        if runs is not None and name not in runs:
            return False
        if not valid_run_id(name) or name == BOOKKEEPING_RUN:
            summary.refused.append((rel, "invalid run id"))
            return False
        scan.runs_seen.add(name)
    scan.dirs.append(rel)
    return True


@dataclass(frozen=True)
class CheckedWorkdir:
    """A workdir listed before any ledger is opened (``check_workdir``): what an import of
    it would refuse, and the listing that import goes on from, so that an import into a new
    ledger lists the workdir once. Each file is still read only if it is the one listed."""

    root: Path
    runs: frozenset[str] | None
    summary: ImportSummary
    """Holds only ``refused`` and ``skipped``."""
    scan: _Scan

    @property
    def refused(self) -> list[tuple[str, str]]:
        return self.summary.refused


def check_workdir(
    workdir: str | os.PathLike[str], *, runs: list[str] | None = None
) -> CheckedWorkdir:
    """What an import of ``workdir`` would refuse, found without a ledger (``InvalidInput``
    for no workdir at all). ``import bernstein`` asks it first when its ledger does not
    exist yet, so that a refused import makes none, then imports from the same listing."""
    root = Path(workdir)
    selected = frozenset(runs) if runs is not None else None
    summary = ImportSummary(source=str(root))
    scan = scan_workdir(root, set(selected) if selected is not None else None, summary)
    return CheckedWorkdir(root, selected, summary, scan)


def import_workdir(
    ledger: LedgerHandle,
    workdir: str | os.PathLike[str],
    *,
    runs: list[str] | None = None,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
    checked: CheckedWorkdir | None = None,
) -> ImportSummary:
    """Import ``workdir`` (only ``runs`` when given). Idempotent; see the module docs.
    With ``checked`` (``check_workdir`` of the same workdir and runs), its listing is used
    rather than a second one."""
    root = Path(workdir)
    selected = set(runs) if runs is not None else None
    if checked is None:
        summary = ImportSummary(source=str(root))
        scan = scan_workdir(root, selected, summary)
    elif checked.root != root or checked.runs != (
        frozenset(selected) if selected is not None else None
    ):
        raise ValueError("checked is the listing of another workdir or run selection")
    else:
        summary = ImportSummary(
            source=str(root), refused=list(checked.refused), skipped=list(checked.summary.skipped)
        )
        scan = checked.scan
    if selected is not None:
        summary.runs_missing = sorted(selected - scan.runs_seen)
    if summary.refused:
        return summary
    if on_total is not None:
        on_total(len(scan.files))
    new_journals: dict[str, tuple[str, str, int]] = {}
    with ledger.db.write() as conn:
        # What is already imported, read in the write transaction: an import that ran
        # meanwhile (another process) is seen, and its files are unchanged, not added again.
        existing = {
            path: (kind, digest)
            for path, kind, digest in conn.execute("SELECT path, kind, digest FROM bernstein_files")
        }
        imported_runs = {run_id for (run_id,) in conn.execute("SELECT run_id FROM bernstein_runs")}
        added: list[tuple[str, str, str | None]] = [
            (rel, "dir", None) for rel in scan.dirs if rel not in existing
        ]
        for item in scan.files:
            run_id = item.rel.split("/")[2] if item.kind == "journal" else None
            if (
                run_id is not None
                and item.rel not in existing
                and run_id not in imported_runs
                and ledger.has_run(run_id)
            ):
                summary.refused.append((item.rel, "a native run already has this id"))
        if summary.refused:
            return summary
        for item, digest, size in _stored(ledger, scan.files):
            if progress is not None:
                progress(1)
            run_id = item.rel.split("/")[2] if item.kind == "journal" else None
            if item.rel in existing:
                if existing[item.rel][1] == digest:
                    summary.files_unchanged += 1
                    if run_id is not None:
                        summary.runs_unchanged.append(run_id)
                else:
                    summary.files_changed.append(item.rel)
                    if run_id is not None:
                        summary.runs_changed.append(run_id)
                continue
            if run_id is not None:
                new_journals[run_id] = (item.rel, digest, size)
            added.append((item.rel, item.kind, digest))
            summary.files_added += 1
            summary.bytes_added += size
        if added:
            _record(ledger, summary, added, new_journals, sorted(scan.runs_present))
    return summary


def _stored(ledger: LedgerHandle, files: list[_File]) -> Iterator[tuple[_File, str, int]]:
    """Store each of ``files``: ``(file, digest, size)``, in order. Files are read whole and
    stored ``BATCH_BYTES`` at a time (a workdir holds tens of thousands of small files); one
    over ``LARGE_FILE`` is streamed on its own."""
    batch: list[tuple[_File, bytes]] = []
    held = 0
    for item in files:
        data, streamed, size = _read(ledger, item)
        if data is None:
            yield from _store_batch(ledger, batch)
            batch, held = [], 0
            yield item, streamed, size
            continue
        batch.append((item, data))
        held += size
        if held >= BATCH_BYTES:
            yield from _store_batch(ledger, batch)
            batch, held = [], 0
    yield from _store_batch(ledger, batch)


def _store_batch(
    ledger: LedgerHandle, batch: list[tuple[_File, bytes]]
) -> Iterator[tuple[_File, str, int]]:
    digests = ledger.blobs.put_many([data for _, data in batch], algorithm="sha256")
    for (item, data), digest in zip(batch, digests, strict=True):
        yield item, digest, len(data)


def _read(ledger: LedgerHandle, item: _File) -> tuple[bytes | None, str, int]:
    """A scanned file's bytes, reading exactly the file the scan vetted: ``(bytes, "",
    size)``, or for a file over ``LARGE_FILE`` ``(None, digest, size)``, streamed into the
    store from the descriptor already checked.

    The workdir may change between the scan and the read: a file (or a folder above it)
    swapped for a symlink would make the path lead outside the workdir, and one swapped for
    a FIFO would block the open while the import holds the write lock. The file is opened
    without following a final symlink and without blocking, and must still be the regular
    file (the inode) the scan saw.
    """
    try:
        fd = os.open(item.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise InvalidInput(
            f"{item.rel}: changed during the import ({exc.strerror}); refused",
            code="bernstein-changed",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != item.identity:
            raise InvalidInput(
                f"{item.rel}: replaced during the import; refused", code="bernstein-changed"
            )
        if info.st_size > LARGE_FILE:
            return None, ledger.blobs.put_file(f"/dev/fd/{fd}", algorithm="sha256"), info.st_size
        data = _read_to_end(fd, info.st_size)
    finally:
        os.close(fd)
    return data, "", len(data)


def _read_to_end(fd: int, size: int) -> bytes:
    """Every byte left in ``fd``, a regular file ``size`` bytes long when it was checked:
    one ``read`` of it all, then reads until one finds the end (the file may have grown).
    Straight on the descriptor: a file object around it cost five more system calls per
    file (its own checks and sizing) and its Python objects."""
    data = os.read(fd, size + 1)
    while more := os.read(fd, READ_BYTES):
        data += more
    return data


def _record(
    ledger: LedgerHandle,
    summary: ImportSummary,
    added: list[tuple[str, str, str | None]],
    journals: dict[str, tuple[str, str, int]],
    present: list[str],
) -> None:
    """Inside the import's transaction: tables, manifest, and the native chain entries
    (``present``: every run folder the workdir held; ``journals``: run id -> path, digest
    and size of each new journal, read back from the store as stored)."""
    added.sort()
    manifest_bytes = manifest_of(added)
    manifest = ledger.blobs.put(manifest_bytes, algorithm="sha256")
    conn = ledger.db.conn
    imported_at = utc_timestamp()
    conn.execute(
        "INSERT INTO bernstein_imports (source, imported_at, manifest) VALUES (?, ?, ?)",
        (summary.source, imported_at, manifest),
    )
    import_id = int(conn.last_insert_rowid())
    conn.executemany(
        "INSERT INTO bernstein_files (path, kind, digest, import_id) VALUES (?, ?, ?, ?)",
        [(path, kind, digest, import_id) for path, kind, digest in added],
    )
    for group in _journal_groups(sorted(journals.items())):
        # The bytes just stored, read back in this transaction a group at a time.
        datas = [ledger.blobs.get(digest) for _, (_, digest, _) in group]
        reports = _core.bernstein_verify_journals(datas)
        for (run_id, (rel, _, _)), data, report in zip(group, datas, reports, strict=True):
            run = ledger.run(run_id)
            ensure_run_row(conn, run_id)  # bernstein_runs refers to it before its first entry
            conn.execute(
                "INSERT INTO bernstein_runs (run_id, path, import_id) VALUES (?, ?, ?)",
                (run_id, rel, import_id),
            )
            run._append_locked(  # in the import's transaction; the kind is the importer's own
                conn,
                [
                    (
                        IMPORT_KIND,
                        {
                            "format": FORMAT,
                            "path": rel,
                            "journal": content_hash(data),
                            "size": len(data),
                            "lines": report["physical_lines"],
                            "rows": report["count"],
                            "discarded_lines": report["discarded_lines"],
                            "profile": report["profile"],
                            "head": report["head"],
                            "import_id": import_id,
                            "manifest": manifest,
                        },
                    )
                ],
            )
            summary.runs_imported.append(run_id)
            if report["discarded_lines"]:
                summary.discarded_lines[run_id] = list(report["discarded_lines"])
    ledger.run(BOOKKEEPING_RUN)._append_locked(
        conn,
        [
            (
                WORKDIR_KIND,
                {
                    "format": FORMAT,
                    "import_id": import_id,
                    "manifest": manifest,
                    "files": len(added),
                    "runs": sorted(journals),
                    "present": present,
                    "source": summary.source,
                    "imported_at": imported_at,
                },
            )
        ],
    )
    summary.import_id = import_id
    summary.manifest = manifest


def _journal_groups(
    journals: list[tuple[str, tuple[str, str, int]]],
) -> Iterator[list[tuple[str, tuple[str, str, int]]]]:
    """``journals`` in order, in runs of about ``JOURNAL_GROUP_BYTES`` (a larger journal on
    its own)."""
    group: list[tuple[str, tuple[str, str, int]]] = []
    held = 0
    for journal in journals:
        size = journal[1][2]
        if group and held + size > JOURNAL_GROUP_BYTES:
            yield group
            group, held = [], 0
        group.append(journal)
        held += size
    if group:
        yield group


def manifest_of(files: list[tuple[str, str, str | None]]) -> bytes:
    """The manifest blob: ``{"files": [[path, kind, digest|null], ...]}``, sorted, compact."""
    doc = {"format": FORMAT, "files": [list(item) for item in sorted(files)]}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("ascii")
