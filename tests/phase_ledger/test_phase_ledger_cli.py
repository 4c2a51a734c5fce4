"""`agentledger phase record|transition|approve|show`: JSON output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentledger import Ledger
from agentledger.errors import ExitCode

from .ledger_testkit import MANIFEST, compiler_input, evidence, source


def write(tmp_path: Path, name: str, document: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def recorded(cli: Any, tmp_path: Path, run_id: str = "run-a", phase: str = "explore") -> Any:
    result = cli(
        "phase", "record", run_id, write(tmp_path, "in.json", compiler_input(phase)), "--json"
    )
    assert result.code == ExitCode.OK, result.err
    return result.json()


def transition(cli: Any, tmp_path: Path, phase: str, operation: str, *extra: str) -> Any:
    target = write(tmp_path, f"{phase}.json", compiler_input(phase))
    return cli(
        "phase", "transition", "run-a", target, "--operation", operation,
        "--reason", f"Move to {phase}.", "--manifest", MANIFEST, "--json", *extra,
    )  # fmt: skip


def test_record_creates_the_run_and_anchors_the_evidence(
    cli: Any, ledger: Ledger, tmp_path: Path
) -> None:
    body = recorded(cli, tmp_path, phase="plan")
    assert body["evidence_digest"] == evidence(compiler_input("plan"))["digest"]
    assert body["seq"] == 0 and body["phase"] == "plan"
    assert ledger.verify_run("run-a").ok


def test_record_exits_3_for_blocked_evidence(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    blocked = compiler_input(
        "implement", sandbox=source("sandbox", enforcement={"credential.access": "unsupported"})
    )
    result = cli("phase", "record", "run-a", write(tmp_path, "in.json", blocked), "--json")
    assert result.code == ExitCode.BLOCKED
    assert result.json()["status"] == "blocked"


def test_record_refuses_hand_written_evidence_and_writes_nothing(
    cli: Any, ledger: Ledger, tmp_path: Path
) -> None:
    from agentledger.phase import evidence_digest

    document = compiler_input("explore")
    forged = evidence(document)
    forged["effectiveAuthority"]["filesystem.write"] = ["*"]
    forged["digest"] = evidence_digest(forged)
    result = cli(
        "phase", "record", "run-a", write(tmp_path, "in.json", document),
        "--evidence", write(tmp_path, "ev.json", forged),
    )  # fmt: skip
    assert result.code == ExitCode.INVALID_INPUT
    assert "evidence-not-reproducible" in result.err
    assert not ledger.has_run("run-a")


def test_record_of_malformed_input_exits_65(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json", encoding="utf-8")
    assert cli("phase", "record", "run-a", str(path)).code == ExitCode.INVALID_INPUT
    assert not ledger.has_run("run-a")


def test_narrowing_transition_then_show(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    recorded(cli, tmp_path, phase="implement")
    result = transition(cli, tmp_path, "verify", "op-1")
    assert result.code == ExitCode.OK, result.err
    moved = result.json()
    assert moved["status"] == "applied"
    assert moved["record"]["policyDecision"] == "allow"
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == ExitCode.OK
    summary = shown.json()
    assert summary["current"]["phase"] == "verify"
    assert [item["policy_decision"] for item in summary["history"]] == ["initial", "allow"]
    assert summary["history"][1]["authority_delta"]["classification"] == "narrowing"
    assert summary["authority_delta_since_initial"]["classification"] == "narrowing"
    human = cli("phase", "show", "run-a")
    assert human.code == ExitCode.OK and "verify" in human.out and "narrowing" in human.out


def test_expansion_needs_approval_through_the_cli(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    recorded(cli, tmp_path, phase="explore")
    pending = transition(cli, tmp_path, "verify", "widen")
    assert pending.code == ExitCode.BLOCKED
    approval = pending.json()["approval"]
    assert approval["status"] == "pending"
    approved = cli("phase", "approve", "run-a", approval["id"], "--actor", "operator:bob", "--json")
    assert approved.code == ExitCode.OK, approved.err
    assert approved.json()["approval"]["status"] == "approved"
    again = cli("phase", "approve", "run-a", approval["id"])
    assert again.code == ExitCode.INVALID_INPUT and "approval-not-pending" in again.err
    target = write(tmp_path, "retry.json", compiler_input("verify"))
    applied = cli(
        "phase",
        "transition",
        "run-a",
        target,
        "--operation",
        "widen",
        "--reason",
        "Retry.",
        "--expect-sequence",
        "0",
        "--json",
    )  # fmt: skip  (no --manifest: the approval names it)
    assert applied.code == ExitCode.OK, applied.err
    assert applied.json()["record"]["policyDecision"] == "approved-expansion"
    assert ledger.verify_run("run-a").ok


def test_a_rejected_expansion_is_refused(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    recorded(cli, tmp_path, phase="explore")
    approval = transition(cli, tmp_path, "implement", "widen").json()["approval"]
    assert cli("phase", "approve", "run-a", approval["id"], "--reject").code == ExitCode.OK
    refused = transition(cli, tmp_path, "implement", "widen")
    assert refused.code == ExitCode.INVALID_INPUT
    assert "approval-not-approved" in refused.err


def test_stale_and_blocked_transitions_exit_with_their_codes(
    cli: Any, ledger: Ledger, tmp_path: Path
) -> None:
    recorded(cli, tmp_path, phase="implement")
    assert transition(cli, tmp_path, "verify", "op-1").code == ExitCode.OK
    stale = transition(cli, tmp_path, "explore", "op-2", "--expect-sequence", "0")
    assert stale.code == ExitCode.INVALID_INPUT and "stale-sequence" in stale.err
    blocked = compiler_input(
        "explore", sandbox=source("sandbox", enforcement={"filesystem.read": "unsupported"})
    )
    result = cli(
        "phase", "transition", "run-a", write(tmp_path, "blocked.json", blocked),
        "--operation", "op-3", "--reason", "Blocked.", "--json",
    )  # fmt: skip
    assert result.code == ExitCode.BLOCKED and "target-blocked" in result.err


def test_an_emergency_override_through_the_cli(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from agentledger.phase.transitions import js_iso_timestamp

    recorded(cli, tmp_path, phase="explore")
    until = js_iso_timestamp(datetime.now(UTC) + timedelta(hours=1))
    denied = transition(
        cli, tmp_path, "implement", "hotfix", "--override-until", until, "--justification", "Now."
    )
    assert denied.code == ExitCode.INVALID_INPUT
    assert "override-requires-administrator" in denied.err
    applied = transition(
        cli, tmp_path, "implement", "hotfix",
        "--override-until", until, "--justification", "Now.", "--admin",
    )  # fmt: skip
    assert applied.code == ExitCode.OK, applied.err
    assert applied.json()["record"]["policyDecision"] == "emergency-override"


def test_usage_errors_exit_64(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    recorded(cli, tmp_path, phase="explore")
    target = write(tmp_path, "t.json", compiler_input("verify"))
    no_manifest = cli("phase", "transition", "run-a", target, "--operation", "o", "--reason", "r")
    assert no_manifest.code == ExitCode.USAGE
    half_override = transition(
        cli, tmp_path, "implement", "o", "--override-until", "2026-01-01T00:00:00Z"
    )
    assert half_override.code == ExitCode.USAGE


def test_missing_things_exit_1(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    assert cli("phase", "show", "ghost").code == ExitCode.NOT_FOUND
    recorded(cli, tmp_path, phase="explore")
    unknown = cli("phase", "approve", "run-a", "runapproval_" + "a" * 24)
    assert unknown.code == ExitCode.NOT_FOUND
    ledger.run("bare").append("step", {})
    target = write(tmp_path, "t.json", compiler_input("verify"))
    no_evidence = cli(
        "phase", "transition", "bare", target, "--operation", "o", "--reason", "r",
        "--manifest", MANIFEST,
    )  # fmt: skip
    assert no_evidence.code == ExitCode.NOT_FOUND


def test_show_of_a_run_without_evidence(cli: Any, ledger: Ledger) -> None:
    ledger.run("bare").append("step", {})
    shown = cli("phase", "show", "bare", "--json")
    assert shown.code == ExitCode.OK
    assert shown.json()["current"] is None and shown.json()["history"] == []


def test_authorize_through_the_cli_is_journaled(cli: Any, ledger: Ledger, tmp_path: Path) -> None:
    recorded(cli, tmp_path, phase="explore")
    digest = cli("phase", "show", "run-a", "--json").json()["current"]["evidence_digest"]
    allowed = cli("phase", "authorize", "run-a", "command.execute", "inspect", "--evidence", digest,
                  "--json")  # fmt: skip
    assert allowed.code == ExitCode.OK
    assert allowed.json()["allowed"] is True
    denied = cli("phase", "authorize", "run-a", "filesystem.write", "src/app.py",
                 "--evidence", digest)  # fmt: skip
    assert denied.code == ExitCode.BLOCKED
    assert "scope-not-granted" in denied.out
    empty = cli("phase", "authorize", "run-a", "network.egress", "--evidence", digest, "--json")
    assert empty.code == ExitCode.BLOCKED and empty.json()["reason"] == "empty-request"
    bad = cli("phase", "authorize", "run-a", "network.egress", "x", "--evidence", "nope")
    assert bad.code == ExitCode.INVALID_INPUT
    summary = cli("phase", "show", "run-a", "--json").json()
    assert summary["authorizations"] == {"allowed": 1, "denied": 2}
    assert ledger.verify_run("run-a").ok


def test_show_reports_phase_entries_that_do_not_read_back(
    cli: Any, ledger: Ledger, tmp_path: Path
) -> None:
    recorded(cli, tmp_path, phase="implement")
    assert transition(cli, tmp_path, "verify", "op-1").code == ExitCode.OK
    record_blob = next(ledger.get_run("run-a").entries(kind="phase.transition")).body
    with ledger.db.write() as conn:
        conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (record_blob["record_blob"],))
        conn.execute("DELETE FROM blobs WHERE digest = ?", (record_blob["record_blob"],))
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == ExitCode.DIVERGED
    assert shown.json()["problems"][0]["seq"] == 1
    refused = transition(cli, tmp_path, "explore", "op-2")
    assert refused.code == ExitCode.DIVERGED and "phase-state-tampered" in refused.err


def test_approving_a_critical_expansion_takes_admin(
    cli: Any, ledger: Ledger, tmp_path: Path
) -> None:
    recorded(cli, tmp_path, phase="explore")
    approval = transition(cli, tmp_path, "implement", "widen").json()["approval"]
    assert approval["riskClass"] == "critical"
    plain = cli("phase", "approve", "run-a", approval["id"])
    assert plain.code == ExitCode.INVALID_INPUT
    assert "approval-requires-administrator" in plain.err
    admin = cli("phase", "approve", "run-a", approval["id"], "--admin", "--json")
    assert admin.code == ExitCode.OK
    assert admin.json()["approval"]["administratorConfirmed"] is True


def test_running_the_same_transition_twice_is_an_exact_retry(
    cli: Any, ledger: Ledger, tmp_path: Path
) -> None:
    # The same command line again (its output was lost, say) is the exact retry the help
    # promises: it reports the original record (exit 0) instead of "operation-reused".
    recorded(cli, tmp_path, phase="implement")
    first = transition(cli, tmp_path, "verify", "op-1")
    assert first.code == ExitCode.OK, first.err
    again = transition(cli, tmp_path, "verify", "op-1")
    assert again.code == ExitCode.OK, again.err
    assert again.json()["replayed"] is True
    assert again.json()["record"] == first.json()["record"]
    reused = transition(cli, tmp_path, "explore", "op-1")
    assert reused.code == ExitCode.INVALID_INPUT and "operation-reused" in reused.err
    assert [e.kind for e in ledger.run("run-a").entries()].count("phase.transition") == 1


def test_a_transition_on_a_run_whose_evidence_is_gone_exits_2(
    cli: Any, ledger: Ledger, tmp_path: Path
) -> None:
    # The evidence blob deleted: the run's phase state does not verify (exit 2, as record,
    # authorize, approve and show say), not "no phase evidence, record it" (exit 1).
    body = recorded(cli, tmp_path, phase="implement")
    _delete_blob(ledger, body["evidence_blob"])
    result = transition(cli, tmp_path, "verify", "op-1")
    assert result.code == ExitCode.DIVERGED, result.err
    assert "phase-state-tampered" in result.err
    assert cli("phase", "show", "run-a").code == ExitCode.DIVERGED


def test_phase_show_does_not_call_unreadable_evidence_unrecorded(
    cli: Any, ledger: Ledger, tmp_path: Path
) -> None:
    body = recorded(cli, tmp_path, phase="implement")
    _delete_blob(ledger, body["evidence_blob"])
    shown = cli("phase", "show", "run-a")
    assert shown.code == ExitCode.DIVERGED
    assert "unrecorded" not in shown.out and "does not read back" in shown.out


def _delete_blob(ledger: Ledger, digest: str) -> None:
    """The blob's row and bytes removed, as someone editing the file would."""
    with ledger.db.write() as conn:
        conn.execute("DELETE FROM blob_chunks WHERE digest = ?", (digest,))
        conn.execute("DELETE FROM blobs WHERE digest = ?", (digest,))
