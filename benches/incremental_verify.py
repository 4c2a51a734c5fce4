"""Incremental verify vs full verify, on the same file.

    python benches/incremental_verify.py [--runs N] [--entries-per-run M] [--tail-runs T]
                                         [--tail-entries K] [--json]

A workspace of N runs x M entries is verified in full (which this install remembers as
verified clean); then T runs get K new entries each; then the same ledger is verified
incrementally and in full. Speed-up = full / incremental. (The log is part of every append
and cannot be switched off any more: what appends cost is `benches/append.py`'s, against
raw SQLite.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
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


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--entries-per-run", type=int, default=100)
    parser.add_argument("--tail-runs", type=int, default=10)
    parser.add_argument("--tail-entries", type=int, default=10)
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
