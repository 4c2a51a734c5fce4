"""`agentledger team ...`: load a team manifest (which modality each role runs as)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from agentledger.activity import team as team_manifest
from agentledger.cli import arguments
from agentledger.cli.context import AppContext, AppGroup, emit_json, json_option


@click.group(cls=AppGroup)
def team() -> None:
    """Team manifests: [[roles]] with role and agent_kind (default coding).

    \b
    Examples:
      agentledger team load team.toml
      agentledger team show --json
    """


@team.command("load")
@click.argument("manifest", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@click.pass_obj
def team_load(app: AppContext, manifest: Path, as_json: bool) -> None:
    """Load a TOML team manifest; activities of a role must then be of its declared kind.

    \b
    Examples:
      agentledger team load team.toml
      agentledger team load team.toml --json
    """
    arguments.input_file(manifest, "FILE")
    with app.open_ledger(create=True) as ledger:
        roles = team_manifest.load_manifest(ledger, manifest)
    items = [{"role": r.role, "agent_kind": r.agent_kind} for r in roles]
    if as_json:
        emit_json({"manifest": str(manifest), "roles": items})
        return
    app.console.print(f"loaded {len(items)} role(s) from {manifest}")
    _table(app, items)


@team.command("show")
@json_option
@click.pass_obj
def team_show(app: AppContext, as_json: bool) -> None:
    """The roles loaded in this ledger and their modality.

    \b
    Examples:
      agentledger team show
      agentledger team show --json
    """
    with app.open_ledger() as ledger:
        items = [{"role": r.role, "agent_kind": r.agent_kind} for r in team_manifest.roles(ledger)]
    if as_json:
        emit_json({"roles": items})
        return
    _table(app, items)


def _table(app: AppContext, items: list[dict[str, str]]) -> None:
    table = Table(show_edge=False)
    table.add_column("role")
    table.add_column("agent_kind")
    for item in items:
        table.add_row(item["role"], item["agent_kind"])
    app.console.print(table)
