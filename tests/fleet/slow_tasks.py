"""Preloaded into the test `dask worker` processes (``--preload``): when the test asks for
it, every fleet task first leaves a marker (which process started which file) and sleeps,
so that a worker can be killed while it verifies. Not part of the package.

``FLEET_TEST_CONTROL`` names a folder; a file ``delay`` in it (seconds) turns the slowdown
on, and markers go to its ``started`` folder.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentledger.fleet import task

# Dask imports a preload file once and may reload it in the same namespace: keep the
# original function, never wrap the wrapper.
_verify_file = getattr(task, "_fleet_test_original", task.verify_file)
task._fleet_test_original = _verify_file  # type: ignore[attr-defined]


def slow_verify_file(path: str, job: task.FleetJob) -> object:
    control = Path(os.environ.get("FLEET_TEST_CONTROL", "/nonexistent"))
    if (control / "delay").exists():
        started = control / "started"
        started.mkdir(exist_ok=True)
        (started / f"{os.getpid()}-{time.monotonic_ns()}").write_text(path)
        time.sleep(float((control / "delay").read_text()))
    return _verify_file(path, job)


task.verify_file = slow_verify_file  # type: ignore[assignment]
