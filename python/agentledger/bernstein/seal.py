"""bernstein's Merkle seal of its audit segments (docs/BERNSTEIN.md §11).

At shutdown bernstein writes ``.sdd/audit/merkle/seal-<UTC>.json``: a Merkle root over
the live day files (``*.jsonl`` directly in ``.sdd/audit``), each leaf binding a file's
first ``byte_len`` bytes. ``bernstein audit verify`` reads only the newest seal (the
last name in sort order) and fails on a sealed file that is gone, a day file the seal
does not name, a sealed prefix that shrank or changed, or a root the leaves no longer
rebuild. This module re-does that check on the bytes an import holds.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass, field
from typing import Any

from agentledger.bernstein.format import AUDIT_DIR, UncaughtJson, loads_as_bernstein

MERKLE_DIR = f"{AUDIT_DIR}/merkle"
SEAL_PREFIX = "seal-"
LEGACY_SCHEME = 1
LEAF_TAG = b"\x00"
INTERNAL_TAG = b"\x01"
EMPTY_TREE = hashlib.sha256(b"empty-tree").hexdigest()
MAX_SEAL_BYTES = 16 << 20
"""A seal lists one leaf per day file: anything larger is not read (and is a finding)."""


class SealUnreadable(ValueError):
    """The seal's JSON, or a day file a scheme-1 seal binds, is not what bernstein can
    read: its own verifier raises on it."""


def leaf_digest(data: bytes) -> str:
    """A scheme-2 leaf: ``H(0x00 || bytes)``."""
    return hashlib.sha256(LEAF_TAG + data).hexdigest()


class PrefixLeaves:
    """Scheme-2 leaves of day-file prefixes, each hashed once: the seals and the
    checkpoints pin the same prefixes of the same bytes. Keyed by the bytes object itself
    (kept alive here), so a name read twice with other contents is never confused."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, int], tuple[bytes, str]] = {}

    def __call__(self, content: bytes, byte_len: int) -> str:
        """``leaf_digest(content[:byte_len])``."""
        known = self._known.get((id(content), byte_len))
        if known is None or known[0] is not content:
            known = (content, leaf_digest(content[:byte_len]))
            self._known[(id(content), byte_len)] = known
        return known[1]


def legacy_leaf(content: bytes) -> str:
    """A scheme-1 leaf: the stored ``hmac`` of the last line, else ``H(bytes)``.
    ``SealUnreadable`` where bernstein's ``_legacy_file_leaf_hash`` raises: it suppresses
    only ``JSONDecodeError`` (and ``UnicodeDecodeError``) from the last line's parse."""
    if not content.strip():
        return hashlib.sha256(b"empty").hexdigest()
    last = content.rstrip().split(b"\n")[-1]
    try:
        entry = loads_as_bernstein(last)
    except UncaughtJson as exc:
        raise SealUnreadable(f"the last line of a sealed day file: {exc}") from None
    except ValueError:
        entry = None
    if isinstance(entry, dict) and "hmac" in entry:
        return str(entry["hmac"])
    return hashlib.sha256(content).hexdigest()


def merkle_root(leaves: list[str], scheme: int) -> str:
    """The root over leaf digests in order. Scheme 2 tags internal nodes and promotes a
    lone node; scheme 1 pairs a lone node with itself over ``"merkle:<l>:<r>"``."""
    if not leaves:
        return EMPTY_TREE
    level = list(leaves)
    legacy = scheme <= LEGACY_SCHEME
    while len(level) > 1:
        parents: list[str] = []
        for i in range(0, len(level), 2):
            left = level[i]
            if i + 1 < len(level):
                right = level[i + 1]
            elif legacy:
                right = left
            else:
                parents.append(left)
                continue
            if legacy:
                parents.append(hashlib.sha256(f"merkle:{left}:{right}".encode()).hexdigest())
            else:
                joined = INTERNAL_TAG + left.encode() + right.encode()
                parents.append(hashlib.sha256(joined).hexdigest())
        level = parents
    return level[0]


def seal_scheme(doc: dict[str, Any]) -> int:
    """The seal's ``scheme``, read as bernstein reads it (1 when absent or unusable)."""
    raw = doc.get("scheme", LEGACY_SCHEME)
    if isinstance(raw, bool):
        return LEGACY_SCHEME
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw)
        except ValueError:
            return LEGACY_SCHEME
    return LEGACY_SCHEME


def seal_paths(paths: list[str]) -> list[str]:
    """The seal files among workdir paths, newest (last in name order) first."""
    return sorted(
        (
            p
            for p in paths
            if posixpath.dirname(p) == MERKLE_DIR
            and posixpath.basename(p).startswith(SEAL_PREFIX)
            and p.endswith(".json")
        ),
        reverse=True,
    )


@dataclass(frozen=True, slots=True)
class SealProblem:
    """One way the audit files fail the seal: ``kind`` is ``deleted``, ``inserted``,
    ``truncated``, ``changed`` or ``root``; ``segment`` the file name (empty for root)."""

    kind: str
    segment: str
    expected: str
    actual: str

    def describe(self) -> str:
        return {
            "deleted": f"{self.segment}: sealed, but no longer in the workdir",
            "inserted": f"{self.segment}: in the workdir, but not in the seal",
            "truncated": f"{self.segment}: sealed prefix truncated ({self.actual}, "
            f"{self.expected} sealed)",
            "changed": f"{self.segment}: sealed prefix changed",
            "root": "the sealed leaves no longer rebuild the sealed root",
        }[self.kind]


@dataclass
class SealCheck:
    """The newest seal checked against the audit files."""

    path: str
    root_hash: str = ""
    problems: list[SealProblem] = field(default_factory=list)
    post_seal_rows: int = 0
    """Rows appended to sealed files after the seal (allowed: the log keeps growing)."""


def parse_seal(data: bytes) -> dict[str, Any]:
    """The seal document; ``SealUnreadable`` where bernstein's own reader raises."""
    if len(data) > MAX_SEAL_BYTES:
        raise SealUnreadable(f"{len(data)} bytes, over the {MAX_SEAL_BYTES} read")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SealUnreadable(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise SealUnreadable("not a JSON object")
    leaves = doc.get("leaves", [])
    if not isinstance(leaves, list) or not all(
        isinstance(leaf, dict) and "file" in leaf and "hash" in leaf for leaf in leaves
    ):
        raise SealUnreadable("its leaves are not objects with a file and a hash")
    return doc


def _byte_len(leaf: dict[str, Any]) -> int | None:
    raw = leaf.get("byte_len")
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        return None
    return raw


def _rows(data: bytes) -> int:
    return sum(1 for line in data.split(b"\n") if line.strip())


def check_seal(
    path: str,
    doc: dict[str, Any],
    files: dict[str, bytes],
    prefix_leaves: PrefixLeaves | None = None,
) -> SealCheck:
    """Check ``doc`` (the newest seal, at ``path``) against ``files``: each live day file's
    bytes by name (``2026-01-01.jsonl``). Mirrors bernstein's ``verify_merkle``.
    ``prefix_leaves`` remembers prefix leaves across seals and checkpoints (a day file
    sealed again at the same length is hashed once)."""
    leaf_of = PrefixLeaves() if prefix_leaves is None else prefix_leaves
    check = SealCheck(path, str(doc.get("root_hash", "")))
    scheme = seal_scheme(doc)
    leaves: list[dict[str, Any]] = doc.get("leaves", [])
    names = [str(leaf["file"]) for leaf in leaves]
    for name in names:
        if name not in files:
            check.problems.append(SealProblem("deleted", name, "sealed", "absent"))
    for name in sorted(files):
        if name not in set(names):
            check.problems.append(SealProblem("inserted", name, "absent", "present"))
    recomputed: dict[str, str] = {}
    for leaf in leaves:
        name = str(leaf["file"])
        content = files.get(name)
        if content is None:
            continue
        byte_len = _byte_len(leaf)
        if byte_len is None or scheme <= LEGACY_SCHEME:
            digest = legacy_leaf(content) if scheme <= LEGACY_SCHEME else leaf_digest(content)
        else:
            if byte_len > len(content):
                check.problems.append(
                    SealProblem(
                        "truncated", name, f"{byte_len} bytes", f"{len(content)} bytes on disk"
                    )
                )
                continue
            digest = leaf_of(content, byte_len)
            check.post_seal_rows += _rows(content[byte_len:])
        recomputed[name] = digest
        if digest != leaf["hash"]:
            check.problems.append(SealProblem("changed", name, str(leaf["hash"]), digest))
    if not check.problems:
        root = merkle_root([recomputed[name] for name in names], scheme)
        if root != doc.get("root_hash"):
            check.problems.append(SealProblem("root", "", str(doc.get("root_hash")), root))
    return check
