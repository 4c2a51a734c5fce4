"""An entry's stored bytes rewritten into JSON nested past any parser's depth, for every
kind a ledger holds, with the byte strings each later check selects rows by: verify
reports the tampered run (exit 2 from the CLI), whichever check reads those bytes, and
never stops on the nesting (``RecursionError``) with the report lost.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw
import pytest

from agentledger import Ledger
from agentledger.bernstein import import_workdir
from agentledger.demo import build_workspace
from tests.bernstein.bernstein_testkit import SMALL, copy_workdir

DEPTH = 200_000


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[str, str, int]]]:
    root = tmp_path_factory.mktemp("deep")
    path = root / "l.db"
    with Ledger.open(path) as ledger:
        build_workspace(ledger, runs=3)
        import_workdir(ledger, copy_workdir(SMALL, root / "wd"))
    conn = apsw.Connection(str(path))
    # One entry of each kind: the last of its run, so no later entry's chain moves it.
    rows = conn.execute(
        "SELECT kind, run_id, max(seq) FROM entries GROUP BY kind ORDER BY kind"
    ).fetchall()
    conn.close()
    return path, [(str(k), str(r), int(s)) for k, r, s in rows]


def test_every_kind_s_bytes_nested_too_deep_are_a_finding_of_their_run(
    source: tuple[Path, list[tuple[str, str, int]]], tmp_path: Path
) -> None:
    path, entries = source
    assert len(entries) >= 5, entries  # the demo's kinds and the import's
    for kind, run_id, seq in entries:
        copy = tmp_path / f"{kind}.db"
        shutil.copy(path, copy)
        # The byte strings the later checks select their rows by are kept (MARKS), so
        # each of those checks reads the tampered row too.
        deep = (
            b'{"kind":"' + kind.encode() + b'","body":{"kind":"data","kind":"ops",'
            b'"kind":"activity.x","kind":"phase.x","mirrored":true,"team_manifest":"t",'
            b'"deep":' + b"[" * DEPTH + b"]" * DEPTH + b"}}"
        )
        conn = apsw.Connection(str(copy))
        conn.execute(
            "UPDATE entries SET bytes = ? WHERE run_id = ? AND seq = ?", (deep, run_id, seq)
        )
        conn.close()
        with Ledger.open(copy) as ledger:
            report = ledger.verify()
        tampered = {v.run_id: v for v in report.runs}[run_id]
        assert any(d.seq == seq for d in tampered.divergences), (kind, tampered.divergences)
