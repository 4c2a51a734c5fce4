"""Signed checkpoints of the workspace log, modelled on C2SP tlog-checkpoint.

A checkpoint is a signed note (docs/FORMAT.md, "Checkpoints"):

    agentledger/v1/ledger/<ledger id>
    <log size>
    <base64 root>
    time <RFC 3339 UTC>

    — agentledger-install <base64(key id || Ed25519 signature)>

The signed bytes are the body: every line above the blank line, each ending in a newline.

Policy: one checkpoint is taken at the end of every write transaction that grew the log
(``Database.before_commit``), inside that transaction, signed with the install key, and
only when the log extends what this install already vouched for (``signing.py``). A
transaction that appended nothing takes none. ``agentledger checkpoint`` takes one on
demand (when the log grew since the newest) and exports the newest for safekeeping. The
file keeps the newest checkpoint and one at each power of two below it (``history_sizes``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apsw
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from agentledger import signing, tiles
from agentledger.errors import InvalidInput, NotFound
from agentledger.ids import utc_timestamp
from agentledger.keys import parse_public_key, public_key_text
from agentledger.log import LogState, current_state, fetch

if TYPE_CHECKING:
    from agentledger.ledger import Ledger

ORIGIN_PREFIX = "agentledger/v1/ledger/"
KEY_NAME = "agentledger-install"
SIGNATURE_PREFIX = "\u2014 "  # "— ", the signed-note signature line marker
ED25519_ALGORITHM = b"\x01"
MAX_NOTE_BYTES = 16_384

_SIGNATURE_LINE = re.compile(r"\u2014 ([^ \n+]+) ([A-Za-z0-9+/=]+)")
_TIME_LINE = re.compile(r"time (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)")

_signers: weakref.WeakKeyDictionary[Ledger, SigningKey] = weakref.WeakKeyDictionary()


def key_id(name: str, public_key: bytes) -> bytes:
    """The signed-note key id: ``SHA-256(name || "\\n" || 0x01 || public key)[:4]``."""
    return hashlib.sha256(name.encode() + b"\n" + ED25519_ALGORITHM + public_key).digest()[:4]


@dataclass(frozen=True, slots=True)
class NoteSignature:
    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint: what it commits to, and the signatures over it."""

    ledger_id: str
    size: int
    root: bytes
    time: str
    signatures: tuple[NoteSignature, ...] = ()

    @property
    def origin(self) -> str:
        return ORIGIN_PREFIX + self.ledger_id

    def body(self) -> bytes:
        """The signed bytes."""
        root = base64.b64encode(self.root).decode()
        return f"{self.origin}\n{self.size}\n{root}\ntime {self.time}\n".encode()

    def text(self) -> str:
        """The whole note: body, blank line, one signature line per signature."""
        lines = [
            f"{SIGNATURE_PREFIX}{s.name} {base64.b64encode(s.key_id + s.signature).decode()}\n"
            for s in self.signatures
        ]
        return self.body().decode() + "\n" + "".join(lines)

    def signed_by(self, trusted: Iterable[str]) -> str | None:
        """The first trusted key (``ed25519:<hex>``) with a valid signature, else None."""
        body = self.body()
        for key_text in trusted:
            public_key = parse_public_key(key_text)
            for signature in self.signatures:
                if signature.key_id != key_id(signature.name, public_key):
                    continue
                try:
                    VerifyKey(public_key).verify(body, signature.signature)
                except BadSignatureError:
                    continue
                return key_text
        return None

    @classmethod
    def parse(cls, text: str | bytes) -> Checkpoint:
        """Parse a note; ``InvalidInput`` (code ``malformed-checkpoint``) if it is not one."""
        if isinstance(text, bytes):
            if len(text) > MAX_NOTE_BYTES:
                raise _malformed("longer than a checkpoint can be")
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise _malformed("not UTF-8") from None
        if len(text) > MAX_NOTE_BYTES:
            raise _malformed("longer than a checkpoint can be")
        body, sep, signature_block = text.partition("\n\n")
        if not sep:
            raise _malformed("no blank line between the body and the signatures")
        lines = body.split("\n")
        if len(lines) != 4:
            raise _malformed(f"the body has {len(lines)} lines, expected 4")
        origin, size_text, root_text, time_line = lines
        if not origin.startswith(ORIGIN_PREFIX) or len(origin) == len(ORIGIN_PREFIX):
            raise _malformed(f"origin {origin[:80]!r} is not {ORIGIN_PREFIX}<ledger id>")
        if not re.fullmatch(r"0|[1-9][0-9]{0,18}", size_text):
            raise _malformed(f"size {size_text[:40]!r} is not a decimal number")
        try:
            root = base64.b64decode(root_text, validate=True)
        except binascii.Error:
            root = b""
        if len(root) != 32 or base64.b64encode(root).decode() != root_text:
            raise _malformed("the root is not 32 bytes of base64")
        time_match = _TIME_LINE.fullmatch(time_line)
        if not time_match:
            raise _malformed(f"{time_line[:80]!r} is not a 'time <RFC 3339 UTC>' line")
        signatures = []
        for line in signature_block.split("\n"):
            if not line:
                continue
            match = _SIGNATURE_LINE.fullmatch(line)
            if not match:
                raise _malformed(f"{line[:80]!r} is not a signature line")
            try:
                raw = base64.b64decode(match.group(2), validate=True)
            except binascii.Error:
                raise _malformed("a signature is not base64") from None
            if len(raw) != 4 + 64:
                raise _malformed("an Ed25519 note signature is 4 + 64 bytes")
            signatures.append(NoteSignature(match.group(1), raw[:4], raw[4:]))
        if not signatures:
            raise _malformed("no signature")
        if not text.endswith("\n"):
            raise _malformed("a note ends with a newline")
        return cls(
            origin[len(ORIGIN_PREFIX) :],
            int(size_text),
            root,
            time_match.group(1),
            tuple(signatures),
        )


def _malformed(why: str) -> InvalidInput:
    return InvalidInput(f"not a checkpoint: {why}", code="malformed-checkpoint")


def sign(checkpoint: Checkpoint, signing_key: SigningKey) -> Checkpoint:
    public_key = bytes(signing_key.verify_key)
    signature = signing_key.sign(checkpoint.body()).signature
    added = NoteSignature(KEY_NAME, key_id(KEY_NAME, public_key), signature)
    return Checkpoint(
        checkpoint.ledger_id, checkpoint.size, checkpoint.root, checkpoint.time, (added,)
    )


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """A checkpoint row: its id, the parsed note, and the copies of its size and root."""

    id: int
    checkpoint: Checkpoint
    size_column: int
    root_column: bytes


def signing_key(ledger: Ledger) -> SigningKey:
    """The install key (created on first use by a writer), cached per ledger handle."""
    key = _signers.get(ledger)
    if key is None:
        key = ledger.keys.signing_key(create=True)
        _signers[ledger] = key
    return key


def install_public_key(ledger: Ledger) -> str:
    return public_key_text(bytes(signing_key(ledger).verify_key))


def take(conn: apsw.Connection, ledger: Ledger, *, force: bool = False) -> StoredCheckpoint:
    """Sign and store a checkpoint of the log as it is in this transaction.

    Unless ``force``, returns the newest checkpoint instead when it already covers the log.
    The log must extend what this install vouched for (``signing.py``; checked once per
    transaction, before its first append). Only a sparse history is kept: the newest and
    one at every power of two up to it (``history_sizes``), about log2(n) rows; the tiles
    prove any of them from the others.
    """
    known = ledger.db.transaction_scope.get("log_state")
    state = known if isinstance(known, LogState) else current_state(conn)
    root = state.root
    if not force:
        newest = newest_checkpoint(conn)
        if newest is not None and (newest.size_column, newest.root_column) == (state.size, root):
            return newest
    scope = ledger.db.transaction_scope
    if not scope.get("may_sign"):
        signing.check_may_sign(conn, ledger, state)
        scope["may_sign"] = True
    # Only the previous newest's row and size are needed here: its note is not parsed.
    previous = conn.execute(
        "SELECT id, size FROM checkpoints ORDER BY size DESC, id DESC LIMIT 1"
    ).fetchall()
    stored = _insert(conn, ledger, state.size, root)
    if previous and not is_kept(previous[0][1]):
        conn.execute("DELETE FROM checkpoints WHERE id = ?", (previous[0][0],))
    # The history is completed when the log passes a power of two, and on demand (a row
    # deleted meanwhile is a finding of verify until then).
    if not force or not previous or previous[0][1].bit_length() != state.size.bit_length():
        sign_history(conn, ledger, state.size)
    signing.remember_signed(ledger, state.size, root, stored.checkpoint.time)
    return stored


def _insert(conn: apsw.Connection, ledger: Ledger, size: int, root: bytes) -> StoredCheckpoint:
    signed = sign(Checkpoint(ledger.id, size, root, utc_timestamp()), signing_key(ledger))
    conn.execute(
        "INSERT INTO checkpoints (size, root, note) VALUES (?, ?, ?)", (size, root, signed.text())
    )
    return StoredCheckpoint(conn.last_insert_rowid(), signed, size, root)


def is_kept(size: int) -> bool:
    """Whether a checkpoint stays once a newer one is signed: its size is a power of two."""
    return size > 0 and size & (size - 1) == 0


def history_sizes(size: int) -> list[int]:
    """The sizes of the checkpoints a log of ``size`` keeps besides its newest: every power
    of two up to it. Verify can tell exactly which are missing."""
    return [1 << k for k in range(size.bit_length()) if 1 << k <= size]


def sign_history(conn: apsw.Connection, ledger: Ledger, size: int) -> None:
    """Sign the power-of-two checkpoints the log has passed and that are not stored: their
    roots come from the tiles, the same tree the newest checkpoint commits to."""
    have = {int(row[0]) for row in conn.execute("SELECT size FROM checkpoints")}
    reader = tiles.TileReader(conn)
    for wanted in history_sizes(size):
        if wanted not in have:
            _insert(conn, ledger, wanted, reader.root(wanted))


def schedule(ledger: Ledger) -> None:
    """Take a checkpoint at the end of the current write transaction (once)."""
    hooks = ledger.db.before_commit
    if not any(isinstance(getattr(hook, "__self__", None), _Pending) for hook in hooks):
        hooks.append(_Pending(ledger).run)


class _Pending:
    """The end-of-transaction checkpoint of one ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def run(self, conn: apsw.Connection) -> None:
        take(conn, self.ledger, force=True)  # the log grew in this transaction


def _row_to_stored(row: tuple[int, int, bytes, str]) -> StoredCheckpoint:
    checkpoint_id, size, root, note = row
    return StoredCheckpoint(checkpoint_id, Checkpoint.parse(note), size, bytes(root))


CHECKPOINT_COLUMNS = "SELECT id, size, root, note FROM checkpoints"


def newest_checkpoint(conn: apsw.Connection) -> StoredCheckpoint | None:
    # The newest is the largest (the power-of-two history is signed after it, so not by id).
    rows = fetch(conn, CHECKPOINT_COLUMNS + " ORDER BY size DESC, id DESC LIMIT 1")
    return _row_to_stored(rows[0]) if rows else None


def checkpoint_by_id(conn: apsw.Connection, checkpoint_id: int) -> StoredCheckpoint | None:
    rows = fetch(conn, CHECKPOINT_COLUMNS + " WHERE id = ?", (checkpoint_id,))
    return _row_to_stored(rows[0]) if rows else None


def take_checkpoint(ledger: Ledger, *, adopt: bool = False) -> StoredCheckpoint:
    """``agentledger checkpoint``: a checkpoint covering the whole log (new if it grew).

    ``adopt``: sign a ledger that nothing signed vouches for yet (one from before
    checkpoints), after a whole verify whose only finding is that missing checkpoint.
    Refused for a ledger this install already signed or verified: there the log must
    extend what it vouched for, as for every signature.
    """
    with ledger.db.write() as conn:
        if adopt:
            signing.adopt(conn, ledger, current_state(conn))
            ledger.db.transaction_scope["may_sign"] = True
        return take(conn, ledger)


def latest(ledger: Ledger) -> StoredCheckpoint:
    with ledger.db.snapshot() as conn:
        found = newest_checkpoint(conn)
    if found is None:
        raise NotFound(f"{ledger.path}: no checkpoint yet (run `agentledger checkpoint`)")
    return found
