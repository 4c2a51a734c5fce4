"""Verification: re-derive everything the ledger claims and report what diverged."""

from agentledger.verify.context import Progress, VerifyContext, VerifyOptions
from agentledger.verify.engine import CHECKS, verify_ledger
from agentledger.verify.results import Divergence, RunVerdict, VerifyReport, status_name

__all__ = [
    "CHECKS",
    "Divergence",
    "Progress",
    "RunVerdict",
    "VerifyContext",
    "VerifyOptions",
    "VerifyReport",
    "status_name",
    "verify_ledger",
]
