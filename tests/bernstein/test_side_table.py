"""An imported run is verified whether or not its ``bernstein_runs`` row exists.

Which runs were imported is what the native chain pins (each run's ``import.bernstein``
entry, the runs each ``import.bernstein.workdir`` entry lists), not the side table: a
deleted row used to drop a tampered run from ``verify --all`` and ``fsck`` (exit 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from .bernstein_testkit import SMALL, SMALL_SIGNER, copy_workdir, edit_row

RUN = "run-001"


def _tampered_import(tmp_path: Path, cli: Any) -> Path:
    workdir = copy_workdir(SMALL, tmp_path / "workdir")
    edit_row(workdir, RUN, 1, event="forged")  # bernstein's own chain breaks here
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    return ledger


def _delete_row(ledger: Path, run_id: str) -> None:
    conn = apsw.Connection(str(ledger))
    conn.execute("DELETE FROM bernstein_runs WHERE run_id = ?", (run_id,))
    conn.close()


def _checks(report: dict[str, Any], run_id: str) -> set[str]:
    return {
        d["check"]
        for failure in report["failures"]
        if failure["run"] == run_id
        for d in failure["divergences"]
    }


def test_a_deleted_row_does_not_hide_a_tampered_run(tmp_path: Path, cli: Any) -> None:
    ledger = _tampered_import(tmp_path, cli)
    before = cli("verify", "--all", "--compat", "bernstein", "--json", ledger=ledger)
    assert before.code == 2
    _delete_row(ledger, RUN)
    for args in (("--compat", "bernstein"), ()):
        result = cli("verify", "--all", *args, "--json", ledger=ledger)
        assert result.code == 2, (args, result.out[-2000:])
        checks = _checks(result.json(), RUN)
        assert "bernstein.anchor.run_row" in checks, checks
        assert "bernstein.chain" in checks, checks


def test_fsck_fails_on_a_deleted_row(tmp_path: Path, cli: Any) -> None:
    ledger = _tampered_import(tmp_path, cli)
    _delete_row(ledger, RUN)
    result = cli("fsck", "--compat", "bernstein", "--json", ledger=ledger)
    assert result.code == 2
    assert {"bernstein.anchor.run_row", "bernstein.chain"} <= _checks(result.json()["verify"], RUN)


def test_a_clean_run_without_its_row_is_only_the_missing_row(tmp_path: Path, cli: Any) -> None:
    workdir = copy_workdir(SMALL, tmp_path / "workdir")
    ledger = tmp_path / "ledger.db"
    assert cli("import", "bernstein", str(workdir), ledger=ledger).code == 0
    _delete_row(ledger, RUN)
    result = cli("verify", RUN, "--trust", SMALL_SIGNER, "--json", ledger=ledger)
    assert result.code == 2
    assert _checks(result.json(), RUN) == {"bernstein.anchor.run_row"}
