"""agentledger: the embedded, tamper-evident ledger for AI-agent runs.

The compiled core is the private module ``agentledger._core``; its public face is
``agentledger.core``. Everything a user needs is importable from here.
"""

from agentledger._core import __version__

__all__ = ["__version__"]
