"""An SQLite VFS (apsw) that injects disk faults into a ledger's files on demand.

It passes everything through to the default VFS until a fault is armed; then the chosen
operation on the chosen file fails once, after ``skip`` calls have gone through:

- ``full``: ``xWrite`` raises ``SQLITE_FULL`` (no space left on the device);
- ``write``: ``xWrite`` raises ``SQLITE_IOERR`` (an I/O error while writing);
- ``short``: ``xWrite`` writes only the first half of the bytes, then raises
  ``SQLITE_IOERR`` (a torn write: the prefix is on disk);
- ``sync``: ``xSync`` raises ``SQLITE_IOERR`` (the device reported it could not flush);
- ``read``: ``xRead`` raises ``SQLITE_IOERR``.

``read_only`` opens the database file read-only, as for a file this user may not write.

``files`` selects which file suffixes are affected: ``""`` is the database file itself,
``"-wal"`` the write-ahead log, ``"-shm"`` is left alone (shared memory, not the disk).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import apsw

NAME = "agentledger-faults"

FAULTS = ("full", "write", "short", "sync", "read")


@dataclass
class Fault:
    kind: str = ""
    files: tuple[str, ...] = ("", "-wal")
    skip: int = 0
    fired: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    read_only: bool = False
    """Open the database file read-only, as for a file this user may not write."""

    def arm(self, kind: str, *, skip: int = 0, files: tuple[str, ...] = ("", "-wal")) -> None:
        assert kind in FAULTS
        self.kind, self.skip, self.files, self.fired = kind, skip, files, 0

    def disarm(self) -> None:
        self.kind = ""
        self.read_only = False

    def fires(self, operation: str, suffix: str) -> str:
        """The fault to inject into this call (``""``: none). Each armed fault fires once."""
        self.calls[operation] = self.calls.get(operation, 0) + 1
        if not self.kind or suffix not in self.files:
            return ""
        wanted = {"full": "write", "write": "write", "short": "write"}.get(self.kind, self.kind)
        if operation != wanted:
            return ""
        if self.skip > 0:
            self.skip -= 1
            return ""
        kind, self.kind = self.kind, ""
        self.fired += 1
        return kind


FAULT = Fault()


def _suffix(name: str) -> str:
    for suffix in ("-wal", "-shm", "-journal"):
        if name.endswith(suffix):
            return suffix
    return ""


class FaultyFile(apsw.VFSFile):  # type: ignore[misc]
    def __init__(self, inheritfromvfsname: str, filename: object, flags: list[int]) -> None:
        super().__init__(inheritfromvfsname, filename, flags)
        name = filename.filename() if hasattr(filename, "filename") else str(filename or "")
        self.suffix = _suffix(name)

    def xWrite(self, data: bytes, offset: int) -> None:
        kind = FAULT.fires("write", self.suffix)
        if kind:
            if kind == "short":
                super().xWrite(bytes(data)[: len(data) // 2], offset)
                raise apsw.IOError("injected short write")
            if kind == "full":
                raise apsw.FullError("injected: no space left on device")
            raise apsw.IOError("injected write error")
        super().xWrite(data, offset)

    def xSync(self, flags: int) -> None:
        if FAULT.fires("sync", self.suffix):
            raise apsw.IOError("injected sync error")
        super().xSync(flags)

    def xRead(self, amount: int, offset: int) -> bytes:
        if FAULT.fires("read", self.suffix):
            raise apsw.IOError("injected read error")
        data: bytes = super().xRead(amount, offset)
        return data


class FaultyVFS(apsw.VFS):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__(NAME, "")

    def xOpen(self, name: object, flags: list[int]) -> FaultyFile:
        filename = name.filename() if hasattr(name, "filename") else str(name or "")
        if FAULT.read_only and _suffix(filename) == "":
            # As SQLite opens a file it may not write (mode 0444, a read-only mount).
            writable = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
            flags[0] = (flags[0] & ~writable) | apsw.SQLITE_OPEN_READONLY
        return FaultyFile("", name, flags)


_registered: list[FaultyVFS] = []


def register() -> str:
    """Register the VFS once per process; return its name."""
    if not _registered:
        _registered.append(FaultyVFS())
    return NAME
