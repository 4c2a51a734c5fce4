"""The signed note a checkpoint is, a C2SP tlog-checkpoint, and its stored rows.

A checkpoint is a signed note (docs/FORMAT.md, "Checkpoints"):

    agentledger/v1/ledger/<ledger id>
    <log size>
    <base64 root>

    — agentledger/v1/ledger/<ledger id> <base64(key id || Ed25519 signature)>

The signed bytes are the body: every line above the blank line, each ending in a newline.
The key's name is the origin, as tlog-checkpoint asks; its verifier key (``vkey``) is what
a C2SP client is given. Checkpoints signed before schema 6 commit to the BLAKE3 tree and
carry a fourth body line, ``time <RFC 3339 UTC>``, under the key name
``agentledger-install``: they still parse (``legacy``), so an exported one still verifies.
When checkpoints are taken and who may sign is ``checkpoint.py``'s and ``signing.py``'s;
this module only parses, prints, signs and reads them, so both can use it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

import apsw

from agentledger import _core
from agentledger.errors import AgentLedgerError, Diverged, InvalidInput, NotFound
from agentledger.keys import Ed25519Key, parse_public_key, sign_message
from agentledger.log import fetch

ORIGIN_PREFIX = "agentledger/v1/ledger/"
ARCHIVE_INFIX = "/archive/"
_ARCHIVE_ID = re.compile(r"[0-9a-f]{32}")
LEGACY_KEY_NAME = "agentledger-install"
"""The key name of checkpoints signed before schema 6 (now the key name is the origin)."""
SIGNATURE_PREFIX = "\u2014 "  # "— ", the signed-note signature line marker
ED25519_ALGORITHM = b"\x01"
MAX_NOTE_BYTES = 16_384

_SIGNATURE_LINE = re.compile(r"\u2014 ([^\s+]+) ([A-Za-z0-9+/=]+)")
"""signed-note: a key name holds no Unicode space and no ``+``."""
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f]")
"""signed-note: a note holds no ASCII control character but the newline."""
_TIME_LINE = re.compile(r"time (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)")


def key_id(name: str, public_key: bytes) -> bytes:
    """The signed-note key id: ``SHA-256(name || "\\n" || 0x01 || public key)[:4]``."""
    return hashlib.sha256(name.encode() + b"\n" + ED25519_ALGORITHM + public_key).digest()[:4]


@dataclass(frozen=True, slots=True)
class NoteSignature:
    name: str
    key_id: bytes
    signature: bytes


def vkey(name: str, public_key: bytes) -> str:
    """The signed-note verifier key: ``<name>+<key id hex>+<base64(0x01 || public key)>``."""
    encoded = base64.b64encode(ED25519_ALGORITHM + public_key).decode()
    return f"{name}+{key_id(name, public_key).hex()}+{encoded}"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint: what it commits to, and the signatures over it.

    ``time`` is when this install signed it (kept in its memory, not in the note);
    ``legacy`` marks a note signed before schema 6 (BLAKE3 tree, ``time`` in its body).
    """

    ledger_id: str
    size: int
    root: bytes
    time: str = ""
    signatures: tuple[NoteSignature, ...] = ()
    archive: str = ""
    """An archive's own log: the archive's id ("" for a ledger's workspace log). An
    archive keeps its source's ledger id, and its checkpoints name the archive too, so a
    note of one is never taken for a note of the other."""
    legacy: bool = False

    @property
    def origin(self) -> str:
        return (
            ORIGIN_PREFIX + self.ledger_id + (ARCHIVE_INFIX + self.archive if self.archive else "")
        )

    @property
    def key_name(self) -> str:
        """The name the install key signs it under: the origin (``agentledger-install``
        before schema 6)."""
        return LEGACY_KEY_NAME if self.legacy else self.origin

    def body(self) -> bytes:
        """The signed bytes."""
        root = base64.b64encode(self.root).decode()
        extension = f"time {self.time}\n" if self.legacy else ""
        return f"{self.origin}\n{self.size}\n{root}\n{extension}".encode()

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
                if _core.ed25519_verify(public_key, body, signature.signature):
                    return key_text
        return None

    def claimed_by(self, trusted: Iterable[str]) -> str | None:
        """The first trusted key one of the signatures names by its key id, whether or not
        the signature verifies (one that names it and fails: the text was changed)."""
        for key_text in trusted:
            public_key = parse_public_key(key_text)
            if any(s.key_id == key_id(s.name, public_key) for s in self.signatures):
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
        if _CONTROL.search(text):  # as every signed-note client refuses it (Go's note.Open)
            raise _malformed("it holds a control character (a signed note holds none)")
        body, sep, signature_block = text.partition("\n\n")
        if not sep:
            raise _malformed("no blank line between the body and the signatures")
        lines = body.split("\n")
        if len(lines) not in (3, 4):
            raise _malformed(f"the body has {len(lines)} lines, expected 3")
        origin, size_text, root_text = lines[:3]
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
        time = ""
        if len(lines) == 4:  # signed before schema 6: its only extension line is the time
            time_match = _TIME_LINE.fullmatch(lines[3])
            if not time_match:
                raise _malformed(f"{lines[3][:80]!r} is not a 'time <RFC 3339 UTC>' line")
            time = time_match.group(1)
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
            # A key id and a signature; only ours are Ed25519's 64 bytes: another key's
            # (a witness cosignature, 4 + 8 + 64 bytes) is kept, and ignored by ``signed_by``.
            if len(raw) < 4 + 1:
                raise _malformed("a note signature is a key id and a signature")
            signatures.append(NoteSignature(match.group(1), raw[:4], raw[4:]))
        if not signatures:
            raise _malformed("no signature")
        if not text.endswith("\n"):
            raise _malformed("a note ends with a newline")
        ledger_id, infix, archive = origin[len(ORIGIN_PREFIX) :].partition(ARCHIVE_INFIX)
        if infix and not _ARCHIVE_ID.fullmatch(archive):
            raise _malformed(f"origin {origin[:80]!r} names no archive id")
        return cls(
            ledger_id,
            int(size_text),
            root,
            time,
            tuple(signatures),
            archive,
            legacy=len(lines) == 4,
        )


def _malformed(why: str) -> InvalidInput:
    return InvalidInput(f"not a checkpoint: {why}", code="malformed-checkpoint")


def sign(checkpoint: Checkpoint, signing_key: Ed25519Key) -> Checkpoint:
    """The checkpoint signed by the install key, under the name the origin gives it."""
    public_key = bytes(signing_key.verify_key)
    signature = sign_message(signing_key, checkpoint.body())
    name = checkpoint.key_name
    added = NoteSignature(name, key_id(name, public_key), signature)
    return dataclasses.replace(checkpoint, signatures=(added,))


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """A checkpoint row: its id, the parsed note, and the copies of its size and root."""

    id: int
    checkpoint: Checkpoint
    size_column: int
    root_column: bytes


def _row_to_stored(row: tuple[int, int, bytes, bytes]) -> StoredCheckpoint:
    checkpoint_id, size, root, note = row
    if type(size) is not int or not isinstance(root, bytes) or note is None:
        # Columns of other types than this install writes: edited in the file.
        raise Diverged(
            f"checkpoint {checkpoint_id} stored in the ledger holds no size, root and note; "
            "run `agentledger verify`",
            code="checkpoint-malformed",
        )
    try:
        parsed = Checkpoint.parse(note)
    except InvalidInput as exc:
        # Only this install writes notes into the file: one that does not parse was
        # edited there (tampering, exit 2), not input a user gave (65).
        raise Diverged(
            f"checkpoint {checkpoint_id} stored in the ledger is not a note: {exc.message}; "
            "run `agentledger verify`",
            code="checkpoint-malformed",
        ) from None
    return StoredCheckpoint(checkpoint_id, parsed, size, bytes(root))


# The note as bytes: one that is not UTF-8 is a malformed note (``Checkpoint.parse``).
CHECKPOINT_COLUMNS = "SELECT id, size, root, CAST(note AS BLOB) FROM checkpoints"


def newest_checkpoint(conn: apsw.Connection) -> StoredCheckpoint | None:
    # The newest is the largest (the power-of-two history is signed after it, so not by id).
    # Every row is read (a few dozen: the sparse history), one at a time: a file that
    # holds millions is slow to open, never held whole.
    first: StoredCheckpoint | None = None
    best: StoredCheckpoint | None = None
    agree = True
    for row in conn.execute(CHECKPOINT_COLUMNS + " ORDER BY size DESC, id DESC"):
        if first is None:
            stored = first = _row_to_stored(row)
        else:
            try:
                stored = _row_to_stored(row)
            except AgentLedgerError:  # verify names each malformed row
                continue
        agree = agree and stored.size_column == stored.checkpoint.size
        if best is None or _rank(stored) > _rank(best):
            best = stored
    # A size column that is not its note's (an edited copy: checkpoint.columns) makes the
    # column's order say nothing: the newest is the note of the largest size, else an
    # older checkpoint's size raised above the newest's, or the newest's lowered, would
    # pass for it.
    return first if agree else best


def _rank(stored: StoredCheckpoint) -> tuple[int, bool, int]:
    return (stored.checkpoint.size, stored.size_column == stored.checkpoint.size, stored.id)


def newest_trusted(
    conn: apsw.Connection, where: object, ledger_id: str, trusted: Iterable[str], refused: str
) -> Checkpoint:
    """The newest checkpoint of the file at ``where``, when it is of ledger ``ledger_id``
    and signed by a key of ``trusted``. A note anyone could have added to the file vouches
    for nothing: what would rest on another (``refused``: a proof, a published log) is
    refused as tampering (``Diverged``); ``NotFound`` when there is none."""
    stored = newest_checkpoint(conn)
    if stored is None:
        raise NotFound(f"{where}: no checkpoint yet (run `agentledger checkpoint`)")
    note = stored.checkpoint
    if note.ledger_id != ledger_id or note.signed_by(sorted(trusted)) is None:
        raise Diverged(
            f"{where}: its newest checkpoint is not this ledger's, signed by a key this "
            f"install trusts; {refused}. Run `agentledger verify` (a signer you trust: "
            "`agentledger keys trust KEY`, or --trust where the command takes it)",
            code="checkpoint-untrusted",
        )
    return note


def checkpoint_by_id(conn: apsw.Connection, checkpoint_id: int) -> StoredCheckpoint | None:
    rows = fetch(conn, CHECKPOINT_COLUMNS + " WHERE id = ?", (checkpoint_id,))
    return _row_to_stored(rows[0]) if rows else None
