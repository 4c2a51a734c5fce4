"""bernstein interop: import, verify (bernstein's verdict and a stricter one) and export.

bernstein is an orchestrator whose ``.sdd`` workdirs hold run journals, a flat
content-addressed store and an HMAC audit chain (``../shared/BERNSTEIN-FORMAT.md``).
The ledger keeps every imported byte exactly, anchors it in its own chain, verifies it
as bernstein would (``--compat bernstein``) or more strictly (the default), and writes
it back out byte for byte.
"""

from agentledger.bernstein.exporter import export_workdir
from agentledger.bernstein.importer import ImportSummary, import_workdir
from agentledger.bernstein.verifier import (
    Finding,
    RunResult,
    StageVerdict,
    verify_ledger_runs,
    verify_runs,
)
from agentledger.bernstein.workdir import DirectoryWorkdir, LedgerWorkdir, Workdir

__all__ = [
    "DirectoryWorkdir",
    "Finding",
    "ImportSummary",
    "LedgerWorkdir",
    "RunResult",
    "StageVerdict",
    "Workdir",
    "export_workdir",
    "import_workdir",
    "verify_ledger_runs",
    "verify_runs",
]
