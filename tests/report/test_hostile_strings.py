"""Strings from a ledger or an imported workdir are shown safe by every command.

Terminal escapes (ESC, CSI, C1 controls), bidi overrides and rich markup in kinds, bodies,
observation refs, reason codes, checkpoint signer names and bernstein workdir strings never
reach a human output raw: they are shown as visible escapes, and ``[red]`` prints as text.
``--json`` keeps the exact strings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger
from agentledger.bernstein.writer import WorkdirWriter
from agentledger.display import safe

HOSTILE = "ok\x1b[2J\x1b[31mALLCLEAN\u202eevil\u2066[red]markup[/red]\x9b2J\x07\x85"
SIGNER = "ok\u202eevil\u2066[red]markup[/red]\x9b2J"
"""What a key name of a signed note may hold of ``HOSTILE`` (no ASCII control, no space)."""
RAW = ("\x1b", "\u202e", "\u2066", "\x9b", "\x07", "\x85")


def assert_shown_safe(text: str, where: str) -> None:
    for char in RAW:
        assert char not in text, (where, repr(char))


@pytest.fixture
def hostile(ledger_path: Path) -> Path:
    with Ledger.open(ledger_path) as ledger:
        run = ledger.run("r")
        run.append("step", {"note": HOSTILE, HOSTILE: 1})
        research = run.research("research-0")
        research.fetch("https://example.org/" + HOSTILE, b"<html>page</html>")
        research.finish(artifact={"summary": HOSTILE}, terminal_state="failed",
                        reason_code=HOSTILE)  # fmt: skip
        run.append("step", {"n": 2})
    conn = apsw.Connection(str(ledger_path))
    conn.execute("UPDATE entries SET kind = ? WHERE run_id = 'r' AND seq = 2", (HOSTILE,))
    note_id, note = conn.execute(
        "SELECT id, note FROM checkpoints ORDER BY id DESC LIMIT 1"
    ).fetchall()[0]
    head, sep, signatures = note.partition("\n\n")
    name = signatures.split(" ")[1]
    conn.execute(
        "UPDATE checkpoints SET note = ? WHERE id = ?",
        (head + sep + signatures.replace(f" {name} ", f" {SIGNER} ", 1), note_id),
    )
    conn.close()
    return ledger_path


def test_every_command_shows_ledger_strings_safe(hostile: Path, cli: Any, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    outputs = {
        "show": cli("show", "r"),
        "verify": cli("verify"),
        "verify --html": cli("verify", "--html", str(html)),
        "verify r": cli("verify", "r"),
        "activity verify": cli("activity", "verify", "r"),
        "runs": cli("runs"),
        "fsck": cli("fsck"),
        "explain": cli("explain", HOSTILE),
    }
    for name, result in outputs.items():
        assert_shown_safe(result.out + result.err, name)
    assert outputs["show"].code == 2 and outputs["verify"].code == 2
    shown = outputs["show"].out
    assert safe(HOSTILE) in shown  # visible, escaped: ok\x1b[2J…
    assert "[red]markup[/red]" in shown  # markup printed as text
    assert "\\x1b[2J" in outputs["verify"].out  # the kind and the signer name, escaped
    assert_shown_safe(html.read_text(encoding="utf-8"), "html")
    assert "\\u202e" in html.read_text(encoding="utf-8")


def test_json_keeps_the_exact_strings(hostile: Path, cli: Any) -> None:
    shown = cli("show", "r", "--json")
    assert shown.code == 2
    assert shown.json()["entries"][0]["body"]["note"] == HOSTILE
    stage = shown.json()["stages"][0]
    assert stage["reason_code"] == HOSTILE
    verified = cli("verify", "--json")
    assert verified.code == 2
    report = verified.json()
    assert SIGNER in report["checkpoint"]["signers"]
    kinds = [d for f in report["failures"] for d in f["divergences"] if d["check"] == "entry.kind"]
    assert kinds and kinds[0]["expected"] == HOSTILE


def test_bernstein_workdir_strings_are_shown_safe(tmp_path: Path, cli: Any) -> None:
    workdir = tmp_path / "workdir"
    writer = WorkdirWriter(workdir)
    run = writer.run("run-1")
    run.record("task_claimed", task=HOSTILE)
    run.activity(HOSTILE, "research", {"summary": HOSTILE},
                 [("page", "https://example.org/" + HOSTILE, b"<html>page</html>")],
                 terminal_state="failed", reason_code=HOSTILE)  # fmt: skip
    run.close()
    for blob in (workdir / ".sdd" / "cas").iterdir():
        blob.write_bytes(b"defaced")  # the stage no longer verifies: its strings are reported
    results = {
        "import": cli("import", "bernstein", str(workdir)),
        "verify": cli("verify"),
        "verify compat": cli("verify", "--compat", "bernstein"),
        "show": cli("show", "run-1"),
    }
    for name, result in results.items():
        assert_shown_safe(result.out + result.err, name)
    assert results["verify"].code == 2
    assert "\\x1b[2J" in results["verify"].out + results["show"].out


def test_json_of_an_imported_run_escapes_every_control_and_keeps_the_strings(
    tmp_path: Path, cli: Any
) -> None:
    """``--json`` wrote C1 controls (``\\x9b``, a CSI), NEL, DEL and bidi overrides of a
    bernstein reason code raw: on a terminal they act. Now written as JSON escapes, which
    read back as the same strings."""
    workdir = tmp_path / "workdir"
    run = WorkdirWriter(workdir).run("run-1")
    run.activity("s1", "research", {"summary": "s"},
                 [("page", "https://example.org/" + HOSTILE, b"<html>page</html>")],
                 terminal_state="failed", reason_code=HOSTILE)  # fmt: skip
    run.close()
    for blob in (workdir / ".sdd" / "cas").iterdir():
        blob.write_bytes(b"defaced")
    assert cli("import", "bernstein", str(workdir)).code == 0
    for args in (["verify"], ["verify", "--compat", "bernstein"], ["show", "run-1"]):
        result = cli(*args, "--json")
        assert_shown_safe(result.out, " ".join(args))
        assert result.code == 2 and result.json()
    stages = cli("show", "run-1", "--json").json()["stages"]
    assert stages[0]["reason_code"] == HOSTILE


def test_a_newline_in_a_bernstein_field_never_draws_a_row_of_its_own(
    tmp_path: Path, cli: Any
) -> None:
    """``show`` of an imported run printed a stage id, state or event name holding a
    newline raw: the text after it read as a stage row of its own ("FAKE OK")."""
    forged = "s1\r\n│   ├── FAKE OK  research  completed (ok)"
    workdir = tmp_path / "workdir"
    writer = WorkdirWriter(workdir)
    run = writer.run("run-1")
    run.record("task_claimed\nFAKE EVENT", task="t")
    run.activity(forged, "research", {"summary": "s"},
                 [("page", "https://example.org/", b"<html>page</html>")],
                 terminal_state="failed", reason_code="why\nFAKE REASON")  # fmt: skip
    run.close()
    assert cli("import", "bernstein", str(workdir)).code == 0
    shown = cli("show", "run-1")
    assert "s1\\x0d\\x0a" in shown.out, shown.out
    for line in shown.out.splitlines():
        assert not line.lstrip("│├└─ ").startswith("FAKE"), shown.out
