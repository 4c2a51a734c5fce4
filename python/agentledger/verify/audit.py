"""The audit mirror, cross-checked with the journal both ways.

- With the audit key (``--audit-key FILE``, else the install's own key file), every
  record's MAC must recompute over the previous stored MAC and the record's bytes.
  Without it, the report says so in a note and the MACs are not checked.
- Records are contiguous from position 0 and each names an existing activity entry by
  run, seq and entry hash, with the same stage, kind, state, reason and hashes.
- Every entry the boundary wrote (its body says ``"mirrored": true``) has its record.
"""

from __future__ import annotations

import json
from typing import Any

from agentledger.audit import GENESIS_MAC, RECORD_FIELDS, mac_key, record_mac
from agentledger.keys import read_audit_key
from agentledger.verify.context import VerifyContext
from agentledger.verify.results import Divergence

RECORDS = "SELECT pos, run_id, seq, record, mac FROM audit_log ORDER BY pos"
_ENTRIES = (
    "SELECT run_id, seq, kind, hash, bytes FROM entries "
    "WHERE kind IN ('activity.result', 'activity.refused') {where} ORDER BY run_id, seq"
)
ALL_ENTRIES = _ENTRIES.format(where="")
RUN_ENTRIES = _ENTRIES.format(where="AND run_id = ?")
MIRRORED_FIELDS = ("stage_id", "kind", "terminal_state", "reason_code", "artifact_hash",
                   "evidence_set_hash")  # fmt: skip


def _audit_key(ctx: VerifyContext) -> bytes | None:
    if ctx.options.audit_key_file is not None:
        return read_audit_key(ctx.options.audit_key_file)
    keys = ctx.ledger.keys
    return keys.audit_key() if keys.has_audit_key() else None


def check_audit(ctx: VerifyContext) -> None:
    has_table = ctx.conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'audit_log'"
    ).fetchall()
    if not has_table:
        return  # a ledger from before the activity boundary (opened read-only)
    master = _audit_key(ctx)
    key = mac_key(master) if master is not None else None
    selected = set(ctx.selected_runs)

    def diverged(
        run_id: str | None, seq: int | None, check: str, exp: str, act: str, pos: int
    ) -> None:
        subject = f"audit record {pos}"
        if run_id is not None and (run_id in selected if not ctx.whole else run_id in ctx.verdicts):
            ctx.diverged(run_id, Divergence(run_id, seq, check, exp, act, subject))
        elif ctx.whole:
            ctx.diverged(None, Divergence(run_id, seq, check, exp, act, subject))

    mirror: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
    prev = GENESIS_MAC
    count = 0
    for pos, run_id, seq, record, mac in ctx.conn.execute(RECORDS):
        if pos != count:
            diverged(run_id, seq, "audit.gap", f"record {count}", f"record {pos}", pos)
        count = pos + 1
        if key is not None and record_mac(key, prev, record) != mac:
            diverged(run_id, seq, "audit.mac", "the HMAC of the chain", "does not recompute", pos)
        prev = mac
        try:
            fields = json.loads(record)
            ok = isinstance(fields, dict) and set(fields) == set(RECORD_FIELDS)
        except ValueError:
            ok = False
        if not ok:
            diverged(run_id, seq, "audit.record", "a mirror record", repr(record[:60]), pos)
            continue
        columns = {"pos": pos, "run": run_id, "seq": seq, "ledger": ctx.ledger.id}
        for name, value in columns.items():
            if fields[name] != value:
                diverged(run_id, seq, "audit.record", f"{name} {value!r}", repr(fields[name]), pos)
        if run_id in selected:
            mirror[(run_id, seq)] = (pos, fields)
    ctx.report.audit_records = count
    _cross_check(ctx, mirror, diverged)
    if count and key is None:
        ctx.report.notes.append(
            f"audit mirror: {count} record(s) cross-checked with the journal, but their HMACs "
            f"were NOT checked: no audit key (looked for {ctx.ledger.keys.audit_key_path}; "
            "give --audit-key FILE)"
        )


def _cross_check(ctx: VerifyContext, mirror: dict[tuple[str, int], tuple[int, dict[str, Any]]],
                 diverged: Any) -> None:  # fmt: skip
    runs = sorted(ctx.selected_runs)
    rows = (
        ctx.conn.execute(ALL_ENTRIES)
        if ctx.whole
        else (row for run_id in runs for row in ctx.conn.execute(RUN_ENTRIES, (run_id,)))
    )
    for run_id, seq, kind, digest, raw in rows:
        try:
            body = json.loads(raw)["body"]
            mirrored = isinstance(body, dict) and body.get("mirrored") is True
        except (ValueError, KeyError, TypeError):
            continue  # the journal pass reports malformed entries
        found = mirror.pop((run_id, seq), None)
        if found is None:
            if mirrored:
                ctx.diverged(
                    run_id,
                    Divergence(run_id, seq, "audit.missing", "a mirror record", "none",
                               body.get("stage_id")),
                )  # fmt: skip
            continue
        pos, fields = found
        entry_hash = "blake3:" + bytes(digest).hex()
        if fields["entry_hash"] != entry_hash or fields["event"] != kind:
            diverged(
                run_id, seq, "audit.entry", f"{fields['event']} {fields['entry_hash']}",
                f"{kind} {entry_hash}", pos,
            )  # fmt: skip
        for name in MIRRORED_FIELDS:
            if fields[name] != body.get(name):
                diverged(run_id, seq, "audit.entry", f"{name} {fields[name]!r}",
                         f"{name} {body.get(name)!r}", pos)  # fmt: skip
        expected_refusal = body.get("refusal") if kind == "activity.refused" else None
        if fields["refusal"] != expected_refusal:
            diverged(run_id, seq, "audit.entry", f"refusal {fields['refusal']!r}",
                     f"refusal {expected_refusal!r}", pos)  # fmt: skip
    for (run_id, seq), (pos, _) in sorted(mirror.items()):
        diverged(run_id, seq, "audit.orphan", "an activity entry at this step", "none", pos)
