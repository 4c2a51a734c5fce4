"""What a descendant run inherits from its parent (retry, fork, resume, handoff): the
``parent`` compiler source it compiles with, and the bound its authority stays within.
Shared by the writer that starts descendants (``ledger.py``) and the journal's reading of
a ``phase.descent`` (``journal.py``), which judge a descent by the same rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentledger.phase.compiler import ARTIFACT_DIMENSION, HARNESS_EXACT_PATH_SCOPE
from agentledger.phase.models import DIMENSIONS

RELATIONS: Final = ("retry", "fork", "resume", "handoff")
PARENT_SOURCE_PREFIX: Final = "parent-evidence:"


def parent_source(
    parent_evidence: Mapping[str, Any], plan_artifact: object = None
) -> dict[str, Any]:
    """The ``parent`` compiler source a descendant gets: the parent's effective authority,
    enforced on every dimension, named after the exact evidence it comes from.

    A parent's accepted plan artifact is the effective scope ``[exactPath]``, which the
    compiler's placeholder request ``harness-exact-path`` never matches; so when the child
    asks for the *same* exact path, the parent grants the placeholder (the child ends with
    exactly the parent's path), and any other path is denied.
    """
    authority = {d: list(parent_evidence["effectiveAuthority"][d]) for d in DIMENSIONS}
    granted = parent_evidence.get("planArtifact")
    if (
        isinstance(granted, Mapping)
        and isinstance(plan_artifact, Mapping)
        and plan_artifact.get("exactPath") == granted["exactPath"]
        and authority[ARTIFACT_DIMENSION] == [granted["exactPath"]]
    ):
        authority[ARTIFACT_DIMENSION] = [HARNESS_EXACT_PATH_SCOPE]
    return {
        "id": PARENT_SOURCE_PREFIX + str(parent_evidence["digest"]),
        "kind": "parent",
        "authority": authority,
        "enforcement": dict.fromkeys(DIMENSIONS, "enforced"),
    }


def exceeds(child: Mapping[str, list[str]], parent: Mapping[str, list[str]]) -> list[str]:
    """The dimensions on which ``child`` authority is not within ``parent`` authority."""
    wider: list[str] = []
    for dimension in DIMENSIONS:
        mine, theirs = child[dimension], parent[dimension]
        if "*" in theirs:
            continue
        if "*" in mine or any(scope not in theirs for scope in mine):
            wider.append(dimension)
    return wider
