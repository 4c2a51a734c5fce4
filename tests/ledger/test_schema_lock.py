"""The schema lock catches an object changed under its own name, not only one added or
missing: an index redefined, or moved to another table, is drift that verify reports and
a writer refuses."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from agentledger import Ledger
from agentledger.errors import Diverged
from agentledger.storage.migrations import SCHEMA_VERSION
from agentledger.storage.schema_lock import schema_drift

REDEFINED = {
    "on another column": "CREATE INDEX entries_by_leaf ON entries (run_id)",
    "on another table": "CREATE INDEX entries_by_leaf ON audit_log (run_id, seq)",
}


@pytest.mark.parametrize("index", REDEFINED.values(), ids=list(REDEFINED))
def test_an_index_redefined_under_its_own_name_is_drift(ledger_path: Path, index: str) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {})
    conn = apsw.Connection(str(ledger_path))
    with conn:
        conn.execute("DROP INDEX entries_by_leaf")
        conn.execute(index)
    assert schema_drift(conn, SCHEMA_VERSION) == [
        "index 'entries_by_leaf' is not defined as agentledger defines it"
    ]
    conn.close()
    with Ledger.open(ledger_path) as ledger:
        report = ledger.verify()
        assert report.code == 2
        assert {d.check for d in report.workspace} == {"schema.altered"}
        with pytest.raises(Diverged, match="schema"):
            ledger.run("r").append("step", {})


def test_an_untouched_ledger_has_no_drift(ledger_path: Path) -> None:
    Ledger.open(ledger_path).close()
    conn = apsw.Connection(str(ledger_path))
    try:
        assert schema_drift(conn, SCHEMA_VERSION) == []
    finally:
        conn.close()


def test_schema_text_that_is_not_utf8_is_drift_not_a_crash(ledger_path: Path) -> None:
    # SQLite keeps the bytes of an object's SQL as written (one flipped bit in a comment
    # of a CREATE TABLE parses the same); reading them as text had raised UnicodeDecodeError
    # (exit 70) in every command.
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {})
    conn = apsw.Connection(str(ledger_path))
    (sql,) = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'team_roles'").fetchone()
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute(
        "UPDATE sqlite_schema SET sql = CAST(? AS TEXT) WHERE name = 'team_roles'",
        (sql.encode().replace(b"--", b"-- \xf4", 1),),
    )
    conn.execute("PRAGMA writable_schema = OFF")
    conn.close()
    assert_one_drift_that_blocks_writes(
        ledger_path, "table 'team_roles' is not defined as agentledger defines it"
    )


def assert_one_drift_that_blocks_writes(path: Path, said: str) -> None:
    """Verify finds the schema altered in exactly one way, ``said``, and a writer refuses."""
    with Ledger.open(path) as ledger:
        report = ledger.verify()
        assert report.code == 2
        assert [d.actual for d in report.workspace if d.check == "schema.altered"] == [said]
        with pytest.raises(Diverged, match="schema"):
            ledger.run("r").append("step", {})


def test_a_copy_in_utf16_is_one_finding_that_says_so(ledger_path: Path, tmp_path: Path) -> None:
    """The same objects and rows in a UTF-16 file: every object's text had differed as
    bytes, one unreadable finding per object."""
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {})
    source = apsw.Connection(str(ledger_path))
    copy_path = tmp_path / "utf16.db"
    copy = apsw.Connection(str(copy_path))
    copy.execute("PRAGMA encoding = 'UTF-16le'")
    for pragma in ("application_id", "user_version"):
        copy.execute(f"PRAGMA {pragma} = {source.execute(f'PRAGMA {pragma}').fetchone()[0]}")
    objects = source.execute(
        "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL"
    ).fetchall()
    with copy:
        for kind, _, sql in objects:
            if kind == "table":
                copy.execute(sql)
        for _, name, _ in (o for o in objects if o[0] == "table"):
            rows = source.execute(f'SELECT * FROM "{name}"').fetchall()
            if rows:
                marks = ", ".join("?" * len(rows[0]))
                copy.executemany(f'INSERT INTO "{name}" VALUES ({marks})', rows)
        for kind, _, sql in objects:
            if kind != "table":
                copy.execute(sql)
    source.close()
    assert copy.execute("PRAGMA encoding").fetchone() == ("UTF-16le",)
    assert schema_drift(copy, SCHEMA_VERSION) == [
        "text encoding UTF-16le (agentledger writes UTF-8)"
    ]
    copy.close()
    assert_one_drift_that_blocks_writes(
        copy_path, "text encoding UTF-16le (agentledger writes UTF-8)"
    )
