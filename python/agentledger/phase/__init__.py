"""Phase capability profiles: the pure compiler of per-phase authority.

    from agentledger.phase import builtin_profile, compile

    evidence = compile({"profile": builtin_profile("explore"), "sources": sources})

``compile`` is pure and deterministic; its output is ``phase-capability-evidence/v1``
with a ``digest`` identical to the reference (veritas-kanban) implementation's.
See docs/PHASE.md.
"""

from typing import TYPE_CHECKING

from agentledger._lazy import lazy_exports

if TYPE_CHECKING:
    from agentledger.phase.builtins import WORKSPACE_SCOPE, builtin_profile, builtin_profiles
    from agentledger.phase.compiler import (
        LEGACY_WARNING,
        PHASE_COMPILER_SOURCE_ID,
        compile,
        compile_validated,
        intersect_scopes,
    )
    from agentledger.phase.digest import evidence_digest, stable_stringify, verify_evidence_digest
    from agentledger.phase.errors import InputIssue, PhaseInputError
    from agentledger.phase.models import (
        DIMENSIONS,
        PHASE_NAMES,
        PhaseCapabilityEvidence,
        PhaseCapabilityProfile,
        PhaseCompilerInput,
        PhaseTransitionIntent,
        validate,
    )
    from agentledger.phase.plan_artifact import is_safe_plan_artifact_path
    from agentledger.phase.schemas import json_schema

__all__ = [
    "DIMENSIONS",
    "LEGACY_WARNING",
    "PHASE_COMPILER_SOURCE_ID",
    "PHASE_NAMES",
    "WORKSPACE_SCOPE",
    "InputIssue",
    "PhaseCapabilityEvidence",
    "PhaseCapabilityProfile",
    "PhaseCompilerInput",
    "PhaseInputError",
    "PhaseTransitionIntent",
    "builtin_profile",
    "builtin_profiles",
    "compile",
    "compile_validated",
    "evidence_digest",
    "intersect_scopes",
    "is_safe_plan_artifact_path",
    "json_schema",
    "stable_stringify",
    "validate",
    "verify_evidence_digest",
]

# Loaded on first use: the verify path imports ``phase.kinds`` without the models.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "WORKSPACE_SCOPE": "agentledger.phase.builtins",
        "builtin_profile": "agentledger.phase.builtins",
        "builtin_profiles": "agentledger.phase.builtins",
        "LEGACY_WARNING": "agentledger.phase.compiler",
        "PHASE_COMPILER_SOURCE_ID": "agentledger.phase.compiler",
        "compile": "agentledger.phase.compiler",
        "compile_validated": "agentledger.phase.compiler",
        "intersect_scopes": "agentledger.phase.compiler",
        "evidence_digest": "agentledger.phase.digest",
        "stable_stringify": "agentledger.phase.digest",
        "verify_evidence_digest": "agentledger.phase.digest",
        "InputIssue": "agentledger.phase.errors",
        "PhaseInputError": "agentledger.phase.errors",
        "DIMENSIONS": "agentledger.phase.models",
        "PHASE_NAMES": "agentledger.phase.models",
        "PhaseCapabilityEvidence": "agentledger.phase.models",
        "PhaseCapabilityProfile": "agentledger.phase.models",
        "PhaseCompilerInput": "agentledger.phase.models",
        "PhaseTransitionIntent": "agentledger.phase.models",
        "validate": "agentledger.phase.models",
        "is_safe_plan_artifact_path": "agentledger.phase.plan_artifact",
        "json_schema": "agentledger.phase.schemas",
    },
)
