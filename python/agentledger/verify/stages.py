"""The activity boundary's decisions, re-checked from the journal.

``record_activity`` decides three things from earlier entries before it pins a stage
(``activity/boundary.py``); each is re-derived here from the entries' bytes, so a stage the
boundary should have refused — because it was fooled by an edited row, or never asked — is
a finding at its step:

- ``activity.stage_unique``: no earlier ``activity.result`` of the run uses its stage id;
- ``activity.redundant``: no earlier result of the run pins its (non-empty) evidence set;
  a recorded ``redundant-evidence`` refusal names such an earlier result
  (``activity.refusal``);
- ``activity.role_decision``: its role and pinned manifest are what the team in force when
  it was logged says — the ``team.loaded`` entries of ``_team`` before it in the log. A
  role the team does not declare, a team ignored, or a manifest no load put in force for
  that role is a finding; the modality against the pinned manifest is ``activity.role_kind``
  (``verify/team.py``).

Only results that crossed the boundary (``"mirrored": true``) are decisions; every
``activity.result`` counts as an earlier one, as it does for the boundary. In an archive
the log holds runs one after another, so which team loads came first is not known there:
a pinned manifest must then only be one a load declared for that role and modality.
"""

from __future__ import annotations

import bisect
import itertools
import json
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentledger.activity.boundary import REFUSED_KIND, RESULT_KIND
from agentledger.activity.team import Declared, team_in_force
from agentledger.bookkeeping import TEAM_LOADED, TEAM_RUN
from agentledger.journal_view import read_run
from agentledger.limits import entry_document
from agentledger.verify.context import IN_SELECTED, VerifyContext
from agentledger.verify.results import Divergence

# ``+kind``: the table itself is scanned, never an index on the kind (an index is a hint).
_STAGES = (
    "SELECT run_id, seq, bytes, leaf FROM entries WHERE +kind IN ('activity.result', "
    "'activity.refused') AND instr(bytes, CAST('\"kind\":\"activity.' AS BLOB)) > 0 {where} "
    "ORDER BY run_id, seq"
)
ALL_STAGES = _STAGES.format(where="")
RUN_STAGES = _STAGES.format(where=f"AND {IN_SELECTED}")
_STAGE_AT = "SELECT run_id, seq, bytes, leaf FROM entries WHERE run_id = ? AND seq = ?"


@dataclass
class _TeamHistory:
    """The team in force after each ``team.loaded`` entry, by its log position."""

    leaves: list[int] = field(default_factory=list)
    teams: list[Declared] = field(default_factory=list)
    loaded: set[tuple[str, str, str]] = field(default_factory=set)
    """Every ``(role, agent_kind, manifest)`` any load declared."""
    ordered: bool = True
    """False in an archive: log positions do not say which load came first."""

    def before(self, leaf: int) -> Declared:
        at = bisect.bisect_left(self.leaves, leaf)
        return self.teams[at - 1] if at else {}


def _history(ctx: VerifyContext) -> _TeamHistory:
    journal = read_run(ctx.conn, ctx.ledger.id, TEAM_RUN)
    history = _TeamHistory(ordered=not ctx.archive)
    if journal.problem is not None:
        seq, why = journal.problem
        ctx.report.notes.append(
            f"team: the {TEAM_RUN} journal does not verify from step {seq} ({why}); stages "
            "are checked against the team loads before it"
        )
    loads = sorted(
        (e for e in journal.of_kind(TEAM_LOADED) if isinstance(e.leaf, int)),
        key=operator.attrgetter("leaf"),
    )
    for number, load in enumerate(loads, 1):
        history.leaves.append(int(load.leaf or 0))
        team = team_in_force(loads[:number])
        history.teams.append(team)
        history.loaded.update((role, kind, manifest) for role, (kind, manifest) in team.items())
    return history


def _rows(ctx: VerifyContext) -> Iterable[Any]:
    mirrored = ctx.marked.get("mirrored")
    if ctx.whole and mirrored is not None:
        # Marked by the journal pass: only runs with a decision of the boundary (a result
        # or refusal it mirrored) are read, each of their activity entries fetched by key,
        # or, past the marks' limit, scanned run by run.
        decided = {run_id for run_id, _ in mirrored}
        if not decided:
            return ()
        stages = ctx.marked.get("stage")
        if stages is None:
            found: Iterable[Any] = ctx.conn.execute(RUN_STAGES, (json.dumps(sorted(decided)),))
            return found
        return (
            row for key in stages if key[0] in decided for row in ctx.conn.execute(_STAGE_AT, key)
        )
    if ctx.whole:
        scan: Iterable[Any] = ctx.conn.execute(ALL_STAGES)
        return scan
    rows: Iterable[Any] = ctx.conn.execute(RUN_STAGES, (ctx.selected_json,))
    return rows


def check_stage_decisions(ctx: VerifyContext) -> None:
    history: _TeamHistory | None = None
    for run_id, rows in itertools.groupby(_rows(ctx), key=operator.itemgetter(0)):
        stages: dict[str, int] = {}
        sets: dict[str, tuple[int, str]] = {}
        for _, seq, raw, leaf in rows:
            try:
                doc = entry_document(raw)
                kind, body = doc["kind"], doc["body"]
            except (ValueError, KeyError, TypeError, RecursionError):
                continue  # the journal pass reports an entry that is not one
            if not isinstance(body, dict):
                continue
            stage, evidence = body.get("stage_id"), body.get("evidence_set_hash")
            pins = isinstance(evidence, str) and bool(body.get("observations"))
            found: list[tuple[str, str, str]] = []
            if kind == REFUSED_KIND and body.get("refusal") == "redundant-evidence":
                prior = sets.get(evidence) if isinstance(evidence, str) else None
                claimed = (body.get("prior_seq"), body.get("prior_stage_id"))
                if prior != claimed:
                    found.append((
                        "activity.refusal",
                        f"step {claimed[0]} ({claimed[1]!r}) pinning evidence set {evidence}",
                        f"step {prior[0]} ({prior[1]!r})" if prior else "no earlier result does",
                    ))  # fmt: skip
            elif kind == RESULT_KIND and body.get("mirrored") is True:
                if isinstance(stage, str) and stage in stages:
                    found.append((
                        "activity.stage_unique",
                        f"a stage id no earlier result of run {run_id} uses",
                        f"{stage!r}, already the stage of step {stages[stage]}",
                    ))  # fmt: skip
                if pins and evidence in sets:
                    found.append((
                        "activity.redundant",
                        "an evidence set no earlier result of the run pins (else refused)",
                        f"{evidence}, pinned by step {sets[evidence][0]} ({sets[evidence][1]!r})",
                    ))  # fmt: skip
                if isinstance(body.get("role"), str):
                    history = history or _history(ctx)
                    problem = _role_problem(history, body, leaf)
                    if problem is not None:
                        found.append(("activity.role_decision", *problem))
            for check, expected, actual in found:
                ctx.diverged(run_id, Divergence(run_id, seq, check, expected, actual, str(stage)))
            if kind == RESULT_KIND:
                if isinstance(stage, str):
                    stages.setdefault(stage, seq)
                if isinstance(evidence, str):
                    sets.setdefault(evidence, (seq, str(stage)))


def _role_problem(history: _TeamHistory, body: dict[str, Any], leaf: Any) -> tuple[str, str] | None:
    """``(expected, actual)`` when the stage's role decision is not the team's, else None."""
    role, kind, pinned = body["role"], body.get("kind"), body.get("team_manifest")
    holds = f"role {role!r}, a {kind!r} stage, " + (
        f"manifest {str(pinned)[:19]}… pinned" if pinned is not None else "no manifest pinned"
    )
    if not history.ordered:
        if pinned is None or not history.loaded:
            return None  # with no load at all here, only the pinned manifest is checked
        # Strings only: a list in an edited entry is no key of a load (and unhashable).
        strings = isinstance(kind, str) and isinstance(pinned, str)
        if strings and (role, kind, pinned) in history.loaded:
            return None
        return f"a manifest a team load declared role {role!r} as {kind!r} with", holds
    if not isinstance(leaf, int):
        return None  # the log check reports an entry with no log position
    team = history.before(leaf)
    if not team:
        if pinned is None:
            return None
        return "no team loaded before the stage (no manifest to pin)", holds
    declared = team.get(role)
    if declared is None:
        return f"a role the team in force declares (role {role!r} is not one)", holds
    declared_kind, manifest = declared
    if pinned != manifest:
        return f"role {role!r} as {declared_kind!r}, manifest {manifest[:19]}… pinned", holds
    return None  # the modality against that manifest: activity.role_kind (verify/team.py)
