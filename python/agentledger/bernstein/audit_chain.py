"""bernstein's HMAC audit chain (§10): verification with the master key, and the
``activity.result`` mirror records the strict verifier cross-checks against journals."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from agentledger import _core
from agentledger.bernstein.format import UncaughtJson, loads_as_bernstein

GENESIS = "0" * 64
SCHEME2_PREFIX = b"bernstein:audit:v2"


def hkdf_sha256(master: bytes, info: bytes, length: int = 32) -> bytes:
    """RFC 5869 with no salt (32 zero bytes), as bernstein's key derivation uses it."""
    prk = hmac.new(b"\x00" * 32, master, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


@dataclass(frozen=True, slots=True)
class AuditProblem:
    segment: str
    line: int
    reason: str
    run_id: str | None
    """The run the record names in ``details.run_id``, when it parses."""


@dataclass(frozen=True, slots=True)
class ActivityRecord:
    """One ``activity.result`` mirror record, its details as strings."""

    run_id: str
    stage_id: str
    journal_index: object
    details: dict[str, Any]
    segment: str
    line: int


class AuditChain:
    """What the walk of the chain (``verify_audit``) found: plain values, read from the
    Rust walk's result; the ``activity.result`` records are converted when first read."""

    def __init__(
        self, walk: _core.BernsteinAuditWalk, segments: tuple[str, ...], authenticated: bool
    ) -> None:
        self._walk = walk
        self.segments = segments
        """The segments' names, in chain order."""
        self.records: int = walk.records
        self.problems: list[AuditProblem] = [
            AuditProblem(segments[segment], line, reason, run_id)
            for segment, line, reason, run_id in walk.problems
        ]
        self.authenticated = authenticated
        """True when the HMACs were checked (a master key was given)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def mirrors_activities(self) -> bool:
        """Whether the chain mirrors activities at all: it holds an ``activity.result``
        record (a damaged one that still names its run counts too). Only then are journals
        cross-checked with it: bernstein's own activity commands never mirror, and the
        chain also holds the orchestrator's other events."""
        return self._walk.mirrors_activities

    @property
    def walked_per_run(self) -> dict[str, int]:
        """How many ``activity.result`` records of each run (``""``: none named) the walk
        met: read without converting every record (``walked``)."""
        return self._walk.walked_per_run

    @functools.cached_property
    def walked(self) -> list[ActivityRecord]:
        """Every ``activity.result`` record the walk met (canonical, scheme 1 or 2), in
        chain order, whether its links verify or not."""
        return self._records(self._walk.walked)

    @property
    def unindexed(self) -> list[ActivityRecord]:
        """The walked records whose ``journal_index`` is not an integer of 64 bits: they
        audit no row."""
        return self._records(self._walk.unindexed())

    @property
    def activity(self) -> list[ActivityRecord]:
        """Every ``activity.result`` record, in chain order."""
        return self.walked

    def activity_of(self, run_id: str) -> list[ActivityRecord]:
        """The records of one run (``details.run_id``), in chain order."""
        return self._walked_by_run.get(run_id, [])

    @functools.cached_property
    def _walked_by_run(self) -> dict[str, list[ActivityRecord]]:
        by_run: dict[str, list[ActivityRecord]] = {}
        for record in self.walked:
            by_run.setdefault(record.run_id, []).append(record)
        return by_run

    def _records(
        self, rows: list[tuple[int, int, str | None, object, dict[str, str]]]
    ) -> list[ActivityRecord]:
        return [
            ActivityRecord(
                run_id=run_id or "",
                stage_id=details.get("stage_id", ""),
                journal_index=journal_index,
                details=details,
                segment=self.segments[segment],
                line=line,
            )
            for segment, line, run_id, journal_index, details in rows
        ]


def read_master_key(data: bytes) -> bytes:
    """The key file's bytes, whitespace-stripped, not hex-decoded (bernstein's reading)."""
    return data.strip()


def audit_keys(master: bytes | None) -> tuple[bytes, bytes] | None:
    """The HMAC keys of schemes 1 and 2 derived from the master key."""
    return None if master is None else (master, hkdf_sha256(master, b"audit"))


def verify_audit(
    segments: list[tuple[str, bytes]], master: bytes | None, *, jobs: int = 0
) -> AuditChain:
    """Walk every segment as ``_verify_log_bytes`` does; without a key, parse only. The
    walk is Rust's (``rust/bernstein/src/audit/walk.rs``), in parallel with the GIL
    released; the Python walk it is held to is the tests' (``tests/bernstein/reference.py``)."""
    walk = _core.bernstein_audit_walk([data for _, data in segments], audit_keys(master), jobs)
    return from_walk(walk, segments, master is not None)


def walk_raises(segments: list[tuple[str, bytes]], chain: AuditChain) -> str | None:
    """Why bernstein's walk (``_verify_log_bytes``) raises rather than reports, whatever a
    tear acknowledgement says: on a line whose ``json.loads`` raises past ``except
    (JSONDecodeError, UnicodeDecodeError)``, or a canonical record of a known scheme whose
    ``prev_hmac`` or ``hmac`` is not ASCII (``compare_digest`` raises ``TypeError``). Such
    a line never verifies, so only the walk's failing lines are read."""
    failing: dict[str, set[int]] = {}
    for problem in chain.problems:
        failing.setdefault(problem.segment, set()).add(problem.line)
    for path, data in segments:
        numbers = failing.get(path)
        if not numbers:
            continue
        lines = data.split(b"\n")
        for number in sorted(n for n in numbers if 0 <= n < len(lines)):
            reason = _line_raises(lines[number])
            if reason is not None:
                return f"{path} line {number + 1}: bernstein's HMAC walk raises: {reason}"
    return None


def _line_raises(line: bytes) -> str | None:
    try:
        entry = loads_as_bernstein(line)
    except UncaughtJson as exc:
        return str(exc)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("scheme", 1) not in (1, 2):
        return None
    if json.dumps(entry, sort_keys=True).encode() != line:
        return None
    for name in ("prev_hmac", "hmac"):
        if not str(entry.get(name, "")).isascii():
            return f"compare_digest raises TypeError on a non-ASCII {name}"
    return None


def from_walk(
    walk: _core.BernsteinAuditWalk, segments: list[tuple[str, bytes]], authenticated: bool
) -> AuditChain:
    """The chain a walk of ``segments`` found (e.g. the one ``bernstein_check`` made)."""
    return AuditChain(walk, tuple(name for name, _ in segments), authenticated)
