"""Archives: standalone, sealed, verified elsewhere with only the public key."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger.checkpoint import install_public_key
from agentledger.errors import LedgerError

from ..raw_entries import pin_unvetted
from .logkit import build, raw


def _with_evidence(ledger: Ledger) -> str:
    digest = ledger.blobs.put(b"fetched page")
    pin_unvetted(ledger, "run-1", digest, "page")
    ledger.blobs.put(b"unrelated blob")
    return digest


def test_an_archive_verifies_on_another_machine_with_only_the_public_key(
    ledger: Ledger, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger, runs=3, entries=3)
    digest = _with_evidence(ledger)
    key = install_public_key(ledger)
    out = tmp_path / "archive.db"
    result = cli("archive", str(out), "run-1", "run-2", "--json")
    assert result.code == 0, result.err
    assert result.json()["runs"] == ["run-1", "run-2"]
    assert result.json()["blobs"] == 1
    ledger.close()
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "reviewer"))  # no install key
    verified = cli("verify", "--all", "--trust", key, "--json", ledger=out)
    assert verified.code == 0, verified.out
    assert verified.json()["runs"] == 2
    assert cli("verify", "--all", "--json", ledger=out).code == 2  # key not trusted
    # show gives the reviewer the same choice (it had no --trust: DIVERGED without `keys
    # trust` run first, while verify --trust said clean).
    shown = cli("show", "run-1", "--trust", key, "--json", ledger=out)
    assert (shown.code, shown.json()["run_status"]) == (0, "clean"), shown.out
    assert cli("show", "run-1", "--json", ledger=out).code == 2
    with Ledger.open(out) as opened:
        assert opened.db.readonly
        assert digest in opened.blobs


def test_an_archive_cannot_be_extended(ledger: Ledger, tmp_path: Path, cli: Any) -> None:
    build(ledger, runs=1, entries=2)
    out = tmp_path / "archive.db"
    assert cli("archive", str(out)).code == 0
    with Ledger.open(out) as opened, pytest.raises(LedgerError):
        opened.run("run-0").append("step", {})
    key = install_public_key(ledger)
    with Ledger.open(ledger.path) as source:  # a forged tail written with raw SQL
        source.run("run-0").append("step", {"forged": True})
        row = source.db.conn.execute(
            "SELECT run_id, seq, kind, hash, bytes FROM entries ORDER BY leaf DESC LIMIT 1"
        ).fetchall()[0]
    with raw(out) as conn:
        conn.execute(
            "INSERT INTO entries (run_id, seq, kind, hash, bytes, leaf) VALUES (?, ?, ?, ?, ?, 2)",
            row,
        )
    result = cli("verify", "--all", "--trust", key, "--json", ledger=out)
    assert result.code == 2


def test_archiving_an_unknown_run_is_not_found(ledger: Ledger, tmp_path: Path, cli: Any) -> None:
    build(ledger, runs=1, entries=1)
    assert cli("archive", str(tmp_path / "a.db"), "nope").code == 1
    assert not (tmp_path / "a.db").exists()


def test_archive_refuses_to_overwrite(ledger: Ledger, tmp_path: Path, cli: Any) -> None:
    build(ledger, runs=1, entries=1)
    out = tmp_path / "a.db"
    out.write_bytes(b"keep me")
    assert cli("archive", str(out)).code == 65
    assert out.read_bytes() == b"keep me"


def test_archive_since_selects_recent_runs(ledger: Ledger, tmp_path: Path, cli: Any) -> None:
    build(ledger, runs=2, entries=1)
    out = tmp_path / "a.db"
    assert cli("archive", str(out), "--since", "2000-01-01").code == 0
    assert cli("archive", str(tmp_path / "b.db"), "--since", "2999-01-01").code == 1
    assert cli("archive", str(tmp_path / "c.db"), "--since", "yesterday").code == 65


@pytest.mark.parametrize(
    "body", [b"not json", b"[1]", b'{"ts":"2025-01-01T00:00:00"}', b'{"ts":"garbage"}']
)
def test_archive_since_of_a_tampered_last_entry_is_refused_not_crashed_on(
    ledger: Ledger, tmp_path: Path, cli: Any, body: bytes
) -> None:
    build(ledger, runs=2, entries=2)
    with raw(ledger.path) as conn:
        conn.execute("UPDATE entries SET bytes = ? WHERE run_id = 'run-0' AND seq = 1", (body,))
    out = tmp_path / "a.db"
    result = cli("archive", str(out), "--since", "2000-01-01")
    assert result.code == 2, result.err
    assert "signing-refused" in result.err
    assert not out.exists()


def test_a_seal_larger_than_any_archive_of_its_entries_is_not_parsed(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    """The seal is read whole and parsed as JSON: 8 MB of tiny items cost 200 MB of Python
    objects (the 1 GB SQLite lets a cell hold, more memory than the machine has)."""
    build(ledger, runs=1, entries=2)
    key = install_public_key(ledger)
    out = tmp_path / "archive.db"
    assert cli("archive", str(out)).code == 0
    with raw(out) as conn:
        ((text,),) = conn.execute("SELECT value FROM ledger_meta WHERE key = 'archive'")
        padded = text[:-1] + ', "padding": [' + ",".join(["[0,[]]"] * 1_200_000) + "]}"
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'archive'", (padded,))
    tracemalloc.start()
    try:
        result = cli("verify", "--all", "--trust", key, "--json", ledger=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.code == 2, result.out
    assert "archive.source" in result.json()["findings_by_check"]
    assert peak < 60_000_000, peak
