"""Strict findings from bernstein's seals, checkpoints, RFC 3161 anchors and witness
co-signatures.

Where these files exist, a cut audit tail is detectable: the seal pins each day file's
sealed bytes, and the checkpoints pin the record count and every sealed prefix under the
audit key. Everything ``bernstein audit verify``'s audit-folder pillars fail on is a
finding here (the chain's own, ``bernstein.audit.chain``, comes from its walk), plus what
they let pass: an older seal no longer holding, a newest seal no checkpoint pins, a pointer
published behind the ledger (or gone), a torn last checkpoint line, and co-signatures
contradicting the history even when no witness key was given, and tiles that no longer
describe their day file.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentledger.bernstein import checkpoints as cp
from agentledger.bernstein.anchors import (
    anchor_contradictions,
    imprint_problem,
    read_anchors,
    tsa_problem,
)
from agentledger.bernstein.audit_verdict import (
    AuditFolder,
    cosignature_problem,
    known_roots,
    read_cosignatures,
    read_seal,
    witness_contradictions,
)
from agentledger.bernstein.format import AUDIT_DIR
from agentledger.bernstein.seal import SealUnreadable, check_seal, leaf_digest
from agentledger.bernstein.witness_state import state_claims
from agentledger.bernstein.workdir import Workdir
from agentledger.limits import MAX_DOCUMENT_BYTES

if TYPE_CHECKING:
    from cryptography import x509  # annotations only

SEALS = f"{AUDIT_DIR}/merkle/seal-*.json"
TILES_DIR = f"{AUDIT_DIR}/tiles"
SEAL_CHECKS = {
    "deleted": "bernstein.seal.deleted",
    "inserted": "bernstein.seal.inserted",
    "truncated": "bernstein.seal.truncated",
    "changed": "bernstein.seal.changed",
    "root": "bernstein.seal.root",
}


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    expected: str
    actual: str
    subject: str


@dataclass
class SealedHistory:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _segment(name: str) -> str:
    return f"{AUDIT_DIR}/{name}" if name else AUDIT_DIR


def sealed_history(
    workdir: Workdir,
    folder: AuditFolder,
    master: bytes | None,
    trusted: frozenset[bytes],
    tsa_bundle: list[x509.Certificate] | None = None,
    witness_state: Callable[[str], bytes | None] | None = None,
) -> SealedHistory:
    """Findings and notes; ``trusted`` (``--trust``) holds the keys a witness may sign with,
    ``tsa_bundle`` (``--tsa-bundle``) the certificates a TSA must chain to,
    ``witness_state`` (``--witness-state``) reads the witness's own pins by file name."""
    out = SealedHistory()
    for path in folder.oversized:
        out.findings.append(
            Finding(
                "bernstein.checkpoint.line", "a checkpoint file of sane size", "too large", path
            )
        )
    newest_root = _seals(workdir, folder, out)
    if cp.LEDGER in folder.unreadable:
        out.findings.append(
            Finding(
                "bernstein.checkpoint.line",
                "a checkpoints file",
                folder.unreadable[cp.LEDGER],
                cp.LEDGER,
            )
        )
    elif folder.ledger is None:
        if folder.seal_files:
            out.notes.append(
                "bernstein: sealed, but no checkpoints imported (.sdd/audit/checkpoints/"
                "checkpoints.jsonl): a history cut back together with its seal is undetectable"
            )
    else:
        _checkpoints(folder, master, newest_root, out)
    _anchors(folder, master, tsa_bundle, out)
    _witness(folder, master, trusted, out)
    if witness_state is not None:
        _witness_state(folder, master, witness_state, out)
    _tiles(workdir, folder, out)
    return out


def _tiles(workdir: Workdir, folder: AuditFolder, out: SealedHistory) -> None:
    """Tiles (``bernstein audit seal``): a hash tile pins a day file's sealed prefix by its
    plain SHA-256 and its leaf hash; a snapshot tile is a copy of that prefix. Both must
    still describe the day file (bernstein's verify does not read them)."""
    for path in folder.paths:
        if posixpath.dirname(path) != TILES_DIR:
            continue
        name = posixpath.basename(path)
        data = workdir.read(path) or b""
        if name.endswith(".tile"):
            problem = _hash_tile_problem(data, folder.live)
        else:
            live = folder.live.get(name)
            problem = (
                None
                if live is not None and live.startswith(data)
                else (
                    "not a prefix of the day file" if live is not None else "its day file is gone"
                )
            )
        if problem is not None:
            out.findings.append(
                Finding("bernstein.tile", "the day file's sealed prefix", problem, path)
            )


def _hash_tile_problem(data: bytes, live: dict[str, bytes]) -> str | None:
    try:
        tile = json.loads(data) if len(data) <= MAX_DOCUMENT_BYTES else None
    except (ValueError, RecursionError):
        tile = None
    if not isinstance(tile, dict) or not isinstance(tile.get("segment"), str):
        return "not a hash tile"
    content = live.get(tile["segment"])
    if content is None:
        return f"its day file {tile['segment']!r} is gone"
    byte_len = tile.get("byte_len")
    if isinstance(byte_len, bool) or not isinstance(byte_len, int) or byte_len < 0:
        return "no byte length"
    if len(content) < byte_len:
        return f"the day file is {len(content)} bytes, the tile pins {byte_len}"
    prefix = content[:byte_len]
    if tile.get("content_sha256") != hashlib.sha256(prefix).hexdigest():
        return "the pinned prefix no longer has the tile's SHA-256"
    if tile.get("leaf_hash") != leaf_digest(prefix):
        return "the pinned prefix no longer has the tile's leaf hash"
    return None


def _anchors(
    folder: AuditFolder,
    master: bytes | None,
    tsa_bundle: list[x509.Certificate] | None,
    out: SealedHistory,
) -> None:
    anchors, problem = read_anchors(folder.anchors)
    problem = folder.unreadable.get(cp.ANCHORS, problem)
    if problem is not None:
        out.findings.append(
            Finding("bernstein.rfc3161.file", "readable anchors", problem, cp.ANCHORS)
        )
    for anchor in anchors:
        subject = f"{cp.ANCHORS} line {anchor.line}"
        expected = f"a token over {anchor.payload_sha256[:16]}…"
        reason = imprint_problem(anchor)
        if reason is not None:
            out.findings.append(Finding("bernstein.rfc3161.token", expected, reason, subject))
        elif tsa_bundle:
            reason = tsa_problem(anchor, tsa_bundle, require_timestamping=True)
            if reason is not None:
                out.findings.append(
                    Finding(
                        "bernstein.rfc3161.tsa",
                        "a TSA the trust bundle vouches for",
                        reason,
                        subject,
                    )
                )
    for contradiction in anchor_contradictions(
        anchors, folder.origin_and_count(), known_roots(folder, master)
    ):
        out.findings.append(
            Finding(
                "bernstein.rfc3161.contradiction",
                "a history extending what a TSA timestamped",
                contradiction,
                cp.ANCHORS,
            )
        )
    if anchors and not tsa_bundle:
        out.notes.append(
            "bernstein: RFC 3161 anchors checked against their checkpoints; the TSAs that "
            "signed them were not authenticated (give --tsa-bundle)"
        )
    elif anchors:
        out.notes.append(
            f"bernstein: {len(anchors)} RFC 3161 anchor(s) checked against their checkpoints, "
            "their TSAs against the trust bundle"
        )


def _seals(workdir: Workdir, folder: AuditFolder, out: SealedHistory) -> str | None:
    """Every seal must still hold (the log only grows); only the newest must name every
    day file. Returns the newest seal's root."""
    newest_root = None
    for position, path in enumerate(folder.seal_files):
        try:
            check = check_seal(path, read_seal(workdir, path), folder.live, folder.leaves)
        except SealUnreadable as exc:
            out.findings.append(
                Finding("bernstein.seal.unreadable", "a seal document", str(exc), path)
            )
            continue
        if position == 0:
            newest_root = check.root_hash
        for problem in check.problems:
            if problem.kind == "inserted" and position > 0:
                continue  # a day file newer than an older seal
            out.findings.append(
                Finding(
                    SEAL_CHECKS[problem.kind],
                    problem.expected,
                    problem.actual,
                    f"{_segment(problem.segment)} (sealed by {path})",
                )
            )
    return newest_root


def _checkpoints(
    folder: AuditFolder, master: bytes | None, newest_root: str | None, out: SealedHistory
) -> None:
    if master is None:
        out.notes.append(
            "bernstein: checkpoints imported but not authenticated (give --audit-key): "
            "a cut audit tail is only detected once they are"
        )
        return
    ledger = cp.read_ledger(folder.ledger, master)
    if ledger.problem is not None:
        out.findings.append(
            Finding(
                "bernstein.checkpoint.line",
                "a signed checkpoint linked to the one before",
                ledger.problem.reason,
                f"{cp.LEDGER} line {ledger.problem.line}",
            )
        )
    if ledger.torn_tail:
        out.findings.append(
            Finding(
                "bernstein.checkpoint.torn",
                "complete lines",
                "an incomplete last line (bernstein skips it)",
                cp.LEDGER,
            )
        )
    _pointer(folder, master, ledger, out)
    last = ledger.last
    if last is None:
        return
    if not folder.seal_files:
        out.findings.append(
            Finding(
                "bernstein.seal.checkpoint",
                str(last.get("root_hash", "")),
                "no seal",
                f"{SEALS} (the last checkpoint of {cp.LEDGER} pins a seal)",
            )
        )
    elif newest_root is not None and str(last.get("root_hash", "")) != newest_root:
        out.findings.append(
            Finding(
                "bernstein.seal.checkpoint",
                str(last.get("root_hash", "")),
                newest_root,
                f"{folder.seal_files[0]} (root), {cp.LEDGER} (last checkpoint)",
            )
        )
    try:
        conflicts = cp.check_extension(
            last, folder.snapshot, folder.origin_and_count(), folder.leaves
        )
    except (ValueError, TypeError, AttributeError) as exc:
        out.findings.append(
            Finding("bernstein.checkpoint.line", "usable values", str(exc), cp.LEDGER)
        )
        return
    if conflicts and cp.acknowledged(conflicts, last, folder.snapshot):
        out.notes.append(
            "bernstein: the history departs from the last checkpoint, and a "
            "chain.tear_acknowledged record covers it"
        )
        return
    for conflict in conflicts:
        out.findings.append(
            Finding(
                "bernstein.checkpoint.extension",
                conflict.expected,
                conflict.actual,
                f"{_segment(conflict.segment)} ({conflict.kind}, last checkpoint of {cp.LEDGER})",
            )
        )


def _pointer(
    folder: AuditFolder, master: bytes, ledger: cp.CheckpointLedger, out: SealedHistory
) -> None:
    newest = len(ledger.checkpoints) - 1
    if folder.pointer is None:
        if newest >= 0:
            out.findings.append(
                Finding(
                    "bernstein.checkpoint.pointer",
                    f"latest.json naming checkpoint {newest + 1}",
                    "absent",
                    cp.POINTER,
                )
            )
        return
    try:
        pointer = cp.read_pointer(folder.pointer, master)
    except ValueError as exc:
        out.findings.append(
            Finding("bernstein.checkpoint.pointer", "a readable pointer", str(exc), cp.POINTER)
        )
        return
    if pointer is None:
        out.findings.append(
            Finding(
                "bernstein.checkpoint.pointer",
                "a checkpoint signed under the audit key",
                "unsigned, forged or unreadable",
                cp.POINTER,
            )
        )
        return
    position = cp.pointer_position(pointer, ledger)
    if position is None:
        out.findings.append(
            Finding(
                "bernstein.checkpoint.pointer",
                "a checkpoint the ledger holds",
                f"root {str(pointer.get('root_hash', ''))[:16]}…, "
                f"{pointer.get('entry_count', '?')} records: not in the ledger",
                cp.POINTER,
            )
        )
    elif position < newest:
        out.findings.append(
            Finding(
                "bernstein.checkpoint.pointer_behind",
                f"checkpoint {newest + 1} (the ledger's newest)",
                f"checkpoint {position + 1}",
                cp.POINTER,
            )
        )


STATE = "--witness-state"
"""The subject of what the witness state says: the folder the user gave."""


def _witness_state(
    folder: AuditFolder,
    master: bytes | None,
    read: Callable[[str], bytes | None],
    out: SealedHistory,
) -> None:
    """The witness's own pins, read as bernstein's ``--witness-state`` reads them, for the
    co-signed origins and the chain's own: a rollback of the log host that took the
    co-signatures with it cannot take these, so the history must not contradict them."""
    cosignatures, _ = read_cosignatures(folder.cosignatures)
    origins = {c.origin for c in cosignatures}
    local = folder.origin_and_count()[0]
    if local is not None:
        origins.add(local)
    try:
        pins = state_claims(read, sorted(origins))
    except ValueError as exc:
        out.findings.append(
            Finding("bernstein.witness.state", "pins bernstein's verifier reads", str(exc), STATE)
        )
        return
    if not pins:
        out.notes.append(
            "bernstein: the witness state (--witness-state) holds no pin for the chain's origin"
            " or a co-signed one: it decided nothing"
        )
    for contradiction in witness_contradictions(pins, folder, master):
        out.findings.append(
            Finding(
                "bernstein.witness.contradiction",
                "a history extending what the witness's state pins",
                contradiction,
                STATE,
            )
        )


def _witness(
    folder: AuditFolder, master: bytes | None, trusted: frozenset[bytes], out: SealedHistory
) -> None:
    cosignatures, problem = read_cosignatures(folder.cosignatures)
    problem = folder.unreadable.get(cp.COSIGNATURES, problem)
    if problem is not None:
        out.findings.append(
            Finding("bernstein.witness.file", "readable co-signatures", problem, cp.COSIGNATURES)
        )
        return
    if not cosignatures:
        return
    for contradiction in witness_contradictions(cosignatures, folder, master):
        out.findings.append(
            Finding(
                "bernstein.witness.contradiction",
                "a history extending what a witness co-signed",
                contradiction,
                cp.COSIGNATURES,
            )
        )
    if not trusted:
        out.notes.append(
            "bernstein: witness co-signatures read but not authenticated (give the witness's "
            "key with --trust)"
        )
        return
    for cosignature in cosignatures:
        reasons = [cosignature_problem(cosignature, key) for key in sorted(trusted)]
        if all(reasons):
            out.findings.append(
                Finding(
                    "bernstein.witness.signature",
                    "a co-signature by a trusted key (--trust)",
                    str(reasons[0]),
                    f"{cp.COSIGNATURES} line {cosignature.line}",
                )
            )
