"""The types of what ``agentledger.phase`` exports (``__init__.py`` loads each on first use)."""

from agentledger.phase.builtins import WORKSPACE_SCOPE as WORKSPACE_SCOPE
from agentledger.phase.builtins import builtin_profile as builtin_profile
from agentledger.phase.builtins import builtin_profiles as builtin_profiles
from agentledger.phase.compiler import LEGACY_WARNING as LEGACY_WARNING
from agentledger.phase.compiler import PHASE_COMPILER_SOURCE_ID as PHASE_COMPILER_SOURCE_ID
from agentledger.phase.compiler import compile as compile
from agentledger.phase.compiler import compile_validated as compile_validated
from agentledger.phase.compiler import intersect_scopes as intersect_scopes
from agentledger.phase.digest import evidence_digest as evidence_digest
from agentledger.phase.digest import stable_stringify as stable_stringify
from agentledger.phase.digest import verify_evidence_digest as verify_evidence_digest
from agentledger.phase.errors import InputIssue as InputIssue
from agentledger.phase.errors import PhaseInputError as PhaseInputError
from agentledger.phase.models import DIMENSIONS as DIMENSIONS
from agentledger.phase.models import PHASE_NAMES as PHASE_NAMES
from agentledger.phase.models import PhaseCapabilityEvidence as PhaseCapabilityEvidence
from agentledger.phase.models import PhaseCapabilityProfile as PhaseCapabilityProfile
from agentledger.phase.models import PhaseCompilerInput as PhaseCompilerInput
from agentledger.phase.models import PhaseTransitionIntent as PhaseTransitionIntent
from agentledger.phase.models import validate as validate
from agentledger.phase.plan_artifact import is_safe_plan_artifact_path as is_safe_plan_artifact_path
from agentledger.phase.schemas import json_schema as json_schema

__all__: list[str]
