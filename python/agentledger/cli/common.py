"""Helpers command modules share: reading a JSON document argument, and the plumbing of
every verifying command (options, progress bar, the report at the end).

Command modules import this module, ``context`` (the invocation's state, the command
classes) and ``arguments`` (file arguments); never ``app`` nor one another: ``app``
imports them, from its ``COMMANDS`` table. No rich, ledger or verifier at module level:
``phase`` and ``activity record`` load this module without verifying anything.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from agentledger.cli.context import AppContext, F, emit_json
from agentledger.display import safe
from agentledger.errors import InvalidInput
from agentledger.limits import MAX_DOCUMENT_BYTES, MAX_SQLITE_INT, read_capped

if TYPE_CHECKING:
    from agentledger.ledger import Ledger
    from agentledger.verify import Progress as ProgressCallback
    from agentledger.verify import VerifyOptions, VerifyReport


# ---- a JSON document argument --------------------------------------------------------------


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:  # JSON.parse keeps the last one silently; a ledger refuses
            raise ValueError(f"duplicate key {key!r}")
        document[key] = value
    return document


def parse_json_document(data: bytes, name: str) -> Any:
    """``data`` parsed as strict JSON: UTF-8 without a BOM, no ``NaN`` or ``Infinity``, no
    key twice in one object (docs/FORMAT.md §1). Anything else is :class:`InvalidInput`
    (exit 65), naming ``name``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInput(f"{name}: not UTF-8 (byte offset {error.start})") from None
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise InvalidInput(
            f"{name}: malformed JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    except (ValueError, RecursionError) as error:
        raise InvalidInput(f"{name}: malformed JSON: {error}") from None


def read_json_document(path: Path) -> Any:
    """Parse a JSON file (``-`` for stdin) with :func:`parse_json_document`.

    A missing or unreadable file is :class:`BadArgument` (exit 64); anything not strict
    JSON (``NaN``, ``Infinity``, a BOM, invalid UTF-8, a repeated key) is
    :class:`InvalidInput` (exit 65).
    """
    name = "stdin" if str(path) == "-" else str(path)
    return parse_json_document(read_capped(path, MAX_DOCUMENT_BYTES, "a JSON document"), name)


# ---- verifying commands (verify, activity verify, demo, checkpoint, fsck) -----------------


@contextmanager
def progress_bar(app: AppContext, total: int) -> Iterator[ProgressCallback | None]:
    """A live bar on stderr, only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    # Loaded only for a terminal's bar: piped and --json runs never need it.
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

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
    # A file whose schema is not ours is read no further than verify's finding. The cached
    # heads only size the progress bar: summed as a float (total()), an edited one past
    # 2**63 is verify's finding (run.head_seq), not SQLite's "integer overflow".
    total = (
        0
        if ledger.db.schema_findings
        else ledger.db.scalar("SELECT total(max(head_seq, -1) + 1) FROM runs")
    )
    with progress_bar(app, int(min(total or 0, MAX_SQLITE_INT))) as progress:
        return ledger.verify(run_ids, progress=progress, options=options)


trust_option = click.option(
    "--trust",
    "trust",
    multiple=True,
    metavar="KEY",
    help="Trust this signer: 'ed25519:<64 hex>' or a file holding it (repeatable).",
)
"""``--trust KEY``: a signer trusted for this command only (verify, show, ...)."""


def verify_options(command: F) -> F:
    """The options every verifying command shares (keys come from outside the ledger)."""
    decorators = [
        trust_option,
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


html_option = click.option(
    "--html",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Also write the report as a standalone HTML file.",
)
"""``--html FILE``: the report also as a standalone HTML document (verify, fleet verify)."""

JOBS_PER_CORE = 4


def capped_jobs(app: AppContext, jobs: int, option: str = "--jobs") -> int:
    """At most 4 threads (or worker processes) per core: more only queue on the same cores
    (and cost memory; a hundred thousand processes never even start)."""
    limit = JOBS_PER_CORE * (os.cpu_count() or 1)
    if jobs > limit:
        app.err_console.print(
            f"note: {option} {jobs} capped to {limit} ({JOBS_PER_CORE}x the"
            f" {limit // JOBS_PER_CORE} cores)",
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
    """Print a verify report (``--json``, or the terminal report), write ``--html``; the exit
    code is the report's."""
    # The report renderers (and rich) load after the verify they show, and only for the
    # output asked for: commands that share this module without verifying (phase, activity
    # record) never import them, nor does a verify that prints JSON alone.
    if html is not None:
        from agentledger.report import write_html

        write_html(report, html)
    if as_json:
        emit_json(report.to_json())
    else:
        from rich.text import Text

        from agentledger.report import report_renderable

        app.human_console(width).print(report_renderable(report))
        if html is not None:
            app.err_console.print(Text(f"HTML report written to {safe(str(html))}"))
    return int(report.code)
