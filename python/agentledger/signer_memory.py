"""What this install signed and verified, per ledger, kept outside the ledger.

The threat model (docs/RELIABILITY.md) lets an attacker write the ledger file but not
``$AGENTLEDGER_HOME``. If the signer trusted the file's own record of what it signed, a
forged log with its checkpoints deleted would be signed by the victim's next append. So,
as a Certificate Transparency log signs only trees consistent with its last signed head,
the install keeps, per ledger id, the newest log state it signed and the newest a verify
found clean, in ``$AGENTLEDGER_HOME/ledgers/<ledger id>.json``:

    {"signed": {"size": 120, "root": "<64 hex>", "time": "..."}, "verified": {...}}

Updates are monotonic (a smaller size never replaces a larger one) and atomic (a
temporary file renamed over the old one, under an exclusive ``flock``), so concurrent
writers of one install can only move it forward. It is written after the ledger commits:
it may lag the file (a crash in between), never lead it (``signing.py`` copes with the lag).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentledger.ids import utc_timestamp

LEDGERS_DIR = "ledgers"
LEDGER_ID = re.compile(r"[0-9a-f]{32}")
"""A ledger id as ``init`` makes it (16 random bytes, hex); anything else names no file."""
MAX_MEMORY_BYTES = 4096

Kind = Literal["signed", "verified"]


@dataclass(frozen=True, slots=True)
class Remembered:
    """A log state this install signed or found clean."""

    size: int
    root: bytes
    time: str

    def to_json(self) -> dict[str, object]:
        return {"size": self.size, "root": self.root.hex(), "time": self.time}


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
        try:
            with open(self.path, "rb") as handle:
                data = handle.read(MAX_MEMORY_BYTES + 1)
        except FileNotFoundError:
            return {}
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

    def base(self) -> Remembered | None:
        """The newest state this install vouched for: signed, or verified clean."""
        known = self.read()
        candidates = [known[kind] for kind in ("signed", "verified") if kind in known]
        return max(candidates, key=lambda r: r.size) if candidates else None

    def record(self, kind: Kind, size: int, root: bytes) -> None:
        """Remember ``(size, root)`` as ``kind``, unless a larger state is already there."""
        if not self.usable:
            return
        with self._locked():
            known = self.read()
            current = known.get(kind)
            if current is not None and current.size > size:
                return
            if current is not None and current.size == size and current.root == root:
                return
            known[kind] = Remembered(size, root, utc_timestamp())
            document = {name: value.to_json() for name, value in sorted(known.items())}
            temp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(document, handle, sort_keys=True)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, self.path)
            finally:
                temp.unlink(missing_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(self.path.parent / ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)


def _parse(item: object) -> Remembered | None:
    if not isinstance(item, dict):
        return None
    size, root, time = item.get("size"), item.get("root"), item.get("time")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return None
    if not isinstance(root, str) or not re.fullmatch(r"[0-9a-f]{64}", root):
        return None
    return Remembered(size, bytes.fromhex(root), time if isinstance(time, str) else "")
