"""One fleet task: verify one ledger file where it lies, return a small summary.

This module runs on Dask workers and imports nothing of Dask: a task is a plain function
of a path and a ``FleetJob``. Everything the verdict depends on travels in the job (the
trusted keys the client resolved, the exported checkpoints): the worker's own key folder
is never read, and nothing is ever read from a file under verification but the ledger.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import apsw

from agentledger.archive import ARCHIVE_META, archive_seal
from agentledger.errors import AgentLedgerError, ExitCode
from agentledger.fleet.inputs import checkpoint_key
from agentledger.fleet.summary import (
    CLEAN,
    DIVERGED,
    MAX_FINDINGS,
    UNREADABLE,
    LedgerSummary,
)
from agentledger.ledger import Ledger
from agentledger.signer_memory import LEDGER_ID, LEDGERS_DIR
from agentledger.verify import Divergence, VerifyOptions, VerifyReport

MISSING_CHECKPOINT = "fleet.checkpoint"
"""The check named when ``--checkpoints`` holds no checkpoint for a ledger."""


@dataclass(frozen=True, slots=True)
class FleetJob:
    """What every task of one fleet run shares. Small: it is sent with the tasks."""

    trust: tuple[str, ...] = ()
    """The trusted signers, ``ed25519:<hex>``, as the client resolved them."""
    checkpoints: dict[str, str] | None = None
    """``--checkpoints``: ledger id → the exported checkpoint's text each ledger must extend
    (None: no checkpoints given, and none required)."""
    memory: dict[str, bytes] | None = None
    """The client install's memory of what it signed and verified, per ledger id (the
    ``signer_memory`` files): a worker verifies as the client's own install would."""
    jobs: int = 1
    """Verification threads per file: the cluster's parallelism is files, not threads."""


def verify_file(path: str, job: FleetJob) -> LedgerSummary:
    """Verify the ledger file (or archive) at ``path``; never raises for a bad file."""
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="agentledger-fleet-") as scratch:
            summary = _verify_in(Path(path), job, Path(scratch))
    except AgentLedgerError as exc:
        summary = _unreadable(path, int(exc.exit_code), exc.code, exc.message)
    except apsw.Error as exc:
        # What `agentledger verify` reports for it too (cli/__init__.py): a ledger error.
        summary = _unreadable(path, int(ExitCode.INVALID_INPUT), "ledger-error", f"SQLite: {exc}")
    except RecursionError:
        summary = _unreadable(
            path, int(ExitCode.INVALID_INPUT), "too-deep", "input nested too deeply"
        )
    except OSError as exc:
        summary = _unreadable(path, int(ExitCode.INVALID_INPUT), "io-error", str(exc))
    summary.elapsed_s = time.perf_counter() - started
    summary.bytes_read = file_bytes(Path(path))
    return summary


@dataclass(frozen=True, slots=True)
class Verified:
    ledger_id: str
    archive: bool
    report: VerifyReport
    missing_checkpoint: bool


def verify_ledger_file(path: Path, job: FleetJob, scratch: Path) -> Verified:
    """The one verify call: read-only, trusting exactly ``job.trust``.

    The key folder is ``scratch/home``, the task's own, holding only the client's memory of
    this ledger: the worker's key folder (``$AGENTLEDGER_HOME``) adds no trusted key and no
    state of its own, and what verify remembers there is dropped with the task.
    """
    home = scratch / "home"
    with Ledger.open(path, create=False, readonly=True, key_dir=home) as ledger:
        # Verify reads the memory and the checkpoint when it runs: staged once the id is known.
        remembered = (job.memory or {}).get(ledger.id)
        if remembered is not None and LEDGER_ID.fullmatch(ledger.id):
            memory_file = home / LEDGERS_DIR / f"{ledger.id}.json"
            memory_file.parent.mkdir(parents=True, mode=0o700)
            memory_file.write_bytes(remembered)
        checkpoint_file: Path | None = None
        text = _exported_checkpoint(ledger, job.checkpoints or {})
        if text is not None:
            checkpoint_file = scratch / "exported-checkpoint"
            checkpoint_file.write_text(text, encoding="utf-8")
        options = VerifyOptions(
            jobs=max(1, job.jobs), trust=job.trust, checkpoint_file=checkpoint_file
        )
        report = ledger.verify(options=options)
        # A file whose schema is not ours is read no further than verify's finding.
        archive = not ledger.db.schema_findings and bool(
            ledger.db.rows("SELECT 1 FROM ledger_meta WHERE key = ?", (ARCHIVE_META,))
        )
        missing = job.checkpoints is not None and text is None
        return Verified(ledger.id, archive, report, missing)


def _exported_checkpoint(ledger: Ledger, checkpoints: dict[str, str]) -> str | None:
    """The exported checkpoint the file must extend: an archive's own (its seal names the
    archive), else its ledger id's (an archive's source's, judged as verify judges it)."""
    archive = ""
    if checkpoints and not ledger.db.schema_findings:  # no SQL of an altered schema runs
        try:
            seal = archive_seal(ledger.db.conn)
        except AgentLedgerError:  # verify reports what is wrong with the file
            seal = None
        named = (seal or {}).get("archive")
        archive = named if isinstance(named, str) else ""
    if archive and checkpoint_key(ledger.id, archive) in checkpoints:
        return checkpoints[checkpoint_key(ledger.id, archive)]
    return checkpoints.get(ledger.id)


def _verify_in(path: Path, job: FleetJob, scratch: Path) -> LedgerSummary:
    verified = verify_ledger_file(path, job, scratch)
    summary = summarize(str(path), verified.ledger_id, verified.report)
    summary.archive = verified.archive
    # A note may name the task's throw-away key folder (e.g. where no audit key was found).
    home = str(scratch / "home")
    summary.notes = [note.replace(home, "<the task's empty key folder>") for note in summary.notes]
    if verified.missing_checkpoint:
        _add(
            summary,
            Divergence(
                None,
                None,
                MISSING_CHECKPOINT,
                "an exported checkpoint of this ledger in --checkpoints",
                "none",
                verified.ledger_id,
            ),
        )
    return summary


def summarize(path: str, ledger_id: str, report: VerifyReport) -> LedgerSummary:
    """A verify report reduced to what the fleet report shows."""
    kept = list(report.workspace)
    for run in report.runs:
        kept.extend(run.divergences)
    code = int(report.code)
    summary = LedgerSummary(
        path=path,
        status=CLEAN if code == ExitCode.OK else DIVERGED,
        code=code,
        ledger_id=ledger_id or None,
        runs=len(report.runs),
        entries=report.entries,
        blobs_checked=report.blobs_checked,
        divergences=len(report.workspace) + sum(run.divergence_count for run in report.runs),
        checks=dict(Counter(d.check for d in kept)),
        findings=[d.to_json() for d in kept[:MAX_FINDINGS]],
        notes=list(report.notes),
    )
    return summary


def _add(summary: LedgerSummary, divergence: Divergence) -> None:
    summary.code = int(ExitCode.DIVERGED)
    summary.status = DIVERGED
    summary.divergences += 1
    summary.checks[divergence.check] = summary.checks.get(divergence.check, 0) + 1
    if len(summary.findings) < MAX_FINDINGS:
        summary.findings.append(divergence.to_json())


def _unreadable(path: str, code: int, error_code: str, message: str) -> LedgerSummary:
    return LedgerSummary(
        path=path,
        status=UNREADABLE,
        code=code,
        error=" ".join(message.splitlines()),
        error_code=error_code,
    )


def file_bytes(path: Path) -> int:
    """The size of the file and of its write-ahead log, 0 for what cannot be stat'ed."""
    total = 0
    for part in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            total += os.stat(part).st_size
    return total
