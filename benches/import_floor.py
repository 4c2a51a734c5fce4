"""The floor of any import of a workdir: every file read, hashed and stored durably.

    .venv/bin/python benches/import_floor.py WORKDIR NEW

A process that lists ``WORKDIR``, reads every file, hashes it with SHA-256 and stores
path, digest and bytes in the fresh SQLite file ``NEW`` (WAL, ``synchronous=FULL``), in
one transaction, and prints how many files there were: the reading, hashing and durable
writing any import does, and none of the checks. It imports nothing else, so that as a
whole process it is what no import can go below. ``import_bernstein.py`` times it beside
``agentledger import bernstein``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import apsw


def floor(workdir: Path, target: Path) -> int:
    """Read, hash and store every file of ``workdir``; how many there were."""
    conn = apsw.Connection(str(target))
    conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE files (path TEXT PRIMARY KEY, digest TEXT, data BLOB) STRICT")
    count = 0
    with conn:
        for folder, _, names in os.walk(workdir):
            for name in names:
                path = os.path.join(folder, name)
                with open(path, "rb") as handle:
                    data = handle.read()
                digest = "sha256:" + hashlib.sha256(data).hexdigest()
                conn.execute(
                    "INSERT INTO files VALUES (?, ?, ?)",
                    (os.path.relpath(path, workdir), digest, data),
                )
                count += 1
    conn.close()
    return count


if __name__ == "__main__":
    print(floor(Path(sys.argv[1]), Path(sys.argv[2])))
