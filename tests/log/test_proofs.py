"""Offline proofs (C2SP tlog-proof files, JSON bundles): checked with nothing but the proof
and the public key."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from agentledger import Ledger, _core
from agentledger.checkpoint import install_public_key, latest
from agentledger.errors import InvalidInput
from agentledger.notes import Checkpoint, sign
from agentledger.proofs import Proof, parse_proof, prove, verify_proof

from .logkit import break_newest_signature, build


@pytest.fixture
def proof_and_key(ledger: Ledger) -> tuple[Proof, str]:
    build(ledger, runs=3, entries=5)
    return prove(ledger, "run-1", 3), install_public_key(ledger)


def test_a_proof_verifies_with_only_the_public_key(proof_and_key: tuple[Proof, str]) -> None:
    proof, key = proof_and_key
    for text in (proof.text().encode(), json.dumps(proof.bundle()).encode()):
        verdict = verify_proof(parse_proof(text), [key])
        assert verdict.ok, verdict.problems
        assert verdict.signer == key
        assert (verdict.run, verdict.seq) == ("run-1", 3)
        assert (verdict.tree_size, verdict.leaf_index) == (15, 3 * 3 + 1)


def test_a_proof_is_a_c2sp_tlog_proof_carrying_the_entry(
    proof_and_key: tuple[Proof, str], ledger: Ledger
) -> None:
    proof, _ = proof_and_key
    lines = proof.text().split("\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1"
    raw = ledger.db.conn.execute(
        "SELECT bytes FROM entries WHERE run_id = 'run-1' AND seq = 3"
    ).fetchall()[0][0]
    assert lines[1] == "extra " + base64.b64encode(raw).decode()
    assert lines[2] == "index 10"
    nodes = lines[3 : lines.index("")]
    assert len(nodes) == 4  # a tree of 15: four levels
    assert all(len(base64.b64decode(node)) == 32 for node in nodes)
    assert "\n".join(lines[lines.index("") + 1 :]) == latest(ledger).checkpoint.text()


def _tampered(proof: Proof, **change: Any) -> Proof:
    return dataclasses.replace(proof, **change)


def test_a_proof_with_edited_entry_bytes_fails(proof_and_key: tuple[Proof, str]) -> None:
    proof, key = proof_and_key
    edited = _tampered(proof, entry=proof.entry.replace(b'"n":3', b'"n":4'))
    assert not verify_proof(parse_proof(edited.text().encode()), [key]).ok
    spaced = _tampered(proof, entry=proof.entry.replace(b'"n":3', b'"n": 3'))
    assert "not canonical" in " ".join(verify_proof(spaced, [key]).problems)


def test_a_proof_for_another_position_fails(proof_and_key: tuple[Proof, str]) -> None:
    proof, key = proof_and_key
    assert not verify_proof(_tampered(proof, leaf_index=proof.leaf_index + 1), [key]).ok
    flipped = bytes([proof.inclusion[0][0] ^ 1]) + proof.inclusion[0][1:]
    assert not verify_proof(_tampered(proof, inclusion=(flipped, *proof.inclusion[1:])), [key]).ok


def test_a_changed_checkpoint_under_a_trusted_key_says_so_not_trust_this_key(
    proof_and_key: tuple[Proof, str], cli: Any, tmp_path: Path
) -> None:
    """A proof whose checkpoint text was edited failed with "not signed by a trusted key"
    and advice to pass --trust with the very key already trusted. Its signature names the
    trusted key: the text was changed after it was signed, and the report says that."""
    proof, key = proof_and_key
    lines = proof.checkpoint.split("\n")
    lines[1] = str(int(lines[1]) + 1)  # the tree size line
    edited = _tampered(proof, checkpoint="\n".join(lines))
    verdict = verify_proof(edited, [key])
    assert verdict.problems[0] == (
        f"the checkpoint's signature by {key}, a key you trust, does not verify: "
        "the checkpoint's text was changed after it was signed"
    )
    path = tmp_path / "edited.tlog-proof"
    path.write_text(edited.text())
    shown = cli("verify-proof", str(path), "--trust", key)
    assert shown.code == 2
    assert "text was changed" in shown.out and "--trust" not in shown.out
    reviewer = str(tmp_path / "reviewer")  # a key folder that trusts nobody yet
    untrusted = cli(
        "verify-proof", str(path), "--home", reviewer, "--trust", "ed25519:" + "11" * 32
    )
    assert "not a key you trust" in untrusted.out


def test_a_proof_against_an_untrusted_key_fails(proof_and_key: tuple[Proof, str]) -> None:
    proof, _ = proof_and_key
    verdict = verify_proof(proof, ["ed25519:" + "11" * 32])
    assert not verdict.ok
    assert verdict.signer is None


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda t: t.replace("c2sp.org/tlog-proof@v1", "c2sp.org/tlog-proof@v2"), "first line"),
        (lambda t: t.replace("index 10", "index 010"), "decimal"),
        (lambda t: t.replace("index 10", "index 9223372036854775808"), "decimal"),
        (lambda t: t.replace("extra ", "extra !"), "base64"),
        (
            lambda t: "\n".join(line for line in t.split("\n") if not line.startswith("extra")),
            "extra",
        ),
        (lambda t: t.replace("\n\n", "\n", 1), "not base64"),  # the note read as hashes
        (lambda t: t.replace("index 10\n", "index 10\n" + "AAAA\n"), "32 bytes"),
        (lambda t: t.replace("index 10\n", "index 10\n" + ("A" * 43 + "=\n") * 65), "64"),
    ],
)
def test_a_malformed_tlog_proof_is_a_typed_refusal(
    proof_and_key: tuple[Proof, str], edit: Any, why: str
) -> None:
    proof, _ = proof_and_key
    with pytest.raises(InvalidInput, match=why):
        parse_proof(edit(proof.text()).encode())


def test_verify_proof_cli_needs_no_ledger(
    ledger: Ledger, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger, runs=1, entries=3)
    result = cli("prove", "run-0", "2")
    assert result.code == 0
    proof = tmp_path / "entry.tlog-proof"
    proof.write_text(result.out)
    key = install_public_key(ledger)
    ledger.close()
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "elsewhere"))  # no keys at all
    missing_ledger = tmp_path / "none.db"
    assert cli("verify-proof", str(proof), "--trust", key, ledger=missing_ledger).code == 0
    assert cli("verify-proof", str(proof), ledger=missing_ledger).code == 2
    assert not missing_ledger.exists()
    proof.write_text("{not json")
    assert cli("verify-proof", str(proof), "--trust", key).code == 65
    assert cli("verify-proof", str(tmp_path / "absent.json"), "--trust", key).code == 64


def test_prove_a_missing_entry_is_not_found(ledger: Ledger, cli: Any) -> None:
    build(ledger, runs=1, entries=1)
    assert cli("prove", "run-0", "7").code == 1
    assert cli("prove", "nope", "0").code == 1


def test_prove_refuses_an_edited_entry_instead_of_handing_out_a_proof_that_fails(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """``prove`` built the leaf from the stored hash column beside the bytes: with the
    bytes edited it printed a proof (exit 0) that every verifier then rejects. The leaf
    is now the bytes' hash: an edited entry, or a log that does not hold it, is refused as
    tampering (exit 2), and nothing is printed."""
    import apsw

    build(ledger, runs=2, entries=3)
    assert cli("prove", "run-1", "2").code == 0
    conn = apsw.Connection(str(ledger_path))
    conn.execute(
        "UPDATE entries SET bytes = CAST(replace(CAST(bytes AS TEXT), '\"n\"', '\"m\"') "
        "AS BLOB) WHERE run_id = 'run-1' AND seq = 2"
    )
    conn.close()
    edited = cli("prove", "run-1", "2")
    assert edited.code == 2, edited.err
    assert edited.out == "" and "bytes were changed" in edited.err
    conn = apsw.Connection(str(ledger_path))  # bytes and hash rewritten together
    raw = conn.execute("SELECT bytes FROM entries WHERE run_id = 'run-1' AND seq = 2").fetchall()
    conn.execute(
        "UPDATE entries SET hash = ? WHERE run_id = 'run-1' AND seq = 2",
        (_core.entry_hash(bytes(raw[0][0])),),
    )
    conn.close()
    rewritten = cli("prove", "run-1", "2")
    assert rewritten.code == 2 and rewritten.out == "", rewritten.err
    assert "do not prove" in rewritten.err
    assert cli("prove", "run-1", "1").code == 0


def test_a_short_inclusion_node_is_malformed_in_both_forms(
    proof_and_key: tuple[Proof, str], cli: Any, tmp_path: Path
) -> None:
    """A 31-byte node was exit 65 in a tlog-proof and exit 2 in a JSON bundle."""
    proof, key = proof_and_key
    short = _tampered(proof, inclusion=(proof.inclusion[0][:31], *proof.inclusion[1:]))
    bundle, text = tmp_path / "p.json", tmp_path / "p.tlog-proof"
    bundle.write_text(json.dumps(short.bundle()))
    text.write_text(short.text())
    for path in (bundle, text):
        result = cli("verify-proof", str(path), "--trust", key)
        assert result.code == 65 and "not 32 bytes" in result.err, (path.name, result.err)


def test_a_json_bundle_of_the_blake3_log_before_schema_6_still_verifies() -> None:
    """An `agentledger-proof/v1` bundle as earlier versions wrote it: its note has a time
    line, its leaves are D("log-leaf", document) in a BLAKE3 tree."""
    key = SigningKey(bytes(range(32)))
    ledger_id = "00112233445566778899aabbccddeeff"
    encoded = _core.encode_entries(
        "r", 0, _core.genesis_prev(ledger_id, "r"), "2026-01-01T00:00:00.000000Z",
        [("step", {"i": i}) for i in range(5)],
    )  # fmt: skip
    leaves = [_core.legacy_log_leaf("r", seq, digest) for seq, (_, digest) in enumerate(encoded)]
    root = _core.merkle_root(leaves, hash="blake3")
    note = sign(Checkpoint(ledger_id, 5, root, "2026-01-01T00:00:01.000000Z", legacy=True), key)
    bundle = {
        "format": "agentledger-proof/v1",
        "ledger": ledger_id,
        "run": "r",
        "seq": 3,
        "entry": base64.b64encode(encoded[3][0]).decode(),
        "leaf_index": 3,
        "tree_size": 5,
        "inclusion": [
            base64.b64encode(n).decode() for n in _core.inclusion_proof(leaves, 3, hash="blake3")
        ],
        "checkpoint": note.text(),
    }
    trusted = ["ed25519:" + bytes(key.verify_key).hex()]
    verdict = verify_proof(parse_proof(json.dumps(bundle).encode()), trusted)
    assert verdict.ok, verdict.problems
    assert (verdict.run, verdict.seq, verdict.tree_size) == ("r", 3, 5)
    bundle["leaf_index"] = 2
    assert not verify_proof(parse_proof(json.dumps(bundle).encode()), trusted).ok
    bundle.update(leaf_index=3, seq=4)
    problems = verify_proof(parse_proof(json.dumps(bundle).encode()), trusted).problems
    assert problems == ("the entry bytes are not entry 4 of run 'r'",)


def test_a_checkpoint_a_witness_cosigned_still_verifies(
    proof_and_key: tuple[Proof, str], ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    """A tlog-proof may carry the checkpoint with witness cosignatures (C2SP
    tlog-cosignature: key id, 8-byte timestamp, signature); signed-note verifiers ignore
    signatures of keys they do not know, whatever their length."""
    proof, key = proof_and_key
    cosignature = base64.b64encode(bytes(4 + 8 + 64)).decode()
    line = f"\u2014 witness.example/w1 {cosignature}\n"
    cosigned = dataclasses.replace(proof, checkpoint=proof.checkpoint + line)
    verdict = verify_proof(parse_proof(cosigned.text().encode()), [key])
    assert verdict.ok, verdict.problems
    note = tmp_path / "cp.txt"
    note.write_text(latest(ledger).checkpoint.text() + line)
    assert cli("verify", "--checkpoint", str(note)).code == 0


def test_verify_proof_names_the_log_the_entry_is_in(
    ledger: Ledger, tmp_path: Path, cli: Any
) -> None:
    """One install key signs every ledger it writes: a verdict that does not say which
    ledger's log holds the entry reads the same for a proof of another ledger's run of
    that name. The tlog-proof form states no ledger; the verdict names the note's origin."""
    build(ledger, runs=1, entries=2)
    with Ledger.open(tmp_path / "other.db") as other:
        other.run("run-0").append("step", {"elsewhere": True})
        other_id = other.id
        proof = prove(other, "run-0", 0)
    path = tmp_path / "entry.tlog-proof"
    path.write_text(proof.text())
    shown = cli("verify-proof", str(path), "--json")
    assert shown.code == 0
    assert shown.json()["ledger"] == other_id
    assert shown.json()["origin"] == f"agentledger/v1/ledger/{other_id}"
    human = cli("verify-proof", str(path))
    assert human.code == 0 and other_id in human.out


def test_prove_hands_out_no_proof_against_a_checkpoint_it_does_not_trust(
    ledger: Ledger, ledger_path: Path, cli: Any, tmp_path: Path
) -> None:
    """``prove`` took the file's newest note as it found it: with a stranger's note (or
    ours with its signature broken) it printed a proof, exit 0, that ``verify-proof``
    then rejects. It is now refused (exit 2) unless a trusted key signed that note:
    this install's, or one ``--trust`` names (a reviewer proving from an archive)."""
    import apsw

    build(ledger, runs=1, entries=3)
    ours = install_public_key(ledger)
    stranger = tmp_path / "stranger"
    stranger.mkdir(mode=0o700)
    (stranger / "trusted.keys").write_text(f"{ours}\n")
    (stranger / "trusted.keys").chmod(0o600)
    ledger.close()
    with Ledger.open(ledger_path, key_dir=stranger) as theirs:  # their install appends
        theirs.run("theirs").append("step", {"n": 1})
        their_key = install_public_key(theirs)
    refused = cli("prove", "run-0", "1")
    assert refused.code == 2 and refused.out == "", refused.err
    assert "not this ledger's, signed by a key this install trusts" in refused.err
    trusted = cli("prove", "run-0", "1", "--trust", their_key, "--json")
    assert trusted.code == 0, trusted.err
    (tmp_path / "p.json").write_text(trusted.out)
    assert cli("verify-proof", str(tmp_path / "p.json"), "--trust", their_key).code == 0
    conn = apsw.Connection(str(ledger_path))  # back to our note, its signature broken
    conn.execute("DELETE FROM checkpoints WHERE size = 4")
    conn.close()
    break_newest_signature(ledger_path)
    assert cli("prove", "run-0", "1").code == 2
