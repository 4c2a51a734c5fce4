"""One verdict per run, whoever asks: `verify --all`, `verify RUN`, `show`, `activity
verify`, `runs` and the HTML give each run the same status, in the same words."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import apsw

from agentledger import Ledger
from tests.bernstein.bernstein_testkit import SMALL
from tests.report.conftest import Demo, as_json


def test_every_run_reads_the_same_in_verify_all_verify_run_and_show(
    demo: Demo, demo_cli: Any
) -> None:
    _, out, _ = demo_cli("verify", "--json")
    whole = {row["run"]: row["status"] for row in as_json(out)["results"]}
    assert "clean" in whole.values() and "diverged" in whole.values()
    for run_id, status in whole.items():
        code, out, _ = demo_cli("verify", run_id, "--json")
        named = as_json(out)
        assert named["results"][0]["status"] == status, run_id
        # Exit 2 for a diverged run, and for a finding of what the run relies on that names
        # no run (the demo's defaced blob is one run's evidence).
        assert code == (2 if status == "diverged" or named["workspace"] else 0), run_id
        shown_code, out, _ = demo_cli("show", run_id, "--json")
        assert as_json(out)["run_status"] == status and shown_code == code, run_id
    untouched = next(run for run, status in whole.items() if status == "clean")
    code, out, _ = demo_cli("show", untouched)
    assert code == 0 and "verified clean" in out.splitlines()[0]


def test_a_damaged_run_reads_the_same_in_verify_all_verify_run_and_show(
    demo: Demo, demo_cli: Any
) -> None:
    code, out, _ = demo_cli("verify", "--json")
    whole = {row["run"]: row["status"] for row in as_json(out)["results"]}
    for corruption in demo.planted:
        if corruption.run_id is None:
            continue
        code, out, _ = demo_cli("verify", corruption.run_id, "--json")
        assert code == 2
        assert as_json(out)["results"][0]["status"] == whole[corruption.run_id] == "diverged"
        code, out, _ = demo_cli("show", corruption.run_id, "--json")
        assert code == 2 and as_json(out)["run_status"] == "diverged"


def test_an_imported_bernstein_run_exits_in_show_as_in_verify(cli: Any) -> None:
    assert cli("import", "bernstein", str(SMALL)).code == 0
    verified = cli("verify", "run-001", "--json")
    shown = cli("show", "run-001", "--json")
    assert shown.code == verified.code == 2
    assert shown.json()["run_status"] == verified.json()["results"][0]["status"] == "diverged"
    text = cli("show", "run-001")
    assert text.code == 2
    assert "bernstein import" in text.out and "verdict: diverged" in text.out


def _cut_tail(path: Path, run_id: str, first: int) -> None:
    """Steps ``first``.. deleted from the end of a run (its cached head left as it was)."""
    with Ledger.open(path) as ledger, ledger.db.write() as conn:
        conn.execute("DELETE FROM entries WHERE run_id = ? AND seq >= ?", (run_id, first))


def test_a_cut_tail_reads_the_same_in_verify_and_show(ledger_path: Path, cli: Any) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append_many([("step", {"n": n}) for n in range(15)])
        ledger.run("other").append("step", {})
    _cut_tail(ledger_path, "r", 11)
    words = "steps 11..14 were removed from its end"
    verified = cli("verify", "--json")
    assert verified.code == 2
    said = [d["says"] for run in verified.json()["failures"] for d in run["divergences"]]
    assert any(words in (s or "") for s in said), said
    for args in (("verify",), ("verify", "r"), ("show", "r")):
        done = cli(*args)
        assert done.code == 2 and words in done.out, args
    assert cli("verify", "other").code == 0
    html = ledger_path.parent / "report.html"
    assert cli("verify", "--html", str(html)).code == 2
    assert words in html.read_text(encoding="utf-8")


def test_a_deleted_run_names_the_hole_in_the_ordinals(ledger_path: Path, cli: Any) -> None:
    with Ledger.open(ledger_path) as ledger:
        for n in range(30):
            ledger.run(f"r{n:02d}").append("step", {})
        with ledger.db.write() as conn:
            conn.execute("DELETE FROM entries WHERE run_id = 'r04'")
            conn.execute("DELETE FROM runs WHERE run_id = 'r04'")
    report = cli("verify", "--json").json()
    ordinal = next(d for d in report["workspace"] if d["check"] == "runs.ordinal")
    assert ordinal["expected"] == "1..29"
    assert "5 missing (a run removed)" in ordinal["actual"]
    assert "[1, 2, 3" not in ordinal["actual"]


def _damage(path: Path, rng: random.Random) -> set[str]:
    """Deletions inside runs, edited bodies and cut tails, in many runs at once."""
    damaged: set[str] = set()
    with Ledger.open(path) as ledger, ledger.db.write() as conn:
        runs = rng.sample(ledger.runs(), 12)
        for n, run_id in enumerate(runs):
            how = n % 3
            if how == 0:  # delete steps in the middle
                first = rng.randint(2, 8)
                conn.execute(
                    "DELETE FROM entries WHERE run_id = ? AND seq BETWEEN ? AND ?",
                    (run_id, first, first + rng.randint(0, 3)),
                )
            elif how == 1:  # edit a body in place
                seq = rng.randint(1, 18)
                raw = conn.execute(
                    "SELECT bytes FROM entries WHERE run_id = ? AND seq = ?", (run_id, seq)
                ).fetchall()[0][0]
                conn.execute(
                    "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = ?",
                    (raw.replace(b'"n":', b'"n":1'), run_id, seq),
                )
            else:  # cut the tail (the runs table still names the old head)
                conn.execute(
                    "DELETE FROM entries WHERE run_id = ? AND seq >= ?",
                    (run_id, rng.randint(12, 19)),
                )
            damaged.add(run_id)
    return damaged


def test_every_output_agrees_on_every_run_of_a_ledger_damaged_in_many_runs(
    ledger_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger, ledger.db.write():
        for n in range(40):
            ledger.run(f"run-{n:02d}").append_many([("step", {"n": i}) for i in range(20)])
    damaged = _damage(ledger_path, random.Random(26))
    whole = cli("verify", "--all", "--json")
    assert whole.code == 2
    status = {row["run"]: row["status"] for row in whole.json()["results"]}
    diverged = {run for run, s in status.items() if s == "diverged"}
    assert damaged <= diverged  # every damaged run is named
    for failure in whole.json()["failures"]:  # the others only as perhaps owning a deletion
        if failure["run"] not in damaged:
            assert {d["check"] for d in failure["divergences"]} == {"log.incomplete"}
    assert whole.json()["diverged"] == len(diverged)
    listed = {
        item["run"]: item["status"] for item in map(json.loads, cli("runs", "--jsonl").out.split())
    }
    assert listed == status
    for run_id, expected in status.items():
        named = cli("verify", run_id, "--json")
        assert named.json()["results"][0]["status"] == expected, run_id
        assert named.code == (2 if expected == "diverged" else 0), run_id
        shown = cli("show", run_id, "--json")
        assert shown.json()["run_status"] == expected, run_id
        assert shown.code == named.code, run_id


def test_runs_lists_a_run_whose_cached_head_was_edited_with_what_it_holds(
    ledger_path: Path, cli: Any
) -> None:
    """``runs`` read the runs table's cache: a head edited to -1 hid the run from every
    listing (``--status diverged`` said 0 runs while verify named it), and an edited head
    gave a wrong entry count. The listing reads the entries table's last step."""
    import apsw

    with Ledger.open(ledger_path) as ledger:
        ledger.run("hidden").append_many([("step", {"n": n}) for n in range(8)])
        ledger.run("shifted").append_many([("step", {"n": n}) for n in range(5)])
        ledger.run("other").append("step", {})
    conn = apsw.Connection(str(ledger_path))
    conn.execute("UPDATE runs SET head_seq = -1 WHERE run_id = 'hidden'")
    conn.execute("UPDATE runs SET head_seq = 1 WHERE run_id = 'shifted'")
    conn.close()
    verified = cli("verify", "--json")
    assert verified.code == 2
    assert {f["run"] for f in verified.json()["failures"]} == {"hidden", "shifted"}
    listed = {row["run"]: row for row in cli("runs", "--json").json()["runs"]}
    assert {run: row["entries"] for run, row in listed.items()} == {
        "hidden": 8,
        "shifted": 5,
        "other": 1,
    }
    assert listed["hidden"]["last_entry"] is not None
    diverged = cli("runs", "--status", "diverged", "--json").json()["runs"]
    assert sorted(row["run"] for row in diverged) == ["hidden", "shifted"]
    by_size = [row["run"] for row in cli("runs", "--sort", "entries", "--json").json()["runs"]]
    assert by_size == ["hidden", "shifted", "other"]


def test_runs_counts_the_entries_a_run_holds_as_verify_and_show_do(
    ledger_path: Path, cli: Any
) -> None:
    """A step deleted from the middle of a run: ``runs`` said its last step + 1 (5) while
    verify, show and the HTML said the 4 entries the file holds."""
    with Ledger.open(ledger_path) as ledger:
        ledger.run("gap").append_many([("step", {"n": n}) for n in range(5)])
        ledger.run("whole").append_many([("step", {"n": n}) for n in range(3)])
    conn = apsw.Connection(str(ledger_path))
    conn.execute("DELETE FROM entries WHERE run_id = 'gap' AND seq = 2")
    conn.close()
    verified = {row["run"]: row["entries"] for row in cli("verify", "--json").json()["results"]}
    assert verified == {"gap": 4, "whole": 3}
    assert len(cli("show", "gap", "--json").json()["entries"]) == 4
    listed = cli("runs", "--json").json()["runs"]
    assert {row["run"]: (row["entries"], row["events"]) for row in listed} == {
        "gap": (4, 4),
        "whole": (3, 3),
    }
    by_size = [row["run"] for row in cli("runs", "--sort", "entries", "--json").json()["runs"]]
    assert by_size == ["gap", "whole"]


def test_a_run_rewritten_under_the_signed_log_reads_diverged_in_verify_all_too(
    ledger_path: Path, cli: Any
) -> None:
    """A run rewritten from step 2 with a consistent chain (bytes, hashes, links, head):
    ``verify RUN`` and ``show`` named its steps (``log.inclusion``), while ``verify --all``
    put only ``log.root`` on the workspace and called the run clean, and so did ``runs``."""
    import apsw

    from agentledger import _core

    with Ledger.open(ledger_path) as ledger:
        for run_id in ("r0", "r1", "r2"):
            ledger.run(run_id).append_many([("step", {"n": n}) for n in range(4)])
    conn = apsw.Connection(str(ledger_path))
    with conn:
        rows = conn.execute(
            "SELECT seq, bytes FROM entries WHERE run_id = 'r1' AND seq >= 2 ORDER BY seq"
        ).fetchall()
        prev = (
            "blake3:"
            + bytes(
                conn.execute("SELECT hash FROM entries WHERE run_id = 'r1' AND seq = 1").fetchall()[
                    0
                ][0]
            ).hex()
        )
        for seq, raw in rows:
            doc = json.loads(raw)
            doc["prev"] = prev
            doc["body"]["n"] = 100 + seq
            new = _core.canonicalize(doc)
            digest = _core.entry_hash(new)
            conn.execute(
                "UPDATE entries SET bytes = ?, hash = ? WHERE run_id = 'r1' AND seq = ?",
                (new, digest, seq),
            )
            prev = "blake3:" + digest.hex()
        conn.execute("UPDATE runs SET head_hash = ? WHERE run_id = 'r1'", (digest,))
    conn.close()
    whole = cli("verify", "--all", "--json")
    assert whole.code == 2
    report = whole.json()
    by_run = {
        f["run"]: {(d["seq"], d["check"]) for d in f["divergences"]} for f in report["failures"]
    }
    assert by_run == {"r1": {(2, "log.inclusion"), (3, "log.inclusion")}}
    assert "log.root" in {d["check"] for d in report["workspace"]}
    named = cli("verify", "r1", "--json").json()
    assert {(d["seq"], d["check"]) for f in named["failures"] for d in f["divergences"]} >= by_run[
        "r1"
    ]
    statuses = {row["run"]: row["status"] for row in cli("runs", "--json").json()["runs"]}
    assert statuses == {"r0": "clean", "r1": "diverged", "r2": "clean"}


def test_a_run_whose_row_was_removed_reads_diverged_in_every_output(
    ledger_path: Path, cli: Any
) -> None:
    _three_runs_b_unlisted(ledger_path)
    whole = cli("verify", "--json")
    status = {row["run"]: row["status"] for row in whole.json()["results"]}
    assert whole.code == 2 and status["b"] == "diverged"
    checks = {d["check"] for f in whole.json()["failures"] for d in f["divergences"]}
    assert "run.unknown" in checks
    named = cli("verify", "b", "--json")
    assert named.code == 2, named.out
    assert named.json()["results"][0]["status"] == "diverged"
    assert named.json()["results"][0]["entries"] == 3
    assert "run.unknown" in {d["check"] for d in named.json()["failures"][0]["divergences"]}
    shown = cli("show", "b", "--json")
    assert shown.code == 2 and shown.json()["run_status"] == "diverged"
    assert len(shown.json()["entries"]) == 3
    assert cli("activity", "verify", "b").code == 2
    assert cli("verify", "nope").code == 1  # a run the file holds nothing of is still missing
    assert cli("show", "nope").code == 1


def test_a_run_removed_with_its_row_reads_diverged_by_its_audit_record(
    ledger_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger:
        for run_id in ("a", "b"):
            ledger.run(run_id).append("step", {"n": 0})
            research = ledger.run(run_id).research("research-0")
            research.fetch("https://example.org/", b"<html>page</html>")
            research.finish(artifact={"summary": run_id})
    conn = apsw.Connection(str(ledger_path))  # every entry and the row go; the mirror stays
    conn.execute("DELETE FROM entries WHERE run_id = 'a'")
    conn.execute("DELETE FROM runs WHERE run_id = 'a'")
    conn.close()
    whole = cli("verify", "--json")
    assert whole.code == 2
    assert ("a", 1, "audit.orphan") in {
        (d["run"], d["seq"], d["check"]) for d in whole.json()["workspace"]
    }
    named = cli("verify", "a", "--json")
    assert named.code == 2, named.out  # not "no such run": the file shows it was removed
    assert named.json()["results"][0]["status"] == "diverged"
    assert named.json()["missing"] == 0 and named.json()["diverged"] == 1
    checks = {(d["seq"], d["check"]) for f in named.json()["failures"] for d in f["divergences"]}
    assert (1, "audit.orphan") in checks
    assert cli("activity", "verify", "a").code == 2
    shown = cli("show", "a", "--json")
    assert shown.code == 2 and shown.json()["run_status"] == "diverged"
    assert cli("verify", "nope").code == 1  # a run the file holds no trace of is missing


def test_cached_heads_that_overflow_a_sum_are_findings_not_an_error(
    ledger_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger:
        for run_id in ("a", "b"):
            ledger.run(run_id).append_many([("step", {"n": n}) for n in range(2)])
    conn = apsw.Connection(str(ledger_path))  # two cached heads whose sum is past 2**63
    conn.execute("UPDATE runs SET head_seq = 9223372036854775806")
    conn.close()
    for args in (("verify",), ("verify", "a"), ("fsck",)):
        done = cli(*args, "--json")
        assert done.code == 2, (args, done.err)
    report = cli("verify", "--json").json()
    checks = {(f["run"], d["check"]) for f in report["failures"] for d in f["divergences"]}
    assert {("a", "run.head_seq"), ("b", "run.head_seq")} <= checks
    assert cli("show", "a").code == 2


def test_a_pinned_blob_with_a_wrong_chunk_size_is_reported_once_on_its_run(
    ledger_path: Path, cli: Any
) -> None:
    with Ledger.open(ledger_path) as ledger:
        research = ledger.run("r").research("research-0")
        research.fetch("https://example.org/", b"<html>page</html>")
        research.finish(artifact={"summary": "s"})
    conn = apsw.Connection(str(ledger_path))
    conn.execute("UPDATE blobs SET chunk_size = 0 WHERE size = 17")  # the page's blob
    conn.close()
    report = cli("verify", "--json").json()
    found = [
        (f["run"], d["seq"], d["check"])
        for f in report["failures"]
        for d in f["divergences"]
        if d["check"] == "blob.chunk_size"
    ]
    found += [(d["run"], d["seq"], d["check"]) for d in report["workspace"]]
    assert found == [("r", 0, "blob.chunk_size")]  # the pinning step's, not the workspace's too
    assert report["findings_by_check"]["blob.chunk_size"] == {
        "findings": 1, "runs": 1, "workspace": 0,
    }  # fmt: skip


def test_runs_lists_a_run_whose_row_was_removed_with_its_verdict(
    ledger_path: Path, cli: Any
) -> None:
    _three_runs_b_unlisted(ledger_path)
    listed = {item["run"]: item for item in map(json.loads, cli("runs", "--jsonl").out.split())}
    assert sorted(listed) == ["a", "b", "c"]
    assert listed["b"]["entries"] == 3 and listed["b"]["head"] is None
    assert listed["b"]["status"] == "unverified"
    whole = cli("verify", "--json").json()
    status = {row["run"]: row["status"] for row in whole["results"]}
    listed = {item["run"]: item["status"] for item in cli("runs", "--json").json()["runs"]}
    assert listed == status and listed["b"] == "diverged"
    assert [
        item["run"] for item in cli("runs", "--status", "diverged", "--json").json()["runs"]
    ] == ["b"]
    assert len(cli("runs", "--limit", "2", "--json").json()["runs"]) == 2


def _three_runs_b_unlisted(ledger_path: Path) -> None:
    """Runs a, b, c of three steps, then b's row removed from ``runs``: its entries stay,
    only the listing's row goes (foreign keys are not enforced here)."""
    with Ledger.open(ledger_path) as ledger:
        for run_id in ("a", "b", "c"):
            ledger.run(run_id).append_many([("step", {"n": n}) for n in range(3)])
    conn = apsw.Connection(str(ledger_path))
    conn.execute("DELETE FROM runs WHERE run_id = 'b'")
    conn.close()


def _two_runs_with_a_damaged_tile(ledger_path: Path, *also: str) -> None:
    """Runs r0 and r1 of four steps, the first byte of the first tile zeroed, then ``also``."""
    with Ledger.open(ledger_path) as ledger:
        for run_id in ("r0", "r1"):
            ledger.run(run_id).append_many([("step", {"n": n}) for n in range(4)])
    conn = apsw.Connection(str(ledger_path))
    conn.execute(
        "UPDATE log_tiles SET hashes = CAST(zeroblob(1) || substr(hashes, 2) AS BLOB) "
        "WHERE level = 0 AND idx = 0"
    )
    for statement in also:
        conn.execute(statement)
    conn.close()


def test_a_damaged_tile_names_no_entry_in_verify_run_as_in_verify_all(
    ledger_path: Path, cli: Any
) -> None:
    """A tile edited, every entry intact: ``verify RUN`` proved each entry from the tiles
    and named every step of the run ``log.inclusion`` ("the entry was edited, re-chained or
    added after signing"), while ``verify --all`` said only ``log.tiles`` and the run clean."""
    _two_runs_with_a_damaged_tile(ledger_path)
    whole = cli("verify", "--all", "--json")
    assert whole.code == 2 and whole.json()["failures"] == []
    assert {d["check"] for d in whole.json()["workspace"]} == {"log.tiles"}
    for run_id in ("r0", "r1"):
        named = cli("verify", run_id, "--json")
        assert named.code == 2, run_id  # the tiles, a workspace finding
        assert named.json()["failures"] == [], run_id
        assert named.json()["results"][0]["status"] == "clean", run_id
        assert {d["check"] for d in named.json()["workspace"]} == {"log.tiles"}
        shown = cli("show", run_id, "--json")
        assert shown.code == 2 and shown.json()["run_status"] == "clean", run_id
        assert all(entry["status"] == "clean" for entry in shown.json()["entries"]), run_id


def test_a_checkpoint_no_trusted_key_signed_names_no_entry_in_verify_all_as_in_verify_run(
    ledger_path: Path, cli: Any
) -> None:
    """A run re-chained and the newest note's signature broken: `verify --all` named the
    run's steps ``log.inclusion`` against that note ("leaf N of checkpoint C") while
    `verify RUN`, which proves nothing against a note no trusted key signed, called the
    run clean. Neither names a leaf of an unsigned note now; both say what is unsigned."""
    from tests.log.logkit import break_newest_signature, raw, rechain

    with Ledger.open(ledger_path) as ledger:
        for run_id in ("r0", "r1"):
            ledger.run(run_id).append_many([("step", {"n": n}) for n in range(4)])
    with raw(ledger_path) as conn:
        rechain(conn, "r1", 2, {"n": 102})
    break_newest_signature(ledger_path)
    whole = cli("verify", "--all", "--json")
    named = cli("verify", "r1", "--json")
    assert whole.code == named.code == 2
    for report in (whole.json(), named.json()):
        found = {d["check"] for f in report["failures"] for d in f["divergences"]}
        assert "log.inclusion" not in found
        assert "checkpoint.signature" in {d["check"] for d in report["workspace"]}
    status = {row["run"]: row["status"] for row in whole.json()["results"]}
    assert status["r1"] == named.json()["results"][0]["status"]


def test_a_damaged_tile_beside_a_deleted_entry_names_no_other_entry_in_verify_run(
    ledger_path: Path, cli: Any
) -> None:
    """A tile edited and one entry deleted from another run: the signed log no longer
    rebuilds, so `verify RUN` proved each entry from the damaged tiles and named every
    step of an untouched run ``log.inclusion`` (edited, re-chained or added), which
    `verify --all` called clean. A proof from tiles that are not the signed tree proves
    nothing: the untouched run reads as `verify --all` reads it."""
    _two_runs_with_a_damaged_tile(
        ledger_path, "DELETE FROM entries WHERE run_id = 'r1' AND seq = 1"
    )
    whole = cli("verify", "--all", "--json")
    status = {row["run"]: row["status"] for row in whole.json()["results"]}
    assert whole.code == 2 and status == {"r0": "clean", "r1": "diverged"}
    named = cli("verify", "r0", "--json")
    assert named.code == 2
    assert named.json()["results"][0]["status"] == "clean"
    assert named.json()["failures"] == []


def test_entries_replaced_under_the_signed_log_are_not_called_missing(
    ledger_path: Path, cli: Any
) -> None:
    """A run re-chained under the signed log (no entry deleted): `verify` of another run
    noted "the signed log misses entries" and `explain log.incomplete` spoke of missing
    entries only, while the finding's actual said "entries replaced"."""
    from tests.log.logkit import raw, rechain

    with Ledger.open(ledger_path) as ledger:
        for run_id in ("r0", "r1"):
            ledger.run(run_id).append_many([("step", {"n": n}) for n in range(4)])
    with raw(ledger_path) as conn:
        rechain(conn, "r1", 2, {"n": 102})
    named = cli("verify", "r0", "--json").json()
    found = [d for f in named["failures"] for d in f["divergences"]]
    assert [d["check"] for d in found] == ["log.incomplete"]
    assert "replaced" in found[0]["actual"]
    assert not any("misses entries" in note for note in named["notes"]), named["notes"]
    assert any("missing or replaced" in note for note in named["notes"]), named["notes"]
    assert "replaced" in cli("explain", "log.incomplete").out


def test_a_newest_checkpoint_no_trusted_key_signed_uncertifies_no_run(
    ledger_path: Path, cli: Any
) -> None:
    """The newest note's size edited past the log (its signature no longer verifies):
    `verify --all` read it as entries cut from the log's end and named every run
    ``log.incomplete`` (diverged), while `verify RUN`, which trusts no such note, called
    each run clean."""
    from tests.log.logkit import edit_newest_note, grow_newest_note, raw

    with Ledger.open(ledger_path) as ledger:
        for run_id in ("r0", "r1"):
            ledger.run(run_id).append_many([("step", {"n": n}) for n in range(4)])
    with raw(ledger_path) as conn:
        edit_newest_note(conn, grow_newest_note)
    whole = cli("verify", "--all", "--json")
    assert whole.code == 2
    assert "checkpoint.signature" in {d["check"] for d in whole.json()["workspace"]}
    status = {row["run"]: row["status"] for row in whole.json()["results"]}
    for run_id in ("r0", "r1"):
        named = cli("verify", run_id, "--json")
        assert named.code == 2, run_id
        assert named.json()["results"][0]["status"] == status[run_id] == "clean", run_id


def test_a_forged_checkpoint_beside_a_deleted_entry_is_said_and_cuts_no_tail(
    ledger_path: Path, cli: Any
) -> None:
    """An entry deleted from a run and the newest note's size edited past the log: the
    whole verify, on the gap path, never checked the note's signature. It reported a
    deleted entry at the log's end that never was, named every run ``log.incomplete``
    (`verify RUN` called them clean) and said nothing of the forged note."""
    from tests.log.logkit import edit_newest_note, grow_newest_note, raw

    with Ledger.open(ledger_path) as ledger:
        for run_id in ("r0", "r1"):
            ledger.run(run_id).append_many([("step", {"n": n}) for n in range(4)])
    with raw(ledger_path) as conn:
        conn.execute("DELETE FROM entries WHERE run_id = 'r1' AND seq = 1")
        edit_newest_note(conn, grow_newest_note)
    whole = cli("verify", "--all", "--json").json()
    workspace = [(d["check"], d["expected"]) for d in whole["workspace"]]
    assert ("checkpoint.signature", "signed by a trusted key") in workspace
    assert [e for c, e in workspace if c == "log.leaf"] == ["leaf 5"]  # r1 step 1 only
    status = {row["run"]: row["status"] for row in whole["results"]}
    assert status == {"r0": "clean", "r1": "diverged"}
    assert cli("verify", "r0", "--json").json()["results"][0]["status"] == "clean"
