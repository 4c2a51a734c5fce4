"""A run's journal as its hash-verified bytes say: what decisions read, never raw rows.

The activity boundary and the phase code decide from earlier entries of a journal: a stage
id already used, an evidence set already pinned, the roles a team loaded, the phase
evidence in force. Those decisions must not come from cells an attacker can edit (the
``kind`` column, a side table such as ``team_roles``). ``read_run`` reads every row of a
run inside the caller's transaction, recomputes each entry's hash from its bytes, checks
that the bytes are canonical and name this run and position and that the ``kind`` column
says what they say, chains each entry to the one before from the run's genesis, and checks
the last one is the head the run records (which the append recording the decision, or
``Run._prove_head``, then proves in the signed log). Kinds and bodies come from those
bytes only.

A view that does not verify says where (``problem``); ``require`` turns it into a
``Diverged`` error (code ``journal-tampered``, exit 2): nothing is decided, nothing written.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apsw

from agentledger import _core
from agentledger.errors import Diverged

HASH_PREFIX = "blake3:"
ENVELOPE = frozenset({"body", "kind", "prev", "run", "seq", "ts", "v"})
"""The members of an entry's bytes (docs/FORMAT.md §3)."""

_ROWS = (
    "SELECT seq, kind, hash, bytes, leaf FROM entries WHERE run_id = ? AND seq >= ? ORDER BY seq"
)
_HEAD = "SELECT head_seq, head_hash FROM runs WHERE run_id = ?"
_AT = "SELECT hash FROM entries WHERE run_id = ? AND seq = ?"


TAMPERED = "journal-tampered"
"""The code of the ``Diverged`` error (exit 2) a decision on a journal that does not verify
raises: nothing was decided or written."""


@dataclass(frozen=True, slots=True)
class VerifiedEntry:
    """One entry as its verified bytes hold it (``leaf``: its position in the log)."""

    seq: int
    kind: str
    body: Any
    hash: str
    leaf: int | None


@dataclass(frozen=True, slots=True)
class RunView:
    """The entries of one run that verify, in order; ``problem`` names the first that does
    not (``(seq, why)``), after which nothing of the run is trusted."""

    run_id: str
    entries: tuple[VerifiedEntry, ...]
    problem: tuple[int, str] | None = None

    def of_kind(self, *kinds: str) -> Iterator[VerifiedEntry]:
        return (entry for entry in self.entries if entry.kind in kinds)

    def require(self) -> RunView:
        """This view, or ``Diverged`` (``journal-tampered``) when any row of the run does not
        verify."""
        if self.problem is not None:
            seq, why = self.problem
            raise Diverged(
                f"run {self.run_id!r} step {seq}: {why} (tampered); nothing was decided or "
                "written; `agentledger verify` shows what differs",
                code=TAMPERED,
            )
        return self


def read_run(conn: apsw.Connection, ledger_id: str, run_id: str) -> RunView:
    """Every entry of ``run_id``, verified from its bytes (inside the caller's snapshot or
    write transaction, so the decision and what it read are one state).

    The entries this process already verified are reused while the file still holds the
    last of them at its place: the rows after it must chain from its hash, so the run read
    is that verified prefix and what follows it, and a decision costs the same however
    long the run is. Bodies are shared between views: read them, never change them.
    """
    key = (conn.filename, ledger_id, run_id)
    entries, prev = _verified_prefix(conn, key)
    rows = conn.execute(_ROWS, (run_id, len(entries)))
    for seq, column_kind, digest, raw, leaf in rows:
        read = _read(run_id, len(entries), seq, digest, raw, prev)
        if isinstance(read, str):
            return RunView(run_id, tuple(entries), (len(entries), read))
        kind, body, prev = read
        if column_kind != kind:
            # Queries filter on the column: one that disagrees with the bytes misleads them.
            return RunView(
                run_id, tuple(entries), (len(entries), "its kind column is not its kind")
            )
        entries.append(VerifiedEntry(len(entries), kind, body, prev, leaf))
    last = (len(entries) - 1, entries[-1].hash if entries else None)
    head = conn.execute(_HEAD, (run_id,)).fetchall()
    if not head and entries:
        return RunView(run_id, tuple(entries), (last[0], "its run has no row"))
    if head:
        head_seq, head_hash = head[0]
        # As stored: a head hash of another type (an edited row) is no entry's hash, and a
        # number is never taken for a length to allocate.
        recorded = HASH_PREFIX + head_hash.hex() if isinstance(head_hash, bytes) else head_hash
        if (head_seq, recorded) != last:
            why = f"the run records step {head_seq} as its head, not its last entry"
            return RunView(run_id, tuple(entries), (max(last[0], 0), why))
    view = RunView(run_id, tuple(entries))
    _VERIFIED.put(key, view)
    return view


VERIFIED_ENTRIES = 200_000
"""How many verified entries this process keeps, over all runs (the runs read least
recently are forgotten first; a longer run is verified whole on each read)."""

Key = tuple[str, str, str]
"""``(file, ledger id, run id)``."""


class _Verified:
    """The runs this process verified, as views, the least recently read first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.views: OrderedDict[Key, RunView] = OrderedDict()
        self.entries = 0
        self.lock = threading.Lock()

    def get(self, key: Key) -> RunView | None:
        with self.lock:
            return self.views.get(key)

    def put(self, key: Key, view: RunView) -> None:
        with self.lock:
            known = self.views.pop(key, None)
            self.entries -= len(known.entries) if known is not None else 0
            if len(view.entries) > self.limit:
                return
            self.views[key] = view
            self.entries += len(view.entries)
            while self.entries > self.limit:
                _, dropped = self.views.popitem(last=False)
                self.entries -= len(dropped.entries)

    def clear(self) -> None:
        with self.lock:
            self.views.clear()
            self.entries = 0


_VERIFIED = _Verified(VERIFIED_ENTRIES)


def _verified_prefix(conn: apsw.Connection, key: Key) -> tuple[list[VerifiedEntry], str]:
    """The run's entries this process verified, and the hash the next row must chain from;
    none when the file no longer holds the last of them (rolled back, another file)."""
    known = _VERIFIED.get(key)
    if known is not None and known.entries:
        last = known.entries[-1]
        row = conn.execute(_AT, (key[2], last.seq)).fetchall()
        if row and isinstance(row[0][0], bytes) and HASH_PREFIX + row[0][0].hex() == last.hash:
            return list(known.entries), last.hash
    return [], _core.genesis_prev(key[1], key[2])


def _read(
    run_id: str, position: int, seq: Any, digest: Any, raw: Any, prev: str
) -> tuple[str, Any, str] | str:
    """``(kind, body, hash)`` of a row that verifies, else why it does not."""
    if seq != position:
        return f"expected entry {position} here (entries missing or reordered)"
    if not isinstance(raw, bytes) or not isinstance(digest, bytes):
        return "its bytes or hash are not bytes"
    computed = HASH_PREFIX + _core.entry_hash(raw).hex()
    if HASH_PREFIX + digest.hex() != computed:
        return "its stored hash is not the hash of its bytes"
    if len(raw) > _core.MAX_ENTRY_BYTES:  # never parsed (verify: entry.size)
        return "it is longer than an entry can be"
    try:
        canonical = _core.canonicalize_json(raw) == raw
        doc = json.loads(raw) if canonical else None
    except (ValueError, RecursionError):
        canonical, doc = False, None
    if not canonical or not isinstance(doc, dict) or set(doc) != ENVELOPE:
        return "its bytes are not a canonical entry"
    if doc["run"] != run_id or doc["seq"] != position or doc["v"] != 1:
        return "its bytes name another run or position"
    if doc["prev"] != prev:
        return "it does not chain to the entry before it"
    if not isinstance(doc["kind"], str):
        return "its kind is not a string"
    return doc["kind"], doc["body"], computed


__all__ = ["TAMPERED", "RunView", "VerifiedEntry", "read_run"]
