"""The ``agentledger`` command line.

Exit codes are the contract in ``agentledger.errors.ExitCode``: usage errors are 64
(never 2, which means divergence), invalid input 65, interrupted 130, and so on. Every
reporting command takes ``--json``; machine output goes alone on stdout.

This module is imported by ``agentledger --version``: it imports click and nothing heavy.
"""

from __future__ import annotations

import sys

from agentledger.errors import AgentLedgerError, ExitCode, InvalidInput, LedgerError


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the click app and map every outcome to the documented exit code."""
    args = argv if argv is not None else sys.argv[1:]
    if args == ["--version"]:
        # Scripts call this per run: answer before importing even click.
        from agentledger._version import __version__

        sys.stdout.write(f"agentledger {__version__}\n")
        return ExitCode.OK
    import click

    from agentledger.cli.app import cli
    from agentledger.cli.context import PipeClosed

    debug = "--debug" in args
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
    except (click.exceptions.Abort, KeyboardInterrupt):
        # Ctrl-C (click turns it into Abort): every write is one transaction, so an
        # interrupted command leaves the ledger as it was.
        if debug:
            raise
        click.echo("interrupted", err=True)
        return ExitCode.INTERRUPTED
    except PipeClosed:
        # `agentledger runs | head -1`: the reader has what it wanted (git log's convention).
        _silence_stdout()
        return ExitCode.OK
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except AgentLedgerError as exc:
        if debug:
            raise
        return _fail(exc)
    # Last-resort nets: whatever a command failed to type, the user still gets one line
    # and the documented exit code (each case found here is also fixed where it starts).
    except RecursionError:
        if debug:
            raise
        return _fail(InvalidInput("input nested too deeply", code="too-deep"))
    except BrokenPipeError:
        # `agentledger runs --jsonl | head`: the reader has what it wanted.
        _silence_stdout()
        return ExitCode.OK
    except Exception as exc:
        if debug:
            raise
        if _is_sqlite_error(exc):
            return _fail(LedgerError(f"SQLite: {exc}", code="ledger-error"))
        # A bug, not a user error: still one line, and the traceback on request.
        message = f"{type(exc).__name__}: {exc} (rerun with --debug for a traceback)"
        return _fail(AgentLedgerError(message, code="internal"), ExitCode.INTERNAL)
    return int(result or 0)


def _is_sqlite_error(exc: BaseException) -> bool:
    apsw = sys.modules.get("apsw")  # not imported for commands that never open a ledger
    return apsw is not None and isinstance(exc, apsw.Error)


def _silence_stdout() -> None:
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _fail(exc: AgentLedgerError, code: int | None = None) -> int:
    import click

    from agentledger.display import safe  # a message may quote ledger or workdir strings

    message = safe(" ".join(exc.message.splitlines()))
    if exc.code == "signing-refused" and "rolled back" in message:
        # The one recovery a legitimately restored backup has (cli/log.py).
        message += (
            "; if you restored this file from a backup on purpose, "
            "`agentledger checkpoint --adopt-restored` makes it the base after a clean verify"
        )
    click.echo(f"error [{exc.code}]: {message}", err=True)
    return int(exc.exit_code if code is None else code)


__all__ = ["main"]
