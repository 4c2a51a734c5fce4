"""What verification found, rendered for people: a summary table and a tree per failing run.

The same renderables go to the terminal or, through ``Console(record=True)``, to a
standalone HTML file. Machine output is ``VerifyReport.to_json()``, never this.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agentledger.verify import Divergence, RunVerdict, VerifyReport, status_name

MAX_RUN_TREES = 50
STATUS_STYLE = {"clean": "green", "diverged": "bold red", "missing": "yellow"}


def summary_table(report: VerifyReport) -> Table:
    table = Table(title="Verification", title_justify="left", show_edge=False)
    for column in ("runs", "entries", "clean", "diverged", "missing", "blobs", "time", "entries/s"):
        table.add_column(column, justify="right")
    rate = f"{report.entries / report.elapsed_s:,.0f}" if report.elapsed_s else "-"
    table.add_row(
        f"{len(report.runs):,}",
        f"{report.entries:,}",
        Text(f"{report.count(0):,}", style="green"),
        Text(f"{report.count(2):,}", style="red" if report.count(2) else ""),
        Text(f"{report.count(1):,}", style="yellow" if report.count(1) else ""),
        f"{report.blobs_checked:,}",
        f"{report.elapsed_s:.2f}s",
        rate,
    )
    return table


def _leaf(divergence: Divergence) -> Text:
    text = Text()
    text.append(divergence.check, style="bold")
    if divergence.subject:
        text.append(f" [{divergence.subject}]", style="dim")
    text.append(": expected ")
    text.append(divergence.expected, style="green")
    text.append(", actual ")
    text.append(divergence.actual, style="red")
    return text


def run_tree(verdict: RunVerdict) -> Tree:
    """run → step → check: expected vs actual."""
    status = status_name(verdict.code)
    label = Text.assemble(
        ("run ", "dim"),
        (verdict.run_id, "bold"),
        "  ",
        (status, STATUS_STYLE.get(status, "")),
        (f"  {verdict.divergence_count} divergence(s), {verdict.entries} entries", "dim"),
    )
    tree = Tree(label)
    if verdict.code == 1:
        tree.add(Text("no such run in this ledger", style="yellow"))
        return tree
    by_step: dict[int | None, list[Divergence]] = defaultdict(list)
    for divergence in verdict.divergences:
        by_step[divergence.seq].append(divergence)
    for seq in sorted(by_step, key=lambda s: (s is None, s or 0)):
        branch = tree.add(Text("run" if seq is None else f"step {seq}", style="cyan"))
        for divergence in by_step[seq]:
            branch.add(_leaf(divergence))
    hidden = verdict.divergence_count - len(verdict.divergences)
    if hidden > 0:
        tree.add(Text(f"… and {hidden} more", style="dim"))
    return tree


def report_renderable(report: VerifyReport) -> RenderableType:
    parts: list[RenderableType] = [summary_table(report)]
    if report.workspace:
        workspace = Tree(Text("workspace", style="bold red"))
        for divergence in report.workspace:
            workspace.add(_leaf(divergence))
        parts.append(workspace)
    failing = [run for run in report.runs if not run.ok]
    for verdict in failing[:MAX_RUN_TREES]:
        parts.append(run_tree(verdict))
    if len(failing) > MAX_RUN_TREES:
        parts.append(Text(f"… {len(failing) - MAX_RUN_TREES} more failing runs (see --json)"))
    if report.receipts_checked or report.audit_records:
        parts.append(
            Text(
                f"activities: {report.receipts_checked:,} receipt(s) reattached, "
                f"{report.signatures_checked:,} signature(s) checked, "
                f"{report.audit_records:,} audit mirror record(s)",
                style="dim",
            )
        )
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    verdict_text = status_name(report.code)
    parts.append(Text(f"verdict: {verdict_text}", style=STATUS_STYLE.get(verdict_text, "")))
    return Group(*parts)


def write_html(report: VerifyReport, path: Path) -> None:
    """The same report as a standalone HTML file."""
    console = Console(record=True, file=io.StringIO(), width=120)
    console.print(report_renderable(report))
    path.write_text(console.export_html(), encoding="utf-8")
