"""Importing a bernstein workdir, side by side with the floor of what any import does.

    .venv/bin/python benches/import_bernstein.py [--profile light|heavy] [--repeat R]
                                                 [--cache DIR] [--json]

The workdir is the one ``bernstein_verify.py --profile P`` uses, written by bernstein
3.23.0's own writers (cached there, made once). Two whole processes, alternated R times,
each into a fresh file (medians; peak RSS from ``wait4``):

- ``agentledger --ledger NEW import bernstein WORKDIR``, with a fresh home: the import,
  then the verify by bernstein's rules of the runs it brought in, as users run it;
- the floor (``import_floor.py WORKDIR NEW``): a process that lists the workdir, reads
  every file, hashes it with SHA-256 and stores path, digest and bytes in a fresh SQLite
  file (WAL, ``synchronous=FULL``), in one transaction: the reading, hashing and durable
  writing any import does, and none of the checks; it imports nothing else.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import bernstein_peer as peer_code
import bernstein_verify
from figures import print_figures

FLOOR = Path(__file__).parent / "import_floor.py"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", choices=sorted(bernstein_verify.PROFILES), default="light")
    parser.add_argument("--repeat", type=int, default=3, help="samples of each, alternated")
    parser.add_argument("--seed", type=int, default=peer_code.DEFAULT_SEED)
    parser.add_argument("--cache", type=Path, default=peer_code.DEFAULT_CACHE)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    args = parser.parse_args()
    args.runs, args.rows = bernstein_verify.PROFILES[args.profile]
    python = sys.executable
    agentledger = Path(python).with_name("agentledger")
    if not agentledger.exists():
        sys.exit(f"{agentledger} is missing: run `make setup` first")
    workdir = bernstein_verify.prepare_workdir(args, python)
    samples: dict[str, list[bernstein_verify.Sample]] = {"import": [], "floor": []}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for n in range(args.repeat):
            # The floor first: it also warms the page cache for the first import.
            commands = {
                "floor": [python, str(FLOOR), str(workdir.path), str(scratch / "f.db")],
                "import": [
                    str(agentledger),
                    "--home",
                    str(scratch / f"home-{n}"),
                    "--ledger",
                    str(scratch / "l.db"),
                    "import",
                    "bernstein",
                    str(workdir.path),
                ],
            }
            for name, command in commands.items():
                for leftover in scratch.glob(("f" if name == "floor" else "l") + ".db*"):
                    leftover.unlink()
                sample = bernstein_verify.run_process(command, scratch, name, args.timeout)
                if sample.code != 0:
                    sys.exit(sample.failure(name))
                samples[name].append(sample)
    imported = statistics.median(s.wall_s for s in samples["import"])
    floored = statistics.median(s.wall_s for s in samples["floor"])
    result: dict[str, Any] = {
        "profile": args.profile,
        "workdir": str(workdir.path),
        "files": int(samples["floor"][0].stdout.strip()),
        "peer_wrote_it": not workdir.reference,
        "import_s": round(imported, 3),
        "floor_s": round(floored, 3),
        "import_over_floor": round(imported / floored, 2),
        "import_samples_s": [round(s.wall_s, 3) for s in samples["import"]],
        "floor_samples_s": [round(s.wall_s, 3) for s in samples["floor"]],
        "import_peak_rss_mb": round(max(s.peak_rss_mb for s in samples["import"]), 1),
        "floor_peak_rss_mb": round(max(s.peak_rss_mb for s in samples["floor"]), 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }
    print_figures(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
