"""bernstein's ``AuditLog.query`` over audit segments (docs/BERNSTEIN.md §12, §13).

The query checks neither MACs nor canonical form: each segment is decoded as UTF-8 (else
line by line on ``\\n``, undecodable lines dropped), split with ``str.splitlines`` (so a
raw U+2028 or ``\\v`` inside a line cuts it too) and stripped; a piece whose ``json.loads``
raises ``JSONDecodeError`` is skipped. What parses is handed to a filter that calls
``.get`` on it. The lineage pillar reads revocations this way, and the checkpoint pillar
the acknowledgements of a divergence.
"""

from __future__ import annotations

import json
from typing import Any


def query(segments: list[bytes], event_types: frozenset[str]) -> list[dict[str, Any]]:
    """The records of ``event_types`` in ``segments`` (in the order given), as bernstein's
    query returns them. ``ValueError`` where it raises: a piece whose ``json.loads`` raises
    past ``JSONDecodeError`` (an integer past 4,300 digits, nesting past the recursion
    limit), or one that parses to something other than an object."""
    found: list[dict[str, Any]] = []
    for data in segments:
        for number, text in enumerate(_pieces(data), start=1):
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                continue
            except (ValueError, RecursionError) as exc:
                raise ValueError(
                    f"bernstein's audit query raises on line {number}: "
                    f"json.loads raises {type(exc).__name__}"
                ) from None
            if not isinstance(record, dict):
                raise ValueError(
                    f"bernstein's audit query raises on line {number}: "
                    f"it parses to a {type(record).__name__}, not an object"
                )
            event_type = record.get("event_type")
            if isinstance(event_type, str) and event_type in event_types:
                found.append(record)
    return found


def _pieces(data: bytes) -> list[str]:
    """``_decode_segment_text`` then ``_events_from_text``'s split: the non-empty pieces."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        decoded = []
        for line in data.split(b"\n"):
            try:
                decoded.append(line.decode("utf-8"))
            except UnicodeDecodeError:
                continue
        text = "\n".join(decoded)
    return [piece.strip() for piece in text.splitlines() if piece.strip()]
