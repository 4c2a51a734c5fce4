"""``export bernstein``: write the imported workdir back out, byte for byte."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentledger.bernstein.format import RUNS_DIR, SDD
from agentledger.errors import InvalidInput, LedgerError, NotFound

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
    absent or empty. The store and the audit chain are always written whole."""
    out = Path(outdir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InvalidInput(f"{out}: exists and is not an empty folder", code="export-not-empty")
    with ledger.db.snapshot() as conn:
        known = {row[0] for row in conn.execute("SELECT run_id FROM bernstein_runs")}
        if run_ids is not None:
            missing = [r for r in run_ids if r not in known]
            if missing:
                raise NotFound(f"no imported bernstein run {missing[0]!r}")
        selected = sorted(known) if run_ids is None else sorted(set(run_ids))
        rows = conn.execute(
            "SELECT path, kind, digest FROM bernstein_files ORDER BY path"
        ).fetchall()
        summary = ExportSummary(str(out), selected)
        out.mkdir(parents=True, exist_ok=True)
        for raw_path, kind, digest in rows:
            path = str(raw_path)
            if not _safe(path):
                raise LedgerError(f"refusing to export unsafe path {path!r}", code="unsafe-path")
            parts = path.split("/")
            if path.startswith(RUNS_DIR + "/") and len(parts) > 2 and parts[2] not in selected:
                continue
            target = out.joinpath(*parts)
            if kind == "dir":
                target.mkdir(parents=True, exist_ok=True)
                summary.dirs += 1
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("xb") as handle:
                for chunk in ledger.blobs.iter_chunks(str(digest)):
                    handle.write(chunk)
                    summary.bytes += len(chunk)
            summary.files += 1
    return summary
