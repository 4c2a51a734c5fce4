"""The one place that decides whether this install may sign: only a ``Proven`` log state.

Every signature this install makes over a ledger — the checkpoint at the end of a write
transaction, ``agentledger checkpoint``, an archive's checkpoint, a prune receipt — is
made over a ``proven.Proven`` of the transaction it is made in (``current_proven``). It
comes from the install's memory (outside the file), extended by leaves recomputed from
the entries or by this process's own appends, or from a clean whole verify in the same
transaction; never from the file's tiles or ``log_state``. Otherwise the signature is
refused (``Diverged``, exit 2) and nothing is written.

A ledger this install never vouched for is signed only after a whole verify, in the same
transaction, finds it clean. ``checkpoint --adopt`` is the one way to sign a ledger
nothing vouches for yet (one from before checkpoints), and it too refuses a ledger this
install vouched for.

Within a write transaction the proof runs before the first entry is added; the appended
run's head is proven too (``check_head``): its last entry must be the leaf the proven log
holds at its position (an inclusion proof), so a new entry never chains from a forged one.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import apsw

from agentledger import _core, proven
from agentledger.errors import Diverged, LedgerError
from agentledger.log import fetch, is_archive
from agentledger.proven import Proven, Unproven
from agentledger.signer_memory import SignerMemory

if TYPE_CHECKING:
    from agentledger.handle import Finding, LedgerHandle, WholeVerify


_memories: weakref.WeakKeyDictionary[LedgerHandle, SignerMemory] = weakref.WeakKeyDictionary()

PROVEN = "proven"
"""The transaction scope's key for the state the transaction's signatures extend."""


def memory_of(ledger: LedgerHandle) -> SignerMemory:
    """The memory of this ledger's id under its key folder (one object per handle)."""
    memory = _memories.get(ledger)
    if memory is None or memory.ledger_id != ledger.id:
        memory = _memories[ledger] = SignerMemory(ledger.keys.home, ledger.id)
    return memory


def current_proven(ledger: LedgerHandle) -> Proven:
    """The proven state of the write transaction ``ledger`` is in, proven on first use.

    A ledger this install never vouched for is verified whole first (in this transaction).
    """
    db = ledger.db
    if not db.conn.in_transaction:
        raise LedgerError("a signature is made inside a write transaction", code="ledger-error")
    found = db.transaction_scope.get(PROVEN)
    if isinstance(found, Proven) and found.current(db):
        return found
    state = proven.prove(db, ledger.id, memory_of(ledger), ledger.keys)
    if state is None:
        state = verify_before_signing(ledger, "sign a ledger this install has not signed before")
    db.transaction_scope[PROVEN] = state
    return state


def extend_proven(ledger: LedgerHandle, size: int, frontier: tuple[bytes, ...]) -> Proven:
    """After this process appended leaves: the transaction's proven state, extended."""
    state = current_proven(ledger).extended(size, frontier)
    ledger.db.transaction_scope[PROVEN] = state
    return state


def require_current(conn: apsw.Connection, ledger_id: str, state: Proven) -> None:
    """The signer's gate: ``state`` was proven for ``ledger_id`` in the transaction the
    connection being written (``conn``) is in now."""
    if not isinstance(state, Proven) or state.db.conn is not conn or not state.current(state.db):
        raise Unproven("the ledger", "the log state was not proven in this transaction")
    if state.ledger_id != ledger_id:
        raise Unproven(state.db.path, "the log state was proven for another ledger")


RESTORED_BY_SIGNING = {"checkpoint.history_missing"}
"""Findings the next signature repairs (it signs the missing power-of-two checkpoints,
each proven against the signed root), so they never block it."""


def integrity_findings(report: WholeVerify) -> list[Finding]:
    """What a verify found against the ledger's own records: every finding but the
    verdicts on an imported workdir's content (bernstein's own checks, other than the
    anchors that pin the import), which stay what they were for whoever reviews them."""
    found = [*report.workspace, *(d for run in report.runs for d in run.divergences)]
    return [
        d
        for d in found
        if d.check not in RESTORED_BY_SIGNING
        and (not d.check.startswith("bernstein.") or d.check.startswith("bernstein.anchor."))
    ]


def require_clean(
    ledger: LedgerHandle, what: str, allowed: frozenset[str] = frozenset()
) -> WholeVerify:
    """A whole verify whose integrity findings are none (but ``allowed``), or
    ``Diverged``: nothing signed, exported or written. The verify is the facade's
    (``LedgerHandle.verify_whole``): the verifier sits above this module."""
    report = ledger.verify_whole()
    findings = [d for d in integrity_findings(report) if d.check not in allowed]
    if findings:
        checks = ", ".join(sorted({d.check for d in findings})[:6])
        raise Diverged(
            f"{ledger.path}: refusing to {what}: the ledger does not verify clean ({checks}); "
            "nothing was written; `agentledger verify --all` shows what differs",
            code="signing-refused",
        )
    return report


def verify_before_signing(
    ledger: LedgerHandle, what: str, allowed: frozenset[str] = frozenset()
) -> Proven:
    """``require_clean`` in the current transaction: the log that verify rebuilt, proven."""
    state = require_clean(ledger, what, allowed).proven
    if not isinstance(state, Proven) or not state.current(ledger.db):
        raise Unproven(ledger.path, "the verify did not rebuild the whole log in this transaction")
    ledger.db.transaction_scope[PROVEN] = state
    return state


def adopt(ledger: LedgerHandle) -> None:
    """``checkpoint --adopt``: a ledger nothing vouches for, clean but for that, is proven
    (the checkpoint at the end of the transaction then signs it)."""
    if memory_of(ledger).base() is not None:
        current_proven(ledger)
        return
    verify_before_signing(
        ledger, "adopt it (a whole verify finds more than a missing checkpoint)",
        frozenset({"checkpoint.missing"}),
    )  # fmt: skip


def check_may_append(conn: apsw.Connection, ledger: LedgerHandle) -> Proven:
    """The first append of a write transaction: the ledger is no sealed archive and its
    log is proven, so the checkpoint at its end may be signed. Returns the proven state
    the append extends."""
    scope = ledger.db.transaction_scope
    if not scope.get("may_append"):
        if is_archive(conn):
            raise LedgerError(
                f"{ledger.path} is a sealed archive; it cannot be extended", code="archive-sealed"
            )
        scope["may_append"] = True
    return current_proven(ledger)


def check_head(
    conn: apsw.Connection,
    ledger: LedgerHandle,
    state: Proven,
    run_id: str,
    head_seq: int,
    head_hash: bytes | None,
) -> None:
    """The run's cached head must be its last entry, and that entry the leaf the proven
    log holds at its position (an inclusion proof checked against the proven root)."""
    if type(head_seq) is not int or not isinstance(head_hash, bytes | None):
        raise _head_refused(run_id, "its head row holds values of other types")
    if head_seq < 0:
        if fetch(conn, "SELECT 1 FROM entries WHERE run_id = ? LIMIT 1", (run_id,)):
            raise _head_refused(run_id, "it has entries, but its head says it is empty")
        return
    rows = fetch(conn, HEAD_ROW, (run_id, head_seq, run_id, head_seq))
    if not rows or rows[0][2]:
        raise _head_refused(run_id, f"its entry {head_seq} is not its last")
    digest, leaf, _ = rows[0]
    if not isinstance(digest, bytes) or digest != (head_hash or b"") or type(leaf) is not int:
        raise _head_refused(run_id, f"its entry {head_seq} is not the head it records")
    if _own_heads(ledger).get(run_id) == (head_seq, bytes(digest), leaf) and leaf < state.size:
        return  # this process appended it there itself (see ``remember_head``)
    data = _core.log_leaf(run_id, head_seq, bytes(digest))
    if not proven.includes(conn, state, leaf, data):
        raise _head_refused(
            run_id, f"its entry {head_seq} is not the one the signed log holds at leaf {leaf}"
        )


HEAD_ROW = """
SELECT e.hash, e.leaf, EXISTS (SELECT 1 FROM entries x WHERE x.run_id = ? AND x.seq > ?)
  FROM entries e WHERE e.run_id = ? AND e.seq = ?
"""
"""The head entry and whether any entry follows it: one statement per append."""


_heads: dict[tuple[str, str], dict[str, tuple[int, bytes, int]]] = {}
"""Per (key folder, ledger id): each run's last entry as this process appended it and saw
committed, ``(seq, hash, leaf)``. Every log state this install proves for a ledger id
extends every earlier one (it only ever signs extensions), so a leaf this process wrote
into a proven state is in every later one: its head needs no inclusion proof. A file
rewritten meanwhile makes the cached head differ from the file's, and the proof runs.
The fast path of ``check_head``; the proof is its reference, and the tests compare them."""


def _own_heads(ledger: LedgerHandle) -> dict[str, tuple[int, bytes, int]]:
    return _heads.setdefault((str(ledger.keys.home), ledger.id), {})


def remember_head(ledger: LedgerHandle, run_id: str, seq: int, digest: bytes, leaf: int) -> None:
    """Once the transaction commits: this process appended ``run_id``'s head at ``leaf``."""
    heads = _own_heads(ledger)
    ledger.db.after_commit.append(lambda: heads.__setitem__(run_id, (seq, digest, leaf)))


def _head_refused(run_id: str, why: str) -> Diverged:
    return Diverged(
        f"refusing to append to run {run_id!r}: {why} (tampered); nothing was written; "
        "`agentledger verify` shows what differs",
        code="signing-refused",
    )


def remember_signed(ledger: LedgerHandle, state: Proven, time: str) -> None:
    """Once the transaction has committed, remember the state this install signed."""
    memory = memory_of(ledger)
    size, root, frontier = state.size, state.root, state.frontier
    ledger.db.after_commit.append(lambda: memory.record("signed", size, root, frontier, time))
