"""Shared builders for the activity tests: one recorded stage of every modality."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from agentledger import ActivityResult, Ledger, Observation
from agentledger.journal import Entry

PAGE = b"<html>the exact page the agent read: SECRET-PAGE-7f3a</html>"
SNAPSHOT = b"<dom>button#buy SECRET-DOM-91c2</dom>"
ACTION = b'{"clicked": "button#buy", "secret": "SECRET-ACTION-44aa"}'
TABLE_IN = b"id,amount\n1,SECRET-INPUT-0b7e\n"
TABLE_OUT = b"id,total\n1,SECRET-OUTPUT-c0de\n"
CAPTURED = [PAGE, SNAPSHOT, ACTION, TABLE_IN, TABLE_OUT]
ARTIFACT_SECRET = "SECRET-ARTIFACT-5e5e"


def research_result(page: bytes = PAGE, **overrides: Any) -> ActivityResult:
    args: dict[str, Any] = {
        "kind": "research",
        "artifact": {"summary": ARTIFACT_SECRET},
        "observations": [Observation.capture("page", "https://example.org/a", page)],
        "terminal_state": "completed",
        "reason_code": "ok",
    }
    args.update(overrides)
    return ActivityResult.build(**args)


def record_every_modality(ledger: Ledger, run_id: str = "run-1") -> dict[str, Entry]:
    """One stage of each modality in one run; returns the pinned entries by modality."""
    run = ledger.run(run_id)
    entries = {
        "coding": run.record_activity(
            ActivityResult.build(
                kind="coding",
                artifact={"diff": "+x"},
                observations=[Observation.capture("test-log", "pytest", b"3 passed")],
            ),
            stage_id="coding-0",
            role="dev",
        )
    }
    research = run.research("research-0")
    research.fetch("https://example.org/a", PAGE)
    entries["research"] = research.finish(artifact={"summary": ARTIFACT_SECRET})
    browser = run.browser("browser-0")
    browser.observe(step="s1", snapshot=SNAPSHOT)
    browser.receipt(step="s1", receipt=ACTION)
    entries["browser"] = browser.finish(artifact={"bought": True})
    data = run.data("data-0")
    data.add_input("in.csv", TABLE_IN)
    data.plan(["sum amount by id", {"op": "write", "to": "out.csv"}])
    data.add_output("out.csv", TABLE_OUT)
    entries["data"] = data.finish()
    ops = run.ops("ops-0")
    ops.add_input("config", b"replicas=2")
    ops.plan(["scale deployment web to 3"])
    ops.add_output("kubectl", b"deployment.apps/web scaled")
    entries["ops"] = ops.finish()
    return entries


def sql(path: Path, statement: str, params: tuple[object, ...] = ()) -> list[Any]:
    conn = apsw.Connection(str(path))
    try:
        rows: list[Any] = conn.execute(statement, params).fetchall()
        return rows
    finally:
        conn.close()


def counts(path: Path) -> tuple[int, int, int]:
    """(entries, blobs, audit records): what a refusal must leave unchanged."""
    return (
        sql(path, "SELECT count(*) FROM entries")[0][0],
        sql(path, "SELECT count(*) FROM blobs")[0][0],
        sql(path, "SELECT count(*) FROM audit_log")[0][0],
    )


def checks_found(report: Any) -> list[str]:
    return [d.check for d in report.workspace] + [
        d.check for run in report.runs for d in run.divergences
    ]
