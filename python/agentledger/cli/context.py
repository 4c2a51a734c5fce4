"""State shared by every command: which ledger, and how to print.

Imports here stay light (no rich, no ledger): ``agentledger --version`` loads this module.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from rich.console import Console

    from agentledger.ledger import Ledger


@dataclass
class AppContext:
    ledger_path: Path = Path(".agentledger/ledger.db")
    debug: bool = False
    key_dir: Path | None = None
    """--home: the key folder (default $AGENTLEDGER_HOME or ~/.local/state/agentledger)."""
    json: bool = False
    """--json given before the command (a command's own --json falls back to it)."""
    quiet: bool = False
    """--quiet: no progress and no notes on stderr (errors are still printed)."""
    no_color: bool = False
    """--no-color (rich also honours the NO_COLOR environment variable)."""

    def open_ledger(self, *, create: bool = False, readonly: bool = False) -> Ledger:
        """The ledger named by --ledger; reading commands never create one (exit 1)."""
        from agentledger.ledger import Ledger

        return Ledger.open(self.ledger_path, create=create, readonly=readonly, key_dir=self.key_dir)

    @property
    def console(self) -> Console:
        """Human output (stdout). Never used together with --json output."""
        from rich.console import Console

        return Console(no_color=True) if self.no_color else Console()

    @property
    def err_console(self) -> Console:
        """Progress and notes (stderr); silent under --quiet."""
        from rich.console import Console

        return Console(stderr=True, quiet=self.quiet, no_color=True if self.no_color else None)


def emit_json(obj: Any) -> None:
    """Machine output: one JSON document on stdout and nothing else."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False))
    sys.stdout.write("\n")


F = TypeVar("F", bound=Callable[..., Any])


def _json_or_global(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    app = ctx.find_object(AppContext)
    return bool(value or (app is not None and app.json))


def json_option(command: F) -> F:
    """``--json``: print one stable JSON object on stdout instead of the rich report.

    Given before the command (``agentledger --json runs``) it means the same.
    """
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        callback=_json_or_global,
        help="Print a JSON object on stdout (for machines).",
    )(command)
