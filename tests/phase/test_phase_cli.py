"""`agentledger phase ...`: output, exit codes, messages."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from agentledger.phase import DIMENSIONS, compile

from .phase_testkit import FIXTURES, compiler_input, source


def write(tmp_path: Path, document: Any, name: str = "input.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_compile_json_prints_exactly_the_evidence(cli: Any, tmp_path: Path) -> None:
    document = compiler_input("plan", plan_artifact="plans/task.md")
    result = cli("phase", "compile", str(write(tmp_path, document)), "--json")
    assert result.code == 0
    assert result.json() == compile(document)
    assert result.err == ""


def test_compile_narrowed_exits_zero(cli: Any, tmp_path: Path) -> None:
    document = compiler_input("implement", sandbox=source("sandbox", {"network.egress": ["x"]}))
    result = cli("phase", "compile", str(write(tmp_path, document)), "--json")
    assert result.code == 0
    assert result.json()["status"] == "narrowed"


def test_compile_blocked_exits_three(cli: Any, tmp_path: Path) -> None:
    document = compiler_input("explore", sandbox=source("sandbox", {"filesystem.read": []}))
    result = cli("phase", "compile", str(write(tmp_path, document)), "--json")
    assert result.code == 3
    assert result.json()["status"] == "blocked"
    human = cli("phase", "compile", str(write(tmp_path, document)))
    assert human.code == 3
    assert "BLOCKED" in human.out and "required-authority-denied" in human.out


def test_compile_human_output_shows_every_dimension(cli: Any, tmp_path: Path) -> None:
    document = compiler_input(
        "implement", toolCatalog=source("toolCatalog", {"command.execute": ["inspect"]})
    )
    result = cli("phase", "compile", str(write(tmp_path, document)))
    assert result.code == 0
    for dimension in DIMENSIONS:
        assert dimension in result.out
    assert "NARROWED" in result.out
    assert "tools:standard" in result.out
    assert compile(document)["digest"] in result.out


def test_compile_human_output_shows_legacy_warning(cli: Any, tmp_path: Path) -> None:
    result = cli("phase", "compile", str(write(tmp_path, compiler_input())))
    assert result.code == 0
    assert "legacy" in result.out and "Legacy mode applies no phase profile" in result.out


def test_schema_violation_exits_65_with_the_path(cli: Any, tmp_path: Path) -> None:
    document = compiler_input("implement")
    document["sources"]["sandbox"]["authority"]["network.egress"] = ["a", "b", "*"]
    result = cli("phase", "compile", str(write(tmp_path, document)), "--json")
    assert result.code == 65
    assert result.out == ""
    assert "sources.sandbox.authority.network.egress[2]" in result.err
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "text",
    ['{"sources": ', "not json", '{"a": NaN}', "\ufeff{}", ""],
    ids=["truncated", "garbage", "nan", "bom", "empty"],
)
def test_malformed_json_exits_65(cli: Any, tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    result = cli("phase", "compile", str(path))
    assert result.code == 65
    assert "malformed JSON" in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_invalid_utf8_exits_65(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"a": "\xff"}')
    result = cli("phase", "compile", str(path))
    assert result.code == 65
    assert "UTF-8" in result.err


def test_missing_file_is_a_usage_error(cli: Any, tmp_path: Path) -> None:
    result = cli("phase", "compile", str(tmp_path / "nope.json"))
    assert result.code == 64
    assert "nope.json" in result.err


def test_directory_is_a_usage_error(cli: Any, tmp_path: Path) -> None:
    assert cli("phase", "compile", str(tmp_path)).code == 64


def test_compile_reads_stdin(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    document = compiler_input("verify")
    stdin = io.TextIOWrapper(io.BytesIO(json.dumps(document).encode("utf-8")))
    monkeypatch.setattr("sys.stdin", stdin)
    result = cli("phase", "compile", "-", "--json")
    assert result.code == 0
    assert result.json() == compile(document)


def test_compile_json_escapes_lone_surrogates(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "input.json"
    document = compiler_input(
        "implement", sandbox=source("sandbox", {"network.egress": ["lone\ud800"]})
    )
    path.write_text(json.dumps(document, ensure_ascii=True), encoding="utf-8")
    result = cli("phase", "compile", str(path), "--json")
    assert result.code == 0
    assert "lone\\ud800" in result.out
    assert result.json()["effectiveAuthority"]["network.egress"] == ["lone\ud800"]
    assert cli("phase", "compile", str(path)).code == 0  # the table prints it escaped


def test_compile_golden_fixture_through_the_cli(cli: Any) -> None:
    result = cli("phase", "compile", str(FIXTURES / "publish_unicode_scopes.input.json"), "--json")
    expected = json.loads(
        (FIXTURES / "publish_unicode_scopes.evidence.json").read_text(encoding="utf-8")
    )
    assert result.code == 0
    assert result.json() == expected


def test_missing_argument_is_a_usage_error(cli: Any) -> None:
    assert cli("phase", "compile").code == 64


@pytest.mark.parametrize(
    ("name", "title", "required"),
    [
        ("profile", "PhaseCapabilityProfile", "planArtifactPolicy"),
        ("intent", "PhaseTransitionIntent", "from"),
        ("evidence", "PhaseCapabilityEvidence", "digest"),
        ("input", "PhaseCompilerInput", "sources"),
    ],
)
def test_schema_prints_json_schema(cli: Any, name: str, title: str, required: str) -> None:
    result = cli("phase", "schema", name)
    assert result.code == 0
    schema = result.json()
    assert schema["title"] == title
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    assert required in schema["required"]


def test_input_schema_names_every_dimension(cli: Any) -> None:
    schema = cli("phase", "schema", "input").json()
    authority = schema["$defs"]["PhaseAuthority"]
    assert sorted(authority["required"]) == sorted(DIMENSIONS)
    assert authority["additionalProperties"] is False


def test_unknown_schema_is_a_usage_error(cli: Any) -> None:
    assert cli("phase", "schema", "record").code == 64


def test_builtins_json_lists_the_five_profiles(cli: Any) -> None:
    result = cli("phase", "builtins", "--json")
    assert result.code == 0
    assert [p["id"] for p in result.json()] == [
        "builtin-explore",
        "builtin-plan",
        "builtin-implement",
        "builtin-verify",
        "builtin-publish",
    ]


def test_builtins_table(cli: Any) -> None:
    result = cli("phase", "builtins")
    assert result.code == 0
    for phase in ("explore", "plan", "implement", "verify", "publish"):
        assert phase in result.out
    assert "needs approval" in result.out


def test_verify_evidence(cli: Any, tmp_path: Path) -> None:
    document = compiler_input("plan", plan_artifact="plans/task.md")
    evidence = compile(document)
    evidence_path = write(tmp_path, evidence, "evidence.json")
    input_path = write(tmp_path, document)
    assert cli("phase", "verify-evidence", str(evidence_path)).code == 0
    result = cli("phase", "verify-evidence", str(evidence_path), "--input", str(input_path))
    assert result.code == 0

    # hand-written evidence with a fresh, valid digest passes the digest check only
    from agentledger.phase import evidence_digest

    forged = json.loads(json.dumps(evidence))
    forged["effectiveAuthority"]["filesystem.write"] = ["<workspace>"]
    forged["digest"] = evidence_digest(forged)
    forged_path = write(tmp_path, forged, "forged.json")
    assert cli("phase", "verify-evidence", str(forged_path)).code == 0
    result = cli("phase", "verify-evidence", str(forged_path), "--input", str(input_path), "--json")
    assert result.code == 2
    assert result.json()["ok"] is False
    assert "effectiveAuthority" in result.json()["problems"][0]

    edited = json.loads(json.dumps(evidence))
    edited["status"] = "narrowed"
    result = cli("phase", "verify-evidence", str(write(tmp_path, edited, "edited.json")))
    assert result.code == 2

    not_evidence = write(tmp_path, {"status": "allowed"}, "junk.json")
    assert cli("phase", "verify-evidence", str(not_evidence)).code == 65


def test_help_texts_teach(cli: Any) -> None:
    group = cli("phase", "--help")
    assert group.code == 0
    assert "agentledger phase compile INPUT.json" in group.out
    compile_help = cli("phase", "compile", "--help")
    assert "blocked" in compile_help.out and "65" in compile_help.out
    assert "legacy" in compile_help.out


@pytest.mark.parametrize("command", ["record", "verify-evidence"])
def test_a_missing_file_exits_as_the_help_says(cli: Any, tmp_path: Path, command: str) -> None:
    # A missing file is a usage error (64), as the README's exit codes and `phase compile
    # --help` say; the help of record and verify-evidence said 1.
    run = ["run-a"] if command == "record" else []
    assert cli("phase", command, *run, str(tmp_path / "missing.json")).code == 64
    usage = " ".join(cli("phase", command, "--help").out.split())
    assert "64 when a file is missing" in usage
