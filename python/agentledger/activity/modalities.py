"""Modality helpers: capture and content-address bytes as they arrive, then cross the boundary.

Each helper is one stage of a run. It keeps what it captured in memory and writes nothing
until ``finish()``, which builds the ActivityResult and records it through the boundary in
one transaction — so a refused step (``effect-before-plan``...) leaves no trace.

- research: ``fetch(url, page)`` — one ``page`` observation per fetched page;
- browser: ``observe(step, snapshot)`` and ``receipt(step, receipt)`` — one ``snapshot``
  observation per decision step, plus the action receipts;
- data and ops: ``add_input`` → ``plan(steps)`` (exactly once) → ``add_output``; the
  signed DataOpsReceipt is the artifact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentledger.activity.boundary import record_activity
from agentledger.activity.receipts import (
    SignedArtifact,
    artifact_statement,
    build_receipt,
    plan_hash,
    sign,
)
from agentledger.activity.result import (
    ActivityRejected,
    ActivityResult,
    Observation,
    check_stage_id,
)

if TYPE_CHECKING:
    from agentledger._core import Entry
    from agentledger.handle import RunHandle
    from agentledger.keys import InstallKey


class ActivitySession:
    """One stage being captured. Nothing is written before ``finish``."""

    kind = "coding"

    def __init__(self, run: RunHandle, stage_id: str, role: str | None = None) -> None:
        self.run = run
        self.stage_id = check_stage_id(stage_id)
        self.role = role
        self.observations: list[Observation] = []
        self.entry: Entry | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.run.id!r}, {self.stage_id!r})"

    def _open(self) -> None:
        if self.entry is not None:
            raise ActivityRejected(
                "already-finished", f"stage {self.stage_id!r} was already recorded"
            )

    def _capture(self, kind: str, ref: str, data: bytes) -> Observation:
        self._open()
        if not isinstance(ref, str):
            raise ActivityRejected("invalid-observation", "a ref must be a string")
        observation = Observation.capture(kind, ref, data)
        self.observations.append(observation)
        return observation

    def _record(self, artifact: Any, terminal_state: str, reason_code: str) -> Entry:
        self._open()
        result = ActivityResult.build(
            kind=self.kind,
            artifact=artifact,
            observations=self.observations,
            terminal_state=terminal_state,
            reason_code=reason_code,
        )
        self.entry = record_activity(self.run, result, stage_id=self.stage_id, role=self.role)
        return self.entry


class ResearchActivity(ActivitySession):
    """A research stage: every fetched page is content-addressed the moment it arrives."""

    kind = "research"

    def fetch(self, url: str, page: bytes) -> Observation:
        return self._capture("page", url, page)

    def finish(
        self, artifact: Any = None, *, terminal_state: str = "completed", reason_code: str = "ok"
    ) -> Entry:
        return self._record(artifact, terminal_state, reason_code)


class BrowserActivity(ActivitySession):
    """A browser/computer-use stage: one snapshot observation per decision step."""

    kind = "browser"

    def __init__(self, run: RunHandle, stage_id: str, role: str | None = None) -> None:
        super().__init__(run, stage_id, role)
        self._snapshot_steps: set[str] = set()

    def observe(self, step: str, snapshot: bytes) -> Observation:
        if step in self._snapshot_steps:
            raise ActivityRejected(
                "duplicate-step", f"step {step!r} already has its snapshot (one per step)"
            )
        observation = self._capture("snapshot", step, snapshot)
        self._snapshot_steps.add(step)
        return observation

    def receipt(self, step: str, receipt: bytes) -> Observation:
        return self._capture("action_receipt", step, receipt)

    def finish(
        self, artifact: Any = None, *, terminal_state: str = "completed", reason_code: str = "ok"
    ) -> Entry:
        return self._record(artifact, terminal_state, reason_code)


class DataOpsActivity(ActivitySession):
    """A data or ops stage: signed inputs, then exactly one plan, then signed outputs."""

    def __init__(self, run: RunHandle, stage_id: str, kind: str, role: str | None = None) -> None:
        super().__init__(run, stage_id, role)
        if kind not in ("data", "ops"):
            raise ActivityRejected(
                "unknown-kind", f"a data/ops stage is 'data' or 'ops', not {kind!r}"
            )
        self.kind = kind
        self.inputs: list[Observation] = []
        self.outputs: list[Observation] = []
        self.steps: list[Any] | None = None
        self.plan_hash: str | None = None
        self._key: InstallKey | None = None
        self._signed_inputs: list[SignedArtifact] = []
        self._signed_outputs: list[SignedArtifact] = []

    def add_input(self, ref: str, data: bytes) -> Observation:
        self._open()
        if self.plan_hash is not None:
            raise ActivityRejected(
                "input-after-plan",
                f"stage {self.stage_id!r}: an input after the plan would not be in its projection",
            )
        observation = self._capture("input", ref, data)
        self.inputs.append(observation)
        return observation

    def plan(self, steps: Sequence[Any]) -> str:
        """Fix the plan: its hash projects the inputs and these steps. Signs the inputs."""
        self._open()
        if self.plan_hash is not None:
            raise ActivityRejected("second-plan", f"stage {self.stage_id!r} already has its plan")
        if isinstance(steps, str | bytes) or not isinstance(steps, Sequence):
            raise ActivityRejected("invalid-plan", "plan steps must be a list")
        steps = list(steps)
        try:
            value = plan_hash([o.content_hash for o in self.inputs], steps)
        except (ValueError, TypeError) as exc:
            raise ActivityRejected(
                "invalid-plan", f"plan steps have no canonical form: {exc}"
            ) from None
        self._key = self.run.ledger.keys.signing_key(create=True)
        self.steps, self.plan_hash = steps, value
        self._signed_inputs = [self._sign("input", o) for o in self.inputs]
        return value

    def add_output(self, ref: str, data: bytes) -> Observation:
        """Record an effect's result. Refused before the plan exists."""
        self._open()
        if self.plan_hash is None:
            raise ActivityRejected(
                "effect-before-plan",
                f"stage {self.stage_id!r}: an output (an effect) before the plan is refused",
            )
        observation = self._capture("output", ref, data)
        self.outputs.append(observation)
        self._signed_outputs.append(self._sign("output", observation))
        return observation

    def _sign(self, role: str, observation: Observation) -> SignedArtifact:
        assert self._key is not None and self.plan_hash is not None
        statement = artifact_statement(
            kind=self.kind, run_id=self.run.id, stage_id=self.stage_id,
            plan_hash=self.plan_hash, role=role, ref=observation.ref,
            content_hash=observation.content_hash,
        )  # fmt: skip
        return SignedArtifact(
            role, observation.ref, observation.content_hash, sign(self._key, statement)
        )

    def receipt(self) -> dict[str, Any]:
        """The sealed DataOpsReceipt for what was recorded so far (needs the plan)."""
        if self.plan_hash is None or self._key is None or self.steps is None:
            raise ActivityRejected("no-plan", f"stage {self.stage_id!r} has no plan")
        return build_receipt(
            self._key,
            kind=self.kind,
            run_id=self.run.id,
            stage_id=self.stage_id,
            steps=self.steps,
            plan_hash_value=self.plan_hash,
            input_hashes=[o.content_hash for o in self.inputs],
            inputs=self._signed_inputs,
            outputs=self._signed_outputs,
        )

    def finish(self, *, terminal_state: str = "completed", reason_code: str = "ok") -> Entry:
        self._open()
        if self.plan_hash is None:
            raise ActivityRejected(
                "no-plan", f"stage {self.stage_id!r}: a {self.kind} activity needs its plan"
            )
        return self._record(self.receipt(), terminal_state, reason_code)


# The entry points: one stage of ``run`` per call (``Run.research`` and the others delegate).


def research(run: RunHandle, stage_id: str, *, role: str | None = None) -> ResearchActivity:
    """A research stage: ``fetch(url, page)`` then ``finish(artifact)``."""
    return ResearchActivity(run, stage_id, role)


def browser(run: RunHandle, stage_id: str, *, role: str | None = None) -> BrowserActivity:
    """A browser stage: ``observe(step, snapshot)``, ``receipt(step, bytes)``, ``finish``."""
    return BrowserActivity(run, stage_id, role)


def data(run: RunHandle, stage_id: str, *, role: str | None = None) -> DataOpsActivity:
    """A data stage: ``add_input`` → ``plan(steps)`` → ``add_output`` → ``finish``."""
    return DataOpsActivity(run, stage_id, "data", role)


def ops(run: RunHandle, stage_id: str, *, role: str | None = None) -> DataOpsActivity:
    """An ops stage: like ``data``, for activities that change systems."""
    return DataOpsActivity(run, stage_id, "ops", role)
