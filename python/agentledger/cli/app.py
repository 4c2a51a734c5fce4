"""The root command group. Sub-command groups live in their own modules and attach here.

Commands are loaded lazily: ``agentledger --version`` and ``--help`` import click and this
module, nothing else (no rich, no pydantic, no compiled core). ``COMMANDS`` names each
command's module and its one-line help; a test keeps it equal to the commands themselves.

The global options (``--ledger``, ``--home``, ``--json``, ``--quiet``, ``--no-color``,
``--debug``) are accepted before the command or after it: ``AppCommand`` and ``AppGroup``
add them, hidden, to every sub-command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import click

from agentledger._version import __version__
from agentledger.cli.context import DEFAULT_LEDGER, AppContext

if TYPE_CHECKING:
    from pathlib import Path

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "activity": (("verify", "activity"), "Record and verify activities in runs."),
    "append": (("journal",), "Append one entry to a run (JSON body argument or stdin)."),
    "archive": (("log",), "Write a sealed single-file audit archive of runs."),
    "checkpoint": (("log",), "Sign a checkpoint of the workspace log and show the newest."),
    "demo": (("demo",), "Build a demo ledger, corrupt five things, bulk-verify it."),
    "explain": (("explain",), "Explain a verification check, or list every check."),
    "export": (("bernstein",), "Write ledger contents out in another tool's format."),
    "fleet": (("fleet",), "Verify many ledger files on a Dask cluster (agentledger[fleet])."),
    "fsck": (("log",), "Every check: SQLite integrity, checkpoints, verify, orphan blobs."),
    "gc": (("log",), "Delete blobs nothing reaches; sign a prune receipt."),
    "import": (("bernstein",), "Bring another tool's records into the ledger."),
    "init": (("journal",), "Create the ledger file (and its folder) if it does not exist."),
    "keys": (("keys",), "Signing and audit keys, kept outside the ledger."),
    "phase": (("phase",), "Phase capability profiles: compile, record, transition, show."),
    "prove": (("log",), "Print a proof that an entry is in the signed log."),
    "runs": (("journal",), "List runs: entries, activities, last entry, last verify status."),
    "show": (("journal",), "Show a run's journal, verified (kinds, hashes, evidence)."),
    "team": (("team",), "Team manifests: which modality each role runs as."),
    "verify": (("verify",), "Bulk-verify runs: chains, entry bytes, evidence sets, blobs."),
    "verify-proof": (("log",), "Check a proof bundle offline, without the ledger."),
}
"""name -> (modules under agentledger.cli that define it, its short help as ``-h`` lists it)."""

MODULES = (
    "activity", "bernstein", "demo", "explain", "fleet", "journal", "keys", "log", "phase",
    "team", "verify",
)  # fmt: skip
"""Every command module (``load_all`` imports them: a name missing from COMMANDS still works)."""


def _app(ctx: click.Context) -> AppContext:
    app = ctx.find_object(AppContext)
    if app is None:  # a sub-command invoked on its own (tests of a single command)
        app = ctx.ensure_object(AppContext)
    return app


def _path(value: str | None) -> Path | None:
    # pathlib is imported only when a path is given: `--help` never pays for it.
    from pathlib import Path

    return None if value is None else Path(value)


def _set_ledger(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        _app(ctx).ledger_path = _path(value) or _app(ctx).ledger_path


def _set_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        _app(ctx).key_dir = _path(value)


def _set_flag(name: str) -> Any:
    def callback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            setattr(_app(ctx), name, True)

    return callback


def _global_options() -> list[click.Parameter]:
    """The global options as a sub-command takes them (hidden: the root's help lists them)."""
    flag: dict[str, Any] = {"is_flag": True, "expose_value": False, "hidden": True}
    return [
        click.Option(
            ["--ledger"],
            type=click.Path(dir_okay=False),
            expose_value=False,
            hidden=True,
            callback=_set_ledger,
        ),
        click.Option(
            ["--home"],
            type=click.Path(file_okay=False),
            expose_value=False,
            hidden=True,
            callback=_set_home,
        ),
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
    """A group whose commands take the global options; the root also loads them lazily."""

    command_class = AppCommand
    group_class = type  # sub-groups are AppGroups too

    def __init__(self, *args: Any, lazy: dict[str, tuple[tuple[str, ...], str]] | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        return params if ctx.parent is None else _with_globals(params)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.lazy, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and self.lazy:
            modules = self.lazy[cmd_name][0] if cmd_name in self.lazy else MODULES
            for module in modules:
                importlib.import_module(f"agentledger.cli.{module}")
        command = self.commands.get(cmd_name)
        if command is not None and cmd_name in self.lazy and command.short_help is None:
            command.short_help = self.lazy[cmd_name][1]  # listed the same, loaded or not
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if not self.lazy:
            super().format_commands(ctx, formatter)
            return
        # The listing comes from COMMANDS so that `-h` imports no command module.
        rows = [(name, self.lazy[name][1]) for name in self.list_commands(ctx) if name in self.lazy]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def load_all() -> None:
    """Import every command module (tests, completion of every name)."""
    for module in MODULES:
        importlib.import_module(f"agentledger.cli.{module}")


@click.group(cls=AppGroup, lazy=COMMANDS, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--ledger",
    "ledger_path",
    type=click.Path(dir_okay=False),
    envvar="AGENTLEDGER_LEDGER",
    default=DEFAULT_LEDGER,
    show_default=True,
    help="The ledger file (env: AGENTLEDGER_LEDGER).",
)
@click.option(
    "--home",
    "key_dir",
    type=click.Path(file_okay=False),
    envvar="AGENTLEDGER_HOME",
    default=None,
    help="The key folder, outside the ledger (env: AGENTLEDGER_HOME; "
    "default ~/.local/state/agentledger).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine output: JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or notes on stderr.")
@click.option("--no-color", is_flag=True, help="No colours (also: the NO_COLOR variable).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(__version__, prog_name="agentledger", message="%(prog)s %(version)s")
@click.pass_context
def cli(
    ctx: click.Context,
    ledger_path: str,
    key_dir: str | None,
    as_json: bool,
    quiet: bool,
    no_color: bool,
    debug: bool,
) -> None:
    """agentledger: the embedded, tamper-evident ledger for AI-agent runs.

    Global options may come before the command or after it
    (`agentledger runs --ledger ws/ledger.db --json`).

    \b
    Exit codes: 0 ok/clean, 1 not found, 2 diverged/tampered,
                3 phase blocked, 64 usage error (bad flags, missing or
                malformed file arguments), 65 invalid input data,
                130 interrupted.

    \b
    Examples:
      agentledger init && agentledger append run-1 step '{"n": 1}'
      agentledger runs --status diverged --limit 20
      agentledger verify --all --json > report.json
    """
    ctx.obj = AppContext(
        ledger_path=_path(ledger_path),
        debug=debug,
        key_dir=_path(key_dir),
        json=as_json,
        quiet=quiet,
        no_color=no_color,
    )
