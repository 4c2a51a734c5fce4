"""One folder of inputs per module, and the plain verdicts of each file to compare with."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .fleetkit import DaskCluster, Fleet, dask_cluster, make_fleet, plain_verdicts


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return make_fleet(tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def plain(fleet: Fleet) -> dict[str, int]:
    """Each input's exit code under a plain `agentledger verify --all` (trusting the signer)."""
    return plain_verdicts(sorted(fleet.kinds), fleet.home, fleet.public_key)


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    """A `dask scheduler` and two `dask worker` processes on 127.0.0.1."""
    with dask_cluster(tmp_path_factory.mktemp("dask")) as cluster:
        yield cluster


@pytest.fixture
def empty_home(tmp_path: Path) -> Path:
    """A client key folder that trusts nobody: only --trust decides."""
    return tmp_path / "client-keys"
