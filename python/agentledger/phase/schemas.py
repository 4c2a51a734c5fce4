"""JSON Schemas of the phase contracts, generated from the strict models.

The schemas describe shape and limits for other tools; a few rules are only enforced by the
models (scopes are trimmed with JavaScript's ``trim`` before their limits apply, lengths
count UTF-16 code units, ``*`` must stand alone, a plan-artifact policy must match the
artifact authority). The models are the authority; the schemas never accept less.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

from agentledger.phase.models import (
    PhaseCapabilityEvidence,
    PhaseCapabilityProfile,
    PhaseCompilerInput,
    PhaseTransitionIntent,
)

__all__ = ["SCHEMA_MODELS", "json_schema"]

#: CLI name → (model, contract id).
SCHEMA_MODELS: Final[dict[str, tuple[type[BaseModel], str]]] = {
    "profile": (PhaseCapabilityProfile, "phase-capability-profile/v1"),
    "intent": (PhaseTransitionIntent, "phase-transition-intent/v1"),
    "evidence": (PhaseCapabilityEvidence, "phase-capability-evidence/v1"),
    "input": (PhaseCompilerInput, "phase-capability-compiler-input/v1"),
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``profile``, ``intent``, ``evidence`` or ``input``."""
    try:
        model, contract = SCHEMA_MODELS[name]
    except KeyError:
        raise KeyError(
            f"unknown schema {name!r}; expected one of {', '.join(SCHEMA_MODELS)}"
        ) from None
    schema = model.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:agentledger:{contract}",
        **schema,
    }
