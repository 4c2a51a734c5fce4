"""What verification returns: divergences, per-run verdicts, and the whole report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentledger import _core
from agentledger.checks import says
from agentledger.display import plural
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
    detail: str | None = None
    """What the file holds there, for people (an edited entry's kind and body, shortened)."""

    @property
    def says(self) -> str | None:
        """The finding in words (``checks.says``: the one phrasing every output uses)."""
        return says(self.check, self.expected, self.actual, self.seq)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "seq": self.seq,
            "check": self.check,
            "subject": self.subject,
            "expected": self.expected,
            "actual": self.actual,
            "detail": self.detail,
            "says": self.says,
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
    not_found: str | None = None
    """Why a run that exists is answered 1 (``code``), in words: bernstein's own verdict
    on a run with no activity, or on data its code raises on. ``None``: no such run."""

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
            **({"not_found": self.not_found} if self.not_found is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """A signer key verification trusted, and where that trust came from."""

    key: str
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "source": self.source}


@dataclass(frozen=True, slots=True)
class CheckpointMatch:
    """The signed checkpoint the ledger was matched against (filled by the log check)."""

    id: int
    size: int
    root: str
    """Base64, as in the signed note."""
    time: str
    signers: tuple[str, ...]
    """The signature names the note holds (strings from the ledger)."""
    trusted_signer: str | None
    """The trusted key whose signature verifies, or None when none does."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "size": self.size,
            "root": self.root,
            "time": self.time,
            "signers": list(self.signers),
            "trusted_signer": self.trusted_signer,
        }


NO_VERDICT = "no-verdict"
"""The status of a run that exists but is answered 1 (see ``RunVerdict.not_found``)."""


def _status(verdict: RunVerdict, named: set[str]) -> str:
    """``VerifyReport.status_of``, given the runs workspace findings name."""
    if verdict.code == ExitCode.NOT_FOUND:
        # A run that exists but is answered 1 (bernstein's verdict on a run with no
        # activity) is not missing: it has no verdict, and ``not_found`` says why.
        return "missing" if verdict.not_found is None else NO_VERDICT
    if verdict.code == ExitCode.DIVERGED or verdict.run_id in named:
        return "diverged"
    return "clean"


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
    ledger_path: str | None = None
    ledger_id: str | None = None
    version: str | None = None
    """The agentledger version that verified."""
    verified_at: str | None = None
    """When verification started (UTC, RFC 3339)."""
    trusted_keys: list[TrustedKey] = field(default_factory=list)
    checkpoint: CheckpointMatch | None = None
    """The newest signed checkpoint the log check matched the ledger against."""
    checkpoint_reason: str | None = None
    """Why ``checkpoint`` is None."""
    scope: str = "the whole ledger"
    """What the verdict covers, in words: the whole ledger, named runs, an incremental
    tail, an archive of which ledger (every verdict line and JSON document says it)."""
    proven: object = field(default=None, repr=False)
    """A whole verify: the log it rebuilt from every entry (a ``proven.Proven`` of the
    transaction it ran in), which the signer may extend if the report is clean."""

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

    @property
    def missing_runs(self) -> int:
        """Runs asked about that do not exist."""
        return sum(1 for run in self.runs if run.code == ExitCode.NOT_FOUND and not run.not_found)

    @property
    def no_verdict_runs(self) -> int:
        """Runs that exist but are answered 1 (``RunVerdict.not_found`` says why)."""
        return sum(1 for run in self.runs if run.code == ExitCode.NOT_FOUND and run.not_found)

    @property
    def workspace_runs(self) -> set[str]:
        """Runs named by workspace-level findings (e.g. an audit record of a removed run)."""
        return {d.run_id for d in self.workspace if d.run_id is not None}

    @property
    def diverged_runs(self) -> set[str]:
        """Every run with a finding: its own, or a workspace-level one that names it."""
        own = {run.run_id for run in self.runs if run.code == ExitCode.DIVERGED}
        return own | self.workspace_runs

    @property
    def clean_runs(self) -> int:
        return sum(1 for status in self.statuses().values() if status == "clean")

    def statuses(self) -> dict[str, str]:
        """Every run's ``status_of``, computed in one pass (for listings and counts)."""
        named = self.workspace_runs
        return {run.run_id: _status(run, named) for run in self.runs}

    def status_of(self, run_id: str) -> str:
        """A run's status in this report — ``clean``, ``diverged``, ``missing`` (no such run)
        or ``no-verdict`` (it exists; the verifier answers 1, e.g. bernstein's rules on a run
        with no activity) — the one answer every output gives for it (verify, show,
        activity verify, runs, the HTML): diverged when it has a finding of its own or a
        workspace finding names it."""
        verdict = next((run for run in self.runs if run.run_id == run_id), None)
        if verdict is None:
            return "missing"
        return _status(verdict, self.workspace_runs)

    @property
    def findings(self) -> int:
        """Every finding: the runs' (counted past the per-run cap too) and the workspace's."""
        return sum(run.divergence_count for run in self.runs) + len(self.workspace)

    def match_checkpoint(self, stored: Any, trusted: set[str]) -> None:
        """Record the checkpoint (a ``checkpoint.StoredCheckpoint``, or None when the ledger
        holds none) the log check matches the ledger against."""
        import base64

        if stored is None:
            self.checkpoint_reason = "no signed checkpoint in this ledger"
            return
        note = stored.checkpoint
        self.checkpoint = CheckpointMatch(
            id=int(stored.id),
            size=int(note.size),
            root=base64.b64encode(note.root).decode(),
            time=str(note.time),
            signers=tuple(str(s.name) for s in note.signatures),
            trusted_signer=note.signed_by(sorted(trusted)),
        )

    @property
    def findings_not_kept(self) -> int:
        """Findings counted past the per-run cap (``MAX_DIVERGENCES_PER_RUN``): in
        ``findings``, but not kept, so in no check's row of ``findings_by_check``."""
        return sum(max(0, run.divergence_count - len(run.divergences)) for run in self.runs)

    def not_kept_words(self) -> str:
        """``findings_not_kept`` in words, under the counts by check (terminal and HTML)."""
        runs = sum(1 for run in self.runs if run.divergence_count > len(run.divergences))
        return (
            f"… and {plural(self.findings_not_kept, 'finding')} in {plural(runs, 'run')} past "
            f"the {MAX_DIVERGENCES_PER_RUN} a run keeps: counted, their checks not kept"
        )

    def findings_by_check(self) -> dict[str, dict[str, int]]:
        """Per check id: findings kept in the report, runs they touch, workspace findings."""
        out: dict[str, dict[str, Any]] = {}

        def tally(divergence: Divergence, workspace: bool) -> None:
            row = out.setdefault(divergence.check, {"findings": 0, "runs": set(), "workspace": 0})
            row["findings"] += 1
            if divergence.run_id is not None:
                row["runs"].add(divergence.run_id)
            if workspace:
                row["workspace"] += 1

        for run in self.runs:
            for divergence in run.divergences:
                tally(divergence, False)
        for divergence in self.workspace:
            tally(divergence, True)
        ordered = sorted(
            out.items(), key=lambda item: (-len(item[1]["runs"]), -item[1]["findings"], item[0])
        )
        return {
            check: {
                "findings": row["findings"],
                "runs": len(row["runs"]),
                "workspace": row["workspace"],
            }
            for check, row in ordered
        }

    @property
    def verdict(self) -> str:
        """The report's status, as every output names it: ``status_name(code)``, except
        ``no-verdict`` for 1 when every run asked about exists (the verifier answers 1)."""
        if self.code == ExitCode.NOT_FOUND and not self.missing_runs:
            return NO_VERDICT
        return status_name(self.code)

    def to_json(self) -> dict[str, Any]:
        statuses = self.statuses()
        return {
            "code": int(self.code),
            "status": self.verdict,
            "scope": self.scope,
            "runs": len(self.runs),
            "entries": self.entries,
            "clean": sum(1 for status in statuses.values() if status == "clean"),
            "diverged": len(self.diverged_runs),
            "missing": self.missing_runs,
            "no_verdict": self.no_verdict_runs,
            "blobs_checked": self.blobs_checked,
            "receipts_checked": self.receipts_checked,
            "signatures_checked": self.signatures_checked,
            "audit_records": self.audit_records,
            "notes": list(self.notes),
            "elapsed_s": round(self.elapsed_s, 6),
            "entries_per_s": round(self.entries / self.elapsed_s) if self.elapsed_s else None,
            "findings": self.findings,
            "findings_by_check": self.findings_by_check(),
            "findings_not_kept": self.findings_not_kept,
            "ledger": {"path": self.ledger_path, "id": self.ledger_id},
            "version": self.version,
            "verified_at": self.verified_at,
            "trusted_keys": [key.to_json() for key in self.trusted_keys],
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_json(),
            "checkpoint_reason": self.checkpoint_reason,
            "workspace": [d.to_json() for d in self.workspace],
            "failures": [run.to_json() for run in self.runs if not run.ok],
            "results": [
                {
                    "run": run.run_id,
                    "code": int(run.code),
                    "status": statuses[run.run_id],
                    "entries": run.entries,
                }
                for run in self.runs
            ],
        }
