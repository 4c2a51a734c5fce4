"""A data/ops result crosses the boundary only with a receipt that verifies for its stage."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from agentledger import ActivityRejected, ActivityResult, Ledger, Observation
from agentledger.activity.receipts import (
    SignedArtifact,
    artifact_statement,
    build_receipt,
    plan_hash,
    sign,
)

from .activity_testkit import counts


def staged(ledger: Ledger) -> tuple[dict[str, Any], list[Observation]]:
    stage = ledger.run("r").data("d")
    stage.add_input("in.csv", b"a,b\n1,2\n")
    stage.plan(["sum b"])
    stage.add_output("out.csv", b"sum\n2\n")
    return stage.receipt(), list(stage.observations)


def edit_steps(receipt: dict[str, Any], observations: list[Observation]) -> None:
    receipt["plan"]["steps"] = ["drop table users"]


def flip_signature(receipt: dict[str, Any], observations: list[Observation]) -> None:
    signature = receipt["outputs"][0]["signature"]
    receipt["outputs"][0]["signature"] = ("0" if signature[0] != "0" else "1") + signature[1:]


def drop_output_observation(receipt: dict[str, Any], observations: list[Observation]) -> None:
    observations.pop()


def lift_to_other_stage(receipt: dict[str, Any], observations: list[Observation]) -> None:
    receipt["stage_id"] = "elsewhere"


TAMPERS: dict[str, tuple[Callable[[dict[str, Any], list[Observation]], None], str]] = {
    "steps edited": (edit_steps, "plan-hash-mismatch"),
    "signature flipped": (flip_signature, "bad-signature"),
    "observation dropped": (drop_output_observation, "receipt-evidence-mismatch"),
    "receipt of another stage": (lift_to_other_stage, "invalid-receipt"),
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_a_receipt_that_does_not_verify_is_refused(
    ledger: Ledger, ledger_path: Path, case: str
) -> None:
    receipt, observations = staged(ledger)
    tamper, code = TAMPERS[case]
    receipt = copy.deepcopy(receipt)
    tamper(receipt, observations)
    result = ActivityResult.build(kind="data", artifact=receipt, observations=observations)
    before = counts(ledger_path)
    with pytest.raises(ActivityRejected) as caught:
        ledger.run("r").record_activity(result, stage_id="d")
    assert caught.value.code == code
    assert counts(ledger_path) == before


def foreign_receipt(key: SigningKey, observations: list[Observation]) -> dict[str, Any]:
    """A well-formed receipt with valid signatures, made by a key this install never saw."""
    inputs = [o for o in observations if o.kind == "input"]
    outputs = [o for o in observations if o.kind == "output"]
    value = plan_hash([o.content_hash for o in inputs], ["sum b"])

    def signed(role: str, o: Observation) -> SignedArtifact:
        statement = artifact_statement(
            kind="data", run_id="r", stage_id="d", plan_hash=value, role=role, ref=o.ref,
            content_hash=o.content_hash,
        )  # fmt: skip
        return SignedArtifact(role, o.ref, o.content_hash, sign(key, statement))

    return build_receipt(
        key, kind="data", run_id="r", stage_id="d", steps=["sum b"], plan_hash_value=value,
        input_hashes=[o.content_hash for o in inputs],
        inputs=[signed("input", o) for o in inputs],
        outputs=[signed("output", o) for o in outputs],
    )  # fmt: skip


def test_a_receipt_signed_by_an_untrusted_key_is_refused(ledger: Ledger, ledger_path: Path) -> None:
    _, observations = staged(ledger)
    receipt = foreign_receipt(SigningKey.generate(), observations)
    result = ActivityResult.build(kind="data", artifact=receipt, observations=observations)
    before = counts(ledger_path)
    with pytest.raises(ActivityRejected) as caught:
        ledger.run("r").record_activity(result, stage_id="d")
    assert caught.value.code == "untrusted-signer"
    assert receipt["signer"] in caught.value.message
    assert counts(ledger_path) == before


def test_a_receipt_signed_by_a_trusted_remote_key_is_accepted(ledger: Ledger) -> None:
    _, observations = staged(ledger)
    remote = SigningKey.generate()
    ledger.keys.add_trust("ed25519:" + bytes(remote.verify_key).hex())
    receipt = foreign_receipt(remote, observations)
    result = ActivityResult.build(kind="data", artifact=receipt, observations=observations)
    entry = ledger.run("r").record_activity(result, stage_id="d")
    assert entry.body["artifact_hash"] == result.artifact_hash
    assert ledger.verify().code == 0
