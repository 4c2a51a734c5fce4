"""The run journal API: appends, batches, reading back, run ids."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger import Ledger
from agentledger.errors import InvalidInput, LedgerError, NotFound
from agentledger.ids import rfc3339


def test_append_returns_entries_with_consecutive_seqs_and_chained_hashes(ledger: Ledger) -> None:
    run = ledger.run("run-001")
    first = run.append("task_claimed", {"task": "t-1"})
    second = run.append("step", {"n": 1})
    assert (first.seq, second.seq) == (0, 1)
    assert second.prev == first.hash
    assert first.hash.startswith("blake3:") and len(first.hash) == 7 + 64
    assert first.kind == "task_claimed" and first.body == {"task": "t-1"}


def test_append_many_is_one_transaction_all_or_nothing(ledger: Ledger) -> None:
    run = ledger.run("r")
    run.append("a", {})
    with pytest.raises(InvalidInput):
        run.append_many([("ok", {"x": 1}), ("bad", {"x": float("nan")})])
    assert [e.seq for e in run.entries()] == [0]
    entries = run.append_many([("s", {"i": i}) for i in range(5)])
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert [e.body for e in run.entries(start=4)] == [{"i": 3}, {"i": 4}]


def test_entries_are_canonical_json_bound_to_run_and_position(ledger: Ledger) -> None:
    entry = ledger.run("r").append("step", {"b": 2, "a": [1, "é"]})
    doc = json.loads(entry.raw)
    assert doc == {
        "body": {"a": [1, "é"], "b": 2},
        "kind": "step",
        "prev": doc["prev"],
        "run": "r",
        "seq": 0,
        "ts": entry.ts,
        "v": 1,
    }
    assert (
        entry.raw
        == json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )


def test_runs_are_listed_in_creation_order(ledger: Ledger) -> None:
    for name in ["zeta", "alpha", "mid"]:
        ledger.run(name).append("step", {})
    ledger.run("alpha").append("step", {})
    assert ledger.runs() == ["zeta", "alpha", "mid"]


def test_naming_a_run_to_read_it_creates_nothing(ledger: Ledger) -> None:
    run = ledger.run("only-read")
    assert list(run.entries()) == []
    assert run.head() == (-1, None)
    assert len(run) == 0
    assert not ledger.has_run("only-read")
    assert ledger.runs() == []
    assert ledger.run("only-read").append("step", {"n": 0}).seq == 0  # the first append creates it
    assert ledger.runs() == ["only-read"]
    assert ledger.get_run("only-read").head()[0] == 0


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", "x" * 65, "nul\x00", ".", "..", "spa ce"])
def test_invalid_run_ids_are_refused(ledger: Ledger, bad: str) -> None:
    with pytest.raises(InvalidInput) as info:
        ledger.run(bad)
    assert info.value.code == "invalid-run-id"
    assert ledger.runs() == []


@pytest.mark.parametrize(
    "body", [{"x": float("inf")}, {"x": "\ud800"}, {"x": 2**60}, {1: "int key"}, {"x": {1, 2}}]
)
def test_bodies_without_canonical_form_are_refused_and_nothing_is_written(
    ledger: Ledger, body: dict[object, object]
) -> None:
    run = ledger.run("r")
    with pytest.raises(InvalidInput):
        run.append("step", body)  # type: ignore[arg-type]
    assert len(run) == 0


def test_get_run_of_a_missing_run_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFound):
        ledger.get_run("nope")


def test_a_reopened_ledger_continues_the_chain(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("a", {})
    with Ledger.open(ledger_path) as ledger:
        entry = ledger.run("r").append("b", {})
        assert entry.seq == 1
        assert ledger.verify().code == 0


def test_the_ledger_file_is_created_private(ledger_path: Path) -> None:
    Ledger.open(ledger_path).close()
    assert ledger_path.stat().st_mode & 0o777 == 0o600


def test_a_file_that_is_not_a_ledger_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"just some text, not SQLite at all" * 100)
    before = path.read_bytes()
    with pytest.raises(LedgerError) as info:
        Ledger.open(path)
    assert info.value.code == "not-a-ledger"
    assert path.read_bytes() == before


def test_another_applications_sqlite_file_is_refused_unchanged(tmp_path: Path) -> None:
    import apsw

    path = tmp_path / "other.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(LedgerError) as info:
        Ledger.open(path)
    assert info.value.code == "not-a-ledger"
    assert path.read_bytes() == before


def test_a_ledger_from_a_newer_version_is_refused_unchanged(ledger_path: Path) -> None:
    import apsw

    Ledger.open(ledger_path).close()
    conn = apsw.Connection(str(ledger_path))
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    before = ledger_path.read_bytes()
    with pytest.raises(LedgerError) as info:
        Ledger.open(ledger_path)
    assert info.value.code == "ledger-too-new"
    assert ledger_path.read_bytes() == before


def test_open_without_create_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        Ledger.open(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()


@given(moment=st.datetimes(min_value=datetime(1000, 1, 1), timezones=st.just(UTC)))
def test_the_clock_s_text_is_what_strftime_gives(moment: datetime) -> None:
    # isoformat replaced strftime (a tenth of an append's CPU); the text must not change.
    assert rfc3339(moment) == moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert RFC3339.fullmatch(rfc3339(moment))


RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
