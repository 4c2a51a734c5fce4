"""Every module imports on its own, first: none relies on another having been imported
before it (which an import circle would hide). The import contracts in pyproject.toml
(`lint-imports`, run by `make lint`) keep the circles from coming back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import agentledger

PACKAGE = Path(agentledger.__file__).parent

# One interpreter for all modules: before each import every agentledger module is dropped
# from sys.modules, so each one is imported first, alone. The compiled core stays: a pyo3
# module initialises once per process.
PROBE = """
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m.split(".")[0] == "agentledger"]:
        if loaded != "agentledger._core":
            del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed[name] = traceback.format_exc(limit=-3)
print(json.dumps(failed))
"""


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_the_module_list_is_the_package() -> None:
    names = module_names()
    assert {"agentledger", "agentledger.journal", "agentledger.cli.app"} <= set(names)
    assert len(names) == len(set(names)) > 50


def test_every_module_imports_first_and_alone() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(module_names())],
        capture_output=True,
        text=True,
        check=True,
    )
    failed = json.loads(done.stdout)
    assert not failed, "\n".join(f"{name}:\n{trace}" for name, trace in failed.items())


def test_a_verify_without_phase_entries_never_loads_the_phase_models(tmp_path: Path) -> None:
    """The phase compiler and its pydantic models load only for a ledger that holds a phase
    entry (``verify/phase.py``); one that does is still replayed (tests/phase_ledger)."""
    probe = """
import sys
from pathlib import Path
from agentledger import Ledger
with Ledger.open(Path(sys.argv[1]), key_dir=Path(sys.argv[2])) as ledger:
    ledger.run("r").append("note", {"n": 1})
with Ledger.open(Path(sys.argv[1]), readonly=True, key_dir=Path(sys.argv[2])) as ledger:
    report = ledger.verify()
print(report.code, "agentledger.phase.models" in sys.modules, "pydantic" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "l.db"), str(tmp_path / "home")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["0", "False", "False"], done.stderr
