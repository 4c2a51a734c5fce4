"""Verify many ledger files at once on a Dask cluster (``agentledger fleet verify``).

The unit of work is one file: ``task.verify_file`` runs on a worker and returns a
``LedgerSummary``. Only ``fleet.cluster`` imports Dask (the optional extra
``agentledger[fleet]``); everything else here works without it.
"""

from agentledger.fleet.inputs import FleetArgumentError, expand_paths, read_checkpoints
from agentledger.fleet.summary import FleetReport, LedgerSummary
from agentledger.fleet.task import FleetJob, verify_file

__all__ = [
    "FleetArgumentError",
    "FleetJob",
    "FleetReport",
    "LedgerSummary",
    "expand_paths",
    "read_checkpoints",
    "verify_file",
]
