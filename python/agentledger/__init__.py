"""agentledger: the embedded, tamper-evident ledger for AI-agent runs.

The compiled core is the private module ``agentledger._core``; its public face is
``agentledger.core``. Everything a user needs is importable from here.
"""

from agentledger._core import __version__
from agentledger.activity import ActivityRejected, ActivityResult, Observation
from agentledger.errors import AgentLedgerError, InvalidInput, LedgerError, NotFound
from agentledger.journal import Entry, Run
from agentledger.ledger import Ledger
from agentledger.verify import Divergence, RunVerdict, VerifyReport

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
    "__version__",
]
