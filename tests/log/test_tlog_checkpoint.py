"""Checkpoints are C2SP tlog-checkpoints: no extension line, the key named by the origin, and
a signed-note verifier key (``keys export --vkey``) that ``--trust`` accepts."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import VerifyKey

from agentledger import Ledger
from agentledger.checkpoint import install_public_key, latest
from agentledger.errors import InvalidInput
from agentledger.keys import public_key_from_vkey
from agentledger.notes import Checkpoint, sign

from .logkit import build, raw


def _verify_like_a_note_client(note_text: str, vkey: str) -> bool:
    """signed-note verification from the verifier key alone, as Go's sumdb/note does it."""
    name, key_id_hex, encoded = vkey.split("+", 2)
    raw = base64.b64decode(encoded)
    body, _, signatures = note_text.partition("\n\n")
    for line in signatures.splitlines():
        marker, signer, blob = line.split(" ")
        sig = base64.b64decode(blob)
        if marker != "\u2014" or signer != name or sig[:4].hex() != key_id_hex:
            continue
        VerifyKey(raw[1:]).verify((body + "\n").encode(), sig[4:])
        return True
    return False


def test_keys_export_vkey_verifies_the_checkpoint_and_names_the_origin(
    ledger: Ledger, cli: Any
) -> None:
    build(ledger, runs=2, entries=2)
    note = latest(ledger).checkpoint
    public = bytes.fromhex(install_public_key(ledger).split(":")[1])
    exported = cli("keys", "export", "--vkey")
    assert exported.code == 0
    vkey = exported.out.strip()
    origin = f"agentledger/v1/ledger/{ledger.id}"
    key_id = hashlib.sha256(origin.encode() + b"\n\x01" + public).digest()[:4]
    encoded = base64.b64encode(b"\x01" + public).decode()
    assert vkey == f"{origin}+{key_id.hex()}+{encoded}"
    # --json (global or the command's): one JSON object, as every reporting command prints
    for args in (("keys", "export", "--vkey", "--json"), ("--json", "keys", "export", "--vkey")):
        assert json.loads(cli(*args).out) == {"key": install_public_key(ledger), "vkey": vkey}
    assert json.loads(cli("keys", "export", "--json").out) == {"key": install_public_key(ledger)}
    assert note.text().split("\n")[:4] == [
        origin,
        "4",
        base64.b64encode(note.root).decode(),
        "",
    ]
    assert _verify_like_a_note_client(note.text(), vkey)
    assert public_key_from_vkey(vkey) == install_public_key(ledger)


def test_a_reviewer_trusts_the_checkpoint_by_its_vkey(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    build(ledger, runs=1, entries=3)
    vkey = cli("keys", "export", "--vkey").out.strip()
    elsewhere = ["--home", str(tmp_path / "reviewer")]
    assert cli(*elsewhere, "verify").code == 2  # the reviewer trusts no one yet
    assert cli(*elsewhere, "verify", "--trust", vkey).code == 0
    name, key_id, encoded = vkey.split("+", 2)
    forged_id = f"{name}+{(int(key_id, 16) ^ 1):08x}+{encoded}"
    refused = cli(*elsewhere, "verify", "--trust", forged_id)
    assert refused.code == 64
    assert "key id" in refused.err
    assert cli(*elsewhere, "keys", "trust", vkey).code == 0
    assert cli(*elsewhere, "verify").code == 0


@pytest.mark.parametrize(
    "text",
    [
        "name+0011aabb+" + base64.b64encode(b"\x02" + bytes(32)).decode(),  # not Ed25519
        "name+0011aabb+" + base64.b64encode(b"\x01" + bytes(31)).decode() + "A",
        "two words+0011aabb+" + base64.b64encode(b"\x01" + bytes(32)).decode(),
    ],
)
def test_malformed_verifier_keys_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput, match="verifier key"):
        public_key_from_vkey(text)


def test_a_note_signed_before_schema_6_still_parses_and_verifies(ledger: Ledger) -> None:
    build(ledger, runs=1, entries=1)
    key = ledger.keys.signing_key()
    old = sign(Checkpoint(ledger.id, 1, bytes(32), "2026-01-01T00:00:00.000000Z", legacy=True), key)
    lines = old.text().split("\n")
    assert lines[3] == "time 2026-01-01T00:00:00.000000Z"
    assert lines[5].startswith("\u2014 agentledger-install ")
    parsed = Checkpoint.parse(old.text())
    assert parsed.legacy and parsed.time == "2026-01-01T00:00:00.000000Z"
    assert parsed.signed_by([install_public_key(ledger)]) == install_public_key(ledger)
    with pytest.raises(InvalidInput, match="expected 3"):
        Checkpoint.parse(old.text().replace("time ", "time 1\nx ", 1))


def test_an_archives_vkey_names_its_own_origin(ledger: Ledger, tmp_path: Path, cli: Any) -> None:
    build(ledger, runs=2, entries=2)
    archive = tmp_path / "audit.db"
    assert cli("archive", str(archive), "run-0").code == 0
    vkey = cli("keys", "export", "--vkey", ledger=archive).out.strip()
    assert vkey.startswith(f"agentledger/v1/ledger/{ledger.id}/archive/")
    with Ledger.open(archive) as sealed:
        note = latest(sealed).checkpoint
    assert vkey.split("+")[0] == note.origin
    assert _verify_like_a_note_client(note.text(), vkey)


def test_the_vkey_names_the_ledgers_origin_not_one_a_stored_note_claims(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """The file is untrusted: a note row added to it (signed or not) chooses no origin
    for the verifier key, and a hostile ledger id reaches the terminal escaped."""
    build(ledger, runs=1, entries=2)
    own = cli("keys", "export", "--vkey").out.strip()
    forged = Checkpoint("f" * 32, 99, bytes(32), signatures=latest(ledger).checkpoint.signatures)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute(
            "INSERT INTO checkpoints (size, root, note) VALUES (99, ?, ?)",
            (bytes(32), forged.text()),
        )
    assert cli("keys", "export", "--vkey").out.strip() == own
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM checkpoints")
        conn.execute(
            "UPDATE ledger_meta SET value = 'x' || char(27) || ']0;t' || char(7) "
            "WHERE key = 'ledger_id'"
        )
    shown = cli("keys", "export", "--vkey")
    assert shown.code == 0
    assert "\x1b" not in shown.out and "\x07" not in shown.out
