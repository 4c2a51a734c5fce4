"""Helpers for the workspace-log tests: small ledgers, raw SQL tampering, verify without the log."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger
from agentledger.verify import CHECKS, VerifyOptions, VerifyReport
from agentledger.verify import log as verify_log


def build(ledger: Ledger, runs: int = 3, entries: int = 4) -> list[str]:
    """``runs`` runs of ``entries`` entries, appended interleaved (one transaction each)."""
    names = [f"run-{i}" for i in range(runs)]
    handles = [ledger.run(name) for name in names]
    for step in range(entries):
        for run in handles:
            run.append("step", {"n": step, "run": run.id})
    return names


@contextmanager
def raw(path: Path) -> Iterator[apsw.Connection]:
    """A plain SQLite connection, as someone editing the file would use (one transaction)."""
    conn = apsw.Connection(str(path))
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def verify(path: Path, options: VerifyOptions | None = None) -> VerifyReport:
    with Ledger.open(path) as ledger:
        return ledger.verify(options=options)


def checks(report: VerifyReport) -> set[str]:
    found = {d.check for d in report.workspace}
    for run in report.runs:
        found.update(d.check for d in run.divergences)
    return found


@contextmanager
def without_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Verify as it was before the workspace log: the log's checks removed."""
    with monkeypatch.context() as patch:
        kept = [c for c in CHECKS if c not in (verify_log.plan_log, verify_log.check_log)]
        patch.setattr("agentledger.verify.engine.CHECKS", kept)
        yield
