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
from collections.abc import Iterable
from typing import Any

from agentledger.audit import GENESIS_MAC, RECORD_FIELDS, mac_key, record_mac
from agentledger.keys import read_audit_key
from agentledger.limits import entry_document
from agentledger.verify.context import IN_SELECTED, VerifyContext
from agentledger.verify.results import Divergence

RECORDS = "SELECT pos, run_id, seq, record, mac FROM audit_log ORDER BY pos"
ACTIVITY_KINDS = ("activity.result", "activity.refused")
MIRRORED_MARK = b'"mirrored":true'
_CANDIDATES = (
    "SELECT run_id, seq, kind, hash, bytes FROM entries "
    "WHERE kind IN ('activity.result', 'activity.refused') AND instr(bytes, ?) > 0 {where} "
    "ORDER BY run_id, seq"
)
ALL_CANDIDATES = _CANDIDATES.format(where="")
RUN_CANDIDATES = _CANDIDATES.format(where=f"AND {IN_SELECTED}")
ENTRY_AT = "SELECT kind, hash, bytes FROM entries WHERE run_id = ? AND seq = ?"
MIRRORED_FIELDS = ("stage_id", "kind", "terminal_state", "reason_code", "artifact_hash",
                   "evidence_set_hash")  # fmt: skip


def _audit_key(ctx: VerifyContext) -> bytes | None:
    """The master key of the native mirror: ``--audit-key``, else the install's own.

    No key is read when the mirror is empty: ``--audit-key`` may then be meant for an
    imported workdir's audit chain (bernstein), which this check does not read. When both
    keys exist, the one that authenticates the first record is used (``--audit-key`` may
    name bernstein's master key in a ledger that holds both kinds of runs).
    """
    first = ctx.conn.execute("SELECT record, mac FROM audit_log ORDER BY pos LIMIT 1").fetchall()
    if not first:
        return None
    candidates = []
    if ctx.options.audit_key_file is not None:
        candidates.append(read_audit_key(ctx.options.audit_key_file))
    if ctx.ledger.keys.has_audit_key():
        candidates.append(ctx.ledger.keys.audit_key())
    if not candidates:
        return None
    record, mac = first[0]
    assert isinstance(record, bytes) and isinstance(mac, bytes)
    for master in candidates:
        if record_mac(mac_key(master), record) == mac:
            if master is not candidates[0]:
                ctx.report.notes.append(
                    "audit mirror: --audit-key does not authenticate it; checked with "
                    f"the install's audit key ({ctx.ledger.keys.audit_key_path})"
                )
            return master
    return candidates[0]


MAX_RECORD_BYTES = 64 << 10
"""A mirror record is hashes, labels (at most 256 characters) and positions: a few hundred
bytes. A longer one is no record (``audit.record``), and is never parsed."""


def check_audit(ctx: VerifyContext) -> None:
    has_table = ctx.conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'audit_log'"
    ).fetchall()
    if not has_table:
        return  # a ledger from before the activity boundary (opened read-only)
    master = _audit_key(ctx)
    key = mac_key(master) if master is not None else None
    selected = set(ctx.selected_runs)
    if not ctx.whole:
        # A named run the file holds no row or entry of, but records of: its records name
        # no entry (``audit.orphan``, a run removed), as `verify --all` says; not missing.
        selected |= {r for r, v in ctx.verdicts.items() if v.code == 1 and v.not_found is None}

    def diverged(
        run_id: str | None, seq: int | None, check: str, exp: str, act: str, pos: int
    ) -> None:
        subject = f"audit record {pos}"
        if run_id is not None and (run_id in selected if not ctx.whole else run_id in ctx.verdicts):
            ctx.diverged(run_id, Divergence(run_id, seq, check, exp, act, subject))
        elif ctx.whole:
            ctx.diverged(None, Divergence(run_id, seq, check, exp, act, subject))

    mirror: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
    # An archive (archive.py) holds only its runs' records: positions may skip there.
    partial = ctx.archive
    previous: tuple[int, bytes] = (-1, GENESIS_MAC)
    count = 0
    for pos, run_id, seq, record, mac in ctx.conn.execute(RECORDS):
        gap = pos != previous[0] + 1 and not partial
        expected_pos = previous[0] + 1
        # The link is checkable when the previous position is present (always, but in an
        # archive of some runs).
        link = previous[1].hex() if pos == previous[0] + 1 else None
        previous = (pos, mac)
        count += 1
        authentic = key is None or (recomputed := record_mac(key, record)) == mac
        try:
            # Parsed only at a record's size: JSON costs some twenty times its length.
            if len(record) > MAX_RECORD_BYTES:
                raise ValueError("longer than a record")
            fields = json.loads(record)
            ok = isinstance(fields, dict) and set(fields) == set(RECORD_FIELDS)
        except (ValueError, RecursionError):
            ok = False
        filed = (run_id, seq)
        if ok and authentic and _names_an_entry(fields):
            # The run_id and seq columns are copies of what the record names: a record filed
            # elsewhere (its columns edited) is the named entry's, found misfiled (below),
            # not an orphan of a run that never was beside a missing record of its own.
            run_id, seq = fields["run"], fields["seq"]
        if gap:  # said where every other finding of this record is
            diverged(run_id, seq, "audit.gap", f"record {expected_pos}", f"record {pos}", pos)
        if not authentic:
            # Expected: the HMAC stored with the record; actual: the HMAC of its bytes now.
            stored = bytes(mac).hex() if isinstance(mac, bytes) else repr(mac)
            diverged(run_id, seq, "audit.mac", stored, recomputed.hex(), pos)
        if not ok:
            diverged(run_id, seq, "audit.record", "a mirror record", repr(record[:60]), pos)
            continue
        if link is not None and fields["prev"] != link:
            diverged(run_id, seq, "audit.chain", f"prev {link}", f"prev {fields['prev']}", pos)
        columns = {"pos": pos, "run": filed[0], "seq": filed[1], "ledger": ctx.ledger.id}
        for name, value in columns.items():
            if fields[name] != value:
                # Expected: what the HMAC-protected record names; actual: where it is filed.
                diverged(run_id, seq, "audit.record", f"{name} {fields[name]!r}", repr(value), pos)
        # A whole verify also cross-checks a record of a run the ledger does not hold: it
        # names no entry (``audit.orphan``), which without the key nothing else would say.
        if run_id in selected or (ctx.whole and run_id not in ctx.verdicts):
            earlier = mirror.get((run_id, seq))
            if earlier is not None:  # one record per crossing: this one mirrors it again
                diverged(
                    run_id, seq, "audit.entry", f"one record of this entry (record {earlier[0]})",
                    f"record {pos} mirrors it again", pos,
                )  # fmt: skip
                continue
            mirror[(run_id, seq)] = (pos, fields)
    ctx.report.audit_records += count
    _cross_check(ctx, mirror, diverged, keyed=key is not None)
    if count and key is None:
        ctx.report.notes.append(
            f"audit mirror: {count} record(s) cross-checked with the journal, but their HMACs "
            f"were NOT checked: no audit key (looked for {ctx.ledger.keys.audit_key_path}; "
            "give --audit-key FILE)"
        )


def _names_an_entry(fields: dict[str, Any]) -> bool:
    """Whether a record's ``run`` and ``seq`` are a run id and a step number."""
    run_id, seq = fields.get("run"), fields.get("seq")
    return isinstance(run_id, str) and isinstance(seq, int) and not isinstance(seq, bool)


def _body(raw: bytes) -> dict[str, Any] | None:
    try:
        body = entry_document(raw)["body"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None  # the journal pass reports malformed entries
    return body if isinstance(body, dict) else None


def _cross_check(
    ctx: VerifyContext, mirror: dict[tuple[str, int], tuple[int, dict[str, Any]]],
    diverged: Any, keyed: bool,
) -> None:  # fmt: skip
    """Entries → records, then records → entries.

    Only entries whose bytes contain ``"mirrored":true`` are candidates (a byte search in
    SQLite), and a body is parsed only when its record is missing or no key binds the
    record to the entry: with the key, a valid MAC over a record naming this exact entry
    hash already proves the record's fields were taken from this entry.
    """
    if ctx.whole:
        # The journal pass marked exactly the rows ALL_CANDIDATES selects.
        columns = "run_id, seq, kind, hash, bytes"
        rows: Iterable[Any] = ctx.marked_rows(
            ("mirrored",), columns, ALL_CANDIDATES, (MIRRORED_MARK,)
        )
    else:
        rows = ctx.conn.execute(RUN_CANDIDATES, (MIRRORED_MARK, ctx.selected_json))
    for run_id, seq, kind, digest, raw in rows:
        found = mirror.pop((run_id, seq), None)
        if found is None:
            body = _body(raw)
            if body is not None and body.get("mirrored") is True:
                ctx.diverged(
                    run_id,
                    Divergence(run_id, seq, "audit.missing", "a mirror record", "none",
                               body.get("stage_id")),
                )  # fmt: skip
            continue
        _compare(run_id, seq, kind, digest, raw, found, diverged, keyed)
    for (run_id, seq), found in sorted(mirror.items()):
        at = ctx.conn.execute(ENTRY_AT, (run_id, seq)).fetchall()
        # The kind its bytes name: the column is a cache (an edited one is entry.kind's).
        kind = _kind(at[0][2]) if at else None
        if kind not in ACTIVITY_KINDS:
            diverged(
                run_id, seq, "audit.orphan", "an activity entry at this step", "none", found[0]
            )
            continue
        _, digest, raw = at[0]
        assert isinstance(digest, bytes) and isinstance(raw, bytes) and kind is not None
        _compare(run_id, seq, kind, digest, raw, found, diverged, keyed)


def _kind(raw: bytes) -> str | None:
    try:
        kind = entry_document(raw)["kind"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None  # the journal pass reports malformed entries
    return kind if isinstance(kind, str) else None


def _compare(
    run_id: str, seq: int, kind: str, digest: bytes, raw: bytes,
    found: tuple[int, dict[str, Any]], diverged: Any, keyed: bool,
) -> None:  # fmt: skip
    pos, fields = found
    # The hash column as stored: an edited row may hold another type there (no record's).
    entry_hash = "blake3:" + digest.hex() if isinstance(digest, bytes) else str(digest)
    if fields["entry_hash"] != entry_hash or fields["event"] != kind:
        diverged(
            run_id, seq, "audit.entry", f"{fields['event']} {fields['entry_hash']}",
            f"{kind} {entry_hash}", pos,
        )  # fmt: skip
        return
    if keyed:
        return
    body = _body(raw) or {}
    for name in MIRRORED_FIELDS:
        if fields[name] != body.get(name):
            diverged(run_id, seq, "audit.entry", f"{name} {fields[name]!r}",
                     f"{name} {body.get(name)!r}", pos)  # fmt: skip
    expected_refusal = body.get("refusal") if kind == "activity.refused" else None
    if fields["refusal"] != expected_refusal:
        diverged(run_id, seq, "audit.entry", f"refusal {fields['refusal']!r}",
                 f"refusal {expected_refusal!r}", pos)  # fmt: skip
