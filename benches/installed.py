"""What an installed package runs: its modules compiled to bytecode once, as
``pip install`` does for a wheel. Without this, a checkout or an unpacked wheel run under
``PYTHONDONTWRITEBYTECODE`` (CI, many containers) compiles every module it imports from
source in every timed process (about 0.05 s of a verify's start-up), which no installed
user pays. The benches compile both sides: agentledger and the peer's code."""

from __future__ import annotations

import compileall
from pathlib import Path


def compile_tree(root: Path) -> None:
    """Bytecode for every module under ``root`` that this Python can compile (a module of
    newer syntax is left to fail where it always did, on import)."""
    compileall.compile_dir(root, quiet=2)


def compile_package() -> None:
    import agentledger

    compile_tree(Path(agentledger.__file__).parent)
