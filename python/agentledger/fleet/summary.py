"""What one fleet task returns (``LedgerSummary``) and what the fleet report adds up.

A summary is small on purpose: it crosses the network from a worker to the client, once
per file. It never holds the file, only what verify found in it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentledger.display import plural
from agentledger.errors import ExitCode

MAX_FINDINGS = 5
"""Findings a summary carries (the first ones); ``checks`` counts all that verify kept."""

CLEAN = "clean"
DIVERGED = "diverged"
UNREADABLE = "unreadable"


@dataclass(slots=True)
class LedgerSummary:
    """One input file's verdict, as ``agentledger verify --all`` of that file would give it.

    ``code`` is that command's exit code for the file: 0 clean, 2 diverged, and for a file
    that could not be verified the code of its error (1 no such file, 65 not a ledger).
    """

    path: str
    status: str
    code: int
    ledger_id: str | None = None
    archive: bool = False
    runs: int = 0
    entries: int = 0
    blobs_checked: int = 0
    divergences: int = 0
    checks: dict[str, int] = field(default_factory=dict)
    """How many findings of each check (``journal.chain``, ``log.checkpoint``, ...)."""
    findings: list[dict[str, Any]] = field(default_factory=list)
    """The first ``MAX_FINDINGS`` findings: run, seq, check, subject, expected, actual."""
    error: str | None = None
    """Why the file could not be verified (status ``unreadable``)."""
    error_code: str | None = None
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    bytes_read: int = 0
    """The file's size with its write-ahead log: verify reads all of it."""
    worker: str | None = None
    """The Dask worker that produced this summary."""

    @property
    def ok(self) -> bool:
        return self.code == ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ledger_id": self.ledger_id,
            "status": self.status,
            "code": self.code,
            "archive": self.archive,
            "runs": self.runs,
            "entries": self.entries,
            "blobs_checked": self.blobs_checked,
            "divergences": self.divergences,
            "checks": dict(sorted(self.checks.items())),
            "findings": self.findings,
            "error": self.error,
            "error_code": self.error_code,
            "notes": self.notes,
            "elapsed_s": round(self.elapsed_s, 6),
            "bytes_read": self.bytes_read,
            "worker": self.worker,
        }


def severity(summary: LedgerSummary) -> tuple[int, int, str]:
    """Sort key, worst first: unreadable, then diverged by number of findings, then clean."""
    rank = {UNREADABLE: 0, DIVERGED: 1}.get(summary.status, 2)
    return (rank, -summary.divergences, summary.path)


@dataclass(slots=True)
class FleetReport:
    """Every input file's summary, and how the cluster fared while producing them."""

    ledgers: list[LedgerSummary] = field(default_factory=list)
    inputs: int = 0
    """How many files the arguments named (each must end with a summary)."""
    workers: int = 0
    """Workers seen during the run."""
    workers_lost: int = 0
    """Workers that left the cluster while tasks ran (their tasks were rerun elsewhere)."""
    scheduler: str = ""
    local_cluster: bool = True
    elapsed_s: float = 0.0
    trusted: list[str] = field(default_factory=list)
    """The keys every worker trusted (``ed25519:<hex>``), as the client resolved them."""
    notes: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for ledger in self.ledgers if ledger.status == status)

    @property
    def code(self) -> int:
        return ExitCode.OK if all(ledger.ok for ledger in self.ledgers) else ExitCode.DIVERGED

    @property
    def lost(self) -> int:
        """Input files without a summary: zero whenever the run finished."""
        return self.inputs - len(self.ledgers)

    @property
    def bytes_read(self) -> int:
        return sum(ledger.bytes_read for ledger in self.ledgers)

    @property
    def entries(self) -> int:
        return sum(ledger.entries for ledger in self.ledgers)

    @property
    def findings_not_kept(self) -> int:
        """Findings verify counted past its per-run cap: in ``divergences``, in no check's
        count (``checks`` counts the findings verify kept)."""
        return sum(
            max(0, ledger.divergences - sum(ledger.checks.values())) for ledger in self.ledgers
        )

    def not_kept_words(self) -> str:
        files = sum(
            1 for ledger in self.ledgers if ledger.divergences > sum(ledger.checks.values())
        )
        return (
            f"… and {plural(self.findings_not_kept, 'finding')} in {plural(files, 'file')} past "
            "the findings a run keeps: counted, their checks not kept"
        )

    def by_check(self) -> dict[str, int]:
        totals: Counter[str] = Counter()
        for ledger in self.ledgers:
            totals.update(ledger.checks)
        return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))

    def worst_first(self) -> list[LedgerSummary]:
        return sorted(self.ledgers, key=severity)

    def to_json(self) -> dict[str, Any]:
        elapsed = self.elapsed_s
        return {
            "code": int(self.code),
            "status": CLEAN if self.code == ExitCode.OK else DIVERGED,
            "ledgers": [ledger.to_json() for ledger in self.ledgers],
            "totals": {
                "files": len(self.ledgers),
                "inputs": self.inputs,
                "lost": self.lost,
                "clean": self.count(CLEAN),
                "diverged": self.count(DIVERGED),
                "unreadable": self.count(UNREADABLE),
                "runs": sum(ledger.runs for ledger in self.ledgers),
                "entries": self.entries,
                "divergences": sum(ledger.divergences for ledger in self.ledgers),
                "by_check": self.by_check(),
                "findings_not_kept": self.findings_not_kept,
                "bytes_read": self.bytes_read,
                "elapsed_s": round(elapsed, 6),
                "files_per_s": round(len(self.ledgers) / elapsed, 3) if elapsed else None,
                "bytes_per_s": round(self.bytes_read / elapsed) if elapsed else None,
            },
            "cluster": {
                "scheduler": self.scheduler,
                "local": self.local_cluster,
                "workers": self.workers,
                "workers_lost": self.workers_lost,
            },
            "trusted": list(self.trusted),
            "notes": list(self.notes),
        }
