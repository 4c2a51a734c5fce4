"""Active authority: every authorization decision is checked against the evidence in force
and journaled, allowed or denied."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger import Ledger
from agentledger.errors import ExitCode, InvalidInput, NotFound

from .ledger_testkit import compiler_input, forge, move, narrowed_egress, source, started

ZERO = "sha256:" + "0" * 64


def digest_of(run: object) -> str:
    state = run.phase_state()  # type: ignore[attr-defined]
    return str(state.effective["digest"])


def authorize_entries(run: object) -> list[dict[str, object]]:
    return [entry.body for entry in run.entries(kind="phase.authorize")]  # type: ignore[attr-defined]


def test_requested_scopes_within_the_effective_list_are_granted(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    decision = run.authorize("command.execute", ["build", "test"], evidence_digest=digest_of(run))
    assert (decision.allowed, decision.reason, decision.missing) == (True, "granted", [])
    assert decision.entry.kind == "phase.authorize"
    assert authorize_entries(run)[0]["decision"] == "allowed"


def test_a_wildcard_effective_list_grants_any_scope(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    decision = run.authorize("network.egress", ["anything.example"], evidence_digest=digest_of(run))
    assert decision.allowed


def test_a_scope_outside_the_effective_list_is_denied_and_named(ledger: Ledger) -> None:
    run = ledger.run("run-a")
    run.record_phase_evidence(None, compiler_input=narrowed_egress("implement", "pypi.org"))
    decision = run.authorize(
        "network.egress", ["pypi.org", "evil.example"], evidence_digest=digest_of(run)
    )
    assert (decision.allowed, decision.reason, decision.missing) == (
        False,
        "scope-not-granted",
        ["evil.example"],
    )


def test_a_dimension_the_phase_does_not_grant_is_denied(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    decision = run.authorize("filesystem.write", ["<workspace>"], evidence_digest=digest_of(run))
    assert not decision.allowed and decision.reason == "scope-not-granted"


def test_an_empty_request_is_denied(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    decision = run.authorize("network.egress", [], evidence_digest=digest_of(run))
    assert (decision.allowed, decision.reason) == (False, "empty-request")


def test_a_call_bound_to_a_stale_evidence_digest_is_denied(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "implement")
    observed = digest_of(run)
    move(run, compiler_input("verify"), operation="narrow")
    decision = run.authorize("command.execute", ["inspect"], evidence_digest=observed)
    assert (decision.allowed, decision.reason) == (False, "stale-evidence")
    assert decision.active_evidence_digest == digest_of(run)
    assert run.authorize("command.execute", ["inspect"], evidence_digest=digest_of(run)).allowed


def test_blocked_evidence_allows_nothing(ledger: Ledger) -> None:
    blocked = compiler_input(
        "implement", sandbox=source("sandbox", enforcement={"filesystem.write": "unsupported"})
    )
    run = ledger.run("run-a")
    run.record_phase_evidence(None, compiler_input=blocked)
    decision = run.authorize("filesystem.read", ["<workspace>"], evidence_digest=digest_of(run))
    assert (decision.allowed, decision.reason) == (False, "evidence-blocked")


def test_a_run_without_evidence_is_denied(ledger: Ledger) -> None:
    run = ledger.run("run-a")
    decision = run.authorize("filesystem.read", ["x"], evidence_digest="sha256:" + "0" * 64)
    assert (decision.allowed, decision.reason) == (False, "no-phase-evidence")


def test_every_decision_is_journaled_and_verifies(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    digest = digest_of(run)
    outcomes = [
        run.authorize("command.execute", ["inspect"], evidence_digest=digest).allowed,
        run.authorize("command.execute", ["build"], evidence_digest=digest).allowed,
        run.authorize("external.action", [], evidence_digest=digest).allowed,
        run.authorize("external.action", ["read"], evidence_digest="sha256:" + "1" * 64).allowed,
    ]
    assert outcomes == [True, False, False, False]
    assert [body["decision"] for body in authorize_entries(run)] == [
        "allowed",
        "denied",
        "denied",
        "denied",
    ]
    assert ledger.verify_run("run-a").ok


@pytest.mark.parametrize(
    ("dimension", "scopes", "digest"),
    [
        ("network.ingress", ["x"], "sha256:" + "0" * 64),
        ("network.egress", "pypi.org", "sha256:" + "0" * 64),
        ("network.egress", ["a\nb"], "sha256:" + "0" * 64),
        ("network.egress", ["a", "a"], "sha256:" + "0" * 64),
        ("network.egress", ["a"], "blake3:" + "0" * 64),
    ],
)
def test_a_malformed_request_is_refused_and_nothing_written(
    ledger: Ledger, dimension: str, scopes: object, digest: str
) -> None:
    run = started(ledger, "run-a", "implement")
    with pytest.raises(InvalidInput):
        run.authorize(dimension, scopes, evidence_digest=digest)  # type: ignore[arg-type]
    assert len(run) == 1


def test_authorizing_in_a_missing_run_is_not_found(ledger: Ledger) -> None:
    from agentledger.journal import Run

    with pytest.raises(NotFound):
        Run(ledger, "ghost").authorize(
            "network.egress", ["a"], evidence_digest="sha256:" + "0" * 64
        )


def test_verify_reports_a_decision_the_evidence_does_not_support(ledger: Ledger) -> None:
    run = started(ledger, "run-a", "explore")
    digest = digest_of(run)
    forged = forge(
        run,
        "phase.authorize",
        {
            "dimension": "filesystem.write",
            "scopes": ["<workspace>"],
            "bound_evidence_digest": digest,
            "active_evidence_digest": digest,
            "decision": "allowed",
            "reason": "granted",
            "missing": [],
        },
    )
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.authorize", forged.seq)]


def test_a_naive_time_is_refused_and_nothing_written(ledger: Ledger) -> None:
    from datetime import datetime

    run = started(ledger, "run-a", "implement")
    with pytest.raises(InvalidInput) as refused:
        run.authorize(
            "command.execute", ["build"], evidence_digest=digest_of(run), now=datetime(2026, 1, 1)
        )
    assert refused.value.code == "invalid-time"
    assert len(run) == 1


def test_an_input_blob_edited_after_a_decision_stops_the_next_one(ledger: Ledger) -> None:
    from agentledger.phase.journal import PhaseRefused

    from .ledger_testkit import edit_blob

    run = started(ledger, "run-a", "explore")
    digest = digest_of(run)
    assert run.authorize("command.execute", ["inspect"], evidence_digest=digest).allowed
    input_blob = next(run.entries(kind="phase.evidence")).body["input_blob"]
    edit_blob(ledger, input_blob, b'"inspect"', b'"publish"')
    with pytest.raises(PhaseRefused) as refused:
        run.authorize("command.execute", ["inspect"], evidence_digest=digest)
    assert refused.value.code == "phase-state-tampered"
    assert len(list(run.entries(kind="phase.authorize"))) == 1


@pytest.mark.parametrize(
    ("dimension", "scopes", "bound"),
    [
        ("network.ingress", ["x"], None),
        ("network.egress", "pypi.org", None),
        ("network.egress", ["a\x1b[2Jb"], None),
        ("network.egress", ["a", "a"], None),
        ("network.egress", ["a"], "blake3:" + "0" * 64),
    ],
)
def test_verify_reports_a_decision_on_a_request_the_api_refuses(
    ledger: Ledger, dimension: str, scopes: object, bound: str | None
) -> None:
    # authorize() refuses these requests and journals nothing, so an entry holding one was
    # not written by it: verify must not re-derive it as a decision (it would pass as one).
    run = started(ledger, "run-a", "implement")  # network.egress: *
    digest = digest_of(run)
    forged = forge(
        run,
        "phase.authorize",
        {
            "dimension": dimension,
            "scopes": scopes,
            "bound_evidence_digest": bound or digest,
            "active_evidence_digest": digest,
            "decision": "allowed" if bound is None else "denied",
            "reason": "granted" if bound is None else "stale-evidence",
            "missing": [] if bound is None else scopes,
        },
    )
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.authorize", forged.seq)]


@pytest.mark.parametrize("forged", ["unsupported", "malformed"])
def test_phase_show_lists_a_decision_verify_reports(ledger: Ledger, cli: Any, forged: str) -> None:
    # verify and `phase show` give one verdict on a journaled decision that does not
    # re-derive (an "allowed" write the explore phase never grants, an empty body): before,
    # show exited 0 and counted the forged one as allowed.
    run = started(ledger, "run-a", "explore")
    digest = digest_of(run)
    run.authorize("filesystem.read", ["<workspace>"], evidence_digest=digest)
    body: dict[str, Any] = {}
    if forged == "unsupported":
        body = {
            "dimension": "filesystem.write", "scopes": ["<workspace>"],
            "bound_evidence_digest": digest, "active_evidence_digest": digest,
            "decision": "allowed", "reason": "granted", "missing": [],
        }  # fmt: skip
    entry = forge(run, "phase.authorize", body)
    run.authorize("filesystem.read", ["<workspace>"], evidence_digest=digest)
    found = ledger.verify_run("run-a").divergences
    assert [(d.check, d.seq) for d in found] == [("phase.authorize", entry.seq)]
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == ExitCode.DIVERGED
    assert [p["seq"] for p in shown.json()["problems"]] == [entry.seq]
    human = cli("phase", "show", "run-a")
    assert human.code == ExitCode.DIVERGED and f"step {entry.seq}" in human.out


def test_phase_show_of_a_decision_holding_an_object_is_not_a_crash(
    ledger: Ledger, cli: Any
) -> None:
    run = started(ledger, "run-a", "explore")
    digest = digest_of(run)
    body = {"dimension": "filesystem.read", "scopes": ["<workspace>"],
            "bound_evidence_digest": digest, "active_evidence_digest": digest,
            "decision": {}, "reason": "granted", "missing": []}  # fmt: skip
    entry = forge(run, "phase.authorize", body)
    shown = cli("phase", "show", "run-a", "--json")
    assert shown.code == ExitCode.DIVERGED, shown.err  # was 70: unhashable type: 'dict'
    assert [p["seq"] for p in shown.json()["problems"]] == [entry.seq]
