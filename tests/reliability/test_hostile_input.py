"""Hostile and broken input, through the API and the CLI: the documented exit code, one
line on stderr (no traceback without --debug), and the ledger left byte-for-byte as it was."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger
from agentledger.checkpoint import install_public_key
from agentledger.cli import main
from agentledger.errors import InvalidInput, LedgerError
from agentledger.proofs import parse_proof, prove, verify_proof

from .hostile import (
    DOCUMENT_COMMANDS,
    JSON_DOCUMENTS,
    MALFORMED_HASHES,
    RUN_ID_COMMANDS,
    RUN_IDS,
    broken_ledgers,
    file_state,
    make_ledger,
)

AGENTLEDGER = Path(sys.executable).parent / "agentledger"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for name, data in JSON_DOCUMENTS.items():
        (folder / f"{name}.json").write_bytes(data)
    return folder


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return make_ledger(tmp_path / "ws" / "ledger.db", tmp_path / "keys")


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line(err: str) -> None:
    assert "Traceback" not in err
    assert err.count("\n") <= 1, err[:500]
    assert len(err) < 2_000, f"an error line of {len(err)} characters"


@pytest.mark.parametrize("command", list(DOCUMENT_COMMANDS))
def test_hostile_json_documents_exit_65_with_one_line_and_change_nothing(
    corpus: Path, ledger_file: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    before = file_state(ledger_file)
    for name in JSON_DOCUMENTS:
        args = [*DOCUMENT_COMMANDS[command], str(corpus / f"{name}.json")]
        code, out, err = run_cli(capsys, "--ledger", str(ledger_file), *args)
        assert code == 65, f"{command} {name}: exit {code}: {err[:300]}"
        assert_one_line(err)
        assert err.startswith("error ["), err[:200]
        assert out == ""
    assert file_state(ledger_file) == before


def test_hostile_run_ids_are_refused_by_every_command_and_change_nothing(
    ledger_file: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A malformed run id is invalid input (65) for every command that takes one: verify
    and archive said "not found" (1) where show and prove said 65."""
    before = file_state(ledger_file)
    out = str(tmp_path / "archive.db")
    for run_id in RUN_IDS:
        if "\x00" in run_id or "\ud800" in run_id:
            continue  # not expressible as a command-line argument; the API cases cover them
        for template in RUN_ID_COMMANDS:
            args = [a.replace("{run}", run_id).replace("{out}", out) for a in template]
            if "{run}" not in " ".join(template):
                args.append(run_id)
            code, _, err = run_cli(capsys, "--ledger", str(ledger_file), *args)
            assert code == 65, f"{args[:2]} {run_id[:40]!r}: exit {code}"
            assert_one_line(err)
    assert file_state(ledger_file) == before
    assert not Path(out).exists()


def test_hostile_run_ids_and_kinds_are_typed_refusals_in_the_api(ledger_file: Path) -> None:
    before = file_state(ledger_file)
    with Ledger.open(ledger_file, create=False) as ledger:
        for run_id in RUN_IDS:
            with pytest.raises(InvalidInput) as caught:
                ledger.run(run_id)
            assert caught.value.code == "invalid-run-id"
            assert len(caught.value.message) < 200
        for kind in ["", "../x", "a b", "k\x00", "x" * 129, "\ud800", "_lead", "phase.transition"]:
            with pytest.raises(InvalidInput):
                ledger.get_run("r").append(kind, {})
    assert file_state(ledger_file)[0] == before[0]


def _deep_list(depth: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(depth):
        child: list[Any] = []
        current.append(child)
        current = child
    return root


def test_hostile_entry_bodies_are_refused_before_anything_is_written(ledger_file: Path) -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    bodies: list[Any] = [
        {"a": math.nan},
        {"a": -math.inf},
        {"a": "\ud800"},
        {"\udfff": 1},
        {"a": _deep_list(100_000)},
        circular,
        {"a": b"bytes"},
        {1: "int key"},
        {"a": {1, 2}},
        {"a": 10**400},
        {"a": object()},
        [1, 2],
        None,
        "a string",
    ]
    with Ledger.open(ledger_file, create=False) as ledger:
        run = ledger.get_run("r")
        head = run.head()
        for body in bodies:
            with pytest.raises(InvalidInput) as caught:
                run.append("step", body)
            assert caught.value.code == "invalid-body"
            with pytest.raises(InvalidInput):
                run.append_many([("step", {"fine": True}), ("step", body)])
        assert run.head() == head
        assert ledger.verify(jobs=1).code == 0


def test_huge_strings_and_blobs_round_trip_and_verify(tmp_path: Path) -> None:
    big = os.urandom(24 << 20)
    source = tmp_path / "big.bin"
    source.write_bytes(big)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        # Just under the largest entry (16 MiB of canonical bytes), which can be proven.
        entry = ledger.run("r").append("step", {"text": "é" * ((8 << 20) - 512)})
        digest = ledger.blobs.put_file(source)
        assert ledger.blobs.size(digest) == len(big)
        assert ledger.blobs.get(digest) == big
        assert next(ledger.get_run("r").entries()).hash == entry.hash
        assert ledger.verify(jobs=1).code == 0
        proof = prove(ledger, "r", 0)
        assert verify_proof(parse_proof(proof.text().encode()), [install_public_key(ledger)]).ok


def test_an_entry_larger_than_a_proof_can_carry_is_refused_and_nothing_written(
    tmp_path: Path,
) -> None:
    """The API took an entry of any size: one past 16 MiB was stored, and ``prove`` then
    printed a proof that ``verify-proof`` refuses (the entry longer than an entry can be)."""
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        ledger.run("r").append("step", {"n": 1})
        with pytest.raises(InvalidInput) as refused:
            ledger.run("r").append_many([("step", {"n": 2}), ("step", {"text": "é" * (8 << 20)})])
        assert refused.value.code == "too-large"
        assert [e.seq for e in ledger.get_run("r").entries()] == [0]
        assert ledger.verify(jobs=1).code == 0


def test_malformed_hashes_are_typed_refusals(ledger_file: Path) -> None:
    with Ledger.open(ledger_file, create=False) as ledger:
        for digest in [*MALFORMED_HASHES, None, 5, b"blake3:" + b"a" * 64]:
            with pytest.raises(InvalidInput) as caught:
                ledger.blobs.get(digest)  # type: ignore[arg-type]
            assert caught.value.code == "malformed-hash"
            assert len(caught.value.message) < 200
            assert digest not in ledger.blobs


def test_broken_ledger_files_are_refused_by_every_command_and_left_unchanged(
    tmp_path: Path, ledger_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = [
        ["runs"],
        ["show", "r"],
        ["verify"],
        ["activity", "verify", "r"],
        ["checkpoint"],
        ["fsck"],
        ["prove", "r", "0"],
        ["archive", str(tmp_path / "out.db")],
        ["init"],
    ]
    for name, (path, expected) in broken_ledgers(tmp_path / "broken", ledger_file).items():
        before = file_state(path)
        for command in commands:
            if name == "empty.db" and command == ["init"]:
                continue  # init is how an empty file becomes a ledger
            code, out, err = run_cli(capsys, "--ledger", str(path), *command)
            assert (code, err.split("]")[0]) == (65, f"error [{expected}"), (name, command, err)
            assert_one_line(err)
            assert out == ""
            assert file_state(path) == before, f"{command[0]} changed {name}"
            assert not (tmp_path / "out.db").exists()
        with pytest.raises(LedgerError) as caught:
            Ledger.open(path, create=False)
        assert caught.value.code == expected


def test_a_directory_given_as_the_ledger_is_a_one_line_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "--ledger", str(tmp_path), "runs")
    assert code == 64
    assert_one_line(err)
    code, _, err = run_cli(capsys, "--ledger", "", "runs")  # was 65: '.' is a directory
    assert code == 64, err
    assert_one_line(err)
    with pytest.raises(LedgerError) as caught:
        Ledger.open(tmp_path)
    assert caught.value.code == "not-a-ledger"


def test_usage_errors_are_one_line_and_64(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["verify", "--no-such-flag"], ["prove", "r", "-1"], ["phase", "schema", "x"]):
        code, _, err = run_cli(capsys, *args)
        assert code == 64
        assert_one_line(err)
        assert err.startswith("error [usage]")


def _subprocess(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTLEDGER_HOME": str(cwd / "keys")}
    return subprocess.run(
        [str(AGENTLEDGER), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_the_installed_command_prints_one_line_and_a_traceback_only_with_debug(
    corpus: Path, ledger_file: Path, tmp_path: Path
) -> None:
    before = file_state(ledger_file)
    deep = str(corpus / "deep-arrays.json")
    for args, expected in [
        (["phase", "compile", deep], 65),
        (["activity", "record", "r", "s", str(corpus / "nan.json")], 65),
        (["show", "../../etc/passwd"], 65),
        (["verify", "--jobs", "many"], 64),
    ]:
        done = _subprocess("--ledger", str(ledger_file), *args, cwd=tmp_path)
        assert done.returncode == expected, done.stderr
        assert_one_line(done.stderr)
    text = tmp_path / "notes.txt"
    text.write_text("not a ledger")
    done = _subprocess("--ledger", str(text), "verify", cwd=tmp_path)
    assert (done.returncode, done.stderr.count("\n")) == (65, 1)
    debug = _subprocess("--debug", "--ledger", str(text), "verify", cwd=tmp_path)
    assert "Traceback" in debug.stderr
    assert file_state(ledger_file) == before
    assert text.read_text() == "not a ledger"


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[None]:
    """A file (or folder) this process may not write: mode 0444 (0555), or immutable when
    running as root (root ignores file modes)."""
    if os.geteuid() != 0:
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(0o700 if path.is_dir() else 0o600)
        return
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_read_only_ledger_reads_and_refuses_writes_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger_file = make_ledger(tmp_path / "ledger.db", tmp_path / "keys")
    page = tmp_path / "page.html"
    page.write_bytes(b"page")
    before = file_state(ledger_file)
    with read_only_file(ledger_file):
        with pytest.raises(OSError):
            ledger_file.open("r+b").close()
        code, out, err = run_cli(capsys, "--ledger", str(ledger_file), "runs", "--json")
        assert code == 0, err
        assert json.loads(out)["runs"][0]["entries"] == 300
        code, _, err = run_cli(capsys, "--ledger", str(ledger_file), "verify", "r")
        assert code == 0, err
        args = ["activity", "research", "r", "s2", "--page", f"u={page}"]
        code, _, err = run_cli(capsys, "--ledger", str(ledger_file), *args)
        assert (code, err.split("]")[0]) == (65, "error [ledger-read-only"), err
        assert_one_line(err)
        with Ledger.open(ledger_file) as ledger, pytest.raises(LedgerError) as caught:
            ledger.get_run("r").append("step", {})
        assert caught.value.code == "ledger-read-only"
    assert file_state(ledger_file)[0] == before[0]


BERNSTEIN_FIXTURE = Path(__file__).resolve().parents[1] / "bernstein" / "fixtures"


def test_hostile_bernstein_workdirs_import_nothing_from_outside_and_fail_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("TOPSECRET-OUTSIDE-THE-WORKDIR")
    workdir = tmp_path / "workdir"
    shutil.copytree(BERNSTEIN_FIXTURE / "bernstein-3.23.0-shapes", workdir, symlinks=True)
    runs = workdir / ".sdd" / "runs"
    first, second = sorted(p.name for p in runs.iterdir())[:2]
    (runs / first / "journal.jsonl").unlink()
    (runs / first / "journal.jsonl").symlink_to(outside)  # a journal that points out
    (runs / "escape").symlink_to(tmp_path)  # a run folder that points out
    (workdir / ".sdd" / "cas" / ("f" * 64)).symlink_to(outside)  # a blob that points out
    (runs / "bad id").mkdir()
    giant = {"ts": 1.0, "elapsed_s": 0, "index": 99, "event": "x", "prev_hash": "",
             "payload_hash": "a" * 64, "event_hash": "b" * 64, "big": "y" * (24 << 20)}  # fmt: skip
    with (runs / second / "journal.jsonl").open("a") as journal:
        journal.write(
            json.dumps(giant)
            + "\n"
            + "[" * 100_000
            + "\n"
            + "\udcff".encode("utf-8", "surrogateescape").decode("latin-1")
            + "\n"
        )
    ledger_file = tmp_path / "ledger.db"
    code, _, err = run_cli(
        capsys, "--ledger", str(ledger_file), "import", "bernstein", str(workdir)
    )
    assert code == 65
    assert_one_line(err)
    assert err.startswith("error [bernstein-refused]: 4 path(s)")
    assert err.rstrip().endswith("nothing was imported")
    assert not ledger_file.exists()  # a refused import makes no ledger
    # Into a ledger that exists: refused the same way, and the ledger is left as it was.
    with Ledger.open(ledger_file) as ledger:
        ledger.run("native").append("step", {})
    before = file_state(ledger_file)
    code, _, err = run_cli(
        capsys, "--ledger", str(ledger_file), "import", "bernstein", str(workdir)
    )
    assert code == 65 and err.startswith("error [bernstein-refused]: 4 path(s)")
    assert file_state(ledger_file) == before
    # With the refused paths gone, the rest imports; nothing from outside is kept.
    for refused in (
        (runs / first / "journal.jsonl"),
        runs / "escape",
        workdir / ".sdd" / "cas" / ("f" * 64),
    ):
        refused.unlink()
    (runs / "bad id").rmdir()
    code, _, err = run_cli(
        capsys, "--ledger", str(ledger_file), "import", "bernstein", str(workdir)
    )
    assert code in (0, 2), err
    stored = b"".join(
        Path(f"{ledger_file}{s}").read_bytes()
        for s in ("", "-wal")
        if Path(f"{ledger_file}{s}").exists()
    )
    assert b"TOPSECRET" not in stored
    code, _, err = run_cli(capsys, "--ledger", str(ledger_file), "verify", "--all", "--json")
    assert code == 2, err  # the run with unparseable lines does not verify; nothing crashes
    assert_one_line(err)
    (workdir / ".sdd").rename(workdir / "real-sdd")
    (workdir / ".sdd").symlink_to(workdir / "real-sdd")
    before = file_state(ledger_file)
    code, _, err = run_cli(
        capsys, "--ledger", str(ledger_file), "import", "bernstein", str(workdir)
    )
    assert (code, err.split("]")[0]) == (65, "error [bernstein-symlink")
    assert file_state(ledger_file) == before


@pytest.mark.parametrize(
    "path", [".sdd/../../escaped.txt", "/tmp/escaped.txt", ".sdd/runs/r/\x00x", "../escaped.txt"]
)
def test_a_tampered_import_table_cannot_make_export_write_outside_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    workdir = tmp_path / "workdir"
    shutil.copytree(BERNSTEIN_FIXTURE / "bernstein-3.23.0-shapes", workdir)
    ledger_file = tmp_path / "ledger.db"
    code, _, err = run_cli(
        capsys, "--ledger", str(ledger_file), "import", "bernstein", f"{workdir}"
    )
    assert code == 0, err
    conn = apsw.Connection(str(ledger_file))
    conn.execute("UPDATE bernstein_files SET path = ? WHERE rowid = 1", (path,))
    conn.close()
    out = tmp_path / "deep" / "out"
    code, _, err = run_cli(capsys, "--ledger", str(ledger_file), "export", "bernstein", str(out))
    assert (code, err.split("]")[0]) == (65, "error [unsafe-path")
    assert_one_line(err)
    assert not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path / "deep" / "escaped.txt").exists()
    assert not Path("/tmp/escaped.txt").exists()


def test_a_ledger_in_a_read_only_folder_is_read_immutable_and_left_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "media"
    ledger_file = make_ledger(folder / "ledger.db", tmp_path / "keys")
    archive = folder / "archive.db"
    assert run_cli(capsys, "--ledger", str(ledger_file), "archive", str(archive), "r")[0] == 0
    before = file_state(ledger_file)
    with read_only_file(folder):
        code, out, err = run_cli(capsys, "--ledger", str(ledger_file), "runs")
        assert code == 0, err
        assert "r" in out
        code, out, err = run_cli(capsys, "--ledger", str(ledger_file), "verify", "--json")
        assert code == 0, err
        assert any("immutable" in note for note in json.loads(out)["notes"])
        code, _, err = run_cli(capsys, "--ledger", str(ledger_file), "checkpoint", "--adopt")
        assert code != 0  # writing stays impossible, and says so in one line
        assert_one_line(err)
        code, _, err = run_cli(capsys, "--ledger", str(archive), "verify", "--all")
        assert code == 0, err
    assert file_state(ledger_file) == before


@pytest.mark.parametrize("swap", ["file", "folder"])
def test_a_workdir_file_swapped_for_a_symlink_after_the_scan_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str
) -> None:
    from agentledger.bernstein import importer

    outside = tmp_path / "outside"
    outside.mkdir()
    workdir = tmp_path / "workdir"
    shutil.copytree(BERNSTEIN_FIXTURE / "bernstein-3.23.0-shapes", workdir)
    run = sorted((workdir / ".sdd" / "runs").iterdir())[0]
    for name in ("journal.jsonl",):
        (outside / name).write_text("TOPSECRET-OUTSIDE-THE-WORKDIR\n")
    real_scan = importer.scan_workdir

    def scan_then_race(*args: Any, **kwargs: Any) -> Any:
        scanned = real_scan(*args, **kwargs)
        if swap == "file":
            (run / "journal.jsonl").unlink()
            (run / "journal.jsonl").symlink_to(outside / "journal.jsonl")
        else:
            run.rename(tmp_path / "moved-run")
            run.symlink_to(outside)
        return scanned

    monkeypatch.setattr(importer, "scan_workdir", scan_then_race)
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger, pytest.raises(InvalidInput) as caught:
        importer.import_workdir(ledger, workdir)
    assert caught.value.code == "bernstein-changed"
    stored = b"".join(
        Path(f"{ledger_file}{s}").read_bytes()
        for s in ("", "-wal")
        if Path(f"{ledger_file}{s}").exists()
    )
    assert b"TOPSECRET" not in stored


def test_a_workdir_file_swapped_for_a_fifo_after_the_scan_never_blocks_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a FIFO for reading waits for a writer: the import held the write lock
    meanwhile. Files are opened without blocking and must be regular files."""
    from agentledger.bernstein import importer

    workdir = tmp_path / "workdir"
    shutil.copytree(BERNSTEIN_FIXTURE / "bernstein-3.23.0-shapes", workdir)
    journal = sorted((workdir / ".sdd" / "runs").iterdir())[0] / "journal.jsonl"
    real_scan = importer.scan_workdir

    def scan_then_race(*args: Any, **kwargs: Any) -> Any:
        scanned = real_scan(*args, **kwargs)
        journal.unlink()
        os.mkfifo(journal)
        return scanned

    monkeypatch.setattr(importer, "scan_workdir", scan_then_race)
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger, pytest.raises(InvalidInput) as caught:
        importer.import_workdir(ledger, workdir)
    assert caught.value.code == "bernstein-changed"
    with Ledger.open(ledger_file) as ledger:
        assert ledger.runs() == []


def test_a_fifo_in_a_workdir_on_disk_reads_as_absent_without_blocking(tmp_path: Path) -> None:
    from agentledger.bernstein.workdir import DirectoryWorkdir

    (tmp_path / ".sdd").mkdir()
    os.mkfifo(tmp_path / ".sdd" / "journal.jsonl")
    assert DirectoryWorkdir(tmp_path).read(".sdd/journal.jsonl") is None


def test_a_two_gigabyte_checkpoint_file_is_refused_unread(tmp_path: Path, capsys: Any) -> None:
    from agentledger.fleet.inputs import read_checkpoints

    ledger_file = make_ledger(tmp_path / "ws" / "ledger.db", tmp_path / "keys")
    huge = tmp_path / "cps" / "cp.txt"
    huge.parent.mkdir()
    with open(huge, "wb") as handle:
        handle.truncate(2 << 30)  # sparse: costs no disk
    before = file_state(ledger_file)
    code, _, err = run_cli(
        capsys, "--ledger", str(ledger_file), "verify", "--checkpoint", str(huge)
    )
    assert code == 64, err  # a malformed file argument, as an oversized trust file
    assert_one_line(err)
    assert "too large" in err
    assert file_state(ledger_file) == before
    assert read_checkpoints(huge.parent) == ({}, ["cp.txt"])


def test_an_endless_evidence_file_is_refused_after_the_cap(
    ledger_file: Path, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--page URL=/dev/zero`` read without end: MemoryError, exit 70. A file named ``-``
    is that file, not stdin."""
    import agentledger.cli.activity as activity_cli

    monkeypatch.setattr(activity_cli, "MAX_EVIDENCE_BYTES", 1 << 20)  # the same path, faster
    led = ("--ledger", str(ledger_file))
    assert run_cli(capsys, *led, "append", "r", "step", '{"n": 1}')[0] == 0
    before = file_state(ledger_file)
    code, _, err = run_cli(
        capsys, *led, "activity", "research", "r", "s1", "--page", "https://a.example=/dev/zero"
    )
    assert code == 65, err
    assert_one_line(err)
    assert "too large for evidence" in err
    assert file_state(ledger_file) == before
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_bytes(b"<p>a page</p>")
    monkeypatch.setattr(sys, "stdin", None)  # read from stdin, it would raise
    code, out, err = run_cli(
        capsys, *led, "activity", "research", "r", "s1", "--page", "https://a.example=-", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["kind"] == "research"


def test_a_proof_whose_entry_holds_nan_is_a_typed_error(tmp_path: Path, capsys: Any) -> None:
    import base64

    ledger_file = make_ledger(tmp_path / "ws" / "ledger.db", tmp_path / "keys")
    with Ledger.open(ledger_file) as ledger:
        run_id = ledger.runs()[0]
    code, out, err = run_cli(capsys, "--ledger", str(ledger_file), "prove", run_id, "0", "--json")
    assert code == 0, err
    bundle = json.loads(out)
    entry = base64.b64decode(bundle["entry"])
    body = json.loads(entry)
    entry = entry.replace(json.dumps(body["ts"]).encode(), b"NaN", 1)
    bundle["entry"] = base64.b64encode(entry).decode()
    proof = tmp_path / "proof.json"
    proof.write_text(json.dumps(bundle))
    code, out, err = run_cli(capsys, "verify-proof", str(proof))
    # Refused as a forgery (its entry no longer hashes to the proven leaf) or as malformed
    # input: a verdict either way, never a crash (exit 70).
    assert code in (2, 65), err
    assert "Traceback" not in err + out


def test_asking_for_a_kind_with_a_lone_surrogate_is_a_typed_error(ledger_file: Path) -> None:
    before = file_state(ledger_file)
    with Ledger.open(ledger_file) as ledger:
        run = ledger.run(ledger.runs()[0])
        with pytest.raises(InvalidInput) as caught:
            list(run.entries(kind="step\ud800"))
        assert caught.value.code == "invalid-text"
    assert file_state(ledger_file) == before


def test_activity_verify_of_forged_evidence_with_the_audit_mirror_dropped_is_diverged(
    tmp_path: Path, capsys: Any
) -> None:
    from tests.activity.activity_testkit import record_every_modality

    path = tmp_path / "ws" / "ledger.db"
    with Ledger.open(path) as ledger:
        record_every_modality(ledger)
    conn = apsw.Connection(str(path))
    conn.execute("DELETE FROM blob_chunks WHERE digest IN (SELECT digest FROM blobs LIMIT 1)")
    conn.execute("DROP TABLE audit_log")
    conn.close()
    before = file_state(path)
    code, _, err = run_cli(capsys, "--ledger", str(path), "activity", "verify", "run-1")
    assert code == 2, err
    assert_one_line(err)
    assert file_state(path) == before


def test_one_trust_parser_a_commented_trust_file_works_for_bernstein_runs_too(
    tmp_path: Path, capsys: Any
) -> None:
    from agentledger.bernstein import import_workdir
    from tests.bernstein.bernstein_testkit import SMALL, SMALL_SIGNER, private_key_file

    path = tmp_path / "ws" / "ledger.db"
    with Ledger.open(path) as ledger:
        import_workdir(ledger, SMALL)
    trust = tmp_path / "signers.keys"
    trust.write_text(f"# bernstein's signer\n{SMALL_SIGNER}  # the fixture's\n")
    trust.chmod(0o600)
    key = private_key_file(SMALL, tmp_path / "audit.key")
    by_file = run_cli(capsys, "--ledger", str(path), "verify", "--json", "--trust", str(trust),
                      "--audit-key", str(key))  # fmt: skip
    by_key = run_cli(capsys, "--ledger", str(path), "verify", "--json", "--trust", SMALL_SIGNER,
                     "--audit-key", str(key))  # fmt: skip
    assert by_file[0] == by_key[0] == 0, by_file[2]
    assert json.loads(by_file[1])["runs"] == json.loads(by_key[1])["runs"]
