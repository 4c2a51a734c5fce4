"""The typed activity boundary: every modality crosses it as one replayable step."""

from agentledger.activity.boundary import (
    REFUSED_KIND,
    RESULT_KIND,
    RedundantEvidence,
    record_activity,
)
from agentledger.activity.modalities import (
    ActivitySession,
    BrowserActivity,
    DataOpsActivity,
    ResearchActivity,
    browser,
    data,
    ops,
    research,
)
from agentledger.activity.result import (
    MODALITIES,
    TERMINAL_STATES,
    ActivityRejected,
    ActivityResult,
    Observation,
)

__all__ = [
    "MODALITIES",
    "REFUSED_KIND",
    "RESULT_KIND",
    "TERMINAL_STATES",
    "ActivityRejected",
    "ActivityResult",
    "ActivitySession",
    "BrowserActivity",
    "DataOpsActivity",
    "Observation",
    "RedundantEvidence",
    "ResearchActivity",
    "browser",
    "data",
    "ops",
    "record_activity",
    "research",
]
