"""The journal pass: stream every entry through the Rust batch verifier.

Rows are read in ``(run_id, seq)`` order in bounded batches; each batch is verified by
``_core.verify_entries`` on a worker thread with the GIL released while this thread reads the
next one. At most ``IN_FLIGHT`` batches exist at once, so memory does not grow with the
workspace.
"""

from __future__ import annotations

import gc
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agentledger import _core
from agentledger.verify.context import VerifyContext
from agentledger.verify.results import Divergence

BATCH_ROWS = 16_384
IN_FLIGHT = 3

Row = tuple[str, int, str, bytes, bytes]
COLUMNS = "run_id, seq, kind, hash, bytes"
LOGGED_COLUMNS = COLUMNS + ", leaf"
ALL_ROWS = "SELECT {columns} FROM entries ORDER BY run_id, seq"
RUN_ROWS = "SELECT {columns} FROM entries WHERE run_id = ? ORDER BY seq"
TAIL_ROWS = "SELECT {columns} FROM entries WHERE run_id = ? AND seq >= ? ORDER BY seq"

# The entries later checks look at, as (kinds, byte string in the entry): the whole-workspace
# pass records which rows match (exactly SQL's ``kind IN kinds AND instr(bytes, mark) > 0``)
# so that those checks fetch just them instead of scanning the table again.
MARKS: dict[str, tuple[tuple[str, ...], bytes]] = {
    "team_manifest": (("activity.result",), b'"team_manifest":"'),
    "receipt_data": (("activity.result",), b'"kind":"data"'),
    "receipt_ops": (("activity.result",), b'"kind":"ops"'),
    "mirrored": (("activity.result", "activity.refused"), b'"mirrored":true'),
}
MARKED_LIMIT = 200_000


def _batches(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    iterator = iter(rows)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def _rows(ctx: VerifyContext, columns: str) -> Iterable[Row]:
    if ctx.whole:
        rows: Iterable[Row] = ctx.conn.execute(ALL_ROWS.format(columns=columns))
        return rows
    runs = sorted(ctx.selected_runs)
    query = RUN_ROWS.format(columns=columns)
    return itertools.chain.from_iterable(ctx.conn.execute(query, (r,)) for r in runs)


def check_journal(ctx: VerifyContext) -> None:
    """Verify every selected entry; fill ``ctx.tails`` and ``ctx.referenced``."""
    # The batches in flight keep tens of thousands of row tuples alive, which the cyclic
    # GC would otherwise traverse again and again (rows hold no cycles).
    enabled = gc.isenabled()
    gc.disable()
    try:
        _check_journal(ctx)
    finally:
        if enabled:
            gc.enable()


def _check_journal(ctx: VerifyContext) -> None:
    ledger_id = ctx.ledger.id
    progress = ctx.options.progress

    def collect(future: Future[Any]) -> None:
        findings, summaries, referenced = future.result()
        sent = Counter(finding[0] for finding in findings)
        for run_id, seq, check, expected, actual in findings:
            ctx.diverged(run_id, Divergence(run_id, seq, check, expected, actual))
        for run_id, entries, activities, found, last_seq, last_hash in summaries:
            verdict = ctx.verdict(run_id)
            verdict.entries += entries
            verdict.activities += activities
            # Findings past the per-run cap were counted in Rust but not sent.
            verdict.divergence_count += max(0, found - sent[run_id])
            ctx.tails[run_id] = (last_seq, last_hash)
            if progress is not None:
                progress(entries)
        ctx.referenced.update(referenced)

    # The workspace log (verify/log.py) is rebuilt from these same rows when it asks to be.
    assembler = getattr(ctx.log_plan, "assembler", None)
    columns = COLUMNS if assembler is None else LOGGED_COLUMNS
    # A whole pass keeps referenced digests and marked rows in Rust across batches.
    scan = _core.JournalScan(list(MARKS.values()), MARKED_LIMIT) if ctx.whole else None

    def verify(carry: tuple[str, int, bytes] | None, rows: list[Any]) -> Any:
        jobs = ctx.options.jobs
        if assembler is None:
            return _core.verify_entries(ledger_id, carry, rows, jobs, scan=scan)
        return _core.verify_entries_logged(ledger_id, carry, rows, assembler, jobs, scan=scan)

    pending: list[Future[Any]] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify") as pool:
        if ctx.tail_from is not None:
            # Incremental: each run from its first new entry, chained to the one before it.
            tail_rows = TAIL_ROWS.format(columns=columns)
            for run_id, start in sorted(ctx.tail_from.items()):
                before = ctx.conn.execute(
                    "SELECT seq, hash FROM entries WHERE run_id = ? AND seq = ?",
                    (run_id, start - 1),
                ).fetchall()
                tail_carry = (run_id, before[0][0], before[0][1]) if before else None
                rows = ctx.conn.execute(tail_rows, (run_id, start)).fetchall()
                collect(pool.submit(verify, tail_carry, rows))
            return
        carry: tuple[str, int, bytes] | None = None
        for batch in _batches(_rows(ctx, columns), BATCH_ROWS):
            pending.append(pool.submit(verify, carry, batch))
            last = batch[-1]
            carry = (last[0], last[1], last[3])
            while len(pending) >= IN_FLIGHT:
                collect(pending.pop(0))
        for future in pending:
            collect(future)
    if scan is not None:
        ctx.referenced.update(scan.referenced())
        ctx.marked = {name: scan.marked(i) for i, name in enumerate(MARKS)}
