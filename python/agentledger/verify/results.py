"""What verification returns: divergences, per-run verdicts, and the whole report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentledger import _core
from agentledger.errors import ExitCode

MAX_DIVERGENCES_PER_RUN = _core.MAX_FINDINGS_PER_RUN


@dataclass(frozen=True, slots=True)
class Divergence:
    """One thing that does not re-derive: where (run, step), which check, expected vs actual."""

    run_id: str | None
    seq: int | None
    check: str
    expected: str
    actual: str
    subject: str | None = None
    """What the check is about when it is not an entry (a blob digest, a table)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "seq": self.seq,
            "check": self.check,
            "subject": self.subject,
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(slots=True)
class RunVerdict:
    """The outcome for one run: ``code`` 0 clean, 1 not found, 2 diverged."""

    run_id: str
    code: int = ExitCode.OK
    entries: int = 0
    activities: int = 0
    divergence_count: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.code == ExitCode.OK

    def add(self, divergence: Divergence) -> None:
        self.code = ExitCode.DIVERGED
        self.divergence_count += 1
        if len(self.divergences) < MAX_DIVERGENCES_PER_RUN:
            self.divergences.append(divergence)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "code": int(self.code),
            "status": status_name(self.code),
            "entries": self.entries,
            "activities": self.activities,
            "divergence_count": self.divergence_count,
            "divergences": [d.to_json() for d in self.divergences],
        }


def status_name(code: int) -> str:
    return {0: "clean", 1: "missing", 2: "diverged"}.get(code, "error")


@dataclass(slots=True)
class VerifyReport:
    """Everything one verification pass found, per run and for the workspace."""

    runs: list[RunVerdict] = field(default_factory=list)
    workspace: list[Divergence] = field(default_factory=list)
    blobs_checked: int = 0
    receipts_checked: int = 0
    signatures_checked: int = 0
    audit_records: int = 0
    notes: list[str] = field(default_factory=list)
    """What verify could not check and why (e.g. no audit key); never a divergence."""
    elapsed_s: float = 0.0

    @property
    def entries(self) -> int:
        return sum(run.entries for run in self.runs)

    @property
    def code(self) -> int:
        if self.workspace or any(run.code == ExitCode.DIVERGED for run in self.runs):
            return ExitCode.DIVERGED
        if any(run.code == ExitCode.NOT_FOUND for run in self.runs):
            return ExitCode.NOT_FOUND
        return ExitCode.OK

    def count(self, code: int) -> int:
        return sum(1 for run in self.runs if run.code == code)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": int(self.code),
            "status": status_name(self.code),
            "runs": len(self.runs),
            "entries": self.entries,
            "clean": self.count(ExitCode.OK),
            "diverged": self.count(ExitCode.DIVERGED),
            "missing": self.count(ExitCode.NOT_FOUND),
            "blobs_checked": self.blobs_checked,
            "receipts_checked": self.receipts_checked,
            "signatures_checked": self.signatures_checked,
            "audit_records": self.audit_records,
            "notes": list(self.notes),
            "elapsed_s": round(self.elapsed_s, 6),
            "entries_per_s": round(self.entries / self.elapsed_s) if self.elapsed_s else None,
            "workspace": [d.to_json() for d in self.workspace],
            "failures": [run.to_json() for run in self.runs if not run.ok],
            "results": [
                {"run": run.run_id, "code": int(run.code), "entries": run.entries}
                for run in self.runs
            ],
        }
