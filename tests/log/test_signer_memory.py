"""The signer's memory: monotonic, per ledger id, and a damaged record counts as none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.errors import InvalidInput
from agentledger.signer_memory import SignerMemory

LEDGER_ID = "00112233445566778899aabbccddeeff"


def test_a_record_only_moves_forward_and_reads_back(tmp_path: Path) -> None:
    memory = SignerMemory(tmp_path, LEDGER_ID)
    assert memory.read() == {} and memory.base() is None
    memory.record("signed", 10, b"\x01" * 32, (b"\x0a" * 32, b"\x0b" * 32), "t1")
    memory.record("signed", 7, b"\x02" * 32, (), "t2")  # older: ignored
    memory.record("verified", 12, b"\x03" * 32, (), "t3")
    again = SignerMemory(tmp_path, LEDGER_ID).read()
    assert (again["signed"].size, again["signed"].root) == (10, b"\x01" * 32)
    assert again["signed"].frontier == (b"\x0a" * 32, b"\x0b" * 32)
    assert again["verified"].frontier is None  # 12 has two set bits: a record of none is none
    assert again["verified"].size == 12
    base = memory.base()
    assert base is not None and base.size == 12


def test_a_damaged_record_counts_as_none_and_an_odd_id_names_no_file(tmp_path: Path) -> None:
    memory = SignerMemory(tmp_path, "11" * 16)
    memory.record("signed", 3, b"\x01" * 32, ())
    memory.path.write_bytes(b"{not json")
    assert SignerMemory(tmp_path, "11" * 16).read() == {}
    hostile = SignerMemory(tmp_path, "../../etc/passwd")
    assert not hostile.usable
    hostile.record("signed", 1, b"\x00" * 32, ())
    assert not (tmp_path.parent / "etc").exists()


def test_a_shorter_record_leaves_no_tail_of_a_longer_one(tmp_path: Path) -> None:
    memory = SignerMemory(tmp_path, LEDGER_ID)
    memory.record("signed", (1 << 63) - 1, b"\x01" * 32, (b"\x02" * 32,) * 63, "t")
    assert memory.path.stat().st_size > 4096  # longer than one page
    memory.path.write_bytes(memory.path.read_bytes())  # a fresh process reads it back
    memory.record("verified", 1, b"\x03" * 32, (b"\x03" * 32,), "t")
    again = SignerMemory(tmp_path, LEDGER_ID).read()
    assert again["signed"].frontier == (b"\x02" * 32,) * 63
    assert again["verified"].frontier == (b"\x03" * 32,)


def test_a_fifo_in_the_memory_s_place_reads_as_none_and_is_not_written(
    tmp_path: Path, cli: Any, ledger_path: Path
) -> None:
    """Read: no memory (the safe direction); written: a typed error naming the file, and
    a verify still gives its verdict, with a note."""
    memory = SignerMemory(tmp_path, LEDGER_ID)
    memory.path.parent.mkdir(parents=True)
    os.mkfifo(memory.path)
    assert memory.read() == {}
    with pytest.raises(InvalidInput, match="not a regular file"):
        memory.record("signed", 1, b"\x01" * 32, ())
    assert cli("append", "run-1", "step", "{}").code == 0
    with Ledger.open(ledger_path) as ledger:
        path = SignerMemory(ledger.keys.home, ledger.id).path
    path.unlink()
    os.mkfifo(path)
    # A process of its own: this one keeps the memory it opened before (one open a file).
    agentledger = Path(sys.executable).parent / "agentledger"
    verified = subprocess.run(
        [agentledger, "--ledger", ledger_path, "verify", "--json"], capture_output=True, timeout=60
    )
    assert verified.returncode == 0, verified.stderr
    notes = json.loads(verified.stdout)["notes"]
    assert any("is not a regular file" in note for note in notes), notes
