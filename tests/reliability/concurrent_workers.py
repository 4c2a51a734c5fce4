"""Processes the concurrency tests run side by side: writers, verifiers, snapshot readers.

Each writes one JSON line per event to its own output file; the test reads them all back.
None of them lets an exception escape unrecorded: a typed ``AgentLedgerError`` is recorded
with its code, anything else (a raw "database is locked" included) as a ``crash``.
"""

from __future__ import annotations

import json
import os
import random
import time
import traceback
from pathlib import Path
from typing import Any


def _writer(out_path: str) -> Any:
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def emit(record: dict[str, Any]) -> None:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())

    return emit


def _wait_for(go_path: str) -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(go_path):
        if time.monotonic() > deadline:
            raise TimeoutError("never told to go")
        time.sleep(0.001)


def append_worker(
    ledger_path: str,
    key_home: str,
    out_path: str,
    run_ids: list[str],
    count: int,
    seed: int,
    go_path: str,
) -> None:
    """``count`` appends (single or batched) to runs drawn from ``run_ids``."""
    os.environ["AGENTLEDGER_HOME"] = key_home
    from agentledger import Ledger
    from agentledger.errors import AgentLedgerError

    emit = _writer(out_path)
    rng = random.Random(seed)
    with Ledger.open(ledger_path, create=False) as ledger:
        _wait_for(go_path)
        for i in range(count):
            run_id = rng.choice(run_ids)
            started = time.perf_counter()
            try:
                run = ledger.run(run_id)
                if rng.random() < 0.7:
                    entries = [run.append("step", {"writer": seed, "i": i})]
                else:
                    size = rng.randrange(2, 12)
                    entries = run.append_many(
                        [("step", {"writer": seed, "i": i, "j": j}) for j in range(size)]
                    )
                emit(
                    {
                        "run": run_id,
                        "entries": [[e.seq, e.hash] for e in entries],
                        "latency": time.perf_counter() - started,
                    }
                )
            except AgentLedgerError as exc:
                emit({"error": exc.code, "message": exc.message})
            except Exception:
                emit({"crash": traceback.format_exc()})
        emit({"finished": seed})


def verify_worker(ledger_path: str, key_home: str, out_path: str, stop_path: str) -> None:
    """Bulk verify, then verify of named runs, over and over until told to stop."""
    os.environ["AGENTLEDGER_HOME"] = key_home
    from agentledger import Ledger
    from agentledger.errors import AgentLedgerError

    emit = _writer(out_path)
    with Ledger.open(ledger_path, create=False) as ledger:
        rounds = 0
        while not os.path.exists(stop_path) or rounds < 2:
            try:
                runs = ledger.runs()[:3] if rounds % 2 else None
                report = ledger.verify(runs, jobs=2 if runs is None else 1)
                found = [d.to_json() for d in report.workspace] + [
                    d.to_json() for run in report.runs for d in run.divergences
                ]
                emit({"verify": report.code, "entries": report.entries, "found": found[:3]})
            except AgentLedgerError as exc:
                emit({"error": exc.code, "message": exc.message})
            except Exception:
                emit({"crash": traceback.format_exc()})
            rounds += 1


def snapshot_reader(ledger_path: str, key_home: str, out_path: str, stop_path: str) -> None:
    """Inside one read snapshot, the runs table, the entries and the log agree."""
    os.environ["AGENTLEDGER_HOME"] = key_home
    from agentledger import Ledger
    from agentledger.errors import AgentLedgerError

    emit = _writer(out_path)
    with Ledger.open(ledger_path, create=False, readonly=True) as ledger:
        reads = 0
        while not os.path.exists(stop_path) or reads < 2:
            try:
                with ledger.db.snapshot() as conn:
                    problems = _snapshot_problems(conn)
                emit({"read": reads, "problems": problems})
            except AgentLedgerError as exc:
                emit({"error": exc.code, "message": exc.message})
            except Exception:
                emit({"crash": traceback.format_exc()})
            reads += 1


def _snapshot_problems(conn: Any) -> list[str]:
    problems = []
    heads = conn.execute(
        "SELECT r.run_id, r.head_seq, count(e.seq), coalesce(max(e.seq), -1) "
        "FROM runs r LEFT JOIN entries e ON e.run_id = r.run_id GROUP BY r.run_id"
    ).fetchall()
    for run_id, head_seq, count, top in heads:
        if not head_seq == top == count - 1:
            problems.append(f"{run_id}: head {head_seq}, {count} entries, top seq {top}")
    total = conn.execute("SELECT count(*), coalesce(max(leaf), -1) FROM entries").fetchall()[0]
    size = conn.execute("SELECT size FROM log_state WHERE id = 1").fetchall()[0][0]
    if not size == total[0] == total[1] + 1:
        problems.append(f"log size {size}, {total[0]} entries, top leaf {total[1]}")
    newest = conn.execute("SELECT max(size) FROM checkpoints").fetchall()[0][0]
    if total[0] and newest != size:
        problems.append(f"newest checkpoint covers {newest} leaves of {size}")
    return problems


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]
