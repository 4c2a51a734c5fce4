"""An SQLite database's files on disk, known without opening them through SQLite.

A database is its main file and up to three companions SQLite keeps beside it (the WAL,
the WAL-index and the rollback journal). Two rules follow from how SQLite uses them:

- Nothing but SQLite writes any of them: an output file (``--html``, ``--export``) that
  would land on a database or a companion is refused (``database_behind``), and a
  companion is never opened as a ledger of its own (``companion_of``): SQLite would
  reset a WAL, or play back and delete a journal, that held one.
- This process never opens one of its own open ledger's files by path. POSIX locks belong
  to the process, not the descriptor: closing *any* descriptor of the file drops every
  lock the process holds on it, SQLite's included, and another process could then
  checkpoint and remove the WAL under a transaction still reading it. Each ``Database``
  says it holds its file (``hold``); whatever reads a file a user or a workdir names
  asks ``held_by_this_process`` first, which only ``stat``s.
"""

from __future__ import annotations

import fcntl
import os
import weakref
from pathlib import Path

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")
WAL_INDEX_DMS_BYTE = 128
"""The byte of a WAL-index (``-shm``) file on which every connection using it holds a read
lock while it is open (SQLite's unix VFS: the "dead man switch" after its 8 lock bytes)."""


def companions(path: Path) -> list[Path]:
    """The files SQLite may keep beside the database at ``path``."""
    return [Path(f"{path}{suffix}") for suffix in COMPANION_SUFFIXES]


WAL_MAGICS = (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")
"""A write-ahead log's first 4 bytes (big-endian 0x377f0682 or 0x377f0683)."""
JOURNAL_MAGIC = b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7"
"""A rollback journal's first 8 bytes."""
WAL_INDEX_VERSIONS = ((3007000).to_bytes(4, "little"), (3007000).to_bytes(4, "big"))
"""A WAL-index (``-shm``) file's first 4 bytes: its version, in the machine's byte order."""


def _head(path: Path) -> bytes:
    """The first bytes of ``path`` when it is a regular file, else nothing."""
    try:
        if not path.is_file():
            return b""
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER))
    except OSError:
        return b""


def _starts_as_database(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts as an SQLite database does."""
    return _head(path) == SQLITE_HEADER


def _starts_as_companion(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts as a WAL, a WAL-index or a rollback
    journal does: one reached by another name (a hard link) than the database's."""
    head = _head(path)
    return head[:4] in WAL_MAGICS + WAL_INDEX_VERSIONS or head[:8] == JOURNAL_MAGIC


def companion_of(path: Path) -> Path | None:
    """The database whose ``-wal``, ``-shm`` or ``-journal`` file ``path`` names (whether or
    not that file exists yet), else None. A database this process has open is known by its
    inode, never opened."""
    for suffix in COMPANION_SUFFIXES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            main = path.with_name(path.name[: -len(suffix)])
            if held_by_this_process(main) or _starts_as_database(main):
                return main
    return None


def database_behind(path: Path) -> Path | None:
    """The database ``path`` belongs to: the main file when it names a companion, itself
    when it is one (or a companion reached by a hard link), else None. A symbolic link is
    judged by the name it leads to as well as by its own."""
    names = [path]
    try:
        real = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop leads nowhere
        real = path
    if real != path.absolute():
        names.append(real)
    for name in names:
        main = companion_of(name)
        if main is not None:
            return main
        if held_by_this_process(name) or _starts_as_database(name) or _starts_as_companion(name):
            return name
    return None


_held: dict[int, Path] = {}
"""Each open ``Database``'s path, by the object's identity. No lock: a finalizer can run in
the middle of any statement of this thread (a garbage collection), and each access below
is one call of the dict's own, which the interpreter's lock makes whole."""


def hold(owner: object, path: Path) -> None:
    """``owner`` (a ``Database``) has ``path`` open until ``release(owner)`` or its end."""
    _held[id(owner)] = path.absolute()
    weakref.finalize(owner, _forget, id(owner))


def release(owner: object) -> None:
    _forget(id(owner))


def _forget(owner_id: int) -> None:
    _held.pop(owner_id, None)


def held_identities() -> set[tuple[int, int]]:
    """``(st_dev, st_ino)`` of every file of every database this process has open, its
    companions included (those that exist). ``stat`` only."""
    databases = _held.copy().values()
    identities = set()
    for database in databases:
        for file in (database, *companions(database)):
            try:
                info = os.stat(file)
            except OSError:
                continue
            identities.add((info.st_dev, info.st_ino))
    return identities


def held_by_this_process(path: Path) -> bool:
    """Whether ``path`` is a file of a database this process has open: it must not be
    opened by path (module docs). ``stat`` only; a path that cannot be stat'ed is not."""
    held = held_identities()
    if not held:
        return False
    try:
        info = os.stat(path)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) in held


def in_use(database: Path) -> bool:
    """Whether some connection may be using ``database``'s WAL: this process holds the
    database, or another holds the lock each connection keeps on its ``-shm`` file. A
    ``-shm`` that cannot be opened or locked counts as in use."""
    if held_by_this_process(database):
        return True  # and its -shm is not opened here: closing it would drop our locks
    try:
        fd = os.open(f"{database}-shm", os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, WAL_INDEX_DMS_BYTE)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
