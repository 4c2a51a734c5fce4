"""The workspace log: the signed checkpoints commit to exactly the ledger's entries.

Whole-workspace verify rebuilds the log from the rows the journal pass reads anyway: each
row's leaf hash goes, in Rust, into an assembler that accepts leaves in any order;
the leaves must be exactly 0..n-1, and the root and size those of the newest trusted
checkpoint. So deleting any entry (the last of a run or of the workspace too), or a whole
run, changes what the log recomputes to. The stored tiles must be exactly the tree of
those leaves, and every stored checkpoint (the sparse history) must be signed and be the
root of the tiles at its size.

Named runs: the file's first positions must rebuild the newest trusted checkpoint's root
(every position present once, holding the signed entry), which proves each named entry
at one of them; otherwise the runs cannot be certified complete, and, when the stored
tiles are the signed tree, each named entry's leaf is proven on its own (RFC 9162
inclusion, from the tiles) to name the changed ones (tiles that are not prove nothing).

Rollback: the log must extend what this install signed or found clean (its memory,
outside the file: ``signer_memory.py``), and, with ``--checkpoint FILE``, an exported
checkpoint; both by consistency proofs from the tiles.

``--incremental``: only the entries appended since the state this install last found
clean are re-checked (their chains, from the entry before them); the log is extended
from that state's frontier, read from the tiles and checked against the remembered root.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import apsw

from agentledger import _core, proven, tiles
from agentledger import log as wslog
from agentledger.archive import archive_seal
from agentledger.checkpoint import history_sizes
from agentledger.display import plural
from agentledger.errors import AgentLedgerError, BadArgument, InvalidInput
from agentledger.keys import resolve_trust
from agentledger.limits import read_capped
from agentledger.notes import (
    CHECKPOINT_COLUMNS,
    MAX_NOTE_BYTES,
    Checkpoint,
    StoredCheckpoint,
    newest_checkpoint,
)
from agentledger.signer_memory import Remembered, SignerMemory
from agentledger.storage import native
from agentledger.verify.context import IN_SELECTED, VerifyContext
from agentledger.verify.results import Divergence

# INDEXED BY: without it SQLite scans the whole table for the (normally empty) answer.
UNLOGGED = (
    "SELECT run_id, seq FROM entries INDEXED BY entries_by_leaf "
    "WHERE leaf IS NULL OR leaf < 0 ORDER BY run_id, seq"
)
MAX_MISSING_LEAVES = 1 << 24
"""How far past the entries' count the assembler looks for leaves (a bitmap of 2 MB)."""


@dataclass
class Base:
    """Where an incremental verify starts: a state this install found clean."""

    size: int
    root: bytes
    frontier: list[bytes]


@dataclass
class LogPlan:
    """What the log check starts from (set up before the journal pass)."""

    exported: Checkpoint | None = None
    remembered: Remembered | None = None
    """The newest state this install signed or found clean (its memory)."""
    base: Base | None = None
    """Incremental verify: the state the re-checked tail extends (None: full verify)."""
    covers_workspace: bool = False
    """The whole workspace is verified (fully, or incrementally from ``base``)."""
    rebuild_from: tuple[int, tuple[bytes, ...], int] | None = None
    """The journal pass rebuilds the log from its own rows (no second read): the first
    ``size`` leaves given by their frontier, then leaves up to the limit: ``(size,
    frontier, limit)``."""
    rebuilt: tuple[int, list[bytes], bytes, tuple[int, int] | None] | None = None
    """What the journal pass rebuilt: ``(size, frontier, root, gap)``."""
    archive: str = ""
    """The archive id the file's seal names ("" for a ledger): its checkpoints must name
    it, and they alone make the file an archive (not the seal row, which anyone can add)."""
    source: Checkpoint | None = None
    """An archive: its source's signed checkpoint, in which every archived entry was
    proven (``_check_archive_source``); None when that failed or is absent."""
    seal: dict[str, Any] | None = None
    """The file's archive seal (``archive_seal``), read once: an archive's holds a proof
    for every entry (tens of megabytes of JSON in a large one)."""


def _diverged(ctx: VerifyContext, check: str, expected: str, actual: str, subject: str) -> None:
    ctx.diverged(None, Divergence(None, None, check, expected, actual, subject))


def _trusted(ctx: VerifyContext) -> set[str]:
    return resolve_trust(ctx.options.trust, ctx.ledger.keys)


def _memory(ctx: VerifyContext) -> SignerMemory:
    return SignerMemory(ctx.ledger.keys.home, ctx.ledger.id)


def _read_exported(ctx: VerifyContext) -> Checkpoint | None:
    path = ctx.options.checkpoint_file
    if path is None:
        return None
    try:
        data = read_capped(path, MAX_NOTE_BYTES, "a checkpoint")
    except BadArgument as exc:  # the CLI checked it first: here it is the API's input
        raise InvalidInput(exc.message) from None
    return Checkpoint.parse(data)


def plan_log(ctx: VerifyContext) -> None:
    """Before the journal pass: with ``--incremental``, narrow it to the new tail."""
    # An archive keeps its source's id but holds a log of its own, signed under its own
    # origin: the install's memory of the source does not apply to it. A seal row alone
    # (anyone can add one) changes nothing: the file is judged as the ledger it claims.
    refused: list[str] = []
    seal = archive_seal(ctx.conn, refused)
    for why in refused:
        _diverged(ctx, "archive.source", "an archive's seal", why, "archive source")
    archive = seal.get("archive") if seal else None
    archive = archive if isinstance(archive, str) else ""
    ctx.archive = bool(archive) and _newest_names(ctx, archive)
    memory = {} if ctx.archive else ctx.remembered
    known = [memory[kind] for kind in ("signed", "verified") if kind in memory]
    plan = LogPlan(
        exported=_read_exported(ctx),
        remembered=max(known, key=lambda r: r.size) if known else None,
        covers_workspace=ctx.whole,
        archive=archive,
        seal=seal,
    )
    ctx.log_plan = plan
    ctx.report.scope = _scope(ctx, seal if archive else None)
    verified = memory.get("verified")
    if ctx.options.incremental:
        plan.base = _base(ctx, verified)
    if plan.base is None:
        if ctx.options.incremental:
            ctx.report.notes.append(
                "incremental: this install has not verified this ledger clean yet, "
                "verifying everything"
            )
        if ctx.whole:
            total = int(wslog.fetch(ctx.conn, "SELECT count(*) FROM entries")[0][0])
            plan.rebuild_from = (0, (), _limit(ctx, total))
        return
    base = plan.base
    tail_from = {
        run_id: int(first)
        for run_id, first in ctx.conn.execute(
            "SELECT run_id, min(seq) FROM entries WHERE leaf >= ? GROUP BY run_id", (base.size,)
        )
        if ctx.whole or run_id in ctx.verdicts
    }
    if ctx.whole:
        tail_count = int(
            wslog.fetch(ctx.conn, "SELECT count(*) FROM entries WHERE leaf >= ?", (base.size,))[0][
                0
            ]
        )
        plan.rebuild_from = (base.size, tuple(base.frontier), base.size + tail_count)
        ctx.verdicts.clear()
        for run_id in tail_from:
            ctx.verdict(run_id)
    ctx.whole = False
    # A named run with nothing new is re-read from its last entry (which must be its head).
    ctx.tail_from = {
        run_id: tail_from.get(run_id, max(ctx.heads.get(run_id, (0, None))[0], 0))
        for run_id, verdict in ctx.verdicts.items()
        if verdict.code != 1
    }
    ctx.report.scope = (
        f"what was appended since entry {base.size:,} in full; the first {base.size:,} "
        "proven in place by hash, their bytes not re-read"
        + ("" if plan.covers_workspace else f", of {plural(len(ctx.verdicts), 'named run')}")
    )
    ctx.report.notes.append(
        f"incremental: re-checked what was appended to {plural(len(tail_from), 'run')} "
        f"since this install last verified the log clean at {base.size:,} entries; of "
        "those, each position was proven to hold the entry hash verified there, but their "
        "bytes were not re-read (a full `verify --all` does)"
    )


def _scope(ctx: VerifyContext, seal: dict[str, object] | None) -> str:
    """What a verify of this file covers, in words."""
    if ctx.whole:
        covered = "the whole ledger"
    else:
        names = ", ".join(list(ctx.verdicts)[:3])
        more = len(ctx.verdicts) - 3
        covered = f"named runs {names}" + (f" and {more:,} more" if more > 0 else "")
    if seal is None:
        return covered
    # Said from the file's rows, which verify checks; never from the seal's own words
    # (its "runs" and "sealed_at" are not signed: anyone could write them).
    runs = int(wslog.fetch(ctx.conn, "SELECT count(*) FROM runs")[0][0])
    return (
        f"{covered}: an archive (id {str(seal.get('archive'))[:12]}…) of ledger "
        f"{ctx.ledger.id}, holding {plural(runs, 'run')}, signed under its own origin"
    )


def _newest_names(ctx: VerifyContext, archive: str) -> bool:
    """Whether the newest checkpoint is one of the archive ``archive`` (its signature is
    checked with the rest of the log)."""
    try:
        newest = newest_checkpoint(ctx.conn)
    except AgentLedgerError:
        return False
    return newest is not None and newest.checkpoint.archive == archive


def _base(ctx: VerifyContext, verified: Remembered | None) -> Base | None:
    """The remembered clean state, its frontier read from the tiles and checked."""
    if verified is None:
        return None
    try:
        frontier = tiles.TileReader(ctx.conn).frontier(verified.size)
        root = wslog.LogState(verified.size, tuple(frontier)).root if frontier else None
    except (AgentLedgerError, ValueError):
        root = None
    if verified.size and root != verified.root:
        ctx.report.notes.append(
            "incremental: the log no longer holds the state last verified clean; "
            "verifying everything"
        )
        return None
    return Base(verified.size, verified.root, frontier if verified.size else [])


def _limit(ctx: VerifyContext, total: int) -> int:
    """Leaves the assembler accepts: the entries' count, or the largest leaf if a deletion
    left it higher (bounded, so a hostile leaf number cannot exhaust memory)."""
    top = wslog.fetch(ctx.conn, "SELECT max(leaf) FROM entries INDEXED BY entries_by_leaf")
    highest = top[0][0] if top and isinstance(top[0][0], int) else -1
    return max(total, min(highest + 1, total + MAX_MISSING_LEAVES))


def _b64(root: bytes) -> str:
    return base64.b64encode(root).decode()


def check_log(ctx: VerifyContext) -> None:
    """After every other check: the log, its tiles and checkpoints, and rollback."""
    plan = ctx.log_plan
    if not isinstance(plan, LogPlan):
        plan = LogPlan(
            exported=_read_exported(ctx), covers_workspace=ctx.whole, seal=archive_seal(ctx.conn)
        )
    trusted = _trusted(ctx)
    newest = _newest(ctx)
    ctx.report.match_checkpoint(newest, trusted)
    if not plan.covers_workspace:
        _check_selected_runs(ctx, plan, newest, trusted)
        if plan.seal is not None and plan.archive:
            # Named runs of an archive: their entries proven in the source's checkpoint too.
            _check_archive_source(ctx, plan.seal, trusted, only=set(ctx.selected_runs))
        return
    unlogged = _check_unlogged(ctx)
    if plan.rebuilt is None:
        return
    size, frontier, root, gap = plan.rebuilt
    if gap is not None:
        # The newest checkpoint's size says where the signed log ends only when a trusted
        # key signed it: a forged size is checkpoint.signature, never entries cut.
        signed = newest is not None and _check_checkpoint(ctx, newest, trusted)
        _report_gaps(ctx, newest if signed else None)
        if signed and newest is not None:
            # An entry filed at another's position (its leaf column edited), or past the
            # signed log, is not the signed leaf there: its run is not clean, as `verify
            # RUN` says.
            _name_changed_leaves(ctx, tiles.TileReader(ctx.conn), newest)
            _name_unsigned_leaves(ctx, newest)
        return
    state = wslog.LogState(size, tuple(frontier))
    if plan.base is None:
        # Rebuilt from every entry in this snapshot: the state a signature may extend.
        ctx.report.proven = proven.verified(ctx.ledger.db, ctx.ledger.id, size, state.frontier)
    else:
        # The verified prefix is not re-read, but each of its positions must still hold
        # the entry (run, seq, hash) verified there: a count would be padded by junk.
        changed = _unproven_prefix(ctx, plan.base.size, plan.base.root)
        if changed is not None:
            _diverged(
                ctx,
                "log.rollback",
                f"the {plan.base.size:,} entries this install verified clean, each at its position",
                changed,
                "log",
            )
    total = int(wslog.fetch(ctx.conn, "SELECT count(*) FROM entries")[0][0])
    if total - unlogged != state.size:
        _diverged(ctx, "log.size", f"{state.size:,} logged entries", f"{total - unlogged:,}", "log")
    _check_state_cache(ctx, state)
    reader = tiles.TileReader(ctx.conn)
    seal = plan.seal
    if seal is not None and seal.get("size") != state.size:
        _diverged(
            ctx,
            "archive.extended",
            f"{seal.get('size')} entries (sealed)",
            f"{state.size:,}: the archive was changed after it was sealed",
            "archive",
        )
    if seal is not None and plan.archive:
        plan.source = _check_archive_source(ctx, seal, trusted)
        if plan.source is not None:
            ctx.report.scope += (
                f"; each entry proven in its source's checkpoint of {plan.source.size:,} entries"
            )
    ok = newest is not None and _check_checkpoint(ctx, newest, trusted)
    matches = newest is None or (newest.checkpoint.size, newest.checkpoint.root) == (
        state.size,
        root,
    )
    # Entries deleted or changed explain tiles that no longer fit them: said once, above.
    tiles_ok = matches and _check_tiles(ctx, reader, state, root, full=plan.base is None)
    if tiles_ok:
        _check_history(ctx, reader, trusted, state.size, newest)
    if newest is None:
        if state.size:
            _diverged(
                ctx,
                "checkpoint.missing",
                f"a signed checkpoint of the {state.size:,} logged entries",
                "none: nothing signed vouches for these entries (checkpoints deleted, or a "
                "ledger from before checkpoints)",
                "checkpoints",
            )
        # An exported checkpoint still binds an emptied or replaced ledger.
        if plan.exported is not None:
            _check_exported(ctx, reader, plan.exported, trusted, state.size, root)
        _check_remembered(ctx, reader, plan, state.size, root)
        return
    note = newest.checkpoint
    if note.size != state.size:
        if state.size < note.size:
            cut = _leaves(state.size, note.size - 1)
            _diverged(
                ctx,
                "log.size",
                f"{note.size:,} entries (checkpoint {newest.id})",
                f"{state.size:,}: {cut} missing after {_entry_at(ctx, state.size - 1)}, at "
                "the end of the signed log (entries deleted)",
                "log",
            )
            if ok:  # a note no trusted key signed vouches for no entry (nor in `verify RUN`)
                _uncertify(ctx, _last_leaves(ctx), [(state.size, note.size - 1)])
        else:
            _diverged(
                ctx,
                "log.size",
                f"{note.size:,} entries (checkpoint {newest.id})",
                f"{state.size:,} (entries added after it, unsigned)",
                "log",
            )
    elif note.root != root:
        _diverged(ctx, "log.root", _b64(note.root), _b64(root) + " (entries changed)", "log")
        if ok:  # a note no trusted key signed names no leaf (nor does `verify RUN` with it)
            _name_changed_leaves(ctx, reader, newest)
    # Proofs against the signed log come from the tiles, which must then be its tree.
    proven_size, proven_root = (state.size, root) if tiles_ok else (note.size, note.root)
    if plan.exported is not None:
        _check_exported(ctx, reader, plan.exported, trusted, proven_size, proven_root)
    _check_remembered(ctx, reader, plan, proven_size, proven_root)
    if ok and tiles_ok and seal is None:
        memory = _memory(ctx)
        ctx.after_snapshot.append(lambda: _record_verified(ctx, memory, state))


def _check_tiles(
    ctx: VerifyContext, reader: tiles.TileReader, state: wslog.LogState, root: bytes, full: bool
) -> bool:
    """The stored tree is the tree of the entries: every tile on a full verify, its root
    on an incremental one."""
    problems = tiles.check(ctx.conn, state.size, native.rows) if full else []
    if not problems:
        try:
            if reader.root(state.size) != root:
                problems = ["the tiles' root is not the entries' root"]
        except AgentLedgerError as exc:
            problems = [exc.message]
    for problem in problems:
        _diverged(ctx, "log.tiles", "the tree of the logged entries", problem, "log_tiles")
    return not problems


def _check_history(
    ctx: VerifyContext,
    reader: tiles.TileReader,
    trusted: set[str],
    size: int,
    newest: StoredCheckpoint | None,
) -> None:
    """Every stored checkpoint, not only the newest: signed, and the root of the log's
    first ``size`` leaves as the (checked) tiles hold them; and one at every power of two
    up to the newest (``checkpoint.history_sizes``), so a deleted row shows."""
    present: set[int] = set()
    for row in ctx.conn.execute(CHECKPOINT_COLUMNS + " ORDER BY id"):
        present.add(int(row[1]) if isinstance(row[1], int) else -1)
        if newest is not None and row[0] == newest.id:
            continue  # checked on its own, against the whole log
        try:
            stored = StoredCheckpoint(row[0], Checkpoint.parse(row[3]), row[1], bytes(row[2]))
        except AgentLedgerError as exc:
            subject = f"checkpoint {row[0]}"
            if not any(  # the newest, already named when it was read (``_newest``)
                d.check == "checkpoint.malformed" and d.subject == subject
                for d in ctx.report.workspace
            ):
                _diverged(ctx, "checkpoint.malformed", "a checkpoint note", exc.message, subject)
            continue
        if not _check_checkpoint(ctx, stored, trusted):
            continue
        note = stored.checkpoint
        if note.size > size:
            continue  # the newest's size is compared with the log's on its own
        try:
            at_size = reader.root(note.size)
        except AgentLedgerError:
            at_size = b""
        if at_size != note.root:
            _diverged(
                ctx,
                "checkpoint.history",
                f"{_b64(note.root)} (the log's first {note.size:,} entries, "
                f"checkpoint {stored.id})",
                f"{_b64(at_size)}: the log's history was rewritten",
                f"checkpoint {stored.id}",
            )
    if newest is None:
        return
    for wanted in history_sizes(min(newest.checkpoint.size, size)):
        if wanted not in present:
            _diverged(
                ctx,
                "checkpoint.history_missing",
                f"a checkpoint of the log's first {wanted:,} entries",
                "none (deleted; the next signature restores it from the tiles)",
                "checkpoints",
            )


def _check_remembered(
    ctx: VerifyContext, reader: tiles.TileReader, plan: LogPlan, size: int, root: bytes
) -> None:
    """The log extends the newest state this install signed or found clean."""
    remembered = plan.remembered
    if remembered is None:
        return
    expected = (
        f"a log extending the {remembered.size:,} entries this install signed or verified "
        f"({remembered.time})"
    )
    if remembered.size > size:
        _diverged(
            ctx, "log.rollback", expected, f"{size:,} entries (rolled back or deleted)", "log"
        )
        _uncertify_cut(ctx, size, remembered.size)
        return
    try:
        proof = reader.consistency_proof(remembered.size, size)
    except AgentLedgerError:
        proof = []
    if not _core.verify_consistency(remembered.size, size, remembered.root, root, proof):
        _diverged(ctx, "log.rollback", expected, "a different history (rewritten or forked)", "log")


def _newest(ctx: VerifyContext) -> StoredCheckpoint | None:
    try:
        return newest_checkpoint(ctx.conn)
    except AgentLedgerError as exc:
        rows = wslog.fetch(
            ctx.conn, "SELECT id FROM checkpoints ORDER BY size DESC, id DESC LIMIT 1"
        )
        subject = f"checkpoint {rows[0][0]}" if rows else "checkpoints"
        _diverged(ctx, "checkpoint.malformed", "a checkpoint note", exc.message, subject)
        return None


def _check_checkpoint(ctx: VerifyContext, stored: StoredCheckpoint, trusted: set[str]) -> bool:
    note = stored.checkpoint
    subject = f"checkpoint {stored.id}"
    ok = True
    if note.signed_by(sorted(trusted)) is None:
        signers = ", ".join(sorted({s.name for s in note.signatures}))
        held = f"its signature(s) by {signers}" if signers else "no signature"
        _diverged(
            ctx,
            "checkpoint.signature",
            "signed by a trusted key",
            f"{held}: none verifies under a trusted key",
            subject,
        )
        ok = False
    plan = ctx.log_plan
    archive = plan.archive if isinstance(plan, LogPlan) else ""
    expected = Checkpoint(ctx.ledger.id, 0, b"", "", archive=archive).origin
    if note.origin != expected:
        _diverged(ctx, "checkpoint.origin", expected, _origin_words(note), subject)
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
    return ok


def _origin_words(note: Checkpoint) -> str:
    """A note's origin, saying what it means when it is an archive's."""
    if note.archive:
        return f"{note.origin} (a checkpoint of an archive, not of a ledger's workspace log)"
    return note.origin


def _entry_at(ctx: VerifyContext, leaf: int) -> str:
    if leaf < 0:
        return "the start of the log"
    rows = wslog.fetch(ctx.conn, "SELECT run_id, seq FROM entries WHERE leaf = ? LIMIT 1", (leaf,))
    return f"leaf {leaf} ({rows[0][0]} seq {rows[0][1]})" if rows else f"leaf {leaf} (no entry)"


@dataclass
class LeafScan:
    """Every log position the file's entries claim, read in leaf order: what is missing,
    what is repeated, and where each run's last entry stands."""

    missing: list[tuple[int, int]]
    """Ranges ``[first, last]`` of positions no entry holds."""
    repeated: list[tuple[int, list[tuple[str, int]]]]
    """Positions held by more than one entry, with those entries ``(run, seq)``."""
    last_leaf: dict[str, int]
    """Each run's highest leaf."""
    at: dict[int, tuple[str, int]]
    """``(run, seq)`` just before and after each missing range (the neighbours named)."""
    holes: list[tuple[int, int, str, int, int]]
    """Where a run's own sequence skips: ``(leaf before, leaf after, run, first missing
    seq, last missing seq)``. A missing range inside one is that run's (its chain shows it)."""

    def owner(self, first: int, last: int) -> tuple[str, int, int] | None:
        """The run whose skipped steps explain the missing range, if one does."""
        for before, after, run_id, low, high in self.holes:
            if before < first and last < after:
                return run_id, low, high
        return None


def scan_leaves(ctx: VerifyContext, size: int) -> LeafScan:
    """One pass over the leaf column (only when the log is already known to be broken)."""
    scan = LeafScan([], [], {}, {}, [])
    expected = 0
    previous: tuple[int, str, int] | None = None
    step: dict[str, tuple[int, int]] = {}  # each run's last (seq, leaf) seen
    for leaf, run_id, seq in ctx.conn.execute(
        "SELECT leaf, run_id, seq FROM entries WHERE leaf >= 0 ORDER BY leaf, run_id, seq"
    ):
        scan.last_leaf[run_id] = max(scan.last_leaf.get(run_id, -1), leaf)
        last_seq, last_leaf = step.get(run_id, (-1, -1))
        if seq > last_seq + 1:
            scan.holes.append((last_leaf, leaf, run_id, last_seq + 1, seq - 1))
        step[run_id] = (seq, leaf)
        if previous is not None and previous[0] == leaf:
            if scan.repeated and scan.repeated[-1][0] == leaf:
                scan.repeated[-1][1].append((run_id, seq))
            else:
                scan.repeated.append((leaf, [(previous[1], previous[2]), (run_id, seq)]))
        elif leaf > expected:
            scan.missing.append((expected, leaf - 1))
            if previous is not None:
                scan.at[expected - 1] = (previous[1], previous[2])
            scan.at[leaf] = (run_id, seq)
        expected = max(expected, leaf + 1)
        previous = (leaf, run_id, seq)
    if expected < size:
        scan.missing.append((expected, size - 1))
        if previous is not None:
            scan.at[expected - 1] = (previous[1], previous[2])
    return scan


def _leaves(first: int, last: int) -> str:
    return f"leaf {first:,}" if first == last else f"leaves {first:,}..{last:,}"


def _neighbour(scan: LeafScan, leaf: int) -> str:
    if leaf < 0:
        return "the start of the log"
    found = scan.at.get(leaf)
    return f"{found[0]} seq {found[1]} (leaf {leaf:,})" if found else f"leaf {leaf:,}"


def _report_gaps(ctx: VerifyContext, newest: StoredCheckpoint | None) -> None:
    """Name every missing and every repeated position, not only the first, and every run
    that could own a missing one (its last entry comes before it: a cut tail or a deleted
    run leaves no other trace), so no damaged run is counted clean."""
    size = newest.checkpoint.size if newest is not None else 0
    scan = scan_leaves(ctx, size)
    unexplained: list[tuple[int, int]] = []
    for first, last in scan.missing:
        after = _neighbour(scan, first - 1)
        if last + 1 in scan.at:
            where = f"between {after} and {_neighbour(scan, last + 1)}"
        else:
            where = f"after {after}, at the end of the signed log"
        owner = scan.owner(first, last)
        if owner is None:
            unexplained.append((first, last))
            whose = "whose runs nothing else in the file shows: a cut tail or a deleted run"
        else:
            run_id, low, high = owner
            steps = f"step {low}" if low == high else f"steps {low}..{high}"
            whose = f"run {run_id} skips {steps} there"
        _diverged(
            ctx,
            "log.leaf",
            _leaves(first, last),
            f"{_leaves(first, last)} missing: {where} "
            f"({last - first + 1:,} {'entry' if first == last else 'entries'} deleted; {whose})",
            "log",
        )
    for leaf, holders in scan.repeated:
        names = ", ".join(f"{run} seq {seq}" for run, seq in holders[:4])
        _diverged(
            ctx,
            "log.leaf",
            f"leaf {leaf:,} once",
            f"leaf {leaf:,} held {len(holders)} times: {names}",
            "log",
        )
    _uncertify(ctx, scan.last_leaf, unexplained)


def _uncertify(
    ctx: VerifyContext, last_leaf: dict[str, int], unexplained: list[tuple[int, int]]
) -> None:
    """Every run that could own a missing position nothing else explains (its last entry
    comes before it: a cut tail or a deleted run leaves no other trace) is uncertified,
    so no damaged run is counted clean."""
    if not unexplained:
        return
    top = unexplained[-1][1]
    for run_id, last in last_leaf.items():
        if last > top or run_id not in ctx.verdicts:
            continue  # entries after every gap: a deletion there would have broken its chain
        later = [(first, end) for first, end in unexplained if first > last]
        ranges = ", ".join(_leaves(first, end) for first, end in later[:4])
        if len(later) > 4:
            ranges += f" and {len(later) - 4:,} more ranges"
        ctx.diverged(
            run_id,
            Divergence(
                run_id,
                None,
                "log.incomplete",
                "every entry the log held after this run's last one (leaf "
                f"{last:,}) still in the file",
                f"{ranges} deleted: entries of this run may be among them (its tail cut), so "
                "it cannot be certified complete",
            ),
        )


def _uncertify_cut(ctx: VerifyContext, size: int, vouched: int) -> None:
    """The log holds ``size`` entries of the ``vouched`` ones something signed or verified
    (a rolled-back file): what came after may have been any run's tail, as for a cut
    tail (``log.size``)."""
    _uncertify(ctx, _last_leaves(ctx), [(size, vouched - 1)])


def _last_leaves(ctx: VerifyContext) -> dict[str, int]:
    """Each run's highest leaf (a run with none logged has its ``log.unlogged`` findings)."""
    return dict(
        wslog.fetch(
            ctx.conn, "SELECT run_id, max(leaf) FROM entries WHERE leaf >= 0 GROUP BY run_id"
        )
    )


def _check_unlogged(ctx: VerifyContext) -> int:
    count = 0
    for run_id, seq in ctx.conn.execute(UNLOGGED):
        count += 1
        ctx.diverged(
            run_id, Divergence(run_id, seq, "log.unlogged", "a leaf of the workspace log", "none")
        )
    return count


def _not_that_leaf(ctx: VerifyContext, run_id: str, seq: int, leaf: int, checkpoint: int) -> None:
    """``log.inclusion``: the entry is not the leaf the signed log holds at its place."""
    ctx.diverged(
        run_id,
        Divergence(
            run_id,
            seq,
            "log.inclusion",
            f"leaf {leaf} of checkpoint {checkpoint}",
            "not that leaf: the entry was edited, re-chained or added after signing",
        ),
    )


def _name_changed_leaves(
    ctx: VerifyContext, reader: tiles.TileReader, newest: StoredCheckpoint
) -> None:
    """Entries changed under a signed log (bytes, hash and chain rewritten together): when
    the stored leaf hashes are still the signed tree's (they hash to its root), each entry
    whose leaf differs from the one signed at its position is named on its run, as
    ``verify RUN`` names it (``log.inclusion``): the run is not clean."""
    note = newest.checkpoint
    try:
        signed = b"".join(
            reader.hashes(0, start, min(tiles.TILE_WIDTH, note.size - start))
            for start in range(0, note.size, tiles.TILE_WIDTH)
        )
    except AgentLedgerError:
        return  # the tiles are damaged too: nothing signed names the leaves
    if _core.merkle_root_of_hashes(signed) != note.root:
        return  # rewritten with the entries: the log.root finding is all that can be said
    for leaf, run_id, seq, digest in wslog.fetch(ctx.conn, wslog.LEAF_RANGE, (0, note.size)):
        at = leaf * wslog.HASH_LEN
        if (
            tiles.leaf_hash(_core.log_leaf(run_id, seq, bytes(digest)))
            != signed[at : at + wslog.HASH_LEN]
        ):
            _not_that_leaf(ctx, run_id, seq, leaf, newest.id)


def _name_unsigned_leaves(ctx: VerifyContext, newest: StoredCheckpoint) -> None:
    """``log.unsigned`` on its run for each entry at a position past the newest signed
    checkpoint, as ``verify RUN`` names it."""
    for leaf, run_id, seq, _ in wslog.fetch(ctx.conn, wslog.LEAF_ROWS, (newest.checkpoint.size,)):
        ctx.diverged(run_id, _unsigned(run_id, seq, leaf, newest))


def _unsigned(run_id: str, seq: int, leaf: int, newest: StoredCheckpoint) -> Divergence:
    """An entry at a position past the newest signed checkpoint: ``log.unsigned``."""
    size = newest.checkpoint.size
    return Divergence(
        run_id,
        seq,
        "log.unsigned",
        f"an entry of the signed log (checkpoint {newest.id}: {size:,} entries)",
        f"leaf {leaf}, past the newest checkpoint",
    )


def _check_selected_runs(
    ctx: VerifyContext, plan: LogPlan, newest: StoredCheckpoint | None, trusted: set[str]
) -> None:
    """Named runs: every entry a leaf of the newest trusted checkpoint, and the log whole."""
    selected = ctx.selected_runs
    rows = list(
        ctx.conn.execute(
            # The hash as stored (an edited row may hold text there), as the journal pass reads it.
            "SELECT run_id, seq, coalesce(CAST(hash AS BLOB), x''), leaf FROM entries "
            f"WHERE {IN_SELECTED} ORDER BY run_id, seq",
            (ctx.selected_json,),
        )
    )
    for run_id, seq, _, leaf in rows:
        if not isinstance(leaf, int) or leaf < 0:
            ctx.diverged(
                run_id,
                Divergence(run_id, seq, "log.unlogged", "a leaf of the workspace log", "none"),
            )
    if newest is None:
        if rows:
            _diverged(
                ctx,
                "checkpoint.missing",
                "a signed checkpoint of the log",
                "none: nothing signed vouches for these entries",
                "checkpoints",
            )
        state = wslog.read_state(ctx.conn)
        reader = tiles.TileReader(ctx.conn)
        if plan.exported is not None:
            _check_exported(ctx, reader, plan.exported, trusted, state.size, state.root)
        _check_remembered(ctx, reader, plan, state.size, state.root)
        return
    if not _check_checkpoint(ctx, newest, trusted):
        return
    note = newest.checkpoint
    reader = tiles.TileReader(ctx.conn)
    try:
        tiles_root = reader.root(note.size)
    except AgentLedgerError as exc:
        tiles_root = b""
        _diverged(ctx, "log.tiles", "the tree of the signed log", exc.message, "log_tiles")
    if tiles_root and tiles_root != note.root:
        _diverged(
            ctx,
            "log.tiles",
            f"the tree of checkpoint {newest.id}",
            "the stored tiles hash to another root",
            "log_tiles",
        )
    # The file's first positions rebuilt from every entry: when they give the signed root,
    # each entry at one of them is the signed leaf there, proven without the tiles (which a
    # damaged tile would make fail for entries nobody changed: the tiles are log.tiles).
    missing = _unproven_prefix(ctx, note.size, note.root)
    tail_from = ctx.tail_from or {}
    for run_id, seq, digest, leaf in rows:
        if not isinstance(leaf, int) or leaf < 0 or seq < tail_from.get(run_id, 0):
            continue
        if leaf >= note.size:
            ctx.diverged(run_id, _unsigned(run_id, seq, leaf, newest))
            continue
        if missing is None or tiles_root != note.root:
            continue  # proven above; or tiles not the signed tree, whose proofs prove nothing
        data = _core.log_leaf(run_id, seq, bytes(digest))
        try:
            proof = reader.inclusion_proof(leaf, note.size)
        except AgentLedgerError:
            proof = []
        if not _core.verify_inclusion(data, leaf, note.size, proof, note.root):
            _not_that_leaf(ctx, run_id, seq, leaf, newest.id)
    if missing is not None:
        for run_id in selected:
            ctx.diverged(
                run_id,
                Divergence(
                    run_id,
                    None,
                    "log.incomplete",
                    f"the {note.size:,} entries of checkpoint {newest.id}, each at its position",
                    f"{missing}: this run cannot be certified complete (`verify --all` names "
                    "the leaves)",
                ),
            )
    if plan.exported is not None:
        _check_exported(ctx, reader, plan.exported, trusted, note.size, note.root)
    _check_remembered(ctx, reader, plan, note.size, note.root)


LEAF_SCAN = (
    "SELECT leaf, run_id, seq, hash FROM entries WHERE +leaf >= ? AND +leaf < ? "
    "ORDER BY run_id, seq"
)
"""Every logged entry, read from the table itself in key order (sequential, and no index
the file could have rebuilt decides which rows are seen); sorted by leaf in Rust. The
unary ``+`` keeps ``entries_by_leaf`` out: ``NOT INDEXED`` does not, on a ``WITHOUT
ROWID`` table (SQLite 3.54 then seeks every row through that index, 2.5 times slower)."""


def rebuilt_log(
    conn: apsw.Connection, size: int, rows: _core.LoggedRows | None = None
) -> tuple[wslog.LogState, tuple[int, int] | None]:
    """``log.state_at`` with SQLite stepped in Rust over the table itself (its fast path:
    no Python row per entry, no index; ``tests/log/test_every_gap.py`` holds the two to the
    same answers), or from ``rows``, the table's logged rows as a read of this snapshot
    kept them (``btree_check.check_entries``)."""
    if rows is not None:
        found, frontier, _, gap = rows.rebuild(size)
    else:
        found, frontier, _, gap = _core.log_rebuild(native.handle(conn), LEAF_SCAN, [0, size])
    state = wslog.LogState(found, tuple(frontier))
    if gap is None and state.size < size:
        gap = (state.size, -1)
    return state, gap


def _unproven_prefix(ctx: VerifyContext, size: int, root: bytes) -> str | None:
    """Why the file's first ``size`` log positions are not exactly the signed log of that
    ``root`` (None when they are): every position present once, holding the entry the
    signed tree holds there. Rebuilt from each entry's (run, seq, hash) in leaf order,
    never counted: a count is padded by one junk row."""
    state, gap = rebuilt_log(ctx.conn, size, ctx.logged_rows)
    if gap is not None:
        expected, found = gap
        if found < 0:
            return f"{_leaves(expected, size - 1)} missing from the file"
        if found > expected:
            return f"leaf {expected:,} missing from the file (entries deleted)"
        return f"leaf {found:,} appears twice (an entry added at a signed position)"
    if state.root != root:
        return "the entries at the signed positions are not the signed ones (entries replaced)"
    return None


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


def _check_exported(
    ctx: VerifyContext,
    reader: tiles.TileReader,
    exported: Checkpoint,
    trusted: set[str],
    size: int,
    root: bytes,
) -> None:
    """The log (``size``, ``root``) extends an exported checkpoint kept elsewhere."""
    subject = "exported checkpoint"
    if exported.signed_by(sorted(trusted)) is None:
        _diverged(ctx, "checkpoint.signature", "signed by a trusted key", "not", subject)
        return
    if exported.ledger_id != ctx.ledger.id:
        _diverged(ctx, "checkpoint.origin", exported.ledger_id, ctx.ledger.id, subject)
        return
    plan = ctx.log_plan
    archive = plan.archive if isinstance(plan, LogPlan) else ""
    if exported.archive and exported.archive != archive:
        # An archive's own log is another log than its source's: never a rollback of it.
        _diverged(
            ctx,
            "checkpoint.origin",
            Checkpoint(ctx.ledger.id, 0, b"", "", archive=archive).origin,
            f"{exported.origin} (another archive's checkpoint)"
            if archive
            else f"{exported.origin} (an archive's checkpoint, not this ledger's)",
            subject,
        )
        return
    if isinstance(plan, LogPlan) and plan.archive and not exported.archive:
        # A reviewer holds the source's checkpoint: an archive is a selection of that
        # ledger, judged by the source checkpoint its entries are proven in.
        _check_exported_source(ctx, exported, plan.source)
        return
    if exported.size > size:
        _diverged(
            ctx,
            "log.rollback",
            f"at least {exported.size:,} entries (exported checkpoint)",
            f"{size:,}: the ledger is older than a checkpoint taken from it",
            subject,
        )
        _uncertify_cut(ctx, size, exported.size)
        return
    if exported.legacy:
        # Signed over the BLAKE3 tree before schema 6: that tree's leaves are the same
        # entries, so recomputed from them it must have the exported root (docs/FORMAT.md §7).
        extends = wslog.legacy_root(reader.conn, exported.size) == exported.root
    else:
        try:
            proof = reader.consistency_proof(exported.size, size)
        except AgentLedgerError:
            proof = []
        extends = _core.verify_consistency(exported.size, size, exported.root, root, proof)
    if not extends:
        _diverged(
            ctx,
            "log.rollback",
            f"a log extending the exported checkpoint ({exported.size:,} entries)",
            "a different history (rolled back or forked)",
            subject,
        )


def _check_archive_source(
    ctx: VerifyContext, seal: dict[str, object], trusted: set[str], only: set[str] | None = None
) -> Checkpoint | None:
    """An archive carries its source's signed checkpoint and, for every archived entry, an
    inclusion proof in it: each entry is proven to be the one its source signed. With
    ``only`` (named runs), an entry of another run that fails is not reported."""
    subject = "archive source"
    text, proofs = seal.get("source_checkpoint"), seal.get("source_proofs")
    if not isinstance(text, str) or not isinstance(proofs, list):
        # The seal is not signed: were a missing source a note, deleting it would pass an
        # archive whose entries nothing ties to the source's signed log.
        _diverged(
            ctx,
            "archive.source",
            "its source's signed checkpoint and a proof of each entry in it",
            "none in the seal: removed, or written by a build from before archives held them "
            "(archive the runs again from the source)",
            subject,
        )
        return None
    try:
        source = Checkpoint.parse(text)
    except AgentLedgerError as exc:
        _diverged(ctx, "archive.source", "its source's signed checkpoint", exc.message, subject)
        return None
    if source.signed_by(sorted(trusted)) is None or source.archive:
        _diverged(
            ctx,
            "archive.source",
            "a checkpoint of the source ledger signed by a trusted key",
            "not signed by a trusted key" if not source.archive else "an archive's checkpoint",
            subject,
        )
        return None
    if source.ledger_id != ctx.ledger.id:
        _diverged(ctx, "archive.source", ctx.ledger.id, source.ledger_id, subject)
        return None
    rows = wslog.fetch(ctx.conn, wslog.LEAF_ROWS, (0,))
    if len(rows) != len(proofs):
        _diverged(
            ctx,
            "archive.source",
            f"a source proof for each of the {len(rows):,} archived entries",
            f"{len(proofs):,} proofs",
            subject,
        )
        return None
    leaves = [_core.log_leaf(run_id, seq, bytes(digest)) for _, run_id, seq, digest in rows]
    # Proofs in their plain form are checked in Rust, in parallel; any other, one by one.
    held = _core.verify_inclusions(leaves, proofs, source.size, source.root, ctx.options.jobs)
    ok = True
    for (_, run_id, seq, _), data, item, holds in zip(rows, leaves, proofs, held, strict=True):
        if not (_source_proof_holds(source, data, item) if holds is None else holds):
            ok = False
            if only is not None and run_id not in only:
                continue
            ctx.diverged(
                run_id,
                Divergence(
                    run_id,
                    seq,
                    "archive.source",
                    f"this entry in the source's checkpoint of {source.size:,} entries",
                    "not proven there: the archive's copy is not the entry its source signed",
                ),
            )
    return source if ok else None


def _source_proof_holds(source: Checkpoint, data: bytes, item: object) -> bool:
    """Whether ``item`` (``[index, [base64 node, ...]]``) proves ``data`` in ``source``:
    the reference ``_core.verify_inclusions`` is held to."""
    if not isinstance(item, list) or len(item) != 2:
        return False
    leaf, path = item
    if not isinstance(leaf, int) or isinstance(leaf, bool) or not isinstance(path, list):
        return False
    try:
        nodes = [base64.b64decode(node, validate=True) for node in path]
    except (TypeError, ValueError):
        return False
    return bool(_core.verify_inclusion(data, leaf, source.size, nodes, source.root))


def _check_exported_source(
    ctx: VerifyContext, exported: Checkpoint, source: Checkpoint | None
) -> None:
    """An archive against its source's exported checkpoint: the same log, or one the
    archive cannot compare (said, never a rollback)."""
    if source is None:
        ctx.report.notes.append(
            f"--checkpoint: the exported checkpoint ({exported.size:,} entries) is one of the "
            "source ledger; this archive proves no entry in a source checkpoint to compare it with"
        )
        return
    if exported.size == source.size:
        if exported.root != source.root:
            _diverged(
                ctx,
                "log.rollback",
                f"the source log of the exported checkpoint ({exported.size:,} entries)",
                "the archive's entries were proven in a different source log of that size (forked)",
                "exported checkpoint",
            )
        return
    ctx.report.notes.append(
        f"--checkpoint: the exported checkpoint covers {exported.size:,} entries of the source "
        f"ledger; this archive's entries are proven in the source's checkpoint of "
        f"{source.size:,} entries (taken when it was archived), which the archive cannot "
        "compare with it"
    )


def _record_verified(ctx: VerifyContext, memory: SignerMemory, state: wslog.LogState) -> None:
    """Remember, outside the file, the log state a clean verify covered (for the signer's
    rule and the next --incremental)."""
    # A machine without an install folder (a reviewer's) has no memory to keep: verify
    # never creates one.
    if ctx.report.code != 0 or not ctx.ledger.keys.home.is_dir():
        return
    try:
        memory.record("verified", state.size, state.root, state.frontier)
    except OSError as exc:
        ctx.report.notes.append(f"could not remember the verified log ({exc.strerror})")
    except InvalidInput as exc:  # not a file it can be kept in
        ctx.report.notes.append(f"could not remember the verified log: {exc.message}")
