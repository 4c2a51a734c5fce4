"""Validation of the names users give us (run ids, entry kinds) and the ledger's clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from agentledger.errors import InvalidInput

RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


def _shown(value: object, limit: int = 80) -> str:
    """``repr`` cut to ``limit`` characters: an error message never echoes megabytes."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def check_run_id(run_id: object) -> str:
    """A run id is 1-64 of ``A-Z a-z 0-9 _ . -`` and never a path (``.``/``..``)."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id) or run_id in {".", ".."}:
        raise InvalidInput(
            f"invalid run id {_shown(run_id)}: use 1-64 characters from A-Z a-z 0-9 _ . -",
            code="invalid-run-id",
        )
    return run_id


def check_kind(kind: object) -> str:
    if not isinstance(kind, str) or not KIND.fullmatch(kind):
        raise InvalidInput(
            f"invalid entry kind {_shown(kind)}: 1-128 characters from A-Z a-z 0-9 _ . : -, "
            "starting with a letter or digit",
            code="invalid-kind",
        )
    return kind


def utc_timestamp() -> str:
    """RFC 3339 UTC with microseconds, the form every entry's ``ts`` takes."""
    return rfc3339(datetime.now(UTC))


def rfc3339(moment: datetime) -> str:
    """``moment`` (aware, UTC) as ``%Y-%m-%dT%H:%M:%S.%fZ``, formatted by ``isoformat``:
    ``strftime`` goes through the C library's, a tenth of a single append's CPU for its two
    timestamps (the entry's and its checkpoint's)."""
    return moment.isoformat(timespec="microseconds").removesuffix("+00:00") + "Z"
