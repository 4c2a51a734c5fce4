"""Cells holding a value of another type than their column's (an edit made with the
table's STRICT types loosened and its SQL text put back, ``logkit.retype_rows``): every
command answers with a verdict or a typed error, never a crash (exit 70), and the file is
left as it was. Found by random logical edits of ledgers of every shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from tests.log.logkit import retype_rows


@pytest.fixture
def steps(ledger: Ledger, ledger_path: Path) -> Path:
    ledger.run("r").append_many([("step", {"i": i}) for i in range(3)])
    ledger.close()
    return ledger_path


@pytest.mark.parametrize(
    "args",
    [
        ["verify"],
        ["verify", "--json"],
        ["verify", "r"],
        ["show", "r", "--json"],
        ["activity", "verify", "r"],
        ["fsck"],
        ["prove", "r", "1"],
    ],
    ids=" ".join,
)
def test_entry_bytes_stored_as_text_are_reported_not_crashed_on(
    steps: Path, cli: Any, args: list[str]
) -> None:
    """An entry's bytes stored as text: the report's detail of the edited entry, and
    `prove`, took them for bytes and exited 70."""
    retype_rows(steps, ("entries",), ("UPDATE entries SET bytes = 'null' WHERE seq = 1", ()))
    before = steps.read_bytes()
    result = cli(*args)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err and "[internal]" not in result.err
    assert steps.read_bytes() == before


@pytest.mark.parametrize("column", ["bytes", "hash"])
@pytest.mark.parametrize("scope", [["--all"], ["r"]], ids=["whole", "run"])
def test_the_same_bytes_stored_as_text_are_a_btree_finding(
    steps: Path, cli: Any, column: str, scope: list[str]
) -> None:
    """The very bytes, stored as text (SQLite's `integrity_check`: non-BLOB value):
    hashed as stored they verify, so only the types tell; verify had said clean."""
    retype_rows(
        steps,
        ("entries",),
        (f"UPDATE entries SET {column} = CAST({column} AS TEXT) WHERE seq = 1", ()),
    )
    result = cli("verify", *scope, "--json")
    assert result.code == 2, result.err
    checks = {d["check"] for d in result.json()["workspace"]}
    checks |= {d["check"] for run in result.json()["failures"] for d in run["divergences"]}
    assert "schema.btree" in checks, checks


@pytest.mark.parametrize(
    ("column", "value"),
    [("seq", b""), ("seq", 1.5), ("seq", "one"), ("kind", b"step"), ("kind", 7), ("kind", None)],
)
def test_show_of_an_entry_whose_step_or_kind_is_of_another_type_is_a_typed_refusal(
    steps: Path, cli: Any, column: str, value: object
) -> None:
    """`show` formatted the stored step and kind as they were: a blob step exited 70 (not
    JSON serializable, not formattable) where verify names the row."""
    retype_rows(steps, ("entries",), (f"UPDATE entries SET {column} = ? WHERE seq = 1", (value,)))
    before = steps.read_bytes()
    assert cli("verify", "r").code == 2
    for args in (["show", "r"], ["show", "r", "--json"]):
        result = cli(*args)
        assert result.code == 2, result.err
        assert "[entry-edited]" in result.err and "Traceback" not in result.err
    assert steps.read_bytes() == before


@pytest.mark.parametrize(
    ("column", "value"),
    [("size", b""), ("size", "text"), ("size", 1.5), ("frontier", 7), ("frontier", "text")],
)
def test_a_log_state_of_another_type_is_a_finding_and_a_typed_refusal(
    steps: Path, cli: Any, column: str, value: object
) -> None:
    """The log's stored size as a blob, text or a real: verify read it with int() before
    its b-tree check and exited 70, and so did `checkpoint` and `append`."""
    retype_rows(steps, ("log_state",), (f"UPDATE log_state SET {column} = ?", (value,)))
    before = steps.read_bytes()
    verified = cli("verify", "--json")
    assert verified.code == 2, verified.err
    assert [f["check"] for f in verified.json()["workspace"]] == ["schema.btree"]
    for args in (["checkpoint"], ["append", "r", "step", "{}"]):
        refused = cli(*args)
        assert refused.code == 65, refused.err
        assert "[log-broken]" in refused.err and "Traceback" not in refused.err
    assert steps.read_bytes() == before


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("size", b""),
        ("size", "text"),
        ("size", 2.5),
        ("root", "text"),
        ("root", None),
        ("note", None),
    ],
)
def test_a_checkpoint_row_of_another_type_is_tampering_for_every_command(
    steps: Path, tmp_path: Path, cli: Any, column: str, value: object
) -> None:
    """The newest checkpoint's size, root or note of another type: `checkpoint`, `append`,
    `prove` and `log export` exited 70 (comparing bytes with an int, bytes() of a real,
    len() of NULL) where verify names the cell. The row is not one this install wrote:
    what rests on the newest checkpoint is refused as tampering; an append signs its own."""
    retype_rows(
        steps,
        ("checkpoints",),
        (f"UPDATE checkpoints SET {column} = ? WHERE size = 3", (value,)),  # the newest
    )
    assert cli("verify").code == 2
    for args in (["checkpoint"], ["prove", "r", "1"], ["log", "export", str(tmp_path / "site")]):
        refused = cli(*args)
        assert refused.code == 2, (args, refused.err)
        assert "Traceback" not in refused.err and "[internal]" not in refused.err
    appended = cli("append", "r", "step", "{}")
    assert appended.code == 0, appended.err


@pytest.mark.parametrize("value", ["text", None, 1.5], ids=["text", "null", "real"])
@pytest.mark.parametrize("seq", [1, 2], ids=["inside", "head"])
def test_an_entry_hash_of_another_type_is_another_leaf_not_a_crash(
    steps: Path, cli: Any, seq: int, value: object
) -> None:
    """An entry's hash column as text, NULL or a real: the log's reads took it for bytes
    (the leaf of every check that rebuilds or proves the log, the head an append proves)
    and verify, show and append exited 70. It is read as stored, as the journal pass
    reads it: a leaf the signed log does not hold."""
    retype_rows(steps, ("entries",), (f"UPDATE entries SET hash = ? WHERE seq = {seq}", (value,)))
    before = steps.read_bytes()
    for args in (["verify"], ["verify", "r"], ["show", "r", "--json"]):
        result = cli(*args)
        assert result.code == 2, (args, result.err)
        assert "Traceback" not in result.err and "[internal]" not in result.err
    assert steps.read_bytes() == before
    appended = cli("append", "r", "step", "{}")
    if seq == 2:  # the head an append chains from: not the one the signed log holds
        assert appended.code == 2 and "[signing-refused]" in appended.err, appended.err
        assert steps.read_bytes() == before
    else:  # chained from the genuine head; the edited entry stays a finding
        assert appended.code == 0, appended.err
        assert cli("verify").code == 2


@pytest.mark.parametrize("value", [b"\x00\xff", None], ids=["blob", "null"])
def test_a_blob_name_of_another_type_is_no_orphan_of_gc_or_fsck(
    ledger: Ledger, ledger_path: Path, cli: Any, value: object
) -> None:
    """A stored blob's name as a blob or NULL: `gc --dry-run` and `fsck` sorted it with
    the text names (and fsck wrote it into its JSON) and exited 70. A name that is not
    text names no blob either could collect; verify names the row."""
    ledger.blobs.put(b"kept")
    ledger.blobs.put(b"renamed")
    ledger.close()
    retype_rows(
        ledger_path,
        ("blobs", "blob_chunks"),
        ("UPDATE blobs SET digest = ? WHERE size = 7", (value,)),
    )
    before = ledger_path.read_bytes()
    dry = cli("gc", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert dry.json()["unreachable"] == 1  # the blob still named by text
    checked = cli("fsck", "--json")
    assert checked.code == 2, checked.err
    assert len(checked.json()["orphan_blobs"]) == 1
    assert "Traceback" not in dry.err + checked.err
    assert ledger_path.read_bytes() == before


@pytest.mark.parametrize("value", [b"r", None], ids=["blob", "null"])
def test_a_run_row_whose_id_is_not_text_is_no_run(
    steps: Path, tmp_path: Path, cli: Any, value: object
) -> None:
    """A runs row whose id is a blob or NULL: `archive` listed it with the runs and exited
    70 (not JSON serializable) before its verify refused the file. It is no run: the
    archive's verify refuses (exit 2), nothing written."""
    with Ledger.open(steps) as ledger:
        ledger.run("other").append("step", {})
    retype_rows(steps, ("runs",), ("UPDATE runs SET run_id = ? WHERE run_id = 'other'", (value,)))
    before = steps.read_bytes()
    archived = cli("archive", str(tmp_path / "out.db"))
    assert archived.code == 2, archived.err
    assert "Traceback" not in archived.err and "[internal]" not in archived.err
    assert not (tmp_path / "out.db").exists()
    assert steps.read_bytes() == before


@pytest.mark.parametrize(
    "value", ["text", None, 1.5, -(2**63)], ids=["text", "null", "real", "int"]
)
def test_a_mirrored_activitys_hash_of_another_type_is_an_audit_finding(
    ledger: Ledger, ledger_path: Path, cli: Any, value: object
) -> None:
    """The hash column of an activity result the audit mirror holds, as text, NULL, a real
    or a negative integer: the mirror's cross-check took it for bytes and verify, show,
    activity verify, fsck and archive exited 70."""
    stage = ledger.run("r").research("s")
    stage.fetch("https://a.test", b"page")
    stage.finish({"summary": "one page"})
    ledger.close()
    retype_rows(ledger_path, ("entries",), ("UPDATE entries SET hash = ? WHERE seq = 0", (value,)))
    before = ledger_path.read_bytes()
    for args in (["verify"], ["verify", "r"], ["show", "r", "--json"], ["activity", "verify", "r"]):
        result = cli(*args)
        assert result.code == 2, (args, result.err)
        assert "Traceback" not in result.err and "[internal]" not in result.err
    assert ledger_path.read_bytes() == before


HUGE = 2**63 - 1
"""A number where bytes belong: bytes(HUGE) is a length to allocate, not the cell's bytes."""


def test_chunks_and_entry_bytes_that_are_numbers_are_read_as_stored(
    ledger: Ledger, ledger_path: Path
) -> None:
    """A blob's chunk, or an entry's bytes, edited to a number: the team, phase and
    bernstein readers took bytes() of it, a length to allocate (OverflowError here, gigabytes
    of zeros for a smaller number). They read the cell as stored, as the blob pass does."""
    import apsw

    from agentledger.activity.team import load_manifest_bytes, manifest_roles
    from agentledger.phase.journal import blob_problem, read_blob

    load_manifest_bytes(ledger, b'[[roles]]\nrole = "scout"\nagent_kind = "research"\n')
    (digest,) = ledger.blobs.digests()
    ledger.close()
    retype_rows(ledger_path, ("blob_chunks",), ("UPDATE blob_chunks SET data = ?", (HUGE,)))
    conn = apsw.Connection(str(ledger_path))
    try:
        assert manifest_roles(conn, digest) == "its bytes do not hash to it"
        assert read_blob(conn, digest) is None
        assert "hash" in blob_problem(conn, digest)
    finally:
        conn.close()


def test_an_imported_runs_journal_chunk_or_pin_that_is_a_number_is_not_a_crash(
    tmp_path: Path, cli: Any
) -> None:
    """The chunk of an imported run's journal, or the bytes of its import pin, edited to a
    number: `show RUN`, `runs` and verify took bytes() of it and exited 70."""
    from agentledger.bernstein import import_workdir
    from tests.bernstein.bernstein_testkit import SMALL

    for table, edit in (
        ("blob_chunks", "UPDATE blob_chunks SET data = ? WHERE digest = (SELECT digest "
         "FROM bernstein_files WHERE path = '.sdd/runs/run-001/journal.jsonl')"),
        ("entries", "UPDATE entries SET bytes = ? WHERE run_id = 'run-001' AND seq = 0"),
    ):  # fmt: skip
        path = tmp_path / table / "ledger.db"
        with Ledger.open(path) as ledger:
            import_workdir(ledger, SMALL)
        retype_rows(path, (table,), (edit, (HUGE,)))
        for args in (["verify", "--json"], ["show", "run-001", "--json"], ["runs"]):
            result = cli(*args, ledger=path)
            assert result.code in (0, 2), (table, args, result.err)
            assert "Traceback" not in result.err and "[internal]" not in result.err


def test_a_run_head_hash_that_is_a_number_is_a_tampered_journal_for_a_decision(
    ledger: Ledger, ledger_path: Path
) -> None:
    """The runs row's head hash edited to a number: the journal a decision reads took
    bytes() of it (OverflowError; a smaller number, a length to allocate). It is no
    entry's hash: the journal does not verify, and a decision on it is refused."""
    import apsw

    from agentledger import journal_view
    from agentledger.errors import Diverged

    ledger.run("r").append("step", {})
    ledger_id = ledger.id
    ledger.close()
    retype_rows(ledger_path, ("runs",), ("UPDATE runs SET head_hash = ?", (HUGE,)))
    conn = apsw.Connection(str(ledger_path))
    try:
        with pytest.raises(Diverged) as refused:
            journal_view.read_run(conn, ledger_id, "r").require()
        assert refused.value.code == journal_view.TAMPERED
    finally:
        conn.close()
