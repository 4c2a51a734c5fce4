"""Entries written below ``Run.append``, which keeps ``activity.*`` and ``phase.*`` for the
APIs that check them: what an older ledger (before ``append`` refused those kinds) or a
forger holding the signing key may have put in a journal, for the tests of what verify
makes of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentledger import Ledger
from agentledger.journal import Entry


def append_unvetted(
    ledger: Ledger, run_id: str, items: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[Entry]:
    """Append ``items`` to ``run_id`` in one transaction, no kind reserved."""
    with ledger.db.write() as conn:
        return ledger.run(run_id)._append_locked(conn, [(k, dict(b)) for k, b in items])


def pin_unvetted(ledger: Ledger, run_id: str, digest: str, kind: str = "file") -> Entry:
    """An activity result pinning the blob ``digest`` as its one observation, written
    below the boundary: what makes a stored blob referenced, for the blob tests."""
    from agentledger import _core

    body = {
        "evidence_set_hash": _core.evidence_set_hash([digest]),
        "observations": [{"kind": kind, "ref": "u", "content_hash": digest}],
    }
    return append_unvetted(ledger, run_id, [("activity.result", body)])[0]
