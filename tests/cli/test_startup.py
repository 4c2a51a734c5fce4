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
from agentledger.errors import ExitCode
from tests.bernstein.data.tsa_tokens import root_ca

HEAVY = ("rich", "pydantic", "agentledger._core", "apsw", "agentledger.ledger", "nacl")

PROBE = """
import json, sys
from agentledger.cli import main
sys.stdout = open("/dev/null", "w")
main(sys.argv[1:])
sys.stdout = sys.__stdout__
print(json.dumps(sorted(sys.modules)))
"""


def modules_loaded(args: list[str], exit_code: int = 0) -> set[str]:
    """The modules a command line that exits ``exit_code`` loaded, in a fresh interpreter."""
    probe = PROBE.replace("main(sys.argv[1:])", "code = main(sys.argv[1:])") + "print(code)\n"
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True
    )
    modules, code = done.stdout.splitlines()[-2:]
    assert code == str(exit_code), done.stderr
    return set(json.loads(modules))


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
    loaded = modules_loaded(["--ledger", str(ledger_path), "verify", "--all"])
    heavy = {
        "agentledger.phase.models",
        "agentledger.phase.compiler",
        "pydantic",
        "agentledger.verify.bernstein_runs",
        "agentledger.bernstein.verifier",
        "cryptography.x509",
    }
    assert not heavy & loaded, sorted(heavy & loaded)


@pytest.mark.parametrize("command", [["verify", "--all"], ["show", "plain"]])
def test_a_verify_that_prints_json_loads_no_console_and_no_signer(
    ledger_path: Path, command: list[str]
) -> None:
    """Machine output needs neither rich (the terminal report) nor PyNaCl (a verify reads
    keys and signs nothing): both are a tenth of a second of every such process's start-up.
    The terminal report still loads rich, after the verify it shows."""
    with Ledger.open(ledger_path) as ledger:
        ledger.run("plain").append("step", {"n": 1})
    for output, expected in ((["--json"], set()), ([], {"rich"})):
        args = ["--ledger", str(ledger_path), *command, *output]
        loaded = {name.split(".")[0] for name in modules_loaded(args)}
        assert loaded & {"rich", "nacl"} == expected, (output, sorted(loaded & {"rich", "nacl"}))


@pytest.mark.parametrize("command", [["append", "plain", "step", "{}"], ["runs"]])
def test_an_append_or_a_listing_loads_no_activity_or_bernstein_machinery(
    ledger_path: Path, command: list[str]
) -> None:
    """The commands a script calls once a step load what they use: the activity boundary
    (a third of an append's imports) loads with the first activity, bernstein's modules
    with the first imported run, and the install key signs without PyNaCl."""
    with Ledger.open(ledger_path) as ledger:
        ledger.run("plain").append("step", {"n": 1})
    loaded = modules_loaded(["--ledger", str(ledger_path), *command])
    assert "agentledger.journal" in loaded
    assert not {m for m in loaded if m.split(".")[0] == "nacl"}
    unneeded = {
        m for m in loaded if m.startswith(("agentledger.activity", "agentledger.bernstein"))
    }
    assert not unneeded, sorted(unneeded)


def test_show_of_an_imported_bernstein_run_as_json_loads_no_console(tmp_path: Path) -> None:
    """``show RUN --json`` of an imported run prints bernstein's rows and the verify's
    verdict without rich; its terminal tree loads it. (The fixture's signer is not trusted
    here: the strict verdict is diverged, exit 2, either way.)"""
    ledger_path, run_id = imported_small_workdir(tmp_path)
    for output, expected in ((["--json"], set()), ([], {"rich"})):
        args = ["--ledger", str(ledger_path), "show", run_id, *output]
        loaded = {name.split(".")[0] for name in modules_loaded(args, ExitCode.DIVERGED)}
        assert "agentledger" in loaded
        assert loaded & {"rich"} == expected, (output, sorted(loaded & {"rich"}))


def test_compat_verify_of_imported_runs_loads_none_of_the_strict_machinery(
    tmp_path: Path,
) -> None:
    """bernstein's own verdict (``--compat bernstein``) reads no seal, receipt or anchor:
    the strict checks load for the strict verdict only, and X.509, RFC 3161 and PEM
    parsing (cryptography, asn1crypto: 0.06 s of imports) only for what needs them: a
    trust bundle here (the fixture has no token)."""
    ledger_path, _ = imported_small_workdir(tmp_path)
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(root_ca("a test TSA root").pem())
    strict = "agentledger.verify.bernstein_strict"
    # The fixture's signer is not trusted here: the strict verdict is diverged.
    verdicts: tuple[tuple[list[str], ExitCode, set[str]], ...] = (
        (["--compat", "bernstein"], ExitCode.OK, set()),
        ([], ExitCode.DIVERGED, {strict}),
        (["--tsa-bundle", str(bundle)], ExitCode.DIVERGED, {strict, *PARSERS}),
    )
    for options, code, expected in verdicts:
        args = ["--ledger", str(ledger_path), "verify", *options]
        loaded = modules_loaded(args, code)
        assert "agentledger.verify.bernstein_runs" in loaded
        heavy = ({strict} & loaded) | ({m.split(".")[0] for m in loaded} & PARSERS)
        assert heavy == expected, (options, sorted(heavy))


def test_audit_verify_without_tokens_loads_no_x509(tmp_path: Path) -> None:
    """``bernstein audit-verify`` of a workdir without RFC 3161 anchors or a trust bundle
    parses no certificate: cryptography and asn1crypto stay unloaded."""
    from tests.bernstein.bernstein_testkit import SMALL

    ledger_path, _ = imported_small_workdir(tmp_path)
    args = ["--ledger", str(ledger_path), "bernstein", "audit-verify", "--audit-key"]
    loaded = modules_loaded([*args, str(SMALL / "audit.key")], 1)
    assert "agentledger.bernstein.audit_verdict" in loaded
    assert not {m.split(".")[0] for m in loaded} & PARSERS


PARSERS = {"cryptography", "asn1crypto"}
"""X.509, RFC 3161 and PEM parsing: 0.06 s of imports."""


def imported_small_workdir(tmp_path: Path) -> tuple[Path, str]:
    """A ledger holding the small bernstein fixture's import, and one run it imported."""
    from agentledger.bernstein import import_workdir
    from tests.bernstein.bernstein_testkit import SMALL, copy_workdir

    ledger_path = tmp_path / "l.db"
    with Ledger.open(ledger_path) as ledger:
        imported = import_workdir(ledger, copy_workdir(SMALL, tmp_path / "wd"))
    return ledger_path, imported.runs_imported[0]
