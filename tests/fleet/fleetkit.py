"""Helpers for the fleet tests: a folder of ledgers of every kind, Dask processes, the CLI.

Everything runs as whole processes on 127.0.0.1: the fleet command, `dask scheduler`,
`dask worker`. The test process itself never imports Dask.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from agentledger import Ledger
from agentledger.archive import write_archive
from agentledger.cli import main

DASK = Path(sys.executable).with_name("dask")
HERE = Path(__file__).parent
SLOW_TASKS = HERE / "slow_tasks.py"


@dataclass
class Fleet:
    """A folder of inputs, the key folder that signed them, and each file's kind."""

    root: Path
    home: Path
    kinds: dict[str, str] = field(default_factory=dict)
    """Absolute path → clean | tampered | archive | junk | missing."""

    @property
    def public_key(self) -> str:
        return self.home.joinpath("install.pub").read_text().strip()


def build_ledger(path: Path, home: Path, runs: int = 3, entries: int = 40) -> None:
    with Ledger.open(path, key_dir=home) as ledger:
        for index in range(runs):
            run = ledger.run(f"run-{index}")
            run.append_many([("step", {"n": n, "run": index}) for n in range(entries)])


def tamper(path: Path, run: str = "run-1", seq: int = 3) -> None:
    """Edit one stored entry's bytes with plain SQL, as someone with write access would."""
    conn = apsw.Connection(str(path))
    try:
        stored = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = ? AND seq = ?", (run, seq)
        ).fetchall()[0][0]
        edited = stored.replace(f'"n":{seq}'.encode(), f'"n":{seq + 100}'.encode(), 1)
        assert edited != stored
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = ?", (edited, run, seq)
        )
    finally:
        conn.close()


def make_fleet(root: Path, clean: int = 3) -> Fleet:
    """Clean ledgers (in nested workspaces), a tampered one, an archive and two junk files."""
    home = root / "keys"
    fleet = Fleet(root=root / "inputs", home=home)
    for index in range(clean):
        path = fleet.root / f"ws-{index}" / ".agentledger" / "ledger.db"
        build_ledger(path, home)
        fleet.kinds[str(path)] = "clean"
    tampered = fleet.root / "ws-tampered" / "ledger.db"
    build_ledger(tampered, home)
    tamper(tampered)
    fleet.kinds[str(tampered)] = "tampered"
    archive = fleet.root / "review" / "archive.db"
    archive.parent.mkdir(parents=True)
    with Ledger.open(fleet.root / "ws-0" / ".agentledger" / "ledger.db", key_dir=home) as source:
        write_archive(source, archive, ["run-0", "run-2"])
    fleet.kinds[str(archive)] = "archive"
    junk = fleet.root / "junk" / "broken.db"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"this was a ledger once\n" * 50)
    fleet.kinds[str(junk)] = "junk"
    return fleet


def plain_verdicts(paths: list[str], home: Path, trust: str) -> dict[str, int]:
    """``agentledger verify --all`` of each file, on a copy (verify may record a marker)."""
    verdicts = {}
    for index, path in enumerate(paths):
        source = Path(path)
        copy = home.parent / "plain" / str(index) / source.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.exists():
            shutil.copy(source, copy)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(
                ["--ledger", str(copy), "--home", str(home), "verify", "--all", "--trust", trust]
            )
        verdicts[path] = code
    return verdicts


@dataclass
class Done:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def agentledger_command() -> list[str]:
    return [sys.executable, "-c", "import sys; from agentledger.cli import main; sys.exit(main())"]


def run_cli(*args: str, home: Path, timeout: float = 60) -> Done:
    """The command as a user runs it: a whole process."""
    done = subprocess.run(
        [*agentledger_command(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(home),
        check=False,
    )
    return Done(done.returncode, done.stdout, done.stderr)


def cli_env(home: Path) -> dict[str, str]:
    return {**os.environ, "AGENTLEDGER_HOME": str(home)}


@dataclass
class DaskCluster:
    """`dask scheduler` and `dask worker` processes on 127.0.0.1."""

    folder: Path
    scheduler: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    address: str = ""

    @property
    def control(self) -> Path:
        """Write ``delay`` here to slow every task down (slow_tasks.py)."""
        return self.folder / "control"

    def start(self, workers: int = 2) -> None:
        self.control.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "FLEET_TEST_CONTROL": str(self.control)}
        scheduler_file = self.folder / "scheduler.json"
        self.scheduler = self._spawn(
            "scheduler.log",
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--dashboard-address",
            "127.0.0.1:0",
            "--scheduler-file",
            str(scheduler_file),
        )
        deadline = time.monotonic() + 30
        while not scheduler_file.exists():
            assert time.monotonic() < deadline, self.log("scheduler.log")
            time.sleep(0.05)
        time.sleep(0.05)
        self.address = json.loads(scheduler_file.read_text())["address"]
        for index in range(workers):
            self.add_worker(f"worker-{index}.log", env)
        for index in range(workers):
            self.wait_registered(f"worker-{index}.log")

    def add_worker(self, log: str, env: dict[str, str]) -> None:
        self.workers.append(
            self._spawn(
                log,
                "worker",
                self.address,
                "--host",
                "127.0.0.1",
                "--nthreads",
                "1",
                "--no-nanny",
                "--no-dashboard",
                "--dashboard-address",
                "127.0.0.1:0",
                "--memory-limit",
                "0",
                "--preload",
                str(SLOW_TASKS),
                env=env,
            )
        )

    def wait_registered(self, log: str) -> None:
        deadline = time.monotonic() + 30
        while "Registered to" not in self.log(log):
            assert time.monotonic() < deadline, self.log(log)
            time.sleep(0.05)

    def log(self, name: str) -> str:
        path = self.folder / name
        return path.read_text(errors="replace") if path.exists() else ""

    def _spawn(
        self, log: str, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with open(self.folder / log, "wb") as handle:
            return subprocess.Popen(
                [str(DASK), *args],
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=env or dict(os.environ),
                cwd=self.folder,
            )

    def stop(self) -> None:
        for process in [*self.workers, self.scheduler]:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.workers, self.scheduler]:
            if process is None:
                continue
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def dask_cluster(folder: Path) -> Iterator[DaskCluster]:
    cluster = DaskCluster(folder)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
