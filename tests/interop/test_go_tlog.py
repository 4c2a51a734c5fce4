"""The workspace log checked by code no one here wrote: Go's golang.org/x/mod/sumdb/tlog and
sumdb/note (Debian's golang-golang-x-mod-dev, installed by `make test`), reading a static
export (`log export`) through a tlog.TileReader. The Go program is `c2spcheck/main.go`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger

HERE = Path(__file__).parent
GO_PATH = "/usr/share/gocode"
"""Debian installs golang.org/x/mod's sources here; built in GOPATH mode, offline."""


@pytest.fixture(scope="module")
def c2spcheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go checker, built against Debian's x/mod with no network."""
    go = shutil.which("go")
    assert go is not None, "Go is missing: `make test` installs golang-go"
    assert Path(GO_PATH, "src/golang.org/x/mod/sumdb/tlog").is_dir(), (
        "golang.org/x/mod is missing: `make test` installs golang-golang-x-mod-dev"
    )
    out = tmp_path_factory.mktemp("go") / "c2spcheck"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": GO_PATH,
        "GOCACHE": str(out.parent / "cache"),
        "GOFLAGS": "",
        "GOPROXY": "off",
    }
    subprocess.run([go, "build", "-o", str(out), "."], cwd=HERE / "c2spcheck", env=env, check=True)
    return out


def _check(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, check=False)


def _grow(ledger: Ledger, runs: int, entries: int, start: int = 0) -> None:
    for run in range(runs):
        handle = ledger.run(f"run-{run}")
        handle.append_many([("step", {"i": i}) for i in range(start, start + entries)])


def test_go_sumdb_tlog_verifies_an_export_its_records_and_its_growth(
    ledger: Ledger, tmp_path: Path, cli: Any, c2spcheck: Path
) -> None:
    _grow(ledger, runs=3, entries=200)  # 600 leaves, interleaved by run
    vkey = cli("keys", "export", "--vkey").out.strip()
    first, second = tmp_path / "first", tmp_path / "second"
    assert cli("log", "export", str(first)).code == 0
    shutil.copytree(first, second)
    _grow(ledger, runs=4, entries=25_000, start=200)  # past 65,536: three levels of tiles
    assert cli("log", "export", str(second)).code == 0
    checked = _check(
        c2spcheck, "-dir", str(second), "-vkey", vkey, "-old", str(first), "-every", "101"
    )
    assert checked.returncode == 0, checked.stderr
    summary = json.loads(checked.stdout)
    size = 600 + 4 * 25_000
    assert summary["size"] == size == summary["records_checked"]
    assert summary["records_proven"] == len(range(0, size, 101)) + 1
    assert summary["consistent_with_size"] == 600
    assert summary["origin"] == f"agentledger/v1/ledger/{ledger.id}"


def test_go_refuses_a_tampered_export_and_a_foreign_key(
    ledger: Ledger, tmp_path: Path, cli: Any, c2spcheck: Path
) -> None:
    _grow(ledger, runs=2, entries=300)
    vkey = cli("keys", "export", "--vkey").out.strip()
    site = tmp_path / "site"
    assert cli("log", "export", str(site)).code == 0
    assert _check(c2spcheck, "-dir", str(site), "-vkey", vkey).returncode == 0
    other = tmp_path / "other.db"
    with Ledger.open(other, key_dir=tmp_path / "other-keys") as stranger:
        stranger.run("x").append("step", {})
    foreign = cli("--home", str(tmp_path / "other-keys"), "keys", "export", "--vkey", ledger=other)
    refused = _check(c2spcheck, "-dir", str(site), "-vkey", foreign.out.strip())
    assert refused.returncode == 1 and "checkpoint" in refused.stderr
    bundle = site / "tile/entries/002.p/88"
    data = bytearray(bundle.read_bytes())
    data[-3] ^= 0x01  # one byte of the last leaf document
    bundle.write_bytes(bytes(data))
    tampered = _check(c2spcheck, "-dir", str(site), "-vkey", vkey)
    assert tampered.returncode == 1
    assert "does not hash to its level-0 tile hash" in tampered.stderr
