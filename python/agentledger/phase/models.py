"""Strict models of the phase-capability contracts.

``phase-capability-profile/v1``, ``phase-transition-intent/v1``,
``phase-capability-evidence/v1`` and the compiler input, as pydantic v2 models in strict
mode with unknown keys forbidden. They accept exactly what the reference's Zod schemas
accept, so the compiler sees the same values the reference would:

- nothing is coerced: ``"1"`` is not a number, ``0`` is not ``false``, ``false`` is not
  ``0``, ``null`` is not an omitted optional field;
- identifiers, scopes and texts are trimmed first, with JavaScript's ``trim`` (which removes
  U+FEFF and keeps U+0085), and the trimmed value is what the compiler uses;
- lengths are counted in UTF-16 code units, as JavaScript counts them;
- a number is what JavaScript makes of it: ``1.0`` is the integer ``1``.

Use :func:`validate` (or the ``parse_*`` helpers) rather than ``model_validate`` directly:
it converts pydantic's errors into :class:`~agentledger.phase.errors.PhaseInputError`
with the offending path in the contract's own notation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Literal, NoReturn, Self, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentledger.phase.errors import InputIssue, PhaseInputError
from agentledger.phase.jscompat import has_control_characters, js_trim, to_js_string, utf16_length
from agentledger.phase.plan_artifact import is_safe_plan_artifact_path

__all__ = [
    "DIMENSIONS",
    "EVIDENCE_SCHEMA_VERSION",
    "INTENT_SCHEMA_VERSION",
    "PHASE_NAMES",
    "PROFILE_SCHEMA_VERSION",
    "SOURCE_KEYS",
    "ActorText",
    "Digest",
    "Dimension",
    "DisabledPlanArtifactPolicy",
    "EffectivePlanArtifact",
    "EnforcementState",
    "ExactPathPlanArtifactPolicy",
    "Identifier",
    "LegacyIdentity",
    "OffsetDateTime",
    "PhaseAuthority",
    "PhaseAuthorityEnforcement",
    "PhaseAuthorityEvaluation",
    "PhaseAuthoritySource",
    "PhaseCapabilityBlocker",
    "PhaseCapabilityEvidence",
    "PhaseCapabilityProfile",
    "PhaseCompilerInput",
    "PhaseCompilerSources",
    "PhaseName",
    "PhaseTransitionIntent",
    "PlanArtifactRequest",
    "ProfileIdentity",
    "SafeText",
    "ScopeList",
    "StrictModel",
    "is_identifier",
    "is_js_integer",
    "validate",
]

PROFILE_SCHEMA_VERSION: Final = "phase-capability-profile/v1"
EVIDENCE_SCHEMA_VERSION: Final = "phase-capability-evidence/v1"
INTENT_SCHEMA_VERSION: Final = "phase-transition-intent/v1"

Dimension = Literal[
    "filesystem.read",
    "filesystem.write",
    "command.execute",
    "network.egress",
    "credential.access",
    "external.action",
    "artifact.plan.write",
]
#: The seven dimensions in canonical order: every iteration and output list uses it.
DIMENSIONS: Final[tuple[Dimension, ...]] = get_args(Dimension)

PhaseName = Literal["explore", "plan", "implement", "verify", "publish"]
PHASE_NAMES: Final[tuple[PhaseName, ...]] = get_args(PhaseName)

EnforcementState = Literal["enforced", "unenforceable", "unsupported"]
SourceKind = Literal["parent", "agent-profile", "sandbox", "tool-catalog", "launch-policy"]

#: (input key, source kind) in folding order.
SOURCE_KEYS: Final[tuple[tuple[str, SourceKind], ...]] = (
    ("parent", "parent"),
    ("agentProfile", "agent-profile"),
    ("sandbox", "sandbox"),
    ("toolCatalog", "tool-catalog"),
    ("launchPolicy", "launch-policy"),
)

BlockerCode = Literal[
    "required-authority-denied",
    "required-authority-unsupported",
    "required-authority-unenforceable",
    "plan-artifact-not-allowed",
    "plan-artifact-path-invalid",
]

MAX_SCOPES: Final = 256
MAX_PROFILE_VERSION: Final = 10_000


# --------------------------------------------------------------------------- failures


def _fail(kind: str, message: str, *at: str | int) -> NoReturn:
    """Raise a validation error; ``at`` extends the location below the validated value."""
    raise PydanticCustomError(kind, message, {"at": list(at)} if at else None)


# --------------------------------------------------------------------------- strings


def _text(*, trim: bool, max_length: int, what: str) -> Callable[[str], str]:
    """A string check: JavaScript string, optionally JS-trimmed, 1..max UTF-16 units."""

    def check(value: str) -> str:
        value = to_js_string(value)
        if trim:
            value = js_trim(value)
        length = utf16_length(value)
        if length < 1:
            _fail("string_too_short", f"{what} must not be empty" + (" after trimming" * trim))
        if length > max_length:
            _fail("string_too_long", f"{what} must be at most {max_length} UTF-16 code units")
        return value

    return check


_IDENTIFIER_RE: Final = re.compile(r"[a-z0-9][a-z0-9._:/-]*", re.IGNORECASE | re.ASCII)
_DIGEST_RE: Final = re.compile(r"sha256:[a-f0-9]{64}", re.ASCII)
# Zod 3's z.string().datetime({ offset: true }): calendar-checked date, 24h time, optional
# fraction, then Z or an offset of +hh:mm / +hhmm. \d is ASCII-only, as in JavaScript.
_DATE: Final = (
    r"((\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    r"|\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)"
    r"|(02)-(0[1-9]|1\d|2[0-8])))"
)
_DATETIME_RE: Final = re.compile(
    _DATE + r"T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|([+-]\d{2}:?\d{2}))", re.ASCII
)

_identifier_text = _text(trim=True, max_length=160, what="an identifier")
_scope_text = _text(trim=True, max_length=1024, what="an authority scope")


def is_identifier(value: str) -> bool:
    """True when ``value``, as it stands (not trimmed), is a phase identifier."""
    return utf16_length(value) <= 160 and _IDENTIFIER_RE.fullmatch(value) is not None


def _identifier(value: str) -> str:
    value = _identifier_text(value)
    if not _IDENTIFIER_RE.fullmatch(value):
        _fail(
            "identifier_pattern",
            "an identifier must match ^[a-z0-9][a-z0-9._:/-]*$ (ASCII, case-insensitive)",
        )
    return value


def _scope(value: str) -> str:
    value = _scope_text(value)
    if has_control_characters(value):
        _fail("scope_control_character", "authority scopes cannot contain control characters")
    return value


def _scope_list(scopes: list[str]) -> list[str]:
    seen: set[str] = set()
    for index, scope in enumerate(scopes):
        if scope in seen:
            _fail("scope_duplicate", f"authority scopes must be unique ({scope!r} repeats)", index)
        seen.add(scope)
    if "*" in seen and len(scopes) != 1:
        _fail(
            "scope_wildcard_mixed",
            "wildcard authority '*' cannot be combined with exact scopes",
            scopes.index("*"),
        )
    return scopes


def _unique_dimensions(dimensions: list[str]) -> list[str]:
    seen: set[str] = set()
    for index, dimension in enumerate(dimensions):
        if dimension in seen:
            _fail("dimension_duplicate", f"dimension {dimension!r} is listed twice", index)
        seen.add(dimension)
    return dimensions


def _digest(value: str) -> str:
    if not _DIGEST_RE.fullmatch(value):
        _fail("digest_pattern", "a digest must be 'sha256:' followed by 64 lowercase hex digits")
    return value


def _offset_datetime(value: str) -> str:
    if not _DATETIME_RE.fullmatch(value):
        _fail("datetime_format", "expected an ISO 8601 date-time with Z or a UTC offset")
    return value


def _effective_artifact_path(value: str) -> str:
    value = _text(trim=False, max_length=4096, what="the plan artifact path")(value)
    if not is_safe_plan_artifact_path(value):
        _fail("plan_artifact_path", "effective plan artifacts require one safe exact path")
    return value


def _string_schema(
    min_length: int = 1, max_length: int | None = None, **extra: Any
) -> WithJsonSchema:
    schema: dict[str, Any] = {"type": "string", "minLength": min_length, **extra}
    if max_length is not None:
        schema["maxLength"] = max_length
    return WithJsonSchema(schema)


Identifier = Annotated[
    StrictStr,
    AfterValidator(_identifier),
    _string_schema(
        max_length=160,
        pattern="^[A-Za-z0-9][A-Za-z0-9._:/-]*$",
        description="Trimmed (JavaScript trim) identifier; length in UTF-16 code units.",
    ),
]
Scope = Annotated[
    StrictStr,
    AfterValidator(_scope),
    _string_schema(
        max_length=1024,
        pattern="^[^\\u0000-\\u001f\\u007f]*$",
        description="An exact scope, trimmed (JavaScript trim); '*' alone means 'no narrowing'.",
    ),
]
ScopeList = Annotated[
    list[Scope],
    Field(max_length=MAX_SCOPES, json_schema_extra={"uniqueItems": True}),
    AfterValidator(_scope_list),
]
DimensionList = Annotated[
    list[Dimension],
    Field(max_length=len(DIMENSIONS), json_schema_extra={"uniqueItems": True}),
    AfterValidator(_unique_dimensions),
]
Name = Annotated[
    StrictStr,
    AfterValidator(_text(trim=True, max_length=160, what="a name")),
    _string_schema(max_length=160),
]
SafeText = Annotated[
    StrictStr,
    AfterValidator(_text(trim=True, max_length=4096, what="this text")),
    _string_schema(max_length=4096),
]
ActorText = Annotated[
    StrictStr,
    AfterValidator(_text(trim=True, max_length=240, what="the actor")),
    _string_schema(max_length=240),
]
WarningText = Annotated[
    StrictStr,
    AfterValidator(_text(trim=False, max_length=4096, what="a warning")),
    _string_schema(max_length=4096),
]
RequestedArtifactPath = Annotated[
    StrictStr,
    AfterValidator(_text(trim=False, max_length=4096, what="the plan artifact path")),
    _string_schema(
        max_length=4096,
        description="Never trimmed or normalised; unsafe paths block instead of failing input.",
    ),
]
EffectiveArtifactPath = Annotated[
    StrictStr,
    AfterValidator(_effective_artifact_path),
    _string_schema(max_length=4096),
]
Digest = Annotated[
    StrictStr, AfterValidator(_digest), _string_schema(pattern="^sha256:[a-f0-9]{64}$")
]
OffsetDateTime = Annotated[
    StrictStr, AfterValidator(_offset_datetime), _string_schema(format="date-time")
]


# --------------------------------------------------------------------------- numbers, literals


def is_js_integer(value: object) -> bool:
    """True for what ``Number.isInteger`` accepts after ``JSON.parse`` (not booleans)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _js_integer(value: Any) -> Any:
    if not is_js_integer(value):
        _fail("int_type", "expected an integer")
    return int(value)


ProfileVersion = Annotated[int, Field(ge=1, le=MAX_PROFILE_VERSION), BeforeValidator(_js_integer)]


def _exactly(expected: bool | int) -> BeforeValidator:
    """``z.literal``: the same JavaScript value, so ``0`` is not ``false`` and vice versa."""

    def check(value: Any) -> Any:
        if type(value) is type(expected) and value == expected:
            return value
        if type(expected) is int and type(value) is float and value == expected:
            return expected
        _fail("literal_error", f"expected {json.dumps(expected)}")

    return BeforeValidator(check)


FalseOnly = Annotated[Literal[False], _exactly(False)]


# --------------------------------------------------------------------------- models


def _omit_null_from_optional_fields(schema: dict[str, Any]) -> None:
    # Optional fields are omitted, never null (see the validator below): say so in the schema.
    for field_schema in schema.get("properties", {}).values():
        branches = field_schema.get("anyOf")
        if field_schema.get("default", ...) is None and isinstance(branches, list):
            kept = [branch for branch in branches if branch != {"type": "null"}]
            del field_schema["anyOf"], field_schema["default"]
            if len(kept) == 1:
                field_schema.update(kept[0])
            else:
                field_schema["anyOf"] = kept


class StrictModel(BaseModel):
    """Base of every contract: strict types, unknown keys forbidden, immutable, aliases only."""

    model_config = ConfigDict(
        json_schema_extra=_omit_null_from_optional_fields,
        strict=True,
        extra="forbid",
        frozen=True,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        hide_input_in_errors=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _optional_fields_are_omitted_not_null(cls, data: Any) -> Any:
        # Zod's .optional() accepts a missing key but not null; pydantic would take null.
        if isinstance(data, Mapping):
            for name, field in cls.model_fields.items():
                key = field.alias or name
                if not field.is_required() and key in data and data[key] is None:
                    _fail("optional_is_null", "omit an optional field instead of null", key)
        return data


def _authority_field(dimension: Dimension) -> Any:
    return Field(alias=dimension)


class PhaseAuthority(StrictModel):
    """Exact scopes for each of the seven dimensions; all seven keys, nothing else."""

    filesystem_read: ScopeList = _authority_field("filesystem.read")
    filesystem_write: ScopeList = _authority_field("filesystem.write")
    command_execute: ScopeList = _authority_field("command.execute")
    network_egress: ScopeList = _authority_field("network.egress")
    credential_access: ScopeList = _authority_field("credential.access")
    external_action: ScopeList = _authority_field("external.action")
    artifact_plan_write: ScopeList = _authority_field("artifact.plan.write")

    def scopes(self, dimension: Dimension) -> list[str]:
        return list(getattr(self, _ATTRIBUTE[dimension]))


class PhaseAuthorityEnforcement(StrictModel):
    """Whether a source can enforce each dimension."""

    filesystem_read: EnforcementState = _authority_field("filesystem.read")
    filesystem_write: EnforcementState = _authority_field("filesystem.write")
    command_execute: EnforcementState = _authority_field("command.execute")
    network_egress: EnforcementState = _authority_field("network.egress")
    credential_access: EnforcementState = _authority_field("credential.access")
    external_action: EnforcementState = _authority_field("external.action")
    artifact_plan_write: EnforcementState = _authority_field("artifact.plan.write")

    def state(self, dimension: Dimension) -> EnforcementState:
        state: EnforcementState = getattr(self, _ATTRIBUTE[dimension])
        return state


_ATTRIBUTE: Final[dict[str, str]] = {
    field.alias: name
    for name, field in PhaseAuthority.model_fields.items()
    if field.alias is not None
}


class PhaseAuthoritySource(StrictModel):
    """One narrowing source: its identity, the scopes it allows, what it can enforce."""

    id: Identifier
    kind: SourceKind
    authority: PhaseAuthority
    enforcement: PhaseAuthorityEnforcement


class ParentSource(PhaseAuthoritySource):
    kind: Literal["parent"]


class AgentProfileSource(PhaseAuthoritySource):
    kind: Literal["agent-profile"]


class SandboxSource(PhaseAuthoritySource):
    kind: Literal["sandbox"]


class ToolCatalogSource(PhaseAuthoritySource):
    kind: Literal["tool-catalog"]


class LaunchPolicySource(PhaseAuthoritySource):
    kind: Literal["launch-policy"]


class DisabledPlanArtifactPolicy(StrictModel):
    mode: Literal["disabled"]
    owner: Literal["veritas-kanban"]
    maximumPaths: Annotated[Literal[0], _exactly(0)]
    transport: Literal["harness-api"]
    shellRedirection: FalseOnly
    indirectWrites: FalseOnly


class ExactPathPlanArtifactPolicy(StrictModel):
    mode: Literal["harness-exact-path"]
    owner: Literal["veritas-kanban"]
    maximumPaths: Annotated[Literal[1], _exactly(1)]
    transport: Literal["harness-api"]
    shellRedirection: FalseOnly
    indirectWrites: FalseOnly


PlanArtifactPolicy = Annotated[
    DisabledPlanArtifactPolicy | ExactPathPlanArtifactPolicy, Field(discriminator="mode")
]


class PhaseCapabilityProfile(StrictModel):
    """``phase-capability-profile/v1``: what a phase may request (a ceiling, not a grant)."""

    schemaVersion: Literal["phase-capability-profile/v1"]
    id: Identifier
    version: ProfileVersion
    phase: PhaseName
    name: Name
    description: SafeText
    builtIn: StrictBool | None = None
    authority: PhaseAuthority
    requiredDimensions: DimensionList
    approvalRequiredDimensions: DimensionList
    planArtifactPolicy: PlanArtifactPolicy

    @model_validator(mode="after")
    def _artifact_authority_matches_policy(self) -> Self:
        scopes = self.authority.artifact_plan_write
        if self.planArtifactPolicy.mode == "disabled" and scopes:
            _fail(
                "plan_artifact_policy",
                "a disabled plan-artifact policy cannot grant artifact write authority",
                "authority",
                "artifact.plan.write",
            )
        if self.planArtifactPolicy.mode == "harness-exact-path" and scopes != [
            "harness-exact-path"
        ]:
            _fail(
                "plan_artifact_policy",
                "plan-artifact authority must be exactly ['harness-exact-path']",
                "authority",
                "artifact.plan.write",
            )
        return self


class LegacyIdentity(StrictModel):
    mode: Literal["legacy"]
    phase: Literal["legacy"]


class ProfileIdentity(StrictModel):
    mode: Literal["profile"]
    phase: PhaseName
    profileId: Identifier
    profileVersion: ProfileVersion


PhaseIdentity = Annotated[LegacyIdentity | ProfileIdentity, Field(discriminator="mode")]


class PhaseTransitionIntent(StrictModel):
    """``phase-transition-intent/v1``: a requested move between two phase identities."""

    schemaVersion: Literal["phase-transition-intent/v1"]
    from_: PhaseIdentity = Field(alias="from")
    to: PhaseIdentity
    actor: ActorText
    reason: SafeText
    requestedAt: OffsetDateTime
    parentEvidenceDigest: Digest | None = None


class PhaseCompilerSources(StrictModel):
    """The five narrowing sources; always folded in this order, whatever the input order."""

    parent: ParentSource
    agentProfile: AgentProfileSource
    sandbox: SandboxSource
    toolCatalog: ToolCatalogSource
    launchPolicy: LaunchPolicySource

    def in_order(self) -> list[PhaseAuthoritySource]:
        return [self.parent, self.agentProfile, self.sandbox, self.toolCatalog, self.launchPolicy]


class PlanArtifactRequest(StrictModel):
    """A request for the one harness-owned plan artifact (the path is checked by the compiler)."""

    exactPath: RequestedArtifactPath
    owner: Literal["veritas-kanban"]
    transport: Literal["harness-api"]


class PhaseCompilerInput(StrictModel):
    """The compiler input: no ``profile`` means explicit legacy mode."""

    profile: PhaseCapabilityProfile | None = None
    sources: PhaseCompilerSources
    planArtifact: PlanArtifactRequest | None = None


class PhaseAuthorityEvaluation(StrictModel):
    dimension: Dimension
    requestedScopes: ScopeList
    effectiveScopes: ScopeList
    required: StrictBool
    limitingSourceIds: Annotated[list[Identifier], Field(max_length=16)]


class PhaseCapabilityBlocker(StrictModel):
    code: BlockerCode
    message: SafeText
    dimension: Dimension | None = None
    sourceId: Identifier | None = None


class EffectivePlanArtifact(StrictModel):
    exactPath: EffectiveArtifactPath
    owner: Literal["veritas-kanban"]
    transport: Literal["harness-api"]
    shellRedirection: FalseOnly
    indirectWrites: FalseOnly


class PhaseCapabilityEvidence(StrictModel):
    """``phase-capability-evidence/v1``: the compiled result, its blockers and its digest."""

    schemaVersion: Literal["phase-capability-evidence/v1"]
    digest: Digest
    status: Literal["allowed", "narrowed", "blocked"]
    identity: PhaseIdentity
    requestedAuthority: PhaseAuthority
    effectiveAuthority: PhaseAuthority
    requiredDimensions: list[Dimension]
    approvalRequiredDimensions: list[Dimension]
    evaluations: list[PhaseAuthorityEvaluation]
    blockers: list[PhaseCapabilityBlocker]
    warnings: list[WarningText]
    planArtifact: EffectivePlanArtifact | None = None


# --------------------------------------------------------------------------- validation

_M = TypeVar("_M", bound=BaseModel)


def _issue_path(loc: tuple[int | str, ...], data: Any) -> str:
    """Render pydantic's location as ``a.b[2].c``, walking the input alongside it.

    Pydantic inserts the tag of a discriminated union (``disabled``) and our validators
    report positions below the validated value in ``ctx['at']``; the walk drops the first
    (a key the input object does not have, unless it is the missing key itself).
    """
    rendered = ""
    node = data
    for position, item in enumerate(loc):
        last = position == len(loc) - 1
        if isinstance(item, int):
            rendered += f"[{item}]"
            node = node[item] if isinstance(node, list) and 0 <= item < len(node) else None
            continue
        if isinstance(node, Mapping) and item not in node and not last:
            continue
        rendered += f".{item}" if rendered else item
        node = node.get(item) if isinstance(node, Mapping) else None
    return rendered


def _issues(error: ValidationError, data: Any) -> list[InputIssue]:
    issues: list[InputIssue] = []
    for detail in error.errors(include_url=False, include_input=False):
        loc = tuple(detail["loc"])
        at = (detail.get("ctx") or {}).get("at")
        if isinstance(at, list):
            loc += tuple(at)
        message = detail["msg"]
        if detail["type"] == "extra_forbidden":
            message = "unknown key (this contract is strict)"
        elif detail["type"] == "missing":
            message = "required key is missing"
        issues.append(InputIssue(path=_issue_path(loc, data), message=message, kind=detail["type"]))
    return issues


def validate(model: type[_M], data: Any, contract: str | None = None) -> _M:
    """Validate ``data`` against a strict model, raising :class:`PhaseInputError`."""
    name = contract or model.__name__
    if not isinstance(data, Mapping):
        raise PhaseInputError(
            name, [InputIssue(path="", message="expected a JSON object", kind="model_type")]
        )
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as error:
        raise PhaseInputError(name, _issues(error, data)) from None
