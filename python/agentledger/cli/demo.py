"""`demo`: build a workspace, corrupt a few runs on purpose, and show the report that finds them."""

from __future__ import annotations

import time

import click
from rich.text import Text

from agentledger.cli.app import cli
from agentledger.cli.context import AppContext, emit_json, json_option
from agentledger.cli.verify import run_verify
from agentledger.demo import ENTRIES_PER_RUN, build_workspace, plant_corruptions
from agentledger.display import safe
from agentledger.errors import ExitCode, InvalidInput
from agentledger.report import report_renderable, write_html


@cli.command()
@click.option("--runs", type=click.IntRange(min=10), default=3000, show_default=True)
@json_option
@click.pass_obj
def demo(app: AppContext, runs: int, as_json: bool) -> int:
    """Build a demo ledger at --ledger, corrupt five things in it, and bulk-verify it.

    Exits 0 when verify finds exactly the planted corruptions and nothing else.
    """
    if app.ledger_path.exists():
        raise InvalidInput(
            f"{app.ledger_path} already exists; the demo writes a fresh ledger "
            "(choose another --ledger or remove it)",
            code="exists",
        )
    note = app.err_console.print
    started = time.perf_counter()
    with app.open_ledger(create=True) as ledger:
        build_workspace(ledger, runs)
        built = time.perf_counter() - started
        note(f"built {runs:,} runs × {ENTRIES_PER_RUN} entries in {built:.1f}s at {ledger.path}")
        planted = plant_corruptions(ledger)
        for corruption in planted:
            note(f"  planted: {corruption.run_id or 'workspace'}: {corruption.how}")
        report = run_verify(app, ledger, None)
    failing = {run.run_id for run in report.runs if not run.ok}
    if report.workspace:
        failing.add(None)  # type: ignore[arg-type]
    expected = {c.run_id for c in planted}
    exact = failing == expected
    html = app.ledger_path.parent / "report.html"
    write_html(report, html)
    if as_json:
        emit_json(
            {
                "report": report.to_json(),
                "planted": [c.__dict__ for c in planted],
                "found_exactly": exact,
                "html": str(html),
            }
        )
    else:
        app.console.print(report_renderable(report))
        by_check = ", ".join(
            f"{check} {row['runs'] or 'workspace'}"
            for check, row in report.findings_by_check().items()
        )
        findings = (
            f"{report.findings:,} findings in {len(report.diverged_runs):,} runs"
            + (" and the workspace" if report.workspace else "")
            + f" ({by_check})"
        )
        if exact:
            app.console.print(
                Text(
                    f"verify found exactly the {len(planted)} planted corruptions: {findings}.",
                    style="bold green",
                )
            )
        else:
            app.console.print(
                Text(
                    f"verify's findings differ from what was planted: {findings}", style="bold red"
                )
            )
        app.console.print(Text(f"HTML report: {safe(str(html))}", style="bold"))
    return int(ExitCode.OK if exact else ExitCode.DIVERGED)
