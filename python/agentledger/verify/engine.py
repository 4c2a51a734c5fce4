"""The verification engine: one snapshot, then every check in order.

Checks are plain functions of a ``VerifyContext``. Later features (receipts, the audit
mirror, phase evidence, the workspace log) add theirs to ``CHECKS``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from agentledger.errors import ExitCode, LedgerError
from agentledger.storage.migrations import SCHEMA_VERSION
from agentledger.verify import audit, blobs, journal_pass, receipts, runs_table, team
from agentledger.verify import bernstein as bernstein_checks
from agentledger.verify import log as workspace_log
from agentledger.verify import phase as phase_checks
from agentledger.verify.context import VerifyContext, VerifyOptions
from agentledger.verify.results import Divergence, RunVerdict, VerifyReport

if TYPE_CHECKING:
    from agentledger.ledger import Ledger

Check = Callable[[VerifyContext], None]

CHECKS: list[Check] = [
    workspace_log.plan_log,
    journal_pass.check_journal,
    runs_table.check_heads,
    runs_table.check_ordinals,
    blobs.check_referenced_blobs,
    blobs.check_all_blobs,
    receipts.check_receipts,
    audit.check_audit,
    team.check_team_roles,
    workspace_log.check_log,
    phase_checks.check_phase,
    bernstein_checks.check_bernstein,
]


def verify_ledger(
    ledger: Ledger, run_ids: list[str] | None, options: VerifyOptions
) -> VerifyReport:
    """Verify the whole workspace (``run_ids`` None) or only the named runs."""
    started = time.perf_counter()
    if ledger.db.version < SCHEMA_VERSION and not ledger.db.schema_findings:
        # Verify never migrates (it writes nothing); this version reads only its own schema.
        raise LedgerError(
            f"{ledger.path}: schema {ledger.db.version}, written by an older agentledger; "
            f"this version verifies schema {SCHEMA_VERSION}. Any writing command upgrades "
            "it (its entries are then verified before anything is signed)",
            code="ledger-old",
        )
    report = VerifyReport()
    with ledger.db.snapshot() as conn:
        heads = {
            run_id: (head_seq, head_hash)
            for run_id, head_seq, head_hash in conn.execute(
                "SELECT run_id, head_seq, head_hash FROM runs ORDER BY ordinal"
            )
        }
        selected = list(heads) if run_ids is None else list(dict.fromkeys(run_ids))
        verdicts = {run_id: RunVerdict(run_id) for run_id in selected}
        for run_id in selected:
            if run_id not in heads:
                verdicts[run_id].code = ExitCode.NOT_FOUND
        ctx = VerifyContext(
            ledger=ledger,
            conn=conn,
            options=options,
            report=report,
            verdicts=verdicts,
            whole=run_ids is None,
            heads=heads,
        )
        if ledger.db.schema_findings:
            # What the file's SQL returns cannot be trusted: its schema is not ours.
            for finding in ledger.db.schema_findings:
                ctx.diverged(
                    None,
                    Divergence(None, None, "schema.altered", "the schema agentledger creates",
                               finding, "sqlite_schema"),
                )
            report.notes.append("no other check ran: the file's schema was altered")
        else:
            for check in CHECKS:
                check(ctx)
    report.runs = list(ctx.verdicts.values())
    report.elapsed_s = time.perf_counter() - started
    for action in ctx.after_snapshot:
        action()
    return report
