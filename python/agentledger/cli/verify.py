"""`verify`: bulk verification, its terminal, JSON and HTML reports."""

from __future__ import annotations

from pathlib import Path

import click

from agentledger import run_status
from agentledger.cli import arguments
from agentledger.cli.common import capped_jobs, finish, html_option, run_verify, verify_options
from agentledger.cli.context import AppCommand, AppContext, json_option, width_option
from agentledger.ids import check_run_id
from agentledger.verify import VerifyOptions


@click.command(cls=AppCommand)
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
@html_option
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An exported checkpoint the ledger must extend (detects a rolled-back file).",
)
@click.option(
    "--incremental", is_flag=True, help="Re-check only what the last checkpoint does not cover."
)
@click.option(
    "--tsa-bundle",
    "tsa_bundle_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trusted TSA certificates (PEM): authenticate imported bernstein RFC 3161 anchors.",
)
@click.option(
    "--witness-state",
    "witness_state_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="A bernstein witness's own state folder: hold imported audit history to its pins.",
)
@click.option(
    "--recheck-signatures",
    is_flag=True,
    help="Verify every signature in full, even those this install accepted before.",
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
    tsa_bundle_file: Path | None,
    witness_state_dir: Path | None,
    recheck_signatures: bool,
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
    for run_id in run_ids:
        check_run_id(run_id)  # as show and prove: a malformed id is invalid input (65)
    if run_ids and all_runs:
        raise click.UsageError("give RUN ids or --all, not both")
    # Every file argument is checked before any work starts (exit 64, the path named).
    if html is not None:
        arguments.output_file(html, "--html", key_home=app.key_home)
    if witness_state_dir is not None:
        if compat:
            raise click.UsageError(
                "--witness-state is read by the strict verdict: --compat bernstein gives "
                "bernstein's activity verify, which reads no audit history"
            )
        arguments.input_folder(witness_state_dir, "--witness-state")
    options = VerifyOptions(
        jobs=capped_jobs(app, jobs),
        trust=arguments.trust_values(trust),
        audit_key_file=arguments.audit_key_file(audit_key_file),
        compat=compat,
        checkpoint_file=arguments.checkpoint_file(checkpoint_file),
        incremental=incremental,
        tsa_bundle_file=None if arguments.tsa_bundle(tsa_bundle_file) is None else tsa_bundle_file,
        witness_state_dir=witness_state_dir,
        recheck_signatures=recheck_signatures,
    )
    with app.open_ledger(readonly=True) as ledger:
        # A file whose schema is not ours is read no further than verify's finding.
        before = (
            run_status.Before({}, None) if ledger.db.schema_findings else run_status.before(ledger)
        )
        report = run_verify(app, ledger, list(run_ids) or None, options)
        note = run_status.remember(
            ledger, report, f"compat-{compat}" if compat else "strict", before
        )
    if note:
        app.err_console.print(note, style="yellow")
    return finish(app, report, as_json, html, width)
