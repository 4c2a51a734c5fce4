"""A program that embeds agentledger: ``ledger.verify()`` beside a busy Python thread.

    python benches/embedded_verify.py [--runs N] [--repeat R] [--json]

Each sample is a whole process, a program that opens the bulk bench's ledger (built by
``bulk_verify.py``, N runs of 100 entries), verifies it once (its imports then done) and
verifies it again, timed: (a) alone; (b) while another thread of the program runs Python
without pause, as a server's or an agent's loop does. The two alternate R times; medians
of the second verify and of the whole process. The ratio (b) / (a) is what the other
thread costs: each time a verify lets the GIL go, taking it back can wait for that
thread's switch interval (5 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bulk_verify
import installed


def program(path: Path, busy: bool) -> None:
    """The embedding program: prints the second verify's seconds."""
    from agentledger import Ledger

    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().code == 0
        if busy:
            threading.Thread(target=spin, daemon=True).start()
        started = time.perf_counter()
        report = ledger.verify()
        verify_s = time.perf_counter() - started
        stop.set()
        assert report.code == 0
    print(verify_s)


def sample(path: Path, busy: bool) -> tuple[float, float]:
    """One whole process: (the second verify, the process) in seconds."""
    argv = [sys.executable, __file__, "--program", str(path)] + (["--busy"] if busy else [])
    started = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1]), time.perf_counter() - started


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "--program":
        program(Path(sys.argv[2]), "--busy" in sys.argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
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
    samples: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(args.repeat):
        for busy in (False, True):
            samples[busy].append(sample(path, busy))
    alone, busy = (
        {
            "verify_s": round(statistics.median(v for v, _ in samples[side]), 3),
            "process_s": round(statistics.median(p for _, p in samples[side]), 3),
        }
        for side in (False, True)
    )
    result = {
        "entries": args.runs * 100,
        "repeat": args.repeat,
        "load": round(load, 2),
        "alone": alone,
        "beside_a_busy_thread": busy,
        "verify_ratio": round(busy["verify_s"] / alone["verify_s"], 2),
        "process_ratio": round(busy["process_s"] / alone["process_s"], 2),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"ledger.verify() of {result['entries']:,} entries, second call, medians of "
        f"{args.repeat} (load {load:.2f})"
    )
    print(
        f"  alone                  {alone['verify_s']:.3f} s (process {alone['process_s']:.3f} s)"
    )
    print(f"  beside a busy thread   {busy['verify_s']:.3f} s (process {busy['process_s']:.3f} s)")
    print(
        f"  the busy thread costs  {result['verify_ratio']:.2f}x the verify, "
        f"{result['process_ratio']:.2f}x the process"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
