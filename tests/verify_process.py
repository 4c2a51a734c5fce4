"""`agentledger verify --json` as a whole process, its report without the timings: how the
tests compare a fast path with its reference (``AGENTLEDGER_PORTABLE=1`` forces the
reference, and is read once per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

TIMINGS = ("elapsed_s", "entries_per_s", "verified_at")


def verify_json(ledger: Path, home: Path, *args: str, portable: bool) -> tuple[int, dict[str, Any]]:
    """Exit code and JSON report of ``agentledger verify --json ARGS``, timings removed."""
    agentledger = Path(sys.executable).with_name("agentledger")
    command = [str(agentledger), "--home", str(home), "--ledger", str(ledger)]
    command += ["verify", "--json", *args]
    env = dict(os.environ, AGENTLEDGER_PORTABLE="1" if portable else "0")
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    report: dict[str, Any] = json.loads(done.stdout)
    for timing in TIMINGS:
        report.pop(timing, None)
    return done.returncode, report
