"""bernstein 3.23.0's on-disk format: names, paths, and the canonical forms Python gives it.

Everything here follows docs/BERNSTEIN.md (the section numbers below are its own).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from typing import Any

from agentledger.bookkeeping import BERNSTEIN_RUN

RUN_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
HEX64 = re.compile(r"[0-9a-f]{64}")

SDD = ".sdd"
RUNS_DIR = ".sdd/runs"
CAS_DIR = ".sdd/cas"
AUDIT_DIR = ".sdd/audit"
LINEAGE_DIR = ".sdd/lineage"
LINEAGE_LOG = f"{LINEAGE_DIR}/log.jsonl"
"""The lineage store's log (its entries' activity is a pillar of ``audit verify``)."""
TOP_DIRS = (RUNS_DIR, CAS_DIR, AUDIT_DIR, LINEAGE_DIR)
"""What an import brings in: the journals (with whatever else a run's folder holds, its
signed receipt included), the flat store, the audit chain with its seals, checkpoints,
co-signatures and anchors, and the lineage spine."""

JOURNAL_NAME = "journal.jsonl"
ACTIVITY_EVENT = "activity.result"

BOOKKEEPING_RUN = BERNSTEIN_RUN
"""The native run whose entries pin each import's file manifest (``bookkeeping.py``)."""


def valid_run_id(run_id: str) -> bool:
    """bernstein's rule (§1): 1-64 of ``A-Za-z0-9_.-``, and never ``.`` or ``..``."""
    return bool(RUN_ID.fullmatch(run_id)) and run_id not in {".", ".."}


def journal_path(run_id: str) -> str:
    return f"{RUNS_DIR}/{run_id}/{JOURNAL_NAME}"


def cas_path(content_hash: str) -> str | None:
    """Where bernstein's ``ContentStore`` looks for ``content_hash`` (§4), normalised.

    The text after the first ``:`` names the file, unchecked: ``sha256:../x`` escapes the
    store, as it does in bernstein. ``None`` when the name leaves the workdir altogether.
    """
    name = content_hash.split(":", 1)[1] if ":" in content_hash else content_hash
    if not name or "\x00" in name:
        return None
    path = posixpath.normpath(f"{CAS_DIR}/{name}")
    if path.startswith("../") or path == ".." or path.startswith("/"):
        return None
    return path


class UncaughtJson(ValueError):
    """What ``json.loads`` raises past bernstein's ``except (json.JSONDecodeError,
    UnicodeDecodeError)``: an integer beyond Python's 4,300 digits (``ValueError``),
    nesting beyond the recursion limit (``RecursionError``). bernstein's reader raises
    then, and its command exits 1."""


def loads_as_bernstein(raw: bytes) -> Any:
    """``json.loads(raw)``, failing as bernstein's guarded reads see it: ``JSONDecodeError``
    or ``UnicodeDecodeError`` for what they take as unparsable, ``UncaughtJson`` for what
    escapes them."""
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except (ValueError, RecursionError) as exc:
        raise UncaughtJson(f"json.loads raises {type(exc).__name__}") from None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(data: bytes) -> str:
    """``CH(b)``: ``"sha256:" + hex(SHA-256(b))``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def acanon(value: Any) -> bytes:
    """bernstein's activity canonical form: sorted keys, compact, raw UTF-8 (§3)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    return text.encode("utf-8")


def artifact_hex(artifact_hash: str) -> str:
    return artifact_hash.split(":", 1)[1] if ":" in artifact_hash else artifact_hash


SPKI_ED25519_PREFIX = bytes.fromhex("302a300506032b6570032100")
"""DER of an Ed25519 SubjectPublicKeyInfo, up to the 32 key bytes (§7)."""
