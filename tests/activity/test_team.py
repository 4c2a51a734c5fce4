"""Team manifests declare each role's modality, and the boundary enforces it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentledger import ActivityRejected, Ledger
from agentledger.activity.team import InvalidManifest, Role, load_manifest, parse_manifest

from ..raw_entries import append_unvetted
from .activity_testkit import research_result

MANIFEST = b"""
[[roles]]
agent_kind = "research"
role = "scout"

[[roles]]
role = "dev"          # no agent_kind: coding, so older manifests are unchanged

[[roles]]
role = "etl"
agent_kind = "data"
"""


def test_roles_default_to_coding() -> None:
    assert parse_manifest(MANIFEST) == [
        Role("scout", "research"),
        Role("dev", "coding"),
        Role("etl", "data"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        b"roles = 3",
        b"[[roles]]\nagent_kind = 'research'\n",
        b"[[roles]]\nrole = 'x'\nagent_kind = 'poetry'\n",
        b"[[roles]\nrole = 'x'",
        b"\xff\xfe",
        b"[[roles]]\nrole='x'\nagent_kind='data'\n[[roles]]\nrole='x'\nagent_kind='ops'\n",
    ],
)
def test_malformed_manifests_are_invalid_input(text: bytes) -> None:
    with pytest.raises(InvalidManifest):
        parse_manifest(text)


def test_the_declared_kind_is_enforced(ledger: Ledger, tmp_path: Path) -> None:
    manifest = tmp_path / "team.toml"
    manifest.write_bytes(MANIFEST)
    load_manifest(ledger, manifest)
    run = ledger.run("r")
    run.record_activity(research_result(), stage_id="s1", role="scout")
    with pytest.raises(ActivityRejected) as caught:
        run.record_activity(research_result(page=b"p2", kind="coding"), stage_id="s2", role="scout")
    assert caught.value.code == "kind-mismatch"
    run.record_activity(research_result(page=b"p3", kind="coding"), stage_id="s3", role="dev")


def test_team_load_through_the_cli(cli: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "team.toml"
    manifest.write_bytes(MANIFEST)
    loaded = cli("team", "load", str(manifest), "--json")
    assert loaded.code == 0, loaded.err
    assert {"role": "dev", "agent_kind": "coding"} in loaded.json()["roles"]
    shown = cli("team", "show", "--json").json()["roles"]
    assert [r["role"] for r in shown] == ["dev", "etl", "scout"]
    bad = tmp_path / "bad.toml"
    bad.write_text("[[roles]]\nrole = 'x'\nagent_kind = 'poetry'\n")
    refused = cli("team", "load", str(bad))
    assert refused.code == 65
    assert "poetry" in refused.err
    assert cli("team", "load", str(tmp_path / "absent.toml")).code == 64  # a missing argument
    page = tmp_path / "page.html"
    page.write_bytes(b"<html>p</html>")
    mismatch = cli("activity", "browser", "r", "b0", "--role", "scout", "--snapshot", f"s1={page}")
    assert mismatch.code == 65
    assert "kind-mismatch" in mismatch.err


def test_a_stage_pins_the_manifest_that_allowed_its_kind(ledger: Ledger, ledger_path: Path) -> None:
    from agentledger import _core
    from agentledger.activity.team import load_manifest_bytes

    load_manifest_bytes(ledger, MANIFEST)
    entry = ledger.run("r").record_activity(research_result(), stage_id="s1", role="scout")
    assert entry.body["team_manifest"] == _core.blake3_hex(MANIFEST)
    # A later manifest may redefine the role: past stages are judged by the one they pinned.
    load_manifest_bytes(ledger, b'[[roles]]\nrole = "scout"\nagent_kind = "browser"\n')
    assert ledger.verify().code == 0
    # Without a role (or without a team) nothing is pinned.
    other = ledger.run("r").record_activity(research_result(page=b"p2"), stage_id="s2")
    assert "team_manifest" not in other.body


def test_verify_rechecks_a_role_against_its_pinned_manifest(ledger: Ledger) -> None:
    from agentledger import _core
    from agentledger.activity.team import load_manifest_bytes

    load_manifest_bytes(ledger, MANIFEST)
    body = {
        "stage_id": "s1",
        "role": "scout",
        "kind": "coding",  # scout is declared research
        "terminal_state": "completed",
        "reason_code": "ok",
        "evidence_set_hash": _core.evidence_set_hash([]),
        "observations": [],
        "team_manifest": _core.blake3_hex(MANIFEST),
    }
    append_unvetted(ledger, "forged", [("activity.result", body)])
    verdict = ledger.verify_run("forged")
    assert [d.check for d in verdict.divergences] == ["activity.role_kind"]
    assert verdict.divergences[0].subject == "s1"


def test_a_missing_pinned_manifest_is_reported(ledger: Ledger, ledger_path: Path) -> None:
    from agentledger import _core
    from agentledger.activity.team import load_manifest_bytes

    from .activity_testkit import sql

    load_manifest_bytes(ledger, MANIFEST)
    ledger.run("r").record_activity(research_result(), stage_id="s1", role="scout")
    digest = _core.blake3_hex(MANIFEST)
    sql(ledger_path, "DELETE FROM blob_chunks WHERE digest = ?", (digest,))
    sql(ledger_path, "DELETE FROM blobs WHERE digest = ?", (digest,))
    verdict = ledger.verify_run("r")
    assert [d.check for d in verdict.divergences] == ["team.manifest"]
    assert verdict.divergences[0].actual == "absent from the blob store"
