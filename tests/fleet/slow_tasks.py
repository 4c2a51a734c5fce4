"""Preloaded into a `dask worker` (``--preload``) by the worker-loss test: every fleet task
first leaves a marker (which process started which file) and sleeps, so a worker can be
killed while it verifies. Not part of the package."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentledger.fleet import task

_verify_file = task.verify_file


def slow_verify_file(path: str, job: task.FleetJob) -> object:
    started = os.environ.get("FLEET_TEST_STARTED")
    if started:
        Path(started, f"{os.getpid()}-{time.monotonic_ns()}").write_text(path)
    time.sleep(float(os.environ.get("FLEET_TEST_DELAY", "0.3")))
    return _verify_file(path, job)


task.verify_file = slow_verify_file  # type: ignore[assignment]
