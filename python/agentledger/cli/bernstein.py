"""`import bernstein WORKDIR`, `export bernstein OUTDIR [RUN ...]`, and `bernstein
audit-verify` / `bernstein receipt-verify RUN` (bernstein's own verdicts on the imported
workdir, with its exit codes)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from agentledger import _core
from agentledger.bernstein import DirectoryWorkdir, check_workdir, export_workdir, import_workdir
from agentledger.bernstein.audit_chain import read_master_key, verify_audit
from agentledger.bernstein.audit_verdict import audit_verdict, witness_key
from agentledger.bernstein.format import journal_path, valid_run_id
from agentledger.bernstein.lineage import spine_head_path, spine_path
from agentledger.bernstein.receipt_verdict import (
    KeyChain,
    verify_receipt,
)
from agentledger.bernstein.replay_verdict import replay_verdict
from agentledger.bernstein.run_receipts import receipt_path
from agentledger.bernstein.seal_anchors import seal_anchor_path
from agentledger.bernstein.seal_verdict import seal_verdict
from agentledger.bernstein.witness_state import folder_reader
from agentledger.bernstein.workdir import LedgerWorkdir
from agentledger.cli import arguments
from agentledger.cli.console import styled
from agentledger.cli.context import AppContext, AppGroup, emit_json, json_option
from agentledger.display import safe
from agentledger.errors import ExitCode, InvalidInput, NotFound
from agentledger.ledger import Ledger
from agentledger.limits import MAX_DOCUMENT_BYTES, MAX_KEY_FILE_BYTES, read_capped
from agentledger.verify import VerifyOptions


@click.group("import", cls=AppGroup)
def import_group() -> None:
    """Bring another tool's records into the ledger.

    \b
    Examples:
      agentledger import bernstein path/to/workdir
      agentledger import bernstein workdir --audit-key audit.key --json
    """


@click.group("export", cls=AppGroup)
def export_group() -> None:
    """Write ledger contents out in another tool's format.

    \b
    Examples:
      agentledger export bernstein out/
      agentledger export bernstein out/ run-001 run-002 --json
    """


@contextmanager
def _progress(
    app: AppContext,
) -> Iterator[tuple[Callable[[int], None], Callable[[int], None]] | None]:
    """``(advance, set_total)`` for a bar on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    columns = (TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=app.err_console, transient=True) as progress:
        task = progress.add_task("import", total=None)
        yield (
            lambda n: progress.advance(task, n),
            lambda total: progress.update(task, total=total),
        )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while this command imports, as it was after. The import
    holds objects for every workdir file (tens of thousands) and makes no cycles, but each
    full pass of the collector walks them all again: 0.4 s of CPU in a 79,173-file import
    (benches/README.md). Paused here, in the command's own process, not in
    ``import_workdir``: a program that imports through the API keeps its collector."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _split_runs(values: tuple[str, ...]) -> list[str] | None:
    runs = [name for value in values for name in value.split(",") if name]
    return runs or None


def _not_verifying(ledger: Ledger, run_ids: list[str]) -> list[tuple[str, list[str]]]:
    """The imported runs bernstein's own verifier rejects, with the checks that fail."""
    if not run_ids:
        return []
    report = ledger.verify(run_ids, options=VerifyOptions(compat="bernstein"))
    statuses = report.statuses()
    return [
        (run.run_id, sorted({d.check for d in run.divergences}))
        for run in report.runs
        if statuses[run.run_id] == "diverged"
    ]


def _not_verifying_text(failing: list[tuple[str, list[str]]]) -> str:
    """The runs bernstein's own rules reject, in one line (empty when none)."""
    if not failing:
        return ""
    named = ", ".join(f"{run} ({', '.join(checks)})" for run, checks in failing[:10])
    more = f" and {len(failing) - 10:,} more" if len(failing) > 10 else ""
    return safe(
        f"{len(failing)} imported run(s) do not verify by bernstein's own rules: "
        f"{named}{more}; `agentledger verify --compat bernstein` shows why"
    )


@import_group.command("bernstein")
@click.argument("workdir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--audit-key",
    "audit_key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="bernstein's audit master key: check the audit chain now (the key is not stored).",
)
@click.option(
    "--runs",
    "runs",
    multiple=True,
    metavar="RUN[,RUN...]",
    help="Import only these runs (repeatable; the store and audit chain come whole).",
)
@json_option
@click.pass_obj
def import_bernstein(
    app: AppContext,
    workdir: Path,
    audit_key_file: Path | None,
    runs: tuple[str, ...],
    as_json: bool,
) -> int:
    """Import a bernstein workdir (.sdd): journals, flat store, audit chain, byte for byte.

    \b
    Re-import is idempotent; a run that changed since is reported, not merged (exit 2).
    Symlinks, special files, names that are not UTF-8 and run ids bernstein would refuse
    are refused (exit 65, each named), and then nothing is imported: the ledger is left
    as it was. Exit 1 when a run named with --runs is not in the workdir.

    \b
    Examples:
      agentledger import bernstein path/to/workdir
      agentledger import bernstein workdir --audit-key audit.key --runs run-001,run-002 --json
    """
    arguments.input_folder(workdir, "WORKDIR")
    arguments.audit_key_file(audit_key_file)
    audit_ok: bool | None = None
    audit_problems: list[str] = []
    if audit_key_file is not None:
        try:
            master = read_master_key(read_capped(audit_key_file, MAX_KEY_FILE_BYTES, "a key"))
        except OSError as exc:
            raise InvalidInput(f"cannot read the audit key: {exc}", code="audit-key") from None
        chain = verify_audit(DirectoryWorkdir(workdir).audit_segments(), master)
        audit_ok = chain.ok
        audit_problems = [f"{p.segment} line {p.line}: {p.reason}" for p in chain.problems]
    summary = None
    checked = None
    failing: list[tuple[str, list[str]]] = []
    if not app.ledger_path.exists():
        # A refused import changes no ledger: it makes none either. The import goes on
        # from this listing (the workdir is listed once).
        with _collector_paused():
            checked = check_workdir(workdir, runs=_split_runs(runs))
        summary = checked.summary if checked.refused else None
    if summary is None:
        with app.open_ledger(create=True) as ledger, _progress(app) as bar:
            with _collector_paused():
                summary = import_workdir(
                    ledger,
                    workdir,
                    runs=_split_runs(runs),
                    progress=bar[0] if bar else None,
                    on_total=bar[1] if bar else None,
                    checked=checked,
                )
            failing = _not_verifying(ledger, list(summary.runs_imported))
    # The import keeps every byte, tampered or not; whoever imports must hear it now.
    warning = _not_verifying_text(failing)
    code = int(summary.code)
    refused = code == ExitCode.INVALID_INPUT and summary.refused
    if warning and not refused:  # a refused import says it in its one error line
        click.echo(f"warning: {warning}", err=True)
    if audit_ok is False and code == ExitCode.OK:
        code = int(ExitCode.DIVERGED)
    if as_json:
        emit_json(
            {
                **summary.to_json(),
                "code": code,
                "audit_ok": audit_ok,
                "audit_problems": audit_problems,
                "not_verifying": [{"run": run, "checks": checks} for run, checks in failing],
            }
        )
        return code
    console = app.console
    console.print(
        styled(
            "[bold]bernstein import[/] {source}: ",
            source=summary.source,
        ).append(
            f"{len(summary.runs_imported)} run(s) imported, {len(summary.runs_unchanged)} "
            f"unchanged, {summary.files_added} file(s) added ({summary.bytes_added} bytes), "
            f"{summary.files_unchanged} unchanged"
        )
    )
    for run_id in summary.runs_changed:
        console.print(
            styled(
                "[red]changed[/] run {run}: differs from the imported copy; not merged", run=run_id
            )
        )
    for path in summary.files_changed:
        if not path.endswith("/journal.jsonl"):
            console.print(
                styled(
                    "[red]changed[/] {path}: differs from the imported copy; not merged", path=path
                )
            )
    for path, reason in summary.refused:
        console.print(styled("[red]refused[/] {path}: {reason}", path=path, reason=reason))
    for path, reason in summary.skipped:
        console.print(styled("[dim]skipped[/] {path}: {reason}", path=path, reason=reason))
    for run_id in summary.runs_missing:
        console.print(styled("[yellow]missing[/] run {run}: not in the workdir", run=run_id))
    for run_id, lines in summary.discarded_lines.items():
        shown = ", ".join(str(n) for n in lines[:10])
        console.print(
            styled(
                "[yellow]unparsable[/] run {run}: line(s) {shown} kept as evidence; "
                "bernstein's reader discards them",
                run=run_id,
                shown=shown,
            )
        )
    if audit_ok is not None:
        console.print(
            styled(
                "audit chain: " + ("[green]verifies[/]" if audit_ok else "[red]does not verify[/]")
            )
        )
        for problem in audit_problems[:20]:
            console.print(Text(f"  {safe(problem)}"))
    if refused:
        # The report above lists them; stderr gets the one line every failing command prints.
        click.echo(
            f"error [bernstein-refused]: {len(summary.refused)} path(s) of {safe(summary.source)} "
            "refused (symlinks, invalid names); nothing was imported"
            + (f"; {warning}" if warning else ""),
            err=True,
        )
    return code


@export_group.command("bernstein")
@click.argument("outdir", type=click.Path(path_type=Path))
@click.argument("run_ids", metavar="[RUN]...", nargs=-1)
@json_option
@click.pass_obj
def export_bernstein(app: AppContext, outdir: Path, run_ids: tuple[str, ...], as_json: bool) -> int:
    """Write imported bernstein runs back out as a workdir, byte-identical to the import.

    OUTDIR must be absent or empty. The store and the audit chain are written whole.

    \b
    Examples:
      agentledger export bernstein out/
      agentledger export bernstein out/ run-001 run-002 --json
    """
    arguments.output_folder(outdir, "OUTDIR")
    with app.open_ledger(readonly=True) as ledger:
        summary = export_workdir(ledger, outdir, list(run_ids) or None)
    if as_json:
        emit_json(summary.to_json())
    else:
        app.console.print(
            f"exported {len(summary.runs)} run(s), {summary.files} file(s), "
            f"{summary.bytes} bytes to {summary.outdir}"
        )
    return int(ExitCode.OK)


@click.group("bernstein", cls=AppGroup)
def bernstein_group() -> None:
    """bernstein's own verdicts on the imported workdir, with bernstein's exit codes.

    \b
    Examples:
      agentledger bernstein audit-verify --audit-key audit.key
      agentledger bernstein receipt-verify run-001 --public-key operator.pem
      agentledger bernstein replay-verify run-001 --json
    """


@bernstein_group.command("audit-verify")
@click.option(
    "--audit-key",
    "audit_key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="bernstein's audit master key (without it the HMAC pillar fails, as in bernstein).",
)
@click.option(
    "--witness-key",
    "witness_key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The witness's Ed25519 public key (PEM or 32 raw bytes): check the co-signatures.",
)
@click.option(
    "--witness-state",
    "witness_state_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The witness's own state folder: its pins survive a rollback of the co-signatures.",
)
@click.option(
    "--tsa-bundle",
    "tsa_bundle_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trusted TSA certificates (PEM, or one DER): authenticate the RFC 3161 anchors.",
)
@json_option
@click.pass_obj
def bernstein_audit_verify(
    app: AppContext,
    audit_key_file: Path | None,
    witness_key_file: Path | None,
    witness_state_dir: Path | None,
    tsa_bundle_file: Path | None,
    as_json: bool,
) -> int:
    """What `bernstein audit verify` says of the imported .sdd/audit: its exit code.

    \b
    The pillars that read the audit folder are redone on the imported bytes: the HMAC
    chain, the Merkle seal, the signed checkpoints, the RFC 3161 anchors (their TSAs
    authenticated with --tsa-bundle, as bernstein's --rfc3161-trusted-tsa-bundle) and the
    witness co-signatures (with --witness-key; --witness-state adds the witness's own
    pins). Exit 0 when they pass, 1 when one fails or no audit folder was
    imported (bernstein's codes, not agentledger's); 64 for a bundle that holds no
    certificate. Pillars whose files exist but are not redone are listed: the code may
    then differ from bernstein's. `verify` (strict) reports the same evidence as
    findings, and more.

    \b
    Examples:
      agentledger bernstein audit-verify --audit-key audit.key
      agentledger bernstein audit-verify --audit-key audit.key --witness-key w.pub --json
      agentledger bernstein audit-verify --audit-key audit.key --tsa-bundle tsa-roots.pem
    """
    arguments.audit_key_file(audit_key_file)
    master = None
    if audit_key_file is not None:
        master = read_master_key(read_capped(audit_key_file, MAX_KEY_FILE_BYTES, "a key"))
    witness = None
    if witness_key_file is not None:
        arguments.input_file(witness_key_file, "--witness-key")
        try:
            witness = witness_key(read_capped(witness_key_file, MAX_KEY_FILE_BYTES, "a key"))
        except ValueError as exc:
            raise InvalidInput(f"--witness-key {witness_key_file}: {exc}", code="bad-key") from None
    tsa_bundle = arguments.tsa_bundle(tsa_bundle_file)
    witness_state = None
    if witness_state_dir is not None:
        witness_state = folder_reader(arguments.input_folder(witness_state_dir, "--witness-state"))
    with app.open_ledger(readonly=True) as ledger, ledger.db.snapshot() as conn:
        verdict = audit_verdict(
            LedgerWorkdir(conn, ledger.blobs),
            master,
            witness=witness,
            witness_state=witness_state,
            tsa_bundle=tsa_bundle,
        )
    if as_json:
        emit_json(verdict.to_json())
        return verdict.code
    console = app.console
    if not verdict.audit_dir:
        console.print("no .sdd/audit imported (bernstein: audit directory not found)")
    for pillar in verdict.pillars:
        mark = "[green]passed[/]" if pillar.ok else "[red]FAILED[/]"
        console.print(styled("{name}: " + mark, name=pillar.name))
        for problem in pillar.problems[:20]:
            console.print(Text(f"  {safe(problem)}"))
    for name in verdict.not_reproduced:
        console.print(styled("[yellow]not redone[/] {name}: its files exist", name=name))
    console.print(f"bernstein audit verify would exit {verdict.code}")
    return verdict.code


@bernstein_group.command("seal-verify")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--tsa-bundle",
    "tsa_bundle_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Trusted TSA certificates (PEM, or one DER): without them nothing verifies.",
)
@json_option
@click.pass_obj
def bernstein_seal_verify(
    app: AppContext, run_id: str, tsa_bundle_file: Path | None, as_json: bool
) -> int:
    """What `bernstein seal verify` says of an imported run's seal anchor.

    \b
    Exit codes are bernstein's: 0 only when the anchor is verified (the journal still
    ends at the head it names, and its RFC 3161 token was signed over that head by a TSA
    --tsa-bundle vouches for); 1 otherwise (no anchor, unreadable, mismatched head, no
    bundle, invalid token). A transparency-log anchor is not redone (exit 65).

    \b
    Examples:
      agentledger bernstein seal-verify run-001 --tsa-bundle tsa-roots.pem
      agentledger bernstein seal-verify run-001 --tsa-bundle tsa-roots.pem --json
    """
    trusted = arguments.tsa_bundle(tsa_bundle_file)
    with app.open_ledger(readonly=True) as ledger, ledger.db.snapshot() as conn:
        workdir = LedgerWorkdir(conn, ledger.blobs)
        journal = workdir.runs.get(run_id, journal_path(run_id))
        ours = valid_run_id(run_id)
        data = workdir.read(seal_anchor_path(journal)) if ours else None
        rows = workdir.read(journal) if ours and data is not None else None
    head = str(_core.bernstein_verify_journals([rows])[0]["head"]) if rows is not None else ""
    verdict = seal_verdict(data, head, trusted)
    if as_json:
        emit_json(
            {
                "run": run_id,
                "status": verdict.status,
                "head_sha256": head,
                "anchored_head_sha256": verdict.anchored_head,
                "tsa_subject": verdict.tsa_subject,
                "errors": verdict.errors,
                "exit_code": verdict.code,
            }
        )
    else:
        app.console.print(
            styled("seal anchor of {run}: {status}", run=run_id, status=verdict.status)
        )
        for error in verdict.errors:
            app.console.print(Text(f"  {safe(error)}"))
    if verdict.code is None:
        raise InvalidInput(
            "this anchor's verdict is not reproduced here: " + "; ".join(verdict.errors),
            code="not-reproduced",
        )
    return verdict.code


@bernstein_group.command("replay-verify")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--audit-key",
    "audit_key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="bernstein's audit master key: without it the spine's seal is not trusted.",
)
@json_option
@click.pass_obj
def bernstein_replay_verify(
    app: AppContext, run_id: str, audit_key_file: Path | None, as_json: bool
) -> int:
    """What `bernstein replay RUN --verify` says of an imported run's journal.

    \b
    Exit codes are bernstein's: 0 when the chain is intact and reaches the head the
    lineage spine sealed (verified), or no trustworthy seal exists (unverifiable:
    no spine, no --audit-key, or a spine that fails its own verify); 1 when the chain
    breaks, a line is discarded, the journal is missing, or the sealed head is another.
    Journals with provider-state rows are not redone (exit 65).

    \b
    Examples:
      agentledger bernstein replay-verify run-001 --audit-key audit.key
      agentledger bernstein replay-verify run-001 --audit-key audit.key --json
    """
    arguments.audit_key_file(audit_key_file)
    master = None
    if audit_key_file is not None:
        master = read_master_key(read_capped(audit_key_file, MAX_KEY_FILE_BYTES, "a key"))
    with app.open_ledger(readonly=True) as ledger, ledger.db.snapshot() as conn:
        workdir = LedgerWorkdir(conn, ledger.blobs)
        ours = valid_run_id(run_id)
        journal = workdir.read(workdir.runs.get(run_id, journal_path(run_id))) if ours else None
        spine = workdir.read(spine_path(run_id)) if ours else None
        head_file = workdir.read(spine_head_path(run_id)) if ours else None
    verdict = replay_verdict(journal, spine, head_file, master)
    if as_json:
        emit_json(
            {
                "run": run_id,
                "status": verdict.status,
                "head": verdict.head,
                "sealed_head": verdict.sealed_head,
                "errors": verdict.errors,
                "exit_code": verdict.code,
            }
        )
    else:
        app.console.print(styled("journal of {run}: {status}", run=run_id, status=verdict.status))
        for error in verdict.errors:
            app.console.print(Text(f"  {safe(error)}"))
    if verdict.code is None:
        raise InvalidInput(
            "this journal's verdict is not reproduced here: " + "; ".join(verdict.errors),
            code="not-reproduced",
        )
    return verdict.code


@bernstein_group.command("receipt-verify")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--public-key",
    "public_key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The operator's Ed25519 public key (PEM): the provenance tier.",
)
@click.option(
    "--key-chain",
    "key_chain_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="bernstein's signed key-succession chain; --public-key is then its pinned root.",
)
@click.option(
    "--signed-at",
    "signed_at",
    metavar="INSTANT",
    help="With --key-chain: when the receipt was signed (ISO-8601 with an offset).",
)
@click.option(
    "--require-provenance", is_flag=True, help="Exit 3 unless the provenance tier is reached."
)
@json_option
@click.pass_obj
def bernstein_receipt_verify(
    app: AppContext,
    run_id: str,
    public_key_file: Path | None,
    key_chain_file: Path | None,
    signed_at: str | None,
    require_provenance: bool,
    as_json: bool,
) -> int:
    """What `bernstein verify receipt` says of an imported run's run-receipt.json.

    \b
    Exit codes are bernstein's: 0 it verifies (tier integrity-only, or provenance with
    --public-key), 1 malformed, 2 tampered (or another key than the pinned one),
    3 --require-provenance without the provenance tier, 4 with --key-chain a key the
    chain (rooted at --public-key) does not trust. 1 also when the run has no
    imported receipt. Embedded audit ranges, loaded extension sets and the jcs-v2
    profile are redone; a receipt this does not redo (a jcs-v2 binding with an integer
    beyond 2**53) exits 65 and says so.

    \b
    Examples:
      agentledger bernstein receipt-verify run-001
      agentledger bernstein receipt-verify run-001 --public-key op.pem --require-provenance
      agentledger bernstein receipt-verify run-001 --public-key root.pem --key-chain chain.json
    """
    pem: bytes | None = None
    if public_key_file is not None:
        arguments.input_file(public_key_file, "--public-key")
        pem = read_capped(public_key_file, MAX_KEY_FILE_BYTES, "a key")
    key_chain = None
    if key_chain_file is not None:
        arguments.input_file(key_chain_file, "--key-chain")
        chain = read_capped(key_chain_file, MAX_DOCUMENT_BYTES, "a key chain")
        # The pin is then the chain's root, read (and judged) by the chain's walk.
        key_chain = KeyChain(chain, pem, signed_at)
    with app.open_ledger(readonly=True) as ledger, ledger.db.snapshot() as conn:
        workdir = LedgerWorkdir(conn, ledger.blobs)
        path = receipt_path(workdir.runs.get(run_id, journal_path(run_id)))
        data = workdir.read(path) if valid_run_id(run_id) else None
    if data is None:
        raise NotFound(f"no imported run receipt for run {run_id!r}")
    verdict = verify_receipt(data, pem, key_chain)
    code = verdict.code(require_provenance)
    if as_json:
        emit_json(
            {
                "run": run_id,
                "status": verdict.status,
                "tier": verdict.tier,
                "errors": verdict.errors,
                "divergent_step": verdict.divergent_step,
                "key_verdict": verdict.key_verdict,
                "exit_code": code,
            }
        )
    else:
        app.console.print(
            styled("run receipt of {run}: {status}", run=run_id, status=verdict.status)
        )
        if verdict.tier is not None:
            app.console.print(styled("tier: {tier}", tier=verdict.tier))
        if verdict.key_verdict is not None:
            app.console.print(styled("key: {verdict}", verdict=verdict.key_verdict))
        for error in verdict.errors:
            app.console.print(Text(f"  {safe(error)}"))
    if code is None:
        raise InvalidInput(
            "this receipt's verdict is not reproduced here: " + "; ".join(verdict.errors),
            code="not-reproduced",
        )
    return code
