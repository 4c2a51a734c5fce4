"""Run journals: hash-chained, append-only sequences of entries, one per run.

The bytes of each entry are built and hashed in the Rust core so that the writer and the
verifier share one definition of the format (docs/FORMAT.md). An append is one call,
``_core.append_entries``: it encodes and chains the batch, numbers it as leaves of the
workspace log and inserts the rows through this connection, inside its transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from agentledger import _core, bookkeeping, checkpoint, log, signing
from agentledger.errors import Diverged, InvalidInput, NotFound
from agentledger.ids import check_kind, utc_timestamp
from agentledger.limits import MAX_ENTRY_BYTES, MAX_SQLITE_INT
from agentledger.storage import native

if TYPE_CHECKING:
    from agentledger.activity import (
        ActivityResult,
        BrowserActivity,
        DataOpsActivity,
        ResearchActivity,
    )
    from agentledger.handle import LedgerHandle
    from agentledger.phase.journal import PhaseState, TransitionResult
    from agentledger.phase.ledger import AuthorizationDecision

HASH_PREFIX = "blake3:"
RESERVED_KIND_PREFIXES = {
    "phase.": "the phase API (record_phase_evidence, transition_phase, authorize, ...)",
    "activity.": "the activity boundary (record_activity, `agentledger activity ...`)",
    # Verify reads these as an imported workdir's anchors: a hand-made one broke the ledger.
    "import.": "`agentledger import` (the anchors of an imported workdir)",
}
"""Kinds only their own API writes (it checks what they claim, and ``show`` presents them
as its decisions); ``append`` refuses them."""


def check_appendable_kind(kind: object) -> str:
    """``kind`` as ``Run.append`` takes it: well-formed, and none that only a writer which
    checks its entries writes (``reserved-kind``)."""
    kind = check_kind(kind)
    if kind in bookkeeping.KINDS:
        raise InvalidInput(
            f"entry kind {kind!r} is reserved: only garbage collection and team loading write it",
            code="reserved-kind",
        )
    for prefix, writer in RESERVED_KIND_PREFIXES.items():
        if kind.startswith(prefix):
            raise InvalidInput(
                f"entry kind {kind!r} is reserved: {prefix}* entries are written only by {writer}",
                code="reserved-kind",
            )
    return kind


def hash_text(digest: bytes) -> str:
    return HASH_PREFIX + digest.hex()


Entry = _core.Entry
"""One journal entry as stored: its position, hash, kind, body and exact bytes.

An immutable value made in Rust (``rust/python/src/entry.rs``): it holds the entry's bytes
(``raw``), and ``body`` is parsed from them on each access, so changing the dict given to
``append``, or the one ``body`` returned, changes no entry. Equal entries have equal fields:
an appended entry equals the same entry read back (``Entry.from_row``).
"""


def ensure_run_row(conn: Any, run_id: str) -> None:
    """The run's row, created inside the caller's write transaction if missing.

    A run exists once it has an entry: ``Ledger.run`` only names it, and the first append
    (of any kind, through any API) creates the row in the same transaction as the entry.
    """
    conn.execute(
        "INSERT OR IGNORE INTO runs (run_id, ordinal) "
        "VALUES (?, (SELECT coalesce(max(ordinal), 0) + 1 FROM runs))",
        (run_id,),
    )


class Run:
    """A handle on one run's journal. Cheap to create; every call reads or writes the ledger.

    A handle from ``Ledger.run`` (``must_exist=False``) may name a run that has no entry
    yet: it reads as empty, and its first append creates it. Other handles are on existing
    runs (``NotFound`` if the run is missing).
    """

    def __init__(self, ledger: LedgerHandle, run_id: str, *, must_exist: bool = True) -> None:
        self.ledger = ledger
        self.id = run_id
        self._must_exist = must_exist

    def __repr__(self) -> str:
        return f"Run({self.id!r})"

    def append(self, kind: str, body: Mapping[str, Any]) -> Entry:
        """Append one entry; durable when this returns."""
        return self.append_many([(kind, body)])[0]

    def append_many(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Entry]:
        """Append entries in one transaction: all of them are written, or none."""
        batch = []
        kinds: dict[str, None] = {}  # a batch repeats a few kinds: each is checked once
        for kind, body in items:
            if type(kind) is not str or kind not in kinds:
                kinds[check_appendable_kind(kind)] = None
            batch.append((kind, body if type(body) is dict else _check_body(body)))
        if not batch:
            return []
        with self.ledger.db.write() as conn:
            return self._append_locked(conn, batch)

    def _append_locked(self, conn: Any, batch: list[tuple[str, Any]]) -> list[Entry]:
        """Append inside a write transaction the caller holds (so other writes can join it)."""
        # What the transaction may sign: the log as proven (signing.py), never the file's.
        state = signing.check_may_append(conn, self.ledger)
        head = log.fetch(conn, "SELECT head_seq, head_hash FROM runs WHERE run_id = ?", (self.id,))
        if not head:
            if self._must_exist:
                raise NotFound(f"no run {self.id!r}")
            ensure_run_row(conn, self.id)  # the first entry creates the run
            head = [(-1, None)]
        head_seq, head_hash = head[0]
        # A new entry chains from the head: it must be the run's last entry, as logged.
        signing.check_head(conn, self.ledger, state, self.id, head_seq, head_hash)
        prev = _core.genesis_prev(self.ledger.id, self.id) if head_seq < 0 else hash_text(head_hash)
        ts = utc_timestamp()
        first_seq = head_seq + 1
        # Every entry is also the next leaf of the workspace log (log.py), in this transaction.
        log.check_room(state.size, len(batch))
        changes_before = conn.total_changes()
        try:
            with native.sqlite_errors():
                entries, head_hash, size, frontier, leaf_hashes = _core.append_entries(
                    native.handle(conn),
                    self.id,
                    first_seq,
                    prev,
                    ts,
                    batch,
                    state.size,
                    state.frontier,
                )
        except _core.CanonicalizationError as exc:  # raised before anything is written
            raise InvalidInput(
                f"entry body is not canonical JSON: {exc}", code="invalid-body"
            ) from None
        for entry in entries:  # refused inside the transaction: nothing is written
            if len(entry.raw) > MAX_ENTRY_BYTES:
                raise InvalidInput(
                    f"entry {entry.seq} of run {self.id!r} is {len(entry.raw):,} bytes, larger "
                    f"than an entry can be ({MAX_ENTRY_BYTES:,}: a proof carries it); store "
                    "large content as a blob and pin its hash",
                    code="too-large",
                )
        if conn.total_changes() - changes_before != len(batch):
            # Only an altered schema (a trigger) could make SQLite store other rows.
            raise Diverged(
                f"{len(batch)} entries were appended but SQLite changed "
                f"{conn.total_changes() - changes_before} rows; the ledger's schema was "
                "altered (`agentledger verify`); nothing was written",
                code="schema-altered",
            )
        grown = log.LogState(size, tuple(frontier))
        log.finish_append(conn, state.size, grown, leaf_hashes)
        signing.extend_proven(self.ledger, grown.size, grown.frontier)
        signing.remember_head(
            self.ledger, self.id, first_seq + len(batch) - 1, bytes(head_hash), grown.size - 1
        )
        checkpoint.schedule(self.ledger)
        native.execute(
            conn,
            "UPDATE runs SET head_seq = ?, head_hash = ? WHERE run_id = ?",
            (first_seq + len(batch) - 1, head_hash, self.id),
        )
        return entries

    def _prove_head(self, conn: Any) -> None:
        """Refuse (``signing-refused``) unless the run's head is its last entry, proven in the
        signed log as an append proves it: what a decision reading this run's journal without
        appending to it (the team's, a parent's) stands on."""
        head = conn.execute(
            "SELECT head_seq, head_hash FROM runs WHERE run_id = ?", (self.id,)
        ).fetchall()
        if head:
            # The log as proven in this transaction (the one an append would extend).
            state = signing.current_proven(self.ledger)
            signing.check_head(conn, self.ledger, state, self.id, head[0][0], head[0][1])

    def entries(self, start: int = 0, kind: str | None = None) -> Iterator[Entry]:
        """The run's entries in order, from ``start``; optionally only one kind."""
        if not isinstance(start, int) or not 0 <= start <= MAX_SQLITE_INT:
            raise InvalidInput(f"start must be a sequence number in 0..2^63-1, not {start!r}")
        sql = "SELECT run_id, seq, kind, hash, bytes FROM entries WHERE run_id = ? AND seq >= ?"
        params: tuple[object, ...] = (self.id, start)
        if kind is not None:
            sql += " AND kind = ?"
            params += (kind,)
        with self.ledger.db.snapshot() as conn:
            rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
        for row in rows:
            yield Entry.from_row(*row)

    def head(self) -> tuple[int, str | None]:
        """``(last seq, last hash)``; ``(-1, None)`` for an empty run."""
        rows = self.ledger.db.rows(
            "SELECT head_seq, head_hash FROM runs WHERE run_id = ?", (self.id,)
        )
        if not rows:
            if self._must_exist:
                raise NotFound(f"no run {self.id!r}")
            return -1, None  # named, not yet written
        seq, digest = rows[0]
        return seq, hash_text(digest) if digest is not None else None

    def __len__(self) -> int:
        return self.head()[0] + 1

    # ---- the activity boundary (agentledger.activity, loaded by the first activity: an
    # append alone never needs it) --------------------------------------------------------

    def record_activity(
        self, result: ActivityResult, *, stage_id: str, role: str | None = None
    ) -> Entry:
        """Validate, pin and audit-mirror one activity result, or raise ``ActivityRejected``."""
        from agentledger import activity

        return activity.record_activity(self, result, stage_id=stage_id, role=role)

    def research(self, stage_id: str, *, role: str | None = None) -> ResearchActivity:
        """A research stage: ``fetch(url, page)`` then ``finish(artifact)``."""
        from agentledger import activity

        return activity.research(self, stage_id, role=role)

    def browser(self, stage_id: str, *, role: str | None = None) -> BrowserActivity:
        """A browser stage: ``observe(step, snapshot)``, ``receipt(step, bytes)``, ``finish``."""
        from agentledger import activity

        return activity.browser(self, stage_id, role=role)

    def data(self, stage_id: str, *, role: str | None = None) -> DataOpsActivity:
        """A data stage: ``add_input`` → ``plan(steps)`` → ``add_output`` → ``finish``."""
        from agentledger import activity

        return activity.data(self, stage_id, role=role)

    def ops(self, stage_id: str, *, role: str | None = None) -> DataOpsActivity:
        """An ops stage: like ``data``, for activities that change systems."""
        from agentledger import activity

        return activity.ops(self, stage_id, role=role)

    # ---- phase capability (agentledger.phase.ledger, agentledger.phase.journal) ----------
    # Each method delegates to its entry point, imported on first use for start-up only: the
    # phase models load pydantic, which appending and reading never need. The phase modules
    # import this module only for types, so these imports point one way (the import lint
    # in pyproject.toml keeps it so).

    def record_phase_evidence(
        self, evidence: Mapping[str, Any] | None, *, compiler_input: Mapping[str, Any]
    ) -> Entry:
        """Anchor the run's phase evidence and its compiler input (refused unless reproducible)."""
        from agentledger.phase.ledger import record_evidence

        return record_evidence(self, evidence, compiler_input=compiler_input)

    def start_descendant(
        self,
        child_id: str,
        *,
        relation: str,
        compiler_input: Mapping[str, Any] | None = None,
        expected_parent_evidence_digest: str | None = None,
        now: datetime | None = None,
    ) -> Run:
        """Start ``child_id`` from this run (retry, fork, resume, handoff); never wider."""
        from agentledger.phase.ledger import start_descendant

        child = start_descendant(
            self,
            child_id,
            relation=relation,
            compiler_input=compiler_input,
            expected_parent_evidence_digest=expected_parent_evidence_digest,
            now=now,
        )
        return Run(self.ledger, child.id)

    def authorize(
        self,
        dimension: str,
        scopes: Sequence[str],
        *,
        evidence_digest: str,
        now: datetime | None = None,
    ) -> AuthorizationDecision:
        """Check an action against the active phase authority; the decision is journaled."""
        from agentledger.phase.ledger import authorize

        return authorize(self, dimension, scopes, evidence_digest=evidence_digest, now=now)

    def transition_phase(
        self,
        target_input: Mapping[str, Any],
        *,
        operation_id: str,
        reason: str,
        expected_sequence: int,
        expected_evidence_digest: str,
        manifest_digest: str,
        actor: Mapping[str, Any],
        administrator: bool = False,
        approval: str | None = None,
        approval_ttl_ms: int | None = None,
        emergency_override: Mapping[str, Any] | None = None,
        target_evidence: Mapping[str, Any] | None = None,
        now: datetime | None = None,
    ) -> TransitionResult:
        """Move to the evidence compiled from ``target_input``: compare-and-set, idempotent
        per operation, expansion only with an approval or an administrator's override."""
        from agentledger.phase.journal import transition

        return transition(
            self,
            target_input,
            operation_id=operation_id,
            reason=reason,
            expected_sequence=expected_sequence,
            expected_evidence_digest=expected_evidence_digest,
            manifest_digest=manifest_digest,
            actor=actor,
            administrator=administrator,
            approval=approval,
            approval_ttl_ms=approval_ttl_ms,
            emergency_override=emergency_override,
            target_evidence=target_evidence,
            now=now,
        )

    def decide_phase_approval(
        self,
        approval_id: str,
        decision: Literal["approved", "rejected"],
        *,
        actor: Mapping[str, Any],
        note: str | None = None,
        administrator: bool = False,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """Approve or reject a pending phase-expansion approval of this run."""
        from agentledger.phase.journal import decide

        return decide(
            self,
            approval_id,
            decision,
            actor=actor,
            note=note,
            administrator=administrator,
            now=now,
        )

    def phase_state(self, now: datetime | None = None) -> PhaseState:
        """The run's phase state; the first read after an override lapses records it."""
        from agentledger.phase.journal import current_state

        return current_state(self, now)


def _check_body(body: object) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise InvalidInput(
            f"entry body must be a JSON object, not {type(body).__name__}", code="invalid-body"
        )
    return body
