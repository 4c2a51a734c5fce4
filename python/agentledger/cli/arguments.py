"""File and folder arguments, checked before a command starts any work.

One rule for every command (README, "Exit codes"): a file or folder *argument* that is
missing, unreadable or malformed — a key, a trust file, a checkpoint, an input, an output
path — is a usage error (64) naming the path, raised before the ledger is opened. Invalid
*data* inside an input document stays 65, found where the document is parsed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from agentledger.errors import AgentLedgerError, BadArgument

P = ParamSpec("P")
T = TypeVar("T")


def _lookup_errors(
    check: Callable[Concatenate[Path | str, str, P], T],
) -> Callable[Concatenate[Path | str, str, P], T]:
    """A path the system cannot even look up (a name too long, a loop of links, a folder
    we may not search) is a usage error naming it, as a missing one is; not a crash."""

    def checked(path: Path | str, what: str, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return check(path, what, *args, **kwargs)
        except OSError as exc:
            raise BadArgument(f"{what} {path}: {exc.strerror or exc}") from None

    functools.update_wrapper(checked, check)
    return checked


@_lookup_errors
def input_file(path: Path | str, what: str) -> Path:
    """An existing, readable regular file (``-``, stdin, is accepted as is)."""
    path = Path(path)
    if str(path) == "-":
        return path
    if not path.exists():
        raise BadArgument(f"{what} {path}: no such file")
    if path.is_dir():
        raise BadArgument(f"{what} {path}: is a folder, not a file")
    if not os.access(path, os.R_OK):
        raise BadArgument(f"{what} {path}: not readable")
    return path


@_lookup_errors
def input_folder(path: Path | str, what: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise BadArgument(f"{what} {path}: no such folder")
    if not path.is_dir():
        raise BadArgument(f"{what} {path}: not a folder")
    if not os.access(path, os.R_OK | os.X_OK):
        raise BadArgument(f"{what} {path}: not readable")
    return path


@_lookup_errors
def output_file(
    path: Path | str,
    what: str,
    *,
    key_home: Path,
    may_exist: bool = True,
    makes_folder: bool = False,
) -> Path:
    """A file that can be written: its folder exists and is writable (or, when the command
    creates it, ``makes_folder``, the nearest existing one is); not a folder itself. Never
    an SQLite database or one of its companion files (a ledger written over by a report is
    lost), and never in ``key_home``, the install's key folder."""
    path = Path(path)
    _not_precious(path, what, key_home)
    parent = path.parent if str(path.parent) else Path(".")
    if makes_folder:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if path.is_dir():
        raise BadArgument(f"{what} {path}: is a folder, not a file")
    if path.exists():
        if not may_exist:
            raise BadArgument(f"{what} {path}: already exists")
        if not os.access(path, os.W_OK):
            raise BadArgument(f"{what} {path}: not writable")
        return path
    if not parent.is_dir():
        raise BadArgument(f"{what} {path}: no such folder {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BadArgument(f"{what} {path}: folder {parent} is not writable")
    return path


def _not_precious(path: Path, what: str, key_home: Path) -> None:
    """Refuse an output that would land on a database's files or among the install's keys."""
    from agentledger.sqlite_files import database_behind

    database = database_behind(path)
    if database is not None:
        whose = "is one of" if database == path else f"leads to {database},"
        raise BadArgument(
            f"{what} {path}: {whose} an SQLite database's files (a ledger's?); an output "
            "never writes over them"
        )
    try:
        inside = path.resolve().is_relative_to(key_home.resolve())
    except (OSError, RuntimeError):  # a symlink loop: nothing to write to either
        inside = False
    if inside:
        raise BadArgument(
            f"{what} {path}: inside the key folder {key_home}; an output never goes there"
        )


@_lookup_errors
def output_folder(path: Path | str, what: str) -> Path:
    """A folder to write into: absent (its parent writable) or an empty folder."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise BadArgument(f"{what} {path}: a symbolic link to nothing ({os.readlink(path)})")
    if path.exists():
        if not path.is_dir():
            raise BadArgument(f"{what} {path}: not a folder")
        if any(path.iterdir()):
            raise BadArgument(f"{what} {path}: not empty")
        return path
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise BadArgument(f"{what} {path}: cannot be created (in {parent})")
    return path


@_lookup_errors
def output_tree(path: Path | str, what: str, *, key_home: Path, first: str) -> Path:
    """A folder written into again and again (an exported log): absent or a folder, never
    a file, where its file ``first`` can be written (``output_file``)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise BadArgument(f"{what} {path}: not a folder")
    output_file(path / first, what, key_home=key_home, makes_folder=True)
    return path


def trust_values(values: Iterable[str], label: str = "--trust") -> tuple[str, ...]:
    """Each ``--trust`` value is a public key or a trust file that parses; the keys they
    name, as ``ed25519:<hex>`` (read by ``keys.trust_values``, the one parser, so every
    check downstream, bernstein's included, sees keys and never parses a file again)."""
    from agentledger import keys  # only with --trust

    found: list[str] = []
    for value in values:
        try:
            if not value.strip().startswith("ed25519:") and not keys.is_vkey(value):
                input_file(value, label)
            found.extend(key for key, _ in keys.trust_values([value]))
        except BadArgument:
            raise
        except AgentLedgerError as exc:
            # A malformed key may be a secret pasted by mistake: never echo it.
            shown = "ed25519:…" if value.strip().startswith("ed25519:") else value
            raise BadArgument(
                f"{label} {shown}: {exc.message} (give ed25519:<64 hex>, a verifier key "
                "<name>+<key id>+<key> or a trust file)"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BadArgument(f"{label} {value}: cannot read ({exc})") from None
    return tuple(dict.fromkeys(found))


def audit_key_file(path: Path | None) -> Path | None:
    """``--audit-key``: an existing, readable, non-empty key file."""
    if path is None:
        return None
    from agentledger.keys import MIN_AUDIT_KEY_BYTES
    from agentledger.limits import MAX_KEY_FILE_BYTES, read_capped

    input_file(path, "--audit-key")
    if not path.is_file():  # a pipe would be used up by this check, or wait forever
        raise BadArgument(f"--audit-key {path}: not a regular file (a key is read from a file)")
    size = len(read_capped(path, MAX_KEY_FILE_BYTES, "an audit key").strip())
    if not size:
        raise BadArgument(f"--audit-key {path}: the file is empty")
    if size < MIN_AUDIT_KEY_BYTES:
        raise BadArgument(
            f"--audit-key {path}: {size} bytes; an audit key has at least {MIN_AUDIT_KEY_BYTES}"
        )
    return path


def tsa_bundle(path: Path | None) -> list[Any] | None:
    """``--tsa-bundle``: the trusted TSA certificates it holds, or a usage error (exit 64),
    found before any work (a verify reads it only if a sealed bernstein run needs it)."""
    if path is None:
        return None
    from agentledger.bernstein.tsa_trust import load_trust_bundle  # only with --tsa-bundle
    from agentledger.limits import MAX_DOCUMENT_BYTES, read_capped

    input_file(path, "--tsa-bundle")
    try:
        return load_trust_bundle(read_capped(path, MAX_DOCUMENT_BYTES, "a trust bundle"))
    except (OSError, ValueError) as exc:
        raise BadArgument(f"--tsa-bundle {path}: {exc}", code="bad-tsa-bundle") from None


def checkpoint_file(path: Path | None) -> Path | None:
    """``--checkpoint``: an existing file holding a checkpoint note that parses."""
    if path is None:
        return None
    from agentledger.limits import read_capped
    from agentledger.notes import MAX_NOTE_BYTES, Checkpoint  # only with --checkpoint

    input_file(path, "--checkpoint")
    # A file larger than a note can be is refused unread: a malformed file argument (64),
    # as an oversized trust file is.
    try:
        data = read_capped(path, MAX_NOTE_BYTES, "a checkpoint")
    except AgentLedgerError as exc:
        raise BadArgument(f"--checkpoint {exc.message}") from None
    try:
        Checkpoint.parse(data)
    except AgentLedgerError as exc:
        raise BadArgument(f"--checkpoint {path}: not a checkpoint ({exc.message})") from None
    return path
