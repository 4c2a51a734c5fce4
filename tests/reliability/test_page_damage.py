"""Bytes flipped anywhere in a ledger's b-tree pages (its schema, its tables, its
indexes, its notes): every command answers with a verdict or a typed error, never a
crash (exit 70), and ``checkpoint`` signs no root this install did not already sign.

A flipped bit in a CREATE statement's comment, or in a stored note, had made every
command exit 70 (text that is not UTF-8). The ``slow`` twin damages 20 times as many copies.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger

from ..activity.activity_testkit import record_every_modality

PAGE = 4096
COMMANDS = [
    ["verify", "--all", "--json"],
    ["runs", "--json"],
    ["show", "run-1", "--json"],
    ["activity", "verify", "run-1", "--json"],
    ["fsck", "--json"],
    ["gc", "--dry-run", "--json"],
    ["prove", "run-1", "0"],
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A ledger of every modality, checkpointed, at rest (no WAL), and its key folder."""
    base = tmp_path_factory.mktemp("pristine")
    home = base / "home"
    path = base / "ledger.db"
    with Ledger.open(path, key_dir=home) as ledger:
        record_every_modality(ledger, "run-1")
        for n in range(3):
            ledger.run(f"run-{n + 2}").append_many([("step", {"n": i}) for i in range(5)])
    return path, home


def _tree_pages(path: Path) -> list[int]:
    """Every page but the overflow pages of blob bytes (a flip there is blob.digest)."""
    conn = apsw.Connection(f"file:{path}?immutable=1", flags=apsw.SQLITE_OPEN_URI | 1)
    try:
        return [
            page
            for (page,) in conn.execute(
                "SELECT pageno FROM dbstat "
                "WHERE NOT (name = 'blob_chunks' AND pagetype = 'overflow')"
            )
        ]
    finally:
        conn.close()


def _signed_roots(path: Path) -> set[tuple[object, str]] | None:
    """The ``(size, root)`` of every stored checkpoint; None when the file is too damaged
    for SQLite to read them (then no command signed anything into it either)."""
    conn = apsw.Connection(f"file:{path}?immutable=1", flags=apsw.SQLITE_OPEN_URI | 1)
    try:
        return {
            (size, bytes(root).hex() if isinstance(root, bytes) else repr(root))
            for size, root in conn.execute("SELECT size, root FROM checkpoints")
        }
    except apsw.Error:
        return None
    finally:
        conn.close()


def _damage_copies(pristine: tuple[Path, Path], tmp_path: Path, cli: Any, copies: int) -> None:
    source, home = pristine
    pages = _tree_pages(source)
    signed = _signed_roots(source) or set()
    rng = random.Random(20261203)
    for copy in range(copies):
        work = tmp_path / f"copy-{copy}"
        work.mkdir()
        shutil.copytree(home, work / "home")
        data = bytearray(source.read_bytes())
        flips = []
        for _ in range(rng.choice([1, 1, 2, 4, 16])):
            at = (rng.choice(pages) - 1) * PAGE + rng.randrange(PAGE)
            data[at] ^= 1 << rng.randrange(8)
            flips.append(at)
        ledger = work / "ledger.db"
        ledger.write_bytes(bytes(data))
        for args in COMMANDS:
            result = cli("--home", str(work / "home"), *args, ledger=ledger)
            assert result.code in (0, 1, 2, 65), (flips, args, result.code, result.err[-500:])
            assert "Traceback" not in result.err, (flips, args)
        before = _signed_roots(ledger)
        cli("--home", str(work / "home"), "checkpoint", "--json", ledger=ledger)
        after = _signed_roots(ledger)
        if before is not None and after is not None:  # a root signed anew: one signed before
            assert after - before <= signed, (flips, after - before)
        if copy < copies - 1:
            shutil.rmtree(work)


def test_damaged_pages_never_crash_a_command(
    pristine: tuple[Path, Path], tmp_path: Path, cli: Any
) -> None:
    _damage_copies(pristine, tmp_path, cli, copies=240)


@pytest.mark.slow
def test_damaged_pages_never_crash_a_command_slow(
    pristine: tuple[Path, Path], tmp_path: Path, cli: Any
) -> None:
    _damage_copies(pristine, tmp_path, cli, copies=4800)
