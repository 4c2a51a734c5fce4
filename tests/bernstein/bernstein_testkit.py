"""Helpers for the bernstein interop tests: writable copies of the two workdirs that
bernstein 3.23.0 wrote (copied from ../shared/fixtures), tampering, import-and-verify."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from agentledger import Ledger
from agentledger.bernstein import import_workdir
from agentledger.verify import VerifyOptions

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = FIXTURES / "bernstein-3.23.0"
SHAPES = FIXTURES / "bernstein-3.23.0-shapes"

SMALL_SIGNER = (
    "ed25519:"
    + base64.b64decode("MCowBQYDK2VwAyEA6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw=")[12:].hex()
)
SHAPES_SIGNERS = tuple(
    "ed25519:" + bytes(SigningKey(hashlib.sha256(seed).digest()).verify_key).hex()
    for seed in (b"k1", b"k2", b"k3")
)


def copy_workdir(source: Path, target: Path) -> Path:
    """A writable copy of a fixture workdir (its ``.sdd`` only)."""
    shutil.copytree(source / ".sdd", target / ".sdd")
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return target


def private_key_file(source: Path, target: Path) -> Path:
    """The audit key, as a 0600 file (keys readable by others are refused)."""
    target.write_bytes((source / "audit.key").read_bytes())
    target.chmod(0o600)
    return target


def journal(workdir: Path, run_id: str) -> Path:
    return workdir / ".sdd" / "runs" / run_id / "journal.jsonl"


def lines(workdir: Path, run_id: str) -> list[str]:
    return journal(workdir, run_id).read_text("ascii").splitlines(keepends=True)


def write_lines(workdir: Path, run_id: str, new: list[str]) -> None:
    journal(workdir, run_id).write_text("".join(new), "ascii")


def edit_row(workdir: Path, run_id: str, position: int, /, **changes: Any) -> None:
    """Change fields of one row in place, keeping bernstein's line format."""
    rows = lines(workdir, run_id)
    row = json.loads(rows[position])
    row.update(changes)
    rows[position] = json.dumps(row) + "\n"
    write_lines(workdir, run_id, rows)


def cas(workdir: Path, content_hash: str) -> Path:
    return workdir / ".sdd" / "cas" / content_hash.split(":", 1)[1]


@dataclass
class Outcome:
    """What import then verify said, per run, in both modes."""

    compat: dict[str, int]
    strict: dict[str, int]
    findings: dict[str, set[str]]
    fields: dict[str, set[tuple[int | None, str, str | None]]]
    workspace: set[str]
    workspace_fields: set[tuple[str, str | None]]
    """``(check, subject)`` of every workspace finding of strict."""
    compat_fields: dict[str, set[tuple[int | None, str, str | None]]]
    notes: list[str]


def import_and_verify(
    workdir: Path,
    ledger_path: Path,
    *,
    key: Path | None = None,
    trust: tuple[str, ...] = (),
    tsa_bundle: Path | None = None,
    witness_state: Path | None = None,
) -> Outcome:
    """Import into a fresh ledger at ``ledger_path`` and verify every run both ways."""
    with Ledger.open(ledger_path) as ledger:
        import_workdir(ledger, workdir)
        runs = sorted(p.name for p in (workdir / ".sdd" / "runs").iterdir())
        compat = ledger.verify(runs, options=VerifyOptions(compat="bernstein"))
        strict = ledger.verify(
            runs,
            options=VerifyOptions(
                audit_key_file=key,
                trust=trust,
                tsa_bundle_file=tsa_bundle,
                witness_state_dir=witness_state,
            ),
        )
    return Outcome(
        compat={v.run_id: int(v.code) for v in compat.runs},
        strict={v.run_id: int(v.code) for v in strict.runs},
        findings={v.run_id: {d.check for d in v.divergences} for v in strict.runs},
        fields={
            v.run_id: {(d.seq, d.check, d.subject) for d in v.divergences} for v in strict.runs
        },
        workspace={d.check for d in strict.workspace},
        workspace_fields={(d.check, d.subject) for d in strict.workspace},
        compat_fields={
            v.run_id: {(d.seq, d.check, d.subject) for d in v.divergences} for v in compat.runs
        },
        notes=list(strict.notes),
    )


def run_script(script: Path, *args: str) -> str:
    """What ``python SCRIPT ARGS...`` prints (a generator that runs bernstein's own code);
    its stderr's end when it fails."""
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
