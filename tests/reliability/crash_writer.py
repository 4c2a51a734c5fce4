"""The writer the crash harness kills: random writes, each acknowledged once it returned.

It runs in a child process (``run_writer``) and writes one JSON line per operation to an
acknowledgement file: ``{"begin": n, ...}`` before the call and ``{"done": n, ...}`` with
what the call returned (sequence numbers, hashes, blob names) after it. A line is one
``os.write`` on an ``O_APPEND`` descriptor, and the parent reads every line the writer got
to write. A line longer than a page can still be cut by SIGKILL in the middle of that
write (Linux checks for fatal signals between pages; the 520-point run hit it once): each
writer starts with a newline, so a cut line stays alone, and a line that does not parse
is an acknowledgement the writer was still writing — its operation counts as in flight.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

OPERATIONS = {
    "append": 4,
    "append_many": 3,
    "research": 2,
    "data": 2,
    "blob": 2,
    "big_blob": 1,
    "checkpoint": 1,
}
"""Operations and their weights (a big blob takes long: weighted down, it would draw most
kills)."""


def _ack(fd: int, record: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())


def run_writer(ledger_path: str, key_home: str, ack_path: str, seed: int, first_op: int) -> None:
    """Write until killed. Operation numbers start at ``first_op`` (unique per ledger)."""
    os.environ["AGENTLEDGER_HOME"] = key_home
    from agentledger import Ledger
    from agentledger.checkpoint import take_checkpoint

    rng = random.Random(seed)
    fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, b"\n")  # ends a line the previous writer was killed in the middle of
    ledger = Ledger.open(ledger_path)
    _ack(fd, {"ready": seed})
    op = first_op
    while True:
        kind = rng.choices(list(OPERATIONS), weights=list(OPERATIONS.values()))[0]
        run_id = f"run-{rng.randrange(4)}"
        _ack(fd, {"begin": op, "kind": kind, "run": run_id})
        done: dict[str, Any] = {"done": op, "kind": kind, "run": run_id}
        if kind == "append":
            entry = ledger.run(run_id).append("step", {"op": op, "pad": "x" * rng.randrange(64)})
            done["entries"] = [[entry.seq, entry.hash]]
        elif kind == "append_many":
            items = [("step", {"op": op, "i": i}) for i in range(rng.randrange(1, 40))]
            entries = ledger.run(run_id).append_many(items)
            done["entries"] = [[e.seq, e.hash] for e in entries]
        elif kind == "research":
            research = ledger.run(run_id).research(f"research-{op}")
            page = f"<html>page {op} {rng.random()}</html>".encode()
            observation = research.fetch(f"https://example.org/{op}", page)
            entry = research.finish(artifact={"summary": f"op {op}"})
            done["entries"] = [[entry.seq, entry.hash]]
            done["blobs"] = [observation.content_hash]
        elif kind == "data":
            stage = ledger.run(run_id).data(f"data-{op}")
            stage.add_input("in.csv", f"id,v\n{op},{rng.random()}\n".encode())
            stage.plan([f"sum v for op {op}"])
            stage.add_output("out.csv", f"total\n{op}\n".encode())
            entry = stage.finish()
            done["entries"] = [[entry.seq, entry.hash]]
        elif kind == "blob":
            done["blobs"] = [ledger.blobs.put(rng.randbytes(rng.randrange(1, 4096)))]
        elif kind == "big_blob":
            # Larger than one chunk: several chunk rows must commit together.
            done["blobs"] = [ledger.blobs.put(rng.randbytes(rng.randrange(1 << 20, 3 << 20)))]
        else:
            stored = take_checkpoint(ledger)
            done["checkpoint"] = stored.checkpoint.size
        _ack(fd, done)
        op += 1


def read_acks(ack_path: Path) -> list[dict[str, Any]]:
    """Every complete acknowledgement line (a line cut by a kill is skipped)."""
    if not ack_path.exists():
        return []
    records = []
    for line in ack_path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # cut mid-write by the kill: not an acknowledgement
    return records


def run_archive(ledger_path: str, key_home: str, out: str) -> None:
    """Write an archive of every run (the crash harness kills this one too)."""
    os.environ["AGENTLEDGER_HOME"] = key_home
    from agentledger import Ledger
    from agentledger.archive import write_archive

    with Ledger.open(ledger_path, create=False) as ledger:
        write_archive(ledger, out, ledger.runs())
