"""`explain [CHECK]`: what a verification check means, from the one table in ``checks``."""

from __future__ import annotations

import click

from agentledger.cli.context import AppCommand, AppContext, emit_json, json_option
from agentledger.errors import NotFound


@click.command(cls=AppCommand)
@click.argument("check", required=False, metavar="[CHECK]")
@json_option
@click.pass_obj
def explain(app: AppContext, check: str | None, as_json: bool) -> None:
    """Explain a verification check (e.g. entry.hash), or list every check.

    \b
    Expected is what the anchored record (the hash chain, a signed checkpoint, a
    recorded hash) says must be there; actual is what the file holds now.
    Exit 1 when there is no such check.

    \b
    Examples:
      agentledger explain entry.hash
      agentledger explain --json
    """
    from rich.table import Table
    from rich.text import Text

    from agentledger.checks import CHECKS, RULE
    from agentledger.display import safe

    if check is not None and check not in CHECKS:
        raise NotFound(f"no check {safe(check)!r} (agentledger explain lists them)")
    rows = [CHECKS[check]] if check is not None else list(CHECKS.values())
    if as_json:
        items = [
            {"check": i.id, "means": i.means, "expected": i.expected, "actual": i.actual}
            for i in rows
        ]
        listing: dict[str, object] = {"rule": RULE, "checks": items}
        emit_json(items[0] if check is not None else listing)
        return
    console = app.console
    if check is not None:
        info = rows[0]
        console.print(Text(info.id, style="bold"))
        console.print(info.means)
        console.print(Text.assemble(("expected  ", "dim"), info.expected))
        console.print(Text.assemble(("actual    ", "dim"), (info.actual, "red")))
        console.print(Text(RULE, style="dim"))
        return
    table = Table(show_edge=False)
    table.add_column("check", no_wrap=True, style="bold")
    table.add_column("means")
    for info in rows:
        table.add_row(info.id, info.means)
    console.print(table)
    console.print(Text(RULE, style="dim"))
