"""The state one verification pass shares between its checks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from agentledger.storage import btree_check
from agentledger.verify.results import Divergence, RunVerdict, VerifyReport

if TYPE_CHECKING:
    from agentledger import _core
    from agentledger.handle import LedgerHandle
    from agentledger.signer_memory import Remembered

Progress = Callable[[int], None]
"""Called with the number of entries just verified."""

IN_SELECTED = "run_id IN (SELECT value FROM json_each(?))"
"""Restricts a query to the selected runs, bound to ``VerifyContext.selected_json``: one
query for a thousand named runs instead of one per run."""


@dataclass
class VerifyOptions:
    """How to verify. Keys come from outside the ledger; the ledger never supplies its own."""

    jobs: int = 0
    progress: Progress | None = None
    trust: tuple[str, ...] = ()
    """Trusted signer keys (``ed25519:<hex>`` strings), besides the local install key."""
    audit_key_file: Path | None = None
    """The audit HMAC key (or bernstein's audit master key) to cross-check the mirror."""
    compat: str | None = None
    """``"bernstein"``: reproduce bernstein's own verdict for imported runs."""
    checkpoint_file: Path | None = None
    """An exported checkpoint the ledger must extend (detects rollback)."""
    incremental: bool = False
    """Re-check only what was appended since the last verified checkpoint."""
    tsa_bundle_file: Path | None = None
    """Trusted TSA certificates (PEM): authenticate imported bernstein RFC 3161 anchors."""
    witness_state_dir: Path | None = None
    """A bernstein witness's own state (its pin per chain origin): strict holds the
    imported audit history to the pins as to the co-signatures."""
    recheck_signatures: bool = False
    """Verify every signature in full, none taken from the signatures this install
    accepted before (``signature_memo.py``)."""


Rehashed = tuple[int, list[tuple[str, str, str, str]]]
"""A blob pass's ``(blobs checked, [(digest, check, expected, actual)])``."""


@dataclass
class VerifyContext:
    ledger: LedgerHandle
    conn: apsw.Connection
    options: VerifyOptions
    report: VerifyReport
    verdicts: dict[str, RunVerdict]
    whole: bool
    """True when verifying the whole workspace (not a selection of runs)."""
    heads: dict[str, tuple[int, bytes | None]] = field(default_factory=dict)
    remembered: dict[str, Remembered] = field(default_factory=dict)
    """What this install signed and verified for the ledger (``signer_memory.py``), read
    before the snapshot began."""
    tails: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    referenced: set[str] = field(default_factory=set)
    """Content hashes that verified activity results point at."""
    tail_from: dict[str, int] | None = None
    """Incremental verify: the journal pass reads each of these runs from this seq only."""
    log_plan: Any = None
    """The workspace-log check's own state (verify/log.py)."""
    archive: bool = False
    """The file is judged as an archive (set by ``verify/log.plan_log``, the first check):
    its seal names an archive id and its newest checkpoint is one of that archive. A seal
    row alone, which anyone can add, makes nothing an archive: the checks an archive
    relaxes (audit positions may skip, team loads are unordered) apply only then."""
    folded_indexes: list[btree_check.IndexSpec] | None = None
    """The ``entries`` indexes the journal pass checks from its own read
    (``btree_check.fold_plan``); None when they were checked before the checks ran."""
    logged_rows: _core.LoggedRows | None = None
    """Every logged row of ``entries``, kept by that earlier check's read of the table
    (``btree_check.check_entries``): the log's proof is rebuilt from them."""
    rehashed: Rehashed | None = None
    """Every blob re-hashed beside SQLite's b-tree check (``blobs.rehash_beside``):
    ``(blobs checked, findings)``; None when the whole blob pass is still to be made."""
    after_snapshot: list[Callable[[], None]] = field(default_factory=list)
    """Run once the read snapshot is closed (e.g. recording a clean verify)."""
    marked: Mapping[str, list[tuple[str, int]] | None] = field(default_factory=dict)
    """``(run_id, seq)`` of the entries the whole journal pass matched per mark
    (``journal_pass.MARKS``); ``None`` or absent: not recorded, scan instead."""

    def marked_rows(
        self, marks: tuple[str, ...], columns: str, scan: str, params: tuple[Any, ...] = ()
    ) -> Iterable[Any]:
        """The rows ``scan`` selects, fetched by key when the journal pass marked them.

        ``scan`` must select exactly the entries of ``marks`` (the same kinds and byte
        strings), in ``(run_id, seq)`` order, with ``columns``.
        """
        recorded = [self.marked.get(mark) for mark in marks]
        keys: list[tuple[str, int]] = []
        for found in recorded:
            if found is None:
                rows: Iterable[Any] = self.conn.execute(scan, params)
                return rows
            keys.extend(found)
        if len(recorded) > 1:
            keys = sorted(set(keys))
        query = f"SELECT {columns} FROM entries WHERE run_id = ? AND seq = ?"
        return (row for key in keys for row in self.conn.execute(query, key))

    def verdict(self, run_id: str) -> RunVerdict:
        if run_id not in self.verdicts:
            self.verdicts[run_id] = RunVerdict(run_id)
        return self.verdicts[run_id]

    def diverged(self, run_id: str | None, divergence: Divergence) -> None:
        """Record a divergence against a run, or against the workspace when ``run_id`` is None."""
        if run_id is None:
            self.report.workspace.append(divergence)
        else:
            self.verdict(run_id).add(divergence)

    @property
    def selected_runs(self) -> list[str]:
        return [run_id for run_id, v in self.verdicts.items() if v.code != 1]

    @property
    def selected_json(self) -> str:
        """``selected_runs`` as a JSON array, the parameter of ``IN_SELECTED``."""
        return json.dumps(self.selected_runs)
