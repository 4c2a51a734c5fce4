"""``show RUN`` for an imported bernstein run: bernstein's own journal rows and stages.

``show`` dispatches here when RUN was imported (a native run is rendered in journal.py).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agentledger.bernstein.view import ImportedRun
from agentledger.cli.context import AppContext, emit_json
from agentledger.display import safe
from agentledger.errors import ExitCode
from agentledger.verify import VerifyReport, status_name

if TYPE_CHECKING:
    from rich.tree import Tree

HEX_SHOWN = 16


def _short(digest: object) -> str:
    if not isinstance(digest, str) or not digest:
        return "-"
    prefix, _, rest = digest.rpartition(":")
    head = f"{prefix}:" if prefix else ""
    return safe(head + (rest[:HEX_SHOWN] + "…" if len(rest) > HEX_SHOWN else rest))


def show_imported(
    app: AppContext,
    run: ImportedRun,
    report: VerifyReport | None,
    unverified: str | None,
    as_json: bool,
    width: int | None,
) -> int:
    """bernstein's rows and stages, then what `verify RUN` found for the run (its findings,
    the verdict); the exit code is that verify's."""
    code = int(report.code) if report is not None else int(ExitCode.OK)
    verdict = report.runs[0] if report is not None else None
    if as_json:
        emit_json(
            {
                **run.to_json(),
                "code": code,
                "status": status_name(code),
                "run_status": "unverified" if report is None else report.status_of(run.run_id),
                "verify": None if verdict is None else verdict.to_json(),
                "workspace": [] if report is None else [d.to_json() for d in report.workspace],
                "unverified": unverified,
            }
        )
        return code
    # rich loads for the terminal's tree only: `show --json` never needs it.
    from rich.text import Text

    from agentledger.report import run_tree, verdict_line, workspace_tree

    console = app.human_console(width)
    console.print(imported_tree(run))
    if report is None:
        console.print(Text(safe(unverified or "not verified"), style="yellow"))
        return code
    if verdict is not None and not verdict.ok:
        console.print(run_tree(verdict, report.status_of(run.run_id)))
    if report.workspace:
        console.print(workspace_tree(report))
    console.print(verdict_line(report))
    return code


def imported_tree(run: ImportedRun) -> Tree:
    from rich.text import Text
    from rich.tree import Tree

    events = sum(1 for row in run.rows if row["parsed"])
    discarded = len(run.rows) - events
    title = Text.assemble(
        ("run ", "dim"),
        (safe(run.run_id), "bold"),
        ("  bernstein import", "cyan"),
        f"  {events} events",
        (f", {discarded} discarded line(s)" if discarded else "", "yellow"),
        (f"  {safe(run.path)}", "dim"),
    )
    tree = Tree(title)
    if not run.held:
        tree.add(Text("the journal's bytes are not in the ledger", style="bold red"))
    stage_by_line = {stage["line"]: stage for stage in run.stages}
    for row in run.rows:
        # A line the reader discards, or keeps but Python's stack cannot parse to show.
        unshown = "discarded by bernstein's reader: " if not row["parsed"] else None
        if row["parsed"] and row["payload"] is None:
            unshown = "an event nested too deeply to show: "
        if unshown is not None:
            tree.add(
                Text.assemble(
                    (f"line {row['line']:>4} ", "dim"),
                    (unshown, "yellow"),
                    safe(row["text"][:120]),
                )
            )
            continue
        node = tree.add(
            Text.assemble(
                (f"{safe(row['index']):>4} ", "dim"),
                (safe(row["event"]), "cyan bold"),
                "  ",
                (_short(row["event_hash"]), "magenta"),
                "  ",
                (safe(row["ts"] or "-"), "dim"),
            )
        )
        stage = stage_by_line.get(row["line"])
        if stage is not None:
            _add_stage(node, stage)
        else:
            body = json.dumps(row["payload"], ensure_ascii=False, sort_keys=True)
            node.add(Text(safe(body if len(body) <= 200 else body[:200] + "…")))
    return tree


def _add_stage(node: Tree, stage: dict[str, object]) -> None:
    from rich.text import Text

    # Every field is the workdir's text: a newline in one would draw a row of its own.
    state = safe(stage["terminal_state"])
    node.add(
        Text.assemble(
            (safe(stage["stage_id"]), "bold"),
            "  ",
            (safe(stage["kind"]), "cyan"),
            "  ",
            (state, "green" if state == "completed" else "red"),
            (f" ({safe(stage['reason_code'])})", "dim"),
        )
    )
    evidence = stage["evidence"]
    assert isinstance(evidence, dict)
    node.add(
        Text.assemble(
            "evidence ",
            (_short(stage["evidence_set_hash"]), "magenta"),
            f"  {evidence['observations']} obs, "
            f"{evidence['present']}/{evidence['observations']} in the store",
        )
    )
    present = stage["report"] == "present"
    node.add(
        Text.assemble(
            "report ",
            (_short(stage["artifact_hash"]), "magenta"),
            "  ",
            ("stored" if present else "absent from the store", "green" if present else "yellow"),
        )
    )
