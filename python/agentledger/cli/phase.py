"""`agentledger phase ...`: compile phase authority, print the contracts' schemas and built-ins."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from agentledger.cli.app import cli
from agentledger.cli.context import AppContext, json_option
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


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def read_json_document(path: Path) -> Any:
    """Parse a JSON file (``-`` for stdin) the way ``JSON.parse`` would accept it.

    A missing file is :class:`NotFound` (exit 1); anything unreadable or not strict JSON
    (``NaN``, ``Infinity``, a BOM, invalid UTF-8) is :class:`InvalidInput` (exit 65).
    """
    name = "stdin" if str(path) == "-" else str(path)
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except FileNotFoundError:
        raise NotFound(f"no such file: {name}") from None
    except IsADirectoryError:
        raise InvalidInput(f"{name} is a directory, not a JSON file") from None
    except OSError as error:
        raise InvalidInput(f"cannot read {name}: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"{name}: not UTF-8 (byte offset {error.start})") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise InvalidInput(
            f"{name}: malformed JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    except ValueError as error:
        raise InvalidInput(f"{name}: malformed JSON: {error}") from None


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


@cli.group()
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
      1   INPUT.json does not exist
      65  malformed JSON or a schema violation (the message names the path)

    With --json the evidence object is printed exactly as compiled (keys sorted); its
    "digest" is the reference implementation's, so it can be compared across systems.
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
    65 when a file is not valid JSON or not valid evidence, 1 when a file is missing.
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
            f"{profile['phase']}\n[dim]{profile['id']}[/dim]",
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
