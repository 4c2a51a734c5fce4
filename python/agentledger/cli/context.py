"""State shared by every command: which ledger, and how to print.

Imports here stay light (no rich, no ledger): ``agentledger --version`` loads this module.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from agentledger.ledger import Ledger


DEFAULT_LEDGER = ".agentledger/ledger.db"


class AppContext:
    """What the global options chose (a plain class: dataclasses cost start-up time)."""

    def __init__(
        self,
        ledger_path: Path | None = None,
        debug: bool = False,
        key_dir: Path | None = None,
        json: bool = False,
        quiet: bool = False,
        no_color: bool = False,
    ) -> None:
        if ledger_path is None:
            from pathlib import Path

            ledger_path = Path(DEFAULT_LEDGER)
        self.ledger_path = ledger_path
        self.debug = debug
        self.key_dir = key_dir
        """--home: the key folder (default $AGENTLEDGER_HOME or ~/.local/state/agentledger)."""
        self.json = json
        """--json given before the command (a command's own --json falls back to it)."""
        self.quiet = quiet
        """--quiet: no progress and no notes on stderr (errors are still printed)."""
        self.no_color = no_color
        """--no-color (rich also honours the NO_COLOR environment variable)."""

    def open_ledger(self, *, create: bool = False, readonly: bool = False) -> Ledger:
        """The ledger named by --ledger; reading commands never create one (exit 1)."""
        from agentledger.ledger import Ledger

        return Ledger.open(self.ledger_path, create=create, readonly=readonly, key_dir=self.key_dir)

    @property
    def console(self) -> Console:
        """Human output (stdout). Never used together with --json output."""
        from agentledger.display import human_console

        console = human_console()
        if self.no_color:
            console.no_color = True
        return console

    @property
    def err_console(self) -> Console:
        """Progress and notes (stderr); silent under --quiet."""
        from agentledger.display import human_console

        console = human_console(stderr=True)
        console.quiet = self.quiet
        if self.no_color:
            console.no_color = True
        return console


def emit_json(obj: Any) -> None:
    """Machine output: one JSON document on stdout and nothing else."""
    import json

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


def width_option(command: F) -> F:
    """``--width``: the columns of human output (default: the terminal's, else unwrapped)."""
    return click.option(
        "--width",
        type=click.IntRange(min=20),
        default=None,
        help="Columns of human output (default: the terminal's, else COLUMNS, else unwrapped).",
    )(command)
