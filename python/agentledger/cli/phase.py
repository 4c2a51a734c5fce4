"""`agentledger phase ...`: compile phase authority, print the contracts' schemas and built-ins."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from agentledger.cli.common import read_json_document
from agentledger.cli.console import styled
from agentledger.cli.context import AppContext, AppGroup, json_option
from agentledger.errors import ExitCode, InvalidInput, NotFound
from agentledger.phase import (
    DIMENSIONS,
    PhaseCapabilityEvidence,
    builtin_profiles,
    compile,
    evidence_digest,
    json_schema,
    validate,
)
from agentledger.phase.jscompat import js_trim
from agentledger.phase.schemas import SCHEMA_MODELS

_SURROGATE = re.compile("[\ud800-\udfff]")


def _emit_json(obj: Any) -> None:
    """One JSON document on stdout, keys sorted, non-ASCII literal.

    Like ``emit_json``, but a lone surrogate (legal in a JSON string, and so in a scope)
    is written as its ``\\udxxx`` escape, as ``JSON.stringify`` does, instead of failing.
    """
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)
    text = _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    sys.stdout.write(text + "\n")


def _shown(value: str) -> str:
    # Scopes may hold characters a terminal cannot print (lone surrogates, C1 controls).
    return "".join(
        ch if ch.isprintable() and not "\ud800" <= ch <= "\udfff" else f"\\u{ord(ch):04x}"
        for ch in value
    )


def _scopes_lines(scopes: list[str]) -> Text:
    if not scopes:
        return Text("–", style="dim")
    return Text("\n".join(_shown(scope) for scope in scopes))


_STATUS_STYLE = {"allowed": "bold green", "narrowed": "bold yellow", "blocked": "bold red"}


def evidence_renderable(evidence: dict[str, Any]) -> Group:
    """The human view of an evidence object: identity, status, dimensions, blockers, warnings."""
    identity = evidence["identity"]
    if identity["mode"] == "legacy":
        title = Text("legacy mode (no phase profile)")
    else:
        title = Text.assemble(
            (identity["phase"], "bold"),
            f" phase, profile {_shown(identity['profileId'])} v{identity['profileVersion']}",
        )
    status = evidence["status"]
    header = Text.assemble(title, "  ", (status.upper(), _STATUS_STYLE.get(status, "bold")))

    table = Table(title=None, show_lines=False, expand=False)
    table.add_column("dimension", style="cyan", no_wrap=True)
    table.add_column("required", justify="center")
    table.add_column("requested", overflow="fold")
    table.add_column("effective", overflow="fold")
    table.add_column("limited by", style="magenta", overflow="fold")
    approval = set(evidence["approvalRequiredDimensions"])
    for evaluation in evidence["evaluations"]:
        dimension = evaluation["dimension"]
        marker = "yes" if evaluation["required"] else ""
        if dimension in approval:
            marker = (marker + " +approval").strip()
        changed = evaluation["requestedScopes"] != evaluation["effectiveScopes"]
        effective = _scopes_lines(evaluation["effectiveScopes"])
        if changed:
            effective.stylize("yellow")
        table.add_row(
            dimension,
            marker,
            _scopes_lines(evaluation["requestedScopes"]),
            effective,
            "\n".join(_shown(source) for source in evaluation["limitingSourceIds"]),
        )

    parts: list[Any] = [header, Text(f"digest {evidence['digest']}", style="dim"), table]
    if evidence.get("planArtifact"):
        artifact = evidence["planArtifact"]
        parts.append(
            Text.assemble(
                ("plan artifact ", "bold"),
                _shown(artifact["exactPath"]),
                (" (harness API only; no shell redirection, no indirect writes)", "dim"),
            )
        )
    if evidence["blockers"]:
        blockers = Table(title=None, box=None, show_header=True, header_style="bold red")
        blockers.add_column("blocker", style="red", no_wrap=True)
        blockers.add_column("dimension", no_wrap=True)
        blockers.add_column("source", style="magenta", overflow="fold")
        for blocker in evidence["blockers"]:
            blockers.add_row(
                blocker["code"],
                blocker.get("dimension", ""),
                _shown(blocker.get("sourceId", "")),
            )
        parts.append(blockers)
    if evidence["warnings"]:
        parts.append(Text("warnings", style="bold yellow"))
        for warning in evidence["warnings"]:
            parts.append(Text(f"  ! {warning}"))
    return Group(*parts)


@click.group(cls=AppGroup)
def phase() -> None:
    """Phase capability profiles: compile a phase's effective authority.

    A phase (explore, plan, implement, verify, publish) asks for authority over seven
    dimensions; the compiler grants the exact intersection of that profile with the
    parent run, the agent profile, the sandbox, the tool catalog and the launch policy.
    Nothing is ever widened. See docs/PHASE.md.

    \b
    Start with:
      agentledger phase builtins            what each built-in phase asks for
      agentledger phase schema input        the shape of a compiler input
      agentledger phase compile INPUT.json  the evidence (exit 3 when blocked)

    \b
    In the ledger (anchored in the run's chain, re-checked by `agentledger verify`):
      agentledger phase record RUN INPUT.json       a run's initial evidence
      agentledger phase transition RUN TARGET.json  move phase (CAS, approvals, overrides)
      agentledger phase approve RUN APPROVAL        approve or --reject an expansion
      agentledger phase authorize RUN DIM SCOPE...  check an action; journaled
      agentledger phase show RUN                    current phase, history, deltas
    """


@phase.command("compile")
@click.argument("input_file", metavar="INPUT.json", type=click.Path(path_type=Path))
@json_option
@click.pass_obj
def compile_command(app: AppContext, input_file: Path, as_json: bool) -> int:
    """Compile INPUT.json into phase-capability-evidence/v1.

    INPUT.json is a compiler input: {"profile"?, "sources", "planArtifact"?}. "sources"
    holds exactly parent, agentProfile, sandbox, toolCatalog and launchPolicy, each with
    an id, a kind, scopes for all seven dimensions and an enforcement state for each
    (enforced, unsupported or unenforceable). Leave out "profile" for legacy mode. Use
    `agentledger phase schema input` for the full schema and `-` to read stdin.

    \b
    Exit codes:
      0   allowed or narrowed evidence
      3   blocked evidence (the blockers say why)
      64  INPUT.json does not exist or cannot be read
      65  malformed JSON or a schema violation (the message names the path)

    With --json the evidence object is printed exactly as compiled (keys sorted); its
    "digest" is the reference implementation's, so it can be compared across systems.

    \b
    Examples:
      agentledger phase compile input.json
      cat input.json | agentledger phase compile - --json
    """
    document = read_json_document(input_file)
    evidence = compile(document)
    if as_json:
        _emit_json(evidence)
    else:
        app.console.print(evidence_renderable(evidence))
    return int(ExitCode.BLOCKED if evidence["status"] == "blocked" else ExitCode.OK)


@phase.command("verify-evidence")
@click.argument("evidence_file", metavar="EVIDENCE.json", type=click.Path(path_type=Path))
@click.option(
    "--input",
    "input_file",
    metavar="INPUT.json",
    type=click.Path(path_type=Path),
    help="Also re-run the compiler on this input and require exactly this evidence.",
)
@json_option
@click.pass_obj
def verify_evidence_command(
    app: AppContext, evidence_file: Path, input_file: Path | None, as_json: bool
) -> int:
    """Check that EVIDENCE.json is well-formed evidence whose digest matches its content.

    A matching digest only proves the evidence was not edited after it was digested. With
    --input, the compiler is re-run on INPUT.json and the evidence must equal its output
    field for field, which also catches hand-written evidence with a fresh digest.

    Exit 0 when everything matches, 2 when the digest or the recompiled evidence differs,
    65 when a file is not valid JSON or not valid evidence, 64 when a file is missing.

    \b
    Examples:
      agentledger phase verify-evidence evidence.json
      agentledger phase verify-evidence evidence.json --input input.json --json
    """
    evidence = read_json_document(evidence_file)
    validate(PhaseCapabilityEvidence, evidence, "phase evidence")
    problems: list[str] = []
    expected_digest = evidence_digest(evidence)
    if evidence["digest"] != expected_digest:
        problems.append(f"digest is {evidence['digest']}, content digests to {expected_digest}")
    if input_file is not None:
        recompiled = compile(read_json_document(input_file))
        if recompiled != evidence:
            fields = [
                key
                for key in recompiled.keys() | evidence.keys()
                if recompiled.get(key) != evidence.get(key)
            ]
            problems.append(
                "the compiler produces different evidence for this input "
                f"(fields: {', '.join(sorted(fields))}; compiled digest {recompiled['digest']})"
            )
    if as_json:
        _emit_json({"ok": not problems, "digest": evidence["digest"], "problems": problems})
    elif problems:
        for problem in problems:
            app.console.print(Text(f"✗ {problem}", style="red"))
    else:
        checked = "digest and recompilation" if input_file is not None else "digest"
        app.console.print(Text(f"✓ evidence {evidence['digest']} verified ({checked})", "green"))
    return int(ExitCode.DIVERGED if problems else ExitCode.OK)


@phase.command("schema")
@click.argument("name", type=click.Choice(list(SCHEMA_MODELS)), metavar="NAME")
@json_option
def schema_command(name: str, as_json: bool) -> int:
    """Print the JSON Schema of a phase contract (always JSON; --json is accepted).

    \b
    NAME is one of:
      profile   phase-capability-profile/v1    what a phase may request
      intent    phase-transition-intent/v1     a requested move between phases
      evidence  phase-capability-evidence/v1   what the compiler produces
      input     the compiler input              profile?, sources, planArtifact?

    The schemas are generated from the strict models; the models additionally trim
    scopes with JavaScript's trim and count lengths in UTF-16 code units.

    \b
    Examples:
      agentledger phase schema input
      agentledger phase schema evidence > evidence.schema.json
    """
    _emit_json(json_schema(name))
    return int(ExitCode.OK)


@phase.command("builtins")
@json_option
@click.pass_obj
def builtins_command(app: AppContext, as_json: bool) -> int:
    """List the built-in phase profiles and the authority each one asks for.

    Every built-in profile requires all seven dimensions: if a source cannot enforce
    one, or denies every scope asked for, the compile is blocked. "<workspace>" is an
    opaque token a source must list literally (or allow with "*"). Profiles are
    ceilings: the effective authority is always narrowed by the other sources.

    \b
    Examples:
      agentledger phase builtins
      agentledger phase builtins --json
    """
    profiles = builtin_profiles()
    if as_json:
        _emit_json(profiles)
        return int(ExitCode.OK)
    table = Table(title="built-in phase profiles (version 1; every dimension required)")
    table.add_column("phase", style="bold", no_wrap=True)
    table.add_column("asks for (dimensions not listed: nothing)", overflow="fold")
    table.add_column("needs approval", style="yellow", overflow="fold")
    for profile in profiles:
        asks = Text()
        for dimension in DIMENSIONS:
            scopes = profile["authority"][dimension]
            if scopes:
                if asks:
                    asks.append("\n")
                asks.append(f"{dimension:<20}", style="cyan")
                asks.append(" ".join(_shown(scope) for scope in scopes))
        table.add_row(
            styled("{phase}\n[dim]{id}[/dim]", phase=profile["phase"], id=profile["id"]),
            asks,
            _scopes_lines(profile["approvalRequiredDimensions"]),
            end_section=True,
        )
    app.console.print(table)
    app.console.print(
        Text(
            "plan may request one plan artifact by exact repository-relative path "
            "(harness-exact-path); no other phase can.",
            style="dim",
        )
    )
    return int(ExitCode.OK)


# --------------------------------------------------------------------------- the ledger

ACTOR_TYPES = ("user", "service", "agent")


def _actor_options(command: Any) -> Any:
    command = click.option(
        "--actor-type",
        type=click.Choice(ACTOR_TYPES),
        default="user",
        show_default=True,
        help="What the actor is.",
    )(command)
    return click.option(
        "--actor",
        "actor_id",
        default="cli",
        show_default=True,
        help="Who is acting (an identifier: letters, digits, . _ : / -).",
    )(command)


def _json_object(path: Path, what: str) -> dict[str, Any]:
    document = read_json_document(path)
    if not isinstance(document, dict):
        raise InvalidInput(f"{what} must be a JSON object")
    return document


def _delta_text(delta: dict[str, Any] | None) -> Text:
    if not delta or not delta["entries"]:
        return Text("no change", style="dim")
    text = Text(delta["classification"], style="bold")
    for entry in delta["entries"]:
        text.append(f"\n{entry['dimension']}", style="cyan")
        if entry["addedScopes"]:
            text.append(" +" + " +".join(_shown(s) for s in entry["addedScopes"]), "yellow")
        if entry["removedScopes"]:
            text.append(" -" + " -".join(_shown(s) for s in entry["removedScopes"]), "green")
    return text


@phase.command("record")
@click.argument("run_id", metavar="RUN")
@click.argument("input_file", metavar="INPUT.json", type=click.Path(path_type=Path))
@click.option(
    "--evidence",
    "evidence_file",
    metavar="EVIDENCE.json",
    type=click.Path(path_type=Path),
    help="Evidence to record; it must be exactly what INPUT.json compiles to.",
)
@json_option
@click.pass_obj
def record_command(
    app: AppContext, run_id: str, input_file: Path, evidence_file: Path | None, as_json: bool
) -> int:
    """Record RUN's initial phase evidence, compiled from INPUT.json (RUN is created if new).

    The compiler input and the evidence are stored as blobs and anchored by a
    phase.evidence entry; `agentledger verify` re-runs the compiler on them. A run has
    one initial evidence; change it with `phase transition`.

    Exit 0 recorded, 3 recorded but blocked, 1 no ledger, 64 when a file is missing, 65
    invalid input or evidence that is not what INPUT.json compiles to (nothing is written).

    \b
    Examples:
      agentledger phase record run-7 input.json
      agentledger phase record run-7 input.json --evidence evidence.json --json
    """
    compiler_input = _json_object(input_file, "the compiler input")
    evidence = _json_object(evidence_file, "the evidence") if evidence_file else None
    # `phase compile` and the others start without the ledger's modules; `record` loads them.
    from agentledger.journal import Run
    from agentledger.phase.ledger import record_evidence

    with app.open_ledger() as ledger:
        entry = record_evidence(
            Run(ledger, run_id), evidence, compiler_input=compiler_input, create_run=True
        )
    body = entry.body
    if as_json:
        _emit_json({"run": run_id, "seq": entry.seq, "entry_hash": entry.hash, **body})
    else:
        app.console.print(
            Text.assemble(
                ("recorded ", "green"),
                f"{body['phase']} evidence {body['evidence_digest']} ",
                (body["status"].upper(), _STATUS_STYLE.get(body["status"], "bold")),
                f" at {run_id}#{entry.seq}",
            )
        )
    return int(ExitCode.BLOCKED if body["status"] == "blocked" else ExitCode.OK)


@phase.command("transition")
@click.argument("run_id", metavar="RUN")
@click.argument("input_file", metavar="TARGET_INPUT.json", type=click.Path(path_type=Path))
@click.option("--operation", "operation_id", required=True, help="Idempotency key of this move.")
@click.option("--reason", required=True, help="Why the run changes phase (recorded).")
@click.option(
    "--expect-sequence",
    type=click.IntRange(min=0),
    default=None,
    help="The transition sequence you observed (default: the current one).",
)
@click.option(
    "--expect-evidence",
    metavar="DIGEST",
    default=None,
    help="The evidence digest you observed in force (default: the current one).",
)
@click.option(
    "--manifest",
    "manifest_digest",
    metavar="DIGEST",
    default=None,
    help="The run's manifest digest (sha256:...); needed for the first transition "
    "(a retry after approval reuses the approval's).",
)
@click.option("--approval", "approval_id", default=None, help="The approval id of an expansion.")
@click.option(
    "--approval-ttl-ms",
    type=int,
    default=None,
    help="Lifetime of the approval this expansion requests (1000..86400000; default 5 min).",
)
@click.option(
    "--override-until",
    metavar="TIME",
    default=None,
    help="Emergency override expiring at TIME (ISO 8601, within 24 h); needs --admin.",
)
@click.option("--justification", default=None, help="Why the emergency override is needed.")
@click.option("--admin", is_flag=True, help="Assert the actor is an administrator.")
@click.option(
    "--evidence",
    "evidence_file",
    metavar="EVIDENCE.json",
    type=click.Path(path_type=Path),
    help="Target evidence; it must be exactly what TARGET_INPUT.json compiles to.",
)
@_actor_options
@json_option
@click.pass_obj
def transition_command(
    app: AppContext,
    run_id: str,
    input_file: Path,
    operation_id: str,
    reason: str,
    expect_sequence: int | None,
    expect_evidence: str | None,
    manifest_digest: str | None,
    approval_id: str | None,
    approval_ttl_ms: int | None,
    override_until: str | None,
    justification: str | None,
    admin: bool,
    evidence_file: Path | None,
    actor_id: str,
    actor_type: str,
    as_json: bool,
) -> int:
    """Move RUN to the phase evidence compiled from TARGET_INPUT.json.

    The move is a compare-and-set on (sequence, evidence in force, manifest): a request
    built against a state that has moved since is refused. An exact retry of an
    --operation returns the original record. Narrowing applies at once; an expansion needs
    an approved exact-action approval (the first attempt records a pending one: approve it
    with `phase approve`, then retry with the same --operation) or an administrator's
    emergency override expiring within 24 hours (--override-until, --justification, --admin).

    \b
    Exit codes:
      0   applied (or an exact retry of an applied move)
      3   not applied: the expansion awaits approval, or the target evidence is blocked
      1   no such run, or no evidence to transition from
      65  refused (stale state, reused operation id, rejected approval, ...) or invalid input

    \b
    Examples:
      agentledger phase transition run-7 t.json --operation op-1 --reason ok --manifest sha256:…
      agentledger phase transition run-7 t.json --operation o2 --reason ok --manifest m --json
    """
    if (override_until is None) != (justification is None):
        raise click.UsageError("--override-until and --justification go together")
    target_input = _json_object(input_file, "the target compiler input")
    target_evidence = _json_object(evidence_file, "the evidence") if evidence_file else None
    from agentledger.phase.journal import refuse_unreadable

    with app.open_ledger() as ledger:
        run = ledger.get_run(run_id)
        state = run.phase_state()
        refuse_unreadable(state)  # evidence that does not read back is not "no evidence"
        if state.effective is None:
            raise NotFound(f"run {run_id!r} has no phase evidence (record it with `phase record`)")
        # Running the same command again is an exact retry: built against the state the
        # operation's record moved from, not the one it moved to ("operation-reused").
        operation = js_trim(operation_id)  # as the operation id is recorded
        applied = state.by_operation.get(operation)
        if applied is not None:
            if expect_sequence is None:
                expect_sequence = applied["sequence"] - 1
            expect_evidence = expect_evidence or applied["priorEvidence"]["digest"]
            manifest_digest = manifest_digest or applied["manifestDigest"]
        manifest = manifest_digest or (state.current or {}).get("manifestDigest")
        if manifest is None:
            # Retrying a move that awaited approval: the approval names its manifest.
            manifest = next(
                (
                    approval["manifestDigest"]
                    for approval in state.approvals.values()
                    if approval["operationId"] == operation
                ),
                None,
            )
        if manifest is None:
            raise click.UsageError("--manifest is required for a run's first transition")
        result = run.transition_phase(
            target_input,
            operation_id=operation_id,
            reason=reason,
            expected_sequence=state.sequence if expect_sequence is None else expect_sequence,
            expected_evidence_digest=expect_evidence or state.effective["digest"],
            manifest_digest=manifest,
            actor={"id": actor_id, "type": actor_type},
            administrator=admin,
            approval=approval_id,
            approval_ttl_ms=approval_ttl_ms,
            emergency_override=(
                None
                if override_until is None
                else {"justification": justification, "expiresAt": override_until}
            ),
            target_evidence=target_evidence,
        )
    if as_json:
        _emit_json(
            {
                "run": run_id,
                "status": result.status,
                "replayed": result.replayed,
                "record": result.record,
                "approval": result.approval,
                "authority_delta": result.delta,
            }
        )
    elif result.record is not None:
        record = result.record
        app.console.print(
            Text.assemble(
                ("applied " if not result.replayed else "already applied ", "green"),
                f"transition {record['sequence']} ({record['policyDecision']}) → ",
                (record["effectiveEvidence"]["identity"]["phase"], "bold"),
                f" {record['effectiveEvidence']['digest']}",
            )
        )
        app.console.print(_delta_text(record["authorityDelta"]))
    else:
        assert result.approval is not None
        app.console.print(
            Text.assemble(
                ("approval required ", "bold yellow"),
                f"{result.approval['id']} ({result.approval['status']}, expires "
                f"{result.approval['expiresAt']})",
            )
        )
        app.console.print(_delta_text(result.delta))
    return int(ExitCode.OK if result.status == "applied" else ExitCode.BLOCKED)


@phase.command("approve")
@click.argument("run_id", metavar="RUN")
@click.argument("approval_id", metavar="APPROVAL")
@click.option("--reject", is_flag=True, help="Reject the expansion instead of approving it.")
@click.option("--note", default=None, help="A note recorded with the decision.")
@click.option(
    "--admin", is_flag=True, help="Assert the actor is an administrator (critical approvals)."
)
@_actor_options
@json_option
@click.pass_obj
def approve_command(
    app: AppContext,
    run_id: str,
    approval_id: str,
    reject: bool,
    note: str | None,
    admin: bool,
    actor_id: str,
    actor_type: str,
    as_json: bool,
) -> int:
    """Approve (or --reject) RUN's pending phase-expansion APPROVAL.

    An approval approves exactly one move: its id is bound to the operation, the evidence
    in force, the target evidence and the manifest. Only a pending, unexpired approval can
    be decided; the decision is journaled in RUN's chain. A critical expansion (adding
    credential access or external actions) is approved only with --admin.

    Exit 0 recorded, 1 no such run or approval, 65 not pending (approved, rejected or
    expired already) or invalid input.

    \b
    Examples:
      agentledger phase approve run-7 approval-1 --note "reviewed"
      agentledger phase approve run-7 approval-1 --reject --json
    """
    with app.open_ledger() as ledger:
        decided = ledger.get_run(run_id).decide_phase_approval(
            approval_id,
            "rejected" if reject else "approved",
            actor={"id": actor_id, "type": actor_type},
            note=note,
            administrator=admin,
        )
    if as_json:
        _emit_json({"run": run_id, "approval": decided})
    else:
        style = "green" if decided["status"] == "approved" else "red"
        app.console.print(Text.assemble((decided["status"], f"bold {style}"), f" {approval_id}"))
    return int(ExitCode.OK)


@phase.command("show")
@click.argument("run_id", metavar="RUN")
@json_option
@click.pass_obj
def show_command(app: AppContext, run_id: str, as_json: bool) -> int:
    """Show RUN's current phase, its transition history and authority deltas.

    Reading is also when a lapsed emergency override is recorded: the first read after it
    expires appends one override-expired record restoring the evidence before it.

    Exit 0; 2 when a phase entry's blobs or record do not read back or a journaled
    decision does not re-derive (listed under "problems"; run `agentledger verify`); 1 when
    there is no such run.

    \b
    Examples:
      agentledger phase show run-7
      agentledger phase show run-7 --json
    """
    from agentledger.phase.journal import decision_counts
    from agentledger.phase.ledger import phase_summary

    with app.open_ledger() as ledger:
        state = ledger.get_run(run_id).phase_state()
        summary = phase_summary(state, decision_counts(state))
        effective = state.effective
    code = ExitCode.DIVERGED if summary["problems"] else ExitCode.OK
    if as_json:
        _emit_json(summary)
        return int(code)
    for problem in summary["problems"]:
        app.console.print(Text(f"✗ step {problem['seq']}: {problem['problem']}", style="red"))
    if effective is None:
        if summary["problems"]:
            app.console.print(Text(f"run {run_id}: its phase evidence does not read back", "red"))
        else:
            app.console.print(Text(f"run {run_id}: no phase evidence (legacy, unrecorded)", "dim"))
        return int(code)
    app.console.print(evidence_renderable(effective))
    if summary["descent"]:
        descent = summary["descent"]
        app.console.print(
            Text(
                f"{descent['relation']} of run {descent['parent_run']} "
                f"(parent evidence {descent['parent_evidence_digest']})",
                style="dim",
            )
        )
    history = Table(title=f"phase history of {run_id}")
    history.add_column("#", justify="right")
    history.add_column("decision", no_wrap=True)
    history.add_column("phase", style="bold")
    history.add_column("authority delta", overflow="fold")
    history.add_column("by / reason", overflow="fold")
    for item in summary["history"]:
        history.add_row(
            str(item["sequence"]),
            item["policy_decision"],
            item["phase"],
            _delta_text(item["authority_delta"]) if item["authority_delta"] else Text(""),
            f"{item['actor']['id']}: {item['reason']}" if "actor" in item else "",
        )
    app.console.print(history)
    app.console.print(Text("since the initial evidence: ", style="bold"), end="")
    app.console.print(_delta_text(summary["authority_delta_since_initial"]))
    decisions = summary["authorizations"]
    app.console.print(
        Text(f"authorizations: {decisions['allowed']} allowed, {decisions['denied']} denied")
    )
    for approval in summary["approvals"]:
        app.console.print(
            Text(f"approval {approval['id']}: {approval['status']} (op {approval['operation_id']})")
        )
    return int(code)


@phase.command("authorize")
@click.argument("run_id", metavar="RUN")
@click.argument("dimension", type=click.Choice(list(DIMENSIONS)), metavar="DIMENSION")
@click.argument("scopes", nargs=-1, metavar="[SCOPE]...")
@click.option(
    "--evidence",
    "evidence_digest",
    metavar="DIGEST",
    required=True,
    help="The evidence digest the action was planned against (see `phase show`).",
)
@json_option
@click.pass_obj
def authorize_command(
    app: AppContext, run_id: str, dimension: str, scopes: tuple[str, ...], evidence_digest: str,
    as_json: bool,
) -> int:  # fmt: skip
    """Check an action (DIMENSION, SCOPEs) against RUN's phase authority; journal the decision.

    Allowed when the evidence in force is DIGEST, is not blocked, and grants `*` or every
    SCOPE for DIMENSION; no SCOPE at all is denied. Every decision, allowed or denied, is
    appended to RUN's chain.

    Exit 0 allowed, 3 denied, 1 no such run, 65 invalid input.

    \b
    Examples:
      agentledger phase authorize run-7 network.egress pypi.org --evidence sha256:…
      agentledger phase authorize run-7 filesystem.write src/app.py --evidence sha256:… --json
    """
    with app.open_ledger() as ledger:
        decision = ledger.get_run(run_id).authorize(
            dimension, list(scopes), evidence_digest=evidence_digest
        )
    if as_json:
        _emit_json({"run": run_id, **decision.to_json()})
    elif decision.allowed:
        app.console.print(Text(f"allowed {dimension} {' '.join(scopes)}", "bold green"))
    else:
        missing = " ".join(_shown(scope) for scope in decision.missing)
        app.console.print(Text(f"denied ({decision.reason}) {missing}".rstrip(), "bold red"))
    return int(ExitCode.OK if decision.allowed else ExitCode.BLOCKED)
