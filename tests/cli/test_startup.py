"""Start-up stays cheap: `--version` and `--help` load no heavy module (no timing here;
benches/startup.py measures it)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import agentledger
from agentledger import Ledger, _core
from agentledger._version import __version__
from agentledger.cli.app import COMMANDS, cli, load_all

HEAVY = ("rich", "pydantic", "agentledger._core", "apsw", "agentledger.ledger", "nacl")

PROBE = """
import json, sys
from agentledger.cli import main
sys.stdout = open("/dev/null", "w")
main(sys.argv[1:])
sys.stdout = sys.__stdout__
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["-h"]])
def test_version_and_help_import_no_heavy_module(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert not any(m.startswith(("agentledger.phase", "agentledger.verify")) for m in loaded)


def test_the_version_is_the_core_s_and_the_distribution_s() -> None:
    assert __version__ == _core.__version__ == version("agentledger") == agentledger.__version__


def test_the_lazy_command_table_lists_exactly_the_commands() -> None:
    load_all()
    assert set(COMMANDS) == set(cli.commands), set(COMMANDS) ^ set(cli.commands)


def test_the_public_names_load_on_first_use() -> None:
    for name in agentledger.__all__:
        assert getattr(agentledger, name) is not None
    with pytest.raises(AttributeError):
        _ = agentledger.NoSuchThing  # type: ignore[attr-defined]


def test_verify_loads_the_phase_and_bernstein_machinery_only_for_a_ledger_that_needs_it(
    ledger_path: Path,
) -> None:
    """The phase compiler, its models and the transition rules load when a run has phase
    entries to replay, and bernstein's verifier when the ledger holds an import: not for
    every verify."""
    with Ledger.open(ledger_path) as ledger:
        ledger.run("plain").append("step", {"n": 1})
    probe = PROBE.replace("main(sys.argv[1:])", "code = main(sys.argv[1:])")
    probe += "print(code)\n"
    args = ["--ledger", str(ledger_path), "verify", "--all"]
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True
    )
    modules, code = done.stdout.splitlines()[-2:]
    assert code == "0", done.stderr
    loaded = set(json.loads(modules))
    heavy = {
        "agentledger.phase.models",
        "agentledger.phase.compiler",
        "pydantic",
        "agentledger.verify.bernstein_runs",
        "agentledger.bernstein.verifier",
        "cryptography.x509",
    }
    assert not heavy & loaded, sorted(heavy & loaded)
