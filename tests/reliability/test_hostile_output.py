"""Strings an attacker wrote reach every output escaped, and never crash it.

A lone surrogate in an entry (``"\\ud800"`` is valid JSON text) cannot be encoded as UTF-8:
every report used to die on it (exit 70, no report). Escape sequences in a run id or an
entry's time (written straight into the file) reached the terminal from ``runs``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.display import safe
from tests.log.logkit import raw

LONE_SURROGATE_ESCAPE = b"\\ud800"
"""How JSON text spells a lone surrogate: six ASCII bytes a tamperer can write."""


def _plant_surrogate(path: Path) -> None:
    with raw(path) as conn:
        data = conn.execute("SELECT bytes FROM entries WHERE run_id = 'r' AND seq = 1")
        data = bytes(data.fetchall()[0][0])
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = 'r' AND seq = 1",
            (data.replace(b"fine", LONE_SURROGATE_ESCAPE),),
        )


@pytest.fixture
def surrogate(ledger: Ledger, ledger_path: Path) -> Path:
    ledger.run("r").append_many([("step", {"note": "fine", "i": i}) for i in range(3)])
    ledger.close()
    _plant_surrogate(ledger_path)
    return ledger_path


@pytest.mark.parametrize(
    "args",
    [
        ["verify"],
        ["verify", "--json"],
        ["verify", "r"],
        ["show", "r"],
        ["show", "r", "--json"],
        ["fsck"],
        ["runs"],
        ["runs", "--json"],
        ["activity", "verify", "r"],
    ],
    ids=" ".join,
)
def test_a_lone_surrogate_in_an_entry_is_reported_not_crashed_on(
    surrogate: Path, cli: Any, args: list[str]
) -> None:
    before = surrogate.read_bytes()
    result = cli(*args)
    assert result.code in (0, 2), result.err
    assert "Traceback" not in result.err
    if "--json" in args:
        json.loads(result.out)  # one valid JSON document
    assert surrogate.read_bytes() == before


def test_the_html_report_of_a_lone_surrogate_is_written(
    surrogate: Path, cli: Any, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    result = cli("verify", "--html", str(out))
    assert result.code == 2, result.err
    assert "\\ud800" in out.read_text(encoding="utf-8")


def test_fleet_verify_json_and_html_report_a_lone_surrogate(
    surrogate: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentledger.cli.context import emit_json
    from agentledger.fleet import FleetJob, FleetReport, verify_file
    from agentledger.fleet.report import write_fleet_html

    summary = verify_file(str(surrogate), FleetJob())
    assert summary.status == "diverged"
    report = FleetReport(inputs=1, ledgers=[summary])
    emit_json(report.to_json())
    assert json.loads(capsys.readouterr().out)["ledgers"][0]["status"] == "diverged"
    write_fleet_html(report, tmp_path / "fleet.html")


def test_safe_escapes_lone_surrogates() -> None:
    assert safe("a\ud800b") == "a\\ud800b"
    assert safe("a\udfffb\x1b[2J") == "a\\udfffb\\x1b[2J"


CLEAR_SCREEN = "\x1b[2J\x1b[H"
HYPERLINK = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"


def test_runs_shows_a_run_id_and_an_entry_time_escaped(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    ledger.run("r").append("step", {})
    ledger.close()
    with raw(ledger_path) as conn:
        data = bytes(conn.execute("SELECT bytes FROM entries").fetchall()[0][0])
        doc = json.loads(data)
        doc["ts"] = HYPERLINK
        conn.execute("UPDATE entries SET bytes = ?", (json.dumps(doc).encode(),))
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("UPDATE runs SET run_id = ?", (CLEAR_SCREEN + "r",))
        conn.execute("UPDATE entries SET run_id = ?", (CLEAR_SCREEN + "r",))
    result = cli("runs", "--all")
    assert result.code == 0, result.err
    assert "\x1b" not in result.out
    assert "\\x1b[2J" in result.out and "\\x1b]8;;https://evil.example" in result.out
    listed = cli("runs", "--all", "--json").json()["runs"]
    assert [run["run"] for run in listed] == [CLEAR_SCREEN + "r"]  # machine output: exact


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["verify"], 2),
        (["verify", "--json"], 2),
        (["verify", "r"], 2),
        (["fsck"], 2),
        (["activity", "verify", "r"], 2),
        (["show", "r"], 65),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_text_in_the_file_that_is_not_utf8_gets_a_verdict_or_a_typed_error(
    ledger: Ledger, ledger_path: Path, cli: Any, args: list[str], code: int
) -> None:
    ledger.run("r").append_many([("step", {"i": i}) for i in range(3)])
    ledger.close()
    with raw(ledger_path) as conn:  # "step" and an encoded lone surrogate: not UTF-8
        conn.execute("UPDATE entries SET kind = CAST(x'73746570eda080' AS TEXT) WHERE seq = 1")
    before = ledger_path.read_bytes()
    result = cli(*args)
    assert result.code == code, result.err
    assert "Traceback" not in result.err and result.err.count("\n") <= 1
    assert ledger_path.read_bytes() == before
