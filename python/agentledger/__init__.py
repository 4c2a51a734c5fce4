"""agentledger: the embedded, tamper-evident ledger for AI-agent runs.

The compiled core is the private module ``agentledger._core``; its public face is
``agentledger.core``. Everything a user needs is importable from here.

The names below are loaded on first use (PEP 562), so that importing a submodule — the
command line's ``--version`` and ``--help`` above all — does not pay for the compiled core,
the schema models or the verifier. Their types are declared in ``__init__.pyi``: this file
imports nothing above the bottom layer, not even for the type checker.
"""

from __future__ import annotations

from agentledger._lazy import lazy_exports
from agentledger._version import __version__

_EXPORTS = {
    "ActivityRejected": "agentledger.activity",
    "ActivityResult": "agentledger.activity",
    "AgentLedgerError": "agentledger.errors",
    "Divergence": "agentledger.verify",
    "Entry": "agentledger.journal",
    "InvalidInput": "agentledger.errors",
    "Ledger": "agentledger.ledger",
    "LedgerError": "agentledger.errors",
    "NotFound": "agentledger.errors",
    "Observation": "agentledger.activity",
    "Run": "agentledger.journal",
    "RunVerdict": "agentledger.verify",
    "VerifyReport": "agentledger.verify",
    "WrongThread": "agentledger.errors",
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


__all__ = [
    "ActivityRejected",
    "ActivityResult",
    "AgentLedgerError",
    "Divergence",
    "Entry",
    "InvalidInput",
    "Ledger",
    "LedgerError",
    "NotFound",
    "Observation",
    "Run",
    "RunVerdict",
    "VerifyReport",
    "WrongThread",
    "__version__",
]
