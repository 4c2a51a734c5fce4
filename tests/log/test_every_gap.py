"""Every gap of the log is named, and every run that may have lost entries is counted
(issue: only the first gap was named, and a run whose tail was cut appeared nowhere)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from agentledger import Ledger
from agentledger import log as wslog
from agentledger.storage import btree_check
from agentledger.verify import log as verify_log

from .logkit import fix_head, raw


def _cut_tail(path: Path, run_id: str, keep: int) -> None:
    with raw(path) as conn:
        conn.execute("DELETE FROM entries WHERE run_id = ? AND seq >= ?", (run_id, keep))
        fix_head(conn, run_id)


def test_two_cut_tails_are_both_named_and_both_runs_counted(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    for name in ("a", "b", "c", "d"):
        ledger.run(name).append_many([("step", {"n": i}) for i in range(5)])
    ledger.close()
    _cut_tail(ledger_path, "a", 3)  # leaves 3..4
    _cut_tail(ledger_path, "c", 2)  # leaves 12..14
    result = cli("verify", "--all", "--json")
    assert result.code == 2
    document = result.json()
    gaps = [d for d in document["workspace"] if d["check"] == "log.leaf"]
    assert [d["expected"] for d in gaps] == ["leaves 3..4", "leaves 12..14"]
    assert "a seq 2" in gaps[0]["actual"] and "b seq 0" in gaps[0]["actual"]
    failing = {run["run"] for run in document["failures"]}
    assert {"a", "c"} <= failing  # both runs whose tails may have been cut
    assert "d" not in failing  # its entries come after every gap: its chain shows any cut
    assert document["diverged"] == len(failing)


def test_a_repeated_leaf_is_named_with_its_holders(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    ledger.run("a").append_many([("step", {"n": i}) for i in range(3)])
    ledger.run("b").append_many([("step", {"n": i}) for i in range(3)])
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET leaf = 1 WHERE run_id = 'b' AND seq = 0")
    result = cli("verify", "--all", "--json")
    assert result.code == 2
    actual = [d["actual"] for d in result.json()["workspace"] if d["check"] == "log.leaf"]
    assert any("leaf 1 held 2 times" in a and "b seq 0" in a for a in actual), actual
    assert any("leaf 3 missing" in a for a in actual), actual


def test_the_run_of_an_entry_filed_at_anothers_leaf_is_diverged_in_both_verdicts(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """An entry's leaf column edited to another entry's position: `verify b` named it
    (log.inclusion) while `verify --all` named the leaf twice held in the workspace and
    called run b clean."""
    ledger.run("a").append_many([("step", {"n": i}) for i in range(3)])
    ledger.run("b").append_many([("step", {"n": i}) for i in range(3)])
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET leaf = 1 WHERE run_id = 'b' AND seq = 0")
    whole = cli("verify", "--all", "--json").json()
    named = cli("verify", "b", "--json").json()
    for document in (whole, named):
        found = [
            (d["run"], d["seq"], d["check"])
            for run in document["failures"]
            if run["run"] == "b"
            for d in run["divergences"]
        ]
        assert ("b", 0, "log.inclusion") in found, found


def test_the_run_of_an_entry_filed_past_the_signed_log_is_diverged_in_both_verdicts(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """An entry's leaf column edited past the newest checkpoint: `verify a` named it
    (log.unsigned) while `verify --all` named the position it left and called run a
    clean."""
    ledger.run("a").append_many([("step", {"n": i}) for i in range(3)])
    ledger.run("b").append_many([("step", {"n": i}) for i in range(3)])
    ledger.close()
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET leaf = 6 WHERE run_id = 'a' AND seq = 2")
    for args in (["verify", "--all", "--json"], ["verify", "a", "--json"]):
        document = cli(*args).json()
        found = [
            (d["run"], d["seq"], d["check"])
            for run in document["failures"]
            if run["run"] == "a"
            for d in run["divergences"]
        ]
        assert ("a", 2, "log.unsigned") in found, (args, found)


def test_a_cut_at_the_end_of_the_log_leaves_every_run_uncertified_in_both_verdicts(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    for name in ("a", "b"):
        ledger.run(name).append_many([("step", {"n": i}) for i in range(3)])
    ledger.close()
    _cut_tail(ledger_path, "b", 2)  # leaf 5, the last of the signed log
    whole = cli("verify", "--all", "--json").json()
    size = [d for d in whole["workspace"] if d["check"] == "log.size"]
    assert size and "leaf 5 missing" in size[0]["actual"]
    assert {run["run"] for run in whole["failures"]} == {"a", "b"}  # either may have lost it
    for name in ("a", "b"):
        named = cli("verify", name, "--json")
        assert named.code == 2
        assert "log.incomplete" in {
            d["check"] for run in named.json()["failures"] for d in run["divergences"]
        }


@pytest.mark.parametrize("seed", range(8))
def test_the_rust_log_rebuild_agrees_with_the_python_reference(
    ledger: Ledger, ledger_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    for n in range(rng.randint(1, 6)):
        ledger.run(f"r{n}").append_many([("step", {"i": i}) for i in range(rng.randint(1, 40))])
    ledger.close()
    with raw(ledger_path) as conn:  # missing, repeated, moved and rewritten positions
        size = int(conn.execute("SELECT count(*) FROM entries").fetchall()[0][0])
        for _ in range(rng.randint(0, 3)):
            leaf = rng.randrange(size)
            action = rng.choice(["delete", "repeat", "move", "rehash"])
            if action == "delete":
                conn.execute("DELETE FROM entries WHERE leaf = ?", (leaf,))
            elif action == "repeat":
                conn.execute(
                    "UPDATE entries SET leaf = ? WHERE leaf = ?", (leaf, (leaf + 1) % size)
                )
            elif action == "move":
                conn.execute("UPDATE entries SET leaf = ? WHERE leaf = ?", (size + 5, leaf))
            else:
                conn.execute("UPDATE entries SET hash = zeroblob(32) WHERE leaf = ?", (leaf,))
    with Ledger.open(ledger_path, readonly=True) as reader, reader.db.snapshot() as conn:
        specs = btree_check.fold_plan(conn)
        assert specs is not None
        _, kept = btree_check.check_entries(conn, specs, keep_log=True)
        assert kept is not None
        for wanted in sorted({0, 1, size // 2, size, size + 3}):
            fast = verify_log.rebuilt_log(conn, wanted)
            reference = wslog.state_at(conn, wanted)
            assert fast == reference, (seed, wanted)
            # The rows the index check's read kept give the same answer as a read of them.
            assert verify_log.rebuilt_log(conn, wanted, kept) == reference, (seed, wanted)
