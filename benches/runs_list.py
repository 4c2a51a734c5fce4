"""`agentledger runs` on a large workspace: whole-process time and peak memory.

    python benches/runs_list.py [--runs N] [--entries E] [--repeat R] [--ledger PATH] [--json]

Builds (once; reused with --ledger) a ledger of N runs x E entries, a third of the runs
verified, then times as whole processes, best of R each, sampled in turn:

(a) ``python -c pass`` (the interpreter's start, for scale);
(b) ``agentledger runs --jsonl`` (every run, one JSON object a line, to a pipe);
(c) ``agentledger runs --limit 20`` (the table of the first runs);
(d) ``agentledger runs --status diverged --jsonl``.

Peak RSS is the child's ``ru_maxrss``. Target: (b) for 150,000 runs within 2 s, memory
bounded (not proportional to the runs).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import installed
from agentledger import Ledger

AGENTLEDGER = Path(sys.executable).parent / "agentledger"
RUNS_PER_TRANSACTION = 5_000


def build(path: Path, runs: int, entries: int) -> None:
    with Ledger.open(path) as ledger:
        for first in range(0, runs, RUNS_PER_TRANSACTION):
            with ledger.db.write():
                for n in range(first, min(runs, first + RUNS_PER_TRANSACTION)):
                    ledger.run(f"run-{n:07d}").append_many(
                        [("step", {"n": i, "tool": "edit"}) for i in range(entries)]
                    )


TIME = Path("/usr/bin/time")


def sample(argv: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """(seconds, peak RSS in KiB, bytes written to stdout) of one whole process.

    The peak comes from GNU time's ``%M`` when it is installed: ``ru_maxrss`` of a child
    this process forks can count the fork's copy of the parent.
    """
    wrapped = [str(TIME), "-f", "%M", *argv] if TIME.exists() else argv
    started = time.perf_counter()
    with subprocess.Popen(
        wrapped, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        written = 0
        while chunk := process.stdout.read(1 << 20):
            written += len(chunk)
        err = process.stderr.read().decode()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{argv}: exit {process.returncode}: {err[-500:]}")
    peak = int(err.split()[-1]) if TIME.exists() else usage.ru_maxrss
    return elapsed, peak, written


def main() -> None:
    installed.compile_package()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=150_000)
    parser.add_argument("--entries", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ledger", type=Path, help="Build here once and reuse it.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    path = args.ledger or Path(tempfile.mkdtemp(prefix="runs-bench-")) / "ledger.db"
    folder = path.parent / f"{path.name}.bench"  # its keys and verify notes, kept for reuse
    env = {
        **os.environ,
        "AGENTLEDGER_HOME": str(folder / "keys"),
        "AGENTLEDGER_CACHE": str(folder / "cache"),
        "AGENTLEDGER_LEDGER": str(path),
    }
    os.environ.update({k: env[k] for k in ("AGENTLEDGER_HOME", "AGENTLEDGER_CACHE")})
    if not path.exists():
        started = time.perf_counter()
        build(path, args.runs, args.entries)
        print(f"built {args.runs:,} runs x {args.entries} in {time.perf_counter() - started:.1f}s",
              file=sys.stderr)  # fmt: skip
        # A verify of a third of the runs, so that statuses are read and joined.
        verified = [f"run-{n:07d}" for n in range(0, args.runs, 3)]
        subprocess.run([str(AGENTLEDGER), "verify", *verified[:20_000]], env=env,
                       stdout=subprocess.DEVNULL, check=False)  # fmt: skip
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "runs --jsonl": [str(AGENTLEDGER), "runs", "--jsonl"],
        "runs --limit 20": [str(AGENTLEDGER), "runs", "--limit", "20"],
        "runs --status diverged --jsonl": [str(AGENTLEDGER), "runs", "--status", "diverged",
                                           "--jsonl"],
    }  # fmt: skip
    best = {name: (float("inf"), 0, 0) for name in commands}
    for _ in range(args.repeat):
        for name, argv in commands.items():
            seconds, rss, written = sample(argv, env)
            if seconds < best[name][0]:
                best[name] = (seconds, rss, written)
    figures = {
        name: {"best_s": round(s, 3), "peak_rss_mib": round(rss / 1024, 1), "stdout_bytes": w}
        for name, (s, rss, w) in best.items()
    }
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if args.json:
        print(json.dumps({"runs": args.runs, "repeat": args.repeat, "figures": figures}, indent=2))
        return
    print(f"{args.runs:,} runs, best of {args.repeat} whole-process runs each, sampled in turn:")
    for name, figure in figures.items():
        rss, out = figure["peak_rss_mib"], figure["stdout_bytes"]
        print(f"  {name:<32} {figure['best_s']:>7.3f} s  peak RSS {rss:>6.1f} MiB"
              f"  stdout {out:>12,} bytes")  # fmt: skip
    jsonl = figures["runs --jsonl"]
    verdict = "met" if jsonl["best_s"] <= 2.0 else "NOT met"
    print(
        f"target: runs --jsonl within 2 s — {verdict} ({jsonl['best_s']:.2f} s, "
        f"{jsonl['peak_rss_mib']:.0f} MiB peak; the bench's own {self_rss / 1024:.0f} MiB)"
    )


if __name__ == "__main__":
    main()
