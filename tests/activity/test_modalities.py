"""Every modality records through the Python API and verifies end to end."""

from __future__ import annotations

import json
from pathlib import Path

from agentledger import ActivityResult, Ledger, Observation, _core
from agentledger.activity.receipts import plan_hash

from .activity_testkit import PAGE, SNAPSHOT, TABLE_IN, TABLE_OUT, record_every_modality


def test_every_modality_records_and_verifies_clean(ledger: Ledger) -> None:
    entries = record_every_modality(ledger)
    assert [e.kind for e in ledger.run("run-1").entries()] == ["activity.result"] * 5
    report = ledger.verify()
    assert report.code == 0, report.to_json()
    assert report.runs[0].activities == 5
    assert report.receipts_checked == 2
    assert report.signatures_checked == 2 * 3  # input, output, seal per receipt
    assert report.audit_records == 5
    assert {kind: e.body["kind"] for kind, e in entries.items()} == {k: k for k in entries}


def test_a_result_pins_exactly_the_contract_fields(ledger: Ledger) -> None:
    observation = Observation.capture("page", "https://example.org/a", PAGE)
    result = ActivityResult.build(
        kind="research", artifact={"answer": 42}, observations=[observation, observation]
    )
    entry = ledger.run("r").record_activity(result, stage_id="research-0", role="scout")
    assert entry.kind == "activity.result"
    assert entry.body == {
        "stage_id": "research-0",
        "role": "scout",
        "kind": "research",
        "terminal_state": "completed",
        "reason_code": "ok",
        "artifact_hash": _core.blake3_hex(_core.canonicalize({"answer": 42})),
        "evidence_set_hash": _core.evidence_set_hash([_core.blake3_hex(PAGE)]),
        "observations": [observation.to_json(), observation.to_json()],
        "mirrored": True,
    }
    # The artifact is stored by its hash, as canonical bytes, so verify can reattach it.
    assert ledger.blobs.get(result.artifact_hash) == b'{"answer":42}'
    assert ledger.blobs.get(observation.content_hash) == PAGE


def test_research_content_addresses_every_page_at_fetch_time(ledger: Ledger) -> None:
    stage = ledger.run("r").research("research-1")
    first = stage.fetch("https://example.org/1", b"page one")
    second = stage.fetch("https://example.org/2", b"page two")
    assert first.content_hash == _core.blake3_hex(b"page one")
    entry = stage.finish(artifact={"pages": 2})
    assert [o["ref"] for o in entry.body["observations"]] == [
        "https://example.org/1",
        "https://example.org/2",
    ]
    assert ledger.blobs.get(second.content_hash) == b"page two"


def test_browser_records_one_snapshot_per_step_and_its_receipts(ledger: Ledger) -> None:
    stage = ledger.run("r").browser("browser-0")
    stage.observe(step="s1", snapshot=SNAPSHOT)
    stage.receipt(step="s1", receipt=b"clicked")
    stage.observe(step="s2", snapshot=b"<dom>after</dom>")
    entry = stage.finish(artifact={"ok": True})
    kinds = [(o["kind"], o["ref"]) for o in entry.body["observations"]]
    assert kinds == [("snapshot", "s1"), ("action_receipt", "s1"), ("snapshot", "s2")]
    assert ledger.verify_run("r").code == 0


def test_data_receipt_is_the_artifact_and_projects_inputs_and_steps(ledger: Ledger) -> None:
    stage = ledger.run("r").data("data-0")
    stage.add_input("in.csv", TABLE_IN)
    steps = ["sum", {"write": "out.csv"}]
    returned = stage.plan(steps)
    stage.add_output("out.csv", TABLE_OUT)
    entry = stage.finish()
    receipt_bytes = ledger.blobs.get(entry.body["artifact_hash"])
    assert _core.blake3_hex(receipt_bytes) == entry.body["artifact_hash"]
    receipt = json.loads(receipt_bytes)
    assert receipt["plan"] == {
        "input_hashes": [_core.blake3_hex(TABLE_IN)],
        "steps": steps,
        "plan_hash": returned,
    }
    assert returned == plan_hash([_core.blake3_hex(TABLE_IN)], steps)
    assert receipt["signer"] == ledger.keys.install_public_key()
    assert [a["role"] for a in receipt["inputs"] + receipt["outputs"]] == ["input", "output"]
    assert ledger.verify_run("r").code == 0


def test_ops_is_a_data_stage_of_its_own_kind(ledger: Ledger) -> None:
    stage = ledger.run("r").ops("ops-0")
    stage.plan(["restart web"])
    stage.add_output("systemctl", b"restarted")
    entry = stage.finish(terminal_state="completed", reason_code="restarted")
    assert entry.body["kind"] == "ops"
    assert json.loads(ledger.blobs.get(entry.body["artifact_hash"]))["kind"] == "ops"
    assert ledger.verify_run("r").code == 0


def test_recording_creates_private_keys_outside_the_ledger(
    ledger: Ledger, key_home: Path, ledger_path: Path
) -> None:
    record_every_modality(ledger)
    for name in ("install.key", "audit.key"):
        path = key_home / name
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.read_bytes().strip() not in ledger_path.read_bytes()
