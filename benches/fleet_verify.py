"""`agentledger fleet verify` on a local Dask cluster against a sequential loop of
`agentledger verify --all` over the same files, side by side, whole processes.

    python benches/fleet_verify.py [--ledgers 64] [--entries 20000] [--workers N]
                                   [--repeat R] [--noop-tasks 400] [--json]

Each side is the command a user types: (a) ``agentledger fleet verify FOLDER --workers N``
(starting and stopping its local cluster); (b) ``for f in files: agentledger --ledger f
verify --all``; and, to tell process start-up from parallelism, (c) the same verifies one
after the other inside one Python process. All are sampled ``--repeat`` times,
alternately, keeping the best of each.
Then Dask's own cost, with no ledger in it: the local cluster's start and stop, one no-op
task's round trip, and a no-op task's cost when many are in flight.
The ledgers are built once per size under benches/.data/ (``append_many`` batches).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import installed
from agentledger import Ledger

DATA = Path(__file__).parent / ".data"
AGENTLEDGER = [
    sys.executable,
    "-c",
    "import sys; from agentledger.cli import main; sys.exit(main())",
]
BATCH = 5_000
RUNS_PER_LEDGER = 20


def build(folder: Path, ledgers: int, entries: int) -> None:
    started = time.perf_counter()
    per_run = max(1, entries // RUNS_PER_LEDGER)
    for index in range(ledgers):
        path = folder / f"ws-{index:03d}.db"
        with Ledger.open(path, key_dir=folder / "keys") as ledger:
            written = 0
            run_index = 0
            while written < entries:
                run = ledger.run(f"run-{run_index:04d}")
                left = min(per_run, entries - written)
                for first in range(0, left, BATCH):
                    count = min(BATCH, left - first)
                    run.append_many(
                        [
                            ("step", {"n": first + i, "tool": "edit", "path": f"src/f{i % 17}.py"})
                            for i in range(count)
                        ]
                    )
                written += left
                run_index += 1
        if index % 16 == 15:
            print(f"  built {index + 1} ledgers", file=sys.stderr)
    print(f"built in {time.perf_counter() - started:.1f}s", file=sys.stderr)


def dataset(ledgers: int, entries: int) -> Path:
    folder = DATA / f"fleet-{ledgers}x{entries}"
    done = folder / ".built"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        build(folder, ledgers, entries)
        done.touch()
    return folder


def timed(
    command: list[str], env: dict[str, str]
) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - started, done


def run_fleet(folder: Path, workers: int, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    command = [*AGENTLEDGER, "fleet", "verify", str(folder), "--workers", str(workers), "--json"]
    seconds, done = timed(command, env)
    if done.returncode != 0:
        raise SystemExit(f"fleet verify exited {done.returncode}: {done.stdout[-3000:]}")
    return seconds, json.loads(done.stdout)


def run_sequential(files: list[Path], env: dict[str, str]) -> float:
    started = time.perf_counter()
    for path in files:
        done = subprocess.run(
            [*AGENTLEDGER, "--ledger", str(path), "verify", "--all"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"verify {path} exited {done.returncode}: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def run_in_process(files: list[Path], home: Path) -> float:
    """(c) The same verifies one after the other in one process, each on every core: the
    work itself, without a process start per file."""
    from agentledger.verify import VerifyOptions

    started = time.perf_counter()
    for path in files:
        with Ledger.open(path, create=False, readonly=True, key_dir=home) as ledger:
            if ledger.verify(options=VerifyOptions(jobs=0)).code != 0:
                raise SystemExit(f"{path} did not verify clean")
    return time.perf_counter() - started


def noop(value: int) -> int:
    return value


def dask_overhead(workers: int, tasks: int) -> dict[str, float]:
    """Dask's own cost per task and per cluster, with nothing verified."""
    from distributed import Client, LocalCluster

    started = time.perf_counter()
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    client = Client(cluster, set_as_default=False)
    client.gather(client.map(noop, range(workers * 4), pure=False))  # workers warmed up
    start_s = time.perf_counter() - started
    round_trips = 50
    started = time.perf_counter()
    for value in range(round_trips):
        client.submit(noop, value, pure=False).result()
    round_trip_s = (time.perf_counter() - started) / round_trips
    started = time.perf_counter()
    client.gather(client.map(noop, range(tasks), pure=False))
    in_flight_s = (time.perf_counter() - started) / tasks
    started = time.perf_counter()
    client.close()
    cluster.close()
    close_s = time.perf_counter() - started
    return {
        "cluster_start_s": round(start_s, 3),
        "cluster_close_s": round(close_s, 3),
        "round_trip_ms": round(round_trip_s * 1000, 3),
        "per_task_in_flight_ms": round(in_flight_s * 1000, 3),
    }


def main() -> None:
    installed.compile_package()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledgers", type=int, default=64)
    parser.add_argument("--entries", type=int, default=20_000, help="entries per ledger")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--noop-tasks", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    folder = dataset(args.ledgers, args.entries)
    files = sorted(folder.glob("ws-*.db"))
    env = {**os.environ, "AGENTLEDGER_HOME": str(folder / "keys")}
    fleet_s: list[float] = []
    sequential_s: list[float] = []
    in_process_s: list[float] = []
    report: dict[str, Any] = {}
    os.environ["AGENTLEDGER_HOME"] = str(folder / "keys")
    for _ in range(max(1, args.repeat)):
        seconds, report = run_fleet(folder, args.workers, env)
        fleet_s.append(seconds)
        sequential_s.append(run_sequential(files, env))
        in_process_s.append(run_in_process(files, folder / "keys"))
    overhead = dask_overhead(args.workers, args.noop_tasks)

    best_fleet, best_sequential = min(fleet_s), min(sequential_s)
    best_in_process = min(in_process_s)
    task_s = sum(entry["elapsed_s"] for entry in report["ledgers"])
    results = {
        "ledgers": len(files),
        "entries_per_ledger": args.entries,
        "workers": args.workers,
        "cores": os.cpu_count(),
        "fleet_s": round(best_fleet, 3),
        "sequential_s": round(best_sequential, 3),
        "fleet_files_per_s": round(len(files) / best_fleet, 2),
        "sequential_files_per_s": round(len(files) / best_sequential, 2),
        "ratio": round(best_sequential / best_fleet, 2),
        "in_process_s": round(best_in_process, 3),
        "ratio_to_in_process": round(best_in_process / best_fleet, 2),
        "fleet_tasks_s": round(task_s, 3),
        "fleet_task_mean_ms": round(task_s / len(files) * 1000, 2),
        "fleet_beyond_tasks_s": round(best_fleet - task_s / args.workers, 3),
        "sequential_per_file_ms": round(best_sequential / len(files) * 1000, 2),
        "dask": overhead,
        "load_average": os.getloadavg()[0],
        "samples": {"fleet_s": fleet_s, "sequential_s": sequential_s, "in_process_s": in_process_s},
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{len(files)} ledgers x {args.entries:,} entries, {args.workers} workers, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"  fleet verify (local cluster) {best_fleet:8.2f}s  "
          f"{results['fleet_files_per_s']:7.2f} files/s")  # fmt: skip
    print(f"  sequential verify --all      {best_sequential:8.2f}s  "
          f"{results['sequential_files_per_s']:7.2f} files/s")  # fmt: skip
    print(f"  ratio (sequential / fleet)   {results['ratio']:8.2f}x")
    print(f"  one process, verify after verify (jobs=0) {best_in_process:.2f}s: "
          f"{results['ratio_to_in_process']:.2f}x the fleet's time")  # fmt: skip
    print(f"  fleet: tasks {task_s:.2f}s in all ({results['fleet_task_mean_ms']:.1f} ms each); "
          f"beyond the tasks / workers: {results['fleet_beyond_tasks_s']:.2f}s; "
          f"sequential: {results['sequential_per_file_ms']:.1f} ms a file")  # fmt: skip
    print(f"  dask: local cluster start {overhead['cluster_start_s']:.2f}s, close "
          f"{overhead['cluster_close_s']:.2f}s; a no-op task {overhead['round_trip_ms']:.2f} ms "
          f"round trip, {overhead['per_task_in_flight_ms']:.2f} ms each with "
          f"{args.noop_tasks} in flight")  # fmt: skip


if __name__ == "__main__":
    main()
