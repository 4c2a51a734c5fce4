"""The ``agentledger`` command line.

Exit codes are the contract in ``agentledger.errors.ExitCode``: usage errors are 64
(never 2, which means divergence), invalid input 65, and so on. Every reporting command
takes ``--json``; machine output goes alone on stdout.
"""

from __future__ import annotations

import sys

import apsw
import click

from agentledger.cli.app import cli
from agentledger.errors import AgentLedgerError, ExitCode, InvalidInput, LedgerError


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the click app and map every outcome to the documented exit code."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        result = cli.main(args=argv, prog_name="agentledger", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        return ExitCode.USAGE
    except click.UsageError as exc:
        # One line, like every other error (click's own form takes four).
        command = exc.ctx.command_path if exc.ctx else "agentledger"
        message = " ".join(exc.format_message().splitlines())
        click.echo(f"error [usage]: {message} (see `{command} -h`)", err=True)
        return ExitCode.USAGE
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return ExitCode.USAGE
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except AgentLedgerError as exc:
        if debug:
            raise
        return _fail(exc)
    # Last-resort nets: whatever a command failed to type, the user still gets one line
    # and the documented exit code (each case found here is also fixed where it starts).
    except apsw.Error as exc:
        if debug:
            raise
        return _fail(LedgerError(f"SQLite: {exc}", code="ledger-error"))
    except RecursionError:
        if debug:
            raise
        return _fail(InvalidInput("input nested too deeply", code="too-deep"))
    return int(result or 0)


def _fail(exc: AgentLedgerError) -> int:
    from agentledger.display import safe  # a message may quote ledger or workdir strings

    message = safe(" ".join(exc.message.splitlines()))
    click.echo(f"error [{exc.code}]: {message}", err=True)
    return int(exc.exit_code)


__all__ = ["main"]
