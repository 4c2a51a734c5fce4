"""A demo ledger with its planted corruptions, built once per module, and its key folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.cli import main
from agentledger.demo import Corruption, build_workspace, plant_corruptions


@dataclass(frozen=True)
class Demo:
    path: Path
    home: Path
    planted: list[Corruption]

    def run(self, check: str) -> str:
        """The run the demo corrupted for ``check``."""
        found = next(c.run_id for c in self.planted if c.check == check)
        assert found is not None
        return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    root = tmp_path_factory.mktemp("demo")
    home = root / "keys"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTLEDGER_HOME", str(home))
        with Ledger.open(root / "ledger.db") as ledger:
            build_workspace(ledger, 40)
            planted = plant_corruptions(ledger)
    yield Demo(root / "ledger.db", home, planted)


@pytest.fixture
def demo_cli(
    demo: Demo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Any:
    """``demo_cli("show", RUN)``: the CLI on the demo ledger with its own key folder."""
    monkeypatch.setenv("AGENTLEDGER_HOME", str(demo.home))
    monkeypatch.delenv("COLUMNS", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--ledger", str(demo.path), *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def as_json(out: str) -> Any:
    return json.loads(out)
