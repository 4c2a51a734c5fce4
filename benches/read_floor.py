"""The read floor of a whole verify of native runs: every entry read, every byte hashed.

    .venv/bin/python benches/read_floor.py LEDGER

A process that reads the rows of ``entries`` a verify reads, in its order, through apsw,
and makes one BLAKE3 pass over their bytes; it prints how many rows it read. It imports
nothing else, so that as a whole process it is what no verify can go below: start-up,
the reads, the hashing. ``bulk_verify.py`` times it beside ``agentledger verify --all``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import apsw
import blake3


def floor(path: Path) -> tuple[int, float]:
    """Rows read and seconds taken."""
    started = time.perf_counter()
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    hasher = blake3.blake3()
    rows = 0
    batch: list[bytes] = []
    for row in conn.execute(
        "SELECT run_id, seq, kind, hash, bytes FROM entries ORDER BY run_id, seq"
    ):
        batch.append(row[4])
        rows += 1
        if len(batch) == 16_384:
            hasher.update(b"".join(batch))
            batch.clear()
    hasher.update(b"".join(batch))
    conn.close()
    return rows, time.perf_counter() - started


if __name__ == "__main__":
    print(floor(Path(sys.argv[1]))[0])
