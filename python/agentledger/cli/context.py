"""State shared by every command: which ledger, and how to print; the command classes that
take the global options wherever they are given.

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


class LookedUpPath(click.Path):
    """A path the system can look up: absent is fine, but a name too long or a loop of
    links is a usage error naming it here, not an error of whatever first opens it."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import os

        value = super().convert(value, param, ctx)
        try:
            os.lstat(value)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            self.fail(f"{click.format_filename(value)}: {exc.strerror or exc}", param, ctx)
        return value


class KeyFolder(LookedUpPath):
    """``--home``: a folder, or one that can be made (what is in its place is no file)."""

    def __init__(self) -> None:
        super().__init__(file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import os.path

        value = super().convert(value, param, ctx)
        # The first existing folder on the way up must be a folder: under a file, the key
        # folder is made only when a key is first needed, and that failed mid-command.
        above = os.path.abspath(os.fsdecode(value))
        while not os.path.lexists(above) and os.path.dirname(above) != above:
            above = os.path.dirname(above)
        if os.path.lexists(above) and not os.path.isdir(above):
            self.fail(f"{click.format_filename(value)}: cannot be a folder: {above} is a file")
        return value


class LedgerFile(LookedUpPath):
    """``--ledger``: a file path (click lets an empty one through: it names the folder)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("an empty path names no ledger file", param, ctx)
        return super().convert(value, param, ctx)


class PipeClosed(Exception):
    """The reader of stdout went away (``agentledger runs | head -1``): end quietly, exit 0."""


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

        ledger = Ledger.open(
            self.ledger_path, create=create, readonly=readonly, key_dir=self.key_dir
        )
        if readonly:
            # A reading command never upgrades the file: an older schema is named, not
            # queried (its missing tables would surface as raw SQLite errors).
            try:
                ledger.db.check_current()
            except BaseException:
                ledger.close()
                raise
        return ledger

    @property
    def key_home(self) -> Path:
        """The key folder --home names, or the default one: no output file goes in it."""
        from agentledger.keys import KeyStore

        return KeyStore(self.key_dir).home

    @property
    def console(self) -> Console:
        """Human output (stdout). Never used together with --json output."""
        return self.human_console()

    def human_console(self, width: int | None = None) -> Console:
        """Human output (stdout) ``width`` columns wide (``--width``); every command's human
        output goes through here, so --no-color holds for all of them."""
        from agentledger.cli.console import human_console

        console = human_console(width=width)
        if self.no_color:
            console.no_color = True
        return console

    @property
    def err_console(self) -> Console:
        """Progress and notes (stderr); silent under --quiet."""
        from agentledger.cli.console import human_console

        console = human_console(stderr=True)
        console.quiet = self.quiet
        if self.no_color:
            console.no_color = True
        return console


def emit_json(obj: Any) -> None:
    """Machine output: one JSON document on stdout and nothing else."""
    from agentledger.display import json_text

    sys.stdout.write(json_text(obj, indent=2, sort_keys=True))
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


# ---- commands that take the global options ----------------------------------------------


def _app(ctx: click.Context) -> AppContext:
    app = ctx.find_object(AppContext)
    if app is None:  # a sub-command invoked on its own (tests of a single command)
        app = ctx.ensure_object(AppContext)
    return app


def path_or_none(value: str | None) -> Path | None:
    # pathlib is imported only when a path is given: `--help` never pays for it.
    from pathlib import Path

    return None if value is None else Path(value)


def _set_ledger(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        _app(ctx).ledger_path = path_or_none(value) or _app(ctx).ledger_path


def _set_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        _app(ctx).key_dir = path_or_none(value)


def _set_flag(name: str) -> Any:
    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            setattr(_app(ctx), name, True)

    return callback


def _global_options() -> list[click.Parameter]:
    """The global options as a sub-command takes them (hidden: the root's help lists them)."""
    flag: dict[str, Any] = {"is_flag": True, "expose_value": False, "hidden": True}
    ledger, home = LedgerFile(), KeyFolder()
    path: dict[str, Any] = {"expose_value": False, "hidden": True}
    return [
        click.Option(["--ledger"], type=ledger, callback=_set_ledger, **path),
        click.Option(["--home"], type=home, callback=_set_home, **path),
        click.Option(["--json"], callback=_set_flag("json"), **flag),
        click.Option(["--quiet", "-q"], callback=_set_flag("quiet"), **flag),
        click.Option(["--no-color"], callback=_set_flag("no_color"), **flag),
        click.Option(["--debug"], callback=_set_flag("debug"), **flag),
    ]


def _with_globals(params: list[click.Parameter]) -> list[click.Parameter]:
    taken = {opt for param in params for opt in getattr(param, "opts", ())}
    return params + [p for p in _global_options() if not taken & set(p.opts)]


class AppCommand(click.Command):
    """A command that also takes the global options after its name."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return _with_globals(super().get_params(ctx))


class AppGroup(click.Group):
    """A group whose commands take the global options (so do its sub-groups)."""

    command_class = AppCommand
    group_class = type  # sub-groups are AppGroups too

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        return params if ctx.parent is None else _with_globals(params)
