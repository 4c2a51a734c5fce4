"""`checkpoint`, `prove`, `verify-proof`, `archive`, `gc`, `fsck`, `log export`: the workspace
log at work."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from agentledger import _core
from agentledger import archive as archives
from agentledger import gc as collector
from agentledger.checkpoint import latest, take_checkpoint
from agentledger.cli import arguments
from agentledger.cli.common import run_verify, trust_option, verify_options
from agentledger.cli.console import styled
from agentledger.cli.context import AppCommand, AppContext, AppGroup, emit_json, json_option
from agentledger.display import safe
from agentledger.errors import ExitCode, InvalidInput, LedgerError
from agentledger.ids import utc_timestamp
from agentledger.keys import KeyStore, resolve_trust
from agentledger.ledger import Ledger
from agentledger.limits import MAX_DOCUMENT_BYTES, MAX_SQLITE_INT, read_capped
from agentledger.proofs import Proof, parse_proof, prove, verify_proof
from agentledger.report import report_renderable
from agentledger.signer_memory import SignerMemory
from agentledger.signing import require_clean
from agentledger.verify import VerifyOptions


def _checkpoint_json(stored: Any) -> dict[str, Any]:
    note = stored.checkpoint
    return {
        "id": stored.id,
        "ledger": note.ledger_id,
        "size": note.size,
        "root": ("blake3:" if note.legacy else "sha256:") + note.root.hex(),
        "time": note.time,
        "note": note.text(),
    }


@click.command(cls=AppCommand)
@click.option(
    "--export",
    "export_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the newest checkpoint to FILE (keep it elsewhere: verify --checkpoint).",
)
@click.option(
    "--adopt",
    is_flag=True,
    help="Sign a ledger nothing signed vouches for yet (one from before checkpoints), after "
    "a whole verify whose only finding is that missing checkpoint.",
)
@click.option(
    "--adopt-restored",
    "adopt_restored",
    is_flag=True,
    help="This file is a backup restored on purpose: make its (older) log what this install "
    "vouches for, after a whole verify whose only finding is that rollback.",
)
@json_option
@click.pass_obj
def checkpoint(
    app: AppContext, export_file: Path | None, adopt: bool, adopt_restored: bool, as_json: bool
) -> int:
    """Sign a checkpoint of the workspace log (if it grew) and show the newest.

    Checkpoints are also taken automatically at the end of every write transaction that
    appends entries. Nothing is signed unless the log extends what this install already
    signed or verified (exit 2 otherwise); --export first verifies the whole ledger and
    refuses one that does not verify clean (exit 2). Exit 1 when there is no ledger.

    \b
    A backup restored on purpose is older than what this install signed: every signature
    (an append's too) is refused until `--adopt-restored` makes it the base again.

    \b
    Examples:
      agentledger checkpoint --export cp.txt   # keep cp.txt elsewhere
      agentledger verify --checkpoint cp.txt   # later: the ledger must extend it
      agentledger checkpoint --adopt-restored  # after restoring a backup on purpose
    """
    if export_file is not None:
        arguments.output_file(export_file, "--export", key_home=app.key_home)
    if adopt_restored:
        with app.open_ledger() as ledger:
            forgotten = adopt_restored_backup(ledger)
        if forgotten is not None:
            app.err_console.print(
                f"restored backup adopted: what this install vouched for before is kept in "
                f"{safe(str(forgotten))}"
            )
        adopt = True
    with app.open_ledger() as ledger:
        if export_file is not None:
            # An exported checkpoint is what a reviewer will hold the ledger to: only a
            # ledger that verifies clean is exported.
            require_clean(ledger, "export its checkpoint")
        stored = latest(ledger) if ledger.db.readonly else take_checkpoint(ledger, adopt=adopt)
    text = stored.checkpoint.text()
    if export_file is not None:
        export_file.write_text(text, encoding="utf-8")
    if as_json:
        emit_json({**_checkpoint_json(stored), "exported": str(export_file or "") or None})
    else:
        # Verbatim (a wrapped signature line would not verify), unless the note holds what
        # a terminal would act on (a hostile signer name): then escaped, lines kept.
        click.echo("\n".join(safe(line) for line in text.split("\n")), nl=False)
        if export_file is not None:
            app.err_console.print(f"checkpoint written to {export_file}")
    return int(ExitCode.OK)


def adopt_restored_backup(ledger: Ledger) -> Path | None:
    """Make a legitimately restored (older) ledger what this install vouches for.

    This install's memory of the ledger id (what it signed and verified, newer than the
    backup) is set aside first — renamed, kept for review, before this process reads it —
    so that what follows is a first signature: a whole verify, and a signature only if the
    ledger verifies clean (``checkpoint --adopt``). Refused (``Diverged``, nothing signed),
    the memory is put back. Returns where it went (None when there was none).
    """
    memory = SignerMemory(ledger.keys.home, ledger.id)
    if not memory.usable or not memory.path.exists():
        return None
    kept = memory.path.with_name(f"{memory.path.stem}.before-restore-{utc_timestamp()}.json")
    memory.path.rename(kept)
    try:
        require_clean(ledger, "adopt it as a restored backup", frozenset({"checkpoint.missing"}))
        take_checkpoint(ledger, adopt=True)
    except BaseException:
        kept.replace(memory.path)
        raise
    return kept


@click.command("prove", cls=AppCommand)
@click.argument("run_id", metavar="RUN")
@click.argument("seq", type=click.IntRange(min=0, max=MAX_SQLITE_INT), metavar="SEQ")
@trust_option
@json_option
@click.pass_obj
def prove_command(
    app: AppContext, run_id: str, seq: int, trust: tuple[str, ...], as_json: bool
) -> int:
    """Print a self-contained proof that entry SEQ of RUN is in the signed log.

    The proof is a C2SP tlog-proof (c2sp.org/tlog-proof@v1) whose extra line carries the
    entry's bytes; --json prints the same proof as a JSON bundle. Check it anywhere,
    without the ledger: `agentledger verify-proof PROOF --trust KEY`, or with any C2SP
    verifier and the key from `agentledger keys export --vkey`. Exit 1 when the run, the
    entry or a checkpoint covering it does not exist; exit 2 when the newest checkpoint is
    not signed by a trusted key (this install's, or --trust: a reviewer proving from an
    archive names its signer) or the log does not hold the entry.

    \b
    Examples:
      agentledger prove run-7 3 > entry.tlog-proof
      agentledger prove run-7 0 --json | agentledger verify-proof - --trust ed25519:…
      agentledger --ledger review.db prove run-7 3 --trust ed25519:…
    """
    with app.open_ledger(readonly=True) as ledger:
        ledger.get_run(run_id)
        proof = prove(ledger, run_id, seq, trust)
    if as_json:
        emit_json(proof.bundle())
    else:
        # As `checkpoint` shows the note: verbatim, unless a line of it (a signature line
        # added to the stored note) holds what a terminal would act on.
        click.echo("\n".join(safe(line) for line in proof.text().split("\n")), nl=False)
    return int(ExitCode.OK)


def _signatures(proof: Proof) -> list[dict[str, str]]:
    """Who signed the proof's checkpoint: each signature's note name and key id."""
    from agentledger.notes import Checkpoint  # verify-proof only

    return [
        {"name": s.name, "key_id": s.key_id.hex()}
        for s in Checkpoint.parse(proof.checkpoint).signatures
    ]


def _claims_a_trusted_key(proof: Proof, trusted: set[str]) -> bool:
    """Whether a signature names a trusted key (then it failed over changed text: asking
    the user to trust that key would send them the wrong way)."""
    from agentledger.notes import Checkpoint  # verify-proof only

    return Checkpoint.parse(proof.checkpoint).claimed_by(sorted(trusted)) is not None


def _proven_entry(proof: Proof) -> dict[str, Any]:
    """The proven entry's run, seq, kind, time and body (read once the proof checked out)."""
    doc = json.loads(proof.entry)
    return {k: doc.get(k) for k in ("run", "seq", "kind", "ts", "body")}


@click.command("verify-proof", cls=AppCommand)
@click.argument("proof_file", metavar="PROOF", type=click.Path(path_type=Path))
@click.option(
    "--trust",
    "trust",
    multiple=True,
    metavar="KEY",
    help="Trust this signer: 'ed25519:<64 hex>', a verifier key, or a file (repeatable).",
)
@json_option
@click.pass_obj
def verify_proof_command(
    app: AppContext, proof_file: Path, trust: tuple[str, ...], as_json: bool
) -> int:
    """Check a proof offline: entry bytes, leaf, inclusion proof, checkpoint signature.

    PROOF is a tlog-proof (`prove`) or a JSON proof bundle (`prove --json`, and earlier
    versions'). No ledger is needed (`-` reads stdin). On success it prints what the
    proven entry says. Exit 0 when it verifies against a trusted key, 2 when it does not
    (an untrusted signer is named, with how to trust it), 64 when the file is missing,
    65 when it is not a proof.

    \b
    Examples:
      agentledger verify-proof entry.tlog-proof --trust ed25519:3b6a…
      agentledger verify-proof proof.json --trust signers.txt --json
      agentledger prove run-7 3 | agentledger verify-proof - --trust ed25519:3b6a…
    """
    arguments.input_file(proof_file, "PROOF")
    trust = arguments.trust_values(trust)
    proof = parse_proof(read_capped(proof_file, MAX_DOCUMENT_BYTES, "a proof"))
    trusted = resolve_trust(trust, KeyStore(app.key_dir))
    try:
        verdict = verify_proof(proof, trusted)
    except _core.CanonicalizationError as exc:  # e.g. NaN in the entry's bytes
        raise InvalidInput(
            f"{proof_file}: the proven entry holds what JSON cannot represent ({exc})",
            code="malformed-proof",
        ) from None
    signatures = _signatures(proof)
    entry = _proven_entry(proof) if verdict.ok else None
    if as_json:
        emit_json({**verdict.to_json(), "signatures": signatures, "entry": entry})
    elif verdict.ok and entry is not None:
        console = app.console
        console.print(
            Text(
                f"✓ entry {verdict.seq} of run {verdict.run} is leaf {verdict.leaf_index} of "
                f"the log {verdict.origin} of {verdict.tree_size:,} entries signed by "
                f"{verdict.signer}",
                style="green",
            )
        )
        body = json.dumps(entry["body"], ensure_ascii=False, sort_keys=True)
        console.print(Text.assemble(("  run  ", "dim"), str(entry["run"])))
        console.print(Text.assemble(("  seq  ", "dim"), str(entry["seq"])))
        console.print(Text.assemble(("  kind ", "dim"), (str(entry["kind"]), "cyan")))
        console.print(Text.assemble(("  time ", "dim"), str(entry["ts"])))
        console.print(Text.assemble(("  body ", "dim"), body))
    else:
        for problem in verdict.problems:
            app.console.print(Text(f"✗ {problem}", style="red"))
        if verdict.signer is None and not _claims_a_trusted_key(proof, trusted):
            for signature in signatures:
                app.console.print(
                    Text(
                        f"  signed by {signature['name']} (key id {signature['key_id']}): "
                        "not a key you trust. On the signing machine, `agentledger keys "
                        "export` prints its public key (`--vkey` its verifier key); pass it "
                        "with --trust KEY (or `agentledger keys trust KEY` once).",
                        style="yellow",
                    )
                )
    return int(ExitCode.OK if verdict.ok else ExitCode.DIVERGED)


@click.command("archive", cls=AppCommand)
@click.argument("out", metavar="OUT.db", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("run_ids", metavar="[RUN]...", nargs=-1)
@click.option("--since", metavar="DATE", help="Only runs with an entry at or after DATE (ISO).")
@json_option
@click.pass_obj
def archive_command(
    app: AppContext, out: Path, run_ids: tuple[str, ...], since: str | None, as_json: bool
) -> int:
    """Write a standalone, sealed single-file archive of RUNs (default: every run).

    The archive holds the runs' entries byte for byte, the blobs they reach, their other
    rows, and its own signed checkpoint. Verify it anywhere with only the public key:
    `agentledger --ledger OUT.db verify --all --trust KEY`. Archives open read-only.

    \b
    Examples:
      agentledger archive review.db run-7
      agentledger archive q3.db --since 2025-07-01 --json
      agentledger --ledger review.db verify --all --trust ed25519:3b6a…
    """
    arguments.output_file(out, "OUT.db", key_home=app.key_home, makes_folder=True)
    with app.open_ledger() as ledger:
        runs = archives.select_runs(ledger, run_ids, since)
        summary = archives.write_archive(ledger, out, runs)
    if as_json:
        emit_json(summary.to_json())
    else:
        app.console.print(
            styled(
                f"archived {len(summary.runs):,} run(s), {summary.entries:,} entries, "
                f"{summary.blobs:,} blob(s) to [bold]{{path}}[/]",
                path=summary.path,
            )
        )
    return int(ExitCode.OK)


@click.command("gc", cls=AppCommand)
@click.option("--dry-run", is_flag=True, help="Only report what would be removed.")
@click.option(
    "--grace",
    "grace_s",
    type=click.FloatRange(min=0, max=1e12),
    callback=lambda _ctx, _param, value: _finite(value),
    default=collector.DEFAULT_GRACE_S,
    show_default=True,
    help="Never collect a blob stored less than this many seconds ago.",
)
@json_option
@click.pass_obj
def gc_command(app: AppContext, dry_run: bool, grace_s: float, as_json: bool) -> int:
    """Delete blobs no run, receipt or record reaches; sign a prune receipt of them.

    \b
    Examples:
      agentledger gc --dry-run
      agentledger gc --grace 3600 --json
    """
    # A dry run writes nothing: opened read-only, it cannot even switch the journal mode
    # of a file left in rollback mode (an archive's, or one whose seal row was removed).
    with app.open_ledger(readonly=dry_run) as ledger:
        result = collector.collect(ledger, dry_run=dry_run, grace_s=grace_s)
    if as_json:
        emit_json(result.to_json())
        return int(ExitCode.OK)
    verb = "would remove" if dry_run else "removed"
    app.console.print(
        f"{result.reachable:,} reachable blob(s); {verb} {len(result.removed):,} "
        f"({result.bytes_freed:,} bytes); kept {len(result.kept_young):,} too young to collect"
    )
    if result.receipt_id is not None:
        app.console.print(f"prune receipt {result.receipt_id} signed and recorded", style="dim")
    return int(ExitCode.OK)


def _finite(value: float) -> float:
    if value != value:  # NaN passes every range comparison
        raise click.BadParameter("not a number of seconds")
    return value


@click.command("fsck", cls=AppCommand)
@verify_options
@json_option
@click.pass_obj
def fsck(
    app: AppContext,
    trust: tuple[str, ...],
    audit_key_file: Path | None,
    compat: str | None,
    as_json: bool,
) -> int:
    """Run every check there is: SQLite's integrity and foreign keys, every checkpoint ever
    taken (signature, and the log still hashing to its root), a full verify, orphan blobs.

    Exit 0 when everything is sound, 2 when anything is damaged or diverged.

    \b
    Examples:
      agentledger fsck
      agentledger fsck --trust ed25519:3b6a… --json
    """
    options = VerifyOptions(
        trust=arguments.trust_values(trust),
        audit_key_file=arguments.audit_key_file(audit_key_file),
        compat=compat,
    )
    with app.open_ledger(readonly=True) as ledger:
        findings = collector.storage_checks(ledger)
        report = run_verify(app, ledger, None, options)
        orphans: list[str] = []
        # Unreferenced blobs are looked for in a file verify could read: not in one whose
        # schema is not ours, nor past text that is not UTF-8 (verify reported both).
        if not ledger.db.schema_findings:
            with contextlib.suppress(LedgerError), ledger.db.snapshot() as conn:
                # A name that is not text names no blob (a damaged row; verify names it).
                named = "SELECT digest FROM blobs WHERE typeof(digest) = 'text'"
                orphans = sorted(
                    {row[0] for row in conn.execute(named)} - collector.reachable_blobs(conn)
                )
    # Every stored checkpoint is checked by verify itself (its signature, and the log's
    # root at its size): the same findings, in the same words.
    history = [
        f"{d.subject}: {d.check}: expected {d.expected}, actual {d.actual}"
        for d in report.workspace
        if d.check.startswith("checkpoint.")
    ]
    code = ExitCode.DIVERGED if findings else ExitCode(report.code)
    if as_json:
        emit_json(
            {
                "code": int(code),
                "sqlite": findings,
                "checkpoints": history,
                "verify": report.to_json(),
                "orphan_blobs": orphans,
            }
        )
        return int(code)
    table = Table(show_edge=False, show_header=False)
    table.add_row("sqlite integrity", "ok" if not findings else "\n".join(findings[:20]))
    table.add_row("checkpoint history", "ok" if not history else "\n".join(history[:20]))
    # Collecting a diverged ledger would destroy evidence (and gc refuses it).
    hint = " (collect with `agentledger gc`)" if code == ExitCode.OK and orphans else ""
    table.add_row("orphan blobs", f"{len(orphans)}{hint}")
    app.console.print(table)
    app.console.print(report_renderable(report))
    return int(code)


@click.group("log", cls=AppGroup)
def log_group() -> None:
    """The workspace log as a C2SP log (tlog-tiles): export it as static files.

    \b
    Examples:
      agentledger log export /srv/ledger-log
      agentledger log export /srv/ledger-log --json
    """


@log_group.command("export", cls=AppCommand)
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--since",
    type=click.IntRange(min=0, max=MAX_SQLITE_INT),
    metavar="SIZE",
    help="Write only the tiles holding leaves from SIZE on (default: from the size of the "
    "checkpoint DIR already holds).",
)
@json_option
@click.pass_obj
def log_export_command(app: AppContext, folder: Path, since: int | None, as_json: bool) -> int:
    """Write the log, as of its newest checkpoint, as static C2SP tlog-tiles files.

    DIR gets `checkpoint`, `tile/<L>/<N>[.p/<W>]` and `tile/entries/<N>[.p/<W>]`, served
    as they are by any web server or object store; a C2SP client (Go's sumdb/tlog, a
    monitor, a witness) reads them with the key from `agentledger keys export --vkey`.
    A second export writes only the new tiles and the new checkpoint (full tiles are
    never rewritten). Exit 1 without a ledger or checkpoint, 2 when DIR holds a log this
    ledger does not extend (or another ledger's) or when the newest checkpoint is not
    signed by a key this install trusts, 64 when DIR cannot be written.

    \b
    Examples:
      agentledger log export /srv/ledger-log
      agentledger log export /srv/ledger-log --json   # what was written
    """
    from agentledger.log_export import export  # this command only

    arguments.output_tree(folder, "DIR", key_home=app.key_home, first="checkpoint")
    with app.open_ledger(readonly=True) as ledger:
        summary = export(ledger, folder, since=since)
    if as_json:
        emit_json(summary.to_json())
    else:
        app.console.print(
            styled(
                "exported a log of {size} entries to [bold]{folder}[/]: {tiles} tiles, "
                "{bundles} entry bundles, {bytes} bytes written (previous export: {previous})",
                size=f"{summary.size:,}",
                folder=summary.folder,
                tiles=len(summary.tiles),
                bundles=len(summary.entry_bundles),
                bytes=f"{summary.bytes_written:,}",
                previous=f"{summary.previous_size:,} entries",
            )
        )
    return int(ExitCode.OK)
