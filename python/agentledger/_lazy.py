"""Names a package exports but loads on first use (PEP 562).

Importing a package runs its ``__init__``; for ``agentledger`` and its bernstein package that
would load the compiled core, the schema models or the verifier before any command asked for
them (``--version`` and ``--help`` must stay fast). Their ``__init__`` lists each exported name
with the module that defines it and takes ``__getattr__``/``__dir__`` from here.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a name to its module."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
