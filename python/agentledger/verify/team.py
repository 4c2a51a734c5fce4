"""Team roles, re-checked offline: a stage recorded under a team manifest matches it.

When a role's kind was enforced at the boundary, the entry pins the manifest that declared
it (``team_manifest``, a blob). Verify reattaches that manifest, re-parses it and checks
the stage's kind is the one its role is declared with — independently of whatever the
``team_roles`` table says today. Whether that manifest was the team in force for the role
when the stage was logged is ``verify/stages.py``'s check.
"""

from __future__ import annotations

from collections.abc import Iterator

from agentledger.activity.team import manifest_roles
from agentledger.limits import entry_document
from agentledger.verify.context import IN_SELECTED, VerifyContext
from agentledger.verify.results import Divergence

_PINNED = (
    "SELECT run_id, seq, bytes FROM entries WHERE kind = 'activity.result' {where} "
    'AND instr(bytes, CAST(\'"team_manifest":"\' AS BLOB)) > 0 ORDER BY run_id, seq'
)
ALL_PINNED = _PINNED.format(where="")
RUN_PINNED = _PINNED.format(where=f"AND {IN_SELECTED}")


def _rows(ctx: VerifyContext) -> Iterator[tuple[str, int, bytes]]:
    if ctx.whole:
        # The journal pass marked exactly the rows ALL_PINNED selects.
        yield from ctx.marked_rows(("team_manifest",), "run_id, seq, bytes", ALL_PINNED)
        return
    yield from ctx.conn.execute(RUN_PINNED, (ctx.selected_json,))


def check_team_roles(ctx: VerifyContext) -> None:
    manifests: dict[str, dict[str, str] | str] = {}
    for run_id, seq, raw in _rows(ctx):
        try:
            body = entry_document(raw)["body"]
            manifest, role, kind = body["team_manifest"], body["role"], body["kind"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue  # not a pinned-manifest body (the journal pass reports malformed ones)
        if not isinstance(manifest, str):
            continue
        if manifest not in manifests:
            manifests[manifest] = manifest_roles(ctx.conn, manifest)
        roles = manifests[manifest]
        stage = body.get("stage_id")
        if isinstance(roles, str):
            ctx.diverged(run_id, Divergence(run_id, seq, "team.manifest", manifest, roles, stage))
            continue
        declared = roles.get(role) if isinstance(role, str) else None
        if declared != kind:
            ctx.diverged(
                run_id,
                Divergence(
                    run_id, seq, "activity.role_kind",
                    f"role {role!r} as {declared!r} (manifest {manifest[:19]}…)",
                    f"a {kind!r} stage", stage,
                ),
            )  # fmt: skip
