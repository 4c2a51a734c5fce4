"""`verify` (bulk) and `activity verify` (one run, in full)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from agentledger import run_status
from agentledger.cli import arguments
from agentledger.cli.app import cli
from agentledger.cli.context import AppContext, F, emit_json, json_option, width_option
from agentledger.display import human_console, safe
from agentledger.errors import ExitCode
from agentledger.ledger import Ledger
from agentledger.report import report_renderable, write_html
from agentledger.verify import Progress as ProgressCallback
from agentledger.verify import VerifyOptions, VerifyReport


@contextmanager
def progress_bar(app: AppContext, total: int) -> Iterator[ProgressCallback | None]:
    """A live bar on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    columns = (
        TextColumn("verifying"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=app.err_console, transient=True) as progress:
        task = progress.add_task("verify", total=total)
        yield lambda n: progress.advance(task, n)


def run_verify(
    app: AppContext,
    ledger: Ledger,
    run_ids: list[str] | None,
    options: VerifyOptions | None = None,
) -> VerifyReport:
    total = ledger.db.scalar("SELECT coalesce(sum(head_seq + 1), 0) FROM runs")
    with progress_bar(app, int(total or 0)) as progress:
        return ledger.verify(run_ids, progress=progress, options=options)


def verify_options(command: F) -> F:
    """The options every verifying command shares (keys come from outside the ledger)."""
    decorators = [
        click.option(
            "--trust",
            "trust",
            multiple=True,
            metavar="KEY",
            help="Trust this signer: 'ed25519:<64 hex>' or a file holding it (repeatable).",
        ),
        click.option(
            "--audit-key",
            "audit_key_file",
            type=click.Path(dir_okay=False, path_type=Path),
            help="The audit HMAC key file, to cross-check the audit mirror.",
        ),
        click.option(
            "--compat",
            type=click.Choice(["bernstein"]),
            help="Reproduce another tool's verdict for imported runs.",
        ),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


JOBS_PER_CORE = 4


def capped_jobs(app: AppContext, jobs: int) -> int:
    """At most 4 threads per core: more only queue on the same cores (and cost memory)."""
    limit = JOBS_PER_CORE * (os.cpu_count() or 1)
    if jobs > limit:
        app.err_console.print(
            f"note: --jobs {jobs} capped to {limit} ({JOBS_PER_CORE}x the {limit // JOBS_PER_CORE}"
            " cores)",
            style="yellow",
        )
        return limit
    return jobs


def finish(
    app: AppContext,
    report: VerifyReport,
    as_json: bool,
    html: Path | None,
    width: int | None = None,
) -> int:
    if html is not None:
        write_html(report, html)
    if as_json:
        emit_json(report.to_json())
    else:
        human_console(width=width).print(report_renderable(report))
        if html is not None:
            app.err_console.print(Text(f"HTML report written to {safe(str(html))}"))
    return int(report.code)


@cli.command()
@click.argument("run_ids", metavar="[RUN]...", nargs=-1)
@click.option("--all", "all_runs", is_flag=True, help="Verify every run (the default).")
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Verification threads (0: every core; at most 4x the cores).",
)
@click.option(
    "--html",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Also write the report as a standalone HTML file.",
)
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An exported checkpoint the ledger must extend (detects a rolled-back file).",
)
@click.option(
    "--incremental", is_flag=True, help="Re-check only what the last checkpoint does not cover."
)
@verify_options
@width_option
@json_option
@click.pass_obj
def verify(
    app: AppContext,
    run_ids: tuple[str, ...],
    all_runs: bool,
    jobs: int,
    html: Path | None,
    checkpoint_file: Path | None,
    incremental: bool,
    trust: tuple[str, ...],
    audit_key_file: Path | None,
    compat: str | None,
    width: int | None,
    as_json: bool,
) -> int:
    """Bulk-verify runs: chains, entry bytes, evidence sets, blobs.

    \b
    Exit 0 when everything re-derives, 1 when a named run does not exist,
    2 when anything diverged (the report names run, step, check, expected, actual).

    \b
    Examples:
      agentledger verify --all --jobs 2
      agentledger verify run-1 run-2 --json > report.json
      agentledger verify --checkpoint cp.txt --trust ed25519:3b6a… --html report.html
    """
    if run_ids and all_runs:
        raise click.UsageError("give RUN ids or --all, not both")
    # Every file argument is checked before any work starts (exit 64, the path named).
    if html is not None:
        arguments.output_file(html, "--html")
    options = VerifyOptions(
        jobs=capped_jobs(app, jobs),
        trust=arguments.trust_values(trust),
        audit_key_file=arguments.audit_key_file(audit_key_file),
        compat=compat,
        checkpoint_file=arguments.checkpoint_file(checkpoint_file),
        incremental=incremental,
    )
    with app.open_ledger(readonly=True) as ledger:
        before = run_status.heads(ledger)
        report = run_verify(app, ledger, list(run_ids) or None, options)
        note = run_status.remember(
            ledger, report, f"compat-{compat}" if compat else "strict", before
        )
    if note:
        app.err_console.print(note, style="yellow")
    return finish(app, report, as_json, html, width)


@cli.group()
def activity() -> None:
    """Activities recorded in runs."""


@activity.command("verify")
@click.argument("run_id", metavar="RUN")
@verify_options
@json_option
@click.pass_obj
def activity_verify(
    app: AppContext,
    run_id: str,
    trust: tuple[str, ...],
    audit_key_file: Path | None,
    compat: str | None,
    as_json: bool,
) -> int:
    """Reconstruct one run in full: chain, evidence sets, reattached blobs.

    Exit 0 clean, 1 no such run (or no activity in it), 2 diverged.

    \b
    Examples:
      agentledger activity verify run-7
      agentledger activity verify run-001 --compat bernstein --json
    """
    options = VerifyOptions(
        trust=arguments.trust_values(trust),
        audit_key_file=arguments.audit_key_file(audit_key_file),
        compat=compat,
    )
    with app.open_ledger(readonly=True) as ledger:
        report = run_verify(app, ledger, [run_id], options)
    verdict = report.runs[0]
    if verdict.ok and verdict.activities == 0:
        if as_json:
            emit_json(
                {**report.to_json(), "code": int(ExitCode.NOT_FOUND), "status": "no-activity"}
            )
        else:
            app.console.print(f"run {run_id}: no activity results to verify", style="yellow")
        return int(ExitCode.NOT_FOUND)
    return finish(app, report, as_json, None)
