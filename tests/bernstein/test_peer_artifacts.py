"""Stored artifacts of shapes bernstein's writers never make, re-anchored by hand (the
journal chain has no key): `--compat bernstein` must give what bernstein 3.23.0's own
``verify_run_activities`` gives, run here through its wheel (``benches/bernstein_peer.py``).

- A report or receipt that is JSON in UTF-16 or UTF-32 (Python's ``json.loads`` reads
  bytes in any of them): bernstein verifies it; we had called it not valid JSON.
- One that is not a JSON object, or a receipt input that is not one: bernstein's
  ``from_dict`` raises (``AttributeError``), so it gives no verdict; we had read it as
  ``{}`` (a browser flow that passed, a research report without claims).
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from agentledger.bernstein.format import acanon, content_hash
from agentledger.bernstein.writer import public_key_pem, rechain

from .bernstein_testkit import (
    SHAPES,
    cas,
    copy_workdir,
    edit_row,
    import_and_verify,
    lines,
    write_lines,
)
from .test_sealed import BENCHES, _fetch_wheel

STAGES = {
    "research": ("r0001-research-report", 4),
    "browser": ("r0002-browser-report", 1),
    "receipt": ("r0003-dataops", 1),
}
"""A row of the shapes fixture whose artifact is a stored research report, browser flow
report and data/ops receipt."""


def reanchor(workdir: Path, run: str, step: int, change: Callable[[Any], bytes]) -> None:
    """The stage's stored artifact replaced by ``change(its JSON)``, stored under its own
    name, the row re-anchored on it and the journal rechained."""
    row = json.loads(lines(workdir, run)[step])
    data = change(json.loads(cas(workdir, row["artifact_hash"]).read_bytes()))
    cas(workdir, content_hash(data)).write_bytes(data)
    edit_row(workdir, run, step, artifact_hash=content_hash(data))
    write_lines(workdir, run, rechain(lines(workdir, run)))


def first_input_not_an_object(receipt: Any) -> bytes:
    receipt["inputs"][0] = 1
    return acanon(receipt)


CASES: dict[str, tuple[str, Callable[[Any], bytes]]] = {
    "research in UTF-16": ("research", lambda doc: json.dumps(doc).encode("utf-16")),
    "browser in UTF-32-LE": ("browser", lambda doc: json.dumps(doc).encode("utf-32-le")),
    "receipt in UTF-16-BE": ("receipt", lambda doc: json.dumps(doc).encode("utf-16-be")),
    "research a list": ("research", lambda doc: b"[1]"),
    "browser null": ("browser", lambda doc: b"null"),
    "receipt a string": ("receipt", lambda doc: b'"x"'),
    "receipt input a number": ("receipt", first_input_not_an_object),
}


def _check_without_kind(report: Any) -> bytes:
    del report["checks"][0]["kind"]  # chk-0, a dom_contains check that passes
    return acanon(report)


def _quote_lone_surrogate(report: Any) -> bytes:
    report["claims"][0]["citations"][0]["quote"] = "\ud800"
    return json.dumps(report).encode()  # escaped: UTF-8 cannot hold it


def _operand_lone_surrogate(report: Any) -> bytes:
    report["checks"][0]["operand"] = "caf\udce9"  # chk-0, a dom_contains check
    return json.dumps(report).encode()


def _page_named_with_a_nul(report: Any) -> bytes:
    report["claims"][0]["citations"][0]["page_content_hash"] = "sha256:ab\x00cd"
    return acanon(report)


def _screenshot_named_with_a_surrogate(report: Any) -> bytes:
    report["steps"][0]["screenshot_content_hash"] = "sha256:\ud800"
    return json.dumps(report).encode()


def _output_named_with_a_nul(receipt: Any) -> bytes:
    """The first output's content hash given a NUL, re-signed with the fixture's key."""
    signer = next(
        SigningKey(hashlib.sha256(seed).digest())
        for seed in (b"k1", b"k2", b"k3")
        if public_key_pem(bytes(SigningKey(hashlib.sha256(seed).digest()).verify_key))
        == receipt["signer_public_key_pem"]
    )
    output = receipt["outputs"][0]
    output["content_hash"] = "sha256:ab\x00cd"
    signed = acanon({k: output[k] for k in ("role", "ref", "content_hash")})
    output["signature"] = base64.urlsafe_b64encode(signer.sign(signed).signature).decode()
    return acanon(receipt)


REFERENCE_CASES: dict[str, tuple[str, Callable[[Any], bytes]]] = {
    "research page named with a NUL": ("research", _page_named_with_a_nul),
    "browser screenshot named with a lone surrogate": (
        "browser",
        _screenshot_named_with_a_surrogate,
    ),
    "receipt output named with a NUL": ("receipt", _output_named_with_a_nul),
    "browser check without a kind": ("browser", _check_without_kind),
    "research quote with a lone surrogate": ("research", _quote_lone_surrogate),
    "browser operand with a lone surrogate": ("browser", _operand_lone_surrogate),
}
"""Artifacts on which the Python reference (``reference_reports.py``, whose verdicts the
Rust checks are held to in ``cargo test``) once disagreed with bernstein."""


def _peer_codes(workdir: Path, *options: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, str(BENCHES / "bernstein_peer.py"), "verify", str(workdir), *options],
        capture_output=True,
        text=True,
        check=False,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("PEER "))
    codes: dict[str, int] = json.loads(line[5:])["codes"]
    return codes


@pytest.fixture(scope="module")
def peer() -> Callable[[Path], dict[str, int]]:
    _fetch_wheel()
    return _peer_codes


@pytest.mark.parametrize("case", sorted(CASES))
def test_compat_gives_bernsteins_verdict_on_a_hand_made_artifact(
    tmp_path: Path, peer: Callable[[Path], dict[str, int]], case: str
) -> None:
    stage, change = CASES[case]
    run, step = STAGES[stage]
    workdir = copy_workdir(SHAPES, tmp_path / "wd")
    reanchor(workdir, run, step, change)
    theirs = peer(workdir)
    ours = import_and_verify(workdir, tmp_path / "ledger.db")
    assert ours.compat == theirs, (case, ours.compat, theirs)
    if theirs[run] == 1:  # bernstein raised (no verdict): strict names the stage
        assert "bernstein.stage" in ours.findings[run], ours.findings[run]


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_the_reference_and_compat_give_bernsteins_verdict_on_a_hand_made_artifact(
    tmp_path: Path, peer: Callable[[Path], dict[str, int]], case: str
) -> None:
    stage, change = REFERENCE_CASES[case]
    run, step = STAGES[stage]
    workdir = copy_workdir(SHAPES, tmp_path / "wd")
    reanchor(workdir, run, step, change)
    theirs = peer(workdir)
    assert _peer_codes(workdir, "--reference") == theirs, case
    assert import_and_verify(workdir, tmp_path / "ledger.db").compat == theirs, case


def test_the_reference_and_compat_give_bernsteins_verdict_on_an_observation_named_with_a_nul(
    tmp_path: Path, peer: Callable[[Path], dict[str, int]]
) -> None:
    """``ContentStore.get`` raises ``ValueError`` on the path (it turns only ``OSError``
    into a missing blob): bernstein gives no verdict."""
    run, step = STAGES["research"]
    workdir = copy_workdir(SHAPES, tmp_path / "wd")
    row = json.loads(lines(workdir, run)[step])
    observations = row["observations"]
    observations[-1]["content_hash"] = "sha256:ab\x00cd"
    unique = sorted({o["content_hash"] for o in observations})
    evidence = content_hash(json.dumps(unique, separators=(",", ":")).encode())
    edit_row(workdir, run, step, observations=observations, evidence_set_hash=evidence)
    write_lines(workdir, run, rechain(lines(workdir, run)))
    theirs = peer(workdir)
    assert theirs[run] == 1
    assert _peer_codes(workdir, "--reference") == theirs
    assert import_and_verify(workdir, tmp_path / "ledger.db").compat == theirs


def test_the_reference_and_compat_read_a_folder_in_the_store_as_missing_bytes(
    tmp_path: Path, peer: Callable[[Path], dict[str, int]]
) -> None:
    """A cited page's file replaced by a folder: bernstein's read fails with an ``OSError``
    (missing bytes, exit 2); the workdir reader the reference reads through raised out of
    ``fdopen`` instead."""
    run, step = STAGES["research"]
    workdir = copy_workdir(SHAPES, tmp_path / "wd")
    page = cas(workdir, json.loads(lines(workdir, run)[step])["observations"][0]["content_hash"])
    page.unlink()
    page.mkdir()
    theirs = peer(workdir)
    assert theirs[run] == 2
    assert _peer_codes(workdir, "--reference") == theirs
    assert import_and_verify(workdir, tmp_path / "ledger.db").compat == theirs


@pytest.mark.parametrize("named", [False, True], ids=["no-blob", "blob-so-named"])
@pytest.mark.parametrize("stage", sorted(STAGES))
def test_the_reference_and_compat_give_bernsteins_verdict_on_an_artifact_hash_ending_in_a_newline(
    tmp_path: Path, peer: Callable[[Path], dict[str, int]], stage: str, named: bool
) -> None:
    """bernstein checks the name with ``re.match(r"^[0-9a-f]{64}$")``, whose ``$`` also
    matches before a final newline: ``sha256:<hex>\\n`` is well formed to it, no blob has
    that name, and the stage passes as one whose artifact was never stored (exit 0). We
    had called it malformed (exit 2). A blob stored under that very name is read and does
    not hash to it (exit 2)."""
    run, step = STAGES[stage]
    workdir = copy_workdir(SHAPES, tmp_path / "wd")
    artifact = json.loads(lines(workdir, run)[step])["artifact_hash"]
    if named:
        stored = cas(workdir, artifact)
        stored.with_name(stored.name + "\n").write_bytes(stored.read_bytes())
    edit_row(workdir, run, step, artifact_hash=artifact + "\n")
    write_lines(workdir, run, rechain(lines(workdir, run)))
    theirs = peer(workdir)
    assert theirs[run] == (2 if named else 0)
    assert _peer_codes(workdir, "--reference") == theirs
    ours = import_and_verify(workdir, tmp_path / "ledger.db")
    assert ours.compat == theirs
    assert ours.strict[run] == 2, ours.findings[run]  # the audit record names the real one


@pytest.mark.parametrize(
    ("run", "depth", "raises"),
    [
        ("r0012-jcs-v2-mixed", 328, False),
        ("r0012-jcs-v2-mixed", 329, True),
        ("r0003-dataops", 988, False),
        ("r0003-dataops", 989, True),
    ],
)
def test_compat_gives_bernsteins_verdict_on_a_row_nested_past_its_encoders_recursion(
    tmp_path: Path, peer: Callable[[Path], dict[str, int]], run: str, depth: int, raises: bool
) -> None:
    """``canonicalize_jcs`` recurses three Python frames a level: from 329 levels a
    ``jcs-v2`` row makes ``verify_journal`` raise ``RecursionError`` (no verdict, exit 1),
    far short of the 990 ``json.loads`` reads. ``py-json-v1``'s ``json.dumps`` runs a few
    frames deeper than the reader: a member nested 989 levels is read and raises there.
    We hashed both and said the chain diverges (exit 2)."""
    workdir = copy_workdir(SHAPES, tmp_path / "wd")
    nested = "[" * depth + "1" + "]" * depth
    row = '{"event": "x", "prev_hash": "", "event_hash": "", "deep": ' + nested + "}\n"
    write_lines(workdir, run, [*lines(workdir, run), row])
    theirs = peer(workdir)
    assert theirs[run] == (1 if raises else 2)
    ours = import_and_verify(workdir, tmp_path / "ledger.db")
    assert ours.compat == theirs
    assert ("bernstein.crash" in ours.findings[run]) == raises, ours.findings[run]
