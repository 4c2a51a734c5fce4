"""`init`, `append`, `runs`, `show`: create a ledger, write to it from the shell, look inside."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw
import click

from agentledger.bookkeeping import BERNSTEIN_RUN, GC_RUN, TEAM_RUN
from agentledger.cli import arguments
from agentledger.cli.common import parse_json_document, trust_option
from agentledger.cli.context import AppCommand, AppContext, emit_json, json_option, width_option
from agentledger.display import json_text, safe, shorten
from agentledger.errors import AgentLedgerError, Diverged, ExitCode, InvalidInput
from agentledger.ids import check_run_id
from agentledger.journal import Entry, check_appendable_kind, hash_text
from agentledger.ledger import Ledger
from agentledger.limits import MAX_DOCUMENT_BYTES, MAX_SQLITE_INT, read_capped
from agentledger.run_status import current_log, notes_match, readable, status_path

if TYPE_CHECKING:
    from rich.text import Text
    from rich.tree import Tree

    from agentledger.verify import VerifyReport
    from agentledger.verify.marks import Mark, RunMarks

INTERNAL_RUNS = (BERNSTEIN_RUN, GC_RUN, TEAM_RUN)
"""Bookkeeping runs ``runs`` lists only with --all (never a run an agent wrote)."""

HASH_WIDTH = 18
BODY_CHARS = 200


def short(digest: object) -> str:
    """A digest cut for a listing (``show --json`` and ``verify`` give it whole); a tampered
    body may hold any JSON value where a digest belongs: shown as text."""
    if not digest:
        return "-"
    text = digest if isinstance(digest, str) else str(digest)
    return safe(text[: len("blake3:") + HASH_WIDTH - 7]) + "…"


@click.command(cls=AppCommand)
@json_option
@click.pass_obj
def init(app: AppContext, as_json: bool) -> None:
    """Create the ledger file (and its folder) if it does not exist.

    The file is made 0600 (readable by you only), also when it existed and was empty.

    \b
    Examples:
      agentledger init
      agentledger --ledger ws/ledger.db init --json
      AGENTLEDGER_LEDGER=ws/ledger.db agentledger init
    """
    path = app.ledger_path
    was_empty = path.exists() and path.is_file() and path.stat().st_size == 0
    with app.open_ledger(create=True) as ledger:
        # Created by this process only if it made the schema: with inits racing, each saw
        # the file absent or empty, and only one of them created the ledger.
        created = ledger.db.upgraded_from == 0
        info = {"ledger": str(ledger.path), "id": ledger.id, "created": created}
    if was_empty:
        os.chmod(path, 0o600)  # an empty file someone made is a new ledger: ours alone
    if as_json:
        emit_json(info)
    else:
        verb = "created" if info["created"] else "exists"
        from rich.text import Text

        app.console.print(
            Text.assemble(
                f"ledger {verb}: ",
                (safe(info["ledger"]), "bold"),
                f" (id {safe(info['id'])})",  # read from the file: escaped like the path
            )
        )


def _read_body(body: str | None) -> dict[str, Any]:
    """The entry body: a JSON object given as an argument, ``-`` for stdin, default ``{}``."""
    if body is None:
        return {}
    where = "stdin" if body == "-" else "BODY"
    # Read as any JSON document is: capped, so an endless pipe cannot fill memory.
    raw = (
        read_capped("-", MAX_DOCUMENT_BYTES, "an entry body")
        if body == "-"
        else body.encode("utf-8")
    )
    try:
        value = parse_json_document(raw, where)
    except InvalidInput as exc:
        raise InvalidInput(exc.message, code="invalid-body") from None
    if not isinstance(value, dict):
        raise InvalidInput(
            f"{where}: the body must be a JSON object, not {type(value).__name__}",
            code="invalid-body",
        )
    return value


def entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "run": entry.run_id,
        "seq": entry.seq,
        "kind": entry.kind,
        "hash": entry.hash,
        "prev": entry.prev,
        "ts": entry.ts,
        "body": entry.body,
    }


@click.command(cls=AppCommand)
@click.argument("run_id", metavar="RUN")
@click.argument("kind", metavar="KIND")
@click.argument("body", metavar="[BODY | -]", required=False)
@json_option
@click.pass_obj
def append(app: AppContext, run_id: str, kind: str, body: str | None, as_json: bool) -> None:
    """Append one entry to RUN from the shell; the run exists once it has an entry.

    BODY is a JSON object (default {}); `-` reads it from stdin (at most 64 MiB). The
    entry is durable when the command returns. Exit 65 for a malformed or too large body,
    kind or run id (nothing written).

    \b
    Examples:
      agentledger append run-7 task_claimed '{"task": "t-1"}'
      echo '{"n": 2}' | agentledger append run-7 step - --json
      agentledger append run-7 note
    """
    # Every check of the input before the file is opened: a refused append never creates
    # the ledger it names.
    check_run_id(run_id)
    check_appendable_kind(kind)
    document = _read_body(body)
    with app.open_ledger(create=True) as ledger:
        entry = ledger.run(run_id).append(kind, document)
    if as_json:
        emit_json(entry_json(entry))
    else:
        click.echo(f"appended {entry.run_id} #{entry.seq} {entry.kind} {entry.hash}")


LAST_SEQ = "(SELECT max(e.seq) FROM entries e WHERE e.run_id = r.run_id)"
"""The run's last step as the entries table holds it (not the runs table's cache, which a
tampered file may have edited: every run is listed, with what it holds)."""
ENTRY_COUNT = "(SELECT count(*) FROM entries e WHERE e.run_id = r.run_id)"
"""The entries the file holds of the run, counted: a run with steps deleted from its middle
holds fewer than its last step + 1, and verify, show and the HTML give it that count."""
HEAD_TS = (
    "(SELECT CASE WHEN json_valid(l.bytes) THEN json_extract(l.bytes, '$.ts') END"
    f" FROM entries l WHERE l.run_id = r.run_id AND l.seq = {LAST_SEQ})"
)
"""The run's last entry's ``ts``; NULL when its stored bytes are not JSON (a tampered
entry is verify's to report: the listing still lists every run)."""

SORTS = {
    "created": "r.ordinal",
    "run": "r.run_id",
    "last": f"{HEAD_TS} DESC, r.ordinal",
    "entries": f"{ENTRY_COUNT} DESC, r.ordinal",
}

RUNS_SQL = """
SELECT json_object(
         'activities', (SELECT count(*) FROM entries a
                         WHERE a.kind = 'activity.result' AND a.run_id = r.run_id),
         'entries', {entry_count},
         'events', {entry_count},
         'head', 'blake3:' || nullif(lower(hex(r.head_hash)), ''),
         'last_entry', {head_ts},
         'run', r.run_id,
         'source', CASE WHEN b.run_id IS NULL THEN 'native' ELSE 'bernstein' END,
         'status', {status},
         'verified_at', {verified_at}
       ),
       b.run_id IS NOT NULL
  FROM {source} r LEFT JOIN bernstein_runs b ON b.run_id = r.run_id {join}
 WHERE 1 {where}
 ORDER BY {order} {limit}
"""
"""One JSON object per run, keys sorted, built by SQLite (no Python object per field)."""

UNLISTED = """(WITH RECURSIVE ids(run_id) AS (
    SELECT (SELECT min(run_id) FROM entries)
    UNION ALL
    SELECT (SELECT min(e.run_id) FROM entries e WHERE e.run_id > ids.run_id)
      FROM ids WHERE ids.run_id IS NOT NULL)
  SELECT run_id, NULL AS ordinal, NULL AS head_hash FROM ids
   WHERE run_id IS NOT NULL AND run_id NOT IN (SELECT run_id FROM runs))"""
"""Runs holding entries but no row in ``runs`` (removed from the listing: verify's
``run.unknown``), each run id found by one index seek from the one before."""

STATUS_JOIN = "LEFT JOIN run_status.run_status s ON s.run_id = r.run_id"
STATUS_KNOWN = "s.status IS NOT NULL AND s.head_hash IS r.head_hash"


def _runs_query(
    status_db: bool,
    status: str | None,
    show_all: bool,
    sort: str,
    limit: int | None,
    source: str = "runs",
) -> tuple[str, tuple[object, ...]]:
    params: list[object] = []
    where = ""
    if not show_all:
        where += f" AND r.run_id NOT IN ({','.join('?' * len(INTERNAL_RUNS))})"
        params += INTERNAL_RUNS
    status_sql = f"CASE WHEN {STATUS_KNOWN} THEN s.status ELSE 'unverified' END"
    if status is not None:
        where += f" AND {status_sql} = ?" if status_db else " AND 'unverified' = ?"
        params.append(status)
    sql = RUNS_SQL.format(
        head_ts=HEAD_TS,
        entry_count=ENTRY_COUNT,
        status=status_sql if status_db else "'unverified'",
        verified_at=f"CASE WHEN {STATUS_KNOWN} THEN s.verified_at END" if status_db else "NULL",
        source=source,
        join=STATUS_JOIN if status_db else "",
        where=where,
        order=SORTS[sort],
        limit="LIMIT ?" if limit is not None else "",
    )
    if limit is not None:
        params.append(limit)
    return sql, tuple(params)


@contextmanager
def _status_attached(ledger: Ledger, path: Path | None) -> Iterator[bool]:
    """The last-verify notes (run_status.py) attached to the ledger's connection, if any."""
    conn = ledger.db.conn
    if path is None or not readable(path) or conn.in_transaction:
        yield False
        return
    try:
        conn.execute("ATTACH DATABASE ? AS run_status", (str(path),))
    except apsw.Error:  # unreadable notes: every run reads as unverified
        yield False
        return
    try:
        yield True
    finally:
        conn.execute("DETACH DATABASE run_status")


def _run_lines(
    ledger: Ledger, status: str | None, show_all: bool, sort: str, limit: int | None
) -> Generator[str, None, None]:
    """One JSON object (text) per run, streamed from one query; an imported run's counts
    and last event time are bernstein's own (read from its journal)."""
    notes = status_path(ledger.id, ledger.path)
    with _status_attached(ledger, notes) as attached, ledger.db.snapshot() as conn:
        # Notes taken when the file held another log are another content's: not shown.
        known = attached and notes_match(conn, current_log(conn))
        sql, params = _runs_query(known, status, show_all, sort, limit)
        listed = 0
        for line, imported in conn.execute(sql, params):
            if imported:
                line = _bernstein_line(conn, line)
            listed += 1
            yield line
        if limit is not None and listed >= limit:
            return
        # Then runs whose row was removed while their entries remain: every run the file
        # holds is listed, as verify names it (the runs table is a cache).
        rest = None if limit is None else limit - listed
        sql, params = _runs_query(known, status, show_all, sort, rest, source=UNLISTED)
        for line, imported in conn.execute(sql, params):
            yield _bernstein_line(conn, line) if imported else line


def _bernstein_line(conn: Any, line: str) -> str:
    from agentledger.bernstein import view  # only for a ledger holding imported runs

    item = json.loads(line)
    found = view.journal_of(conn, item["run"])
    summary = view.summarize(found[2] or b"") if found else view.JournalSummary()
    item.update(
        events=summary.events,
        activities=summary.activities,
        discarded=summary.discarded,
        last_entry=summary.last_ts,
    )
    return json_text(item, sort_keys=True, separators=(",", ":"))


STATUS_STYLE = {"clean": "green", "diverged": "red bold", "unverified": "yellow"}
RUNS_COLUMNS = ("run", "source", "events", "activities", "last entry", "status", "head")


@click.command(cls=AppCommand)
# Bounded by what SQLite's LIMIT takes: a larger number is a usage error, not an overflow.
@click.option("--limit", type=click.IntRange(min=0, max=MAX_SQLITE_INT), help="At most N runs.")
@click.option(
    "--status",
    type=click.Choice(["clean", "diverged", "unverified"]),
    help="Only runs whose last verify found this (unverified: never, or changed since).",
)
@click.option(
    "--sort",
    type=click.Choice(list(SORTS)),
    default="created",
    show_default=True,
    help="created order, run id, last entry (newest first) or entries (most first).",
)
@click.option("--all", "show_all", is_flag=True, help="Also list internal bookkeeping runs.")
@click.option("--jsonl", is_flag=True, help="One JSON object per run per line (streams).")
@json_option
@click.pass_obj
def runs(
    app: AppContext,
    limit: int | None,
    status: str | None,
    sort: str,
    show_all: bool,
    jsonl: bool,
    as_json: bool,
) -> None:
    """List runs: entries, activities, last entry, last verify status and head hash.

    Imported bernstein runs show bernstein's own event and activity counts and last event
    time. A status is what the last `agentledger verify` of this install found for the
    run as it is now (a cache outside the ledger: $AGENTLEDGER_CACHE, default
    ~/.cache/agentledger);
    `unverified` when never verified or appended to since. Internal bookkeeping runs
    (`_bernstein`, `_gc`, `_team`) are listed only with --all. Rows stream: memory stays bounded.

    \b
    Examples:
      agentledger runs --status diverged
      agentledger runs --sort last --limit 20
      agentledger runs --jsonl | jq -r 'select(.activities > 0) | .run'
    """
    if jsonl and as_json:
        raise click.UsageError("give --json or --jsonl, not both")
    with (
        app.open_ledger(readonly=True) as ledger,
        closing(_run_lines(ledger, status, show_all, sort, limit)) as lines,
    ):
        # closing: a reader that stops early (`runs | head`) ends the query while the
        # ledger is still open.
        if jsonl:
            _write_jsonl(lines)
        elif as_json:
            _write_json_list(lines)
        else:
            _write_table(app, (json.loads(line) for line in lines))


def _write_jsonl(lines: Iterator[str]) -> None:
    write = sys.stdout.write
    while batch := list(islice(lines, 2048)):  # one write per batch, memory still bounded
        batch.append("")
        write("\n".join(batch))


def _write_json_list(lines: Iterator[str]) -> None:
    """``{"runs": [...]}``, one run a line, written as it streams."""
    write = sys.stdout.write
    write('{"runs": [')
    for n, line in enumerate(lines):
        write(("\n  " if n == 0 else ",\n  ") + line)
    write("\n]}\n")


def _write_table(app: AppContext, items: Iterator[dict[str, Any]]) -> None:
    """Aligned plain text, streamed (a rich Table would hold every row first)."""
    color = not app.no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty()
    first = list(islice(items, 1000))  # column widths from the first rows
    # A run id and an entry's time are the file's strings: shown escaped (controls, links).
    width = max([len("run")] + [len(safe(item["run"])) for item in first])
    echo = click.echo
    echo(f"{'run':<{width}}  {'source':<9} {'events':>7} {'activities':>10}  "
         f"{'last entry':<27} {'status':<10}  head")  # fmt: skip
    count = 0
    for item in chain(first, items):
        count += 1
        state = f"{item['status']:<10}"
        if color:
            state = click.style(state, fg={"clean": "green", "diverged": "red"}.get(
                item["status"], "yellow"))  # fmt: skip
        echo(f"{safe(item['run']):<{width}}  {item['source']:<9} {item['events']:>7} "
             f"{item['activities']:>10}  {safe(item['last_entry'] or '-'):<27} {state}  "
             f"{short(item['head'])}")  # fmt: skip
    app.err_console.print(f"{count:,} run(s)", style="dim")


def _entry(run_id: str, seq: int, kind: str, digest: bytes, raw: bytes) -> Entry:
    """The entry as stored; bytes that do not parse (tampered) still give a shown entry."""
    try:
        return Entry.from_row(run_id, seq, kind, digest, raw)
    except (ValueError, KeyError, TypeError, RecursionError):
        text = bytes(raw).decode("utf-8", "replace")
        return Entry(run_id, seq, str(kind), hash_text(bytes(digest)), "", "", text, bytes(raw))


def _read(ledger: Ledger, run_id: str) -> list[Entry]:
    # Hash and bytes as stored: an edited row may hold text or a number there, which
    # verify hashes as stored. A step or kind of another type is no entry to show.
    rows = ledger.db.rows(
        "SELECT run_id, seq, kind, CAST(hash AS BLOB), CAST(bytes AS BLOB) FROM entries "
        "WHERE run_id = ? ORDER BY seq",
        (run_id,),
    )
    entries = []
    for stored_run, seq, kind, digest, raw in rows:
        if not (isinstance(seq, int) and isinstance(kind, str)):
            raise Diverged(
                f"an entry of run {run_id!r} is stored with a step or kind of another type "
                "(the row was edited); run `agentledger verify`",
                code="entry-edited",
            )
        entries.append(_entry(stored_run, seq, kind, digest or b"", raw or b""))
    return entries


def _mark_text(marks: list[Mark]) -> Text:
    from rich.text import Text

    if not marks:
        return Text("✓ clean", style="green")
    names = list(dict.fromkeys(mark.mark for mark in marks))
    return Text("✗ " + ", ".join(names), style="bold red")


@click.command(cls=AppCommand)
@click.argument("run_id", metavar="RUN")
@trust_option
@width_option
@json_option
@click.pass_obj
def show(
    app: AppContext, run_id: str, trust: tuple[str, ...], width: int | None, as_json: bool
) -> int:
    """Show a run's journal, verified: each entry's kind, hash, body and what verify found.

    \b
    Every step is marked: clean, edited, gap before it, link broken, blob missing,
    stage incomplete. Exit 0 when the run verifies, 1 when there is no such run,
    2 when it diverged (with --json too).

    An imported bernstein run shows bernstein's own journal rows (event, index, event
    hash, time, payload) and its stages: kind, state, evidence, and whether the stored
    report is in the imported store (`agentledger verify` verifies it).

    \b
    Examples:
      agentledger show run-00042
      agentledger show run-001 --json | jq '.stages'
      agentledger --ledger review.db show run-7 --trust ed25519:3b6a…
    """
    from agentledger.activity.stages import stage_summaries
    from agentledger.bernstein import view
    from agentledger.verify import RunVerdict, VerifyOptions, status_name
    from agentledger.verify.marks import mark_run

    options = VerifyOptions(trust=arguments.trust_values(trust))
    with app.open_ledger(readonly=True) as ledger:
        ledger.holds_run(run_id)  # a run whose row was removed too: verify names it
        with ledger.db.snapshot() as conn:
            imported = view.read_imported_run(conn, run_id)
        try:
            # The verify of `verify RUN` (every core, as it): show gives the run the verdict
            # every report gives.
            report: VerifyReport | None = ledger.verify([run_id], options=options)
            unverified = None
        except AgentLedgerError as exc:
            # A key file verify must refuse (e.g. a trust anchor others may write): the
            # journal is still shown, said to be unverified, and why.
            report, unverified = None, f"not verified: {exc.message}"
        if imported is None:
            entries = _read(ledger, run_id)
            stages = stage_summaries(ledger, entries, options.trust)
    if imported is not None:
        # bernstein's own journal rows and stages (cli/bernstein_show.py)
        from agentledger.cli.bernstein_show import show_imported

        return show_imported(app, imported, report, unverified, as_json, width)
    verdict = report.runs[0] if report is not None else RunVerdict(run_id)
    held = {entry.seq for entry in entries}
    marks = mark_run(verdict, report.workspace if report is not None else [], stages, held)
    # The exit code of `verify RUN` (the run's findings and the ledger's, e.g. no signed
    # checkpoint), and diverged whenever a step is marked.
    code = int(report.code) if report is not None else int(ExitCode.OK)
    if marks.diverged:
        code = int(ExitCode.DIVERGED)
    run_status = report.status_of(run_id) if report is not None else "unverified"
    if as_json:
        emit_json(
            {
                "run": run_id,
                "code": code,
                "status": status_name(code),
                "run_status": run_status,
                "verify": verdict.to_json() if unverified is None else None,
                "unverified": unverified,
                "run_findings": [mark.to_json() for mark in marks.run],
                "stages": stages,
                "entries": [
                    {
                        "seq": e.seq,
                        "kind": e.kind,
                        "hash": e.hash,
                        "prev": e.prev,
                        "ts": e.ts,
                        "body": e.body,
                        "status": "diverged" if marks.of(e.seq) else "clean",
                        "marks": [mark.to_json() for mark in marks.of(e.seq)],
                        "missing_before": marks.missing_before.get(e.seq),
                    }
                    for e in entries
                ],
            }
        )
        return code
    # rich loads for the terminal's tree only: `show --json` never needs it.
    from rich.text import Text
    from rich.tree import Tree

    console = app.human_console(width)
    status = status_name(code)
    tree = Tree(
        Text.assemble(
            ("run ", "dim"),
            (safe(run_id), "bold"),
            f"  {len(entries)} entries  ",
            (
                "DIVERGED" if code else safe(unverified) if unverified else "verified clean",
                "bold red" if code else "yellow" if unverified else "green",
            ),
        )
    )
    for mark in marks.run:
        _mark_node(tree, mark, "bold red")
    for entry in entries:
        gap = marks.missing_before.get(entry.seq)
        if gap is not None:
            first, last = gap
            missing = f"step {first}" if first == last else f"steps {first}..{last}"
            tree.add(Text(f"     ✗ {missing} missing: deleted from the chain", style="bold red"))
        here = marks.of(entry.seq)
        node = tree.add(
            Text.assemble(
                (f"{entry.seq:>4} ", "dim"),
                (safe(entry.kind), "cyan bold"),
                "  ",
                (short(entry.hash), "magenta"),
                "  ",
                (safe(entry.ts), "dim"),
                "  ",
                _mark_text(here),
            )
        )
        body = entry.body if isinstance(entry.body, str) and not entry.ts else None
        if body is None:
            body = json.dumps(entry.body, ensure_ascii=False, sort_keys=True)
        node.add(Text(safe(shorten(body, BODY_CHARS)), style="red" if here else ""))
        for mark in here:
            _mark_node(node, mark, "red")
    console.print(tree)
    if stages:
        console.print(stages_tree(stages, marks))
    if unverified is not None:
        console.print(Text(safe(unverified), style="yellow"))
    else:
        console.print(Text(f"verdict: {status}", style="green" if code == 0 else "bold red"))
    return code


def _mark_node(parent: Tree, mark: Mark, style: str) -> None:
    """A mark, and under it the finding's expected and actual (as `verify` draws them)
    when its words do not already give them."""
    from rich.text import Text

    from agentledger.checks import says
    from agentledger.report import finding_sides

    node = parent.add(Text("✗ " + safe(mark.text), style=style))
    found = mark.divergence
    if found is not None and says(found.check, found.expected, found.actual, found.seq):
        finding_sides(node, found, holds=False)  # the entry's body is shown above it


RECEIPT_STYLE = {"verified": "green", "missing": "bold red", "untrusted signer": "bold yellow"}


def stages_tree(stages: list[dict[str, Any]], marks: RunMarks | None = None) -> Tree:
    """Each stage: modality, state and reason; its evidence; its receipt (data/ops).

    A stage shows its recorded state in green only when its entry verifies and every
    evidence blob is present; otherwise the state is shown with what is wrong.
    """
    from rich.text import Text
    from rich.tree import Tree

    tree = Tree(Text(f"{len(stages)} stage(s)", style="bold"))
    for stage in stages:
        wrong = [] if marks is None else marks.of(stage["seq"])
        state = safe(stage["terminal_state"])
        if stage["refusal"]:
            state = f"refused at the boundary: {safe(stage['refusal'])}"
        style = (
            "yellow" if stage["refusal"] else "green" if state == "completed" and not wrong
            else "red"
        )  # fmt: skip
        node = tree.add(
            Text.assemble(
                (f"{stage['seq']:>4} ", "dim"), (safe(stage["stage_id"]), "bold"), "  ",
                (safe(stage["kind"]), "cyan"), "  ", (state, style),
                (f" ({safe(stage['reason_code'])})", "dim"),
                (f"  role {safe(stage['role'])}" if stage["role"] else "", "dim"),
                ("  ✗ " + ", ".join(dict.fromkeys(m.mark for m in wrong)) if wrong else "",
                 "bold red"),
            )
        )  # fmt: skip
        evidence = stage["evidence"]
        complete = evidence["present"] == evidence["observations"]
        held = (
            "not pinned (refused)"
            if stage["refusal"]
            else f"{evidence['observations']} obs, "
            f"{evidence['present']}/{evidence['observations']} blobs"
        )
        node.add(
            Text.assemble(
                "evidence ",
                (short(stage["evidence_set_hash"]), "magenta"),
                "  ",
                (held, "" if complete or stage["refusal"] else "bold red"),
            )
        )
        if stage["receipt"] is not None:
            status = safe(stage["receipt"])
            style = RECEIPT_STYLE.get(status, "bold red")
            node.add(Text.assemble("receipt ", (status, style)))
    return tree
