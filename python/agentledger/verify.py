"""Verification: re-derive everything the ledger claims and report what diverged.

The journal pass streams ``entries`` in ``(run_id, seq)`` order in bounded batches; each
batch is handed to the Rust core (``verify_entries``), which hashes, parses and checks it
with the GIL released, while this thread already reads the next batch. Memory is bounded by
the batch size and the number of batches in flight, whatever the size of the workspace.
"""

from __future__ import annotations

import itertools
from collections import Counter
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentledger import _core
from agentledger.cas import DIGEST, digest_of
from agentledger.errors import ExitCode

if TYPE_CHECKING:
    from agentledger.ledger import Ledger

BATCH_ROWS = 16_384
IN_FLIGHT = 3
MAX_DIVERGENCES_PER_RUN = _core.MAX_FINDINGS_PER_RUN

Progress = Callable[[int], None]
"""Called with the number of entries just verified."""


@dataclass(frozen=True, slots=True)
class Divergence:
    """One thing that does not re-derive: where (run, step), which check, expected vs actual."""

    run_id: str | None
    seq: int | None
    check: str
    expected: str
    actual: str
    subject: str | None = None
    """What the check is about when it is not an entry (a blob digest, a table)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "seq": self.seq,
            "check": self.check,
            "subject": self.subject,
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(slots=True)
class RunVerdict:
    """The outcome for one run: ``code`` 0 clean, 1 not found, 2 diverged."""

    run_id: str
    code: int = ExitCode.OK
    entries: int = 0
    activities: int = 0
    divergence_count: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.code == ExitCode.OK

    def add(self, divergence: Divergence) -> None:
        self.code = ExitCode.DIVERGED
        self.divergence_count += 1
        if len(self.divergences) < MAX_DIVERGENCES_PER_RUN:
            self.divergences.append(divergence)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "code": int(self.code),
            "status": status_name(self.code),
            "entries": self.entries,
            "activities": self.activities,
            "divergence_count": self.divergence_count,
            "divergences": [d.to_json() for d in self.divergences],
        }


def status_name(code: int) -> str:
    return {0: "clean", 1: "missing", 2: "diverged"}.get(code, "error")


@dataclass(slots=True)
class VerifyReport:
    """Everything one verification pass found, per run and for the workspace."""

    runs: list[RunVerdict] = field(default_factory=list)
    workspace: list[Divergence] = field(default_factory=list)
    blobs_checked: int = 0
    elapsed_s: float = 0.0

    @property
    def entries(self) -> int:
        return sum(run.entries for run in self.runs)

    @property
    def code(self) -> int:
        if self.workspace or any(run.code == ExitCode.DIVERGED for run in self.runs):
            return ExitCode.DIVERGED
        if any(run.code == ExitCode.NOT_FOUND for run in self.runs):
            return ExitCode.NOT_FOUND
        return ExitCode.OK

    def count(self, code: int) -> int:
        return sum(1 for run in self.runs if run.code == code)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": int(self.code),
            "status": status_name(self.code),
            "runs": len(self.runs),
            "entries": self.entries,
            "clean": self.count(ExitCode.OK),
            "diverged": self.count(ExitCode.DIVERGED),
            "missing": self.count(ExitCode.NOT_FOUND),
            "blobs_checked": self.blobs_checked,
            "elapsed_s": round(self.elapsed_s, 6),
            "entries_per_s": round(self.entries / self.elapsed_s) if self.elapsed_s else None,
            "workspace": [d.to_json() for d in self.workspace],
            "failures": [run.to_json() for run in self.runs if not run.ok],
            "results": [
                {"run": run.run_id, "code": int(run.code), "entries": run.entries}
                for run in self.runs
            ],
        }


Row = tuple[str, int, str, bytes, bytes]


def _batches(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    iterator = iter(rows)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


class Verifier:
    """One verification pass over a ledger (or some of its runs)."""

    def __init__(self, ledger: Ledger, *, jobs: int = 0, progress: Progress | None = None) -> None:
        self.ledger = ledger
        self.jobs = jobs
        self.progress = progress

    def run(self, run_ids: list[str] | None = None) -> VerifyReport:
        started = time.perf_counter()
        report = VerifyReport()
        with self.ledger.db.snapshot() as conn:
            heads = {
                run_id: (head_seq, head_hash)
                for run_id, head_seq, head_hash in conn.execute(
                    "SELECT run_id, head_seq, head_hash FROM runs ORDER BY ordinal"
                )
            }
            selected = list(heads) if run_ids is None else run_ids
            verdicts = {run_id: RunVerdict(run_id) for run_id in selected}
            for run_id in selected:
                if run_id not in heads:
                    verdicts[run_id].code = ExitCode.NOT_FOUND
            if run_ids is None:
                rows: Iterable[Row] = conn.execute(
                    "SELECT run_id, seq, kind, hash, bytes FROM entries ORDER BY run_id, seq"
                )
            else:
                rows = self._rows_of(conn, [r for r in selected if r in heads])
            tails = self._verify_stream(rows, verdicts, report)
            self._check_heads(heads, tails, verdicts, report, whole=run_ids is None)
            if run_ids is None:
                self._check_ordinals(conn, report)
                self._verify_blobs(conn, report)
        report.runs = list(verdicts.values())
        report.elapsed_s = time.perf_counter() - started
        return report

    @staticmethod
    def _rows_of(conn: Any, run_ids: list[str]) -> Iterator[Row]:
        for run_id in sorted(run_ids):
            yield from conn.execute(
                "SELECT run_id, seq, kind, hash, bytes FROM entries WHERE run_id = ? ORDER BY seq",
                (run_id,),
            )

    def _verify_stream(
        self, rows: Iterable[Row], verdicts: dict[str, RunVerdict], report: VerifyReport
    ) -> dict[str, tuple[int, bytes]]:
        """Verify every row; return each run's last ``(seq, stored hash)``."""
        ledger_id = self.ledger.id
        tails: dict[str, tuple[int, bytes]] = {}
        pending: list[Future[Any]] = []

        def collect(future: Future[Any]) -> None:
            findings, summaries = future.result()
            sent = Counter(finding[0] for finding in findings)
            for run_id, seq, check, expected, actual in findings:
                verdict = verdicts.get(run_id)
                if verdict is None:  # entries of a run the runs table does not know
                    verdict = verdicts[run_id] = RunVerdict(run_id)
                verdict.add(Divergence(run_id, seq, check, expected, actual))
            for run_id, entries, activities, found, last_seq, last_hash in summaries:
                verdict = verdicts.setdefault(run_id, RunVerdict(run_id))
                verdict.entries += entries
                verdict.activities += activities
                # Findings past the per-run cap were counted in Rust but not sent.
                verdict.divergence_count += max(0, found - sent[run_id])
                tails[run_id] = (last_seq, last_hash)
                if self.progress is not None:
                    self.progress(entries)

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify") as pool:
            carry: tuple[str, int, bytes] | None = None
            for batch in _batches(rows, BATCH_ROWS):
                pending.append(pool.submit(_core.verify_entries, ledger_id, carry, batch, self.jobs))
                last = batch[-1]
                carry = (last[0], last[1], last[3])
                while len(pending) >= IN_FLIGHT:
                    collect(pending.pop(0))
            for future in pending:
                collect(future)
        return tails

    @staticmethod
    def _check_ordinals(conn: Any, report: VerifyReport) -> None:
        """Ordinals only order the listing, but they must be exactly 1..N: no value is loose."""
        ordinals = [row[0] for row in conn.execute("SELECT ordinal FROM runs ORDER BY ordinal")]
        if ordinals != list(range(1, len(ordinals) + 1)):
            report.workspace.append(
                Divergence(None, None, "runs.ordinal", f"1..{len(ordinals)}", str(ordinals[:20]))
            )

    @staticmethod
    def _check_heads(
        heads: dict[str, tuple[int, bytes | None]],
        tails: dict[str, tuple[int, bytes]],
        verdicts: dict[str, RunVerdict],
        report: VerifyReport,
        *,
        whole: bool,
    ) -> None:
        """The runs table's head cache must agree with the journal it summarises."""
        for run_id, verdict in verdicts.items():
            if verdict.code == ExitCode.NOT_FOUND:
                continue
            if run_id not in heads:
                verdict.add(Divergence(run_id, None, "run.unknown", "a row in runs", "missing"))
                continue
            head_seq, head_hash = heads[run_id]
            last_seq, last_hash = tails.get(run_id, (-1, None))
            if head_seq != last_seq:
                verdict.add(
                    Divergence(run_id, None, "run.head_seq", str(head_seq), str(last_seq))
                )
            if head_hash != last_hash:
                verdict.add(
                    Divergence(run_id, None, "run.head_hash", _hex(head_hash), _hex(last_hash))
                )

    @staticmethod
    def _verify_blobs(conn: Any, report: VerifyReport) -> None:
        """Every stored blob must hash to its name and have the size it claims."""
        blobs = conn.execute(
            "SELECT digest, size, chunk_size FROM blobs ORDER BY digest"
        ).fetchall()
        for digest, size, chunk_size in blobs:
            report.blobs_checked += 1
            if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
                report.workspace.append(
                    Divergence(None, None, "blob.name", "blake3:/sha256:<hex>", repr(digest), str(digest))
                )
                continue
            algorithm = digest.split(":", 1)[0]
            sizes: list[int] = []
            indexes: list[int] = []

            def chunks(digest: str = digest) -> Iterator[bytes]:
                last = -1
                while True:
                    rows = conn.execute(
                        "SELECT idx, data FROM blob_chunks WHERE digest = ? AND idx > ? "
                        "ORDER BY idx LIMIT 8",
                        (digest, last),
                    ).fetchall()
                    if not rows:
                        return
                    for idx, data in rows:
                        last = idx
                        indexes.append(idx)
                        sizes.append(len(data))
                        yield data

            actual = digest_of(chunks(), algorithm)
            if actual != digest:
                report.workspace.append(Divergence(None, None, "blob.digest", digest, actual, digest))
            if sum(sizes) != size:
                report.workspace.append(
                    Divergence(None, None, "blob.size", str(size), str(sum(sizes)), digest)
                )
            if any(n != chunk_size for n in sizes[:-1]) or (sizes and sizes[-1] > chunk_size):
                report.workspace.append(
                    Divergence(
                        None, None, "blob.chunk_size", str(chunk_size), str(sizes[:4]), digest
                    )
                )
            if indexes != list(range(len(indexes))):
                report.workspace.append(
                    Divergence(None, None, "blob.chunks", "0..n-1", str(indexes[:20]), digest)
                )
        orphans = conn.execute(
            "SELECT DISTINCT digest FROM blob_chunks WHERE digest NOT IN (SELECT digest FROM blobs)"
        ).fetchall()
        for (digest,) in orphans:
            report.workspace.append(
                Divergence(None, None, "blob.orphan_chunks", "no chunks", "chunks", str(digest))
            )


def _hex(digest: bytes | None) -> str:
    return "none" if digest is None else "blake3:" + digest.hex()
