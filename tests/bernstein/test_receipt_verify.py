"""`agentledger bernstein receipt-verify` against bernstein's own `verify receipt`.

A run receipt written by bernstein 3.23.0's own `build_run_receipt` (the sealed workdir of
test_sealed.py) is tampered with, one way per case; bernstein's `verify_run_receipt` gives
each its status and tier, with and without the operator's key pinned, and ours must give
the same exit code (`verify receipt`'s: 0 ok, 1 malformed, 2 tampered, 3 provenance
required and not reached).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .test_sealed import GENERATOR, sealed  # noqa: F401  (the module fixture)

Receipt = dict[str, Any]


def _dump(doc: Receipt) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def untouched(doc: Receipt) -> bytes:
    return _dump(doc)


def edited_row(doc: Receipt) -> bytes:
    doc["journal"]["events"][1]["event"] = "forged"
    return _dump(doc)


def dropped_last_row(doc: Receipt) -> bytes:
    doc["journal"]["events"].pop()
    return _dump(doc)


def stated_head(doc: Receipt) -> bytes:
    doc["journal"]["head_hash"] = "0" * 64
    return _dump(doc)


def stated_count(doc: Receipt) -> bytes:
    doc["journal"]["event_count"] += 1
    return _dump(doc)


def edited_spine(doc: Receipt) -> bytes:
    doc["spine"]["entries"][0]["actor"] = "someone"
    return _dump(doc)


def edited_subject(doc: Receipt) -> bytes:
    doc["subject"]["digest"]["sha256"] = "1" * 64
    return _dump(doc)


def edited_run_id(doc: Receipt) -> bytes:
    doc["run_id"] = "another-run"
    return _dump(doc)


def other_signature(doc: Receipt) -> bytes:
    doc["signing"]["signature_b64"] = base64.b64encode(b"\x02" * 64).decode()
    return _dump(doc)


def signature_not_base64(doc: Receipt) -> bytes:
    doc["signing"]["signature_b64"] = "not base64!"
    return _dump(doc)


def other_embedded_key(doc: Receipt) -> bytes:
    doc["signing"]["public_key_jwk"]["x"] = base64.urlsafe_b64encode(b"\x05" * 32).decode()
    return _dump(doc)


def no_events(doc: Receipt) -> bytes:
    del doc["journal"]["events"]
    return _dump(doc)


def wrong_type(doc: Receipt) -> bytes:
    doc["receipt_type"] = "something else"
    return _dump(doc)


def not_json(doc: Receipt) -> bytes:
    return _dump(doc)[:-40]


def subject_not_object(doc: Receipt) -> bytes:
    doc["subject"] = "x"
    return _dump(doc)


CASES: dict[str, Callable[[Receipt], bytes]] = {
    f.__name__: f
    for f in (
        untouched,
        edited_row,
        dropped_last_row,
        stated_head,
        stated_count,
        edited_spine,
        edited_subject,
        edited_run_id,
        other_signature,
        signature_not_base64,
        other_embedded_key,
        no_events,
        wrong_type,
        not_json,
        subject_not_object,
    )
}
PINS = ("none", "receipt.pem", "stranger.pem")


@pytest.fixture(scope="module")
def receipts(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:  # noqa: F811
    root = tmp_path_factory.mktemp("receipts")
    made = {}
    original = next((sealed / ".sdd" / "runs").glob("*/run-receipt.json"))
    for name, tamper in CASES.items():
        workdir = root / name
        shutil.copytree(sealed, workdir)
        target = workdir / original.relative_to(sealed)
        target.write_bytes(tamper(json.loads(original.read_bytes())))
        made[name] = workdir
    return made


@pytest.fixture(scope="module")
def bernstein_says(receipts: dict[str, Path]) -> dict[tuple[str, str], dict[str, Any]]:
    specs = []
    for name, workdir in receipts.items():
        receipt = next((workdir / ".sdd" / "runs").glob("*/run-receipt.json"))
        for pin in PINS:
            specs.append((name, pin, str(receipt) + ("" if pin == "none" else f",{workdir / pin}")))
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "receipt-status", *(spec for _, _, spec in specs)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(specs)
    return {(name, pin): answer for (name, pin, _), answer in zip(specs, answers, strict=True)}


BERNSTEIN_CODES = {"ok": 0, "malformed": 1, "raises": 1, "tampered": 2}


def test_the_cases_are_what_they_claim(bernstein_says: dict[tuple[str, str], Any]) -> None:
    assert bernstein_says[("untouched", "none")] == {"status": "ok", "tier": "integrity-only"}
    assert bernstein_says[("untouched", "receipt.pem")] == {"status": "ok", "tier": "provenance"}
    assert bernstein_says[("untouched", "stranger.pem")]["status"] == "tampered"
    failing = {name for name in CASES if bernstein_says[(name, "none")]["status"] != "ok"}
    assert failing == set(CASES) - {"untouched"}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("pin", PINS)
@pytest.mark.parametrize("require", [False, True], ids=["", "require-provenance"])
def test_exit_code_and_tier_are_bernsteins(
    name: str,
    pin: str,
    require: bool,
    receipts: dict[str, Path],
    bernstein_says: dict[tuple[str, str], Any],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = receipts[name]
    run_id = next((workdir / ".sdd" / "runs").glob("*/run-receipt.json")).parent.name
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "receipt-verify", run_id, "--json"]
    if pin != "none":
        args += ["--public-key", str(workdir / pin)]
    if require:
        args.append("--require-provenance")
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says[(name, pin)]
    expected = BERNSTEIN_CODES[theirs["status"]]
    if expected == 0 and require and theirs["tier"] != "provenance":
        expected = 3
    assert result.code == expected, (result.out, result.err, theirs)
    assert result.json()["tier"] == theirs["tier"]


def test_a_run_without_a_receipt_is_not_found(
    receipts: dict[str, Path], cli: Any, tmp_path: Path
) -> None:
    workdir = receipts["untouched"]
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    runs = sorted(p.name for p in (workdir / ".sdd" / "runs").iterdir())
    assert cli("bernstein", "receipt-verify", runs[-1], ledger=ledger).code == 1
