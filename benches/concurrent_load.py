"""Sustained mixed load on one ledger: writers, bulk verifiers and snapshot readers at once.

    python benches/concurrent_load.py [--writers 4] [--verifiers 1] [--readers 1]
                                      [--seconds 20] [--json]

Each writer process appends for ``--seconds`` (70 % single durable appends, 30 %
``append_many`` of 10), half of them to its own run and half to one run shared by all;
verifiers loop a whole-ledger bulk verify and a verify of named runs; readers check, in
one read snapshot each time, that the runs table, the entries and the workspace log agree.
The baseline is one writer alone on a fresh ledger for the same time, measured first in
the same run. At the end: every acknowledged entry is present, each run's sequence
numbers are 0..n-1 exactly once, and a final verify is clean.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any


def writer(path: str, home: str, index: int, seconds: float, out: Any) -> None:
    os.environ["AGENTLEDGER_HOME"] = home
    from agentledger import Ledger
    from agentledger.errors import AgentLedgerError

    latencies: list[float] = []
    acked: list[tuple[str, int, str]] = []
    errors: Counter[str] = Counter()
    with Ledger.open(path, create=False) as ledger:
        runs = [ledger.run(f"own-{index}"), ledger.run("shared")]
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            run = runs[i % 2]
            started = time.perf_counter()
            try:
                if i % 10 < 7:
                    entries = [run.append("step", {"writer": index, "i": i})]
                else:
                    entries = run.append_many(
                        [("step", {"writer": index, "i": i, "j": j}) for j in range(10)]
                    )
                latencies.append(time.perf_counter() - started)
                acked.extend((run.id, e.seq, e.hash) for e in entries)
            except AgentLedgerError as exc:
                errors[exc.code] += 1
            except Exception:
                errors["unexpected: " + traceback.format_exc(limit=1).splitlines()[-1]] += 1
            i += 1
    out.put({"latencies": latencies, "acked": acked, "errors": dict(errors)})


def verifier(path: str, home: str, stop: Any, out: Any) -> None:
    os.environ["AGENTLEDGER_HOME"] = home
    from agentledger import Ledger
    from agentledger.errors import AgentLedgerError

    codes: Counter[int] = Counter()
    errors: Counter[str] = Counter()
    entries = 0
    with Ledger.open(path, create=False) as ledger:
        rounds = 0
        while not stop.is_set():
            try:
                report = ledger.verify(None if rounds % 2 == 0 else ["shared"], jobs=1)
                codes[report.code] += 1
                entries += report.entries
            except AgentLedgerError as exc:
                errors[exc.code] += 1
            rounds += 1
    out.put({"verifies": dict(codes), "entries": entries, "errors": dict(errors)})


def reader(path: str, home: str, stop: Any, out: Any) -> None:
    os.environ["AGENTLEDGER_HOME"] = home
    from agentledger import Ledger

    reads = inconsistent = 0
    with Ledger.open(path, create=False, readonly=True) as ledger:
        while not stop.is_set():
            with ledger.db.snapshot() as conn:
                count, top = conn.execute(
                    "SELECT count(*), coalesce(max(leaf), -1) FROM entries"
                ).fetchall()[0]
                size = conn.execute("SELECT size FROM log_state").fetchall()[0][0]
                heads = conn.execute(
                    "SELECT sum(head_seq + 1) FROM runs WHERE head_seq >= 0"
                ).fetchall()[0][0]
            reads += 1
            inconsistent += not (count == size == top + 1 == (heads or 0))
    out.put({"reads": reads, "inconsistent": inconsistent})


def run_load(
    folder: Path, writers: int, verifiers: int, readers: int, seconds: float
) -> dict[str, Any]:
    from agentledger import Ledger

    ctx = multiprocessing.get_context("spawn")
    home = str(folder / "keys")
    path = str(folder / "ledger.db")
    with Ledger.open(path, key_dir=home) as ledger:
        ledger.run("shared")
    out = ctx.Queue()
    stop = ctx.Event()
    procs = [ctx.Process(target=writer, args=(path, home, i, seconds, out)) for i in range(writers)]
    procs += [ctx.Process(target=verifier, args=(path, home, stop, out)) for _ in range(verifiers)]
    procs += [ctx.Process(target=reader, args=(path, home, stop, out)) for _ in range(readers)]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    results = [out.get(timeout=seconds + 300) for _ in range(writers)]
    elapsed = time.perf_counter() - started
    stop.set()
    results += [out.get(timeout=600) for _ in range(verifiers + readers)]
    for proc in procs:
        proc.join()
    latencies = sorted(x for r in results for x in r.get("latencies", []))
    acked = [a for r in results for a in r.get("acked", [])]
    errors: Counter[str] = Counter()
    verifies: Counter[str] = Counter()
    for r in results:
        errors.update(r.get("errors", {}))
        verifies.update({str(k): v for k, v in r.get("verifies", {}).items()})
    with Ledger.open(path, create=False, key_dir=home) as ledger:
        stored = {
            (run_id, seq): "blake3:" + digest.hex()
            for run_id, seq, digest in ledger.db.conn.execute(
                "SELECT run_id, seq, hash FROM entries"
            )
        }
        runs_ok = all(
            ledger.db.scalar("SELECT count(*) - 1 FROM entries WHERE run_id = ?", (r,))
            == ledger.db.scalar("SELECT max(seq) FROM entries WHERE run_id = ?", (r,))
            for r in ledger.runs()
            if ledger.get_run(r).head()[0] >= 0
        )
        final_verify = ledger.verify(jobs=1).code
    lost = sum(1 for run_id, seq, digest in acked if stored.get((run_id, seq)) != digest)
    return {
        "writers": writers,
        "verifiers": verifiers,
        "readers": readers,
        "seconds": round(elapsed, 2),
        "append_calls": len(latencies),
        "entries": len(acked),
        "entries_per_s": round(len(acked) / elapsed, 1),
        "append_calls_per_s": round(len(latencies) / elapsed, 1),
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 2) if latencies else None,
        "latency_ms_p99": round(latencies[int(len(latencies) * 0.99)] * 1000, 2)
        if latencies
        else None,
        "latency_ms_max": round(latencies[-1] * 1000, 2) if latencies else None,
        "verifies": dict(verifies),
        "verified_entries": sum(r.get("entries", 0) for r in results),
        "snapshot_reads": sum(r.get("reads", 0) for r in results),
        "inconsistent_snapshots": sum(r.get("inconsistent", 0) for r in results),
        "errors": dict(errors),
        "lost_acknowledged_entries": lost,
        "sequences_contiguous": runs_ok,
        "final_verify": final_verify,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--verifiers", type=int, default=1)
    parser.add_argument("--readers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        baseline = run_load(Path(tmp) / "alone", 1, 0, 0, args.seconds)
        mixed = run_load(
            Path(tmp) / "mixed", args.writers, args.verifiers, args.readers, args.seconds
        )
    ratio = mixed["entries_per_s"] / baseline["entries_per_s"] if baseline["entries_per_s"] else 0
    result = {"baseline_one_writer": baseline, "mixed": mixed, "throughput_ratio": round(ratio, 2)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for name, r in (("one writer alone", baseline), ("mixed load", mixed)):
            print(
                f"{name}: {r['writers']} writer(s), {r['verifiers']} verifier(s), "
                f"{r['readers']} reader(s) for {r['seconds']}s: {r['entries_per_s']} entries/s "
                f"({r['append_calls_per_s']} append calls/s), latency p50 "
                f"{r['latency_ms_p50']} ms p99 {r['latency_ms_p99']} ms max "
                f"{r['latency_ms_max']} ms; verifies {r['verifies']} over "
                f"{r['verified_entries']} entries; {r['snapshot_reads']} snapshot reads, "
                f"{r['inconsistent_snapshots']} inconsistent; errors {r['errors'] or 'none'}; "
                f"lost {r['lost_acknowledged_entries']}; seqs contiguous "
                f"{r['sequences_contiguous']}; final verify exit {r['final_verify']}"
            )
        print(f"mixed-load throughput / one writer alone: {ratio:.2f}x")
    ok = (
        mixed["lost_acknowledged_entries"] == 0
        and mixed["final_verify"] == 0
        and mixed["inconsistent_snapshots"] == 0
        and mixed["sequences_contiguous"]
        and not [k for k in mixed["errors"] if k != "ledger-locked"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
