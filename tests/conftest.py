"""Fixtures shared by every test: fresh ledgers and a way to run the CLI in-process."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.cli import main

# A shell starts a background job (`make test &`) with Ctrl-C ignored, and Python then
# installs no handler: the tests of what Ctrl-C does, here and in the processes they
# start (which inherit an ignored signal, never a handler), need it delivered.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _isolated_key_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends sign checkpoints with the install key: never touch the real key folder."""
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "keys"))
    # verify's per-run status notes (run_status.py) stay in the test's folder too.
    monkeypatch.setenv("AGENTLEDGER_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ws" / "ledger.db"


@pytest.fixture
def ledger(ledger_path: Path) -> Iterator[Ledger]:
    with Ledger.open(ledger_path) as opened:
        yield opened


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], ledger_path: Path) -> Any:
    """``cli("verify", "--json")`` runs agentledger against the test's ledger."""

    def run(*args: str, ledger: Path | None = None) -> CliResult:
        code = main(["--ledger", str(ledger or ledger_path), *args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
