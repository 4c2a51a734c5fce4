"""Checkpoints: one per writing transaction, a C2SP-style signed note, exact parsing."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger, _core
from agentledger import log as wslog
from agentledger.checkpoint import install_public_key, latest
from agentledger.errors import InvalidInput
from agentledger.notes import Checkpoint, newest_checkpoint
from agentledger.proofs import parse_proof, verify_proof

from ..memory import traced_peak
from .logkit import build, raw


def _count(path: Path) -> int:
    with raw(path) as conn:
        rows = conn.execute("SELECT count(*) FROM checkpoints").fetchall()
        return int(str(rows[0][0]))


def _sizes(path: Path) -> list[int]:
    with raw(path) as conn:
        return [row[0] for row in conn.execute("SELECT size FROM checkpoints ORDER BY id")]


def test_each_writing_transaction_signs_one_checkpoint_and_the_history_stays_sparse(
    ledger: Ledger, ledger_path: Path
) -> None:
    run = ledger.run("r")
    run.append_many([("step", {"i": i}) for i in range(5)])
    # The newest, and the powers of two the log passed (signed from the tiles).
    assert _sizes(ledger_path) == [5, 1, 2, 4]
    run.append("step", {})  # 5 gives way to 6
    assert sorted(_sizes(ledger_path)) == [1, 2, 4, 6]
    with ledger.db.write() as conn:  # two appends joined in one transaction: one checkpoint
        run._append_locked(conn, [("step", {"a": 1})])
        ledger.run("s")._append_locked(conn, [("step", {"b": 2})])
    assert sorted(_sizes(ledger_path)) == [1, 2, 4, 8]
    assert latest(ledger).checkpoint.size == 8
    for i in range(300):
        run.append("step", {"i": i})
    assert sorted(_sizes(ledger_path)) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 308]


def test_a_failed_transaction_leaves_no_checkpoint(ledger: Ledger, ledger_path: Path) -> None:
    run = ledger.run("r")
    run.append("step", {})
    with pytest.raises(RuntimeError), ledger.db.write() as conn:
        run._append_locked(conn, [("step", {})])
        raise RuntimeError("abort")
    assert _count(ledger_path) == 1
    assert wslog.read_state(ledger.db.conn).size == 1


def test_the_checkpoint_commits_to_the_log_root_and_is_signed(ledger: Ledger) -> None:
    build(ledger, runs=2, entries=3)
    stored = latest(ledger)
    note = stored.checkpoint
    leaves = [
        _core.log_leaf(run_id, seq, digest)
        for run_id, seq, digest in ledger.db.conn.execute(
            "SELECT run_id, seq, hash FROM entries ORDER BY leaf"
        )
    ]
    assert note.size == 6
    assert note.root == _core.merkle_root(leaves)
    assert note.signed_by([install_public_key(ledger)]) == install_public_key(ledger)
    lines = note.text().split("\n")
    assert lines[0] == f"agentledger/v1/ledger/{ledger.id}"
    assert lines[1] == "6"
    assert base64.b64decode(lines[2]) == note.root
    assert lines[3] == ""  # a tlog-checkpoint: no extension line
    assert lines[4].startswith(f"\u2014 agentledger/v1/ledger/{ledger.id} ")  # key name = origin


def test_a_checkpoint_note_round_trips_and_edits_break_its_signature(ledger: Ledger) -> None:
    build(ledger, runs=1, entries=2)
    note = latest(ledger).checkpoint
    parsed = Checkpoint.parse(note.text())
    assert parsed == note
    edited = Checkpoint.parse(note.text().replace("\n2\n", "\n1\n", 1))
    assert edited.size == 1
    assert edited.signed_by([install_public_key(ledger)]) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "agentledger/v1/ledger/x\n1\n",
        "other/origin\n1\nAAAA\ntime 2026-01-01T00:00:00Z\n\n\u2014 k AAAA\n",
        "agentledger/v1/ledger/x\n01\n"
        + base64.b64encode(bytes(32)).decode()
        + "\ntime 2026-01-01T00:00:00Z\n\n\u2014 k "
        + base64.b64encode(bytes(68)).decode()
        + "\n",
        "agentledger/v1/ledger/x\n1\n"
        + base64.b64encode(bytes(32)).decode()
        + "\ntime 2026-01-01T00:00:00Z\n\n",
    ],
)
def test_a_malformed_checkpoint_is_refused_with_a_typed_error(text: str) -> None:
    with pytest.raises(InvalidInput) as error:
        Checkpoint.parse(text)
    assert error.value.code == "malformed-checkpoint"


def test_appends_stay_o_log_n_the_state_is_the_frontier(ledger: Ledger) -> None:
    run = ledger.run("r")
    for _ in range(5):
        run.append_many([("step", {})] * 13)
    state = wslog.read_state(ledger.db.conn)
    assert state.size == 65
    assert len(state.frontier) == bin(65).count("1")


def test_the_checkpoint_command_exports_the_newest_note(
    ledger: Ledger, tmp_path: Path, cli: object
) -> None:
    build(ledger, runs=1, entries=1)
    out = tmp_path / "cp.txt"
    result = cli("checkpoint", "--export", str(out), "--json")  # type: ignore[operator]
    assert result.code == 0
    assert out.read_text() == result.json()["note"]
    assert Checkpoint.parse(out.read_text()).size == 1


def test_a_hostile_signer_name_in_a_stored_note_reaches_the_terminal_escaped(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    build(ledger, runs=1, entries=2)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute(
            "UPDATE checkpoints SET note = replace(note, '\u2014 agentledger/', "
            "'\u2014 agentledger' || char(155) || '[2J/') WHERE size = 2"
        )
    # Renamed, our signature no longer verifies: a fresh note is signed and shown.
    result = cli("checkpoint")
    assert "\x9b" not in result.out
    # A hostile line beside ours (which still verifies): the newest note, as stored.
    # (signed-note forbids ASCII controls, not C1 ones: a terminal may still act on them.)
    hostile = "\u2014 w" + "\x9b[2J" + " " + base64.b64encode(bytes(68)).decode() + "\n"
    with raw(ledger_path) as conn:
        conn.execute("UPDATE checkpoints SET note = note || ? WHERE size = 2", (hostile,))
    result = cli("checkpoint")  # the log did not grow: it shows the newest note as stored
    assert "\x9b" not in result.out
    assert "\\x9b[2J" in result.out


def test_a_hostile_signature_line_beside_ours_reaches_prove_output_escaped(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """A signature line added to a stored note (ours still verifies beside it) is the
    file's text: ``prove`` shows it escaped, as ``checkpoint`` does, and the proof holds."""
    build(ledger, runs=1, entries=2)
    key = install_public_key(ledger)
    ledger.close()
    hostile = "\u2014 w" + "\x9b2J\u202e" + " " + base64.b64encode(bytes(68)).decode() + "\n"
    with raw(ledger_path) as conn:
        conn.execute("UPDATE checkpoints SET note = note || ? WHERE size = 2", (hostile,))
    result = cli("prove", "run-0", "1")
    assert result.code == 0
    assert "\x9b" not in result.out and "\u202e" not in result.out
    assert "\\x9b2J\\u202e" in result.out
    assert verify_proof(parse_proof(result.out.encode()), [key]).ok


def test_the_checkpoint_command_shows_only_a_note_it_signed_over_the_proven_log(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """``checkpoint`` reuses the newest note only when it is this install's signature over
    the log it proved: a note edited under unchanged size and root columns is not shown
    as the ledger's signed checkpoint (it would not verify); a fresh one is signed."""
    build(ledger, runs=1, entries=3)
    key = install_public_key(ledger)
    ledger.close()
    forged_root = base64.b64encode(bytes(32)).decode()
    with raw(ledger_path) as conn:
        (note,) = conn.execute("SELECT note FROM checkpoints WHERE size = 3").fetchall()[0]
        lines = note.split("\n")
        lines[2] = forged_root
        conn.execute("UPDATE checkpoints SET note = ? WHERE size = 3", ("\n".join(lines),))
    result = cli("checkpoint", "--json")
    assert result.code == 0
    shown = Checkpoint.parse(result.json()["note"])
    assert base64.b64encode(shown.root).decode() != forged_root
    assert shown.signed_by([key]) == key
    assert cli("verify").code == 0


@pytest.mark.parametrize(
    "line",
    [
        "\u2014 w\x1b[2J " + base64.b64encode(bytes(68)).decode() + "\n",  # a control character
        "\u2014 w\u00a0x " + base64.b64encode(bytes(68)).decode() + "\n",  # a space in the name
    ],
)
def test_a_stored_note_signed_note_calls_malformed_is_a_finding(
    ledger: Ledger, ledger_path: Path, tmp_path: Path, cli: Any, line: str
) -> None:
    """signed-note: no ASCII control character but newlines, no space in a key name. A
    line like that beside our valid signature makes the note one every C2SP client (Go's
    note.Open) refuses whole: verify says so, and the export does not publish it."""
    build(ledger, runs=1, entries=2)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("UPDATE checkpoints SET note = note || ? WHERE size = 2", (line,))
    with pytest.raises(InvalidInput, match="not a checkpoint") as error:
        Checkpoint.parse(_newest_note(ledger_path))
    assert error.value.code == "malformed-checkpoint"
    with Ledger.open(ledger_path) as reopened:
        found = {d.check for d in reopened.verify().workspace}
    assert "checkpoint.malformed" in found
    assert cli("log", "export", str(tmp_path / "site")).code != 0
    assert not (tmp_path / "site" / "checkpoint").exists()


def _newest_note(path: Path) -> str:
    with raw(path) as conn:
        return str(conn.execute("SELECT note FROM checkpoints WHERE size = 2").fetchall()[0][0])


@pytest.mark.parametrize("note", ["not a note", "NOT-UTF-8"])
def test_a_stored_note_that_does_not_parse_is_tampering_for_every_command(
    ledger: Ledger, ledger_path: Path, cli: Any, tmp_path: Path, note: str
) -> None:
    """Only the install writes notes into the file: ``checkpoint``, ``prove`` and ``log
    export`` answered 65 (invalid input, as for a file the user gave) for a stored note
    edited so that it no longer parses, where verify says tampering (2). A note that is
    not UTF-8 (one flipped bit) made them exit 70 (UnicodeDecodeError)."""
    build(ledger, runs=1, entries=3)
    with raw(ledger_path) as conn:
        newest = "(SELECT id FROM checkpoints ORDER BY size DESC, id DESC LIMIT 1)"
        if note == "NOT-UTF-8":
            conn.execute(
                "UPDATE checkpoints SET note = CAST(CAST(note AS BLOB) || X'A5' AS TEXT) "
                f"WHERE id = {newest}"
            )
        else:
            conn.execute(f"UPDATE checkpoints SET note = ? WHERE id = {newest}", (note,))
    for args in (
        ["checkpoint", "--json"],
        ["prove", "run-0", "1"],
        ["log", "export", str(tmp_path / "site")],
        ["verify", "--all"],
    ):
        result = cli(*args)
        assert result.code == 2, (args, result.err)
        assert "Traceback" not in result.err
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE checkpoints SET size = 1000 WHERE size = 2",
        "UPDATE checkpoints SET size = -5 WHERE size = 12",
    ],
    ids=["older-raised", "newest-lowered"],
)
def test_a_checkpoint_whose_size_column_was_edited_does_not_change_which_is_newest(
    ledger: Ledger, ledger_path: Path, cli: Any, edit: str
) -> None:
    """The size column of the checkpoint of 2 entries raised above the log's (or the
    newest's lowered below the others): the wrong one was taken for the newest, and
    verify --all called the file rolled back and every run incomplete (or every entry
    past checkpoint 8 unsigned), where `verify RUN` called the runs clean. The column is
    only a copy of the note: the newest is the note of the largest size."""
    names = build(ledger, runs=3, entries=4)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute(edit)
    whole = cli("verify", "--all", "--json")
    assert whole.code == 2
    found = {d["check"] for d in whole.json()["workspace"]}
    assert "checkpoint.columns" in found and not found & {"log.rollback", "log.size"}, found
    assert {r["run"]: r["status"] for r in whole.json()["results"]} == dict.fromkeys(names, "clean")
    for name in names:
        assert cli("verify", name, "--json").json()["results"][0]["status"] == "clean"


@pytest.mark.parametrize("signature", [["checkpoint"], ["append", "run-0", "step", "{}"]])
def test_the_next_signature_restores_a_deleted_history_checkpoint(
    ledger: Ledger, ledger_path: Path, cli: Any, signature: list[str]
) -> None:
    """checkpoint.history_missing says the next signature restores the row, and signing
    lets it pass for that reason (RESTORED_BY_SIGNING); but `checkpoint` returned the
    newest that still stood, and an append completed the history only past a power of
    two: the row stayed missing."""
    build(ledger, runs=3, entries=4)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM checkpoints WHERE size = 4")
    found = cli("verify", "--json").json()["workspace"]
    assert [d["check"] for d in found] == ["checkpoint.history_missing"]
    assert cli(*signature).code == 0
    assert cli("verify").code == 0


def test_the_newest_checkpoint_is_found_without_holding_every_row(
    ledger: Ledger, ledger_path: Path
) -> None:
    """Every row is compared with its note (an edited size column must not choose the
    newest), one row at a time: 1,500 planted rows of 64 KiB notes had been read into one
    list (about 100 MB) by every command that looks for the newest checkpoint."""
    build(ledger, runs=2, entries=3)
    ledger.close()
    with raw(ledger_path) as conn:
        conn.executemany(
            "INSERT INTO checkpoints (size, root, note) VALUES (1, ?, ?)",
            [(bytes(32), "x" * 65_536)] * 1_500,
        )
    with Ledger.open(ledger_path) as reopened, reopened.db.snapshot() as conn:
        newest, peak = traced_peak(lambda: newest_checkpoint(conn))
    assert newest is not None and newest.checkpoint.size == 6
    assert peak < 8 << 20, peak
