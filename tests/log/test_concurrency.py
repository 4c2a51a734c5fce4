"""Concurrent writers: the log stays one sequence, and GC never races a writer."""

from __future__ import annotations

import threading
from pathlib import Path

from agentledger import Ledger
from agentledger import gc as collector

from ..raw_entries import pin_unvetted
from .logkit import verify


def test_concurrent_writers_extend_one_log_without_gaps(ledger: Ledger, ledger_path: Path) -> None:
    ledger.run("seed").append("step", {})
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            with Ledger.open(ledger_path) as own:
                run = own.run(name)
                for i in range(25):
                    run.append("step", {"i": i})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    leaves = [row[0] for row in ledger.db.conn.execute("SELECT leaf FROM entries ORDER BY leaf")]
    assert leaves == list(range(76))
    assert verify(ledger_path).code == 0


def test_gc_between_a_writers_put_and_its_reference_keeps_the_blob(
    ledger: Ledger, ledger_path: Path
) -> None:
    stored = threading.Event()
    collected = threading.Event()
    digests: list[str] = []

    def writer() -> None:
        with Ledger.open(ledger_path) as own:
            digest = own.blobs.put(b"evidence captured a moment ago")
            digests.append(digest)
            stored.set()
            collected.wait(timeout=30)
            pin_unvetted(own, "r", digest, "page")

    thread = threading.Thread(target=writer)
    thread.start()
    assert stored.wait(timeout=30)
    result = collector.collect(ledger)  # the default grace period
    collected.set()
    thread.join()
    assert result.removed == []
    assert digests[0] in result.kept_young
    assert verify(ledger_path).code == 0
