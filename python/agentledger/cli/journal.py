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
from agentledger.cli.context import AppContext, emit_json, json_option

HASH_WIDTH = 18


def short(digest: str | None) -> str:
    return "-" if not digest else digest[: len("blake3:") + HASH_WIDTH - 7] + "…"


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
        app.console.print(f"ledger {verb}: [bold]{info['ledger']}[/] (id {info['id']})")


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


@cli.command()
@click.argument("run_id", metavar="RUN")
@json_option
@click.pass_obj
def show(app: AppContext, run_id: str, as_json: bool) -> None:
    """Show a run's journal as a tree: each entry's kind, hash and body, then its stages."""
    with app.open_ledger(readonly=True) as ledger:
        run = ledger.get_run(run_id)
        entries = list(run.entries())
        stages = stage_summaries(ledger, entries)
    if as_json:
        emit_json(
            {
                "run": run_id,
                "stages": stages,
                "entries": [
                    {
                        "seq": e.seq,
                        "kind": e.kind,
                        "hash": e.hash,
                        "prev": e.prev,
                        "ts": e.ts,
                        "body": e.body,
                    }
                    for e in entries
                ],
            }
        )
        return
    tree = Tree(Text.assemble(("run ", "dim"), (run_id, "bold"), f"  {len(entries)} entries"))
    for entry in entries:
        node = tree.add(
            Text.assemble(
                (f"{entry.seq:>4} ", "dim"),
                (entry.kind, "cyan bold"),
                "  ",
                (short(entry.hash), "magenta"),
                "  ",
                (entry.ts, "dim"),
            )
        )
        body = json.dumps(entry.body, ensure_ascii=False, sort_keys=True)
        node.add(Text(body if len(body) <= 200 else body[:200] + "…"))
    app.console.print(tree)
    if stages:
        app.console.print(stages_tree(stages))


RECEIPT_STYLE = {"verified": "green", "missing": "bold red", "untrusted signer": "bold yellow"}


def stages_tree(stages: list[dict[str, Any]]) -> Tree:
    """Each stage: modality, state and reason; its evidence; its receipt (data/ops)."""
    tree = Tree(Text(f"{len(stages)} stage(s)", style="bold"))
    for stage in stages:
        state = stage["terminal_state"]
        if stage["refusal"]:
            state = f"refused at the boundary: {stage['refusal']}"
        node = tree.add(
            Text.assemble(
                (f"{stage['seq']:>4} ", "dim"), (str(stage["stage_id"]), "bold"), "  ",
                (str(stage["kind"]), "cyan"), "  ", (str(state), "yellow" if stage["refusal"]
                else "green" if state == "completed" else "red"),
                (f" ({stage['reason_code']})", "dim"),
                (f"  role {stage['role']}" if stage["role"] else "", "dim"),
            )
        )  # fmt: skip
        evidence = stage["evidence"]
        held = (
            "not pinned (refused)"
            if stage["refusal"]
            else f"{evidence['observations']} obs, "
            f"{evidence['present']}/{evidence['observations']} blobs"
        )
        node.add(
            Text.assemble("evidence ", (short(stage["evidence_set_hash"]), "magenta"), "  ", held)
        )
        if stage["receipt"] is not None:
            status = stage["receipt"]
            style = RECEIPT_STYLE.get(status, "bold red")
            node.add(Text.assemble("receipt ", (status, style)))
    return tree
