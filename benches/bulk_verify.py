"""Bulk verify against a pure-Python verifier and against the floor, side by side in one run.

    python benches/bulk_verify.py [--runs N] [--entries-per-run M] [--repeat R] [--json]

Whole processes, as users run them: (a) ``agentledger --ledger L verify --all``; (b) the
pure-Python baseline (benches/baseline_verifier.py) in a process of its own; (c) the
floor: a process that reads the same rows through apsw and makes one BLAKE3 pass over
their bytes, importing nothing else (``read_floor.py L``). (a) and (c) alternate R times
(medians, and peak RSS from ``wait4``); (b), which takes ten times longer, runs once.

Then the same in one process (``ledger.verify()`` against the floor function, best of R):
what the verify itself costs without the interpreter's start-up and imports.
The ledger is built once per size under benches/.data/ and reused.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import baseline_verifier
import installed
from agentledger import Ledger, _core
from figures import print_figures
from read_floor import floor

DATA = Path(__file__).parent / ".data"


def build(path: Path, runs: int, per_run: int) -> None:
    rng = random.Random(42)
    started = time.perf_counter()
    with Ledger.open(path) as ledger:
        # Evidence is stored (verify checks every pinned hash names a blob) and shared:
        # one pool of small blobs, one per run, that the activity entries draw from.
        pool = [ledger.blobs.put(rng.randbytes(64)) for _ in range(runs)]
        for n in range(runs):
            items: list[tuple[str, dict[str, Any]]] = []
            for i in range(per_run):
                if i % 3 == 2:
                    hashes = rng.sample(pool, min(len(pool), rng.randint(2, 6)))
                    body = {
                        "stage_id": f"s-{i}",
                        "kind": "research",
                        "terminal_state": "completed",
                        "reason_code": "ok",
                        "observations": [
                            {"kind": "page", "ref": f"https://example.org/{j}", "content_hash": h}
                            for j, h in enumerate(hashes)
                        ],
                        "evidence_set_hash": _core.evidence_set_hash(hashes),
                    }
                    items.append(("activity.result", body))
                else:
                    items.append(("step", {"n": i, "tool": "edit", "path": f"src/f{i % 17}.py"}))
            # Below ``append_many``, which keeps ``activity.*`` kinds for the activity
            # boundary: the same entries the bench wrote before that (its figures compare).
            with ledger.db.write() as conn:
                ledger.run(f"run-{n:06d}")._append_locked(conn, items)
            if n % 1000 == 999:
                print(f"  built {n + 1:,} runs", file=sys.stderr)
    print(f"built in {time.perf_counter() - started:.1f}s", file=sys.stderr)


AGENTLEDGER = Path(sys.executable).parent / "agentledger"


def process(argv: list[str]) -> tuple[float, float]:
    """One whole process: its wall time and peak RSS (MB), output discarded."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {child.returncode}")
    return wall, usage.ru_maxrss / 1024


def python_process(path: Path) -> None:
    entries, divergences = baseline_verifier.verify(str(path))
    assert divergences == 0, divergences
    print(entries)


def whole_processes(path: Path, repeat: int) -> dict[str, Any]:
    """``agentledger verify --all`` and the floor process, alternated; the Python
    baseline's process once."""
    verify = [str(AGENTLEDGER), "--ledger", str(path), "verify", "--all"]
    floor_argv = [sys.executable, str(Path(__file__).parent / "read_floor.py"), str(path)]
    verify_samples, floor_samples = [], []
    for _ in range(repeat):
        floor_samples.append(process(floor_argv))
        verify_samples.append(process(verify))
    python_s, python_rss = process([sys.executable, __file__, "--python", str(path)])
    verify_s = statistics.median(wall for wall, _ in verify_samples)
    floor_s = statistics.median(wall for wall, _ in floor_samples)
    return {
        "process_verify_s": round(verify_s, 3),
        "process_floor_s": round(floor_s, 3),
        "process_python_s": round(python_s, 3),
        "process_ratio_to_floor": round(verify_s / floor_s, 3),
        "process_speedup_vs_python": round(python_s / verify_s, 2),
        "process_verify_samples_s": [round(wall, 3) for wall, _ in verify_samples],
        "process_floor_samples_s": [round(wall, 3) for wall, _ in floor_samples],
        "process_verify_peak_rss_mb": round(max(rss for _, rss in verify_samples), 1),
        "process_floor_peak_rss_mb": round(max(rss for _, rss in floor_samples), 1),
        "process_python_peak_rss_mb": round(python_rss, 1),
    }


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--python":
        # The Python baseline as a process of its own (see whole_processes).
        python_process(Path(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--entries-per-run", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument(
        "--repeat", type=int, default=3, help="floor and verify samples, alternated (best kept)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    DATA.mkdir(exist_ok=True)
    # The bench ledger's checkpoints are signed by a key kept beside it, so a reused ledger
    # verifies whatever install key the user running the bench has.
    home = DATA / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    os.environ["AGENTLEDGER_HOME"] = str(home)
    installed.compile_package()
    path = DATA / f"bulk-v2-{args.runs}x{args.entries_per_run}.db"
    if not path.exists():
        build(path, args.runs, args.entries_per_run)

    # Warm the page cache once so that all three read the same hot file.
    floor(path)
    load = os.getloadavg()[0]
    processes = whole_processes(path, args.repeat)
    # Floor and verify alternate, and each keeps its best time: on a shared machine a
    # neighbour's burst then slows one sample of either, not the whole comparison.
    floor_samples: list[float] = []
    verify_samples: list[tuple[float, float]] = []
    for _ in range(args.repeat):
        rows, floor_s = floor(path)
        floor_samples.append(floor_s)
        with Ledger.open(path) as ledger:
            started, cpu = time.perf_counter(), time.process_time()
            report = ledger.verify(jobs=args.jobs)
            verify_samples.append((time.perf_counter() - started, time.process_time() - cpu))
        summary = {k: v for k, v in report.to_json().items() if k not in {"results", "failures"}}
        assert report.code == 0 and report.entries == rows, summary
    rss_after_verify = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    floor_s = min(floor_samples)
    verify_s, verify_cpu_s = min(verify_samples)

    started = time.perf_counter()
    entries, divergences = baseline_verifier.verify(str(path))
    python_s = time.perf_counter() - started
    assert entries == rows and divergences == 0

    result = {
        "entries": rows,
        "runs": args.runs,
        **processes,
        "in_process_verify_s": round(verify_s, 3),
        "in_process_python_s": round(python_s, 3),
        "in_process_floor_s": round(floor_s, 3),
        "in_process_speedup_vs_python": round(python_s / verify_s, 2),
        "in_process_ratio_to_floor": round(verify_s / floor_s, 3),
        "in_process_entries_per_s": round(rows / verify_s),
        "in_process_peak_rss_mb": round(rss_after_verify, 1),
        # The figures are wall time: on a shared machine, read them with the load.
        "in_process_verify_cpu_s": round(verify_cpu_s, 3),
        "in_process_verify_samples_s": [round(wall, 3) for wall, _ in verify_samples],
        "in_process_floor_samples_s": [round(wall, 3) for wall in floor_samples],
        "load_avg_1m_at_start": round(load, 2),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
        "ledger_mb": round(path.stat().st_size / 2**20, 1),
    }
    print_figures(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
