"""Start-up: `agentledger --version`, `--help`, an append and a verify against a bare
interpreter.

    python benches/startup.py [--repeat R] [--json]

Each sample is a whole process (``subprocess.run``), the commands sampled in turn, R times;
the best of each is kept (a neighbour's burst slows one sample, not one side).
Target: ``--version`` and ``--help`` within 6x ``python -c pass``.

The verifies (``verify --all --json`` and the terminal report) read a ledger of one run
of one entry, made in a temporary folder: what they cost is nearly all start-up, the
modules a verify loads and the report it prints. ``append`` adds one durable entry to
another run of it each sample, as a script that records a step at a time does (its
fsync and signed checkpoint included).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import installed
from agentledger import Ledger

AGENTLEDGER = Path(sys.executable).parent / "agentledger"


def sample(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(commands: dict[str, list[str]], repeat: int) -> dict[str, float]:
    best = dict.fromkeys(commands, float("inf"))
    for _ in range(repeat):
        for name, argv in commands.items():
            best[name] = min(best[name], sample(argv))
    return best


def main() -> None:
    installed.compile_package()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        home, ledger = Path(scratch) / "home", Path(scratch) / "ledger.db"
        with Ledger.open(ledger, key_dir=home) as opened:
            opened.run("run-1").append("step", {"n": 1})
        verify = [str(AGENTLEDGER), "--home", str(home), "--ledger", str(ledger), "verify"]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "agentledger --version": [str(AGENTLEDGER), "--version"],
            "agentledger --help": [str(AGENTLEDGER), "--help"],
            "verify --all --json": [*verify, "--all", "--json"],
            "verify --all": [*verify, "--all"],
            "append": [*verify[:-1], "append", "steps", "step", '{"n": 1}'],
        }
        best = measure(commands, args.repeat)
    bare = best["python -c pass"]
    figures = {
        name: {"best_ms": round(seconds * 1000, 1), "ratio": round(seconds / bare, 2)}
        for name, seconds in best.items()
    }
    if args.json:
        print(json.dumps({"repeat": args.repeat, "figures": figures}, indent=2))
        return
    print(f"best of {args.repeat} whole-process runs each, sampled in turn:")
    for name, figure in figures.items():
        print(f"  {name:<24} {figure['best_ms']:>7.1f} ms  {figure['ratio']:>5.2f}x bare python")
    worst = max(figures["agentledger --version"]["ratio"], figures["agentledger --help"]["ratio"])
    print(f"target: within 6x bare python — {'met' if worst <= 6 else 'NOT met'} ({worst:.2f}x)")


if __name__ == "__main__":
    main()
