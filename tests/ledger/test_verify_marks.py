"""The journal pass's marks select exactly the rows the later checks' own queries select."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentledger import Ledger, _core
from agentledger.storage import native
from agentledger.verify import audit, phase, receipts, stages, team
from agentledger.verify.journal_pass import ALL_ROWS, COLUMNS, MARKS

from ..raw_entries import append_unvetted

SQL = ALL_ROWS.format(columns=COLUMNS)

BODIES: list[tuple[str, dict[str, Any]]] = [
    ("activity.result", {"kind": "data", "team_manifest": "blake3:00", "mirrored": True}),
    ("activity.result", {"kind": "ops", "note": '"kind":"data"'}),
    ("activity.result", {"kind": "research", "mirrored": False}),
    ("activity.refused", {"kind": "data", "mirrored": True}),
    ("step", {"kind": "data", "mirrored": True, "team_manifest": "x"}),
    ("activity.result", {"nested": {"kind": "ops", "team_manifest": "y"}}),
]


def journal(ledger: Ledger, conn: Any, limit: int = 100_000, batch_rows: int = 16_384) -> Any:
    """The whole journal pass, recording the marks (at most ``limit`` rows each)."""
    return _core.verify_journal(
        native.handle(conn),
        ledger.id,
        SQL,
        [((), None)],
        marks=list(MARKS.values()),
        marked_limit=limit,
        batch_rows=batch_rows,
    )


def test_marks_match_the_sql_each_check_would_run(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        for n in range(3):
            append_unvetted(ledger, f"r{n}", BODIES[n:] + BODIES[:n])
        with ledger.db.write() as conn:  # phase kinds are reserved to the phase API
            ledger.run("r0")._append_locked(conn, [("phase.authorize", {"kind": "phase.x"})])
        with ledger.db.snapshot() as conn:
            done = journal(ledger, conn, batch_rows=4)  # across batches
            for index, (kinds, needle) in enumerate(MARKS.values()):
                marks = ",".join("?" * len(kinds))
                expected = conn.execute(
                    f"SELECT run_id, seq FROM entries WHERE kind IN ({marks}) "
                    "AND instr(bytes, ?) > 0 ORDER BY run_id, seq",
                    (*kinds, needle),
                ).fetchall()
                assert expected and done.marked(index) == expected
            # The checks' own scans use these same strings.
            assert MARKS["mirrored"] == (
                ("activity.result", "activity.refused"),
                audit.MIRRORED_MARK,
            )
            assert MARKS["team_manifest"][1].decode() in team.ALL_PINNED
            assert MARKS["receipt_data"][1].decode() in receipts.ALL_SIGNED
            assert MARKS["receipt_ops"][1].decode() in receipts.ALL_SIGNED
            assert MARKS["stage"][1].decode() in stages.ALL_STAGES
            assert MARKS["phase"][1].decode() in phase.ALL_PHASE_ENTRIES
            assert journal(ledger, conn, limit=1).marked(0) is None


def test_referenced_digests_are_gathered_once_across_batches(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        digest = ledger.blobs.put(b"page")
        body = {
            "observations": [{"kind": "page", "ref": "u", "content_hash": digest}],
            "evidence_set_hash": _core.evidence_set_hash([digest]),
        }
        append_unvetted(ledger, "a", [("activity.result", body)] * 2)
        assert ledger.verify().code == 0
        with ledger.db.snapshot() as conn:
            done = journal(ledger, conn, batch_rows=1)
        assert done.findings == [] and done.referenced == [digest]
