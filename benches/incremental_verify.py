"""Incremental verify vs full verify, and the append cost of the workspace log, in one run.

    python benches/incremental_verify.py [--runs N] [--entries-per-run M] [--tail-runs T]
                                         [--tail-entries K] [--appends A] [--singles S]
                                         [--repeat R] [--json]

(1) A workspace of N runs x M entries is verified in full (which records the verified
    checkpoint); then T runs get K new entries each; then the same ledger is verified
    incrementally and in full. Speed-up = full / incremental, on the same file.
(2) Appends with the log (leaf column and covering index, frontier update, one signed
    checkpoint per transaction) vs the same code with the log switched off (no index, no
    frontier, no checkpoint): batched (1,000 per transaction) and single durable appends.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentledger import Ledger
from agentledger.verify import VerifyOptions


def build(path: Path, runs: int, per_run: int) -> None:
    with Ledger.open(path) as ledger:
        for n in range(runs):
            items = [("step", {"n": i, "tool": "edit", "path": f"src/f{i % 17}.py"})
                     for i in range(per_run)]  # fmt: skip
            ledger.run(f"run-{n:06d}").append_many(items)


def timed_verify(path: Path, options: VerifyOptions) -> tuple[float, int, int]:
    with Ledger.open(path) as ledger:
        started = time.perf_counter()
        report = ledger.verify(options=options)
        elapsed = time.perf_counter() - started
    return elapsed, report.entries, int(report.code)


@contextmanager
def log_switched_off() -> Iterator[None]:
    """Appends as they were before the log: no frontier stored, no checkpoint."""
    import agentledger.log as workspace_log

    original = workspace_log.finish_append
    workspace_log.finish_append = lambda conn, ledger, state: None
    try:
        yield
    finally:
        workspace_log.finish_append = original


def appends(path: Path, entries: int, batch: int, with_log: bool) -> float:
    with Ledger.open(path) as ledger:
        if not with_log:
            ledger.db.conn.execute("DROP INDEX entries_by_leaf")
        run = ledger.run("bench")
        items = [("step", {"n": i, "tool": "edit", "path": f"src/f{i % 17}.py"})
                 for i in range(batch)]  # fmt: skip
        context = log_switched_off() if not with_log else _nothing()
        with context:
            started = time.perf_counter()
            for _ in range(entries // batch):
                run.append_many(items)
            return time.perf_counter() - started


def singles(path: Path, count: int, with_log: bool) -> list[float]:
    latencies = []
    with Ledger.open(path) as ledger:
        if not with_log:
            ledger.db.conn.execute("DROP INDEX entries_by_leaf")
        run = ledger.run("single")
        with log_switched_off() if not with_log else _nothing():
            for i in range(count):
                started = time.perf_counter()
                run.append("step", {"n": i})
                latencies.append(time.perf_counter() - started)
    return sorted(latencies)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--entries-per-run", type=int, default=100)
    parser.add_argument("--tail-runs", type=int, default=10)
    parser.add_argument("--tail-entries", type=int, default=10)
    parser.add_argument("--appends", type=int, default=200_000)
    parser.add_argument("--singles", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ.setdefault("AGENTLEDGER_HOME", str(folder / "keys"))
        path = folder / "ws.db"
        started = time.perf_counter()
        build(path, args.runs, args.entries_per_run)
        print(f"built {args.runs:,} runs in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        first_s, first_entries, first_code = timed_verify(path, VerifyOptions())
        with Ledger.open(path) as ledger:
            for n in range(args.tail_runs):
                tail = [("step", {"late": i}) for i in range(args.tail_entries)]
                ledger.run(f"run-{n * 7:06d}").append_many(tail)
        inc_s, inc_entries, inc_code = timed_verify(path, VerifyOptions(incremental=True))
        full_s, full_entries, full_code = timed_verify(path, VerifyOptions())
        result["verify"] = {
            "workspace_entries": full_entries,
            "tail_entries": args.tail_runs * args.tail_entries,
            "full_s": round(full_s, 4),
            "full_codes": [first_code, full_code],
            "first_full_s": round(first_s, 4),
            "incremental_s": round(inc_s, 4),
            "incremental_entries_checked": inc_entries,
            "incremental_code": inc_code,
            "speedup": round(full_s / inc_s, 1),
        }
        del first_entries
        # Alternated and repeated, best of each: the machine's noise hits both sides alike.
        with_s = without_s = float("inf")
        with_lat: list[float] = []
        without_lat: list[float] = []
        for round_ in range(args.repeat):
            with_s = min(with_s, appends(folder / f"w{round_}.db", args.appends, 1_000, True))
            without_s = min(
                without_s, appends(folder / f"wo{round_}.db", args.appends, 1_000, False)
            )
            with_lat += singles(folder / f"sw{round_}.db", args.singles, True)
            without_lat += singles(folder / f"swo{round_}.db", args.singles, False)
        result["append"] = {
            "batched_per_s_with_log": round(args.appends / with_s),
            "batched_per_s_without_log": round(args.appends / without_s),
            "batched_cost_ratio": round(with_s / without_s, 3),
            "single_median_ms_with_log": round(statistics.median(with_lat) * 1000, 3),
            "single_median_ms_without_log": round(statistics.median(without_lat) * 1000, 3),
            "single_added_median_ms": round(
                (statistics.median(with_lat) - statistics.median(without_lat)) * 1000, 3
            ),
        }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for section, figures in result.items():
            print(section)
            for key, value in figures.items():
                print(f"  {key:>32}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
