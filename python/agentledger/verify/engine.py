"""The verification engine: one snapshot, then every check in order.

Checks are plain functions of a ``VerifyContext``. Later features (receipts, the audit
mirror, phase evidence, the workspace log) add theirs to ``CHECKS``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import apsw

from agentledger import _core, signature_memo
from agentledger.display import plural
from agentledger.errors import AgentLedgerError, ExitCode
from agentledger.keys import read_trust_file, trust_values
from agentledger.signer_memory import Remembered, SignerMemory
from agentledger.storage import btree_check, native
from agentledger.verify import (
    audit,
    blobs,
    bookkeeping,
    journal_pass,
    receipts,
    runs_table,
    stages,
    team,
)
from agentledger.verify import bernstein as bernstein_checks
from agentledger.verify import log as workspace_log
from agentledger.verify import phase as phase_checks
from agentledger.verify.context import Rehashed, VerifyContext, VerifyOptions
from agentledger.verify.results import Divergence, RunVerdict, TrustedKey, VerifyReport

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle

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
    stages.check_stage_decisions,
    bookkeeping.check_bookkeeping,
    workspace_log.check_log,
    phase_checks.check_phase,
    bernstein_checks.check_bernstein,
]


def verify_ledger(
    ledger: LedgerHandle, run_ids: list[str] | None, options: VerifyOptions
) -> VerifyReport:
    """Verify the whole workspace (``run_ids`` None) or only the named runs.

    Named runs get the verdict a whole verify gives them: when the signed log misses
    entries (``log.incomplete``), a pass over the named runs cannot tell whose they were,
    so the whole ledger is verified and judges them (``judged_by_whole``).
    """
    report = _verify(ledger, run_ids, options)
    if run_ids is not None and any(
        d.check == LOG_INCOMPLETE for run in report.runs for d in run.divergences
    ):
        report = judged_by_whole(report, _verify(ledger, None, options))
    return report


LOG_INCOMPLETE = "log.incomplete"


def judged_by_whole(named: VerifyReport, whole: VerifyReport) -> VerifyReport:
    """The named report, each run's findings those of the whole report (the same words
    `verify --all` says of it, ``log.incomplete`` included when the run may own a missing
    entry) plus what the named pass alone checks (its entries proven in the signed log;
    its ``log.incomplete`` too while the whole report leaves a missing entry unowned)."""
    of_whole = {run.run_id: run for run in whole.runs}
    explained = gaps_explained(whole)
    runs: list[RunVerdict] = []
    for verdict in named.runs:
        seen = of_whole.get(verdict.run_id)
        if verdict.code == ExitCode.NOT_FOUND or seen is None:
            runs.append(verdict)
            continue
        merged = RunVerdict(
            seen.run_id,
            code=seen.code,
            entries=seen.entries,
            activities=seen.activities,
            divergence_count=seen.divergence_count,
            divergences=list(seen.divergences),
            not_found=seen.not_found,
        )
        for divergence in verdict.divergences:
            if divergence in merged.divergences:
                continue
            if divergence.check != LOG_INCOMPLETE or not explained:
                merged.add(divergence)
        runs.append(merged)
    named.runs = runs
    selected = {run.run_id for run in runs}
    own = [d for run in runs for d in run.divergences]  # (a removed run's audit.orphan)
    named.workspace += [
        d
        for d in whole.workspace
        if d.run_id in selected and d not in named.workspace and d not in own
    ]
    elsewhere = sum(1 for d in whole.workspace if d.run_id not in selected)
    named.notes.append(
        "the file does not hold the signed log's entries, each at its position (some missing "
        "or replaced): the whole ledger was verified to judge these runs"
        + (
            f"; {elsewhere:,} workspace finding(s) name no run here "
            "(`agentledger verify --all` lists them)"
            if elsewhere
            else ""
        )
    )
    named.elapsed_s += whole.elapsed_s
    return named


def gaps_explained(whole: VerifyReport) -> bool:
    """Whether the whole verify says whose every missing entry may be: its only log
    findings are missing positions named with their neighbours (``log.leaf``) and the runs
    that may own them (``log.incomplete``), besides entries each named on its run as not the
    signed leaf at its place or past the signed log (``log.inclusion``, ``log.unsigned``).
    Then its verdict on a named run is the run's;
    otherwise (a log cut at its end, rewritten, or padded: no run named) the named pass's
    ``log.incomplete`` stands, so that no run is certified complete by a verify that
    cannot tell."""
    found = whole.workspace + [d for run in whole.runs for d in run.divergences]
    log_checks = {d.check for d in found if d.check.startswith("log.")}
    return log_checks <= {"log.leaf", LOG_INCOMPLETE, "log.inclusion", "log.unsigned"}


def _verify(
    ledger: LedgerHandle, run_ids: list[str] | None, options: VerifyOptions
) -> VerifyReport:
    started = time.perf_counter()
    # Verify never migrates (it writes nothing); this version reads only its own schema.
    ledger.db.check_current("verifies")
    report = _new_report(ledger, options)
    # Read before the snapshot's first read: the memory is written after each commit, so
    # what it says is then never newer than what the snapshot sees.
    remembered = SignerMemory(ledger.keys.home, ledger.id).read()
    # Signatures this install accepted before are not verified again (signature_memo.py).
    memo = signature_memo.remembered(
        ledger.keys.home, ledger.id, recheck=options.recheck_signatures
    )
    with memo as signatures, ledger.db.snapshot() as conn:
        # What the file's SQL returns cannot be trusted until its schema is ours (re-read
        # in this snapshot: it may have changed since the file was opened) and its indexes
        # hold exactly their tables' rows: until then no other SQL's answer is used. A
        # whole pass checks the entries' indexes from its own read of every row, any other
        # verify from a read of the rows' keys first (btree_check); a whole verify also
        # re-hashes every blob while SQLite checks the other tables (on a thread of its
        # own: not with --jobs 1).
        whole_pass = run_ids is None and not options.incremental
        storage = _untrusted_storage(
            ledger,
            conn,
            whole_pass,
            rehash=run_ids is None and options.jobs != 1,
            jobs=options.jobs,
        )
        refused = storage.refused
        if not refused:
            ctx = _context(ledger, conn, run_ids, options, report, remembered)
            ctx.folded_indexes = storage.folded
            ctx.rehashed = storage.rehashed
            ctx.logged_rows = storage.logged
            try:
                for check in CHECKS:
                    check(ctx)
            except btree_check.IndexesDisagree as disagree:
                # Nothing the other checks found from such a file is reported.
                report = _new_report(ledger, options)
                refused = _btree_divergences(disagree.problems)
        if refused:
            for divergence in refused:
                report.workspace.append(divergence)
            report.notes.append(
                "no other check ran: "
                + (
                    "the file's schema was altered"
                    if ledger.db.schema_findings
                    else "SQLite's b-trees disagree (an index does not hold its table's rows)"
                )
            )
            # A named run is not certified from such a file: each carries the reason.
            verdicts = {run_id: RunVerdict(run_id) for run_id in dict.fromkeys(run_ids or [])}
            for run_id, verdict in verdicts.items():
                first = refused[0]
                verdict.add(Divergence(run_id, None, first.check, first.expected, first.actual))
            ctx = VerifyContext(ledger, conn, options, report, verdicts, run_ids is None)
    report.runs = list(ctx.verdicts.values())
    if signatures.reused:
        report.notes.append(
            f"{plural(signatures.reused, 'signature')} accepted as this install verified them "
            "in an earlier verify of the ledger (its memo), not verified again "
            "(--recheck-signatures verifies every one)"
        )
    if report.checkpoint is None and report.checkpoint_reason is None:
        # The log check records the newest checkpoint (or that there is none) when it runs.
        report.checkpoint_reason = "not matched: the log check did not run (see the findings)"
    report.elapsed_s = time.perf_counter() - started
    for action in ctx.after_snapshot:
        action()
    return report


def _new_report(ledger: LedgerHandle, options: VerifyOptions) -> VerifyReport:
    report = VerifyReport(
        ledger_path=str(ledger.path),
        ledger_id=ledger.id,
        version=_core.__version__,
        verified_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        trusted_keys=trusted_keys(ledger, options),
    )
    if ledger.db.immutable:
        report.notes.append(
            "the ledger cannot be written here: read as immutable (no locks, no -wal); "
            "nothing was written"
        )
    return report


def _untrusted_storage(
    ledger: LedgerHandle,
    conn: apsw.Connection,
    whole_pass: bool,
    *,
    rehash: bool,
    jobs: int,
) -> _Storage:
    """Why nothing the file's SQL answers can be trusted: its schema is not the one
    agentledger creates, or its b-trees disagree; empty when neither. The ``entries``
    indexes are checked from a read of their rows (``btree_check``): the journal pass's
    with ``whole_pass`` (the plan it will follow is returned), else one of their own, which
    keeps the logged rows for the log's proof. With ``rehash`` every blob is re-hashed
    meanwhile, on a reader of its own (``blobs.rehash_beside``; None when none could be
    had): its findings are reported only when the b-trees agree. Without, the tables are
    shared between the connection and a reader (``btree_problems_shared``). A reader is
    had only with the mark of the snapshot (``Database.read_mark``), and not with one job."""
    ledger.db.recheck_schema()
    if ledger.db.schema_findings:
        return _Storage(
            [
                Divergence(
                    None,
                    None,
                    "schema.altered",
                    "the schema agentledger creates",
                    f,
                    "sqlite_schema",
                )
                for f in ledger.db.schema_findings
            ]
        )
    folded = btree_check.fold_plan(conn)
    tables = [
        table
        for table in btree_check.ledger_tables()
        if folded is None or table != btree_check.FOLDED_TABLE
    ]
    storage = _Storage([], folded if whole_pass else None)
    mark = ledger.db.read_mark() if jobs != 1 else None

    def problems() -> list[str]:
        if rehash:  # the blob pass takes the other core
            found = btree_check.btree_problems(conn, tables)
        else:
            found = btree_check.btree_problems_shared(conn, tables, mark)
        if folded is not None and not whole_pass:
            own, storage.logged = btree_check.check_entries(conn, folded, jobs, keep_log=True)
            found += own
        return found

    if rehash:
        storage.rehashed, found = blobs.rehash_beside(conn, problems, mark)
    else:
        found = problems()
    storage.refused = _btree_divergences(found)
    return storage


@dataclass
class _Storage:
    """What the checks of the file as storage found, and what they read for later checks."""

    refused: list[Divergence]
    folded: list[btree_check.IndexSpec] | None = None
    """The ``entries`` indexes left to the journal pass (a whole pass)."""
    rehashed: Rehashed | None = None
    logged: _core.LoggedRows | None = None
    """Every logged row of ``entries``, as the index check read them (``rebuilt_log``)."""


def _btree_divergences(problems: list[str]) -> list[Divergence]:
    return [
        Divergence(
            None,
            None,
            btree_check.CHECK,
            "every index holds exactly its table's rows",
            problem,
            problem.split(":", 1)[0],
        )
        for problem in problems
    ]


def _context(
    ledger: LedgerHandle,
    conn: apsw.Connection,
    run_ids: list[str] | None,
    options: VerifyOptions,
    report: VerifyReport,
    remembered: dict[str, Remembered],
) -> VerifyContext:
    heads = {
        run_id: (head_seq, head_hash)
        for run_id, head_seq, head_hash in native.rows(
            conn, "SELECT run_id, head_seq, head_hash FROM runs ORDER BY ordinal"
        )
    }
    selected = list(heads) if run_ids is None else list(dict.fromkeys(run_ids))
    verdicts = {run_id: RunVerdict(run_id) for run_id in selected}
    for run_id in selected:
        # The runs table is a listing cache: a run whose row was removed is still the
        # journal's, verified as `verify --all` verifies it (``run.unknown``), not missing.
        if run_id not in heads and not native.rows(
            conn, "SELECT 1 FROM entries WHERE run_id = ? LIMIT 1", (run_id,)
        ):
            verdicts[run_id].code = ExitCode.NOT_FOUND
    return VerifyContext(
        ledger=ledger,
        conn=conn,
        options=options,
        report=report,
        verdicts=verdicts,
        whole=run_ids is None,
        heads=heads,
        remembered=remembered,
    )


def trusted_keys(ledger: LedgerHandle, options: VerifyOptions) -> list[TrustedKey]:
    """The keys verification trusts, each with where it came from (read, never created)."""
    store = ledger.keys
    found: list[TrustedKey] = []

    def add(key: str, source: str) -> None:
        if all(known.key != key for known in found):
            found.append(TrustedKey(key, source))

    try:
        own = store.install_public_key()
        if own is not None:
            add(own, f"this install's key ({store.install_public_key_path})")
        if store.trust_path.exists():
            for key in read_trust_file(store.trust_path):
                add(key, f"trust file {store.trust_path}")
        for key, source in trust_values(options.trust):
            add(key, source)
    except AgentLedgerError as exc:
        found.append(TrustedKey("-", f"not read: {exc.message}"))
    return found
