"""Phase capability profiles: the pure compiler of per-phase authority.

    from agentledger.phase import builtin_profile, compile

    evidence = compile({"profile": builtin_profile("explore"), "sources": sources})

``compile`` is pure and deterministic; its output is ``phase-capability-evidence/v1``
with a ``digest`` identical to the reference (veritas-kanban) implementation's.
See docs/PHASE.md.

The names below load on first use (PEP 562), so that a module that needs only the entry
kinds (``phase.kinds``) does not pay for the compiler and its models; their types are in
``__init__.pyi``.
"""

from agentledger._lazy import lazy_exports

_EXPORTS = {
    "DIMENSIONS": "agentledger.phase.models",
    "InputIssue": "agentledger.phase.errors",
    "LEGACY_WARNING": "agentledger.phase.compiler",
    "PHASE_COMPILER_SOURCE_ID": "agentledger.phase.compiler",
    "PHASE_NAMES": "agentledger.phase.models",
    "PhaseCapabilityEvidence": "agentledger.phase.models",
    "PhaseCapabilityProfile": "agentledger.phase.models",
    "PhaseCompilerInput": "agentledger.phase.models",
    "PhaseInputError": "agentledger.phase.errors",
    "PhaseTransitionIntent": "agentledger.phase.models",
    "WORKSPACE_SCOPE": "agentledger.phase.builtins",
    "builtin_profile": "agentledger.phase.builtins",
    "builtin_profiles": "agentledger.phase.builtins",
    "compile": "agentledger.phase.compiler",
    "compile_validated": "agentledger.phase.compiler",
    "evidence_digest": "agentledger.phase.digest",
    "intersect_scopes": "agentledger.phase.compiler",
    "is_safe_plan_artifact_path": "agentledger.phase.plan_artifact",
    "json_schema": "agentledger.phase.schemas",
    "stable_stringify": "agentledger.phase.digest",
    "validate": "agentledger.phase.models",
    "verify_evidence_digest": "agentledger.phase.digest",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
