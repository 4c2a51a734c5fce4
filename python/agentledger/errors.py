"""Typed errors. Each carries a machine-readable ``code`` and maps to one CLI exit code."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The command-line contract (MISSION.md): the same meaning for every command."""

    OK = 0
    NOT_FOUND = 1
    DIVERGED = 2
    BLOCKED = 3
    USAGE = 64
    INVALID_INPUT = 65
    INTERNAL = 70
    """A bug in agentledger (EX_SOFTWARE): one line, the traceback with --debug."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT, as shells report it); the ledger is left untouched."""


class AgentLedgerError(Exception):
    """Base of every error agentledger raises on purpose."""

    exit_code: ExitCode = ExitCode.INVALID_INPUT
    code: str = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class NotFound(AgentLedgerError):
    """The thing asked about does not exist (no such run, no ledger, no activity)."""

    exit_code = ExitCode.NOT_FOUND
    code = "not-found"


class BadArgument(AgentLedgerError):
    """A file or folder argument that is missing, unreadable or malformed (a key, a trust
    file, a checkpoint, an input, an output path): a usage error, found before any work."""

    exit_code = ExitCode.USAGE
    code = "bad-argument"


class InvalidInput(AgentLedgerError):
    """Input data that is malformed or violates a schema; nothing was written."""

    exit_code = ExitCode.INVALID_INPUT
    code = "invalid-input"


class LedgerError(AgentLedgerError):
    """The ledger file cannot be used (not a ledger, newer schema, locked, I/O failure)."""

    exit_code = ExitCode.INVALID_INPUT
    code = "ledger-error"


class Diverged(AgentLedgerError):
    """The ledger is not what was signed, or not what agentledger writes: the operation is
    refused and nothing was written or signed (exit 2, as verify's divergence)."""

    exit_code = ExitCode.DIVERGED
    code = "diverged"


class WrongThread(AgentLedgerError):
    """A ``Ledger`` used from a thread other than the one that opened it. SQLite handles
    are not shared between threads here: open one ``Ledger`` per thread (each sees every
    commit of the others)."""

    exit_code = ExitCode.INTERNAL
    code = "wrong-thread"
