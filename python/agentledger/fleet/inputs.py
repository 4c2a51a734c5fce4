"""From the command line's PATHs to the list of files a fleet verifies.

Each PATH is a ledger file or an archive (verified), or a folder (searched for ledgers).
A file is never read as a list of paths on the strength of its contents: a ledger an
attacker replaced with one line naming another ledger would vanish from the report. Lists
come only from ``--from FILE`` (one path a line, ``#`` comments, relative to the list's
folder). Every path given or listed is verified and reported, an unreadable one as
unreadable. Paths are made absolute here: workers read the files themselves, so a path
must mean the same file on every machine (shared storage).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from agentledger.errors import AgentLedgerError, BadArgument
from agentledger.limits import read_capped
from agentledger.sqlite_files import SQLITE_HEADER, held_by_this_process
from agentledger.storage.migrations import APPLICATION_ID

APPLICATION_ID_OFFSET = 68
"""Where SQLite keeps ``PRAGMA application_id`` in the file header (big-endian)."""
LEDGER_SUFFIX = ".db"
MAX_LIST_BYTES = 64 * 1024 * 1024


class FleetArgumentError(BadArgument):
    """A fleet argument that cannot be used (no such path, nothing to verify, no scheduler)."""


def expand_paths(
    arguments: Iterable[str | os.PathLike[str]], lists: Iterable[str | os.PathLike[str]] = ()
) -> list[str]:
    """Every file to verify, absolute, in order (PATHs, then each ``--from`` list), each once."""
    arguments = list(arguments)
    found: list[str] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            found.extend(search_folder(path))
        elif os.path.lexists(path):
            found.append(_absolute(path))  # a file: verified as it is, whatever it holds
        else:
            raise FleetArgumentError(f"{argument}: no such file or folder")
    for listing in lists:
        found.extend(_expand_listed(read_list_file(Path(listing))))
    unique = list(dict.fromkeys(found))
    if not unique:
        shown = ", ".join(str(a) for a in [*arguments, *lists]) or "(none)"
        raise FleetArgumentError(f"no ledger files to verify in {shown}")
    return unique


def search_folder(folder: Path) -> Iterator[str]:
    """Ledgers and archives under ``folder``, in path order.

    A file is taken when its SQLite header says it is an agentledger file, or when it is
    named ``*.db`` and is not an SQLite file of another application: a damaged ledger is
    then reported as unreadable rather than silently skipped.
    """
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if looks_like_ledger(path):
                yield _absolute(path)


def looks_like_ledger(path: Path) -> bool:
    if held_by_this_process(path):  # never opened by path (sqlite_files.py)
        return True
    try:
        # Only a regular file is opened to look at: a FIFO would block the client.
        if not path.is_file():
            return path.name.endswith(LEDGER_SUFFIX)
        with open(path, "rb") as handle:
            header = handle.read(APPLICATION_ID_OFFSET + 4)
    except OSError:
        return path.name.endswith(LEDGER_SUFFIX)
    if header.startswith(SQLITE_HEADER) and len(header) == APPLICATION_ID_OFFSET + 4:
        application_id = int.from_bytes(header[APPLICATION_ID_OFFSET:], "big")
        return application_id == APPLICATION_ID
    return path.name.endswith(LEDGER_SUFFIX)


def read_list_file(path: Path) -> list[str]:
    """The paths ``--from FILE`` names: one a line, blank lines and ``#`` comments skipped,
    relative paths relative to the list's folder (a usage error, exit 64, if unreadable)."""
    data = read_capped(path, MAX_LIST_BYTES, "a list of paths")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise FleetArgumentError(f"--from {path}: not UTF-8 text") from None
    if "\x00" in text:
        raise FleetArgumentError(f"--from {path}: not a list of paths (it holds a NUL byte)")
    entries = []
    for line in text.splitlines():
        entry = line.strip()
        if entry and not entry.startswith("#"):
            entries.append(str(path.parent / entry))
    return entries


def _expand_listed(entries: list[str]) -> Iterator[str]:
    # A listed folder is searched; a listed file is verified as it is (lists do not nest,
    # and a listed path that does not exist is reported by the worker, not dropped here).
    for entry in entries:
        path = Path(entry)
        if path.is_dir():
            yield from search_folder(path)
        else:
            yield _absolute(path)


def _absolute(path: Path) -> str:
    return os.path.abspath(path)


def checkpoint_key(ledger_id: str, archive: str = "") -> str:
    """Under what ``--checkpoints`` files a checkpoint: its ledger id, and for an archive's
    own log the archive id too (an archive keeps its source's ledger id: its checkpoints
    must never stand for the ledger's, nor the other way round)."""
    return f"{ledger_id}/archive/{archive}" if archive else ledger_id


def read_checkpoints(folder: Path) -> tuple[dict[str, str], list[str]]:
    """``--checkpoints DIR``: ledger id (``checkpoint_key``) → the text of its newest
    exported checkpoint.

    Every file directly in ``folder`` that parses as a checkpoint counts, whatever its name
    (a checkpoint names its ledger, and an archive's its archive). For a log with several,
    the largest size is the one its file must extend. Returns the map and the names of the
    files that are not checkpoints (skipped; a ledger left without one is reported by its
    task).
    """
    from agentledger.notes import MAX_NOTE_BYTES, Checkpoint  # only with --checkpoints

    if not folder.is_dir():
        raise FleetArgumentError(f"--checkpoints {folder}: no such folder")
    newest: dict[str, tuple[int, str]] = {}
    skipped: list[str] = []
    for path in sorted(folder.iterdir()):
        if not path.is_file():
            continue
        try:
            # A huge file there is skipped unread, not read whole.
            data = read_capped(path, MAX_NOTE_BYTES, "a checkpoint")
            checkpoint = Checkpoint.parse(data)
        except (AgentLedgerError, OSError):
            skipped.append(path.name)
            continue
        key = checkpoint_key(checkpoint.ledger_id, checkpoint.archive)
        known = newest.get(key)
        if known is None or checkpoint.size > known[0]:
            newest[key] = (checkpoint.size, data.decode("utf-8"))
    return {ledger_id: text for ledger_id, (_, text) in newest.items()}, skipped


def read_signer_memory(home: Path) -> dict[str, bytes]:
    """This install's memory of what it signed and verified (``signer_memory.py``), per
    ledger id, as the files' bytes: sent to the workers so that each verifies a ledger as
    this install would (a ledger rolled back behind what it signed is caught anywhere)."""
    from agentledger.signer_memory import LEDGER_ID, LEDGERS_DIR, MAX_MEMORY_BYTES  # on use

    folder = home / LEDGERS_DIR
    if not folder.is_dir():
        return {}
    memory = {}
    for path in sorted(folder.glob("*.json")):
        if not LEDGER_ID.fullmatch(path.stem):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if len(data) <= MAX_MEMORY_BYTES:
            memory[path.stem] = data
    return memory
