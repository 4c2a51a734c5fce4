"""The command line as a daily tool: global options anywhere, append, runs, show of imported
runs, init, --jobs, verify-proof (in-process, through the ``cli`` fixture)."""

from __future__ import annotations

import gc
import io
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger
from agentledger.checkpoint import install_public_key
from agentledger.cli.common import JOBS_PER_CORE
from agentledger.demo import build_workspace, plant_corruptions

from ..bernstein.bernstein_testkit import SMALL, copy_workdir, journal


def build(ledger_path: Path, runs: int = 3, entries: int = 2) -> None:
    with Ledger.open(ledger_path) as ledger:
        for n in range(runs):
            ledger.run(f"run-{n}").append_many([("step", {"n": i}) for i in range(entries)])


# ---- 1. global options, before or after the command ---------------------------------------


def test_global_options_are_accepted_after_the_command(cli: Any, ledger_path: Path) -> None:
    build(ledger_path)
    other = ledger_path.parent / "other.db"
    build(other, runs=1)
    after = cli("runs", "--ledger", str(other), "--json")
    assert after.code == 0, after.err
    assert [r["run"] for r in after.json()["runs"]] == ["run-0"]
    before = cli("--json", "runs")
    assert [r["run"] for r in before.json()["runs"]] == ["run-0", "run-1", "run-2"]
    assert cli("show", "run-1", "--ledger", str(other)).code == 1  # --ledger after wins
    assert cli("phase", "show", "run-0", "--ledger", str(other), "--json").code == 0


def test_quiet_and_no_color(cli: Any, ledger_path: Path) -> None:
    build(ledger_path)
    loud = cli("runs")
    assert "3 run(s)" in loud.err
    quiet = cli("runs", "--quiet")
    assert quiet.err == "" and "run-0" in quiet.out
    plain = cli("show", "run-0", "--no-color")
    assert "\x1b[" not in plain.out and "step" in plain.out


def test_prove_takes_json(cli: Any, ledger_path: Path) -> None:
    build(ledger_path)
    proof = cli("prove", "run-1", "1", "--json")
    assert proof.code == 0, proof.err
    assert proof.json()["run"] == "run-1"
    assert cli("--json", "prove", "run-1", "1").json() == proof.json()


# ---- 9. append, init, --jobs, verify-proof --------------------------------------------------


def test_append_creates_the_run_at_its_first_entry(
    cli: Any, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("init").code == 0
    shown = cli("append", "run-a", "task_claimed", '{"task": "t-1"}', "--json")
    assert shown.code == 0, shown.err
    entry = shown.json()
    assert (entry["run"], entry["seq"], entry["kind"], entry["body"]) == (
        "run-a", 0, "task_claimed", {"task": "t-1"}
    )  # fmt: skip
    assert entry["hash"].startswith("blake3:")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'{"n": 2}')))
    piped = cli("append", "run-a", "step", "-", "--json")
    assert piped.json()["seq"] == 1 and piped.json()["body"] == {"n": 2}
    assert cli("append", "run-a", "note").code == 0  # body defaults to {}
    assert "appended run-a #2 note" in cli("append", "run-a", "note").out.replace("#3", "#2")
    with Ledger.open(ledger_path) as ledger:
        assert [e.kind for e in ledger.get_run("run-a").entries()] == [
            "task_claimed", "step", "note", "note"
        ]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["run-a", "step", "{nope"], 65),
        (["run-a", "step", "[1, 2]"], 65),
        (["run-a", "step", '{"x": NaN}'], 65),
        (["run-a", "phase.evidence", "{}"], 65),
        (["../etc", "step", "{}"], 65),
        (["run-a", "bad kind!", "{}"], 65),
    ],
)
def test_append_refuses_bad_data_and_writes_nothing(
    cli: Any, ledger_path: Path, args: list[str], code: int
) -> None:
    cli("init")
    result = cli("append", *args)
    assert result.code == code, result.err
    assert result.err.startswith("error [") and "Traceback" not in result.err
    with Ledger.open(ledger_path) as ledger:
        assert ledger.runs() == []


@pytest.mark.parametrize(
    "args",
    [
        ["run-a", "activity.result", "{}"],
        ["run-a", "bad kind!", "{}"],
        ["../etc", "step", "{}"],
        ["run-a", "step", "[1]"],
    ],
)
def test_a_refused_append_never_creates_the_ledger_it_names(
    cli: Any, ledger_path: Path, args: list[str]
) -> None:
    """A first `append` with a reserved or malformed kind created the ledger, then refused:
    an empty ledger file was left where none had been."""
    result = cli("append", *args)
    assert result.code == 65, result.err
    assert not ledger_path.exists() and not ledger_path.parent.exists()


def test_init_makes_an_existing_empty_file_private(cli: Any, ledger_path: Path) -> None:
    ledger_path.parent.mkdir(parents=True)
    ledger_path.touch(mode=0o644)
    os.chmod(ledger_path, 0o644)
    result = cli("init", "--json")
    assert result.code == 0, result.err
    assert result.json()["created"] is True
    assert stat.S_IMODE(ledger_path.stat().st_mode) == 0o600


def test_init_says_created_only_in_the_process_that_made_the_ledger(
    cli: Any, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Concurrent inits on a new path: each saw the creator's still empty file, and all of
    # them said "created" (the --json "created": true of one ledger, several times).
    from agentledger.cli.context import AppContext

    ledger_path.parent.mkdir(parents=True)
    ledger_path.touch(mode=0o600)  # the other process's O_EXCL file, not yet written
    opened = AppContext.open_ledger

    def another_process_wins(self: AppContext, **kwargs: Any) -> Ledger:
        with Ledger.open(ledger_path) as winner:  # it makes the ledger first
            made = winner.id
        ledger = opened(self, **kwargs)
        assert ledger.id == made
        return ledger

    monkeypatch.setattr(AppContext, "open_ledger", another_process_wins)
    result = cli("init", "--json")
    assert result.code == 0, result.err
    assert result.json()["created"] is False


def test_jobs_are_capped_with_a_note(cli: Any, ledger_path: Path) -> None:
    build(ledger_path)
    result = cli("verify", "--jobs", "100000", "--json")
    assert result.code == 0, result.err
    limit = JOBS_PER_CORE * (os.cpu_count() or 1)
    assert f"capped to {limit}" in result.err
    assert json.loads(result.out)["code"] == 0


def test_verify_proof_names_an_untrusted_signer_and_shows_a_proven_entry(
    cli: Any, ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(ledger_path)
    proof = tmp_path / "proof.json"
    proof.write_text(cli("prove", "run-2", "1").out)
    with Ledger.open(ledger_path) as ledger:
        key = install_public_key(ledger)
    monkeypatch.setenv("AGENTLEDGER_HOME", str(tmp_path / "reviewer"))  # trusts nobody
    untrusted = cli("verify-proof", str(proof))
    assert untrusted.code == 2
    assert "signed by" in untrusted.out and "key id" in untrusted.out
    assert "--trust" in untrusted.out and "keys export" in untrusted.out
    trusted = cli("verify-proof", str(proof), "--trust", key)
    assert trusted.code == 0, trusted.err
    for shown in ("run-2", "step", '{"n": 1}', "time"):
        assert shown in trusted.out
    as_json = cli("verify-proof", str(proof), "--trust", key, "--json").json()
    assert as_json["entry"]["kind"] == "step" and as_json["entry"]["body"] == {"n": 1}
    assert as_json["signatures"][0]["key_id"]


# ---- 6 and 7: runs and show -------------------------------------------------------------------


def test_runs_lists_imported_bernstein_runs_first_class(cli: Any, ledger_path: Path) -> None:
    assert cli("import", "bernstein", str(SMALL)).code == 0
    listed = {r["run"]: r for r in cli("runs", "--json").json()["runs"]}
    assert set(listed) == {"run-001", "run-002", "run-003"}  # no _bernstein
    run = listed["run-001"]
    assert run["source"] == "bernstein"
    assert (run["events"], run["activities"]) == (7, 4)
    assert run["last_entry"].startswith("20") and run["status"] == "unverified"
    everything = [r["run"] for r in cli("runs", "--all", "--json").json()["runs"]]
    assert "_bernstein" in everything
    assert cli("verify", "--compat", "bernstein").code == 0
    assert {r["status"] for r in cli("runs", "--json").json()["runs"]} == {"clean"}


def test_show_of_an_imported_run_shows_bernstein_s_rows_and_stages(
    cli: Any, ledger_path: Path
) -> None:
    assert cli("import", "bernstein", str(SMALL)).code == 0
    shown = cli("show", "run-001", "--json")
    # The exit code of `verify run-001`: its receipts' only signer is the key they embed.
    assert shown.code == 2, shown.err
    doc = shown.json()
    assert doc["run_status"] == "diverged"
    assert doc["source"] == "bernstein" and doc["events"] == 7
    assert [row["event"] for row in doc["rows"]][:2] == ["run_started", "task_claimed"]
    assert all(len(row["event_hash"]) == 64 for row in doc["rows"])
    kinds = [stage["kind"] for stage in doc["stages"]]
    assert kinds == ["research", "browser", "data", "ops"]
    reports = {stage["kind"]: stage["report"] for stage in doc["stages"]}
    assert reports["data"] == "present" and reports["research"] == "absent"
    assert all(s["evidence"]["present"] == s["evidence"]["observations"] for s in doc["stages"])
    text = cli("show", "run-001").out
    assert "bernstein import" in text and "activity.result" in text and "research-0" in text


def test_import_pauses_the_cycle_collector_in_its_own_process_only(
    cli: Any, ledger_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``import bernstein`` runs without the collector and restores it as it was; the
    library's ``import_workdir`` leaves a program's collector alone."""
    from agentledger.bernstein import importer

    seen: list[bool] = []
    scan = importer.scan_workdir

    def scan_and_look(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return scan(*args)

    monkeypatch.setattr(importer, "scan_workdir", scan_and_look)
    assert gc.isenabled()
    assert cli("import", "bernstein", str(SMALL)).code == 0
    assert gc.isenabled()
    gc.disable()
    try:
        assert cli("import", "bernstein", str(SMALL)).code == 0
        assert not gc.isenabled()
    finally:
        gc.enable()
    with Ledger.open(tmp_path / "api.db") as ledger:
        importer.import_workdir(ledger, SMALL)
    # The first import makes the ledger: the workdir is listed once, for refusals before
    # the ledger is made, and imported from that listing; the second finds the ledger
    # there and lists it itself; the library's import, its collector on.
    assert seen == [False, False, True]


def test_an_import_from_a_checked_listing_equals_one_that_lists_itself(tmp_path: Path) -> None:
    """``import_workdir(checked=...)`` (a new ledger's import, from the listing made before
    the ledger) imports what an import that lists the workdir itself does; a listing of
    another workdir or run selection is refused before anything is written."""
    from agentledger.bernstein import check_workdir, import_workdir

    def contents(path: Path) -> list[Any]:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return [
                list(conn.execute("SELECT path, kind, digest FROM bernstein_files ORDER BY path")),
                list(conn.execute("SELECT run_id FROM bernstein_runs ORDER BY run_id")),
            ]
        finally:
            conn.close()

    summaries = []
    for name, checked in (("listed.db", None), ("checked.db", check_workdir(SMALL))):
        with Ledger.open(tmp_path / name) as ledger:
            summaries.append(import_workdir(ledger, SMALL, checked=checked).to_json())
    assert summaries[0] == summaries[1]
    assert summaries[0]["files_added"] > 0
    assert contents(tmp_path / "listed.db") == contents(tmp_path / "checked.db")
    one_run = sorted(p.name for p in (SMALL / ".sdd" / "runs").iterdir())[0]
    elsewhere = copy_workdir(SMALL, tmp_path / "copy")
    with Ledger.open(tmp_path / "other.db") as ledger:
        for checked in (check_workdir(SMALL, runs=[one_run]), check_workdir(elsewhere)):
            with pytest.raises(ValueError, match="another workdir or run selection"):
                import_workdir(ledger, SMALL, checked=checked)
    assert contents(tmp_path / "other.db") == [[], []]


def test_show_and_runs_read_a_damaged_journal_as_verify_does(
    cli: Any, ledger_path: Path, tmp_path: Path
) -> None:
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    path = journal(workdir, "run-001")
    rows = path.read_bytes().splitlines()
    # Physical lines: 0 row, 1 blank, 2 row, 3 not JSON, 4 row, 5 not UTF-8, then the
    # next row ends at a lone carriage return, and one more blank holds only spaces.
    damaged = [rows[0], b"", rows[1], b"not json", rows[2], b"\xff{}", rows[3] + b"\r"]
    path.write_bytes(b"\n".join(damaged) + b"\n \t\n" + b"\n".join(rows[4:]) + b"\n")
    assert cli("import", "bernstein", str(workdir)).code == 0
    verified = cli("verify", "run-001", "--compat", "bernstein", "--json").json()
    named = sorted(
        int(d["subject"].removeprefix("line "))
        for d in verified["failures"][0]["divergences"]
        if d["check"] == "bernstein.line.discarded"
    )
    assert named == [3, 5]
    shown = cli("show", "run-001", "--json").json()
    assert shown["discarded_lines"] == named and shown["events"] == 7
    assert [row["line"] for row in shown["rows"] if row["parsed"]] == [0, 2, 4, 6, 8, 9, 10]
    text = cli("show", "run-001", "--no-color").out
    assert "2 discarded line(s)" in text
    assert "line    3 discarded" in text and "line    5 discarded" in text
    listed = {r["run"]: r for r in cli("runs", "--json").json()["runs"]}
    assert (listed["run-001"]["events"], listed["run-001"]["activities"]) == (7, 4)
    assert (listed["run-001"]["discarded"], listed["run-002"]["discarded"]) == (2, 0)


def test_show_names_an_event_too_deep_for_python_to_show(
    cli: Any, ledger_path: Path, tmp_path: Path
) -> None:
    """The reader keeps a line nested 700 deep (its limit is 990, as verify's); under a
    recursion limit of 600 Python's ``json`` cannot parse it to show: it is shown as such,
    counted as the event it is, not dropped nor taken for a discarded line."""
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    path = journal(workdir, "run-001")
    deep = b'{"event": "x", "a": ' + b"[" * 700 + b"]" * 700 + b"}"
    path.write_bytes(path.read_bytes() + deep + b"\n")
    assert cli("import", "bernstein", str(workdir)).code == 0
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(600)
    try:
        shown = cli("show", "run-001", "--json").json()
        text = cli("show", "run-001", "--no-color").out
    finally:
        sys.setrecursionlimit(limit)
    assert shown["events"] == 8 and shown["discarded_lines"] == []
    last = shown["rows"][-1]
    assert (last["line"], last["parsed"], last["event"], last["payload"]) == (7, True, None, None)
    assert last["text"].startswith('{"event": "x", "a": [[[')
    assert "line    7 an event nested too deeply to show" in text


def test_runs_filters_sorts_limits_and_streams(cli: Any, ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        build_workspace(ledger, 12)
    assert cli("verify").code == 0
    with Ledger.open(ledger_path) as ledger:
        planted = {c.run_id for c in plant_corruptions(ledger) if c.run_id is not None}
    assert cli("verify").code == 2
    changed = sorted(planted)[0]
    with Ledger.open(ledger_path) as ledger:
        ledger.run(changed).append("step", {"after": True})  # appended since: unverified
        ledger.run("fresh").append_many([("step", {})] * 30)  # never verified
    items = [json.loads(line) for line in cli("runs", "--jsonl").out.splitlines()]
    assert len(items) == 13 and all(set(i) >= {"run", "status", "last_entry"} for i in items)
    status = {i["run"]: i["status"] for i in items}
    assert status[changed] == "unverified"
    diverged = {r["run"] for r in cli("runs", "--status", "diverged", "--json").json()["runs"]}
    assert diverged == planted - {changed, "fresh"}
    clean = [r["run"] for r in cli("runs", "--status", "clean", "--json").json()["runs"]]
    assert len(clean) == 13 - len(planted) - 1
    unverified = cli("runs", "--status", "unverified", "--jsonl").out.splitlines()
    assert {json.loads(x)["run"] for x in unverified} == {changed, "fresh"}
    limited = cli("runs", "--limit", "3", "--sort", "entries", "--jsonl").out.splitlines()
    assert len(limited) == 3 and json.loads(limited[0])["run"] == "fresh"
    newest = json.loads(cli("runs", "--sort", "last", "--limit", "1", "--jsonl").out)
    assert newest["run"] == "fresh"  # its last entry is the newest
    by_id = [json.loads(x)["run"] for x in cli("runs", "--sort", "run", "--jsonl").out.split("\n")
             if x]  # fmt: skip
    assert by_id == sorted(by_id)
    table = cli("runs", "--limit", "2").out
    assert "last entry" in table and "status" in table and len(table.splitlines()) == 3


def test_reading_a_run_through_the_cli_never_creates_it(cli: Any, ledger_path: Path) -> None:
    build(ledger_path, runs=1)
    assert cli("show", "ghost").code == 1
    assert cli("activity", "verify", "ghost").code == 1
    with Ledger.open(ledger_path) as ledger:
        assert ledger.runs() == ["run-0"]


def test_runs_lists_every_run_of_a_ledger_whose_entries_are_not_json(
    cli: Any, ledger_path: Path
) -> None:
    """A tampered entry is verify's to report (exit 2); the listing still lists every run,
    whatever entry was rewritten and however it is sorted."""
    with Ledger.open(ledger_path) as ledger:
        build_workspace(ledger, 3)
        runs = sorted(ledger.runs())
    conn = apsw.Connection(str(ledger_path))
    ((head,),) = conn.execute("SELECT head_seq FROM runs WHERE run_id = ?", (runs[0],))
    for run_id, seq, data in (
        (runs[0], head, b'{"kind":"step","ts":'),  # the head: the listing reads its ts
        (runs[1], 0, b"[" * 5_000 + b"]" * 5_000),
    ):
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = ?", (data, run_id, seq)
        )
    conn.close()
    for sort in ("created", "last", "run", "entries"):
        listed = cli("runs", "--sort", sort, "--json")
        assert listed.code == 0, listed.err
        items = {r["run"]: r for r in listed.json()["runs"]}
        assert set(items) == set(runs) and items[runs[0]]["last_entry"] is None
    assert cli("verify").code == 2


def test_init_shows_a_hostile_ledger_id_escaped(cli: Any, ledger_path: Path) -> None:
    # The id is read from the file: init printed it raw, its newline starting a line of the
    # file's choosing ("verdict: clean") on the user's terminal.
    cli("init")
    with Ledger.open(ledger_path) as ledger, ledger.db.write() as conn:
        conn.execute(
            "UPDATE ledger_meta SET value = ? WHERE key = 'ledger_id'",
            ("x\nverdict: clean\x1b[2K",),
        )
    result = cli("init")
    assert result.code == 0, result.err
    assert result.out.count("\n") == 1 and "\x1b" not in result.out
    assert "x\\x0averdict: clean\\x1b[2K" in result.out
