"""What this install signed and verified, per ledger, kept outside the ledger.

The threat model (docs/RELIABILITY.md) lets an attacker write the ledger file but not
``$AGENTLEDGER_HOME``. If the signer trusted the file's own record of what it signed, a
forged log with its checkpoints deleted would be signed by the victim's next append. So,
as a Certificate Transparency log signs only trees consistent with its last signed head,
the install keeps, per ledger id, the newest log state it signed and the newest a verify
found clean, in ``$AGENTLEDGER_HOME/ledgers/<ledger id>.json``:

    {"signed": {"size": 120, "root": "<64 hex>", "frontier": "<hex>", "time": "..."},
     "verified": {...}}

The frontier (the perfect subtrees' roots, 32 bytes each, largest first) is what the
signer extends (``proven.py``): a new checkpoint's root is computed from it and the
entries appended since, never read from the file's tiles. A record without one (written
before the frontier was kept) is completed from the tiles, checked to hash to its root.

Updates are monotonic (a smaller size never replaces a larger one) and made under an
exclusive ``flock``, so concurrent writers of one install can only move it forward. It is
written after the ledger commits: it may lag the file (a crash in between), never lead it
(``signing.py`` copes with the lag).
Verify reads it before its snapshot begins, so it never sees a state newer than the file.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentledger.errors import InvalidInput
from agentledger.ids import utc_timestamp

LEDGERS_DIR = "ledgers"
LEDGER_ID = re.compile(r"[0-9a-f]{32}")
"""A ledger id as ``init`` makes it (16 random bytes, hex); anything else names no file."""
MAX_MEMORY_BYTES = 16_384
HASH_LEN = 32

Kind = Literal["signed", "verified"]


@dataclass(frozen=True, slots=True)
class Remembered:
    """A log state this install signed or found clean."""

    size: int
    root: bytes
    time: str
    frontier: tuple[bytes, ...] | None = None
    """The tree's frontier at ``size`` (None: a record from before it was kept)."""

    def to_json(self) -> str:
        """Its JSON object, keys sorted (written at every signature: formatted directly)."""
        frontier = "" if self.frontier is None else b"".join(self.frontier).hex()
        return (
            f'{{"frontier": "{frontier}", "root": "{self.root.hex()}", "size": {self.size}, '
            f'"time": {json.dumps(self.time)}}}'
        )


class SignerMemory:
    """The memory of one ledger id under one key folder. Constructing it touches nothing."""

    def __init__(self, home: Path, ledger_id: str) -> None:
        self.ledger_id = ledger_id
        self.usable = bool(LEDGER_ID.fullmatch(ledger_id))
        self.path = home / LEDGERS_DIR / f"{ledger_id}.json"

    def read(self) -> dict[str, Remembered]:
        """``{"signed": ..., "verified": ...}`` as far as recorded; empty for a new ledger.

        A memory file that does not parse counts as empty: the signer then verifies the
        whole ledger before it signs again, which is the safe direction.
        """
        if not self.usable:
            return {}
        fd = _open(self.path, create=False)
        if fd is None:
            return {}
        return _decode(os.pread(fd, MAX_MEMORY_BYTES + 1, 0))

    def base(self) -> Remembered | None:
        """The newest state this install vouched for: signed, or verified clean."""
        known = self.read()
        candidates = [known[kind] for kind in ("signed", "verified") if kind in known]
        return max(candidates, key=lambda r: r.size) if candidates else None

    def record(
        self,
        kind: Kind,
        size: int,
        root: bytes,
        frontier: tuple[bytes, ...],
        time: str | None = None,
    ) -> None:
        """Remember ``(size, root, frontier)`` as ``kind``, unless a larger state is there.

        The record is rewritten in place, padded to one fixed length, under an exclusive
        ``flock``: one small write per signature, no new file (a write cut by a crash
        leaves a record that does not parse, which counts as none: the safe direction).
        Not fsync'd: a memory lost in a crash only lags the file, and the file's own
        checkpoint signed by this install then covers the gap (signing.py).
        """
        if not self.usable:
            return
        fd = _open(self.path, create=True)
        assert fd is not None
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            known = _decode(os.pread(fd, MAX_MEMORY_BYTES + 1, 0))
            current = known.get(kind)
            if current is not None and (current.size, current.root) == (size, root):
                if current.frontier is not None:
                    return
            elif current is not None and current.size > size:
                return
            nodes = tuple(frontier) if len(frontier) == size.bit_count() else None
            known[kind] = Remembered(size, root, time or utc_timestamp(), nodes)
            document = ", ".join(
                f'"{name}": {value.to_json()}' for name, value in sorted(known.items())
            )
            data = ("{" + document + "}").encode().ljust(RECORD_BYTES)
            os.pwrite(fd, data, 0)
            if os.fstat(fd).st_size != len(data):  # never leave an older, longer record's tail
                os.ftruncate(fd, len(data))
            _remember_decoded(data, known)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


RECORD_BYTES = 4096
"""The memory is rewritten in place at this length, one page (about 3 kB for a log of a
million entries; a longer record extends the file)."""

MAX_OPEN_MEMORIES = 32
_descriptors: dict[Path, int] = {}
# A forked child opens its own: an inherited descriptor would share its flock with the parent.
os.register_at_fork(after_in_child=_descriptors.clear)
"""Memory files kept open per process: a signature costs one ``pwrite``, not a new file."""


def _open(path: Path, *, create: bool) -> int | None:
    fd = _descriptors.get(path)
    if fd is not None:
        return fd
    if create:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        flags = os.O_RDWR | (os.O_CREAT if create else 0) | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o600)
    except FileNotFoundError:
        return None
    except OSError:
        if create:
            raise
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or a device put in its place
        os.close(fd)
        if create:
            raise InvalidInput(
                f"{path}: the install's memory of this ledger is not a regular file; "
                "remove it (the next signature verifies the whole ledger first)",
                code="memory-file",
            )
        return None
    if len(_descriptors) >= MAX_OPEN_MEMORIES:  # a process touching many ledgers
        os.close(_descriptors.pop(next(iter(_descriptors))))
    _descriptors[path] = fd
    return fd


def _decode(data: bytes) -> dict[str, Remembered]:
    """The record's states; the last one decoded or written is kept (it is read at every
    signature)."""
    if _last_decoded is not None and _last_decoded[0] == data:
        return dict(_last_decoded[1])
    found = _decode_fresh(data)
    _remember_decoded(data, found)
    return found


def _remember_decoded(data: bytes, found: dict[str, Remembered]) -> None:
    global _last_decoded
    _last_decoded = (data, dict(found))


_last_decoded: tuple[bytes, dict[str, Remembered]] | None = None


def _decode_fresh(data: bytes) -> dict[str, Remembered]:
    try:
        document = json.loads(data) if len(data) <= MAX_MEMORY_BYTES else {}
    except ValueError:
        return {}
    found = {}
    for kind in ("signed", "verified"):
        item = document.get(kind) if isinstance(document, dict) else None
        remembered = _parse(item)
        if remembered is not None:
            found[kind] = remembered
    return found


def _parse(item: object) -> Remembered | None:
    if not isinstance(item, dict):
        return None
    size, root, time = item.get("size"), item.get("root"), item.get("time")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return None
    if not isinstance(root, str) or not re.fullmatch(r"[0-9a-f]{64}", root):
        return None
    return Remembered(
        size, bytes.fromhex(root), time if isinstance(time, str) else "", _frontier(item, size)
    )


def _frontier(item: dict[str, object], size: int) -> tuple[bytes, ...] | None:
    """The recorded frontier, if it has one node per set bit of ``size`` (else none)."""
    text = item.get("frontier")
    if not isinstance(text, str) or len(text) != 2 * HASH_LEN * size.bit_count():
        return None
    try:
        data = bytes.fromhex(text)
    except ValueError:
        return None
    return tuple(data[i : i + HASH_LEN] for i in range(0, len(data), HASH_LEN))
