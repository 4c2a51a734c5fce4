"""A program that embeds agentledger, alone and beside a busy Python thread.

    python benches/embedded.py [--runs N] [--appends A] [--repeat R] [--bernstein DIR] [--json]

Each sample is a whole process, a program that uses the ledger as a library: (a) alone;
(b) while another thread of the program runs Python without pause, as a server's or an
agent's loop does. The two alternate R times; medians. Two programs:

- verify: opens the bulk bench's ledger (built by ``bulk_verify.py``, N runs of 100
  entries), verifies it once (its imports then done) and again, timed;
- append: appends A single entries to a run of a fresh ledger, each its own durable
  commit, timed one by one (the median append);
- with ``--bernstein DIR``: the verify again, ``compat="bernstein"``, of the bernstein
  workdir's import that ``bernstein_verify.py --profile light|heavy --keep DIR`` kept.

The ratio (b) / (a) is what the other thread costs: each time the library lets the GIL go,
taking it back can wait for that thread's switch interval (5 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import bulk_verify
import installed


def spinning() -> threading.Event:
    """Start a thread that runs Python without pause; set the event to stop it."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    threading.Thread(target=spin, daemon=True).start()
    return stop


def verify_program(path: Path, busy: bool, compat: str | None = None) -> float:
    """The second verify's seconds (``compat``: ``verify --compat`` of that peer)."""
    from agentledger import Ledger
    from agentledger.verify import VerifyOptions

    with Ledger.open(path, readonly=True) as ledger:
        first = ledger.verify(options=VerifyOptions(compat=compat)).code
        stop = spinning() if busy else None
        started = time.perf_counter()
        report = ledger.verify(options=VerifyOptions(compat=compat))
        verify_s = time.perf_counter() - started
        if stop is not None:
            stop.set()
        # The same verdict both times; a native ledger verifies clean (a peer's may not).
        assert report.code == first and (compat or first == 0), (first, report.code)
    return verify_s


def append_program(appends: int, busy: bool) -> float:
    """The median single durable append's seconds."""
    from agentledger import Ledger

    with tempfile.TemporaryDirectory() as scratch:
        os.environ["AGENTLEDGER_HOME"] = str(Path(scratch) / "home")
        with Ledger.open(Path(scratch) / "ledger.db") as ledger:
            run = ledger.run("run-1")
            for i in range(20):  # warm: imports, the key, the statement cache
                run.append("step", {"i": i})
            stop = spinning() if busy else None
            times = []
            for i in range(appends):
                started = time.perf_counter()
                run.append("step", {"i": i, "tool": "search", "ok": True})
                times.append(time.perf_counter() - started)
            if stop is not None:
                stop.set()
    return statistics.median(times)


def sample(program: list[str], busy: bool) -> tuple[float, float]:
    """One whole process: (its timed figure, the process) in seconds."""
    argv = [sys.executable, __file__, "--program", *program] + (["--busy"] if busy else [])
    started = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1]), time.perf_counter() - started


def measure(program: list[str], repeat: int) -> dict[str, Any]:
    samples: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(repeat):
        for busy in (False, True):
            samples[busy].append(sample(program, busy))
    alone, beside = (
        {
            "timed_s": statistics.median(v for v, _ in samples[side]),
            "process_s": round(statistics.median(p for _, p in samples[side]), 3),
        }
        for side in (False, True)
    )
    return {
        "alone": alone,
        "beside_a_busy_thread": beside,
        "ratio": round(beside["timed_s"] / alone["timed_s"], 2),
        "process_ratio": round(beside["process_s"] / alone["process_s"], 2),
    }


def main() -> int:
    if len(sys.argv) >= 4 and sys.argv[1] == "--program":
        busy = "--busy" in sys.argv[4:]
        if sys.argv[2] == "verify":
            print(verify_program(Path(sys.argv[3]), busy))
        elif sys.argv[2] == "compat":
            kept = Path(sys.argv[3])
            os.environ["AGENTLEDGER_HOME"] = str(kept / "home")
            print(verify_program(kept / "ledger.db", busy, compat="bernstein"))
        else:
            print(append_program(int(sys.argv[3]), busy))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2_000)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--bernstein",
        type=Path,
        metavar="DIR",
        help="also verify --compat bernstein the ledger `bernstein_verify.py --keep DIR` kept",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    home = bulk_verify.DATA / "home"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ["AGENTLEDGER_HOME"] = str(home)
    installed.compile_package()
    path = bulk_verify.DATA / f"bulk-v2-{args.runs}x100.db"
    if not path.exists():
        bulk_verify.build(path, args.runs, 100)

    load = os.getloadavg()[0]
    result = {
        "repeat": args.repeat,
        "load": round(load, 2),
        "verify": {"entries": args.runs * 100, **measure(["verify", str(path)], args.repeat)},
        "append": {"appends": args.appends, **measure(["append", str(args.appends)], args.repeat)},
    }
    if args.bernstein is not None:
        result["compat"] = measure(["compat", str(args.bernstein)], args.repeat)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    verify, append = result["verify"], result["append"]
    print(f"medians of {args.repeat} whole processes each side, alternated (load {load:.2f})")
    print(f"  ledger.verify() of {verify['entries']:,} entries, its second call:")
    _print(verify, lambda s: f"{s:.3f} s")
    print(f"  one durable append (median of {args.appends} in a process):")
    _print(append, lambda s: f"{s * 1000:.2f} ms")
    if "compat" in result:
        print(f"  ledger.verify(compat='bernstein') of {args.bernstein}, its second call:")
        _print(result["compat"], lambda s: f"{s:.3f} s")
    return 0


def _print(figures: dict[str, Any], shown: Any) -> None:
    alone, beside = figures["alone"], figures["beside_a_busy_thread"]
    print(
        f"    alone                  {shown(alone['timed_s'])} (process {alone['process_s']:.3f} s)"
    )
    busy = f"{shown(beside['timed_s'])} (process {beside['process_s']:.3f} s)"
    print(f"    beside a busy thread   {busy}")
    print(f"    the busy thread costs  {figures['ratio']:.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
