"""Property: whatever the sources, a descendant's authority is within its parent's."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Ledger
from agentledger.phase import DIMENSIONS, PHASE_NAMES
from agentledger.phase.descent import exceeds
from agentledger.phase.journal import PhaseRefused

from .ledger_testkit import compiler_input, source, without_parent

GENERAL = [d for d in DIMENSIONS if d != "artifact.plan.write"]
SCOPES = ["<workspace>", "inspect", "build", "test", "publish", "read", "mutate", "pypi.org"]

scope_lists = st.one_of(st.just(["*"]), st.lists(st.sampled_from(SCOPES), unique=True, max_size=4))
authorities = st.fixed_dictionaries({d: scope_lists for d in GENERAL})
enforcements = st.fixed_dictionaries(
    {d: st.sampled_from(["enforced", "enforced", "enforced", "unsupported"]) for d in GENERAL}
)


def sandbox(scopes: dict[str, list[str]], enforcement: dict[str, str]) -> dict[str, Any]:
    return source("sandbox", scopes, enforcement)


@settings(max_examples=40, deadline=None)
@given(
    parent_phase=st.sampled_from([*PHASE_NAMES, None]),
    child_phase=st.sampled_from([*PHASE_NAMES, None]),
    parent_scopes=authorities,
    child_scopes=authorities,
    child_enforcement=enforcements,
)
def test_descendants_never_exceed_their_parent(
    parent_phase: str | None,
    child_phase: str | None,
    parent_scopes: dict[str, list[str]],
    child_scopes: dict[str, list[str]],
    child_enforcement: dict[str, str],
) -> None:
    with tempfile.TemporaryDirectory() as folder, Ledger.open(Path(folder) / "l.db") as ledger:
        parent = ledger.run("parent")
        evidence = compiler_input(parent_phase, sandbox=sandbox(parent_scopes, {}))
        parent.record_phase_evidence(None, compiler_input=evidence)
        if parent.phase_state().effective["status"] == "blocked":  # type: ignore[index]
            return
        child_input = without_parent(
            compiler_input(child_phase, sandbox=sandbox(child_scopes, child_enforcement))
        )
        # child_phase None: no profile requested, so the child inherits the parent's.
        try:
            child = parent.start_descendant("child", relation="fork", compiler_input=child_input)
        except PhaseRefused as refused:
            assert refused.code == "descendant-blocked"
            return
        parent_authority = parent.phase_state().effective["effectiveAuthority"]  # type: ignore[index]
        child_authority = child.phase_state().effective["effectiveAuthority"]  # type: ignore[index]
        assert exceeds(child_authority, parent_authority) == []
        assert ledger.verify().code == 0
