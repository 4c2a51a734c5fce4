"""Set-up that says what it does: the Makefile and README announce the Rust build, the
system packages the browser test installs, and where the demo's keys go."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _make_n(*targets: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in {"AGENTLEDGER_HOME", "MAKEFLAGS"}}
    result = subprocess.run(
        ["make", "-n", "-B", *targets],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_make_demo_keeps_its_keys_in_the_demo_folder_unless_told() -> None:
    plain = _make_n("demo")
    assert "AGENTLEDGER_HOME=.demo/home " in plain
    assert "keys of the demo: .demo/home" in plain
    chosen = _make_n("demo", AGENTLEDGER_HOME="/elsewhere/keys")
    assert "AGENTLEDGER_HOME=/elsewhere/keys " in chosen


def test_the_browser_target_says_it_installs_system_packages_before_it_does() -> None:
    recipe = _make_n("browser")
    said = recipe.index("installing it with apt-get")
    assert said < recipe.index("apt-get update")
    assert "sudo apt-get install chromium" in recipe  # what a non-root user is told


def test_the_rust_build_is_announced_and_not_silenced() -> None:
    recipe = _make_n(".venv/.installed")
    assert "building the Rust extension (release" in recipe
    install = next(line for line in recipe.splitlines() if "pip install" in line and "-e" in line)
    assert "--quiet" not in install


def test_the_readme_says_make_test_may_install_chromium_as_root() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## The command line")[0]
    for words in ("chromium", "apt-get install chromium", "as root", ".demo/home"):
        assert words in quick_start, words


def test_the_demo_says_where_its_signing_key_goes(tmp_path: Path, cli: Any) -> None:
    home = tmp_path / "demo-keys"
    done = cli("--home", str(home), "demo", "--runs", "10", ledger=tmp_path / "d" / "ledger.db")
    assert done.code == 0
    assert f"signing key of this demo: {home}" in done.err
