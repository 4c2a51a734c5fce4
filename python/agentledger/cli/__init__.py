"""The ``agentledger`` command line.

Exit codes are the contract in ``agentledger.errors.ExitCode``: usage errors are 64
(never 2, which means divergence), invalid input 65, and so on. Every reporting command
takes ``--json``; machine output goes alone on stdout.
"""

from __future__ import annotations

import sys

import click

from agentledger.cli.app import cli
from agentledger.errors import AgentLedgerError, ExitCode


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the click app and map every outcome to the documented exit code."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        result = cli.main(args=argv, prog_name="agentledger", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        return ExitCode.USAGE
    except click.UsageError as exc:
        exc.show()
        return ExitCode.USAGE
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return ExitCode.USAGE
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except AgentLedgerError as exc:
        if debug:
            raise
        click.echo(f"error [{exc.code}]: {exc.message}", err=True)
        return int(exc.exit_code)
    return int(result or 0)


__all__ = ["main"]
