"""Security properties: keys stay private and out of the ledger, verify never touches the
signing key, nothing captured or secret leaks into reports, and no SQL is built from input."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import apsw
import pytest

from agentledger import Ledger, keys
from agentledger.cli import main
from agentledger.errors import Diverged
from agentledger.gc import collect, referenced_digests
from tests.activity.activity_testkit import ARTIFACT_SECRET, CAPTURED, record_every_modality


@pytest.fixture
def key_home(tmp_path: Path) -> Path:
    return tmp_path / "keys"  # the conftest's AGENTLEDGER_HOME


@pytest.fixture
def recorded(tmp_path: Path, key_home: Path) -> Path:
    """A ledger holding one stage of every modality (signed receipts, audit mirror)."""
    path = tmp_path / "ws" / "ledger.db"
    with Ledger.open(path, key_dir=key_home) as ledger:
        record_every_modality(ledger)
        ledger.run("plain").append_many([("step", {"i": i}) for i in range(50)])
    return path


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _secrets(key_home: Path) -> list[bytes]:
    """The secret key material, as hex text and as raw bytes."""
    seed_hex = (key_home / "install.key").read_bytes().strip()
    audit = (key_home / "audit.key").read_bytes().strip()
    return [seed_hex, bytes.fromhex(seed_hex.decode()), audit]


def test_key_files_and_folder_are_private_and_the_ledger_and_its_wal_are_0600(
    recorded: Path, key_home: Path
) -> None:
    assert stat.S_IMODE(key_home.stat().st_mode) == 0o700
    for name in ("install.key", "audit.key", "install.pub"):
        assert stat.S_IMODE((key_home / name).stat().st_mode) == 0o600, name
    with Ledger.open(recorded) as ledger:
        ledger.run("plain").append("step", {})
        for suffix in ("", "-wal", "-shm"):
            mode = stat.S_IMODE(Path(f"{recorded}{suffix}").stat().st_mode)
            assert mode == 0o600, (suffix, oct(mode))


def test_verify_never_reads_or_creates_the_signing_key(
    recorded: Path, key_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    opened: list[str] = []
    real_read = keys._read_private

    def spy(path: Path) -> bytes:
        opened.append(Path(path).name)
        if Path(path).name == keys.INSTALL_KEY:
            raise AssertionError("verify read the signing key")
        return real_read(path)

    monkeypatch.setattr(keys, "_read_private", spy)
    listing = sorted(p.name for p in key_home.iterdir())
    code, _, err = _cli(capsys, "--ledger", str(recorded), "verify", "--all")
    assert code == 0, err
    code, _, err = _cli(capsys, "--ledger", str(recorded), "activity", "verify", "run-1")
    assert code == 0, err
    assert keys.INSTALL_KEY not in opened
    assert sorted(p.name for p in key_home.iterdir()) == listing
    # A reviewer without any key folder creates none either.
    reviewer = recorded.parent / "reviewer-keys"
    public = (key_home / "install.pub").read_text().strip()
    code, _, err = _cli(
        capsys, "--home", str(reviewer), "--ledger", str(recorded), "verify", "--trust", public
    )
    assert not reviewer.exists()


def test_a_foreign_or_group_writable_public_key_file_is_refused(
    recorded: Path, key_home: Path, capsys: Any
) -> None:
    pub = key_home / "install.pub"
    pub.chmod(0o620)
    code, _, err = _cli(capsys, "--ledger", str(recorded), "verify", "--all")
    assert code == 65 and "[key-file]" in err
    pub.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(pub, 65534, 65534)
        code, _, err = _cli(capsys, "--ledger", str(recorded), "verify", "--all")
        assert code == 65 and "[key-file]" in err
        os.chown(pub, 0, 0)
    assert _cli(capsys, "--ledger", str(recorded), "verify", "--all")[0] == 0


def test_no_key_material_or_captured_bytes_in_the_ledger_reports_or_audit_mirror(
    recorded: Path, key_home: Path, tmp_path: Path, capsys: Any
) -> None:
    secret_keys = _secrets(key_home)
    audit_rows = apsw.Connection(str(recorded)).execute("SELECT * FROM audit_log").fetchall()
    assert audit_rows
    audit_text = repr(audit_rows).encode()
    for captured in CAPTURED:
        assert captured not in audit_text
    assert ARTIFACT_SECRET.encode() not in audit_text
    reports = []
    for args in (
        ["verify", "--all", "--json"],
        ["verify", "run-1", "--html", str(tmp_path / "report.html")],
        ["activity", "verify", "run-1", "--json"],
        ["show", "run-1", "--json"],
        ["runs", "--json"],
        ["keys", "show", "--json"],
        ["checkpoint"],
        ["fsck"],
    ):
        code, out, err = _cli(capsys, "--ledger", str(recorded), *args)
        assert code == 0, (args, err)
        reports.append((out + err).encode())
    reports.append((tmp_path / "report.html").read_bytes())
    ledger_bytes = b"".join(
        Path(f"{recorded}{s}").read_bytes() for s in ("", "-wal") if Path(f"{recorded}{s}").exists()
    )
    for secret in secret_keys:
        assert secret not in ledger_bytes
        for report in reports:
            assert secret not in report
    for report in reports:
        for captured in CAPTURED:
            assert captured not in report


@pytest.mark.parametrize("name", ["install.key", "audit.key"])
def test_a_malformed_key_file_is_refused_without_printing_its_content(
    tmp_path: Path, key_home: Path, capsys: Any, name: str
) -> None:
    secret = "5ec7e7" * 5 + "ab"  # 32 characters: neither a seed nor a long enough audit key
    key_home.mkdir(mode=0o700)
    (key_home / name).write_text(secret)
    (key_home / name).chmod(0o600)
    trust = tmp_path / "trust.keys"
    trust.write_text("ed25519:" + secret + "\n")
    page = tmp_path / "in.csv"
    page.write_bytes(b"a,b\n")
    ledger = str(tmp_path / "ledger.db")
    outputs = [
        _cli(capsys, "--ledger", ledger, "activity", "data", "r", "d", "--input", f"i={page}",
             "--step", "s", "--output", f"o={page}"),
        _cli(capsys, "--ledger", ledger, "keys", "export"),
        _cli(capsys, "--ledger", ledger, "verify", "--trust", str(trust)),
        _cli(capsys, "--ledger", ledger, "verify", "--audit-key", str(key_home / name)),
        _cli(capsys, "--ledger", ledger, "verify", "--trust", "ed25519:" + secret),
    ]  # fmt: skip
    assert any(
        code in (64, 65) for code, _, _ in outputs
    )  # malformed: an argument (64) or data (65)
    for _, out, err in outputs:
        assert secret not in out + err
        assert "Traceback" not in err


def test_hostile_table_names_in_a_ledger_file_are_never_run_as_sql(
    recorded: Path, tmp_path: Path, key_home: Path
) -> None:
    """gc and archive read table and column names from the file; a name is data, not SQL."""
    hostile = 'x"); DELETE FROM entries; --'
    conn = apsw.Connection(str(recorded))
    quoted = '"' + hostile.replace('"', '""') + '"'
    conn.execute(f'CREATE TABLE {quoted} ({quoted} TEXT, "b""" TEXT)')
    conn.execute(f"INSERT INTO {quoted} VALUES ('blake3:' || hex(zeroblob(32)), 'x')")
    before = conn.execute("SELECT count(*) FROM entries").fetchall()[0][0]
    conn.close()
    # The scan of every table for digests quotes each name it reads.
    conn = apsw.Connection(str(recorded))
    assert "blake3:" + "00" * 32 in referenced_digests(conn)
    assert conn.execute("SELECT count(*) FROM entries").fetchall()[0][0] == before
    conn.close()
    # And a table agentledger did not create is a finding: gc and archive refuse the file.
    with Ledger.open(recorded, key_dir=key_home) as ledger:
        with pytest.raises(Diverged):
            collect(ledger)
        report = ledger.verify(jobs=1)
        assert {d.check for d in report.workspace} == {"schema.altered"}
    conn = apsw.Connection(str(recorded))
    assert conn.execute("SELECT count(*) FROM entries").fetchall()[0][0] == before
    conn.close()
    archive = tmp_path / "archive.db"
    assert main(["--ledger", str(recorded), "archive", str(archive), "run-1"]) == 2
    assert not archive.exists()


def test_hostile_strings_in_a_tampered_ledger_are_shown_escaped_never_as_markup(
    tmp_path: Path, capsys: Any
) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        ledger.run("r").append_many([("step", {"i": i, "note": "fine"}) for i in range(3)])
    conn = apsw.Connection(str(path))
    hostile = "<script>alert(1)</script>[link=https://evil.example]click[/link]"
    conn.execute("UPDATE entries SET kind = ? WHERE seq = 1", ("<img src=x onerror=alert(1)>",))
    conn.execute(
        "UPDATE entries SET bytes = CAST(replace(CAST(bytes AS TEXT), 'fine', ?) AS BLOB) "
        "WHERE seq = 2",
        (hostile,),
    )
    conn.close()
    report = tmp_path / "report.html"
    code, out, _ = _cli(capsys, "--ledger", str(path), "verify", "--html", str(report))
    assert code == 2
    html = report.read_text()
    for raw in ("<script>alert", "<img", 'href="https://evil'):
        assert raw not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    code, out, _ = _cli(capsys, "--ledger", str(path), "show", "r")
    assert code == 2  # show verifies what it shows: the edited entries diverge
    assert "[link=https://evil.example]click[/link]" in out  # printed as text, not a link
