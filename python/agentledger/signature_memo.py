"""The signatures this install accepted before, per ledger, kept outside the ledger.

Whether a signature verifies is a pure function of its key, its message and its bytes
(the rules in ``rust/core/src/signature.rs``). A re-verify of a ledger checks the same
receipts' signatures again, a fifth of a bernstein verify's CPU time; so a verify
remembers the triples it accepted, as 32-byte digests (``rust/core/src/signature/memo.rs``),
in ``$AGENTLEDGER_HOME/ledgers/<ledger id>.signatures``, beside ``signer_memory.py``'s
record. The next verify of that ledger accepts a triple whose digest is there without
the curve arithmetic, and verifies every other one in full.

The threat model lets an attacker write the ledger, not the key folder: the digests come
from the install's own verifications, never from the file. A ledger can only add digests
of signatures that verify (under any key: trust is decided apart, every time), and
rejections are never remembered. ``verify --recheck-signatures`` reads none of them
(every signature is verified in full), and leaves what it accepted for the next one.

Whoever can write the memo decides which signatures verify, as whoever can write a trust
file decides whom verify trusts: like one (``keys.read_trust_file``), a memo that is not a
regular file of ours, or that group or others can write, is not read. Nor is one that is
not a header line and the digests, or is larger than ``MAX_DIGESTS`` allow: each counts as
empty. It is replaced whole (a new file renamed over the old), never fsync'd: one lost in a
crash costs only the time of verifying again. Verify never creates a key folder: where
``ledgers/`` is not there yet (nothing was ever signed with this folder), nothing is kept.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agentledger import _core
from agentledger.signer_memory import LEDGER_ID, LEDGERS_DIR

HEADER = b"agentledger accepted signatures v1\n"
DIGEST_BYTES = 32
MAX_DIGESTS = 1_000_000
"""About 32 MB of file: twenty bernstein workdirs of 2,000 runs. Past it, the oldest are
forgotten first."""


def memo_path(home: Path, ledger_id: str) -> Path | None:
    """Where the memo of ``ledger_id`` is kept (None: an id ``init`` never makes)."""
    if not LEDGER_ID.fullmatch(ledger_id):
        return None
    return home / LEDGERS_DIR / f"{ledger_id}.signatures"


@dataclass
class MemoUse:
    """What a block under ``remembered`` took from the memo, known once it ended."""

    reused: int = 0
    """Signatures accepted from the memo, without being verified again."""


@contextmanager
def remembered(home: Path, ledger_id: str, *, recheck: bool = False) -> Iterator[MemoUse]:
    """While the block runs, signatures this install accepted before for ``ledger_id``
    are accepted without being verified again (none with ``recheck``); when it ends
    without an exception, what it accepted anew is added to the memo.

    One memo is active in a process at a time: a block entered while another is active
    (another thread's verify) reads and keeps nothing of its own, and its verifications go
    through the active one, which is as sound: each digest is of a triple accepted in full."""
    use = MemoUse()
    path = memo_path(home, ledger_id)
    known = b"" if recheck or path is None else read_digests(path)
    if path is None or not _core.signature_memo_begin(known):
        yield use
        return
    try:
        yield use
    finally:
        accepted, use.reused = _core.signature_memo_end()
    if accepted:
        _write(path, known + accepted)


def read_digests(path: Path) -> bytes:
    """The memo's digests, concatenated; empty when it is absent or not a memo."""
    try:
        # Not through a link, and never waiting on a FIFO put in its place.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return b""
    try:
        info = os.fstat(fd)
        ours = info.st_uid == os.geteuid() and not info.st_mode & 0o022
        if not (stat.S_ISREG(info.st_mode) and ours):
            return b""
        data = os.pread(fd, len(HEADER) + (MAX_DIGESTS + 1) * DIGEST_BYTES, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)
    digests = data[len(HEADER) :]
    valid = (
        data.startswith(HEADER)
        and len(digests) % DIGEST_BYTES == 0
        and len(digests) <= MAX_DIGESTS * DIGEST_BYTES
    )
    return digests if valid else b""


def _write(path: Path, digests: bytes) -> None:
    """Replaces the memo with the newest ``MAX_DIGESTS`` of ``digests``. A key folder that
    cannot be written to leaves the memo as it was: verifying never fails for it."""
    digests = digests[-MAX_DIGESTS * DIGEST_BYTES :]
    try:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".signatures-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(HEADER + digests)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
