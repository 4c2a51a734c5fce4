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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .bernstein_testkit import run_script
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
PINS = ("none", "receipt.pem", "stranger.pem", "garbage.pem", "rsa.pem")
"""Pinned keys: none, the receipt's, another Ed25519 key, not a PEM key, an RSA key."""


def _odd_pins(workdir: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    (workdir / "garbage.pem").write_bytes(b"-----BEGIN PUBLIC KEY-----\nAAAA\n")
    public = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()
    (workdir / "rsa.pem").write_bytes(
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


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
        _odd_pins(workdir)
        made[name] = workdir
    return made


@pytest.fixture(scope="module")
def bernstein_says(receipts: dict[str, Path]) -> dict[tuple[str, str], dict[str, Any]]:
    specs = []
    for name, workdir in receipts.items():
        receipt = next((workdir / ".sdd" / "runs").glob("*/run-receipt.json"))
        for pin in PINS:
            specs.append((name, pin, str(receipt) + ("" if pin == "none" else f",{workdir / pin}")))
    stdout = run_script(GENERATOR, "receipt-status", *(spec for _, _, spec in specs))
    answers = [json.loads(line) for line in stdout.splitlines()]
    assert len(answers) == len(specs)
    return {(name, pin): answer for (name, pin, _), answer in zip(specs, answers, strict=True)}


BERNSTEIN_CODES = {"ok": 0, "malformed": 1, "raises": 1, "tampered": 2}


def test_the_cases_are_what_they_claim(bernstein_says: dict[tuple[str, str], Any]) -> None:
    assert bernstein_says[("untouched", "none")] == {"status": "ok", "tier": "integrity-only"}
    assert bernstein_says[("untouched", "receipt.pem")] == {"status": "ok", "tier": "provenance"}
    assert bernstein_says[("untouched", "stranger.pem")]["status"] == "tampered"
    # A pin bernstein cannot read is malformed, but only once the receipt holds up.
    assert bernstein_says[("untouched", "garbage.pem")]["status"] == "malformed"
    assert bernstein_says[("untouched", "rsa.pem")]["status"] == "malformed"
    assert bernstein_says[("edited_row", "garbage.pem")]["status"] == "tampered"
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


# ---- receipts with an audit range, an extension set, the jcs-v2 profile --------------------


def edited_window(doc: Receipt) -> bytes:
    """The declared audit window relabelled (bound into the subject under 1.1.0)."""
    doc["audit_range"]["since"] = "2025-01-01T00:00:00Z"
    return _dump(doc)


def edited_audit_event(doc: Receipt) -> bytes:
    """An embedded audit event edited, its stated head recomputed to match."""
    import hashlib

    events = doc["audit_range"]["events"]
    events[0]["actor"] = "someone else"
    lines = "".join(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n" for e in events)
    doc["audit_range"]["head_sha256"] = hashlib.sha256(lines.encode()).hexdigest()
    return _dump(doc)


def audit_count(doc: Receipt) -> bytes:
    doc["audit_range"]["event_count"] += 1
    return _dump(doc)


def audit_events_not_a_list(doc: Receipt) -> bytes:
    doc["audit_range"]["events"] = {}
    return _dump(doc)


def dropped_audit_range(doc: Receipt) -> bytes:
    del doc["audit_range"]
    return _dump(doc)


def profile_downgraded(doc: Receipt) -> bytes:
    doc["hash_profile"] = "py-json-v1"
    return _dump(doc)


def profile_dropped(doc: Receipt) -> bytes:
    del doc["hash_profile"]
    return _dump(doc)


def profile_unknown(doc: Receipt) -> bytes:
    doc["hash_profile"] = "jcs-v3"
    return _dump(doc)


def extension_row_dropped(doc: Receipt) -> bytes:
    """The extension-set row (the last) dropped with its stated heads and counts fixed:
    the journal still chains, the binding loses its extension digest."""
    events = doc["journal"]["events"]
    events.pop()
    doc["journal"]["head_hash"] = events[-1]["event_hash"]
    doc["journal"]["event_count"] = len(events)
    return _dump(doc)


RICH_CASES: dict[str, tuple[Callable[[Receipt], bytes], ...]] = {
    "jcs": (untouched, profile_downgraded, profile_dropped, profile_unknown, edited_row),
    "audit_range": (
        untouched,
        edited_window,
        edited_audit_event,
        audit_count,
        audit_events_not_a_list,
        dropped_audit_range,
    ),
    "extensions": (untouched, extension_row_dropped),
    "everything": (untouched, edited_window, profile_downgraded, extension_row_dropped),
}
"""Per receipt of ``OUT/receipts`` (``data/sealed_workdirs.py``), the tampers applied."""
RICH = {f"{source}-{t.__name__}": (source, t) for source, ts in RICH_CASES.items() for t in ts}


@pytest.fixture(scope="module")
def rich_receipts(sealed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:  # noqa: F811
    root = tmp_path_factory.mktemp("rich-receipts")
    made = {}
    original = next((sealed / ".sdd" / "runs").glob("*/run-receipt.json"))
    for name, (source, tamper) in RICH.items():
        workdir = root / name
        shutil.copytree(sealed, workdir)
        doc = json.loads((sealed / "receipts" / f"{source}.json").read_bytes())
        (workdir / original.relative_to(sealed)).write_bytes(tamper(doc))
        made[name] = workdir
    return made


@pytest.fixture(scope="module")
def bernstein_says_rich(rich_receipts: dict[str, Path]) -> dict[tuple[str, str], dict[str, Any]]:
    specs = []
    for name, workdir in rich_receipts.items():
        receipt = next((workdir / ".sdd" / "runs").glob("*/run-receipt.json"))
        specs.append((name, "none", str(receipt)))
        specs.append((name, "receipt.pem", f"{receipt},{workdir / 'receipt.pem'}"))
    stdout = run_script(GENERATOR, "receipt-status", *(spec for _, _, spec in specs))
    answers = [json.loads(line) for line in stdout.splitlines()]
    assert len(answers) == len(specs)
    return {(name, pin): answer for (name, pin, _), answer in zip(specs, answers, strict=True)}


def test_the_rich_cases_are_what_they_claim(
    bernstein_says_rich: dict[tuple[str, str], Any],
) -> None:
    for name in RICH:
        ok = bernstein_says_rich[(name, "none")]["status"] == "ok"
        assert ok is name.endswith("-untouched"), (name, bernstein_says_rich[(name, "none")])
    assert bernstein_says_rich[("jcs-profile_unknown", "none")]["status"] == "malformed"
    assert bernstein_says_rich[("audit_range-edited_window", "none")]["status"] == "tampered"


@pytest.mark.parametrize("name", sorted(RICH))
@pytest.mark.parametrize("pin", ["none", "receipt.pem"])
def test_rich_receipts_exit_as_bernsteins(
    name: str,
    pin: str,
    rich_receipts: dict[str, Path],
    bernstein_says_rich: dict[tuple[str, str], Any],
    cli: Any,
    tmp_path: Path,
) -> None:
    workdir = rich_receipts[name]
    run_id = next((workdir / ".sdd" / "runs").glob("*/run-receipt.json")).parent.name
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    args = ["bernstein", "receipt-verify", run_id, "--json", "--require-provenance"]
    if pin != "none":
        args += ["--public-key", str(workdir / pin)]
    result = cli(*args, ledger=ledger)
    theirs = bernstein_says_rich[(name, pin)]
    expected = BERNSTEIN_CODES[theirs["status"]]
    if expected == 0 and theirs["tier"] != "provenance":
        expected = 3
    assert result.code == expected, (result.out, result.err, theirs)
    assert result.json()["tier"] == theirs["tier"]


# ---- --key-chain ----------------------------------------------------------------------------


def _tampered_chain(workdir: Path) -> Path:
    """The rotation's instant edited after signing: its signature no longer holds."""
    doc = json.loads((workdir / "key-chains" / "rotated_out.json").read_bytes())
    doc["entries"][0]["issued_at"] = "2026-02-01T00:00:00+00:00"
    target = workdir / "key-chains" / "tampered.json"
    target.write_bytes(json.dumps(doc).encode())
    return target


CHAIN_CASES = {
    # name: (chain, pinned root, --signed-at)
    "root": ("root", "receipt.pem", None),
    "rotated_in": ("rotated_in", "stranger.pem", None),
    "rotated_out": ("rotated_out", "receipt.pem", None),
    "revoked_no_time": ("revoked", "receipt.pem", None),
    "revoked_signed_before": ("revoked", "receipt.pem", "2026-01-01T00:00:00+00:00"),
    "revoked_signed_after": ("revoked", "receipt.pem", "2026-07-01T00:00:00+00:00"),
    "revoked_naive_time": ("revoked", "receipt.pem", "2026-01-01T00:00:00"),
    "unrelated": ("unrelated", "stranger.pem", None),
    "wrong_root": ("root", "stranger.pem", None),
    "no_root": ("root", None, None),
    "tampered": ("tampered", "receipt.pem", None),
}
CHAIN_CODES = {"ok": 0, "malformed": 1, "raises": 1, "tampered": 2, "untrusted_key": 4}


@pytest.fixture(scope="module")
def chain_workdir(receipts: dict[str, Path]) -> Path:
    workdir = receipts["untouched"]
    _tampered_chain(workdir)
    return workdir


@pytest.fixture(scope="module")
def bernstein_says_chains(chain_workdir: Path) -> dict[str, str]:
    receipt = next((chain_workdir / ".sdd" / "runs").glob("*/run-receipt.json"))
    specs = []
    for chain, pin, signed_at in CHAIN_CASES.values():
        spec = {
            "receipt": str(receipt),
            "chain": str(chain_workdir / "key-chains" / f"{chain}.json"),
        }
        if pin is not None:
            spec["pin"] = str(chain_workdir / pin)
        if signed_at is not None:
            spec["signed_at"] = signed_at
        specs.append(json.dumps(spec))
    stdout = run_script(GENERATOR, "receipt-chain-status", *specs)
    statuses = [json.loads(line)["status"] for line in stdout.splitlines()]
    return dict(zip(CHAIN_CASES, statuses, strict=True))


def test_the_chain_cases_are_what_they_claim(bernstein_says_chains: dict[str, str]) -> None:
    assert bernstein_says_chains == {
        "root": "ok",
        "rotated_in": "ok",
        "rotated_out": "ok",
        "revoked_no_time": "untrusted_key",
        "revoked_signed_before": "ok",
        "revoked_signed_after": "untrusted_key",
        "revoked_naive_time": "untrusted_key",
        "unrelated": "untrusted_key",
        "wrong_root": "untrusted_key",
        "no_root": "malformed",
        "tampered": "untrusted_key",
    }


@pytest.mark.parametrize("name", sorted(CHAIN_CASES))
def test_key_chain_exit_codes_are_bernsteins(
    name: str,
    chain_workdir: Path,
    bernstein_says_chains: dict[str, str],
    cli: Any,
    tmp_path: Path,
) -> None:
    chain, pin, signed_at = CHAIN_CASES[name]
    run_id = next((chain_workdir / ".sdd" / "runs").glob("*/run-receipt.json")).parent.name
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(chain_workdir), ledger=ledger).code == 0
    args = ["bernstein", "receipt-verify", run_id, "--json"]
    args += ["--key-chain", str(chain_workdir / "key-chains" / f"{chain}.json")]
    if pin is not None:
        args += ["--public-key", str(chain_workdir / pin)]
    if signed_at is not None:
        args += ["--signed-at", signed_at]
    result = cli(*args, ledger=ledger)
    expected = CHAIN_CODES[bernstein_says_chains[name]]
    assert result.code == expected, (result.out, result.err)
    assert result.json()["tier"] == ("provenance" if expected == 0 else None)
