"""`demo`: build a workspace, corrupt a few runs on purpose, and show the report that finds them."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import click
from rich.text import Text

from agentledger import run_status
from agentledger.cli import arguments
from agentledger.cli.common import run_verify
from agentledger.cli.context import AppCommand, AppContext, emit_json, json_option
from agentledger.demo import (
    ENTRIES_PER_RUN,
    MIN_RUNS,
    build_workspace,
    found_exactly,
    plant_corruptions,
)
from agentledger.display import safe
from agentledger.errors import BadArgument, ExitCode
from agentledger.keys import KeyStore
from agentledger.ledger import Ledger
from agentledger.report import report_renderable, write_html
from agentledger.sqlite_files import companions


def _remove(path: Path) -> None:
    for leftover in (path, *companions(path)):
        leftover.unlink(missing_ok=True)


@click.command(cls=AppCommand)
@click.option(
    "--runs", type=click.IntRange(min=MIN_RUNS, max=1_000_000), default=3000, show_default=True
)
@json_option
@click.pass_obj
def demo(app: AppContext, runs: int, as_json: bool) -> int:
    """Build a demo ledger at --ledger, corrupt five things in it, and bulk-verify it.

    The ledger is built in a temporary file next to --ledger and moved into place only
    when complete: a failure or Ctrl-C leaves nothing behind. Exits 0 when verify finds
    exactly the planted corruptions and nothing else; 64 when --ledger already exists.
    The report is also written as report.html next to the ledger.

    \b
    Examples:
      agentledger --ledger demo/ledger.db demo
      agentledger --ledger /tmp/small.db demo --runs 10 --json
      agentledger --ledger demo/ledger.db demo && agentledger --ledger demo/ledger.db runs
    """
    target = app.ledger_path
    if target.exists():
        raise BadArgument(
            f"--ledger {target} already exists; the demo writes a fresh ledger "
            "(choose another --ledger or remove it)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    arguments.output_file(target, "--ledger", key_home=app.key_home, may_exist=False)
    note = app.err_console.print
    started = time.perf_counter()
    keys = KeyStore(app.key_dir) if app.key_dir is not None else KeyStore()
    note(f"signing key of this demo: {safe(str(keys.home))} (--home or AGENTLEDGER_HOME)")
    fd, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".building", dir=target.parent
    )
    os.close(fd)
    os.unlink(temporary)  # Ledger.open creates it 0600 itself
    building = Path(temporary)
    try:
        with Ledger.open(building, key_dir=app.key_dir) as ledger:
            build_workspace(ledger, runs)
            built = time.perf_counter() - started
            note(f"built {runs:,} runs × {ENTRIES_PER_RUN} entries in {built:.1f}s")
            planted = plant_corruptions(ledger)
        os.replace(building, target)  # complete: now it is the ledger at --ledger
    except BaseException:
        _remove(building)
        raise
    for corruption in planted:
        note(f"  planted: {corruption.run_id or 'workspace'}: {corruption.how}")
    with app.open_ledger(readonly=True) as ledger:
        note(f"verifying {ledger.path}")
        before = run_status.before(ledger)
        report = run_verify(app, ledger, None)
        # `agentledger runs` then shows what this verify found (run_status.py).
        recorded = run_status.remember(ledger, report, "strict", before)
    if recorded:
        note(recorded, style="yellow")
    failing: set[str | None] = {run.run_id for run in report.runs if not run.ok}
    if report.workspace:
        failing.add(None)
    exact = found_exactly(failing, planted)
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
