"""One exit-code rule for every command, through the installed command in a subprocess:
0 ok, 1 not found, 2 diverged, 64 usage (file arguments checked before any work), 65
invalid data, 130 interrupted. One line on stderr, never a traceback (``--debug`` shows one).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentledger import Ledger
from agentledger.demo import build_workspace, plant_corruptions
from agentledger.limits import MAX_DOCUMENT_BYTES

from ..bernstein.bernstein_testkit import SMALL

AGENTLEDGER = Path(sys.executable).parent / "agentledger"


def run(*args: str, env: dict[str, str], stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AGENTLEDGER), *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AGENTLEDGER_HOME": str(tmp_path / "keys"),
        "AGENTLEDGER_CACHE": str(tmp_path / "cache"),
        "AGENTLEDGER_LEDGER": str(tmp_path / "ws" / "ledger.db"),
        "NO_COLOR": "1",
    }


@pytest.fixture
def workspace(tmp_path: Path, env: dict[str, str]) -> Path:
    path = Path(env["AGENTLEDGER_LEDGER"])
    with Ledger.open(path) as ledger:
        build_workspace(ledger, 10)
    return path


def one_line(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error ["), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def state(path: Path) -> dict[str, bytes]:
    """The ledger's bytes: the file and a non-empty WAL (SQLite's shared-memory index and an
    empty WAL left by a reader say nothing about the content)."""
    return {
        p.name: p.read_bytes()
        for p in sorted(path.parent.iterdir())
        if not p.name.endswith("-shm") and not (p.name.endswith("-wal") and not p.stat().st_size)
    }


def key_files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def test_0_ok_and_1_not_found(workspace: Path, env: dict[str, str]) -> None:
    assert run("runs", "--limit", "1", env=env).returncode == 0
    missing = run("show", "no-such-run", env=env)
    assert missing.returncode == 1
    one_line(missing)
    no_ledger = run("runs", "--ledger", str(workspace.parent / "absent.db"), env=env)
    assert no_ledger.returncode == 1
    one_line(no_ledger)


def test_2_diverged(workspace: Path, env: dict[str, str]) -> None:
    with Ledger.open(workspace) as ledger:
        plant_corruptions(ledger)
    assert run("verify", "--json", env=env).returncode == 2


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "--html", "/no/such/dir/r.html"],
        ["verify", "--trust", "garbage"],
        ["verify", "--trust", "ed25519:xyz"],
        ["verify", "--audit-key", "/no/such/audit.key"],
        ["verify", "--checkpoint", "/no/such/cp.txt"],
        ["verify", "--checkpoint", "MALFORMED"],
        ["verify", "--audit-key", "SHORTKEY"],
        ["verify", "--tsa-bundle", "JUNK"],
        ["activity", "verify", "run-00001", "--trust", "/no/such/trust.keys"],
        ["fsck", "--audit-key", "/no/such/audit.key"],
        ["checkpoint", "--export", "/no/such/dir/cp.txt"],
        ["archive", "/dev/null/out.db"],
        ["import", "bernstein", "/no/such/workdir"],
        ["verify-proof", "/no/such/proof.json"],
        ["phase", "compile", "/no/such/input.json"],
        ["team", "load", "/no/such/team.toml"],
        ["team", "load", "/tmp/" + "x" * 300],  # a name the system cannot look up
        ["bernstein", "audit-verify", "--witness-state", "/tmp/" + "x" * 300],
        ["archive", "/tmp/" + "x" * 300 + "/out.db"],
        ["log", "export", "/tmp/" + "x" * 300],
        ["verify-proof", "LOOP"],
        ["runs", "--limit", "-1"],
        ["runs", "--limit", "99999999999999999999"],
        ["runs", "--status", "maybe"],
        ["no-such-command"],
    ],
)
def test_64_a_bad_argument_is_named_before_any_work(
    workspace: Path, env: dict[str, str], tmp_path: Path, args: list[str]
) -> None:
    if "MALFORMED" in args:
        bad = tmp_path / "cp.txt"
        bad.write_text("not a checkpoint\n")
        args = [str(bad) if a == "MALFORMED" else a for a in args]
    if "SHORTKEY" in args:  # a key too short to be an audit key: a malformed file argument
        short = tmp_path / "audit.key"
        short.write_bytes(b"secret")
        short.chmod(0o600)
        args = [str(short) if a == "SHORTKEY" else a for a in args]
    if "JUNK" in args:  # a ledger without sealed bernstein runs never needed to read it
        junk = tmp_path / "tsa.pem"
        junk.write_text("junk\n")
        args = [str(junk) if a == "JUNK" else a for a in args]
    if "LOOP" in args:  # a link to itself: ELOOP, not "no such file" nor a crash
        loop = tmp_path / "loop.json"
        loop.symlink_to(loop)
        args = [str(loop) if a == "LOOP" else a for a in args]
    before = state(workspace)
    result = run(*args, env=env)
    assert result.returncode == 64, result.stderr
    one_line(result)
    named = [a for a in args if "/" in a]
    assert all(path in result.stderr for path in named), result.stderr
    assert state(workspace) == before
    # Checked before the ledger is opened: the same error with no ledger at all.
    elsewhere = {**env, "AGENTLEDGER_LEDGER": str(tmp_path / "none" / "ledger.db")}
    assert run(*args, env=elsewhere).returncode == 64
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["verify", "--html"],
        ["checkpoint", "--export"],
        ["fleet", "verify", "LEDGER", "--html"],
        ["archive"],
    ],
)
@pytest.mark.parametrize(
    "target", ["the ledger", "its WAL", "its journal", "another ledger", "a key", "key folder"]
)
def test_64_an_output_never_lands_on_a_database_or_among_the_keys(
    workspace: Path, env: dict[str, str], tmp_path: Path, command: list[str], target: str
) -> None:
    """A report written over the ledger destroyed it (exit 0, "HTML report written");
    over the install key, the install's identity. Refused before any work, both intact."""
    other = tmp_path / "other.db"
    with Ledger.open(other, key_dir=tmp_path / "other-keys") as ledger:
        ledger.run("r").append("step", {"n": 1})
    keys = Path(env["AGENTLEDGER_HOME"])
    path = {
        "the ledger": workspace,
        "its WAL": Path(f"{workspace}-wal"),
        "its journal": Path(f"{workspace}-journal"),
        "another ledger": other,
        "a key": keys / "install.key",
        "key folder": keys / "report.html",
    }[target]
    before = state(workspace), other.read_bytes(), key_files(keys)
    args = [str(workspace) if a == "LEDGER" else a for a in command]
    result = run(*args, str(path), env=env)
    assert result.returncode == 64, result.stderr
    one_line(result)
    assert str(path) in result.stderr
    assert ("key folder" if target in ("a key", "key folder") else "SQLite database") in (
        result.stderr
    )
    after = state(workspace), other.read_bytes(), key_files(keys)
    assert after == before
    assert not (keys / "report.html").exists()


@pytest.mark.parametrize(
    "link",
    [
        "a symlink to its WAL",
        "a hard link to its WAL",
        "a symlink to its -shm",
        "a dangling symlink to its journal",
    ],
)
def test_64_an_output_never_lands_on_a_database_file_by_another_name(
    workspace: Path, env: dict[str, str], tmp_path: Path, link: str
) -> None:
    """``--html report.html``, a symlink to the ledger's WAL, wrote the report over the
    WAL while a reader kept it: appends already acknowledged were lost. Whatever name
    leads to a database's file (a symlink, a hard link) is refused, and the WAL kept."""
    import apsw

    reader = apsw.Connection(str(workspace))  # keeps the WAL from being folded away
    reader.execute("SELECT count(*) FROM entries").fetchall()
    for n in range(3):
        assert run("-q", "append", "late", "step", f'{{"n": {n}}}', env=env).returncode == 0
    wal, shm = Path(f"{workspace}-wal"), Path(f"{workspace}-shm")
    assert wal.stat().st_size > 0
    out = tmp_path / "report.html"
    if link == "a hard link to its WAL":
        os.link(wal, out)
    else:
        out.symlink_to(
            {"a symlink to its WAL": wal, "a symlink to its -shm": shm}.get(
                link, Path(f"{workspace}-journal")
            )
        )
    before = wal.read_bytes(), shm.read_bytes()
    for command in (["verify", "--html"], ["checkpoint", "--export"]):
        result = run(*command, str(out), env=env)
        assert result.returncode == 64, result.stderr
        one_line(result)
        assert "SQLite database" in result.stderr
    assert (wal.read_bytes(), shm.read_bytes()) == before
    assert not Path(f"{workspace}-journal").exists()
    reader.close()
    rows = run("--json", "show", "late", env=env)
    assert rows.returncode == 0, rows.stderr
    assert '"seq": 2' in rows.stdout


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_file_sqlite_keeps_beside_a_database_never_becomes_a_ledger(
    workspace: Path, env: dict[str, str], suffix: str
) -> None:
    """``init --ledger ledger.db-wal`` made a ledger there, which SQLite resets or deletes
    the next time the database beside it is opened (checked below, with apsw alone)."""
    companion = Path(f"{workspace}{suffix}")
    existed = companion.exists()
    before = state(workspace)
    for args in (["init"], ["append", "r", "step", "{}"], ["verify"]):
        result = run("--ledger", str(companion), *args, env=env)
        assert result.returncode == 65, result.stderr
        one_line(result)
        assert f"beside the database {workspace}" in result.stderr
    assert companion.exists() == existed
    assert state(workspace) == before


def test_sqlite_deletes_a_database_kept_at_another_ones_journal_or_wal(tmp_path: Path) -> None:
    """Why the rule above: whatever sits at a database's ``-journal`` or ``-wal`` is
    SQLite's, and opening the database removes it."""
    import apsw

    main = apsw.Connection(str(tmp_path / "x.db"))
    main.execute("PRAGMA journal_mode = WAL").fetchall()
    main.execute("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
    main.close()
    for suffix in ("-journal", "-wal"):
        squatter = apsw.Connection(str(tmp_path / f"x.db{suffix}"))
        squatter.execute("CREATE TABLE kept (x); INSERT INTO kept VALUES (42)")
        squatter.close()
    main = apsw.Connection(str(tmp_path / "x.db"))
    assert main.execute("SELECT x FROM t").fetchall() == [(1,)]
    main.close()
    assert not (tmp_path / "x.db-journal").exists()
    assert not (tmp_path / "x.db-wal").exists()


def test_a_checkpoint_file_that_is_the_ledger_itself_is_refused_unopened(
    workspace: Path, tmp_path: Path
) -> None:
    """Opening and closing one of its own ledger's files would drop the process's locks
    on it (sqlite_files.py): the verify refuses the path by its inode, never reading it."""
    from agentledger.errors import InvalidInput
    from agentledger.verify import VerifyOptions

    link = tmp_path / "cp.txt"
    link.symlink_to(workspace)
    with Ledger.open(workspace) as ledger:
        for given in (workspace, link, Path(f"{workspace}-wal")):
            with pytest.raises(InvalidInput, match="a file of a ledger this process has open"):
                ledger.verify(options=VerifyOptions(checkpoint_file=given))


def test_65_invalid_data_and_debug_shows_a_traceback(workspace: Path, env: dict[str, str]) -> None:
    before = state(workspace)
    result = run("append", "run-00001", "step", "{not json", env=env)
    assert result.returncode == 65
    one_line(result)
    piped = run("append", "run-00001", "step", "-", env=env, stdin=b"[1, 2]")
    assert piped.returncode == 65
    assert state(workspace) == before
    debug = run("--debug", "append", "run-00001", "step", "{not json", env=env)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_65_an_entry_body_on_stdin_is_read_no_further_than_a_json_document(
    workspace: Path, env: dict[str, str]
) -> None:
    # `append RUN KIND -` read stdin whole: an endless pipe filled memory.
    before = state(workspace)
    body = b'{"a": "' + b"x" * MAX_DOCUMENT_BYTES + b'"}'
    result = run("append", "run-00001", "step", "-", env=env, stdin=body)
    assert result.returncode == 65, result.stderr
    one_line(result)
    assert "too-large" in result.stderr and "stdin" in result.stderr
    assert state(workspace) == before


@pytest.mark.parametrize("command", [["verify"], ["bernstein", "audit-verify"], ["fsck"]])
@pytest.mark.parametrize("key", ["/dev/zero", "FIFO", "BIG"])
def test_an_audit_key_file_is_read_no_further_than_a_key(
    workspace: Path, env: dict[str, str], tmp_path: Path, command: list[str], key: str
) -> None:
    # `--audit-key /dev/zero` was read whole to check its length: memory ran out (here
    # capped at 2 GiB, so that a regression fails this test rather than the machine). A
    # pipe with no writer waited forever; one with a writer was used up by that check.
    if key == "FIFO":
        key = str(tmp_path / "key.fifo")
        os.mkfifo(key)
    elif key == "BIG":
        key = str(tmp_path / "big.key")
        Path(key).write_bytes(b"k" * (1 << 20))
    before = state(workspace)
    result = subprocess.run(
        [str(AGENTLEDGER), *command, "--audit-key", key],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)),
    )
    one_line(result)
    assert key in result.stderr
    if key.endswith("big.key"):
        assert result.returncode == 65 and "too-large" in result.stderr, result.stderr
    else:
        assert result.returncode == 64 and "not a regular file" in result.stderr, result.stderr
    assert state(workspace) == before


def test_130_ctrl_c_leaves_nothing_behind(tmp_path: Path, env: dict[str, str]) -> None:
    """SIGINT while demo builds its ledger: exit 130, no ledger and no temporary file."""
    target = tmp_path / "demo" / "ledger.db"
    process = subprocess.Popen(
        [str(AGENTLEDGER), "--ledger", str(target), "demo", "--runs", "20000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(target.parent.glob(".ledger.db.*")):
        time.sleep(0.05)
    assert any(target.parent.glob(".ledger.db.*")), "the demo never started building"
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    assert list(target.parent.iterdir()) == []


def _wait_until_open(pid: int, path: Path) -> bool:
    """Poll the process's open files (Linux /proc) until it holds ``path``."""
    target = str(path.resolve())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            return False  # the process is gone
        for name in names:
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}") == target:
                    return True
            except OSError:
                continue
        time.sleep(0.001)
    return False


@pytest.mark.parametrize("jobs", ["1", "2"])  # 2: the blob pass runs beside the b-tree check
def test_130_ctrl_c_during_verify_leaves_the_ledger_untouched(
    tmp_path: Path, env: dict[str, str], jobs: str
) -> None:
    path = Path(env["AGENTLEDGER_LEDGER"])
    with Ledger.open(path) as ledger:
        build_workspace(ledger, 4000)
    before = state(path)
    process = subprocess.Popen(
        [str(AGENTLEDGER), "verify", "--jobs", jobs],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # Interrupted the moment it has the ledger open: inside the verify, not before it.
    assert _wait_until_open(process.pid, path), "verify never opened the ledger"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert state(path) == before


@pytest.mark.parametrize(
    "command", [["init"], ["append", "r", "step"], ["import", "bernstein", "WD"]]
)
def test_a_ledger_path_that_is_a_dangling_symlink_is_refused_typed(
    tmp_path: Path, env: dict[str, str], command: list[str]
) -> None:
    # O_CREAT | O_EXCL on a symlink to a missing file fails with EEXIST: init and every
    # writer exited 70 (FileExistsError).
    link = tmp_path / "ws" / "ledger.db"
    link.parent.mkdir()
    link.symlink_to(tmp_path / "elsewhere" / "ledger.db")
    args = [str(SMALL) if a == "WD" else a for a in command]
    result = run(*args, env=env)
    assert result.returncode == 65, result.stderr
    one_line(result)
    assert "symbolic link" in result.stderr
    assert link.is_symlink() and not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("command", [["init"], ["append", "r", "step"]])
def test_a_ledger_that_cannot_be_created_there_is_a_typed_error(
    tmp_path: Path, env: dict[str, str], command: list[str]
) -> None:
    # A parent that is a file (or a folder that cannot be made): exit 70, NotADirectoryError
    # or FileExistsError from the folder's creation.
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a folder")
    result = run("--ledger", str(blocker / "ws" / "ledger.db"), *command, env=env)
    assert result.returncode == 65, result.stderr
    one_line(result)
    assert "cannot create the ledger" in result.stderr and str(blocker) in result.stderr
    assert blocker.read_bytes() == b"not a folder"


@pytest.mark.parametrize("where", ["option", "after", "env"])
def test_a_key_folder_that_cannot_be_made_is_a_usage_error(
    tmp_path: Path, env: dict[str, str], where: str
) -> None:
    # --home under a file: the first command that needed a key exited 70
    # (NotADirectoryError), after creating the ledger.
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a folder")
    home = str(blocker / "keys")
    args = {
        "option": ["--home", home, "append", "r", "step"],
        "after": ["append", "r", "step", "--home", home],
        "env": ["append", "r", "step"],
    }[where]
    result = run(*args, env={**env, "AGENTLEDGER_HOME": home} if where == "env" else env)
    assert result.returncode == 64, result.stderr
    one_line(result)
    assert str(blocker) in result.stderr
    assert not Path(env["AGENTLEDGER_LEDGER"]).exists()  # refused before any work


@pytest.mark.parametrize(
    "args",
    [
        ["--ledger", "LONG", "init"],
        ["--home", "LONG", "keys", "show"],
        ["runs", "--ledger", "LONG"],
    ],
)
def test_a_global_path_the_system_cannot_look_up_is_a_usage_error(
    tmp_path: Path, env: dict[str, str], args: list[str]
) -> None:
    # A name past the system's limit: exit 70 (OSError: File name too long) from the first
    # open, after click had let it through as "absent".
    long = str(tmp_path / ("x" * 3000))
    result = run(*[long if a == "LONG" else a for a in args], env=env)
    assert result.returncode == 64, result.stderr
    one_line(result)
    assert "too long" in result.stderr
