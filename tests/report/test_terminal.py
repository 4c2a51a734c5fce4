"""Terminal discipline: long lines wrap (never cut without a mark), --no-color holds for
every command, and a reader that closes the pipe early ends the command quietly (exit 0)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from tests.report.conftest import Demo, as_json

GUIDES = re.compile(r"[│├└─\s]")
AGENTLEDGER = Path(sys.executable).parent / "agentledger"
COLOUR = re.compile(r"\x1b\[([0-9;]*)m")


def _joined(text: str) -> str:
    """The output with tree guides and line breaks gone: wrapped text joins up again."""
    return GUIDES.sub("", text)


@pytest.mark.parametrize("columns", ["80", "120"])
def test_every_finding_is_whole_at_80_and_120_columns(
    demo: Demo, demo_cli: Any, monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    code, out, _ = demo_cli("verify", "--json")
    report = as_json(out)
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = demo_cli("verify")
    assert code == 2
    assert max(len(line) for line in out.splitlines()) <= int(columns)
    shown = _joined(out)
    findings = report["workspace"] + [d for run in report["failures"] for d in run["divergences"]]
    assert findings
    for finding in findings:
        for side in ("expected", "actual"):
            assert _joined(finding[side]) in shown, (side, finding)


@pytest.mark.parametrize("columns", ["80", "120"])
def test_show_wraps_the_words_that_explain_a_deletion(
    demo: Demo, demo_cli: Any, monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = demo_cli("show", demo.run("chain.gap"))
    assert code == 2
    assert max(len(line) for line in out.splitlines()) <= int(columns)
    shown = _joined(out)
    assert _joined("gap before it, link broken") in shown
    assert _joined("the entry before it was changed, removed or replaced") in shown


def _colours(text: str) -> list[str]:
    """The SGR parameters that set a colour (30-49, 90-107), not bold or dim."""
    found = []
    for params in COLOUR.findall(text):
        for part in params.split(";"):
            if part.isdigit() and (30 <= int(part) <= 49 or 90 <= int(part) <= 107):
                found.append(part)
    return found


@pytest.mark.parametrize(
    "args",
    [("verify",), ("show", "RUN"), ("explain", "entry.hash"), ("verify", "RUN")],
)
def test_no_color_holds_on_a_forced_terminal(
    demo: Demo, demo_cli: Any, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    argv = [demo.run("chain.gap") if a == "RUN" else a for a in args]
    _, coloured, _ = demo_cli(*argv)
    assert _colours(coloured), "FORCE_COLOR should colour the output"
    for placed in (["--no-color", *argv], [*argv, "--no-color"]):
        _, out, err = demo_cli(*placed)
        assert _colours(out + err) == [], placed


def _ledger_with_many_runs(path: Path, runs: int, entries: int) -> None:
    with Ledger.open(path) as ledger, ledger.db.write():
        for n in range(runs):
            ledger.run(f"run-{n:05d}").append_many([("step", {"n": i}) for i in range(entries)])


@pytest.mark.parametrize(
    "args", [("runs",), ("runs", "--jsonl"), ("runs", "--json"), ("show", "run-00000")]
)
def test_a_closed_pipe_ends_quietly_with_exit_0(tmp_path: Path, args: tuple[str, ...]) -> None:
    path = tmp_path / "ledger.db"
    # More than a pipe holds (64 KiB) either way: 2,000 runs, or a run of 2,000 entries.
    _ledger_with_many_runs(path, 2000, 1)
    with Ledger.open(path) as ledger:
        ledger.run("run-00000").append_many([("step", {"n": i}) for i in range(2000)])
    command = [str(AGENTLEDGER), "--ledger", str(path), *args]
    env = {**os.environ, "COLUMNS": "120"}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # `| head -1`
        err = process.stderr.read()
        code = process.wait()
    assert first
    assert err == b""
    assert code == 0
