"""Kill a writer with SIGKILL at random moments, reopen, and check nothing was lost.

Each kill point: start ``crash_writer.run_writer`` in a child (forked from a server that
already imported agentledger, so a kill point costs milliseconds, not an interpreter
start), let it write for a random time, SIGKILL it, then reopen the ledger and check:

- it opens (read-write, as the next writer would) and SQLite's ``integrity_check`` is ok;
- ``verify`` of the whole workspace is clean (chains, log, checkpoints, receipts, audit,
  blobs re-hashed);
- every acknowledged append is there with the hash the writer was given, every
  acknowledged blob is there and re-hashes to its name;
- the only entries beyond the acknowledged ones belong to the one operation in flight.

The ledger is kept across ``rotate_every`` kill points (so recovery is tested on top of
recovery), then a fresh one is started to keep each verify short.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentledger import Ledger
from agentledger.cas import digest_of

from .crash_writer import read_acks
from .fork_server import ForkServer

READY_TIMEOUT_S = 30.0


@dataclass
class Tally:
    kill_points: int = 0
    mid_operation: int = 0
    """Kills that landed after an operation began and before it was acknowledged."""
    in_flight_committed: int = 0
    """In-flight appends found committed after the kill (the ack was lost, not the entry)."""
    in_flight_rolled_back: int = 0
    killed_while_opening: int = 0
    acknowledged_operations: int = 0
    acknowledged_entries: int = 0
    acknowledged_blobs: int = 0
    interrupted: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.interrupted.items()))
        return (
            f"kill points survived: {self.kill_points - len(self.failures)}/{self.kill_points}; "
            f"killed while opening: {self.killed_while_opening}; "
            f"killed mid-operation: {self.mid_operation} ({kinds}); in-flight appends "
            f"committed {self.in_flight_committed}, rolled back {self.in_flight_rolled_back}; "
            f"acknowledged: {self.acknowledged_operations} operations, "
            f"{self.acknowledged_entries} entries, {self.acknowledged_blobs} blobs"
        )


def _wait_ready(ack_path: Path, server: ForkServer, pid: int, start: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if ack_path.exists() and b'"ready"' in ack_path.read_bytes()[start:]:
            return
        if server.exited(pid):
            raise AssertionError("the writer died on its own before opening the ledger")
        time.sleep(0.002)
    raise AssertionError("the writer never opened the ledger")


def check_after_kill(
    ledger_path: Path, ack_path: Path, key_home: Path, tally: Tally, first_op: int = 0
) -> None:
    """Reopen the ledger and hold it to every acknowledgement; record failures in ``tally``."""
    acks = read_acks(ack_path)
    done = {record["done"]: record for record in acks if "done" in record}
    begun = [record for record in acks if "begin" in record]
    last = begun[-1] if begun else None
    in_flight = last if last and last["begin"] >= first_op and last["begin"] not in done else None
    # Every earlier kill point may have left its in-flight operation committed too.
    unacknowledged_runs = {record["run"] for record in begun if record["begin"] not in done}
    label = f"kill point {tally.kill_points}"
    if not ledger_path.exists():
        assert not done, "acknowledged writes but no ledger file"
        return
    # Opened as the next writer would (a file killed while being created is 0 bytes: a
    # writer makes it a ledger; reading commands refuse it as "empty file, not a ledger").
    with Ledger.open(ledger_path, key_dir=key_home) as ledger:
        conn = ledger.db.conn
        integrity = conn.execute("PRAGMA integrity_check").fetchall()
        if integrity != [("ok",)]:
            tally.failures.append(f"{label}: integrity_check {integrity[:3]}")
        report = ledger.verify(jobs=1)
        if report.code != 0:
            found = [d.to_json() for d in report.workspace] + [
                d.to_json() for run in report.runs for d in run.divergences
            ]
            tally.failures.append(f"{label}: verify exit {report.code}: {found[:3]}")
        acknowledged: Counter[str] = Counter()
        for record in done.values():
            for seq, digest in record.get("entries", []):
                acknowledged[record["run"]] += 1
                rows = conn.execute(
                    "SELECT hash FROM entries WHERE run_id = ? AND seq = ?", (record["run"], seq)
                ).fetchall()
                if not rows or "blake3:" + rows[0][0].hex() != digest:
                    tally.failures.append(f"{label}: acknowledged {record['run']}#{seq} lost")
            for digest in record.get("blobs", []):
                try:
                    if digest_of(ledger.blobs.iter_chunks(digest)) != digest:
                        tally.failures.append(f"{label}: blob {digest} does not re-hash")
                except KeyError:
                    tally.failures.append(f"{label}: acknowledged blob {digest} lost")
        for run_id, count in conn.execute("SELECT run_id, count(*) FROM entries GROUP BY run_id"):
            extra = count - acknowledged[run_id]
            if extra < 0:
                tally.failures.append(f"{label}: {run_id} lost {-extra} entries")
            elif extra and run_id not in unacknowledged_runs:
                tally.failures.append(f"{label}: {run_id} has {extra} unacknowledged entries")
        if in_flight is not None:
            tally.mid_operation += 1
            tally.interrupted[in_flight["kind"]] += 1
            if in_flight["kind"] in ("append", "append_many"):
                committed = _in_flight_entries(conn, in_flight)
                if committed:
                    tally.in_flight_committed += 1
                else:
                    tally.in_flight_rolled_back += 1


def _in_flight_entries(conn: Any, in_flight: dict[str, Any]) -> int:
    rows = conn.execute(
        "SELECT count(*) FROM entries WHERE run_id = ? AND kind = 'step' "
        "AND json_extract(CAST(bytes AS TEXT), '$.body.op') = ?",
        (in_flight["run"], in_flight["begin"]),
    ).fetchall()
    return int(rows[0][0])


def run_kill_points(
    workdir: Path,
    kill_points: int,
    *,
    seed: int,
    max_delay_s: float = 0.25,
    rotate_every: int = 20,
) -> Tally:
    """Run ``kill_points`` writer kills under ``workdir``; return the tally."""
    with ForkServer() as server:
        return _kill_points(server, workdir, kill_points, seed, max_delay_s, rotate_every)


def _kill_points(
    server: ForkServer,
    workdir: Path,
    kill_points: int,
    seed: int,
    max_delay_s: float,
    rotate_every: int,
) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    key_home = workdir / "keys"
    ledger_path = ack_path = workdir
    for point in range(kill_points):
        if point % rotate_every == 0:
            generation = workdir / f"ledger-{point // rotate_every}"
            generation.mkdir(parents=True)
            ledger_path = generation / "ledger.db"
            ack_path = generation / "acks.jsonl"
        first_op = (point + 1) * 1_000_000
        writer_seed = rng.randrange(1 << 30)
        start = ack_path.stat().st_size if ack_path.exists() else 0
        pid = server.spawn(
            "tests.reliability.crash_writer:run_writer",
            str(ledger_path),
            str(key_home),
            str(ack_path),
            writer_seed,
            first_op,
        )
        try:
            if rng.random() < 0.1:
                # Sometimes while it opens (a fresh ledger: while it is being created).
                time.sleep(rng.uniform(0.0, 0.05))
                tally.killed_while_opening += 1
            else:
                _wait_ready(ack_path, server, pid, start)
                time.sleep(rng.uniform(0.0, max_delay_s))
        finally:
            server.kill(pid)
        tally.kill_points += 1
        check_after_kill(ledger_path, ack_path, key_home, tally, first_op)
        tally.acknowledged_operations += _count_done_since(ack_path, first_op)
        tally.acknowledged_entries += _count_field_since(ack_path, first_op, "entries")
        tally.acknowledged_blobs += _count_field_since(ack_path, first_op, "blobs")
    return tally


def _count_done_since(ack_path: Path, first_op: int) -> int:
    return len([r for r in read_acks(ack_path) if r.get("done", -1) >= first_op])


def _count_field_since(ack_path: Path, first_op: int, name: str) -> int:
    return sum(len(r.get(name, [])) for r in read_acks(ack_path) if r.get("done", -1) >= first_op)


def archive_kill_points(workdir: Path, kill_points: int, *, seed: int) -> tuple[int, int]:
    """SIGKILL ``agentledger archive`` at random moments: the archive file is either absent
    or complete (sealed, verifies clean). Returns ``(absent, complete)``."""
    from agentledger.archive import is_archive_file

    rng = random.Random(seed)
    key_home = workdir / "keys"
    source = workdir / "source.db"
    with Ledger.open(source, key_dir=key_home) as ledger:
        for r in range(8):
            run = ledger.run(f"run-{r}")
            run.append_many([("step", {"i": i, "pad": "p" * 200}) for i in range(500)])
            stage = run.research("research-0")
            stage.fetch("https://example.org/", rng.randbytes(2 << 20))
            stage.finish(artifact={"summary": r})
    with ForkServer() as server:
        started = time.monotonic()
        pid = server.spawn(
            "tests.reliability.crash_writer:run_archive",
            str(source), str(key_home), str(workdir / "timing.db"),
        )  # fmt: skip
        assert server.wait(pid) == 0
        duration = time.monotonic() - started
        absent = complete = 0
        for point in range(kill_points):
            out = workdir / f"archive-{point}.db"
            pid = server.spawn(
                "tests.reliability.crash_writer:run_archive", str(source), str(key_home), str(out)
            )
            # Stratified over 0..1.2 durations: the early points land before the archive
            # is written whatever the machine's speed does to a single timing run.
            time.sleep(duration * 1.2 * (point + rng.random()) / kill_points)
            server.kill(pid)
            if not out.exists():
                absent += 1
                continue
            assert is_archive_file(out), f"kill point {point}: {out} is not a sealed archive"
            with Ledger.open(out, key_dir=key_home) as archive:
                assert archive.verify(jobs=1).code == 0, f"kill point {point}"
                assert len(archive.runs()) == 8
            complete += 1
    return absent, complete
