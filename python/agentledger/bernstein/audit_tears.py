"""Tears in bernstein's audit chain, and their acknowledgements (docs/BERNSTEIN.md §10).

bernstein's HMAC pillar does not fail on every line that does not verify. Damage that
looks like a crash is a *tear*: the lines after the last verifying record of the chain's
final segment (with its missing final newline), or a span a verifying
``chain.torn_record`` record vouches for (the append that found a torn tail sealed it:
``segment``, ``verified_prefix_offset`` .. ``byte_offset``, in its own segment). A tear
fails the pillar until a verifying ``chain.tear_acknowledged`` record names it by
``(segment, byte_offset)`` — the segment's size when the tear was seen. Every other
failing line, a missing final newline elsewhere, and a record whose stated predecessor
(``details.prev_chain_digest``) is not its own are hard errors, never acknowledged. With
no verifying record at all nothing is a tear.

This reads the walk ``audit_chain.verify_audit`` already made (its problems, by segment
and line) and the segments' bytes; only the tear records are parsed again.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import Any

from agentledger.bernstein.audit_chain import AuditChain
from agentledger.bernstein.checkpoints import TEAR_ACK

TORN = "chain.torn_record"
ACKNOWLEDGED = TEAR_ACK
STATED_PREDECESSOR = "prev_chain_digest does not match prev_hmac"
MISSING_NEWLINE = "missing trailing newline"


@dataclass(frozen=True, slots=True)
class _Marker:
    display: str
    event: str
    details: dict[str, Any]


def _live_name(display: str) -> str:
    return display[: -len(".gz")] if display.endswith(".gz") else display


def _offset(value: Any) -> int:
    """bernstein's ``int(value or 0)``; its verifier raises on what that refuses."""
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"bernstein's verifier raises on a tear record: {exc}") from None


def unresolved_damage(segments: list[tuple[str, bytes]], chain: AuditChain) -> list[str]:
    """The problems bernstein's HMAC pillar fails on: hard errors and tears no
    acknowledgement covers (empty when it passes)."""
    failing: dict[str, set[int]] = {}
    hard: list[str] = []
    unterminated: set[str] = set()
    for problem in chain.problems:
        display = posixpath.basename(problem.segment)
        if problem.reason == STATED_PREDECESSOR:
            hard.append(f"{problem.segment} line {problem.line}: {problem.reason}")
        elif problem.line < 0:
            unterminated.add(display)
        else:
            failing.setdefault(display, set()).add(problem.line)
    # Per segment: each failing line's offset, where the last verifying record ends,
    # the size, and the verifying tear records.
    failures: list[tuple[str, int, int]] = []  # display, line, offset
    ok_end: dict[str, int] = {}
    total: dict[str, int] = {}
    markers: list[_Marker] = []
    order = []
    for path, data in segments:
        display = posixpath.basename(path)
        order.append(display)
        total[display] = len(data)
        ok_end.setdefault(display, 0)
        bad = failing.get(display, set())
        offset = 0
        for number, line in enumerate(data.split(b"\n")):
            start, offset = offset, offset + len(line) + 1
            if not line:
                continue
            if number in bad:
                failures.append((display, number, start))
                continue
            end = start + len(line)
            ok_end[display] = end + 1 if end < len(data) else end
            if TORN.encode() in line or ACKNOWLEDGED.encode() in line:
                record = json.loads(line)
                if record.get("event_type") in (TORN, ACKNOWLEDGED):
                    details = record.get("details")
                    markers.append(
                        _Marker(
                            display,
                            record["event_type"],
                            dict(details) if isinstance(details, dict) else {},
                        )
                    )
    tears, claimed = _tears(failures, markers, ok_end, total, order, unterminated)
    hard += [f"{d} line {n}: does not verify" for d, n, _ in failures if (d, n) not in claimed]
    hard += [f"{d}: {MISSING_NEWLINE}" for d in unterminated if (d, -1) not in claimed]
    acknowledged = {
        (str(m.details.get("segment", "")), _offset(m.details.get("byte_offset", 0)))
        for m in markers
        if m.event == ACKNOWLEDGED
    }
    hard += [
        f"{segment}: unacknowledged tear at byte {at}"
        for segment, at in tears
        if (segment, at) not in acknowledged
    ]
    return hard


def _tears(
    failures: list[tuple[str, int, int]],
    markers: list[_Marker],
    ok_end: dict[str, int],
    total: dict[str, int],
    order: list[str],
    unterminated: set[str],
) -> tuple[list[tuple[str, int]], set[tuple[str, int]]]:
    """The tears ``(segment, byte_offset)`` and the failing lines they account for
    (``(display, -1)`` for a missing final newline)."""
    tears: list[tuple[str, int]] = []
    claimed: set[tuple[str, int]] = set()
    for marker in markers:
        segment = _live_name(marker.display)
        if marker.event != TORN or str(marker.details.get("segment", "")) != segment:
            continue
        at = _offset(marker.details.get("byte_offset", 0))
        start = _offset(marker.details.get("verified_prefix_offset", at))
        if (segment, at) in tears:
            continue
        tears.append((segment, at))
        claimed |= {
            (d, n) for d, n, offset in failures if d == marker.display and start <= offset < at
        }
    if not order or not any(ok_end.values()):
        return tears, claimed
    final = order[-1]
    tail = [
        (d, n)
        for d, n, offset in failures
        if (d, n) not in claimed and d == final and offset >= ok_end.get(final, 0)
    ]
    if tail or final in unterminated:
        claimed |= set(tail) | ({(final, -1)} if final in unterminated else set())
        key = (_live_name(final), total.get(final, 0))
        if key not in tears:
            tears.append(key)
    return tears, claimed
