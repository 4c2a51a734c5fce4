"""The signatures a verify accepted are remembered in the key folder, and change no verdict.

Each tampering of ``test_tamper.py`` is verified three ways after a clean verify filled the
memo: with it, with ``recheck_signatures`` (every signature in full), and under a copy of
the key folder without it. The reports must be the same, finding for finding.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger, signature_memo
from agentledger.verify import VerifyOptions

from .activity_testkit import record_every_modality
from .test_tamper import TAMPERS, recorded  # noqa: F401 (the fixture)

DIGEST = signature_memo.DIGEST_BYTES


def memo_of(ledger_path: Path) -> Path:
    with Ledger.open(ledger_path, readonly=True) as ledger:
        path = signature_memo.memo_path(ledger.keys.home, ledger.id)
    assert path is not None
    return path


def findings(report: Any) -> list[tuple[object, ...]]:
    every = list(report.workspace) + [d for run in report.runs for d in run.divergences]
    return [(d.run_id, d.seq, d.check, d.expected, d.actual, d.subject) for d in every]


def verify(ledger_path: Path, key_dir: Path | None = None, *, recheck: bool = False) -> Any:
    with Ledger.open(ledger_path, readonly=True, key_dir=key_dir) as ledger:
        return ledger.verify(options=VerifyOptions(recheck_signatures=recheck))


def test_a_verify_remembers_what_it_accepted_in_the_key_folder(recorded: Path) -> None:  # noqa: F811
    memo = memo_of(recorded)
    data = memo.read_bytes()
    assert data.startswith(signature_memo.HEADER)
    digests = data[len(signature_memo.HEADER) :]
    # The receipts' signatures (an input and an output of the data stage, at least).
    assert len(digests) >= 2 * DIGEST and len(digests) % DIGEST == 0
    assert recorded.parent not in memo.parents, "kept outside the ledger's folder"
    ledger_bytes = hashlib.sha256(recorded.read_bytes()).digest()
    again = verify(recorded)
    assert again.code == 0
    assert hashlib.sha256(recorded.read_bytes()).digest() == ledger_bytes
    assert memo.read_bytes() == data, "nothing new accepted: the memo is not rewritten"
    # The report says how many verifications it took from the memo (a signature checked
    # twice, as the newest checkpoint's is, counts twice).
    said = [note for note in again.notes if "(its memo)" in note]
    assert len(said) == 1
    count, _, words = said[0].partition(" ")
    assert int(count) >= len(digests) // DIGEST
    assert words == (
        "signatures accepted as this install verified them in an earlier verify of the "
        "ledger (its memo), not verified again (--recheck-signatures verifies every one)"
    )
    assert not [note for note in verify(recorded, recheck=True).notes if "memo" in note]


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_the_memo_changes_no_verdict(recorded: Path, tmp_path: Path, case: str) -> None:  # noqa: F811
    memo = memo_of(recorded)
    assert memo.stat().st_size > len(signature_memo.HEADER)
    cold_home = tmp_path / "cold-keys"
    shutil.copytree(memo.parent.parent, cold_home)
    (cold_home / memo.parent.name / memo.name).unlink()
    edit, check = TAMPERS[case]
    edit(recorded)
    with_memo = verify(recorded)
    rechecked = verify(recorded, recheck=True)
    cold = verify(recorded, cold_home)
    assert with_memo.code == 2
    assert check in [found[2] for found in findings(with_memo)]
    assert findings(with_memo) == findings(rechecked) == findings(cold)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not a memo",
        signature_memo.HEADER + b"\x00" * (DIGEST - 1),
        b"agentledger accepted signatures v0\n" + b"\x00" * DIGEST,
    ],
    ids=["empty", "no header", "torn digest", "another version"],
)
def test_a_memo_that_is_not_one_counts_as_empty(recorded: Path, content: bytes) -> None:  # noqa: F811
    memo = memo_of(recorded)
    remembered = memo.read_bytes()
    memo.write_bytes(content)
    assert signature_memo.read_digests(memo) == b""
    assert verify(recorded).code == 0
    assert memo.read_bytes() == remembered, "written anew from what the verify accepted"


@pytest.mark.parametrize("mode", [0o620, 0o602])
def test_a_memo_others_can_write_is_not_read(recorded: Path, mode: int) -> None:  # noqa: F811
    """Whoever can write it decides which signatures verify: like a trust file."""
    memo = memo_of(recorded)
    assert signature_memo.read_digests(memo)
    memo.chmod(mode)
    assert signature_memo.read_digests(memo) == b""
    memo.chmod(0o600)
    link = memo.with_name("link.signatures")
    link.symlink_to(memo)
    assert signature_memo.read_digests(link) == b""


def test_a_fifo_in_the_memo_s_place_is_not_waited_on(recorded: Path) -> None:  # noqa: F811
    memo = memo_of(recorded)
    memo.unlink()
    os.mkfifo(memo)
    assert signature_memo.read_digests(memo) == b""  # opening it for reading would block
    assert verify(recorded).code == 0


def test_a_memo_past_its_bound_counts_as_empty(
    recorded: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memo = memo_of(recorded)
    count = (memo.stat().st_size - len(signature_memo.HEADER)) // DIGEST
    monkeypatch.setattr(signature_memo, "MAX_DIGESTS", count - 1)
    assert signature_memo.read_digests(memo) == b""
    monkeypatch.setattr(signature_memo, "MAX_DIGESTS", count)
    assert len(signature_memo.read_digests(memo)) == count * DIGEST


def test_recheck_reads_no_memo_and_leaves_what_it_accepted(
    recorded: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memo = memo_of(recorded)
    remembered = memo.read_bytes()

    def unreadable(path: Path) -> bytes:
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(signature_memo, "read_digests", unreadable)
    memo.unlink()
    assert verify(recorded, recheck=True).code == 0
    assert memo.read_bytes() == remembered
    with pytest.raises(AssertionError, match="read"):
        verify(recorded)


def test_a_memo_that_cannot_be_written_costs_only_time(recorded: Path) -> None:  # noqa: F811
    memo = memo_of(recorded)
    memo.unlink()
    memo.mkdir()  # what the memo is replaced with cannot take a folder's place
    assert verify(recorded).code == 0
    assert memo.is_dir() and not list(memo.parent.glob(".signatures-*"))


def test_the_cli_rechecks_on_request(recorded: Path, cli: Any) -> None:  # noqa: F811
    assert "--recheck-signatures" in cli("verify", "--help").out
    memo = memo_of(recorded)
    memo.unlink()
    result = cli("verify", "--recheck-signatures", "--json")
    assert result.code == 0, result.err
    assert result.json()["code"] == 0
    assert memo.exists()


def test_verifies_in_threads_share_one_memo_soundly(recorded: Path, tmp_path: Path) -> None:  # noqa: F811
    """Two verifies at once in one process: one holds the memo, the other's verifications
    go through it; a forged signature is found whichever thread verifies it."""
    other = tmp_path / "other" / "ledger.db"
    with Ledger.open(other) as ledger:
        record_every_modality(ledger)
    edit, check = TAMPERS["signature swapped (hashes recomputed)"]
    edit(recorded)
    with ThreadPoolExecutor(2) as pool:
        for _ in range(4):
            tampered, clean = pool.map(verify, [recorded, other])
            assert check in [found[2] for found in findings(tampered)]
            assert clean.code == 0
            assert findings(tampered) == findings(verify(recorded, recheck=True))
