"""Every verdict says what it covers: the whole ledger, named runs, an incremental tail,
an archive of which ledger (and an archive checked against its source's exported
checkpoint is judged as an archive, not as a rolled-back copy)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from agentledger import Ledger

from .logkit import build, raw


def test_each_verdict_names_its_scope(ledger: Ledger, cli: Any) -> None:
    build(ledger, runs=2, entries=2)
    whole = cli("verify", "--all", "--json").json()
    assert whole["scope"] == "the whole ledger"
    named = cli("verify", "run-1", "--json").json()
    assert named["scope"] == "named runs run-1"
    ledger.run("run-0").append("step", {"more": True})
    incremental = cli("verify", "--incremental", "--json").json()
    assert incremental["scope"].startswith("what was appended since entry 4 in full")
    terminal = cli("verify", "--incremental")
    assert "verdict: clean (covers what was appended since entry 5" in terminal.out


def test_an_archive_checked_against_its_sources_checkpoint_is_judged_as_an_archive(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    build(ledger, runs=3, entries=2)
    exported = tmp_path / "cp.txt"
    assert cli("checkpoint", "--export", str(exported)).code == 0
    out = tmp_path / "review.db"
    assert cli("archive", str(out), "run-1").code == 0
    result = cli("verify", "--all", "--checkpoint", str(exported), "--json", ledger=out)
    assert result.code == 0, result.out
    document = result.json()
    assert "an archive" in document["scope"] and ledger.id in document["scope"]
    assert "holding 1 run," in document["scope"]
    assert not any(d["check"] == "log.rollback" for d in document["workspace"])


def test_an_archive_proves_each_entry_in_its_sources_signed_checkpoint(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    build(ledger, runs=3, entries=3)
    out = tmp_path / "review.db"
    assert cli("archive", str(out), "run-0", "run-2").code == 0
    clean = cli("verify", "--all", "--json", ledger=out).json()
    assert clean["code"] == 0
    assert "each entry proven in its source's checkpoint of 9 entries" in clean["scope"]
    with raw(out) as conn:  # one proof node of run-2's first entry replaced
        seal = json.loads(
            conn.execute("SELECT value FROM ledger_meta WHERE key = 'archive'").fetchall()[0][0]
        )
        seal["source_proofs"][3][1][0] = base64.b64encode(bytes(32)).decode()
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'archive'", (json.dumps(seal),))
    result = cli("verify", "--all", "--json", ledger=out)
    assert result.code == 2
    found = {
        (run["run"], d["check"], d["seq"])
        for run in result.json()["failures"]
        for d in run["divergences"]
    }
    assert ("run-2", "archive.source", 0) in found


def test_a_seal_no_parser_can_read_is_a_finding_not_a_crash(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    """A seal holding a 5,000-digit number stopped verify and show with an internal error
    (exit 70), and 100,000 nested brackets with a usage-like one (65): hostile stored
    text is a finding (exit 2), as a seal that is not JSON at all is."""
    build(ledger, runs=2, entries=2)
    out = tmp_path / "review.db"
    assert cli("archive", str(out), "run-1").code == 0
    for value in ('{"size": ' + "1" * 5000 + "}", "[" * 100_000 + "]" * 100_000, "not json"):
        copy = tmp_path / "copy.db"
        copy.write_bytes(out.read_bytes())
        with raw(copy) as conn:
            conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'archive'", (value,))
        result = cli("verify", "--all", "--json", ledger=copy)
        assert result.code == 2, result.err
        checks = {d["check"] for d in result.json()["workspace"]}
        assert "checkpoint.origin" in checks, checks
        shown = cli("show", "run-1", "--json", ledger=copy)
        assert shown.code == 2, shown.err


def test_named_runs_of_an_archive_are_proven_in_its_sources_checkpoint_too(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    """A damaged source proof was found by ``verify --all`` only: ``verify RUN`` and
    ``show RUN`` of the same archive said clean (exit 0)."""
    build(ledger, runs=3, entries=3)
    out = tmp_path / "review.db"
    assert cli("archive", str(out), "run-0", "run-2").code == 0
    assert cli("verify", "run-2", "--json", ledger=out).code == 0
    with raw(out) as conn:  # one proof node of run-2's first entry replaced
        seal = json.loads(
            conn.execute("SELECT value FROM ledger_meta WHERE key = 'archive'").fetchall()[0][0]
        )
        seal["source_proofs"][3][1][0] = base64.b64encode(bytes(32)).decode()
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'archive'", (json.dumps(seal),))
    named = cli("verify", "run-2", "--json", ledger=out)
    assert named.code == 2
    found = {
        (run["run"], d["check"], d["seq"])
        for run in named.json()["failures"]
        for d in run["divergences"]
    }
    assert found == {("run-2", "archive.source", 0)}
    assert cli("show", "run-2", ledger=out).code == 2
    untouched = cli("verify", "run-0", "--json", ledger=out)
    assert untouched.code == 0, untouched.out
    with raw(out) as conn:
        seal["source_proofs"] = []
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'archive'", (json.dumps(seal),))
    emptied = cli("verify", "run-0", "--json", ledger=out)
    assert emptied.code == 2
    assert [d["check"] for d in emptied.json()["workspace"]] == ["archive.source"]


def test_an_archives_checkpoint_given_to_its_source_is_another_origin_not_a_rollback(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    """``verify --checkpoint`` with an archive's exported checkpoint reported the source
    ledger as rolled back, with advice to adopt a restored backup."""
    build(ledger, runs=3, entries=2)
    out = tmp_path / "review.db"
    assert cli("archive", str(out), "run-1").code == 0
    exported = tmp_path / "archive-cp.txt"
    assert cli("checkpoint", "--export", str(exported), ledger=out).code == 0
    result = cli("verify", "--all", "--checkpoint", str(exported), "--json")
    assert result.code == 2
    checks = {d["check"]: d for d in result.json()["workspace"]}
    assert set(checks) == {"checkpoint.origin"}, checks
    assert "an archive's checkpoint" in checks["checkpoint.origin"]["actual"]
    assert "adopt" not in result.out


def test_an_archive_is_not_archived_again(ledger: Ledger, cli: Any, tmp_path: Path) -> None:
    """``archive`` of an archive exited 0 and wrote a file that could never verify clean
    (its entries are proven in a source checkpoint a second archive cannot carry)."""
    build(ledger, runs=2, entries=2)
    out = tmp_path / "review.db"
    assert cli("archive", str(out)).code == 0
    before = out.read_bytes()
    again = cli("archive", str(tmp_path / "again.db"), ledger=out)
    assert again.code == 65 and "is an archive" in again.err, again.err
    assert not (tmp_path / "again.db").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".again")) == []
    assert out.read_bytes() == before


def test_the_verdict_never_repeats_what_only_the_unsigned_seal_says(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    """The seal's "runs" and "sealed_at" were printed as fact in a clean verdict, though
    nothing binds them: anyone editing the file could make it say any count or text."""
    build(ledger, runs=3, entries=2)
    out = tmp_path / "review.db"
    assert cli("archive", str(out), "run-1", "run-2").code == 0
    with raw(out) as conn:
        seal = json.loads(
            conn.execute("SELECT value FROM ledger_meta WHERE key = 'archive'").fetchall()[0][0]
        )
        seal.update(runs=99_999_999, sealed_at="ALL GOOD, trust me")
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'archive'", (json.dumps(seal),))
    result = cli("verify", "--all", ledger=out)
    assert result.code == 0, result.out
    assert "holding 2 runs" in result.out
    assert "99" not in result.out.split("holding", 1)[1][:20] and "trust me" not in result.out


def test_a_malformed_newest_checkpoint_is_one_finding_naming_it(
    ledger: Ledger, ledger_path: Path, cli: Any
) -> None:
    """It was reported twice: once as "checkpoints", once as "checkpoint N"."""
    build(ledger, runs=1, entries=2)
    with raw(ledger_path) as conn:
        newest = conn.execute("SELECT max(id) FROM checkpoints").fetchall()[0][0]
        conn.execute("UPDATE checkpoints SET note = 'garbage' WHERE id = ?", (newest,))
    result = cli("verify", "--all", "--json")
    assert result.code == 2
    malformed = [
        d["subject"] for d in result.json()["workspace"] if d["check"] == "checkpoint.malformed"
    ]
    assert malformed == [f"checkpoint {newest}"]


def test_a_refused_archive_leaves_no_folder_behind(
    ledger: Ledger, ledger_path: Path, cli: Any, tmp_path: Path
) -> None:
    """``archive new/sub/a.db`` of a tampered ledger said "nothing was written" (exit 2)
    and left ``new/sub`` created."""
    build(ledger, runs=2, entries=2)
    with raw(ledger_path) as conn:
        conn.execute("UPDATE entries SET hash = zeroblob(32) WHERE run_id = 'run-0' AND seq = 0")
    refused = cli("archive", str(tmp_path / "new" / "sub" / "a.db"))
    assert refused.code == 2, refused.err
    assert not (tmp_path / "new").exists()


def test_an_archive_whose_seal_lost_its_source_proofs_is_not_clean(
    ledger: Ledger, cli: Any, tmp_path: Path
) -> None:
    """The seal is not signed: deleting its source checkpoint and proofs turned the
    archive into one "written before archives did", a note and exit 0, though nothing
    then tied its entries to the source's signed log."""
    build(ledger, runs=2, entries=2)
    out = tmp_path / "review.db"
    assert cli("archive", str(out)).code == 0
    with raw(out) as conn:
        seal = json.loads(
            conn.execute("SELECT value FROM ledger_meta WHERE key = 'archive'").fetchall()[0][0]
        )
    for removed in ("source_checkpoint", "source_proofs"):
        stripped = {k: v for k, v in seal.items() if k != removed}
        with raw(out) as conn:
            conn.execute(
                "UPDATE ledger_meta SET value = ? WHERE key = 'archive'", (json.dumps(stripped),)
            )
        whole = cli("verify", "--all", "--json", ledger=out)
        assert whole.code == 2, removed
        assert [(d["check"], d["subject"]) for d in whole.json()["workspace"]] == [
            ("archive.source", "archive source")
        ]
        assert cli("verify", "run-1", ledger=out).code == 2
        assert cli("show", "run-1", ledger=out).code == 2
