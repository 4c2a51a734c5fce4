"""The journal pass: every entry through the Rust batch verifier, read by Rust itself.

``_core.verify_journal`` steps the query on this very connection (the read snapshot the
other checks see), copying rows into bounded batches while a second thread verifies the
batch before; no Python object is made per row and memory does not grow with the
workspace. Python only merges the per-run results into the verdicts.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from agentledger import _core
from agentledger.display import shorten
from agentledger.phase.kinds import PHASE_KINDS
from agentledger.storage import btree_check, native
from agentledger.verify.context import IN_SELECTED, VerifyContext
from agentledger.verify.results import Divergence

BATCH_ROWS = 4_096
COLUMNS = "run_id, seq, kind, hash, bytes"
LOGGED_COLUMNS = COLUMNS + ", leaf"
ALL_ROWS = "SELECT {columns} FROM entries ORDER BY run_id, seq"
SELECTED_ROWS = "SELECT {columns} FROM entries WHERE " + IN_SELECTED + " ORDER BY run_id, seq"
TAIL_ROWS = "SELECT {columns} FROM entries WHERE run_id = ? AND seq >= ? ORDER BY seq"

# The entries later checks look at, as (kinds, byte string in the entry): the whole-workspace
# pass records which rows match (exactly SQL's ``kind IN kinds AND instr(bytes, mark) > 0``)
# so that those checks fetch just them instead of scanning the table again.
MARKS: dict[str, tuple[tuple[str, ...], bytes]] = {
    "team_manifest": (("activity.result",), b'"team_manifest":"'),
    "receipt_data": (("activity.result",), b'"kind":"data"'),
    "receipt_ops": (("activity.result",), b'"kind":"ops"'),
    "mirrored": (("activity.result", "activity.refused"), b'"mirrored":true'),
    "stage": (("activity.result", "activity.refused"), b'"kind":"activity.'),
    "phase": (PHASE_KINDS, b'"kind":"phase.'),
}
MARKED_LIMIT = 200_000

EDITED_CHECKS = frozenset(
    {"entry.hash", "entry.json", "entry.canonical", "entry.kind", "activity.evidence_set_hash"}
)
"""Findings that mean an entry's bytes were changed: the report shows what they hold now."""
DETAILS_LIMIT = 10_000
DETAIL_CHARS = 240
DETAIL_PARSE_BYTES = 1 << 20
"""An edited entry longer than this is shown as its bytes begin, never parsed for it."""


def entry_detail(ctx: VerifyContext, run_id: str, seq: int) -> str | None:
    """The entry's kind and body as the file holds them now, shortened for a report."""
    # As bytes: a tampered kind may not be UTF-8 (shown with replacement characters), and
    # an edited row's bytes may be stored as text, a number or NULL (hashed as stored).
    rows = ctx.conn.execute(
        "SELECT CAST(kind AS BLOB), CAST(bytes AS BLOB) FROM entries WHERE run_id = ? AND seq = ?",
        (run_id, seq),
    ).fetchall()
    if not rows:
        return None
    kind = bytes(rows[0][0] or b"").decode("utf-8", "replace")
    raw = bytes(rows[0][1] or b"")
    try:
        # Parsed only up to DETAIL_PARSE_BYTES (JSON costs some twenty times its length):
        # of a longer entry the report shows how its bytes begin.
        if len(raw) > DETAIL_PARSE_BYTES:
            raise ValueError("too long to parse for a detail")
        doc = json.loads(raw)
        body = doc.get("body") if isinstance(doc, dict) else doc
        # Spaced, so a long body wraps between values and a digest in it is never split.
        text = json.dumps(body, ensure_ascii=False, sort_keys=True)
    except (ValueError, RecursionError):
        text = raw[: 4 * DETAIL_CHARS + 4].decode("utf-8", "replace")
    return f"{kind} {shorten(text, DETAIL_CHARS)}"


def _folded_index_check(
    ctx: VerifyContext, whole_read: bool
) -> tuple[bytes, str, list[btree_check.IndexSpec]] | None:
    """The ``entries`` index check this pass makes from its own read, when the engine left
    it here; made first from a read of its own when the pass does not read every row."""
    folded = ctx.folded_indexes
    if folded is None:
        return None
    if not whole_read or ctx.tail_from is not None:
        problems, _ = btree_check.check_entries(ctx.conn, folded, ctx.options.jobs)
        if problems:
            raise btree_check.IndexesDisagree(problems)
        return None
    # Drawn after the file was written: no arrangement of its rows aims at it.
    return secrets.token_bytes(32), btree_check.FOLDED_TABLE, folded


class _Marked(Mapping[str, list[tuple[str, int]] | None]):
    """Each mark's rows, converted from the pass's result when a check first asks: a
    ledger of many activity entries marks tens of thousands of rows that no check reads
    when no run holds a boundary decision."""

    def __init__(self, done: _core.JournalPass) -> None:
        self._done = done
        self._rows: dict[str, list[tuple[str, int]] | None] = {}

    def __getitem__(self, mark: str) -> list[tuple[str, int]] | None:
        if mark not in self._rows:
            self._rows[mark] = self._done.marked(_MARK_INDEX[mark])
        return self._rows[mark]

    def __iter__(self) -> Iterator[str]:
        return iter(MARKS)

    def __len__(self) -> int:
        return len(MARKS)


_MARK_INDEX = {mark: index for index, mark in enumerate(MARKS)}


def check_journal(ctx: VerifyContext) -> None:
    """Verify every selected entry; fill ``ctx.tails`` and ``ctx.referenced``."""
    # The workspace log (verify/log.py) is rebuilt from these same rows when it asks to be.
    rebuild_from = getattr(ctx.log_plan, "rebuild_from", None)
    columns = COLUMNS if rebuild_from is None else LOGGED_COLUMNS
    queries: list[tuple[tuple[Any, ...], tuple[str, int, bytes] | None]]
    if ctx.tail_from is not None:
        # Incremental: each run from its first new entry, chained to the one before it.
        sql = TAIL_ROWS.format(columns=columns)
        queries = []
        for run_id, start in sorted(ctx.tail_from.items()):
            before = ctx.conn.execute(
                "SELECT seq, hash FROM entries WHERE run_id = ? AND seq = ?",
                (run_id, start - 1),
            ).fetchall()
            carry = (run_id, before[0][0], before[0][1]) if before else None
            queries.append(((run_id, start), carry))
    elif ctx.whole:
        sql, queries = ALL_ROWS.format(columns=columns), [((), None)]
    else:
        sql, queries = SELECTED_ROWS.format(columns=columns), [((ctx.selected_json,), None)]
    indexes = _folded_index_check(ctx, whole_read=rebuild_from is not None and ctx.whole)
    with native.sqlite_errors():
        done = _core.verify_journal(
            native.handle(ctx.conn),
            ctx.ledger.id,
            sql,
            queries,
            ctx.options.jobs,
            # A whole pass records which rows later checks look at (they fetch just those).
            marks=list(MARKS.values()) if ctx.whole else None,
            marked_limit=MARKED_LIMIT,
            log=rebuild_from,
            indexes=indexes,
            progress=ctx.options.progress,
            batch_rows=BATCH_ROWS,
        )
    if done.index_problems:
        raise btree_check.IndexesDisagree(done.index_problems)
    findings = done.findings
    sent = Counter(finding[0] for finding in findings)
    shown = 0
    for run_id, seq, check, expected, actual in findings:
        detail = None
        if check in EDITED_CHECKS and seq is not None and shown < DETAILS_LIMIT:
            shown += 1
            detail = entry_detail(ctx, run_id, seq)
        ctx.diverged(run_id, Divergence(run_id, seq, check, expected, actual, detail=detail))
    for run_id, entries, activities, found, last_seq, last_hash in done.runs:
        verdict = ctx.verdict(run_id)
        verdict.entries += entries
        verdict.activities += activities
        # Findings past the per-run cap were counted in Rust but not sent.
        verdict.divergence_count += max(0, found - sent[run_id])
        ctx.tails[run_id] = (last_seq, last_hash)
    ctx.referenced.update(done.referenced)
    if ctx.whole:
        ctx.marked = _Marked(done)
    if rebuild_from is not None:
        ctx.log_plan.rebuilt = done.log
