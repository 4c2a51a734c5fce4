"""Fixtures for the bernstein interop tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .bernstein_testkit import Outcome, import_and_verify

Verifier = Callable[..., Outcome]


@pytest.fixture
def imported(tmp_path: Path) -> Verifier:
    """``imported(workdir, key=..., trust=...)``: import into a fresh ledger, verify both ways."""
    counter = iter(range(1000))

    def run(workdir: Path, *, key: Path | None = None, trust: tuple[str, ...] = ()) -> Outcome:
        return import_and_verify(
            workdir, tmp_path / f"ledger-{next(counter)}.db", key=key, trust=trust
        )

    return run
