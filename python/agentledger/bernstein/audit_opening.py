"""Where bernstein's ``AuditLog(audit_dir, key)`` raises as it opens (docs/BERNSTEIN.md §13).

Opening a log recovers its tail (``_recover_chain_tail``): the live day files newest
first, then, when none holds a record, the archived segments newest first, each read from
its last line back (split on ``\\n``) to the first that parses to a canonical object with
an ``hmac`` its key verifies against the ``prev_hmac`` it states, under scheme 1 and
scheme 2 alike. Its ``json.loads`` catches only ``JSONDecodeError`` and
``UnicodeDecodeError``, and its check encodes ``prev_hmac`` as UTF-8 and hands ``hmac`` to
``compare_digest``: a line met before that record holding an integer past 4,300 digits,
nesting past the recursion limit, a ``prev_hmac`` with a lone surrogate or a non-ASCII
``hmac`` makes the opening raise. The lineage activity pillar opens the log to read
revocations, and fails then.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from agentledger.bernstein.audit_chain import SCHEME2_PREFIX, hkdf_sha256
from agentledger.bernstein.format import UncaughtJson, loads_as_bernstein


def opening_raises(live: list[bytes], archives: list[bytes], master: bytes) -> str | None:
    """Why opening the log raises; None when it opens. ``live`` and ``archives`` in chain
    order, the segments bernstein cannot read left out."""
    keys = (master, hkdf_sha256(master, b"audit"))
    for raw in [*reversed(live), *reversed(archives)]:
        try:
            if _holds_a_tail(raw, keys):
                return None
        except (ValueError, TypeError) as exc:
            return f"bernstein's AuditLog raises as it opens: {exc}"
    return None


def _holds_a_tail(raw: bytes, keys: tuple[bytes, bytes]) -> bool:
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for line in reversed(lines):
        if not line:
            continue
        try:
            entry = loads_as_bernstein(line)
        except UncaughtJson:
            raise
        except ValueError:
            continue
        if not isinstance(entry, dict) or json.dumps(entry, sort_keys=True).encode() != line:
            continue
        if "hmac" not in entry:
            continue
        # Both schemes are tried before either answers, as bernstein's recovery does.
        valid_v1 = _locally_valid(entry, keys[0], b"")
        valid_v2 = _locally_valid(entry, keys[1], SCHEME2_PREFIX)
        if valid_v1 or valid_v2:
            return True
    return False


def _locally_valid(entry: dict[str, Any], key: bytes, prefix: bytes) -> bool:
    """``_record_is_locally_valid``: the record's MAC over the predecessor it states.
    ``UnicodeEncodeError`` and ``TypeError`` where bernstein's raises."""
    body = {k: v for k, v in entry.items() if k != "hmac"}
    payload = prefix.decode() + str(entry.get("prev_hmac", "")) + json.dumps(body, sort_keys=True)
    expected = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(str(entry.get("hmac", "")), expected)
