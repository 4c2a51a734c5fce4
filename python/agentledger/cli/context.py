"""State shared by every command: which ledger, and how to print."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from agentledger.ledger import Ledger


@dataclass
class AppContext:
    ledger_path: Path
    debug: bool = False
    key_dir: Path | None = None
    """--home: the key folder (default $AGENTLEDGER_HOME or ~/.local/state/agentledger)."""

    def open_ledger(self, *, create: bool = False, readonly: bool = False) -> Ledger:
        """The ledger named by --ledger; reading commands never create one (exit 1)."""
        return Ledger.open(self.ledger_path, create=create, readonly=readonly, key_dir=self.key_dir)

    @property
    def console(self) -> Console:
        """Human output (stdout). Never used together with --json output."""
        from agentledger.display import human_console

        return human_console()

    @property
    def err_console(self) -> Console:
        """Progress and notes (stderr)."""
        from agentledger.display import human_console

        return human_console(stderr=True)


def emit_json(obj: Any) -> None:
    """Machine output: one JSON document on stdout and nothing else."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False))
    sys.stdout.write("\n")


F = TypeVar("F", bound=Callable[..., Any])


def json_option(command: F) -> F:
    """``--json``: print one stable JSON object on stdout instead of the rich report."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print a JSON object on stdout (for machines)."
    )(command)


def width_option(command: F) -> F:
    """``--width``: the columns of human output (default: the terminal's, else unwrapped)."""
    return click.option(
        "--width",
        type=click.IntRange(min=20),
        default=None,
        help="Columns of human output (default: the terminal's, else COLUMNS, else unwrapped).",
    )(command)
