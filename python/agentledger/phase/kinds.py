"""The kinds of the phase journal's entries, importable without the compiler or its models
(the journal pass marks these rows on every verify)."""

from __future__ import annotations

from typing import Final

EVIDENCE_KIND: Final = "phase.evidence"
DESCENT_KIND: Final = "phase.descent"
TRANSITION_KIND: Final = "phase.transition"
APPROVAL_KIND: Final = "phase.approval"
AUTHORIZE_KIND: Final = "phase.authorize"
PHASE_KINDS: Final = (EVIDENCE_KIND, DESCENT_KIND, TRANSITION_KIND, APPROVAL_KIND, AUTHORIZE_KIND)
