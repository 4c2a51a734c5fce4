"""bernstein's signed chain checkpoints (docs/BERNSTEIN.md §12).

After each seal bernstein appends a checkpoint to ``.sdd/audit/checkpoints/
checkpoints.jsonl`` and republishes it as ``checkpoints/latest.json``: a line
``{"hmac", "payload"}`` whose HMAC-SHA256, keyed by the audit *master* key (not the
derived chain key), covers the compact sorted-key JSON of the payload. The payload pins
the chain's origin (its first record's HMAC), its record count, the seal's root and
leaves (file, byte length, hash), and the SHA-256 of the previous line's document.

The history must *extend* the newest checkpoint: same origin, no fewer records, each
pinned prefix still there and unchanged. This module reads the ledger and the pointer as
bernstein does and reports, as data, everything bernstein's ``audit verify`` checks, and
also what it lets pass (a pointer behind the ledger, a torn last line).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentledger import _core
from agentledger.bernstein.audit_query import query
from agentledger.bernstein.format import AUDIT_DIR, UncaughtJson, loads_as_bernstein
from agentledger.bernstein.seal import PrefixLeaves, merkle_root

CHECKPOINTS_DIR = f"{AUDIT_DIR}/checkpoints"
LEDGER = f"{CHECKPOINTS_DIR}/checkpoints.jsonl"
POINTER = f"{CHECKPOINTS_DIR}/latest.json"
COSIGNATURES = f"{CHECKPOINTS_DIR}/cosignatures.jsonl"
ANCHORS = f"{CHECKPOINTS_DIR}/anchors.jsonl"
VERSION = 1
GENESIS = "0" * 64
TEAR_ACK = "chain.tear_acknowledged"
ACKABLE = frozenset({"segment_shrunk", "segment_prefix_mismatch", "segment_missing"})


def canonical(value: Any) -> bytes:
    """Compact, sorted keys, ASCII: what the checkpoint HMAC and the line links cover."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def sign(payload: dict[str, Any], master: bytes) -> str:
    return hmac.new(master, canonical(payload), hashlib.sha256).hexdigest()


def _same_hmac(stored: object, expected: str) -> bool:
    """bernstein's ``compare_digest(str(stored), expected)``, which raises ``TypeError`` on
    a non-ASCII string (``ValueError`` here: its reader raises, no verdict)."""
    text = str(stored)
    if not text.isascii():
        raise ValueError("compare_digest raises TypeError on a non-ASCII hmac")
    return hmac.compare_digest(text, expected)


@dataclass(frozen=True, slots=True)
class LedgerProblem:
    """A committed line of the checkpoints ledger that does not hold up (1-based)."""

    line: int
    reason: str
    raises: bool = False
    """bernstein's reader raises here, rather than reporting a bad file: whatever reads the
    ledger in its command (the anchor and witness pillars too) fails."""


@dataclass
class CheckpointLedger:
    """The ledger as bernstein validates it: the checkpoints up to the first bad line."""

    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    problem: LedgerProblem | None = None
    torn_tail: bool = False
    """The last line is incomplete or does not parse: bernstein skips it (a crash)."""

    @property
    def last(self) -> dict[str, Any] | None:
        return self.checkpoints[-1] if self.checkpoints else None


def read_ledger(raw: bytes | None, master: bytes) -> CheckpointLedger:
    """Validate ``checkpoints.jsonl``: every complete line parses, is signed under
    ``master``, links to its predecessor and has version 1; the first failure ends it."""
    state = CheckpointLedger()
    if not raw:
        return state
    state.torn_tail = not raw.endswith(b"\n")
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    prev = GENESIS
    for number, line in enumerate(lines, start=1):
        try:
            doc = loads_as_bernstein(line)
        except UncaughtJson as exc:
            state.problem = LedgerProblem(number, f"bernstein's reader raises: {exc}", True)
            break
        except ValueError:
            if number == len(lines):
                state.torn_tail = True
                break
            state.problem = LedgerProblem(number, "unparsable committed line")
            break
        if not isinstance(doc, dict):
            state.problem = LedgerProblem(number, "not a JSON object")
            break
        payload = doc.get("payload")
        if not isinstance(payload, dict):
            state.problem = LedgerProblem(number, "missing payload")
            break
        try:
            signed = _same_hmac(doc.get("hmac", ""), sign(payload, master))
        except ValueError as exc:
            state.problem = LedgerProblem(number, f"bernstein's reader raises: {exc}", True)
            break
        if not signed:
            state.problem = LedgerProblem(number, "signature mismatch")
            break
        if str(payload.get("prev_checkpoint_sha256", "")) != prev:
            state.problem = LedgerProblem(number, "predecessor linkage broken")
            break
        if payload.get("version") != VERSION:
            state.problem = LedgerProblem(number, f"unsupported version {payload.get('version')!r}")
            break
        state.checkpoints.append(payload)
        prev = hashlib.sha256(canonical(doc)).hexdigest()
    return state


def read_pointer(raw: bytes | None, master: bytes) -> dict[str, Any] | None:
    """``latest.json``'s payload when it is signed and of version 1, else None (bernstein
    then falls back to the ledger: an unusable pointer is never a verdict). ``ValueError``
    where bernstein's read of it raises (its checkpoint pillar fails)."""
    if raw is None:
        return None
    try:
        doc = loads_as_bernstein(raw)
    except UncaughtJson:
        raise
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("payload"), dict):
        return None
    payload: dict[str, Any] = doc["payload"]
    if not _same_hmac(doc.get("hmac", ""), sign(payload, master)):
        return None
    return payload if payload.get("version") == VERSION else None


def pointer_position(pointer: dict[str, Any], ledger: CheckpointLedger) -> int | None:
    """Where the pointer's checkpoint is in the ledger (0-based), None when it is not."""
    published = canonical(pointer)
    for index, checkpoint in enumerate(ledger.checkpoints):
        if canonical(checkpoint) == published:
            return index
    return None


# ---- the history against a checkpoint -------------------------------------------------


def canonical_records(raw: bytes) -> list[dict[str, Any]]:
    """The records bernstein counts: lines (split on ``\\n``) that parse to an object with
    an ``hmac`` and are byte for byte its ``json.dumps(sort_keys=True)``. The reference
    ``origin_and_count`` is held to (it counts them in Rust)."""
    records = []
    for line in raw.split(b"\n"):
        if not line:
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        canonical_line = isinstance(entry, dict) and "hmac" in entry
        if canonical_line and json.dumps(entry, sort_keys=True).encode() == line:
            records.append(entry)
    return records


@dataclass(frozen=True, slots=True)
class Conflict:
    """How the history fails to extend a checkpoint: ``kind`` is bernstein's own
    (``origin``, ``entry_count``, ``segment_missing``, ``segment_shrunk``,
    ``segment_prefix_mismatch``, ``root``)."""

    kind: str
    segment: str
    expected: str
    actual: str


def origin_and_count(snapshot: list[tuple[str, bytes]]) -> tuple[str | None, int]:
    """The chain's origin (its first canonical record's ``hmac``) and its record count:
    each segment's ``canonical_records`` counted in Rust (``_core.bernstein_canonical_records``,
    whole seconds faster on a long chain), by the reference where Rust cannot say (a line
    nested near Python's recursion limit)."""
    origin: str | None = None
    count = 0
    for _name, raw in snapshot:
        counted = _core.bernstein_canonical_records(raw)
        if counted is None:
            records = canonical_records(raw)
            found, first = len(records), (records[0] if records else None)
        else:
            found, span = counted
            first = json.loads(raw[span[0] : span[1]]) if span is not None else None
        if first is not None and origin is None:
            origin = str(first["hmac"])
        count += found
    return origin, count


DIGITS_AS_ZERO = bytes(
    0x30 if 0x30 <= byte <= 0x39 else byte if byte == 0x0A else 0x2E for byte in range(256)
)
INTEGER_PAST_THE_LIMIT = b"0" * 4301
"""More digits than Python's ``int()`` takes (4,300), every digit read as ``0``
(``DIGITS_AS_ZERO``): the lines holding such a run may hold an integer ``json.loads``
raises on (the run may be inside a string or a fraction, which parsing the line tells)."""

DECODED_AS_UTF16_OR_32 = re.compile(rb"(?m)^(?:\x00|[^\n]\x00|\xfe\xff|\xff\xfe)")
"""Lines ``json.loads`` of bytes decodes as UTF-16 or UTF-32 (``json.detect_encoding``: a
NUL first or second byte, a BOM of either): their digits are not one run of bytes."""


@dataclass(frozen=True, slots=True)
class UncaughtLine:
    """A line of the history that bernstein's ``_canonical_records`` raises on: its
    ``json.loads`` raises past ``except (JSONDecodeError, UnicodeDecodeError)``."""

    segment: int
    """The segment's place in the snapshot."""
    name: str
    line: int
    reason: str

    def describe(self) -> str:
        return f"{self.name}:{self.line}: bernstein's reader of the history raises: {self.reason}"


def uncaught_line(snapshot: list[tuple[str, bytes]]) -> UncaughtLine | None:
    """The first line of ``snapshot`` bernstein's readers of the history raise on (an
    integer past 4,300 digits, nesting past the recursion limit), wherever it stands, torn
    or not: ``count_entries`` reads every segment, ``compute_origin`` those up to the
    one holding the origin."""
    for index, (name, raw) in enumerate(snapshot):
        found = _uncaught_in(raw)
        if found is not None:
            return UncaughtLine(index, name, *found)
    return None


def _uncaught_in(raw: bytes) -> tuple[int, str] | None:
    for number, line in _suspect_lines(raw):
        if not line:
            continue
        try:
            loads_as_bernstein(line)
        except UncaughtJson as exc:
            return number, str(exc)
        except ValueError:
            continue
    return None


def _suspect_lines(raw: bytes) -> Iterator[tuple[int, bytes]]:
    """Rust declines a segment with a line nested near Python's recursion limit: then every
    line is a suspect; otherwise those a long run of digits makes one, and those ``json``
    decodes as UTF-16 or UTF-32."""
    if _core.bernstein_canonical_records(raw) is None:
        yield from enumerate(raw.split(b"\n"), start=1)
        return
    starts = set(_line_starts(raw.translate(DIGITS_AS_ZERO), INTEGER_PAST_THE_LIMIT))
    if b"\x00" in raw or b"\xfe\xff" in raw or b"\xff\xfe" in raw:
        starts.update(_line_starts(raw, DECODED_AS_UTF16_OR_32))
    number, counted_to = 1, 0
    for start in sorted(starts):
        number += raw.count(b"\n", counted_to, start)
        counted_to = start
        end = raw.find(b"\n", start)
        yield number, raw[start : len(raw) if end < 0 else end]


def _line_starts(raw: bytes, pattern: bytes | re.Pattern[bytes]) -> Iterator[int]:
    """Where the lines holding ``pattern`` start, each once (``raw`` keeps its newlines
    where they were); every byte is searched back over at most once."""
    next_line = 0
    while True:
        if isinstance(pattern, bytes):
            found = raw.find(pattern, next_line)
        else:
            match = pattern.search(raw, next_line)
            found = -1 if match is None else match.start()
        if found < 0:
            return
        newline = raw.rfind(b"\n", next_line, found)
        yield next_line if newline < 0 else newline + 1
        end = raw.find(b"\n", found)
        if end < 0:
            return
        next_line = end + 1


def origin_segment(snapshot: list[tuple[str, bytes]]) -> int | None:
    """The place of the first segment holding a record (the chain's origin), if any."""
    for index, (_name, raw) in enumerate(snapshot):
        counted = _core.bernstein_canonical_records(raw)
        if (counted[0] if counted is not None else len(canonical_records(raw))) > 0:
            return index
    return None


def check_extension(
    checkpoint: dict[str, Any],
    snapshot: list[tuple[str, bytes]],
    origin_count: tuple[str | None, int] | None = None,
    prefix_leaves: PrefixLeaves | None = None,
) -> list[Conflict]:
    """Whether ``snapshot`` (the chain's segments in order, archives under their live
    names) extends ``checkpoint``; ``origin_count`` is ``origin_and_count(snapshot)`` when
    known. ``ValueError``/``TypeError`` where bernstein's own check raises on the
    checkpoint's values (it verifies nothing then). ``prefix_leaves``: the prefix leaves the
    seals' check already hashed."""
    leaf_of = PrefixLeaves() if prefix_leaves is None else prefix_leaves
    conflicts: list[Conflict] = []
    by_name = dict(snapshot)
    origin, count = origin_count if origin_count is not None else origin_and_count(snapshot)
    pinned_origin = str(checkpoint.get("origin", ""))
    if origin != pinned_origin:
        conflicts.append(Conflict("origin", "", pinned_origin, str(origin)))
    pinned_count = int(checkpoint.get("entry_count", 0) or 0)
    if count < pinned_count:
        conflicts.append(Conflict("entry_count", "", f"{pinned_count} records", f"{count}"))
    leaves: list[dict[str, Any]] = checkpoint.get("leaves", [])
    for leaf in leaves:
        name = str(leaf.get("file", ""))
        byte_len = int(leaf.get("byte_len", 0) or 0)
        pinned = str(leaf.get("hash", ""))
        current = by_name.get(name)
        if current is None:
            conflicts.append(Conflict("segment_missing", name, "present", "absent"))
        elif len(current) < byte_len:
            conflicts.append(
                Conflict("segment_shrunk", name, f"{byte_len} bytes", f"{len(current)} bytes")
            )
        elif leaf_of(current, byte_len) != pinned:
            conflicts.append(
                Conflict("segment_prefix_mismatch", name, pinned, leaf_of(current, byte_len))
            )
    if leaves:
        scheme = int(checkpoint.get("scheme", 2) or 2)
        root = merkle_root([str(leaf.get("hash", "")) for leaf in leaves], scheme)
        if root != checkpoint.get("root_hash"):
            conflicts.append(Conflict("root", "", str(checkpoint.get("root_hash")), root))
    return conflicts


def acknowledged(
    conflicts: list[Conflict],
    checkpoint: dict[str, Any],
    snapshot: list[tuple[str, bytes]],
    *,
    as_bernstein: bool = False,
) -> bool:
    """Whether ``chain.tear_acknowledged`` records naming this checkpoint's root cover
    every per-segment conflict (a record count that fell with them is covered too): the
    canonical records, or, ``as_bernstein``, whatever its ``find_divergence_acks`` takes
    (its query checks neither MACs nor canonical form, ``audit_query.py``; ``ValueError``
    where it raises)."""
    segments = [c for c in conflicts if c.kind in ACKABLE]
    others = [c for c in conflicts if c.kind not in ACKABLE and c.kind != "entry_count"]
    root = str(checkpoint.get("root_hash", ""))
    acked = _bernstein_acks(snapshot, root) if as_bernstein else _canonical_acks(snapshot, root)
    if others or not segments:
        return False
    return all(c.segment in acked for c in segments)


def _canonical_acks(snapshot: list[tuple[str, bytes]], root: str) -> set[str]:
    acked = set()
    for _name, raw in snapshot:
        for record in canonical_records(raw):
            details = record.get("details")
            if record.get("event_type") != TEAR_ACK or not isinstance(details, dict):
                continue
            if str(details.get("checkpoint_root", "")) == root and details.get("segment"):
                acked.add(str(details["segment"]))
    return acked


def _bernstein_acks(snapshot: list[tuple[str, bytes]], root: str) -> set[str]:
    acked = set()
    for record in query([raw for _, raw in snapshot], frozenset({TEAR_ACK})):
        details = record.get("details") or {}
        if not isinstance(details, dict):
            raise ValueError("bernstein's find_divergence_acks raises: details not an object")
        segment = str(details.get("segment", ""))
        if str(details.get("checkpoint_root", "")) == root and segment:
            acked.add(segment)
    return acked
