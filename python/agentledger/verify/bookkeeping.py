"""Tables of events outside the runs, against the bookkeeping runs that anchor them.

Every prune receipt must verify (a trusted signer, this ledger, the size and root of this
log's first entries) and be pinned by exactly one ``gc.pruned`` entry of ``_gc``; the
``team_roles`` table must be what the ``team.loaded`` entries of ``_team`` load, in order
(``bookkeeping.py``), and each of those entries must record exactly the roles of the
manifest blob it pins. A row edited, deleted or added by hand is a difference.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from agentledger import _core, tiles
from agentledger import log as wslog
from agentledger.activity.team import manifest_roles
from agentledger.bookkeeping import GC_PRUNED, GC_RUN, TEAM_LOADED, TEAM_RUN
from agentledger.errors import AgentLedgerError, InvalidInput
from agentledger.gc import PRUNE_DOMAIN, receipt_hash
from agentledger.keys import parse_public_key, resolve_trust
from agentledger.limits import entry_document
from agentledger.verify.context import VerifyContext
from agentledger.verify.results import Divergence


def _bodies(ctx: VerifyContext, run_id: str, kind: str) -> list[tuple[int, dict[str, Any]]]:
    found = []
    for seq, raw in ctx.conn.execute(
        "SELECT seq, bytes FROM entries WHERE run_id = ? AND kind = ? ORDER BY seq",
        (run_id, kind),
    ):
        try:
            body = entry_document(raw)["body"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue  # the journal pass reports a malformed entry
        if isinstance(body, dict):
            found.append((int(seq), body))
    return found


def _diverged(ctx: VerifyContext, check: str, expected: str, actual: str, subject: str) -> None:
    ctx.diverged(None, Divergence(None, None, check, expected, actual, subject))


def check_bookkeeping(ctx: VerifyContext) -> None:
    if not ctx.whole:
        # Each team load is an entry of ``_team``: a named verify of that run checks them,
        # as a whole verify does (the tables are the workspace's, checked only then).
        if TEAM_RUN in ctx.selected_runs:
            manifests: dict[str, dict[str, str] | str] = {}
            for seq, body in _bodies(ctx, TEAM_RUN, TEAM_LOADED):
                _check_team_load(ctx, seq, body, manifests)
        return
    _check_prune_receipts(ctx)
    _check_team_roles(ctx)


def _check_prune_receipts(ctx: VerifyContext) -> None:
    pinned = Counter(str(body.get("receipt")) for _, body in _bodies(ctx, GC_RUN, GC_PRUNED))
    trusted = resolve_trust(ctx.options.trust, ctx.ledger.keys)
    reader = tiles.TileReader(ctx.conn)
    held: Counter[str] = Counter()
    for receipt_id, receipt, signer, signature in ctx.conn.execute(
        "SELECT id, receipt, signer, signature FROM prune_receipts ORDER BY id"
    ):
        subject = f"prune receipt {receipt_id}"
        data = receipt.encode("utf-8", "surrogateescape") if isinstance(receipt, str) else b""
        held[receipt_hash(data)] += 1
        problem = _receipt_problem(ctx, reader, trusted, data, signer, signature)
        if problem:
            _diverged(
                ctx, "prune.receipt", "a receipt of this ledger's log, signed", problem, subject
            )
    for name in sorted(set(pinned) | set(held)):
        if pinned[name] != held[name]:
            _diverged(
                ctx,
                "prune.anchor",
                f"{pinned[name]} receipt(s) {name} (pinned by {GC_RUN})",
                f"{held[name]} in prune_receipts",
                "prune_receipts",
            )


def _receipt_problem(
    ctx: VerifyContext,
    reader: tiles.TileReader,
    trusted: set[str],
    data: bytes,
    signer: object,
    signature: object,
) -> str | None:
    if not isinstance(signer, str) or signer not in trusted:
        return f"signed by {str(signer)[:80]}, not a trusted key"
    if not isinstance(signature, bytes):
        return "its signature is not bytes"
    try:
        signed = _core.ed25519_verify(parse_public_key(signer), PRUNE_DOMAIN + data, signature)
    except (InvalidInput, TypeError, ValueError):
        signed = False
    if not signed:
        return "its signature does not verify"
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return "not JSON"
    if not isinstance(document, dict) or document.get("ledger") != ctx.ledger.id:
        return "a receipt of another ledger"
    size = document.get("log_size")
    if not isinstance(size, int) or size < 0:
        return "no log size"
    try:
        root = reader.root(size)
    except AgentLedgerError:
        return f"the log has no first {size} entries"
    if not wslog.names_root(reader.conn, size, root, document.get("log_root")):
        return f"the log's first {size} entries are not the ones it was signed over"
    return None


def _check_team_roles(ctx: VerifyContext) -> None:
    loaded: dict[str, tuple[str, str, str]] = {}
    manifests: dict[str, dict[str, str] | str] = {}
    for seq, body in _bodies(ctx, TEAM_RUN, TEAM_LOADED):
        _check_team_load(ctx, seq, body, manifests)
        roles = body.get("roles")
        for item in roles if isinstance(roles, list) else []:
            if isinstance(item, list) and len(item) == 2:
                loaded[str(item[0])] = (
                    str(item[1]),
                    str(body.get("manifest")),
                    str(body.get("loaded_at")),
                )
    table = {
        str(role): (str(kind), str(manifest), str(at))
        for role, kind, manifest, at in ctx.conn.execute(
            "SELECT role, agent_kind, manifest_hash, loaded_at FROM team_roles"
        )
    }
    for role in sorted(set(loaded) | set(table)):
        if loaded.get(role) != table.get(role):
            _diverged(
                ctx,
                "team.roles",
                repr(loaded.get(role)) if role in loaded else f"no role {role!r} (none loaded)",
                repr(table.get(role)) if role in table else "absent",
                f"team_roles {role!r}",
            )


def _check_team_load(
    ctx: VerifyContext, seq: int, body: dict[str, Any], manifests: dict[str, dict[str, str] | str]
) -> None:
    """A team load records exactly the roles of the manifest it pins, as ``team load``
    writes them (the boundary refuses to decide on one that does not: ``confirm_manifest``)."""
    manifest = body.get("manifest")
    if not isinstance(manifest, str):
        declared: dict[str, str] | str = "no manifest named"
    else:
        if manifest not in manifests:
            manifests[manifest] = manifest_roles(ctx.conn, manifest)
        declared = manifests[manifest]
    if isinstance(declared, str):
        expected = f"a manifest {str(manifest)[:19]}… that reads back"
        actual = declared
    elif body.get("roles") == [[role, kind] for role, kind in declared.items()]:
        return
    else:
        expected = "roles " + _roles_text(declared.items())
        actual = "roles " + _roles_text(body.get("roles"))
    ctx.diverged(TEAM_RUN, Divergence(TEAM_RUN, seq, "team.load", expected, actual, None))


def _roles_text(pairs: Any) -> str:
    try:
        return ", ".join(f"{role!r} as {kind!r}" for role, kind in pairs) or "none"
    except (TypeError, ValueError):
        return repr(pairs)
