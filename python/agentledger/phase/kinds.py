"""The kinds of the phase entries a run's journal holds (``phase/journal.py`` writes them;
verify's journal pass marks them without loading the phase machinery)."""

from __future__ import annotations

from typing import Final

EVIDENCE_KIND: Final = "phase.evidence"
DESCENT_KIND: Final = "phase.descent"
TRANSITION_KIND: Final = "phase.transition"
APPROVAL_KIND: Final = "phase.approval"
AUTHORIZE_KIND: Final = "phase.authorize"
PHASE_KINDS: Final = (EVIDENCE_KIND, DESCENT_KIND, TRANSITION_KIND, APPROVAL_KIND, AUTHORIZE_KIND)
