"""bernstein's HMAC audit chain (§10): verification with the master key, and the
``activity.result`` mirror records the strict verifier cross-checks against journals."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from agentledger import _core

GENESIS = "0" * 64
SCHEME2_PREFIX = b"bernstein:audit:v2"
EXEMPT_EVENTS = frozenset({"skill.catalog.install", "skill.catalog.upgrade"})


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


@dataclass
class AuditChain:
    records: int = 0
    problems: list[AuditProblem] = field(default_factory=list)
    walked: list[ActivityRecord] = field(default_factory=list)
    """The ``activity.result`` records the Python walk found (when ``mirror`` is None)."""
    mirror: _core.BernsteinAuditMirror | None = None
    """A clean chain's ``activity.result`` records, kept in Rust (the ledger pass
    cross-checks runs with them there); ``segments`` names the files they number."""
    segments: tuple[str, ...] = ()
    authenticated: bool = False
    """True when the HMACs were checked (a master key was given)."""
    marker: str = field(default_factory=lambda: "marker-" + secrets.token_hex(16))

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def mirrors_activities(self) -> bool:
        """Whether the chain mirrors activities at all: it holds an ``activity.result``
        record (a damaged one that still names its run counts too). Only then are journals
        cross-checked with it: bernstein's own activity commands never mirror, and the
        chain also holds the orchestrator's other events."""
        if self.mirror is not None:
            return len(self.mirror) > 0
        return bool(self.walked) or any(p.run_id is not None for p in self.problems)

    @property
    def activity(self) -> list[ActivityRecord]:
        """Every ``activity.result`` record, in chain order."""
        return self.walked if self.mirror is None else self._mirrored(None)

    def activity_of(self, run_id: str) -> list[ActivityRecord]:
        """The records of one run (``details.run_id``), in chain order."""
        if self.mirror is not None:
            return self._mirrored(run_id)
        return self._walked_by_run.get(run_id, [])

    @functools.cached_property
    def _walked_by_run(self) -> dict[str, list[ActivityRecord]]:
        by_run: dict[str, list[ActivityRecord]] = {}
        for record in self.walked:
            by_run.setdefault(record.run_id, []).append(record)
        return by_run

    def _mirrored(self, run_id: str | None) -> list[ActivityRecord]:
        assert self.mirror is not None
        return [
            ActivityRecord(
                run_id=run or "",
                stage_id=details.get("stage_id", ""),
                journal_index=journal_index,
                details=details,
                segment=self.segments[segment],
                line=number,
            )
            for segment, number, run, journal_index, details in self.mirror.records(run_id)
        ]


def read_master_key(data: bytes) -> bytes:
    """The key file's bytes, whitespace-stripped, not hex-decoded (bernstein's reading)."""
    return data.strip()


def verify_audit(segments: list[tuple[str, bytes]], master: bytes | None) -> AuditChain:
    """Walk every segment as ``_verify_log_bytes`` does; without a key, parse only."""
    chain = AuditChain(authenticated=master is not None)
    keys = {}
    if master is not None:
        keys = {2: (hkdf_sha256(master, b"audit"), SCHEME2_PREFIX), 1: (master, b"")}
    # The clean chain is settled in Rust (parallel, GIL released); anything else, even a
    # single line it is not sure of, is walked here, where every problem gets its name.
    clean = _core.bernstein_audit_clean(
        [data for _, data in segments], (keys[1][0], keys[2][0]) if keys else None
    )
    if clean is not None:
        chain.records, chain.mirror = clean
        chain.segments = tuple(name for name, _ in segments)
        return chain
    head = GENESIS
    for name, data in segments:
        if data and not data.endswith(b"\n"):
            chain.problems.append(AuditProblem(name, -1, "missing trailing newline", None))
        pieces = data.split(b"\n")
        if pieces and pieces[-1] == b"":
            pieces.pop()
        for number, line in enumerate(pieces):
            if not line:
                continue
            head = _check_line(chain, keys, name, number, line, head, master is not None)
    return chain


def _check_line(
    chain: AuditChain,
    keys: dict[int, tuple[bytes, bytes]],
    name: str,
    number: int,
    line: bytes,
    head: str,
    keyed: bool,
) -> str:
    def problem(reason: str, run_id: str | None = None) -> None:
        chain.problems.append(AuditProblem(name, number, reason, run_id))

    try:
        record = json.loads(line)
    except UnicodeDecodeError:
        problem("undecodable bytes")
        return head
    except ValueError:
        problem("invalid JSON")
        return head
    if not isinstance(record, dict):
        problem("entry is not a JSON object")
        return head
    chain.records += 1
    details = record.get("details")
    details = details if isinstance(details, dict) else {}
    run_id = str(details["run_id"]) if "run_id" in details else None
    scheme = record.get("scheme", 1)
    if scheme not in (1, 2) or isinstance(scheme, bool):
        problem("unsupported audit scheme", run_id)
        return head
    # One serialisation serves both the canonical-bytes check and the HMAC body: the
    # record is dumped with its hmac replaced by a per-walk random marker, which is then
    # either put back (the line) or cut out with its member (the body).
    has_hmac = "hmac" in record
    if has_hmac:
        text = json.dumps({**record, "hmac": chain.marker}, sort_keys=True)
        member = f'"hmac": "{chain.marker}"'
        canonical = text.replace(f'"{chain.marker}"', json.dumps(record["hmac"]), 1)
        if f"{member}, " in text:
            body_text = text.replace(f"{member}, ", "", 1)
        else:
            body_text = text.replace(f", {member}", "", 1).replace(member, "", 1)
    else:
        canonical = body_text = json.dumps(record, sort_keys=True)
    if line != canonical.encode():
        problem("non-canonical line bytes", run_id)
        return head
    if record.get("event_type") == "activity.result":
        chain.walked.append(
            ActivityRecord(
                run_id=run_id or "",
                stage_id=str(details.get("stage_id", "")),
                journal_index=details.get("journal_index"),
                details=details,
                segment=name,
                line=number,
            )
        )
    stored = str(record.get("hmac", ""))
    if record.get("prev_hmac") != head:
        problem("prev_hmac mismatch", run_id)
        return stored
    if keyed:
        key, prefix = keys[int(scheme)]
        message = prefix + head.encode() + body_text.encode()
        if not hmac.compare_digest(hmac.new(key, message, hashlib.sha256).hexdigest(), stored):
            problem("HMAC mismatch", run_id)
            return stored
    digest = details.get("prev_chain_digest")
    exempt = record.get("event_type") in EXEMPT_EVENTS
    if isinstance(digest, str) and digest and not exempt and digest != record.get("prev_hmac"):
        problem("prev_chain_digest does not match prev_hmac", run_id)
    return stored
