"""A demo workspace: thousands of runs, a few corrupted on purpose, and the report that finds them.

Each corruption is done the way an attacker with write access to the file would do it
(plain SQL on the tables), and ``plant_corruptions`` returns what verify must find.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from agentledger import _core
from agentledger.ledger import Ledger

ENTRIES_PER_RUN = 24
MIN_RUNS = 10
"""Five corrupted runs, each from its own fifth of the workspace, need two runs a fifth."""
RUNS_PER_TRANSACTION = 250


@dataclass(frozen=True)
class Corruption:
    """One planted change: which run (or the workspace), and the check that must catch it."""

    run_id: str | None
    check: str
    how: str
    in_log: bool = False
    """Also a finding of the workspace: the change left a gap in the workspace log."""


def activity_body(ledger: Ledger, rng: random.Random, stage: int) -> dict[str, Any]:
    """A research-like activity result whose observations are real blobs in the store."""
    observations = []
    for page in range(rng.randint(1, 3)):
        content = f"<html>stage {stage} page {page} {rng.random()}</html>".encode()
        observations.append(
            {
                "kind": "page",
                "ref": f"https://example.org/{stage}/{page}",
                "content_hash": _core.blake3_hex(content),
            }
        )
        ledger.blobs.put(content)
    return {
        "stage_id": f"research-{stage}",
        "kind": "research",
        "terminal_state": "completed",
        "reason_code": "ok",
        "evidence_set_hash": _core.evidence_set_hash([o["content_hash"] for o in observations]),
        "observations": observations,
    }


def build_workspace(ledger: Ledger, runs: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for first in range(0, runs, RUNS_PER_TRANSACTION):
        # One durable transaction per group of runs: the demo measures verify, not fsync.
        with ledger.db.write():
            for n in range(first, min(runs, first + RUNS_PER_TRANSACTION)):
                _build_run(ledger, rng, n)


def _build_run(ledger: Ledger, rng: random.Random, n: int) -> None:
    run = ledger.run(f"run-{n:05d}")
    items: list[tuple[str, dict[str, Any]]] = [("task_claimed", {"task": f"t-{n}"})]
    for step in range(1, ENTRIES_PER_RUN):
        if step % 8 == 0:
            items.append(("activity.result", activity_body(ledger, rng, step)))
        else:
            items.append(("step", {"n": step, "tool": rng.choice(["read", "edit", "test"])}))
    # Generated results, not the boundary's decisions (nothing mirrored): written below
    # `append`, which keeps `activity.*` for the boundary, in the caller's transaction.
    with ledger.db.write() as conn:
        run._append_locked(conn, items)


def _rechain(ledger: Ledger, run_id: str, from_seq: int) -> None:
    """Recompute every hash of a run from ``from_seq`` on, as a careful attacker would."""
    conn = ledger.db.conn
    rows = conn.execute(
        "SELECT seq, bytes FROM entries WHERE run_id = ? AND seq >= ? ORDER BY seq",
        (run_id, from_seq),
    ).fetchall()
    prev_row = conn.execute(
        "SELECT hash FROM entries WHERE run_id = ? AND seq = ?", (run_id, from_seq - 1)
    ).fetchall()
    prev = "blake3:" + prev_row[0][0].hex() if prev_row else _core.genesis_prev(ledger.id, run_id)
    for seq, raw in rows:
        doc = json.loads(raw)
        doc["prev"] = prev
        new = _core.canonicalize(doc)
        digest = _core.entry_hash(new)
        conn.execute(
            "UPDATE entries SET bytes = ?, hash = ? WHERE run_id = ? AND seq = ?",
            (new, digest, run_id, seq),
        )
        prev = "blake3:" + digest.hex()
    conn.execute(
        "UPDATE runs SET head_hash = ? WHERE run_id = ?", (bytes.fromhex(prev[7:]), run_id)
    )


def plant_corruptions(ledger: Ledger) -> list[Corruption]:
    """Damage a handful of runs and one blob; return what verify must report."""
    runs = ledger.runs()
    if len(runs) < MIN_RUNS:
        raise ValueError(f"the demo needs at least {MIN_RUNS} runs, not {len(runs)}")
    # One run from each fifth of the workspace (distinct for any size >= MIN_RUNS).
    offset = min(3, len(runs) // 5 - 1)
    pick = [runs[i * len(runs) // 5 + offset] for i in range(5)]
    conn = ledger.db.conn
    planted = []
    with ledger.db.write():
        raw = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = ? AND seq = 3", (pick[0],)
        ).fetchall()[0][0]
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = 3",
            (raw.replace(b'"tool":"', b'"tool":"rm -rf /;'), pick[0]),
        )
        planted.append(Corruption(pick[0], "entry.hash", "edited the body of step 3"))

        conn.execute("DELETE FROM entries WHERE run_id = ? AND seq = 5", (pick[1],))
        planted.append(Corruption(pick[1], "chain.gap", "deleted step 5", in_log=True))

        raw = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = ? AND seq = 8", (pick[2],)
        ).fetchall()[0][0]
        doc = json.loads(raw)
        doc["body"]["observations"][0]["content_hash"] = _core.blake3_hex(b"a forged page")
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = 8",
            (_core.canonicalize(doc), pick[2]),
        )
        _rechain(ledger, pick[2], 8)
        planted.append(
            Corruption(
                pick[2],
                "activity.evidence_set_hash",
                "swapped an observation hash and recomputed the whole chain",
            )
        )

        conn.execute("UPDATE runs SET head_seq = head_seq - 1 WHERE run_id = ?", (pick[3],))
        planted.append(Corruption(pick[3], "run.head_seq", "edited the run's head cache"))

        digest = conn.execute("SELECT digest FROM blobs ORDER BY digest LIMIT 1").fetchall()[0][0]
        conn.execute(
            "UPDATE blob_chunks SET data = CAST('<html>defaced</html>' AS BLOB) WHERE digest = ?",
            (digest,),
        )
        # The page is a finding of the run whose stage pins it (of the workspace if none).
        pinning = conn.execute(
            "SELECT DISTINCT run_id FROM entries WHERE kind = 'activity.result' "
            "AND instr(bytes, CAST(? AS BLOB)) > 0 ORDER BY run_id",
            (digest,),
        ).fetchall()
        for (run_id,) in pinning or [(None,)]:
            planted.append(Corruption(run_id, "blob.digest", f"defaced blob {digest[:20]}…"))
    return planted


def found_exactly(report_failures: set[str | None], planted: list[Corruption]) -> bool:
    """Whether the runs verify failed (None: the workspace) are exactly those planted."""
    workspace: set[str | None] = {None} if any(c.in_log for c in planted) else set()
    return report_failures == {c.run_id for c in planted} | workspace


__all__ = ["Corruption", "build_workspace", "found_exactly", "plant_corruptions"]
