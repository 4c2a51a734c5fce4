"""``native.rows`` steps a query in Rust with the GIL held; what it returns, raises and
binds is what apsw's ``execute(...).fetchall()`` does, value for value."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Ledger
from agentledger.storage import native

VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
)


def memory() -> apsw.Connection:
    return native.handle(apsw.Connection(":memory:"))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(VALUES, min_size=3, max_size=3), max_size=40))
def test_rows_equal_apsws_for_every_kind_of_value(rows: list[list[object]]) -> None:
    conn = memory()
    conn.execute("CREATE TABLE t(a, b, c)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    sql = "SELECT a, b, c, typeof(a) FROM t ORDER BY rowid"
    assert native.rows(conn, sql) == conn.execute(sql).fetchall()


@given(params=st.lists(st.one_of(VALUES, st.booleans()), min_size=1, max_size=4))
def test_parameters_of_every_kind_are_bound_in_order(params: list[object]) -> None:
    conn = memory()
    sql = "SELECT " + ", ".join(f"?{n}, typeof(?{n})" for n in range(1, len(params) + 1))
    assert native.rows(conn, sql, tuple(params)) == conn.execute(sql, params).fetchall()


def test_a_parameter_that_cannot_be_bound_is_a_type_error() -> None:
    conn = memory()
    with pytest.raises(TypeError):
        conn.execute("SELECT ?", ([1],)).fetchall()
    with pytest.raises(TypeError, match="list cannot be bound"):
        native.rows(conn, "SELECT ?", ([1],))
    with pytest.raises(OverflowError):
        native.rows(conn, "SELECT ?", (2**63,))


def test_many_rows_come_back_in_order() -> None:
    # Past the rows between two looks at Ctrl-C (4,096).
    conn = memory()
    sql = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000) "
        "SELECT i, hex(i) FROM n"
    )
    rows = native.rows(conn, sql)
    assert rows == conn.execute(sql).fetchall()
    assert len(rows) == 10_000


def test_an_empty_result_and_an_empty_blob() -> None:
    conn = memory()
    assert native.rows(conn, "SELECT 1 WHERE 0") == []
    assert native.rows(conn, "SELECT x'', ''") == [(b"", "")]


def test_text_that_is_not_utf8_raises_as_apsw_does() -> None:
    conn = memory()
    sql = "SELECT CAST(x'ff41' AS TEXT)"
    with pytest.raises(UnicodeDecodeError):
        conn.execute(sql).fetchall()
    with pytest.raises(UnicodeDecodeError):
        native.rows(conn, sql)


def test_sqlite_failures_are_apsws_exceptions() -> None:
    conn = memory()
    with pytest.raises(apsw.SQLError, match="no such table"):
        native.rows(conn, "SELECT * FROM nowhere")
    with pytest.raises(apsw.SQLError):
        native.rows(conn, "SELEC 1")


def test_it_reads_inside_the_callers_transaction(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.blobs.put(b"committed")
        conn = ledger.db.conn
        with conn:
            conn.execute("CREATE TEMP TABLE seen(x)")
            conn.execute("INSERT INTO temp.seen VALUES ('uncommitted')")
            assert native.rows(conn, "SELECT x FROM temp.seen") == [("uncommitted",)]
        assert native.rows(conn, "SELECT count(*) FROM blobs") == [(1,)]
