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


# ---- statements kept from call to call -----------------------------------------------------


def kept() -> apsw.Connection:
    conn = memory()
    native.keep_statements(conn)
    conn.execute("CREATE TABLE t(a, b)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(n, f"v{n}") for n in range(50)])
    return conn


def test_a_kept_statement_gives_what_a_fresh_one_gives_at_every_use() -> None:
    conn = kept()
    sql = "SELECT a, b FROM t WHERE a >= ? ORDER BY a"
    for low in [0, 10, 49, 50, 3, 0]:
        assert native.rows(conn, sql, (low,)) == conn.execute(sql, (low,)).fetchall()
    # A use that fails midway leaves nothing behind for the next one.
    conn.execute("INSERT INTO t VALUES (100, CAST(x'ff' AS TEXT))")
    with pytest.raises(UnicodeDecodeError):
        native.rows(conn, sql, (0,))
    conn.execute("DELETE FROM t WHERE a = 100")
    assert native.rows(conn, sql, (45,)) == conn.execute(sql, (45,)).fetchall()
    native.forget_statements(conn)
    conn.close()


def test_the_same_sql_run_again_inside_a_use_gets_a_statement_of_its_own() -> None:
    conn = kept()
    sql = "SELECT a, inner(a) FROM t WHERE a < 3 ORDER BY a"
    depth: list[int] = []

    def inner(a: int) -> int:
        if depth:
            return -1
        depth.append(a)
        try:
            return len(native.rows(conn, sql))
        finally:
            depth.pop()

    conn.create_scalar_function("inner", inner)
    assert native.rows(conn, sql) == [(0, 3), (1, 3), (2, 3)]
    assert native.rows(conn, sql) == [(0, 3), (1, 3), (2, 3)]
    native.forget_statements(conn)
    conn.close()


def test_a_connection_with_kept_statements_closes_once_they_are_forgotten(
    ledger_path: Path,
) -> None:
    Ledger.open(ledger_path).close()
    conn = apsw.Connection(str(ledger_path))
    native.keep_statements(conn)
    assert native.rows(conn, "SELECT count(*) FROM entries") == [(0,)]
    with pytest.raises(apsw.BusyError):
        conn.close()  # SQLite will not close it under an unfinalized statement
    native.forget_statements(conn)
    conn.close()
    assert not Path(f"{ledger_path}-wal").exists()  # closed whole: the -wal folded away


def test_a_ledger_closes_whole_after_its_statements_were_kept(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {})
        assert native.rows(ledger.db.conn, "SELECT count(*) FROM entries") == [(1,)]
    assert not Path(f"{ledger_path}-wal").exists()
    with Ledger.open(ledger_path) as again:
        assert again.db.rows("SELECT count(*) FROM entries") == [(1,)]
