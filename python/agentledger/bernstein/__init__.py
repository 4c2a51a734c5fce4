"""bernstein interop: import, verify (bernstein's verdict and a stricter one) and export.

bernstein is an orchestrator whose ``.sdd`` workdirs hold run journals, a flat
content-addressed store and an HMAC audit chain (docs/BERNSTEIN.md).
The ledger keeps every imported byte exactly, anchors it in its own chain, verifies it
as bernstein would (``--compat bernstein``) or more strictly (the default), and writes
it back out byte for byte.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Loaded on first use: `runs` and `show` need only bernstein.view, not the verifier.
_HOME = {
    "export_workdir": "exporter",
    "ImportSummary": "importer",
    "import_workdir": "importer",
    "Finding": "verifier",
    "RunResult": "verifier",
    "StageVerdict": "verifier",
    "verify_ledger_runs": "verifier",
    "verify_runs": "verifier",
    "DirectoryWorkdir": "workdir",
    "LedgerWorkdir": "workdir",
    "Workdir": "workdir",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'agentledger.bernstein' has no attribute {name!r}")
    return getattr(importlib.import_module(f"agentledger.bernstein.{module}"), name)


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
