"""The same verdicts whether the workdir is read on disk (every check in Python) or from
the ledger (observations reattached in Rust against the store index)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agentledger import Ledger
from agentledger.bernstein import (
    DirectoryWorkdir,
    LedgerWorkdir,
    RunResult,
    import_workdir,
    verify_runs,
)

from .bernstein_testkit import SMALL, cas, copy_workdir, edit_row, lines, write_lines

PAGE = "sha256:ccd60aceaca4c2af81d38c52fb6867d86b28406627248d9b7d52cc66ab12b351"
RECEIPT = "sha256:67748cc06cb345a525a63b2ad4fb96a351b85675b46e5ca056de77ce79061090"


def _drop_page(wd: Path) -> None:
    cas(wd, PAGE).unlink()


def _edit_page(wd: Path) -> None:
    cas(wd, PAGE).write_bytes(b"edited")


def _drop_receipt(wd: Path) -> None:
    cas(wd, RECEIPT).unlink()


def _drop_store(wd: Path) -> None:
    shutil.rmtree(wd / ".sdd" / "cas")


def _edit_row(wd: Path) -> None:
    edit_row(wd, "run-001", 3, reason_code="forged")


def _escape_name(wd: Path) -> None:
    row = json.loads(lines(wd, "run-002")[2])
    row["observations"][0]["content_hash"] = "sha256:../cas/" + PAGE.split(":")[1]
    rows = lines(wd, "run-002")
    rows[2] = json.dumps(row) + "\n"
    write_lines(wd, "run-002", rows)


TAMPERS: dict[str, Callable[[Path], None]] = {
    "none": lambda wd: None,
    "drop-page": _drop_page,
    "edit-page": _edit_page,
    "drop-receipt": _drop_receipt,
    "drop-store": _drop_store,
    "edit-row": _edit_row,
    "escaping-name": _escape_name,
}


def summary(results: list[RunResult]) -> list[tuple[object, ...]]:
    return [
        (
            r.run_id,
            r.compat_code,
            r.strict_code,
            sorted((f.step, f.check, f.field) for f in r.findings),
            [
                (s.stage_id, s.ok, s.evidence_reattached, s.signed_receipt_verified)
                for s in r.stages
            ],
        )
        for r in results
    ]


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_disk_and_ledger_verdicts_agree(tmp_path: Path, tamper: str) -> None:
    workdir = copy_workdir(SMALL, tmp_path / "wd")
    TAMPERS[tamper](workdir)
    runs = ["run-001", "run-002", "run-003"]
    on_disk = verify_runs(DirectoryWorkdir(workdir), runs)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        import_workdir(ledger, workdir)
        with ledger.db.snapshot() as conn:
            in_ledger = verify_runs(LedgerWorkdir(conn, ledger.blobs), runs)
    assert summary(in_ledger) == summary(on_disk)
