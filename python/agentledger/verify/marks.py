"""What ``show`` says about each step: a run's findings turned into marks on its entries.

``show`` verifies the run it shows, then marks every step: clean, edited (its bytes changed),
a gap before it (steps deleted), its link broken (the entry before changed or removed),
a blob missing, its stage incomplete, or another check that failed there. Findings that
belong to no step (the run's cached head, a workspace finding naming the run) are the run's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from agentledger.checks import says
from agentledger.verify.results import Divergence, RunVerdict

CLEAN = "clean"
EDITED = "edited"
GAP = "gap before it"
LINK = "link broken"
BLOB_MISSING = "blob missing"
STAGE_INCOMPLETE = "stage incomplete"
DIVERGED = "diverged"

EDITED_CHECKS = frozenset(
    {
        "entry.hash", "entry.json", "entry.canonical", "entry.v", "entry.run", "entry.seq",
        "entry.kind", "entry.prev", "entry.ts", "entry.body", "activity.evidence_set_hash",
    }
)  # fmt: skip
MARK_OF_CHECK = {
    "chain.gap": GAP,
    "chain.order": GAP,
    "chain.prev": LINK,
    "blob.missing": BLOB_MISSING,
    **dict.fromkeys(EDITED_CHECKS, EDITED),
}


@dataclass(frozen=True, slots=True)
class Mark:
    """One thing wrong at a step: which mark, and the finding behind it (if any)."""

    mark: str
    text: str
    divergence: Divergence | None = None

    def to_json(self) -> dict[str, Any]:
        found = self.divergence
        return {
            "mark": self.mark,
            "text": self.text,
            "check": None if found is None else found.check,
            "expected": None if found is None else found.expected,
            "actual": None if found is None else found.actual,
        }


@dataclass
class RunMarks:
    steps: dict[int, list[Mark]] = field(default_factory=lambda: defaultdict(list))
    run: list[Mark] = field(default_factory=list)
    """Findings of the run as a whole (its cached head, workspace findings naming it or
    naming no run)."""
    missing_before: dict[int, tuple[int, int]] = field(default_factory=dict)
    """seq -> (first, last) step missing right before it."""

    def of(self, seq: int) -> list[Mark]:
        return self.steps.get(seq, [])

    @property
    def diverged(self) -> bool:
        return bool(self.run) or any(self.steps.values())


def _text(divergence: Divergence, mark: str) -> str:
    """The mark's words: the check, and the finding as the check table phrases it."""
    check = divergence.check
    words = says(check, divergence.expected, divergence.actual, divergence.seq)
    if mark == EDITED:
        return f"edited ({check}): {words}"
    if words is not None:
        return f"{check}: {words}"
    return f"{check}: expected {divergence.expected}, actual {divergence.actual}"


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def mark_run(
    verdict: RunVerdict,
    workspace: list[Divergence],
    stages: list[dict[str, Any]],
    held: Collection[int] | None = None,
) -> RunMarks:
    """The marks of every step of ``verdict``'s run (``workspace``: the report's findings).
    A finding at a step not in ``held`` (the steps the file holds, when given: one deleted)
    is the run's, said with its step: no entry is shown to carry it."""
    marks = RunMarks()
    findings = list(verdict.divergences)
    # A workspace finding naming the run, or naming none (the signed log, the checkpoint
    # the run's entries are proven in): what `verify RUN` reports with the run.
    findings += [d for d in workspace if d.run_id in (verdict.run_id, None)]
    for divergence in findings:
        if divergence.seq is None:
            marks.run.append(Mark(DIVERGED, _run_text(divergence), divergence))
            continue
        if held is not None and divergence.seq not in held:
            text = f"step {divergence.seq}: {_run_text(divergence)}"
            marks.run.append(Mark(DIVERGED, text, divergence))
            continue
        mark = MARK_OF_CHECK.get(divergence.check, DIVERGED)
        marks.steps[divergence.seq].append(Mark(mark, _text(divergence, mark), divergence))
        if divergence.check == "chain.gap":
            first = _int(divergence.expected)
            if first is not None and first < divergence.seq:
                marks.missing_before[divergence.seq] = (first, divergence.seq - 1)
    for stage in stages:
        evidence = stage["evidence"]
        if not stage["refusal"] and evidence["present"] < evidence["observations"]:
            marks.steps[stage["seq"]].append(
                Mark(
                    STAGE_INCOMPLETE,
                    f"stage incomplete: {evidence['present']} of "
                    f"{evidence['observations']} evidence blobs present",
                )
            )
    hidden = verdict.divergence_count - len(verdict.divergences)
    if hidden > 0:
        marks.run.append(Mark(DIVERGED, f"{hidden:,} more findings (counted, not kept)"))
    return marks


def _run_text(divergence: Divergence) -> str:
    words = says(divergence.check, divergence.expected, divergence.actual, divergence.seq)
    if words is not None:
        return f"{divergence.check}: {words}"
    return f"{divergence.check}: expected {divergence.expected}, actual {divergence.actual}"


__all__ = ["CLEAN", "Mark", "RunMarks", "mark_run"]
