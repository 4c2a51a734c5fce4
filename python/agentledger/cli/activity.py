"""`agentledger activity record|research|browser|data|ops`: cross the boundary from a shell;
`agentledger activity verify`: reconstruct one run in full.

Each command records one stage through the same boundary as the Python API (validation,
redundancy refusal, pinning, audit mirror) and prints the pinned entry. A refusal exits 65
with its code (``error [redundant-evidence]: ...``); nothing is written except a recorded
redundancy refusal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from agentledger.activity import ActivityResult, Observation
from agentledger.activity.modalities import ActivitySession, DataOpsActivity
from agentledger.activity.result import check_outcome, check_role, check_stage_id
from agentledger.cli import arguments
from agentledger.cli.common import finish, read_json_document, run_verify, verify_options
from agentledger.cli.console import styled
from agentledger.cli.context import AppContext, AppGroup, F, emit_json, json_option
from agentledger.errors import ExitCode, InvalidInput
from agentledger.ids import check_run_id
from agentledger.journal import Entry, Run
from agentledger.limits import MAX_EVIDENCE_BYTES, read_capped
from agentledger.verify import VerifyOptions


@click.group(cls=AppGroup)
def activity() -> None:
    """Activities recorded in runs.

    \b
    Examples:
      agentledger activity research run-7 research-0 --page https://example.org=page.html
      agentledger activity record run-7 coding-0 result.json --evidence diff.patch
      agentledger activity verify run-7 --json
    """


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
    check_run_id(run_id)
    options = VerifyOptions(
        trust=arguments.trust_values(trust),
        audit_key_file=arguments.audit_key_file(audit_key_file),
        compat=compat,
    )
    with app.open_ledger(readonly=True) as ledger:
        report = run_verify(app, ledger, [run_id], options)
    verdict = report.runs[0]
    # Nothing to verify only when nothing diverged: a finding of the ledger the run is
    # proven in (an edited checkpoint) exits 2, as `verify RUN` and `show RUN` do.
    if report.code == ExitCode.OK and verdict.activities == 0:
        if as_json:
            emit_json(
                {**report.to_json(), "code": int(ExitCode.NOT_FOUND), "status": "no-activity"}
            )
        else:
            app.console.print(f"run {run_id}: no activity results to verify", style="yellow")
        return int(ExitCode.NOT_FOUND)
    return finish(app, report, as_json, None)


def _read(path: str) -> bytes:
    """An evidence file's bytes, at most ``MAX_EVIDENCE_BYTES`` (``/dev/zero`` as a page
    filled memory, exit 70). A file named ``-`` is that file, never stdin."""
    return read_capped(f"./{path}" if path == "-" else path, MAX_EVIDENCE_BYTES, "evidence")


def _pairs(values: tuple[str, ...], what: str) -> list[tuple[str, bytes]]:
    """``REF=FILE`` values (split at the last ``=``, so URLs may contain ``=``)."""
    out = []
    for value in values:
        ref, sep, path = value.rpartition("=")
        if not sep or not ref or not path:
            raise click.UsageError(f"{what} takes REF=FILE, not {value!r}")
        out.append((ref, _read(path)))
    return out


def stage_arguments(command: F) -> F:
    decorators = [
        click.argument("run_id", metavar="RUN"),
        click.argument("stage_id", metavar="STAGE"),
        click.option("--role", help="The role that ran the stage (checked against the team)."),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def stage_options(command: F) -> F:
    decorators = [
        stage_arguments,
        click.option(
            "--state", "terminal_state", default="completed", show_default=True,
            help="Terminal state: completed, refused, failed, timed_out.",
        ),
        click.option("--reason", "reason_code", default="ok", show_default=True,
                     help="Reason code (non-empty)."),
    ]  # fmt: skip
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def _emit(app: AppContext, entry: Entry, as_json: bool) -> None:
    body = entry.body
    info = {
        "run": entry.run_id,
        "seq": entry.seq,
        "entry_hash": entry.hash,
        "stage_id": body["stage_id"],
        "kind": body["kind"],
        "terminal_state": body["terminal_state"],
        "reason_code": body["reason_code"],
        "artifact_hash": body["artifact_hash"],
        "evidence_set_hash": body["evidence_set_hash"],
        "observations": len(body["observations"]),
    }
    if as_json:
        emit_json(info)
    else:
        app.console.print(
            styled(
                "recorded {kind} stage [bold]{stage}[/] of run {run} at step {seq}: "
                "{observations} observation(s), evidence {evidence}",
                kind=info["kind"],
                stage=info["stage_id"],
                run=entry.run_id,
                seq=entry.seq,
                observations=len(body["observations"]),
                evidence=info["evidence_set_hash"],
            )
        )


def _checked_up_front(
    run_id: str, stage_id: str, role: str | None, terminal_state: object, reason_code: object
) -> str:
    """The run id, once what refuses a stage whatever the ledger holds is checked: before
    the ledger is opened, so that such a refusal creates no ledger file where there was
    none (the boundary checks all of it again)."""
    check_stage_id(stage_id)
    check_role(role)
    check_outcome(terminal_state, reason_code)
    return check_run_id(run_id)


def _session(
    app: AppContext,
    run_id: str,
    make: Callable[[Run], ActivitySession],
    fill: Callable[[Any], Entry],
) -> Entry:
    with app.open_ledger(create=True) as ledger:
        # The run's row is created by the boundary's own transaction: a refused stage
        # leaves no trace, not even an empty run.
        return fill(make(Run(ledger, run_id)))


@activity.command("record")
@stage_arguments
@click.argument(
    "result_file", metavar="RESULT.json", type=click.Path(dir_okay=False, path_type=Path)
)
@click.option(
    "--evidence", multiple=True, metavar="FILE",
    help="Captured bytes of an observation (matched by content hash; repeatable).",
)  # fmt: skip
@json_option
@click.pass_obj
def activity_record(
    app: AppContext, run_id: str, stage_id: str, role: str | None, result_file: Path,
    evidence: tuple[str, ...], as_json: bool,
) -> None:  # fmt: skip
    """Record a result built elsewhere: RESULT.json is an ActivityResult document

    (kind, artifact, artifact_hash, evidence_set_hash, terminal_state, reason_code,
    observations). Its hashes are re-checked; --evidence gives the captured bytes.

    \b
    Examples:
      agentledger activity record run-7 coding-0 result.json --evidence diff.patch
      agentledger activity record run-7 coding-1 result.json --role dev --json
    """
    result = ActivityResult.from_json(read_json_document(result_file))
    # Before the evidence files are read (up to 1 GiB each), as in the other commands.
    run_id = _checked_up_front(run_id, stage_id, role, result.terminal_state, result.reason_code)
    captured = {}
    for path in evidence:
        data = _read(path)
        captured[Observation.capture("evidence", path, data).content_hash] = data
    unmatched = set(captured) - {o.content_hash for o in result.observations}
    if unmatched:
        raise InvalidInput(
            f"evidence file(s) match no observation: {sorted(unmatched)}", code="unmatched-evidence"
        )
    observations = tuple(
        Observation(o.kind, o.ref, o.content_hash, captured.get(o.content_hash))
        for o in result.observations
    )
    result = dataclasses.replace(result, observations=observations)
    with app.open_ledger(create=True) as ledger:
        entry = Run(ledger, run_id).record_activity(result, stage_id=stage_id, role=role)
    _emit(app, entry, as_json)


def _artifact(path: Path | None) -> Any:
    return None if path is None else read_json_document(path)


artifact_option = click.option(
    "--artifact", "artifact_file", type=click.Path(dir_okay=False, path_type=Path),
    help="The stage's artifact, a JSON file (default: null).",
)  # fmt: skip


@activity.command("research")
@stage_options
@click.option(
    "--page",
    "pages",
    multiple=True,
    metavar="URL=FILE",
    help="A fetched page: its URL and the file of its exact bytes (repeatable).",
)
@artifact_option
@json_option
@click.pass_obj
def activity_research(
    app: AppContext, run_id: str, stage_id: str, role: str | None, terminal_state: str,
    reason_code: str, pages: tuple[str, ...], artifact_file: Path | None, as_json: bool,
) -> None:  # fmt: skip
    """Record a research stage: every page content-addressed, then the artifact.

    \b
    Examples:
      agentledger activity research run-7 research-0 --page https://example.org=page.html
      agentledger activity research run-7 r-1 --page https://a.test=a.html --artifact a.json --json
    """
    run_id = _checked_up_front(run_id, stage_id, role, terminal_state, reason_code)
    fetched = _pairs(pages, "--page")
    artifact = _artifact(artifact_file)

    def fill(stage: Any) -> Entry:
        for url, data in fetched:
            stage.fetch(url, data)
        entry: Entry = stage.finish(
            artifact, terminal_state=terminal_state, reason_code=reason_code
        )
        return entry

    entry = _session(app, run_id, lambda run: run.research(stage_id, role=role), fill)
    _emit(app, entry, as_json)


@activity.command("browser")
@stage_options
@click.option(
    "--snapshot",
    "snapshots",
    multiple=True,
    metavar="STEP=FILE",
    help="The snapshot (DOM, screenshot) behind one decision step (repeatable).",
)
@click.option(
    "--receipt",
    "receipts",
    multiple=True,
    metavar="STEP=FILE",
    help="An action receipt of a step (repeatable).",
)
@artifact_option
@json_option
@click.pass_obj
def activity_browser(
    app: AppContext, run_id: str, stage_id: str, role: str | None, terminal_state: str,
    reason_code: str, snapshots: tuple[str, ...], receipts: tuple[str, ...],
    artifact_file: Path | None, as_json: bool,
) -> None:  # fmt: skip
    """Record a browser stage: one snapshot per decision step, plus action receipts.

    \b
    Examples:
      agentledger activity browser run-7 browser-0 --snapshot https://example.org=snap.html
      agentledger activity browser run-7 browser-1 --snapshot https://a.test=a.html --json
    """
    run_id = _checked_up_front(run_id, stage_id, role, terminal_state, reason_code)
    observed = _pairs(snapshots, "--snapshot")
    acted = _pairs(receipts, "--receipt")
    artifact = _artifact(artifact_file)

    def fill(stage: Any) -> Entry:
        for step, data in observed:
            stage.observe(step, data)
        for step, data in acted:
            stage.receipt(step, data)
        entry: Entry = stage.finish(
            artifact, terminal_state=terminal_state, reason_code=reason_code
        )
        return entry

    entry = _session(app, run_id, lambda run: run.browser(stage_id, role=role), fill)
    _emit(app, entry, as_json)


def _data_ops_command(kind: str) -> None:
    help_text = (
        f"Record {'an' if kind[0] in 'aeiou' else 'a'} {kind} stage: signed inputs, one plan "
        "(its steps), then signed outputs.\n\n"
        "Without --step/--steps there is no plan and the stage is refused (no-plan).\n\n"
        "\b\nExamples:\n"
        f'  agentledger activity {kind} run-7 {kind}-0 --input in.csv=in.csv --step "sum b" '
        "--output out.csv=out.csv\n"
        f"  agentledger activity {kind} run-7 {kind}-1 --input in.csv=in.csv --steps steps.json "
        "--output out.csv=out.csv --json\n"
    )

    @activity.command(kind, help=help_text)
    @stage_options
    @click.option(
        "--input",
        "inputs",
        multiple=True,
        metavar="REF=FILE",
        help="A signed input (recorded before the plan; repeatable).",
    )
    @click.option(
        "--step",
        "steps",
        multiple=True,
        metavar="TEXT",
        help="A declared plan step (repeatable, in order).",
    )
    @click.option(
        "--steps",
        "steps_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The plan steps as a JSON list (instead of --step).",
    )
    @click.option(
        "--output",
        "outputs",
        multiple=True,
        metavar="REF=FILE",
        help="A signed output (an effect, recorded after the plan; repeatable).",
    )
    @json_option
    @click.pass_obj
    def command(
        app: AppContext, run_id: str, stage_id: str, role: str | None, terminal_state: str,
        reason_code: str, inputs: tuple[str, ...], steps: tuple[str, ...],
        steps_file: Path | None, outputs: tuple[str, ...], as_json: bool,
    ) -> None:  # fmt: skip
        run_id = _checked_up_front(run_id, stage_id, role, terminal_state, reason_code)
        if steps and steps_file is not None:
            raise click.UsageError("give --step or --steps, not both")
        read_inputs = _pairs(inputs, "--input")
        read_outputs = _pairs(outputs, "--output")
        plan: list[Any] | None = list(steps) if steps else None
        if steps_file is not None:
            loaded = read_json_document(steps_file)
            if not isinstance(loaded, list):
                raise InvalidInput(f"{steps_file}: plan steps must be a JSON list")
            plan = loaded

        def fill(stage: Any) -> Entry:
            assert isinstance(stage, DataOpsActivity)
            for ref, data in read_inputs:
                stage.add_input(ref, data)
            if plan is not None:
                stage.plan(plan)
            for ref, data in read_outputs:
                stage.add_output(ref, data)
            return stage.finish(terminal_state=terminal_state, reason_code=reason_code)

        maker = (
            (lambda run: run.data(stage_id, role=role))
            if kind == "data"
            else (lambda run: run.ops(stage_id, role=role))
        )
        entry = _session(app, run_id, maker, fill)
        _emit(app, entry, as_json)


_data_ops_command("data")
_data_ops_command("ops")
