"""The rule before every signature: sign only a log that extends what this install vouched for.

Every signature this install makes over a ledger — the checkpoint at the end of a write
transaction, ``agentledger checkpoint``, an archive's checkpoint, a prune receipt — first
passes ``check_may_sign``. With ``base`` the newest state the signer's memory
(``signer_memory.py``) holds for the ledger's id, the file's log, as its stored frontier
makes it:

- equals ``base`` (the same size and root: a root fixes every leaf under it), or
- is larger, and the file's newest checkpoint, signed by a trusted key, commits to exactly
  it and is proven (RFC 9162, from the tiles) to extend ``base``: this install's own
  checkpoint when the memory lags after a crash, or a trusted co-writer's;
- otherwise the signature is refused (``Diverged``, exit 2) and nothing is written.

A ledger this install never vouched for is signed only after a whole verify finds it
clean (which records it as verified). ``checkpoint --adopt`` is the one way to sign a
ledger nothing vouches for yet (one from before checkpoints), and it too refuses a ledger
this install vouched for.

Within a write transaction the check runs before the first entry is added (the
transaction's own entries are computed by this process and need no check); the appended
run's head is checked too: its last entry must be the one the log recorded
(``check_head``), so a new entry never chains from a forged one.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import apsw

from agentledger import _core, tiles
from agentledger.errors import AgentLedgerError, Diverged, LedgerError
from agentledger.keys import resolve_trust
from agentledger.log import is_archive
from agentledger.notes import newest_checkpoint
from agentledger.signer_memory import Remembered, SignerMemory

if TYPE_CHECKING:
    from agentledger.ledger import Ledger
    from agentledger.log import LogState
    from agentledger.verify.results import Divergence, VerifyReport


_memories: weakref.WeakKeyDictionary[Ledger, SignerMemory] = weakref.WeakKeyDictionary()


def memory_of(ledger: Ledger) -> SignerMemory:
    """The memory of this ledger's id under its key folder (one object per handle)."""
    memory = _memories.get(ledger)
    if memory is None or memory.ledger_id != ledger.id:
        memory = _memories[ledger] = SignerMemory(ledger.keys.home, ledger.id)
    return memory


def _refuse(ledger: Ledger, why: str) -> Diverged:
    return Diverged(
        f"{ledger.path}: refusing to sign: {why}. Nothing was written; "
        "`agentledger verify --all` shows what differs",
        code="signing-refused",
    )


def check_may_sign(conn: apsw.Connection, ledger: Ledger, state: LogState) -> None:
    """Raise ``Diverged`` unless the log at ``state`` extends what this install vouched for."""
    memory = memory_of(ledger)
    if not memory.usable:
        raise _refuse(ledger, f"the ledger id {ledger.id[:40]!r} is not one agentledger makes")
    base = memory.base()
    if base is None:
        if state.size == 0:
            return
        _verify_first(ledger)
        base = memory.base()
        if base is None:
            raise _refuse(ledger, "this install has never vouched for it")
    root = state.root
    if state.size < base.size:
        raise _refuse(
            ledger,
            f"its log holds {state.size:,} entries, but this install signed or verified "
            f"{base.size:,} (the file was rolled back or entries deleted)",
        )
    if state.size == base.size:
        if root != base.root:
            raise _refuse(
                ledger,
                f"its log of {state.size:,} entries is not the one this install signed or "
                "verified (entries rewritten)",
            )
        return
    _check_growth(conn, ledger, base, state.size, root)


def _check_growth(
    conn: apsw.Connection, ledger: Ledger, base: Remembered, size: int, root: bytes
) -> None:
    """Entries past ``base`` are acceptable only under a trusted checkpoint extending it."""
    unsigned = _refuse(
        ledger,
        f"{size - base.size:,} entries were added after the {base.size:,} this install "
        "vouched for, and no trusted checkpoint covers them",
    )
    try:
        newest = newest_checkpoint(conn)
    except AgentLedgerError:  # a malformed note vouches for nothing
        raise unsigned from None
    if newest is None:
        raise unsigned
    note = newest.checkpoint
    trusted = resolve_trust((), ledger.keys)
    if (note.size, note.root, note.ledger_id) != (size, root, ledger.id):
        raise unsigned
    if note.signed_by(sorted(trusted)) is None:
        raise unsigned
    proof = tiles.TileReader(conn).consistency_proof(base.size, size)
    if not _core.verify_consistency(base.size, size, base.root, root, proof):
        raise _refuse(
            ledger,
            f"its log of {size:,} entries does not extend the {base.size:,} this install "
            "signed or verified (history rewritten)",
        )


RESTORED_BY_SIGNING = {"checkpoint.history_missing"}
"""Findings the next signature repairs (it signs the missing power-of-two checkpoints from
the checked tiles), so they never block it: a ledger from before that history has none."""


def integrity_findings(report: VerifyReport) -> list[Divergence]:
    """What a verify found against the ledger's own records: every finding but the
    verdicts on an imported workdir's content (bernstein's own checks, other than the
    anchors that pin the import), which stay what they were for whoever reviews them."""
    found = report.workspace + [d for run in report.runs for d in run.divergences]
    return [
        d
        for d in found
        if d.check not in RESTORED_BY_SIGNING
        and (not d.check.startswith("bernstein.") or d.check.startswith("bernstein.anchor."))
    ]


def verify_before_signing(ledger: Ledger, what: str) -> None:
    """A whole verify whose integrity findings are none, or ``Diverged``: nothing signed."""
    findings = integrity_findings(ledger.verify())
    if findings:
        checks = ", ".join(sorted({d.check for d in findings})[:6])
        raise Diverged(
            f"{ledger.path}: refusing to {what}: the ledger does not verify clean ({checks}); "
            "nothing was written; `agentledger verify --all` shows what differs",
            code="signing-refused",
        )


def _verify_first(ledger: Ledger) -> None:
    """A whole verify, clean, before the first signature over a ledger with entries."""
    verify_before_signing(ledger, "sign a ledger this install has not signed before")


def adopt(conn: apsw.Connection, ledger: Ledger, state: LogState) -> None:
    """``checkpoint --adopt``: a ledger nothing vouches for, clean but for that, is signed."""
    if memory_of(ledger).base() is not None:
        check_may_sign(conn, ledger, state)
        return
    findings = integrity_findings(ledger.verify())
    other = sorted({d.check for d in findings} - {"checkpoint.missing"})
    if other:
        raise _refuse(
            ledger, f"a whole verify finds more than a missing checkpoint ({', '.join(other)})"
        )
    memory_of(ledger).record("verified", state.size, state.root)


def check_may_append(conn: apsw.Connection, ledger: Ledger, state: LogState) -> None:
    """The first append of a write transaction: the ledger is no sealed archive and its log
    extends what this install vouched for, so the checkpoint at the end may be signed."""
    scope = ledger.db.transaction_scope
    if scope.get("may_sign"):
        return
    if is_archive(conn):
        raise LedgerError(
            f"{ledger.path} is a sealed archive; it cannot be extended", code="archive-sealed"
        )
    check_may_sign(conn, ledger, state)
    scope["may_sign"] = True


def check_head(conn: apsw.Connection, run_id: str, head_seq: int, head_hash: bytes) -> None:
    """The run's cached head must be its last entry, and that entry the log's leaf."""
    if head_seq < 0:
        rows = conn.execute("SELECT 1 FROM entries WHERE run_id = ? LIMIT 1", (run_id,))
        if rows.fetchall():
            raise _head_refused(run_id, "it has entries, but its head says it is empty")
        return
    rows = conn.execute(HEAD_AS_LOGGED, (run_id, head_seq, run_id, head_seq)).fetchall()
    if not rows or rows[0][3]:
        raise _head_refused(run_id, f"its entry {head_seq} is not its last")
    digest, leaf, stored, _ = rows[0]
    if bytes(digest) != bytes(head_hash or b"") or not isinstance(leaf, int) or leaf < 0:
        raise _head_refused(run_id, f"its entry {head_seq} is not the head it records")
    expected = tiles.leaf_hash(_core.log_leaf(run_id, head_seq, bytes(digest)))
    if not isinstance(stored, bytes) or stored != expected:
        raise _head_refused(run_id, f"its entry {head_seq} is not the one the log recorded")


HEAD_AS_LOGGED = f"""
SELECT e.hash, e.leaf,
       (SELECT CAST(substr(t.hashes, (e.leaf % {tiles.TILE_WIDTH}) * 32 + 1, 32) AS BLOB)
          FROM log_tiles t WHERE t.level = 0 AND t.idx = e.leaf / {tiles.TILE_WIDTH}),
       EXISTS (SELECT 1 FROM entries x WHERE x.run_id = ? AND x.seq > ?)
  FROM entries e WHERE e.run_id = ? AND e.seq = ?
"""
"""The head entry, its leaf hash as the tiles hold it, and whether any entry follows it:
one statement per append."""


def _head_refused(run_id: str, why: str) -> Diverged:
    return Diverged(
        f"refusing to append to run {run_id!r}: {why} (tampered); nothing was written; "
        "`agentledger verify` shows what differs",
        code="signing-refused",
    )


def remember_signed(ledger: Ledger, size: int, root: bytes, time: str) -> None:
    """Once the transaction has committed, remember the state this install signed."""
    memory = memory_of(ledger)
    ledger.db.after_commit.append(lambda: memory.record("signed", size, root, time))
