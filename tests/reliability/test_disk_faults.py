"""Disk faults injected under SQLite (faultvfs.py): each failed operation raises a typed
``LedgerError``; the ledger then reopens and verifies clean with every committed entry, and
the failed operation is all or nothing."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentledger import Ledger
from agentledger.checkpoint import take_checkpoint
from agentledger.cli import main
from agentledger.errors import LedgerError
from agentledger.keys import KeyStore
from agentledger.storage import Database

from . import faultvfs

EXPECTED_CODES = {"full": {"disk-full"}, "write": {"io-error"}, "short": {"io-error"}}
EXPECTED_CODES["sync"] = {"io-error"}


@pytest.fixture
def fault() -> Iterator[faultvfs.Fault]:
    faultvfs.register()
    yield faultvfs.FAULT
    faultvfs.FAULT.disarm()


def open_faulty(path: Path, key_home: Path) -> Ledger:
    return Ledger(Database.open(path, vfs=faultvfs.NAME), KeyStore(key_home))


def _append_batch(ledger: Ledger) -> None:
    ledger.run("r").append_many([("step", {"j": j, "pad": "p" * 200}) for j in range(60)])


def _put_big_blob(ledger: Ledger) -> None:
    ledger.blobs.put(os.urandom(3 << 20))


def _research(ledger: Ledger) -> None:
    stage = ledger.run("r").research(f"research-{os.urandom(4).hex()}")
    stage.fetch("https://example.org/", os.urandom(300_000))
    stage.finish(artifact={"summary": "s"})


def _checkpoint(ledger: Ledger) -> None:
    ledger.run("c").append("step", {})
    take_checkpoint(ledger)


OPERATIONS: dict[str, Callable[[Ledger], None]] = {
    "append_many": _append_batch,
    "blob": _put_big_blob,
    "research": _research,
    "checkpoint": _checkpoint,
}


def _state(path: Path, key_home: Path) -> tuple[int, dict[tuple[str, int], str], list[str]]:
    """Verify code, every entry's hash, every blob name — through the ordinary VFS."""
    with Ledger.open(path, create=False, key_dir=key_home) as ledger:
        code = ledger.verify(jobs=1).code
        rows = ledger.db.conn.execute("SELECT run_id, seq, hash FROM entries").fetchall()
        return code, {(r, s): h.hex() for r, s, h in rows}, ledger.blobs.digests()


@pytest.mark.parametrize("kind", ["full", "write", "short", "sync"])
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_disk_fault_fails_one_operation_with_a_typed_error_and_loses_nothing(
    tmp_path: Path, fault: faultvfs.Fault, kind: str, operation: str
) -> None:
    inject_faults(tmp_path, fault, kind, operation, skips=(0, 1, 2, 4, 8))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["full", "write", "short", "sync"])
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_disk_faults_at_every_third_write_lose_nothing(
    tmp_path: Path, fault: faultvfs.Fault, kind: str, operation: str
) -> None:
    inject_faults(tmp_path, fault, kind, operation, skips=tuple(range(0, 90, 3)))


def inject_faults(
    tmp_path: Path, fault: faultvfs.Fault, kind: str, operation: str, skips: tuple[int, ...]
) -> None:
    key_home = tmp_path / "keys"
    path = tmp_path / "ledger.db"
    outcomes: Counter[str] = Counter()
    with open_faulty(path, key_home) as ledger:
        ledger.run("r").append_many([("step", {"i": i}) for i in range(5)])
    for skip in skips:
        before = _state(path, key_home)
        assert before[0] == 0
        with open_faulty(path, key_home) as ledger:
            fault.arm(kind, skip=skip)
            try:
                OPERATIONS[operation](ledger)
                outcome = "completed"
            except LedgerError as exc:
                assert exc.code in EXPECTED_CODES[kind], exc
                assert "\n" not in exc.message and str(path) in exc.message
                outcome = "failed"
            fired = fault.fired
            fault.disarm()
            if fired:
                # The same handle keeps working once the disk does.
                ledger.run("after").append("step", {"skip": skip})
        code, entries, blobs = _state(path, key_home)
        assert code == 0, f"{kind} {operation} skip {skip}: verify exit {code}"
        assert before[1].items() <= entries.items(), "a committed entry changed or vanished"
        assert set(before[2]) <= set(blobs)
        new_runs = Counter(run for run, _ in entries.keys() - before[1].keys())
        if outcome == "failed" and operation == "append_many":
            # All or nothing: the batch is there whole (the fault hit after the commit
            # reached the disk) or not at all.
            assert new_runs["r"] in (0, 60)
            outcomes["failed, batch durable" if new_runs["r"] else "failed, rolled back"] += 1
        else:
            outcomes[outcome if fired else "not reached"] += 1
    print(f"\nfault {kind} under {operation}: {dict(sorted(outcomes.items()))}")
    assert (
        outcomes["failed, rolled back"] + outcomes["failed"] + outcomes["failed, batch durable"]
        >= 1
    ), outcomes


def test_a_read_error_while_opening_is_a_typed_error(tmp_path: Path, fault: faultvfs.Fault) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.run("r").append("step", {})
    fault.arm("read", files=("",))
    with pytest.raises(LedgerError) as caught:
        Database.open(path, vfs=faultvfs.NAME).close()
    assert caught.value.code == "io-error"


def test_a_read_error_during_verify_is_a_typed_error_not_a_verdict(
    tmp_path: Path, fault: faultvfs.Fault
) -> None:
    path = tmp_path / "ledger.db"
    key_home = tmp_path / "keys"
    with open_faulty(path, key_home) as ledger:
        ledger.run("r").append_many([("step", {"i": i, "pad": "x" * 500}) for i in range(400)])
    with open_faulty(path, key_home) as ledger:
        fault.arm("read", skip=3)
        with pytest.raises(LedgerError) as caught:
            ledger.verify(jobs=1)
        assert caught.value.code == "io-error"
    assert _state(path, key_home)[0] == 0


def test_cli_reports_a_full_disk_in_one_line(
    tmp_path: Path, fault: faultvfs.Fault, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.db"
    page = tmp_path / "page.html"
    page.write_bytes(os.urandom(200_000))
    with Ledger.open(path) as ledger:
        ledger.run("r").append("step", {})
    original = Database.open.__func__  # type: ignore[attr-defined]

    def faulty_open(cls: type[Database], /, *args: object, **kwargs: object) -> Database:
        return original(cls, *args, **{**kwargs, "vfs": faultvfs.NAME})  # type: ignore[no-any-return]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Database, "open", classmethod(faulty_open))
        fault.arm("full")
        args = ["--ledger", str(path), "activity", "research", "r", "research-0"]
        code = main([*args, "--page", f"https://example.org/={page}"])
    err = capsys.readouterr().err
    assert code == 65
    assert err.startswith("error [disk-full]") and err.count("\n") == 1
    assert _state(path, tmp_path / "keys")[0] == 0


def test_a_read_error_inside_a_write_names_the_io_error_not_the_failed_rollback(
    tmp_path: Path, fault: faultvfs.Fault
) -> None:
    path = tmp_path / "ledger.db"
    key_home = tmp_path / "keys"
    with open_faulty(path, key_home) as ledger:
        run = ledger.run("r")
        run.append_many([("step", {"i": i, "pad": "x" * 500}) for i in range(50)])
        with Ledger.open(path, key_dir=key_home) as other:
            other.run("r").append("step", {})  # this connection's page cache is now stale
        fault.arm("read", skip=1, files=("-wal",))
        with pytest.raises(LedgerError) as caught:
            run.append("step", {"read": "fails"})
        assert caught.value.code == "io-error", caught.value.message
        assert "no transaction is active" not in caught.value.message
    code, entries, _ = _state(path, key_home)
    assert code == 0 and len(entries) == 51
