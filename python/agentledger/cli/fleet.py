"""`fleet verify`: many ledger files, one Dask cluster, one report.

Dask (the optional extra ``agentledger[fleet]``) is imported only when the command runs:
the rest of the command line never loads it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from agentledger.cli import arguments
from agentledger.cli.common import capped_jobs, html_option
from agentledger.cli.context import AppContext, AppGroup, emit_json, json_option, width_option
from agentledger.display import safe
from agentledger.fleet.inputs import (
    FleetArgumentError,
    expand_paths,
    read_checkpoints,
    read_signer_memory,
)
from agentledger.fleet.report import fleet_renderable, human_bytes, write_fleet_html
from agentledger.fleet.summary import FleetReport, LedgerSummary
from agentledger.fleet.task import FleetJob
from agentledger.keys import KeyStore, resolve_trust

if TYPE_CHECKING:
    from agentledger.fleet.cluster import OnResult


@click.group(cls=AppGroup)
def fleet() -> None:
    """Many ledgers at once, spread over a Dask cluster (needs agentledger[fleet]).

    \b
    Examples:
      agentledger fleet verify ci-ledgers/ review/archive.db --workers 2
      agentledger fleet verify --from ledgers.txt --json
    """


@contextmanager
def live_progress(app: AppContext, total: int) -> Iterator[OnResult | None]:
    """Files done, bytes/s and failures so far, on stderr, only when it is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    columns = (
        TextColumn("verifying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TextColumn("{task.fields[failures]}"),
    )
    started = time.perf_counter()
    read = 0
    failures = 0
    with Progress(*columns, console=app.err_console, transient=True) as progress:
        task = progress.add_task("fleet", total=total, rate="", failures="")

        def on_result(summary: LedgerSummary, report: FleetReport) -> None:
            nonlocal read, failures
            read += summary.bytes_read
            failures += 0 if summary.ok else 1
            elapsed = time.perf_counter() - started
            lost = f", {report.workers_lost} worker(s) lost" if report.workers_lost else ""
            progress.update(
                task,
                advance=1,
                rate=f"{human_bytes(read / elapsed if elapsed else 0)}/s",
                failures=f"[red]{failures} failing[/]{lost}" if failures else lost,
            )

        yield on_result


@fleet.command("verify")
@click.argument("paths", metavar="[PATH]...", nargs=-1)
@click.option(
    "--from",
    "lists",
    multiple=True,
    metavar="FILE",
    type=click.Path(path_type=Path),
    help="A text file listing ledger files or folders, one a line (# comments; relative "
    "to its folder). Repeatable. A PATH is never read as a list.",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="A running Dask scheduler (tcp://host:port); default: start a local cluster.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Worker processes of the local cluster (default: one per core; at most 4x the cores).",
)
@click.option(
    "--trust",
    multiple=True,
    metavar="KEY",
    help="Trust this signer on every worker: 'ed25519:<64 hex>' or a file holding it "
    "(repeatable; this install's trusted keys are included).",
)
@click.option(
    "--checkpoints",
    "checkpoints_dir",
    type=click.Path(path_type=Path),
    help="A folder of exported checkpoints: each ledger must extend its own.",
)
@html_option
@click.option(
    "--worker-timeout",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds to wait for the cluster's first worker.",
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to wait for --scheduler.",
)
@width_option
@json_option
@click.pass_obj
def fleet_verify(
    app: AppContext,
    paths: tuple[str, ...],
    lists: tuple[Path, ...],
    scheduler: str | None,
    workers: int | None,
    trust: tuple[str, ...],
    checkpoints_dir: Path | None,
    html: Path | None,
    worker_timeout: float,
    connect_timeout: float,
    width: int | None,
    as_json: bool,
) -> int:
    """Verify every ledger file in PATHs on a Dask cluster; one report.

    \b
    A PATH is a ledger file or archive, or a folder (searched for ledgers); --from FILE
    lists more. Every file is reported, one that cannot be read as unreadable. Workers
    read the files themselves: every path must mean the same file on every worker
    (shared storage).
    Exit 0 when every file is clean, 2 when any diverged or is unreadable, 64 on bad
    arguments (including a scheduler that cannot be reached).

    \b
    Examples:
      agentledger fleet verify ci-ledgers/ review/archive.db --workers 2
      agentledger fleet verify --from ledgers.txt --scheduler tcp://10.0.0.2:8786 --json
      agentledger fleet verify /shared/ws --checkpoints /shared/cps --html fleet.html
    """
    if scheduler is not None and workers is not None:
        raise click.UsageError("--workers sizes the local cluster: not with --scheduler")
    if not paths and not lists:
        raise click.UsageError("nothing to verify: give a PATH or --from FILE")
    # Every file argument is checked before any work starts (exit 64, the path named).
    arguments.trust_values(trust)
    if html is not None:
        arguments.output_file(html, "--html", key_home=app.key_home)
    if checkpoints_dir is not None:
        arguments.input_folder(checkpoints_dir, "--checkpoints")
    for listing in lists:
        arguments.input_file(listing, "--from")
    files = expand_paths(paths, lists)
    notes: list[str] = []
    checkpoints: dict[str, str] | None = None
    if checkpoints_dir is not None:
        checkpoints, skipped = read_checkpoints(checkpoints_dir)
        if skipped:
            notes.append(
                f"--checkpoints: skipped {len(skipped)} file(s) that are not checkpoints: "
                + ", ".join(skipped[:5])
                + (" …" if len(skipped) > 5 else "")
            )
    try:
        from agentledger.fleet import cluster
    except ImportError as exc:
        raise FleetArgumentError(
            f"fleet needs Dask distributed ({exc.name} is not installed): "
            "pip install 'agentledger[fleet]'",
            code="no-dask",
        ) from None
    # Trust is decided here, once: workers trust exactly these keys, and nothing of their own.
    # So is what this install signed and verified: a worker judges a rollback as it would.
    store = KeyStore(app.key_dir)
    trusted = tuple(sorted(resolve_trust(trust, store)))
    job = FleetJob(trust=trusted, checkpoints=checkpoints, memory=read_signer_memory(store.home))
    options = cluster.ClusterOptions(
        scheduler=scheduler,
        workers=None if workers is None else capped_jobs(app, workers, "--workers"),
        connect_timeout=connect_timeout,
        worker_timeout=worker_timeout,
    )
    with live_progress(app, len(files)) as on_result:
        report = cluster.verify_fleet(files, job, options, on_result)
    report.notes.extend(notes)
    report.trusted = list(trusted)
    if checkpoints is not None:
        matched = {ledger.ledger_id for ledger in report.ledgers}
        unmatched = sorted(key for key in checkpoints if key.partition("/")[0] not in matched)
        if unmatched:
            report.notes.append(
                f"--checkpoints: {len(unmatched)} checkpoint(s) of ledgers not among the "
                "files: " + ", ".join(unmatched[:5]) + (" …" if len(unmatched) > 5 else "")
            )
    with_notes = sum(1 for ledger in report.ledgers if ledger.notes)
    if with_notes:
        report.notes.append(f"{with_notes} file(s) have verify notes (see --json)")
    if html is not None:
        write_fleet_html(report, html)
    if as_json:
        emit_json(report.to_json())
    else:
        console = app.human_console(width)
        if app.no_color:
            console.no_color = True
        console.print(fleet_renderable(report))
        if html is not None:
            app.err_console.print(Text(f"HTML report written to {safe(str(html))}"))
    return int(report.code)
