"""Offline inclusion proofs: one entry, proven to be in a signed checkpoint of the log.

A proof (docs/FORMAT.md, "Proofs") is a C2SP ``tlog-proof@v1`` file whose ``extra`` line
carries the entry's exact bytes: any C2SP verifier checks the inclusion of the leaf and the
checkpoint's signature, and ``verify_proof`` also recomputes the leaf from the entry bytes
(entry hash, run, seq), with nothing but the file and the trusted public keys. The JSON
bundle (``agentledger-proof/v1``) of earlier versions is still read, and written by
``prove --json``: the same proof, as JSON.

Which tree a proof is in is said by its checkpoint: a tlog-checkpoint commits to the
C2SP log (leaf = log-leaf document, SHA-256); a note with a ``time`` line was signed before
schema 6 (leaf ``D("log-leaf", document)``, BLAKE3 tree).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentledger import _core, tiles
from agentledger.errors import AgentLedgerError, Diverged, InvalidInput, NotFound
from agentledger.keys import resolve_trust
from agentledger.limits import MAX_ENTRY_BYTES, MAX_SQLITE_INT
from agentledger.log import fetch
from agentledger.notes import MAX_NOTE_BYTES, Checkpoint, newest_trusted

if TYPE_CHECKING:
    from agentledger.handle import LedgerHandle

TLOG_PROOF = "c2sp.org/tlog-proof@v1"
BUNDLE_FORMAT = "agentledger-proof/v1"
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
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, slots=True)
class Proof:
    """An entry's bytes, its leaf index, the inclusion proof and the checkpoint note.

    ``claimed``: what a JSON bundle also states (``ledger``, ``run``, ``seq``,
    ``tree_size``), checked against the rest; None for a tlog-proof, which states nothing
    the entry bytes and the note do not.
    """

    entry: bytes
    leaf_index: int
    inclusion: tuple[bytes, ...]
    checkpoint: str
    claimed: dict[str, Any] | None = None

    def text(self) -> str:
        """The ``c2sp.org/tlog-proof@v1`` file."""
        nodes = "".join(f"{_b64(node)}\n" for node in self.inclusion)
        return (
            f"{TLOG_PROOF}\nextra {_b64(self.entry)}\nindex {self.leaf_index}\n{nodes}\n"
            f"{self.checkpoint}"
        )

    def bundle(self) -> dict[str, Any]:
        """The same proof as a JSON bundle (``agentledger-proof/v1`` fields)."""
        note = Checkpoint.parse(self.checkpoint)
        entry = json.loads(self.entry)
        return {
            "format": BUNDLE_FORMAT,
            "ledger": note.ledger_id,
            "run": entry["run"],
            "seq": entry["seq"],
            "entry": _b64(self.entry),
            "leaf_index": self.leaf_index,
            "tree_size": note.size,
            "inclusion": [_b64(node) for node in self.inclusion],
            "checkpoint": self.checkpoint,
        }


def prove(ledger: LedgerHandle, run_id: str, seq: int, trust: Iterable[str] = ()) -> Proof:
    """The proof of entry ``seq`` of ``run_id`` against the newest checkpoint: the inclusion
    proof is read from the tiles (O(log n) reads) and checked before it is handed out, and
    the checkpoint must be this ledger's, signed by a key this install trusts (or ``trust``
    names)."""
    with ledger.db.snapshot() as conn:
        rows = fetch(
            conn,
            "SELECT bytes, hash, leaf FROM entries WHERE run_id = ? AND seq = ?",
            (run_id, seq),
        )
        if not rows:
            raise NotFound(f"no entry {seq} in run {run_id!r}")
        raw, digest, leaf = rows[0]
        if not (isinstance(raw, bytes) and isinstance(digest, bytes)) or not (
            leaf is None or isinstance(leaf, int)
        ):
            # The row holds values of other types than its columns': it was edited.
            raise Diverged(
                f"entry {seq} of run {run_id!r} is not stored as an entry is (its bytes, "
                "hash or leaf were changed); no proof is given. Run `agentledger verify`",
                code="entry-edited",
            )
        trusted = resolve_trust(trust, ledger.keys)
        note = newest_trusted(conn, ledger.path, ledger.id, trusted, "no proof is given")
        if leaf is None or not 0 <= leaf < note.size:
            raise NotFound(
                f"entry {seq} of run {run_id!r} is not covered by the newest checkpoint "
                "(run `agentledger checkpoint`)"
            )
        try:
            nodes = tiles.TileReader(conn).inclusion_proof(leaf, note.size)
        except AgentLedgerError:
            nodes = []
    # The leaf from the entry's bytes, never from the stored hash beside them: a proof
    # handed out is one that verifies (an edited entry's would not).
    computed = _core.entry_hash(bytes(raw))
    if computed != bytes(digest):
        raise Diverged(
            f"entry {seq} of run {run_id!r} no longer hashes to its recorded hash (its bytes "
            "were changed); no proof is given. Run `agentledger verify`",
            code="entry-edited",
        )
    data = _core.log_leaf(run_id, seq, computed)
    if not _core.verify_inclusion(data, leaf, note.size, nodes, note.root):
        raise Diverged(
            f"the log's tiles do not prove entry {seq} of run {run_id!r} in the newest "
            "checkpoint; no proof is given. Run `agentledger verify`",
            code="log-broken",
        )
    return Proof(bytes(raw), leaf, tuple(nodes), note.text())


@dataclass(frozen=True, slots=True)
class ProofVerdict:
    """What checking a proof found: ``problems`` is empty when it verifies."""

    run: str
    seq: int
    leaf_index: int
    tree_size: int
    signer: str | None
    problems: tuple[str, ...]
    ledger: str = ""
    origin: str = ""
    """Whose log the entry is in: the checkpoint's ledger id and origin (one install key
    signs every ledger it writes, so the signer alone does not say it)."""

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
            "ledger": self.ledger,
            "origin": self.origin,
            "problems": list(self.problems),
        }


def _malformed(why: str) -> InvalidInput:
    return InvalidInput(f"not a proof: {why}", code="malformed-proof")


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


def parse_proof(data: bytes) -> Proof:
    """A proof file: a tlog-proof, or a JSON bundle (``{``); ``InvalidInput`` otherwise."""
    if data.lstrip()[:1] == b"{":
        return parse_bundle(data)
    return parse_tlog_proof(data)


def parse_tlog_proof(data: bytes) -> Proof:
    """A ``c2sp.org/tlog-proof@v1`` file, shape-checked (the checkpoint parsed too)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("not UTF-8") from None
    head, sep, checkpoint = text.partition("\n\n")
    if not sep:
        raise _malformed("no blank line before the checkpoint")
    lines = head.split("\n")
    if lines[0] != TLOG_PROOF:
        raise _malformed(f"the first line is not {TLOG_PROOF!r}")
    rest = lines[1:]
    if not rest or not rest[0].startswith("extra "):
        raise _malformed("no 'extra' line carrying the entry's bytes")
    extra = rest[0][len("extra ") :]
    if len(extra) > MAX_ENTRY_BYTES * 4 // 3 + 4:
        raise _malformed("the entry is longer than an entry can be")
    entry = _decode(extra, "the extra data")
    if len(rest) < 2 or not rest[1].startswith("index "):
        raise _malformed("no 'index' line")
    index_text = rest[1][len("index ") :]
    if not _DECIMAL.fullmatch(index_text) or int(index_text) > MAX_SQLITE_INT:
        raise _malformed("the index is not a decimal in 0..2^63-1")
    if len(rest) - 2 > MAX_PROOF_NODES:
        raise _malformed(f"more than {MAX_PROOF_NODES} inclusion proof hashes")
    nodes = []
    for line in rest[2:]:
        node = _decode(line, "an inclusion proof line")
        if len(node) != 32:
            raise _malformed("an inclusion proof hash is not 32 bytes")
        nodes.append(node)
    if len(checkpoint) > MAX_NOTE_BYTES:
        raise _malformed("the checkpoint is longer than a checkpoint can be")
    Checkpoint.parse(checkpoint)
    return Proof(entry, int(index_text), tuple(nodes), checkpoint)


def parse_bundle(data: bytes) -> Proof:
    """A JSON proof bundle, shape-checked; ``InvalidInput`` when it is not one."""
    try:
        bundle = json.loads(data, parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an int over 4300 digits
        raise _malformed(f"not JSON ({str(exc)[:200]})") from None
    except RecursionError:
        raise _malformed("not JSON (nested too deeply)") from None
    if not isinstance(bundle, dict):
        raise _malformed("not a JSON object")
    if bundle.get("format") != BUNDLE_FORMAT:
        raise _malformed(f"format is {bundle.get('format')!r}, expected {BUNDLE_FORMAT!r}")
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
    nodes = tuple(_decode(node, "an inclusion node") for node in bundle["inclusion"])
    if any(len(node) != 32 for node in nodes):  # as the tlog-proof form is read
        raise _malformed("an inclusion proof hash is not 32 bytes")
    Checkpoint.parse(bundle["checkpoint"])
    claimed = {key: bundle[key] for key in ("ledger", "run", "seq", "tree_size")}
    return Proof(
        _decode(bundle["entry"], "entry"),
        bundle["leaf_index"],
        nodes,
        bundle["checkpoint"],
        claimed,
    )


def verify_proof(proof: Proof, trusted: Iterable[str]) -> ProofVerdict:
    """Check a parsed proof against ``trusted`` keys (``ed25519:<hex>``), offline: the
    checkpoint's signature, the entry bytes (canonical JSON, naming its run and seq), the
    leaf they make, and its inclusion at the proof's index in the checkpoint's tree."""
    problems: list[str] = []
    checkpoint = Checkpoint.parse(proof.checkpoint)
    signer = checkpoint.signed_by(sorted(trusted))
    named_key = None if signer is not None else checkpoint.claimed_by(sorted(trusted))
    if named_key is not None:
        problems.append(
            f"the checkpoint's signature by {named_key}, a key you trust, does not verify: "
            "the checkpoint's text was changed after it was signed"
        )
    elif signer is None:
        problems.append("the checkpoint is not signed by a trusted key")
    try:
        entry = json.loads(proof.entry, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        entry = None
    run = entry.get("run") if isinstance(entry, dict) else None
    seq = entry.get("seq") if isinstance(entry, dict) else None
    provable = True  # a leaf can be made of the entry bytes
    if (
        not isinstance(run, str)
        or not isinstance(seq, int)
        or isinstance(seq, bool)
        or not 0 <= seq <= MAX_SQLITE_INT
    ):
        problems.append("the entry bytes are not a journal entry (no run and seq)")
        run, seq, provable = "", -1, False
    elif _canonical(entry) != proof.entry:
        problems.append("the entry bytes are not canonical JSON")
        provable = False
    claimed = proof.claimed or {}
    if claimed and (claimed["run"], claimed["seq"]) != (run, seq):
        problems.append(f"the entry bytes are not entry {claimed['seq']} of run {claimed['run']!r}")
    if claimed and checkpoint.ledger_id != claimed["ledger"]:
        problems.append(
            f"the checkpoint is of ledger {checkpoint.ledger_id}, "
            f"the bundle says {claimed['ledger']}"
        )
    if claimed and checkpoint.size != claimed["tree_size"]:
        problems.append(
            f"tree_size {claimed['tree_size']} is not the checkpoint's size {checkpoint.size}"
        )
    if provable and not _included(proof, checkpoint, run, seq):
        problems.append(
            f"the inclusion proof does not place this entry at leaf {proof.leaf_index} "
            f"of the checkpoint's {checkpoint.size}"
        )
    return ProofVerdict(
        run,
        seq,
        proof.leaf_index,
        checkpoint.size,
        signer,
        tuple(problems),
        checkpoint.ledger_id,
        checkpoint.origin,
    )


def _canonical(value: object) -> bytes | None:
    try:
        return _core.canonicalize(value)
    except _core.CanonicalizationError:
        return None


def _included(proof: Proof, checkpoint: Checkpoint, run: str, seq: int) -> bool:
    """The entry's leaf at the proof's index in the checkpoint's tree (which tree: the
    note's format says, module docstring)."""
    entry_hash = _core.domain_hash("entry", proof.entry)
    nodes = list(proof.inclusion)
    index, size, root = proof.leaf_index, checkpoint.size, checkpoint.root
    if checkpoint.legacy:
        leaf = _core.legacy_log_leaf(run, seq, entry_hash)
        return _core.verify_inclusion(leaf, index, size, nodes, root, hash="blake3")
    return _core.verify_inclusion(_core.log_leaf(run, seq, entry_hash), index, size, nodes, root)
