"""The fleet report for people: totals, findings by check, the worst files first.

Rendered with rich for the terminal like the single-workspace report (report.py); the HTML
document is ``fleet/report_html.py``, in the style of ``report_html.py``. Machine output is
``FleetReport.to_json()``.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agentledger.fleet.summary import CLEAN, DIVERGED, UNREADABLE, FleetReport, LedgerSummary

MAX_WORST = 25
STATUS_STYLE = {CLEAN: "green", DIVERGED: "bold red", UNREADABLE: "bold yellow"}


def human_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1000
    return f"{count:,.1f} TB"  # pragma: no cover


def shown_path(path: str) -> str:
    """A path under the current folder is shown relative to it (the JSON keeps it whole)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def summary_table(report: FleetReport) -> Table:
    table = Table(title="Fleet verification", title_justify="left", show_edge=False)
    columns = ("files", "clean", "diverged", "unreadable", "runs", "entries", "read", "time")
    for column in (*columns, "files/s"):
        table.add_column(column, justify="right")
    elapsed = report.elapsed_s
    diverged, unreadable = report.count(DIVERGED), report.count(UNREADABLE)
    table.add_row(
        f"{len(report.ledgers):,}",
        Text(f"{report.count(CLEAN):,}", style="green"),
        Text(f"{diverged:,}", style="red" if diverged else ""),
        Text(f"{unreadable:,}", style="yellow" if unreadable else ""),
        f"{sum(ledger.runs for ledger in report.ledgers):,}",
        f"{report.entries:,}",
        human_bytes(report.bytes_read),
        f"{elapsed:.2f}s",
        f"{len(report.ledgers) / elapsed:,.1f}" if elapsed else "-",
    )
    return table


def checks_table(report: FleetReport) -> Table | None:
    totals = report.by_check()
    if not totals:
        return None
    table = Table(title="Findings by check", title_justify="left", show_edge=False)
    table.add_column("check")
    table.add_column("findings", justify="right")
    table.add_column("files", justify="right")
    for check, count in totals.items():
        files = sum(1 for ledger in report.ledgers if check in ledger.checks)
        table.add_row(Text(check), f"{count:,}", f"{files:,}")
    return table


def _what(ledger: LedgerSummary) -> Text:
    if ledger.error is not None:
        return Text(f"{ledger.error_code}: {ledger.error}", style="yellow")
    if not ledger.findings:
        return Text("")
    first = ledger.findings[0]
    where = " ".join(
        part
        for part in (
            f"run {first['run']}" if first.get("run") else "",
            f"step {first['seq']}" if first.get("seq") is not None else "",
            f"[{first['subject']}]" if first.get("subject") else "",
        )
        if part
    )
    text = Text()
    text.append(str(first["check"]), style="bold")
    if where:
        text.append(f" {where}", style="dim")
    text.append(": expected ")
    text.append(str(first["expected"]), style="green")
    text.append(", actual ")
    text.append(str(first["actual"]), style="red")
    return text


def worst_table(report: FleetReport) -> Table | None:
    failing = [ledger for ledger in report.worst_first() if not ledger.ok]
    if not failing:
        return None
    table = Table(title="Worst files first", title_justify="left", show_edge=False)
    for column in ("file", "status", "ledger", "findings", "first finding / error"):
        table.add_column(column, justify="right" if column == "findings" else "left")
    for ledger in failing[:MAX_WORST]:
        # Paths and ids are the files' (and the worker's) strings: Text, never markup.
        table.add_row(
            Text(shown_path(ledger.path)),
            Text(ledger.status, style=STATUS_STYLE[ledger.status]),
            Text((ledger.ledger_id or "-")[:12]),
            f"{ledger.divergences:,}",
            _what(ledger),
        )
    if len(failing) > MAX_WORST:
        table.caption = f"… {len(failing) - MAX_WORST} more failing files (see --json)"
    return table


def cluster_line(report: FleetReport) -> Text:
    where = "a local cluster" if report.local_cluster else f"the cluster at {report.scheduler}"
    text = Text(f"{len(report.ledgers):,} of {report.inputs:,} files have a verdict", style="dim")
    if report.lost == 0:
        text.append(" (nothing lost)", style="dim")
    else:
        text.append(f" ({report.lost:,} lost)", style="bold red")
    text.append(f", on {where} of {report.workers} worker(s)", style="dim")
    if report.workers_lost:
        text.append(
            f"; {report.workers_lost} worker(s) lost while tasks ran, their tasks rerun elsewhere",
            style="yellow",
        )
    return text


def fleet_renderable(report: FleetReport) -> RenderableType:
    parts: list[RenderableType] = [summary_table(report)]
    checks = checks_table(report)
    if checks is not None:
        parts.append(checks)
        if report.findings_not_kept:
            parts.append(Text(report.not_kept_words(), style="dim"))
    worst = worst_table(report)
    if worst is not None:
        parts.append(worst)
    parts.append(cluster_line(report))
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="yellow"))  # Text: a note may name a file
    verdict = CLEAN if report.code == 0 else DIVERGED
    parts.append(Text(f"verdict: {verdict}", style=STATUS_STYLE[verdict]))
    return Group(*parts)


def write_fleet_html(report: FleetReport, path: Path) -> None:
    """The report as a standalone HTML document, in the workspace report's style."""
    from agentledger.fleet.report_html import render_fleet_html  # only `--html` pays for it

    path.write_text(render_fleet_html(report), encoding="utf-8")
