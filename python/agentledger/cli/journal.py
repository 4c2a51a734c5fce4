"""`init`, `runs`, `show`: create a ledger and look inside it."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agentledger.activity.stages import stage_summaries
from agentledger.cli.app import cli
from agentledger.cli.context import AppContext, emit_json, json_option, width_option
from agentledger.display import human_console, safe, shorten
from agentledger.errors import AgentLedgerError, ExitCode
from agentledger.journal import Entry, hash_text
from agentledger.ledger import Ledger
from agentledger.verify import RunVerdict, VerifyOptions, VerifyReport, status_name
from agentledger.verify.marks import Mark, RunMarks, mark_run

HASH_WIDTH = 18
BODY_CHARS = 200


def short(digest: str | None) -> str:
    """A digest cut for a listing (``show --json`` and ``verify`` give it whole)."""
    return "-" if not digest else safe(digest[: len("blake3:") + HASH_WIDTH - 7]) + "…"


@cli.command()
@json_option
@click.pass_obj
def init(app: AppContext, as_json: bool) -> None:
    """Create the ledger file (and its folder) if it does not exist."""
    existed = app.ledger_path.exists()
    with app.open_ledger(create=True) as ledger:
        info = {"ledger": str(ledger.path), "id": ledger.id, "created": not existed}
    if as_json:
        emit_json(info)
    else:
        verb = "exists" if existed else "created"
        app.console.print(
            Text.assemble(f"ledger {verb}: ", (safe(info["ledger"]), "bold"), f" (id {info['id']})")
        )


@cli.command()
@json_option
@click.pass_obj
def runs(app: AppContext, as_json: bool) -> None:
    """List runs: entries, activities, last entry and head hash."""
    with app.open_ledger(readonly=True) as ledger:
        rows = ledger.db.conn.execute(
            """
            SELECT r.run_id, r.head_seq + 1, r.head_hash,
                   (SELECT count(*) FROM entries e
                     WHERE e.run_id = r.run_id AND e.kind = 'activity.result')
              FROM runs r ORDER BY r.ordinal
            """
        ).fetchall()
    items = [
        {
            "run": run_id,
            "entries": entries,
            "activities": activities,
            "head": None if head is None else "blake3:" + head.hex(),
        }
        for run_id, entries, head, activities in rows
    ]
    if as_json:
        emit_json({"runs": items})
        return
    table = Table(show_edge=False)
    for column in ("run", "entries", "activities", "head"):
        table.add_column(column, justify="right" if column in {"entries", "activities"} else "left")
    for item in items:
        table.add_row(
            item["run"], str(item["entries"]), str(item["activities"]), short(item["head"])
        )
    app.console.print(table)
    app.console.print(f"{len(items)} run(s)", style="dim")


def _entry(run_id: str, seq: int, kind: str, digest: bytes, raw: bytes) -> Entry:
    """The entry as stored; bytes that do not parse (tampered) still give a shown entry."""
    try:
        return Entry.from_row(run_id, seq, kind, digest, raw)
    except (ValueError, KeyError, TypeError, RecursionError):
        text = bytes(raw).decode("utf-8", "replace")
        return Entry(run_id, seq, str(kind), hash_text(bytes(digest)), "", "", text, bytes(raw))


def _read(ledger: Ledger, run_id: str) -> list[Entry]:
    rows = ledger.db.rows(
        "SELECT run_id, seq, kind, hash, bytes FROM entries WHERE run_id = ? ORDER BY seq",
        (run_id,),
    )
    return [_entry(*row) for row in rows]


def _mark_text(marks: list[Mark]) -> Text:
    if not marks:
        return Text("✓ clean", style="green")
    names = list(dict.fromkeys(mark.mark for mark in marks))
    return Text("✗ " + ", ".join(names), style="bold red")


@cli.command()
@click.argument("run_id", metavar="RUN")
@width_option
@json_option
@click.pass_obj
def show(app: AppContext, run_id: str, width: int | None, as_json: bool) -> int:
    """Show a run's journal, verified: each entry's kind, hash, body and what verify found.

    \b
    Every step is marked: clean, edited, gap before it, link broken, blob missing,
    stage incomplete. Exit 0 when the run verifies, 1 when there is no such run,
    2 when it diverged (with --json too).
    """
    with app.open_ledger(readonly=True) as ledger:
        ledger.get_run(run_id)
        entries = _read(ledger, run_id)
        stages = stage_summaries(ledger, entries)
        try:
            report: VerifyReport | None = ledger.verify([run_id], options=VerifyOptions(jobs=1))
            unverified = None
        except AgentLedgerError as exc:
            # A key file verify must refuse (e.g. a trust anchor others may write): the
            # journal is still shown, said to be unverified, and why.
            report, unverified = None, f"not verified: {exc.message}"
    verdict = report.runs[0] if report is not None else RunVerdict(run_id)
    marks = mark_run(verdict, report.workspace if report is not None else [], stages)
    code = int(ExitCode.DIVERGED if marks.diverged else ExitCode.OK)
    if as_json:
        emit_json(
            {
                "run": run_id,
                "code": code,
                "status": status_name(code),
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
    console = human_console(width=width)
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
        tree.add(Text("✗ " + safe(mark.text), style="bold red"))
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
            node.add(Text("✗ " + safe(mark.text), style="red"))
    console.print(tree)
    if stages:
        console.print(stages_tree(stages, marks))
    if unverified is not None:
        console.print(Text(safe(unverified), style="yellow"))
    else:
        console.print(Text(f"verdict: {status}", style="green" if code == 0 else "bold red"))
    return code


RECEIPT_STYLE = {"verified": "green", "missing": "bold red", "untrusted signer": "bold yellow"}


def stages_tree(stages: list[dict[str, Any]], marks: RunMarks | None = None) -> Tree:
    """Each stage: modality, state and reason; its evidence; its receipt (data/ops).

    A stage shows its recorded state in green only when its entry verifies and every
    evidence blob is present; otherwise the state is shown with what is wrong.
    """
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
