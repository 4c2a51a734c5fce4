"""The workspace log: the newest signed checkpoint commits to exactly the ledger's entries.

Full verify rebuilds the log from the rows the journal pass reads anyway: each row's leaf
hash goes, in Rust, into a ``LogAssembler`` that accepts leaves in any order; the leaves
must be exactly 0..n-1 and the root and size those of the newest trusted checkpoint. So
deleting any entry (the last of a run or of the workspace too), or a whole run, changes
what the log recomputes to. The log must also still extend the checkpoint the last clean
verify covered, so entries removed together with the checkpoints covering them show too.

``--checkpoint FILE``: the ledger must extend an exported checkpoint (RFC 9162 consistency
proof from it to the newest), which detects a file rolled back to an older copy.

``--incremental``: only the entries appended since the last checkpoint a verify found
clean are re-checked (their chains, from the entry before them); the log is extended
from that checkpoint's stored frontier, and a consistency proof shows the newest
checkpoint extends it. Cheap whole-table counts catch entries deleted from the prefix;
edits to the prefix's bytes are left to a full verify.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from agentledger import _core
from agentledger import log as wslog
from agentledger.archive import archive_seal
from agentledger.checkpoint import Checkpoint, StoredCheckpoint, checkpoint_by_id, newest_checkpoint
from agentledger.errors import AgentLedgerError, InvalidInput
from agentledger.ids import utc_timestamp
from agentledger.keys import resolve_trust
from agentledger.verify.context import IN_SELECTED, VerifyContext
from agentledger.verify.results import Divergence

# INDEXED BY: without it SQLite scans the whole table for the (normally empty) answer.
UNLOGGED = (
    "SELECT run_id, seq FROM entries INDEXED BY entries_by_leaf "
    "WHERE leaf IS NULL OR leaf < 0 ORDER BY run_id, seq"
)


@dataclass
class LogPlan:
    """What the log check starts from (set up before the journal pass)."""

    base: StoredCheckpoint | None = None
    """Incremental verify: the last checkpoint found clean (None: full verify)."""
    verified: StoredCheckpoint | None = None
    """Full verify: the last checkpoint a verify found clean; the log must still extend it."""
    verified_missing: int | None = None
    """The id of a recorded verified checkpoint that is no longer in the ledger."""
    exported: Checkpoint | None = None
    covers_workspace: bool = False
    """The whole workspace is verified (fully, or incrementally from ``base``)."""
    assembler: _core.LogAssembler | None = None
    """Rebuilds the log from the journal pass's own rows (no second read)."""


def _diverged(ctx: VerifyContext, check: str, expected: str, actual: str, subject: str) -> None:
    ctx.diverged(None, Divergence(None, None, check, expected, actual, subject))


def _trusted(ctx: VerifyContext) -> set[str]:
    return resolve_trust(ctx.options.trust, ctx.ledger.keys)


def _read_exported(ctx: VerifyContext) -> Checkpoint | None:
    path = ctx.options.checkpoint_file
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read the checkpoint ({exc.strerror})") from None
    return Checkpoint.parse(data)


def plan_log(ctx: VerifyContext) -> None:
    """Before the journal pass: with ``--incremental``, narrow it to the new tail."""
    plan = LogPlan(exported=_read_exported(ctx), covers_workspace=ctx.whole)
    ctx.log_plan = plan
    if not ctx.whole:
        return
    marker = wslog.fetch(ctx.conn, "SELECT checkpoint_id FROM log_verified WHERE id = 1")
    verified = checkpoint_by_id(ctx.conn, marker[0][0]) if marker else None
    if marker and verified is None:
        plan.verified_missing = int(marker[0][0])
    base = verified if ctx.options.incremental else None
    if ctx.options.incremental and base is None:
        ctx.report.notes.append("incremental: no verified checkpoint yet, verifying everything")
    if base is None:
        plan.verified = verified
        total = int(wslog.fetch(ctx.conn, "SELECT count(*) FROM entries")[0][0])
        plan.assembler = _core.LogAssembler(0, [], total)
        return
    plan.base = base
    tail_count = int(
        wslog.fetch(
            ctx.conn, "SELECT count(*) FROM entries WHERE leaf >= ?", (base.checkpoint.size,)
        )[0][0]
    )
    size = base.checkpoint.size
    try:
        plan.assembler = _core.LogAssembler(size, list(base.frontier), size + tail_count)
    except ValueError:
        plan.assembler = None  # a malformed frontier: check_log reports the checkpoint
    tail_from = {
        run_id: int(first)
        for run_id, first in ctx.conn.execute(
            "SELECT run_id, min(seq) FROM entries WHERE leaf >= ? GROUP BY run_id",
            (base.checkpoint.size,),
        )
    }
    ctx.whole = False
    ctx.tail_from = tail_from
    ctx.verdicts.clear()
    for run_id in tail_from:
        ctx.verdict(run_id)
    ctx.report.notes.append(
        f"incremental: re-checked the {_plural(len(tail_from), 'run')} appended to since "
        f"checkpoint {base.id} (log size {base.checkpoint.size})"
    )


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def check_log(ctx: VerifyContext) -> None:
    """After every other check: the log, its checkpoints, and an exported checkpoint."""
    plan = ctx.log_plan
    if not isinstance(plan, LogPlan):
        plan = LogPlan(exported=_read_exported(ctx), covers_workspace=ctx.whole)
    if not plan.covers_workspace:
        _check_selected_runs_are_logged(ctx)
        return
    trusted = _trusted(ctx)
    newest = _newest(ctx)
    unlogged = _check_unlogged(ctx)

    if plan.base is not None and _base_state(ctx, plan.base, trusted) is None:
        return
    if plan.assembler is None:
        return
    size, frontier, root, gap = plan.assembler.finish()
    if gap is not None:
        _report_gap(ctx, gap)
        return
    state = wslog.LogState(size, tuple(frontier))
    total = int(wslog.fetch(ctx.conn, "SELECT count(*) FROM entries")[0][0])
    if total - unlogged != state.size:
        _diverged(ctx, "log.size", f"{state.size:,} logged entries", f"{total - unlogged:,}", "log")
    _check_state_cache(ctx, state)
    seal = archive_seal(ctx.conn)
    if seal is not None and seal.get("size") != state.size:
        _diverged(
            ctx,
            "archive.extended",
            f"{seal.get('size')} entries (sealed)",
            f"{state.size:,}: the archive was changed after it was sealed",
            "archive",
        )
    if newest is None:
        if state.size:
            _diverged(
                ctx,
                "checkpoint.missing",
                "a signed checkpoint",
                "none (a ledger from before the log: run `agentledger checkpoint`)",
                "checkpoints",
            )
        return
    ok = _check_checkpoint(ctx, newest, trusted)
    ctx.report.match_checkpoint(newest, trusted)
    note = newest.checkpoint
    if note.size != state.size:
        where = "entries deleted" if state.size < note.size else "entries added after it"
        _diverged(
            ctx,
            "log.size",
            f"{note.size:,} entries (checkpoint {newest.id})",
            f"{state.size:,} ({where})",
            "log",
        )
    elif note.root != root:
        _diverged(ctx, "log.root", _b64(note.root), _b64(root) + " (entries changed)", "log")
    elif plan.base is not None:
        tail = _tail(ctx, plan.base.checkpoint.size)
        _prove_extends(ctx, plan.base.checkpoint, plan.base.state, tail, note, "log.consistency")
    if plan.exported is not None:
        _check_exported(ctx, plan, trusted, state, note)
    _check_still_extends_verified(ctx, plan, trusted, state, note)
    if ok:
        newest_id = newest.id
        ctx.after_snapshot.append(lambda: _record_verified(ctx, newest_id))


def _check_still_extends_verified(
    ctx: VerifyContext,
    plan: LogPlan,
    trusted: set[str],
    state: wslog.LogState,
    newest: Checkpoint,
) -> None:
    """The checkpoint the last clean verify covered is still in the ledger, and the log
    still extends it: entries and checkpoints removed together are a rollback too."""
    if plan.verified_missing is not None:
        _diverged(
            ctx,
            "log.rollback",
            f"checkpoint {plan.verified_missing} (verified clean earlier)",
            "no longer in the ledger",
            "checkpoints",
        )
        return
    verified = plan.verified
    if verified is None or not _check_checkpoint(ctx, verified, trusted):
        return
    old = verified.checkpoint
    if old.size > state.size:
        _diverged(
            ctx,
            "log.rollback",
            f"at least {old.size:,} entries (verified clean at checkpoint {verified.id})",
            f"{state.size:,}",
            "log",
        )
        return
    _prove_extends(ctx, old, verified.state, _tail(ctx, old.size), newest, "log.rollback")


def _newest(ctx: VerifyContext) -> StoredCheckpoint | None:
    try:
        return newest_checkpoint(ctx.conn)
    except AgentLedgerError as exc:
        _diverged(ctx, "checkpoint.malformed", "a checkpoint note", exc.message, "checkpoints")
        return None


def _b64(root: bytes) -> str:
    import base64

    return base64.b64encode(root).decode()


def _check_checkpoint(ctx: VerifyContext, stored: StoredCheckpoint, trusted: set[str]) -> bool:
    note = stored.checkpoint
    subject = f"checkpoint {stored.id}"
    ok = True
    if note.signed_by(sorted(trusted)) is None:
        signers = ", ".join(sorted({s.name for s in note.signatures}))
        _diverged(
            ctx, "checkpoint.signature", "signed by a trusted key", f"not ({signers})", subject
        )
        ok = False
    if note.ledger_id != ctx.ledger.id:
        _diverged(ctx, "checkpoint.origin", ctx.ledger.id, note.ledger_id, subject)
        ok = False
    if (stored.size_column, stored.root_column) != (note.size, note.root):
        _diverged(
            ctx,
            "checkpoint.columns",
            f"{note.size} {_b64(note.root)}",
            f"{stored.size_column} {_b64(stored.root_column)}",
            subject,
        )
        ok = False
    try:
        frontier_root = stored.state.root
    except ValueError:
        frontier_root = b""
    if frontier_root != note.root:
        _diverged(ctx, "checkpoint.frontier", _b64(note.root), _b64(frontier_root), subject)
        ok = False
    return ok


def _base_state(
    ctx: VerifyContext, base: StoredCheckpoint, trusted: set[str]
) -> wslog.LogState | None:
    if not _check_checkpoint(ctx, base, trusted):
        return None
    return base.state


def _tail(ctx: VerifyContext, size: int) -> list[bytes]:
    """Leaf data of every leaf from ``size`` on (the tail a consistency proof needs)."""
    return wslog.leaf_data(wslog.fetch(ctx.conn, wslog.LEAF_ROWS, (size,)))


def _entry_at(ctx: VerifyContext, leaf: int) -> str:
    rows = wslog.fetch(ctx.conn, "SELECT run_id, seq FROM entries WHERE leaf = ? LIMIT 1", (leaf,))
    return f"{rows[0][0]} seq {rows[0][1]}" if rows else "nothing"


def _report_gap(ctx: VerifyContext, gap: tuple[int, int]) -> None:
    """Name the first leaf out of place and the entries around it."""
    expected, found = gap
    if found < 0:
        actual = f"leaf {expected} missing: the log ends after {_entry_at(ctx, expected - 1)}"
    elif found > expected:
        actual = (
            f"leaves {expected}..{found - 1} missing: between {_entry_at(ctx, expected - 1)} "
            f"and {_entry_at(ctx, found)}"
        )
    else:
        actual = f"leaf {found} appears twice or is out of range ({_entry_at(ctx, found)})"
    _diverged(ctx, "log.leaf", f"leaf {expected}", actual, "log")


def _check_unlogged(ctx: VerifyContext) -> int:
    count = 0
    for run_id, seq in ctx.conn.execute(UNLOGGED):
        count += 1
        ctx.diverged(
            run_id, Divergence(run_id, seq, "log.unlogged", "a leaf of the workspace log", "none")
        )
    return count


def _check_selected_runs_are_logged(ctx: VerifyContext) -> None:
    """Verifying named runs: each of their entries must at least hold a leaf of the log."""
    for run_id, seq in ctx.conn.execute(
        f"SELECT run_id, seq FROM entries WHERE {IN_SELECTED} AND (leaf IS NULL OR leaf < 0) "
        "ORDER BY run_id, seq",
        (ctx.selected_json,),
    ):
        ctx.diverged(
            run_id, Divergence(run_id, seq, "log.unlogged", "a leaf of the workspace log", "none")
        )


def _check_state_cache(ctx: VerifyContext, state: wslog.LogState) -> None:
    try:
        stored = wslog.read_state(ctx.conn)
    except AgentLedgerError as exc:
        _diverged(ctx, "log.state", "the log's stored frontier", exc.message, "log_state")
        return
    if stored != state:
        _diverged(
            ctx,
            "log.state",
            f"size {state.size}",
            f"size {stored.size} (stale frontier)",
            "log_state",
        )


def _prove_extends(
    ctx: VerifyContext,
    old: Checkpoint,
    old_state: wslog.LogState,
    tail: list[bytes],
    new: Checkpoint,
    check: str,
) -> None:
    """Verify an RFC 9162 consistency proof from ``old`` to ``new``."""
    if old.size + len(tail) != new.size or old_state.size != old.size:
        _diverged(ctx, check, f"{old.size:,} + tail = {new.size:,}", "sizes disagree", "log")
        return
    proof = wslog.consistency_proof(old_state, tail)
    if not _core.verify_consistency(old.size, new.size, old.root, new.root, proof):
        _diverged(
            ctx,
            check,
            f"log {new.size:,} extends log {old.size:,}",
            "consistency proof fails",
            "log",
        )


def _check_exported(
    ctx: VerifyContext,
    plan: LogPlan,
    trusted: set[str],
    state: wslog.LogState,
    newest: Checkpoint,
) -> None:
    exported = plan.exported
    assert exported is not None
    subject = "exported checkpoint"
    if exported.signed_by(sorted(trusted)) is None:
        _diverged(ctx, "checkpoint.signature", "signed by a trusted key", "not", subject)
        return
    if exported.ledger_id != ctx.ledger.id:
        _diverged(ctx, "checkpoint.origin", ctx.ledger.id, exported.ledger_id, subject)
        return
    if exported.size > state.size:
        _diverged(
            ctx,
            "log.rollback",
            f"at least {exported.size:,} entries (exported checkpoint)",
            f"{state.size:,}: the ledger is older than a checkpoint taken from it",
            subject,
        )
        return
    old_state = _state_at(ctx, plan, exported.size)
    if old_state is None:
        _diverged(ctx, "log.rollback", "the exported prefix", "not recomputable", subject)
        return
    if old_state.root != exported.root:
        _diverged(
            ctx,
            "log.rollback",
            _b64(exported.root),
            _b64(old_state.root) + " (the ledger's first entries differ: rolled back or forked)",
            subject,
        )
        return
    tail = _tail(ctx, exported.size)
    _prove_extends(ctx, exported, old_state, tail, newest, "log.rollback")


def _state_at(ctx: VerifyContext, plan: LogPlan, size: int) -> wslog.LogState | None:
    """The log state at ``size`` (the exported checkpoint's), cheapest way first."""
    if plan.base is not None and plan.base.checkpoint.size == size:
        return plan.base.state
    rows = wslog.fetch(
        ctx.conn, "SELECT id FROM checkpoints WHERE size = ? ORDER BY id DESC LIMIT 1", (size,)
    )
    if rows:
        stored = checkpoint_by_id(ctx.conn, rows[0][0])
        if stored is not None and stored.state.root == stored.checkpoint.root:
            return stored.state
    state, gap = wslog.state_at(ctx.conn, size)
    return None if gap is not None else state


def _record_verified(ctx: VerifyContext, checkpoint_id: int) -> None:
    """Remember the checkpoint a clean verify covered, for the next --incremental."""
    if ctx.report.code != 0 or ctx.ledger.db.readonly:
        return
    try:
        with ctx.ledger.db.write() as conn:
            _write_marker(conn, checkpoint_id)
    except AgentLedgerError:
        ctx.report.notes.append("could not record the verified checkpoint (ledger busy?)")


def _write_marker(conn: apsw.Connection, checkpoint_id: int) -> None:
    conn.execute(
        "INSERT INTO log_verified (id, checkpoint_id, verified_at) VALUES (1, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET checkpoint_id = excluded.checkpoint_id, "
        "verified_at = excluded.verified_at",
        (checkpoint_id, utc_timestamp()),
    )
