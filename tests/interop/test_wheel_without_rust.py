"""A reviewer needs no Rust toolchain: the abi3 wheel (`make dist`) installed into a fresh
virtual environment, with no `cargo` on PATH, verifies a proof file and an archive."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from agentledger import Ledger
from agentledger.checkpoint import install_public_key

ROOT = Path(__file__).parent.parent.parent


def _build_wheel(out: Path) -> Path:
    maturin = Path(sys.executable).parent / "maturin"
    subprocess.run(
        [str(maturin), "build", "--release", "--quiet", "--out", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("agentledger-*.whl")
    return wheel


def _reviewer_env(folder: Path, wheel: Path) -> dict[str, str]:
    """A fresh venv holding the wheel; its dependencies (pure or with their own wheels)
    are borrowed from this environment's site-packages, the test's one network-free way."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    path = os.pathsep.join([str(folder / "bin"), "/usr/bin", "/bin"])
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    return {"PATH": path, "HOME": str(folder), "AGENTLEDGER_HOME": str(folder / "keys")}


def test_the_wheel_verifies_a_proof_and_an_archive_without_rust(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    for name in ("run-a", "run-b"):
        ledger.run(name).append_many([("step", {"i": i}) for i in range(40)])
    key = install_public_key(ledger)
    proof = tmp_path / "entry.tlog-proof"
    proof.write_text(cli("prove", "run-b", "7").out)
    archive = tmp_path / "audit.db"
    assert cli("archive", str(archive), "run-a").code == 0
    wheel = _build_wheel(tmp_path / "dist")
    assert "-cp311-abi3-manylinux" in wheel.name  # one wheel for every CPython >= 3.11
    env = _reviewer_env(tmp_path / "reviewer", wheel)
    agentledger = str(tmp_path / "reviewer" / "bin" / "agentledger")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [agentledger, *args], env=env, capture_output=True, text=True, check=False
        )

    where = subprocess.run(
        [
            str(tmp_path / "reviewer" / "bin" / "python"),
            "-c",
            "import agentledger._core as c; print(c.__file__)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(tmp_path / "reviewer"))  # the wheel's extension, not ours
    checked = run("verify-proof", str(proof), "--trust", key)
    assert checked.returncode == 0, checked.stderr
    assert "entry 7 of run run-b" in checked.stdout
    assert run("verify-proof", str(proof)).returncode == 2  # trusts no one by default
    audited = run("--ledger", str(archive), "verify", "--all", "--trust", key)
    assert audited.returncode == 0, audited.stdout + audited.stderr
