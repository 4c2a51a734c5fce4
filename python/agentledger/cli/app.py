"""The root command group. Sub-command groups live in their own modules and attach here."""

from __future__ import annotations

from pathlib import Path

import click

from agentledger.cli.context import AppContext

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--ledger",
    "ledger_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="AGENTLEDGER_LEDGER",
    default=Path(".agentledger/ledger.db"),
    show_default=True,
    help="The ledger file (env: AGENTLEDGER_LEDGER).",
)
@click.option(
    "--home",
    "key_dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="AGENTLEDGER_HOME",
    default=None,
    help="The key folder, outside the ledger (env: AGENTLEDGER_HOME; "
    "default ~/.local/state/agentledger).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="agentledger", prog_name="agentledger")
@click.pass_context
def cli(ctx: click.Context, ledger_path: Path, key_dir: Path | None, debug: bool) -> None:
    """agentledger: the embedded, tamper-evident ledger for AI-agent runs.

    \b
    Exit codes: 0 ok/clean, 1 not found, 2 diverged/tampered,
                3 phase blocked, 64 usage error, 65 invalid input.
    """
    ctx.obj = AppContext(ledger_path=ledger_path, debug=debug, key_dir=key_dir)


def _register() -> None:
    # Sub-command modules import `cli` from here and decorate onto it.
    from agentledger.cli import (  # noqa: F401
        activity,
        bernstein,
        demo,
        explain,
        fleet,
        journal,
        keys,
        log,
        phase,
        team,
        verify,
    )


_register()
