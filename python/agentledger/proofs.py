"""Offline inclusion proofs: one entry, proven to be in a signed checkpoint of the log.

A bundle (docs/FORMAT.md, "Proof bundles") carries the entry's exact bytes, its leaf
index, the RFC 9162 inclusion proof and the signed checkpoint note. ``verify_bundle``
checks it with nothing but the bundle and the trusted public keys: no ledger, no network.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentledger import _core
from agentledger import log as wslog
from agentledger.errors import InvalidInput, NotFound
from agentledger.limits import MAX_SQLITE_INT
from agentledger.log import fetch
from agentledger.notes import Checkpoint, newest_checkpoint

if TYPE_CHECKING:
    from agentledger.ledger import Ledger

PROOF_FORMAT = "agentledger-proof/v1"
MAX_PROOF_NODES = 64
BUNDLE_KEYS = {
    "format",
    "ledger",
    "run",
    "seq",
    "entry",
    "leaf_index",
    "tree_size",
    "inclusion",
    "checkpoint",
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def prove(ledger: Ledger, run_id: str, seq: int) -> dict[str, Any]:
    """The proof bundle of entry ``seq`` of ``run_id`` against the newest checkpoint."""
    with ledger.db.snapshot() as conn:
        rows = fetch(
            conn,
            "SELECT bytes, hash, leaf FROM entries WHERE run_id = ? AND seq = ?",
            (run_id, seq),
        )
        if not rows:
            raise NotFound(f"no entry {seq} in run {run_id!r}")
        raw, _digest, leaf = rows[0]
        stored = newest_checkpoint(conn)
        if stored is None:
            raise NotFound(f"{ledger.path}: no checkpoint yet (run `agentledger checkpoint`)")
        size = stored.checkpoint.size
        if leaf is None or not 0 <= leaf < size:
            raise NotFound(
                f"entry {seq} of run {run_id!r} is not covered by the newest checkpoint "
                "(run `agentledger checkpoint`)"
            )
        leaves = wslog.leaf_data(fetch(conn, wslog.LEAF_RANGE, (0, size)))
    if len(leaves) != size:
        raise InvalidInput(
            f"the log holds {len(leaves)} leaves below the checkpoint's {size}; "
            "run `agentledger verify`",
            code="log-broken",
        )
    proof = _core.inclusion_proof(leaves, leaf)
    return {
        "format": PROOF_FORMAT,
        "ledger": ledger.id,
        "run": run_id,
        "seq": seq,
        "entry": _b64(bytes(raw)),
        "leaf_index": leaf,
        "tree_size": size,
        "inclusion": [_b64(node) for node in proof],
        "checkpoint": stored.checkpoint.text(),
    }


@dataclass(frozen=True, slots=True)
class ProofVerdict:
    """What checking a bundle found: ``problems`` is empty when it verifies."""

    run: str
    seq: int
    leaf_index: int
    tree_size: int
    signer: str | None
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "run": self.run,
            "seq": self.seq,
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "signer": self.signer,
            "problems": list(self.problems),
        }


def _malformed(why: str) -> InvalidInput:
    return InvalidInput(f"not a proof bundle: {why}", code="malformed-proof")


def _decode(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise _malformed(f"{what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise _malformed(f"{what} is not base64") from None


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_SQLITE_INT:
        raise _malformed(f"{what} is not an integer in 0..2^63-1")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_bundle(data: bytes) -> dict[str, Any]:
    """The bundle's JSON object, shape-checked; ``InvalidInput`` when it is not one."""
    try:
        bundle = json.loads(data, parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an int over 4300 digits
        raise _malformed(f"not JSON ({str(exc)[:200]})") from None
    except RecursionError:
        raise _malformed("not JSON (nested too deeply)") from None
    if not isinstance(bundle, dict):
        raise _malformed("not a JSON object")
    if bundle.get("format") != PROOF_FORMAT:
        raise _malformed(f"format is {bundle.get('format')!r}, expected {PROOF_FORMAT!r}")
    unknown = set(bundle) - BUNDLE_KEYS
    missing = BUNDLE_KEYS - set(bundle)
    if unknown or missing:
        raise _malformed(f"unknown fields {sorted(unknown)}, missing {sorted(missing)}")
    for key in ("ledger", "run", "checkpoint"):
        if not isinstance(bundle[key], str):
            raise _malformed(f"{key} is not a string")
        try:
            bundle[key].encode("utf-8")
        except UnicodeEncodeError:
            raise _malformed(f"{key} holds a lone surrogate (not Unicode text)") from None
    for key in ("seq", "leaf_index", "tree_size"):
        _int(bundle[key], key)
    if not isinstance(bundle["inclusion"], list) or len(bundle["inclusion"]) > MAX_PROOF_NODES:
        raise _malformed("inclusion is not a list of at most 64 hashes")
    return bundle


def verify_bundle(bundle: dict[str, Any], trusted: Iterable[str]) -> ProofVerdict:
    """Check a parsed bundle against ``trusted`` keys (``ed25519:<hex>``), offline."""
    problems: list[str] = []
    run, seq = bundle["run"], bundle["seq"]
    leaf_index, tree_size = bundle["leaf_index"], bundle["tree_size"]
    raw = _decode(bundle["entry"], "entry")
    nodes = [_decode(node, "an inclusion node") for node in bundle["inclusion"]]
    checkpoint = Checkpoint.parse(bundle["checkpoint"])
    signer = checkpoint.signed_by(sorted(trusted))
    if signer is None:
        problems.append("the checkpoint is not signed by a trusted key")
    if checkpoint.ledger_id != bundle["ledger"]:
        problems.append(
            f"the checkpoint is of ledger {checkpoint.ledger_id}, "
            f"the bundle says {bundle['ledger']}"
        )
    if checkpoint.size != tree_size:
        problems.append(f"tree_size {tree_size} is not the checkpoint's size {checkpoint.size}")
    try:
        entry = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        entry = None
    if not isinstance(entry, dict) or entry.get("run") != run or entry.get("seq") != seq:
        problems.append(f"the entry bytes are not entry {seq} of run {run!r}")
    elif _core.canonicalize(entry) != raw:
        problems.append("the entry bytes are not canonical JSON")
    entry_hash = _core.domain_hash("entry", raw)
    leaf = _core.log_leaf(run, seq, entry_hash)
    if not _core.verify_inclusion(leaf, leaf_index, checkpoint.size, nodes, checkpoint.root):
        problems.append(
            f"the inclusion proof does not place this entry at leaf {leaf_index} "
            f"of the checkpoint's {checkpoint.size}"
        )
    return ProofVerdict(run, seq, leaf_index, tree_size, signer, tuple(problems))
