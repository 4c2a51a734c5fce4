"""DataOpsReceipt: the signed artifact of a data or ops activity.

A data/ops activity records its inputs, then exactly one plan, then its outputs. The plan's
hash is the hash of a byte-identical projection of the input hashes and the declared steps;
every input and output is signed with the install key in a statement that binds it to its
role, ref, content hash, the plan hash and the activity (kind, run, stage); a final seal
signs the whole receipt. So no field of a receipt can change without breaking a signature,
and a receipt lifted into another run or stage does not verify. Byte formats: FORMAT.md §5.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentledger import _core
from agentledger.cas import DIGEST
from agentledger.display import shorten
from agentledger.keys import PUBLIC_KEY, Ed25519Key, public_key_text, sign_message

RECEIPT_TYPE = "agentledger/data-ops-receipt"
RECEIPT_VERSION = 1
ARTIFACT_DOMAIN = "agentledger/v1/data-ops-artifact"
SEAL_DOMAIN = "agentledger/v1/data-ops-receipt"
PLAN_DOMAIN = "data-ops-plan"
SIGNATURE = re.compile(r"[0-9a-f]{128}")
RECEIPT_FIELDS = {
    "v",
    "type",
    "kind",
    "run",
    "stage_id",
    "signer",
    "plan",
    "inputs",
    "outputs",
    "seal",
}
PLAN_FIELDS = {"input_hashes", "steps", "plan_hash"}
ARTIFACT_FIELDS = {"role", "ref", "content_hash", "signature"}


def plan_projection(input_hashes: Sequence[str], steps: Sequence[Any]) -> bytes:
    """The plan's exact bytes: ``JCS({"input_hashes": sorted unique, "steps": steps})``."""
    return _core.canonicalize({"input_hashes": sorted(set(input_hashes)), "steps": list(steps)})


def plan_hash(input_hashes: Sequence[str], steps: Sequence[Any]) -> str:
    digest = _core.domain_hash(PLAN_DOMAIN, plan_projection(input_hashes, steps))
    return "blake3:" + digest.hex()


def artifact_statement(
    *, kind: str, run_id: str, stage_id: str, plan_hash: str, role: str, ref: str,
    content_hash: str,
) -> bytes:  # fmt: skip
    """The exact bytes an input or output signature signs."""
    return _core.canonicalize(
        {
            "domain": ARTIFACT_DOMAIN,
            "kind": kind,
            "run": run_id,
            "stage_id": stage_id,
            "plan_hash": plan_hash,
            "role": role,
            "ref": ref,
            "content_hash": content_hash,
        }
    )


def seal_statement(receipt: Mapping[str, Any]) -> bytes:
    """The exact bytes the seal signs: the whole receipt except the seal itself."""
    unsealed = {key: value for key, value in receipt.items() if key != "seal"}
    return _core.canonicalize({"domain": SEAL_DOMAIN, "receipt": unsealed})


def sign(key: Ed25519Key, message: bytes) -> str:
    return sign_message(key, message).hex()


@dataclass(frozen=True, slots=True)
class SignedArtifact:
    role: str
    ref: str
    content_hash: str
    signature: str

    def to_json(self) -> dict[str, str]:
        return {
            "role": self.role,
            "ref": self.ref,
            "content_hash": self.content_hash,
            "signature": self.signature,
        }


def build_receipt(
    key: Ed25519Key,
    *,
    kind: str,
    run_id: str,
    stage_id: str,
    steps: Sequence[Any],
    plan_hash_value: str,
    input_hashes: Sequence[str],
    inputs: Sequence[SignedArtifact],
    outputs: Sequence[SignedArtifact],
) -> dict[str, Any]:
    """The receipt document (sealed). Its canonical bytes are the activity's artifact."""
    receipt: dict[str, Any] = {
        "v": RECEIPT_VERSION,
        "type": RECEIPT_TYPE,
        "kind": kind,
        "run": run_id,
        "stage_id": stage_id,
        "signer": public_key_text(bytes(key.verify_key)),
        "plan": {
            "input_hashes": sorted(set(input_hashes)),
            "steps": list(steps),
            "plan_hash": plan_hash_value,
        },
        "inputs": [a.to_json() for a in inputs],
        "outputs": [a.to_json() for a in outputs],
    }
    receipt["seal"] = sign(key, seal_statement(receipt))
    return receipt


@dataclass(frozen=True, slots=True)
class ReceiptProblem:
    check: str
    expected: str
    actual: str
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class PendingSignature:
    """One signature to check (in a batch): what it signs, with which key, and for what."""

    public_key: bytes
    message: bytes
    signature: bytes
    label: str


@dataclass
class ReceiptCheck:
    """What a receipt says, and what does not hold in it (signatures not yet checked)."""

    problems: list[ReceiptProblem]
    signatures: list[PendingSignature]
    signer: str | None = None
    artifact_hashes: list[str] | None = None
    """Every input and output content hash, in order (inputs then outputs)."""
    plan_hash: str | None = None


def check_receipt(doc: object, *, kind: str, run_id: str, stage_id: str) -> ReceiptCheck:
    """Re-derive a receipt's structure, binding and plan projection; collect its signatures.

    Signatures are returned, not checked, so that callers verify many receipts' signatures
    in one Rust batch (``_core.ed25519_verify_batch``).
    """
    out = ReceiptCheck(problems=[], signatures=[])

    def problem(check: str, expected: str, actual: str, subject: str | None = None) -> None:
        out.problems.append(ReceiptProblem(check, expected, actual, subject))

    if not isinstance(doc, Mapping) or set(doc) != RECEIPT_FIELDS:
        keys = sorted(doc) if isinstance(doc, Mapping) else type(doc).__name__
        problem("receipt.structure", str(sorted(RECEIPT_FIELDS)), str(keys))
        return out
    if doc["v"] != RECEIPT_VERSION or doc["type"] != RECEIPT_TYPE:
        problem(
            "receipt.structure",
            f"{RECEIPT_TYPE} v{RECEIPT_VERSION}",
            f"{doc['type']!r} v{doc['v']!r}",
        )
        return out
    for name, expected in (("kind", kind), ("run", run_id), ("stage_id", stage_id)):
        if doc[name] != expected:
            problem("receipt.binding", f"{name} {expected!r}", f"{name} {doc[name]!r}")
    signer = doc["signer"]
    match = PUBLIC_KEY.fullmatch(signer) if isinstance(signer, str) else None
    if match is None:
        problem("receipt.signer", "ed25519:<64 hex>", repr(signer)[:80])
        return out
    out.signer = signer
    public_key = bytes.fromhex(match.group(1))
    plan = doc["plan"]
    if not isinstance(plan, Mapping) or set(plan) != PLAN_FIELDS:
        problem("receipt.structure", f"plan {sorted(PLAN_FIELDS)}", repr(plan)[:80])
        return out
    steps, claimed_inputs, claimed_plan = plan["steps"], plan["input_hashes"], plan["plan_hash"]
    if not isinstance(steps, list) or not isinstance(claimed_inputs, list):
        problem("receipt.structure", "plan steps and input_hashes as lists", repr(plan)[:80])
        return out
    artifacts: list[tuple[str, Mapping[str, Any]]] = []
    for role, field in (("input", "inputs"), ("output", "outputs")):
        items = doc[field]
        if not isinstance(items, list):
            problem("receipt.structure", f"{field} as a list", repr(items)[:80])
            return out
        for item in items:
            if (
                not isinstance(item, Mapping)
                or set(item) != ARTIFACT_FIELDS
                or item["role"] != role
                or not isinstance(item["ref"], str)
                or not isinstance(item["content_hash"], str)
                or not DIGEST.fullmatch(item["content_hash"])
                or not isinstance(item["signature"], str)
            ):
                problem("receipt.structure", f"a signed {role}", repr(item)[:120])
                return out
            artifacts.append((role, item))
    input_hashes = [item["content_hash"] for role, item in artifacts if role == "input"]
    out.artifact_hashes = [item["content_hash"] for _, item in artifacts]
    recomputed_inputs = sorted(set(input_hashes))
    if claimed_inputs != recomputed_inputs:
        problem("receipt.plan_inputs", str(claimed_inputs)[:200], str(recomputed_inputs)[:200])
    try:
        recomputed_plan = plan_hash(input_hashes, steps)
    except (ValueError, TypeError) as exc:
        problem("receipt.plan_hash", "canonical plan steps", str(exc))
        return out
    out.plan_hash = recomputed_plan
    if claimed_plan != recomputed_plan:
        problem("receipt.plan_hash", str(claimed_plan), recomputed_plan)
    for role, item in artifacts:
        statement = artifact_statement(
            kind=kind, run_id=run_id, stage_id=stage_id, plan_hash=recomputed_plan,
            role=role, ref=item["ref"], content_hash=item["content_hash"],
        )  # fmt: skip
        _pending(out, public_key, statement, item["signature"], f"{role} {item['ref']!r}")
    seal = doc["seal"]
    _pending(out, public_key, seal_statement(doc), seal if isinstance(seal, str) else "", "seal")
    return out


def _pending(out: ReceiptCheck, key: bytes, message: bytes, signature: str, label: str) -> None:
    if not SIGNATURE.fullmatch(signature):
        out.problems.append(
            ReceiptProblem(
                "receipt.signature", "128 hex characters", shorten(repr(signature), 80), label
            )
        )
        return
    out.signatures.append(PendingSignature(key, message, bytes.fromhex(signature), label))


def verify_signatures(pending: Sequence[PendingSignature]) -> list[bool]:
    """Check many signatures at once in Rust (parallel, GIL released)."""
    if not pending:
        return []
    return _core.ed25519_verify_batch([(p.public_key, p.message, p.signature) for p in pending])
