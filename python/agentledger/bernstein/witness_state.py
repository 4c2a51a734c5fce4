"""A witness's own state, read as ``bernstein audit verify --witness-state DIR`` reads it
(docs/BERNSTEIN.md §14).

A witness keeps, per chain origin, the newest checkpoint it accepted: the file
``DIR/<H(origin)>.json``. With the witness key, bernstein folds these pins (for the
co-signed origins and the chain's own) into the witness pillar as claims the history must
not contradict: they survive a rollback that deleted the co-signature file with the rest.
A file that is missing, unparsable, of another version or another origin, or without a
list of leaves is no pin; JSON its reader does not catch (``format.UncaughtJson``), a count
or a leaf bernstein cannot read makes its verifier raise (the command then exits 1),
reported here as ``ValueError``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentledger.bernstein.format import UncaughtJson, loads_as_bernstein
from agentledger.limits import MAX_DOCUMENT_BYTES, read_capped

VERSION = 1


@dataclass(frozen=True, slots=True)
class WitnessClaim:
    """A history size a witness stands behind, and where it was read."""

    origin: str
    entry_count: int
    checkpoint_root: str
    where: str


def state_file(origin: str) -> str:
    """The pin's file name: the origin hashed, never used as a path itself."""
    return hashlib.sha256(origin.encode()).hexdigest() + ".json"


def folder_reader(folder: Path) -> Callable[[str], bytes | None]:
    """A witness state folder's files by name (hashed origins; None when absent), each
    read up to the size of any document this tool reads."""

    def read(name: str) -> bytes | None:
        path = folder / name
        return read_capped(path, MAX_DOCUMENT_BYTES, "a witness pin") if path.is_file() else None

    return read


def state_claims(read: Callable[[str], bytes | None], origins: Iterable[str]) -> list[WitnessClaim]:
    """The pins ``read`` (a state file's name → its bytes, None when absent) holds for
    ``origins``, in their order."""
    claims = []
    for origin in origins:
        claim = _pin(read(state_file(origin)), origin)
        if claim is not None:
            claims.append(claim)
    return claims


def _integer(value: Any) -> int:
    """bernstein's ``int(value or 0)``: truncates floats, reads decimal strings."""
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"bernstein's verifier raises on the witness state: {exc}") from None


def _pin(raw: bytes | None, origin: str) -> WitnessClaim | None:
    if raw is None:
        return None
    try:
        doc = loads_as_bernstein(raw)
    except UncaughtJson as exc:
        raise ValueError(f"bernstein's verifier raises on the witness state: {exc}") from None
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        return None
    if str(doc.get("origin", "")) != origin or not isinstance(doc.get("leaves"), list):
        return None
    for leaf in doc["leaves"]:
        if not isinstance(leaf, dict):
            raise ValueError("bernstein's verifier raises on the witness state: a leaf")
        _integer(leaf.get("byte_len", 0))
    return WitnessClaim(
        origin,
        _integer(doc.get("entry_count", 0)),
        str(doc.get("checkpoint_root", "")),
        f"witness state {state_file(origin)}",
    )
