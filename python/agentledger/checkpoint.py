"""Signed checkpoints of the workspace log: when they are taken and by whom.

The note itself (format, parsing, signature, stored rows) is ``notes.py``.

Policy: one checkpoint is taken at the end of every write transaction that grew the log
(``Database.before_commit``), inside that transaction, signed with the install key, over
the log state that transaction proved (``signing.py``, ``proven.py``). A
transaction that appended nothing takes none. ``agentledger checkpoint`` takes one on
demand (when the log grew since the newest) and exports the newest for safekeeping. The
file keeps the newest checkpoint and one at each power of two below it (``history_sizes``).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import apsw

from agentledger import proven, signing
from agentledger.errors import NotFound
from agentledger.ids import utc_timestamp
from agentledger.keys import InstallKey, public_key_text
from agentledger.log import fetch
from agentledger.notes import (
    Checkpoint,
    StoredCheckpoint,
    newest_checkpoint,
    sign,
)
from agentledger.storage import native

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle
    from agentledger.proven import Proven


_signers: weakref.WeakKeyDictionary[LedgerHandle, InstallKey] = weakref.WeakKeyDictionary()


def signing_key(ledger: LedgerHandle) -> InstallKey:
    """The install key (created on first use by a writer), cached per ledger handle."""
    key = _signers.get(ledger)
    if key is None:
        key = ledger.keys.signing_key(create=True)
        _signers[ledger] = key
    return key


def install_public_key(ledger: LedgerHandle) -> str:
    return public_key_text(signing_key(ledger).verify_key)


def take(conn: apsw.Connection, ledger: LedgerHandle, *, force: bool = False) -> StoredCheckpoint:
    """Sign and store a checkpoint of the log as this transaction proved it.

    The root signed is the proven state's (``signing.current_proven``: the install's
    memory extended by recomputed leaves or by this transaction's appends), never the
    file's tiles or ``log_state``. Unless ``force``, returns the newest checkpoint instead
    when it already covers that state. Only a sparse history is kept: the newest and one
    at every power of two up to it (``history_sizes``), about log2(n) rows.
    """
    state = signing.current_proven(ledger)
    root = state.root
    if not force:
        newest = newest_checkpoint(conn)
        if newest is not None and _signed_here(ledger, newest, state.size, root):
            # On demand, the history is completed even when the newest stands: a row
            # deleted meanwhile (checkpoint.history_missing) is restored here.
            sign_history(conn, ledger, state)
            return newest
    # Only the previous newest's row and size are needed here: its note is not parsed. A
    # size that is not an integer was edited in (verify names the cell): never that row.
    previous = fetch(
        conn,
        "SELECT id, size FROM checkpoints WHERE typeof(size) = 'integer' "
        "ORDER BY size DESC, id DESC LIMIT 1",
    )
    stored = _insert(conn, ledger, state, state.size, root)
    if previous and not is_kept(previous[0][1]):
        native.execute(conn, "DELETE FROM checkpoints WHERE id = ?", (previous[0][0],))
    # The history is completed at every signature (a row deleted meanwhile is a finding
    # of verify until then): one read of the sizes, a signature only where one is missing.
    sign_history(conn, ledger, state)
    signing.remember_signed(ledger, state, stored.checkpoint.time)
    return stored


def _signed_here(ledger: LedgerHandle, stored: StoredCheckpoint, size: int, root: bytes) -> bool:
    """Whether a stored checkpoint is this install's signature over ``(size, root)`` of the
    ledger's own log. Its columns are the file's: a note edited under them (another root,
    origin or signer) is no checkpoint of the proven log, and another is signed."""
    note = stored.checkpoint
    return (
        (stored.size_column, stored.root_column) == (size, root)
        and (note.ledger_id, note.archive, note.legacy, note.size, note.root)
        == (ledger.id, "", False, size, root)
        and note.signed_by([install_public_key(ledger)]) is not None
    )


def _insert(
    conn: apsw.Connection,
    ledger: LedgerHandle,
    state: Proven,
    size: int,
    root: bytes,
    archive: str = "",
) -> StoredCheckpoint:
    """Sign ``(size, root)``, a root of ``state``'s log (itself or one proven to lead to
    it), into the file ``conn`` writes (``archive``: an archive's own log)."""
    signing.require_current(conn, ledger.id, state)
    note = Checkpoint(ledger.id, size, root, utc_timestamp(), archive=archive)
    signed = sign(note, signing_key(ledger))
    native.execute(
        conn,
        "INSERT INTO checkpoints (size, root, note) VALUES (?, ?, ?)",
        (size, root, signed.text()),
    )
    return StoredCheckpoint(conn.last_insert_rowid(), signed, size, root)


def is_kept(size: int) -> bool:
    """Whether a checkpoint stays once a newer one is signed: its size is a power of two."""
    return size > 0 and size & (size - 1) == 0


def history_sizes(size: int) -> list[int]:
    """The sizes of the checkpoints a log of ``size`` keeps besides its newest: every power
    of two up to it. Verify can tell exactly which are missing."""
    return [1 << k for k in range(size.bit_length()) if 1 << k <= size]


def sign_history(
    conn: apsw.Connection, ledger: LedgerHandle, state: Proven, archive: str = ""
) -> None:
    """Sign the power-of-two checkpoints the log has passed and that are not stored. Each
    root is read from the tiles and signed only when a consistency proof (from the tiles
    too) shows it leads to the proven root: forged tiles get no signature, and the missing
    checkpoint stays a finding of verify."""
    have = {
        int(row[0])
        for row in conn.execute("SELECT size FROM checkpoints WHERE typeof(size) = 'integer'")
    }
    for wanted in history_sizes(state.size):
        if wanted in have:
            continue
        root = proven.root_at(conn, state, wanted)
        if root is not None:
            _insert(conn, ledger, state, wanted, root, archive)


def sign_archive(
    conn: apsw.Connection, ledger: LedgerHandle, state: Proven, archive: str
) -> StoredCheckpoint:
    """An archive's checkpoints, under its own origin: its whole log and its history."""
    stored = _insert(conn, ledger, state, state.size, state.root, archive)
    sign_history(conn, ledger, state, archive)
    return stored


def schedule(ledger: LedgerHandle) -> None:
    """Take a checkpoint at the end of the current write transaction (once)."""
    hooks = ledger.db.before_commit
    if not any(isinstance(getattr(hook, "__self__", None), _Pending) for hook in hooks):
        hooks.append(_Pending(ledger).run)


class _Pending:
    """The end-of-transaction checkpoint of one ledger."""

    def __init__(self, ledger: LedgerHandle) -> None:
        self.ledger = ledger

    def run(self, conn: apsw.Connection) -> None:
        take(conn, self.ledger, force=True)  # the log grew in this transaction


def take_checkpoint(ledger: LedgerHandle, *, adopt: bool = False) -> StoredCheckpoint:
    """``agentledger checkpoint``: a checkpoint covering the whole log (new if it grew).

    ``adopt``: sign a ledger that nothing signed vouches for yet (one from before
    checkpoints), after a whole verify whose only finding is that missing checkpoint.
    Refused for a ledger this install already signed or verified: there the log must be
    proven to extend what it vouched for, as for every signature.
    """
    with ledger.db.write() as conn:
        if adopt:
            signing.adopt(ledger)
        return take(conn, ledger)


def latest(ledger: LedgerHandle) -> StoredCheckpoint:
    with ledger.db.snapshot() as conn:
        found = newest_checkpoint(conn)
    if found is None:
        raise NotFound(f"{ledger.path}: no checkpoint yet (run `agentledger checkpoint`)")
    return found
