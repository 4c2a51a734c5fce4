"""`log export` of a large workspace log: time and bytes, then a second export after more
appends, which must write only what changed. The baseline, measured in the same run, is
copying the export's bytes (one read and one write of each file).

    python benches/log_export.py [--entries N] [--more M] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from agentledger import Ledger
from agentledger.log_export import export


def _fill(ledger: Ledger, entries: int, start: int = 0) -> None:
    runs = [ledger.run(f"run-{i}") for i in range(100)]
    per_run = entries // len(runs)
    for run in runs:
        for at in range(start, start + per_run, 10_000):
            count = min(10_000, start + per_run - at)
            run.append_many([("step", {"n": at + i}) for i in range(count)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--more", type=int, default=1_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        Ledger.open(Path(tmp) / "ledger.db", key_dir=Path(tmp) / "keys") as ledger,
    ):
        _fill(ledger, args.entries)
        site = Path(tmp) / "site"
        started = time.perf_counter()
        first = export(ledger, site)
        first_seconds = time.perf_counter() - started
        started = time.perf_counter()
        shutil.copytree(site, Path(tmp) / "copy")
        copy_seconds = time.perf_counter() - started
        _fill(ledger, args.more, start=args.entries // 100)
        started = time.perf_counter()
        second = export(ledger, site)
        second_seconds = time.perf_counter() - started
    figures = {
        "entries": first.size,
        "first_export_s": round(first_seconds, 3),
        "first_export_bytes": first.bytes_written,
        "first_export_files": len(first.tiles) + len(first.entry_bundles) + 1,
        "copy_of_the_export_s": round(copy_seconds, 3),
        "export_over_copy": round(first_seconds / copy_seconds, 2),
        "appended": second.size - first.size,
        "second_export_s": round(second_seconds, 3),
        "second_export_bytes": second.bytes_written,
        "second_export_written": second.to_json()["written"],
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value in figures.items():
            print(f"{name:>24}  {value}")


if __name__ == "__main__":
    main()
