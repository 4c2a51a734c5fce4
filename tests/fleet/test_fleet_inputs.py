"""PATH arguments become files to verify; one task's verdict, without a cluster."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest
from rich.console import Console

from agentledger import Ledger
from agentledger.archive import write_archive
from agentledger.cli import main
from agentledger.errors import ExitCode
from agentledger.fleet import FleetArgumentError, FleetJob, FleetReport, expand_paths, verify_file
from agentledger.fleet.inputs import read_checkpoints, read_signer_memory
from agentledger.fleet.report import fleet_renderable

from .fleetkit import Fleet, build_ledger


def test_a_folder_is_searched_for_ledgers_archives_and_damaged_db_files(fleet: Fleet) -> None:
    sqlite_of_another_app = fleet.root / "other" / "app.sqlite"
    sqlite_of_another_app.parent.mkdir(exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import apsw; apsw.Connection({str(sqlite_of_another_app)!r})"
            ".execute('CREATE TABLE t(x)')",
        ],
        check=True,
    )
    assert set(expand_paths([fleet.root])) == set(fleet.kinds)


def test_a_from_list_names_paths_relative_to_itself(fleet: Fleet, tmp_path: Path) -> None:
    listed = sorted(fleet.kinds)[:2]
    listing = tmp_path / "ledgers.txt"
    lines = ["# nightly", *listed, "", "gone.db"]
    listing.write_text("\n".join(lines) + "\n")
    assert expand_paths([], [listing]) == [*listed, str(tmp_path / "gone.db")]


def test_a_text_file_that_lists_nothing_is_a_file_to_verify(tmp_path: Path) -> None:
    note = tmp_path / "notes.txt"
    note.write_text("hello, not a ledger\n")
    assert expand_paths([note]) == [str(note)]


def test_a_ledger_replaced_by_a_line_naming_another_is_reported_not_dropped(
    fleet: Fleet, tmp_path: Path
) -> None:
    """The attacker replaces a ledger with one line naming a clean ledger: a PATH is never
    read as a list, so the replaced file is verified (unreadable, exit 2), not swapped."""
    clean = next(path for path, kind in fleet.kinds.items() if kind == "clean")
    replaced = tmp_path / "ws" / "ledger.db"
    replaced.parent.mkdir()
    replaced.write_text(clean + "\n")
    assert expand_paths([replaced, clean]) == [str(replaced), clean]
    summary = verify_file(str(replaced), FleetJob(trust=(fleet.public_key,)))
    assert summary.status == "unreadable" and summary.code == ExitCode.INVALID_INPUT
    assert expand_paths([tmp_path]) == [str(replaced)]  # a folder's *.db is never a list


def test_a_fifo_in_a_folder_is_reported_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "ledger.db"
    os.mkfifo(fifo)
    assert expand_paths([tmp_path]) == [str(fifo)]
    summary = verify_file(str(fifo), FleetJob())
    assert summary.status == "unreadable" and summary.error_code == "not-a-ledger"


def test_a_ledger_whose_name_is_not_utf8_is_reported_unreadable_by_its_task(
    fleet: Fleet, tmp_path: Path, cli: Any
) -> None:
    """SQLite takes names as UTF-8: a ledger named with other bytes was a task that raised
    (UnicodeEncodeError) three times on the workers, and exit 70 for a plain verify."""
    clean = next(path for path, kind in fleet.kinds.items() if kind == "clean")
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/ledger-\xff.db"))
    shutil.copyfile(clean, odd)
    assert expand_paths([tmp_path]) == [str(odd)]
    summary = verify_file(str(odd), FleetJob(trust=(fleet.public_key,)))
    assert (summary.status, summary.error_code) == ("unreadable", "ledger-unopenable")
    assert "\\udcff" in (summary.error or "")
    result = cli("verify", "--all", ledger=odd)
    assert (result.code, result.err.count("\n")) == (ExitCode.INVALID_INPUT, 1), result.err
    assert cli("--ledger", str(clean), "archive", str(tmp_path / "out-\udcff.db")).code == 65
    assert sorted(p.name for p in tmp_path.iterdir()) == [odd.name]  # no partial archive


@pytest.mark.parametrize("suffix", ["-journal", "-wal", "-shm"])
def test_a_fifo_beside_a_ledger_is_reported_never_opened(
    fleet: Fleet, tmp_path: Path, suffix: str
) -> None:
    """SQLite opens a ``-journal`` by name to see whether it is hot: a FIFO there blocked
    the task forever (and `agentledger verify`, Ctrl-C included), so the fleet never ended."""
    archive = next(path for path, kind in fleet.kinds.items() if kind == "archive")
    copy = tmp_path / "archive.db"
    shutil.copyfile(archive, copy)
    os.mkfifo(f"{copy}{suffix}")
    script = (
        "import sys; from agentledger.fleet import FleetJob, verify_file; "
        "s = verify_file(sys.argv[1], FleetJob()); print(s.status, s.error_code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(copy)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.stdout.split() == ["unreadable", "ledger-unopenable"], done.stderr


def test_a_path_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(FleetArgumentError) as raised:
        expand_paths([tmp_path / "nope"])
    assert raised.value.exit_code == ExitCode.USAGE


def test_a_folder_without_ledgers_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(FleetArgumentError, match="no ledger files"):
        expand_paths([tmp_path])


def test_one_task_gives_the_plain_verdict_of_each_kind_of_file(
    fleet: Fleet, plain: dict[str, int]
) -> None:
    job = FleetJob(trust=(fleet.public_key,))
    for path, kind in fleet.kinds.items():
        summary = verify_file(path, job)
        assert summary.code == plain[path], (kind, summary)
        assert summary.bytes_read > 0
        assert summary.status == {"tampered": "diverged", "junk": "unreadable"}.get(kind, "clean")
        if kind == "tampered":
            assert summary.checks and summary.findings[0]["run"] == "run-1"
        if kind == "archive":
            assert summary.archive and summary.ledger_id
        if kind == "junk":
            assert summary.error and summary.error_code == "not-a-ledger"


def test_a_worker_trusts_only_the_keys_in_the_job(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker's own key folder holds the signer: it must not count.
    monkeypatch.setenv("AGENTLEDGER_HOME", str(fleet.home))
    clean = next(path for path, kind in fleet.kinds.items() if kind == "clean")
    untrusted = verify_file(clean, FleetJob(trust=()))
    assert untrusted.status == "diverged"
    assert "checkpoint.signature" in untrusted.checks
    assert verify_file(clean, FleetJob(trust=(fleet.public_key,))).status == "clean"


def test_a_missing_file_is_reported_not_raised(tmp_path: Path) -> None:
    summary = verify_file(str(tmp_path / "gone.db"), FleetJob())
    assert (summary.status, summary.code) == ("unreadable", ExitCode.NOT_FOUND)


def test_nothing_but_the_cluster_module_imports_distributed() -> None:
    script = """
import importlib, pkgutil, sys
import agentledger
names = [m.name for m in pkgutil.walk_packages(agentledger.__path__, "agentledger.")]
assert "agentledger.fleet.cluster" in names
for name in names:
    if name != "agentledger.fleet.cluster":
        importlib.import_module(name)
from agentledger.cli import main
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("distributed", "dask"))
assert not loaded, loaded
print(len(names))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 50


def test_a_worker_judges_a_rollback_with_the_clients_memory(tmp_path: Path) -> None:
    home = tmp_path / "signer"
    path = tmp_path / "ws" / "ledger.db"
    build_ledger(path, home, runs=2, entries=10)
    older = tmp_path / "older.db"
    shutil.copy(path, older)
    build_ledger(path, home, runs=3, entries=10)  # signed: the install remembers it
    shutil.copy(older, path)  # rolled back behind what the install signed
    trust = (home.joinpath("install.pub").read_text().strip(),)
    remembered = verify_file(str(path), FleetJob(trust=trust, memory=read_signer_memory(home)))
    # Every run may have lost its tail: none is certified complete.
    assert remembered.checks == {"log.rollback": 1, "log.incomplete": 2}
    # Without the client's memory (a worker's own folder is never read) nothing says so.
    assert verify_file(str(path), FleetJob(trust=trust)).status == "clean"


def test_a_ledger_and_its_archive_each_extend_their_own_exported_checkpoint(
    tmp_path: Path,
) -> None:
    """An archive keeps its source's ledger id; ``--checkpoints`` kept one checkpoint per
    ledger id, so the archive's own exported checkpoint (sorted first, same size) was
    taken for the ledger's: checkpoint.origin, where a plain verify with the ledger's
    checkpoint is clean."""
    home = tmp_path / "signer"
    path = tmp_path / "ws" / "ledger.db"
    build_ledger(path, home, runs=2, entries=5)
    archive = tmp_path / "review" / "archive.db"
    with Ledger.open(path, key_dir=home) as source:
        write_archive(source, archive, ["run-0", "run-1"])
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name, file in (("a-archive.txt", archive), ("b-ledger.txt", path)):
        command = ["--ledger", str(file), "--home", str(home), "checkpoint", "--export"]
        assert main([*command, str(folder / name)]) == 0
    checkpoints, skipped = read_checkpoints(folder)
    assert skipped == []
    job = FleetJob(
        trust=(home.joinpath("install.pub").read_text().strip(),), checkpoints=checkpoints
    )
    for file in (path, archive):
        summary = verify_file(str(file), job)
        assert (summary.status, summary.checks) == ("clean", {}), summary.findings


def test_no_audit_key_travels_and_the_note_says_so(tmp_path: Path) -> None:
    home = tmp_path / "signer"
    path = tmp_path / "ws" / "ledger.db"
    with Ledger.open(path, key_dir=home) as ledger:
        research = ledger.run("run-7").research("research-0")
        research.fetch("https://example.org", b"<html>page</html>")
        research.finish(artifact={"summary": "a page"})
    trust = (home.joinpath("install.pub").read_text().strip(),)
    summary = verify_file(str(path), FleetJob(trust=trust))
    assert summary.status == "clean"
    [note] = [note for note in summary.notes if note.startswith("audit mirror")]
    assert "NOT checked" in note and "<the task's empty key folder>" in note
    assert "agentledger-fleet-" not in note


def test_the_terminal_report_puts_the_worst_files_first(fleet: Fleet) -> None:
    job = FleetJob(trust=(fleet.public_key,))
    report = FleetReport(ledgers=[verify_file(path, job) for path in sorted(fleet.kinds)])
    report.inputs = len(report.ledgers)
    console = Console(record=True, file=io.StringIO(), width=200)
    console.print(fleet_renderable(report))
    out = console.export_text()
    worst = out[out.index("Worst files first") :]
    assert worst.index("unreadable") < worst.index("diverged") < worst.index("verdict: diverged")
    assert "entry.hash" in out and "nothing lost" in out


def test_findings_past_the_per_run_cap_are_said_beside_the_counts_by_check(
    tmp_path: Path,
) -> None:
    """A run with more findings than a run keeps: the fleet's "Findings by check" summed
    to the kept ones while the file's findings counted them all, the rest said nowhere."""
    path, home = tmp_path / "l.db", tmp_path / "keys"
    build_ledger(path, home, runs=1, entries=40)
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE entries SET hash = zeroblob(32) WHERE seq >= 2")  # 38 entry.hash
    conn.close()
    with Ledger.open(path, key_dir=home) as ledger:
        key = ledger.keys.install_public_key()
    assert key is not None
    summary = verify_file(str(path), FleetJob(trust=(key,)))
    report = FleetReport(ledgers=[summary], inputs=1)
    kept = sum(summary.checks.values())
    assert summary.divergences > kept
    totals = report.to_json()["totals"]
    assert totals["findings_not_kept"] == summary.divergences - kept
    out = io.StringIO()
    Console(file=out, width=200).print(fleet_renderable(report))
    words = f"… and {summary.divergences - kept} findings in 1 file past the findings a run keeps"
    assert words in out.getvalue()
