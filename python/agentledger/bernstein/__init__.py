"""bernstein interop: import, verify (bernstein's verdict and a stricter one) and export.

bernstein is an orchestrator whose ``.sdd`` workdirs hold run journals, a flat
content-addressed store and an HMAC audit chain (docs/BERNSTEIN.md).
The ledger keeps every imported byte exactly, anchors it in its own chain, verifies it
as bernstein would (``--compat bernstein``) or more strictly (the default), and writes
it back out byte for byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentledger._lazy import lazy_exports

if TYPE_CHECKING:
    from agentledger.bernstein.exporter import export_workdir
    from agentledger.bernstein.importer import (
        CheckedWorkdir,
        ImportSummary,
        check_workdir,
        import_workdir,
    )
    from agentledger.bernstein.verifier import verify_ledger_runs, verify_runs
    from agentledger.bernstein.workdir import DirectoryWorkdir, LedgerWorkdir, Workdir

# Loaded on first use: `runs` and `show` need only bernstein.view, not the verifier.
_EXPORTS = {
    name: f"agentledger.bernstein.{module}"
    for module, names in {
        "exporter": ["export_workdir"],
        "importer": ["CheckedWorkdir", "ImportSummary", "check_workdir", "import_workdir"],
        "verifier": ["verify_ledger_runs", "verify_runs"],
        "workdir": ["DirectoryWorkdir", "LedgerWorkdir", "Workdir"],
    }.items()
    for name in names
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "CheckedWorkdir",
    "DirectoryWorkdir",
    "ImportSummary",
    "LedgerWorkdir",
    "Workdir",
    "check_workdir",
    "export_workdir",
    "import_workdir",
    "verify_ledger_runs",
    "verify_runs",
]
