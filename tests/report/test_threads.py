"""The Python API and threads: a Ledger belongs to its thread; one per thread works."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agentledger import AgentLedgerError, Ledger, WrongThread


def _in_threads(count: int, work: object) -> list[BaseException]:
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            work(n)  # type: ignore[operator]
        except BaseException as exc:  # collected and checked by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_one_ledger_used_by_four_threads_raises_a_typed_error(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        for n in range(4):
            ledger.run(f"r{n}").append_many([("step", {"i": i}) for i in range(50)])
        run = ledger.run("r0")

        def work(n: int) -> None:
            if n % 2:
                ledger.verify(jobs=1)
            else:
                ledger.run(f"r{n}").append("step", {"from": "thread"})
            list(run.entries())

        errors = _in_threads(4, work)
        assert len(errors) == 4
        for error in errors:
            assert isinstance(error, WrongThread) and isinstance(error, AgentLedgerError)
            assert "open one Ledger per thread" in error.message
        # Nothing was written or half-read: the owner still sees a clean ledger.
        assert ledger.verify(jobs=1).code == 0
        assert [ledger.run(f"r{n}").head()[0] for n in range(4)] == [49] * 4


def test_the_blob_store_belongs_to_the_thread_too(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        errors = _in_threads(1, lambda _n: ledger.blobs.put(b"bytes"))
        assert [type(e) for e in errors] == [WrongThread]


def test_one_ledger_per_thread_shares_the_file(ledger_path: Path) -> None:
    Ledger.open(ledger_path).close()

    def work(n: int) -> None:
        with Ledger.open(ledger_path) as own:
            run = own.run(f"run-{n}")
            for i in range(20):
                run.append("step", {"i": i})
            assert own.verify_run(f"run-{n}").code == 0

    assert _in_threads(4, work) == []
    with Ledger.open(ledger_path) as ledger:
        report = ledger.verify(jobs=1)
        assert report.code == 0 and len(report.runs) == 4


def test_the_readme_example_is_the_one_tested() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "agentledger.WrongThread" in readme and "One `Ledger` per thread" in readme


@pytest.mark.parametrize("method", ["runs", "has_run"])
def test_reading_from_another_thread_is_refused_too(ledger_path: Path, method: str) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {})
        call = getattr(ledger, method)
        errors = _in_threads(1, lambda _n: call() if method == "runs" else call("r"))
        assert [type(e) for e in errors] == [WrongThread]
