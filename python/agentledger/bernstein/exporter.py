"""``export bernstein``: write the imported workdir back out, byte for byte."""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentledger import cas, journal_view
from agentledger.bernstein.format import RUNS_DIR, SDD, content_hash
from agentledger.bernstein.importer import manifest_of
from agentledger.bernstein.kinds import WORKDIR_KIND
from agentledger.bookkeeping import BERNSTEIN_RUN
from agentledger.errors import Diverged, InvalidInput, LedgerError, NotFound

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle


@dataclass
class ExportSummary:
    outdir: str
    runs: list[str]
    files: int = 0
    dirs: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "outdir": self.outdir,
            "runs": self.runs,
            "files": self.files,
            "dirs": self.dirs,
            "bytes": self.bytes,
        }


def _safe(path: str) -> bool:
    """Only normalised relative paths inside ``.sdd`` are ever written."""
    return (
        posixpath.normpath(path) == path
        and path.startswith(SDD + "/")
        and ".." not in path.split("/")
        and "\x00" not in path
    )


def export_workdir(
    ledger: LedgerHandle, outdir: str | os.PathLike[str], run_ids: list[str] | None = None
) -> ExportSummary:
    """Write the workdir (every run, or only ``run_ids``) into ``outdir``, which must be
    absent or empty. The store and the audit chain are always written whole.

    Each file is re-hashed as it is written: a blob missing from the store, or whose bytes
    no longer hash to its name, is refused (``Diverged``); a refused or failed export
    leaves ``outdir`` as it found it."""
    out = Path(outdir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InvalidInput(f"{out}: exists and is not an empty folder", code="export-not-empty")
    with ledger.db.snapshot() as conn:
        # A run id that is not text names no run (a damaged row; verify names it).
        known = {
            row[0]
            for row in conn.execute(
                "SELECT run_id FROM bernstein_runs WHERE typeof(run_id) = 'text'"
            )
        }
        if run_ids is not None:
            missing = [r for r in run_ids if r not in known]
            if missing:
                raise NotFound(f"no imported bernstein run {missing[0]!r}")
        selected = sorted(known) if run_ids is None else sorted(set(run_ids))
        rows = conn.execute(
            "SELECT path, kind, digest FROM bernstein_files ORDER BY path"
        ).fetchall()
        summary = ExportSummary(str(out), selected)
        # Where a link leads: the rename below would replace a link, not fill its folder.
        out = Path(os.path.realpath(out))
        created = not out.exists()
        out.mkdir(parents=True, exist_ok=True)
        # Written beside ``out`` and renamed over it (an empty folder) once whole: an
        # export refused, failed or killed never leaves part of a workdir there.
        try:
            staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.export-", dir=out.parent))
        except OSError as exc:  # its folder is not writable: ``out`` is left as it was
            if created:
                out.rmdir()
            raise LedgerError(
                f"cannot export beside {out} (the workdir is written next to it, then "
                f"renamed into place): {exc.strerror or exc}; nothing exported",
                code="export-failed",
            ) from None
        try:
            for raw_path, kind, digest in rows:
                _export_one(ledger, staging, str(raw_path), kind, digest,
                            None if run_ids is None else selected, summary)  # fmt: skip
            _check_pinned(conn, ledger)
            staging.chmod(stat.S_IMODE(out.stat().st_mode))
            try:
                staging.rename(out)
            except OSError as exc:  # something was put in ``out`` meanwhile
                raise LedgerError(
                    f"cannot export into {out}: {exc.strerror or exc}; nothing exported",
                    code="export-failed",
                ) from None
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if created:
                with contextlib.suppress(OSError):
                    out.rmdir()
            raise
    return summary


IMPORT_FILES = "SELECT path, kind, digest FROM bernstein_files WHERE import_id = ? ORDER BY path"


def _check_pinned(conn: Any, ledger: LedgerHandle) -> None:
    """The files table is a copy: each import's rows must re-serialize to the manifest its
    ``import.bernstein.workdir`` entry pins (read from the verified bytes of the
    ``_bernstein`` journal), or the workdir written is not the one imported (a digest
    swapped between two rows passes every blob's own re-hash)."""
    imports = [row[0] for row in conn.execute("SELECT DISTINCT import_id FROM bernstein_files")]
    if not imports:
        return
    view = journal_view.read_run(conn, ledger.id, BERNSTEIN_RUN).require()
    pinned = {
        entry.body.get("import_id"): entry.body.get("manifest")
        for entry in view.of_kind(WORKDIR_KIND)
        if isinstance(entry.body, dict)
    }
    for import_id in imports:
        held = [
            (str(path), str(kind), None if digest is None else str(digest))
            for path, kind, digest in conn.execute(IMPORT_FILES, (import_id,))
        ]
        if not isinstance(import_id, int) or pinned.get(import_id) != content_hash(
            manifest_of(held)
        ):
            raise Diverged(
                f"the imported files of import {import_id!r} are not the ones its import "
                "pins; nothing exported (`agentledger verify --all` names them)",
                code="bernstein-anchor",
            )


def _export_one(
    ledger: LedgerHandle,
    root: Path,
    path: str,
    kind: str,
    digest: object,
    selected: list[str] | None,
    summary: ExportSummary,
) -> None:
    """Write one imported path under ``root``. ``selected``: only these runs' paths under
    ``.sdd/runs`` (``None``, the whole workdir: whatever else ``.sdd/runs`` held too — a
    stray file, a run folder without a journal)."""
    if not _safe(path):
        raise LedgerError(f"refusing to export unsafe path {path!r}", code="unsafe-path")
    parts = path.split("/")
    if (
        selected is not None
        and path.startswith(RUNS_DIR + "/")
        and len(parts) > 2
        and parts[2] not in selected
    ):
        return
    target = root.joinpath(*parts)
    try:
        if kind == "dir":
            target.mkdir(parents=True, exist_ok=True)
            summary.dirs += 1
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as handle:
            name = cas.check_digest(digest)
            hasher = cas.new_hasher(name.split(":", 1)[0])
            try:
                for chunk in ledger.blobs.iter_chunks(name):
                    hasher.update(chunk)
                    handle.write(chunk)
                    summary.bytes += len(chunk)
            except KeyError:
                raise Diverged(
                    f"{path}: its blob {name} is missing from the store; nothing exported "
                    "(`agentledger verify --all` shows what differs)",
                    code="blob-missing",
                ) from None
    except OSError as exc:  # a path the rows place under a file, a full disk, ...
        raise LedgerError(
            f"cannot export {path!r}: {exc.strerror or exc}; nothing exported",
            code="export-failed",
        ) from None
    if hasher.hex_digest() != name:
        raise Diverged(
            f"{path}: the stored bytes no longer hash to {name}; nothing exported "
            "(`agentledger verify --all` shows what differs)",
            code="blob-digest",
        )
    summary.files += 1
