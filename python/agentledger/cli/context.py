"""State shared by every command: which ledger, and how to print."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console


@dataclass
class AppContext:
    ledger_path: Path
    debug: bool = False

    @property
    def console(self) -> Console:
        """Human output (stdout). Never used together with --json output."""
        return Console()

    @property
    def err_console(self) -> Console:
        """Progress and notes (stderr)."""
        return Console(stderr=True)


def emit_json(obj: Any) -> None:
    """Machine output: one JSON document on stdout and nothing else."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False))
    sys.stdout.write("\n")
