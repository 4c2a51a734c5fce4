"""What the index-versus-table check costs verify, side by side in one run.

    python benches/btree_check.py [--runs N] [--entries-per-run M] [--repeat R]

Whole-workspace verify three ways, sampled R times alternately on the same ledger
(benches/bulk_verify.py's, built once under benches/.data/), the best of each kept: as
shipped (the entries indexes checked from the journal pass's own read, SQLite's check for
the other tables), with SQLite's check for the entries indexes too (the reference), and
with no check at all; and a named-run verify each way (as shipped: the entries indexes
checked from a read of the table's keys of its own, which also keeps the rows the log's
proof is rebuilt from). Then the reference check alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bulk_verify
from agentledger import Ledger
from agentledger.storage import btree_check


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3_000)
    parser.add_argument("--entries-per-run", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=4)
    args = parser.parse_args()
    bulk_verify.DATA.mkdir(exist_ok=True)
    os.environ.setdefault("AGENTLEDGER_HOME", str(bulk_verify.DATA / "home"))
    path = bulk_verify.DATA / f"bulk-v2-{args.runs}x{args.entries_per_run}.db"
    if not path.exists():
        bulk_verify.build(path, args.runs, args.entries_per_run)
    checked, folded = btree_check.btree_problems, btree_check.fold_plan
    modes = {
        "as shipped": (checked, folded),
        "SQLite's check": (checked, lambda conn: None),
        "no check": (lambda conn, tables=None: [], lambda conn: None),
    }
    best = dict.fromkeys(modes, float("inf"))
    named = dict.fromkeys(modes, float("inf"))
    with Ledger.open(path, readonly=True) as ledger:
        for _ in range(args.repeat):
            for mode, (problems, plan) in modes.items():
                btree_check.btree_problems, btree_check.fold_plan = problems, plan
                started = time.perf_counter()
                report = ledger.verify()
                best[mode] = min(best[mode], time.perf_counter() - started)
                assert report.code == 0, report.code
                started = time.perf_counter()
                ledger.verify(["run-000001"])
                named[mode] = min(named[mode], time.perf_counter() - started)
        btree_check.btree_problems, btree_check.fold_plan = checked, folded
        with ledger.db.snapshot() as conn:
            started = time.perf_counter()
            assert btree_check.btree_problems(conn) == []
            alone = time.perf_counter() - started
    entries = args.runs * args.entries_per_run
    print(f"{entries:,} entries, best of {args.repeat}, load {os.getloadavg()[0]:.1f}")
    for mode in modes:
        print(f"  whole verify {mode:<15} {best[mode]:.3f}s   one named run {named[mode]:.3f}s")
    shipped = best["as shipped"] - best["no check"]
    reference = best["SQLite's check"] - best["no check"]
    print(
        f"  the check's cost in a whole verify: {shipped:.3f}s as shipped, "
        f"{reference:.3f}s with SQLite's; SQLite's check alone {alone:.3f}s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
