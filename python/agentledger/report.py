"""What verification found, rendered for people in a terminal (or a log).

From the top: what was verified (ledger, version, time, trusted keys, the checkpoint
matched), the summary (runs, entries, clean/diverged, every finding counted by check,
workspace-level ones included), the workspace findings, a tree per failing run
(run → step → check, then *expected* in a neutral colour, *actual* in red, and what the file
holds for an edited entry), what each check found means (``agentledger.checks``), and
the verdict.

Every string that came from the ledger goes through ``display.safe``; nothing here is
interpreted as markup. The HTML document is ``report_html``; machine output is
``VerifyReport.to_json()``, never this.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text
from rich.tree import Tree

from agentledger.checks import RULE, explain
from agentledger.display import plural, safe
from agentledger.verify import Divergence, RunVerdict, VerifyReport, status_name

MAX_RUN_TREES = 50
"""Failing runs drawn in the terminal; the HTML report and --json hold every one."""
STATUS_STYLE = {
    "clean": "green",
    "diverged": "bold red",
    "missing": "yellow",
    "no-verdict": "yellow",
}
EXPECTED_STYLE = ""  # neutral: what the anchored record says must be there
ACTUAL_STYLE = "red"  # what the file holds now
LABEL_WIDTH = 10


def _field(label: str, *parts: str | tuple[str, str]) -> Text:
    return Text.assemble((f"{label:<{LABEL_WIDTH}}", "dim"), " ", *parts)


def checkpoint_text(report: VerifyReport) -> list[str | tuple[str, str]]:
    found = report.checkpoint
    if found is None:
        return [("none: ", "yellow"), safe(report.checkpoint_reason or "not checked")]
    signer: str | tuple[str, str] = (
        f"signed by {found.trusted_signer}"
        if found.trusted_signer
        else ("signed by no trusted key", "bold red")
    )
    names = ", ".join(safe(name) for name in found.signers) or "none"
    return [
        f"#{found.id}: {plural(found.size, 'entry', 'entries')}, root {found.root}, ",
        signer,
        f" (signature names: {names}" + (f"; {safe(found.time)})" if found.time else ")"),
    ]


def header(report: VerifyReport) -> Group:
    """What was verified: ledger, version, time, trusted keys, the checkpoint matched."""
    lines = [
        _field(
            "ledger",
            safe(report.ledger_path or "-"),
            (f"  id {safe(report.ledger_id or '-')}", "dim"),
        ),
        _field(
            "verified",
            f"{report.verified_at or '-'} by agentledger {report.version or '?'}",
        ),
    ]
    if not report.trusted_keys:
        lines.append(_field("trusted", ("no keys", "yellow")))
    for n, key in enumerate(report.trusted_keys):
        lines.append(
            _field("trusted" if n == 0 else "", safe(key.key), (f"  {safe(key.source)}", "dim"))
        )
    lines.append(_field("checkpoint", *checkpoint_text(report)))
    return Group(*lines)


def summary(report: VerifyReport) -> Group:
    """The counts, as words that wrap only between numbers (a number is never cut)."""
    diverged = len(report.diverged_runs)
    missing = report.missing_runs
    no_verdict = report.no_verdict_runs
    rate = f"{report.entries / report.elapsed_s:,.0f} entries/s" if report.elapsed_s else ""
    counts = Text.assemble(
        (plural(len(report.runs), "run"), "bold"),
        "  ",
        plural(report.entries, "entry", "entries"),
        "  ",
        (f"{report.clean_runs:,} clean", "green"),
        "  ",
        (f"{diverged:,} diverged", "bold red" if diverged else ""),
        "  ",
        (f"{missing:,} missing", "yellow" if missing else ""),
        "  ",
        # Runs that exist but get no verdict (bernstein answers 1 for a run with no activity).
        (f"{no_verdict:,} without a verdict  " if no_verdict else "", "yellow"),
        f"{plural(report.blobs_checked, 'blob')} re-hashed",
        "  ",
        f"{report.elapsed_s:.2f}s",
        "  ",
        rate,
    )
    parts: list[RenderableType] = [counts]
    by_check = report.findings_by_check()
    if by_check:
        parts.append(Text(f"{plural(report.findings, 'finding')} by check:", style="bold"))
        width = max(len(check) for check in by_check)
        for check, row in by_check.items():
            where = []
            if row["runs"]:
                where.append(plural(row["runs"], "run"))
            if row["workspace"]:
                where.append("workspace")
            parts.append(
                Text.assemble(
                    "  ",
                    (f"{safe(check):<{width}}", "bold"),
                    f"  {', '.join(where)}",
                    (f"  ({plural(row['findings'], 'finding')})", "dim"),
                )
            )
        if report.findings_not_kept:
            parts.append(Text("  " + report.not_kept_words(), style="dim"))
    return Group(*parts)


def shown_side(value: str) -> str:
    """An expected or actual value as printed: the empty string (a genesis ``prev_hash``,
    a field stored empty) as ``""``, so that it does not read as a value left out."""
    return '""' if value == "" else safe(value)


def finding_sides(node: Tree, divergence: Divergence, holds: bool = True) -> None:
    """Under a finding: its expected, its actual (and, with ``holds``, what an edited entry
    holds): the terminal report's lines, which ``show`` draws under a step's mark too."""
    node.add(Text.assemble(("expected ", "dim"), (shown_side(divergence.expected), EXPECTED_STYLE)))
    node.add(Text.assemble(("actual   ", "dim"), (shown_side(divergence.actual), ACTUAL_STYLE)))
    if holds and divergence.detail:
        node.add(Text.assemble(("holds    ", "dim"), (safe(divergence.detail), ACTUAL_STYLE)))


def _finding_label(divergence: Divergence, where: str | None) -> Text:
    text = Text()
    if where:
        text.append(where + "  ", style="cyan")
    text.append(safe(divergence.check), style="bold")
    words = divergence.says
    if divergence.subject and (words is None or divergence.subject not in words):
        text.append(f"  {safe(divergence.subject)}", style="dim")
    if words is not None:
        text.append(f"  {safe(words)}")
    return text


def run_tree(verdict: RunVerdict, status: str | None = None) -> Tree:
    """run → step and check → expected, actual (and what an edited entry holds);
    ``status`` is the report's (``VerifyReport.status_of``)."""
    status = status or status_name(verdict.code)
    label = Text.assemble(
        ("run ", "dim"),
        (safe(verdict.run_id), "bold"),
        "  ",
        (status, STATUS_STYLE.get(status, "")),
        (
            f"  {plural(verdict.divergence_count, 'finding')}, "
            f"{plural(verdict.entries, 'entry', 'entries')}",
            "dim",
        ),
    )
    tree = Tree(label)
    if verdict.code == 1:
        tree.add(Text(safe(verdict.not_found or "no such run in this ledger"), style="yellow"))
        return tree
    by_step: dict[int | None, list[Divergence]] = defaultdict(list)
    for divergence in verdict.divergences:
        by_step[divergence.seq].append(divergence)
    for seq in sorted(by_step, key=lambda s: (s is not None, s or 0)):
        where = "run" if seq is None else f"step {seq}"
        for divergence in by_step[seq]:
            finding_sides(tree.add(_finding_label(divergence, where)), divergence)
    hidden = verdict.divergence_count - len(verdict.divergences)
    if hidden > 0:
        tree.add(Text(f"… and {hidden:,} more (counted, not kept)", style="dim"))
    return tree


def workspace_tree(report: VerifyReport) -> Tree:
    tree = Tree(Text.assemble(("workspace", "bold red"), (f"  {len(report.workspace):,}", "dim")))
    for divergence in report.workspace:
        where = None
        if divergence.run_id is not None:
            where = f"run {safe(divergence.run_id)}"
            if divergence.seq is not None:
                where += f" step {divergence.seq}"
        finding_sides(tree.add(_finding_label(divergence, where)), divergence)
    return tree


def explanations(report: VerifyReport) -> Group:
    """What each check that found something means, and the one rule for both sides."""
    lines: list[RenderableType] = [Text("what the checks mean", style="bold")]
    for check in report.findings_by_check():
        info = explain(check)
        lines.append(Text.assemble("  ", (safe(check), "bold"), "  ", info.means))
    lines.append(Text(f"  ({RULE})", style="dim"))
    return Group(*lines)


def report_renderable(report: VerifyReport) -> RenderableType:
    parts: list[RenderableType] = [header(report), Text(""), summary(report)]
    if report.workspace:
        parts.append(workspace_tree(report))
    failing = [run for run in report.runs if not run.ok]
    statuses = report.statuses() if failing else {}
    for verdict in failing[:MAX_RUN_TREES]:
        parts.append(run_tree(verdict, statuses[verdict.run_id]))
    if len(failing) > MAX_RUN_TREES:
        parts.append(
            Text(
                f"… {len(failing) - MAX_RUN_TREES:,} more failing runs: "
                "every one is in --html FILE and --json"
            )
        )
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
        parts.append(Text(f"note: {safe(note)}", style="yellow"))
    if report.findings_by_check():
        parts.append(explanations(report))
    parts.append(verdict_line(report))
    return Group(*parts)


def verdict_line(report: VerifyReport) -> Text:
    name = report.verdict  # no-verdict when every run exists: the verifier answers 1
    text = Text.assemble(("verdict: ", "bold"), (name, STATUS_STYLE.get(name, "")))
    if report.findings:
        diverged = report.diverged_runs
        text.append(
            f" — {plural(report.findings, 'finding')}"
            + (f" in {plural(len(diverged), 'run')}" if diverged else "")
            + ((" and" if diverged else " in") + " the workspace" if report.workspace else "")
        )
    text.append(f" (covers {safe(report.scope)})", style="dim")
    return text


def write_html(report: VerifyReport, path: Path) -> None:
    """The report as a standalone HTML document (``report_html``)."""
    from agentledger.report_html import render_html  # only `--html` pays for it

    path.write_text(render_html(report), encoding="utf-8")


__all__ = [
    "MAX_RUN_TREES",
    "finding_sides",
    "report_renderable",
    "run_tree",
    "verdict_line",
    "workspace_tree",
    "write_html",
]
