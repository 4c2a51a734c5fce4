"""Every stored value is accounted for: editing any one of them makes verify exit 2 and say what.

Each case edits the file the way an attacker with write access would (plain SQL, outside
the API) and checks the verdict and the named check.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger, _core
from agentledger.demo import activity_body
from agentledger.errors import Diverged
from agentledger.limits import MAX_ENTRY_BYTES
from agentledger.verify import VerifyReport

from ..activity.activity_testkit import research_result
from ..memory import traced_peak
from ..raw_entries import append_unvetted


def build(path: Path) -> None:
    import random

    rng = random.Random(1)
    with Ledger.open(path) as ledger:
        for name in ["alpha", "beta", "gamma"]:
            run = ledger.run(name)
            run.append_many([("step", {"n": i}) for i in range(4)])
            append_unvetted(ledger, name, [("activity.result", activity_body(ledger, rng, 4))])
            run.append("step", {"n": 5})
        ledger.blobs.put(b"x" * 10)


def sql(path: Path, statement: str, params: tuple[object, ...] = ()) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(statement, params)
    conn.close()


def replace_in_bytes(
    old: bytes, new: bytes, run: str = "beta", seq: int = 2
) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        conn = apsw.Connection(str(path))
        raw = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = ? AND seq = ?", (run, seq)
        ).fetchall()[0][0]
        assert old in raw
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = ?",
            (raw.replace(old, new, 1), run, seq),
        )
        conn.close()

    return edit


def rewrite_entry(change: Callable[[dict[str, object]], None], run: str = "beta", seq: int = 4):
    """Change an entry's JSON and recompute its hash (but not the rest of the chain)."""

    def edit(path: Path) -> None:
        conn = apsw.Connection(str(path))
        raw = conn.execute(
            "SELECT bytes FROM entries WHERE run_id = ? AND seq = ?", (run, seq)
        ).fetchall()[0][0]
        doc = json.loads(raw)
        change(doc)
        new = _core.canonicalize(doc)
        conn.execute(
            "UPDATE entries SET bytes = ?, hash = ? WHERE run_id = ? AND seq = ?",
            (new, _core.entry_hash(new), run, seq),
        )
        conn.close()

    return edit


def set_observation(doc: dict[str, object]) -> None:
    body = doc["body"]
    assert isinstance(body, dict)
    body["observations"][0]["content_hash"] = "blake3:" + "ab" * 32


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "entries.bytes (body edit)": (replace_in_bytes(b'"n":2', b'"n":9'), "entry.hash"),
    "entries.bytes (seq field)": (rewrite_entry(lambda d: d.update(seq=7), seq=2), "entry.seq"),
    "entries.bytes (kind field)": (
        rewrite_entry(lambda d: d.update(kind="x"), seq=2),
        "entry.kind",
    ),
    "entries.bytes (ts field)": (rewrite_entry(lambda d: d.update(ts="1999"), seq=3), "chain.prev"),
    "entries.bytes (evidence)": (rewrite_entry(set_observation), "activity.evidence_set_hash"),
    "entries.bytes (not canonical)": (replace_in_bytes(b'"n":2', b'"n":2.0'), "entry.canonical"),
    "entries.hash": (
        lambda p: sql(p, "UPDATE entries SET hash = zeroblob(32) WHERE run_id='beta' AND seq=1"),
        "entry.hash",
    ),
    "entries.kind": (
        lambda p: sql(p, "UPDATE entries SET kind = 'other' WHERE run_id='beta' AND seq=1"),
        "entry.kind",
    ),
    "entries.seq (reorder)": (
        lambda p: sql(
            p,
            # Swapped through a free seq: the (run_id, seq) key is checked row by row.
            "BEGIN; UPDATE entries SET seq = -1 WHERE run_id='beta' AND seq = 1; "
            "UPDATE entries SET seq = 1 WHERE run_id='beta' AND seq = 2; "
            "UPDATE entries SET seq = 2 WHERE run_id='beta' AND seq = -1; COMMIT",
        ),
        "entry.seq",
    ),
    "entries.run_id": (
        lambda p: sql(p, "UPDATE entries SET run_id = 'zeta' WHERE run_id='beta' AND seq=5"),
        "entry.run",
    ),
    "entries (delete middle)": (
        lambda p: sql(p, "DELETE FROM entries WHERE run_id='beta' AND seq=2"),
        "chain.gap",
    ),
    "entries (delete first)": (
        lambda p: sql(p, "DELETE FROM entries WHERE run_id='beta' AND seq=0"),
        "chain.gap",
    ),
    "entries (delete last)": (
        lambda p: sql(p, "DELETE FROM entries WHERE run_id='beta' AND seq=5"),
        "run.head_seq",
    ),
    "runs.head_seq": (
        lambda p: sql(p, "UPDATE runs SET head_seq = 3 WHERE run_id='beta'"),
        "run.head_seq",
    ),
    "runs.head_hash": (
        lambda p: sql(p, "UPDATE runs SET head_hash = zeroblob(32) WHERE run_id='beta'"),
        "run.head_hash",
    ),
    "runs.run_id": (
        lambda p: sql(
            p, "PRAGMA foreign_keys=OFF; UPDATE runs SET run_id = 'delta' WHERE run_id='beta'"
        ),
        "run.unknown",
    ),
    "runs.ordinal": (
        lambda p: sql(p, "UPDATE runs SET ordinal = 17 WHERE run_id='beta'"),
        "runs.ordinal",
    ),
    "ledger_meta.value": (
        lambda p: sql(p, "UPDATE ledger_meta SET value = 'forged' WHERE key='ledger_id'"),
        "chain.prev",
    ),
    "ledger_meta.key": (
        lambda p: sql(p, "UPDATE ledger_meta SET key = 'other' WHERE key='ledger_id'"),
        "chain.prev",
    ),
    "blobs.digest": (
        lambda p: sql(
            p,
            "PRAGMA foreign_keys=OFF; UPDATE blobs SET digest = 'blake3:' || hex(zeroblob(32)) "
            "WHERE size = 10",
        ),
        "blob.digest",
    ),
    "blobs.size": (lambda p: sql(p, "UPDATE blobs SET size = 11 WHERE size = 10"), "blob.size"),
    # A run listed with no entry at all (a run exists once it has one) verified clean.
    "runs.row": (
        lambda p: sql(p, "INSERT INTO runs (run_id, ordinal) VALUES ('phantom', 4)"),
        "run.empty",
    ),
    "blobs.chunk_size": (
        lambda p: sql(p, "UPDATE blobs SET chunk_size = 4 WHERE size = 10"),
        "blob.chunk_size",
    ),
    "blob_chunks.data": (
        lambda p: sql(p, "UPDATE blob_chunks SET data = CAST('y' AS BLOB) WHERE length(data)=10"),
        "blob.digest",
    ),
    "blob_chunks.idx": (
        lambda p: sql(p, "UPDATE blob_chunks SET idx = 3 WHERE length(data) = 10"),
        "blob.chunks",
    ),
    "blob_chunks.digest": (
        lambda p: sql(
            p,
            "PRAGMA foreign_keys=OFF; UPDATE blob_chunks "
            "SET digest = 'sha256:' || hex(zeroblob(32)) WHERE length(data) = 10",
        ),
        "blob.orphan_chunks",
    ),
}


def test_an_untouched_ledger_verifies_clean(ledger_path: Path) -> None:
    build(ledger_path)
    with Ledger.open(ledger_path) as ledger:
        report = ledger.verify()
    assert report.code == 0, report.to_json()
    assert report.entries == 18
    assert sum(run.activities for run in report.runs) == 3


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_edit_is_detected_and_named(ledger_path: Path, case: str) -> None:
    build(ledger_path)
    edit, check = CASES[case]
    edit(ledger_path)
    with Ledger.open(ledger_path) as ledger:
        report = ledger.verify()
    found = [d.check for d in report.workspace] + [
        d.check for run in report.runs for d in run.divergences
    ]
    assert report.code == 2, case
    assert check in found, (case, found)


def test_a_divergence_names_run_step_expected_and_actual(ledger_path: Path) -> None:
    build(ledger_path)
    replace_in_bytes(b'"n":2', b'"n":9')(ledger_path)
    with Ledger.open(ledger_path) as ledger:
        verdict = ledger.verify_run("beta")
        assert ledger.verify_run("alpha").code == 0
    assert verdict.code == 2
    first = verdict.divergences[0]
    assert (first.run_id, first.seq, first.check) == ("beta", 2, "entry.hash")
    assert first.expected != first.actual
    # The next step's link is broken too, and is reported as well (not only the first).
    assert any(d.seq == 3 and d.check == "chain.prev" for d in verdict.divergences)


@pytest.mark.parametrize(
    ("field", "value", "check", "expected", "actual"),
    [
        ("kind", "x", "entry.kind", "step", "x"),
        ("kind", 7, "entry.kind", "step", "7"),
        ("run", "zeta", "entry.run", "beta", "zeta"),
        ("run", None, "entry.run", "beta", "null"),
    ],
)
def test_a_name_in_the_bytes_is_said_as_its_column_says_it(
    ledger_path: Path, field: str, value: object, check: str, expected: str, actual: str
) -> None:
    """Expected (the column) and actual (the bytes) read alike: a string as itself, any
    other value as JSON. The bytes' string had been quoted, the column's not."""
    build(ledger_path)
    rewrite_entry(lambda doc: doc.update({field: value}), seq=2)(ledger_path)
    with Ledger.open(ledger_path) as ledger:
        verdict = ledger.verify_run("beta")
    named = [(d.seq, d.expected, d.actual) for d in verdict.divergences if d.check == check]
    assert named == [(2, expected, actual)]


@pytest.mark.parametrize("name", ["", "a", '"n"'], ids=["empty", "letter", "quoted"])
def test_a_stored_blob_renamed_to_a_short_name_is_the_workspaces_finding(
    ledger_path: Path, name: str
) -> None:
    """A blob no result pins, renamed to "" or "a": verify --all looked for the results
    pinning it as a bare substring of their bytes, found it in every one (an empty string
    is in any), and called every activity run diverged (blob.name on each result) where
    `verify RUN` called them clean."""
    build(ledger_path)
    sql(ledger_path, "UPDATE blobs SET digest = ? WHERE size = 10", (name,))
    sql(ledger_path, "UPDATE blob_chunks SET digest = ? WHERE length(data) = 10", (name,))
    with Ledger.open(ledger_path) as ledger:
        report = ledger.verify()
        named = {run: ledger.verify_run(run).code for run in ("alpha", "beta", "gamma")}
    assert report.code == 2
    assert [(d.check, d.subject) for d in report.workspace] == [("blob.name", name)]
    assert {run.run_id: run.code for run in report.runs} == named == dict.fromkeys(named, 0)


def test_verify_run_of_a_missing_run_is_code_1(ledger: Ledger) -> None:
    assert ledger.verify_run("nope").code == 1


def test_an_entry_longer_than_an_entry_can_be_is_named_and_never_parsed(
    ledger_path: Path,
) -> None:
    # Tiny JSON items parse to about 28 times their size: a 1 GB cell filled memory in the
    # journal pass and in every reader of the entry. Such a row is reported, not parsed.
    build(ledger_path)
    huge = b'{"body":[' + b"0," * (MAX_ENTRY_BYTES // 2) + b'0],"kind":"step"}'
    sql(ledger_path, "UPDATE entries SET bytes = ? WHERE run_id = 'beta' AND seq = 2", (huge,))
    with Ledger.open(ledger_path) as ledger:
        for verdict in (ledger.verify_run("beta"), ledger.verify().runs[1]):
            sized = [d for d in verdict.divergences if d.check == "entry.size"]
            assert [(d.run_id, d.seq, d.actual) for d in sized] == [
                ("beta", 2, f"{len(huge)} bytes")
            ]
            assert not {d.check for d in verdict.divergences} & {"entry.json", "entry.run"}
    with pytest.raises(ValueError, match="larger than an entry can be"):
        _core.Entry.from_row("beta", 2, "step", b"\0" * 32, huge)
    assert _core.MAX_ENTRY_BYTES == MAX_ENTRY_BYTES


def test_no_check_parses_a_row_longer_than_an_entry_can_be(ledger_path: Path) -> None:
    # Its hash column recomputed and its kind an activity's, the row reached every Python
    # check that reads activity bodies, and the writers' own reading of the run: each
    # parsed it whole (`[]` items: some twenty times their size in Python objects).
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append("step", {"n": 0})
    huge = b'{"body":[' + b"[]," * (MAX_ENTRY_BYTES // 3) + b'[]],"kind":"activity.result"}'
    sql(
        ledger_path,
        "UPDATE entries SET bytes = ?, hash = ?, kind = 'activity.result' WHERE run_id = 'r'",
        (huge, _core.entry_hash(huge)),
    )
    sql(ledger_path, "UPDATE runs SET head_hash = ? WHERE run_id = 'r'", (_core.entry_hash(huge),))

    def verify_then_write() -> VerifyReport:
        with Ledger.open(ledger_path) as ledger:
            report = ledger.verify()
            for write in (
                lambda run: run.append("step", {"n": 1}),
                lambda run: run.record_activity(research_result(), stage_id="s"),
            ):
                with pytest.raises(Diverged):
                    write(ledger.run("r"))
        return report

    report, peak = traced_peak(verify_then_write)
    assert "entry.size" in {d.check for run in report.runs for d in run.divergences}
    assert peak < 8 * len(huge), f"{peak:,} bytes at peak for a {len(huge):,}-byte row"
