"""What ``bernstein audit verify`` says about an audit folder, and what strict adds.

bernstein's command runs "pillars" and exits 1 when any fails (or when ``.sdd/audit``
is absent), 0 otherwise (docs/BERNSTEIN.md §13). The pillars that read the audit folder
are redone here: the HMAC chain, the Merkle seal, the checkpoints (ledger, pointer,
extension), the RFC 3161 anchors (their tokens' imprints, and their TSAs against a trust
bundle when one is given) and the witness co-signatures. Of the others, the lineage
activity pillar is named as not reproduced when the lineage store's log exists (it passes
without one), never guessed; the rest read files outside ``.sdd/audit`` and
``.sdd/lineage``.

``sealed_history.py`` turns the same reading (``read_folder``) into strict findings, and
adds what bernstein lets pass.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentledger import _core
from agentledger.bernstein import checkpoints as cp
from agentledger.bernstein.anchors import (
    anchor_contradictions,
    committed_records,
    read_anchors,
    token_problem,
)
from agentledger.bernstein.audit_chain import AuditChain, verify_audit, walk_raises
from agentledger.bernstein.audit_opening import opening_raises
from agentledger.bernstein.audit_tears import unresolved_damage
from agentledger.bernstein.format import AUDIT_DIR, LINEAGE_DIR, LINEAGE_LOG, SPKI_ED25519_PREFIX
from agentledger.bernstein.lineage_activity import (
    NotReproduced,
    lineage_activity,
    sidecar_check,
    store_problem,
)
from agentledger.bernstein.seal import (
    PrefixLeaves,
    SealCheck,
    SealUnreadable,
    check_seal,
    parse_seal,
    seal_paths,
)
from agentledger.bernstein.witness_state import WitnessClaim, state_claims
from agentledger.bernstein.workdir import (
    ARCHIVE_DIR,
    UNREAD_ARCHIVES,
    UNREADABLE_DAY_FILE,
    Workdir,
    read_fails,
)
from agentledger.limits import MAX_DOCUMENT_BYTES

if TYPE_CHECKING:
    from cryptography import x509  # annotations only

WITNESS_DOMAIN = b"bernstein/audit-checkpoint-witness/v1\n"


@dataclass
class Pillar:
    """One of bernstein's pillars: passed or not, and why, in its words."""

    name: str
    ok: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class AuditVerdict:
    """``bernstein audit verify``'s answer, as far as it is redone here."""

    pillars: list[Pillar] = field(default_factory=list)
    not_reproduced: list[str] = field(default_factory=list)
    """Pillars whose files exist but which are not redone: the code may then differ."""
    audit_dir: bool = True

    @property
    def code(self) -> int:
        if not self.audit_dir:
            return 1
        return 0 if all(p.ok for p in self.pillars) else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "audit_dir": self.audit_dir,
            "pillars": [{"name": p.name, "ok": p.ok, "problems": p.problems} for p in self.pillars],
            "not_reproduced": self.not_reproduced,
        }


# ---- reading the folder ---------------------------------------------------------------


@dataclass
class AuditFolder:
    """Everything of ``.sdd/audit`` these checks read, from a workdir or a ledger."""

    paths: list[str]
    live: dict[str, bytes]
    """Day files directly in ``.sdd/audit``, by file name."""
    snapshot: list[tuple[str, bytes]]
    """Archives (inflated, under their live name) then day files: the chain, in order."""
    seal_files: list[str]
    ledger: bytes | None
    pointer: bytes | None
    cosignatures: bytes | None
    anchors: bytes | None
    segments: list[tuple[str, bytes]]
    """The chain as the HMAC verifier reads it (workdir paths)."""
    oversized: list[str] = field(default_factory=list)
    """Checkpoint files over ``MAX_DOCUMENT_BYTES``: not parsed (read as absent), named."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """Checkpoint files bernstein's read fails on (``workdir.read_fails``), read as absent:
    path -> why."""
    chain: AuditChain | None = None
    """The segments' walk, when done: a clean one makes every line a canonical record."""
    _origin_count: tuple[str | None, int] | None = None
    leaves: PrefixLeaves = field(default_factory=PrefixLeaves)
    """The day files' prefix leaves, hashed once for the seals and the checkpoints."""

    def origin_and_count(self) -> tuple[str | None, int]:
        """The chain's origin and record count (``checkpoints.origin_and_count``), once. On
        a chain the walk found clean with its key every non-empty line is a canonical
        record with an ``hmac``: only the first is parsed."""
        if self._origin_count is None:
            clean = self.chain is not None and self.chain.ok and self.chain.authenticated
            self._origin_count = (
                _clean_origin_and_count(self.snapshot, self.chain)
                if clean and self.chain is not None
                else cp.origin_and_count(self.snapshot)
            )
        return self._origin_count

    @functools.cached_property
    def _uncaught(self) -> cp.UncaughtLine | None:
        clean = self.chain is not None and self.chain.ok and self.chain.authenticated
        return None if clean else cp.uncaught_line(self.snapshot)

    def history_raises(self, *, origin_only: bool = False) -> str | None:
        """Why bernstein's readers of the history raise (``count_entries`` on a line
        anywhere; ``compute_origin``, ``origin_only``, on one no later than the segment
        holding the origin); None when they do not. A clean walk holds no such line."""
        found = self._uncaught
        if found is None:
            return None
        if origin_only:
            holder = cp.origin_segment(self.snapshot)
            if holder is not None and found.segment > holder:
                return None
        return found.describe()

    @property
    def sealed(self) -> bool:
        return bool(self.seal_files) or self.ledger is not None


def _clean_origin_and_count(
    snapshot: list[tuple[str, bytes]], chain: AuditChain
) -> tuple[str | None, int]:
    for _name, raw in snapshot:
        first = next((line for line in raw.split(b"\n") if line), None)
        if first is not None:
            return str(json.loads(first)["hmac"]), chain.records
    return None, chain.records


def _document(
    workdir: Workdir,
    paths: list[str],
    path: str,
    oversized: list[str],
    unreadable: dict[str, str],
) -> bytes | None:
    reason = read_fails(workdir, path)
    if reason is not None:
        unreadable[path] = f"{posixpath.basename(path)} {reason}: bernstein's read of it fails"
        return None
    data = workdir.read(path) if path in paths else None
    if data is not None and len(data) > MAX_DOCUMENT_BYTES:
        oversized.append(path)
        return None
    return data


def read_folder(
    workdir: Workdir,
    segments: list[tuple[str, bytes]] | None = None,
    chain: AuditChain | None = None,
) -> AuditFolder:
    """The audit folder; ``segments`` (``workdir.audit_segments()``) and ``chain`` (their
    walk) when the caller has them already: the day files are then not read again."""
    paths = workdir.audit_files()
    segments = workdir.audit_segments() if segments is None else segments
    oversized: list[str] = []
    unreadable: dict[str, str] = {}
    live = {
        posixpath.basename(path): data
        for path, data in segments
        if posixpath.dirname(path) == AUDIT_DIR
    }
    # Archives keep their live name; one that does not inflate is skipped, as bernstein does
    # (and one past the read limit, which bernstein would inflate: the walk names it).
    snapshot = [
        (posixpath.basename(path)[: -len(".gz")], data)
        for path, data in segments
        if posixpath.dirname(path) == ARCHIVE_DIR and data not in UNREAD_ARCHIVES
    ]
    snapshot.extend(sorted(live.items()))
    return AuditFolder(
        paths=paths,
        live=live,
        snapshot=snapshot,
        seal_files=seal_paths([*paths, *workdir.audit_folders()]),
        ledger=_document(workdir, paths, cp.LEDGER, oversized, unreadable),
        pointer=_document(workdir, paths, cp.POINTER, oversized, unreadable),
        cosignatures=_document(workdir, paths, cp.COSIGNATURES, oversized, unreadable),
        anchors=_document(workdir, paths, cp.ANCHORS, oversized, unreadable),
        segments=segments,
        oversized=oversized,
        unreadable=unreadable,
        chain=chain,
    )


def read_seal(workdir: Workdir, path: str) -> dict[str, Any]:
    """``parse_seal`` of the seal at ``path``; ``SealUnreadable`` for a folder named like
    one too (bernstein's glob lists it, and its read raises)."""
    reason = read_fails(workdir, path)
    if reason is not None:
        raise SealUnreadable(reason)
    return parse_seal(workdir.read(path) or b"")


def newest_seal(folder: AuditFolder, workdir: Workdir) -> SealCheck | str | None:
    """The newest seal checked against the day files; a string when it cannot be read
    (bernstein's own verifier raises then); None when there is no seal."""
    if not folder.seal_files:
        return None
    path = folder.seal_files[0]
    try:
        return check_seal(path, read_seal(workdir, path), folder.live, folder.leaves)
    except SealUnreadable as exc:
        return f"{path}: {exc}"


# ---- witness co-signatures -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cosignature:
    line: int
    origin: str
    entry_count: int
    checkpoint_root: str
    payload_sha256: str
    signature_b64: str

    @property
    def where(self) -> str:
        return f"cosignatures.jsonl:{self.line}"


def read_cosignatures(raw: bytes | None) -> tuple[list[Cosignature], str | None]:
    """The co-signature lines and the first reason the file fails to read (bernstein
    then fails the witness pillar)."""
    records, reason = committed_records(raw, "cosignatures.jsonl", _cosignature_problem)
    cosignatures = [
        Cosignature(
            number,
            doc["origin"],
            doc["entry_count"],
            doc["checkpoint_root"],
            doc["payload_sha256"],
            doc["signature_b64"],
        )
        for number, doc in records
    ]
    return cosignatures, reason


def _cosignature_problem(doc: dict[str, Any]) -> str | None:
    if doc.get("version") != 1:
        return f"unsupported co-signature version {doc.get('version')!r}"
    if str(doc.get("kind", "")) != "ed25519":
        return f"unsupported co-signature kind {str(doc.get('kind', ''))!r}"
    for name in ("origin", "checkpoint_root", "payload_sha256", "signature_b64"):
        value = doc.get(name)
        if not isinstance(value, str) or not value:
            return f"missing or empty {name}"
    count = doc.get("entry_count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return f"entry_count must be a non-negative integer, got {count!r}"
    return None


def witness_key(data: bytes) -> bytes:
    """A witness public key file as bernstein reads it: an Ed25519 SPKI PEM, else 32 raw
    bytes (surrounding whitespace stripped from a longer file)."""
    if data.lstrip().startswith(b"-----BEGIN"):
        text = data.decode("ascii", "replace")
        body = "".join(
            line for line in text.splitlines() if line.strip() and not line.startswith("-----")
        )
        try:
            der = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            der = b""
        if len(der) == 44 and der.startswith(SPKI_ED25519_PREFIX):
            return der[12:]
        raise ValueError("not an Ed25519 public key PEM")
    raw = data.strip() if len(data) > 32 else data
    if len(raw) != 32:
        raise ValueError(f"a raw Ed25519 public key is 32 bytes, not {len(raw)}")
    return raw


def cosignature_problem(cosignature: Cosignature, key: bytes) -> str | None:
    """Why the co-signature does not verify under ``key``, None when it does."""
    try:
        signature = base64.b64decode(cosignature.signature_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        return f"co-signature is not valid base64: {exc}"
    try:
        bytes.fromhex(cosignature.payload_sha256)
    except ValueError as exc:
        return f"co-signature payload_sha256 is not valid hex: {exc}"
    claim = {
        "origin": cosignature.origin,
        "entry_count": cosignature.entry_count,
        "checkpoint_root": cosignature.checkpoint_root,
        "payload_sha256": cosignature.payload_sha256,
    }
    if len(signature) != 64 or not _core.ed25519_verify(
        key, WITNESS_DOMAIN + cp.canonical(claim), signature
    ):
        return "co-signature does not verify under the pinned witness public key"
    return None


# ---- bernstein's verdict -----------------------------------------------------------------


def audit_verdict(
    workdir: Workdir,
    master: bytes | None,
    *,
    witness: bytes | None = None,
    witness_state: Callable[[str], bytes | None] | None = None,
    tsa_bundle: list[x509.Certificate] | None = None,
    folder: AuditFolder | None = None,
    chain: AuditChain | None = None,
) -> AuditVerdict:
    """``bernstein audit verify`` (with ``--witness-key`` when ``witness`` is given, and
    ``--rfc3161-trusted-tsa-bundle`` when ``tsa_bundle`` is, ``--witness-state`` when
    ``witness_state`` reads a state folder's file by name)."""
    folder = folder if folder is not None else read_folder(workdir)
    if folder.segments and master is not None and folder.chain is None:
        folder.chain = verify_audit(folder.segments, master)
        # Walked with this key: the HMAC pillar's walk too (on a long chain, a quarter of
        # the command's time).
        chain = chain if chain is not None else folder.chain
    verdict = AuditVerdict(audit_dir=workdir.has_dir(AUDIT_DIR))
    if not verdict.audit_dir:
        return verdict
    verdict.pillars.append(_hmac_pillar(folder, master, chain))
    verdict.pillars.append(_merkle_pillar(folder, workdir))
    verdict.pillars.append(_checkpoint_pillar(folder, master))
    verdict.pillars.append(_anchor_pillar(folder, master, tsa_bundle))
    verdict.pillars.append(_witness_pillar(folder, master, witness, witness_state))
    verdict.not_reproduced += [
        f"{path} (over {MAX_DOCUMENT_BYTES} bytes)" for path in folder.oversized
    ]
    lineage = _lineage_pillar(workdir, folder, master)
    if lineage is None:
        verdict.not_reproduced.append(f"Lineage Activity ({LINEAGE_LOG})")
    else:
        verdict.pillars.append(lineage)
    return verdict


def _lineage_pillar(workdir: Workdir, folder: AuditFolder, master: bytes | None) -> Pillar | None:
    """bernstein's lineage activity pillar; None when it is not reproduced here."""
    pillar = Pillar("Lineage Activity", True)
    if not workdir.has_dir(LINEAGE_DIR):
        return pillar
    blocked = store_problem(workdir)
    if blocked is not None:
        pillar.ok = False
        pillar.problems.append(blocked)
        return pillar
    log = workdir.read(LINEAGE_LOG) if workdir.digest(LINEAGE_LOG) is not None else None
    if log is not None and len(log) > MAX_DOCUMENT_BYTES:
        return None
    days = [data for _, data in sorted(folder.live.items())]
    opening = None
    if log and master is not None and workdir.has_dir(AUDIT_DIR):
        opening = _opening_problem(folder, master)
    try:
        found = lineage_activity(log, days, master is not None, sidecar_check(workdir), opening)
    except NotReproduced:
        return None
    pillar.problems = found.problems
    pillar.ok = not found.problems
    return pillar


def _opening_problem(folder: AuditFolder, master: bytes) -> str | None:
    """Why bernstein's ``AuditLog(.sdd/audit, key)`` raises as it opens (its tail
    recovery, ``audit_opening.py``), over the segments its reads do not fail on."""
    live = [data for _, data in sorted(folder.live.items()) if data != UNREADABLE_DAY_FILE]
    archives = [
        data
        for path, data in folder.segments
        if posixpath.dirname(path) == ARCHIVE_DIR and data not in UNREAD_ARCHIVES
    ]
    return opening_raises(live, archives, master)


def _hmac_pillar(folder: AuditFolder, master: bytes | None, chain: AuditChain | None) -> Pillar:
    pillar = Pillar("HMAC Chain", True)
    if not folder.segments:
        return pillar
    if master is None:
        pillar.ok = False
        pillar.problems.append("no audit HMAC key (give --audit-key)")
        return pillar
    chain = (
        chain
        if chain is not None and chain.authenticated
        else verify_audit(folder.segments, master)
    )
    if chain.problems:
        # Crash-shaped damage is a tear, which a chain.tear_acknowledged record clears,
        # unless bernstein's walk raises on it first.
        raised = walk_raises(folder.segments, chain)
        try:
            pillar.problems = [raised] if raised else unresolved_damage(folder.segments, chain)
        except ValueError as exc:
            pillar.problems = [str(exc)]
    pillar.ok = not pillar.problems
    return pillar


def _merkle_pillar(folder: AuditFolder, workdir: Workdir) -> Pillar:
    pillar = Pillar("Merkle Tree", False)
    seal = newest_seal(folder, workdir)
    if seal is None:
        pillar.problems.append("no Merkle seal found")
    elif isinstance(seal, str):
        pillar.problems.append(f"bernstein's verifier raises on the seal: {seal}")
    else:
        pillar.problems = [p.describe() for p in seal.problems]
        pillar.ok = not seal.problems
    return pillar


def _checkpoint_pillar(folder: AuditFolder, master: bytes | None) -> Pillar:
    pillar = Pillar("Checkpoints", True)
    if master is None:
        return pillar  # bernstein skips this pillar without the key (and passes it)
    if cp.LEDGER in folder.unreadable:
        return Pillar(pillar.name, False, [folder.unreadable[cp.LEDGER]])
    ledger = cp.read_ledger(folder.ledger, master)
    if ledger.problem is not None:
        pillar.ok = False
        pillar.problems.append(f"checkpoints.jsonl:{ledger.problem.line}: {ledger.problem.reason}")
        return pillar
    try:
        pointer = cp.read_pointer(folder.pointer, master)
    except ValueError as exc:
        return Pillar(pillar.name, False, [f"latest.json: {exc}"])
    if pointer is not None and cp.pointer_position(pointer, ledger) is None:
        pillar.ok = False
        pillar.problems.append("latest.json: the published checkpoint is absent from the ledger")
        return pillar
    last = ledger.last
    if last is None:
        return pillar
    raised = folder.history_raises()
    if raised is not None:
        return Pillar(pillar.name, False, [raised])
    try:
        conflicts = cp.check_extension(
            last, folder.snapshot, folder.origin_and_count(), folder.leaves
        )
    except (ValueError, TypeError, AttributeError) as exc:
        pillar.ok = False
        pillar.problems.append(f"bernstein's verifier raises on the checkpoint: {exc}")
        return pillar
    if not conflicts:
        return pillar
    # bernstein opens the log and queries it for acknowledgements before judging them.
    try:
        opening = _opening_problem(folder, master)
        covered = opening is None and cp.acknowledged(
            conflicts, last, folder.snapshot, as_bernstein=True
        )
    except ValueError as exc:
        opening, covered = str(exc), False
    if opening is not None:
        return Pillar(pillar.name, False, [opening])
    if not covered:
        pillar.ok = False
        pillar.problems = [
            f"{c.segment or c.kind}: {c.kind} (pinned {c.expected}, now {c.actual})"
            for c in conflicts
        ]
    return pillar


def known_roots(folder: AuditFolder, master: bytes | None) -> set[str] | None:
    """The roots of the checkpoints on record; None when they cannot be read (no key, or
    a ledger that does not validate or read): then no root counts as gone."""
    if master is None or cp.LEDGER in folder.unreadable:
        return None
    ledger = cp.read_ledger(folder.ledger, master)
    if ledger.problem is not None:
        return None
    return {str(c.get("root_hash", "")) for c in ledger.checkpoints}


def _roots_raise(folder: AuditFolder, master: bytes | None) -> list[str]:
    """Why bernstein's ``_known_checkpoint_roots`` raises (it catches only a ledger that
    fails to validate): the anchor and witness pillars that ask it fail with it."""
    if master is None or cp.LEDGER in folder.unreadable:
        return []
    problem = cp.read_ledger(folder.ledger, master).problem
    if problem is None or not problem.raises:
        return []
    return [f"checkpoints.jsonl:{problem.line}: {problem.reason}"]


def _history_raises(folder: AuditFolder) -> list[str]:
    """Why bernstein's contradiction checks raise reading the history's record count."""
    raised = folder.history_raises()
    return [] if raised is None else [raised]


def _anchor_pillar(
    folder: AuditFolder, master: bytes | None, tsa_bundle: list[x509.Certificate] | None
) -> Pillar:
    pillar = Pillar("External Anchors", True)
    if cp.ANCHORS in folder.unreadable:
        return Pillar(pillar.name, False, [folder.unreadable[cp.ANCHORS]])
    anchors, problem = read_anchors(folder.anchors)
    if problem is not None:
        return Pillar(pillar.name, False, [problem])
    for anchor in anchors:
        reason = token_problem(anchor, tsa_bundle)
        if reason is not None:
            pillar.problems.append(f"anchors.jsonl:{anchor.line}: {reason}")
    if not pillar.problems and anchors:  # bernstein reads the roots only with anchors
        raised = _roots_raise(folder, master) or _history_raises(folder)
        pillar.problems = raised or anchor_contradictions(
            anchors, folder.origin_and_count(), known_roots(folder, master)
        )
    pillar.ok = not pillar.problems
    return pillar


def _witness_pillar(
    folder: AuditFolder,
    master: bytes | None,
    witness: bytes | None,
    witness_state: Callable[[str], bytes | None] | None,
) -> Pillar:
    pillar = Pillar("Witness Co-signatures", True)
    if cp.COSIGNATURES in folder.unreadable:
        return Pillar(pillar.name, False, [folder.unreadable[cp.COSIGNATURES]])
    cosignatures, problem = read_cosignatures(folder.cosignatures)
    if problem is not None:
        return Pillar(pillar.name, False, [problem])
    if witness is None:
        return pillar  # present but unauthenticated: bernstein drives no verdict from them
    for cosignature in cosignatures:
        reason = cosignature_problem(cosignature, witness)
        if reason is not None:
            pillar.problems.append(f"cosignatures.jsonl:{cosignature.line}: {reason}")
    if pillar.problems:
        pillar.ok = False
        return pillar
    claims: list[Cosignature | WitnessClaim] = list(cosignatures)
    if witness_state is not None:
        # The witness's pins for the co-signed origins and the chain's own (sorted, as
        # bernstein reads them), which a rollback of the log host cannot delete.
        origins = {c.origin for c in cosignatures}
        raised_here = folder.history_raises(origin_only=True)
        if raised_here is not None:
            return Pillar(pillar.name, False, [raised_here])
        local = folder.origin_and_count()[0]
        if local is not None:
            origins.add(local)
        try:
            claims += state_claims(witness_state, sorted(origins))
        except ValueError as exc:
            return Pillar(pillar.name, False, [str(exc)])
    # bernstein reads the checkpoint roots only when a claim is to be held to them.
    raised = (_roots_raise(folder, master) or _history_raises(folder)) if claims else []
    pillar.problems = raised or witness_contradictions(claims, folder, master)
    pillar.ok = not pillar.problems
    return pillar


def witness_contradictions(
    claims: Sequence[Cosignature | WitnessClaim], folder: AuditFolder, master: bytes | None
) -> list[str]:
    """How the history contradicts what a witness stands behind (verified co-signatures,
    its own state): fewer records than the strongest claim, another origin, or (with the
    key) a witnessed root that no checkpoint on record holds any more."""
    if not claims:
        return []
    found = []
    strongest = max(claims, key=lambda c: c.entry_count)
    origin, count = folder.origin_and_count()
    if count < strongest.entry_count:
        found.append(
            f"chain holds {count} records; a witness co-signed {strongest.entry_count} "
            f"({strongest.where})"
        )
    if origin is not None and strongest.origin and origin != strongest.origin:
        found.append(f"chain origin {origin[:16]}… is not the witnessed {strongest.origin[:16]}…")
    roots = known_roots(folder, master)
    if roots is not None:
        found.extend(
            f"witnessed checkpoint root {c.checkpoint_root[:16]}… is no longer on record "
            f"({c.where})"
            for c in claims
            if c.checkpoint_root not in roots
        )
    return found
