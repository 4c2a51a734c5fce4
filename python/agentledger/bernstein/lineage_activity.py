"""The lineage activity pillar of ``bernstein audit verify`` (docs/BERNSTEIN.md §13).

bernstein reads the lineage store's log (``.sdd/lineage/log.jsonl``, one entry per line:
an artefact's content hash and the hashes of the entries it derives from) and passes
only when every entry is *active*: no entry names a parent the log does not hold, and no
entry descends from one a revocation in the audit chain names (``mandate.revocation`` or
``eval.gate_revocation`` records carrying ``lineage_entry_hash`` or ``lineage_ref``, at
the top of their details or under ``details.details``). Since an entry with an unknown
parent is itself inactive, every entry is active exactly when all parents are in the log
and no revoked hash is.

An entry's hash is ``"sha256:" + H(acanon(entry))`` over its fields as bernstein's
dataclass rebuilds them (optional fields dropped when null). A line that does not parse
or an entry that bernstein's constructor refuses makes its verifier raise: the pillar
fails. Entries with the fields whose rebuilding is not reproduced here (``model_ref``,
``external_attestation``) are named, not guessed. Revocations are read as bernstein's
query reads the day files, and whatever makes that reading (or the opening of the log,
``audit_opening.py``) raise fails the pillar, as bernstein's ``except Exception`` does.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentledger.bernstein.audit_query import query
from agentledger.bernstein.format import LINEAGE_DIR, LINEAGE_LOG

if TYPE_CHECKING:
    from agentledger.bernstein.workdir import Workdir

LOG_NAME = posixpath.basename(LINEAGE_LOG)
STORE_FOLDERS = ("by-artefact", "tips", "signatures")
"""The folders ``LineageStore(.sdd/lineage)`` makes (``mkdir(exist_ok=True)``) before it
reads the log."""
SidecarCheck = Callable[[str, str], str | None]
"""``(artefact_path, entry_hash)`` -> why bernstein's read of that entry's signature
sidecar fails (``None``: it reads, or there is none)."""
REVOCATIONS = frozenset({"mandate.revocation", "eval.gate_revocation"})
ARTEFACT_KINDS = frozenset(
    {
        "file",
        "sdd-runtime",
        "mcp-result",
        "config",
        "tool-result",
        "report",
        "dataset",
        "action_log",
        "ops_result",
        "query-result",
        "external",
        "finding",
        "coverage",
        "blob",
    }
)
TRUST_CLASSES = frozenset({"operator", "workspace", "first_party", "third_party", "public"})
SENSITIVITY_CLASSES = frozenset({"public", "internal", "confidential", "restricted"})
ACTIVITY_SOURCES = frozenset({"scheduler", "adapter"})
HEX64 = re.compile(r"\A[0-9a-f]{64}\Z")
STRING_FIELDS = ("artefact_path", "artefact_kind", "content_hash", "agent_id")
STRING_FIELDS_AFTER = ("agent_card_kid", "tool_call_id", "span_id")
NOT_REPRODUCED = ("model_ref", "external_attestation")


class NotReproduced(Exception):
    """The log holds what this module does not rebuild as bernstein does."""


@dataclass
class LineageActivity:
    """The pillar's verdict: ``problems`` empty when it passes."""

    problems: list[str]
    entries: int


def lineage_activity(
    log: bytes | None,
    audit_days: list[bytes] | None,
    keyed: bool,
    sidecar: SidecarCheck | None = None,
    opening_problem: str | None = None,
) -> LineageActivity:
    """The pillar over the log's bytes (None: no log) and the live audit day files
    (None: no ``.sdd/audit``); ``keyed`` when the audit key was given (bernstein cannot
    read revocations without it); ``sidecar`` checks the signature file bernstein reads
    with each entry (``LineageStore.read_log``); ``opening_problem`` is why bernstein's
    opening of the audit log raises (``audit_opening.opening_raises``), which fails the
    pillar once it has entries. ``NotReproduced`` when an entry is beyond this module."""
    hashes = []
    try:
        for line, doc in _lines(log):
            entry_hash, parents = _entry(doc)
            problem = sidecar(str(doc["artefact_path"]), entry_hash) if sidecar else None
            if problem is not None:
                return LineageActivity([f"{LOG_NAME} line {line}: {problem}"], 0)
            hashes.append((line, entry_hash, parents))
    except ValueError as exc:
        return LineageActivity([f"bernstein's verifier raises on {LOG_NAME}: {exc}"], 0)
    if not hashes:
        return LineageActivity([], 0)
    if audit_days is not None and not keyed:
        return LineageActivity(
            ["revocations in the audit chain cannot be read without the audit key"], len(hashes)
        )
    if opening_problem is not None:
        return LineageActivity([opening_problem], len(hashes))
    try:
        revoked = _revoked(audit_days or [])
    except ValueError as exc:
        return LineageActivity([str(exc)], len(hashes))
    known = {entry_hash for _, entry_hash, _ in hashes}
    problems = []
    for line, entry_hash, parents in hashes:
        if entry_hash in revoked:
            problems.append(f"{LOG_NAME} line {line}: entry {entry_hash} is revoked")
        missing = [p for p in parents if p not in known]
        if missing:
            problems.append(
                f"{LOG_NAME} line {line}: entry {entry_hash} names a parent the log does not "
                f"hold ({missing[0]})"
            )
    return LineageActivity(problems, len(hashes))


def _lines(log: bytes | None) -> list[tuple[int, Any]]:
    if not log:
        return []
    found = []
    for number, raw in enumerate(log.rstrip(b"\n").split(b"\n"), start=1):
        if not raw:
            continue
        try:
            found.append((number, json.loads(raw)))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"line {number} does not parse: {exc}") from None
    return found


def _integer(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name}: {exc}") from None


def _entry(doc: Any) -> tuple[str, list[str]]:
    """The entry's hash and parents, as bernstein's ``LineageEntry`` would give them."""
    if not isinstance(doc, dict):
        raise ValueError("an entry is not an object")
    if any(doc.get(name) is not None for name in NOT_REPRODUCED):
        raise NotReproduced(f"an entry carries {', '.join(NOT_REPRODUCED)}")
    try:
        body: dict[str, Any] = {"v": _integer(doc["v"], "v")}
        body.update((name, str(doc[name])) for name in STRING_FIELDS)
        parents = doc["parent_hashes"]
        if not isinstance(parents, list | str | dict):
            raise ValueError(f"parent_hashes is not iterable ({type(parents).__name__})")
        body["parent_hashes"] = list(parents)
        body.update((name, str(doc[name])) for name in STRING_FIELDS_AFTER)
        body["ts_ns"] = _integer(doc["ts_ns"], "ts_ns")
        body["operator_hmac"] = str(doc["operator_hmac"])
    except KeyError as exc:
        raise ValueError(f"an entry lacks {exc}") from None
    for name in ("trust_class", "activity_source", "sensitivity"):
        if doc.get(name) is not None:
            body[name] = str(doc[name])
    digests = doc.get("attachment_digests")
    if digests is not None:
        if not isinstance(digests, list):
            raise ValueError("attachment_digests is not a list")
        body["attachment_digests"] = [str(d) for d in digests]
    _refused(body)
    canonical = json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    try:
        data = canonical.encode()
    except UnicodeEncodeError as exc:
        raise ValueError(f"an entry cannot be encoded: {exc}") from None
    return "sha256:" + hashlib.sha256(data).hexdigest(), body["parent_hashes"]


def _refused(body: dict[str, Any]) -> None:
    """What bernstein's ``LineageEntry`` constructor refuses."""
    if body["v"] != 1:
        raise ValueError(f"unsupported entry version {body['v']}")
    if body["artefact_kind"] not in ARTEFACT_KINDS:
        raise ValueError(f"unknown artefact_kind {body['artefact_kind']!r}")
    if not body["content_hash"].startswith("sha256:"):
        raise ValueError("a content_hash without sha256:")
    for parent in body["parent_hashes"]:
        if not isinstance(parent, str) or not parent.startswith("sha256:"):
            raise ValueError(f"a parent hash without sha256: ({parent!r})")
    for name, allowed in (
        ("trust_class", TRUST_CLASSES),
        ("activity_source", ACTIVITY_SOURCES),
        ("sensitivity", SENSITIVITY_CLASSES),
    ):
        if name in body and body[name] not in allowed:
            raise ValueError(f"unknown {name} {body[name]!r}")
    digests = body.get("attachment_digests")
    if digests is not None and (not digests or not all(HEX64.match(d) for d in digests)):
        raise ValueError("attachment_digests empty or not 64 lower-case hex digits")


def _revoked(days: list[bytes]) -> set[str]:
    """The lineage hashes revocation records name, read as bernstein's query reads the
    live day files (``audit_query.query``; ``ValueError`` where it raises)."""
    revoked: set[str] = set()
    for record in query(days, REVOCATIONS):
        details = record.get("details", {})
        details = details if isinstance(details, dict) else {}
        nested = details.get("details")
        for source in (details, nested if isinstance(nested, dict) else {}):
            ref = source.get("lineage_entry_hash") or source.get("lineage_ref")
            if isinstance(ref, str) and ref:
                revoked.add(ref)
    return revoked


def store_problem(workdir: Workdir) -> str | None:
    """Why bernstein's ``LineageStore`` cannot open ``.sdd/lineage`` or read its log: a file
    holds the name of a folder it makes (``FileExistsError``), or the log is a folder
    (``read_log`` finds it, and its read raises ``IsADirectoryError``); the pillar reports
    either ``OSError`` as a failed read."""
    for name in STORE_FOLDERS:
        path = f"{LINEAGE_DIR}/{name}"
        if workdir.digest(path) is not None:
            return f"{path} is a file where bernstein's lineage store makes a folder"
    if workdir.has_dir(LINEAGE_LOG):
        return f"{LINEAGE_LOG} is a folder where bernstein's lineage store reads its log"
    return None


def sidecar_check(workdir: Workdir) -> SidecarCheck:
    """``read_log`` reads ``signatures/<shard>/<sha256(path)>/<hex>.jws`` when it exists, as
    UTF-8: a folder there raises ``IsADirectoryError`` (the pillar fails), bytes that are
    not UTF-8 ``UnicodeDecodeError`` (the pillar raises)."""

    def check(artefact_path: str, entry_hash: str) -> str | None:
        full = hashlib.sha256(artefact_path.encode()).hexdigest()
        stem = entry_hash.split(":", 1)[-1]
        path = f"{LINEAGE_DIR}/signatures/{full[:2]}/{full}/{stem}.jws"
        if workdir.has_dir(path):
            return f"{path} is a folder where bernstein reads the entry's signature"
        data = workdir.read(path)
        if data is not None:
            try:
                data.decode()
            except UnicodeDecodeError:
                return f"{path} is not UTF-8: bernstein's read of the signature raises"
        return None

    return check
