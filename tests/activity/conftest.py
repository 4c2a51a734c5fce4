"""Every activity test gets its own key folder, so no test touches (or trusts) real keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentledger import Ledger


@pytest.fixture(autouse=True)
def key_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "keys"
    monkeypatch.setenv("AGENTLEDGER_HOME", str(home))
    return home


@pytest.fixture
def ledger(ledger_path: Path, key_home: Path) -> Iterator[Ledger]:
    with Ledger.open(ledger_path) as opened:
        yield opened
