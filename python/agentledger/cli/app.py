"""The root command group, and the one list of commands it registers.

Commands are loaded lazily: ``agentledger --version`` and ``--help`` import click, this
module and ``context``, nothing else (no rich, no pydantic, no compiled core). ``COMMANDS``
names each command's module, the command object in it and its one-line help; a test keeps
it equal to the commands themselves. Command modules never import this module.

The global options (``--ledger``, ``--home``, ``--json``, ``--quiet``, ``--no-color``,
``--debug``) are accepted before the command or after it: ``AppCommand`` and ``AppGroup``
(``context.py``) add them, hidden, to every sub-command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import click

from agentledger._version import __version__
from agentledger.cli.context import (
    DEFAULT_LEDGER,
    AppContext,
    AppGroup,
    KeyFolder,
    LedgerFile,
    PipeClosed,
    path_or_none,
)

if TYPE_CHECKING:
    pass

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

COMMANDS: dict[str, tuple[str, str]] = {
    "activity": ("activity:activity", "Record and verify activities in runs."),
    "append": ("journal:append", "Append one entry to a run (JSON body argument or stdin)."),
    "archive": ("log:archive_command", "Write a sealed single-file audit archive of runs."),
    "bernstein": ("bernstein:bernstein_group", "bernstein's own verdicts on an imported workdir."),
    "checkpoint": ("log:checkpoint", "Sign a checkpoint of the workspace log and show the newest."),
    "demo": ("demo:demo", "Build a demo ledger, corrupt five things, bulk-verify it."),
    "explain": ("explain:explain", "Explain a verification check, or list every check."),
    "export": ("bernstein:export_group", "Write ledger contents out in another tool's format."),
    "fleet": ("fleet:fleet", "Verify many ledger files on a Dask cluster (agentledger[fleet])."),
    "fsck": ("log:fsck", "Every check: SQLite integrity, checkpoints, verify, orphan blobs."),
    "gc": ("log:gc_command", "Delete blobs nothing reaches; sign a prune receipt."),
    "import": ("bernstein:import_group", "Bring another tool's records into the ledger."),
    "init": ("journal:init", "Create the ledger file (and its folder) if it does not exist."),
    "keys": ("keys:keys", "Signing and audit keys, kept outside the ledger."),
    "log": ("log:log_group", "The workspace log as a C2SP log: export it as static tiles."),
    "phase": ("phase:phase", "Phase capability profiles: compile, record, transition, show."),
    "prove": ("log:prove_command", "Print a proof that an entry is in the signed log."),
    "runs": ("journal:runs", "List runs: entries, activities, last entry, last verify status."),
    "show": ("journal:show", "Show a run's journal, verified (kinds, hashes, evidence)."),
    "team": ("team:team", "Team manifests: which modality each role runs as."),
    "verify": ("verify:verify", "Bulk-verify runs: chains, entry bytes, evidence sets, blobs."),
    "verify-proof": ("log:verify_proof_command", "Check a proof offline, without the ledger."),
}
"""The one list of commands: name -> ("module:object", its short help as ``-h`` lists it),
the module being under agentledger.cli. The root imports a command's module when the
command is used; command modules never import this one."""


class RootGroup(AppGroup):
    """The root: it registers each command from ``COMMANDS`` when it is first asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = COMMANDS

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.lazy, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            where, short_help = self.lazy[cmd_name]
            module_name, attribute = where.split(":")
            module = importlib.import_module(f"agentledger.cli.{module_name}")
            command: click.Command = getattr(module, attribute)
            if command.short_help is None:
                command.short_help = short_help  # listed the same, loaded or not
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as closed:
            # Click makes a closed pipe exit 1; the reader of `runs | head` has what it
            # wanted, so the command line ends with 0 (cli/__init__.py).
            raise PipeClosed from closed

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The listing comes from COMMANDS so that `-h` imports no command module.
        rows = [(name, self.lazy[name][1]) for name in self.list_commands(ctx) if name in self.lazy]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def load_all() -> None:
    """Register every command (tests, completion of every name)."""
    context = click.Context(cli)
    for name in COMMANDS:
        cli.get_command(context, name)


@click.group(cls=RootGroup, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--ledger",
    "ledger_path",
    type=LedgerFile(),
    envvar="AGENTLEDGER_LEDGER",
    default=DEFAULT_LEDGER,
    show_default=True,
    help="The ledger file (env: AGENTLEDGER_LEDGER).",
)
@click.option(
    "--home",
    "key_dir",
    type=KeyFolder(),
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
        ledger_path=path_or_none(ledger_path),
        debug=debug,
        key_dir=path_or_none(key_dir),
        json=as_json,
        quiet=quiet,
        no_color=no_color,
    )
