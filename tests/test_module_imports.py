"""Every module imports on its own, first: none relies on another having been imported
before it (which an import circle would hide). The import contracts in pyproject.toml
(`lint-imports`, run by `make lint`) keep the circles from coming back."""

from __future__ import annotations

import ast
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


def test_the_root_package_gives_its_modules_only_submodules_and_the_core() -> None:
    # The import graph cannot see the compiled `_core`: it reads `from agentledger import
    # _core` as an import of the root package. So that nothing else hides behind those
    # edges, a module takes from the root only its submodules (which the graph sees) and
    # `_core`, never a name the root re-exports.
    submodules = {path.stem for path in PACKAGE.glob("*.py")}
    submodules |= {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    allowed = (submodules - {"__init__"}) | {"_core"}
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "agentledger" and not node.level:
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names if alias.name == "agentledger"]
            else:
                continue
            where = f"{path.relative_to(PACKAGE)}:{node.lineno}"
            wrong += [f"{where}: {name}" for name in names if name not in allowed]
    assert not wrong, wrong


def test_the_root_package_imports_only_the_bottom_layer() -> None:
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("agentledger")
    }
    assert imported == {"agentledger._lazy", "agentledger._version"}


def test_importing_the_core_loads_nothing_of_the_root_but_its_lazy_table() -> None:
    # Why an import of the root closes no circle: its `__init__` imports none of the names
    # it re-exports until they are used (PEP 562; their types are in `__init__.pyi`).
    probe = "import json, sys, agentledger._core; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = {name for name in json.loads(done.stdout) if name.split(".")[0] == "agentledger"}
    assert loaded == {
        "agentledger",
        "agentledger._core",
        "agentledger._lazy",
        "agentledger._version",
    }
