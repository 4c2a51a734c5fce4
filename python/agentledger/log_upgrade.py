"""Schema 6: the workspace log becomes a C2SP log (RFC 6962, SHA-256), and what vouched for
the BLAKE3 tree before it carries over.

The migration (``storage.migrations.rebuild_c2sp_tree``, schema 6's Python step) rebuilds
the tiles and the state from the entries, in leaf order, never from the old tiles, and
drops the checkpoints signed over the old tree. The leaves are the same entries in the
same order, so whatever vouched for the old tree at size ``n`` (this install's memory, an
exported checkpoint) is checked by recomputing the old tree's root at ``n`` from the
entries (``log.legacy_root``): equal, the entries under it are exactly the ones the new tree
holds at leaves ``0..n-1``.

Once the migrated file is committed, ``sign_upgraded`` (run by ``Ledger.open``) carries
the install's memory over to the new tree, has the new tree signed under the same rules as
any signature (``signing.py``: a clean whole verify first) and says what it did.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from agentledger import checkpoint, signing
from agentledger import log as wslog
from agentledger.errors import AgentLedgerError
from agentledger.keys import resolve_trust
from agentledger.notes import Checkpoint
from agentledger.signer_memory import SignerMemory
from agentledger.storage.migrations import C2SP_SCHEMA, DROPPED_CHECKPOINTS

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle


def sign_upgraded(ledger: LedgerHandle) -> list[str]:
    """After the migration to schema 6: carry this install's memory over to the new tree,
    then, after a clean whole verify, sign the new tree under the usual rules. Returns (and
    prints to stderr) what it did; refusing to sign is said, never raised (the ledger stays
    readable)."""
    said: list[str] = [
        f"{ledger.path}: upgraded to schema {C2SP_SCHEMA}: the workspace log's tree was "
        "rebuilt from the entries as an RFC 6962 SHA-256 (C2SP) log"
    ]
    notes = DROPPED_CHECKPOINTS.pop(ledger.db.conn.filename, [])
    memory = signing.memory_of(ledger)
    try:
        said += _carry_memory(ledger, memory, notes)
        if memory.base() is None:
            said.append(
                "the new tree was not signed: this install never vouched for this ledger "
                "(`agentledger checkpoint --adopt` signs it after a clean whole verify)"
            )
            return _say(said)
        # The rebuilt file is verified whole before its first signature, as a ledger this
        # install never signed would be: only the checkpoint the upgrade dropped may lack.
        signing.require_clean(ledger, "sign the upgraded log", frozenset({"checkpoint.missing"}))
        stored = checkpoint.take_checkpoint(ledger)
        said.append(
            f"signed the new tree: {stored.checkpoint.size:,} entries, root "
            f"{stored.checkpoint.root.hex()}"
        )
    except AgentLedgerError as exc:
        said.append(f"the new tree was not signed: {exc}")
    return _say(said)


def _say(said: list[str]) -> list[str]:
    for line in said:
        print(line, file=sys.stderr)
    return said


def _carry_memory(ledger: LedgerHandle, memory: SignerMemory, notes: list[str]) -> list[str]:
    """Each state this install remembers for the old tree (``signed``, ``verified``) is
    replaced by the new tree's state at the same size when the old tree recomputed from the
    entries has the remembered root; a trusted old checkpoint of this ledger (not of an
    archive) extending it moves ``signed`` to its size. A state that does not match stays:
    signing then refuses."""
    said = []
    with ledger.db.snapshot() as conn:
        known = memory.read()
        carried: dict[str, wslog.LogState] = {}
        for kind, state in known.items():
            if wslog.legacy_root(conn, state.size) == state.root:
                carried[kind] = wslog.state_at(conn, state.size)[0]
            else:
                said.append(
                    f"this install's {kind} state ({state.size:,} entries) is not the old tree "
                    "recomputed from the entries: kept as it is"
                )
        base = max((state.size for state in carried.values()), default=None)
        trusted = sorted(resolve_trust((), ledger.keys))
        for text in reversed(notes):
            try:
                note = Checkpoint.parse(text)
            except AgentLedgerError:
                continue
            if (
                base is None
                or note.size <= base
                or (note.ledger_id, note.archive)
                != (
                    ledger.id,
                    "",
                )
            ):
                continue
            vouched = note.legacy and note.signed_by(trusted) is not None
            if vouched and wslog.legacy_root(conn, note.size) == note.root:
                carried["signed"] = wslog.state_at(conn, note.size)[0]
                said.append(f"a trusted checkpoint of the old tree covers {note.size:,} entries")
                break
    for kind, new in sorted(carried.items()):
        memory.record(
            "signed" if kind == "signed" else "verified", new.size, new.root, new.frontier
        )
        said.append(
            f"this install's {kind} state ({new.size:,} entries) carried over to the new tree"
        )
    return said
