"""Every modality records and verifies end to end through the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentledger import ActivityResult, Observation

from .activity_testkit import PAGE, SNAPSHOT, TABLE_IN, TABLE_OUT


def files(tmp_path: Path, **contents: bytes) -> dict[str, Path]:
    out = {}
    for name, data in contents.items():
        path = tmp_path / name
        path.write_bytes(data)
        out[name] = path
    return out


def record_all(cli: Any, tmp_path: Path) -> dict[str, Any]:
    f = files(
        tmp_path, page=PAGE, dom=SNAPSHOT, click=b"clicked", table=TABLE_IN, out=TABLE_OUT,
        cfg=b"replicas=2", log=b"scaled", summary=b'{"summary": "fine"}', evidence=b"3 passed",
    )  # fmt: skip
    result = ActivityResult.build(
        kind="coding", artifact={"diff": "+x"},
        observations=[Observation.capture("test-log", "pytest", b"3 passed")],
    )  # fmt: skip
    result_file = tmp_path / "result.json"
    result_file.write_text(json.dumps(result.to_json()))
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps(["scale web to 3", {"wait": "ready"}]))
    commands = {
        "coding": ["record", "r", "coding-0", str(result_file), "--evidence", str(f["evidence"])],
        "research": [
            "research", "r", "research-0", "--page", f"https://example.org/?q=a={f['page']}",
            "--artifact", str(f["summary"]),
        ],
        "browser": [
            "browser", "r", "browser-0", "--snapshot", f"s1={f['dom']}",
            "--receipt", f"s1={f['click']}",
        ],
        "data": [
            "data", "r", "data-0", "--input", f"in.csv={f['table']}", "--step", "sum",
            "--output", f"out.csv={f['out']}",
        ],
        "ops": [
            "ops", "r", "ops-0", "--input", f"config={f['cfg']}", "--steps", str(steps),
            "--output", f"kubectl={f['log']}", "--reason", "scaled",
        ],
    }  # fmt: skip
    out = {}
    for modality, args in commands.items():
        result_cli = cli("activity", *args, "--json")
        assert result_cli.code == 0, (modality, result_cli.err)
        out[modality] = result_cli.json()
    return out


def test_every_modality_records_and_verifies_through_the_cli(cli: Any, tmp_path: Path) -> None:
    recorded = record_all(cli, tmp_path)
    assert {m: r["kind"] for m, r in recorded.items()} == {m: m for m in recorded}
    assert recorded["research"]["observations"] == 1
    assert recorded["browser"]["observations"] == 2
    assert recorded["ops"]["reason_code"] == "scaled"
    verified = cli("activity", "verify", "r", "--json")
    assert verified.code == 0, verified.out
    doc = verified.json()
    assert doc["receipts_checked"] == 2
    assert doc["audit_records"] == 5
    assert doc["notes"] == []
    assert cli("verify", "--all").code == 0


def test_show_displays_stages_with_modality_state_evidence_and_receipt(
    cli: Any, tmp_path: Path
) -> None:
    record_all(cli, tmp_path)
    shown = cli("show", "r", "--json").json()
    stages = {s["stage_id"]: s for s in shown["stages"]}
    assert set(stages) == {"coding-0", "research-0", "browser-0", "data-0", "ops-0"}
    assert stages["data-0"]["kind"] == "data"
    assert stages["data-0"]["terminal_state"] == "completed"
    assert stages["data-0"]["receipt"] == "verified"
    assert stages["research-0"]["receipt"] is None
    assert stages["browser-0"]["evidence"] == {"observations": 2, "present": 2}
    text = cli("show", "r").out
    for word in ("data-0", "ops", "completed", "receipt verified", "2/2 blobs"):
        assert word in text


def test_a_refusal_through_the_cli_exits_65_with_its_code(cli: Any, tmp_path: Path) -> None:
    f = files(tmp_path, table=TABLE_IN)
    refused = cli("activity", "data", "r", "d0", "--input", f"in={f['table']}")
    assert refused.code == 65
    assert "error [no-plan]" in refused.err
    assert cli("show", "r").code == 1  # nothing was written: not even the run


def test_redundant_evidence_through_the_cli_is_refused_and_recorded(
    cli: Any, tmp_path: Path
) -> None:
    f = files(tmp_path, page=PAGE)
    assert cli("activity", "research", "r", "a", "--page", f"u={f['page']}").code == 0
    again = cli("activity", "research", "r", "b", "--page", f"u={f['page']}")
    assert again.code == 65
    assert "error [redundant-evidence]" in again.err
    kinds = [e["kind"] for e in cli("show", "r", "--json").json()["entries"]]
    assert kinds == ["activity.result", "activity.refused"]
    assert cli("activity", "verify", "r").code == 0


def test_cli_usage_errors_are_64(cli: Any, tmp_path: Path) -> None:
    assert cli("activity", "research", "r", "a", "--page", "no-equals-sign").code == 64
    assert cli("activity", "data", "r", "a", "--step", "x", "--steps", "y.json").code == 64


def _valid_result_document() -> dict[str, Any]:
    result = ActivityResult.build(
        kind="coding",
        artifact={"diff": "+x"},
        observations=[Observation.capture("test-log", "pytest", b"3 passed")],
    )
    return result.to_json()


HASH = "blake3:" + "0" * 64
MALFORMED: dict[str, Any] = {
    "not an object": [1, 2],
    "kind is a number": {"kind": 5},
    "state is a list": {"terminal_state": ["completed"]},
    "reason is a number": {"reason_code": 0},
    "artifact hash is a number": {"artifact_hash": 7},
    "evidence hash is null": {"evidence_set_hash": None},
    "observations is an object": {"observations": {"kind": "x"}},
    "observation without ref": {"observations": [{"kind": "x", "content_hash": HASH}]},
    "observation hash upper-case": {
        "observations": [{"kind": "x", "ref": "r", "content_hash": HASH.upper()}]
    },
    "observation ref is a number": {
        "observations": [{"kind": "x", "ref": 3, "content_hash": HASH}]
    },
    "a field missing": {"reason_code": ...},
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_result_document_is_refused_with_65(
    cli: Any, tmp_path: Path, case: str
) -> None:
    change = MALFORMED[case]
    doc: Any = change
    if isinstance(change, dict):
        doc = _valid_result_document() | change
        doc = {key: value for key, value in doc.items() if value is not ...}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(doc))
    result = cli("activity", "record", "r", "s1", str(path))
    assert result.code == 65, (case, result.err)
    assert result.err.startswith("error [")
    assert cli("show", "r").code == 1


def test_a_key_given_twice_is_refused_not_the_last_one_kept(cli: Any, tmp_path: Path) -> None:
    """``{"reason_code": "", "reason_code": "ok"}`` was recorded with the second value: the
    empty reason the boundary refuses was masked. A repeated key, and a BOM on stdin, are
    malformed JSON (docs/FORMAT.md §1): exit 65, nothing written."""
    doc = json.dumps(_valid_result_document())
    assert doc.startswith('{"')
    twice = '{"terminal_state": "bogus", ' + doc[1:]  # the document's own value comes last
    path = tmp_path / "result.json"
    path.write_text(twice)
    recorded = cli("activity", "record", "r", "s1", str(path))
    assert recorded.code == 65 and "duplicate key 'terminal_state'" in recorded.err, recorded.err
    appended = cli("append", "r", "step", '{"a": 1, "a": 2}')
    assert appended.code == 65 and "duplicate key 'a'" in appended.err, appended.err
    nested = cli("append", "r", "step", '{"a": {"b": 1, "b": 1}}')
    assert nested.code == 65
    assert cli("show", "r").code == 1  # nothing was written


def test_append_reads_stdin_as_strict_json(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "AGENTLEDGER_HOME": str(tmp_path / "keys")}
    agentledger = str(Path(sys.executable).parent / "agentledger")
    command = [agentledger, "--ledger", str(tmp_path / "l.db")]
    bom = subprocess.run(
        [*command, "append", "r", "step", "-"], input=b'\xef\xbb\xbf{"a": 1}', env=env,
        capture_output=True, check=False,
    )  # fmt: skip
    assert bom.returncode == 65, bom.stderr
    plain = subprocess.run(
        [*command, "append", "r", "step", "-"], input=b'{"a": 1}', env=env,
        capture_output=True, check=False,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr


def test_activity_verify_of_a_run_without_activity_exits_as_verify_when_the_ledger_diverged(
    ledger_path: Path, cli: Any
) -> None:
    import apsw

    assert cli("append", "plain", "step", "{}").code == 0
    assert cli("activity", "verify", "plain").code == 1  # clean, no activity: nothing to verify
    conn = apsw.Connection(str(ledger_path))  # the signed checkpoint's note, edited
    ((note,),) = conn.execute("SELECT note FROM checkpoints ORDER BY id DESC LIMIT 1")
    conn.execute(
        "UPDATE checkpoints SET note = ? WHERE id = (SELECT max(id) FROM checkpoints)",
        (note.replace("— ", "— x"),),
    )
    conn.close()
    assert cli("verify", "plain").code == 2
    assert cli("show", "plain").code == 2
    checked = cli("activity", "verify", "plain", "--json")
    assert checked.code == 2 and checked.json()["status"] == "diverged"
    assert cli("activity", "verify", "plain").code == 2


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["research", "r", "../stage"], "invalid-stage-id"),
        (["browser", "r", "b-0", "--role", "no spaces"], "invalid-role"),
        (["data", "r", "d-0", "--step", "x", "--state", "done"], "unknown-terminal-state"),
        (["ops", "r", "o-0", "--step", "x", "--reason", " "], "empty-reason-code"),
        (["research", "r\x1b[2J", "s-0"], "invalid-run-id"),
    ],
)
def test_a_stage_refused_for_its_arguments_creates_no_ledger(
    cli: Any, tmp_path: Path, args: list[str], code: str
) -> None:
    # Refused before any ledger is opened: where there was no file, there is none after.
    path = tmp_path / "new.db"
    result = cli("activity", *args, ledger=path)
    assert result.code == 65, result.err
    assert f"[{code}]" in result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_result_refused_for_its_outcome_creates_no_ledger(cli: Any, tmp_path: Path) -> None:
    result = ActivityResult.build(kind="coding", artifact=None, reason_code="ok")
    document = dict(result.to_json(), reason_code="")
    (tmp_path / "in").mkdir()
    result_file = tmp_path / "in" / "result.json"
    result_file.write_text(json.dumps(document))
    refused = cli("activity", "record", "r", "c-0", str(result_file), ledger=tmp_path / "new.db")
    assert refused.code == 65, refused.err
    assert "[empty-reason-code]" in refused.err
    assert not (tmp_path / "new.db").exists()
