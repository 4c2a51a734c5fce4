"""Archived audit segments (``.sdd/audit/archive/*.jsonl.gz``) are hostile input: one that
does not inflate, or inflates past the read limit, is a finding named on that archive,
never a crash and never memory without end."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from agentledger import limits
from agentledger.bernstein.workdir import (
    OVERSIZED_ARCHIVE,
    UNDECODABLE_ARCHIVE,
    DirectoryWorkdir,
)

from .bernstein_testkit import SMALL, copy_workdir, import_and_verify

KEY = SMALL / "audit.key"
ARCHIVE = ".sdd/audit/archive/2026-11-28.jsonl.gz"


def _with_archive(tmp_path: Path, data: bytes) -> Path:
    workdir = copy_workdir(SMALL, tmp_path / "workdir")
    (workdir / ARCHIVE).parent.mkdir(parents=True)
    (workdir / ARCHIVE).write_bytes(data)
    return workdir


def _corrupt() -> bytes:
    """A gzip header over deflate data that zlib rejects mid-stream (``zlib.error``)."""
    data = bytearray(gzip.compress(b'{"a": 1}\n' * 10_000))
    data[20:40] = bytes(20)
    return bytes(data)


def _segment(workdir: Path) -> bytes:
    return dict(DirectoryWorkdir(workdir).audit_segments())[ARCHIVE]


def test_an_archive_is_read_inflated_up_to_the_limit(tmp_path: Path) -> None:
    lines = b'{"a": 1}\n' * 100
    assert _segment(_with_archive(tmp_path, gzip.compress(lines))) == lines


def test_an_archive_that_does_not_inflate_reads_as_a_line_no_verifier_accepts(
    tmp_path: Path,
) -> None:
    assert _segment(_with_archive(tmp_path / "a", _corrupt())) == UNDECODABLE_ARCHIVE
    assert _segment(_with_archive(tmp_path / "b", b"\x1f\x8b")) == UNDECODABLE_ARCHIVE


def test_archives_inflate_to_the_limit_and_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = b'{"a": 1}\n' * 1_000  # 9,000 bytes from a few dozen
    workdir = _with_archive(tmp_path, gzip.compress(lines))
    monkeypatch.setattr(limits, "MAX_INFLATED_BYTES", len(lines))
    assert _segment(workdir) == lines
    monkeypatch.setattr(limits, "MAX_INFLATED_BYTES", len(lines) - 1)
    assert _segment(workdir) == OVERSIZED_ARCHIVE


@pytest.mark.parametrize("kind", ["corrupt", "oversized"])
def test_verify_names_the_archive_instead_of_crashing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    data = _corrupt() if kind == "corrupt" else gzip.compress(b"\n" * 100_000)
    if kind == "oversized":
        monkeypatch.setattr(limits, "MAX_INFLATED_BYTES", 1_000)
    outcome = import_and_verify(_with_archive(tmp_path, data), tmp_path / "l.db", key=KEY)
    assert "bernstein.audit.chain" in outcome.workspace, outcome.workspace
