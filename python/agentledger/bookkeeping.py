"""Bookkeeping runs: the journals of what happens to a ledger outside its runs.

A table that records an event — a prune receipt, a team manifest loaded — is anchored by
an entry of a bookkeeping run, appended in the same transaction: so the row is in the
signed log, and a row edited, deleted or added later shows as a difference between the
table and the journal (``verify/bookkeeping.py``). Their ids start with ``_``, which no
run an agent writes uses by convention. Imported bernstein workdirs have their own,
``BERNSTEIN_RUN``: its entries pin each import's file manifest (``bernstein/importer.py``).
"""

from __future__ import annotations

BERNSTEIN_RUN = "_bernstein"
"""The native run whose entries pin each import's file manifest (never a bernstein run)."""

GC_RUN = "_gc"
GC_PRUNED = "gc.pruned"
"""Body: ``{"receipt": "blake3:<hex of the receipt's canonical bytes>"}``."""

TEAM_RUN = "_team"
TEAM_LOADED = "team.loaded"
"""Body: ``{"manifest": "blake3:<hex>", "roles": [[role, agent_kind], ...], "loaded_at"}``."""

KINDS = (GC_PRUNED, TEAM_LOADED)
"""Written only by their own API; ``Run.append`` refuses them."""
