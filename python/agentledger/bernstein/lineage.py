"""A run's lineage spine, and its journal as sealed into it (docs/BERNSTEIN.md §18).

At finalization bernstein appends to ``.sdd/lineage/<run>/spine.jsonl`` an entry whose
``artifact_path`` is the run's journal, whose ``content_hash`` is ``sha256:`` of the
journal's bytes and whose ``step_id`` is ``replay-journal-head:<head>``. Nothing writes
the journal after that, so strict compares the newest such entry with the journal the
ledger holds: other bytes (a cut tail, an edited envelope field) are a finding.

The spine itself is checked as bernstein's ``LineageSpine.verify`` checks it: every line
an object with its fields, a known version, linked to the previous entry, its
``entry_hash`` recomputed (keyless) and, with the audit key, its HMAC tag (the master key
for ``v`` 1 entries, ``HKDF(master, info=b"lineage")`` for ``v`` 2) over the compact,
sorted, raw-UTF-8 JSON of the entry without its tag. Tags under the ``jcs-v2`` profile
(named in ``spine.head``) are not checked here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

from agentledger.bernstein.audit_chain import hkdf_sha256
from agentledger.bernstein.format import LINEAGE_DIR
from agentledger.bernstein.receipt_verdict import LINEAGE_V2_TAG, SPINE_FIELDS, entry_hash
from agentledger.limits import MAX_DOCUMENT_BYTES

SEAL_STEP = "replay-journal-head:"
LEGACY_PROFILE = "py-json-v1"
PROFILES = (LEGACY_PROFILE, "jcs-v2")


def spine_path(run_id: str) -> str:
    return f"{LINEAGE_DIR}/{run_id}/spine.jsonl"


def spine_head_path(run_id: str) -> str:
    return f"{LINEAGE_DIR}/{run_id}/spine.head"


def spine_problems(spine: bytes, head_file: bytes | None, master: bytes | None) -> list[str]:
    """Why the spine fails bernstein's own verify (``TAMPERED``), line by line; empty when
    it passes. Without ``master`` the HMAC tags are not checked."""
    if len(spine) > MAX_DOCUMENT_BYTES:
        return [f"{len(spine)} bytes, over the {MAX_DOCUMENT_BYTES} read"]
    raw = spine.rstrip(b"\n")
    if not raw:
        return []
    profile = spine_profile(head_file)
    if profile not in PROFILES:
        return [f"unknown hash_profile {profile!r}"]
    keys = None
    if master is not None and profile == LEGACY_PROFILE:
        keys = {1: master, 2: hkdf_sha256(master, b"lineage")}
    problems: list[str] = []
    previous = ""
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            problems.append(f"line {number}: malformed JSON")
            continue
        if not isinstance(row, dict):
            problems.append(f"line {number}: row is not an object")
            continue
        missing = {*SPINE_FIELDS, "hmac"} - set(row)
        if missing:
            problems.append(f"line {number}: missing fields {sorted(missing)}")
            continue
        version = row.get("v")
        if version not in (1, 2):
            problems.append(f"line {number}: unsupported entry version {version!r}")
            continue
        if row["prev_hash"] != previous:
            problems.append(f"line {number}: prev_hash break")
        try:
            expected = entry_hash(row, LINEAGE_V2_TAG if version == 2 else "")
        except (TypeError, ValueError):
            problems.append(f"line {number}: unhashable field types")
            continue
        if str(row["entry_hash"]) != expected:
            problems.append(f"line {number}: entry_hash mismatch")
        if keys is not None:
            body = {name: row[name] for name in row if name != "hmac"}
            text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            tag = hmac.new(keys[2 if version == 2 else 1], text.encode(), hashlib.sha256)
            if str(row["hmac"]) != tag.hexdigest():
                problems.append(f"line {number}: hmac mismatch")
        previous = str(row["entry_hash"])
    return problems


def spine_profile(head_file: bytes | None) -> str:
    """The spine's hash profile: ``spine.head``'s, the legacy one when it names none."""
    if head_file is None:
        return LEGACY_PROFILE
    try:
        head = json.loads(head_file)
    except (ValueError, RecursionError):
        return LEGACY_PROFILE
    if isinstance(head, dict) and "hash_profile" in head:
        return str(head["hash_profile"])
    return LEGACY_PROFILE


@dataclass(frozen=True, slots=True)
class SealedJournal:
    """The newest journal seal of a spine: its line (1-based) and what it pins."""

    line: int
    content_hash: str
    head: str


def sealed_journal(spine: bytes, journal: str) -> SealedJournal | None:
    """The newest entry sealing ``journal`` (a workdir path); None when there is none.
    Lines that do not parse are skipped (they seal nothing)."""
    if len(spine) > MAX_DOCUMENT_BYTES:
        return None
    found = None
    for number, line in enumerate(spine.split(b"\n"), start=1):
        if SEAL_STEP.encode() not in line:
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        step = row.get("step_id") if isinstance(row, dict) else None
        sealed_here = isinstance(step, str) and step.startswith(SEAL_STEP)
        if sealed_here and isinstance(step, str) and row.get("artifact_path") == journal:
            found = SealedJournal(number, str(row.get("content_hash")), step[len(SEAL_STEP) :])
    return found


def journal_problem(
    sealed: SealedJournal, journal_sha256: str | None, head: str | None
) -> str | None:
    """How the journal held now departs from the sealed one, None when it is the same."""
    if sealed.content_hash == journal_sha256:
        return None
    if head != sealed.head:
        return f"{journal_sha256}, head {head}: its rows changed or were cut since the seal"
    return f"{journal_sha256}, head {head}: its bytes changed since the seal (same head)"
