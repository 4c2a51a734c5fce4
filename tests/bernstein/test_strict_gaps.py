"""What strict mode holds against a workdir that bernstein's verdict lets through: a cut
audit record, a removed flow report; and what it cannot (a removed research report),
stated as a limit. The workdir is ``bernstein-3.23.0-shapes`` (bernstein's own output):
its audit chain mirrors every ``activity.result`` row, and ends with the two records of
``r0012-jcs-v2-mixed`` (steps 3 and 6).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agentledger.bernstein.writer import AuditWriter

from .bernstein_testkit import (
    SHAPES,
    SHAPES_SIGNERS,
    SMALL,
    SMALL_SIGNER,
    Outcome,
    cas,
    copy_workdir,
    import_and_verify,
    lines,
    private_key_file,
)
from .test_differential import both_ways

LAST_RUN = "r0012-jcs-v2-mixed"
BROWSER_RUN = "r0002-browser-report"  # browser-0 (step 1) and browser-1 (step 4): stored
RESEARCH_RUN = "r0001-research-report"  # research-0 (step 4), research-1 (step 5): stored


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return copy_workdir(SHAPES, tmp_path / "wd")


def verify(workdir: Path, tmp_path: Path) -> Outcome:
    key = private_key_file(SHAPES, tmp_path / "audit.key")
    return import_and_verify(workdir, tmp_path / "ledger.db", key=key, trust=SHAPES_SIGNERS)


def audit_segment(workdir: Path) -> Path:
    return next((workdir / ".sdd" / "audit").glob("*.jsonl"))


def cut_audit_records(workdir: Path, count: int) -> None:
    """Cut the chain's last ``count`` records: what is left still verifies."""
    segment = audit_segment(workdir)
    kept = segment.read_text("ascii").splitlines(keepends=True)[:-count]
    segment.write_text("".join(kept), "ascii")


def artifact_of(workdir: Path, run_id: str, step: int) -> str:
    return str(json.loads(lines(workdir, run_id)[step])["artifact_hash"])


def remove_report(workdir: Path, run_id: str, *steps: int) -> None:
    for step in steps:
        cas(workdir, artifact_of(workdir, run_id, step)).unlink()


def assert_only(outcome: Outcome, run_id: str) -> None:
    """Every other run stays clean in both modes (bernstein's verdict on them unchanged)."""
    for other, code in outcome.strict.items():
        if other != run_id:
            assert (code, outcome.fields[other]) == (0, set()), other
    assert outcome.workspace == set()


# ---- untampered: clean in strict mode, legacy stages included ---------------------------


@pytest.mark.parametrize(
    ("fixture", "signers"),
    [(SHAPES, SHAPES_SIGNERS), (SMALL, (SMALL_SIGNER,))],
    ids=["shapes", "small"],
)
def test_the_untampered_fixtures_are_clean_in_strict_mode(
    tmp_path: Path, fixture: Path, signers: tuple[str, ...]
) -> None:
    workdir = copy_workdir(fixture, tmp_path / "wd")
    key = private_key_file(fixture, tmp_path / "audit.key")
    outcome = import_and_verify(workdir, tmp_path / "ledger.db", key=key, trust=signers)
    assert set(outcome.strict.values()) == {0}
    assert all(not found for found in outcome.findings.values())
    assert outcome.workspace == set()


# ---- 1. the audit mirror's last records cut ---------------------------------------------


def test_the_chains_last_record_cut_leaves_its_activity_without_a_record(
    workdir: Path, tmp_path: Path
) -> None:
    cut_audit_records(workdir, 1)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[LAST_RUN], outcome.strict[LAST_RUN]) == (0, 2)
    assert outcome.fields[LAST_RUN] == {(6, "bernstein.audit.missing_record", "stage 'browser-1'")}
    assert_only(outcome, LAST_RUN)


def test_a_run_whose_every_record_was_cut_has_every_activity_without_a_record(
    workdir: Path, tmp_path: Path
) -> None:
    # The chain still mirrors the other runs: a run with no record at all is not a run
    # that was never mirrored, as far as anyone can tell.
    cut_audit_records(workdir, 2)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[LAST_RUN], outcome.strict[LAST_RUN]) == (0, 2)
    assert outcome.fields[LAST_RUN] == {
        (3, "bernstein.audit.missing_record", "stage 'research-0'"),
        (6, "bernstein.audit.missing_record", "stage 'browser-1'"),
    }
    assert_only(outcome, LAST_RUN)


def test_a_chain_that_mirrors_no_activity_is_a_note_not_a_finding(
    workdir: Path, tmp_path: Path
) -> None:
    # bernstein's own activity commands never mirror; the orchestrator's other events
    # still fill the chain.
    folder = workdir / ".sdd" / "audit"
    shutil.rmtree(folder)
    writer = AuditWriter(folder, (SHAPES / "audit.key").read_bytes().strip())
    for n in range(3):
        writer.append("agent.spawned", f"agent-{n}", {"agent": f"agent-{n}"}, 1767225600.0 + n)
    outcome = verify(workdir, tmp_path)
    assert set(outcome.strict.values()) == {0}
    assert outcome.workspace == set()
    assert any("holds no activity.result record" in note for note in outcome.notes)


def test_a_workdir_without_an_audit_chain_keeps_its_note(workdir: Path, tmp_path: Path) -> None:
    shutil.rmtree(workdir / ".sdd" / "audit")
    outcome = verify(workdir, tmp_path)
    assert set(outcome.strict.values()) == {0}
    assert any("no audit chain imported" in note for note in outcome.notes)


# ---- 2. a research report removed: no sound rule, a stated limit -------------------------


def test_a_removed_research_report_is_a_stated_limit_not_a_finding(
    workdir: Path, tmp_path: Path
) -> None:
    # research-0 of r0001 (stored) and of r0005-research-legacy (never stored) are alike
    # in everything left once the report is gone: page observations of the same pattern,
    # completed/ok, an audit record of the same fields.
    remove_report(workdir, RESEARCH_RUN, 4)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[RESEARCH_RUN], outcome.strict[RESEARCH_RUN]) == (0, 0)
    master = (SHAPES / "audit.key").read_bytes().strip()
    passed = both_ways(workdir, tmp_path / "l.db", frozenset(), master)
    run = next(r for r in passed if r.run_id == RESEARCH_RUN)
    # research-empty was never stored either.
    assert run.unstored_reports == 2
    assert any("cannot be told from one a legacy writer never stored" in x for x in run.limits)


# ---- 3. a browser flow report removed ----------------------------------------------------


@pytest.mark.parametrize("removed", [(1,), (1, 4)], ids=["one", "both"])
def test_a_removed_flow_report_is_found_by_strict_only(
    workdir: Path, tmp_path: Path, removed: tuple[int, ...]
) -> None:
    remove_report(workdir, BROWSER_RUN, *removed)
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[BROWSER_RUN], outcome.strict[BROWSER_RUN]) == (0, 2)
    assert outcome.fields[BROWSER_RUN] == {
        (step, "bernstein.report.missing", "flow report") for step in removed
    }
    assert outcome.compat_fields[BROWSER_RUN] == set()
    assert_only(outcome, BROWSER_RUN)


def test_a_removed_store_also_names_the_flow_reports(workdir: Path, tmp_path: Path) -> None:
    shutil.rmtree(workdir / ".sdd" / "cas")
    outcome = verify(workdir, tmp_path)
    assert outcome.compat[BROWSER_RUN] == 0
    assert {(1, "bernstein.report.missing", "flow report")} <= outcome.fields[BROWSER_RUN]
    assert {(4, "bernstein.report.missing", "flow report")} <= outcome.fields[BROWSER_RUN]
    # The legacy browser stages of r0006 were never shaped by the flow worker.
    assert "bernstein.report.missing" not in outcome.findings["r0006-browser-legacy"]


def test_a_removed_flow_report_and_page_is_found_on_the_full_path(
    workdir: Path, tmp_path: Path
) -> None:
    # The report is looked up before the observations are reattached: both are named.
    remove_report(workdir, BROWSER_RUN, 1)
    first = json.loads(lines(workdir, BROWSER_RUN)[1])["observations"][0]["content_hash"]
    cas(workdir, first).unlink()
    outcome = verify(workdir, tmp_path)
    assert (outcome.compat[BROWSER_RUN], outcome.strict[BROWSER_RUN]) == (2, 2)
    assert (1, "bernstein.report.missing", "flow report") in outcome.fields[BROWSER_RUN]


# ---- the reference agrees ----------------------------------------------------------------


def _drop_flow_report_and_page(wd: Path) -> None:
    remove_report(wd, BROWSER_RUN, 1)
    first = json.loads(lines(wd, BROWSER_RUN)[1])["observations"][0]["content_hash"]
    cas(wd, first).unlink()


GAPS: dict[str, Callable[[Path], None]] = {
    "cut-last-record": lambda wd: cut_audit_records(wd, 1),
    "cut-last-run-records": lambda wd: cut_audit_records(wd, 2),
    "drop-flow-report": lambda wd: remove_report(wd, BROWSER_RUN, 1),
    "drop-both-flow-reports": lambda wd: remove_report(wd, BROWSER_RUN, 1, 4),
    "drop-mixed-reports": lambda wd: remove_report(wd, "r0004-mixed", 3, 6),
    "drop-flow-report-and-page": _drop_flow_report_and_page,
    "drop-research-report": lambda wd: remove_report(wd, RESEARCH_RUN, 4),
    "drop-store": lambda wd: shutil.rmtree(wd / ".sdd" / "cas"),
}


@pytest.mark.parametrize("tamper", sorted(GAPS))
def test_rust_and_the_reference_agree_on_every_gap(tmp_path: Path, tamper: str) -> None:
    """The same findings from the Rust verifier and the Python reference, in the ledger
    and on disk."""
    workdir = copy_workdir(SHAPES, tmp_path / "wd")
    GAPS[tamper](workdir)
    master = (SHAPES / "audit.key").read_bytes().strip()
    trusted = frozenset(bytes.fromhex(s.split(":", 1)[1]) for s in SHAPES_SIGNERS)
    both_ways(workdir, tmp_path / "l.db", trusted, master)
